"""Untrusted input to the controller core and its reference sources, without ROS: a reference or a payload it does
not trust gives a safe command and changes nothing, never a NaN or a push into a joint's end stop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from idyn_ros.control import reference
from idyn_ros.control.controller import MODE_ACTIVE, MODE_SAFE_DAMPING, Controller
from idyn_ros.control.watchdog import Watchdog
from idyn_ros.errors import DatasetError, ParameterError
from idyn_ros.parameters import load
from idyn_ros.robots.spec import Payload

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
NOW = 1_700_000_000_000_000_000


def _core() -> Controller:
    c = Controller.for_robot(load("controller", "panda", overrides={"torque_rate_limit": -1.0}, n=7))
    c.activate()
    return c


def _tick(c, k):
    t = NOW + k * 1_000_000
    tau = c.update(PANDA, Q0.tolist(), [0.0] * 7, [], t, t, t)
    return None if tau is None else tau.copy()


def _running(reference_q=Q0) -> Controller:
    c = _core()
    assert c.set_reference(PANDA, list(reference_q), [0.1] * 7, [0.2] * 7)
    for k in range(3):
        _tick(c, k)
    assert c.mode == MODE_ACTIVE, c.reason
    return c


@pytest.mark.parametrize("field", ["q_d", "dq_d", "ddq_d"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_reference_goes_safe_and_keeps_the_last_trusted_reference(field, bad):
    """The NaN was copied into q_d (ControllerState's position error went NaN, the embedded model stepped on it)."""
    c = _running()
    before = c.q_d.copy(), c.dq_d.copy(), c.ddq_d.copy()
    arrays = {"q_d": Q0.tolist(), "dq_d": [0.0] * 7, "ddq_d": [0.0] * 7}
    arrays[field][3] = bad
    assert not c.set_reference(PANDA, arrays["q_d"], arrays["dq_d"], arrays["ddq_d"])
    tau = _tick(c, 5)
    assert c.mode == MODE_SAFE_DAMPING and f"non-finite reference {field}" in c.reason
    np.testing.assert_allclose(tau, c.robot.gravity(Q0))  # the safe hold at rest
    for kept, was in zip((c.q_d, c.dq_d, c.ddq_d), before, strict=True):
        np.testing.assert_array_equal(kept, was)


def test_a_reference_whose_arrays_do_not_match_its_names_changes_nothing():
    """q_d was overwritten before the short velocity array was noticed."""
    c = _running()
    assert not c.set_reference(PANDA, (Q0 + 0.3).tolist(), [0.0] * 6, [0.0] * 7)
    np.testing.assert_array_equal(c.q_d, Q0)
    assert "do not match" in c.reason
    np.testing.assert_allclose(_tick(c, 5), c.robot.gravity(Q0))


@pytest.mark.parametrize("beyond", [1.0, 1e300])
def test_a_reference_beyond_a_joint_limit_is_held_at_the_limit_at_rest(beyond):
    """q_d = upper + 1 rad (or 1e300) drove the joint into its end stop at full effort (1e300: every joint at its
    effort limit through M(q)) until the saturation timeout."""
    c = _running()
    upper = c.robot.upper[0]
    q = Q0.copy()
    q[0] = upper + beyond
    assert c.set_reference(PANDA, q.tolist(), [0.5] * 7, [1.0] * 7)
    assert c.q_d[0] == upper and c.dq_d[0] == 0.0 and c.ddq_d[0] == 0.0
    np.testing.assert_array_equal(c.q_d[1:], Q0[1:])
    assert c.dq_d[1] == 0.5 and c.reference_clipped == 1
    tau = _tick(c, 5)
    at_limit = _running()  # the same reference with the position exactly at the limit
    q[0] = upper
    dq, ddq = np.full(7, 0.5), np.ones(7)
    dq[0] = ddq[0] = 0.0
    at_limit.set_reference(PANDA, q.tolist(), dq.tolist(), ddq.tolist())
    np.testing.assert_allclose(tau, _tick(at_limit, 5))
    assert c.mode == MODE_ACTIVE and np.all(np.abs(tau) < c.limiter.limit_near)


def test_finite_values_whose_sum_overflows_are_not_called_non_finite():
    """1e308 on every joint tripped "non-finite ...: indices []" (the sum overflowed)."""
    wd = Watchdog(1e-3)
    with np.errstate(over="ignore"):
        assert wd.check_finite("reference dq_d", np.full(7, 1e308))
        assert not wd.tripped
        assert not wd.check_finite("reference dq_d", np.array([1e308, math.nan]))
    assert wd.reason == "non-finite reference dq_d: indices [1]"


@pytest.mark.parametrize("absurd", [Payload(1e300), Payload(1.0, (1e300, 0.0, 0.0)),
                                    Payload(1.0, inertia=(1e300, 0.0, 0.0, 1e300, 0.0, 1e300))],
                         ids=["mass", "com", "inertia"])
def test_a_payload_no_arm_carries_is_refused_and_changes_nothing(absurd):
    """A CoM 1e300 m away made the command (and the safe hold) NaN; 1e300 kg put every joint at its effort limit."""
    c = _running()
    tool = Payload(1.0, (0.0, 0.0, 0.1))
    c.set_payload(tool)
    models = c.feedback_model, c._hold_model
    with pytest.raises(ParameterError, match="payload"):
        c.set_payload(absurd)
    assert c.payload == tool and (c.feedback_model, c._hold_model) == models
    tau = _tick(c, 5)
    assert np.all(np.isfinite(tau)) and c.mode == MODE_ACTIVE and np.all(np.abs(tau) < c.limiter.limit_near)


def test_a_joint_trajectory_with_a_nan_is_refused():
    """A NaN position of a JointTrajectory point became the published reference."""
    with pytest.raises(DatasetError, match="non-finite"):
        reference.from_joint_trajectory_points([0.5], [[math.nan, 0.0]], None, None, np.zeros(2))
    with pytest.raises(DatasetError, match="non-finite"):
        reference.from_joint_trajectory_points([0.5, 1.0], [[0.0, 0.0], [0.1, 0.1]], [[0.0, 0.0], [math.inf, 0.0]],
                                               None, np.zeros(2))
    assert reference.limits_problem(np.array([[0.0, 0.5], [0.0, 2.0]]), ["a", "b"], np.full(2, -1.0),
                                    np.full(2, 1.0)) == "b = 2 rad is outside its limits [-1, 1]"
