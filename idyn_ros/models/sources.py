"""Robot and recording loading for identification and training.

The models layer needs two things from below: a robot model (pinocchio model + joint names) and
recordings in the robot's joint order with ``q, dq, ddq, tau``. They come from
``idyn_ros.dynamics.RobotModel`` and ``idyn_ros.data.load_dataset``; this module adapts them to
the small :class:`Recording` the training code uses (float64, checked, in model joint order) and
rejects data that cannot be used with an error that says what to do.

Joint matching (decision): named data is matched by name (extra joints such as gripper fingers are
dropped; a missing robot joint is refused); unnamed data must have exactly the robot's joint count
(refused by the importer otherwise), is taken by position with a warning, and is refused when its
positions leave the robot's joint limits by more than LIMIT_MARGIN (it is then another robot's data:
a KUKA recording taken as a Panda gave val nMSE 887 %). Named data outside the limits only warns.

Sample rate (decision): a model has one rate, since recurrent residuals advance once per sample and the runtime
refuses another rate. It is ``--rate`` when given, else the rate most of the training time was recorded at
(:func:`model_rate`). Every training, validation and test recording off that rate (beyond the runtime's 2 %) or
with irregular stamps is imported again from its file onto a grid at the model rate (linear interpolation of the
recorded samples; ddq derived again as for any recording without one), and a line says so.

Gaps (decision): a file with gaps (a paused recorder, messages a bag dropped; the dataset's ``segment_starts``) loads
as one :class:`Recording` per contiguous segment, here and nowhere else, and a line says so once per file. Everything
above (training windows, recurrent state, Callar's r, hold-out, rate, filters of payload identification) treats a
Recording as one trajectory, so none of it then runs across a gap. An ungapped file is one Recording, as it was.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.data.hints import option_hint
from idyn_ros.data.importers import EFFORT_UNSTATED_NOTE, IRREGULAR_NOTE, UNNAMED_NOTE
from idyn_ros.errors import DatasetError
from idyn_ros.models.artifact import same_rate
from idyn_ros.robots.drives import is_ur_arm

# Decision: calibration offsets and overshoot stay within a few degrees; another robot's data lands tens of degrees out
LIMIT_MARGIN = math.radians(5.0)
# Decision: measured joint torques stay near the URDF's effort limits (a collision peak may pass them); torques in mNm
# land 1000x beyond them, and a model fitted on them commands 1000x torques
EFFORT_MARGIN = 3.0


class TrainingWarning(UserWarning):
    """Something to read before trusting a trained model (little data, data that may not be this robot's)."""


@dataclass
class Recording:
    """One trajectory in model joint order. Units: s, rad, rad/s, rad/s^2, Nm."""

    t: np.ndarray  # (N,)
    q: np.ndarray  # (N, n)
    dq: np.ndarray  # (N, n)
    ddq: np.ndarray  # (N, n)
    tau: np.ndarray  # (N, n) Nm, or motor current A when effort_kind == "current"
    source: str = ""
    effort_kind: str = "torque"  # "current": tau holds motor currents (UR drivers); models.current_gains converts
    irregular_stamps: str = ""  # the importer's note when the source's stamps were irregular ("" = regular)
    segment: str = ""  # "i of k": one contiguous segment of a file with gaps (split_segments); "" = the whole file

    @property
    def n_samples(self) -> int:
        return len(self.t)

    @property
    def rate_hz(self) -> float:
        """Median sample rate in Hz."""
        return float(1.0 / np.median(np.diff(self.t))) if len(self.t) > 1 else 0.0

    @property
    def duration(self) -> float:
        """Seconds from the first to the last sample."""
        return float(self.t[-1] - self.t[0]) if len(self.t) > 1 else 0.0


def load_robot(robot: Any) -> Any:
    """``RobotModel`` for a preset name, a URDF path, or an existing RobotModel (returned as is)."""
    if hasattr(robot, "pin_model"):
        return robot
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot(str(robot))


def _ddq_from_dq(t: np.ndarray, dq: np.ndarray, segment_starts: Sequence[int] = (0,)) -> np.ndarray:
    """Acceleration from velocity when a recording has none: the derivative of dq low-passed at 5 Hz, zero-phase
    (Reuss et al. 2022 Sec. IV-B), each contiguous segment on its own (``segment_starts``: the dataset's; a filter run
    across a gap smears the jump in dq into spikes of ddq); a one-sample segment gets 0."""
    from idyn_ros.data.filters import butter_filtfilt

    fs = 1.0 / float(np.median(np.diff(t)))
    ddq = np.zeros_like(dq)
    bounds = [*(int(s) for s in segment_starts), len(t)]
    for a, b in itertools.pairwise(bounds):
        if b - a > 1:
            ddq[a:b] = np.gradient(butter_filtfilt(dq[a:b], fs, min(5.0, 0.99 * fs / 2)), t[a:b], axis=0)
    return ddq


def to_recording(ds: Any, robot: Any, source: str = "") -> Recording:
    """Reorder a ``Dataset`` to the robot's joint order and check it (names, NaNs, shapes)."""
    effort_kind = getattr(ds, "effort_kind", "torque")
    names = list(getattr(ds, "joint_names", []) or [])
    unnamed = any(note.startswith(UNNAMED_NOTE) for note in getattr(ds, "notes", ()))
    q = np.asarray(ds.q, dtype=np.float64)
    if names:
        missing = [j for j in robot.joint_names if j not in names]
        if missing:
            raise DatasetError(
                f"{source or 'dataset'}: joints {missing} of robot '{robot.name}' are not in the data "
                f"(data has {names}); pick the right --robot or rename the joints: "
                + option_hint("--joint-map", "old=new", keyword="joint_map='old=new'")
            )
        idx = np.array([names.index(j) for j in robot.joint_names])
    elif q.shape[1] == robot.n:
        idx = np.arange(robot.n)
    else:
        raise DatasetError(f"{source}: data has {q.shape[1]} joints, robot '{robot.name}' has {robot.n}")
    t = np.asarray(ds.t, dtype=np.float64)
    dq = np.asarray(ds.dq, dtype=np.float64)[:, idx]
    ddq_raw = getattr(ds, "ddq", None)
    starts = getattr(ds, "segment_starts", (0,))
    ddq = _ddq_from_dq(t, dq, starts) if ddq_raw is None else np.asarray(ddq_raw, dtype=np.float64)[:, idx]
    irregular = next((note.split(":")[0] for note in getattr(ds, "notes", ()) if note.startswith(IRREGULAR_NOTE)), "")
    rec = Recording(t, q[:, idx], dq, ddq, np.asarray(ds.tau, dtype=np.float64)[:, idx], source, effort_kind,
                    irregular)
    for field in ("t", "q", "dq", "ddq", "tau"):
        arr = getattr(rec, field)
        bad = ~np.isfinite(arr)
        if bad.any():
            rows = np.flatnonzero(bad.reshape(len(arr), -1).any(1))
            raise DatasetError(
                f"{source or 'dataset'}: {int(bad.sum())} NaN/inf values in '{field}' (first at sample "
                f"{rows[0]} of {len(arr)}); remove those samples from the recording (no idyn option drops "
                f"them), or re-record"
            )
    check_positions(rec.q, robot, source or "dataset", unnamed)
    if effort_kind == "torque":
        check_efforts(rec.tau, robot, source or "dataset")
    if effort_kind == "torque" and EFFORT_UNSTATED_NOTE in getattr(ds, "notes", ()) and is_ur_arm(robot.joint_names):
        warnings.warn(f"{source or 'dataset'}: the recording does not say whether its effort is joint torque or motor "
                      f"current, and UR drivers publish currents unless run with use_currents_as_efforts:=false; "
                      f"taken as torque [Nm]: pass --effort-kind current if these are currents", TrainingWarning,
                      stacklevel=3)
    if unnamed:
        warnings.warn(f"{source or 'dataset'}: recorded without joint names; its {robot.n} columns are taken as "
                      f"{robot.joint_names[0]}..{robot.joint_names[-1]} of robot '{robot.name}' by position",
                      TrainingWarning, stacklevel=3)
    return rec


def check_positions(q: np.ndarray, robot: Any, source: str, unnamed: bool,
                    joints: Sequence[str] | None = None) -> None:
    """The joint-limit rule of the module doc (robots without limits, e.g. continuous joints, pass): ``q``'s columns
    are the robot's ``joints`` (default: all of them, in its order). `idyn dataset import` applies it too when it
    assigns unnamed columns to a robot by position."""
    names = list(robot.joint_names)
    idx = np.arange(len(names)) if joints is None else np.array([names.index(j) for j in joints], dtype=int)
    lower = np.asarray(getattr(robot, "lower", np.full(len(names), -np.inf)), dtype=np.float64)[idx]
    upper = np.asarray(getattr(robot, "upper", np.full(len(names), np.inf)), dtype=np.float64)[idx]
    lo, hi = q.min(0), q.max(0)
    with np.errstate(invalid="ignore"):
        beyond = np.fmax(np.where(np.isfinite(lower), lower - lo, 0.0), np.where(np.isfinite(upper), hi - upper, 0.0))
    out = np.flatnonzero(beyond > LIMIT_MARGIN)
    if not out.size:
        return
    j = int(out[np.argmax(beyond[out])])
    detail = (f"{names[idx[j]]} spans [{lo[j]:.2f}, {hi[j]:.2f}] rad, limits [{lower[j]:.2f}, {upper[j]:.2f}]"
              + (f"; {out.size} joints out" if out.size > 1 else ""))
    what = (f"{source}: joint positions leave the limits of robot '{robot.name}' by up to "
            f"{math.degrees(beyond[j]):.0f} deg ({detail})")
    if unnamed:
        raise DatasetError(f"{what} and the file has no joint names, so it is likely another robot's data: pick the "
                           f"robot it was recorded on (--robot); if it is this robot's with its columns in another "
                           f"order, name them in the recorded order (`idyn dataset import FILE --robot "
                           f"ROBOT --joints J1,..,J{len(names)} -o OUT.npz`)")
    warnings.warn(f"{what}; check joint offsets and units (rad)", TrainingWarning, stacklevel=4)


def check_efforts(tau: np.ndarray, robot: Any, source: str) -> None:
    """Warn when joint torques ``tau`` (robot joint order, Nm) pass the robot's effort limits by more than
    ``EFFORT_MARGIN`` times on some joint (robots without limits pass): most likely not in Nm."""
    limit = np.asarray(getattr(robot, "effort_limit", ()), dtype=np.float64).reshape(-1)
    if limit.shape != (tau.shape[1],) or not len(tau):
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.isfinite(limit) & (limit > 0), np.abs(tau).max(0) / limit, 0.0)
    if not ratio.max() > EFFORT_MARGIN:
        return
    j = int(np.argmax(ratio))
    beyond = int((ratio > EFFORT_MARGIN).sum())
    warnings.warn(f"{source}: joint torques reach {ratio[j]:.3g}x the effort limit of robot '{robot.name}' "
                  f"({robot.joint_names[j]}: |tau| up to {np.abs(tau[:, j]).max():.4g} Nm, limit {limit[j]:g} Nm"
                  + (f"; {beyond} joints beyond {EFFORT_MARGIN:g}x" if beyond > 1 else "")
                  + "): check the effort unit (Nm expected; mNm reads 1000x) and the robot; a model fitted on them "
                    "predicts torques the arm cannot give", TrainingWarning, stacklevel=4)


