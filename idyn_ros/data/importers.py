"""Turn recordings (rosbag2, CSV, foreign NPZ) into a :class:`~idyn_ros.data.dataset.Dataset`.

Every source is first read into a :class:`RawRecording` (stamps in integer ns, per-joint columns
named by joint, NaN where a signal is absent), then :func:`to_dataset` does the same cleaning for
all of them: rename joints (``--joint-map``), reorder to the robot's joint order, sort and
de-duplicate stamps, split at gaps (dropping a stamp alone between gaps: a zero, stale or future clock), resample
each segment onto a uniform grid, estimate missing velocities. One path means a CSV and a bag of the same motion
give the same dataset.

Grid decision: the grid is built in integer nanoseconds (start + k * period_ns, period = median
sample spacing rounded to 1 ns, or ``1e9 / rate``) and values are linearly interpolated, so a
recording whose stamps already lie on the grid comes back bit-exact (tested by the round trip).
A gap is judged against the source's own spacing, not the output grid's, so upsampling splits nothing
that was not a gap. Irregular stamps (see :data:`IRREGULAR_SPREAD`) are said in a note (:data:`IRREGULAR_NOTE`).
"""

from __future__ import annotations

import csv
import itertools
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.data.dataset import EFFORT_KINDS, JOINT_SIGNALS, Dataset, read_npz
from idyn_ros.data.hints import option_hint, recover_hint, rename_hint
from idyn_ros.errors import BagReadError, DatasetError

__all__ = ["ImportReport", "RawRecording", "import_source", "parse_joint_map", "resample", "resolve_robot_joints",
           "to_dataset"]

#: A gap longer than this many sample periods splits the recording into segments.
GAP_PERIODS = 3.0
#: Time units of CSV / foreign-NPZ time columns, as nanoseconds per unit.
TIME_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
#: Auto-detected time unit = the one putting the median step's rate in this window: real arms log joint
#: states at ~30 Hz..1 kHz, and the window spans exactly the factor 1000 between units, so one unit fits.
PLAUSIBLE_RATE_HZ = (5.0, 5000.0)
_PER_JOINT = ("q", "dq", "ddq", "tau", "tau_cmd", "q_d", "dq_d", "ddq_d")
#: Note on a dataset whose source did not say what its effort is (``idyn train`` reads it: UR arms report currents).
EFFORT_UNSTATED_NOTE = "effort_kind not stated by the source: torque assumed"
#: Decision: stamps are irregular when the middle 90 % of their spacings spans more than half a period (PC receive
#: times such as the UR5 No1-No3 logs, 8/24 ms alternating); scheduler jitter of a fixed-rate logger stays below it.
IRREGULAR_SPREAD = 0.5
#: Start of the note on a dataset whose source stamps were irregular (``models.sources`` reads it).
IRREGULAR_NOTE = "irregular stamps"
#: Largest output rate as a multiple of the source's own (median spacing): beyond 10x, the added samples only lie
#: on straight lines between recorded ones, and the file and memory grow with them (--rate 1e9 asked for 187 GiB).
MAX_UPSAMPLING = 10.0
#: Most samples an import writes: 2.8 h at 1 kHz, ~2 GB of float64 arrays for a 7-joint arm; more is a wrong --rate
#: or time unit, not a recording.
MAX_SAMPLES = 10_000_000
#: Start of the note on a dataset put on a grid at a requested rate (``rate=``), not at its own spacing.
RESAMPLED_NOTE = "resampled linearly"
#: Start of the note on a dataset whose unnamed columns were assigned to joints by position (``models.sources``
#: and `idyn dataset import --robot` check such data against the robot's joint limits).
UNNAMED_NOTE = "columns carry no joint names"
#: Message types a bag's wrench topic may have (``--wrench-topic``).
WRENCH_TYPES = ("geometry_msgs/msg/WrenchStamped", "idyn_ros/msg/PlantGroundTruth")
JOINT_STATE_TYPES = ("sensor_msgs/msg/JointState", "trajectory_msgs/msg/JointTrajectory")
#: Start of the note on a dataset whose motor currents were turned into torques (so a second conversion is refused).
CONVERTED_NOTE = "efforts converted from motor current [A] to torque [Nm]"
#: What places a bag's joint states in time (``--stamps``): header.stamp unless all are 0 (auto), header.stamp
#: even where it jumps back (header), or the time the recorder logged each message (log).
STAMP_SOURCES = ("auto", "header", "log")
#: A header stamp this far behind the one before it (in recording order) is a clock step or a second recording,
#: not a late message: sorted, the two stretches would be laid over each other.
CLOCK_STEP_BACK_NS = 100_000_000
#: Header stamps this far from the bag's log times come from another machine's clock (below: transport delay).
CLOCK_OFFSET_NS = 1_000_000


@dataclass
class RawRecording:
    """Samples as found in a source, before cleaning.

    ``stamps_ns`` (M,) int64 (any order, duplicates allowed); ``signals[name]`` (M, n) float with
    columns in ``joint_names`` order (NaN = not present in that sample); ``wrench`` (M, 6) or None.
    Numbered columns without names use placeholders ``#1..#n`` resolved by position.
    """

    stamps_ns: np.ndarray
    joint_names: list[str]
    signals: dict[str, np.ndarray]
    source: str
    wrench: np.ndarray | None = None
    extra: dict[str, tuple[np.ndarray, list[str], np.ndarray]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    effort_hint: str | None = None
    time_column: tuple[str, str] | None = None  # (column, unit it was read in) for CSV / foreign NPZ
    named: np.ndarray | None = None  # (M, n) bool: the joints each message named (bags; None: every sample names all)
    header_stamps: bool = False  # stamps are a bag's header stamps (its log times are the other choice)
    log_to_header_ns: int = 0  # add to a bag log time to place it on the joint states' header clock


@dataclass
class ImportReport:
    """What the import did, for ``idyn dataset import`` to print."""

    source: str
    samples_in: int = 0
    samples_out: int = 0
    duplicates_dropped: int = 0  # messages sent twice: the same stamp and positions as the one before
    repeated_stamps: int = 0  # messages with the stamp of the one before but other positions (a stalled clock)
    out_of_order: int = 0
    period_ns: int = 0
    gaps: list[tuple[float, float]] = field(default_factory=list)  # (at s, length s)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [
            f"source: {self.source}",
            f"samples: {self.samples_in} read -> {self.samples_out} on a {1e9 / self.period_ns:.4g} Hz grid"
            if self.period_ns
            else f"samples: {self.samples_in}",
            f"duplicate stamps dropped: {self.duplicates_dropped}; out-of-order stamps sorted: {self.out_of_order}",
        ]
        out += [f"gap of {length:.4g} s from t = {at - length:.4g} to {at:.4g} s (new segment)"
                for at, length in self.gaps]
        out += [f"warning: {w}" for w in self.warnings]
        out += [f"note: {n}" for n in self.notes]
        return out


# ------------------------------------------------------------------------------------ joint names
def parse_joint_map(spec: dict[str, str] | list[str] | tuple[str, ...] | str | None) -> dict[str, str]:
    """Normalise ``--joint-map`` input to ``{old: new}``.

    Accepts a dict, a list of ``"old=new"`` strings, or one comma-separated string. An entry whose
    old side ends in ``_`` or ``/`` is a prefix map (``fer_=panda_`` renames ``fer_joint1`` to
    ``panda_joint1``); exact entries win over prefix entries.
    """
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {str(k): str(v) for k, v in spec.items()}
    items = spec.split(",") if isinstance(spec, str) else [x for s in spec for x in str(s).split(",")]
    out: dict[str, str] = {}
    for raw_item in items:
        item = raw_item.strip()
        if not item:
            continue
        if item.count("=") != 1:
            raise DatasetError(
                f"bad --joint-map entry {item!r}: write old=new, e.g. fer_joint1=panda_joint1 or fer_=panda_"
            )
        old, new = (x.strip() for x in item.split("="))
        out[old] = new
    return out


