"""Faults a user found in the controller's inputs and parameters: each test reproduces one and checks the observable
outcome (the command of the same tick, what the parameter service answers, what /diagnostics says).

The core (``Controller``) is what the node runs tick by tick (test/nodes/test_controller_equivalence.py), so most
faults are injected there; parameter services go through a real node.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from idyn_ros.control.controller import MODE_ACTIVE, MODE_SAFE_DAMPING, Controller
from idyn_ros.errors import ParameterError
from idyn_ros.parameters import load

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
NOW = 1_700_000_000_000_000_000  # a wall-clock-like time, ns


def _core(**overrides) -> Controller:
    return Controller.for_robot(load("controller", "panda", overrides=overrides, n=7))


def _tick(c, k, q=Q0, names=PANDA, clock_ahead=0):
    """State k, stamped on the robot's clock; the controller's clock is ``clock_ahead`` ns ahead of it."""
    t = NOW + k * 1_000_000
    return c.update(names, list(q), [0.0] * len(q), [], t, t + clock_ahead, t + clock_ahead)


def _at_the_held_pose(c) -> None:
    """The first reference after activation, at the pose held (else it is blended in from there): later ones step."""
    c.set_reference(PANDA, Q0, np.zeros(7), np.zeros(7))


def _safe(c, q=Q0):
    return c.robot.gravity(q) - c.safe_damping * 0.0


def test_a_joint_named_twice_is_refused_in_the_same_tick():
    c = _core(torque_rate_limit=-1.0)
    c.activate()
    for k in range(5):
        _tick(c, k)
    names = [*PANDA[:6], PANDA[0]]  # panda_joint7 missing, panda_joint1 twice (the old code took the duplicate)
    tau = _tick(c, 5, q=[*Q0[:6], 0.3], names=names)
    np.testing.assert_allclose(tau, _safe(c))
    assert c.mode == MODE_SAFE_DAMPING and "named twice" in c.reason and c.watchdog.latched


def test_an_old_but_increasing_stamp_is_late_input_by_default_and_the_law_comes_back():
    c = _core(torque_rate_limit=-1.0)
    c.activate()
    for k in range(5):
        _tick(c, k)
    hour = 3600 * 1_000_000_000  # from here on the stamps still increase, but an hour behind the clock
    tau = _tick(c, 5, clock_ahead=hour)
    np.testing.assert_allclose(tau, _safe(c))
    assert c.mode == MODE_SAFE_DAMPING and "stamp 3600000.00 ms old" in c.reason and not c.watchdog.latched
    for k in range(6, 50):
        _tick(c, k, clock_ahead=hour)
    assert c.mode == MODE_SAFE_DAMPING  # as long as the stamps are old
    modes = [(_tick(c, k), c.mode)[1] for k in range(50, 50 + c.params.recovery_ticks)]
    assert modes[-1] == MODE_ACTIVE and modes[-2] == MODE_SAFE_DAMPING  # after recovery_ticks fresh samples


def test_a_silent_input_recovers_with_a_ramp_instead_of_latching_forever():
    """--clock realtime: the first ~20 ms input gap latched safe damping for the whole run."""
    c = _core(torque_rate_limit=-1.0, recovery_ramp=0.005)
    c.activate()
    c.set_reference(PANDA, Q0 + 0.02, np.zeros(7), np.zeros(7))  # the law's torque differs from the safe one
    ticks = 300  # the reference is blended in from the held pose first (activation), then held
    for k in range(ticks):
        law = _tick(c, k).copy()
    gap = 30  # ms without a state (> stale_periods 3)
    safe = c.check_input(NOW + (ticks - 1 + gap) * 1_000_000)
    np.testing.assert_allclose(safe, _safe(c))
    assert c.mode == MODE_SAFE_DAMPING and "stale joint state" in c.reason
    taus = [_tick(c, k).copy() for k in range(ticks + gap, ticks + gap + c.params.recovery_ticks + 6)]
    n = c.params.recovery_ticks
    for tau in taus[: n - 1]:
        np.testing.assert_allclose(tau, _safe(c))  # still safe until recovery_ticks fresh ticks
    blend = np.array(taus[n - 1 : n + 5])  # then blended from the safe torque to the law's within 5 ms
    assert np.all(np.abs(np.diff(blend, axis=0)).max(axis=1) < np.abs(law - _safe(c)).max())
    np.testing.assert_allclose(taus[-1], law, atol=1e-9)
    assert c.mode == MODE_ACTIVE and c.watchdog.recoveries == 1


def test_the_start_up_warm_up_is_not_input_silence():
    """Over DDS the first state's model warm-up let a braked lockstep plant advance sim time: stale at every start."""
    c = _core(torque_rate_limit=-1.0)
    c.activate()
    _tick(c, 0)  # the hold starts here (the feedforward warm-up runs in this tick)
    assert c.check_input(NOW + 5 * 1_000_000) is None and c.mode == MODE_ACTIVE  # 5 ms passed during the warm-up
    _tick(c, 6)
    assert c.check_input(NOW + 7 * 1_000_000) is None
    np.testing.assert_allclose(c.check_input(NOW + 11 * 1_000_000), _safe(c))  # silence after that still counts
    assert "stale joint state" in c.reason