def load_recordings(paths: Sequence[str | Path], robot: Any, effort_kind: str | None = None,
                    rate_hz: float | None = None, say: Callable[[str], None] | None = None) -> list[Recording]:
    """The recordings of all ``paths`` (:func:`load_file` of each, in order): one per contiguous segment."""
    return [rec for path in paths for rec in load_file(path, robot, effort_kind, rate_hz, say)]


def load_file(path: str | Path, robot: Any, effort_kind: str | None = None, rate_hz: float | None = None,
              say: Callable[[str], None] | None = None) -> list[Recording]:
    """One path (anything ``idyn_ros.data.load_dataset`` reads) in the robot's joint order, as one Recording per
    contiguous segment (module doc; one for a file without gaps). For what reports per file (`idyn evaluate`).

    Files without joint names (e.g. FloBaRoID npz) get the robot's names by column position;
    ``effort_kind`` (torque | current) overrides what the file says its effort is. With ``rate_hz``, a
    recording off that rate or with irregular stamps is imported again onto a grid at ``rate_hz`` (module doc)
    and ``say`` gets one line about it; ``say`` is also told how a file with gaps was split.
    """
    rec, starts = _load(path, robot, effort_kind, say=say)
    if rate_hz is not None:
        rec, starts = _at_rate(rec, starts, path, robot, effort_kind, rate_hz, say)
    return split_segments(rec, starts, say)


