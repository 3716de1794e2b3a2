"""The excitation recordings (models_cache.record_inprocess) must move every joint of every robot.

Regression: with the acceleration-space presets (feedback scaled by the URDF M) iiwa14 joints 5 and 7
and ur5 joint 6 stayed stuck in stiction (range 0), so identification could not see their parameters
(iiwa14: "the data do not excite all 64 base parameters").
"""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.data.dataset import load_dataset
from idyn_ros.experiments import models_cache


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_excitation_moves_every_joint(robot: str, tmp_path) -> None:
    from idyn_ros.dynamics import RobotModel

    model = RobotModel.from_robot(robot)
    spec = models_cache.DataSpec(count=1, period=4.0, speed=0.3, budget_s=0.5)
    traj = models_cache.excitation_trajectories(model, spec)[0]
    ds = load_dataset(models_cache.record_inprocess(robot, model, traj, tmp_path / "x.npz"))
    moved, wanted = np.ptp(ds.q, axis=0), np.ptp(ds.q_d, axis=0)
    assert np.all(wanted > 0.1), wanted  # the reference itself asks for motion on every joint
    # every joint follows at least 80 % of the commanded range and really moves (not creeping in stiction)
    assert np.all(moved > 0.8 * wanted), (moved, wanted)
    assert np.all(np.abs(ds.dq).max(axis=0) > 0.1), np.abs(ds.dq).max(axis=0)


def test_excitation_controller_is_torque_space_and_critically_damped_with_guess() -> None:
    from idyn_ros.dynamics import RobotModel

    model = RobotModel.from_robot("iiwa14")
    c = models_cache.excitation_controller("iiwa14", model)
    effort = np.asarray(model.effort_limit, dtype=float)
    assert c.params.feedback_space == "torque" and c.params.gain_preset == "stiff"
    np.testing.assert_allclose(c.kp * models_cache.EXCITATION_FULL_EFFORT_ERROR, effort)
    neutral = np.clip(np.zeros(model.n), model.lower, model.upper)
    inertia = np.diag(model.mass_matrix(neutral)) + models_cache.EXCITATION_ROTOR_INERTIA_PER_NM * effort
    np.testing.assert_allclose(c.kd, 2.0 * np.sqrt(c.kp * inertia))