def apply_joint_map(names: list[str], mapping: dict[str, str]) -> list[str]:
    """Rename ``names`` with an exact-or-prefix map (see :func:`parse_joint_map`)."""
    prefixes = [(k, v) for k, v in mapping.items() if k.endswith(("_", "/"))]
    out = []
    for name in names:
        if name in mapping:
            out.append(mapping[name])
            continue
        renamed = name
        for old, new in prefixes:
            if name.startswith(old):
                renamed = new + name[len(old) :]
                break
        out.append(renamed)
    return out


def resolve_robot_joints(robot: str | Path | None) -> tuple[tuple[str, ...] | None, str]:
    """Joint names (model order) and a label for ``robot`` (preset name, URDF path, or None)."""
    if robot is None or robot == "":
        return None, ""
    text = str(robot)
    if text.endswith((".urdf", ".xacro", ".xml")) or Path(text).is_file():
        path = Path(text)
        if not path.is_file():
            raise DatasetError(f"URDF {path} does not exist")
        from idyn_ros.dynamics import RobotModel

        return tuple(RobotModel.from_urdf(path).joint_names), path.stem
    from idyn_ros.robots import get_robot

    return tuple(get_robot(text).joint_names), text


def robot_label_conflict(data_robot: str, robot: str, source: str) -> str:
    """A warning when data labelled for robot ``data_robot`` is used with ``robot``; "" when the labels agree or one
    is unknown. Joint names cannot tell (the UR5 and the UR10 share theirs); the label can.

    Decision: refused when both are presets (surely two arms), warned when one is (an identified URDF of the same arm
    has another name), silent when neither is (a URDF's file stem and its ``<robot name>`` differ freely).
    """
    from idyn_ros.robots import ROBOT_NAMES

    presets = (data_robot in ROBOT_NAMES) + (robot in ROBOT_NAMES)
    if not data_robot or not robot or data_robot == robot or not presets:
        return ""
    message = (f"{source} is labelled for robot {data_robot!r}, used here with {robot!r}: the joint names match, but "
               f"a model of one arm fitted or scored on another's data is wrong")
    if presets == 2:
        raise DatasetError(f"{message}; pass --robot {data_robot}, or import the recording itself again with "
                           f"--robot {robot} if it really is that arm's")
    return f"{message}; ignore this only if {robot!r} is the same arm under another name (e.g. an identified URDF)"


def recorded_aliases(target: Sequence[str]) -> tuple[str, dict[str, str]]:
    """(preset name, prefix map) for the preset whose joints are ``target``: from the names its vendor's stack records
    (``RobotSpec.recorded_prefixes``) to its own; ("", {}) when ``target`` is no preset's joint list."""
    from idyn_ros.robots import ROBOT_NAMES, get_robot

    for name in ROBOT_NAMES:
        spec = get_robot(name)
        if spec.recorded_prefixes and tuple(target) == spec.joint_names:
            return name, {alias: spec.active_prefix for alias in spec.recorded_prefixes}
    return "", {}


_RENAMED = "read as"  # in read_as_robot's note: the recorded joint names were renamed to the robot's


def is_renaming_note(note: str) -> bool:
    """Whether ``note`` (a dataset's or import report's) is the one ``read_as_robot`` writes."""
    return note.startswith("joints ") and f" {_RENAMED} " in note


def read_as_robot(names: list[str], target: Sequence[str]) -> tuple[list[str], str]:
    """(names, note): ``names`` renamed by the recorded aliases of the preset whose joints are ``target`` when that
    supplies every joint ``names`` lack, with a line saying so; else ``names`` unchanged and no note."""
    if all(j in names for j in target):
        return names, ""
    robot, aliases = recorded_aliases(target)
    for alias, own in aliases.items():
        renamed = apply_joint_map(names, {alias: own})
        if all(j in renamed for j in target) and not duplicated(renamed):
            return renamed, (f"joints {alias}* {_RENAMED} {own}* ({alias}* is what the {robot}'s vendor ROS 2 "
                             f"stack calls them; --joint-map overrides)")
    return names, ""


# ------------------------------------------------------------------------------------ cleaning
def to_dataset(
    raw: RawRecording,
    robot: str | Path | None = None,
    joint_map: dict[str, str] | list[str] | str | None = None,
    joint_names: list[str] | tuple[str, ...] | None = None,
    rate: float | None = None,
    effort_kind: str | None = None,
) -> tuple[Dataset, ImportReport]:
    """Clean a :class:`RawRecording` into a :class:`Dataset` (see module docstring for the steps)."""
    report = ImportReport(source=raw.source, samples_in=int(raw.stamps_ns.size), notes=list(raw.notes))
    if raw.stamps_ns.size == 0:
        raise DatasetError(f"{raw.source}: no samples found")
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise DatasetError(f"the output rate must be a positive number of Hz, got {rate}")
    raw, columns = _robot_columns(raw, robot, joint_map, joint_names, report)
    order, stamps = _clean_stamps(raw, columns.col, report)
    grid = _time_grid(raw, order, stamps, rate, report)
    signals, wrench = _resample_signals(raw, columns, grid, report)
    kind = _effort_kind(raw, effort_kind, report)
    report.samples_out = int(grid.grid.size)
    dataset = Dataset(
        t=(grid.grid - grid.t0) / 1e9,
        q=signals["q"],
        dq=signals["dq"],
        tau=signals["tau"],
        joint_names=tuple(columns.target),
        robot=columns.robot_label,
        effort_kind=kind,
        source=raw.source,
        wrench=wrench,
        segment_starts=np.array(grid.seg_starts, dtype=np.int64),
        notes=tuple(report.notes),
        **{k: signals[k] for k in JOINT_SIGNALS},
    )
    return dataset, report


@dataclass
class _Columns:
    """Which source column is which robot joint: ``col[i]`` holds ``target[i]``."""

    col: np.ndarray
    target: tuple[str, ...]
    robot_label: str | None
    mapping: dict[str, str]


