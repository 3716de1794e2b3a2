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

from idyn_ros.data.trajectories import (  # the one minimum-jerk quintic (scalar t: the fast path) and its peaks
    MIN_JERK_PEAK,
    MIN_JERK_PEAK_ACCELERATION,
    min_jerk,
    min_jerk_duration,
)
from idyn_ros.errors import DatasetError

# The checks below use the min-jerk peaks so that a move is judged when it is built, never per tick. Acceleration limits
# are not in URDFs; they come from ``idyn_ros.data.limits`` (unknown: inf, nothing to check against).
# The reference's own moves (the npz move-in) take long enough to peak at half of each joint's velocity (and
# acceleration) limit: the
# user chose neither their distance nor their time, so they get a margin for tracking overshoot and the controller's
# feedback on top of the feedforward (a real arm faults at the limit). Moves the user times are checked against 1.0.
MOVE_IN_VELOCITY_FRACTION = 0.5
DENSE_GAP_S = 2e-3  # samples further apart than this are checked between them too (SampledTrajectory.peak_rates)
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
        # the rest at the end, computed once: hold (the reference node's default) samples it every tick, and min_jerk
        # built three new arrays each time (~6 us); read-only, since every sample returns these same arrays
        self._rest = min_jerk(self.points[-1], self.points[-1], 0.0, 0.0)
        for a in self._rest:
            a.flags.writeable = False

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, dq, ddq) at t s. At and after the end, the same read-only arrays every call (callers copy them:
        the reference node into its message and q_last, the simulator loop into the controller and its record)."""
        if t >= self.duration or not self.durations:
            return self._rest
        i = int(np.searchsorted(self.starts, t, side="right") - 1)
        return min_jerk(self.points[i], self.points[i + 1], self.durations[i], t - self.starts[i])


class SampledTrajectory:
    """A trajectory given as samples (t, q[, dq, ddq]) - a recording, an excitation npz or JointTrajectory points.

    Missing derivatives come from central differences. Between samples: the quintic Hermite through (q, dq, ddq) at
    both ends, and its own derivatives. Decision: q, dq and ddq are one curve however far apart the points are (a
    JointTrajectory's points can be a second apart; a cubic q with linearly interpolated dq and ddq commanded
    accelerations 5x those published on such a move), the same choice joint_trajectory_controller makes when
    accelerations are given.
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
        self._knots = np.stack([self.q, self.dq, self.ddq], axis=1)  # (N, 3, n): two neighbours are one (6, n) view
        self._peaks: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        # the rest at the end, built once (as MinJerkMove's): read-only, the same arrays at every tick after the end
        self._rest = (self.q[-1].copy(), np.zeros(self.q.shape[1]), np.zeros(self.q.shape[1]))
        for a in self._rest:
            a.flags.writeable = False

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, dq, ddq) at t s; at and after the end the same read-only arrays every call (callers copy them)."""
        if t >= self.duration:
            return self._rest
        if t <= 0:
            return self.q[0].copy(), self.dq[0].copy(), self.ddq[0].copy()
        i = int(np.searchsorted(self.t, t, side="right") - 1)
        h = float(self.t[i + 1] - self.t[i])
        out = _quintic_weights((t - float(self.t[i])) / h, h) @ self._knots[i:i + 2].reshape(6, -1)  # one matmul
        return out[0], out[1], out[2]

    def peak_rates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per joint: the largest |dq| and |ddq| the played curve reaches, and the time (s) of each (2, n); computed
        once, when the trajectory is built, never per tick.

        At every sample, from the differences between neighbours (a jump counts), and at 15 points inside each gap
        longer than ``DENSE_GAP_S`` (sparse JointTrajectory points; at 1 kHz the curve between samples adds nothing).
        """
        if self._peaks is None:
            h = np.diff(self.t)[:, None]
            shape = self.q.shape
            candidates = [(np.abs(self.dq), np.abs(self.ddq), np.broadcast_to(self.t[:, None], shape)),
                          (np.abs(np.diff(self.q, axis=0)) / h, np.abs(np.diff(self.dq, axis=0)) / h,
                           np.broadcast_to(self.t[:-1, None], (shape[0] - 1, shape[1])))]
            sparse = np.flatnonzero(h[:, 0] > DENSE_GAP_S)
            if sparse.size:
                s = (np.arange(1, 16) / 16)[:, None]
                hs = h[sparse, 0][None, :]
                pairs = np.concatenate([self._knots[sparse], self._knots[sparse + 1]], axis=1)  # (m, 6, n)
                curve = np.einsum("smkc,mcn->smkn", _quintic_weights(s, hs), pairs)  # (15, m, 3, n)
                times = np.broadcast_to((self.t[sparse][None, :] + s * hs)[:, :, None], curve[:, :, 1].shape)
                candidates.append((np.abs(curve[:, :, 1]).reshape(-1, shape[1]),
                                   np.abs(curve[:, :, 2]).reshape(-1, shape[1]), times.reshape(-1, shape[1])))
            n = np.arange(self.q.shape[1])
            peaks, when = np.zeros((2, n.size)), np.zeros((2, n.size))
            for v, acc, at in candidates:
                for row, rate in ((0, v), (1, acc)):
                    arg = rate.argmax(axis=0)
                    better = rate[arg, n] > peaks[row]
                    peaks[row, better] = rate[arg, n][better]
                    when[row, better] = at[arg, n][better]
            self._peaks = (peaks[0], peaks[1], when)
        return self._peaks


