"""Glue shared by the idyn nodes: QoS, robot loading from parameters, diagnostics, stamps, main().

QoS decisions: the hot-path inputs (/joint_states, reference, feedforward, adaptation) are
BEST_EFFORT depth 1 (matches reliable and best-effort publishers; never queue stale samples), except joint states:
depth 4, of which the hot loop serves the newest of each publisher (``hot_loop.subscribe_joint_states``), so that a
gripper's states on the same topic cannot displace the arm's;
the effort command is RELIABLE depth 1 (what ros2_control's forward controller expects);
monitoring topics are RELIABLE depth 10.
"""

from __future__ import annotations

import array
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from idyn_ros.control import state_estimation as se  # per tick in JointStateProblems.update: imported once here

HOT_IN = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
# depth 4: room for the arm's state next to other publishers' (a gripper, a joint_state_publisher) between two reads
JOINT_STATES_IN = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=4, reliability=ReliabilityPolicy.BEST_EFFORT)
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


def field_view(msg: Any, field: str, n: int) -> np.ndarray:
    """Numpy view of a message's float64[] ``field`` (set to n zeros): write it every tick, publish, no allocation
    per message. Taken from the message after the assignment, which may store a copy."""
    setattr(msg, field, array.array("d", bytes(8 * n)))
    return np.frombuffer(getattr(msg, field), dtype=np.float64)