def _robot_columns(raw: RawRecording, robot: str | Path | None, joint_map: dict[str, str] | list[str] | str | None,
                   joint_names: list[str] | tuple[str, ...] | None,
                   report: ImportReport) -> tuple[RawRecording, _Columns]:
    """The robot's joints among the source's columns (renamed by the joint map, numbered ones by position), and the
    source's messages that carry them; a recording of another arm, or one lacking joints, is refused."""
    target, robot_label = resolve_robot_joints(robot)
    if joint_names:
        target = tuple(robot_joint_order(joint_names, target, robot_label))
    repeated = duplicated(raw.joint_names)
    if repeated:
        raise DatasetError(
            f"{raw.source} names joint(s) {repeated} more than once ({list(raw.joint_names)}): which column "
            "is the joint is ambiguous; fix the recording so that each joint appears once"
        )
    mapping = parse_joint_map(joint_map)
    names = apply_joint_map(list(raw.joint_names), mapping)
    merged = duplicated(names)
    if merged:
        sources = {m: [o for o, n in zip(raw.joint_names, names, strict=True) if n == m] for m in merged}
        raise DatasetError(f"{raw.source}: the joint map {mapping} renames several joints to the same name: {sources}")
    if any(n.startswith("#") for n in names):  # numbered columns: position decides
        if target is not None and len(target) != len(names):
            raise unnamed_count_error(raw.source, len(names), list(target))
        names = list(target) if target is not None else positional_joint_names(len(names))
        report.notes.append(f"{UNNAMED_NOTE}: assigned by position to " + ", ".join(names))
    if target is None:
        target = tuple(names)
    names, note = read_as_robot(names, target)
    if note:
        report.notes.append(note)
    missing = [j for j in target if j not in names]
    if len(missing) == len(target) and len(target) > 1:  # not one joint in common: another arm, not a naming issue
        raise DatasetError(
            f"{raw.source} has none of the joints of {robot_label or 'the joint list'} (it has {names}, "
            f"{robot_label or 'the robot'} has {list(target)}): it looks like another robot's recording; pick that "
            "robot (--robot)"
            + (f", or if it really is this arm under other names, {rename_hint(names, list(target))}"
               if len(names) >= len(target) else f" ({len(names)} joints against {len(target)}: no renaming makes "
                                                 f"it this arm's)")
        )
    if missing:
        raise DatasetError(f"{raw.source} lacks joints {missing} required by {robot_label or 'the joint list'} "
                           f"(it has {names}); {rename_hint(names, list(target))}")
    col = np.array([names.index(j) for j in target])
    raw, note = messages_with_joints(raw, col, target)
    if note:
        report.notes.append(note)
    return raw, _Columns(col, tuple(target), robot_label, mapping)


def _clean_stamps(raw: RawRecording, col: np.ndarray, report: ImportReport) -> tuple[np.ndarray, np.ndarray]:
    """(order, stamps): the messages sorted by stamp, a re-sent message and one repeating its predecessor's stamp
    with other positions (a stalled clock) dropped, counted in ``report``."""
    stamps = np.asarray(raw.stamps_ns, dtype=np.int64)
    report.out_of_order = int(np.count_nonzero(np.diff(stamps) < 0))
    order = np.argsort(stamps, kind="stable")
    stamps = stamps[order]
    keep = np.concatenate([[True], np.diff(stamps) > 0])
    positions = raw.signals.get("q")
    resent = same_as_previous(positions[order][:, col]) if positions is not None else np.ones(order.size, bool)
    repeated = ~keep & ~resent
    report.duplicates_dropped = int(np.count_nonzero(~keep & ~repeated))
    report.repeated_stamps = int(np.count_nonzero(repeated))
    if report.repeated_stamps:
        first = int(np.flatnonzero(repeated)[0])
        report.warnings.append(
            f"{report.repeated_stamps} message(s) repeat the stamp of the one before with other positions (a "
            f"stalled clock, or stamps not set yet), the first at stamp {int(stamps[first])} ns: dropped"
            + ("; " + option_hint("--stamps", "log", purpose="keep them, placed by the bag's log times",
                                  keyword="stamps='log'") if raw.header_stamps else ""))
    order = order[keep]
    stamps = stamps[keep]
    if stamps.size < 2:
        unit_hint = ""
        if raw.time_column is not None:
            column, unit = raw.time_column
            unit_hint = f"; time column {column!r} was read in {unit}: if that is not its unit, " + option_hint(
                "--time-unit", "s|ms|us|ns", keyword="time_unit='ns'"
            )
        raise DatasetError(
            f"{raw.source}: only {stamps.size} distinct time stamp among {report.samples_in} samples "
            f"({report.duplicates_dropped + report.repeated_stamps} repeat one): a dataset needs at least 2 "
            f"samples{unit_hint}"
        )
    return order, stamps


@dataclass
class _Grid:
    """The uniform time grid of a dataset, per segment, and the cleaned source samples it interpolates."""

    order: np.ndarray  # source message index of each kept stamp
    stamps: np.ndarray  # kept stamps (ns), ascending
    gap_idx: np.ndarray  # indices into stamps where a segment starts after a gap
    period: int  # ns
    grid: np.ndarray  # (T,) ns
    seg_starts: list[int]  # grid index of each segment's first sample
    t0: int  # ns, the first kept stamp

    def resample(self, values: np.ndarray) -> np.ndarray:
        """Linear interpolation of (M, k) values (in source order) onto the grid, per segment."""
        return resample_segments(self.stamps, self.gap_idx, values[self.order], self.grid, self.seg_starts)


def _time_grid(raw: RawRecording, order: np.ndarray, stamps: np.ndarray, rate: float | None,
               report: ImportReport) -> _Grid:
    """The output grid: the source's own rate (median spacing) or ``rate``, split at gaps, stray stamps dropped."""
    own_period = median_period(stamps)
    period = round(1e9 / rate) if rate else own_period
    if period <= 0:
        raise DatasetError(f"{raw.source}: cannot estimate a sample rate (median spacing {period} ns)")
    report.period_ns = period
    gap_ns = GAP_PERIODS * max(period, own_period)
    stray = stray_stamps(stamps, gap_ns)
    if stray.any():
        report.notes.append(stray_note(stamps[stray], stamps[~stray]))
        order, stamps = order[~stray], stamps[~stray]
        if stamps.size < 2:
            raise DatasetError(f"{raw.source}: no two samples lie within {gap_ns / 1e9:.3g} s of each other: "
                               f"every stamp is a stray ({report.notes[-1]})")
    gap_idx = segment_starts(stamps, gap_ns)
    irregular = irregularity(stamps, own_period)
    if irregular:
        report.notes.append(f"{IRREGULAR_NOTE} ({irregular}): interpolated linearly onto a uniform grid")
    if rate and rate > MAX_UPSAMPLING * 1e9 / own_period:
        raise DatasetError(
            f"{raw.source}: an output rate of {rate:g} Hz is {rate * own_period / 1e9:.3g} times the recording's "
            f"own {1e9 / own_period:.4g} Hz (median stamp spacing); above {MAX_UPSAMPLING:g}x the added samples only "
            f"interpolate straight lines between recorded ones: choose --rate {MAX_UPSAMPLING * 1e9 / own_period:.4g} "
            f"or less")
    samples = grid_size(stamps, gap_idx, period)
    if samples > MAX_SAMPLES:
        raise DatasetError(
            f"{raw.source}: {(int(stamps[-1]) - int(stamps[0])) / 1e9:.6g} s at {1e9 / period:.6g} Hz would be "
            f"{samples:,} samples, more than the {MAX_SAMPLES:,} an import writes; choose a lower --rate, check the "
            f"time unit (--time-unit), or split the recording")
    if rate and period != own_period:
        report.notes.append(f"{RESAMPLED_NOTE} from {1e9 / own_period:.4g} Hz (median stamp spacing) to {rate:g} Hz")
    t0 = int(stamps[0])
    grid, seg_starts = segment_grid(stamps, gap_idx, period)
    if grid.size < 2:
        raise DatasetError(
            f"{raw.source}: {stamps.size} samples over {(int(stamps[-1]) - t0) / 1e9:.6g} s give a single "
            f"sample on a {1e9 / period:.6g} Hz grid; a dataset needs at least 2 (choose a higher --rate)"
        )
    for a in gap_idx:
        report.gaps.append(((int(stamps[a]) - t0) / 1e9, (int(stamps[a]) - int(stamps[a - 1])) / 1e9))
    return _Grid(order, stamps, gap_idx, period, grid, seg_starts, t0)


