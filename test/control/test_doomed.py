"""DOOMED on a simulated double integrator with an unmodelled constant torque and one-tick delay."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control.doomed import Doomed, DoomedAdapter, DoomedConfig


def simulate(eta: float, seconds: float = 4.0, features: str = "constant", kp: float = 50.0,
             noise: float = 0.0, seed: int = 0, **cfg):
    """m ddq = tau + d; tau = m a_cmd + w, with DOOMED run by ``DoomedAdapter`` as the node and the simulator
    loop run it: the command answering state k (stamp k) acts over [k, k+1]; at state k+1 the adapter pairs
    (dq_{k+1} - dq_k) / dt with that command, and its new offset reaches the command of tick k+2."""
    rate = 1000.0
    dt = 1.0 / rate
    m = np.array([0.5, 2.0])
    d = np.array([-3.0, 4.0])  # unmodelled torque (e.g. a payload's weight), Nm
    kd = 2 * np.sqrt(kp)
    learner = Doomed(2, DoomedConfig(learning_rate=eta, rate_hz=rate, features=features, offset_limit=10.0,
                                                **cfg))
    adapter = DoomedAdapter(learner, inertia_scaled=False)
    rng = np.random.default_rng(seed)
    q = np.zeros(2)
    dq = np.zeros(2)
    offset = np.zeros(2)
    q_d = np.array([0.3, -0.2])
    acc_err, pos_err, offsets = [], [], []
    for k in range(int(seconds * rate)):
        stamp = k * 1_000_000
        a_cmd = kp * (q_d - q) + kd * (0 - dq)
        tau = m * a_cmd + offset
        adapter.on_command(stamp, a_cmd)
        dq_noisy = dq + noise * dt * rng.normal(size=2)  # acceleration noise of std ``noise`` after differencing
        new = adapter.on_state(stamp, q, dq_noisy)
        if new is not None:
            offset = new.copy()
            acc_err.append(learner.error.copy())
        ddq = (tau + d) / m
        dq = dq + ddq * dt
        q = q + dq * dt
        pos_err.append(q_d - q)
        offsets.append(offset.copy())
    return -np.array(acc_err), np.array(pos_err), np.array(offsets), learner


def test_adapter_pairs_by_stamp_and_skips_unanswered_and_safe_ticks():
    learner = Doomed(1, DoomedConfig(learning_rate=0.0))
    adapter = DoomedAdapter(learner, inertia_scaled=False)
    assert adapter.on_state(0, np.zeros(1), np.zeros(1)) is None  # nothing before: baseline only
    adapter.on_command(0, np.array([2.0]))
    assert adapter.on_state(1_000_000, np.zeros(1), np.array([0.001])) is not None  # paired with stamp 0
    np.testing.assert_allclose(learner.error, [2.0 - 1.0])  # e = commanded - measured (0.001 / 1 ms)
    adapter.on_command(1_000_000, np.array([5.0]), active=False)  # a safe-mode tick commands no acceleration
    assert adapter.on_state(2_000_000, np.zeros(1), np.array([0.002])) is None
    assert adapter.on_state(3_000_000, np.zeros(1), np.array([0.003])) is None  # its command never came
    assert (adapter.paired, adapter.unpaired) == (1, 2)
    with pytest.raises(ValueError, match="M\\(q\\)"):
        DoomedAdapter(learner, None, inertia_scaled=True)


def test_adapter_does_not_pair_a_state_that_follows_a_missed_one():
    """Its acceleration spans two ticks' commands: pairing it with one of them is a wrong error (a loaded machine
    dropping joint states made DOOMED's error swing until the oscillation detector tripped)."""
    learner = Doomed(1, DoomedConfig(learning_rate=0.0, rate_hz=1000.0))
    adapter = DoomedAdapter(learner, inertia_scaled=False)
    adapter.on_state(0, np.zeros(1), np.zeros(1))
    adapter.on_command(0, np.array([2.0]))
    adapter.on_command(1_000_000, np.array([-8.0]))  # answered a state this node never received
    assert adapter.on_state(2_000_000, np.zeros(1), np.array([0.002])) is None
    assert (adapter.paired, adapter.gaps) == (0, 1)
    adapter.on_command(2_000_000, np.array([1.0]))
    assert adapter.on_state(3_000_000, np.zeros(1), np.array([0.003])) is not None  # one tick again: paired


