"""RobotSpec / prefix / payload / error behaviour of idyn_ros.robots."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from idyn_ros.errors import IdynError, ParameterError, RobotDescriptionError, UnknownRobotError
from idyn_ros.robots import MODES, ROBOT_NAMES, Payload, RobotSpec, get_robot, render_urdf

G = 9.81  # pinocchio's default gravity, m/s^2


def test_robot_names_and_specs():
    assert ROBOT_NAMES == ("panda", "iiwa14", "ur5")
    for name in ROBOT_NAMES:
        spec = get_robot(name)
        assert isinstance(spec, RobotSpec) and spec.name == name
        assert spec.xacro_path.is_file()
        assert spec.effort_controller == "effort_controller"
        assert spec.safe_mode in ("damping", "zero")
        assert spec.source
        assert spec.hardware_adds_gravity is True
        assert all(j.startswith(spec.default_prefix) for j in spec.joint_names)
    assert get_robot("PANDA") == get_robot("panda")
    assert get_robot("iiwa14").joint_names[0] == "lbr_A1"
    assert get_robot("panda").flange_link == "panda_link8"
    assert get_robot("ur5").flange_link == "tool0"
    with pytest.raises(AttributeError):
        get_robot("ur5").name = "ur10"  # frozen


def test_unknown_robot_lists_known():
    with pytest.raises(UnknownRobotError) as info:
        get_robot("ur10")
    message = str(info.value)
    assert "ur10" in message and all(name in message for name in ROBOT_NAMES)
    assert isinstance(info.value, IdynError)
    with pytest.raises(UnknownRobotError):
        render_urdf("kuka")


def test_bad_mode_lists_modes():
    with pytest.raises(ParameterError) as info:
        render_urdf("panda", mode="simulation")
    assert "simulation" in str(info.value) and all(mode in str(info.value) for mode in MODES)


def test_bad_mode_fails_in_xacro_itself():
    """A launch file calling xacro directly gets the same list of modes."""
    import xacro

    with pytest.raises(xacro.XacroException, match="valid modes: mock, mujoco, gazebo, hardware"):
        xacro.process_file(str(get_robot("ur5").xacro_path), mappings={"mode": "sim"})


def test_unknown_or_reserved_xacro_args():
    with pytest.raises(ParameterError, match="hand"):
        render_urdf("ur5", xacro_args={"hand": "false"})
    with pytest.raises(ParameterError, match="prefix="):
        render_urdf("ur5", xacro_args={"prefix": "a_"})


@pytest.mark.parametrize("robot", ROBOT_NAMES)
def test_prefix(robot):
    import pinocchio as pin

    spec = get_robot(robot).with_prefix("left_")
    urdf = render_urdf(robot, prefix="left_")
    model = pin.buildModelFromXML(urdf)
    assert tuple(model.names[1:]) == spec.joint_names
    assert all(j.startswith("left_") for j in spec.joint_names)
    assert model.existFrame(spec.flange_link) and model.existFrame(spec.base_link)
    root = ET.fromstring(urdf)
    names = [e.get("name") for e in root.findall("link") + root.findall("joint")]
    assert all(n.startswith("left_") for n in names), [n for n in names if not n.startswith("left_")]
    assert [j.get("name") for j in root.findall("ros2_control/joint")] == list(spec.joint_names)
    # None and "" both mean the vendor default
    default = get_robot(robot)
    assert render_urdf(robot, prefix=None) == render_urdf(robot, prefix="")
    assert tuple(pin.buildModelFromXML(render_urdf(robot)).names[1:]) == default.joint_names
    assert spec.with_prefix(None) == default
    assert render_urdf(spec) == urdf  # a re-prefixed spec renders with its own prefix


def test_payload_gravity_iiwa_analytic():
    """iiwa at q = 0: every link frame is parallel to the base and the flange is on the z axis, so a
    payload m at CoM (d, 0, c) in the flange frame changes gravity only on the y-axis joints, by
    dV/dq = m g dz/dq: A2, A6 (axis +y) -> -m g d; A4 (axis -y) -> +m g d; z-axis joints -> 0."""
    import pinocchio as pin

    m, d, c = 2.5, 0.1, 0.05
    base = pin.buildModelFromXML(render_urdf("iiwa14"))
    loaded = pin.buildModelFromXML(render_urdf("iiwa14", payload=Payload(m, (d, 0.0, c))))
    q0 = np.zeros(7)
    dg = pin.computeGeneralizedGravity(loaded, loaded.createData(), q0) - pin.computeGeneralizedGravity(
        base, base.createData(), q0
    )
    expected = np.array([0.0, -m * G * d, 0.0, m * G * d, 0.0, -m * G * d, 0.0])
    np.testing.assert_allclose(dg, expected, atol=1e-12)
    # inertia: accelerating only A7 (z axis through the flange) costs (izz + m d^2) more torque there
    izz = 0.01
    loaded = pin.buildModelFromXML(
        render_urdf("iiwa14", payload=Payload(m, (d, 0.0, c), (0.02, 0.0, 0.0, 0.02, 0.0, izz)))
    )
    ddq = np.zeros(7)
    ddq[6] = 3.0
    zero = np.zeros(7)
    dtau = pin.rnea(loaded, loaded.createData(), q0, zero, ddq) - pin.rnea(base, base.createData(), q0, zero, ddq)
    dtau -= pin.computeGeneralizedGravity(loaded, loaded.createData(), q0) - pin.computeGeneralizedGravity(
        base, base.createData(), q0
    )
    assert dtau[6] == pytest.approx((izz + m * d**2) * 3.0, abs=1e-12)


@pytest.mark.parametrize("robot", ROBOT_NAMES)
def test_payload_gravity_equals_point_jacobian(robot):
    """Δg(q) = -J_c(q)^T m g_vec, with J_c the Jacobian of the payload CoM computed on the model
    WITHOUT payload (flange Jacobian + lever arm), at random q."""
    import pinocchio as pin

    spec = get_robot(robot)
    payload = Payload(1.7, (0.02, -0.03, 0.08), (0.003, 0.0, 0.0, 0.004, 0.0, 0.005))
    base = pin.buildModelFromXML(render_urdf(robot))
    loaded = pin.buildModelFromXML(render_urdf(robot, payload=payload))
    db, dl = base.createData(), loaded.createData()
    fid = base.getFrameId(spec.flange_link)
    rng = np.random.default_rng(11)
    for _ in range(10):
        q = rng.uniform(base.lowerPositionLimit, base.upperPositionLimit)
        pin.framesForwardKinematics(base, db, q)
        pin.computeJointJacobians(base, db, q)
        J = pin.getFrameJacobian(base, db, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        R = db.oMf[fid].rotation
        r = R @ np.array(payload.com)  # lever arm flange -> CoM in world axes
        Jc = J[:3] - pin.skew(r) @ J[3:]  # v_c = v_f + w x r
        expected = -Jc.T @ (payload.mass * np.array([0.0, 0.0, -G]))
        dg = pin.computeGeneralizedGravity(loaded, dl, q) - pin.computeGeneralizedGravity(base, db, q)
        np.testing.assert_allclose(dg, expected, atol=1e-10)
        assert np.abs(dg).max() > 1e-3  # a real change, not two equal models


def test_zero_payload_is_no_payload():
    assert render_urdf("ur5", payload=Payload(0.0)) == render_urdf("ur5")


def test_payload_validation():
    with pytest.raises(RobotDescriptionError, match="mass"):
        Payload(-1.0)
    with pytest.raises(RobotDescriptionError, match="not physical"):
        Payload(1.0, inertia=(1.0, 0.0, 0.0, 0.1, 0.0, 0.1))
    with pytest.raises(RobotDescriptionError, match="non-finite"):
        Payload(float("nan"))
    with pytest.raises(RobotDescriptionError):
        Payload(1.0, com=(0.0, 0.0))


def test_payload_accepts_matrix_and_duck_types():
    matrix = Payload(1.0, (0.0, 0.0, 0.1), np.array([[0.1, 0.01, 0.02], [0.01, 0.2, 0.03], [0.02, 0.03, 0.25]]))
    assert matrix.inertia == (0.1, 0.01, 0.02, 0.2, 0.03, 0.25)

    class Other:  # e.g. idyn_ros.sim's payload record
        mass, com, inertia = 1.0, (0.0, 0.0, 0.1), (0.1, 0.01, 0.02, 0.2, 0.03, 0.25)

    assert render_urdf("ur5", payload=Other()) == render_urdf("ur5", payload=matrix)
    with pytest.raises(RobotDescriptionError, match="mass, com and inertia"):
        render_urdf("ur5", payload=3.0)


def test_bad_prefix():
    with pytest.raises(ParameterError, match="prefix"):
        render_urdf("panda", prefix="left arm")


def test_render_is_cached_and_returns_equal_text():
    first = render_urdf("panda", mode="gazebo")
    assert render_urdf("panda", mode="gazebo") is first


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_one_payload_type_for_the_plant_and_the_model(robot):
    """The plant (sim) and the rendered model (robots -> dynamics) take the same Payload and agree on gravity."""
    import pinocchio as pin

    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim import Payload as SimPayload
    from idyn_ros.sim import Plant

    assert SimPayload is Payload
    payload = Payload(1.7, (0.02, -0.03, 0.08), (0.003, 0.0, 0.0, 0.004, 0.0, 0.005))
    plant = Plant(robot, profile="ideal")
    plant.set_payload(payload)
    sim = pin.buildModelFromXML(plant.true_urdf())
    model = RobotModel.from_robot(robot, payload=payload)
    q = np.linspace(0.1, 0.7, model.n)
    idx = [sim.joints[sim.getJointId(j)].idx_v for j in model.joint_names]
    g_sim = pin.computeGeneralizedGravity(sim, sim.createData(), q)[idx]
    np.testing.assert_allclose(g_sim, model.gravity(q), atol=1e-10)
    assert np.abs(g_sim - RobotModel.from_robot(robot).gravity(q)).max() > 1e-2  # the payload is there


def test_off_diagonal_inertia_is_checked_the_same_everywhere():
    """Diagonal moments that pass the triangle inequality but a non-PSD matrix: refused by both users."""
    from idyn_ros.sim import Plant

    bad = (1.0, 0.9, 0.9, 1.0, 0.9, 1.0)  # principal moments 2.8, 0.1, 0.1
    with pytest.raises(RobotDescriptionError, match="not physical"):
        Payload(1.0, (0.0, 0.0, 0.1), bad)

    class Request:  # what the plant node's ~/set_payload hands over
        mass, com, inertia = 1.0, (0.0, 0.0, 0.1), bad

    with pytest.raises(RobotDescriptionError, match="not physical"):
        render_urdf("ur5", payload=Request())
    with pytest.raises(RobotDescriptionError, match="not physical"):
        Plant("ur5", profile="ideal").set_payload(Request())