def _resample_signals(raw: RawRecording, columns: _Columns, g: _Grid,
                      report: ImportReport) -> tuple[dict[str, np.ndarray | None], np.ndarray | None]:
    """(per-joint signals, wrench) on the grid; velocities estimated from positions when the source has none."""
    col, target = columns.col, columns.target
    signals: dict[str, np.ndarray | None] = {}
    for name in _PER_JOINT:
        values = raw.signals.get(name)
        if values is None or np.all(np.isnan(values[:, col])):
            signals[name] = None
            continue
        values = values[:, col]
        _check_nan(values, stamps_ns=raw.stamps_ns, name=name, joints=target, source=raw.source)
        signals[name] = g.resample(values)
    if signals["q"] is None:
        raise DatasetError(f"{raw.source}: no joint positions found")
    if signals["tau"] is None:
        raise DatasetError(f"{raw.source}: no joint efforts found (JointState.effort empty / no torque column)")
    if signals["dq"] is None:
        from idyn_ros.data.filters import savgol_derivative

        dq = np.empty_like(signals["q"])
        for i, a in enumerate(g.seg_starts):
            b = g.seg_starts[i + 1] if i + 1 < len(g.seg_starts) else g.grid.size
            dq[a:b] = savgol_derivative(signals["q"][a:b], g.period / 1e9, order=1)
        signals["dq"] = dq
        report.notes.append("no velocities in the source: dq estimated from q (Savitzky-Golay, zero-phase)")
    wrench = None
    if raw.wrench is not None:
        _check_nan(raw.wrench, stamps_ns=raw.stamps_ns, name="wrench", joints=None, source=raw.source)
        wrench = g.resample(raw.wrench)
    for name, (x_ns, joints, values) in raw.extra.items():
        if name == "wrench":  # (M, 6) [f; n], no joints
            wrench = _resample_other(name, x_ns, None, values, g.grid, target, raw.source, report)
        else:
            renamed = apply_joint_map(list(joints), columns.mapping) if joints else joints
            signals[name] = _resample_other(name, x_ns, renamed, values, g.grid, target, raw.source, report)
    return signals, wrench


def _effort_kind(raw: RawRecording, effort_kind: str | None, report: ImportReport) -> str:
    """What the efforts are (torque or motor current: the option, else the source's word, else torque), with the
    notes on it and on the dropped and sorted stamps."""
    kind = effort_kind or raw.effort_hint or "torque"
    if kind not in EFFORT_KINDS:
        raise DatasetError(f"--effort-kind must be one of {EFFORT_KINDS}, got {kind!r}")
    if not (effort_kind or raw.effort_hint):
        report.notes.append(EFFORT_UNSTATED_NOTE)
    if effort_kind and raw.effort_hint and effort_kind != raw.effort_hint:
        report.notes.append(f"effort_kind {raw.effort_hint} stated by the source overridden: {effort_kind} "
                            f"(--effort-kind)")
    if kind == "current" and not any(note.startswith("effort_kind=current") for note in report.notes):
        report.notes.append("effort_kind=current: efforts are motor-current based (e.g. UR drivers), not joint torques")
    if report.duplicates_dropped:
        report.notes.append(f"{report.duplicates_dropped} duplicate stamps dropped")
    if report.repeated_stamps:
        report.notes.append(f"{report.repeated_stamps} repeated stamps with other positions dropped")
    if report.out_of_order:
        report.notes.append(f"{report.out_of_order} out-of-order stamps sorted")
    return kind


def resample(dataset: Dataset, rate: float) -> tuple[Dataset, ImportReport]:
    """``dataset`` on a uniform grid at ``rate`` Hz, through the same cleaning as any source (:func:`to_dataset`).

    For data that is already a :class:`Dataset` (a contract ``.npz``, a recording in memory); a source with its own
    stamps should be imported again with ``rate=`` instead, which interpolates the original samples.
    """
    signals = {name: getattr(dataset, name) for name in ("q", "dq", "tau", *JOINT_SIGNALS)
               if getattr(dataset, name) is not None}
    raw = RawRecording(stamps_ns=np.round(dataset.t * 1e9).astype(np.int64), joint_names=list(dataset.joint_names),
                       signals=signals, source=dataset.source, wrench=dataset.wrench,
                       notes=[x for x in dataset.notes if not x.startswith(RESAMPLED_NOTE)],
                       effort_hint=dataset.effort_kind)
    out, report = to_dataset(raw, rate=rate)
    out.robot, out.notes = dataset.robot, tuple(dict.fromkeys(out.notes))  # the effort note is added again
    return out, report


def duplicated(names: list[str] | tuple[str, ...]) -> list[str]:
    """Names that occur more than once, in first-occurrence order."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        if name in seen and name not in out:
            out.append(name)
        seen.add(name)
    return out


def same_as_previous(values: np.ndarray) -> np.ndarray:
    """(M,) bool: row k equals row k - 1 (NaN equal to NaN); row 0 equals nothing. A message sent twice, not a new
    sample under the same stamp."""
    a, b = values[1:], values[:-1]
    return np.concatenate([[False], ((a == b) | (np.isnan(a) & np.isnan(b))).all(axis=1)])


def median_period(stamps: np.ndarray, baseline: int = 16) -> int:
    """Sample period (ns): median of (t[i+k] - t[i]) / k over k-sample baselines.

    A median ignores gaps and jitter; the k-sample baseline divides the quantisation of stamps that
    were stored as float seconds (1e9-scale epochs keep only ~0.24 us) by k. Exact grids give the
    exact period.
    """
    if stamps.size < 2:
        return 1
    diffs = np.diff(stamps)
    p1 = float(np.median(diffs))
    k = int(min(baseline, diffs.size))
    gaps = np.concatenate([[0], np.cumsum(diffs > GAP_PERIODS * p1)])
    clean = gaps[k:] == gaps[:-k]  # baselines that do not span a gap
    if k < 2 or not clean.any():
        return round(p1)
    return round(float(np.median(((stamps[k:] - stamps[:-k]) / k)[clean])))


def irregularity(stamps: np.ndarray, period: int) -> str:
    """How the spacings of ``stamps`` spread around ``period`` when more than :data:`IRREGULAR_SPREAD` (else "")."""
    diffs = np.diff(stamps)
    diffs = diffs[diffs <= GAP_PERIODS * period]  # gaps are segments, not irregularity
    if diffs.size < 2 or period <= 0:
        return ""
    lo, hi = np.percentile(diffs, [5, 95])
    if hi - lo <= IRREGULAR_SPREAD * period:
        return ""
    return f"middle 90 % of spacings {lo / 1e6:.3g}-{hi / 1e6:.3g} ms around {period / 1e6:.3g} ms"


def segment_starts(stamps: np.ndarray, gap_ns: float) -> np.ndarray:
    """Indices into sorted ``stamps`` where a segment begins: after a jump longer than ``gap_ns`` (no interpolating
    through a pause)."""
    return np.flatnonzero(np.diff(stamps) > gap_ns) + 1


def stray_stamps(stamps: np.ndarray, gap_ns: float) -> np.ndarray:
    """Mask of sorted ``stamps`` alone between gaps: one message with a zero, stale or future clock is no segment
    of the recording, and keeping it would place the recording's start or end on it."""
    bounds = np.concatenate([[0], segment_starts(stamps, gap_ns), [stamps.size]])
    stray = np.zeros(stamps.size, dtype=bool)
    stray[bounds[:-1][np.diff(bounds) == 1]] = True
    return stray


