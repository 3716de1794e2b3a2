"""Read a rosbag2 recording's joint states (and its references, commands, wrench) into a
:class:`~idyn_ros.data.raw.RawRecording`, placing each message on one clock."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.data.dataset import EFFORT_KINDS
from idyn_ros.data.hints import option_hint, recover_hint
from idyn_ros.data.raw import RawRecording, duplicated
from idyn_ros.errors import BagReadError, DatasetError

#: Message types a bag's wrench topic may have (``--wrench-topic``).
WRENCH_TYPES = ("geometry_msgs/msg/WrenchStamped", "idyn_ros/msg/PlantGroundTruth")
JOINT_STATE_TYPES = ("sensor_msgs/msg/JointState", "trajectory_msgs/msg/JointTrajectory")
#: What places a bag's joint states in time (``--stamps``): header.stamp unless all are 0 (auto), header.stamp
#: even where it jumps back (header), or the time the recorder logged each message (log).
STAMP_SOURCES = ("auto", "header", "log")
#: A header stamp this far behind the one before it (in recording order) is a clock step or a second recording,
#: not a late message: sorted, the two stretches would be laid over each other.
CLOCK_STEP_BACK_NS = 100_000_000
#: Header stamps this far from the bag's log times come from another machine's clock (below: transport delay).
CLOCK_OFFSET_NS = 1_000_000


def read_bag(
    path: Path, topic: str | None = None, recover: bool = False, wrench_topic: str | None = None,
    stamps: str = "auto",
) -> RawRecording:
    """A rosbag2 bag: joint states (or one JointTrajectory) plus known secondary topics.

    Secondary topics, put on the joint-state grid: ``idyn_ros/msg/JointReference`` -> q_d, dq_d,
    ddq_d (by joint name); ``std_msgs/msg/Float64MultiArray`` on an effort controller's ``*/commands`` -> tau_cmd
    (the controller's joint order = the robot's; see :func:`is_effort_command`); wrench [f; n] from ``wrench_topic``
    (``geometry_msgs/msg/WrenchStamped`` or ``idyn_ros/msg/PlantGroundTruth``), default: the one
    PlantGroundTruth topic if there is exactly one (estimates are not ground truth, so a
    WrenchStamped topic is only used when named).

    ``stamps`` (:data:`STAMP_SOURCES`): ``auto`` places joint states by header stamp unless every one is 0, and
    refuses a header clock that jumps back (:func:`check_header_clock`); ``header`` sorts by header stamp whatever
    it does; ``log`` uses the bag's log times. Topics placed by log time (no header, or a zero one) are moved onto
    the header clock by the joint states' median header - log time when that exceeds :data:`CLOCK_OFFSET_NS`.
    """
    if stamps not in STAMP_SOURCES:
        raise DatasetError(f"stamps must be one of {', '.join(STAMP_SOURCES)}, got {stamps!r}")
    from idyn_ros.data.bag import BagReader, idyn_typestore, register_bag_types

    reader = BagReader(path, recover=recover)
    topics = reader.topics()
    if not topics:
        raise BagReadError(f"{path}: no topic is readable: the file is empty, or truncated or damaged before its "
                           f"first topic was written; nothing in it can be imported")
    store = idyn_typestore()
    register_bag_types(store, topics)
    topic, main_type, secondary, wrench_topic = _bag_topics(path, topics, topic, wrench_topic)
    rows, other, trajectory = _bag_messages(reader, store, path, topic, main_type, secondary, recover)
    if trajectory is not None:
        return _trajectory_recording(trajectory, path, topic)
    if not rows and reader.truncations:  # the damage took every message, the topic was not empty
        damage = reader.truncations[0]
        raise BagReadError(f"{path}: no message on {topic} is readable: {damage.describe()}; {damage.kept()}")
    if not rows:
        raise DatasetError(f"{path}: topic {topic} holds no messages" + _other_joint_states(topics, topic))
    rows, merged = merge_same_stamp(rows)
    header_ns = np.array([r[0] for r in rows], dtype=np.int64)
    log_ns = np.array([r[1] for r in rows], dtype=np.int64)
    use_header = stamps == "header" or (stamps == "auto" and header_ns.any())
    if use_header and not header_ns.any():
        raise DatasetError(f"{path}: every header stamp on {topic} is 0; "
                           + option_hint("--stamps", "log", purpose="use the bag's log times", keyword="stamps='log'"))
    if stamps == "auto" and use_header:
        check_header_clock(header_ns, log_ns, path, topic)
    offset = log_to_header_offset(header_ns, log_ns) if use_header else 0
    notes = [f"topic {topic}; stamps from " + ("message headers" if use_header else
                                              "bag log times (headers are 0)" if stamps == "auto" else
                                              "bag log times (--stamps log)")]
    if merged:
        notes.append(f"{merged} messages merged into the one before with the same header stamp (they name other "
                     "joints: a publisher per joint or per joint group)")
    if offset:
        notes.append(f"header stamps of {topic} are {offset / 1e9:+.4g} s from the bag's log times (another "
                     "clock: a simulator's time, or another machine's): topics placed by log time were moved onto the "
                     "header clock by that much")
    stamps_ns = header_ns if use_header else log_ns
    names, (q, dq, tau), named = joint_state_arrays(rows, stamps_ns, f"{path}: {topic}")
    raw_rec = RawRecording(stamps_ns, names, {"q": q, "dq": dq, "tau": tau}, f"{path}:{topic}", notes=notes,
                           named=named, header_stamps=use_header, log_to_header_ns=offset)
    raw_rec.effort_hint, said = bag_effort_kind(path)
    if said:
        raw_rec.notes.append(f"effort_kind={raw_rec.effort_hint} from metadata.yaml custom_data ({said})")
    _add_secondary_topics(raw_rec, other, secondary, wrench_topic, use_header, offset)
    return raw_rec


def _bag_topics(path: Path, topics: dict, topic: str | None,
                wrench_topic: str | None) -> tuple[str, str, dict[str, str], str | None]:
    """(joint-state topic, its type, {secondary topic: type}, wrench topic): the ones asked for, else the bag's
    /joint_states (or its one JointState / JointTrajectory topic) and its one PlantGroundTruth topic."""
    if topic is None:
        js = [t for t in topics.values() if t.msgtype == "sensor_msgs/msg/JointState"]
        jt = [t for t in topics.values() if t.msgtype == "trajectory_msgs/msg/JointTrajectory"]
        if "/joint_states" in topics:
            topic = "/joint_states"
        elif len(js) == 1:
            topic = js[0].name
        elif not js and len(jt) == 1:
            topic = jt[0].name
        else:
            raise DatasetError(
                f"{path}: several candidate joint-state topics; "
                + option_hint("--topic", "NAME", purpose="choose one", keyword="topic='NAME'")
                + "; topics: "
                + ", ".join(f"{t.name} ({t.msgtype})" for t in topics.values())
            )
    if topic not in topics:
        raise DatasetError(f"{path}: no topic {topic}; topics: {', '.join(topics)}")
    main_type = topics[topic].msgtype
    if main_type not in JOINT_STATE_TYPES:
        raise DatasetError(f"{path}: {topic} is {main_type}, not a JointState or JointTrajectory"
                           + _other_joint_states(topics, topic))
    secondary = {
        t.name: t.msgtype
        for t in topics.values()
        if t.msgtype in ("idyn_ros/msg/JointReference", "std_msgs/msg/Float64MultiArray") and t.name != topic
    }
    if wrench_topic is None:
        truth = [t.name for t in topics.values() if t.msgtype == "idyn_ros/msg/PlantGroundTruth"]
        wrench_topic = truth[0] if len(truth) == 1 else None
    if wrench_topic is not None:
        if wrench_topic not in topics:
            raise DatasetError(f"{path}: no wrench topic {wrench_topic}; topics: {', '.join(topics)}")
        if wrench_topic == topic or topics[wrench_topic].msgtype not in WRENCH_TYPES:
            raise DatasetError(
                f"{path}: --wrench-topic {wrench_topic} is {topics[wrench_topic].msgtype}"
                + (", the joint-state topic itself" if wrench_topic == topic else "")
                + f"; it must be one of {', '.join(WRENCH_TYPES)}: "
                + (", ".join(t.name for t in topics.values() if t.msgtype in WRENCH_TYPES) or "this bag has none")
            )
        secondary[wrench_topic] = topics[wrench_topic].msgtype
    return topic, main_type, secondary, wrench_topic


def _bag_messages(reader: Any, store: Any, path: Path, topic: str, main_type: str, secondary: dict[str, str],
                  recover: bool) -> tuple[list, dict[str, list], Any]:
    """(joint-state rows (header ns, log ns, names, position, velocity, effort), {secondary topic: [(log ns, msg)]},
    the first JointTrajectory or None); a damaged message is an error, or with ``recover`` the end of the joint
    states / a skipped secondary message."""
    from idyn_ros.data.bag import BagWarning

    wanted = [topic, *secondary]
    rows: list[tuple[int, int, tuple[str, ...], object, object, object]] = []
    other: dict[str, list] = {n: [] for n in secondary}
    trajectory = None
    for index, (name, log_ns, raw) in enumerate(reader.messages(wanted)):
        if name == topic:
            try:
                msg = store.deserialize_cdr(raw, main_type)
            except Exception as exc:  # damaged bytes inside a structurally intact file
                if recover:
                    warnings.warn(f"{path}: message {index} on {topic} is damaged ({exc}); stopped there", stacklevel=3)
                    break
                raise BagReadError(
                    f"{path}: message {index} on {topic} (log time {log_ns} ns) cannot be decoded ({exc}); "
                    f"the bag is damaged there; {recover_hint('import the messages before it')}"
                ) from None
            if main_type == "sensor_msgs/msg/JointState":
                stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
                rows.append((stamp, log_ns, tuple(msg.name), msg.position, msg.velocity, msg.effort))
            else:  # a JointTrajectory: its first message
                trajectory = msg if trajectory is None else trajectory
            continue
        try:
            other[name].append((log_ns, store.deserialize_cdr(raw, secondary[name])))
        except Exception as exc:  # damaged bytes: this message is lost, not the joint states
            what = f"{path}: message {index} on {name} (log time {log_ns} ns) cannot be decoded ({exc})"
            if not recover:
                raise BagReadError(f"{what}; the bag is damaged there; {recover_hint('skip it')}") from None
            warnings.warn(f"{what}; skipped", BagWarning, stacklevel=3)
    return rows, other, trajectory


def _add_secondary_topics(raw_rec: RawRecording, other: dict[str, list], secondary: dict[str, str],
                          wrench_topic: str | None, use_header: bool, offset: int) -> None:
    """Put the secondary topics' messages into ``raw_rec.extra`` (q_d / dq_d / ddq_d, wrench, tau_cmd), each on the
    joint states' clock: its header stamps where the joint states use theirs, else log time + ``offset``."""
    for name, items in other.items():
        if not items:
            continue
        typ = secondary[name]
        x = np.array([t for t, _ in items], dtype=np.int64)
        if typ == "idyn_ros/msg/JointReference":
            hx = np.array([m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for _, m in items])
            x = hx if use_header and hx.any() else x + offset
            jn = list(items[0][1].joint_names)
            for sig, attr in (("q_d", "positions"), ("dq_d", "velocities"), ("ddq_d", "accelerations")):
                vals = np.array([getattr(m, attr) for _, m in items])
                if vals.ndim == 2 and vals.shape[1] == len(jn):
                    raw_rec.extra[sig] = (x, jn, vals)
        elif name == wrench_topic:
            w = [m.wrench for _, m in items]
            vals = np.array([[a.force.x, a.force.y, a.force.z, a.torque.x, a.torque.y, a.torque.z] for a in w])
            hx = np.array([m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for _, m in items])
            raw_rec.extra["wrench"] = (hx if use_header and hx.any() else x + offset, [], vals)
            raw_rec.notes.append(f"wrench from {name} ({typ})")
        elif typ == "std_msgs/msg/Float64MultiArray" and name.endswith("/commands"):
            lengths = sorted({len(m.data) for _, m in items})
            if not is_effort_command(name):
                raw_rec.notes.append(f"{name} not stored as tau_cmd: its name does not say it commands effort "
                                     f"(e.g. /effort_controller/commands)")
            elif len(lengths) > 1:
                raw_rec.notes.append(f"{name} not stored as tau_cmd: its messages hold {lengths} values, not one "
                                     f"value per joint throughout")
            else:
                raw_rec.extra["tau_cmd"] = (x + offset, [], np.array([m.data for _, m in items]))
                raw_rec.notes.append(f"tau_cmd from {name} (ros2_control command order = robot joint order)")


