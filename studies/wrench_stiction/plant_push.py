"""Study: why the iiwa14 plant's force error on the wrench benchmark's 10 N pushes is twice the other arms'.

Run from the repository root with idyn_ros importable:

    python studies/wrench_stiction/plant_push.py [--robots panda iiwa14 ur5]

Replays ``idyn bench --only wrench``'s push scenario (``wrench_eval.run_pushes``: the push pose, medium gains, nominal
RBD feedforward and observer) and records per joint what the benchmark does not: the push's joint torques J^T F, the
plant's dry-friction level at the pose before the push (the profile's static + load-dependent friction, what MuJoCo's
frictionloss holds), how much the drive torque changed over the push and how far the joint moved (true state).
Writes results/plant_push.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.bench import write_result
from idyn_ros.dynamics import RobotModel
from idyn_ros.experiments import wrench_eval as we
from idyn_ros.sim import Plant

RESULTS = Path(__file__).resolve().parent / "results"


def push_joints(robot: str) -> dict[str, Any]:
    """Per push axis: force error (momentum observer), and per joint J^T F, dry-friction level, drive change, travel."""
    from idyn_ros import sim

    records: dict[str, list[np.ndarray]] = {"q": [], "drive": [], "dry": []}

    class Recorded(Plant):
        """The benchmark's plant, reading its drive torque and dry-friction level after every control period
        (private fields: a study looks inside the simulator, the product never does)."""

        def advance(self, tau_cmd: np.ndarray) -> None:
            super().advance(tau_cmd)
            records["q"].append(self.data.qpos[self._qsel].copy())
            records["drive"].append(self._tau_drive.copy())
            records["dry"].append(self.model.dof_frictionloss[self._vidx].copy())

    original = sim.Plant
    sim.Plant = Recorded  # run_pushes builds its plant through idyn_ros.sim.Plant
    try:
        result = we.run_pushes(robot, "rbd")
    finally:
        sim.Plant = original
    robot_model = RobotModel.from_robot(robot)
    q0 = we.push_pose(robot, robot_model)
    jac = robot_model.flange_jacobian(q0)[0]
    q, drive, dry = (np.array(records[k]) for k in ("q", "drive", "dry"))
    dt = 1.0 / 1000.0
    out: dict[str, Any] = {"robot": robot, "push_pose": q0.tolist(), "axes": {}}
    for i, axis in enumerate("xyz"):
        k_on = round((we.SETTLE_S + i * (we.PUSH_S + we.GAP_S)) / dt)
        k_off = k_on + round(we.PUSH_S / dt) - 1
        out["axes"][axis] = {
            "force_error_n": result["momentum"]["rmse_n"][axis],
            "push_joint_torque_nm": (jac[i] * we.PUSH_N).round(3).tolist(),
            "dry_friction_nm": dry[k_on - 1].round(3).tolist(),
            "drive_change_nm": (drive[k_off] - drive[k_on - 1]).round(3).tolist(),
            "travel_mrad": ((q[k_off] - q[k_on - 1]) * 1e3).round(3).tolist(),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", nargs="+", default=["panda", "iiwa14", "ur5"])
    args = parser.parse_args()
    results = {robot: push_joints(robot) for robot in args.robots}
    for robot, r in results.items():
        print(f"\n{robot}")
        for axis, a in r["axes"].items():
            print(f"  {axis}: force error {a['force_error_n']:.2f} N")
            for name in ("push_joint_torque_nm", "dry_friction_nm", "drive_change_nm", "travel_mrad"):
                print(f"    {name:22s} " + " ".join(f"{v:7.2f}" for v in a[name]))
    write_result("plant_push", {"robots": results}, "python studies/wrench_stiction/plant_push.py", directory=RESULTS)


if __name__ == "__main__":
    main()
