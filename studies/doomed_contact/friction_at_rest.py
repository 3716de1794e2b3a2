"""Friction compensation at a resting joint: the feedforward at the measured velocity (the product) or, on a joint
whose reference rests (|dq_d| <= 1e-3 rad/s), at the reference's velocity (the variant; not in the product). See
README.md.

    python studies/doomed_contact/friction_at_rest.py [--robots panda ur5 iiwa14] [--work DIR] [--keep-tracking]

Per arm, with the identified RBD + friction model of the benchmarks (cached under --work) and DOOMED off:
- the push of run.py (15 N along base x for 4 s at medium gains), then the largest joint speed 2-6 s after the
  release (a resting arm: a few mrad/s of noise) and the pose error there;
- the tracking table's cell (5 moves x 2 s / 10 s, ``experiments.tracking.run_cell``) at medium and stiff gains;
- the benchmark's wrench evaluation (``experiments.wrench_eval.run_pushes``: 10 N at the flange along x, y, z).
Each builds its controller with ``sim.loop.controller_for``; the variant wraps that controller's feedforward.
Writes results/friction_at_rest.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SETTLE_S, BEFORE_S, PUSH_S, AFTER_S = 0.5, 4.0, 4.0, 6.0
RESTING_REFERENCE = 1e-3  # rad/s


class Variant:
    """While active, every controller ``sim.loop.controller_for`` builds evaluates a joint whose reference rests at
    the reference's velocity."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __enter__(self) -> Variant:
        from idyn_ros.sim import loop

        self.loop, self.original = loop, loop.controller_for

        def controller_for(*args, **kwargs):
            controller = self.original(*args, **kwargs)
            if self.on:
                compute, dq_eval = controller.ff.compute, np.zeros(len(controller.dq_d))

                def at_rest(q, dq, ddq_d):
                    np.copyto(dq_eval, dq)
                    np.copyto(dq_eval, controller.dq_d, where=np.abs(controller.dq_d) <= RESTING_REFERENCE)
                    return compute(q, dq_eval, ddq_d)

                controller.ff.compute = at_rest
            return controller

        loop.controller_for = controller_for
        return self

    def __exit__(self, *exc) -> None:
        self.loop.controller_for = self.original


def after_push(robot: str, model_path: Path) -> dict:
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.experiments.wrench_eval import push_pose
    from idyn_ros.sim import Plant, loop

    rm = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    q0 = push_pose(robot, rm)
    controller = loop.controller_for(robot, rm, "medium", make_feedforward(rm, "model", model_path))
    n_ticks = round((SETTLE_S + BEFORE_S + PUSH_S + AFTER_S) / plant.control_dt) + 2
    t, dq, err = np.zeros(n_ticks), np.zeros((n_ticks, rm.n)), np.zeros(n_ticks)

    def on_tick(k: int, state, _command) -> None:
        if k < n_ticks:
            t[k], dq[k] = state.t, state.dq
            err[k] = np.degrees(np.sqrt(np.mean((state.q - q0) ** 2)))

    wrench = np.zeros(6)
    wrench[0] = 15.0
    loop.run_episode(plant, controller, loop.Hold(q0, duration=BEFORE_S + PUSH_S + AFTER_S), hold=SETTLE_S,
                     on_tick=on_tick, events=[(SETTLE_S + BEFORE_S, lambda p: p.apply_wrench(None, wrench, PUSH_S))])
    t -= t[0]
    t_off = SETTLE_S + BEFORE_S + PUSH_S
    late, before = (t > t_off + 2) & (t < t_off + 6), (t > SETTLE_S + 1) & (t < SETTLE_S + BEFORE_S)
    return {"max_speed_before_push": np.abs(dq[before]).max(0).round(4).tolist(),
            "max_speed_2_6s_after_release": np.abs(dq[late]).max(0).round(4).tolist(),
            "pose_error_deg_2_6s_after_release": float(err[late].mean())}


def tracking(robot: str, model_path: Path, gain: str) -> dict:
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments import tracking as tr
    from idyn_ros.sim import Plant

    rm = RobotModel.from_robot(robot)
    cell = tr.run_cell(robot, rm, Plant(robot, "true"), "identified_rbd_friction", gain,
                       tr.moves_for(rm, tr.PAPER_MOVES, tr.PAPER_DURATIONS), {"identified_rbd_friction": model_path})
    return {k: cell.get(k) for k in ("rmse_deg", "final_deg", "failed", "reason") if k in cell}


def pushes(robot: str, model_path: Path) -> dict:
    from idyn_ros.experiments.wrench_eval import run_pushes

    out = run_pushes(robot, "model", model_path)
    return {name: out[name]["rmse_mean_n"] for name in ("direct", "momentum") if name in out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", nargs="+", default=["panda", "ur5", "iiwa14"])
    ap.add_argument("--work", type=Path, default=Path("runs"), help="data and model cache (as idyn bench)")
    ap.add_argument("--keep-tracking", action="store_true", help="take the tracking cells from the results file "
                    "there (they do not depend on the push pose; the slow part) and rerun the pushes")
    args = ap.parse_args()
    from idyn_ros.experiments.models_cache import bench_data_spec, record_dataset, split_paths, train_row

    path = HERE / "results" / "friction_at_rest.json"
    kept = json.loads(path.read_text()) if args.keep_tracking else {}
    out: dict = {}
    for robot in args.robots:
        train, val = split_paths(record_dataset(robot, args.work, bench_data_spec(False)))
        model = train_row(robot, "identified_rbd_friction", train, val,
                          args.work / "models" / robot / "identified_rbd_friction", 4.0, 300)
        out[robot] = {}
        for rule in ("measured", "reference_at_rest"):
            with Variant(rule == "reference_at_rest"):
                cells = ({f"tracking_{g}": kept[robot][rule][f"tracking_{g}"] for g in ("medium", "stiff")} if kept
                         else {f"tracking_{g}": tracking(robot, model, g) for g in ("medium", "stiff")})
                out[robot][rule] = {"after_push": after_push(robot, model), "pushes_rmse_n": pushes(robot, model),
                                    **cells}
        print(robot, json.dumps(out[robot]), flush=True)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out["_provenance"] = {"command": "python studies/doomed_contact/friction_at_rest.py --robots "
                                     + " ".join(args.robots), "revision": rev,
                          "model": "identified_rbd_friction (bench data spec)", "doomed": "off"}
    if kept:
        out["_provenance"]["command"] += " --keep-tracking"
        out["_provenance"]["tracking_cells_from"] = kept["_provenance"]
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