def test_doomed_learns_the_unmodelled_torque_and_removes_the_offset():
    acc0, pos0, _, _ = simulate(eta=0.0)
    acc1, pos1, off, learner = simulate(eta=0.02)
    tail = slice(-500, None)
    # without learning the PD leaves a steady-state error d/(m kp); with learning it vanishes
    assert np.abs(pos0[tail]).mean() > 0.02
    assert np.abs(pos1[tail]).mean() < 0.05 * np.abs(pos0[tail]).mean()
    assert np.abs(acc1[tail]).mean() < 0.05 * np.abs(acc0[tail]).mean()
    np.testing.assert_allclose(off[-1], [3.0, -4.0], atol=0.1)  # w -> -d
    assert not learner.frozen


def test_linear_features_also_converge():
    _, pos, _off, _ = simulate(eta=0.02, features="linear")
    assert np.abs(pos[-500:]).mean() < 2e-3


def test_oscillating_learning_rate_is_caught_and_decayed():
    # delay-aware bound: eta < ~m_min = 0.5 (gamma 0.9); 3.0 oscillates on joint 0
    _acc, _, off, learner = simulate(eta=3.0, seconds=4.0)
    assert learner.frozen and "oscillation on joint 0" in learner.freeze_reason
    assert np.all(np.isfinite(off))
    assert np.abs(off[-1]).max() < 0.5  # decayed after the freeze


def test_swinging_offset_is_caught_without_the_rising_error_signature():
    # the paper's signature disabled (rise factor unreachable): the offset-swing criterion alone trips
    _, _, off, learner = simulate(eta=3.0, seconds=4.0, osc_rise_factor=1e6)
    assert learner.frozen and "offset swings" in learner.freeze_reason
    assert np.abs(off[-1]).max() < 0.5


def test_stable_rate_with_noise_is_not_flagged():
    _, pos, _, learner = simulate(eta=0.02, noise=2.0, seconds=4.0)
    assert not learner.frozen
    assert np.abs(pos[-500:]).mean() < 5e-3


def test_saturation_reset_freeze_and_rate_scaling():
    learner = Doomed(2, DoomedConfig(learning_rate=1.0, offset_limit=[0.5, 2.0], momentum=0.0))
    for _ in range(200):
        learner.update(np.array([100.0, 100.0]), np.zeros(2))
    np.testing.assert_allclose(learner.offset, [0.5, 2.0])
    learner.freeze("test")
    before = learner.offset.copy()
    learner.update(np.array([-100.0, -100.0]), np.zeros(2))
    np.testing.assert_allclose(learner.offset, before)
    learner.reset()
    assert not learner.frozen and np.all(learner.offset == 0)
    slow = Doomed(1, DoomedConfig(learning_rate=0.05, rate_hz=500.0))
    assert slow.learning_rate == pytest.approx(0.1)  # per tick doubles at half the rate
    with pytest.raises(ValueError, match="momentum"):
        Doomed(1, DoomedConfig(momentum=1.0))
    learner.update(np.array([np.nan, 0.0]), np.zeros(2))
    assert learner.frozen and "non-finite" in learner.freeze_reason


