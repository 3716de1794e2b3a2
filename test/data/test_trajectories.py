"""Excitation design, fine motion, min jerk: boundary conditions, derivatives, limits at 1 kHz."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.data.limits import ACCELERATION_LIMITS, acceleration_limits
from idyn_ros.data.trajectories import (
    FourierTrajectory,
    JointLimits,
    _full_coefficients,
    check_limits,
    fine_motion,
    min_jerk,
    min_jerk_duration,
    optimize_excitation,
)
from idyn_ros.errors import ParameterError


def _numeric_derivative_check(traj, t: np.ndarray) -> None:
    h = 1e-5
    q_p, dq_p, _ = traj.evaluate(t + h)
    q_m, dq_m, _ = traj.evaluate(t - h)
    _q, dq, ddq = traj.evaluate(t)
    np.testing.assert_allclose((q_p - q_m) / (2 * h), dq, atol=1e-5)
    np.testing.assert_allclose((dq_p - dq_m) / (2 * h), ddq, atol=1e-4)


def test_fourier_rest_at_start_and_end_and_consistent_derivatives() -> None:
    rng = np.random.default_rng(1)
    a, b = _full_coefficients(rng.normal(size=(3, 8)), 5)
    traj = FourierTrajectory(np.array([0.1, -0.2, 0.3]), a, b, period=10.0)
    _q, dq, ddq = traj.evaluate(np.array([0.0, 10.0, 20.0]))
    np.testing.assert_allclose(dq, 0.0, atol=1e-12)
    np.testing.assert_allclose(ddq, 0.0, atol=1e-12)
    _numeric_derivative_check(traj, np.linspace(0.3, 9.7, 17))
    q0, _, _ = traj.evaluate(np.array([0.0]))
    q1, _, _ = traj.evaluate(np.array([10.0]))
    np.testing.assert_allclose(q0, q1, atol=1e-12)  # periodic: can be repeated back to back


def test_acceleration_limits_in_one_place() -> None:
    assert acceleration_limits("panda").tolist() == [15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0]
    assert acceleration_limits("iiwa14")[3] == pytest.approx(11.36)
    assert set(ACCELERATION_LIMITS) == {"panda", "iiwa14", "ur5"}
    with pytest.raises(ParameterError, match="known"):
        acceleration_limits("abb")


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_excitation_improves_condition_and_stays_in_limits(robot: str) -> None:
    from idyn_ros.dynamics import RobotModel

    model = RobotModel.from_robot(robot)
    limits = JointLimits.from_model(model, robot=robot)
    result = optimize_excitation(model, limits, harmonics=4, period=10.0, seed=2, time_budget_s=2.5, n_eval=40)
    assert result.cond_optimized < result.cond_initial
    t = np.arange(0.0, 10.0, 1e-3)  # 1 kHz over the period, independent of the optimiser's own check
    q, dq, ddq = result.trajectory.evaluate(t)
    check = check_limits(q, dq, ddq, limits)
    assert check["ok"], check
    assert result.limit_check_1khz["ok"]
    np.testing.assert_allclose(dq[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(ddq[0], 0.0, atol=1e-9)


def test_an_evaluation_budget_gives_the_same_trajectory_on_any_machine() -> None:
    from idyn_ros.dynamics import RobotModel

    model = RobotModel.from_robot("ur5")
    limits = JointLimits.from_model(model, robot="ur5")
    a, b = (optimize_excitation(model, limits, harmonics=3, period=6.0, time_budget_s=120.0, max_evaluations=60,
                                n_eval=40) for _ in range(2))
    assert a.stopped_by == b.stopped_by == "60 evaluations" and a.evaluations == 60
    np.testing.assert_array_equal(a.trajectory.a, b.trajectory.a)
    np.testing.assert_array_equal(a.trajectory.b, b.trajectory.b)
    assert a.cond_optimized == b.cond_optimized < a.cond_initial


def test_min_jerk_boundaries_and_peaks() -> None:
    q0, q1 = np.array([0.0, 1.0]), np.array([1.0, -1.0])
    t = np.linspace(0, 2.0, 2001)
    q, dq, ddq = min_jerk(q0, q1, 2.0, t)
    np.testing.assert_allclose(q[0], q0)
    np.testing.assert_allclose(q[-1], q1)
    np.testing.assert_allclose(dq[[0, -1]], 0.0, atol=1e-12)
    np.testing.assert_allclose(ddq[[0, -1]], 0.0, atol=1e-12)
    assert np.abs(dq[:, 1]).max() == pytest.approx(1.875 * 2 / 2.0, rel=1e-4)
    assert np.abs(ddq[:, 0]).max() == pytest.approx(5.7735 / 4.0, rel=1e-3)
    T = min_jerk_duration(q0, q1, np.array([1.0, 1.0]), np.array([2.0, 2.0]))
    _, dq2, ddq2 = min_jerk(q0, q1, T, np.linspace(0, T, 5001))
    assert np.abs(dq2).max() <= 1.0 + 1e-9 and np.abs(ddq2).max() <= 2.0 + 1e-3


def test_min_jerk_scalar_and_vector_evaluation_agree() -> None:
    """One quintic: the 1 kHz scalar path, the vector path and MinJerkMove give the same numbers."""
    from idyn_ros.control.reference import MinJerkMove

    q0, q1, T = np.array([0.3, -1.2, 2.0]), np.array([-0.4, 0.5, 2.0]), 1.7
    t = np.concatenate([[-0.5, 0.0], np.linspace(0.0, T, 37), [T, T + 0.3]])
    vec = min_jerk(q0, q1, T, t)
    move = MinJerkMove(q0, [q1], [T])
    for k, tk in enumerate(t):
        scalar = min_jerk(q0, q1, T, float(tk))
        sampled = move.sample(max(float(tk), 0.0))
        for i in range(3):
            assert scalar[i].shape == (3,)
            np.testing.assert_allclose(scalar[i], vec[i][k], rtol=0, atol=1e-12)
            if tk >= 0:
                np.testing.assert_allclose(sampled[i], vec[i][k], rtol=0, atol=1e-12)
    # rest to rest, and at rest before the start, after the end and for a zero-length move
    for tk, q_expected in ((-0.5, q0), (0.0, q0), (T, q1), (T + 0.3, q1)):
        q, dq, ddq = min_jerk(q0, q1, T, tk)
        np.testing.assert_allclose(q, q_expected, atol=1e-12)
        np.testing.assert_allclose(dq, 0.0, atol=1e-12)
        np.testing.assert_allclose(ddq, 0.0, atol=1e-12)
    for q, expected in zip(min_jerk(q0, q1, 0.0, np.array([0.0, 1.0])), (q1, 0.0, 0.0), strict=True):
        np.testing.assert_allclose(q, np.broadcast_to(expected, (2, 3)))
    q, _, _ = min_jerk(q0, q1, 0.0, 0.0)
    np.testing.assert_allclose(q, q1)


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_fine_motion_stays_in_limits_and_is_smooth(robot: str) -> None:
    from idyn_ros.dynamics import RobotModel

    model = RobotModel.from_robot(robot)
    limits = JointLimits.from_model(model, robot=robot)
    traj = fine_motion(limits, n_scaffolds=3, seed=4, explore_s=(4.0, 5.0))
    t = np.arange(0.0, traj.duration, 1e-3)
    q, dq, ddq = traj.evaluate(t)
    assert check_limits(q, dq, ddq, limits)["ok"]
    assert np.abs(np.diff(q, axis=0)).max() < 1e-2  # continuous at phase joins
    assert np.abs(np.diff(dq, axis=0)).max() < 0.05
    _numeric_derivative_check(traj, np.array([0.7, traj.reach_durations[0] + 1.3, traj.duration - 2.0]))
