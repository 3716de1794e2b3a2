"""Untrusted input, run-time parameters and bad service requests of the controller, reference and plant nodes: a safe
command or a refusal with a reason, never an exception in a callback or a half-changed node. Callbacks are called
directly on real nodes (no spinning): what is checked is the node's answer and the object behind it."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytestmark = pytest.mark.ros

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def _joint_state(k, q=Q0):
    from sensor_msgs.msg import JointState

    msg = JointState(name=PANDA, position=[float(x) for x in q], velocity=[0.0] * 7, effort=[0.0] * 7)
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
    return msg


def _controller(context):
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.controller import ControllerNode

    overrides = {"torque_rate_limit": -1.0, "stale_periods": 500.0, "max_stamp_age": 0.0}
    node = ControllerNode(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
    commands: list[np.ndarray] = []
    node.cmd_pub.publish = lambda m: commands.append(np.array(m.data))
    node.state_pub.publish = lambda m: None
    return node, commands


def _reference(q, dq=None, ddq=None):
    from idyn_ros.msg import JointReference

    return JointReference(joint_names=PANDA, positions=[float(x) for x in q], velocities=list(dq or [0.0] * 7),
                          accelerations=list(ddq or [0.0] * 7))


def test_controller_node_answers_a_nan_reference_with_the_safe_hold(rclpy_context):
    """The NaN reached q_d: ControllerState's position error was NaN (the command was the safe hold already)."""
    node, commands = _controller(rclpy_context)
    try:
        for k in range(3):
            node._on_joint_state(_joint_state(k))
        q = Q0.copy()
        q[2] = math.nan
        node._on_reference(_reference(q))
        node._on_joint_state(_joint_state(3))
        core = node.core
        np.testing.assert_allclose(commands[-1], core.robot.gravity(Q0))
        assert "non-finite reference q_d" in core.reason
        assert np.all(np.isfinite(node.state_msg.position_error)) and np.all(np.isfinite(core.q_d))
    finally:
        node.destroy_node()


def test_controller_node_holds_a_reference_beyond_a_joint_limit_at_the_limit_and_says_so(rclpy_context):
    """A reference 1 rad past joint 1's limit was tracked into the end stop at the effort limit, without a word."""
    from idyn_ros.nodes.common import Diagnostics

    node, commands = _controller(rclpy_context)
    try:
        for k in range(3):
            node._on_joint_state(_joint_state(k))
        core = node.core
        node._on_reference(_reference(Q0))  # the first reference after activation, at the held pose: taken as it is
        q = Q0.copy()
        q[0] = core.robot.upper[0] + 1.0
        node._on_reference(_reference(q))
        node._on_joint_state(_joint_state(3))
        assert core.q_d[0] == core.robot.upper[0] and core.mode == 1
        assert np.all(np.abs(commands[-1]) < core.limiter.limit_near)
        node._on_diagnostics_timer()
        assert node.diag.level == Diagnostics.WARN and "beyond a joint limit" in node.diag.message
        assert node.diag.values["references_beyond_limits"] == "1"
    finally:
        node.destroy_node()


@pytest.mark.parametrize("absurd", [{"mass": 1e300}, {"mass": 1.0, "com": 1e300}], ids=["mass", "com"])
def test_controller_set_payload_refuses_a_payload_no_arm_carries(rclpy_context, absurd):
    """1e300 kg was included (every joint at its effort limit); a CoM 1e300 m away made the command NaN."""
    from idyn_ros.srv import SetPayload

    node, commands = _controller(rclpy_context)
    try:
        service = next(s for s in node.services if s.srv_name.endswith("/set_payload"))
        request = SetPayload.Request(mass=absurd["mass"])
        request.com.x = absurd.get("com", 0.0)
        response = service.callback(request, SetPayload.Response())
        assert not response.success and "payload" in response.message
        assert node.core.payload is None
        for k in range(3):
            node._on_joint_state(_joint_state(k))
        assert np.all(np.isfinite(commands[-1])) and node.core.mode == 1
    finally:
        node.destroy_node()


def test_controller_refuses_use_sim_time_while_configured(rclpy_context):
    """use_sim_time was accepted at run time, but the input ages stayed on the monotonic clock chosen at configure."""
    from rclpy.parameter import Parameter

    node, _ = _controller(rclpy_context)
    try:
        result = node.set_parameters([Parameter("use_sim_time", value=True)])[0]
        assert not result.successful and "configure" in result.reason
        assert node.get_parameter("use_sim_time").value is False and not node._sim_time
        node.trigger_deactivate()
        node.trigger_cleanup()
        assert node.set_parameters([Parameter("use_sim_time", value=True)])[0].successful
    finally:
        node.destroy_node()


