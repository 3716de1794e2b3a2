"""The payload regressor Y (with gravity) and its solvers: two forms that must agree, recovery, consistency."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from idyn_ros.dynamics import RobotModel
from idyn_ros.dynamics import payload as P  # noqa: N812 (the module's maths reads better short)
from idyn_ros.dynamics.inertia import check_physical_consistency
from idyn_ros.errors import IdentificationError
from idyn_ros.robots.spec import Payload

# 2 kg, CoM 10 cm off the flange axis, a rotated (non-diagonal) inertia
PAYLOAD = Payload(2.0, (0.06, -0.08, 0.07), (0.012, 0.002, -0.001, 0.009, 0.0015, 0.006))


@pytest.fixture(scope="module", params=["panda", "iiwa14", "ur5"])
def arm(request: pytest.FixtureRequest) -> RobotModel:
    return RobotModel.from_robot(request.param)


def test_y_phi_equals_pinocchio_body_regressor(arm: RobotModel) -> None:
    q, dq, ddq = arm.random_states(5, 3)
    fm = P.flange_motion(arm, q, dq, ddq)
    Y = fm.regressor()
    m, d = arm.pin_model, arm.data
    fid = m.getFrameId(arm.flange_frame)
    for k in range(len(q)):
        pin.forwardKinematics(m, d, q[k], dq[k], ddq[k])
        v = pin.getFrameVelocity(m, d, fid, pin.LOCAL)
        a = pin.getFrameAcceleration(m, d, fid, pin.LOCAL)  # spatial acceleration; gravity as an upward acceleration
        Yb = pin.bodyRegressor(v, pin.Motion(a.linear - fm.g[k], a.angular))
        np.testing.assert_allclose(Y[k], Yb, atol=1e-10)


def test_joint_regressor_is_the_rnea_difference_of_the_attached_payload(arm: RobotModel) -> None:
    q, dq, ddq = arm.random_states(20, 4)
    loaded = arm.with_payload(PAYLOAD)
    expected = loaded.rnea(q, dq, ddq) - arm.rnea(q, dq, ddq)
    got = P.joint_regressor(arm, q, dq, ddq) @ P.payload_phi(PAYLOAD)
    np.testing.assert_allclose(got, expected, atol=1e-9 * np.abs(expected).max())
    # the 1 kHz form (two RNEA passes) is the same torque
    hot = P.PayloadTorque(arm, PAYLOAD)
    np.testing.assert_allclose(hot(q[3], dq[3], ddq[3]), expected[3], atol=1e-9)


def test_gravity_alone_at_rest_is_the_static_payload_torque(arm: RobotModel) -> None:
    q = arm.random_states(3, 5)[0]
    zero = np.zeros_like(q)
    tau = P.payload_torque(arm, PAYLOAD, q, zero, zero)
    np.testing.assert_allclose(tau, arm.with_payload(PAYLOAD).gravity(q) - arm.gravity(q), atol=1e-10)
    assert np.abs(tau).max() > 1.0  # gravity is in Y: a 2 kg payload at rest loads the joints


def test_phi_round_trip_and_order() -> None:
    phi = P.payload_phi(PAYLOAD)
    assert phi[0] == pytest.approx(2.0)
    np.testing.assert_allclose(phi[1:4], 2.0 * np.array(PAYLOAD.com))
    back = P.payload_from_phi(phi)
    np.testing.assert_allclose(back.com, PAYLOAD.com, atol=1e-12)
    np.testing.assert_allclose(back.inertia, PAYLOAD.inertia, atol=1e-12)


def _data(arm: RobotModel, n_samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    q, dq, ddq = arm.random_states(n_samples, seed)
    return P.joint_regressor(arm, q, dq, ddq), P.payload_torque(arm, PAYLOAD, q, dq, ddq)


def test_least_squares_recovers_the_payload_exactly_without_noise(arm: RobotModel) -> None:
    Ap, tau = _data(arm, 60, 7)
    est = P.solve_payload(Ap, tau)
    assert est.solve == "least_squares" and est.physically_consistent
    assert est.payload.mass == pytest.approx(PAYLOAD.mass, rel=1e-9)
    np.testing.assert_allclose(est.payload.com, PAYLOAD.com, atol=1e-10)
    np.testing.assert_allclose(est.payload.inertia, PAYLOAD.inertia, atol=1e-10)
    assert est.condition_number < 1e3


def test_nuisance_columns_are_eliminated(arm: RobotModel) -> None:
    """The bare arm's unknowns (here: random columns with random values) do not bias the payload."""
    rng = np.random.default_rng(0)
    Ap, tau = _data(arm, 80, 8)
    nuisance = rng.normal(size=(*tau.shape, 5))
    est = P.solve_payload(Ap, tau + nuisance @ rng.normal(size=5) * 10.0, nuisance)
    assert est.payload.mass == pytest.approx(PAYLOAD.mass, rel=1e-8)
    np.testing.assert_allclose(est.payload.com, PAYLOAD.com, atol=1e-9)
    without = P.solve_payload(Ap, tau + nuisance @ rng.normal(size=5) * 10.0)
    assert abs(without.payload.mass - PAYLOAD.mass) > 1e-3  # the check above means something


