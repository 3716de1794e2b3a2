"""Stamped series from a bag as recorded, for replaying it: joint states message by message (no resampling)
and WrenchStamped topics (an F/T sensor, a vendor's own estimate).

``idyn_ros.data.importers`` puts everything on one uniform grid for training; a replay through the observer
wants what a node would have received: each joint state with its header stamp, and each wrench with its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from idyn_ros.errors import DatasetError


@dataclass
class JointStateSeries:
    """Joint states in robot joint order; ``t_ns`` header stamps (log time when the headers are 0), sorted."""

    t_ns: np.ndarray  # (N,) int64
    q: np.ndarray
    dq: np.ndarray
    effort: np.ndarray
    joint_names: tuple[str, ...]
    effort_kind: str | None  # what the source says (None: it does not)
    source: str
    note: str = ""  # how the recorded joint names were read, when renamed (``importers.read_as_robot``)
    log_to_header_ns: int = 0  # add to a bag log time to place it on these stamps' clock (RawRecording's)

    @property
    def rate_hz(self) -> float:
        """Rate of the stamps, as the dataset importer measures it (``importers.median_period``)."""
        from idyn_ros.data.importers import median_period

        return float(1e9 / median_period(self.t_ns)) if len(self.t_ns) > 1 else float("nan")

    @property
    def irregular(self) -> str:
        """How the stamp spacings spread, when too much for a uniform rate ("" when regular)."""
        from idyn_ros.data.importers import irregularity, median_period

        return irregularity(self.t_ns, median_period(self.t_ns)) if len(self.t_ns) > 2 else ""


@dataclass
class WrenchSeries:
    """One WrenchStamped topic: ``values`` (M, 6) [f; m] as published, its header stamps and frame."""

    topic: str
    t_ns: np.ndarray
    values: np.ndarray
    frame_id: str

    def at(self, t_ns: np.ndarray) -> np.ndarray:
        """Linear interpolation onto ``t_ns`` (held at the ends), (N, 6)."""
        x = (self.t_ns - self.t_ns[0]).astype(np.float64)
        xi = (np.asarray(t_ns) - self.t_ns[0]).astype(np.float64)
        return np.stack([np.interp(xi, x, self.values[:, c]) for c in range(6)], axis=1)


def read_joint_states(path: str | Path, joint_names: tuple[str, ...] | list[str], topic: str | None = None,
                      effort_kind: str | None = None, recover: bool = False) -> JointStateSeries:
    """Joint states of a bag (or a dataset .npz) reordered by name; samples missing a joint are refused; ``recover``:
    read what a damaged or unfinished bag holds (``BagReader``)."""
    from idyn_ros.data.importers import messages_with_joints, read_as_robot
    from idyn_ros.data.read_bag import read_bag

    path = Path(path)
    names = list(joint_names)
    if path.suffix == ".npz":
        from idyn_ros.data.dataset import load_dataset

        ds = load_dataset(path, joint_names=names)
        return JointStateSeries(np.round(ds.t * 1e9).astype(np.int64), ds.q, ds.dq, ds.tau, tuple(names),
                                effort_kind or ds.effort_kind, str(path))
    raw = read_bag(path, topic=topic, recover=recover)
    recorded, note = read_as_robot(list(raw.joint_names), names)  # e.g. franka_ros2's fer_* for the Panda
    missing = [j for j in names if j not in recorded]
    if missing:
        raise DatasetError(f"{path}: joints {missing} are not in its joint states ({raw.joint_names}); pick the "
                           f"model of this robot")
    idx = [recorded.index(j) for j in names]
    raw, skipped = messages_with_joints(raw, np.array(idx), names)  # e.g. a gripper's messages on the same topic
    note = "; ".join(x for x in (note, skipped) if x)
    order = np.argsort(raw.stamps_ns, kind="stable")
    t = raw.stamps_ns[order]
    keep = np.concatenate([[True], np.diff(t) > 0])  # a repeated stamp is the same state sent twice
    sel = order[keep]
    q, dq, eff = (raw.signals[k][sel][:, idx] for k in ("q", "dq", "tau"))
    for name, arr in (("position", q), ("velocity", dq), ("effort", eff)):
        bad = ~np.isfinite(arr)
        if bad.any():
            raise DatasetError(f"{path}: {int(bad.any(1).sum())} joint states lack a {name} for joints {names} "
                               f"(first at message {int(np.flatnonzero(bad.any(1))[0])})")
    return JointStateSeries(t[keep], q, dq, eff, tuple(names), effort_kind or raw.effort_hint, raw.source, note,
                            raw.log_to_header_ns)


def read_wrenches(path: str | Path, topics: list[str], log_to_header_ns: int = 0,
                  recover: bool = False) -> dict[str, WrenchSeries]:
    """The WrenchStamped topics of a bag that exist ({} entries are left out); header stamps, sorted.

    A message with a zero stamp (a driver that never sets it) is placed at its log time + ``log_to_header_ns``:
    on the joint states' clock, with :attr:`JointStateSeries.log_to_header_ns`.
    """
    from idyn_ros.data.bag import BagReader, idyn_typestore, register_bag_types

    reader = BagReader(Path(path), recover=recover)
    available = reader.topics()
    wanted = [t for t in topics if t in available]
    for t in wanted:
        if available[t].msgtype != "geometry_msgs/msg/WrenchStamped":
            raise DatasetError(f"{path}: {t} is {available[t].msgtype}, not a geometry_msgs/msg/WrenchStamped")
    store = idyn_typestore()
    register_bag_types(store, available)
    rows: dict[str, list] = {t: [] for t in wanted}
    frames: dict[str, str] = {}
    for name, log_ns, raw in reader.messages(wanted):
        m = store.deserialize_cdr(raw, "geometry_msgs/msg/WrenchStamped")
        stamp = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
        f, tq = m.wrench.force, m.wrench.torque
        rows[name].append((stamp or log_ns + log_to_header_ns, (f.x, f.y, f.z, tq.x, tq.y, tq.z)))
        frames.setdefault(name, m.header.frame_id)
    out = {}
    for t, r in rows.items():
        if not r:
            continue
        stamps = np.array([s for s, _ in r], dtype=np.int64)
        values = np.array([v for _, v in r], dtype=np.float64)
        order = np.argsort(stamps, kind="stable")
        stamps, values = stamps[order], values[order]
        keep = np.concatenate([[True], np.diff(stamps) > 0])
        out[t] = WrenchSeries(t, stamps[keep], values[keep], frames.get(t, ""))
    return out


def available_topics(path: str | Path, recover: bool = False) -> dict[str, str]:
    """{topic: message type} of a bag."""
    from idyn_ros.data.bag import BagReader

    return {t.name: t.msgtype for t in BagReader(Path(path), recover=recover).topics().values()}
