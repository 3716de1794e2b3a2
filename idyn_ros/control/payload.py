"""Payload identification from recordings: the bare arm from a reference recording or a trained model, the payload
from what is left at the flange (the math: ``idyn_ros.dynamics.payload``), and the excitation that makes it work.

One pipeline for ``idyn payload identify``, ``idyn excite --payload``, the payload_identifier node's
``~/identify_payload`` and the experiments, so offline and online give the same numbers for the same data:

- with a reference (a recording without the payload): one joint least-squares problem over both recordings, the
  bare arm's parameters (inertial 10 n, armature n, friction) shared and left free, the payload's ten only in the
  rows recorded with it. The arm's columns are eliminated by projection (``solve_payload``'s nuisance), so what the
  payload is fitted to is the difference the payload makes at the flange body. The same excitation played twice
  makes the arm's rows nearly identical and its errors (friction shape, unmodelled dynamics) cancel;
- from a flange F/T sensor (``identify_from_wrench``): F = -Y phi directly, no arm model needed (a tool, e.g. the
  gripper of the compensation, identified while it moves without contact);
- with a trained bare-arm model (``.onnx``): the payload is fitted to tau - model(q, dq, ddq), the model run over
  each recording at its own rate (recurrent state carried), with one constant offset per joint left free
  (decision: torque-sensor offsets drift between the model's training data and today);
- preprocessing (decision): ddq as the training data get it (``models.sources``: 5 Hz zero-phase derivative when the
  file has none), then q, dq, ddq and tau (or the residual) through the same zero-phase low-pass (``cutoff_hz``,
  parallel filtering), EDGE_S cut at both ends, and decimated to ``rate_hz``: the excitation is below 1 Hz, and
  100 Hz keeps the solve small.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.dynamics.friction import DEFAULT_KINDS
from idyn_ros.dynamics.payload import TYPICAL_SCALE, PayloadEstimate, joint_regressor, solve_payload
from idyn_ros.errors import DatasetError, IdentificationError, ParameterError

DEFAULT_RATE_HZ = 100.0
DEFAULT_CUTOFF_HZ = 5.0
ARM_FRICTION = DEFAULT_KINDS
EDGE_S = 0.5  # s dropped at both ends of a recording after zero-phase filtering (decision: filter start-up)
# Excitation defaults (decision): 5 harmonics over 10 s (w_f = 0.2 pi rad/s) keep the arm slow enough for medium
# gains to track while the wrist turns the payload through many orientations; shorter than the arm excitation's 20 s
# because ten parameters need less data than ~50 base parameters.
PAYLOAD_HARMONICS = 5
PAYLOAD_PERIOD_S = 10.0
# Wrist-rich by construction (decision): the last three joints may use +-WRIST_RANGE about the centre of their
# range, the others only +-ARM_RANGE, so the payload turns through many orientations with gravity while the arm
# stays near one pose (smaller swept volume, smaller arm torques to model); the optimiser conditions Y inside that.
WRIST_JOINTS = 3
WRIST_RANGE = 2.0  # rad
ARM_RANGE = 0.5  # rad
# Position margin of the design (decision): 10 deg instead of the arm excitation's 2, because the controller that plays
# it does not know the payload yet and sags and overshoots more (Panda joint 6, drive PD, 3 kg: 5 deg past the plan).
POSITION_MARGIN = math.radians(10.0)
SPEED = 0.5  # fraction of the velocity and acceleration limits the design may use (the arm excitation data use 0.3)
# Was the excitation played? (``excitation_problem``; decision: a run the arm did not follow identifies nothing, a
# reference node that refused the plan leaves the arm holding, and a recording of an arm at rest solved to 1.4 kg at
# -195 mm, condition 6e4).
MIN_EXCURSION_FRACTION = 0.5  # measured joint travel (sum of per-joint ranges) below half the planned: not played
# ... and per joint (decision): the sum hid a Panda wrist that did not follow (joint 7: 5 % of its 2.9 rad at the
# default medium gains without rotor inertia in the feedback's M(q), the sum 74 %), whose call answered success with
# the CoM 26 mm off. Joints planned to move less than this (rad) are not judged alone: their range is the sag's order.
MIN_JUDGED_RANGE = 0.05
# Applied only when the data determined it (``payload_verdict``; decision): the designed excitations give 27-200 on the
# plant (docs/benchmarks.md, payload), an arm that did not move 6e4; 1e3 leaves 5x headroom over the worst good run.
MAX_APPLY_CONDITION = 1e3
NO_PAYLOAD_KG = 0.02  # below this (or 3 sigma) the mass is no payload: its CoM, mass moment / mass, is noise


def _lowpass_decimate(t: np.ndarray, arrays: Sequence[np.ndarray], rate_hz: float,
                      cutoff_hz: float) -> tuple[np.ndarray, list[np.ndarray], float]:
    """Zero-phase low-pass every (N, n) array alike, drop EDGE_S at both ends (the zero-phase filters' start-up, here
    and in the ddq derivation), then keep every k-th sample (k = source rate / rate_hz); also the rate achieved (Hz)."""
    from idyn_ros.data.filters import butter_filtfilt

    src = float(1.0 / np.median(np.diff(t)))
    if cutoff_hz >= 0.5 * src * (1 - 1e-6):  # the tolerance: a rate from float stamps is a hair off
        raise ParameterError(f"cutoff {cutoff_hz:g} Hz is not below half the recording's rate ({src:g} Hz), so "
                             f"nothing would be filtered; give a cutoff below {0.5 * src:g} Hz")
    out = arrays
    if len(t) > 30:
        out = [butter_filtfilt(a, src, cutoff_hz) for a in arrays]
    edge = round(EDGE_S * src) if len(t) > 4 * EDGE_S * src else 0
    step = max(1, round(src / rate_hz))
    keep = slice(edge, len(t) - edge, step)
    return t[keep], [np.asarray(a)[keep] for a in out], src / step


def _correlated_noise(est: PayloadEstimate, segments: Sequence[tuple[int, float]], cutoff_hz: float) -> PayloadEstimate:
    """Scale the standard deviations by sqrt(samples / independent samples): after the low-pass only 2 cutoff samples
    per second are independent, so the white-residual formula of ``solve_payload`` would be that much too optimistic.
    ``segments``: (samples, achieved rate in Hz) per decimated recording (not the requested rate: a recording slower
    than that keeps its own)."""
    samples = sum(count for count, _ in segments)
    independent = sum(count * min(1.0, 2.0 * cutoff_hz / rate) for count, rate in segments)
    factor = math.sqrt(samples / independent) if independent > 0 else 1.0
    est.mass_std *= factor
    est.com_std = est.com_std * factor
    est.inertia_std = est.inertia_std * factor
    est.covariance = est.covariance * factor**2
    est.info["std_scale_correlated_noise"] = factor
    return est


def arm_columns(model: Any, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray,
                friction_kinds: Sequence[str] = ARM_FRICTION) -> np.ndarray:
    """The bare arm's unknowns as columns (N, n, 10 n + n + n B): inertial parameters, armature, friction."""
    n = model.n
    Y = np.asarray(model.regressor(q, dq, ddq)).reshape(len(q), n, -1)
    armature = ddq[:, :, None] * np.eye(n)[None]
    cols = [Y, armature]
    if friction_kinds:
        cols.append(np.asarray(model.friction_regressor(dq, friction_kinds)).reshape(len(q), n, -1))
    return np.concatenate(cols, axis=2)


