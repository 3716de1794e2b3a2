"""Plant vs pinocchio on the same URDF, and the true profile vs the nominal model (no ROS)."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.data.trajectories import min_jerk
from idyn_ros.errors import ParameterError, RobotDescriptionError
from idyn_ros.sim import Payload, Plant


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_ideal_gravity_matches_pinocchio(robot, pin_model):
    plant = Plant(robot, profile="ideal")
    pm = pin_model(plant)
    rng = np.random.default_rng(1)
    for _ in range(20):
        q = pm.random_q(rng)
        plant.reset(q)
        # At rest with tau = g(q) the forward dynamics acceleration is zero iff MuJoCo's gravity = pinocchio's.
        ddq = plant.forward_acceleration(q, np.zeros(plant.n), pm.gravity(q))
        assert np.abs(ddq).max() < 1e-9
        d = plant.data
        assert np.abs(d.qfrc_bias[plant._vidx] - pm.gravity(q)).max() < 1e-9


def test_ideal_forward_dynamics_inverts_rnea(panda_ideal, panda_pin):
    """1000 random (q, dq, ddq): commanding RNEA gives back ddq (acceptance: 1e-6)."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(1000):
        q = panda_pin.random_q(rng)
        dq = rng.uniform(-2, 2, 7)
        ddq = rng.uniform(-10, 10, 7)
        out = panda_ideal.forward_acceleration(q, dq, panda_pin.rnea(q, dq, ddq))
        worst = max(worst, float(np.abs(out - ddq).max()))
    print(f"ideal panda, 1000 random (q, dq, ddq): max |ddq_plant - ddq| = {worst:.2e} rad/s^2")
    assert worst < 1e-6, worst


def _track(plant: Plant, rnea, ref, seconds: float, kp: float = 10.0) -> np.ndarray:
    """RNEA feedforward + weak PD on the measured state; returns q_d - q_true per tick (rad).

    The feedforward uses the reference at the middle of the hold interval, t_k + T/2: the command
    is held for T (zero-order hold), so the torque that produces the reference's *mean* acceleration
    over the interval is RNEA at its midpoint. With the plant's semi-implicit Euler (1 kHz) the
    sinusoid test's max error is 1.2e-2 deg either way (RNEA at t_k: 1.16e-2): the integrator's
    first-order position error dominates (with RK4: 1e-4 at the midpoint, 8e-3 at t_k).
    """
    kd = 2.0 * np.sqrt(kp)
    q0, dq0, _ = ref(0.0)
    plant.reset(q0, dq0)
    s = plant.state()
    ticks = round(seconds / plant.control_dt)
    err = np.zeros((ticks, plant.n))
    for k in range(ticks):
        q_d, dq_d, _ = ref(k * plant.control_dt)
        tau = rnea(*ref((k + 0.5) * plant.control_dt)) + kp * (q_d - s.q) + kd * (dq_d - s.dq)
        s = plant.step(tau)
        q_d1, _, _ = ref((k + 1) * plant.control_dt)
        err[k] = q_d1 - s.q_true
    return err


# Centre of the tracking tests. With feedforward at the *reference* state, the error dynamics are
# M e'' + Kd e' + (Kp + dg/dq) e = 0: where gravity destabilises a joint more than Kp (dg/dq < -Kp,
# e.g. the Panda's shoulder near upright: -57 Nm/rad) a weak PD cannot hold any plant, exact or not,
# and round-off grows e^(2.5 t). So the reference stays where min eig(sym dg/dq) > -10 (checked below).
Q_CENTRE = np.array([1.0, 1.3, 0.0, -2.65, 0.15, 1.15, 0.0])
W = np.array([0.9, 1.1, 1.3, 0.7, 1.5, 1.2, 1.7])  # rad/s
AMPLITUDE = 0.3  # rad