def stray_note(stray_ns: np.ndarray, kept_ns: np.ndarray) -> str:
    """The line saying which stray stamps were dropped and where they lay against the rest of the recording."""
    def where(stamp: int) -> str:
        if not kept_ns.size:
            return f"{stamp} ns"
        if stamp < kept_ns[0]:
            return f"{stamp} ns, {(kept_ns[0] - stamp) / 1e9:.4g} s before the recording"
        if stamp > kept_ns[-1]:
            return f"{stamp} ns, {(stamp - kept_ns[-1]) / 1e9:.4g} s after it"
        return f"{stamp} ns, inside a gap"

    listed = "; ".join(where(int(x)) for x in stray_ns[:5]) + ("; ..." if stray_ns.size > 5 else "")
    return f"{stray_ns.size} sample(s) alone between gaps dropped (a zero, stale or future stamp): {listed}"


def segment_grid(stamps: np.ndarray, starts: np.ndarray, period: int) -> tuple[np.ndarray, list[int]]:
    """(grid ns, index in it where each segment begins): every segment of sorted ``stamps`` (split at ``starts``)
    on its own grid ``first stamp + k * period``, up to the grid point nearest its last stamp."""
    bounds = [0, *np.asarray(starts).tolist(), stamps.size]
    parts: list[np.ndarray] = []
    firsts: list[int] = []
    for a, b in itertools.pairwise(bounds):
        s0, s1 = int(stamps[a]), int(stamps[b - 1])
        k = int(np.floor((s1 - s0) / period + 0.5)) if b - a > 1 else 0
        firsts.append(sum(x.size for x in parts))
        parts.append(s0 + period * np.arange(k + 1, dtype=np.int64))
    return np.concatenate(parts), firsts


def grid_size(stamps: np.ndarray, starts: np.ndarray, period: int) -> int:
    """The number of samples :func:`segment_grid` would make, without making them."""
    bounds = [0, *np.asarray(starts).tolist(), stamps.size]
    return sum(int(np.floor((int(stamps[b - 1]) - int(stamps[a])) / period + 0.5)) + 1 if b - a > 1 else 1
               for a, b in itertools.pairwise(bounds))


def resample_segments(stamps: np.ndarray, starts: np.ndarray, values: np.ndarray, grid: np.ndarray,
                      grid_starts: list[int]) -> np.ndarray:
    """(M, k) ``values`` at sorted ``stamps`` linearly interpolated onto ``grid`` (:func:`segment_grid`), each
    segment from its own samples only."""
    bounds = [0, *np.asarray(starts).tolist(), stamps.size]
    grid_bounds = [*grid_starts, grid.size]
    t0 = int(stamps[0])
    out = np.empty((grid.size, values.shape[1]))
    for (a, b), (g0, g1) in zip(itertools.pairwise(bounds), itertools.pairwise(grid_bounds), strict=True):
        x = (stamps[a:b] - t0).astype(np.float64)
        xg = (grid[g0:g1] - t0).astype(np.float64)
        for c in range(values.shape[1]):
            out[g0:g1, c] = np.interp(xg, x, values[a:b, c]) if b - a > 1 else values[a, c]
    return out


def robot_joint_order(joint_names: Sequence[str], robot_joints: Sequence[str] | None, robot_label: str) -> list[str]:
    """``joint_names`` (``--joints``) when each is a joint of the robot; another robot's joints would be stored
    under this robot's label."""
    foreign = [j for j in joint_names if robot_joints is not None and j not in robot_joints]
    if foreign:
        raise DatasetError(
            f"--joints names {foreign}, which are not joints of robot {robot_label} (its joints: "
            f"{list(robot_joints)}); give a subset or an order of those, or drop --robot for another robot's data"
        )
    return list(joint_names)


def messages_with_joints(raw: RawRecording, columns: np.ndarray, joints: Sequence[str]) -> tuple[RawRecording, str]:
    """(``raw`` without the messages that name none of ``joints``, a note saying how many were skipped).

    Several publishers may share a joint-state topic (an arm and its gripper, each naming its own joints); a
    message naming only some of ``joints`` is refused, since the rest of that state would be invented."""
    if raw.named is None:
        return raw, ""
    named = raw.named[:, columns]
    some = named.any(axis=1)
    partial = np.flatnonzero(some & ~named.all(axis=1))
    if partial.size:
        i = int(partial[0])
        missing = [j for j, has in zip(joints, named[i], strict=True) if not has]
        raise DatasetError(
            f"{raw.source}: {partial.size} message(s) name only some of the joints {list(joints)}; the first, "
            f"message {i} (stamp {int(raw.stamps_ns[i])} ns), lacks {missing}: one state of the arm must come in "
            f"one message (publish the arm's joints from one joint_state_broadcaster)"
        )
    if some.all():
        return raw, ""
    others = sorted({raw.joint_names[c] for c in np.flatnonzero(raw.named[~some].any(axis=0))})
    keep = some
    kept = RawRecording(raw.stamps_ns[keep], raw.joint_names, {k: v[keep] for k, v in raw.signals.items()},
                        raw.source, None if raw.wrench is None else raw.wrench[keep], raw.extra, raw.notes,
                        raw.effort_hint, raw.time_column, raw.named[keep])
    note = (f"{int((~keep).sum())} of {keep.size} messages skipped: they name none of the robot's joints, only "
            f"{others} (another publisher on the topic, e.g. a gripper's)")
    return kept, note


def unnamed_count_error(source: str, n: int, robot_joints: list[str]) -> DatasetError:
    """Unnamed columns that cannot be the robot's joints by position: fewer is another robot; more may be extras."""
    what = f"{source} has {n} unnamed joint columns but the robot has {len(robot_joints)} joints {robot_joints}"
    if n < len(robot_joints):
        return DatasetError(f"{what}: it is another robot's recording; pick that robot")
    return DatasetError(f"{what}: another robot's recording (pick that robot), or this one's with extra columns (a "
                        "gripper): name them all in the recorded order, so that the robot's are found by name: "
                        + option_hint("--joints", ",".join(f"J{i + 1}" for i in range(n)), keyword="joint_names=[...]"))


def positional_joint_names(n: int) -> list[str]:
    """joint1..jointN: the names of columns recorded without names when no robot says which joints they are; a saved
    dataset with exactly these names (and the import's no-names note) is matched to a robot by position later."""
    return [f"joint{i + 1}" for i in range(n)]


def _check_nan(values: np.ndarray, stamps_ns: np.ndarray, name: str, joints, source: str) -> None:
    bad = ~np.isfinite(values)  # an inf too: resampling smeared it over two samples and blamed the one before
    if bad.any() and not bad.all(axis=0).any():
        r, c = np.argwhere(bad)[0]
        where = f"joint {joints[c]!r}" if joints is not None else f"component {c}"
        nan = np.isnan(values[bad])
        kind = "NaN" if nan.all() else "inf" if not nan.any() else "NaN or inf"
        raise DatasetError(
            f"{source}: {int(bad.sum())} {kind} value(s) in {name}, first at sample {r} "
            f"(stamp {int(stamps_ns[r])} ns), {where}; cut or clean the recording"
        )
    if bad.all(axis=0).any() and not bad.all():
        c = int(np.flatnonzero(bad.all(axis=0))[0])
        where = f"joint {joints[c]!r}" if joints is not None else f"component {c}"
        raise DatasetError(f"{source}: {name} is missing entirely for {where} but present for others")