def test_torque_rate_limit_changed_at_run_time_takes_effect():
    c = _core(torque_rate_limit=1000.0)
    c.activate()
    _tick(c, 0)
    _at_the_held_pose(c)
    c.set_reference(PANDA, Q0 + 0.2, np.zeros(7), np.zeros(7))  # a step: the limiter decides each step
    prev = _tick(c, 1).copy()
    assert np.abs(_tick(c, 2) - prev).max() == pytest.approx(1.0)  # 1000 Nm/s at 1 kHz
    c.set_params(c.params.replace(7, torque_rate_limit=200.0))
    prev = c.tau.copy()
    assert np.abs(_tick(c, 3) - prev).max() == pytest.approx(0.2)  # the old code kept 1 Nm per tick


def test_gains_that_can_only_chatter_are_refused():
    with pytest.raises(ParameterError, match=r"Kd\*T = 0\.63 > 0\.5"):
        _core(**{"presets.medium.kp": [1e5] * 7})
    c = _core()
    with pytest.raises(ParameterError, match=r"presets\.stiff\.kp"):
        c.set_params(c.params.replace(7, **{"presets.stiff.kp": [1e5] * 7}))
    assert c.params.preset_kp("stiff", 7)[0] == 400.0  # refused: nothing changed


def test_commands_stuck_at_the_effort_limits_are_reported_then_go_safe():
    c = _core(torque_rate_limit=-1.0, saturation_timeout=0.1, **{"presets.stiff.kp": [6e4] * 7},
              gain_preset="stiff")
    c.activate()
    _tick(c, 0)
    _at_the_held_pose(c)
    c.set_reference(PANDA, Q0 + 0.5, np.zeros(7), np.zeros(7))
    for k in range(1, 60):
        _tick(c, k)
    assert c.saturation_s >= 0.05 and c.mode == MODE_ACTIVE  # the node's diagnostics say WARN from 50 ms
    for k in range(60, 160):
        tau = _tick(c, k)
    assert c.mode == MODE_SAFE_DAMPING and "torque saturation" in c.reason and c.watchdog.latched
    np.testing.assert_allclose(tau, _safe(c))


@pytest.mark.ros
def test_the_node_refuses_chattering_gains_and_reports_saturation_on_diagnostics(rclpy_context):
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from idyn_ros.nodes.common import MONITOR
    from idyn_ros.nodes.controller import ControllerNode

    node = ControllerNode(context=rclpy_context, parameter_overrides=[
        Parameter("diagnostics_period", value=0.05), Parameter("max_stamp_age", value=0.0),
        Parameter("stale_periods", value=1e5)])  # the test drives the core itself, with pauses
    res = node.set_parameters([Parameter("presets.medium.kp", value=[1e5] * 7)])[0]
    assert not res.successful and "chatter" in res.reason
    res = node.set_parameters([Parameter("torque_rate_limit", value=200.0)])[0]
    assert res.successful and node.core.limiter.max_step == pytest.approx(0.2)
    probe = rclpy.create_node("diag_probe", context=rclpy_context)
    seen: list[tuple[int, str]] = []
    probe.create_subscription(DiagnosticArray, "/diagnostics", lambda m: seen.extend(
        (s.level[0], s.message) for s in m.status if "controller" in s.name), MONITOR)
    exe = SingleThreadedExecutor(context=rclpy_context)
    exe.add_node(node)
    exe.add_node(probe)
    assert node.set_parameters([Parameter("torque_rate_limit", value=-1.0),
                                Parameter("saturation_timeout", value=0.1)])[0].successful
    msg = JointState(name=PANDA, position=list(Q0), velocity=[0.0] * 7)
    for k in range(200):  # a saturating step, through the node's own /joint_states callback
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod((k + 1) * 1_000_000, 1_000_000_000)
        node._on_joint_state(msg)
        if k == 1:
            _at_the_held_pose(node.core)
            node.core.set_reference(PANDA, Q0 + 3.0, np.zeros(7), np.zeros(7))
        if k in (80, 199):
            end = time.monotonic() + 0.3
            while time.monotonic() < end:
                exe.spin_once(timeout_sec=0.01)
    assert any(level == 1 and "effort limit" in m for level, m in seen), seen  # WARN while at the limits
    assert any(level == 2 and "torque saturation" in m for level, m in seen), seen  # then ERROR, safe mode
    probe.destroy_node()
    node.destroy_node()


def _moving(c, ticks=20, speed=1.0):
    """Ticks with joint 1 turning at ``speed`` rad/s (the damping hold then has a -D dq term); the last q."""
    q = Q0.copy()
    for k in range(ticks):
        q[0] = speed * k * 1e-3
        t = NOW + k * 1_000_000
        c.update(PANDA, list(q), [speed, *[0.0] * 6], [], t, t, t)
    return q