def _trajectory(points):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory(joint_names=PANDA)
    for t, positions, velocities in points:
        p = JointTrajectoryPoint(positions=positions, velocities=velocities)
        p.time_from_start = Duration(sec=int(t), nanosec=round(t % 1 * 1e9))
        msg.points.append(p)
    return msg


@pytest.mark.parametrize("case", ["nan", "short_positions", "short_velocities", "beyond_limit"])
def test_reference_refuses_a_bad_joint_trajectory_and_keeps_its_reference(rclpy_context, case):
    """A point with fewer values than names raised IndexError in the callback; a NaN or a position past a joint
    limit was published as the reference."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.reference import ReferenceNode

    node = ReferenceNode(context=rclpy_context, parameter_overrides=[Parameter("mode", value="trajectory")])
    try:
        published = []
        node.pub.publish = lambda m: published.append(np.array(m.positions))
        node._on_joint_state(_joint_state(0))
        q = Q0.tolist()
        points = {"nan": [(0.5, [math.nan, *q[1:]], [])], "short_positions": [(0.5, q[:6], [])],
                  "short_velocities": [(0.5, q, [0.0] * 3)], "beyond_limit": [(0.5, [5.0, *q[1:]], [])]}[case]
        node._on_trajectory(_trajectory(points))
        for k in range(1, 600):
            node._on_joint_state(_joint_state(k))
        np.testing.assert_allclose(published[-1], Q0)
    finally:
        node.destroy_node()


def test_reference_refuses_setpoints_beyond_the_joint_limits(rclpy_context):
    """Set points past a joint limit were accepted and played (the controller then pushed into the end stop)."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.reference import ReferenceNode

    beyond = [5.0, *Q0[1:].tolist()]
    node = ReferenceNode(context=rclpy_context, parameter_overrides=[
        Parameter("mode", value="setpoints"), Parameter("setpoints", value=Q0.tolist()),
        Parameter("durations", value=[1.0])])
    try:
        result = node.set_parameters([Parameter("setpoints", value=beyond)])[0]
        assert not result.successful and "panda_joint1 = 5 rad is outside its limits" in result.reason
        assert node.params.value.setpoints == tuple(Q0)
    finally:
        node.destroy_node()
    with pytest.raises(ParameterError, match="outside its limits"):
        ReferenceNode(context=rclpy_context, parameter_overrides=[
            Parameter("mode", value="setpoints"), Parameter("setpoints", value=beyond),
            Parameter("durations", value=[1.0])])


@pytest.fixture()
def plant(rclpy_context):
    from idyn_ros.nodes.plant import PlantNode

    node = PlantNode(context=rclpy_context, robot="panda", profile="ideal", clock_mode="realtime")
    try:
        yield node
    finally:
        node.destroy_node()


@pytest.mark.parametrize("absurd", [{"mass": 1e300}, {"mass": 1.0, "com": 1e300}], ids=["mass", "com"])
def test_plant_set_payload_refuses_a_payload_no_arm_carries(plant, absurd):
    """Both were accepted and made the simulated arm NaN for good."""
    from idyn_ros.srv import SetPayload

    request = SetPayload.Request(mass=absurd["mass"])
    request.com.x = absurd.get("com", 0.0)
    response = plant.set_payload_service.callback(request, SetPayload.Response())  # the ~/set_payload handler
    assert not response.success and "payload" in response.message
    assert plant.plant.payload_mass == 0.0
    plant.plant.advance(np.zeros(7))
    assert np.all(np.isfinite(plant.plant.state().q_true))


def test_plant_apply_wrench_refuses_an_absurd_wrench(plant):
    """1e300 N was applied: MuJoCo reset the simulation as unstable and the ground truth said 1e299 Nm."""
    from idyn_ros.srv import ApplyWrench

    request = ApplyWrench.Request(duration=1.0)
    request.wrench.force.x = 1e300
    response = plant._srv_apply_wrench(request, ApplyWrench.Response())
    assert not response.success and "beyond" in response.message
    assert plant.plant.wrench_link == "" and np.all(plant.plant.external_torque == 0.0)
    request.wrench.force.x = 50.0  # a push is still applied
    assert plant._srv_apply_wrench(request, ApplyWrench.Response()).success


