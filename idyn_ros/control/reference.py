"""Reference trajectories (q_d, dq_d, ddq_d) for the controller: min-jerk moves, recorded/excitation
trajectories (npz), and trajectory_msgs/JointTrajectory-style point lists.

Pure numpy; the reference node samples one of these per tick. Each source answers
``sample(t) -> (q, dq, ddq)`` at time t (s since its start) and ``duration`` (s); after the end it
holds the last point at rest.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from idyn_ros.data.trajectories import (  # the one minimum-jerk quintic (scalar t: the fast path) and its peak
    MIN_JERK_PEAK,
    min_jerk,
    min_jerk_duration,
)
from idyn_ros.errors import DatasetError

# The checks below use MIN_JERK_PEAK so that a move is judged when it is built, never per tick.
# The reference's own moves (the npz move-in) take long enough to peak at half of each joint's velocity limit: the
# user chose neither their distance nor their time, so they get a margin for tracking overshoot and the controller's
# feedback on top of the feedforward (a real arm faults at the limit). Moves the user times are checked against 1.0.
MOVE_IN_VELOCITY_FRACTION = 0.5
START_TOLERANCE_RAD = 1e-3  # a JointTrajectory's first point at time 0 may differ this much from the reference


class MinJerkMove:
    """A sequence of min-jerk moves (:func:`idyn_ros.data.trajectories.min_jerk`) through set points, each
    taking ``durations[i]`` s."""

    def __init__(self, start: Sequence[float], setpoints: Sequence[Sequence[float]], durations: Sequence[float]):
        if len(setpoints) != len(durations):
            raise ValueError(f"{len(setpoints)} set points but {len(durations)} durations")
        self.points = [np.asarray(start, dtype=float)] + [np.asarray(p, dtype=float) for p in setpoints]
        self.durations = [float(d) for d in durations]
        self.starts = np.concatenate([[0.0], np.cumsum(self.durations)])
        self.duration = float(self.starts[-1])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if t >= self.duration or not self.durations:
            return min_jerk(self.points[-1], self.points[-1], 0.0, 0.0)
        i = int(np.searchsorted(self.starts, t, side="right") - 1)
        return min_jerk(self.points[i], self.points[i + 1], self.durations[i], t - self.starts[i])


class SampledTrajectory:
    """A trajectory given as samples (t, q[, dq, ddq]) - a recording or an excitation npz.

    Missing derivatives come from central differences. Between samples: cubic Hermite on
    (q, dq) for q and linear interpolation for dq and ddq (decision: consistent enough at the
    1 kHz sample spacing of excitation files; a spline fit would be smoother but allocates).
    """

    def __init__(self, t: np.ndarray, q: np.ndarray, dq: np.ndarray | None = None, ddq: np.ndarray | None = None):
        t = np.asarray(t, dtype=float)
        q = np.asarray(q, dtype=float)
        if t.ndim != 1 or q.ndim != 2 or q.shape[0] != t.shape[0] or t.shape[0] < 2:
            raise DatasetError(f"trajectory needs t (N,) and q (N, n) with N >= 2, got {t.shape} and {q.shape}")
        bad = [name for name, a in (("t", t), ("q", q), ("dq", dq), ("ddq", ddq))
               if a is not None and not np.all(np.isfinite(a))]
        if bad:  # a NaN is published as the reference otherwise
            raise DatasetError(f"trajectory has non-finite values in {bad}; a reference must be finite everywhere")
        if np.any(np.diff(t) <= 0):
            raise DatasetError("trajectory time stamps must be strictly increasing")
        self.t = t - t[0]
        self.q = q
        self.dq = np.gradient(q, self.t, axis=0) if dq is None else np.asarray(dq, dtype=float)
        self.ddq = np.gradient(self.dq, self.t, axis=0) if ddq is None else np.asarray(ddq, dtype=float)
        self.duration = float(self.t[-1])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if t >= self.duration:
            return self.q[-1].copy(), np.zeros(self.q.shape[1]), np.zeros(self.q.shape[1])
        if t <= 0:
            return self.q[0].copy(), self.dq[0].copy(), self.ddq[0].copy()
        i = int(np.searchsorted(self.t, t, side="right") - 1)
        h = self.t[i + 1] - self.t[i]
        s = (t - self.t[i]) / h
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        q = h00 * self.q[i] + h10 * h * self.dq[i] + h01 * self.q[i + 1] + h11 * h * self.dq[i + 1]
        dq = (1 - s) * self.dq[i] + s * self.dq[i + 1]
        ddq = (1 - s) * self.ddq[i] + s * self.ddq[i + 1]
        return q, dq, ddq


def limits_problem(q: np.ndarray, joint_names: Sequence[str], lower: np.ndarray, upper: np.ndarray) -> str | None:
    """None, or the first joint whose position in ``q`` ((n,) or (N, n) rad) leaves its limits [lower, upper]."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    outside = (q < lower) | (q > upper)
    if not outside.any():
        return None
    k, j = np.argwhere(outside)[0]
    return f"{joint_names[j]} = {q[k, j]:g} rad is outside its limits [{lower[j]:g}, {upper[j]:g}]"