def load_split(train: Sequence[str | Path], val: Sequence[str | Path], test: Sequence[str | Path], robot: Any,
               effort_kind: str | None = None, rate_hz: float | None = None,
               say: Callable[[str], None] | None = None) -> tuple[list[Recording], list[Recording],
                                                                   list[Recording], float]:
    """(train, val, test recordings, model rate): all at the rate of :func:`model_rate` (module doc)."""
    native = [_load(path, robot, effort_kind, say=say) for path in train]
    rate, why = model_rate([seg for rec, starts in native for seg in split_segments(rec, starts)], rate_hz)
    if say is not None:
        say(f"model rate {rate:g} Hz ({why})")
    train_recs = [seg for (rec, starts), p in zip(native, train, strict=True)
                  for seg in split_segments(*_at_rate(rec, starts, p, robot, effort_kind, rate, say), say)]
    return (train_recs, load_recordings(val, robot, effort_kind, rate, say),
            load_recordings(test, robot, effort_kind, rate, say), rate)


def split_segments(rec: Recording, starts: Sequence[int], say: Callable[[str], None] | None = None
                   ) -> list[Recording]:
    """``rec`` (a whole file, ``starts`` its dataset's ``segment_starts``) as one Recording per contiguous segment,
    each ``source`` naming the file and the segment; ``rec`` itself when it has no gap. ``say`` gets one line when
    the file is split."""
    bounds = [*(int(s) for s in starts), rec.n_samples]
    if len(bounds) <= 2:
        return [rec]
    pieces = list(itertools.pairwise(bounds))
    k = len(pieces)
    # Decision: a one-sample segment is dropped (no rate, no derivative, no step to train or score on; the importer
    # drops a stamp alone between gaps alike); two samples or more are kept (training batches short recordings apart)
    out = [replace(_slice(rec, slice(a, b)), segment=f"{i} of {k}",
                   source=f"{rec.source} (segment {i} of {k}, {rec.t[a]:.1f}-{rec.t[b - 1]:.1f} s)")
           for i, (a, b) in enumerate(pieces, 1) if b - a > 1]
    if not out:
        raise DatasetError(f"{rec.source}: all {k} segments between its gaps are single samples; there is no "
                           f"stretch of motion to use: re-record or re-import the source")
    if say is not None:
        gap = max(rec.t[a] - rec.t[a - 1] for a in bounds[1:-1])
        dropped = k - len(out)
        say(f"{rec.source}: {k} contiguous segments (gaps of up to {gap:.3g} s); "
            + (f"{dropped} of a single sample dropped, the other {len(out)} " if dropped else "")
            + "taken as separate recordings, so no training window, filter or recurrent state spans a gap")
    return out


