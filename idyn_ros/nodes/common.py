"""Glue shared by the idyn nodes: QoS, robot loading from parameters, diagnostics, stamps, main().

QoS decisions: the hot-path inputs (/joint_states, reference, feedforward, adaptation) are
BEST_EFFORT depth 1 (matches reliable and best-effort publishers; never queue stale samples);
the effort command is RELIABLE depth 1 (what ros2_control's forward controller expects);
monitoring topics are RELIABLE depth 10.
"""

from __future__ import annotations

import array
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

HOT_IN = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
COMMAND_OUT = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE)
MONITOR = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)

STAMP_LABEL = "stamp_ns="  # command layout.dim[0].label carries the joint-state stamp (latency probe)


def stamp_to_ns(stamp: Any) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def ns_to_stamp(ns: int, stamp: Any) -> Any:
    stamp.sec = ns // 1_000_000_000
    stamp.nanosec = ns % 1_000_000_000
    return stamp


def as_array(values: np.ndarray) -> array.array:
    """numpy float64 -> array.array('d'): the cheapest form rclpy accepts for float64[] fields."""
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return out


def load_robot(vals: dict[str, Any]) -> tuple[Any, Any]:
    """(RobotSpec, RobotModel) from the ``robot``/``prefix`` parameters."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.robots import get_robot

    spec = get_robot(vals["robot"])
    if vals.get("prefix"):
        spec = spec.with_prefix(vals["prefix"])
    model = RobotModel.from_robot(vals["robot"], prefix=vals.get("prefix", ""))
    return spec, model


def declare_and_load(node: Any, kind: str) -> tuple[dict[str, Any], Any, Any]:
    """Declare ``kind``'s parameters on ``node``, load its robot, validate, and keep validating at run time.

    The shared start of every non-lifecycle node. Returns (values, RobotSpec, RobotModel); raises
    ``ParameterError`` naming every invalid parameter.
    """
    from idyn_ros.nodes import parameters as prm

    vals = prm.declare(node, kind)
    spec, robot = load_robot(vals)
    n = robot.n
    problems = prm.validate_all(kind, vals, n)
    if problems:
        raise prm.ParameterError("; ".join(problems))
    node.add_on_set_parameters_callback(prm.make_validator(node, kind, lambda: n, lambda: True))
    return vals, spec, robot


def command_topic(vals: dict[str, Any], spec: Any) -> str:
    return vals["command_topic"] or f"/{spec.effort_controller}/commands"


class Diagnostics:
    """Publishes one DiagnosticStatus for a node on /diagnostics (periodic + on change)."""

    OK, WARN, ERROR, STALE = 0, 1, 2, 3

    def __init__(self, node: Any, name: str, hardware_id: str) -> None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

        self._Array, self._Status, self._KV = DiagnosticArray, DiagnosticStatus, KeyValue
        self.node = node
        self.name = name
        self.hardware_id = hardware_id
        self.pub = node.create_publisher(DiagnosticArray, "/diagnostics", MONITOR)
        self.level = self.OK
        self.message = "starting"
        self.values: dict[str, str] = {}

    def set(self, level: int, message: str, publish: bool = False, **values: Any) -> None:
        changed = level != self.level or message != self.message
        self.level, self.message = level, message
        self.values.update({k: str(v) for k, v in values.items()})
        if publish and changed:
            self.publish()

    def publish(self) -> None:
        status = self._Status(level=bytes([self.level]), name=self.name, message=self.message,
                              hardware_id=self.hardware_id)
        status.values = [self._KV(key=k, value=v) for k, v in self.values.items()]
        msg = self._Array()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.status = [status]
        self.pub.publish(msg)

    def destroy(self) -> None:
        self.node.destroy_publisher(self.pub)


class NameMap:
    """Resolves a message's joint-name list to our joint order once per distinct list."""

    def __init__(self, joint_names: Sequence[str]) -> None:
        self.joint_names = tuple(joint_names)
        self._key: tuple[str, ...] | None = None
        self.index = np.arange(len(self.joint_names))
        self.missing: list[str] = []

    def resolve(self, names: Sequence[str]) -> bool:
        key = tuple(names)
        if key == self._key:
            return True
        lookup = {name: i for i, name in enumerate(key)}
        self.missing = [j for j in self.joint_names if j not in lookup]
        if self.missing:
            return False
        self.index = np.array([lookup[j] for j in self.joint_names], dtype=np.intp)
        self._key = key
        return True

    def take(self, values: Sequence[float], out: np.ndarray) -> bool:
        """out[:] = values in our order; False if the length is wrong."""
        if len(values) != len(self._key or ()):
            return False
        out[:] = np.asarray(values, dtype=float)[self.index]
        return True


def make_executor(kind: str = "events") -> Any:
    """EventsExecutor (lower latency here: ~115 vs ~180 us RTT p50) or SingleThreadedExecutor."""
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    from rclpy.executors import SingleThreadedExecutor

    return SingleThreadedExecutor()


MAX_UNCONVERTIBLE_MESSAGES = 100  # then the node stops: something is persistently wrong, not a stray sample


def drop_unconvertible(exc: RuntimeError, dropped: int) -> int:
    """The policy for a sample rclpy cannot convert to Python: drop it, say so, keep spinning.

    Seen here with six nodes on one machine: rclpy raised "Unable to convert call argument '0' to Python
    object" from ``take_message`` in a /joint_states subscriber now and then. The sample is lost either way;
    dropping it keeps the node (and, for the controller, its watchdog) alive. Any other error, or a
    persistent stream of these, is re-raised. Returns the new drop count.
    """
    if "Unable to convert" not in str(exc) or dropped >= MAX_UNCONVERTIBLE_MESSAGES:
        raise exc
    dropped += 1
    print(f"idyn: dropped a message rclpy could not convert ({dropped}): {exc}", file=sys.stderr, flush=True)
    return dropped


def spin_surviving_bad_messages(exe: Any, rclpy: Any) -> None:
    """``exe.spin()``, but a sample rclpy cannot convert to Python does not kill the node
    (``drop_unconvertible``)."""
    dropped = 0
    while rclpy.ok():
        try:
            exe.spin()
        except RuntimeError as exc:
            dropped = drop_unconvertible(exc, dropped)


def run(factories: Sequence[Callable[[], Any]], argv: Sequence[str] | None = None, executor: str = "single",
        hot_loop: bool = True) -> int:
    """rclpy.init with ``argv`` (--ros-args ...), build nodes, spin until shutdown.

    With ``hot_loop`` (default) the nodes' 1 kHz inputs are served by one ``HotLoop`` thread per process
    (controller first) and the executor only carries parameters, lifecycle services and slow timers.
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException

    from idyn_ros.nodes.hot_loop import HotLoop

    argv = list(sys.argv if argv is None else argv)
    nodes: list[Any] = []
    errors: list[BaseException] = []
    HotLoop.enable(hot_loop)
    try:
        with rclpy.init(args=argv):
            exe = make_executor(executor)
            nodes = [factory() for factory in factories]
            for node in nodes:
                exe.add_node(node)
            HotLoop.start_all()
            try:
                spin_surviving_bad_messages(exe, rclpy)
            finally:
                for node in nodes:
                    if hasattr(node, "shutdown_hook"):
                        node.shutdown_hook()
                errors = HotLoop.stop_all()
                for node in nodes:
                    node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    return 1 if errors else 0
