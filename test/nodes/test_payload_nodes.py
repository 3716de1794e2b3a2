"""~/set_payload on the controller, feedforward and wrench observer nodes; ~/identify_payload end to end (slow)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros




def test_set_payload_services_reach_the_cores(rclpy_context, call_service):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.controller import ControllerNode
    from idyn_ros.nodes.feedforward import FeedforwardNode
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode
    from idyn_ros.robots.spec import Payload
    from idyn_ros.srv import SetPayload

    robot = [Parameter("robot", value="ur5")]
    controller = ControllerNode(context=rclpy_context, parameter_overrides=robot)
    feedforward = FeedforwardNode(context=rclpy_context, parameter_overrides=robot)
    observer = WrenchObserverNode(context=rclpy_context, parameter_overrides=robot)
    caller = rclpy.create_node("payload_caller", context=rclpy_context)
    exe = SingleThreadedExecutor(context=rclpy_context)
    for node in (controller, feedforward, observer, caller):
        exe.add_node(node)
    truth = Payload(1.2, (0.01, 0.02, 0.05), (0.002, 0.0, 0.0, 0.002, 0.0, 0.001))
    request = SetPayload.Request(mass=truth.mass, inertia=list(truth.inertia))
    request.com.x, request.com.y, request.com.z = truth.com
    for name in ("/controller/set_payload", "/feedforward/set_payload", "/wrench_observer/set_payload"):
        reply = call_service(exe, caller.create_client(SetPayload, name), request)
        assert reply.success, reply.message
        assert "1.200 kg" in reply.message
    assert controller.core.payload == truth and feedforward.ff.payload == truth and observer.observer.payload == truth
    bad = SetPayload.Request(mass=1.0, inertia=[1.0, 0.0, 0.0, 0.1, 0.0, 0.1])  # triangle inequality violated
    reply = call_service(exe, caller.create_client(SetPayload, "/controller/set_payload"), bad)
    assert not reply.success and "not physically consistent" in reply.message
    assert controller.core.payload == truth  # a refused payload changes nothing
    remove = call_service(exe, caller.create_client(SetPayload, "/feedforward/set_payload"),
                          SetPayload.Request(mass=0.0))
    assert remove.success and feedforward.ff.payload is None
    for node in (controller, feedforward, observer, caller):
        node.destroy_node()


@pytest.fixture(scope="module")
def identified_over_dds(tmp_path_factory):
    """Bare-arm reference, then a payload put on the plant, identified and applied to the controller over DDS.

    The ideal plant (rigid bodies + armature + viscous/Coulomb friction): this checks the service's path (recording
    over DDS, stamps, the reference method) to the millimetre. What the true profile's joint effects cost is measured
    by ``idyn bench --only payload`` (its 6 s excitation here put the mass 3.2 % low, right at any sane tolerance)."""
    from geometry_msgs.msg import Point

    from idyn_ros.srv import SetPayload

    tmp_path = tmp_path_factory.mktemp("payload")
    result = tmp_path / "payload.json"
    payload = SetPayload.Request(mass=2.0, com=Point(x=0.05, y=-0.04, z=0.06),
                                 inertia=[0.01, 0.0, 0.0, 0.008, 0.0, 0.006])
    reply = _identify_over_dds("ur5", "ideal", payload, tmp_path, {"result_path": str(result)},
                               harmonics=3, period=6.0)
    return reply, result


def _identify_over_dds(robot: str, profile: str, payload, tmp_path, extra: dict, **design):
    """Controller + reference + payload_identifier against the plant over DDS (lockstep): a bare-arm reference, then
    ``payload`` (a SetPayload request) put on the plant, identified and applied to the controller; the reply."""
    from idyn_ros.bench.latency import graph
    from idyn_ros.control.payload import design_excitation
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.srv import IdentifyPayload, SetPayload

    model = RobotModel.from_robot(robot)
    # an evaluation budget, not a time budget: the same excitation however loaded the machine is (800 ~ 5 s idle)
    traj = design_excitation(model, time_budget_s=120.0, max_evaluations=800, **design).trajectory
    t = np.arange(0.0, traj.period, 1e-3)
    q, dq, ddq = traj.evaluate(t)
    excitation = tmp_path / "excite.npz"
    np.savez(excitation, t=t, q_d=q, dq_d=dq, ddq_d=ddq, joint_names=np.array(model.joint_names))
    # joint limits only, as the design above: the embedded plant has no table (the reference checks moves otherwise)
    over = {"excitation_path": str(excitation), "set_payload_services": ["/controller/set_payload"],
            "workspace_check": False, **extra}
    with graph(robot, "lockstep", True, ["controller", "reference", "payload_identifier"], over,
               profile=profile) as (_runner, probe, _launcher):
        service = "/payload_identifier/identify_payload"
        base = probe.call(IdentifyPayload, service, IdentifyPayload.Request(record_baseline=True), timeout=900.0)
        assert base.success, base.message
        assert probe.call(SetPayload, "/plant/set_payload", payload).success
        return probe.call(IdentifyPayload, service, IdentifyPayload.Request(apply=True), timeout=900.0)


@pytest.mark.slow
def test_identify_payload_service_on_the_plant(identified_over_dds):
    reply, result = identified_over_dds
    assert reply.success, reply.message
    assert reply.mass == pytest.approx(2.0, rel=0.01)
    assert "applied to /controller/set_payload" in reply.message
    assert "franka_set_load" in reply.vendor_json and result.is_file()


@pytest.mark.slow
def test_identified_payload_com_within_2_mm(identified_over_dds):
    reply, _ = identified_over_dds
    err = np.linalg.norm([reply.com.x - 0.05, reply.com.y + 0.04, reply.com.z - 0.06])
    print(f"payload CoM error {1e3 * err:.2f} mm, mass {reply.mass:.4f} kg")
    assert err < 0.002


def test_gripper_compensation_node_publishes_reading_minus_gripper(rclpy_context):
    """At rest the RBD-only form predicts the gripper's weight; the node publishes reading - prediction."""
    from geometry_msgs.msg import WrenchStamped
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from idyn_ros.dynamics import RobotModel
    from idyn_ros.dynamics.payload import flange_motion

    com = Parameter("gripper_com", value=[0.0, 0.0, 0.05])
    node, peer, js_pub, ft_pub, got, exe = _gripper_graph(rclpy_context, com)
    q = np.array([0.3, -1.2, 1.4, -1.0, -1.5, 0.2])
    model = RobotModel.from_robot("ur5")
    weight = 1.0 * flange_motion(model, q, np.zeros(6), np.zeros(6)).g[0]  # m g in flange axes: what it pulls with
    reading = WrenchStamped()
    reading.header.frame_id = "tool0"
    reading.wrench.force.x, reading.wrench.force.y, reading.wrench.force.z = (float(v) + 0.5 * (i == 0)
                                                                              for i, v in enumerate(weight))
    deadline = time.monotonic() + 5.0
    k = 0
    while not got and time.monotonic() < deadline:
        ft_pub.publish(reading)
        js = JointState(name=list(model.joint_names), position=q.tolist(), velocity=[0.0] * 6, effort=[0.0] * 6)
        js.header.stamp.sec, js.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
        js_pub.publish(js)
        k += 1
        for _ in range(5):
            exe.spin_once(timeout_sec=0.002)
    assert got and got[-1].header.frame_id == "tool0"
    comp = got[-1].wrench.force
    assert (comp.x, comp.y, comp.z) == pytest.approx((0.5, 0.0, 0.0), abs=0.02)  # only the extra 0.5 N is left
    node.destroy_node()
    peer.destroy_node()