def _resample_other(name, x_ns, joints, values, grid, target, source, report) -> np.ndarray | None:
    """Put a secondary signal (reference, commands) recorded at its own stamps on the grid."""
    if values.size == 0:
        return None
    order = np.argsort(x_ns, kind="stable")
    x = x_ns[order]
    keep = np.concatenate([[True], np.diff(x) > 0])
    x, v = x[keep], values[order][keep]
    if joints:
        missing = [j for j in target if j not in joints]
        if missing:
            report.warnings.append(f"{name}: joints {missing} absent; signal dropped")
            return None
        v = v[:, [joints.index(j) for j in target]]
    elif joints is not None and v.shape[1] != len(target):
        report.warnings.append(f"{name}: {v.shape[1]} values per sample for {len(target)} joints; dropped")
        return None
    if grid[0] < x[0] or grid[-1] > x[-1]:
        report.notes.append(f"{name} covers only part of the recording; held at its first/last value outside it")
    xg = (grid - grid[0]).astype(np.float64)
    xs = (x - grid[0]).astype(np.float64)
    return np.stack([np.interp(xg, xs, v[:, c]) for c in range(v.shape[1])], axis=1)


# ------------------------------------------------------------------------------------ sources
def import_source(
    path: str | Path,
    robot: str | Path | None = None,
    joint_map: dict[str, str] | list[str] | str | None = None,
    joint_names: list[str] | tuple[str, ...] | None = None,
    rate: float | None = None,
    effort_kind: str | None = None,
    recover: bool = False,
    topic: str | None = None,
    wrench_topic: str | None = None,
    time_unit: str | None = None,
    torque_constants: str | list | tuple | np.ndarray | None = None,
    stamps: str = "auto",
) -> tuple[Dataset, ImportReport]:
    """Read any supported source and return ``(Dataset, ImportReport)``.

    Args:
        path: rosbag2 folder, ``.db3``, ``.mcap``, ``.csv`` or ``.npz``.
        robot: preset name or URDF path (joint order); None keeps the source order.
        joint_map: renames (see :func:`parse_joint_map`).
        joint_names: explicit target joint order (overrides ``robot``'s).
        rate: output rate (Hz); default from the median sample spacing.
        effort_kind: ``torque`` or ``current`` (default: torque, or what the source says).
        recover: read the readable part of a damaged/killed bag instead of failing.
        topic: the joint-state (or JointTrajectory) topic of a bag; default ``/joint_states``.
        wrench_topic: WrenchStamped / PlantGroundTruth topic for ``wrench`` (see :func:`read_bag`).
        time_unit: unit of a CSV / foreign-NPZ time column, ``s``/``ms``/``us``/``ns``; None or
            ``auto``: from a ``_ns``-style header suffix, else from the median step (see :data:`PLAUSIBLE_RATE_HZ`).
        torque_constants: per-joint gains k [Nm/A] (output joint order, or a preset name): the efforts are
            motor currents and become torques ``k * i`` (see :func:`convert_currents`).
        stamps: what places a bag's joint states in time, one of :data:`STAMP_SOURCES` (see :func:`read_bag`).
    """
    dataset, report = _import_source(path, robot, joint_map, joint_names, rate, effort_kind, recover, topic,
                                     wrench_topic, time_unit, stamps)
    if torque_constants is not None:
        if effort_kind is None and EFFORT_UNSTATED_NOTE in dataset.notes:  # the source did not say: currents
            dataset.effort_kind = "current"
            report.notes = [x for x in report.notes if x != EFFORT_UNSTATED_NOTE]
        dataset = convert_currents(dataset, torque_constants, report)
    return dataset, report


def convert_currents(dataset: Dataset, torque_constants: object, report: ImportReport | None = None) -> Dataset:
    """The dataset with motor-current efforts [A] turned into joint torques ``tau_j = k_j i_j`` [Nm].

    ``torque_constants``: one gain per joint in the dataset's joint order, or a preset name (robot data).
    A dataset whose source states that its efforts are torques is refused (nothing to convert).
    """
    from dataclasses import replace

    from idyn_ros.robots.drives import parse_torque_constants

    converted = next((x for x in dataset.notes if x.startswith(CONVERTED_NOTE)), None)
    if converted:  # whatever effort_kind says now: a second conversion would scale the torques again
        raise DatasetError(f"{dataset.source}: its efforts are already joint torques ({converted}); drop "
                           f"--torque-constants")
    if dataset.effort_kind != "current":
        raise DatasetError(f"{dataset.source}: its efforts are joint torques (effort_kind {dataset.effort_kind}), "
                           f"not motor currents; drop --torque-constants, or pass --effort-kind current if the "
                           f"source is wrong about it")
    k = parse_torque_constants(torque_constants, dataset.n)
    note = (f"{CONVERTED_NOTE} with torque constants "
            + ", ".join(f"{j}={v:g}" for j, v in zip(dataset.joint_names, k, strict=True)) + " Nm/A")
    if report is not None:
        report.notes.append(note)
    return replace(dataset, tau=dataset.tau * k, effort_kind="torque",
                   notes=(*(x for x in dataset.notes if not x.startswith("effort_kind")), note))


def _import_source(
    path: str | Path,
    robot: str | Path | None,
    joint_map: dict[str, str] | list[str] | str | None,
    joint_names: list[str] | tuple[str, ...] | None,
    rate: float | None,
    effort_kind: str | None,
    recover: bool,
    topic: str | None,
    wrench_topic: str | None,
    time_unit: str | None,
    stamps: str,
) -> tuple[Dataset, ImportReport]:
    """:func:`import_source` without the current conversion."""
    from idyn_ros.data.bag import BagWarning, is_bag
    from idyn_ros.data.bag.metadata import no_recording_in

    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: no such file or folder")
    if time_unit == "auto":
        time_unit = None
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise DatasetError(f"unknown time unit {time_unit!r}: use one of {', '.join(TIME_UNITS)} or auto")
    caught: list[str] = []
    if path.suffix == ".npz":
        data = read_npz(path)
        if {"t", "q", "dq", "tau", "joint_names"} <= set(data) and _time_increases(data["t"]):
            try:
                dataset = Dataset.from_npz_arrays(data, str(path))
            except DatasetError as exc:
                raise DatasetError(f"{path}: {exc}") from None
            target, label = resolve_robot_joints(robot)
            mapping = parse_joint_map(joint_map)
            names = apply_joint_map(list(dataset.joint_names), mapping)
            if duplicated(names):
                raise DatasetError(f"{path}: the joint map {mapping} renames several joints to {duplicated(names)}")
            wanted = robot_joint_order(joint_names, target, label) if joint_names else list(target or ())
            if (wanted and not mapping and any(x.startswith(UNNAMED_NOTE) for x in dataset.notes)
                    and names == positional_joint_names(len(names))):  # imported without a robot: position decides
                if len(wanted) != len(names):
                    raise unnamed_count_error(str(path), len(names), wanted)
                names = list(wanted)
            names, note = read_as_robot(names, wanted)
            dataset.joint_names = tuple(names)
            report = ImportReport(str(path), len(dataset), len(dataset), notes=[note] if note else [])
            relabel = robot_label_conflict(dataset.robot, label, str(path))
            if relabel:
                report.warnings.append(relabel)
                dataset.notes = (*dataset.notes, f"robot label {dataset.robot} replaced by {label} on import")
            if wanted:
                try:
                    dataset = dataset.reorder(wanted)
                except DatasetError as exc:  # it names the source the file was imported from: name the file too
                    raise DatasetError(f"{path}: {exc}") from None
                dataset.robot = label or dataset.robot
            if effort_kind is not None and effort_kind != dataset.effort_kind:
                if effort_kind not in EFFORT_KINDS:
                    raise DatasetError(f"--effort-kind must be one of {EFFORT_KINDS}, got {effort_kind!r}")
                report.notes.append(f"effort_kind {dataset.effort_kind} in the file overridden: {effort_kind}")
                dataset.effort_kind = effort_kind
            if rate is not None:
                if not (math.isfinite(rate) and rate > 0):
                    raise DatasetError(f"the output rate must be a positive number of Hz, got {rate}")
                dataset, regrid = resample(dataset, rate)
                report.samples_out, report.period_ns = len(dataset), regrid.period_ns
                report.notes += [x for x in regrid.notes if x not in report.notes]
            return dataset, report
        raw = read_npz_columns(path, data, time_unit)
        if "effort_kind" in data:  # a contract npz whose stamps need sorting: what it says of its effort still holds
            raw.effort_hint = str(data["effort_kind"].item())
        if "wrench" in data and raw.wrench is None:
            raw.wrench = np.asarray(data["wrench"], dtype=np.float64)
    elif path.suffix == ".csv":
        raw = read_csv(path, time_unit)
    elif path.is_dir() and not is_bag(path):
        raise DatasetError(no_recording_in(path))
    elif is_bag(path):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always", BagWarning)
            raw = read_bag(path, topic=topic, recover=recover, wrench_topic=wrench_topic, stamps=stamps)
        caught = [str(w.message) for w in got if issubclass(w.category, BagWarning)]
        for message in caught:
            warnings.warn(message, BagWarning, stacklevel=2)
    else:
        raise DatasetError(
            f"{path}: unknown format (expected a rosbag2 folder, .db3, .mcap, .csv or .npz; "
            f"got {path.suffix or 'no suffix'})"
        )
    dataset, report = to_dataset(
        raw, robot=robot, joint_map=joint_map, joint_names=joint_names, rate=rate, effort_kind=effort_kind
    )
    report.warnings[:0] = caught
    dataset.notes = (*dataset.notes, *(f"bag reader: {c}" for c in caught))  # a recovered part stays marked as one
    return dataset, report


