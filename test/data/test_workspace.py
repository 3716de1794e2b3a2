"""The workspace an excitation design keeps to: above the mounting plane, out of the base column."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.data.trajectories import JointLimits, fine_motion, optimize_excitation
from idyn_ros.data.workspace import Workspace, WorkspaceGuard, line_problem, move_problem
from idyn_ros.dynamics import RobotModel
from idyn_ros.errors import ParameterError

UR5_READY = [0.0, -1.571, 1.571, -1.571, -1.571, 0.0]


@pytest.fixture(scope="module")
def ur5() -> RobotModel:
    return RobotModel.from_robot("ur5")


def test_margins_say_a_horizontal_ur5_is_on_its_table_and_its_ready_pose_is_not(ur5):
    guard = WorkspaceGuard(ur5, Workspace())
    assert guard.check(np.zeros((1, 6)))["floor_margin"] < -0.005  # stretched out at shoulder height (0.089 m)
    assert guard.check(np.array([UR5_READY]))["ok"]
    assert not WorkspaceGuard(ur5, Workspace(base_radius=2.0)).check(np.array([UR5_READY]))["ok"]



@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_the_check_s_margins_are_the_design_s(robot):
    """The check (the nodes, at every move they build) and the design (with Jacobians) compute margins two ways."""
    model = RobotModel.from_robot(robot)
    guard = WorkspaceGuard(model, Workspace(floor=0.1, tool_length=0.2, base_radius=0.15))
    q = np.random.default_rng(3).uniform(-2.5, 2.5, (200, model.n))
    plain, _ = guard.margins(q)
    designed, grad = guard.margins(q, np.zeros((len(q), model.n, 1)))
    np.testing.assert_allclose(plain, designed, rtol=0, atol=1e-12)
    assert grad is not None and plain.min() < 0 < plain.max()  # both signs: poses inside and outside

def test_an_arm_found_outside_may_move_back_in_but_not_further_out(ur5):
    """A UR5 left stretched out on its table (zero pose) must be movable to its ready pose; lowering it is refused."""
    guard = WorkspaceGuard(ur5, Workspace())
    lying, ready = np.zeros(6), np.array(UR5_READY)
    assert not guard.check(lying[None])["ok"]  # the strict check refuses the start itself
    assert line_problem(guard, lying, ready) == ""
    lower = lying + np.array([0.0, 0.3, 0.0, 0.0, 0.0, 0.0])  # shoulder lift down: the forearm into the table
    said = line_problem(guard, lying, lower)
    assert said.startswith("the arm is outside the workspace already") and "too low" in said
    assert move_problem(guard, np.array([ready, lying, ready])) != ""  # from inside, leaving is refused


def test_the_margin_jacobian_is_the_derivative_of_the_margins():
    panda = RobotModel.from_robot("panda")
    guard = WorkspaceGuard(panda, Workspace())
    q = np.random.default_rng(0).uniform(-1.0, 1.0, (4, 7))
    values, jac = guard.margins(q, np.stack([np.eye(7)] * 4))
    eps = 1e-6
    numeric = np.stack([(guard.margins(q + eps * np.eye(7)[i])[0] - values) / eps for i in range(7)], axis=1)
    assert np.abs(jac - numeric).max() < 1e-5


def test_an_optimal_excitation_stays_above_the_table_only_when_asked(ur5):
    """The UR5's default design went 0.4-0.84 m below its mounting plane: joint limits alone allow it."""
    limits = JointLimits.from_model(ur5)
    free = optimize_excitation(ur5, limits, seed=1, time_budget_s=30.0, max_evaluations=200)
    kept = optimize_excitation(ur5, limits, seed=1, time_budget_s=30.0, max_evaluations=200, workspace=Workspace())
    guard = WorkspaceGuard(ur5, Workspace())
    t = np.arange(0.0, free.trajectory.period, 1e-3)
    assert not guard.check(free.trajectory.evaluate(t)[0])["ok"]
    check = guard.check(kept.trajectory.evaluate(t)[0])
    assert check["ok"] and kept.workspace_check["ok"], check
    assert kept.limit_check_1khz["ok"] and np.isfinite(kept.cond_optimized)


def test_a_design_that_converges_early_starts_again_inside_the_workspace(ur5):
    """SLSQP restarts from new feasible starts until the budget; the first restart raised a ValueError (60 s UR5)."""
    res = optimize_excitation(ur5, JointLimits.from_model(ur5), harmonics=2, period=4.0, seed=0, time_budget_s=8.0,
                              n_eval=20, n_constraint=20, workspace=Workspace())  # a small problem: converges in ~5 s
    assert res.stopped_by.startswith("time budget") and res.workspace_check["ok"]


def test_fine_motion_scaffolds_and_moves_stay_inside(ur5):
    guard = WorkspaceGuard(ur5, Workspace())
    traj = fine_motion(JointLimits.from_model(ur5), n_scaffolds=3, seed=0,
                       inside=lambda pose: bool(guard.margins(pose[None])[0].min() >= 0.1))
    q = traj.evaluate(np.arange(0.0, traj.duration, 1e-2))[0]
    assert guard.check(q)["ok"]


def test_an_impossible_workspace_is_refused_with_what_to_change(ur5):
    with pytest.raises(ParameterError, match="lower the floor or the base clearance"):
        optimize_excitation(ur5, JointLimits.from_model(ur5), time_budget_s=5.0, max_evaluations=20,
                            workspace=Workspace(floor=3.0))


def test_excite_cli_writes_only_what_stays_in_the_workspace(tmp_path, capsys):
    from idyn_ros.cli import main

    out = tmp_path / "ur5.npz"
    assert main(["excite", "--robot", "ur5", "--budget", "3", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "workspace at 1000 Hz" in said and "-> inside" in said
    assert "0.1 m above the mounting plane" in str(np.load(out)["workspace"])
    assert main(["excite", "--robot", "ur5", "--budget", "3", "--floor", "3", "-o", str(tmp_path / "no.npz")]) != 0
    assert "lower the floor" in capsys.readouterr().err and not (tmp_path / "no.npz").exists()