def _other_joint_states(topics: dict, topic: str) -> str:
    """The hint for a joint-state topic that is empty or of another type: where the bag's joint states are."""
    others = [t.name for t in topics.values() if t.name != topic and t.msgtype in JOINT_STATE_TYPES and t.count != 0]
    if not others:
        return ""
    return (f"; joint states are on {', '.join(others)}: "
            + option_hint("--topic", others[0], keyword=f"topic='{others[0]}'"))


def merge_same_stamp(rows: list) -> tuple[list, int]:
    """Join messages that carry the same non-zero header stamp and name other joints (a publisher per joint or per
    joint group) into one state: (rows, how many messages were merged into an earlier one).

    Parts are joined only when each field (position, velocity, effort) is given for all of them or for none.
    """
    out: list = []
    first_at: dict[int, int] = {}  # stamp -> index in out of the first message with it
    merged = 0
    for row in rows:
        stamp, _log, joints, *fields = row
        k = first_at.get(stamp) if stamp else None
        if k is not None and not set(out[k][2]) & set(joints):
            s0, log0, joints0, *fields0 = out[k]
            pairs = list(zip(fields0, fields, strict=True))
            if all((len(a), len(b)) in ((len(joints0), len(joints)), (0, 0)) for a, b in pairs):
                out[k] = (s0, log0, (*joints0, *joints), *([*a, *b] for a, b in pairs))
                merged += 1
                continue
        if stamp and k is None:
            first_at[stamp] = len(out)
        out.append(row)
    return out, merged


