"""joint_state_buffer, reference, doomed, wrench_observer, feedforward over DDS with a scripted plant."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def _setup(context, nodes):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from idyn_ros.nodes.common import COMMAND_OUT

    plant = rclpy.create_node("scripted_plant", context=context)
    pub = plant.create_publisher(JointState, "/joint_states", COMMAND_OUT)
    exe = SingleThreadedExecutor(context=context)
    for n in (plant, *nodes):
        exe.add_node(n)
    return plant, pub, exe, JointState


def _spin(exe, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        exe.spin_once(timeout_sec=0.001)


def _publish(pub, Msg, k, q, dq):
    msg = Msg(name=PANDA, position=[float(x) for x in q], velocity=[float(x) for x in dq], effort=[0.0] * 7)
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
    pub.publish(msg)


def test_buffer_reference_feedforward_publish(rclpy_context):
    from rclpy.parameter import Parameter

    from idyn_ros.msg import FeedforwardTorque, JointReference, JointStateEstimate
    from idyn_ros.nodes.common import HOT_IN
    from idyn_ros.nodes.feedforward import FeedforwardNode
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode
    from idyn_ros.nodes.reference import ReferenceNode

    target = Q0 + 0.005  # 0.12 rad/s, 4.5 rad/s^2 at the peaks: within the Panda's limits (a faster move is refused)
    ref = ReferenceNode(context=rclpy_context, parameter_overrides=[
        Parameter("mode", value="setpoints"), Parameter("setpoints", value=target.tolist()),
        Parameter("durations", value=[0.08]), Parameter("start_delay", value=0.01)])
    nodes = [JointStateBufferNode(context=rclpy_context), ref, FeedforwardNode(context=rclpy_context)]
    plant, pub, exe, Msg = _setup(rclpy_context, nodes)
    got = {"est": [], "ref": [], "ff": []}
    plant.create_subscription(JointStateEstimate, "/idyn/joint_state_estimate", got["est"].append, HOT_IN)
    plant.create_subscription(JointReference, "/idyn/reference", got["ref"].append, HOT_IN)
    plant.create_subscription(FeedforwardTorque, "/idyn/feedforward", got["ff"].append, HOT_IN)
    _spin(exe, 0.3)
    w = 2 * math.pi
    for k in range(120):
        t = k * 1e-3
        q = Q0 + 0.1 * math.sin(w * t)
        _publish(pub, Msg, k, q, np.full(7, 0.1 * w * math.cos(w * t)))
        _spin(exe, 0.003)
    _spin(exe, 0.2)
    assert len(got["est"]) > 50 and len(got["ref"]) > 50 and len(got["ff"]) > 50
    est = got["est"][-1]
    assert list(est.joint_names) == PANDA and len(est.acceleration) == 7 and len(est.rotational_displacement) == 7
    np.testing.assert_allclose(np.array(got["ref"][-1].positions), target, atol=1e-9)  # move finished
    ff = got["ff"][-1]
    assert ff.fallback and ff.model_id == "fallback:rbd" and np.all(np.isfinite(ff.total))
    # the fields are written in place each tick: the last message carries the last state, parts while publish_parts
    np.testing.assert_allclose(np.array(est.position), Q0 + 0.1 * math.sin(w * 0.119), atol=1e-12)
    np.testing.assert_allclose(np.array(ff.rbd) + np.array(ff.friction) + np.array(ff.residual), ff.total, atol=1e-9)
    nodes[2].set_parameters([Parameter("publish_parts", value=False)])
    for k in range(120, 140):  # a state without efforts publishes an estimate without efforts
        msg = Msg(name=PANDA, position=Q0.tolist(), velocity=[0.0] * 7)
        msg.header.stamp.sec, msg.header.stamp.nanosec = 1, k * 1_000_000
        pub.publish(msg)
        _spin(exe, 0.003)
    _spin(exe, 0.2)
    est, ff = got["est"][-1], got["ff"][-1]
    assert len(est.effort) == 0 and len(est.position) == 7 and np.allclose(est.position, Q0)
    assert len(ff.rbd) == len(ff.friction) == len(ff.residual) == 0 and len(ff.total) == 7


def test_buffer_rejects_and_reports(rclpy_context):
    from diagnostic_msgs.msg import DiagnosticArray

    from idyn_ros.msg import JointStateEstimate
    from idyn_ros.nodes.common import HOT_IN, MONITOR
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode

    node = JointStateBufferNode(context=rclpy_context)
    plant, pub, exe, Msg = _setup(rclpy_context, [node])
    diag = []
    plant.create_subscription(DiagnosticArray, "/diagnostics", lambda m: diag.extend(
        (s.level[0], s.message) for s in m.status), MONITOR)
    got = []
    plant.create_subscription(JointStateEstimate, "/idyn/joint_state_estimate", got.append, HOT_IN)
    _spin(exe, 0.3)
    for k in range(10):
        _publish(pub, Msg, k, Q0, np.zeros(7))
        _spin(exe, 0.003)
    _publish(pub, Msg, 5, Q0, np.zeros(7))  # stamp 4 ms back, beyond the max gap: the filter restarts on it
    _spin(exe, 0.05)
    bad = Q0.copy()
    bad[1] = math.nan
    _publish(pub, Msg, 20, bad, np.zeros(7))
    _spin(exe, 0.1)
    assert node.rejected == 1 and node.accepted >= 5
    assert any(level == 2 and "non-finite position for joint(s) ['panda_joint2']" in m for level, m in diag)
    assert any(level == 1 and "stamp jumped back by 4.000 ms" in m for level, m in diag)


def test_doomed_pairs_and_services(rclpy_context):
    import rclpy
    from std_srvs.srv import Trigger

    from idyn_ros.msg import AdaptationState, ControllerState
    from idyn_ros.nodes.common import HOT_IN, MONITOR
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    plant, pub, exe, Msg = _setup(rclpy_context, [node])
    cs_pub = plant.create_publisher(ControllerState, "/idyn/controller_state", MONITOR)
    got = []
    plant.create_subscription(AdaptationState, "/idyn/adaptation", got.append, HOT_IN)
    _spin(exe, 0.3)
    # the plant 'falls short': commanded 1 rad/s^2 on every joint, measured 0 -> offsets grow positive
    for k in range(200):
        _publish(pub, Msg, k, Q0, np.zeros(7))
        _spin(exe, 0.001)
        cs = ControllerState(joint_names=PANDA, acceleration_command=[1.0] * 7, mode=ControllerState.MODE_ACTIVE)
        cs.header.stamp.sec, cs.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
        cs_pub.publish(cs)
        _spin(exe, 0.002)
    _spin(exe, 0.1)
    assert node.adapter.paired > 100
    assert got and np.all(np.array(got[-1].offset) > 0) and not got[-1].frozen
    np.testing.assert_allclose(got[-1].acceleration_error, -1.0)
    client = plant.create_client(Trigger, "/doomed/reset")
    assert client.wait_for_service(timeout_sec=2.0)
    future = client.call_async(Trigger.Request())
    rclpy.spin_until_future_complete(plant, future, executor=exe, timeout_sec=2.0)
    assert future.result().success and np.all(node.learner.offset == 0)


def test_wrench_observer_runs(rclpy_context):
    from geometry_msgs.msg import WrenchStamped
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.common import COMMAND_OUT, MONITOR
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    node = WrenchObserverNode(context=rclpy_context)
    plant, pub, exe, Msg = _setup(rclpy_context, [node])
    cmd_pub = plant.create_publisher(Float64MultiArray, "/effort_controller/commands", COMMAND_OUT)
    got = []
    plant.create_subscription(WrenchStamped, "/idyn/wrench_estimate", got.append, MONITOR)
    _spin(exe, 0.3)
    g = node.observer.rbd.gravity(Q0)
    J, _ = node.observer.rbd.flange_jacobian(Q0)
    F = np.array([0.0, 0.0, -10.0, 0.0, 0.0, 0.0])
    for k in range(300):  # static: actuators hold gravity minus the push -> tau_ext = J^T F
        _publish(pub, Msg, k, Q0, np.zeros(7))
        _spin(exe, 0.001)
        cmd_pub.publish(Float64MultiArray(data=(g - J.T @ F).tolist()))
        _spin(exe, 0.002)
    _spin(exe, 0.1)
    assert got and got[-1].header.frame_id == "panda_link0"
    f = got[-1].wrench.force
    np.testing.assert_allclose([f.x, f.y, f.z], F[:3], atol=0.5)
    stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in got])
    assert np.diff(stamps).min() >= 0.004 - 1e-6, "publish_divider 4: at most every 4th 1 kHz state is published"


def test_doomed_parameters_take_effect_at_run_time_or_are_refused(rclpy_context):
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        results = node.set_parameters([Parameter("osc_tv_fraction", value=8.0), Parameter("decay_tau", value=0.2),
                                       Parameter("osc_window", value=0.05)])
        assert all(r.successful for r in results)
        cfg = node.learner.cfg
        assert cfg.osc_tv_fraction == 8.0 and cfg.decay_tau == 0.2 and node.learner._win == 50
        bad = node.set_parameters([Parameter("osc_consecutive", value=50)])[0]
        assert not bad.successful and "osc_consecutive" in bad.reason
        assert node.learner.cfg.osc_consecutive == 3
        # enabled false -> true: learning resumes (it stayed frozen "disabled by parameter 'enabled'" for good)
        assert node.set_parameters([Parameter("enabled", value=False)])[0].successful and node.learner.frozen
        assert node.set_parameters([Parameter("enabled", value=True)])[0].successful and not node.learner.frozen
        node.learner.freeze("frozen by ~/freeze")  # a freeze of another cause is not lifted by the parameter
        node.set_parameters([Parameter("enabled", value=True)])
        assert node.learner.frozen
    finally:
        node.destroy_node()


def test_doomed_does_not_learn_while_the_controller_blends_the_law_back_in(rclpy_context):
    """After late input the controller ramps its law back in over recovery_ramp, ACTIVE, with a command that is
    partly the safe torque: DOOMED paired those ticks and learned e = acceleration_command - ddq from them."""
    from idyn_ros.control.controller import RECOVERING
    from idyn_ros.msg import ControllerState
    from idyn_ros.nodes.common import MONITOR
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    plant, pub, exe, Msg = _setup(rclpy_context, [node])
    cs_pub = plant.create_publisher(ControllerState, "/idyn/controller_state", MONITOR)
    _spin(exe, 0.3)
    for k in range(200):
        _publish(pub, Msg, k, Q0, np.zeros(7))
        _spin(exe, 0.001)
        cs = ControllerState(joint_names=PANDA, acceleration_command=[1.0] * 7, mode=ControllerState.MODE_ACTIVE,
                             mode_reason=RECOVERING)
        cs.header.stamp.sec, cs.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
        cs_pub.publish(cs)
        _spin(exe, 0.002)
    _spin(exe, 0.1)
    assert node.adapter.paired == 0 and np.all(node.learner.offset == 0)


def test_buffer_filter_settings_are_refused_at_run_time(rclpy_context):
    """The differentiators are built once: changing them at run time would be accepted and ignored, so it is refused."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode

    node = JointStateBufferNode(context=rclpy_context)
    try:
        for name, value in (("accel_cutoff_hz", 20.0), ("max_gap_periods", 5.0), ("use_measured_velocity", False)):
            result = node.set_parameters([Parameter(name, value=value)])[0]
            assert not result.successful and "read-only at run time" in result.reason, name
        assert node.set_parameters([Parameter("stale_timeout", value=0.05)])[0].successful  # read at each check
    finally:
        node.destroy_node()