def test_gripper_compensation_refuses_a_parameter_of_the_form_not_in_use(rclpy_context, tmp_path):
    """arm_model_path without gripper_model_path, and gripper_mass/com/inertia beside a gripper model, were ignored."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.gripper_compensation import GripperCompensationNode

    arm = tmp_path / "arm.onnx"
    arm.write_bytes(b"")
    with pytest.raises(ParameterError, match="arm_model_path is subtracted from gripper_model_path"):
        GripperCompensationNode(context=rclpy_context, parameter_overrides=[
            Parameter("arm_model_path", value=str(arm))])
    with pytest.raises(ParameterError, match=r"\['gripper_mass'\] describe the RBD-only form"):
        GripperCompensationNode(context=rclpy_context, parameter_overrides=[
            Parameter("gripper_model_path", value=str(arm)), Parameter("gripper_mass", value=1.0)])


def test_gripper_compensation_drops_a_nan_reading_and_stops_on_a_silent_sensor(rclpy_context):
    """One NaN F/T sample stayed in the low-pass and made every later output NaN; a sensor that stopped was
    compensated from its last reading for good."""
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import JointState

    from idyn_ros.nodes.gripper_compensation import STALE_READING_S
    from idyn_ros.robots import get_robot

    node, peer, js_pub, ft_pub, got, exe = _gripper_graph(rclpy_context)
    names = list(get_robot("ur5").joint_names)
    q = [0.3, -1.2, 1.4, -1.0, -1.5, 0.2]

    def tick(k: int, force_x: float | None) -> None:
        if force_x is not None:
            reading = WrenchStamped()
            reading.header.frame_id = "tool0"
            reading.wrench.force.x = force_x
            ft_pub.publish(reading)
        js = JointState(name=names, position=q, velocity=[0.0] * 6, effort=[0.0] * 6)
        js.header.stamp.sec, js.header.stamp.nanosec = 1 + k // 1000, (k % 1000) * 1_000_000
        js_pub.publish(js)
        for _ in range(5):
            exe.spin_once(timeout_sec=0.002)

    for k in range(60):
        tick(k, float("nan") if k == 20 else 1.0)
    assert len(got) > 20 and node.dropped >= 1
    assert all(math.isfinite(m.wrench.force.x) for m in got)
    count = len(got)
    time.sleep(2 * STALE_READING_S)
    for k in range(60, 80):
        tick(k, None)  # joint states go on, the sensor is silent
    assert len(got) == count
    node.destroy_node()
    peer.destroy_node()


def test_gripper_compensation_refusing_a_model_names_its_own_parameter(rclpy_context, tmp_path):
    """A gripper model that would not load ended in "Set model_path ... or set fallback to rbd|gravity", parameters
    this node does not have."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ModelArtifactError
    from idyn_ros.nodes.gripper_compensation import GripperCompensationNode

    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not onnx")
    with pytest.raises(ModelArtifactError, match=r"set gripper_model_path to a model exported for ur5$"):
        GripperCompensationNode(context=rclpy_context, parameter_overrides=[
            Parameter("robot", value="ur5"), Parameter("gripper_model_path", value=str(junk))])


