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

Scenario: hold the plant's start pose (config/<robot>.yaml, as ``wrench_trust_eval``) at medium gains with the
feedforward under test, 0.5 s settle, then a 10 N force along +x, +y, +z (base axes) at the flange origin for 1.0 s
each with 0.5 s between. The RMSE is over the force components (N) during each push, the first 0.1 s excluded
(observer transient: the momentum observer's time constant is 1/K_O = 20 ms). False positives: |F| (N) of the
estimate during a 2 s min-jerk move with no contact from that pose by ``MOVE_OFFSET_RAD`` on every joint (RMS and
99th percentile). Both stay where the flange Jacobian's smallest singular value is at least ``MIN_SINGULAR_VALUE``
(decision: these are the raw estimates, mapped by the damped pseudo-inverse, whose force error grows as 1/that value;
the behaviour near a singularity is ``wrench_trust_eval.singular``'s. A random pose had put the UR5 within 0.04 rad
of its elbow singularity, value 0.006, and its error at 20 N for 10 N pushes).
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
MOVE_OFFSET_RAD = 0.3  # the contact-free move: +, -, +, ... this much per joint from the push pose
MIN_SINGULAR_VALUE = 0.1  # of the flange Jacobian (1 Nm of joint torque error -> at most 10 N)


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


def smallest_singular_value(robot_model: Any, q: np.ndarray) -> float:
    """Of the flange Jacobian at ``q`` (forces and moments alike, as the observers map them)."""
    return float(np.linalg.svd(robot_model.flange_jacobian(q)[0], compute_uv=False).min())


def push_pose(robot: str, robot_model: Any) -> np.ndarray:
    """The plant's start pose; refused if it is near a singularity (see the module doc)."""
    from idyn_ros.experiments.wrench_trust_eval import pose

    return _conditioned(robot_model, pose(robot))


def free_move(robot: str, robot_model: Any) -> tuple[np.ndarray, np.ndarray]:
    """(start, goal) of the contact-free move, every pose on the straight joint path checked (min-jerk follows it)."""
    q0 = push_pose(robot, robot_model)
    q1 = q0 + MOVE_OFFSET_RAD * np.where(np.arange(robot_model.n) % 2 == 0, 1.0, -1.0)
    q1 = np.clip(q1, np.asarray(robot_model.lower) + 0.1, np.asarray(robot_model.upper) - 0.1)
    for a in np.linspace(0.0, 1.0, 21):
        _conditioned(robot_model, q0 + a * (q1 - q0))
    return q0, q1


def _conditioned(robot_model: Any, q: np.ndarray) -> np.ndarray:
    s = smallest_singular_value(robot_model, q)
    if s < MIN_SINGULAR_VALUE:
        raise ValueError(f"{robot_model.name}: pose {np.round(q, 3).tolist()} is near a singularity (smallest "
                         f"singular value of the flange Jacobian {s:.3f} < {MIN_SINGULAR_VALUE})")
    return q


def run_pushes(robot: str, feedforward: str = "rbd", model_path: Path | None = None,
               gain: str = "medium") -> dict[str, Any]:
    """Pushes along x, y, z; returns per-axis RMSE (N) for direct and momentum, plus the time series."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import Hold, controller_for, run_episode

    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    q0 = push_pose(robot, robot_model)
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
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import controller_for, run_episode

    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    q0, q1 = free_move(robot, robot_model)
    est = _observer(robot_model, model_path if feedforward == "model" else None)
    est.warm_up(q0)
    norms: dict[str, list[float]] = {"direct": [], "momentum": []}
    start_tick = round(SETTLE_S / plant.control_dt)

    def on_tick(k: int, state: Any, _cmd: np.ndarray) -> None:
        if est.update(round(state.t * 1e9), state.q, state.dq, state.tau) and \
                k >= start_tick + round(TRANSIENT_S / plant.control_dt):
            direct, momentum = est.wrenches(state.q)
            norms["direct"].append(float(np.linalg.norm(direct[:3])))
            norms["momentum"].append(float(np.linalg.norm(momentum[:3])))

    controller = controller_for(robot, robot_model, gain, make_feedforward(robot_model, feedforward, model_path))
    ep = run_episode(plant, controller, MinJerkMove(q0, [q1], [duration]), hold=SETTLE_S, on_tick=on_tick)
    if ep.failed:
        return {"failed": True, "reason": ep.reason}
    return {name: {"rms_n": float(math.sqrt(np.mean(np.square(v)))), "p99_n": float(np.percentile(v, 99))}
            for name, v in norms.items()}


def evaluate(robot: str = "panda", model_path: Path | None = None) -> dict[str, Any]:
    """``wrench_observer_<robot>.json`` (``idyn bench --only wrench``): pushes and false positives for nominal RBD
    and (if given) the model."""
    from idyn_ros.dynamics import RobotModel

    variants = [("nominal_rbd", "rbd", None)]
    if model_path is not None and Path(model_path).is_file():
        variants.append(("learned", "model", Path(model_path)))
    robot_model = RobotModel.from_robot(robot)
    q0, q1 = free_move(robot, robot_model)
    out: dict[str, Any] = {"robot": robot, "push_n": PUSH_N, "push_s": PUSH_S, "torque_source": "effort",
                           "observer_gain": 50.0, "push_pose": q0.tolist(),
                           "push_pose_smallest_singular_value": smallest_singular_value(robot_model, q0),
                           "move_goal": q1.tolist()}
    for name, ff, path in variants:
        push = run_pushes(robot, ff, path)
        push.pop("series", None)
        out[name] = {"push": push, "moving_no_contact": false_positive(robot, ff, path)}
    return out
