"""DOOMED's oscillation detector in normal use: the node's default parameters on the true plant with an identified
RBD + friction model, DOOMED off / default / with the swing criterion off, per arm (results/normal_use.json).

Run from the repository root with the bench's model cache (IDYN_WORK_DIR, default runs):
    python studies/doomed_detector/run.py [--robots panda ur5 iiwa14]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
SETTINGS = {"off": {"learning_rate": 0.0}, "default": {}, "swing criterion off": {"osc_tv_ratio": 1e9}}


def run(robot: str, work: Path) -> dict[str, Any]:
    from idyn_ros.control.doomed import Doomed, DoomedAdapter, config_from_params
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments import doomed_sweep
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.parameters import load
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import controller_for, run_episode, tracking_metrics

    robot_model = RobotModel.from_robot(robot)
    model = work / "models" / robot / "identified_rbd_friction" / "model.onnx"
    if not model.is_file():
        raise FileNotFoundError(f"{model}: run `idyn bench --only experiments` first (it trains the model cache)")
    base = config_from_params(load("doomed", robot), robot_model.effort_limit)  # the doomed node's defaults
    out: dict[str, Any] = {"model": str(model), "gains": "medium", "task": "6 chained min-jerk moves of 2 s"}
    for name, over in SETTINGS.items():
        plant = Plant(robot, "true")
        controller = controller_for(robot, robot_model, "medium", make_feedforward(robot_model, "model", model))
        learner = Doomed(plant.n, dataclasses.replace(base, **over))
        ep = run_episode(plant, controller, doomed_sweep._task(robot_model, 6, 2.0), hold=0.5,
                         doomed=DoomedAdapter(learner, controller.feedback_model))
        out[name] = {**tracking_metrics(ep), "frozen": learner.frozen, "freeze_reason": learner.freeze_reason}
        print(f"{robot:>7} {name:<20} RMSE {out[name].get('rmse_deg', float('nan')):.3f} deg  frozen {learner.frozen}"
              f" {learner.freeze_reason[:80]}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", nargs="+", default=["panda", "ur5", "iiwa14"])
    args = parser.parse_args()
    work = Path(os.environ.get("IDYN_WORK_DIR", "runs"))
    result = {robot: run(robot, work) for robot in args.robots}
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result["_provenance"] = {"command": "python studies/doomed_detector/run.py", "git_revision": rev,
                             "date_utc": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "normal_use.json").write_text(json.dumps(result, indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()