def test_a_silent_joint_state_steps_the_command_to_the_hold_torque_and_leaves_it_there():
    """Silence after a moving tick sent one rate-limited step towards the safe torque and then nothing: the forward
    controller kept ~the law torque applied for good. Now each period steps on until the command is the hold torque
    (gravity at the last pose, no damping term from a stale velocity), then the check sends nothing more."""
    c = _core()
    c.activate()
    q = _moving(c)
    law = c.tau.copy()
    hold = c.robot.gravity(q)
    assert np.abs(law - hold).max() > 5.0  # far from the hold: one 1 Nm step does not get there
    sent, t = [], NOW + 19 * 1_000_000
    for k in range(1, 200):
        tau = c.check_input(t + k * 1_000_000)
        if tau is not None:
            sent.append(tau.copy())
    assert len(sent) > 5 and c.mode == MODE_SAFE_DAMPING and "stale joint state" in c.reason
    steps = np.abs(np.diff([law, *sent], axis=0)).max(axis=1)
    assert steps.max() <= 1000.0 * 1e-3 + 1e-9  # rate-limited on the way
    np.testing.assert_allclose(sent[-1], hold, atol=1e-9)
    _tick(c, 300, q=q)  # states again: the controller commands from them (safe until recovered)
    assert c.filter.samples > 0 and c.check_input(NOW + 301 * 1_000_000) is None


def test_stopping_a_moving_arm_leaves_the_gravity_hold_not_a_frozen_damping_push():
    """Deactivating at 1 rad/s left g(q) - D dq applied: -8.7 Nm on joint 1 that pushed the stopped arm on."""
    c = _core()
    c.activate()
    q = _moving(c)
    np.testing.assert_allclose(c.stop(), c.robot.gravity(q), atol=1e-9)


def test_an_error_inside_a_tick_latches_safe_mode_with_the_hold_torque():
    c = _core()
    c.activate()
    q = _moving(c)
    tau = c.fail("internal error in the tick: ValueError: boom")
    np.testing.assert_allclose(tau, c.robot.gravity(q), atol=1e-9)
    assert c.mode == MODE_SAFE_DAMPING and c.watchdog.latched and "boom" in c.reason
    c.safe_damping = np.ones(3)  # even with what the error broke (a wrong-length damping), the hold still comes
    np.testing.assert_allclose(c.fail("again"), c.robot.gravity(q), atol=1e-9)
    fresh = _core()
    assert fresh.fail("before any command") is None


@pytest.mark.parametrize("override", [{"presets.medium.kp": [50.0] * 6}, {"safe_damping": [1.0] * 6}])
def test_per_joint_parameters_of_another_arm_are_refused_before_they_reach_a_tick(override):
    """A 6-joint (UR5) kp or damping on the 7-joint Panda passed the node's configure (it did not know n yet) and
    raised in the first tick (kp) or in the safe hold itself (damping, on the first bad sample)."""
    params = load("controller", "panda", overrides=override)  # as the node reads them: n unknown
    with pytest.raises(ParameterError, match="7 joints"):
        Controller.for_robot(params)
    c = _core()
    assert "7 joints" in c.check_params(params)


def test_while_the_law_is_blended_back_in_the_state_says_so_and_keeps_the_laws_feedback():
    """The recovery ramp zeroed tau_feedback and acceleration_command while reporting ACTIVE with no reason, so DOOMED
    learned e = 0 - ddq from every ramp tick."""
    from idyn_ros.control.controller import RECOVERING

    c = _core(torque_rate_limit=-1.0, recovery_ticks=2, recovery_ramp=0.005)
    c.activate()
    for k in range(5):
        _tick(c, k)  # the hold pose
    c.check_input(NOW + 30 * 1_000_000)  # silence: late input
    assert c.watchdog.tripped
    seen = []
    for k in range(31, 45):
        _tick(c, k, q=Q0 + 0.01)  # away from the hold pose: the law has feedback
        seen.append((c.mode, c.reason, np.abs(c.acceleration_command).max(), np.abs(c.tau_fb).max()))
    ramp = [s for s in seen if s[0] == MODE_ACTIVE and s[1] == RECOVERING]
    assert len(ramp) == 4 and all(acc > 0 and fb > 0 for _, _, acc, fb in ramp)  # alpha 0.2 .. 0.8; 1.0 steady
    assert seen[-1][:2] == (MODE_ACTIVE, "")  # steady again


def test_stale_periods_set_at_run_time_reaches_the_state_filter_too():
    """The watchdog took a new stale_periods, the state filter kept restarting after the old gap."""
    c = _core(stale_periods=3)
    assert c.filter.max_gap_ns == c.watchdog.stale_ns == 3_000_000
    c.set_params(c.params.replace(stale_periods=10))
    assert c.filter.max_gap_ns == c.watchdog.stale_ns == 10_000_000