def _time_increases(t: np.ndarray) -> bool:
    """Whether a contract npz's ``t`` is strictly increasing; if not (stamps out of order or repeated), the file is
    imported like any columns file: sorted and de-duplicated, with notes (``Dataset`` refuses such a time axis)."""
    t = np.asarray(t)
    return t.ndim != 1 or t.size < 2 or bool(np.all(np.diff(t.astype(np.float64)) > 0))


def read_npz_columns(path: Path, data: dict[str, np.ndarray], time_unit: str | None = None) -> RawRecording:
    """A foreign NPZ with named columns (e.g. FloBaRoID ``times/positions/torques/target_*``)."""
    aliases = {
        "t": ("t", "time", "times", "timestamps", "stamp"),
        "q": ("q", "positions", "position", "pos"),
        "dq": ("dq", "velocities", "velocity", "qd", "vel"),
        "ddq": ("ddq", "accelerations", "acceleration", "qdd", "acc"),
        "tau": ("tau", "torques", "torque", "efforts", "effort"),
        "q_d": ("q_d", "target_positions", "positions_desired"),
        "dq_d": ("dq_d", "target_velocities", "velocities_desired"),
        "ddq_d": ("ddq_d", "target_accelerations", "accelerations_desired"),
        "tau_cmd": ("tau_cmd", "target_torques", "commanded_torques"),
    }
    found = {k: next((data[a] for a in names if a in data), None) for k, names in aliases.items()}
    if found["t"] is None or found["q"] is None:
        raise DatasetError(
            f"{path}: unknown NPZ layout (keys {sorted(data)}); need a time key (t/times) and positions (q/positions)"
        )
    t_key = next(a for a in aliases["t"] if a in data)
    t = np.asarray(found["t"], dtype=np.float64).reshape(-1)
    stamps, unit, notes = stamps_ns(t, str(path), t_key, time_unit)
    q = np.atleast_2d(np.asarray(found["q"], dtype=np.float64))
    n = q.shape[1]
    names_arr = next((data[k] for k in ("joint_names", "names", "joints") if k in data), None)
    names = [str(x) for x in names_arr] if names_arr is not None else [f"#{i + 1}" for i in range(n)]
    signals = {k: np.asarray(v, dtype=np.float64) for k, v in found.items() if k != "t" and v is not None}
    for k, v in signals.items():
        if v.shape != (t.size, n):
            raise DatasetError(f"{path}: {k} has shape {v.shape}, expected ({t.size}, {n})")
    return RawRecording(stamps, names, signals, str(path), notes=notes, time_column=(t_key, unit))


_TIME_NAMES = ("t", "time", "times", "timestamp", "stamp", "sec")
#: A time column: one of _TIME_NAMES, optionally with its unit as suffix (``t_ns``, ``time_ms``, ``stamp_s``).
_TIME_COL = re.compile(rf"({'|'.join(_TIME_NAMES)})(?:_({'|'.join(TIME_UNITS)}))?")
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_SUFFIX = {
    "q": ("pos", "position", "q"),
    "dq": ("vel", "velocity", "dq"),
    "ddq": ("acc", "acceleration", "ddq"),
    "tau": ("eff", "effort", "torque", "tau"),
    "q_d": ("pos_d", "position_desired", "q_d"),
    "dq_d": ("vel_d", "velocity_desired", "dq_d"),
    "ddq_d": ("acc_d", "acceleration_desired", "ddq_d"),
    "tau_cmd": ("eff_cmd", "effort_command", "tau_cmd"),
}
_NUMBERED = {
    "q": ("q", "pos", "position"),
    "dq": ("dq", "qd", "vel", "velocity"),
    "ddq": ("ddq", "qdd", "acc", "acceleration"),
    "tau": ("tau", "eff", "effort", "torque"),
    "q_d": ("q_d", "qdes", "q_des"),
    "dq_d": ("dq_d", "dqdes", "dq_des"),
    "ddq_d": ("ddq_d", "ddq_des"),
    "tau_cmd": ("tau_cmd", "tau_c"),
}


def read_csv(path: Path, time_unit: str | None = None) -> RawRecording:
    """CSV, wide (``t, q1..qn`` / ``<joint>_pos, <joint>_vel, <joint>_eff``) or long (``t,joint,position,...``).

    Time column ``t``/``time``/``timestamp``/...; its unit from ``time_unit``, else a header suffix
    (``t_ns``, ``time_ms``), else the median step (:func:`stamps_ns`).
    """
    try:
        return _read_csv(path, time_unit)
    except ValueError as exc:
        raise DatasetError(f"{path}: a cell is not a number ({exc}); fix or remove that row") from None