def test_offsets_and_weights_stay_within_their_limits_on_both_sides_and_only_a_non_finite_error_freezes():
    """The clips (np.maximum/np.minimum against precomputed -limit/limit) equal np.clip: every offset and weight is
    the unclipped value held to +-limit per joint, also after the limits change; an error whose sum overflows
    (1e308 twice) is finite and learned from (the finiteness check sums first, then looks closer)."""
    limit = np.array([0.5, 2.0, 1.0])
    learner = Doomed(3, DoomedConfig(learning_rate=0.5, offset_limit=limit, momentum=0.5, features="linear"))
    rng = np.random.default_rng(2)
    at_limit = np.zeros(3, dtype=bool)
    for k in range(400):
        if k == 200:
            limit = np.array([0.2, 3.0, 0.7])
            learner.reconfigure(DoomedConfig(learning_rate=0.5, offset_limit=limit, momentum=0.5, features="linear"))
        offset = learner.update(50 * rng.normal(size=3), np.zeros(3), rng.normal(size=3), rng.normal(size=3))
        np.testing.assert_array_equal(offset, np.clip(offset, -limit, limit))
        for weights in (learner.u, learner.w):
            np.testing.assert_array_equal(weights, np.clip(weights, -limit[:, None], limit[:, None]))
        at_limit |= np.abs(learner.w[:, 0]) == limit
    assert at_limit.all() and not learner.frozen  # every joint's clip acted
    huge = Doomed(2, DoomedConfig(learning_rate=0.05))
    with np.errstate(over="ignore"):  # the sum overflows: that is the point
        huge.update(np.array([1e308, 1e308]), np.zeros(2))
    assert not huge.frozen and np.all(huge.offset > 0)


def test_a_slow_wander_of_the_offset_is_not_taken_for_an_oscillation():
    """A 2 Hz error moves the offset back and forth over 0.5 s: a long path against its net change, but only twice
    its range (an oscillation reverses many times). Freezing on that cost 10x in tracking on the plant."""
    cfg = DoomedConfig(learning_rate=0.002, momentum=0.0, variance_gain=0.0, offset_limit=1.0)
    learner = Doomed(1, cfg)
    offsets = []
    for k in range(3000):
        learner.update(np.array([3.0 * np.sin(2 * np.pi * 2.0 * k / 1000.0)]), np.zeros(1))
        offsets.append(learner.offset[0])
    w = np.array(offsets[-500:])
    path, span, net = np.abs(np.diff(w)).sum(), w.max() - w.min(), abs(w[-1] - w[0])
    assert path > 0.5 * 1.0 and path > cfg.osc_tv_ratio * net  # what tripped the first criterion
    assert path < cfg.osc_tv_ratio * span
    assert not learner.frozen, learner.freeze_reason


def test_jitter_over_a_small_range_is_not_taken_for_an_oscillation():
    """Noisy acceleration errors move the offset a little every tick: over 0.5 s a path of about one limit within a
    few percent of it. That is DOOMED learning on a noisy arm (Panda with a payload: 0.05 deg tracking), not chatter."""
    cfg = DoomedConfig(learning_rate=0.003, momentum=0.0, variance_gain=0.0, offset_limit=1.0)
    learner = Doomed(1, cfg)
    rng = np.random.default_rng(0)
    offsets = []
    for _ in range(3000):
        learner.update(rng.normal(0.0, 1.0, size=1), np.zeros(1))
        offsets.append(learner.offset[0])
    w = np.array(offsets[-500:])
    path, span = np.abs(np.diff(w)).sum(), w.max() - w.min()
    assert path > 0.5 * 1.0 and path > cfg.osc_tv_ratio * span  # what tripped the detector at fraction 0.5
    assert not learner.frozen, learner.freeze_reason


def test_chatter_of_a_too_high_rate_is_caught_by_its_path():
    """The offset flipping every tick (eta twice the delay-aware bound) covers many limits in 0.5 s."""
    *_, learner = simulate(eta=1.0, seconds=4.0, osc_rise_factor=1e6)
    assert learner.frozen and "offset swings" in learner.freeze_reason


