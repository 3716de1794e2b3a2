"""Unit tests of the pure-numpy control layer (no ROS): law, limits, watchdog, state filter, reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from idyn_ros.control import law, reference
from idyn_ros.control import state_estimation as se
from idyn_ros.control.watchdog import Watchdog
from idyn_ros.dynamics import RobotModel
from idyn_ros.parameters import ControllerParams


@pytest.fixture(scope="module")
def panda() -> RobotModel:
    return RobotModel.from_robot("panda")


def test_impedance_law_matches_equation(panda):
    rng = np.random.default_rng(0)
    q = rng.uniform(-1, 1, 7)
    dq = rng.normal(size=7)
    q_d, dq_d = q + 0.01, dq - 0.1
    kp = np.array(ControllerParams().preset_kp("stiff", 7))
    kd = law.critical_damping(kp)
    M = panda.mass_matrix(q)
    tau_ff, off = rng.normal(size=7), rng.normal(size=7)
    acc = np.empty(7)
    tau = law.impedance_torque(q, dq, q_d, dq_d, tau_ff, off, M, kp, kd, out_acc=acc)
    expected = tau_ff + off + M @ (kp * (q_d - q) + kd * (dq_d - dq))
    np.testing.assert_allclose(tau, expected, rtol=1e-12)
    np.testing.assert_allclose(acc, kp * (q_d - q) + kd * (dq_d - dq))
    tau_t = law.impedance_torque(q, dq, q_d, dq_d, tau_ff, off, None, kp, kd, feedback_space="torque")
    np.testing.assert_allclose(tau_t, tau_ff + off + kp * (q_d - q) + kd * (dq_d - dq))
    with pytest.raises(ValueError):
        law.impedance_torque(q, dq, q_d, dq_d, tau_ff, off, None, kp, kd)


def test_critical_damping_gives_critically_damped_error_dynamics():
    # e'' + Kd e' + Kp e = 0 has a double pole when Kd = 2 sqrt(Kp)
    kp = np.array([1.0, 50.0, 400.0])
    kd = law.critical_damping(kp)
    for p, d in zip(kp, kd, strict=True):
        disc = d * d - 4 * p
        assert abs(disc) < 1e-9
    kd_t = law.critical_damping(kp, space="torque", inertia_diag=np.array([2.0, 2.0, 2.0]))
    np.testing.assert_allclose(kd_t, 2 * np.sqrt(kp * 2.0))


def test_torque_limiter_clips_effort_and_rate():
    lim = law.TorqueLimiter([10.0, 5.0], rate_limit=1000.0, dt=1e-3)
    tau = lim.apply(np.array([100.0, -0.5]))
    np.testing.assert_allclose(tau, [1.0, -0.5])  # rate: 1 Nm per 1 ms tick
    for _ in range(50):
        tau = lim.apply(np.array([100.0, -100.0]))
    np.testing.assert_allclose(tau, [10.0, -5.0])


def test_safe_torque_modes():
    out = np.empty(3)
    dq = np.array([1.0, -2.0, 0.0])
    np.testing.assert_allclose(law.safe_torque("zero", dq, np.ones(3), None, out), 0.0)
    np.testing.assert_allclose(law.safe_torque("damping", dq, np.full(3, 2.0), None, out), [-2.0, 4.0, 0.0])
    g = np.array([1.0, 1.0, 1.0])
    np.testing.assert_allclose(law.safe_torque("damping", np.array([np.nan, 0, 0]), np.ones(3), g, out), g)


def test_watchdog_latches_data_faults_and_recovers_from_late_input():
    wd = Watchdog(period_s=1e-3, stale_periods=3, ff_timeout_s=0.01, recovery_ticks=3)
    assert wd.check_state_age(10_000_000, 9_000_000)
    assert not wd.check_state_age(10_000_000, 6_000_000)
    assert wd.tripped and not wd.latched and "stale" in wd.reason
    assert [wd.fresh_tick() for _ in range(3)] == [False, False, True]  # back after 3 fresh ticks
    assert not wd.tripped and wd.recoveries == 1
    wd.late("stale joint state")
    wd.check_finite("q", np.array([np.nan]))  # a data fault during an input fault latches, with its reason
    assert wd.latched and "non-finite q" in wd.reason
    wd.check_finite("dq", np.array([np.nan]))
    assert "non-finite q" in wd.reason  # the first latched reason is kept
    assert not any(wd.fresh_tick() for _ in range(10))
    wd.clear()
    assert not wd.check_finite("q", np.array([0.0, np.inf]))
    assert "non-finite q" in wd.reason and "[1]" in wd.reason and wd.latched
    wd.clear()
    assert not wd.check_ff_age(100_000_000, -1) and "never received" in wd.reason and not wd.latched
    wd.clear()
    # feedforward computed from a state one period back is fine; one older than ff_timeout is not
    assert wd.check_ff_lag(5_000_000_000, 5_000_000_000 - wd.period_ns)
    assert wd.check_ff_lag(5_000_000_000, 5_000_000_000 - wd.ff_timeout_ns)
    assert not wd.check_ff_lag(5_000_000_000, 5_000_000_000 - wd.ff_timeout_ns - 1)
    assert "feedforward lags the joint state" in wd.reason
    wd.clear()
    wd.max_stamp_age_ns = 50_000_000
    assert wd.check_stamp_age(10_000_000_000, 9_960_000_000)
    assert not wd.check_stamp_age(10_000_000_000, 5_000_000_000) and "stamp 5000.00 ms old" in wd.reason


def _feed(f, names, q, dq, t_ns, eff=()):
    return f.update(names, list(q), list(dq), list(eff), t_ns)


def test_state_filter_maps_by_name_and_rejects_bad_input():
    names = ["a", "b", "c"]
    f = se.JointStateFilter(names, rate_hz=1000.0)
    # message in another order with an extra joint
    assert _feed(f, ["c", "x", "a", "b"], [3, 9, 1, 2], [30, 90, 10, 20], 1_000_000) == se.OK
    np.testing.assert_allclose(f.q, [1, 2, 3])
    np.testing.assert_allclose(f.dq, [10, 20, 30])
    assert _feed(f, ["a", "b"], [1, 2], [0, 0], 2_000_000) == se.REJECT_NAMES
    assert "['c']" in f.reason
    assert _feed(f, names, [1, np.nan, 3], [0, 0, 0], 2_000_000) == se.REJECT_NONFINITE
    assert "'b'" in f.reason and "position" in f.reason
    assert _feed(f, names, [1, 2, 3], [0, np.inf, 0], 2_000_000) == se.REJECT_NONFINITE
    assert _feed(f, names, [1, 2, 3], [0, 0, 0], 500_000) == se.DUPLICATE  # late by less than the max gap: dropped
    assert _feed(f, names, [1, 2, 3], [0, 0, 0], 1_000_000) == se.DUPLICATE
    assert _feed(f, names, [1, 2], [0, 0, 0], 2_000_000) == se.REJECT_LENGTH
    np.testing.assert_allclose(f.q, [1, 2, 3])  # rejected samples changed nothing


def test_state_filter_estimates_acceleration_of_a_sine_with_small_lag():
    rate = 1000.0
    f = se.JointStateFilter(["j"], rate_hz=rate, accel_cutoff_hz=50.0)
    w = 2 * math.pi * 1.0
    errs = []
    for k in range(3000):
        t = k / rate
        assert f.update(["j"], [math.sin(w * t)], [w * math.cos(w * t)], [], int(t * 1e9) + 1) == se.OK
        if k > 500:
            errs.append(f.ddq[0] - (-w * w * math.sin(w * t)))
    amp = w * w
    # a 50 Hz 2nd-order low-pass + half-sample backward difference: a few ms of lag -> < 5 % of amplitude
    assert np.sqrt(np.mean(np.square(errs))) < 0.05 * amp
    # velocity by differentiation when the message has none
    g = se.JointStateFilter(["j"], rate_hz=rate)
    for k in range(5):
        g.update(["j"], [0.5 * k / rate], [], [], k * 1_000_000 + 1)
    assert g.dq[0] == pytest.approx(0.5)


def test_rotational_displacement_resets_on_reversal_and_saturates():
    rd = se.RotationalDisplacement(1, limit=math.radians(10), deadband=1e-4)
    for x in np.linspace(0, 0.05, 50):
        r = rd.update(np.array([x]))
    assert r[0] == pytest.approx(0.05)
    for x in np.linspace(0.05, 0.03, 20):
        r = rd.update(np.array([x]))
    assert r[0] == pytest.approx(-0.02)
    for x in np.linspace(0.03, 1.0, 50):
        r = rd.update(np.array([x]))
    assert r[0] == pytest.approx(math.radians(10))


def test_min_jerk_is_rest_to_rest_and_consistent():
    q0, q1, T = np.zeros(2), np.array([1.0, -0.5]), 2.0
    q, dq, ddq = reference.min_jerk(q0, q1, T, 0.0)
    np.testing.assert_allclose([q, dq, ddq], 0.0, atol=1e-12)
    q, dq, ddq = reference.min_jerk(q0, q1, T, T)
    np.testing.assert_allclose(q, q1)
    np.testing.assert_allclose(dq, 0.0)
    # derivative consistency by finite differences
    h = 1e-6
    qa, dqa, _ = reference.min_jerk(q0, q1, T, 0.7)
    qb, dqb, _ = reference.min_jerk(q0, q1, T, 0.7 + h)
    _, _, dd = reference.min_jerk(q0, q1, T, 0.7)
    np.testing.assert_allclose((qb - qa) / h, dqa, rtol=1e-4)
    np.testing.assert_allclose((dqb - dqa) / h, dd, rtol=1e-4)
    move = reference.MinJerkMove(q0, [q1, q0], [T, T])
    np.testing.assert_allclose(move.sample(T)[0], q1)
    np.testing.assert_allclose(move.sample(10.0)[0], q0)


def test_a_hold_returns_the_same_read_only_rest_every_tick():
    """In hold and past a move's end, sample gives what min_jerk gives at rest (to the bit), as the same read-only
    arrays each call (computed once: the reference node's default mode samples it every tick)."""
    q0 = np.array([-0.0, 0.3, -1.2, 2.0])
    hold = reference.MinJerkMove(q0, [], [])
    move = reference.MinJerkMove(q0, [q0 + 0.2], [1.0])
    rest = reference.min_jerk(q0, q0, 0.0, 0.0)
    for t in (0.0, 2.5):
        for got, want in zip(hold.sample(t), rest, strict=True):
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
            assert not got.flags.writeable
    assert hold.sample(1.0)[0] is hold.sample(2.0)[0]
    np.testing.assert_array_equal(move.sample(1.5)[0], reference.min_jerk(q0 + 0.2, q0 + 0.2, 0.0, 0.0)[0])
    assert move.sample(0.5)[0].flags.writeable  # moving: new arrays, as before


def test_sampled_trajectory_and_npz(tmp_path):
    t = np.linspace(0, 1, 1001)
    q = np.stack([np.sin(2 * np.pi * t), np.cos(2 * np.pi * t)], axis=1)
    path = tmp_path / "exc.npz"
    np.savez(path, t=t, q=q, joint_names=np.array(["b", "a"]))
    traj = reference.load_npz_trajectory(path, ["a", "b"])
    qs, dqs, _ = traj.sample(0.25)
    np.testing.assert_allclose(qs, [0.0, 1.0], atol=1e-5)
    assert dqs[1] == pytest.approx(0.0, abs=1e-2) and dqs[0] == pytest.approx(-2 * np.pi, rel=1e-3)
    from idyn_ros.errors import DatasetError

    with pytest.raises(DatasetError, match="lacks joints"):
        reference.load_npz_trajectory(path, ["a", "zz"])
    cut = tmp_path / "cut.npz"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DatasetError, match="cannot read trajectory"):  # it raised zipfile.BadZipFile
        reference.load_npz_trajectory(cut, ["a", "b"])
    q[10, 0] = np.nan
    np.savez(path, t=t, q=q, joint_names=np.array(["b", "a"]))
    with pytest.raises(DatasetError, match="non-finite"):
        reference.load_npz_trajectory(path, ["a", "b"])
    jt = reference.from_joint_trajectory_points([1.0], [[1.0, 2.0]], None, None, np.zeros(2))
    np.testing.assert_allclose(jt.sample(1.0)[0], [1.0, 2.0])