def test_plant_refuses_use_sim_time_at_run_time(plant):
    """Accepted on the realtime plant: its /joint_states stamps fell to 0 (no /clock), i.e. went backwards."""
    from rclpy.parameter import Parameter

    result = plant.set_parameters([Parameter("use_sim_time", value=True)])[0]
    assert not result.successful and "clock" in result.reason
    plant._publish()
    assert plant._js.header.stamp.sec > 0


def test_the_plant_refuses_use_sim_time_at_run_time(plant):
    """The plant is the clock: following a /clock nobody publishes would stamp its states 0, then backwards."""
    from rclpy.parameter import Parameter

    result = plant.set_parameters([Parameter("use_sim_time", value=True)])[0]
    assert not result.successful and "the plant is the clock" in result.reason
    assert plant.get_parameter("use_sim_time").value is False


def _transition(goal_id):
    from lifecycle_msgs.msg import TransitionEvent

    msg = TransitionEvent()
    msg.goal_state.id = goal_id
    return msg


def test_after_a_deactivation_the_reference_follows_the_arm_and_restarts_from_it(rclpy_context):
    """Latched, then deactivate + activate: the set points had played on while the arm sat in the safe hold, and the
    first reference after activation was 0.5 rad away from the arm (a step; since the controller's capture, a move
    the user never asked for)."""
    from lifecycle_msgs.msg import State
    from rclpy.parameter import Parameter
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from idyn_ros.nodes.reference import REJECTED, ReferenceNode

    target = Q0 + np.array([0.5, 0, 0, 0, 0, 0, 0])
    node = ReferenceNode(context=rclpy_context, parameter_overrides=[
        Parameter("mode", value="setpoints"), Parameter("setpoints", value=target.tolist()),
        Parameter("durations", value=[2.0]), Parameter("start_delay", value=0.0)])
    sent, errors = [], []
    node.pub.publish = lambda m: sent.append(np.array(m.positions))
    node.get_logger().error = errors.append
    try:
        for k in range(1000):  # the move to the set point has started
            node._on_joint_state(_joint_state(k))
        assert sent[-1][0] > Q0[0] + 0.1
        node._on_controller_transition(_transition(State.PRIMARY_STATE_INACTIVE))  # latched, then deactivated
        sagged = Q0 + 0.2
        for k in range(1000, 1100):  # the arm is elsewhere now; the reference says where it is
            node._on_joint_state(_joint_state(k, sagged))
        np.testing.assert_allclose(sent[-1], sagged)
        point = JointTrajectoryPoint(positions=Q0.tolist())
        point.time_from_start.sec = 2
        node._on_trajectory(JointTrajectory(joint_names=PANDA, points=[point]))
        assert errors and errors[-1].startswith(REJECTED) and "not active" in errors[-1]
        node._on_controller_transition(_transition(State.PRIMARY_STATE_ACTIVE))
        node._on_joint_state(_joint_state(1100, sagged))
        np.testing.assert_allclose(sent[-1], sagged, atol=1e-9)  # the set points again, from where the arm is
        for k in range(1101, 3500):
            node._on_joint_state(_joint_state(k, sagged))
        np.testing.assert_allclose(sent[-1], target, atol=1e-9)
        assert np.abs(np.diff(np.array(sent[1100:]), axis=0)).max() < 2e-3  # no step anywhere on the way
    finally:
        node.destroy_node()


def test_a_parameter_change_builds_the_new_source_outside_the_1khz_callback(rclpy_context, tmp_path):
    """Loading and checking a 20 s npz took 5.4 ms inside the joint-state callback (the next state after a parameter
    change): in a composed process every node's 1 kHz callback waited for it. The parameter callback builds it now."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.reference import ReferenceNode

    t = np.arange(0, 2.0, 1e-3)
    q = Q0 + 0.1 * np.sin(2 * np.pi * 0.5 * t)[:, None] * np.eye(7)[0]
    path = tmp_path / "excite.npz"
    np.savez(path, t=t, q_d=q, joint_names=np.array(PANDA))
    node = ReferenceNode(context=rclpy_context)
    node.pub.publish = lambda m: None
    try:
        for k in range(10):
            node._on_joint_state(_joint_state(k))
        before = node.source
        assert node.set_parameters([Parameter("npz_path", value=str(path)), Parameter("mode", value="npz")])[0] \
            .successful
        assert node.source is not None and node.source is not before  # built by the parameter change itself
        assert node.t0_ns == node.filter.stamp_ns
    finally:
        node.destroy_node()