def _read_csv(path: Path, time_unit: str | None) -> RawRecording:
    rows: list[list[str]] = []
    lines: list[int] = []  # file line number of each kept row, for error messages
    with path.open(newline="", encoding="utf-8-sig") as f:  # utf-8-sig: a spreadsheet's byte-order mark is no header
        reader = csv.reader(f)
        for r in reader:
            if r and not r[0].startswith("#"):
                rows.append(r)
                lines.append(reader.line_num)
    if len(rows) < 2:
        raise DatasetError(f"{path}: CSV has no data rows")
    header = [h.strip() for h in rows[0]]
    lower = [h.lower() for h in header]
    tcol = next((i for i, h in enumerate(lower) if _TIME_COL.fullmatch(h)), None)
    if tcol is None:
        raise DatasetError(
            f"{path}: no time column (one of {', '.join(_TIME_NAMES)}, optionally with a unit suffix such as "
            f"t_ns or time_ms) in header {header}"
        )
    header_unit = _TIME_COL.fullmatch(lower[tcol]).group(2)
    body, body_lines = rows[1:], lines[1:]
    ragged = [(n, len(r)) for r, n in zip(body, body_lines, strict=True) if len(r) != len(header)]
    if ragged:
        listed = ", ".join(f"line {n} ({k} cells)" for n, k in ragged[:5]) + (", ..." if len(ragged) > 5 else "")
        raise DatasetError(
            f"{path}: {len(ragged)} row(s) do not have the header's {len(header)} cells: {listed}; "
            "a cut last line is typical of an interrupted log: delete the incomplete row(s)"
        )

    def to_ns(texts: list[str], where: list[int]) -> tuple[np.ndarray, str, list[str]]:
        values = np.array([_num(x) for x in texts], dtype=np.float64)
        return stamps_ns(
            values, str(path), header[tcol], time_unit, texts=texts, rows=[f"line {n}" for n in where],
            header_unit=header_unit,
        )

    if "joint" in lower and "position" in lower:  # long layout: one row per joint and sample
        jcol = lower.index("joint")
        cols = {k: lower.index(c) for k, c in (("q", "position"), ("dq", "velocity"), ("tau", "effort")) if c in lower}
        if "tau" not in cols and "torque" in lower:
            cols["tau"] = lower.index("torque")
        if "ddq" not in cols and "acceleration" in lower:
            cols["ddq"] = lower.index("acceleration")
        names: list[str] = []
        first_line = {}
        for r, n in zip(body, body_lines, strict=True):
            first_line.setdefault(r[tcol], n)
        uniq = list(first_line)  # distinct stamp texts in order of appearance
        index = {s: i for i, s in enumerate(uniq)}
        for r in body:
            if r[jcol] not in names:
                names.append(r[jcol])
        signals = {k: np.full((len(uniq), len(names)), np.nan) for k in cols}
        for r in body:
            i, j = index[r[tcol]], names.index(r[jcol])
            for k, c in cols.items():
                signals[k][i, j] = _num(r[c])
        stamps, unit, notes = to_ns(uniq, list(first_line.values()))
        return RawRecording(stamps, names, signals, str(path), notes=notes, time_column=(header[tcol], unit))

    values = np.array([[_num(x) for x in r] for r in body], dtype=np.float64)
    stamps, unit, notes = to_ns([r[tcol] for r in body], body_lines)
    per: dict[str, dict[str, int]] = {k: {} for k in _SUFFIX}
    repeated: list[str] = []
    for i, h in enumerate(header):
        if i == tcol:
            continue
        sig, joint = _classify_column(h)
        if sig is None:
            continue
        if joint in per[sig]:
            first = per[sig][joint]
            label = joint if not joint.startswith("#") else f"joint {joint[1:]}"
            repeated.append(f"{label} ({sig}: columns {first + 1} {header[first]!r} and {i + 1} {h!r})")
            continue
        per[sig][joint] = i
    if repeated:
        raise DatasetError(
            f"{path}: the header gives the same joint twice: {'; '.join(repeated)}; which column is the joint "
            "is ambiguous: rename or remove the duplicate column(s)"
        )
    if not per["q"]:
        raise DatasetError(
            f"{path}: no position columns recognised in {header}; name them q1..qn, <joint>_pos or use the long "
            "layout t,joint,position,velocity,effort"
        )
    names = list(per["q"])
    signals = {}
    for sig, mapping in per.items():
        if mapping:
            arr = np.full((values.shape[0], len(names)), np.nan)
            for j, name in enumerate(names):
                if name in mapping:
                    arr[:, j] = values[:, mapping[name]]
            signals[sig] = arr
    return RawRecording(stamps, names, signals, str(path), notes=notes, time_column=(header[tcol], unit))


def stamps_ns(
    values: np.ndarray,
    source: str,
    column: str,
    unit: str | None,
    texts: list[str] | None = None,
    rows: list[str] | None = None,
    header_unit: str | None = None,
) -> tuple[np.ndarray, str, list[str]]:
    """Integer-ns stamps of a time column, the unit it was read in, and a note when that unit was detected.

    Args:
        values: the column as floats; texts: the same cells as written (integer cells convert exactly).
        unit: ``s``/``ms``/``us``/``ns`` given by the user, else ``header_unit`` (a ``_ns``-style
            suffix), else detected: the unit putting 1 / median step in :data:`PLAUSIBLE_RATE_HZ`.
        rows: a label per value for error messages (default ``index i``).
    """
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:  # refused, not dropped: a row without a time cannot be placed, and dropping hides a corrupt log
        label = (lambda i: rows[i]) if rows is not None else (lambda i: f"index {i}")
        listed = ", ".join(label(i) for i in bad[:10]) + (", ..." if bad.size > 10 else "")
        raise DatasetError(
            f"{source}: time column {column!r} is empty or not a finite number in {bad.size} row(s): {listed}; "
            "fix or delete those rows"
        )
    notes: list[str] = []
    chosen = unit or header_unit
    if chosen is None:
        steps = np.diff(np.unique(values))
        if steps.size == 0:
            chosen = "s"  # one distinct stamp: no step to judge by; to_dataset refuses fewer than 2 samples
        else:
            step = float(np.median(steps))
            rates = {u: 1e9 / (step * scale) for u, scale in TIME_UNITS.items()}
            lo, hi = PLAUSIBLE_RATE_HZ
            chosen = next((u for u, r in rates.items() if lo <= r < hi), None)
            if chosen is None:
                raise DatasetError(
                    f"{source}: cannot tell the unit of time column {column!r}: its median step {step:.6g} "
                    f"means {', '.join(f'{r:.3g} Hz in {u}' for u, r in rates.items())}, none within "
                    f"{lo:g}..{hi:g} Hz; " + option_hint("--time-unit", "s|ms|us|ns", keyword="time_unit='s'")
                )
            if chosen != "s":
                notes.append(
                    f"time column {column!r} read in {chosen} (median step {step:.4g} -> {rates[chosen]:.4g} Hz; "
                    f"seconds would give {rates['s']:.3g} Hz); to override, "
                    + option_hint("--time-unit", "s|ms|us|ns", keyword="time_unit='s'")
                )
    scale = TIME_UNITS[chosen]
    exact = texts is not None and all(_INTEGER.fullmatch(x) for x in texts)
    ns = [int(x) * scale for x in texts] if exact else values * scale  # Python ints: exact even for epoch ns
    if values.size and max(abs(max(ns)), abs(min(ns))) >= 2**63:
        raise DatasetError(
            f"{source}: time column {column!r} read in {chosen} overflows int64 nanoseconds (largest value "
            f"{np.abs(values).max():.6g}); " + option_hint("--time-unit", "s|ms|us|ns", keyword="time_unit='ns'")
        )
    return (np.array(ns, dtype=np.int64) if exact else np.round(ns).astype(np.int64)), chosen, notes


def _num(text: str) -> float:
    text = text.strip()
    return float(text) if text else float("nan")


def _classify_column(header: str) -> tuple[str | None, str]:
    """(signal, joint) for a wide-CSV column; numbered columns give joint ``#i``."""
    h = header.strip()
    low = h.lower()
    # longest prefixes first so "ddq1" is not read as "dq" of joint "d..."
    for sig, prefixes in sorted(_NUMBERED.items(), key=lambda kv: -max(len(p) for p in kv[1])):
        for p in sorted(prefixes, key=len, reverse=True):
            m = re.fullmatch(rf"{re.escape(p)}_?(\d+)", low)
            if m:
                return sig, f"#{int(m.group(1))}"
    for sig, suffixes in sorted(_SUFFIX.items(), key=lambda kv: -max(len(s) for s in kv[1])):
        for s in sorted(suffixes, key=len, reverse=True):
            for sep in ("_", ".", "/"):
                if low.endswith(sep + s) and len(h) > len(s) + 1:
                    return sig, h[: -(len(s) + 1)]
    return None, ""


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
