"""Our URDFs carry the source's dynamics: RNEA/gravity parity (Panda, UR5), iiwa inertials = YAML,
and MuJoCo on ``urdf_for_mujoco`` agrees with pinocchio on the same URDF."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.robots import MODES, ROBOT_NAMES, get_robot, render_urdf, urdf_for_mujoco

N_STATES = 100


def _random_states(model, rng, n=N_STATES):
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    q = rng.uniform(lo, hi, size=(n, model.nq))
    dq = rng.uniform(-1.0, 1.0, size=(n, model.nv)) * model.velocityLimit
    ddq = rng.uniform(-10.0, 10.0, size=(n, model.nv))
    return q, dq, ddq


@pytest.mark.parametrize("robot", ["panda", "ur5"])
@pytest.mark.parametrize("mode", MODES)
def test_gravity_and_rnea_equal_reference(robot, mode, reference_models):
    """tau(q, dq, ddq) and g(q) of our URDF == example-robot-data URDF to 1e-9 on 100 random states."""
    import pinocchio as pin

    ours = pin.buildModelFromXML(render_urdf(robot, mode=mode))
    ref = reference_models[robot]
    assert tuple(ours.names) == tuple(ref.names)
    d_ours, d_ref = ours.createData(), ref.createData()
    rng = np.random.default_rng(7)
    worst_g = worst_tau = 0.0
    for q, dq, ddq in zip(*_random_states(ours, rng), strict=True):
        g_ours = pin.computeGeneralizedGravity(ours, d_ours, q)
        g_ref = pin.computeGeneralizedGravity(ref, d_ref, q)
        tau_ours = pin.rnea(ours, d_ours, q, dq, ddq)
        tau_ref = pin.rnea(ref, d_ref, q, dq, ddq)
        worst_g = max(worst_g, np.abs(g_ours - g_ref).max())
        worst_tau = max(worst_tau, np.abs(tau_ours - tau_ref).max())
    assert worst_g < 1e-9, f"gravity differs by {worst_g:.3e} Nm"
    assert worst_tau < 1e-9, f"RNEA differs by {worst_tau:.3e} Nm"
    # the test can fail: the torques it compares are not trivially small
    assert np.abs(tau_ref).max() > 1.0


def test_panda_hand_is_the_reduced_reference_and_optional(reference_models):
    """hand:=true carries hand + fingers (0.76 kg); hand:=false removes exactly that mass."""
    import pinocchio as pin

    with_hand = pin.buildModelFromXML(render_urdf("panda"))
    without = pin.buildModelFromXML(render_urdf("panda", xacro_args={"hand": "false"}))
    ref = reference_models["panda"]
    total = [sum(i.mass for i in m.inertias) for m in (with_hand, without, ref)]
    assert total[0] == pytest.approx(total[2], abs=1e-12)
    assert total[0] - total[1] == pytest.approx(0.73 + 2 * 0.015, abs=1e-12)


def test_iiwa_inertials_equal_yaml(iiwa_source):
    """Per-link mass, CoM, inertia and joint placement/axis of our iiwa URDF equal the YAML."""
    import pinocchio as pin

    model = pin.buildModelFromXML(render_urdf("iiwa14"))
    links = iiwa_source["links"]
    masses = [links[f"link_{i}"]["mass"] for i in range(8)]
    assert sum(masses) == pytest.approx(iiwa_source["total_mass_kg"], abs=1e-6)
    assert sum(masses) == pytest.approx(29.9, abs=1e-6)
    # pinocchio body i (joint A_i) carries link_i; universe (0) carries the fixed base link_0.
    assert sum(i.mass for i in model.inertias) == pytest.approx(29.9, abs=1e-9)
    assert model.inertias[0].mass == pytest.approx(links["link_0"]["mass"], abs=1e-12)
    np.testing.assert_allclose(model.inertias[0].lever, links["link_0"]["com"], atol=1e-12)
    for i in range(8):
        src = links[f"link_{i}"]
        inertia = model.inertias[i]
        I = src["inertia"]
        expected_I = np.array(
            [[I["ixx"], I["ixy"], I["ixz"]], [I["ixy"], I["iyy"], I["iyz"]], [I["ixz"], I["iyz"], I["izz"]]]
        )
        assert inertia.mass == pytest.approx(src["mass"], abs=1e-12)
        np.testing.assert_allclose(inertia.lever, src["com"], atol=1e-12)
        np.testing.assert_allclose(inertia.inertia, expected_I, atol=1e-12)
        if i == 0:
            continue
        joint = iiwa_source["joints"][f"A{i}"]
        placement = model.jointPlacements[i]
        np.testing.assert_allclose(placement.translation, joint["origin_xyz"], atol=1e-12)
        np.testing.assert_allclose(placement.rotation, np.eye(3), atol=1e-12)
    # link_0 (fixed base) and the flange offset, checked on the URDF text via the frames
    data = model.createData()
    pin.forwardKinematics(model, data, np.zeros(7))
    pin.updateFramePlacements(model, data)
    flange = data.oMf[model.getFrameId(get_robot("iiwa14").flange_link)].translation
    # 1.306 m = summed z offsets of all joints + 0.035 m flange (YAML sanity line)
    assert flange[2] == pytest.approx(1.306, abs=1e-12)
    assert flange[0] == pytest.approx(0.0, abs=1e-12)


def test_iiwa_axes_equal_yaml(iiwa_source):
    """Joint axes: pinocchio turns axis (0,-1,0) into a revolute-unaligned or RY with flipped sign;
    compare through the motion subspace at q = 0."""
    import pinocchio as pin

    model = pin.buildModelFromXML(render_urdf("iiwa14"))
    data = model.createData()
    pin.computeJointJacobians(model, data, np.zeros(7))
    for i in range(1, 8):
        axis = np.array(iiwa_source["joints"][f"A{i}"]["axis"], dtype=float)
        J = pin.getJointJacobian(model, data, i, pin.ReferenceFrame.LOCAL)
        np.testing.assert_allclose(J[3:, i - 1], axis, atol=1e-12)


@pytest.mark.parametrize("robot", ROBOT_NAMES)
def test_mujoco_matches_pinocchio_on_same_urdf(robot):
    """MuJoCo (urdf_for_mujoco) and pinocchio agree on M(q) and g(q): the sim layer can rely on it."""
    import mujoco
    import pinocchio as pin

    urdf = render_urdf(robot, mode="mujoco")
    model = pin.buildModelFromXML(urdf)
    data = model.createData()
    m = mujoco.MjModel.from_xml_string(urdf_for_mujoco(urdf))
    m.dof_damping[:] = 0.0  # URDF <dynamics damping> would enter qfrc_passive, not qfrc_bias; be explicit
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    M_mj = np.zeros((m.nv, m.nv))
    for q, _, _ in zip(*_random_states(model, rng, n=20), strict=True):
        d.qpos[:] = q
        d.qvel[:] = 0.0
        mujoco.mj_forward(m, d)
        mujoco.mj_fullM(m, d, M_mj)
        g = pin.computeGeneralizedGravity(model, data, q)
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        np.testing.assert_allclose(d.qfrc_bias, g, atol=1e-8)
        np.testing.assert_allclose(M_mj, M, atol=1e-8)
