"""The doomed node: enabled false, payloads, the model it scales with, its diagnostics, bounds, and joint-state
restarts. Its callbacks are called directly with messages (the pairing logic, not DDS timing); the service over DDS."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.ros

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def _stamp(msg, ns: int) -> None:
    msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000


def _state(ns: int, dq=None, q=None):
    from sensor_msgs.msg import JointState

    dq = np.zeros(7) if dq is None else dq
    q = Q0 if q is None else q
    msg = JointState(name=PANDA, position=[float(x) for x in q], velocity=[float(x) for x in dq], effort=[0.0] * 7)
    _stamp(msg, ns)
    return msg


def _command(ns: int, acceleration, model_id: str = ""):
    from idyn_ros.msg import ControllerState

    msg = ControllerState(joint_names=PANDA, acceleration_command=[float(a) for a in acceleration],
                          mode=ControllerState.MODE_ACTIVE, model_id=model_id)
    _stamp(msg, ns)
    return msg




def _tick(node, ns: int, acceleration=None, dq=None) -> None:
    """The joint state stamped ``ns`` (pairs with the command before it), then the controller's answer to it."""
    node._on_joint_state(_state(ns, dq))
    node._on_controller_state(_command(ns, np.ones(7) if acceleration is None else acceleration))


def _published(node) -> list:
    """Copies of every AdaptationState the node publishes from now on."""
    got: list = []
    node.pub.publish = lambda msg: got.append((np.array(msg.offset), np.array(msg.acceleration_error),
                                               np.array(msg.error_variance), msg.frozen))
    return got


def test_enabled_false_publishes_zero_and_reenabling_starts_from_zero(rclpy_context):
    """Disabling kept publishing the learned offset (13 Nm on joints 2-4) and the controller kept adding it."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        got = _published(node)
        for k in range(200):  # commanded 1 rad/s^2, measured 0: the offset grows
            _tick(node, (1000 + k) * 1_000_000)
        assert np.all(got[-1][0] > 0.01) and got[-1][0].max() > 5.0
        assert node.set_parameters([Parameter("enabled", value=False)])[0].successful
        del got[:]
        for k in range(200, 300):
            _tick(node, (1000 + k) * 1_000_000)
        assert len(got) > 90 and all(np.all(offset == 0.0) and frozen for offset, _, _, frozen in got)
        assert np.all(node.learner.offset == 0.0)
        assert node.set_parameters([Parameter("enabled", value=True)])[0].successful
        assert not node.learner.frozen and np.all(node.learner.w == 0.0)  # from zero, not the offset learned before
        del got[:]
        _tick(node, 1300 * 1_000_000)
        _tick(node, 1301 * 1_000_000)
        assert 0.0 < got[-1][0].max() < 0.05
    finally:
        node.destroy_node()


def test_diagnostics_follow_the_learner_and_say_when_nothing_is_paired(rclpy_context):
    """A second enabled=false stayed OK 'adapting'; and 'adapting' was said while nothing paired at all."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.common import Diagnostics
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        node._on_diagnostics()
        assert node.diag.level == Diagnostics.OK and "waiting for the controller" in node.diag.message
        for k in range(20):
            _tick(node, (1000 + k) * 1_000_000)
        node._on_diagnostics()
        assert (node.diag.level, node.diag.message) == (Diagnostics.OK, "adapting")
        assert node.diag.values["paired"] == "19"
        for k, enabled in enumerate((False, True, False)):
            assert node.set_parameters([Parameter("enabled", value=enabled)])[0].successful
            _tick(node, (1020 + k) * 1_000_000)  # one more paired tick
            node._on_diagnostics()
            expected = Diagnostics.OK if enabled else Diagnostics.WARN
            assert node.diag.level == expected, (enabled, node.diag.message)
        assert node.diag.message == "frozen: disabled by parameter 'enabled'"
    finally:
        node.destroy_node()


def test_a_rejected_model_is_said_and_fallback_none_refuses_to_start(rclpy_context, tmp_path):
    """doomed scaled its step with the nominal URDF's M(q) in silence (OK 'adapting'), and started with fallback
    none, which the feedforward node refuses."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ModelArtifactError
    from idyn_ros.nodes.common import Diagnostics
    from idyn_ros.nodes.doomed import DoomedNode

    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(b"\x08\x07" + b"\x00" * 100)
    node = DoomedNode(context=rclpy_context, parameter_overrides=[Parameter("model_path", value=str(bad))])
    try:
        node._on_diagnostics()
        assert node.diag.level == Diagnostics.WARN
        assert "nominal URDF" in node.diag.message and "truncated.onnx rejected" in node.diag.message
        assert node.diag.values["model_id"] == "fallback:rbd"
    finally:
        node.destroy_node()
    with pytest.raises(ModelArtifactError, match="fallback is 'none'"):
        DoomedNode(context=rclpy_context, parameter_overrides=[Parameter("model_path", value=str(bad)),
                                                               Parameter("fallback", value="none")])


def test_settings_outside_the_stable_region_are_refused(rclpy_context):
    """learning_rate up to 100 and forgetting factors >= 1 per tick were accepted: the offset chattered at its
    limit until the detector froze it 0.8 s later."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        assert not node.set_parameters([Parameter("learning_rate", value=2.0)])[0].successful
        result = node.set_parameters([Parameter("forgetting", value=20.0)])[0]
        assert not result.successful and "learning_rate x forgetting must be < 1" in result.reason
        assert node.set_parameters([Parameter("forgetting", value=10.0)])[0].successful  # 0.05 x 10 = 0.5
        result = node.set_parameters([Parameter("learning_rate", value=0.1)])[0]
        assert not result.successful and "learning_rate x forgetting" in result.reason
        assert node.learner.learning_rate == pytest.approx(0.05)
    finally:
        node.destroy_node()