def test_reconfigure_applies_new_settings_and_keeps_what_was_learned():
    """A parameter changed at run time takes effect on the next tick; the learned offset stays."""
    import dataclasses

    _, _, _, learner = simulate(eta=0.02, seconds=2.0)
    learned = learner.offset.copy()
    assert np.all(np.abs(learned) > 0.5)
    cfg = dataclasses.replace(learner.cfg, learning_rate=0.04, osc_tv_fraction=8.0, osc_window=0.05, decay_tau=0.2)
    learner.reconfigure(cfg)
    assert learner.cfg.osc_tv_fraction == 8.0 and learner.learning_rate == pytest.approx(0.04)
    assert learner._win == 50 and learner._decay == pytest.approx(np.exp(-1e-3 / 0.2))
    np.testing.assert_allclose(learner.offset, learned)
    learner.update(np.zeros(2), np.zeros(2))  # the detector runs with its new window
    with pytest.raises(ValueError, match="features"):
        learner.reconfigure(dataclasses.replace(cfg, features="linear"))
    with pytest.raises(ValueError, match="osc_consecutive"):
        learner.reconfigure(dataclasses.replace(cfg, osc_consecutive=50))


def test_adapter_does_not_pair_a_state_less_than_half_a_period_after_the_previous():
    """Velocity noise over 2 us is a huge acceleration (|e| 1171 rad/s^2, a 3 Nm offset step with variance_gain 0):
    the extra state is skipped and the next regular one pairs with the state before it, over the full period."""
    learner = Doomed(1, DoomedConfig(learning_rate=0.0, rate_hz=1000.0))
    adapter = DoomedAdapter(learner, inertia_scaled=False)
    adapter.on_state(0, np.zeros(1), np.zeros(1))
    adapter.on_command(0, np.array([2.0]))
    assert adapter.on_state(2_000, np.zeros(1), np.array([0.5])) is None  # 2 us later, noisy velocity
    adapter.on_command(2_000, np.array([7.0]))  # the controller answered it too
    assert adapter.on_state(1_000_000, np.zeros(1), np.array([0.001])) is not None
    np.testing.assert_allclose(learner.error, [2.0 - 1.0])  # paired with stamp 0 over 1 ms, not over 0.998 ms
    assert (adapter.paired, adapter.early, adapter.gaps) == (1, 1, 0)


def test_adapter_restart_makes_the_next_state_a_baseline_only():
    """After the joint-state stamps started over (jumped back or stalled) the previous state belongs to another
    time line: the next state is not paired, the one after it is."""
    learner = Doomed(1, DoomedConfig(learning_rate=0.0, rate_hz=1000.0))
    adapter = DoomedAdapter(learner, inertia_scaled=False)
    adapter.on_state(5_000_000, np.zeros(1), np.zeros(1))
    adapter.on_command(5_000_000, np.array([1.0]))
    adapter.restart()
    for k in range(3):
        adapter.on_command(k * 1_000_000, np.array([1.0]))
    assert adapter.on_state(1_000_000, np.zeros(1), np.array([0.5])) is None
    assert adapter.on_state(2_000_000, np.zeros(1), np.array([0.5])) is not None
    np.testing.assert_allclose(learner.error, [1.0])  # (0.5 - 0.5) / 1 ms measured, 1 commanded
    assert (adapter.paired, adapter.restarts) == (1, 1)