def _quintic_weights(s: float | np.ndarray, h: float | np.ndarray) -> np.ndarray:
    """Quintic Hermite over a gap of h s, at s in [0, 1]: the (3, 6) matrix (per s, h: (..., 3, 6)) that maps the
    gap's ends [q0, dq0, ddq0, q1, dq1, ddq1] to (q, dq, ddq) at s."""
    if not np.isscalar(s) or not np.isscalar(h):
        s, h = np.broadcast_arrays(np.asarray(s, dtype=float), np.asarray(h, dtype=float))
    s2 = s * s
    s3 = s2 * s
    s4 = s3 * s
    s5 = s4 * s
    h2 = h * h
    w = np.array([
        [1 - 10 * s3 + 15 * s4 - 6 * s5, h * (s - 6 * s3 + 8 * s4 - 3 * s5),
         h2 * (0.5 * s2 - 1.5 * s3 + 1.5 * s4 - 0.5 * s5), 10 * s3 - 15 * s4 + 6 * s5,
         h * (-4 * s3 + 7 * s4 - 3 * s5), h2 * (0.5 * s3 - s4 + 0.5 * s5)],
        [(-30 * s2 + 60 * s3 - 30 * s4) / h, 1 - 18 * s2 + 32 * s3 - 15 * s4, h * (s - 4.5 * s2 + 6 * s3 - 2.5 * s4),
         (30 * s2 - 60 * s3 + 30 * s4) / h, -12 * s2 + 28 * s3 - 15 * s4, h * (1.5 * s2 - 4 * s3 + 2.5 * s4)],
        [(-60 * s + 180 * s2 - 120 * s3) / h2, (-36 * s + 96 * s2 - 60 * s3) / h, 1 - 9 * s + 18 * s2 - 10 * s3,
         (60 * s - 180 * s2 + 120 * s3) / h2, (-24 * s + 84 * s2 - 60 * s3) / h, 3 * s - 12 * s2 + 10 * s3],
    ])
    return w if w.ndim == 2 else np.moveaxis(w, (0, 1), (-2, -1))


def limits_problem(q: np.ndarray, joint_names: Sequence[str], lower: np.ndarray, upper: np.ndarray) -> str | None:
    """None, or the first joint whose position in ``q`` ((n,) or (N, n) rad) leaves its limits [lower, upper]."""
    q = np.atleast_2d(np.asarray(q, dtype=float))
    outside = (q < lower) | (q > upper)
    if not outside.any():
        return None
    k, j = np.argwhere(outside)[0]
    return f"{joint_names[j]} = {q[k, j]:g} rad is outside its limits [{lower[j]:g}, {upper[j]:g}]"


