"""Wrench observer on the plant: a 10 N push at the flange along each base axis, estimated by the
direct residual and the momentum observer, with nominal RBD or the learned model; plus the
false-positive level while moving without contact.

The estimators are the wrench_observer node's ``idyn_ros.control.wrench.WrenchObserver``: raw
backward-difference acceleration for the direct residual, low-passed afterwards (accel_cutoff_hz 20 Hz); the
momentum observer with K_O = 50 1/s; with a learned model, both observers take M, C, g from its identified
inertial parameters and add its friction + residual parts (so the direct residual uses its total torque).
Decision (differs from the node's default ``torque_source: command``): the actuator torque is the plant's
measured effort, because the true plant delays the command by one tick, so the command topic is not the torque
that acted over the last period while the effort is (the node's ``torque_source: effort`` setting).

Scenario: hold a pose at medium gains with the feedforward under test, 0.5 s settle, then a 10 N
force along +x, +y, +z (base axes) at the flange origin for 1.0 s each with 0.5 s between. The
RMSE is over the force components (N) during each push, the first 0.1 s excluded (observer
transient: the momentum observer's time constant is 1/K_O = 20 ms). False positives: |F| (N) of
the estimate during a 2 s min-jerk move with no contact (RMS and 99th percentile).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

PUSH_N = 10.0
PUSH_S = 1.0
GAP_S = 0.5
SETTLE_S = 0.5
TRANSIENT_S = 0.1


def _observer(robot_model: Any, model_path: Path | None, rate_hz: float = 1000.0) -> Any:
    """The node's ``WrenchObserver`` with nominal RBD (no path) or the learned artifact."""
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.control.wrench import WrenchObserver
    from idyn_ros.errors import ModelArtifactError

    model = None
    if model_path is not None:
        model = FeedforwardComputer(robot_model, model_path, "rbd", rate_hz)
        if model.fallback:
            raise ModelArtifactError(model.fallback_reason)
    return WrenchObserver(robot_model, rate_hz, model)


def _pose(robot_model: Any) -> np.ndarray:
    from idyn_ros.experiments.tracking import setpoints

    return setpoints(np.asarray(robot_model.lower), np.asarray(robot_model.upper), 1, seed=5)[0]


def run_pushes(robot: str, feedforward: str = "rbd", model_path: Path | None = None,
               gain: str = "medium") -> dict[str, Any]:
    """Pushes along x, y, z; returns per-axis RMSE (N) for direct and momentum, plus the time series."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import Hold, controller_for, run_episode

    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    q0 = _pose(robot_model)
    est = _observer(robot_model, model_path if feedforward == "model" else None)
    est.warm_up(q0)
    n_ticks = round((SETTLE_S + 3 * (PUSH_S + GAP_S)) / plant.control_dt) + 1
    log = {"t": np.zeros(n_ticks), "applied": np.zeros((n_ticks, 6)), "direct": np.zeros((n_ticks, 6)),
           "momentum": np.zeros((n_ticks, 6))}

    def on_tick(k: int, state: Any, _cmd: np.ndarray) -> None:
        if est.update(round(state.t * 1e9), state.q, state.dq, state.tau) and k < n_ticks:
            log["direct"][k], log["momentum"][k] = est.wrenches(state.q)
        if k < n_ticks:
            log["t"][k] = state.t
            log["applied"][k] = plant.wrench[1]

    events = []
    for i in range(3):
        w = np.zeros(6)
        w[i] = PUSH_N
        t_on = SETTLE_S + i * (PUSH_S + GAP_S)
        events.append((t_on, lambda p, w=w: p.apply_wrench(None, w, PUSH_S)))
    ref = Hold(q0, duration=n_ticks * plant.control_dt - SETTLE_S)
    controller = controller_for(robot, robot_model, gain, make_feedforward(robot_model, feedforward, model_path))
    ep = run_episode(plant, controller, ref, hold=SETTLE_S, events=events, on_tick=on_tick)
    out: dict[str, Any] = {"feedforward": feedforward, "gain": gain}
    if ep.failed:
        return {**out, "failed": True, "reason": ep.reason}
    t = log["t"] - log["t"][0]
    for name in ("direct", "momentum"):
        per_axis = {}
        for i, axis in enumerate("xyz"):
            t_on = SETTLE_S + i * (PUSH_S + GAP_S)
            sel = (t >= t_on + TRANSIENT_S) & (t < t_on + PUSH_S)
            err = log[name][sel, :3] - log["applied"][sel, :3]
            per_axis[axis] = float(np.sqrt((err**2).sum(1).mean()))
        out[name] = {"rmse_n": per_axis, "rmse_mean_n": float(np.mean(list(per_axis.values())))}
    out["series"] = log
    return out


def false_positive(robot: str, feedforward: str = "rbd", model_path: Path | None = None,
                   gain: str = "medium", duration: float = 2.0) -> dict[str, Any]:
    """|F| of the estimates (N) during a free min-jerk move (no contact): RMS and p99."""
    from idyn_ros.control.reference import MinJerkMove
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.tracking import make_feedforward, setpoints
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import controller_for, run_episode

    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    pts = setpoints(np.asarray(robot_model.lower), np.asarray(robot_model.upper), 2, seed=5)
    est = _observer(robot_model, model_path if feedforward == "model" else None)
    est.warm_up(pts[0])
    norms: dict[str, list[float]] = {"direct": [], "momentum": []}
    start_tick = round(SETTLE_S / plant.control_dt)

    def on_tick(k: int, state: Any, _cmd: np.ndarray) -> None:
        if est.update(round(state.t * 1e9), state.q, state.dq, state.tau) and \
                k >= start_tick + round(TRANSIENT_S / plant.control_dt):
            direct, momentum = est.wrenches(state.q)
            norms["direct"].append(float(np.linalg.norm(direct[:3])))
            norms["momentum"].append(float(np.linalg.norm(momentum[:3])))

    controller = controller_for(robot, robot_model, gain, make_feedforward(robot_model, feedforward, model_path))
    ep = run_episode(plant, controller, MinJerkMove(pts[0], [pts[1]], [duration]), hold=SETTLE_S, on_tick=on_tick)
    if ep.failed:
        return {"failed": True, "reason": ep.reason}
    return {name: {"rms_n": float(math.sqrt(np.mean(np.square(v)))), "p99_n": float(np.percentile(v, 99))}
            for name, v in norms.items()}


def evaluate(robot: str = "panda", model_path: Path | None = None) -> dict[str, Any]:
    """``wrench_observer.json``: pushes and false positives for nominal RBD and (if given) the model."""
    variants = [("nominal_rbd", "rbd", None)]
    if model_path is not None and Path(model_path).is_file():
        variants.append(("learned", "model", Path(model_path)))
    out: dict[str, Any] = {"robot": robot, "push_n": PUSH_N, "push_s": PUSH_S, "torque_source": "effort",
                           "observer_gain": 50.0}
    for name, ff, path in variants:
        push = run_pushes(robot, ff, path)
        push.pop("series", None)
        out[name] = {"push": push, "moving_no_contact": false_positive(robot, ff, path)}
    return out
