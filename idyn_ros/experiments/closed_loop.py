"""In-process closed loop: the controller node's classes stepping ``sim.Plant`` in lockstep at 1 kHz.

Why in-process (decision): the tracking table needs hundreds of seconds of closed-loop motion per
robot; over DDS that costs real time and its numbers depend on the machine's load. The lockstep DDS
loop (``idyn_ros.nodes.plant`` in ``clock_mode=lockstep``) does exactly this per tick: publish the
state, wait for the command computed from it, step the plant one control period with it. So we do
the same calls in one process: ``state -> FeedforwardComputer.compute -> law.impedance_torque ->
TorqueLimiter.apply -> Plant.step``. The command latency is identical in both: the plant profile's
``latency_ticks`` (1 tick for the true profiles) delays the command inside the plant, and lockstep adds
none. ``idyn_ros.experiments.dds`` runs the same cell over DDS as a cross-check.

Nothing here re-implements control: the law, limiter, safe torque, watchdog, feedforward (model or
RBD fallback) and DOOMED are the ``idyn_ros.control`` classes; the plant is ``idyn_ros.sim.Plant``.

Safety layer (a run that trips it is *failed*, as in Reuss et al. 2022 Table III where the black-box
LSTM "hit joint limits immediately"): a joint within ``limit_margin`` of its position limit, a
command saturated at the effort limit for longer than ``saturation_timeout`` s, or a non-finite
value anywhere (the controller watchdog's NaN check). The failed episode stops at the trip and keeps
the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from idyn_ros.control import law
from idyn_ros.control.doomed import Doomed
from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.control.rbd import RigidBodyTerms
from idyn_ros.control.watchdog import Watchdog
from idyn_ros.errors import ParameterError

GAIN_NAMES = law.PRESET_NAMES  # ("soft", "medium", "stiff")


class Reference(Protocol):
    """What the loop samples each tick: ``sample(t) -> (q_d, dq_d, ddq_d)`` (rad, rad/s, rad/s^2)."""

    duration: float

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


class HoldReference:
    """Hold ``q`` at rest forever (rad)."""

    def __init__(self, q: np.ndarray, duration: float = 0.0) -> None:
        self.q = np.asarray(q, dtype=float).copy()
        self.zero = np.zeros_like(self.q)
        self.duration = float(duration)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.q, self.zero, self.zero


class FourierReference:
    """Adapter: ``idyn_ros.data.trajectories.FourierTrajectory`` (vectorised ``evaluate``) -> ``sample``."""

    def __init__(self, traj: Any, periods: float = 1.0) -> None:
        self.traj = traj
        self.duration = float(traj.period * periods)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, dq, ddq = self.traj.evaluate(np.array([min(t, self.duration)]))
        if t >= self.duration:
            return q[0], np.zeros_like(q[0]), np.zeros_like(q[0])
        return q[0], dq[0], ddq[0]


# ------------------------------------------------------------------------------------------ gains
def _flatten(prefix: str, node: Any, out: dict[str, Any]) -> dict[str, Any]:
    """Nested YAML dict -> dotted keys (``presets: {soft: {kp: [...]}}`` -> ``presets.soft.kp``)."""
    if isinstance(node, dict):
        for k, v in node.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = node
    return out


def config_section(robot: str, node: str) -> dict[str, Any]:
    """Parameters of ``node`` from ``config/<robot>.yaml``: its ``/**/<node>`` section over ``/**``
    (dotted keys; {} when the file is absent). ``_section`` names the file and section used."""
    try:
        import yaml

        from idyn_ros.paths import config_dir

        path = config_dir() / f"{robot}.yaml"
        data = yaml.safe_load(path.read_text()) if path.is_file() else {}
    except Exception:  # a broken config must not hide the experiment: fall back (named in `source`)
        return {}
    merged: dict[str, Any] = {}
    for name, body in (data or {}).items():
        if isinstance(body, dict) and (name == "/**" or str(name).endswith(f"/{node}") or name == node):
            flat = _flatten("", body.get("ros__parameters", {}), {})
            if name == "/**":
                for k, v in flat.items():
                    merged.setdefault(k, v)
            else:
                merged.update(flat)
                merged["_section"] = f"config/{robot}.yaml [{name}]"
    return merged


@dataclass
class LoopConfig:
    """Controller settings for one run (the controller node's parameters, resolved).

    kp (n,) in 1/s^2 (acceleration-space feedback) or Nm/rad (torque space); kd likewise (1/s or
    Nm s/rad); torque_rate_limit Nm/s; saturation_timeout s; limit_margin rad.
    """

    gain: str
    kp: np.ndarray
    kd: np.ndarray
    feedback_space: str = "acceleration"
    torque_rate_limit: float = 1000.0
    effort_scale: float = 1.0
    saturation_timeout: float = 0.5
    limit_margin: float = math.radians(0.2)
    source: str = ""


def loop_config(robot: str, gain: str, n: int, rbd: RigidBodyTerms | None = None) -> LoopConfig:
    """Gains for ``gain`` in soft|medium|stiff from ``config/<robot>.yaml`` (controller section), else the
    controller's declared defaults (Reuss et al. 2022 Panda values, truncated to n joints)."""
    if gain not in GAIN_NAMES:
        raise ParameterError(f"gain preset must be one of {GAIN_NAMES}, got {gain!r}")
    cfg = config_section(robot, "controller")
    kp = cfg.get(f"presets.{gain}.kp")
    if kp is not None and len(kp) == n:
        source = cfg.get("_section", f"config/{robot}.yaml")
    else:
        from idyn_ros.nodes.parameters import CONTROLLER

        default = {p.name: p.default for p in CONTROLLER}[f"presets.{gain}.kp"]
        kp = (list(default) + [default[-1]] * n)[:n]
        source = "idyn_ros.nodes.parameters defaults (Reuss et al. 2022 Panda presets)"
    kp = np.asarray(kp, dtype=float)
    space = str(cfg.get("feedback_space", "acceleration"))
    zeta = float(cfg.get("damping_ratio", 1.0))
    if space == "torque":
        if rbd is None:
            raise ParameterError("torque-space feedback needs the rigid-body terms for critical damping")
        # same decision as the controller node: Kd = 2 zeta sqrt(Kp M_jj) at the neutral pose
        inertia = np.diag(rbd.mass_matrix(np.zeros(n)))
        kd = law.critical_damping(kp, zeta, "torque", inertia)
    else:
        kd = law.critical_damping(kp, zeta)
    return LoopConfig(gain, kp, kd, space, float(cfg.get("torque_rate_limit", 1000.0)),
                      float(cfg.get("effort_scale", 1.0)), source=source)


# ------------------------------------------------------------------------------------------ episode
@dataclass
class DoomedHook:
    """DOOMED in the loop as the doomed node does it: pair the measured acceleration (dq_k - dq_{k-1})/dt
    with the acceleration command of tick k-1, step size scaled by diag M(q) (``inertia_scaled``); the
    new offset reaches the command one tick later (one more DDS hop)."""

    learner: Doomed
    inertia_scaled: bool = True
    record: bool = False
    errors: list = field(default_factory=list)  # e = ddq_cmd - ddq_meas per update (rad/s^2), if record


@dataclass
class Episode:
    """One closed-loop run, arrays (N, n) in plant joint order; SI units (s, rad, rad/s, Nm).

    ``tau`` is the plant's measured joint torque (the /joint_states effort), ``tau_cmd`` the command
    the controller sent. ``failed``/``reason`` come from the safety layer; ``t_fail`` s.
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    q_d: np.ndarray
    dq_d: np.ndarray
    ddq_d: np.ndarray
    tau: np.ndarray
    tau_cmd: np.ndarray
    tau_ff: np.ndarray
    offset: np.ndarray
    tau_ext: np.ndarray
    ddq_true: np.ndarray
    failed: bool = False
    reason: str = ""
    t_fail: float = math.nan
    move_start: float = 0.0
    move_end: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def move_slice(self) -> slice:
        """Samples with move_start <= t <= move_end (the part the metrics use)."""
        i0 = int(np.searchsorted(self.t, self.move_start - 1e-9))
        i1 = int(np.searchsorted(self.t, self.move_end + 1e-9))
        return slice(i0, i1)


def run_episode(
    plant: Any,
    rbd: RigidBodyTerms,
    ff: FeedforwardComputer | None,
    reference: Reference,
    cfg: LoopConfig,
    hold: float = 0.5,
    after: float = 0.0,
    q_start: np.ndarray | None = None,
    doomed: DoomedHook | None = None,
    on_tick: Callable[[int, Any, np.ndarray], None] | None = None,
    events: Sequence[tuple[float, Callable[[Any], None]]] = (),
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
) -> Episode:
    """Run ``hold`` s at the reference's start, the reference (``reference.duration`` s), then ``after`` s.

    Args:
        plant: ``idyn_ros.sim.Plant`` (reset here to ``q_start``, default the reference's start, at rest).
        rbd: rigid-body terms whose M(q) scales the feedback: the controller node's, i.e. the loaded model's
            inertia (``FeedforwardComputer.feedback_terms``: identified inertials + armature), else nominal.
        ff: feedforward (model or RBD fallback); None = no feedforward (``use_feedforward: false``).
        cfg: gains and limits (``loop_config``).
        doomed: optional DOOMED learner in the loop.
        on_tick: called after each plant step with (tick, plant state, command sent) - observers.
        events: (time s, callable(plant)) applied once when the loop time passes them (pushes, payloads).
        lower, upper: position limits (rad) for the safety check (default: the plant's MuJoCo ranges).
    Returns:
        the Episode (stopped early with ``failed`` when the safety layer trips).
    """
    n = plant.n
    dt = plant.control_dt
    if q_start is None:
        q_start = reference.sample(0.0)[0]
    state = plant.reset(np.asarray(q_start, dtype=float))
    if lower is None or upper is None:
        jids = [plant.model.joint(j).id for j in plant.joint_names]
        rng_ = plant.model.jnt_range[jids]
        limited = rng_[:, 1] > rng_[:, 0]
        lower = np.where(limited, rng_[:, 0], -np.inf)
        upper = np.where(limited, rng_[:, 1], np.inf)
    lo, hi = lower + cfg.limit_margin, upper - cfg.limit_margin
    limiter = law.TorqueLimiter(plant.effort_limit, cfg.torque_rate_limit, dt, cfg.effort_scale)
    limiter.reset(0.0)  # as the controller node's hold start
    watchdog = Watchdog(dt)
    if ff is not None:
        ff.warm_up(state.q)
    total = hold + reference.duration + after
    N = round(total / dt) + 1
    rec = {k: np.zeros((N, n)) for k in ("q", "dq", "q_d", "dq_d", "ddq_d", "tau", "tau_cmd", "tau_ff",
                                         "offset", "tau_ext", "ddq_true")}
    t_arr = np.arange(N) * dt
    tau = np.zeros(n)
    fb = np.zeros(n)
    acc = np.zeros(n)
    tau_ff = np.zeros(n)
    offset = np.zeros(n)
    acc_cmd_prev = np.zeros(n)
    dq_prev = state.dq.copy()
    sat_ticks = np.zeros(n, dtype=int)
    sat_limit = round(cfg.saturation_timeout / dt)
    hold_ref = HoldReference(q_start)
    pending = sorted(events, key=lambda e: e[0])
    ev_i = 0
    failed, reason, t_fail = False, "", math.nan
    k_end = N
    for k in range(N):
        t = k * dt
        while ev_i < len(pending) and pending[ev_i][0] <= t + 1e-12:
            pending[ev_i][1](plant)
            ev_i += 1
        q, dq = state.q, state.dq
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(dq))):
            failed, reason, t_fail, k_end = True, "non-finite joint state (NaN/Inf)", t, k
            break
        bad = np.flatnonzero((q < lo) | (q > hi))
        if bad.size:
            j = int(bad[0])
            failed, reason, t_fail, k_end = True, (
                f"joint limit: {plant.joint_names[j]} at {math.degrees(q[j]):.1f} deg "
                f"(range {math.degrees(lower[j]):.1f}..{math.degrees(upper[j]):.1f} deg)"), t, k
            break
        tr = t - hold
        q_d, dq_d, ddq_d = (hold_ref.sample(0.0) if tr < 0 else reference.sample(tr))
        if ff is not None:
            tau_ff[:] = ff.compute(q, dq, ddq_d)
        M = rbd.mass_matrix(q) if cfg.feedback_space == "acceleration" else None
        law.impedance_torque(q, dq, q_d, dq_d, tau_ff, offset, M, cfg.kp, cfg.kd, cfg.feedback_space,
                             out_tau=tau, out_fb=fb, out_acc=acc)
        if not (watchdog.check_finite("feedforward", tau_ff) and watchdog.check_finite("command", tau)):
            failed, reason, t_fail, k_end = True, f"watchdog: {watchdog.reason}", t, k
            break
        limiter.apply(tau)
        at_limit = np.abs(tau) >= 0.999 * limiter.limit
        sat_ticks = np.where(at_limit, sat_ticks + 1, 0)
        if np.any(sat_ticks > sat_limit):
            j = int(np.argmax(sat_ticks))
            failed, reason, t_fail, k_end = True, (
                f"torque saturation: {plant.joint_names[j]} at its {limiter.limit[j]:.0f} Nm limit for "
                f"> {cfg.saturation_timeout:g} s"), t, k
            break
        r = rec
        r["q"][k], r["dq"][k], r["q_d"][k], r["dq_d"][k], r["ddq_d"][k] = q, dq, q_d, dq_d, ddq_d
        r["tau_cmd"][k], r["tau_ff"][k], r["offset"][k] = tau, tau_ff, offset
        r["tau"][k], r["tau_ext"][k], r["ddq_true"][k] = state.tau, state.tau_ext, state.ddq
        sent = tau.copy()
        state = plant.step(sent)
        if on_tick is not None:
            on_tick(k, state, sent)
        if doomed is not None:
            ddq_meas = (state.dq - dq_prev) / dt
            scale = np.diag(rbd.mass_matrix(state.q)) if doomed.inertia_scaled else None
            if k > 0:
                offset[:] = doomed.learner.update(acc_cmd_prev, ddq_meas, state.q, state.dq, scale)
                if doomed.record:
                    doomed.errors.append(doomed.learner.error.copy())
            acc_cmd_prev[:] = ddq_d + acc
        dq_prev[:] = state.dq
    sl = slice(0, k_end)
    return Episode(t=t_arr[sl], failed=failed, reason=reason, t_fail=t_fail, move_start=hold,
                   move_end=hold + reference.duration, **{k: v[sl] for k, v in rec.items()})


# ------------------------------------------------------------------------------------------ metrics
def tracking_metrics(ep: Episode) -> dict[str, Any]:
    """Joint RMSE over the move and final offset |q_d - q| at its end, in degrees (Reuss Table III).

    Per joint and averaged over joints; the final offset is taken at the last sample of the move.
    """
    if ep.failed:
        return {"failed": True, "reason": ep.reason}
    sl = ep.move_slice()
    e = np.degrees(ep.q_d[sl] - ep.q[sl])
    rmse = np.sqrt((e**2).mean(0))
    final = np.abs(e[-1])
    return {"rmse_deg": float(rmse.mean()), "final_deg": float(final.mean()),
            "rmse_joint_deg": rmse.tolist(), "final_joint_deg": final.tolist()}


def make_feedforward(robot_model: Any, kind: str, model_path: str | Path | None = None,
                     rate_hz: float = 1000.0) -> FeedforwardComputer | None:
    """``none`` -> None, ``rbd`` -> nominal-URDF RNEA fallback, ``model`` -> the exported artifact.

    A model that the runtime refuses raises (a silent RBD fallback would corrupt a comparison table).
    """
    if kind == "none":
        return None
    if kind == "rbd":
        return FeedforwardComputer(robot_model, None, "rbd", rate_hz)
    ff = FeedforwardComputer(robot_model, model_path, "rbd", rate_hz)
    if ff.fallback:
        from idyn_ros.errors import ModelArtifactError

        raise ModelArtifactError(f"feedforward model not usable: {ff.fallback_reason}")
    return ff
