"""Filters: analytic phase lag == measured lag on a sinusoid; offline derivatives; no allocation per update."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from idyn_ros.data.filters import (
    BackwardDifference,
    ButterworthLowPass,
    FirstOrderLowPass,
    PolynomialDifferentiator,
    apply_online,
    butter_filtfilt,
    estimate_derivatives,
    lag_table,
    savgol_derivative,
)

RATE = 1000.0


def _measured_phase_deg(y: np.ndarray, t: np.ndarray, f: float) -> float:
    """Phase (deg) of the sinusoid at f in y, by least squares on sin/cos."""
    A = np.stack([np.sin(2 * np.pi * f * t), np.cos(2 * np.pi * f * t)], axis=1)
    (s, c), *_ = np.linalg.lstsq(A, y, rcond=None)
    return math.degrees(math.atan2(c, s))


FILTERS = [
    lambda: FirstOrderLowPass(1, RATE, 50.0),
    lambda: ButterworthLowPass(1, RATE, 100.0),
    lambda: BackwardDifference(1, RATE, 100.0),
    lambda: PolynomialDifferentiator(1, RATE, 15, 2),
    lambda: PolynomialDifferentiator(1, RATE, 31, 3, deriv=2),
]


@pytest.mark.parametrize("make", FILTERS)
@pytest.mark.parametrize("f", [2.0, 10.0, 40.0])
def test_phase_lag_matches_measured_sinusoid(make, f: float) -> None:
    filt = make()
    t = np.arange(int(3 * RATE)) / RATE
    x = np.sin(2 * np.pi * f * t)
    y = apply_online(filt, x[:, None])[:, 0]
    keep = t > 1.0  # after the transient
    measured_lag = filt.ideal_phase_deg - _measured_phase_deg(y[keep], t[keep], f)
    measured_lag = (measured_lag + 180) % 360 - 180
    assert measured_lag == pytest.approx(filt.phase_lag_deg(f), abs=0.05)


def test_documented_lag_table_is_current() -> None:
    table = lag_table()
    assert table["FirstOrderLowPass(50 Hz)"] == [0.98, 9.6, 36.47]
    assert table["BackwardDifference(100 Hz)"] == [0.59, 5.9, 27.5]
    assert FirstOrderLowPass(1, RATE, 50.0).delay_s(10.0) == pytest.approx(9.6 / 360 / 10, rel=1e-2)


def test_differentiators_are_exact_on_low_order_polynomials() -> None:
    t = np.arange(200) / RATE
    x = 1.0 + 2.0 * t - 3.0 * t**2
    poly = PolynomialDifferentiator(1, RATE, 11, 2)
    y = apply_online(poly, x[:, None])[:, 0]
    np.testing.assert_allclose(y[20:], 2.0 - 6.0 * t[20:], atol=1e-8)
    acc = apply_online(PolynomialDifferentiator(1, RATE, 11, 2, deriv=2), x[:, None])[:, 0]
    np.testing.assert_allclose(acc[20:], -6.0, atol=1e-6)


@pytest.mark.parametrize("make", FILTERS)
def test_update_does_not_allocate(make) -> None:
    filt = make()
    x = np.ones(1) * 0.3
    out = filt.update(x)
    for _ in range(10):
        assert filt.update(x) is out  # same preallocated output array
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(1000):
        filt.update(x)
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename") if s.size_diff > 0)
    assert grown < 4096  # no per-call growth (1000 calls would allocate >= 100 kB)


def test_offline_zero_phase_and_derivatives() -> None:
    dt = 1e-3
    t = np.arange(2000) * dt
    q = np.sin(2 * np.pi * 1.0 * t)[:, None]
    noisy = q + 1e-4 * np.random.default_rng(0).normal(size=q.shape)
    smooth = butter_filtfilt(noisy, 1 / dt, 20.0)
    assert abs(_measured_phase_deg(smooth[300:-300, 0], t[300:-300], 1.0) - 0.0) < 0.05  # zero phase
    dq_true = 2 * np.pi * np.cos(2 * np.pi * t)[:, None]
    ddq_true = -((2 * np.pi) ** 2) * np.sin(2 * np.pi * t)[:, None]
    for method, kw in (("savgol", {}), ("butter", {"cutoff_hz": 20.0}), ("spline", {})):
        dq, ddq = estimate_derivatives(q, dt, method=method, **kw)
        np.testing.assert_allclose(dq[50:-50], dq_true[50:-50], atol=2e-3 * 2 * np.pi)
        np.testing.assert_allclose(ddq[50:-50], ddq_true[50:-50], atol=0.02 * (2 * np.pi) ** 2)
    np.testing.assert_allclose(savgol_derivative(q, dt)[50:-50], dq_true[50:-50], atol=1e-3)


def test_online_layers_do_not_import_torch_or_scipy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, idyn_ros.nodes.recorder, idyn_ros.data.filters as f, idyn_ros.data.bag as b;"
        "f.FirstOrderLowPass(3, 1000.0, 50.0).update([0.0, 1.0, 2.0]);"
        "print('torch' in sys.modules, 'scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]