def _sinusoids(t):
    return (
        Q_CENTRE + AMPLITUDE * np.sin(W * t),
        AMPLITUDE * W * np.cos(W * t),
        -AMPLITUDE * W**2 * np.sin(W * t),
    )


def test_tracking_reference_is_holdable_with_kp_10(panda_pin):
    import pinocchio as pin

    worst = np.inf
    for t in np.linspace(0.0, 10.0, 101):
        q = np.zeros(panda_pin.model.nv)
        q[panda_pin.idx] = _sinusoids(t)[0]
        G = pin.computeGeneralizedGravityDerivatives(panda_pin.model, panda_pin.data, q)
        worst = min(worst, np.linalg.eigvalsh(0.5 * (G + G.T)).min())
    assert worst > -10.0, worst


def test_ideal_tracking_within_0p1_deg(panda_ideal, panda_pin):
    err = _track(panda_ideal, panda_pin.rnea, _sinusoids, 10.0)
    worst_deg = np.degrees(np.abs(err).max())
    print(f"ideal tracking, 10 s sinusoids, Kp=10: max |e| = {worst_deg:.2e} deg")
    assert worst_deg < 0.1


def test_true_profile_drifts_from_nominal_model(panda_ideal, panda_pin):
    """Nominal RNEA feedforward + weak PD: fine on the ideal plant, measurably off on the true one."""
    q0 = Q_CENTRE - 0.25
    q1 = Q_CENTRE + 0.25

    def ref(t):
        return min_jerk(q0, q1, 3.0, t)

    true_plant = Plant("panda", profile="true", seed=3)
    e_ideal = _track(panda_ideal, panda_pin.rnea, ref, 4.0)
    e_true = _track(true_plant, panda_pin.rnea, ref, 4.0)
    rmse_ideal = np.degrees(np.sqrt((e_ideal**2).mean(axis=0)))
    rmse_true = np.degrees(np.sqrt((e_true**2).mean(axis=0)))
    print("joint RMSE ideal (deg):", np.round(rmse_ideal, 5))
    print("joint RMSE true  (deg):", np.round(rmse_true, 3))
    assert rmse_ideal.max() < 0.01
    assert rmse_true.max() > 0.5
    assert rmse_true.mean() > 100 * rmse_ideal.mean()


def test_static_external_force_is_jt_f(panda_ideal, panda_pin):
    """Holding still against a known force: ground truth = J^T F, and tau = g - J^T F keeps it still."""
    plant = panda_ideal
    q = np.array([0.2, -0.4, 0.1, -2.1, 0.3, 1.9, 0.5])
    plant.reset(q)
    F = np.array([12.0, -7.0, 20.0, 1.5, -0.8, 0.4])
    plant.apply_wrench("", F, duration=1.0)
    jt_f = panda_pin.jacobian(q, plant.flange_link).T @ F
    tau = panda_pin.gravity(q) - jt_f
    for _ in range(200):
        s = plant.step(tau)
    print(f"static wrench: max |tau_ext - J^T F| = {np.abs(s.tau_ext - jt_f).max():.2e} Nm, "
          f"max |q - q0| after 0.2 s = {np.abs(s.q_true - q).max():.2e} rad")
    assert np.abs(s.tau_ext - jt_f).max() < 1e-6
    assert np.abs(s.tau - tau).max() < 1e-12  # ideal: the reading is the drive torque
    assert np.abs(s.q_true - q).max() < 1e-9
    assert np.abs(s.dq_true).max() < 1e-8
    assert plant.wrench[0] == plant.flange_link
    for _ in range(900):  # wrench expires after 1 s of sim time
        s = plant.step(tau)
    assert plant.wrench[0] == "" and not np.any(s.tau_ext)