def known_velocity_limits(velocity_limit: Sequence[float]) -> np.ndarray:
    """(n,) rad/s with a missing limit (0, negative or non-finite in the URDF) as inf: nothing to check it against."""
    v = np.asarray(velocity_limit, dtype=float)
    return np.where(np.isfinite(v) & (v > 0), v, np.inf)


def move_speed_problem(q_from: Sequence[float], q_to: Sequence[float], duration: float, joint_names: Sequence[str],
                       velocity_limit: Sequence[float]) -> str | None:
    """None, or the joint most over its velocity limit at the peak of a min-jerk move q_from -> q_to of ``duration`` s
    (with the shortest duration that would not be)."""
    d = np.abs(np.asarray(q_to, dtype=float) - np.asarray(q_from, dtype=float))
    limit = known_velocity_limits(velocity_limit)
    with np.errstate(divide="ignore", invalid="ignore"):
        peak = np.where(d > 0, MIN_JERK_PEAK * d / max(duration, 0.0), 0.0)
    over = peak > limit
    if not over.any():
        return None
    j = int(np.argmax(np.where(over, peak / limit, 0.0)))
    shortest = float(np.max(MIN_JERK_PEAK * d / limit))
    return (f"{joint_names[j]} would peak at {peak[j]:.4g} rad/s ({d[j]:.4g} rad in {duration:g} s), above its "
            f"velocity limit {limit[j]:g} rad/s; this move needs >= {shortest:.3g} s")


def move_in_duration(q_from: Sequence[float], q_to: Sequence[float], velocity_limit: Sequence[float],
                     fraction: float = MOVE_IN_VELOCITY_FRACTION) -> float:
    """Shortest min-jerk duration (s) from ``q_from`` to ``q_to`` peaking at <= ``fraction`` of each velocity limit."""
    v = fraction * known_velocity_limits(velocity_limit)
    return min_jerk_duration(np.asarray(q_from, dtype=float), np.asarray(q_to, dtype=float), v, np.full(len(v), np.inf))


def velocity_problem(traj: SampledTrajectory, joint_names: Sequence[str],
                     velocity_limit: Sequence[float]) -> str | None:
    """None, or the joint most over its velocity limit in ``traj``: the finite differences between its points (a jump
    between two samples counts), then its velocities (given, or central differences)."""
    limit = known_velocity_limits(velocity_limit)
    chord = np.abs(np.diff(traj.q, axis=0)) / np.diff(traj.t)[:, None]
    for what, speed in (("moves at", chord), ("has a velocity of", np.abs(traj.dq))):
        over = speed > limit
        if over.any():
            k, j = np.unravel_index(int(np.argmax(np.where(over, speed / limit, 0.0))), speed.shape)
            when = (f"between t = {traj.t[k]:.4g} and {traj.t[k + 1]:.4g} s" if speed is chord
                    else f"at t = {traj.t[k]:.4g} s")
            return (f"{joint_names[j]} {what} {speed[k, j]:.4g} rad/s {when}, above its velocity limit "
                    f"{limit[j]:g} rad/s")
    return None


