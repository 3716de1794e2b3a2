"""Turn recordings (rosbag2, CSV, foreign NPZ) into a :class:`~idyn_ros.data.dataset.Dataset`.

Every source is first read into a :class:`~idyn_ros.data.raw.RawRecording` (:mod:`~idyn_ros.data.read_bag`,
:mod:`~idyn_ros.data.read_columns`; stamps in integer ns, per-joint columns
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

import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from idyn_ros.data.dataset import EFFORT_KINDS, JOINT_SIGNALS, Dataset, read_npz
from idyn_ros.data.hints import option_hint, rename_hint
from idyn_ros.data.raw import RawRecording, duplicated
from idyn_ros.data.read_bag import read_bag
from idyn_ros.data.read_columns import TIME_UNITS, read_csv, read_npz_columns
from idyn_ros.errors import DatasetError

__all__ = ["ImportReport", "import_source", "parse_joint_map", "resample", "resolve_robot_joints",
           "to_dataset"]

#: A gap longer than this many sample periods splits the recording into segments.
GAP_PERIODS = 3.0
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
#: Start of the note on a dataset whose motor currents were turned into torques (so a second conversion is refused).
CONVERTED_NOTE = "efforts converted from motor current [A] to torque [Nm]"


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
        wrench_topic: WrenchStamped / PlantGroundTruth topic for ``wrench`` (see
            :func:`~idyn_ros.data.read_bag.read_bag`).
        time_unit: unit of a CSV / foreign-NPZ time column, ``s``/``ms``/``us``/``ns``; None or
            ``auto``: from a ``_ns``-style header suffix, else from the median step (see
            :data:`~idyn_ros.data.read_columns.PLAUSIBLE_RATE_HZ`).
        torque_constants: per-joint gains k [Nm/A] (output joint order, or a preset name): the efforts are
            motor currents and become torques ``k * i`` (see :func:`convert_currents`).
        stamps: what places a bag's joint states in time, one of :data:`~idyn_ros.data.read_bag.STAMP_SOURCES`
            (see :func:`~idyn_ros.data.read_bag.read_bag`).
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