def model_rate(recs: Sequence[Recording], requested: float | None = None) -> tuple[float, str]:
    """(rate Hz, why): ``requested``, else the rate holding most of the recorded seconds of ``recs``.

    Recordings within the runtime's tolerance of each other count as one rate (its value: the longest one's).
    Decision: seconds, not samples, so a fast logger does not outvote most of the motion; a tie goes to the
    higher rate, since downsampling loses less than upsampling invents.
    """
    if requested is not None:
        if not (math.isfinite(requested) and requested > 0):
            raise DatasetError(f"--rate must be a positive number of Hz, got {requested}")
        return float(requested), "--rate"
    groups: list[list[Recording]] = []
    for r in sorted((r for r in recs if r.n_samples > 1), key=lambda r: -r.rate_hz):
        group = next((g for g in groups if same_rate(r.rate_hz, g[0].rate_hz)), None)
        if group is None:
            groups.append([r])
        else:
            group.append(r)
    if not groups:
        raise DatasetError("no training recording has 2 samples or more: there is no sample rate to train at")
    seconds = [sum(r.duration for r in g) for g in groups]
    best = int(np.argmax(seconds))  # first of equals: the higher rate
    rate = 1e9 / round(1e9 / max(groups[best], key=lambda r: r.duration).rate_hz)  # its grid period in whole ns
    if len(groups) == 1:
        return rate, "the rate of all training recordings"
    return rate, (f"the rate of {seconds[best]:.1f} s of the {sum(seconds):.1f} s of training data; the rest is "
                  f"resampled to it, --rate chooses another")


def _load(path: str | Path, robot: Any, effort_kind: str | None, rate_hz: float | None = None,
          say: Callable[[str], None] | None = None) -> tuple[Recording, np.ndarray]:
    """(the whole file as one Recording, its dataset's ``segment_starts``): what :func:`split_segments` splits."""
    from idyn_ros.data import load_dataset
    from idyn_ros.data.importers import is_renaming_note, robot_label_conflict

    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: no such file or folder")
    try:
        ds = load_dataset(path, joint_names=list(robot.joint_names), effort_kind=effort_kind, rate=rate_hz)
    except DatasetError as exc:  # an imported dataset's errors name the source it came from: name the file given too
        if str(path) in str(exc):
            raise
        raise DatasetError(f"{path}: {exc}") from None
    conflict = robot_label_conflict(getattr(ds, "robot", ""), robot.name, str(path))  # refuses two presets
    if conflict:
        warnings.warn(conflict, TrainingWarning, stacklevel=3)
    if say is not None:  # e.g. franka_ros2's fer_* names read as the Panda's: said, as `idyn dataset import` says it
        for note in filter(is_renaming_note, getattr(ds, "notes", ())):
            say(f"{path}: {note}")
    return to_recording(ds, robot, source=str(path)), ds.segment_starts