def joint_state_arrays(rows: list, stamps_ns: np.ndarray, what: str) -> tuple[list[str], tuple, np.ndarray]:
    """(joint names, (q, dq, tau) each (M, n) with NaN where a message names no value, named (M, n) bool) of
    JointState rows; a field given in some messages only, or with another length than the names, is refused."""
    names: list[str] = []
    for r in rows:
        for j in r[2]:
            if j not in names:
                names.append(j)
    m, n = len(rows), len(names)
    arrays = tuple(np.full((m, n), np.nan) for _ in range(3))
    named = np.zeros((m, n), dtype=bool)
    lengths = np.zeros((m, 3), dtype=int)  # values per field, -1 where they match the names
    col_cache: dict[tuple[str, ...], np.ndarray] = {}
    for i, (_s, _l, jn, *fields) in enumerate(rows):
        cols = col_cache.get(jn)
        if cols is None:
            repeated = duplicated(jn)
            if repeated:  # JointState.name must be unique: the second value would overwrite the first
                raise DatasetError(
                    f"{what} message {i} (stamp {int(stamps_ns[i])} ns) names joint(s) {repeated} more than "
                    f"once: {list(jn)}; a JointState must name each joint once (fix the publisher)"
                )
            cols = col_cache.setdefault(jn, np.array([names.index(j) for j in jn], dtype=int))
        named[i, cols] = True
        for f, (values, array) in enumerate(zip(fields, arrays, strict=True)):
            if len(values) == len(cols):
                array[i, cols] = values
                lengths[i, f] = -1
            else:
                lengths[i, f] = len(values)
    for f, field_name in enumerate(("position", "velocity", "effort")):
        wrong = np.flatnonzero(lengths[:, f] > 0)
        if wrong.size:
            i = int(wrong[0])
            raise DatasetError(
                f"{what}: {wrong.size} message(s) have {field_name} arrays of another length than their names; the "
                f"first, message {i} (stamp {int(stamps_ns[i])} ns), has {lengths[i, f]} {field_name} values for "
                f"{len(rows[i][2])} names: which value is which joint is unknown (fix the publisher: one value per "
                "name, or none)")
        empty = np.flatnonzero(lengths[:, f] == 0)
        if 0 < empty.size < m:
            i = int(empty[0])
            raise DatasetError(
                f"{what}: {empty.size} of {m} messages have an empty {field_name} array while the others have one "
                f"value per joint; the first is message {i} (stamp {int(stamps_ns[i])} ns). The recording holds no "
                f"NaN: those messages lack the field, which every message must have")
    return names, arrays, named


