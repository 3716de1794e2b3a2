"""Reference moves against the joints' velocity and acceleration limits (pure numpy): a min-jerk move's peaks 15/8 x
distance / duration and 10/sqrt(3) x distance / duration^2, the reference's own move-in timed to a fraction of the
limits, sampled trajectories checked point to point."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control import reference
from idyn_ros.errors import DatasetError

NAMES = ("a", "b")
LIMIT = np.array([2.0, 1.0])


def test_a_min_jerk_move_faster_than_a_velocity_limit_names_the_joint_speed_and_limit():
    """2 rad in 1 ms (3750 rad/s at the peak) was built and played."""
    assert reference.move_speed_problem([0.0, 0.0], [2.0, 0.5], 2.0, NAMES, LIMIT) is None  # 1.875, 0.47 rad/s
    problem = reference.move_speed_problem([0.0, 0.0], [2.0, 0.0], 0.001, NAMES, LIMIT)
    assert problem is not None and "a would peak at 3750 rad/s" in problem and "velocity limit 2 rad/s" in problem
    assert "needs >= 1.88 s" in problem
    assert "b would peak" in reference.move_speed_problem([0.0, 0.0], [0.0, 1.0], 1.0, NAMES, LIMIT)
    assert "would peak at inf" in reference.move_speed_problem([0.0, 0.0], [0.1, 0.0], 0.0, NAMES, LIMIT)
    assert reference.move_speed_problem([0.0, 0.0], [0.0, 0.0], 0.0, NAMES, LIMIT) is None  # nothing to move


def test_a_missing_velocity_limit_is_not_a_zero_limit():
    """A URDF without a velocity limit gives 0: nothing to check against, not "every move is too fast"."""
    assert reference.move_speed_problem([0.0, 0.0], [1.0, 0.0], 1.0, NAMES, [0.0, 1.0]) is None
    np.testing.assert_array_equal(reference.known_limits([0.0, np.nan, 3.0]), [np.inf, np.inf, 3.0])


@pytest.mark.parametrize("distance", [0.3, 2.5])
def test_the_move_in_peaks_at_its_fraction_of_the_velocity_limit(distance):
    """The npz move-in took start_delay s whatever the distance (6 rad/s on a 2.61 rad/s Panda joint)."""
    q0, q1 = np.zeros(2), np.array([distance, -distance])
    T = reference.move_in_duration(q0, q1, LIMIT)
    move = reference.MinJerkMove(q0, [q1], [T])
    peak = np.max([np.abs(move.sample(t)[1]) for t in np.linspace(0.0, T, 2001)], axis=0)
    assert peak.max() / LIMIT[1] == pytest.approx(reference.MOVE_IN_VELOCITY_FRACTION, rel=1e-4)
    assert np.all(peak <= reference.MOVE_IN_VELOCITY_FRACTION * LIMIT * (1 + 1e-9))
    assert reference.move_in_duration(q0, q0, LIMIT) == 1e-3  # already there


def test_a_sampled_trajectory_faster_than_a_velocity_limit_is_found():
    """An npz trajectory or a JointTrajectory was played whatever its speed."""
    t = np.linspace(0.0, 2.0, 2001)
    slow = np.column_stack([0.5 * np.sin(t), 0.1 * t])
    assert reference.velocity_problem(reference.SampledTrajectory(t, slow), NAMES, LIMIT) is None
    fast = np.column_stack([0.8 * np.sin(2 * np.pi * 2 * t), 0.0 * t])  # 10 rad/s peak
    problem = reference.velocity_problem(reference.SampledTrajectory(t, fast), NAMES, LIMIT)
    assert problem is not None and problem.startswith("a reaches") and "velocity limit 2 rad/s" in problem
    # given velocities over the limit, positions barely moving
    given = reference.SampledTrajectory(t, slow, np.column_stack([0 * t, 3.0 + 0 * t]))
    assert reference.velocity_problem(given, NAMES, LIMIT).startswith("b reaches 3 rad/s")


def test_a_joint_trajectory_implied_speed_includes_the_move_from_the_current_position():
    """The first point 1.5 rad away 0.1 s from now: 15 rad/s between the current reference and it."""
    traj = reference.from_joint_trajectory_points([0.1], [[1.5, 0.0]], None, None, np.zeros(2))
    problem = reference.velocity_problem(traj, NAMES, LIMIT)
    assert problem is not None and problem.startswith("a reaches") and "above its velocity limit 2 rad/s" in problem
    assert float(problem.split()[2]) >= 15.0  # at least the chord's 1.5 rad / 0.1 s
    ok = reference.from_joint_trajectory_points([1.0, 2.0], [[0.5, 0.2], [0.0, 0.0]], None, None, np.zeros(2))
    assert reference.velocity_problem(ok, NAMES, LIMIT) is None


def test_a_joint_trajectory_starting_at_time_zero_away_from_the_reference_is_refused():
    """A first point at time_from_start 0 became the reference at once: a 0.3 rad step, i.e. a step torque."""
    with pytest.raises(DatasetError, match=r"first point is at time 0 but 0\.3 rad from the current reference"):
        reference.from_joint_trajectory_points([0.0, 2.0], [[0.3, 0.0], [0.3, 0.0]], None, None, np.zeros(2))
    here = reference.from_joint_trajectory_points([0.0, 2.0], [[0.0005, 0.0], [0.3, 0.0]], None, None, np.zeros(2))
    assert here.t[0] == 0.0 and here.q[0, 0] == 0.0005  # within START_TOLERANCE_RAD of the arm: taken as is


def test_a_min_jerk_move_within_its_velocity_but_beyond_its_acceleration_limit_is_found():
    """0.5 rad in 0.45 s peaks at 2.08 rad/s (a Panda shoulder allows 2.175) but at 14.3 rad/s^2 (it allows 7.5)."""
    accel = np.array([7.5, 7.5])
    assert reference.move_speed_problem([0.0, 0.0], [0.5, 0.0], 0.45, NAMES, [2.175, 2.175]) is None
    problem = reference.move_speed_problem([0.0, 0.0], [0.5, 0.0], 0.45, NAMES, [2.175, 2.175], accel)
    assert problem is not None and "a would accelerate at 14.26 rad/s^2" in problem
    assert "acceleration limit 7.5 rad/s^2" in problem and "needs >= 0.62 s" in problem
    assert reference.move_speed_problem([0.0, 0.0], [0.5, 0.0], 0.621, NAMES, [2.175, 2.175], accel) is None
    assert reference.move_speed_problem([0.0, 0.0], [0.5, 0.0], 0.45, NAMES, [2.175, 2.175], [np.inf, 0.0]) is None


def test_the_move_in_peaks_at_its_fraction_of_the_acceleration_limit_when_that_binds():
    """A short move-in timed by the velocity limits alone reached 2.8x the Panda wrist's acceleration limit."""
    q0, q1 = np.zeros(2), np.array([0.1, 0.0])
    accel = np.array([4.0, 4.0])
    T = reference.move_in_duration(q0, q1, LIMIT, accel)
    move = reference.MinJerkMove(q0, [q1], [T])
    peak = np.max([np.abs(move.sample(t)[2]) for t in np.linspace(0.0, T, 4001)], axis=0)
    assert peak[0] / accel[0] == pytest.approx(reference.MOVE_IN_VELOCITY_FRACTION, rel=1e-3)
    assert reference.move_in_duration(q0, q1, LIMIT) < T  # the velocity limit alone gives a shorter move


