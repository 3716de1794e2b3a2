"""Wrench observers against pinocchio forward dynamics with a known flange wrench; feedforward fallback."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.control.wrench import DirectResidual, MomentumObserver, WrenchMapper, damped_pinv_transpose
from idyn_ros.dynamics import RobotModel
from idyn_ros.errors import ModelArtifactError


@pytest.fixture(scope="module")
def panda() -> RobotModel:
    return RobotModel.from_robot("panda")


def _simulate(panda, F, seconds=0.6, rate=1000.0):
    """Forward-simulate (ABA, semi-implicit Euler) under gravity compensation + joint damping + J^T F."""
    rbd = panda
    sim = panda.copy()
    q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    dq = np.zeros(7)
    dt = 1.0 / rate
    mo = MomentumObserver(rbd, gain=100.0)
    direct = DirectResidual(rbd)
    mapper = WrenchMapper(rbd, damping=1e-4)
    rows = []
    tau_prev = np.zeros(7)
    for k in range(int(seconds * rate)):
        J, _ = sim.flange_jacobian(q)
        tau_ext = J.T @ F if k * dt > 0.1 else np.zeros(7)
        tau = sim.gravity(q) - 2.0 * dq  # actuator torque
        ddq = pin.aba(sim.pin_model, sim.data, q, dq, tau + tau_ext)
        r = mo.update(q, dq, tau_prev, dt)  # the torque that acted over the last period
        res_direct = direct.update(q, dq, ddq, tau).copy()
        base, tool = mapper.update(q, r)
        rows.append((tau_ext.copy(), r.copy(), res_direct, base.copy(), tool.copy(), J.copy()))
        dq = dq + ddq * dt
        q = q + dq * dt
        tau_prev = tau
    return rows


def test_direct_residual_is_exact_with_true_acceleration(panda):
    F = np.array([0.0, 0.0, -10.0, 0.0, 0.0, 0.0])
    rows = _simulate(panda, F, seconds=0.3)
    for tau_ext, _r, direct, *_ in rows[150:]:
        np.testing.assert_allclose(direct, tau_ext, atol=1e-8)


def test_momentum_observer_stays_exact_on_a_recording_far_slower_than_its_gain(panda):
    """A 1 kHz arm seen at 20 Hz (a low-rate recording replayed by ``idyn wrench --rate 20``): with K dt = 5 the
    rectangle-rule observer grew to 1e78 N; the exact step converges to the external torque as at 1 kHz."""
    q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    dq, dt, every = np.zeros(7), 1e-3, 50
    mo = MomentumObserver(panda, gain=100.0)
    tau_sum = np.zeros(7)
    F = np.array([0.0, 0.0, -10.0, 0.0, 0.0, 0.0])
    for k in range(2000):
        J, _ = panda.flange_jacobian(q)
        tau_ext = J.T @ F if k >= 500 else np.zeros(7)
        if k % every == 0:
            r = mo.update(q, dq, tau_sum / every, every * dt)  # the mean actuator torque over the period
            tau_sum[:] = 0.0
            seen = tau_ext
        tau = panda.gravity(q) - 2.0 * dq
        tau_sum += tau
        ddq = pin.aba(panda.pin_model, panda.data, q, dq, tau + tau_ext)
        dq = dq + ddq * dt
        q = q + dq * dt
    # within 10 %: at 20 Hz the torque and the pose change within a period (at 1 kHz, 1e-3, the test below)
    assert np.abs(r - seen).max() < 0.1 * np.abs(seen).max(), (r, seen)


def test_a_gain_set_at_run_time_steps_the_momentum_observer_as_one_built_with_it(panda):
    """The step's exp(-K dt) is kept while K and dt hold; set_gain (the node's run-time observer_gain) renews it."""
    q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    dq, tau = np.full(7, 0.1), panda.gravity(q) + 1.0  # 1 Nm the model does not explain, on every joint
    changed, fresh = MomentumObserver(panda, gain=100.0), MomentumObserver(panda, gain=10.0)
    for mo in (changed, fresh):
        mo.update(q, dq, tau, 1e-3)
    changed.update(q, dq, tau, 1e-3)  # a step at K = 100 fills the kept factor
    changed.set_gain(10.0)
    changed.r[:] = 0.0
    fresh.update(q, dq, tau, 1e-3)
    fresh.r[:] = 0.0
    np.testing.assert_array_equal(changed.update(q, dq, tau, 1e-3), fresh.update(q, dq, tau, 1e-3))


def test_momentum_observer_converges_to_external_torque_and_wrench(panda):
    for axis in range(3):
        F = np.zeros(6)
        F[axis] = 10.0
        rows = _simulate(panda, F)
        tau_ext, r, _d, base, tool, _J = rows[-1]
        # first-order convergence with K_O = 100/s: after 0.5 s the error is ~e^-50 (discretisation aside)
        np.testing.assert_allclose(r, tau_ext, atol=0.05)
        np.testing.assert_allclose(base[:3], F[:3], atol=0.3)  # r lags one tick while the arm drifts
        assert np.linalg.norm(tool[:3]) == pytest.approx(10.0, abs=0.3)  # a rotation keeps the norm


def test_damped_pseudo_inverse_recovers_wrench_away_from_singularity(panda):
    rbd = panda
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.4])
    J, _ = rbd.flange_jacobian(q)
    F = np.array([3.0, -2.0, 10.0, 0.5, -0.2, 0.1])
    np.testing.assert_allclose(damped_pinv_transpose(J, 0.0) @ (J.T @ F), F, atol=1e-8)
    err = np.abs(damped_pinv_transpose(J, 0.05) @ (J.T @ F) - F).max()
    assert 0 < err < 0.5  # damping biases slightly, bounded


def test_wrench_mapper_deadband_and_lowpass(panda):
    rbd = panda
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.4])
    J, _ = rbd.flange_jacobian(q)
    mapper = WrenchMapper(rbd, damping=0.0, deadband=[0.6, 0.6, 0.6, 0.1, 0.1, 0.1], lowpass_alpha=0.5)
    F = np.array([0.5, 2.0, 0.0, 0.0, 0.0, 0.0])
    out, _ = mapper.update(q, J.T @ F)
    assert out[0] == 0.0 and out[1] == pytest.approx(2.0, abs=1e-6)
    out, _ = mapper.update(q, np.zeros(7))
    assert out[1] == pytest.approx(1.0, abs=1e-6)  # halfway by the low-pass


def test_feedforward_fallbacks(panda, tmp_path):
    q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    dq, ddq = np.full(7, 0.1), np.full(7, 0.2)
    ff = FeedforwardComputer(panda, None, "rbd")
    assert ff.fallback and "no model configured" in ff.fallback_reason
    np.testing.assert_allclose(ff.compute(q, dq, ddq), panda.rnea(q, dq, ddq), atol=1e-10)
    ff = FeedforwardComputer(panda, None, "gravity")
    np.testing.assert_allclose(ff.compute(q, dq, ddq), panda.gravity(q), atol=1e-10)
    missing = FeedforwardComputer(panda, tmp_path / "nope.onnx", "rbd")
    assert missing.fallback and "not found" in missing.fallback_reason
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not onnx")
    assert FeedforwardComputer(panda, junk, "rbd").fallback
    with pytest.raises(ModelArtifactError, match="fallback is 'none'"):
        FeedforwardComputer(panda, None, "none")


class _FakeLearnedModel:
    """Stands in for a loaded FeedforwardComputer: identified inertials + constant friction/residual parts."""

    def __init__(self, robot, pi, friction, residual):
        self.inertial_parameters = pi
        self._rbd = robot.with_inertial_parameters(pi)
        self.friction, self.residual = np.asarray(friction, float), np.asarray(residual, float)
        self.rbd_part, self.total = np.zeros(robot.n), np.zeros(robot.n)

    def compute(self, q, dq, ddq):
        self.rbd_part[:] = self._rbd.rnea(q, dq, ddq)
        self.total[:] = self.rbd_part + self.friction + self.residual
        return self.total


def test_observers_use_the_learned_models_identified_inertials(panda):
    """A robot whose inertials differ from the nominal URDF (+30 % mass/inertia on every link) holds still
    against a flange force: with M, C, g from the model's identified inertials (+ its friction/residual parts)
    both observers recover J^T F and F; the nominal-URDF terms would keep a large bias."""
    from idyn_ros.control.wrench import LearnedModelTerms, observer_model

    pi_nominal = np.stack([panda.pin_model.inertias[j].toDynamicParameters() for j in range(1, panda.n + 1)])
    pi = 1.3 * pi_nominal  # physically consistent, clearly not nominal
    truth = panda.with_inertial_parameters(pi)
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.4])
    dq = ddq = np.zeros(7)
    F = np.array([4.0, -6.0, 10.0, 0.0, 0.0, 0.0])
    J, _ = truth.flange_jacobian(q)
    tau_ext = J.T @ F
    friction, residual = np.full(7, 0.2), np.linspace(-0.5, 0.5, 7)
    tau = truth.gravity(q) + friction + residual - tau_ext  # static: g + tau_f + tau_res = tau + J^T F

    model = _FakeLearnedModel(panda, pi, friction, residual)
    rbd = observer_model(panda, model.inertial_parameters)
    np.testing.assert_allclose(rbd.gravity(q), truth.gravity(q), atol=1e-10)
    terms = LearnedModelTerms(model, rbd)
    mo, direct, mapper = MomentumObserver(rbd, gain=100.0), DirectResidual(rbd), WrenchMapper(rbd, damping=0.0)
    for _ in range(500):  # 0.5 s at 1 kHz, K_O = 100/s
        extra_d, extra_m = terms.update(q, dq, ddq)
        r = mo.update(q, dq, tau, 1e-3, extra_m)
    np.testing.assert_allclose(r, tau_ext, atol=1e-6)
    np.testing.assert_allclose(mapper.update(q, r)[0][:3], F[:3], atol=1e-5)
    np.testing.assert_allclose(direct.update(q, dq, ddq, tau, extra_d), tau_ext, atol=1e-9)

    nominal = MomentumObserver(panda, gain=100.0)
    for _ in range(500):
        r_nom = nominal.update(q, dq, tau, 1e-3, friction + residual)
    assert np.abs(r_nom - tau_ext).max() > 1.0  # what the nominal-URDF observer would report


def test_model_without_rbd_part_keeps_nominal_momentum_terms(panda):
    """lstm/delan artifacts have no identified inertials: nominal RBD, direct residual = model total - tau."""
    from idyn_ros.control.wrench import LearnedModelTerms, observer_model

    class NoRbd:
        inertial_parameters = None
        total = np.full(7, 1.5)

        def compute(self, q, dq, ddq):
            return self.total

    rbd = observer_model(panda, None)
    np.testing.assert_allclose(rbd.gravity(np.zeros(7)), panda.gravity(np.zeros(7)))
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.4])
    extra_d, extra_m = LearnedModelTerms(NoRbd(), rbd).update(q, np.zeros(7), np.zeros(7))
    assert extra_m is None
    tau = np.full(7, 1.0)
    np.testing.assert_allclose(DirectResidual(rbd).update(q, np.zeros(7), np.zeros(7), tau, extra_d), 0.5, atol=1e-9)


@pytest.mark.parametrize("lowpass_alpha, deadband", [(1.0, 0.0), (0.3, 0.5)])
def test_both_wrenches_from_one_jacobian_equal_each_mapper_on_its_own(panda, lowpass_alpha, deadband):
    """WrenchObserver.wrenches computes the Jacobian and the damped pseudo-inverse once for both mappers: the same
    base and tool wrenches, to the bit, as each WrenchMapper.update computing its own."""
    from idyn_ros.control.wrench import WrenchObserver

    obs = WrenchObserver(panda, 1000.0)
    obs.set_tunables(50.0, 0.01, deadband, deadband / 5, lowpass_alpha)
    alone_direct, alone_momentum = WrenchMapper(panda), WrenchMapper(panda)
    for mapper in (alone_direct, alone_momentum):
        mapper.damping, mapper.deadband[:3], mapper.deadband[3:], mapper.alpha = 0.01, deadband, deadband / 5, \
            lowpass_alpha
    rng = np.random.default_rng(4)
    q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    for k in range(400):
        q = q0 + 0.3 * np.sin(0.01 * k + np.arange(7))
        dq = 0.3 * np.cos(0.01 * k + np.arange(7))
        obs.update((k + 1) * 1_000_000, q, dq, panda.rnea(q, dq, 0.1 * dq) + rng.normal(size=7))
        if k % 4:
            continue
        base_direct, base_momentum = obs.wrenches(q)
        expected_direct, tool_direct = alone_direct.update(q, obs.tau_direct)
        expected_momentum, tool_momentum = alone_momentum.update(q, obs.tau_momentum)
        np.testing.assert_array_equal(base_direct, expected_direct)
        np.testing.assert_array_equal(base_momentum, expected_momentum)
        np.testing.assert_array_equal(obs.map_direct.tool, tool_direct)
        np.testing.assert_array_equal(obs.map_momentum.tool, tool_momentum)
    obs.map_momentum.damping = alone_momentum.damping = 0.05  # mappers set apart: each its own pseudo-inverse
    np.testing.assert_array_equal(obs.wrenches(q)[1], alone_momentum.update(q, obs.tau_momentum)[0])
