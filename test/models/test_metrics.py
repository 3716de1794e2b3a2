"""nMSE has one definition (models.metrics.nmse); every place that reports it agrees with it."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.models import identification as ident
from idyn_ros.models.metrics import nmse, nmse_percent, speed_coverage, speed_warning, torque_metrics


def test_every_nmse_in_the_package_is_the_same_number(iiwa, synth):
    rng = np.random.default_rng(0)
    tau = synth[0].tau
    pred = tau + rng.normal(0.0, 0.3, tau.shape)
    expected = ((pred - tau) ** 2).mean(0) / tau.var(0)
    np.testing.assert_allclose(nmse(pred, tau), expected, rtol=1e-12)
    np.testing.assert_allclose(torque_metrics(pred, tau)["nmse"], expected, rtol=1e-12)
    np.testing.assert_allclose(nmse_percent(pred, tau), 100 * expected, rtol=1e-12)
    from idyn_ros.models.gp import train as gp_train

    assert gp_train.nmse_percent is nmse_percent  # the GP code reports through the same function
    res = ident.identify(iiwa.pin_model, [synth[0]], "ols", ("coulomb", "viscous"))
    np.testing.assert_allclose(res.info["train_nmse"], nmse(res.predict(iiwa.pin_model, synth[0]), tau), rtol=1e-9)


def test_constant_joint_has_no_nmse_and_is_left_out_of_the_mean():
    """Zero-variance rule: NaN with a warning (the old 1e-12 floor reported 1e12-scale numbers)."""
    t = np.linspace(0, 1, 200)
    tau = np.stack([np.sin(6 * t), np.full_like(t, 12.5), np.zeros_like(t)], 1)
    pred = tau + 0.1
    with pytest.warns(RuntimeWarning, match=r"column\(s\) \[1, 2\].*constant"):
        m = torque_metrics(pred, tau)
    assert np.isfinite(m["nmse"][0]) and np.isnan(m["nmse"][1]) and np.isnan(m["nmse"][2])
    assert m["nmse_mean"] == pytest.approx(m["nmse"][0]) and m["nmse_max"] == pytest.approx(m["nmse"][0])
    # a small but real variation is a signal, not a constant
    assert np.isfinite(nmse(pred[:, 0] * 1e-3, tau[:, 0] * 1e-3)).all()


def test_speed_coverage_names_the_joints_beyond_the_held_speed():
    """A recording faster than the training data is flagged per joint; one within it is not."""
    from types import SimpleNamespace

    t = np.linspace(0, 1, 101)
    rec = SimpleNamespace(dq=np.stack([np.sin(2 * np.pi * t), 0.5 * np.sin(2 * np.pi * t)], 1))
    cov = speed_coverage([0.5, 1.0], [rec])
    np.testing.assert_allclose(cov["ratio"], [2.0, 0.5], atol=1e-3)
    assert 0.3 < cov["share_beyond"] < 0.8
    message = speed_warning("the test data", cov, ["a", "b"])
    assert message is not None and "a 2.0x" in message and "b " not in message
    assert speed_warning("the test data", speed_coverage([1.0, 1.0], [rec]), ["a", "b"]) is None


def test_speed_coverage_of_a_joint_that_never_moved_in_training_has_no_ratio():
    """A training range of 0 rad/s gave `idyn train` and `idyn evaluate` "panda_joint7 1101809059.4x its largest
    speed" (the runtime already said it without a ratio)."""
    from types import SimpleNamespace

    rec = SimpleNamespace(dq=np.array([[0.1, 0.0], [-0.2, 0.0]]))
    cov = speed_coverage([0.0, 0.0], [rec])
    assert cov["ratio"] == [np.inf, 0.0] and cov["share_beyond"] == 1.0
    message = speed_warning("the test data", cov, ["a", "b"])
    assert "a beyond a training range of 0 rad/s" in message and "x its largest speed" not in message
