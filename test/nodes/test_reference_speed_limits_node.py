"""The reference node against the joints' velocity limits: the npz move-in timed by its distance, set points and
trajectories faster than the limits refused (the node keeps its reference); and the doomed node's log level of a
requested freeze. Callbacks are called directly on real nodes (no spinning)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

pytestmark = pytest.mark.ros

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
LIMIT = np.array([2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61])


def _bump(q=Q0, **moves):
    """``q`` with joint j (1-based, as in panda_joint<j>) moved by the given rad: ``_bump(j1=2.0)``."""
    q = np.array(q, dtype=float)
    for j, d in moves.items():
        q[int(j[1:]) - 1] += d
    return q


def _joint_state(k, q=Q0):
    from sensor_msgs.msg import JointState

    msg = JointState(name=PANDA, position=[float(x) for x in q], velocity=[0.0] * 7, effort=[0.0] * 7)
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
    return msg


def _reference_node(context, **params):
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.reference import ReferenceNode

    node = ReferenceNode(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    q, dq = [], []
    node.pub.publish = lambda m: (q.append(np.array(m.positions)), dq.append(np.array(m.velocities)))
    return node, q, dq


def _play(node, first, last):
    for k in range(first, last):
        node._on_joint_state(_joint_state(k))


def _npz(path, q):
    t = np.arange(q.shape[0]) * 1e-3
    np.savez(path, t=t, q_d=q, joint_names=np.array(PANDA))
    return str(path)


def test_npz_move_in_holds_start_delay_then_moves_within_half_the_velocity_limits(rclpy_context, tmp_path):
    """The move to q_d[0] took start_delay (1 s) whatever the distance: 1.8 rad on joint 1 and 2.5 rad on joint 5
    peaked at 3.4 and 4.7 rad/s (limits 2.175 and 2.61)."""
    from idyn_ros.control.reference import MOVE_IN_VELOCITY_FRACTION, move_in_duration

    q_d = np.tile(_bump(j1=-1.8, j5=2.5), (500, 1))
    q_d[:, 6] += 0.2 * np.sin(np.arange(500) * 1e-3)
    node, q, dq = _reference_node(rclpy_context, mode="npz", npz_path=_npz(tmp_path / "far.npz", q_d),
                                  start_delay=0.5, lookahead_periods=0.0)
    try:
        move = move_in_duration(Q0, q_d[0], LIMIT)
        assert move > 3.0
        end = round((0.5 + move) * 1000) + 600
        _play(node, 0, end)
        q, dq = np.array(q), np.array(dq)
        np.testing.assert_allclose(q[:500], np.tile(Q0, (500, 1)))  # start_delay: held
        assert np.all(np.abs(dq) <= MOVE_IN_VELOCITY_FRACTION * LIMIT * (1 + 1e-6))
        assert np.abs(dq).max(axis=0)[4] / LIMIT[4] > 0.99 * MOVE_IN_VELOCITY_FRACTION  # not slower than needed
        start = round((0.5 + move) * 1000)
        np.testing.assert_allclose(q[start + 1], q_d[0], atol=1e-3)  # then the trajectory, from its start
        assert dq[start + 10][6] == pytest.approx(0.2, abs=1e-3)  # playing it (its joint 7 moves at 0.2 rad/s)
        np.testing.assert_allclose(q[-1], q_d[-1], atol=1e-9)
    finally:
        node.destroy_node()


def test_an_npz_trajectory_faster_than_the_velocity_limits_is_refused(rclpy_context, tmp_path):
    """A 10 rad/s excitation on a 2.175 rad/s joint was played."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError

    t = np.arange(2000) * 1e-3
    q_d = np.tile(Q0, (t.size, 1))
    q_d[:, 0] = 0.8 * np.sin(2 * math.pi * 2 * t)
    path = _npz(tmp_path / "fast.npz", q_d)
    with pytest.raises(ParameterError, match=r"panda_joint1 reaches 10.* above its velocity limit 2.175"):
        _reference_node(rclpy_context, mode="npz", npz_path=path)
    node, q, _ = _reference_node(rclpy_context)  # hold
    try:
        _play(node, 0, 5)
        assert node.set_parameters([Parameter("npz_path", value=path)])[0].successful  # not played in mode hold
        result = node.set_parameters([Parameter("mode", value="npz")])[0]
        assert not result.successful and "panda_joint1 reaches 10" in result.reason
        assert node.params.value.mode == "hold"
        _play(node, 5, 500)
        np.testing.assert_allclose(q[-1], Q0)
    finally:
        node.destroy_node()