def _offset_columns(N: int, n: int) -> np.ndarray:
    return np.broadcast_to(np.eye(n)[None], (N, n, n)).copy()


def identify_with_reference(model: Any, with_payload: Sequence[Any], reference: Sequence[Any],
                            friction_kinds: Sequence[str] = ARM_FRICTION, rate_hz: float = DEFAULT_RATE_HZ,
                            cutoff_hz: float = DEFAULT_CUTOFF_HZ) -> PayloadEstimate:
    """Payload from recordings with it and without it (``models.sources.Recording``s, model joint order)."""
    if not with_payload or not reference:
        raise DatasetError("need at least one recording with the payload and one without it (--reference)")
    Ap, tau, nuis, segments = [], [], [], []
    for recs, carries in ((with_payload, True), (reference, False)):
        for rec in recs:
            t, (q, dq, ddq, tq), achieved_hz = _lowpass_decimate(rec.t, (rec.q, rec.dq, rec.ddq, rec.tau), rate_hz,
                                                                 cutoff_hz)
            Ap.append(joint_regressor(model, q, dq, ddq) if carries else np.zeros((len(t), model.n, 10)))
            tau.append(tq)
            nuis.append(arm_columns(model, q, dq, ddq, friction_kinds))
            segments.append((len(t), achieved_hz))
    est = _correlated_noise(solve_payload(np.concatenate(Ap), np.concatenate(tau), np.concatenate(nuis)), segments,
                            cutoff_hz)
    est.info.update(mode="reference", rate_hz=rate_hz, cutoff_hz=cutoff_hz, friction=list(friction_kinds))
    return est


