"""DOOMED on the plant with an unmodelled payload: the analogue of Ratliff et al. 2016 Fig. 3-6.

Setting (decisions): the true plant carries a payload at the flange that no model knows (default
1 kg, CoM 5 cm along the flange z axis); the controller uses the medium gains and nominal-URDF RBD
feedforward (the paper's "RBD with mis-specified mass"); the task is a chain of min-jerk moves
(the paper chains two LQRs). DOOMED = ``idyn_ros.control.doomed.Doomed`` with a constant offset,
run as the doomed node runs it (``DoomedAdapter``: eta scaled by the controller's M_jj, one-tick pairing,
offset applied one tick later), oscillation detector on.

Metrics per setting, averaged over joints and the whole run (Ratliff sec. 3c):
M1 = mean |ddq_cmd - ddq_meas| (rad/s^2), M2 = mean (ddq_cmd - ddq_meas) (bias; > 0: the arm
accelerates less than commanded), M3 = mean |offset| (Nm), and the joint RMSE (deg). A setting
*oscillates* when the detector froze learning, or when M1 exceeds 1.5 x the smallest M1 over the
learning rates of its (alpha, gamma) column while |M2| < 0.3 M1 (the paper's "M1 rises while M2 ~ 0").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

DEFAULT_PAYLOAD = {"mass": 1.0, "com": (0.0, 0.0, 0.05)}
ETAS = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0)  # per tick at 1 kHz, x M_jj (doomed node: inertia_scaled)
ALPHAS = (0.0, 0.25, 0.5)  # s^4/rad^2 (paper: 0-0.5)
GAMMAS = (0.9, 0.95)  # paper: 0.9, 0.95


def _task(robot_model: Any, n_moves: int, duration: float) -> Any:
    from idyn_ros.control.reference import MinJerkMove
    from idyn_ros.experiments.tracking import setpoints

    pts = setpoints(np.asarray(robot_model.lower), np.asarray(robot_model.upper), n_moves + 1, seed=11,
                    velocity_limit=robot_model.velocity_limit, shortest_move_s=duration)
    return MinJerkMove(pts[0], list(pts[1:]), [duration] * n_moves)


def run_setting(robot: str, robot_model: Any, plant: Any, eta: float, alpha: float, gamma: float,
                gain: str = "medium", feedforward: str = "rbd", model_path: Any = None,
                n_moves: int = 3, duration: float = 2.0, offset_scale: float = 0.2) -> dict[str, Any]:
    """One closed-loop run with DOOMED at (eta, alpha, gamma); eta = 0 is 'no adaptation'."""
    from idyn_ros.control.doomed import Doomed, DoomedAdapter, DoomedConfig
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.sim.loop import controller_for, run_episode

    controller = controller_for(robot, robot_model, gain, make_feedforward(robot_model, feedforward, model_path))
    learner = Doomed(plant.n, DoomedConfig(learning_rate=eta, momentum=gamma, variance_gain=alpha,
                                           offset_limit=offset_scale * np.asarray(robot_model.effort_limit)))
    adapter = DoomedAdapter(learner, controller.feedback_model)
    adapter.errors = []
    ep = run_episode(plant, controller, _task(robot_model, n_moves, duration), hold=0.5, doomed=adapter)
    out: dict[str, Any] = {"eta": eta, "alpha": alpha, "gamma": gamma}
    if ep.failed:
        return {**out, "failed": True, "reason": ep.reason}
    e = np.asarray(adapter.errors)
    sl = ep.move_slice()
    err_deg = np.degrees(ep.q_d[sl] - ep.q[sl])
    out.update({
        "m1_abs_acc_error": float(np.abs(e).mean()),
        "m2_bias": float(e.mean()),
        "m3_abs_offset_nm": float(np.abs(ep.offset).mean()),
        "rmse_deg": float(np.sqrt((err_deg**2).mean(0)).mean()),
        "final_deg": float(np.abs(err_deg[-1]).mean()),
        "frozen": bool(learner.frozen),
        "freeze_reason": learner.freeze_reason,
        "offset_end_nm": ep.offset[-1].tolist(),
    })
    return out


def mark_oscillation(results: list[dict[str, Any]]) -> None:
    """Set ``oscillating`` per result (module docstring rule), in place.

    "Rising" is judged only above the learning rate with the smallest M1 in the (alpha, gamma) column:
    below it a higher M1 means "not converged yet" (and large bias), not oscillation (Ratliff sec. 3c:
    *past a threshold* M1 rises while M2 stays ~0).
    """
    for r in results:
        if r.get("failed"):
            r["oscillating"] = True
            continue
        col = [x for x in results if x["alpha"] == r["alpha"] and x["gamma"] == r["gamma"] and not x.get("failed")]
        best = min(col, key=lambda x: x["m1_abs_acc_error"])
        rising = (r["eta"] > best["eta"] and r["m1_abs_acc_error"] > 1.5 * best["m1_abs_acc_error"]
                  and abs(r["m2_bias"]) < 0.3 * r["m1_abs_acc_error"])
        r["oscillating"] = bool(r["frozen"] or rising)


def sweep(robot: str = "panda", etas: Sequence[float] = ETAS, alphas: Sequence[float] = ALPHAS,
          gammas: Sequence[float] = GAMMAS, payload: dict[str, Any] | None = None, gain: str = "medium",
          n_moves: int = 3, duration: float = 2.0, progress: bool = True) -> dict[str, Any]:
    """The grid on the true plant with the payload; returns the JSON payload (``doomed_sweep.json``)."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.progress import progress_bar
    from idyn_ros.sim import Payload, Plant

    payload = payload or DEFAULT_PAYLOAD
    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    plant.set_payload(Payload(float(payload["mass"]), tuple(payload["com"])))
    grid = [(e, a, g) for g in gammas for a in alphas for e in etas]
    results = []
    for e, a, g in progress_bar(grid, desc=f"{robot}: DOOMED sweep", unit="run", enabled=progress):
        results.append(run_setting(robot, robot_model, plant, e, a, g, gain, n_moves=n_moves, duration=duration))
    mark_oscillation(results)
    onset = {}
    for g in gammas:
        for a in alphas:
            osc = [r["eta"] for r in results if r["alpha"] == a and r["gamma"] == g and r["oscillating"]]
            onset[f"alpha={a:g},gamma={g:g}"] = min(osc) if osc else None
    base = [r for r in results if r["eta"] == 0.0 and not r.get("failed")]
    return {"robot": robot, "payload": payload, "gain": gain, "feedforward": "nominal_rbd",
            "task": f"{n_moves} chained min-jerk moves of {duration:g} s", "etas": list(etas),
            "alphas": list(alphas), "gammas": list(gammas), "results": results,
            "oscillation_onset_eta": onset,
            "no_adaptation_rmse_deg": base[0]["rmse_deg"] if base else math.nan}


def payload_acceptance(robot: str = "panda", eta: float = 0.1, alpha: float = 0.5, gamma: float = 0.9,
                       payload: dict[str, Any] | None = None, feedforward: str = "rbd", model_path: Any = None,
                       n_moves: int = 3, duration: float = 2.0) -> dict[str, Any]:
    """Joint RMSE at medium with the unmodelled payload, without (eta = 0) and with DOOMED."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim import Payload, Plant

    payload = payload or DEFAULT_PAYLOAD
    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    plant.set_payload(Payload(float(payload["mass"]), tuple(payload["com"])))
    off = run_setting(robot, robot_model, plant, 0.0, alpha, gamma, "medium", feedforward, model_path, n_moves,
                      duration)
    on = run_setting(robot, robot_model, plant, eta, alpha, gamma, "medium", feedforward, model_path, n_moves,
                     duration)
    ratio = on.get("rmse_deg", math.inf) / off.get("rmse_deg", math.inf) if not off.get("failed") else math.nan
    return {"feedforward": feedforward, "payload": payload, "eta": eta, "alpha": alpha, "gamma": gamma,
            "without": off, "with": on, "rmse_ratio": ratio, "halved": bool(ratio <= 0.5)}
