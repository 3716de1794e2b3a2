"""How long is the offset's path when DOOMED learns well, and when it chatters? (results/path_threshold.json)

The swing criterion trips when the offset's path over 0.5 s exceeds ``osc_tv_ratio`` x the range it covers and
``osc_tv_fraction`` x the offset limit. This runs every setting with the swing criterion off (the paper's rising-
error signature stays on) and reports, per run, the tracking RMSE, the longest 0.5 s path in offset limits, and the
offset's high-frequency jitter (RMS about its 20 ms moving average), so the threshold can sit between the two groups:
- the doomed sweep's grid (Panda, 1 kg unmodelled payload, nominal RBD feedforward; ``experiments.doomed_sweep``);
- the payload bench's closed loop (2 kg payload, identified bare-arm model; ``experiments.payload``), three arms;
- the toy double integrator of ``test/control/test_doomed.py`` at rising learning rates.

Run from the repository root with the bench's model cache (IDYN_WORK_DIR, default runs):
    python studies/doomed_detector/path_threshold.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
WINDOW = 500  # ticks: the criterion's 0.5 s at 1 kHz
SWING_OFF = {"osc_tv_ratio": 1e12}


def offset_stats(offset: np.ndarray, limit: np.ndarray) -> dict[str, float]:
    """Longest path over WINDOW ticks in offset limits, and the high-frequency jitter (Nm), worst joint."""
    steps = np.vstack([np.zeros((1, offset.shape[1])), np.cumsum(np.abs(np.diff(offset, axis=0)), axis=0)])
    path = (steps[WINDOW:] - steps[:-WINDOW]) / limit
    k = 20
    smooth = np.array([np.convolve(offset[:, j], np.ones(k) / k, "same") for j in range(offset.shape[1])]).T
    jitter = np.sqrt(((offset - smooth)[k:-k] ** 2).mean(axis=0))
    return {"max_path_in_limits": float(path.max()), "hf_jitter_nm": float(jitter.max())}


def sweep_grid() -> list[dict[str, Any]]:
    from idyn_ros.control.doomed import Doomed, DoomedAdapter, DoomedConfig
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments import doomed_sweep
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.sim import Payload, Plant
    from idyn_ros.sim.loop import controller_for, run_episode, tracking_metrics

    model = RobotModel.from_robot("panda")
    plant = Plant("panda", "true")
    load = doomed_sweep.DEFAULT_PAYLOAD
    plant.set_payload(Payload(float(load["mass"]), tuple(load["com"])))
    limit = 0.2 * np.asarray(model.effort_limit)  # the sweep's offset_scale
    rows = []
    for gamma in doomed_sweep.GAMMAS:
        for alpha in doomed_sweep.ALPHAS:
            for eta in doomed_sweep.ETAS[1:]:
                controller = controller_for("panda", model, "medium", make_feedforward(model, "rbd", None))
                learner = Doomed(plant.n, DoomedConfig(learning_rate=eta, momentum=gamma, variance_gain=alpha,
                                                       offset_limit=limit, **SWING_OFF))
                ep = run_episode(plant, controller, doomed_sweep._task(model, 3, 2.0), hold=0.5,
                                 doomed=DoomedAdapter(learner, controller.feedback_model))
                row = {"eta": eta, "alpha": alpha, "gamma": gamma, "frozen_by_rising_error": learner.frozen}
                if ep.failed:
                    rows.append({**row, "failed": ep.reason})
                    continue
                rows.append({**row, "rmse_deg": tracking_metrics(ep)["rmse_deg"],
                             **offset_stats(np.asarray(ep.offset), limit)})
                print("sweep", {k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()},
                      flush=True)
    return rows


def payload_runs() -> list[dict[str, Any]]:
    from idyn_ros.control.doomed import Doomed, DoomedAdapter, DoomedConfig
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments import payload
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import controller_for, run_episode, tracking_metrics

    rows = []
    for robot in payload.ROBOTS:
        model = RobotModel.from_robot(robot)
        artifact = payload._bare_arm_artifact(robot)
        plant = Plant(robot, "true")
        limit = 0.2 * np.asarray(model.effort_limit)
        for known in (False, True):
            controller = controller_for(robot, model, "medium", FeedforwardComputer(model, artifact, "none"))
            if known:
                controller.set_payload(payload.CLOSED_LOOP_PAYLOAD)
            learner = Doomed(plant.n, DoomedConfig(learning_rate=payload.DOOMED["eta"],
                                                   momentum=payload.DOOMED["gamma"],
                                                   variance_gain=payload.DOOMED["alpha"], offset_limit=limit,
                                                   **SWING_OFF))
            plant.set_payload(payload.CLOSED_LOOP_PAYLOAD)
            ep = run_episode(plant, controller, payload._task(model), hold=0.5,
                             doomed=DoomedAdapter(learner, controller.feedback_model))
            plant.set_payload(None)
            rows.append({"robot": robot, "payload_known": known, "frozen_by_rising_error": learner.frozen,
                         "rmse_deg": tracking_metrics(ep).get("rmse_deg"),
                         **offset_stats(np.asarray(ep.offset), limit)})
            print("payload", rows[-1], flush=True)
    return rows


def toy_runs() -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test" / "control"))
    from test_doomed import simulate

    rows = []
    for eta in (0.02, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0):  # delay-aware bound ~ the lighter mass, 0.5
        _, pos, offset, _ = simulate(eta=eta, seconds=4.0, osc_rise_factor=1e6, **SWING_OFF)
        rows.append({"eta": eta, "final_abs_position_error": float(np.abs(pos[-500:]).mean()),
                     **offset_stats(offset, np.full(2, 10.0))})
        print("toy", rows[-1], flush=True)
    return rows


def main() -> None:
    result = {"window_s": WINDOW / 1000.0, "sweep_panda_1kg": sweep_grid(), "payload_2kg": payload_runs(),
              "toy": toy_runs()}
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result["_provenance"] = {"command": "python studies/doomed_detector/path_threshold.py", "git_revision": rev,
                             "work_dir": os.environ.get("IDYN_WORK_DIR", "runs"),
                             "date_utc": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "path_threshold.json").write_text(json.dumps(result, indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()
