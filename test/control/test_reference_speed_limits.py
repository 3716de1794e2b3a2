"""Reference moves against the joints' velocity limits (pure numpy): a min-jerk move's peak 15/8 x distance /
duration, the reference's own move-in timed to a fraction of the limits, sampled trajectories checked point to point."""

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
    np.testing.assert_array_equal(reference.known_velocity_limits([0.0, np.nan, 3.0]), [np.inf, np.inf, 3.0])


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
    assert problem is not None and problem.startswith("a moves at") and "velocity limit 2 rad/s" in problem
    # given velocities over the limit, positions barely moving
    given = reference.SampledTrajectory(t, slow, np.column_stack([0 * t, 3.0 + 0 * t]))
    assert reference.velocity_problem(given, NAMES, LIMIT).startswith("b has a velocity of 3 rad/s")


def test_a_joint_trajectory_implied_speed_includes_the_move_from_the_current_position():
    """The first point 1.5 rad away 0.1 s from now: 15 rad/s between the current reference and it."""
    traj = reference.from_joint_trajectory_points([0.1], [[1.5, 0.0]], None, None, np.zeros(2))
    problem = reference.velocity_problem(traj, NAMES, LIMIT)
    assert problem is not None and "a moves at 15 rad/s between t = 0 and 0.1 s" in problem
    ok = reference.from_joint_trajectory_points([1.0, 2.0], [[0.5, 0.2], [0.0, 0.0]], None, None, np.zeros(2))
    assert reference.velocity_problem(ok, NAMES, LIMIT) is None


def test_a_joint_trajectory_starting_at_time_zero_away_from_the_reference_is_refused():
    """A first point at time_from_start 0 became the reference at once: a 0.3 rad step, i.e. a step torque."""
    with pytest.raises(DatasetError, match=r"first point is at time 0 but 0\.3 rad from the current reference"):
        reference.from_joint_trajectory_points([0.0, 2.0], [[0.3, 0.0], [0.3, 0.0]], None, None, np.zeros(2))
    here = reference.from_joint_trajectory_points([0.0, 2.0], [[0.0005, 0.0], [0.3, 0.0]], None, None, np.zeros(2))
    assert here.t[0] == 0.0 and here.q[0, 0] == 0.0005  # within START_TOLERANCE_RAD of the arm: taken as is
