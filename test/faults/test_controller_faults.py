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
    for k in range(20):
        law = _tick(c, k).copy()
    gap = 30  # ms without a state (> stale_periods 3)
    safe = c.check_input(NOW + (19 + gap) * 1_000_000)
    np.testing.assert_allclose(safe, _safe(c))
    assert c.mode == MODE_SAFE_DAMPING and "stale joint state" in c.reason
    taus = [_tick(c, k).copy() for k in range(20 + gap, 20 + gap + c.params.recovery_ticks + 6)]
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
            node.core.set_reference(PANDA, Q0 + 3.0, np.zeros(7), np.zeros(7))
        if k in (80, 199):
            end = time.monotonic() + 0.3
            while time.monotonic() < end:
                exe.spin_once(timeout_sec=0.01)
    assert any(level == 1 and "effort limit" in m for level, m in seen), seen  # WARN while at the limits
    assert any(level == 2 and "torque saturation" in m for level, m in seen), seen  # then ERROR, safe mode
    probe.destroy_node()
    node.destroy_node()