def check_header_clock(header_ns: np.ndarray, log_ns: np.ndarray, path: Path, topic: str) -> None:
    """Refuse header stamps that jump back by more than :data:`CLOCK_STEP_BACK_NS` in recording order (a clock
    step, a simulator reset, two recordings in one bag): sorted, the stretches would be laid over each other."""
    order = np.argsort(log_ns, kind="stable")
    order = order[header_ns[order] != 0]  # zero stamps (clock not set yet) are dropped later as strays
    back = header_ns[order[:-1]] - header_ns[order[1:]]
    jumps = np.flatnonzero(back > CLOCK_STEP_BACK_NS)
    if jumps.size:
        k = int(jumps[0])
        raise DatasetError(
            f"{path}: the header stamps of {topic} jump back by {back[k] / 1e9:.4g} s at message {int(order[k + 1])} "
            f"({jumps.size} such jump(s) in recording order): the publisher's clock was stepped or reset, or the bag "
            "holds two recordings, and sorted by stamp the stretches would be laid over each other; "
            + option_hint("--stamps", "log", purpose="place the messages by the bag's log times instead",
                          keyword="stamps='log'")
            + " (or, if the messages were only delivered late, --stamps header to sort them by stamp)")


def log_to_header_offset(header_ns: np.ndarray, log_ns: np.ndarray) -> int:
    """What to add to a log time to place it on the header clock: the median header - log time of the messages
    with a header stamp when beyond :data:`CLOCK_OFFSET_NS` (another machine's clock), else 0 (one clock)."""
    stamped = header_ns != 0
    if not stamped.any():
        return 0
    offset = int(np.median(header_ns[stamped] - log_ns[stamped]))
    return offset if abs(offset) > CLOCK_OFFSET_NS else 0