def test_gripper_compensation_refusing_an_inertia_names_its_parameter(rclpy_context):
    """An inconsistent gripper_inertia stopped the node with "Payload inertia ... is not physically consistent",
    naming no parameter of this node."""
    from rclpy.parameter import Parameter

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.gripper_compensation import GripperCompensationNode

    with pytest.raises(ParameterError, match=r"^gripper_inertia .*not physically consistent"):
        GripperCompensationNode(context=rclpy_context, parameter_overrides=[
            Parameter("robot", value="ur5"), Parameter("gripper_mass", value=1.0),
            Parameter("gripper_inertia", value=[0.001, 0.0, 0.0, 0.001, 0.0, -0.01])])


def _gripper_graph(context, *parameters):
    """A ur5 gripper_compensation node with a 1 kg gripper, and a peer publishing /joint_states and the F/T reading,
    collecting the compensated output: (node, peer, js_pub, ft_pub, got, exe)."""
    import rclpy
    from geometry_msgs.msg import WrenchStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from idyn_ros.nodes.common import COMMAND_OUT, MONITOR
    from idyn_ros.nodes.gripper_compensation import GripperCompensationNode

    node = GripperCompensationNode(context=context, parameter_overrides=[
        Parameter("robot", value="ur5"), Parameter("gripper_mass", value=1.0), *parameters])
    peer = rclpy.create_node("ft_peer", context=context)
    js_pub = peer.create_publisher(JointState, "/joint_states", COMMAND_OUT)
    ft_pub = peer.create_publisher(WrenchStamped, "/ft_sensor/wrench", COMMAND_OUT)
    got: list = []
    peer.create_subscription(WrenchStamped, "/ft_sensor/wrench/compensated", got.append, MONITOR)
    exe = SingleThreadedExecutor(context=context)
    for n in (node, peer):
        exe.add_node(n)
    return node, peer, js_pub, ft_pub, got, exe


@pytest.mark.slow
def test_identify_payload_on_the_true_panda_plant_is_played_and_applied(tmp_path):
    """The reviewer's reproduction (panda, true profile: the arm sags below its reference at rest): the reference
    refused both excitations (planned from the measured pose), and the old node still answered success, applying
    1.35 kg at 54 mm off the truth (condition number 7e4) to every node. The controller's feedback carries the
    Panda's rotor inertia (feedback_armature: Franka's published reflected inertias, the true profile's armature):
    without it, at the default medium gains, joint 7 moves 4 % of its plan and the call says so."""
    from geometry_msgs.msg import Point

    from idyn_ros.robots import get_robot
    from idyn_ros.sim.profile import load_profile
    from idyn_ros.srv import SetPayload

    armature = load_profile("true", "panda", tuple(get_robot("panda").joint_names)).armature
    payload = SetPayload.Request(mass=1.5, com=Point(z=0.05), inertia=[0.002, 0.0, 0.0, 0.002, 0.0, 0.002])
    reply = _identify_over_dds("panda", "true", payload, tmp_path, {"feedback_armature": armature.tolist()})
    assert reply.success, reply.message
    err = np.linalg.norm([reply.com.x, reply.com.y, reply.com.z - 0.05])
    print(f"panda true plant: {reply.mass:.4f} kg, CoM error {1e3 * err:.2f} mm, condition "
          f"{reply.condition_number:.0f}")
    # the goal (2 %, 5 mm); the old node answered 1.35 kg at 54 mm from a recording of an arm at rest, and with the
    # holds around the excitation in the recordings 1.5 kg came out 9 mm off
    assert reply.mass == pytest.approx(1.5, rel=0.02) and err < 0.005
    assert "applied to /controller/set_payload" in reply.message