def load_npz_trajectory(path: str | Path, joint_names: Sequence[str]) -> SampledTrajectory:
    """Excitation/recorded trajectory from a dataset ``.npz`` (``idyn_ros.data.dataset``): uses q_d/dq_d/ddq_d when
    present (a planned trajectory), else q/dq/ddq; columns reordered by ``joint_names``."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"trajectory file not found: {path}")
    try:
        return _npz_trajectory(path, joint_names)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:  # truncated, not an npz, bad arrays
        raise DatasetError(f"cannot read trajectory {path}: {type(exc).__name__}: {exc}") from None


def _npz_trajectory(path: Path, joint_names: Sequence[str]) -> SampledTrajectory:
    with np.load(path, allow_pickle=False) as data:
        keys = set(data.files)
        if "t" not in keys:
            raise DatasetError(f"{path} has no 't' array (keys: {sorted(keys)})")
        prefix = "q_d" if "q_d" in keys else "q"
        if prefix not in keys:
            raise DatasetError(f"{path} has neither q_d nor q (keys: {sorted(keys)})")
        names = [str(x) for x in data["joint_names"]] if "joint_names" in keys else list(joint_names)
        missing = [j for j in joint_names if j not in names]
        if missing:
            raise DatasetError(f"{path} lacks joints {missing} (has {names})")
        idx = [names.index(j) for j in joint_names]
        suffix = "_d" if prefix == "q_d" else ""
        dq = data[f"dq{suffix}"][:, idx] if f"dq{suffix}" in keys else None
        ddq = data[f"ddq{suffix}"][:, idx] if f"ddq{suffix}" in keys else None
        try:  # SampledTrajectory checks the values (finite, increasing t); the message names the file
            return SampledTrajectory(data["t"], data[prefix][:, idx], dq, ddq)
        except DatasetError as exc:
            raise DatasetError(f"{path}: {exc}") from None


def from_joint_trajectory_points(
    times: Sequence[float], positions: Sequence[Sequence[float]], velocities: Sequence[Sequence[float]] | None,
    accelerations: Sequence[Sequence[float]] | None, start_q: np.ndarray,
) -> SampledTrajectory:
    """trajectory_msgs/JointTrajectory points (time_from_start s) -> trajectory starting at ``start_q``
    (t = 0 is the current position, as joint_trajectory_controller does when the first point has t > 0)."""
    t = np.asarray(times, dtype=float)
    q = np.asarray(positions, dtype=float)
    if t.size == 0:
        raise DatasetError("JointTrajectory has no points")
    jump = float(np.abs(q[0] - start_q).max()) if t[0] <= 0 and q.ndim == 2 and q.shape[1] == len(start_q) else 0.0
    if jump > START_TOLERANCE_RAD:  # decision: refused, not jumped to (a step reference is a step torque)
        raise DatasetError(f"its first point is at time 0 but {jump:.3g} rad from the current reference; give it a "
                           f"time_from_start > 0 (the move there is then planned) or start where the arm is")
    if t[0] > 0:
        t = np.concatenate([[0.0], t])
        q = np.vstack([start_q, q])
        if velocities is not None:
            velocities = np.vstack([np.zeros_like(start_q), velocities])
        if accelerations is not None:
            accelerations = np.vstack([np.zeros_like(start_q), accelerations])
    if t.size == 1:  # a single point at t = 0: hold it
        t = np.array([0.0, 1e-3])
        q = np.vstack([q, q])
        velocities = accelerations = None
    return SampledTrajectory(t, q, velocities, accelerations)
