"""Untrusted input, bad parameters and failing service calls of the monitoring nodes: a safe answer, never an
exception. The payload identifier's ``~/identify_payload`` runs here on a synthetic recording (``_play`` replaced:
no reference node, no plant), so each call takes about a second."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def _joint_state(k, names=PANDA, q=Q0):
    from sensor_msgs.msg import JointState

    msg = JointState(name=names, position=[float(x) for x in q], velocity=[0.0] * len(names),
                     effort=[0.0] * len(names))
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
    return msg


def test_wrench_observer_drops_a_non_finite_command(rclpy_context):
    """One NaN effort command made every later estimate NaN (it stayed in the momentum observer)."""
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    node = WrenchObserverNode(context=rclpy_context)
    try:
        forces = []
        node.pub.publish = lambda m: forces.append(m.wrench.force.z)
        g = node.observer.rbd.gravity(Q0)
        for k in range(100):
            node._on_joint_state(_joint_state(k))
            node._on_command(Float64MultiArray(data=(np.full(7, math.nan) if k == 50 else g).tolist()))
        assert forces and np.all(np.isfinite(forces[-5:]))
        assert np.all(np.isfinite(node.tau_cmd))
    finally:
        node.destroy_node()


def test_wrench_observer_says_when_joint_states_come_slower_than_its_rate(rclpy_context):
    """125 Hz states at rate_hz 1000 (a CB3 UR with the defaults): each one restarted the estimate, without a word."""
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    node = WrenchObserverNode(context=rclpy_context)
    try:
        g = Float64MultiArray(data=node.observer.rbd.gravity(Q0).tolist())
        for k in range(0, 800, 8):
            node._on_command(g)
            node._on_joint_state(_joint_state(k))
        node._on_diagnostics()
        assert node.diag.level == node.diag.WARN and "slower than rate_hz=1000" in node.diag.message
    finally:
        node.destroy_node()


def test_feedforward_drops_a_reference_with_a_non_finite_acceleration(rclpy_context):
    """A NaN reference acceleration was published as a NaN feedforward (and would stay in an LSTM's state)."""
    from idyn_ros.msg import JointReference
    from idyn_ros.nodes.feedforward import FeedforwardNode

    node = FeedforwardNode(context=rclpy_context)
    try:
        totals = []
        node.pub.publish = lambda m: totals.append(list(m.total))
        ref = JointReference(joint_names=PANDA, positions=Q0.tolist(), velocities=[0.0] * 7,
                             accelerations=[0.5] * 7)
        node._on_reference(ref)
        ref.accelerations = [0.5] * 6 + [math.nan]
        node._on_reference(ref)
        node._on_joint_state(_joint_state(0))
        assert np.all(np.isfinite(totals[-1])) and np.all(node.ddq_d == 0.5)
    finally:
        node.destroy_node()


def test_doomed_refuses_inconsistent_settings_at_start_up(rclpy_context):
    """The cross-field check ran on run-time sets only: at start-up the learner raised a bare ValueError (traceback,
    not the one-line refusal)."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.doomed import DoomedNode

    with pytest.raises(ParameterError, match="osc_consecutive"):
        DoomedNode(context=rclpy_context, parameter_overrides=[Parameter("osc_consecutive", value=50)])


def test_a_parameter_no_node_declares_is_refused_at_start_up(rclpy_context):
    """rclpy ignores ``-p obsever_gain:=...`` without a word; a name another node has passes (``/**`` sections)."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.doomed import DoomedNode

    with pytest.raises(ParameterError, match=r"no idyn_ros node has parameter\(s\) \['obsever_gain'\]"):
        DoomedNode(context=rclpy_context, parameter_overrides=[Parameter("obsever_gain", value=3.0)])
    node = DoomedNode(context=rclpy_context, parameter_overrides=[Parameter("observer_gain", value=3.0)])
    node.destroy_node()


def test_a_parameter_given_to_a_node_by_name_that_it_does_not_have_is_refused(rclpy_context, tmp_path, monkeypatch):
    """`ros2 run idyn_ros joint_state_buffer --ros-args -p model_path:=m.onnx` started and ignored it (another node
    has model_path); a /** section still passes names for other nodes. The real process: exit 2 with the reason."""
    import subprocess
    import sys

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes import ros_parameters
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode

    monkeypatch.setattr(ros_parameters, "PROCESS_ARGS", ["--ros-args", "-p", "model_path:=/tmp/m.onnx"])
    with pytest.raises(ParameterError, match=r"joint_state_buffer has no parameter\(s\) \['model_path'\], given to "
                                             r"it by name.*in a composed process, give it in the parameter file "
                                             r"section of the node that has it, model_path: /controller or "
                                             r"/feedforward"):
        JointStateBufferNode(context=rclpy_context)
    mine = tmp_path / "mine.yaml"
    mine.write_text("/**:\n  ros__parameters:\n    model_path: /tmp/m.onnx\n"
                    "/**/joint_state_buffer:\n  ros__parameters:\n    stale_timeout: 0.02\n")
    monkeypatch.setattr(ros_parameters, "PROCESS_ARGS", ["--ros-args", "--params-file", str(mine)])
    JointStateBufferNode(context=rclpy_context).destroy_node()
    mine.write_text("/**/joint_state_buffer:\n  ros__parameters:\n    fallback: gravity\n")
    with pytest.raises(ParameterError, match=r"has no parameter\(s\) \['fallback'\]") as refused:
        JointStateBufferNode(context=rclpy_context)
    assert "composed" not in str(refused.value)  # the file named the node: no hint about -p
    done = subprocess.run([sys.executable, "-m", "idyn_ros.nodes.start", "joint_state_buffer", "--ros-args", "-p",
                           "model_path:=/tmp/m.onnx"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "joint_state_buffer has no parameter(s) ['model_path']" in done.stderr + \
        done.stdout, done.stderr[-2000:]


# ------------------------------------------------------------------ payload identifier
class Identifier:
    """A PayloadIdentifierNode whose excitation is replaced by a synthetic UR5 recording (``torques``), a client
    and one executor; ``call`` fails the test if the service callback raises (rclpy re-raises it from spin_once)."""

    def __init__(self, context, data, tmp_path, **params):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter
        from rclpy.task import Future
        from trajectory_msgs.msg import JointTrajectory

        from idyn_ros.control import payload as cp
        from idyn_ros.nodes.payload_identifier import PayloadIdentifierNode
        from idyn_ros.srv import IdentifyPayload

        t, q, dq, ddq = data["t"], data["q"], data["dq"], data["ddq"]
        excitation = tmp_path / "excite.npz"
        np.savez(excitation, t=t, q_d=q, dq_d=dq, ddq_d=ddq, joint_names=np.array(data["names"]))
        over = {"robot": "ur5", "excitation_path": str(excitation), **params}
        self.node = node = PayloadIdentifierNode(context=context, parameter_overrides=[
            Parameter(k, value=v) for k, v in over.items()])
        self.helper = rclpy.create_node("review_caller", context=context)
        self.helper.create_subscription(JointTrajectory, "/reference/joint_trajectory", lambda _m: None, 10)
        self.torques = data["bare"]

        def play():
            log = cp.JointStateLog(node.robot.n, len(t))
            for k in range(len(t)):
                log.append(t[k], q[k], dq[k], self.torques[k])
            node.log = log
            # the recording played the plan, which is the excitation alone (no move in)
            node._plan = (0, np.asarray(t, dtype=float), np.asarray(q, dtype=float), 0.0)
            node._done = Future()
            node._done.set_result(False)
            return float(t[-1])

        node._play = play
        node._on_joint_state(_joint_state(0, data["names"], np.zeros(len(data["names"]))))
        self.exe = SingleThreadedExecutor(context=context)
        for n in (node, self.helper):
            self.exe.add_node(n)
        self.Request = IdentifyPayload.Request
        self.client = self.helper.create_client(IdentifyPayload, "/payload_identifier/identify_payload")

    def call(self, timeout=20.0, **request):
        deadline = time.monotonic() + timeout
        while not self.client.wait_for_service(timeout_sec=0.01):
            self.exe.spin_once(timeout_sec=0.01)
            assert time.monotonic() < deadline, "identify_payload not available"
        future = self.client.call_async(self.Request(**request))
        while not future.done():
            self.exe.spin_once(timeout_sec=0.01)
            assert time.monotonic() < deadline, "identify_payload did not answer"
        return future.result()

    def close(self):
        self.exe.shutdown()
        self.node.destroy_node()
        self.helper.destroy_node()


@pytest.fixture(scope="module")
def ur5_recordings():
    """A UR5 moving every joint, its exact torques bare and with 1.5 kg at 5 cm (what the identifier records)."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.robots.spec import Payload

    model = RobotModel.from_robot("ur5")
    t = np.arange(0.0, 3.0, 1e-3)
    w = 2 * np.pi * np.array([0.3, 0.5, 0.7, 0.4, 0.6, 0.8])
    q, dq, ddq = 0.5 * np.sin(np.outer(t, w)), 0.5 * w * np.cos(np.outer(t, w)), -0.5 * w**2 * np.sin(np.outer(t, w))
    loaded = model.with_payload(Payload(1.5, (0.0, 0.0, 0.05), (0.0,) * 6))
    bare = np.array([model.rnea(q[k], dq[k], ddq[k]) for k in range(len(t))])
    payload = np.array([loaded.rnea(q[k], dq[k], ddq[k]) for k in range(len(t))])
    return {"t": t, "q": q, "dq": dq, "ddq": ddq, "bare": bare, "payload": payload, "names": model.joint_names}


@pytest.fixture()
def identifier(rclpy_context, ur5_recordings, tmp_path):
    made = []

    def make(**params):
        made.append(Identifier(rclpy_context, ur5_recordings, tmp_path, **params))
        return made[-1]

    yield make
    for ident in made:
        ident.close()


def test_payload_result_path_that_cannot_be_written_is_reported_not_raised(identifier, ur5_recordings, tmp_path):
    """result_path naming a folder: the identification stands, the reply says the file is missing."""
    from rclpy.parameter import Parameter

    ident = identifier(result_path=str(tmp_path))
    assert ident.call(record_baseline=True).success
    ident.torques = ur5_recordings["payload"]
    reply = ident.call()
    assert reply.success and abs(reply.mass - 1.5) < 0.01
    assert f"result_path {tmp_path} not written" in reply.message
    assert ident.node.diag.level == ident.node.diag.WARN and "not written" in ident.node.diag.message
    good = tmp_path / "result.json"
    assert ident.node.set_parameters([Parameter("result_path", value=str(good))])[0].successful
    assert ident.call().success and good.is_file()


def test_payload_baseline_path_that_cannot_be_written_keeps_the_reference_in_memory(identifier, ur5_recordings,
                                                                                    tmp_path):
    """A baseline_path under a file: Dataset.save raised OSError inside the service callback (the node died)."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    ident = identifier(baseline_path=str(blocker / "bare.npz"))
    reply = ident.call(record_baseline=True)
    assert reply.success and "kept in memory only" in reply.message and "not written" in reply.message
    assert ident.node.baseline is not None
    ident.torques = ur5_recordings["payload"]
    assert ident.call().success


def test_payload_joint_states_without_effort_are_refused(identifier, ur5_recordings):
    """/joint_states without effort (NaN torques): the solve raised LinAlgError inside the service callback."""
    ident = identifier()
    assert ident.call(record_baseline=True).success
    ident.torques = np.full_like(ur5_recordings["payload"], math.nan)
    reply = ident.call()
    assert not reply.success and "carry no effort" in reply.message
    assert not ident.node._busy


def test_payload_a_failing_solve_is_answered_not_raised(identifier, ur5_recordings, monkeypatch):
    from idyn_ros.control import payload as cp

    def broken(*_args, **_kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    ident = identifier()
    assert ident.call(record_baseline=True).success
    monkeypatch.setattr(cp, "identify_with_reference", broken)
    reply = ident.call()
    assert not reply.success and "LinAlgError" in reply.message and not ident.node._busy


def test_payload_apply_to_a_server_that_never_answers_gives_up(identifier, ur5_recordings):
    """apply=true awaited each set_payload reply without a bound: a wedged server kept the node busy for good."""
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.task import Future

    from idyn_ros.srv import SetPayload

    async def never(_request, response):
        await Future()
        return response

    ident = identifier(set_payload_services=["/wedged/set_payload"])
    ident.helper.create_service(SetPayload, "/wedged/set_payload", never, callback_group=ReentrantCallbackGroup())
    assert ident.call(record_baseline=True).success
    ident.torques = ur5_recordings["payload"]
    reply = ident.call(timeout=20.0, apply=True)  # the node gives up on a reply after 5 s
    assert reply.success and "NOT applied to /wedged/set_payload (no answer within" in reply.message
    assert not ident.node._busy


def test_payload_set_payload_services_must_be_service_names(identifier, rclpy_context, ur5_recordings, tmp_path):
    """An invalid name was accepted, then create_client raised inside the service callback (apply=true)."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError

    ident = identifier()
    result = ident.node.set_parameters([Parameter("set_payload_services", value=["/controller/set_payload",
                                                                                 "bad name!"])])[0]
    assert not result.successful and "'bad name!' is not a valid service name" in result.reason
    assert ident.node.params.value.set_payload_services[0] == "/controller/set_payload"
    assert ident.node.set_parameters([Parameter("set_payload_services", value=["~/relative", "x/y"])])[0].successful
    with pytest.raises(ParameterError, match="not a valid service name"):
        Identifier(rclpy_context, ur5_recordings, tmp_path, set_payload_services=["/a//b"])


def test_wrench_observer_takes_a_gain_above_twice_its_rate(rclpy_context):
    """observer_gain=2500 at 1 kHz once made the rectangle-rule momentum observer grow to 1e35 N, so it was refused;
    the exact step is stable at every gain: it is taken (at 125 Hz too)."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    node = WrenchObserverNode(context=rclpy_context)
    try:
        assert node.set_parameters([Parameter("observer_gain", value=2500.0)])[0].successful
        assert node.observer.momentum.K[0] == 2500.0
    finally:
        node.destroy_node()
    node = WrenchObserverNode(context=rclpy_context, parameter_overrides=[Parameter("rate_hz", value=125.0),
                                                                          Parameter("observer_gain", value=300.0)])
    try:
        assert node.observer.momentum.K[0] == 300.0
    finally:
        node.destroy_node()


def test_doomed_unfreeze_does_not_override_enabled_false(rclpy_context):
    """~/unfreeze with enabled=false resumed learning (and offsets to the controller) while the parameter said off."""
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger

    from idyn_ros.nodes.doomed import DISABLED, DoomedNode

    node = DoomedNode(context=rclpy_context, parameter_overrides=[Parameter("enabled", value=False)])
    try:
        reply = node._srv_unfreeze(Trigger.Request(), Trigger.Response())
        assert not reply.success and "enabled" in reply.message
        assert node.learner.frozen and node.learner.freeze_reason == DISABLED
        assert node.set_parameters([Parameter("enabled", value=True)])[0].successful and not node.learner.frozen
        node.learner.freeze("frozen by ~/freeze")
        assert node._srv_unfreeze(Trigger.Request(), Trigger.Response()).success and not node.learner.frozen
    finally:
        node.destroy_node()