def test_setpoints_faster_than_the_velocity_limits_are_refused(rclpy_context):
    """2 rad in 1 ms between set points (3750 rad/s at the peak) was accepted at start-up and at run time."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError

    far = _bump(j1=2.0).tolist()
    with pytest.raises(ParameterError, match=r"set point 1 to set point 2 \(durations\[1\]\): panda_joint1 would peak "
                                             r"at 3750 rad/s .* velocity limit 2.175 rad/s; this move needs >= 1.72 s"):
        _reference_node(rclpy_context, mode="setpoints", setpoints=far + Q0.tolist(), durations=[2.0, 0.001])
    node, q, _ = _reference_node(rclpy_context, mode="setpoints", setpoints=far + Q0.tolist(), durations=[2.0, 2.0],
                                 start_delay=0.0)
    try:
        _play(node, 0, 100)  # moving towards `far`
        # at run time the first move starts at the current reference, which is known now: too fast from there
        result = node.set_parameters([Parameter("durations", value=[0.01, 2.0])])[0]
        assert not result.successful and "from the current reference to set point 1 (durations[0]): panda_joint1 " \
            "would peak at" in result.reason
        assert node.params.value.durations == (2.0, 2.0)
        _play(node, 100, 200)
        assert q[-1][0] > q[100][0] > q[99][0]  # the move it had goes on
    finally:
        node.destroy_node()


def test_a_first_set_point_too_fast_from_the_start_pose_is_refused_and_the_pose_held(rclpy_context):
    """The first move starts at the first state, unknown at start-up: 2 rad in 10 ms (375 rad/s) was played."""
    from idyn_ros.nodes.common import Diagnostics

    far = _bump(j1=2.0).tolist()
    node, q, dq = _reference_node(rclpy_context, mode="setpoints", setpoints=far, durations=[0.01],
                                  start_delay=0.0)
    try:
        _play(node, 0, 300)
        np.testing.assert_allclose(q[-1], Q0)
        assert np.all(np.array(dq) == 0.0)
        assert node.diag.level == Diagnostics.ERROR and "panda_joint1 would peak at 375 rad/s" in node.diag.message
    finally:
        node.destroy_node()


def _trajectory(points):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory(joint_names=PANDA)
    for t, positions, velocities in points:
        p = JointTrajectoryPoint(positions=[float(x) for x in positions], velocities=velocities)
        p.time_from_start = Duration(sec=int(t), nanosec=round(t % 1 * 1e9))
        msg.points.append(p)
    return msg


@pytest.mark.parametrize("case", ["implied", "given", "between_points"])
def test_a_joint_trajectory_faster_than_the_velocity_limits_is_refused(rclpy_context, case):
    """A JointTrajectory 1.5 rad away 0.1 s from now (15 rad/s) was played at once."""
    node, q, _ = _reference_node(rclpy_context, mode="trajectory")
    try:
        _play(node, 0, 5)
        near = _bump(j1=0.1)
        points = {"implied": [(0.1, _bump(j1=1.5), [])],
                  "given": [(1.0, near, [5.0] + [0.0] * 6), (2.0, Q0, [0.0] * 7)],
                  "between_points": [(1.0, near, []), (1.01, _bump(near, j5=0.5), []), (3.0, Q0, [])]}[case]
        errors = []
        node.get_logger = lambda: SimpleNamespace(error=errors.append)
        node._on_trajectory(_trajectory(points))
        assert errors and "JointTrajectory rejected" in errors[0] and "velocity limit" in errors[0]
        _play(node, 5, 1500)
        np.testing.assert_allclose(q[-1], Q0)
    finally:
        node.destroy_node()


def test_a_joint_trajectory_within_the_velocity_limits_is_played(rclpy_context):
    node, q, _ = _reference_node(rclpy_context, mode="trajectory")
    try:
        _play(node, 0, 5)
        goal = _bump(j1=0.5)
        node._on_trajectory(_trajectory([(1.0, goal, []), (1.5, goal, [])]))
        _play(node, 5, 2000)
        np.testing.assert_allclose(q[-1], goal)
    finally:
        node.destroy_node()


@pytest.mark.parametrize("robot", ["panda", "ur5", "iiwa14"])
def test_the_config_set_points_stay_within_the_velocity_limits(robot):
    """config/<robot>.yaml's out-and-back moves pass the check, from the plant's start pose too."""
    from idyn_ros.nodes.reference import _settings_problem
    from idyn_ros.parameters import load
    from idyn_ros.robots import get_robot
    from idyn_ros.sim import Plant

    v = load("reference", robot, n=get_robot(robot).dof)
    assert v.mode == "setpoints"
    assert _settings_problem(v) is None
    assert _settings_problem(v, Plant(robot, "true").state().q_true.copy()) is None
    assert _settings_problem(v, np.asarray(v.setpoints[-get_robot(robot).dof:])) is None  # looped: from the last


def test_a_requested_freeze_is_logged_at_info_a_detected_one_at_error(rclpy_context):
    """~/freeze was logged at ERROR like a freeze the oscillation detector triggers."""
    from std_srvs.srv import Trigger

    from idyn_ros.msg import ControllerState
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    logged: list[tuple[str, str]] = []
    log = SimpleNamespace(**{level: (lambda m, level=level: logged.append((level, m)))
                             for level in ("info", "warning", "error")})
    node.get_logger = lambda: log
    node.pub.publish = lambda m: None
    node.diag.set = lambda *a, **k: None

    def tick(k):
        node._on_joint_state(_joint_state(k))
        cs = ControllerState(joint_names=PANDA, acceleration_command=[0.0] * 7, mode=ControllerState.MODE_ACTIVE)
        cs.header.stamp.sec, cs.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
        node._on_controller_state(cs)

    try:
        for k in range(20):
            tick(k)
        assert node._srv_freeze(Trigger.Request(), Trigger.Response()).success
        for k in range(20, 40):
            tick(k)
        assert logged == [("info", "adaptation frozen: frozen by ~/freeze")]
        node.learner.unfreeze()
        node.learner.freeze("oscillation on joint 0")
        for k in range(40, 60):
            tick(k)
        assert logged[-1] == ("error", "adaptation frozen: oscillation on joint 0")
    finally:
        node.destroy_node()


@pytest.mark.parametrize("mode", ["setpoints", "npz"])
def test_a_loop_closes_with_a_move_back_instead_of_a_jump(rclpy_context, tmp_path, mode):
    """loop: true restarted at the first point: from the last set point (or the file's end) the reference jumped."""
    far = _bump(j1=1.0, j5=1.0)
    if mode == "setpoints":
        params = {"mode": "setpoints", "setpoints": far.tolist(), "durations": [2.0]}
    else:
        ramp = Q0 + np.linspace(0.0, 1.0, 2000)[:, None] * (far - Q0)  # 1 s at 1 kHz, within the limits
        params = {"mode": "npz", "npz_path": _npz(tmp_path / "ramp.npz", ramp)}
    node, q, _ = _reference_node(rclpy_context, loop=True, start_delay=0.2, **params)
    try:
        _play(node, 0, 1)  # the first state builds the source
        _play(node, 1, 2 * int(1000 * node.source.duration) + 10)  # two laps and a bit
        step = np.abs(np.diff(np.array(q), axis=0)).max(axis=0) / 1e-3  # rad/s between consecutive references
        assert np.all(step <= LIMIT * 1.01), step
        assert np.abs(np.array(q) - far).min(axis=0).max() < 1e-6  # it does reach the far point
    finally:
        node.destroy_node()


def test_a_joint_trajectory_beyond_the_pandas_acceleration_limits_is_refused(rclpy_context):
    """0.2 rad on panda_joint2 in 0.1 s stays under its 2.175 rad/s (2.12) but needs 8.7 rad/s^2 (it allows 7.5)."""
    node, q, _ = _reference_node(rclpy_context, mode="trajectory")
    try:
        _play(node, 0, 5)
        near = _bump(j2=0.05)
        jerky = [(1.0, near, []), (1.1, _bump(near, j2=0.2), []), (3.0, _bump(near, j2=0.2), [])]
        errors = []
        node.get_logger = lambda: SimpleNamespace(error=errors.append)
        node._on_trajectory(_trajectory(jerky))
        assert errors and "JointTrajectory rejected: panda_joint2" in errors[0]
        assert "acceleration limit 7.5 rad/s^2" in errors[0]
        _play(node, 5, 1500)
        np.testing.assert_allclose(q[-1], Q0)
    finally:
        node.destroy_node()


def test_set_points_beyond_an_acceleration_limit_are_refused_only_where_the_arm_enforces_one():
    """The Panda's datasheet limits refuse 0.5 rad in 0.45 s; the UR5's planning value (5 rad/s^2) refuses nothing."""
    from idyn_ros.nodes.reference import _settings_problem
    from idyn_ros.parameters import load

    v = load("reference", "panda", n=7)
    quick = {"setpoints": [float(x) for x in _bump(j2=0.5)], "durations": [0.45]}
    problem = _settings_problem(v.replace(**quick), Q0)
    assert problem is not None and "panda_joint2 would accelerate at" in problem and "needs >= 0.62 s" in problem
    ur = load("reference", "ur5", n=6)
    q_ur = np.array([0.0, -1.57, 1.57, -1.57, -1.57, 0.0])
    bump = q_ur + np.array([0.0, 0.5, 0.0, 0.0, 0.0, 0.0])
    # (joint limits only: the bump lowers the forearm to 0.07 m above the mounting plane, under the workspace's floor)
    assert _settings_problem(ur.replace(setpoints=[float(x) for x in bump], durations=[0.45], workspace_check=False),
                             q_ur) is None


def test_an_npz_move_in_that_would_leave_its_designed_workspace_is_refused(rclpy_context, tmp_path):
    """`idyn excite` keeps the trajectory in its workspace; the reference's joint-space move to its start did not:
    here both ends are inside, and the tool swings into the base column on the way."""
    from idyn_ros.data.workspace import Workspace, WorkspaceGuard, line_problem, workspace_arrays
    from idyn_ros.dynamics import RobotModel

    far = _bump(j4=-0.434, j6=-1.5)
    guard = WorkspaceGuard(RobotModel.from_robot("panda"), Workspace())
    assert guard.check(np.array([Q0, far]))["ok"] and "base column" in line_problem(guard, Q0, far)
    q_d = np.tile(far, (300, 1))
    path = tmp_path / "designed.npz"
    np.savez(path, t=np.arange(300) * 1e-3, q_d=q_d, joint_names=np.array(PANDA), **workspace_arrays(Workspace()))
    node, q, _ = _reference_node(rclpy_context, mode="npz", npz_path=str(path), start_delay=0.1,
                                 lookahead_periods=0.0)
    try:
        _play(node, 0, 400)
        np.testing.assert_allclose(np.array(q), np.tile(Q0, (len(q), 1)))  # held where it was
    finally:
        node.destroy_node()
    plain = _npz(tmp_path / "plain.npz", q_d)  # a file without a workspace: checked against the node's (the same)
    for check, moves in ((True, False), (False, True)):  # workspace_check false: joint limits only, moves as before
        node, q, _ = _reference_node(rclpy_context, mode="npz", npz_path=plain, start_delay=0.1,
                                     lookahead_periods=0.0, workspace_check=check)
        try:
            _play(node, 0, 400)
            assert (np.abs(np.array(q)[-1] - Q0).max() > 1e-3) == moves
        finally:
            node.destroy_node()


def test_set_points_and_trajectories_that_leave_the_workspace_are_refused(rclpy_context):
    """Only the npz move-in was checked: set points and a JointTrajectory could take a real arm through its table or
    its own base column. Both ends of ``far`` are inside; on the way the tool swings into the base column."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.reference import _settings_problem
    from idyn_ros.parameters import load

    far, low = _bump(j4=-0.434, j6=-1.5), _bump(j2=2.0, j4=1.2)  # low: the hand 0.16 m under the 0.1 m floor
    empty = load("reference", "panda", n=7).replace(mode="setpoints", setpoints=(), durations=())
    assert _settings_problem(empty) is None and _settings_problem(empty, Q0) is None  # no set point: no move
    with pytest.raises(ParameterError, match="too low"):  # a set point outside: refused at start
        _reference_node(rclpy_context, mode="setpoints", setpoints=[float(x) for x in low], durations=[3.0])
    node, q, _ = _reference_node(rclpy_context, mode="setpoints", setpoints=[float(x) for x in far],
                                 durations=[3.0], start_delay=0.0, lookahead_periods=0.0)
    try:
        _play(node, 0, 2000)  # the move from the arm's pose is known at the first state: refused there, held
        np.testing.assert_allclose(np.array(q), np.tile(Q0, (len(q), 1)))
        assert "base column" in node.diag.message  # said, not only held
        result = node.set_parameters([Parameter("setpoints", value=[float(x) for x in _bump(j1=0.3)])])[0]
        assert result.successful  # a move that stays inside is taken
        errors = []
        node.get_logger = lambda: SimpleNamespace(error=errors.append, info=lambda *_: None)
        node._on_trajectory(_trajectory([(3.0, far, [])]))
        assert errors and "JointTrajectory rejected: it would leave the workspace" in errors[0]
        assert "base column" in errors[0] and "workspace_check false" in errors[0]
    finally:
        node.destroy_node()
    node, q, _ = _reference_node(rclpy_context, mode="trajectory", workspace_check=False, lookahead_periods=0.0)
    try:  # joint limits only (an arm on a wall): the same trajectory plays
        _play(node, 0, 5)
        node._on_trajectory(_trajectory([(3.0, far, [])]))
        _play(node, 5, 3100)
        np.testing.assert_allclose(q[-1], far, atol=1e-9)
    finally:
        node.destroy_node()