def identify_with_model(model: Any, with_payload: Sequence[Any], predict: Callable[[Any], np.ndarray],
                        rate_hz: float = DEFAULT_RATE_HZ, cutoff_hz: float = DEFAULT_CUTOFF_HZ,
                        offsets: bool = True) -> PayloadEstimate:
    """Payload from recordings with it and ``predict(rec) -> (N, n)`` the bare arm's torque at the recorded states."""
    if not with_payload:
        raise DatasetError("need at least one recording with the payload")
    Ap, res, segments = [], [], []
    for rec in with_payload:
        residual = rec.tau - np.asarray(predict(rec), dtype=float)
        t, (q, dq, ddq, r), achieved_hz = _lowpass_decimate(rec.t, (rec.q, rec.dq, rec.ddq, residual), rate_hz,
                                                            cutoff_hz)
        Ap.append(joint_regressor(model, q, dq, ddq))
        res.append(r)
        segments.append((len(t), achieved_hz))
    Ap_all, res_all = np.concatenate(Ap), np.concatenate(res)
    nuisance = _offset_columns(len(res_all), model.n) if offsets else None
    est = _correlated_noise(solve_payload(Ap_all, res_all, nuisance), segments, cutoff_hz)
    est.info.update(mode="model", rate_hz=rate_hz, cutoff_hz=cutoff_hz, offsets=offsets)
    return est


def identify_from_wrench(model: Any, recordings: Sequence[Any], wrenches: Sequence[np.ndarray],
                         rate_hz: float = DEFAULT_RATE_HZ, cutoff_hz: float = DEFAULT_CUTOFF_HZ) -> PayloadEstimate:
    """A tool's parameters from a flange F/T sensor while it moves without contact: the reading is what the tool applies
    to the flange, F = -Y(w, alpha, a, g) phi (+ a constant sensor bias, left free), one row per wrench component
    (the classical F/T identification; ``sim/ft_sensor.py`` for the convention). ``wrenches``: (N, 6) per recording,
    [f N; m Nm] in the flange frame, sampled with the recording's states."""
    from idyn_ros.dynamics.payload import flange_motion

    Ap, F, segments = [], [], []
    for rec, w in zip(recordings, wrenches, strict=True):
        t, (q, dq, ddq, wf), achieved_hz = _lowpass_decimate(
            rec.t, (rec.q, rec.dq, rec.ddq, np.asarray(w, dtype=float)), rate_hz, cutoff_hz)
        Ap.append(-flange_motion(model, q, dq, ddq).regressor())
        F.append(wf)
        segments.append((len(t), achieved_hz))
    A, b = np.concatenate(Ap), np.concatenate(F)
    est = _correlated_noise(solve_payload(A, b, _offset_columns(len(b), 6)), segments, cutoff_hz)
    est.info.update(mode="wrench", rate_hz=rate_hz, cutoff_hz=cutoff_hz)
    return est


def artifact_predictor(model: Any, path: str | Path) -> Callable[[Any], np.ndarray]:
    """``predict(rec)`` of an exported bare-arm model: the runtime stepped over the recording at its rate, the
    recurrent state warmed up at the first sample and carried (as the controller runs it)."""
    from idyn_ros.control.feedforward import FeedforwardComputer

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"model {path} not found; `idyn train ... --out DIR` writes DIR/model.onnx")

    def predict(rec: Any) -> np.ndarray:
        ff = FeedforwardComputer(model, path, "none", rec.rate_hz,
                                 advice=f"give --model an artifact exported for {model.name}")
        ff.warm_up(rec.q[0], rec.dq[0], rec.ddq[0])
        out = np.empty_like(rec.tau)
        for k in range(len(rec.t)):
            out[k] = ff.compute(rec.q[k], rec.dq[k], rec.ddq[k])
        return out

    return predict