def test_a_new_inertia_model_resets_what_was_learned_and_scales_the_step():
    """A payload applied to the feedforward makes the offset learned for it count twice: the learner starts from
    zero, the step follows the new M_jj, and a freeze stays."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.robots.spec import Payload

    bare = RobotModel.from_robot("panda")
    loaded = bare.with_payload(Payload(2.0, (0.0, 0.0, 0.08), (4e-3, 0.0, 0.0, 4e-3, 0.0, 2e-3)))
    learner = Doomed(7, DoomedConfig(learning_rate=0.05))
    adapter = DoomedAdapter(learner, bare)
    q = np.array([0.0, -0.3, 0.0, -1.8, 0.0, 1.5, 0.785])
    for k in range(50):
        adapter.on_command(k * 1_000_000, np.ones(7))
        adapter.on_state(k * 1_000_000, q, np.zeros(7))
    assert np.all(learner.offset > 0)
    adapter.set_inertia_model(loaded)
    assert adapter.model is loaded and np.all(learner.offset == 0) and np.all(learner.w == 0)
    assert adapter.on_state(50_000_000, q, np.zeros(7)) is not None  # paired with the command stamped 49 ms
    step = learner.offset.copy()  # first update from zero: proportional to the step scale M_jj
    np.testing.assert_allclose(step / step[0], np.diag(loaded.mass_matrix(q)) / loaded.mass_matrix(q)[0, 0])
    learner.freeze("frozen by ~/freeze")
    adapter.set_inertia_model(bare)
    assert learner.frozen and learner.freeze_reason == "frozen by ~/freeze" and np.all(learner.offset == 0)


def test_a_forgetting_factor_that_wipes_or_flips_the_integrator_is_refused():
    """u decays by learning_rate x forgetting per tick: at 1 it is wiped every tick (the offset stayed at 0.1 of
    2 Nm), above 1 it flips sign every tick (the offset chattered at the limit until the detector froze it)."""
    Doomed(1, DoomedConfig(learning_rate=0.05, forgetting=19.0))
    for forgetting in (20.0, 60.0, 1000.0):
        with pytest.raises(ValueError, match="learning_rate x forgetting must be < 1"):
            Doomed(1, DoomedConfig(learning_rate=0.05, forgetting=forgetting))
    with pytest.raises(ValueError, match=r"0\.05 \(0\.1 per tick at 500 Hz\) x 10"):  # per tick at the actual rate
        Doomed(1, DoomedConfig(learning_rate=0.05, rate_hz=500.0, forgetting=10.0))
    learner = Doomed(1, DoomedConfig(learning_rate=0.05, forgetting=10.0))
    with pytest.raises(ValueError, match="learning_rate x forgetting"):
        learner.set_learning_rate(0.1)
    assert learner.learning_rate == pytest.approx(0.05)


def test_a_new_controller_model_starts_the_learner_over_and_keeps_a_freeze():
    adapter = DoomedAdapter(Doomed(2, DoomedConfig(rate_hz=1000.0)), inertia_scaled=False)
    assert adapter.on_controller_model("a.onnx:1") is None  # the first report only records it
    adapter.learner.offset[:] = 1.0
    assert adapter.on_controller_model("a.onnx:1") is None
    assert np.all(adapter.learner.offset == 1.0)
    adapter.learner.freeze("asked")
    assert adapter.on_controller_model("b.onnx:2") == "a.onnx:1"
    assert np.all(adapter.learner.offset == 0.0) and adapter.learner.freeze_reason == "asked"


def test_the_learners_defaults_are_the_nodes():
    """DoomedConfig defaulted to eta 0.02 while the node runs 0.05: code built on the learner alone ran another
    DOOMED than users get."""
    import dataclasses

    from idyn_ros.parameters import DoomedParams

    node, learner = DoomedParams(), DoomedConfig()
    differ = {f.name: (getattr(learner, f.name), getattr(node, f.name)) for f in dataclasses.fields(learner)
              if hasattr(node, f.name) and f.name != "offset_limit"  # the node's: 15 % of the arm's effort limit
              and getattr(learner, f.name) != getattr(node, f.name)}
    assert not differ


def test_linear_features_are_the_friction_models_smooth_coulomb():
    from idyn_ros.control.doomed import linear_features

    q, dq = np.array([0.1, -0.2]), np.array([0.01, -0.5])
    out = linear_features(q, dq, np.zeros((2, 5)))
    np.testing.assert_allclose(out, np.column_stack([np.ones(2), np.sin(q), np.cos(q), dq, np.tanh(dq / 0.02)]))