def test_a_dump_of_the_parameters_loads_back_where_nothing_read_only_changes(rclpy_context):
    """`ros2 param dump` then `ros2 param load` reported a failure for every read-only parameter, changed or not."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode

    node = JointStateBufferNode(context=rclpy_context)
    try:
        dump = [node.get_parameter(name) for name in node.params.table]
        results = node.set_parameters([Parameter(p.name, value=p.value) for p in dump])
        assert all(r.successful for r in results), [r.reason for r in results if not r.successful]
        same = node.get_parameter("accel_cutoff_hz").value
        assert not node.set_parameters([Parameter("accel_cutoff_hz", value=same / 2)])[0].successful
        names = node.get_parameter("joint_states_topic").value
        assert node.set_parameters([Parameter("joint_states_topic", value=names)])[0].successful
    finally:
        node.destroy_node()

def test_wrench_observer_with_fallback_none_refuses_to_start_without_a_usable_model(rclpy_context, tmp_path):
    """fallback none (what the graph sets on hardware with model:=) was ignored by the observer: a rejected model ran
    the estimate on the nominal URDF, an ERROR line, while the controller and doomed refused to start."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ModelArtifactError
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(b"\x08\x07" + b"\x00" * 100)
    for given in ([Parameter("model_path", value=str(bad))], []):
        with pytest.raises(ModelArtifactError, match="fallback is 'none'"):
            WrenchObserverNode(context=rclpy_context, parameter_overrides=[*given, Parameter("fallback", value="none")])
    node = WrenchObserverNode(context=rclpy_context, parameter_overrides=[Parameter("model_path", value=str(bad))])
    try:  # fallback rbd: the nominal URDF, said
        assert node.observer.model is None and "truncated.onnx rejected" in node.diag.message
    finally:
        node.destroy_node()


