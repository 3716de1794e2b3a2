"""The reference node while the controller is not active: it follows the measured pose, and on the controller's
activation its mode restarts from there. Callbacks are called directly on a real node (no spinning)."""

from __future__ import annotations

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