def test_filter_tracks_r_only_when_asked():
    """r is a per-joint Python loop: only the joint_state_buffer (which publishes it) asks for it."""
    tracked = se.JointStateFilter(["j"], rate_hz=1000.0, track_rotational_displacement=True)
    plain = se.JointStateFilter(["j"], rate_hz=1000.0)
    for k in range(50):
        for f in (tracked, plain):
            assert f.update(["j"], [0.001 * k], [], [], k * 1_000_000) == se.OK
    assert tracked.estimate.r[0] > 0.02 and plain.estimate.r[0] == 0.0


def test_joint_states_slower_than_the_rate_are_named_with_the_fix():
    """A CB3 UR publishes at 125 Hz: at the default rate_hz=1000 every state restarted the differentiators silently."""
    names = [f"j{i}" for i in range(6)]
    for period_ms, slow in ((8, True), (1, False)):
        f = se.JointStateFilter(names, 1000.0)
        for k in range(100):
            f.update(names, [0.01 * k] * 6, [], [], k * period_ms * 1_000_000)
        assert bool(f.rate_problem()) == slow
    f = se.JointStateFilter(names, 1000.0)
    for k in range(100):
        f.update(names, [0.0] * 6, [], [], k * 8_000_000)
    assert f.gaps == 99 and "125 Hz CB3" in f.rate_problem()
    f.reset()
    assert f.gaps == 0 and f.rate_problem() == ""
