"""RobotModel: cross-checks between pinocchio algorithms, joint order by name, limits, errors."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from idyn_ros.dynamics import RobotModel
from idyn_ros.errors import DatasetError, RobotDescriptionError, UnknownRobotError

from .conftest import PANDA_JOINTS, PANDA_URDF, presets_available


def test_panda_arm_only(panda: RobotModel) -> None:
    assert panda.n == 7
    assert panda.joint_names == tuple(PANDA_JOINTS)
    assert panda.lower.shape == panda.upper.shape == panda.velocity_limit.shape == panda.effort_limit.shape == (7,)
    assert np.all(panda.lower < panda.upper)
    np.testing.assert_allclose(panda.effort_limit, [87, 87, 87, 87, 12, 12, 12])  # Franka datasheet
    assert panda.pin_model.existFrame(panda.flange_frame)


def test_dynamics_cross_checks(arm: RobotModel) -> None:
    q, dq, ddq = arm.random_states(20, rng=1)
    tau = arm.rnea(q, dq, ddq)
    assert tau.shape == (20, arm.n)
    M = arm.mass_matrix(q)
    np.testing.assert_array_equal(M, np.swapaxes(M, 1, 2))
    assert np.all(np.linalg.eigvalsh(M) > 0)
    nle = arm.nonlinear_effects(q, dq)
    np.testing.assert_allclose(np.einsum("nij,nj->ni", M, ddq) + nle, tau, atol=1e-10)
    np.testing.assert_allclose(arm.gravity(q), arm.rnea(q, 0 * dq, 0 * ddq), atol=1e-12)
    np.testing.assert_allclose(arm.coriolis(q, dq) + arm.gravity(q), nle, atol=1e-12)
    C = arm.coriolis_matrix(q, dq)
    np.testing.assert_allclose(np.einsum("nij,nj->ni", C, dq), arm.coriolis(q, dq), atol=1e-10)
    # single sample == row of the batch
    np.testing.assert_array_equal(arm.rnea(q[3], dq[3], ddq[3]), tau[3])


def test_coriolis_skew_symmetry(panda: RobotModel) -> None:
    """dM/dt - 2C is skew-symmetric (passivity), with dM/dt by central differences along dq."""
    q, dq, _ = panda.random_states(1, rng=2)
    q, dq = q[0], dq[0]
    h = 1e-6
    dM = (panda.mass_matrix(q + h * dq) - panda.mass_matrix(q - h * dq)) / (2 * h)
    N = dM - 2 * panda.coriolis_matrix(q, dq)
    np.testing.assert_allclose(N, -N.T, atol=1e-6)


def test_jacobian_matches_finite_difference(arm: RobotModel) -> None:
    q, dq, _ = arm.random_states(1, rng=3)
    q, dq = q[0], dq[0]
    h = 1e-7
    T0, T1 = arm.frame_placement(q - h * dq), arm.frame_placement(q + h * dq)
    v_fd = (T1[:3, 3] - T0[:3, 3]) / (2 * h)  # origin velocity in world axes
    J = arm.frame_jacobian(q, reference="local_world_aligned")
    assert J.shape == (6, arm.n)
    np.testing.assert_allclose(J[:3] @ dq, v_fd, atol=1e-6)
    Jl = arm.frame_jacobian(q, reference="local")
    R = arm.frame_placement(q)[:3, :3]
    np.testing.assert_allclose(R @ Jl[3:], J[3:], atol=1e-12)  # angular parts agree up to rotation
    Jw = arm.frame_jacobian(q, reference="world")
    np.testing.assert_allclose(Jw[3:], J[3:], atol=1e-12)
    assert arm.frame_jacobian(np.stack([q, q]), reference="world").shape == (2, 6, arm.n)


def test_joint_index_by_name(panda: RobotModel) -> None:
    names = ["panda_joint3", "panda_joint1", "panda_joint7"]
    np.testing.assert_array_equal(panda.joint_index(names), [2, 0, 6])
    shuffled = list(reversed(panda.joint_names))
    q_msg = np.arange(7.0)
    q_model = q_msg[panda.model_order(shuffled)]
    np.testing.assert_array_equal(q_model, q_msg[::-1])
    with pytest.raises(DatasetError, match="fer_joint1"):
        panda.joint_index(["panda_joint1", "fer_joint1"])


def test_bad_shapes_and_frames(panda: RobotModel) -> None:
    with pytest.raises(DatasetError, match="n=7"):
        panda.rnea(np.zeros(6), np.zeros(6), np.zeros(6))
    with pytest.raises(RobotDescriptionError, match="no_such_frame"):
        panda.frame_jacobian(np.zeros(7), frame="no_such_frame")


def test_inertial_parameters_roundtrip(arm: RobotModel) -> None:
    pi = arm.inertial_parameters()
    assert pi.shape == (arm.n, 10)
    q, dq, ddq = arm.random_states(5, rng=4)
    scaled = arm.with_inertial_parameters(2.0 * pi)
    np.testing.assert_allclose(scaled.rnea(q, dq, ddq), 2.0 * arm.rnea(q, dq, ddq), atol=1e-10)
    np.testing.assert_allclose(arm.inertial_parameters(), pi)  # original untouched


def test_payload_changes_gravity(panda: RobotModel) -> None:
    from types import SimpleNamespace

    q = np.array([0.0, 0.3, 0.0, -1.5, 0.0, 1.8, 0.0])
    loaded = panda.with_payload(SimpleNamespace(mass=1.0, com=[0, 0, 0.05], inertia=np.eye(3) * 1e-3))
    dg = loaded.gravity(q) - panda.gravity(q)
    J = panda.frame_jacobian(q, reference="local_world_aligned")
    # a 1 kg point at the flange (+5 cm) loads joints like J^T [0, 0, m g]; check joint 2 sign/magnitude
    R = panda.frame_placement(q)[:3, :3]
    Jp = J[:3] + np.cross(-(R @ [0, 0, 0.05]), J[3:].T).T  # velocity Jacobian of the payload CoM
    np.testing.assert_allclose(dg, Jp.T @ np.array([0, 0, 9.81]), atol=1e-9)


def test_payload_with_a_moment_just_below_zero_is_accepted_by_the_model(panda: RobotModel) -> None:
    """A principal moment a rounding below zero (a constrained solve's) passes Payload's tolerance; pinocchio refused
    it with a RuntimeError, which ended the controller process a ~/set_payload call had sent it to."""
    from types import SimpleNamespace

    from idyn_ros.robots.spec import Payload

    p = Payload(1.0, (0.0, 0.0, 0.05), (1e-3, 0.0, 0.0, 1e-3, 0.0, -1e-13))
    assert min(np.linalg.eigvalsh(p.inertia_matrix())) >= 0.0
    q = np.zeros(7)
    loaded = panda.with_payload(p)
    np.testing.assert_allclose(loaded.gravity(q), panda.with_payload(Payload(1.0, (0.0, 0.0, 0.05))).gravity(q),
                               atol=1e-9)
    with pytest.raises(RobotDescriptionError, match="payload inertia"):  # unchecked input: an error, not a crash
        panda.with_payload(SimpleNamespace(mass=1.0, com=[0, 0, 0], inertia=np.diag([1e-3, 1e-3, -1e-6])))


def test_continuous_joint_is_one_dof() -> None:
    xml = PANDA_URDF.read_text().replace('name="panda_joint7" type="revolute"', 'name="panda_joint7" type="continuous"')
    m = RobotModel.from_urdf(xml, joints=PANDA_JOINTS)
    assert m.n == 7 and m.pin_model.nq == 7
    assert np.isinf(m.lower[6]) and np.isinf(m.upper[6])


def test_bad_urdfs_name_the_problem() -> None:
    xml = PANDA_URDF.read_text()
    with pytest.raises(RobotDescriptionError, match="not_a_joint"):
        RobotModel.from_urdf(xml, joints=[*PANDA_JOINTS[:6], "not_a_joint"])
    with pytest.raises(RobotDescriptionError, match="not found"):
        RobotModel.from_urdf("/nonexistent/robot.urdf")
    with pytest.raises(RobotDescriptionError, match="parse"):  # valid XML, no URDF: pinocchio's own error
        RobotModel.from_urdf("<robot name='x'><link name='a'/><joint name='j' type='revolute'/></robot>")


def test_a_urdf_that_is_not_xml_is_one_error_without_urdfdoms_lines(capfd: pytest.CaptureFixture[str]) -> None:
    """urdfdom printed "Error: Error=XML_ERROR_PARSING_TEXT ... at line 103 in .../model.cpp" to stderr first."""
    with pytest.raises(RobotDescriptionError, match=r"URDF is not valid XML: mismatched tag: line 1, column 33"):
        RobotModel.from_urdf("<robot name='x'><link name='a'></robot>")
    with pytest.raises(RobotDescriptionError, match="not a URDF: the root element is <sdf>, not <robot>"):
        RobotModel.from_urdf("<sdf version='1.6'><model name='x'/></sdf>")
    assert capfd.readouterr().err == ""


@pytest.mark.skipif(not presets_available(), reason="idyn_ros.robots presets not available yet")
@pytest.mark.parametrize("name", ["panda", "iiwa14", "ur5"])
def test_presets(name: str) -> None:
    from idyn_ros.robots import get_robot

    m = RobotModel.from_robot(name)
    spec = get_robot(name)
    assert m.joint_names == tuple(spec.joint_names)
    assert m.n == len(spec.joint_names)
    assert m.pin_model.existFrame(m.flange_frame)
    q, dq, ddq = m.random_states(3)
    assert np.all(np.isfinite(m.rnea(q, dq, ddq)))


def test_unknown_robot_name() -> None:
    if not presets_available():
        pytest.skip("idyn_ros.robots presets not available yet")
    with pytest.raises(UnknownRobotError, match="panda"):
        RobotModel.from_robot("pandaa")


def test_rnea_matches_plain_pinocchio(panda: RobotModel) -> None:
    """Guard against the wrapper doing anything to the numbers."""
    q, dq, ddq = panda.random_states(3, rng=5)
    d = panda.pin_model.createData()
    for k in range(3):
        ref = pin.rnea(panda.pin_model, d, q[k], dq[k], ddq[k])
        np.testing.assert_array_equal(panda.rnea(q[k], dq[k], ddq[k]), ref)


@pytest.mark.skipif(not presets_available(), reason="idyn_ros.robots presets not available yet")
def test_from_urdf_with_preset_name_uses_preset_flange() -> None:
    """An artifact stores URDF + robot name; rebuilding from them must give the same flange frame."""
    from idyn_ros.robots import render_urdf

    for name, prefix, flange in (("panda", "", "panda_link8"), ("panda", "left_", "left_link8"), ("ur5", "", "tool0")):
        m = RobotModel.from_urdf(render_urdf(name, prefix=prefix), name=name)
        assert m.flange_frame == flange
        assert m.flange_frame == RobotModel.from_robot(name, prefix=prefix).flange_frame