def test_a_sampled_trajectory_beyond_an_acceleration_limit_is_found():
    """A velocity step between two samples, or given accelerations over the limit."""
    t = np.linspace(0.0, 2.0, 2001)
    accel = np.array([7.5, 7.5])
    smooth = reference.SampledTrajectory(t, np.column_stack([0.5 * np.sin(t), 0.1 * t]))
    assert reference.acceleration_problem(smooth, NAMES, accel) is None
    dq = np.column_stack([np.where(t < 1.0, 0.0, 1.0), 0 * t])  # 1 rad/s in 1 ms: 1000 rad/s^2
    step = reference.SampledTrajectory(t, np.column_stack([np.cumsum(dq[:, 0]) * 1e-3, 0 * t]), dq, 0 * dq)
    problem = reference.acceleration_problem(step, NAMES, accel)
    assert problem is not None and problem.startswith("a reaches 1000 rad/s^2 at t = 0.999 s")
    given = reference.SampledTrajectory(t, smooth.q, smooth.dq, np.column_stack([0 * t, 9.0 + 0 * t]))
    assert reference.acceleration_problem(given, NAMES, accel).startswith("b reaches 9 rad/s^2")
    assert reference.acceleration_problem(step, NAMES, None) is None  # no limits known


def test_only_the_acceleration_limits_an_arm_enforces_refuse_a_users_trajectory():
    """The UR5's 5 rad/s^2 is a planning value (its wrist 3 reverses at 90 rad/s^2 on a real program): not a limit."""
    from idyn_ros.data import limits

    np.testing.assert_array_equal(limits.vendor_acceleration_limits("panda", 7), limits.ACCELERATION_LIMITS["panda"])
    assert np.all(np.isinf(limits.vendor_acceleration_limits("ur5", 6)))
    assert np.all(np.isinf(limits.vendor_acceleration_limits("iiwa14", 7)))
    np.testing.assert_array_equal(limits.planning_acceleration_limits("ur5", 6), [5.0] * 6)
    assert np.all(np.isinf(limits.planning_acceleration_limits("kuka_lwr4", 7)))


def test_the_played_curve_is_one_curve_however_far_apart_the_points_are():
    """Points 0.15 s apart: q was a cubic while dq and ddq were interpolated linearly, so the reference published
    1.7 rad/s^2 while its positions accelerated at 8.4 (5x), and the check saw only the published values."""
    traj = reference.from_joint_trajectory_points([1.0, 1.15, 3.0], [[0.05, 0.0], [0.35, 0.0], [0.35, 0.0]], None,
                                                  None, np.zeros(2))
    t = np.linspace(0.0, 3.0, 30001)[:-1]  # up to the end, where it holds
    q, dq, ddq = (np.array(x) for x in zip(*(traj.sample(x) for x in t), strict=True))
    np.testing.assert_allclose(np.gradient(q[:, 0], t), dq[:, 0], atol=2e-4)
    np.testing.assert_allclose(np.gradient(dq[:, 0], t), ddq[:, 0], atol=2e-2)  # the jerk steps at the points
    peak_v, peak_a, _ = traj.peak_rates()  # what the checks use: within 1 % of the played curve's peaks
    assert peak_v[0] == pytest.approx(np.abs(dq[:, 0]).max(), rel=1e-2)
    assert peak_a[0] == pytest.approx(np.abs(ddq[:, 0]).max(), rel=1e-2)
    for when, q_k in ((1.0, [0.05, 0.0]), (1.15, [0.35, 0.0])):
        np.testing.assert_allclose(traj.sample(when)[0], q_k, atol=1e-12)  # through the points