def test_error_variance_is_the_measured_accelerations_and_the_msg_says_so(rclpy_context):
    """With the command always 1 rad/s^2 above the measured acceleration, the error has no variance; the field
    carries Eq. 22's v (the measured acceleration's variance), which its comment called the error's."""
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        got = _published(node)
        dq = np.zeros(7)
        for k in range(400):
            ddq = 5.0 * np.sin(2 * np.pi * k / 100) * np.ones(7)  # measured over [k, k+1]
            node._on_joint_state(_state((1000 + k) * 1_000_000, dq))
            node._on_controller_state(_command((1000 + k) * 1_000_000, ddq + 1.0))
            dq = dq + 1e-3 * ddq
        errors = np.array([e for _, e, _, _ in got[-100:]])
        np.testing.assert_allclose(errors, -1.0, atol=1e-6)  # measured - commanded: constant
        assert got[-1][2].min() > 5.0  # the measured acceleration's variance (12.5 for this sine), not 0
    finally:
        node.destroy_node()
    text = (Path(__file__).resolve().parents[2] / "msg" / "AdaptationState.msg").read_text()
    comment = text.split("float64[] error_variance")[0].rsplit("float64[] acceleration_error", 1)[1]
    assert "MEASURED acceleration" in comment and "not of acceleration_error" in comment


def test_joint_state_restarts_are_not_paired_and_said_once_per_kind(rclpy_context, log_recorder):
    """A filter restart (stamps jumped back) is a live state on another time line: neither it nor the next state is
    paired; restarts and rejections are logged and put on /diagnostics once per kind, never per sample."""
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        log = log_recorder
        node.get_logger = lambda: log
        reports: list = []
        node.diag.publish = lambda: reports.append((node.diag.level, node.diag.message))
        for k in range(10):
            _tick(node, (5000 + k) * 1_000_000)
        assert node.adapter.paired == 9
        for restart in range(3):  # the source restarts three times (bag loop)
            for k in range(5):
                _tick(node, (1000 + k) * 1_000_000 + restart)
        assert node.adapter.restarts == 3
        assert node.adapter.paired == 9 + 3 * 3  # of each 5 states after a restart, the first two are not paired
        bad = _state(2000 * 1_000_000)
        bad.position[1] = float("nan")
        for _ in range(3):
            node._on_joint_state(bad)
        warnings = [text for level, text in log.lines if level == "warning"]
        errors = [text for level, text in log.lines if level == "error"]
        assert len(warnings) == 1 and "stamp jumped back" in warnings[0]
        assert len(errors) == 1 and "non-finite position" in errors[0]
        assert [level for level, _ in reports] == [1, 2]
    finally:
        node.destroy_node()




