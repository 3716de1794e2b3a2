"""Study: is the runtime's velocity hold needed in closed loop? (README.md next to this file).

Fits on slow plant excitations (0.3 x the velocity limits), then tracks the bench's moves (up to 0.8 x the limits)
with the same model exported held (as `idyn train` exports it) and unheld, through the controller the node runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _provenance(command: str) -> dict:
    import platform
    import subprocess

    rev = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                         cwd=HERE).stdout.strip()
    return {"command": command, "git_revision": rev, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {"cpus": __import__("os").cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version()}}


def export_variants(res, robot_model, va, out: Path) -> dict[str, Path]:
    """The fitted model exported twice: held (the product's export) and with the hold removed."""
    from idyn_ros.experiments.models_cache import _export_row

    paths = {"held": _export_row(res, robot_model, va, out / "held", {"variant": "held"}, {})}
    res.model.set_velocity_hold(None)
    res.dq_abs_max = None
    paths["unheld"] = _export_row(res, robot_model, va, out / "unheld", {"variant": "unheld"}, {})
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--robot", default="iiwa14")
    ap.add_argument("--speed", type=float, default=0.3, help="excitation speed, fraction of the velocity limits")
    ap.add_argument("--kinds", nargs="+", default=["rbd-friction", "hybrid-j"])
    ap.add_argument("--gains", nargs="+", default=["soft", "medium"])
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--work", type=Path, default=Path("runs/velocity_hold"))
    a = ap.parse_args()

    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.models_cache import DataSpec, record_dataset, split_paths
    from idyn_ros.experiments.tracking import moves_for, run_cell
    from idyn_ros.models import training
    from idyn_ros.models.sources import load_recordings
    from idyn_ros.models.zoo import ModelConfig
    from idyn_ros.sim import Plant

    robot_model = RobotModel.from_robot(a.robot)
    work = a.work / a.robot / f"speed_{a.speed:g}"
    paths = record_dataset(a.robot, work, DataSpec(speed=a.speed))
    train_p, val_p = split_paths(paths)
    tr, va = load_recordings(train_p, robot_model), load_recordings(val_p, robot_model)
    dq_train = np.max([np.abs(r.dq).max(0) for r in tr], 0)
    moves = moves_for(robot_model)
    peak = np.max([np.abs(m.goal - m.start) * 15 / 8 / m.duration for m in moves], 0)
    plant = Plant(a.robot, "true")
    out = {"robot": a.robot, "excitation_speed": a.speed, "train_dq_abs_max": dq_train.tolist(),
           "moves_peak_dq": peak.tolist(), "velocity_limit": np.asarray(robot_model.velocity_limit).tolist(),
           "rows": {}}
    print("training |dq| max", np.round(dq_train, 2), "\nmoves' peak |dq|", np.round(peak, 2), flush=True)
    for kind in a.kinds:
        cfg = ModelConfig(kind=kind, mode="2s")
        res = training.fit(cfg, robot_model, tr, va, out_dir=None, max_minutes=a.minutes, progress=False)
        for variant, p in export_variants(res, robot_model, va, work / kind).items():
            name = f"{kind} {variant}"
            out["rows"][name] = {}
            for gain in a.gains:
                cell = run_cell(a.robot, robot_model, plant, "identified_rbd_friction", gain, moves,
                                {"identified_rbd_friction": p})
                cell.pop("per_move", None)
                out["rows"][name][gain] = cell
                print(f"{name:24s} {gain:7s}", cell.get("reason") or f"rmse {cell['rmse_deg']:.3f} deg "
                      f"final {cell['final_deg']:.3f} deg", flush=True)
    out["_provenance"] = _provenance("python studies/velocity_hold/run.py " + " ".join(sys.argv[1:]))
    dest = HERE / "results" / f"{a.robot}_speed_{a.speed:g}.json"
    dest.write_text(json.dumps(out, indent=2, default=float))
    print("wrote", dest)


if __name__ == "__main__":
    main()