def excitation_objective(model: Any) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Stacked payload regressor (rows, 10), columns scaled to a typical payload: what ``optimize_excitation``
    conditions for ``idyn excite --payload`` (the arm is eliminated by the reference run's identical rows)."""

    def objective(q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        return joint_regressor(model, q, dq, ddq).reshape(-1, 10) * TYPICAL_SCALE

    return objective


def payload_limits(limits: Any, arm_range: float = ARM_RANGE, wrist_range: float = WRIST_RANGE,
                   speed: float = SPEED) -> Any:
    """``limits`` with the position ranges narrowed about their centres (WRIST_RANGE / ARM_RANGE above) and the
    velocity and acceleration limits scaled by ``speed``."""
    from idyn_ros.data.trajectories import JointLimits

    n = len(limits.lower)
    centre = 0.5 * (limits.lower + limits.upper)
    half = np.where(np.arange(n) >= n - WRIST_JOINTS, wrist_range, arm_range)
    return JointLimits(np.maximum(limits.lower, centre - half), np.minimum(limits.upper, centre + half),
                       speed * limits.velocity, speed * limits.acceleration)


def design_excitation(model: Any, limits: Any = None, harmonics: int = PAYLOAD_HARMONICS,
                      period: float = PAYLOAD_PERIOD_S, seed: int = 0, time_budget_s: float = 60.0,
                      progress: Callable[[float, float], None] | None = None, arm_range: float = ARM_RANGE,
                      wrist_range: float = WRIST_RANGE, speed: float = SPEED,
                      max_evaluations: int | None = None, workspace: Any = None) -> Any:
    """A Fourier excitation (``data.trajectories.optimize_excitation``) with a well-conditioned payload regressor,
    wrist-rich (``payload_limits``), inside the robot's limits and ``workspace`` (a ``data.workspace.Workspace``;
    None: limits only), both checked at 1 kHz; returns the ExcitationResult
    (``cond_initial`` / ``cond_optimized``: condition numbers of the scaled payload regressor)."""
    from idyn_ros.data.trajectories import JointLimits, optimize_excitation

    limits = payload_limits(limits if limits is not None else JointLimits.from_model(model), arm_range, wrist_range,
                            speed)
    return optimize_excitation(model, limits, harmonics=harmonics, period=period, seed=seed,
                               time_budget_s=time_budget_s, max_evaluations=max_evaluations,
                               position_margin=POSITION_MARGIN, progress=progress,
                               objective=excitation_objective(model), workspace=workspace)


class JointStateLog:
    """Preallocated (t, q, dq, tau) samples of a run (the payload_identifier node's recording; no allocation/tick)."""

    def __init__(self, n: int, capacity: int) -> None:
        self.t = np.zeros(capacity)
        self.q, self.dq, self.tau = np.zeros((capacity, n)), np.zeros((capacity, n)), np.zeros((capacity, n))
        self.size = 0

    def clear(self) -> None:
        self.size = 0

    def append(self, t: float, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> bool:
        """False once full (the caller stops recording)."""
        k = self.size
        if k >= len(self.t):
            return False
        self.t[k], self.q[k], self.dq[k], self.tau[k] = t, q, dq, tau
        self.size = k + 1
        return True

    def recording(self, source: str = "live", rate_hz: float | None = None) -> Any:
        """The samples as a ``models.sources.Recording`` with ddq derived exactly as for a file without ddq; with
        ``rate_hz``, on that rate's even grid."""
        from idyn_ros.data.importers import resample_segments, segment_grid
        from idyn_ros.models.sources import Recording, _ddq_from_dq

        k = self.size
        if k < 100:
            raise IdentificationError(f"only {k} joint states were recorded; is /joint_states published?")
        t = self.t[:k].copy()
        keep = np.concatenate([[True], np.diff(t) > 0])  # duplicates (a republished state) carry no information
        t, q, dq, tau = t[keep], self.q[:k][keep].copy(), self.dq[:k][keep].copy(), self.tau[:k][keep].copy()
        if rate_hz:
            # decision: the states a loaded machine never delivered (13-42 % in bursts of up to 12 ms on 2 cores)
            # are interpolated through, as a file's irregular stamps are on import: the filters and the decimation
            # count samples, not seconds, and the excitation (below 1 Hz) is smooth at that scale
            stamps = np.round(t * 1e9).astype(np.int64)
            grid, firsts = segment_grid(stamps, np.zeros(0, np.int64), round(1e9 / rate_hz))
            q, dq, tau = (resample_segments(stamps, np.zeros(0, np.int64), a, grid, firsts) for a in (q, dq, tau))
            t = grid * 1e-9
        return Recording(t, q, dq, _ddq_from_dq(t, dq), tau, source)


def from_time(rec: Any, t0: float, t1: float = math.inf) -> Any:
    """``rec`` (a ``models.sources.Recording``) from time ``t0`` (s, its clock) on, up to ``t1`` (s) when given."""
    from idyn_ros.models.sources import _slice

    return _slice(rec, slice(int(np.searchsorted(rec.t, t0)), int(np.searchsorted(rec.t, t1, side="right"))))


def rms_error(est: PayloadEstimate, truth: Any) -> dict[str, float]:
    """Errors of an estimate against a known ``Payload``: mass (kg and %), CoM (m, Euclidean), inertia (kg m^2,
    largest element) - the acceptance numbers."""
    from idyn_ros.robots.spec import Payload

    p, true = est.payload, Payload.coerce(truth)
    dm = p.mass - true.mass
    return {"mass_error_kg": float(dm), "mass_error_pct": float(100 * dm / true.mass) if true.mass else math.nan,
            "com_error_m": float(np.linalg.norm(np.subtract(p.com, true.com))),
            "inertia_error_kgm2": float(np.abs(np.subtract(p.inertia, true.inertia)).max())}


def excitation_problem(t_plan: np.ndarray, q_plan: np.ndarray, t_rec: np.ndarray, q_rec: np.ndarray,
                       names: Sequence[str] | None = None) -> str | None:
    """None, or why the recording is not the arm playing the plan: its joints travelled less than
    MIN_EXCURSION_FRACTION of the planned travel (sum of per-joint ranges), or one joint (``names`` for the message)
    less than that fraction of its own planned range (of at least MIN_JUDGED_RANGE), while the plan should have played.

    ``t_plan`` (s, from the plan's origin), ``t_rec`` (s, same origin), positions (N, n). Decision: ranges, not the
    error against the plan in time: when the reference starts playing is not known here to the tick, and an RMS error
    against the plan refused runs that identified the payload to 2 % (a time shift, not a wrong motion)."""
    t_plan, q_plan = np.asarray(t_plan, dtype=float), np.asarray(q_plan, dtype=float)
    t_rec, q_rec = np.asarray(t_rec, dtype=float), np.asarray(q_rec, dtype=float)
    inside = (t_rec >= 0.0) & (t_rec <= t_plan[-1])
    if inside.sum() < 2:
        return f"only {int(inside.sum())} joint states were recorded while the excitation should have played"
    planned = np.ptp(q_plan, axis=0)
    moved = np.ptp(q_rec[inside], axis=0)
    if planned.sum() > 0 and moved.sum() < MIN_EXCURSION_FRACTION * planned.sum():
        return (f"the arm did not play the excitation: its joints travelled {moved.sum():.3g} rad in all (sum of the "
                f"ranges), {100 * moved.sum() / planned.sum():.0f} % of the planned {planned.sum():.3g} rad (at least "
                f"{100 * MIN_EXCURSION_FRACTION:.0f} % needed)")
    behind = np.flatnonzero((planned >= MIN_JUDGED_RANGE) & (moved < MIN_EXCURSION_FRACTION * planned))
    if behind.size:
        names = list(names) if names is not None else [f"joint {j + 1}" for j in range(len(planned))]
        which = ", ".join(f"{names[j]} travelled {moved[j]:.3g} rad of its planned {planned[j]:.3g} "
                          f"({100 * moved[j] / planned[j]:.0f} %)" for j in behind)
        return (f"the arm did not play the excitation: {which}; each joint needs at least "
                f"{100 * MIN_EXCURSION_FRACTION:.0f} % (gains too soft for it? the acceleration-space feedback scales "
                "by the model's M(q), which has no rotor inertia without a model or feedback_armature)")
    return None


def payload_verdict(est: PayloadEstimate) -> tuple[str, str]:
    """("payload" | "no payload" | "undetermined", why): what an estimate says; a payload is applied and written as
    vendor forms as estimated, no payload as an empty flange (mass 0), an undetermined one nowhere.

    Undetermined first: the data did not excite it (condition number above MAX_APPLY_CONDITION; an arm at rest solves
    to some mass with a small-looking band, a standstill UR5 recording 15.4 +- 5.2 kg at condition 3e5, which is no
    evidence of an empty flange). Then no payload: a mass within 3 sigma (or NO_PAYLOAD_KG) of zero, whose CoM is noise.
    Then the payload itself must be physically consistent and plausible. (A plain least-squares solution that was not
    consistent is normal with real data, the small inertia being noisy: the reported payload is then the constrained
    solve, which is checked here like any other.)"""
    from idyn_ros.dynamics.inertia import check_physical_consistency
    from idyn_ros.dynamics.payload import payload_phi

    if not est.condition_number <= MAX_APPLY_CONDITION:
        return "undetermined", (f"the data did not determine the payload: condition number "
                                f"{est.condition_number:.3g} is above {MAX_APPLY_CONDITION:g} (did the arm play the "
                                "excitation with the payload on?)")
    band = max(3.0 * est.mass_std, NO_PAYLOAD_KG)
    if est.payload.mass < band:
        return "no payload", (f"no payload detected: the mass is within {band:.3f} kg of zero, so the CoM and "
                              "inertia mean nothing (was the payload on in the data, and off in the reference?)")
    problems = check_physical_consistency(payload_phi(est.payload), tol=1e-9, names=["payload"])
    if problems:
        return "undetermined", f"the payload is not physically consistent: {'; '.join(problems)}"
    implausible = est.payload.implausible()
    return ("undetermined", f"the payload is implausible: {implausible}") if implausible else ("payload", "")


def _sampler(excitation: Any) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(q, dq, ddq) of an excitation at times t (a FourierTrajectory's ``evaluate``, else ``sample`` per point)."""
    if hasattr(excitation, "evaluate"):
        return excitation.evaluate

    def sample(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = [excitation.sample(float(x)) for x in t]
        return tuple(np.array([r[i] for r in rows]) for i in range(3))

    return sample


def move_in_s(q_now: np.ndarray, excitation: Any, limits: Any, move_speed: float = 0.2) -> float:
    """How long ``excitation_plan``'s move from ``q_now`` to the excitation's start takes (s): from then on every plan
    of one excitation is the same motion, wherever the arm started."""
    from idyn_ros.data.trajectories import min_jerk_duration

    q_start = _sampler(excitation)(np.zeros(1))[0][0]
    return float(min_jerk_duration(q_now, q_start, move_speed * np.asarray(limits.velocity),
                                   move_speed * np.asarray(limits.acceleration)))


def excitation_span(q_now: np.ndarray, excitation: Any, limits: Any, move_speed: float = 0.2,
                    settle_s: float = 1.0) -> tuple[float, float]:
    """(start, end) s from the origin of ``excitation_plan``'s plan where the excitation itself plays: what the node
    identifies from. Decision: not the settle and end holds, where the arm rests and any torque inside its joints'
    dry friction band holds it; which one depends on the motion that led there, and the baseline's call and the next
    arrive from other poses (true Panda through the nodes, feedback with rotor inertia: the CoM of 1.5 kg 9.3 mm off
    with the holds, 3.6 mm without; of 3 kg 6.0 and 4.4 mm)."""
    start = move_in_s(q_now, excitation, limits, move_speed) + settle_s
    return start, start + excitation_duration(excitation)


def excitation_duration(excitation: Any) -> float:
    """s the excitation plays (a sampled trajectory's ``duration``, a Fourier one's ``period``)."""
    return float(getattr(excitation, "duration", None) or excitation.period)


def excitation_plan(q_now: np.ndarray, excitation: Any, limits: Any, rate_hz: float, move_speed: float = 0.2,
                    settle_s: float = 1.0, end_hold_s: float = 0.5) -> tuple[np.ndarray, ...]:
    """What the payload_identifier node sends the reference node: a min-jerk move from ``q_now`` to the excitation's
    start (at ``move_speed`` x the velocity/acceleration limits), ``settle_s`` held there, the excitation
    (``sample(t)``/``duration``, or ``evaluate(t)``/``period``), ``end_hold_s`` held at its end.

    Returns (t, q, dq, ddq): points at ``rate_hz`` from the first period on (t > 0: the reference node starts from
    its current reference, joint_trajectory_controller style).
    """
    from idyn_ros.data.trajectories import min_jerk

    sample = _sampler(excitation)
    duration = excitation_duration(excitation)
    q_start = sample(np.zeros(1))[0][0]
    move = move_in_s(q_now, excitation, limits, move_speed)
    total = move + settle_s + duration + end_hold_s
    t = np.arange(1, math.floor(total * rate_hz) + 1) / rate_hz
    q, dq, ddq = min_jerk(q_now, q_start, move, t)
    inside = (t >= move + settle_s) & (t <= move + settle_s + duration)
    if inside.any():
        q[inside], dq[inside], ddq[inside] = sample(t[inside] - move - settle_s)
    after = t > move + settle_s + duration
    if after.any():
        q_end = sample(np.array([duration]))[0][0]
        q[after], dq[after], ddq[after] = q_end, 0.0, 0.0
    return t, q, dq, ddq