def test_wrench_on_named_link_and_bad_link(panda_ideal, panda_pin):
    q = np.array([0.0, 0.2, 0.0, -1.5, 0.0, 1.5, 0.0])
    panda_ideal.reset(q)
    F = np.array([0.0, 5.0, -3.0, 0.0, 0.0, 0.2])
    panda_ideal.apply_wrench("panda_link4", F, duration=np.inf)
    assert np.abs(panda_ideal.state().tau_ext - panda_pin.jacobian(q, "panda_link4").T @ F).max() < 1e-9
    panda_ideal.apply_wrench("", F, duration=0.0)  # duration <= 0 clears
    assert not np.any(panda_ideal.state().tau_ext)
    with pytest.raises(ParameterError, match="unknown link"):
        panda_ideal.apply_wrench("no_such_link", F, 1.0)


def test_payload_changes_gravity_like_pinocchio(pin_model):
    plant = Plant("panda", profile="ideal")
    q = np.array([0.3, -0.2, 0.1, -1.8, 0.2, 1.6, 0.4])
    g0 = pin_model(plant).gravity(q)
    plant.set_payload(Payload(2.0, (0.0, 0.02, 0.1), (0.01, 0.0, 0.0, 0.01, 0.0, 0.005)))
    assert plant.payload_mass == pytest.approx(2.0)
    pm = pin_model(plant)  # built from the plant's URDF now carrying the payload link
    g1 = pm.gravity(q)
    assert np.abs(g1 - g0).max() > 1.0
    assert np.abs(plant.forward_acceleration(q, np.zeros(7), g1)).max() < 1e-9
    plant.set_payload(None)
    assert plant.payload_mass == 0.0
    assert np.abs(plant.forward_acceleration(q, np.zeros(7), g0)).max() < 1e-9
    with pytest.raises(RobotDescriptionError, match="not physical"):  # triangle inequality
        plant.set_payload(Payload(1.0, (0, 0, 0), (1.0, 0.0, 0.0, 0.1, 0.0, 0.1)))
    # a point mass (zero inertia: the SetPayload default, which the other nodes take) or one with an inertia below
    # MuJoCo's minimum: simulated as a 0.1 mm sphere; /plant/set_payload {mass: 3.0, com: {z: 0.05}} was refused
    for inertia in ((0.0,) * 6, (1e-15, 0.0, 0.0, 1e-15, 0.0, 1e-15)):
        plant.set_payload(Payload(3.0, (0.0, 0.0, 0.05), inertia))
        assert plant.payload_mass == pytest.approx(3.0)
        pm = pin_model(plant)
        assert np.abs(pm.gravity(q) - g0).max() > 1.0
        assert np.abs(plant.forward_acceleration(q, np.zeros(7), pm.gravity(q))).max() < 1e-9


def test_point_mass_payload_moves_like_the_models_point_mass():
    """A point-mass payload (zero inertia, as the model nodes take a SetPayload with mass and CoM only): the ideal
    plant keeps following RNEA of the nominal model with that point mass, also at the iiwa14's light A7."""
    from idyn_ros.dynamics import RobotModel

    payload = Payload(2.0, (0.0, 0.0, 0.1))
    plant = Plant("iiwa14", profile="ideal")
    plant.set_payload(payload)
    model = RobotModel.from_robot("iiwa14").with_payload(payload)
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = rng.uniform(-1.0, 1.0, plant.n)
        dq = rng.uniform(-1.0, 1.0, plant.n)
        ddq = rng.uniform(-3.0, 3.0, plant.n)
        out = plant.forward_acceleration(q, dq, model.rnea(q, dq, ddq))
        assert np.abs(out - ddq).max() < 1e-3


def test_true_profile_plant_is_the_true_urdf_plus_joint_effects(pin_model):
    """The true plant's rigid body equals pinocchio on its perturbed URDF (armature added on the diagonal)."""
    plant = Plant("iiwa14", profile="true")
    pm = pin_model(plant)
    rng = np.random.default_rng(5)
    q = pm.random_q(rng)
    ddq = rng.uniform(-3, 3, plant.n)
    tau = pm.rnea(q, np.zeros(plant.n), ddq) + plant.profile.armature * ddq
    # At dq = 0 the smooth friction vanishes; the commanded torque exceeds the dry friction, so the
    # frictionloss constraint acts with its full (known) magnitude against the motion.
    out = plant.forward_acceleration(q, np.zeros(plant.n), tau + plant._friction.frictionloss * np.sign(ddq))
    assert np.abs(out - ddq).max() < 5e-3 * np.abs(ddq).max()


