"""The wrench_observer node on a UR's motor currents: converted with the gains it says on start-up, the trusted
estimate (sigma, contact) published, ~/rezero served."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

UR = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]
Q0 = np.array([0.0, -1.571, 1.571, -1.571, -1.571, 0.0])
GAINS = [9.0, 8.0, 7.5, 6.0, 5.0, 4.0]


def _spin(exe, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        exe.spin_once(timeout_sec=0.001)


def test_currents_are_converted_and_the_trusted_estimate_published(rclpy_context, caplog):
    import rclpy
    from geometry_msgs.msg import WrenchStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    from idyn_ros.nodes.common import COMMAND_OUT, MONITOR
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    node = WrenchObserverNode(context=rclpy_context, parameter_overrides=[
        Parameter("robot", value="ur5"), Parameter("rate_hz", value=500.0),
        Parameter("torque_source", value="effort"), Parameter("effort_unit", value="current"),
        Parameter("torque_constants", value=GAINS), Parameter("publish_divider", value=1),
        Parameter("tau_sigma", value=[1.0, 1.0, 1.0, 0.5, 0.5, 0.5]),  # a model's validation numbers would do this
        Parameter("tau_sigma_rest", value=[0.1, 0.1, 0.1, 0.05, 0.05, 0.05])])
    assert "motor current" in node.effort.describe() and "torque_constants parameter" in node.effort.describe()
    plant = rclpy.create_node("scripted_ur", context=rclpy_context)
    pub = plant.create_publisher(JointState, "/joint_states", COMMAND_OUT)
    got = {"tool": [], "sigma": [], "contact": [], "hidden": []}
    plant.create_subscription(WrenchStamped, "/idyn/wrench_estimate/tool", got["tool"].append, MONITOR)
    plant.create_subscription(WrenchStamped, "/idyn/wrench_estimate/sigma", got["sigma"].append, MONITOR)
    plant.create_subscription(WrenchStamped, "/idyn/wrench_estimate/hidden", got["hidden"].append, MONITOR)
    plant.create_subscription(Bool, "/idyn/wrench_estimate/contact", got["contact"].append, MONITOR)
    exe = SingleThreadedExecutor(context=rclpy_context)
    for n in (plant, node):
        exe.add_node(n)
    rbd = node.observer.rbd
    g = rbd.gravity(Q0)
    J, R = rbd.flange_jacobian(Q0)
    push = np.array([0.0, 0.0, -15.0, 0.0, 0.0, 0.0])  # base axes, environment on robot

    def publish(k, torque):
        current = torque / np.asarray(GAINS)  # what a UR driver reports for that joint torque
        msg = JointState(name=UR, position=Q0.tolist(), velocity=[0.0] * 6, effort=current.tolist())
        msg.header.stamp.sec, msg.header.stamp.nanosec = 1 + k // 500, (k % 500) * 2_000_000
        pub.publish(msg)
        _spin(exe, 0.002)

    _spin(exe, 0.3)
    for k in range(700):  # 1.4 s at rest, contact-free: zeroed after 2 x rest_time
        publish(k, g)
    assert got["tool"] and not got["contact"][-1].data
    for k in range(700, 900):  # a push: the actuators hold gravity minus it
        publish(k, g - J.T @ push)
    _spin(exe, 0.1)
    f = got["tool"][-1].wrench.force
    np.testing.assert_allclose([f.x, f.y, f.z], R.T @ push[:3], atol=1.0)  # the currents became Nm with the gains
    assert got["contact"][-1].data and got["tool"][-1].header.frame_id == "tool0"
    s = got["sigma"][-1].wrench.force
    assert 0 < s.x < np.inf and 0 < s.z < np.inf
    h = got["hidden"][-1].wrench.force  # no friction model, so no band: nothing hides in it
    assert (h.x, h.y, h.z) == (0.0, 0.0, 0.0) and got["hidden"][-1].header.frame_id == "tool0"
    client = plant.create_client(Trigger, "/wrench_observer/rezero")
    assert client.wait_for_service(timeout_sec=2.0)
    future = client.call_async(Trigger.Request())
    rclpy.spin_until_future_complete(plant, future, executor=exe, timeout_sec=2.0)
    assert future.result().success
    for k in range(900, 950):
        publish(k, g - J.T @ push)
    _spin(exe, 0.1)
    f = got["tool"][-1].wrench.force
    assert abs(f.z) < 1.0 and not got["contact"][-1].data  # zeroed on request, with the push held


def test_joint_states_without_effort_pause_the_estimate_and_say_so(rclpy_context):
    """torque_source effort, and the driver stops sending efforts: the observer ran on the last effort it had,
    silently. It now pauses and /diagnostics says why."""
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from idyn_ros.nodes.common import Diagnostics
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    node = WrenchObserverNode(context=rclpy_context, parameter_overrides=[
        Parameter("robot", value="ur5"), Parameter("rate_hz", value=500.0),
        Parameter("torque_source", value="effort"), Parameter("effort_unit", value="torque")])
    try:
        g = node.observer.rbd.gravity(Q0)

        def state(k, effort):
            msg = JointState(name=UR, position=Q0.tolist(), velocity=[0.0] * 6, effort=effort)
            msg.header.stamp.sec, msg.header.stamp.nanosec = 1 + k // 500, (k % 500) * 2_000_000
            node._on_joint_state(msg)

        for k in range(50):
            state(k, g.tolist())
        updates = node.observer.updates
        assert updates > 0
        for k in range(50, 60):
            state(k, [])
        assert node.observer.updates == updates  # paused: no torque to observe
        node._on_diagnostics()
        assert node.diag.level == Diagnostics.WARN and "carry no effort" in node.diag.message
        for k in range(60, 70):
            state(k, g.tolist())
        node._on_diagnostics()
        assert node.observer.updates > updates and "carry no effort" not in node.diag.message
    finally:
        node.destroy_node()


def test_the_low_pass_cutoff_takes_effect_on_both_wrenches_at_start_and_at_run_time(rclpy_context):
    from rclpy.parameter import Parameter

    from idyn_ros.data.filters import FirstOrderLowPass, lowpass_alpha
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    node = WrenchObserverNode(context=rclpy_context, parameter_overrides=[
        Parameter("robot", value="ur5"), Parameter("rate_hz", value=500.0), Parameter("lowpass_cutoff_hz", value=20.0)])
    try:
        maps = (node.observer.map_direct, node.observer.map_momentum)
        assert [m.alpha for m in maps] == [FirstOrderLowPass(1, 500.0, 20.0).alpha] * 2  # the data filter's own step
        assert node.set_parameters([Parameter("lowpass_cutoff_hz", value=0.0)])[0].successful
        assert [m.alpha for m in maps] == [1.0, 1.0]  # off
        assert node.set_parameters([Parameter("lowpass_cutoff_hz", value=5.0)])[0].successful
        assert [m.alpha for m in maps] == [lowpass_alpha(5.0, 500.0)] * 2
    finally:
        node.destroy_node()