def test_deleting_a_parameter_is_refused_and_leaves_it_as_it_was(rclpy_context):
    """`ros2 param delete /joint_state_buffer stale_timeout` undeclared it, and the node's next read of its parameters
    raised ParameterNotDeclaredException inside the parameter service (nodes with a cross-field check refused it as
    "must be a number, got None")."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.feedforward import FeedforwardNode
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode

    for make, name in ((JointStateBufferNode, "stale_timeout"), (FeedforwardNode, "publish_parts")):
        node = make(context=rclpy_context)
        try:
            before = node.get_parameter(name).value
            result = node.set_parameters([Parameter(name)])[0]  # what `ros2 param delete` sends: no value
            assert not result.successful and f"{name} cannot be deleted" in result.reason
            assert node.has_parameter(name) and node.get_parameter(name).value == before
        finally:
            node.destroy_node()


def test_payload_identifier_loads_a_baseline_path_set_at_run_time(rclpy_context, tmp_path):
    """baseline_path set at run time: an existing bare-arm recording becomes the reference; a file that is not one
    is refused with the reason (it used to be read at start-up only)."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.payload_identifier import PayloadIdentifierNode

    t = np.arange(0.0, 1.0, 1e-3)
    q = np.tile(Q0, (len(t), 1)) + 0.01 * np.sin(t)[:, None]
    good = tmp_path / "bare.npz"
    np.savez(good, t=t, q=q, dq=np.gradient(q, t, axis=0), ddq=np.zeros_like(q), tau=np.ones_like(q),
             joint_names=np.array(PANDA))
    bad = tmp_path / "bad.npz"
    bad.write_text("not a recording")
    node = PayloadIdentifierNode(context=rclpy_context, parameter_overrides=[Parameter("design_budget", value=1.0)])
    try:
        assert node.baseline is None
        assert node.set_parameters([Parameter("baseline_path", value=str(good))])[0].successful
        assert node.baseline is not None and sum(len(rec.t) for rec in node.baseline) == len(t)
        result = node.set_parameters([Parameter("baseline_path", value=str(bad))])[0]
        assert not result.successful and "not a bare-arm recording" in result.reason
        assert sum(len(rec.t) for rec in node.baseline) == len(t)  # the reference in use is kept
    finally:
        node.destroy_node()