def known_limits(limit: Sequence[float] | None) -> np.ndarray | float:
    """Per-joint limits with a missing one (0, negative or non-finite in the URDF; None: no limits at all) as inf:
    nothing to check against, not "every move is too fast"."""
    if limit is None:
        return np.inf
    v = np.asarray(limit, dtype=float)
    return np.where(np.isfinite(v) & (v > 0), v, np.inf)


def move_speed_problem(q_from: Sequence[float], q_to: Sequence[float], duration: float, joint_names: Sequence[str],
                       velocity_limit: Sequence[float],
                       acceleration_limit: Sequence[float] | None = None) -> str | None:
    """None, or the joint most over its velocity (then acceleration) limit at the peaks of a min-jerk move
    q_from -> q_to of ``duration`` s (with the shortest duration that would be within both)."""
    d = np.abs(np.asarray(q_to, dtype=float) - np.asarray(q_from, dtype=float))
    v_limit, a_limit = known_limits(velocity_limit), known_limits(acceleration_limit)
    with np.errstate(divide="ignore", invalid="ignore"):
        peak_v = np.where(d > 0, MIN_JERK_PEAK * d / max(duration, 0.0), 0.0)
        peak_a = np.where(d > 0, MIN_JERK_PEAK_ACCELERATION * d / max(duration, 0.0) ** 2, 0.0)
    a_limit = np.broadcast_to(a_limit, d.shape)
    shortest = min_jerk_duration(np.zeros_like(d), d, np.asarray(v_limit) + 0 * d, a_limit)
    for what, unit, peak, limit in (("peak at", "rad/s", peak_v, v_limit), ("accelerate at", "rad/s^2", peak_a,
                                                                           a_limit)):
        over = peak > limit
        if over.any():
            j = int(np.argmax(np.where(over, peak / limit, 0.0)))
            kind = "velocity" if unit == "rad/s" else "acceleration"
            return (f"{joint_names[j]} would {what} {peak[j]:.4g} {unit} ({d[j]:.4g} rad in {duration:g} s), above "
                    f"its {kind} limit {limit[j]:g} {unit}; this move needs >= {shortest:.3g} s")
    return None


def move_in_duration(q_from: Sequence[float], q_to: Sequence[float], velocity_limit: Sequence[float],
                     acceleration_limit: Sequence[float] | None = None,
                     fraction: float = MOVE_IN_VELOCITY_FRACTION) -> float:
    """Shortest min-jerk duration (s) from ``q_from`` to ``q_to`` peaking at <= ``fraction`` of each velocity and
    acceleration limit."""
    v = fraction * known_limits(velocity_limit)
    a = fraction * np.broadcast_to(known_limits(acceleration_limit), v.shape)
    return min_jerk_duration(np.asarray(q_from, dtype=float), np.asarray(q_to, dtype=float), v, a)


def velocity_problem(traj: SampledTrajectory, joint_names: Sequence[str],
                     velocity_limit: Sequence[float]) -> str | None:
    """None, or the joint most over its velocity limit on the curve ``traj`` plays (``SampledTrajectory.peak_rates``;
    a jump between two samples is a peak there too)."""
    peak_v, _, when = traj.peak_rates()
    return _rate_problem(peak_v, when[0], joint_names, known_limits(velocity_limit), "velocity", "rad/s")


def acceleration_problem(traj: SampledTrajectory, joint_names: Sequence[str],
                         acceleration_limit: Sequence[float] | None) -> str | None:
    """None, or the joint most over its acceleration limit on the curve ``traj`` plays (a velocity step between two
    samples is a peak there too: it reaches the controller's damping as a torque step)."""
    _, peak_a, when = traj.peak_rates()
    return _rate_problem(peak_a, when[1], joint_names, known_limits(acceleration_limit), "acceleration", "rad/s^2")


def _rate_problem(peak: np.ndarray, when: np.ndarray, joint_names: Sequence[str], limit: np.ndarray | float,
                  kind: str, unit: str) -> str | None:
    over = peak > limit
    if not over.any():
        return None
    j = int(np.argmax(np.where(over, peak / limit, 0.0)))
    return (f"{joint_names[j]} reaches {peak[j]:.4g} {unit} at t = {when[j]:.4g} s, above its {kind} limit "
            f"{np.broadcast_to(limit, peak.shape)[j]:g} {unit}")


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
