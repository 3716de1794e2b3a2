"""Study: does the plant of `idyn identify --profile-out` behave like the robot it was identified on?

The "robot" is the true plant (config/profiles/<robot>_true.yaml: perturbed inertials, friction with stiction, the
joint effects, noise, latency). Record the benchmarks' excitations on it, identify with the command a user runs
(`idyn identify --profile-out`, on the training split), then run the same controllers on three plants - the true one,
the identified profile, the URDF's own (nominal profile) - and compare their tracking errors.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROWS = ("no_ff", "nominal_rbd", "identified_rbd_friction")
PLANTS = ("true", "identified", "nominal")


def _provenance(command: str) -> dict:
    import os
    import platform

    rev = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                         cwd=HERE).stdout.strip()
    return {"command": command, "git_revision": rev, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}}


def identify_profile(robot: str, train: list[Path], out: Path) -> dict:
    """`idyn identify --profile-out` as a user runs it; returns what it printed."""
    cmd = [sys.executable, "-m", "idyn_ros.cli", "identify", "--robot", robot, "--data", *map(str, train),
           "--profile-out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return {"command": " ".join(["idyn", *cmd[3:]]), "stdout": done.stdout.strip().splitlines(),
            "stderr": done.stderr.strip().splitlines()}


def run_robot(robot: str, work: Path, n_moves: int, durations: tuple[float, ...], gains: tuple[str, ...]) -> dict:
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.models_cache import bench_data_spec, bench_models, record_dataset, split_paths
    from idyn_ros.experiments.tracking import moves_for, run_cell
    from idyn_ros.sim import Plant

    robot_model = RobotModel.from_robot(robot)
    paths = record_dataset(robot, work, bench_data_spec())
    train, _ = split_paths(paths)
    profile = work / "identified" / f"{robot}.yaml"
    profile.parent.mkdir(parents=True, exist_ok=True)
    identified = identify_profile(robot, train, profile)
    models = bench_models(robot, work, ["identified_rbd_friction"], progress=False)
    plants = {"true": "true", "identified": str(profile), "nominal": "nominal"}
    moves = moves_for(robot_model, n_moves, durations)
    cells: dict = {row: {gain: {} for gain in gains} for row in ROWS}
    for name, prof in plants.items():
        plant = Plant(robot, prof)
        for row in ROWS:
            for gain in gains:
                cell = run_cell(robot, robot_model, plant, row, gain, moves, models)
                cells[row][gain][name] = cell["reason"] if cell.get("failed") else round(cell["rmse_deg"], 4)
                print(f"{robot} {name:10s} {row:24s} {gain:6s} {cells[row][gain][name]}", flush=True)
    def ran(value: object) -> bool:
        return isinstance(value, float)

    gaps = {name: [abs(np.log(c[name] / c["true"])) for g in cells.values() for c in g.values()
                   if ran(c.get(name)) and ran(c.get("true"))] for name in ("identified", "nominal")}
    failed_where_true_ran = {name: sum(ran(c.get("true")) and not ran(c.get(name)) for g in cells.values()
                                       for c in g.values()) for name in ("identified", "nominal")}
    return {"identify": identified, "cells_rmse_deg": cells,
            "mean_abs_log_ratio_to_true": {k: float(np.mean(v)) for k, v in gaps.items()},
            "cells_failed_where_the_true_plant_ran": failed_where_true_ran,
            "moves": {"n": n_moves, "durations_s": list(durations)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--robots", nargs="+", default=["panda", "iiwa14", "ur5"])
    ap.add_argument("--work", type=Path, default=Path("runs/identified_plant"))
    ap.add_argument("--moves", type=int, default=3)
    a = ap.parse_args()
    results = {"_provenance": _provenance("python studies/identified_plant/run.py " + " ".join(sys.argv[1:]))}
    for robot in a.robots:
        results[robot] = run_robot(robot, a.work, a.moves, (2.0,), ("soft", "medium"))
    out = HERE / "results" / "identified_plant.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