def test_standard_deviations_describe_the_noise() -> None:
    """With white noise, the errors over repeated draws match the reported standard deviations (within 35 %)."""
    arm = RobotModel.from_robot("ur5")
    Ap, tau = _data(arm, 100, 9)
    rng = np.random.default_rng(1)
    errors, stds = [], []
    for _ in range(40):
        est = P.solve_payload(Ap, tau + rng.normal(scale=0.2, size=tau.shape), weighted=False)
        errors.append(est.payload.mass - PAYLOAD.mass)
        stds.append(est.mass_std)
    assert np.std(errors) == pytest.approx(np.mean(stds), rel=0.35)


def test_inconsistent_least_squares_gets_the_constrained_solve() -> None:
    """A point mass (inertia 0) under noise: least squares gives a non-physical inertia, the constrained solve a
    physical one with a cost no lower than least squares' (it is the same objective, constrained)."""
    arm = RobotModel.from_robot("panda")
    point = Payload(1.0, (0.0, 0.02, 0.05))
    q, dq, ddq = arm.random_states(40, 10)
    Ap = P.joint_regressor(arm, q, dq, ddq)
    tau = Ap @ P.payload_phi(point) + np.random.default_rng(2).normal(scale=0.05, size=(40, arm.n))
    est = P.solve_payload(Ap, tau, weighted=False)
    assert est.ls_problems, "the test needs least squares to be inconsistent"
    assert est.solve == "constrained"
    assert check_physical_consistency(est.phi) == []
    A = Ap.reshape(-1, 10)
    cost_ls = np.sum((A @ est.phi_ls - tau.ravel()) ** 2)
    cost_c = np.sum((A @ est.phi - tau.ravel()) ** 2)
    assert cost_ls <= cost_c <= 1.5 * cost_ls
    assert est.payload.mass == pytest.approx(1.0, rel=0.05)
    assert est.to_json()["consistency"]["solve"] == "constrained"


def test_constrained_solve_reaches_the_sdp_optimum() -> None:
    """The ADMM solve and a generic SDP solver (cvxpy) agree on min ||R x - c|| s.t. pseudo-inertia PSD."""
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(3)
    R = np.triu(rng.normal(size=(10, 10))) + 5 * np.eye(10)
    x_bad = P.payload_phi(Payload(1.0, (0.0, 0.0, 0.05))) / P.TYPICAL_SCALE
    x_bad[4:] -= 0.5  # inertia far from physical
    c = R @ x_bad
    phi = P._constrained(R, c)
    assert check_physical_consistency(phi, tol=1e-7) == []
    K = P._pseudo_inertia_map()
    x = cp.Variable(10)
    Z = cp.reshape(K @ x, (4, 4), order="C")
    prob = cp.Problem(cp.Minimize(cp.sum_squares(R @ x - c)), [0.5 * (Z + Z.T) >> 0])
    prob.solve(solver="CLARABEL")
    ours = float(np.sum((R @ (phi / P.TYPICAL_SCALE) - c) ** 2))
    assert ours == pytest.approx(prob.value, rel=1e-4, abs=1e-8)