def test_latency_delays_the_command():
    plant = Plant("ur5", profile="true")
    assert plant.profile.latency_ticks == 1
    plant.reset()
    s1 = plant.step(np.full(plant.n, 3.0))
    assert np.all(s1.tau_drive == 0.0)
    s2 = plant.step(np.zeros(plant.n))
    assert np.all(s2.tau_drive == 3.0)


def test_drive_saturates_at_effort_limit(panda_ideal):
    panda_ideal.reset()
    s = panda_ideal.step(np.full(7, 1e4))
    assert np.allclose(s.tau_drive, panda_ideal.effort_limit)


def test_reset_validates_and_keeps_time_monotonic(panda_ideal):
    t0 = panda_ideal.time
    panda_ideal.step(np.zeros(7))
    q = np.array([-0.1, -0.1, -0.1, -0.2, -0.1, 0.2, -0.1])
    panda_ideal.reset(q)
    assert panda_ideal.time > t0
    assert np.allclose(panda_ideal.state().q_true, q)
    with pytest.raises(ParameterError):
        panda_ideal.reset(np.zeros(3))
    outside = np.array([0.0, -0.785, 0.0, 1.5, 0.0, 1.571, 0.785])  # joint 4 lives in [-3.07, -0.07]
    with pytest.raises(ParameterError, match=r"panda_joint4 1\.5 not in"):  # the limit flung it back at 41 rad/s
        panda_ideal.reset(outside)
    with pytest.raises(ParameterError, match="NaN"):
        panda_ideal.apply_wrench(None, np.ones(6), float("nan"))  # it meant: forever


def test_rates_must_divide():
    with pytest.raises(ParameterError, match="integer multiple"):
        Plant("ur5", profile="ideal", physics_rate_hz=1500.0, control_rate_hz=1000.0)
    plant = Plant("ur5", profile="ideal", physics_rate_hz=4000.0, control_rate_hz=1000.0)
    assert plant.substeps == 4 and plant.control_dt == pytest.approx(1e-3)


def test_stepped_ideal_plant_reports_the_rnea_acceleration(panda_pin):
    """The integrator-level twin of the forward-dynamics check: stepping the ideal plant one period with
    tau = RNEA(q, dq, ddq) reports ddq (mean over the period) to 1e-6. Exact up to round-off with
    semi-implicit Euler and one substep (dq' = dq + T ddq(q, dq)); RK4 would miss it by O(T)."""
    plant = Plant("panda", profile="ideal")
    rng = np.random.default_rng(2)
    worst, used = 0.0, 0
    for _ in range(300):
        q = panda_pin.random_q(rng, margin=0.2)
        dq = rng.uniform(-2, 2, 7)
        ddq = rng.uniform(-10, 10, 7)
        tau = panda_pin.rnea(q, dq, ddq)
        if np.any(np.abs(tau) > plant.effort_limit):  # the drive would saturate: not this check
            continue
        plant.reset(q, dq)
        s = plant.step(tau)
        worst = max(worst, float(np.abs(s.ddq - ddq).max()))
        used += 1
    print(f"stepped ideal panda, {used} states: max |ddq_step - ddq| = {worst:.2e} rad/s^2")
    assert used >= 100
    assert worst < 1e-6, worst


def test_latency_ring_buffer_delays_by_k_ticks():
    import dataclasses

    base = Plant("ur5", profile="ideal")
    plant = Plant("ur5", profile=dataclasses.replace(base.profile, latency_ticks=3))
    applied = [plant.step(np.full(plant.n, float(k))).tau_drive[0] for k in range(1, 7)]
    assert applied == [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]
    plant.reset()  # forgets the commands in flight
    assert [plant.step(np.full(plant.n, 9.0)).tau_drive[0] for _ in range(4)] == [0.0, 0.0, 0.0, 9.0]