def is_effort_command(topic: str) -> bool:
    """Whether a ros2_control ``*/commands`` topic carries torques: its controller's name says effort (or torque);
    a position or velocity controller's commands are no tau_cmd."""
    controller = topic.rsplit("/", 2)[-2].lower() if topic.count("/") >= 2 else ""
    return "effort" in controller or "torque" in controller


def bag_effort_kind(path: Path) -> tuple[str | None, str]:
    """What a bag's ``metadata.yaml`` says its joint-state effort is: (``torque``/``current``/None, the entry).

    Read from ``custom_data``: ``effort_kind`` (torque | current), else a free-text ``joint_states_effort``
    naming a current or a torque (as the UR5 recordings in shared/data carry).
    """
    from idyn_ros.data.bag.metadata import read_bag_metadata

    folder = path if path.is_dir() else path.parent
    try:
        info = read_bag_metadata(folder)
    except Exception:  # an unreadable metadata.yaml is reported where the storage files are found
        return None, ""
    custom = info.get("custom_data") if isinstance(info, dict) else None
    if not isinstance(custom, dict):
        return None, ""
    stated = str(custom.get("effort_kind", "")).strip().lower()
    if stated in EFFORT_KINDS:
        return stated, f"effort_kind: {stated}"
    text = str(custom.get("joint_states_effort", "")).lower()
    for kind in ("current", "torque"):
        if kind in text:
            return kind, f"joint_states_effort: {custom['joint_states_effort']}"
    return None, ""


def _trajectory_recording(msg, path: Path, topic: str) -> RawRecording:
    """One trajectory_msgs/JointTrajectory: its points become the samples (time_from_start)."""
    pts = msg.points
    if not pts:
        raise DatasetError(f"{path}: the JointTrajectory on {topic} has no points")
    stamps = np.array([p.time_from_start.sec * 1_000_000_000 + p.time_from_start.nanosec for p in pts], dtype=np.int64)
    n = len(msg.joint_names)

    def stack(attr: str) -> np.ndarray:
        rows = [getattr(p, attr) for p in pts]
        if all(len(r) == n for r in rows):
            return np.array(rows, dtype=np.float64)
        return np.full((len(pts), n), np.nan)

    signals = {
        "q": stack("positions"),
        "dq": stack("velocities"),
        "ddq": stack("accelerations"),
        "tau": stack("effort"),
    }
    return RawRecording(
        stamps,
        list(msg.joint_names),
        signals,
        f"{path}:{topic}",
        notes=[f"one JointTrajectory on {topic}: {len(pts)} points, time from time_from_start"],
    )