def _at_rate(rec: Recording, starts: np.ndarray, path: str | Path, robot: Any, effort_kind: str | None,
             rate_hz: float, say: Callable[[str], None] | None) -> tuple[Recording, np.ndarray]:
    """``(rec, starts)`` (as :func:`_load` loaded ``path``), or ``path`` imported again at ``rate_hz`` when the
    module doc says so (its segments then those of the new grid)."""
    if rec.n_samples < 2 or (same_rate(rec.rate_hz, rate_hz) and not rec.irregular_stamps):
        return rec, starts
    if round(1e9 / rec.rate_hz) == round(1e9 / rate_hz):  # irregular, but already on the model's grid
        if say is not None:
            say(f"{rec.source}: {rec.irregular_stamps}; on the model's {rate_hz:g} Hz grid")
        return rec, starts
    with warnings.catch_warnings():  # the first import has shown them
        warnings.simplefilter("ignore")
        out, out_starts = _load(path, robot, effort_kind, rate_hz)
    if say is not None:
        why = f"; {rec.irregular_stamps}" if rec.irregular_stamps else ""
        say(f"{rec.source}: resampled from {rec.rate_hz:.4g} Hz to the model's {rate_hz:g} Hz "
            f"({rec.n_samples} -> {out.n_samples} samples{why})")
    return out, out_starts


# Decision: without validation recordings, the last 20 % of the training samples is held out: a tail, not random
# samples, so no training window overlaps it and the held-out part is motion the model never saw (with several
# recordings it is the end of the last ones, i.e. as close to a split by trajectory as the data allow).
HOLDOUT_FRACTION = 0.2


# a recording cut shorter than this for the tail is held out whole (when another stays for training): its head would
# be a training piece shorter than the default window, and a batch's windows all take the shortest piece's length
MIN_HEAD_SAMPLES = 200


def hold_out_tail(recs: Sequence[Recording], fraction: float = HOLDOUT_FRACTION) -> tuple[list[Recording],
                                                                                           list[Recording], str]:
    """(training part, held-out tail, one-line description) of recordings, cut ``fraction`` of all samples from
    the end of the concatenation (whole trailing recordings, then the tail of the one before)."""
    if not 0 < fraction < 1:
        raise DatasetError(f"hold-out fraction must be in (0, 1), got {fraction}")
    total = sum(r.n_samples for r in recs)
    need = max(2, math.ceil(fraction * total))
    if total - need < 2:
        raise DatasetError(f"{total} training samples are too few to hold out a validation tail; record more or "
                           f"pass --val")
    train, held = list(recs), []
    parts = []
    while need > 0:
        r = train.pop()
        if r.n_samples <= need:
            held.insert(0, r)
            need -= r.n_samples
            parts.insert(0, f"all of {r.source or 'a recording'}")
            continue
        cut = r.n_samples - need
        if cut < MIN_HEAD_SAMPLES and train:  # a sliver of a head would shrink every training batch it joins
            held.insert(0, r)
            parts.insert(0, f"all of {r.source or 'a recording'}")
            break
        train.append(_slice(r, slice(0, cut)))
        held.insert(0, _slice(r, slice(cut, None)))
        parts.insert(0, f"{r.t[-1] - r.t[cut]:.1f} s tail of {r.source or 'a recording'}")
        need = 0
    what = (f"no validation recordings: held out the last {100 * fraction:.0f} % of the training data "
            f"({', '.join(parts)}) for early stopping, the residual gate and selection")
    return train, held, what


def _slice(r: Recording, sl: slice) -> Recording:
    """The samples ``sl`` of a recording (a contiguous piece, times kept)."""
    return replace(r, t=r.t[sl], q=r.q[sl], dq=r.dq[sl], ddq=r.ddq[sl], tau=r.tau[sl])


def fingerprint(recs: Sequence[Recording]) -> str:
    """sha256 over the training arrays (t, q, dq, ddq, tau as float64, in order)."""
    h = hashlib.sha256()
    for r in recs:
        for a in (r.t, r.q, r.dq, r.ddq, r.tau):
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()