def load_robot(robot: str, prefix: str = "") -> tuple[Any, Any]:
    """(RobotSpec, RobotModel) of a robot preset under a joint-name prefix."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.robots import get_robot

    spec = get_robot(robot).with_prefix(prefix) if prefix else get_robot(robot)
    return spec, RobotModel.from_robot(robot, prefix=prefix)


def declare_and_load(node: Any, cls: type, check: Any = None) -> tuple[Any, Any, Any]:
    """Declare ``cls``'s parameters on ``node``, load its robot, validate, and keep validating at run time.

    The shared start of every non-lifecycle node. Returns (NodeParameters, RobotSpec, RobotModel); raises
    ``ParameterError`` naming every invalid parameter. ``check``: a cross-field check (``NodeParameters``).
    """
    from idyn_ros.nodes.ros_parameters import NodeParameters

    joints: list[int] = []
    params = NodeParameters(node, cls, joints=lambda: joints[0] if joints else None, check=check)
    spec, robot = load_robot(params.value.robot, params.value.prefix)
    joints.append(robot.n)
    params.value = params.read()  # per-joint lengths are checked now that the joint count is known
    params.check_current()  # rclpy runs the cross-field check on sets only, not on the start-up values
    refuse_clock_change(node)
    return params, spec, robot


CLOCK_AT_START = ("use_sim_time is read at start (the node's timers and stamps follow the clock it picks): restart the "
                  "node with it (launch argument or --ros-args -p use_sim_time:=...)")


def refuse_clock_change(node: Any, reason: str = CLOCK_AT_START) -> None:
    """Refuse a run-time change of use_sim_time on ``node`` with ``reason``: it was accepted and moved the node's
    timers to a /clock that may not run, which stopped its /diagnostics for good."""
    from rcl_interfaces.msg import SetParametersResult

    def check(changes: list[Any]) -> Any:
        current = node.get_parameter("use_sim_time").value
        if any(p.name == "use_sim_time" and bool(p.value) != current for p in changes):
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(check)


def command_topic(configured: str, robot: str) -> str:
    """The effort command topic: the configured one, else /<effort_controller>/commands of the robot."""
    from idyn_ros.robots import get_robot

    return configured or f"/{get_robot(robot).effort_controller}/commands"


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


class JointStateProblems:
    """A node's joint-state filter restarts and rejections, logged and put on /diagnostics once per kind (they come at
    the input's rate, so never once per sample); the counts ride on every diagnostics report.

    ``report(status)`` after a ``JointStateFilter.update`` that returned neither OK nor one of ``SKIPPED``: a restart
    (``RESTART_*``: the node resets its own time-dependent state and carries on) is a WARN, a rejection an ERROR.
    """

    def __init__(self, node: Any, diag: Diagnostics, joint_filter: Any) -> None:
        self.node, self.diag, self.filter = node, diag, joint_filter
        self.counts: dict[int, int] = {}  # status code -> samples
        self.restarts = 0
        self.rejected = 0
        self._seen = (0, 0)  # (samples, dropped) at the last dropping_note

    def update(self, msg: Any, source: object = None) -> int | None:
        """Feed one sensor_msgs/JointState from publisher ``source`` to the filter: None when the node skips it (a
        duplicate or a late sample, dropped; another publisher's; a rejection, reported), else ``OK`` or a
        ``RESTART_*`` code (reported: the filter holds the live sample, and the node resets what it keeps over time)."""
        status = self.filter.update(msg.name, msg.position, msg.velocity, msg.effort, stamp_to_ns(msg.header.stamp),
                                    source)
        if status == se.OK:
            return status
        if status in se.SKIPPED:
            if status == se.FOREIGN and self.filter.foreign == 1:  # once per node: another publisher on the topic
                self.node.get_logger().warning(self.filter.foreign_note())
            elif status == se.SECOND_SOURCE and self.filter.second_source == 1:  # the same, of the robot's joints
                self.node.get_logger().warning(self.filter.second_source_note())
            return None
        self.report(status)
        return status if status in se.RESTARTS else None

    def report(self, status: int) -> None:
        seen = self.counts.get(status, 0)
        self.counts[status] = seen + 1
        restart = status in se.RESTARTS
        if restart:
            self.restarts += 1
        else:
            self.rejected += 1
        if seen:
            return
        reason = self.filter.reason
        if restart:
            self.node.get_logger().warning(f"/joint_states: {reason} (said once; counted on /diagnostics)")
            if self.diag.level == Diagnostics.ERROR:  # a restart does not hide an error already reported
                self.diag.values.update(self.values())
                self.diag.publish()
            else:
                self.diag.set(Diagnostics.WARN, f"input restarted: {reason}", publish=True, **self.values())
        else:
            self.node.get_logger().error(f"rejected /joint_states: {reason} (said once per kind; counted on "
                                         "/diagnostics)")
            self.diag.set(Diagnostics.ERROR, f"rejecting input: {reason}", publish=True, **self.values())

    def dropping_note(self) -> str:
        """"" unless nearly every state since the last call was dropped as a duplicate (the node would say "ok"
        while it publishes nothing): their stamps do not advance, e.g. a driver that leaves header.stamp unset (0)."""
        f, (samples, dropped) = self.filter, self._seen
        self._seen = (f.samples, f.dropped)
        taken, lost = f.samples - samples, f.dropped - dropped
        if lost <= 9 * taken:
            return ""
        return (f"dropping nearly every joint state ({lost} of {lost + taken} since the last report): their "
                "header.stamp does not advance (a driver that leaves it unset, or re-sends its last state)")

    def values(self) -> dict[str, str]:
        """The counts as diagnostics values (key: value strings)."""
        return {"input_restarts": str(self.restarts), "input_rejected": str(self.rejected),
                "input_dropped": str(self.filter.dropped), "input_foreign": str(self.filter.foreign),
                "input_second_source": str(self.filter.second_source)}

    def publish(self) -> None:
        """The node's periodic diagnostics report, with the counts."""
        if self.counts or self.filter.dropped or self.filter.foreign or self.filter.second_source:
            self.diag.values.update(self.values())
        self.diag.publish()


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


STOP_DEADLINE_S = 3.0  # stop request -> process gone, whatever hangs (a clean stop takes ~0.2 s here)
STOP_TRACE_S = 2.5  # a teardown still running this long after the stop request prints every thread's stack
PARENT_POLL_S = 0.1


def _request_stop(stop: list[str], reason: str) -> None:
    """Record why the process stops (the first reason wins) and start the stop deadline.

    The deadline is a kernel timer (SIGALRM, default action: terminate), so it ends the process even when the teardown
    hangs in native code holding the GIL or in the interpreter's exit, where the DDS participant is destroyed and
    SIGINT/SIGTERM are ignored. Safe from a signal handler and from another thread (no lock). Shortly before the
    deadline, faulthandler's watchdog thread prints where every thread is (it needs no GIL), so a log that ends in
    exit code -14 says what hung."""
    import faulthandler
    import signal

    if not stop:
        stop.append(reason)
        signal.setitimer(signal.ITIMER_REAL, STOP_DEADLINE_S)
        faulthandler.dump_traceback_later(STOP_TRACE_S)


def _watch_parent(parent: int, stop: list[str], done: Any) -> None:
    """Request the stop once ``parent`` is no longer this process's parent; a thread of its own, so a main thread
    that is still starting or stuck in a callback cannot delay it."""
    import os

    while not done.wait(PARENT_POLL_S):
        if os.getppid() != parent:
            _request_stop(stop, "parent exited")
            return


def run(factories: Sequence[Callable[[], Any]], argv: Sequence[str] | None = None, executor: str = "single",
        hot_loop: bool = True) -> int:
    """rclpy.init with ``argv`` (--ros-args ...), build the nodes, spin until asked to stop; the exit code.

    The main of a node process: it owns the process's SIGINT, SIGTERM and SIGALRM.
    With ``hot_loop`` (default) the nodes' 1 kHz inputs are served by one ``HotLoop`` thread per process
    (controller first) and the executor only carries parameters, lifecycle services and slow timers.

    Stopping (decision): SIGINT and SIGTERM both stop cleanly and only once (a terminal's Ctrl-C reaches both the
    process group and ros2 launch, which forwards it again): every node's ``shutdown_hook`` runs first (the
    controller publishes its safe torque), then the loop and the nodes end; exit 0. With
    ``IDYN_EXIT_WITH_PARENT=<pid>`` in the environment (set by ``nodes.launcher`` and the launch files) the process
    also stops once that parent is gone, so a killed launcher leaves no node behind. Whatever ends the loop (a
    signal, the parent, the context shut down, an error), the process is gone ``STOP_DEADLINE_S`` later at the
    latest: a teardown that hangs past it is killed by SIGALRM (exit code -14), as nobody else would once the
    parent is dead. A node that cannot start (bad parameter) prints one line and exits 2.
    """
    import gc
    import os
    import signal
    import threading

    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from idyn_ros.errors import IdynError
    from idyn_ros.nodes import ros_parameters
    from idyn_ros.nodes.hot_loop import HotLoop, serve_clock

    argv = list(sys.argv if argv is None else argv)
    stop: list[str] = []
    building: list[bool] = []  # [True] while the nodes are being built: a stop request interrupts that (once)

    def request_stop(signum: int, _frame: object) -> None:
        _request_stop(stop, signal.Signals(signum).name)
        if building:
            # a stop during start-up (Ctrl-C, or a launch stopping because another node failed to start) must not
            # wait for the rest of a start-up nobody wants: on a loaded machine that outlasts the stop deadline
            # (exit -14, every thread's stack printed). Raised once, at the next bytecode of the main thread.
            building.clear()
            raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the stop deadline must end the process
    for sig in (signal.SIGINT, signal.SIGTERM):  # never restored: a second signal during the teardown is ignored
        signal.signal(sig, request_stop)
    parent = int(os.environ.get("IDYN_EXIT_WITH_PARENT", "0") or 0)
    watch_done = threading.Event()
    if parent:
        threading.Thread(target=_watch_parent, args=(parent, stop, watch_done), name="idyn-parent-watch",
                         daemon=True).start()
    nodes: list[Any] = []
    errors: list[BaseException] = []
    HotLoop.enable(hot_loop)
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    ros_parameters.PROCESS_ARGS[:] = argv  # which parameters were given to a node by name (NodeParameters)
    try:
        building.append(True)
        try:
            exe = make_executor(executor)
            for factory in factories:
                nodes.append(factory())  # one by one: the finally destroys those built before a stop request
        except BaseException:
            if stop:  # the stop request interrupted the start: whatever it broke (mujoco's import: ImportError)
                return 0
            raise
        building.clear()
        for node in nodes:
            exe.add_node(node)
            serve_clock(node)
        # everything built so far lives as long as the process: out of the collector's sight, a collection during a
        # tick no longer walks the model, the robot and the message types (gen-2 passes of several ms seen here)
        gc.collect()
        gc.freeze()
        HotLoop.on_error = lambda exc: _request_stop(stop, f"hot loop: {type(exc).__name__}: {exc}")
        HotLoop.start_all()
        dropped = 0
        while not stop and rclpy.ok():
            try:
                exe.spin_once(timeout_sec=0.1)
            except RuntimeError as exc:
                dropped = drop_unconvertible(exc, dropped)
    except IdynError as exc:
        print(f"{Path(argv[0]).name if argv else 'idyn node'}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        building.clear()
        _request_stop(stop, "loop ended")  # the context shut down, or an error: the deadline holds for these too
        watch_done.set()
        errors = HotLoop.stop_all(timeout=1.0)  # no tick may run after the shutdown hooks; leaves them the deadline
        HotLoop.on_error = None
        for node in nodes:
            if hasattr(node, "shutdown_hook"):
                node.shutdown_hook()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
        for sig in (signal.SIGINT, signal.SIGTERM):  # rclpy's shutdown put back the default (killing) handlers
            signal.signal(sig, signal.SIG_IGN)
    return 1 if errors else 0


def payload_service(node: Any, apply: Callable[[Any], str]) -> Any:
    """``~/set_payload`` (idyn_ros/SetPayload) on ``node``: each request becomes ``apply(Payload | None)`` (mass 0:
    None), whose return is the reply's message; an invalid or implausible payload (``IdynError``,
    ``Payload.implausible``) is refused with its reason and changes nothing."""
    from idyn_ros.srv import SetPayload

    def handle(request: Any, response: Any) -> Any:
        from idyn_ros.errors import IdynError, ParameterError
        from idyn_ros.robots.spec import Payload

        try:
            c = request.com
            payload = None if request.mass == 0.0 else Payload(float(request.mass), (c.x, c.y, c.z),
                                                               tuple(float(v) for v in request.inertia))
            problem = payload and payload.implausible()
            if problem:
                raise ParameterError(problem)
            response.message = apply(payload)
            response.success = True
        except IdynError as exc:
            response.success, response.message = False, str(exc)
        return response

    return node.create_service(SetPayload, "~/set_payload", handle)


def describe_payload(payload: Any) -> str:
    """One line for logs and service replies."""
    if payload is None:
        return "no payload"
    return (f"payload {payload.mass:.3f} kg at CoM ({', '.join(f'{1e3 * c:.1f}' for c in payload.com)}) mm")