def test_set_payload_resets_the_offset_and_scales_the_step_with_the_payload(rclpy_context, call_service):
    """The offset DOOMED learned for a payload counted twice once payload_identifier applied it to the feedforward
    (1.62 deg vs 0.80 before, on the plant): doomed takes the payload too, and payload_identifier sends it there."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from idyn_ros.nodes.doomed import DoomedNode
    from idyn_ros.parameters import PayloadIdentifierParams
    from idyn_ros.srv import SetPayload

    assert "/doomed/set_payload" in PayloadIdentifierParams().set_payload_services
    node = DoomedNode(context=rclpy_context)
    caller = rclpy.create_node("payload_caller", context=rclpy_context)
    exe = SingleThreadedExecutor(context=rclpy_context)
    for n in (node, caller):
        exe.add_node(n)
    try:
        for k in range(100):
            _tick(node, (1000 + k) * 1_000_000)
        assert np.all(node.learner.offset > 0)
        bare = node.adapter.model.mass_matrix(Q0).copy()
        request = SetPayload.Request(mass=2.0, inertia=[4e-3, 0.0, 0.0, 4e-3, 0.0, 2e-3])
        request.com.z = 0.08
        reply = call_service(exe, caller.create_client(SetPayload, "/doomed/set_payload"), request)
        assert reply.success and "2.000 kg" in reply.message and "offset reset" in reply.message
        assert np.all(node.learner.offset == 0.0)
        assert node.adapter.model.mass_matrix(Q0)[6, 6] > bare[6, 6]  # the step scales with the payload's inertia
        again = call_service(exe, caller.create_client(SetPayload, "/doomed/set_payload"), request)
        assert again.success and "offset kept" in again.message
        bad = SetPayload.Request(mass=1.0, inertia=[1.0, 0.0, 0.0, 0.1, 0.0, 0.1])  # not physically consistent
        assert not call_service(exe, caller.create_client(SetPayload, "/doomed/set_payload"), bad).success
        assert node.payload.mass == 2.0
    finally:
        node.destroy_node()
        caller.destroy_node()


def test_a_controller_reconfigured_with_another_model_resets_the_offset(rclpy_context, log_recorder):
    """The offset compensated the old feedforward's error: kept, it would be applied to a model it was not learned
    for. A model other than DOOMED's own is said once per model (the step scales with DOOMED's model)."""
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        node.get_logger = lambda: log_recorder
        own = node.model_id
        for k in range(100):
            node._on_joint_state(_state((1000 + k) * 1_000_000))
            node._on_controller_state(_command((1000 + k) * 1_000_000, np.ones(7), own))
        learned = node.learner.offset.copy()
        assert np.all(learned > 0) and log_recorder.lines == []
        node._on_controller_state(_command(1100 * 1_000_000, np.ones(7), own))  # the same model: kept
        np.testing.assert_array_equal(node.learner.offset, learned)
        for _ in range(3):
            node._on_controller_state(_command(1101 * 1_000_000, np.ones(7), "other.onnx:0123456789ab"))
        assert np.all(node.learner.offset == 0.0)
        assert log_recorder.lines == [
            ("info", f"the controller's feedforward changed ({own} -> other.onnx:0123456789ab): offset reset to zero"),
            ("warning", "the controller runs feedforward other.onnx:0123456789ab, DOOMED's step scales with the "
                        f"inertia of {own} (parameter model_path): give both the same model")]
    finally:
        node.destroy_node()


@pytest.mark.parametrize("call", ["parameter", "reset"])
def test_a_parameter_change_or_service_waits_for_a_running_tick(rclpy_context, call):
    """Parameters and services run in the executor thread while ticks run in the hot loop's: a change of
    osc_tv_windows rebuilt the detector's arrays one by one, and a tick in between raised IndexError, which stops the
    process. Each such callback now waits for the tick (here: the lock held as a tick would hold it)."""
    import threading

    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger

    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        reset = next(s.callback for s in node.services if s.srv_name.endswith("/reset"))  # what ~/reset runs
        work = {"parameter": lambda: node.set_parameters([Parameter("osc_tv_windows", value=2)]),
                "reset": lambda: reset(Trigger.Request(), Trigger.Response())}[call]
        before = node.learner._tv_hist.shape[0]
        with node._lock:  # a tick in progress
            worker = threading.Thread(target=work)
            worker.start()
            worker.join(0.3)
            assert worker.is_alive()  # waits for the tick
        worker.join(5.0)
        assert not worker.is_alive()
        if call == "parameter":
            assert (before, node.learner._tv_hist.shape[0]) == (5, 2)
        for k in range(5):  # ticks run afterwards as before
            _tick(node, (1000 + k) * 1_000_000)
    finally:
        node.destroy_node()


def test_another_publishers_joint_states_are_ignored_and_said_once(rclpy_context):
    """A gripper's finger joints on /joint_states were an ERROR ("rejecting input") on every monitoring node."""
    from sensor_msgs.msg import JointState

    from idyn_ros.nodes.common import Diagnostics
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        warnings = []
        node.get_logger().warning = warnings.append
        for k in range(6):
            _tick(node, (1000 + k) * 1_000_000)
            gripper = JointState(name=["panda_finger_joint1", "panda_finger_joint2"], position=[0.04, 0.04])
            _stamp(gripper, (1000 + k) * 1_000_000 + 300_000)
            node._on_joint_state(gripper)
        assert len(warnings) == 1 and "panda_finger_joint1" in warnings[0]
        node.problems.publish()
        assert node.diag.level != Diagnostics.ERROR and node.diag.values["input_foreign"] == "6"
        assert node.adapter.paired >= 4  # the arm's states still pair
    finally:
        node.destroy_node()


def test_joint_states_at_another_rate_say_why_nothing_is_paired(rclpy_context):
    """A UR e-Series at 500 Hz with rate_hz 1000: DOOMED paired nothing and said "waiting for the controller"
    while the controller was ACTIVE."""
    from idyn_ros.control.state_estimation import RATE_SAMPLES
    from idyn_ros.nodes.common import Diagnostics
    from idyn_ros.nodes.doomed import DoomedNode

    node = DoomedNode(context=rclpy_context)
    try:
        for k in range(RATE_SAMPLES + 50):
            _tick(node, (1000 + 2 * k) * 1_000_000)  # 2 ms apart
        node._paired_reported = node.adapter.paired  # the last report's count: nothing paired since
        node._on_diagnostics()
        assert node.adapter.paired == 0
        assert node.diag.level == Diagnostics.WARN and "about 500 Hz, not rate_hz=1000" in node.diag.message
    finally:
        node.destroy_node()