def test_data_that_do_not_excite_the_payload_are_refused() -> None:
    arm = RobotModel.from_robot("ur5")
    q = np.tile(arm.random_states(1, 11)[0], (50, 1))  # one pose at rest: mass and CoM mix, inertia invisible
    zero = np.zeros_like(q)
    with pytest.raises(IdentificationError, match="excite"):
        P.solve_payload(P.joint_regressor(arm, q, zero, zero), P.payload_torque(arm, PAYLOAD, q, zero, zero))


def test_the_standard_deviations_belong_to_the_reported_payload_not_to_least_squares() -> None:
    """Noise alone: least squares gives -11 g, the constrained solve 0.2 g, and the CoM of 0.2 g was reported
    +- 0.6 m, the std of the -11 g point; the CoM of next to no mass is undetermined, and its std must say so."""
    arm = RobotModel.from_robot("ur5")
    q, dq, ddq = arm.random_states(40, 12)
    tau = np.random.default_rng(4).normal(size=(40, arm.n)) * 0.5
    est = P.solve_payload(P.joint_regressor(arm, q, dq, ddq), tau)
    assert est.solve == "constrained" and est.phi_ls[0] < 0 < est.payload.mass < est.mass_std
    assert est.com_std.min() > 10.0  # metres: nothing is known of where a 0.2 g mass sits
    json_std = est.to_json()["com_std_m"]
    assert all(x is None or x > 10.0 for x in json_std)


def test_json_keys() -> None:
    arm = RobotModel.from_robot("ur5")
    est = P.solve_payload(*_data(arm, 40, 12))
    out = est.to_json()
    assert set(out) == {"mass_kg", "mass_std_kg", "com_m", "com_std_m", "inertia_kgm2", "inertia_std_kgm2",
                        "consistency"}
    assert len(out["com_m"]) == 3 and len(out["inertia_kgm2"]) == 6 and len(out["inertia_std_kgm2"]) == 6


def test_vendor_formats() -> None:
    v = P.vendor_formats(PAYLOAD)
    inertia = PAYLOAD.inertia_matrix()
    ixx, ixy, ixz, iyy, iyz, izz = PAYLOAD.inertia
    franka = v["franka_set_load"]
    np.testing.assert_allclose(np.reshape(franka["load_inertia"], (3, 3), order="F"), inertia)
    assert franka["center_of_mass"] == list(PAYLOAD.com) and franka["mass"] == 2.0
    assert v["ur_set_target_payload"]["inertia"] == [ixx, iyy, izz, ixy, ixz, iyz]
    assert v["ur_set_target_payload"]["urscript"].startswith("set_target_payload(2, [0.06, -0.08, 0.07]")
    kuka = v["kuka_load_data"]
    assert (kuka["X"], kuka["Y"], kuka["Z"]) == pytest.approx((60.0, -80.0, 70.0))
    a, b, c = (math.radians(kuka[k]) for k in "ABC")
    Rz = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
    Ry = np.array([[math.cos(b), 0, math.sin(b)], [0, 1, 0], [-math.sin(b), 0, math.cos(b)]])
    Rx = np.array([[1, 0, 0], [0, math.cos(c), -math.sin(c)], [0, math.sin(c), math.cos(c)]])
    R = Rz @ Ry @ Rx  # KUKA: A about Z, then B about the new Y, then C about the new X
    np.testing.assert_allclose(R @ np.diag([kuka["JX"], kuka["JY"], kuka["JZ"]]) @ R.T, inertia, atol=1e-12)
    assert v["xacro"]["payload_mass"] == "2.0" and v["xacro"]["payload_com_y"] == "-0.08"
