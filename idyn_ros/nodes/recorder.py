"""Recorder node: subscribe to topics and write them to a rosbag2 bag (MCAP default, sqlite3 on request).

There is no ``ros2 bag record`` in the pip ROS 2 wheels, so this node is ours. It must not lose
a message at 1 kHz, so it does as little as possible per message: subscriptions are
``raw=True`` (rclpy hands over the CDR bytes, which rosbag2 stores as-is: no deserialisation,
no serialisation), QoS has a deep KEEP_LAST history, and the callback is one append to the
storage.

Reliability is adapted per topic like ``ros2 bag record`` does: a RELIABLE reader does not match a
BEST_EFFORT writer (e.g. /idyn/reference), so each topic is subscribed RELIABLE only if all its
publishers offer RELIABLE, else BEST_EFFORT (one INFO line per topic says which). A topic given
with its type is subscribed at once, before discovery (no early message missed); with no publisher
known yet it starts RELIABLE. Every flush period the publishers of each RELIABLE topic are checked
again; when a best-effort one appears the subscription is re-created BEST_EFFORT (never back).
Trade-off of that switch: messages of the reliable publishers in the few ms between destroying the
old reader and matching the new one can be missed (a gap, which the importer handles), rather
than written twice by overlapping readers. To avoid it, start the recorder after the publishers
or give untyped topics (subscribed on discovery, with the publishers' QoS known).

A timer makes the data durable every ``flush_period`` (MCAP chunk close + flush; sqlite
WAL commit), so after SIGKILL ``idyn dataset import --recover`` gets all but the last period.
SIGINT/SIGTERM (or --duration) stop the node, drain what was published before the stop and is still queued, and close
a complete bag.

Usage: ``python -m idyn_ros.nodes.recorder -o BAG [TOPIC[:TYPE] ...]`` or ``idyn record``.
Log times are the receive time on the system clock (ns), as rosbag2 stores them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from idyn_ros.errors import IdynError, ParameterError

#: Types assumed for well-known topics when not given as TOPIC:TYPE (else found by discovery).
KNOWN_TYPES = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/idyn/wrench_estimate": "geometry_msgs/msg/WrenchStamped",
}


def message_class(msgtype: str) -> type:
    """``pkg/msg/Type`` -> the generated rclpy message class."""
    try:
        pkg, _, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{pkg}.msg"), name)
    except (ValueError, ImportError, AttributeError):
        raise ParameterError(
            f"cannot import message type {msgtype!r}: expected pkg/msg/Type of an installed package"
        ) from None


def parse_topic(spec: str) -> tuple[str, str | None]:
    """``/name`` or ``/name:pkg/msg/Type`` -> (name, type or None)."""
    name, _, typ = spec.partition(":")
    if not name.startswith("/"):
        name = "/" + name
    return name, (typ or KNOWN_TYPES.get(name))


def run_recorder(
    output: str | Path,
    topics: list[str],
    storage: str = "mcap",
    qos_depth: int = 10000,
    flush_period: float = 0.5,
    duration: float | None = None,
    on_progress: Callable[[dict[str, int]], None] | None = None,
    args: list[str] | None = None,
    effort_kind: str = "",
) -> dict[str, int]:
    """Record ``topics`` into a new bag at ``output`` until SIGINT/SIGTERM (or ``duration`` s); ``effort_kind``
    (torque | current) is written into its metadata.yaml, where the importer reads it.

    Returns:
        messages written per topic.
    """
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise ParameterError(f"duration must be a number of seconds > 0, got {duration}; leave it out to record "
                             "until Ctrl-C")
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.signals import SignalHandlerOptions

    from idyn_ros.data.bag import BagWriter
    from idyn_ros.nodes.ros_parameters import NodeParameters, to_ros_parameter
    from idyn_ros.parameters import RecorderParams

    stop = {"flag": False}
    stopped_ns: list[int | None] = [None]  # when the recording ended: what was published later is not part of it

    def request_stop(_signum: int, _frame: object) -> None:
        stop["flag"] = True

    old_handlers = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = Node("idyn_recorder")
    writer = None
    subscriptions = {}
    types: dict[str, str] = {}
    reliability: dict[str, ReliabilityPolicy] = {}

    def offered(name: str) -> tuple[ReliabilityPolicy, str]:
        """Reliability to request for ``name`` from its publishers' offered QoS, and why."""
        pubs = node.get_publishers_info_by_topic(name)
        if not pubs:
            return ReliabilityPolicy.RELIABLE, "no publisher yet"
        best_effort = sum(p.qos_profile.reliability != ReliabilityPolicy.RELIABLE for p in pubs)
        if best_effort:
            return ReliabilityPolicy.BEST_EFFORT, f"{best_effort} of {len(pubs)} publishers not reliable"
        return ReliabilityPolicy.RELIABLE, f"all {len(pubs)} publishers reliable"

    def subscribe(name: str, msgtype: str) -> None:
        writer.add_topic(name, msgtype)
        types[name] = msgtype
        rel, why = offered(name)
        create(name, rel, why)

    def create(name: str, rel: ReliabilityPolicy, why: str) -> None:
        write = writer.write
        now = time.time_ns

        def callback(data: bytes, info: Any, _topic: str = name) -> None:  # (data, info): rclpy passes MessageInfo
            if stopped_ns[0] is None or info["source_timestamp"] <= stopped_ns[0]:
                write(_topic, now(), data)

        old = subscriptions.pop(name, None)
        if old is not None:
            node.destroy_subscription(old)
        msgtype = types[name]
        subscriptions[name] = node.create_subscription(message_class(msgtype), name, callback, qos[rel], raw=True)
        reliability[name] = rel
        node.get_logger().info(f"recording {name} ({msgtype}) {rel.name} ({why})")

    def adapt() -> None:
        """Re-create RELIABLE subscriptions BEST_EFFORT once a best-effort publisher shows up."""
        for name, rel in list(reliability.items()):
            if rel == ReliabilityPolicy.RELIABLE:
                new, why = offered(name)
                if new == ReliabilityPolicy.BEST_EFFORT:
                    create(name, new, why + ": re-subscribed")

    try:
        # ROS parameters (``--ros-args -p output:=bag``) override the function arguments
        given = {"output": str(output or ""), "storage": storage, "topics": list(topics or ["/joint_states"]),
                 "qos_depth": int(qos_depth), "flush_period": float(flush_period), "effort_kind": effort_kind}
        for name, value in given.items():
            node._parameter_overrides.setdefault(name, to_ros_parameter(name, value))
        p = NodeParameters(node, RecorderParams).read()  # raises for a bad value (.value would be the defaults)
        output, storage, topics, qos_depth, flush_period = p.output, p.storage, list(p.topics), p.qos_depth, \
            p.flush_period
        if not output:
            raise ParameterError("no output bag: pass -o BAG (or the ROS parameter output:=BAG)")
        wanted = dict(parse_topic(t) for t in topics)
        qos = {
            rel: QoSProfile(
                history=HistoryPolicy.KEEP_LAST,
                depth=qos_depth,
                reliability=rel,
                durability=DurabilityPolicy.VOLATILE,
            )
            for rel in (ReliabilityPolicy.RELIABLE, ReliabilityPolicy.BEST_EFFORT)
        }
        writer = BagWriter(output, storage=storage, flush_period_s=flush_period,
                           custom_data={"effort_kind": p.effort_kind} if p.effort_kind else None)
        for name, msgtype in wanted.items():
            if msgtype:
                subscribe(name, msgtype)
    except BaseException:
        if writer is not None:  # a start-up error leaves no bag behind (BagWriter created the folder: it was new)
            with contextlib.suppress(Exception):
                writer.close()
            shutil.rmtree(writer.path, ignore_errors=True)
        node.destroy_node()
        rclpy.try_shutdown()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        raise

    unrecordable: set[str] = set()  # discovered with a type this environment cannot record: said once, skipped

    def discover() -> None:
        pending = [n for n in wanted if n not in subscriptions and n not in unrecordable]
        if not pending:
            return
        for name, types in node.get_topic_names_and_types():
            if name in pending and types:
                try:
                    message_class(types[0])  # before the bag registers the topic
                    subscribe(name, types[0])
                except IdynError as exc:  # one topic's type must not end the whole recording
                    unrecordable.add(name)
                    node.get_logger().error(f"not recording {name}: {exc}; the other topics go on")

    def tick() -> None:
        writer.flush()
        adapt()
        discover()
        if on_progress is not None:
            on_progress(dict(writer.counts))

    node.create_timer(flush_period, tick)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    t_end = None if duration is None else time.monotonic() + duration
    try:
        while not stop["flag"] and (t_end is None or time.monotonic() < t_end):
            executor.spin_once(timeout_sec=0.1)
        stopped_ns[0] = time.time_ns()
        # the instant that bounds the bag, on the clock of the messages' source stamps: says where it ends and why
        node.get_logger().info(f"stopped at {stopped_ns[0]} ns (system clock) "
                               + ("on a signal" if stop["flag"] else f"after --duration {duration:g} s")
                               + ": taking what was published before it, nothing later")
        # drain: take what was published before the stop and is still queued or in flight, until nothing of it
        # arrives for 0.3 s (at most 3 s); a live publisher's later messages are dropped (they ran --duration over)
        last, quiet_since, deadline = -1, time.monotonic(), time.monotonic() + 3.0
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 0.3:
            executor.spin_once(timeout_sec=0.05)
            total = sum(writer.counts.values())
            if total != last:
                last, quiet_since = total, time.monotonic()
    finally:
        writer.close()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
    return dict(writer.counts)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The recorder's options (also those of ``idyn record``)."""
    from idyn_ros.commands import positive

    parser = parser or argparse.ArgumentParser(prog="recorder", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "topics",
        nargs="*",
        metavar="TOPIC[:TYPE]",
        help="topics to record (default /joint_states); TYPE like sensor_msgs/msg/JointState, "
        "else found by discovery (idyn_ros/msg/* types work too)",
    )
    parser.add_argument("-o", "--output", help="bag folder to create (must not exist); or the ROS parameter "
                        "output:=BAG")
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="storage format (default mcap)")
    parser.add_argument(
        "--qos-depth",
        type=positive(int),
        default=10000,
        help="KEEP_LAST history depth per topic (default 10000 = 10 s at 1 kHz)",
    )
    parser.add_argument(
        "--flush-period",
        type=positive(float),
        default=0.5,
        help="seconds between durability points; at most this much is lost on SIGKILL (default 0.5)",
    )
    parser.add_argument("--duration", type=positive(float), help="stop after this many seconds (default: until Ctrl-C)")
    parser.add_argument("--effort-kind", choices=("torque", "current"), default="",
                        help="what /joint_states effort is, written into the bag so that `idyn dataset import`, "
                        "`idyn train` and `idyn wrench` read it without --effort-kind: current for a UR arm whose "
                        "driver reports motor currents (its default unless use_currents_as_efforts:=false), torque "
                        "for Franka, KUKA and our plant (default: not stated; import then assumes torque and says so)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console script ``idyn-recorder``: our options plus ROS arguments (``--ros-args -p ...``)."""
    from rclpy.utilities import remove_ros_args

    full = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    args = build_parser().parse_args(remove_ros_args(full)[1:])
    try:
        counts = run_recorder(
            args.output, args.topics, args.storage, args.qos_depth, args.flush_period, args.duration, args=full,
            effort_kind=args.effort_kind,
        )
    except IdynError as exc:
        print(f"recorder: error: {exc}", file=sys.stderr)
        return 2
    print("wrote bag: " + ", ".join(f"{t} {c}" for t, c in counts.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
