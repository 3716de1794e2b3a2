"""The trust stage (``control.wrench_trust``) on the simulated plant: the bias left after a re-zero, detection
rate against false alarms for 5, 10 and 20 N pushes, and what it reports at a singular pose.

Setting: the "true" plant profile (friction, inertials and offsets the nominal model lacks) held at a pose by the
controller with the nominal-RBD feedforward; the observer is the node's (``WrenchObserver``, nominal RBD, torque
source = the measured effort), so its external torque carries the model's error as a pose-dependent bias.
Uncertainty (decision, as ``idyn train`` gets it from validation residuals): measured on a contact-free
calibration run (a hold, a 2 s move out and back, a hold): RMSE of the raw external torque while anything goes on,
and its spread within each rest. Pushes act at the flange origin along base -z (downwards), ``PUSH_S`` each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

PUSHES_N = (5.0, 10.0, 20.0)
PUSH_S = 1.0
GAP_S = 1.5
SETTLE_S = 1.5  # the first automatic re-zero comes after twice rest_time (0.5 s)
TRANSIENT_S = 0.15  # after a push starts or ends: the momentum observer (1/K_O = 20 ms) and the arm settle
PUSH_DIRECTION = np.array([0.0, 0.0, -1.0])
GAIN = "stiff"  # a stiff hold, as a position-controlled arm stays put under a push


@dataclass
class Run:
    t: np.ndarray
    q: np.ndarray
    applied: np.ndarray  # (N, 6) base axes, environment on robot
    base: np.ndarray  # (N, 6) trusted estimate, base axes
    raw: np.ndarray  # (N, 6) the momentum observer's wrench by the damped pseudo-inverse, no bias handling (the old
    # output)
    tau_ext: np.ndarray  # (N, n) raw external torque
    sigma: np.ndarray  # (N, 6) flange axes
    contact: np.ndarray
    score: np.ndarray
    rank: np.ndarray
    rezeroed: np.ndarray
    at_rest: np.ndarray
    dq: np.ndarray
    singular: np.ndarray
    unobservable: list


def pose(robot: str = "ur5") -> np.ndarray:
    """A well-conditioned pose (config/<robot>.yaml's plant start pose)."""
    from idyn_ros.parameters import load

    return np.asarray(load("plant", robot).initial_positions, dtype=float)


def run(robot: str, q0: np.ndarray, events: list, duration: float, trust: Any = None, reference: Any = None,
        rezero_at: float | None = None, model: Any = None) -> Run:
    """One closed-loop episode holding ``q0`` (or following ``reference``) with the observer (nominal RBD, or the
    loaded ``model``: a ``FeedforwardComputer``) and ``trust`` stage."""
    from idyn_ros.control.wrench import WrenchObserver
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import Hold, controller_for, run_episode

    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    dt = plant.control_dt
    obs = WrenchObserver(robot_model, 1.0 / dt, model)
    obs.set_tunables(50.0, 0.01, 0.0, 0.0, 1.0)  # the node's default damping for the old, raw wrench
    ref = reference or Hold(q0, duration=duration)
    rows: dict[str, list] = {k: [] for k in Run.__dataclass_fields__}
    asked = [False]

    def on_tick(k: int, state: Any, _cmd: np.ndarray) -> None:
        if not obs.update(round(state.t * 1e9), state.q, state.dq, state.tau) or trust is None:
            return
        if rezero_at is not None and not asked[0] and state.t >= rezero_at:
            trust.rezero()
            asked[0] = True
        est = trust.update(round(state.t * 1e9), state.q, state.dq, obs.tau_momentum)
        rows["t"].append(state.t)
        rows["q"].append(state.q.copy())
        rows["dq"].append(state.dq.copy())
        rows["applied"].append(plant.wrench[1].copy())
        rows["base"].append(est.base.copy())
        rows["raw"].append(obs.wrenches(state.q)[1].copy())
        rows["tau_ext"].append(obs.tau_momentum.copy())
        rows["sigma"].append(est.sigma_tool.copy())
        for key in ("contact", "rank", "rezeroed", "at_rest", "singular"):
            rows[key].append(getattr(est, key))
        rows["score"].append(est.contact_score)
        rows["unobservable"].append(trust.mapper.unobservable.copy())

    controller = controller_for(robot, robot_model, GAIN, make_feedforward(robot_model, "rbd", None))
    ep = run_episode(plant, controller, ref, hold=0.5, q_start=q0, events=events, on_tick=on_tick,
                     limits=(np.full(plant.n, -np.inf), np.full(plant.n, np.inf)))
    if ep.failed:
        raise RuntimeError(f"plant run failed: {ep.reason}")
    return Run(**{k: (v if k == "unobservable" else np.asarray(v)) for k, v in rows.items()})


def calibrate(robot: str, q0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tau_sigma, tau_sigma_rest) of the nominal observer on this plant, from a contact-free run (module doc)."""
    from idyn_ros.control.reference import MinJerkMove
    from idyn_ros.control.wrench_trust import TrustedWrench
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models.sources import Recording
    from idyn_ros.models.uncertainty import torque_uncertainty

    robot_model = RobotModel.from_robot(robot)
    q1 = q0 + np.deg2rad(15.0) * np.sign(np.arange(robot_model.n) % 2 - 0.5)
    move = MinJerkMove(q0, [q0, q1, q0, q0], [1.0, 1.0, 1.0, 1.5])
    r = run(robot, q0, [], move.duration, TrustedWrench(robot_model), reference=move)
    keep = r.t >= r.t[0] + 0.3  # the observer's start-up transient
    zeros = np.zeros_like(r.q[keep])
    rec = Recording(r.t[keep], r.q[keep], r.dq[keep], zeros, zeros, "calibration")  # residual = tau_ext - 0
    unc = torque_uncertainty([("calibration", [rec], [r.tau_ext[keep]])])
    return np.asarray(unc["tau_sigma_nm"]), np.asarray(unc["tau_sigma_rest_nm"])


def push_events(pushes: tuple[float, ...] = PUSHES_N) -> tuple[list, list[tuple[float, float, float]]]:
    """Plant events and their (t_on, t_off, N) windows."""
    events, windows = [], []
    for i, f in enumerate(pushes):
        t_on = SETTLE_S + i * (PUSH_S + GAP_S)
        w = np.zeros(6)
        w[:3] = f * PUSH_DIRECTION
        events.append((t_on, lambda p, w=w: p.apply_wrench(None, w, PUSH_S)))
        windows.append((t_on, t_on + PUSH_S, f))
    return events, windows


def evaluate(robot: str = "ur5", settings: Any = None, model_path: Any = None) -> dict[str, Any]:
    """The numbers: bias after the automatic and the requested re-zero, detection per push, false-alarm rate.

    Without ``model_path``: the nominal observer with sigma calibrated on the plant (module doc). With it: the
    observer runs that artifact, and the trust stage takes sigma and the stiction band from it, as the node does.
    """
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.control.wrench_trust import TrustedWrench, TrustSettings
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim import Plant

    q0 = pose(robot)
    robot_model = RobotModel.from_robot(robot)
    settings = settings or TrustSettings()
    events, windows = push_events()
    end = windows[-1][1] + GAP_S
    model = None
    if model_path is None:
        sigma, rest = calibrate(robot, q0)
        trust = TrustedWrench(robot_model, settings, sigma, rest)
    else:
        model = FeedforwardComputer(robot_model, model_path, "none", 1.0 / Plant(robot, "true").control_dt)
        if model.fallback:
            raise RuntimeError(model.fallback_reason)
        trust = TrustedWrench.from_model(robot_model.with_identified(model.inertial_parameters, model.armature),
                                         model, settings)
        sigma, rest = trust.tau_sigma, trust.tau_sigma_rest
    r = run(robot, q0, events, end, trust, rezero_at=end - 0.5, model=model)
    first_zero = r.t[np.argmax(r.rezeroed)] if r.rezeroed.any() else np.inf
    quiet = np.ones(len(r.t), bool)
    for t_on, t_off, _ in windows:
        quiet &= ~((r.t >= t_on) & (r.t < t_off + TRANSIENT_S + 0.35))
    before = (r.t > first_zero) & (r.t < windows[0][0]) & quiet
    out: dict[str, Any] = {
        "robot": robot, "profile": "true",
        "observer": f"{'nominal RBD' if model is None else model_path}, momentum observer K_O 50 1/s",
        "sigma_source": trust.sigma_source, "stiction_band": trust.describe_band(),
        "tau_sigma_nm": sigma.tolist(), "tau_sigma_rest_nm": rest.tolist(),
        "first_auto_rezero_s": float(first_zero - r.t[0]),
        "bias_before_rezero_n": float(np.linalg.norm(r.raw[before, :3] - r.applied[before, :3], axis=1).mean()),
        "bias_after_auto_rezero_n": float(np.linalg.norm(r.base[before, :3], axis=1).mean()),
        "false_alarm_rate": float(r.contact[quiet & (r.t > first_zero)].mean()),
        "pushes": [],
    }
    for t_on, t_off, f in windows:
        sel = (r.t >= t_on + TRANSIENT_S) & (r.t < t_off)
        err = r.base[sel, :3] - r.applied[sel, :3]
        out["pushes"].append({"force_n": f, "detection_rate": float(r.contact[sel].mean()),
                              "rmse_n": float(np.sqrt((err**2).sum(1).mean()))})
    after = (r.t > end - 0.5 + settings.rest_time) & quiet
    out["bias_after_requested_rezero_n"] = float(np.linalg.norm(r.base[after, :3], axis=1).mean())
    out["rezeros"] = int(r.rezeroed.sum())
    out["thresholds"] = threshold_sweep(r, windows, quiet & (r.t > first_zero))
    return out


def hysteresis(score: np.ndarray, on: float, off: float) -> np.ndarray:
    """The detector's contact flags for a score series (``ContactDetector`` offline)."""
    flags = np.zeros(len(score), bool)
    state = False
    for k, s in enumerate(score):
        state = s > (off if state else on)
        flags[k] = state
    return flags


def threshold_sweep(r: Run, windows: list, quiet: np.ndarray,
                    levels: tuple[float, ...] = (2.0, 3.0, 4.0, 6.0, 8.0, 12.0)) -> list[dict[str, Any]]:
    """Detection rate per push and false-alarm rate for contact thresholds of ``levels`` sigma (release at half),
    on the same run (the bias handling as it ran with the default thresholds)."""
    out = []
    for k in levels:
        flags = hysteresis(r.score, k, k / 2)
        rates = {f"{f:g}_n": float(flags[(r.t >= a + TRANSIENT_S) & (r.t < b)].mean()) for a, b, f in windows}
        out.append({"on_sigma": k, "off_sigma": k / 2, "detection_rate": rates,
                    "false_alarm_rate": float(flags[quiet].mean())})
    return out


def singular(robot: str = "ur5", force_n: float = 10.0) -> dict[str, Any]:
    """At a wrist singularity (wrist_2 at 0): the rank, the dropped direction, and the observable part of a push."""
    from idyn_ros.control.wrench_trust import TrustedWrench
    from idyn_ros.dynamics import RobotModel

    robot_model = RobotModel.from_robot(robot)
    q0 = pose(robot)
    q0[4] = 0.0
    sigma, rest = calibrate(robot, pose(robot))
    trust = TrustedWrench(robot_model, tau_sigma=sigma, tau_sigma_rest=rest)
    w = np.zeros(6)
    w[:3] = force_n * np.array([1.0, 0.0, -1.0]) / np.sqrt(2.0)
    t_on = SETTLE_S
    r = run(robot, q0, [(t_on, lambda p: p.apply_wrench(None, w, PUSH_S))], t_on + PUSH_S + 0.5, trust)
    sel = (r.t >= t_on + TRANSIENT_S) & (r.t < t_on + PUSH_S)
    U = r.unobservable[int(np.flatnonzero(sel)[-1])]  # (k, 6) base-axes directions dropped
    observable = r.applied[sel] - (r.applied[sel] @ U.T) @ U
    err = r.base[sel] - observable
    J, _ = robot_model.flange_jacobian(q0)
    return {"q": q0.tolist(), "singular_values": np.linalg.svd(J, compute_uv=False).tolist(),
            "rank": int(r.rank[sel].min()), "singular_flag": bool(r.singular[sel].all()),
            "unobservable_base": U.tolist(), "sigma_inf_axes": int(np.isinf(r.sigma[sel][-1]).sum()),
            "observable_force_rmse_n": float(np.sqrt((err[:, :3] ** 2).sum(1).mean())),
            "applied_force_n": force_n}