def test_sensor_readings_follow_the_profile_and_the_seed():
    plant = Plant("panda", profile="true", seed=4)
    p = plant.profile
    tau = np.array([1.0, -2.0, 0.5, 3.0, 0.0, 0.2, -0.1])
    s = plant.step(tau)
    np.testing.assert_array_equal(s.q, np.round(s.q_true / p.encoder_resolution) * p.encoder_resolution)
    q, dq, meas = np.empty(7), np.empty(7), np.empty(7)
    errors = np.empty((2000, 7))
    for k in range(2000):  # measure() = state() without the allocation: same model of the sensors
        plant.measure(q, dq, meas)
        errors[k] = meas - s.tau_drive - p.torque_offset
    np.testing.assert_array_equal(q, s.q)
    assert np.abs(dq - s.dq_true).max() < 6 * p.velocity_noise_std
    np.testing.assert_allclose(errors.std(axis=0), p.torque_noise_std, rtol=0.1)
    assert np.abs(errors.mean(axis=0)).max() < 0.01
    # seeded: the same seed gives the same readings, another seed others
    runs = []
    for seed in (4, 4, 5):
        other = Plant("panda", profile="true", seed=seed)
        runs.append(np.array([other.step(tau).tau for _ in range(300)]))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert np.abs(runs[0] - runs[2]).max() > 0.01


@pytest.mark.parametrize("profile", ["ideal", "true"])
def test_friction_ground_truth_leaves_out_the_joint_limit_stop(profile, pin_model):
    """Joint 4 pushed onto its upper limit by 40 Nm beyond gravity: the stop's force is not friction."""
    plant = Plant("panda", profile=profile)
    pm = pin_model(plant)
    q0 = np.array([0.0, -0.3, 0.0, -0.5, 0.0, 1.5, 0.785])
    upper = plant._joint_ranges()[1][3]
    plant.reset(q0)
    held = [0, 1, 2, 4, 5, 6]
    for _ in range(600):
        q, dq = plant.data.qpos.copy(), plant.data.qvel.copy()
        tau = pm.gravity(q)
        tau[held] += 300.0 * (q0 - q)[held] - 30.0 * dq[held]
        tau[3] += 40.0
        s = plant.step(tau)
    assert s.q_true[3] > upper  # on the stop
    dry = plant.model.dof_frictionloss[3]  # this period's dry level (0 in ideal)
    ripple_and_hysteresis = 2.0 if profile == "true" else 0.0  # Nm, joint 4 of the true Panda: < 0.4+0.4+0.2+0.8
    assert abs(s.tau_friction[3]) <= dry + ripple_and_hysteresis + 1e-9


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_a_joint_driven_at_its_effort_limit_stops_at_its_limit(robot, pin_model):
    """A hard stop, as the real arms' mechanical stops: MuJoCo's default soft limit let the joint 4.5-6.2 deg past."""
    plant = Plant(robot, profile="true")
    pm = pin_model(plant)
    lower = plant._joint_ranges()[0]
    j = 2 if robot == "ur5" else 3  # the elbow
    q = np.clip(np.zeros(plant.n), lower, plant._joint_ranges()[1])
    q[j] = lower[j] + 0.5
    s = plant.reset(q)
    overshoot = 0.0
    for _ in range(1500):  # hits the stop at speed, then rests on it
        tau = pm.gravity(s.q_true)
        tau[j] -= plant.effort_limit[j]
        s = plant.step(tau)
        overshoot = max(overshoot, lower[j] - s.q_true[j])
    assert np.degrees(overshoot) < 0.5
    assert np.degrees(lower[j] - s.q_true[j]) < 0.01