def test_reference_refuses_a_mode_it_cannot_build_before_it_stops_a_move(rclpy_context):
    """Set points without matching durations, or mode npz without a file, were accepted and then replaced the running
    move with a hold at the next state."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.reference import ReferenceNode

    moving = [Parameter("mode", value="setpoints"), Parameter("setpoints", value=(Q0 + 0.2).tolist() + Q0.tolist()),
              Parameter("durations", value=[1.0, 1.0])]
    node = ReferenceNode(context=rclpy_context, parameter_overrides=moving)
    result = node.set_parameters([Parameter("durations", value=[1.0, 2.0, 3.0])])[0]
    assert not result.successful and "2 set points but 3 durations" in result.reason
    result = node.set_parameters([Parameter("mode", value="npz")])[0]
    assert not result.successful and "needs npz_path" in result.reason
    assert node.params.value.mode == "setpoints" and node.params.value.durations == (1.0, 1.0)
    node.destroy_node()
    with pytest.raises(ParameterError, match="1 set points but 2 durations"):
        ReferenceNode(context=rclpy_context, parameter_overrides=[
            Parameter("mode", value="setpoints"), Parameter("setpoints", value=Q0.tolist()),
            Parameter("durations", value=[1.0, 1.0])])


def test_a_second_publisher_of_the_arms_joints_does_not_reach_the_estimate(rclpy_context):
    """A joint_state_publisher on /joint_states next to the driver (every joint at 0): the buffer's estimate follows
    the driver, the other publisher is counted and said once (an executor's subscription: the publisher id comes with
    rclpy's message info, as the hot loop hands it)."""
    from idyn_ros.msg import JointStateEstimate
    from idyn_ros.nodes.common import COMMAND_OUT, HOT_IN
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode

    buffer = JointStateBufferNode(context=rclpy_context)
    plant, pub, exe, Msg = _setup(rclpy_context, [buffer])
    rogue = plant.create_publisher(Msg, "/joint_states", COMMAND_OUT)
    est = []
    plant.create_subscription(JointStateEstimate, "/idyn/joint_state_estimate", est.append, HOT_IN)
    deadline = time.monotonic() + 10.0
    while (pub.get_subscription_count() < 1 or rogue.get_subscription_count() < 1) and time.monotonic() < deadline:
        _spin(exe, 0.05)
    for k in range(200):
        _publish(pub, Msg, k, Q0, np.zeros(7))
        if k % 20 == 10:  # stamped now, between two of the driver's; every joint at 0
            other = Msg(name=PANDA, position=[0.0] * 7, velocity=[0.0] * 7, effort=[0.0] * 7)
            other.header.stamp.sec, other.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000 + 500_000
            rogue.publish(other)
        _spin(exe, 0.002)
    _spin(exe, 0.2)
    assert len(est) > 50
    assert all(np.allclose(e.position, Q0) for e in est), "a state of the other publisher reached the estimate"
    assert buffer.filter.second_source > 0 and buffer.problems.values()["input_second_source"] != "0"
    buffer.destroy_node()
    plant.destroy_node()
