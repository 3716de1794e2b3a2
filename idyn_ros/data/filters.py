"""Filters and differentiators: zero-phase offline ones for training data, causal online ones for nodes.

Why both: training labels are cleanest with zero-phase filtering (filtfilt, Savitzky-Golay), but
a 1 kHz node can only use the past, and every causal filter delays the signal. The delay is what
the controller sees, so each online filter exposes its exact phase lag at any frequency,
computed from its transfer function H(z) (``phase_lag_deg``) and tested against a measured
sinusoid (test/data/test_filters.py). If a model is trained on zero-phase features but run on
causal ones, the lag is a distribution shift: reprocess training data with the same online
filter (``apply_online``) when that matters (Callar 2021 summary, open question 2).

Online filters use numpy only (importable by runtime/, control/, nodes/), preallocate their
state in ``__init__`` and do no array allocation in ``update`` (all ufuncs write ``out=``).

Phase lag at 1 kHz, numbers from ``phase_lag_deg`` (reproduce with
``python -c "from idyn_ros.data.filters import lag_table; print(lag_table())"``):

==========================================  ======  =======  =======
filter (rate 1 kHz)                          1 Hz    10 Hz    50 Hz
==========================================  ======  =======  =======
FirstOrderLowPass(cutoff 50 Hz)              0.98    9.60     36.47
ButterworthLowPass(cutoff 100 Hz, order 2)   0.78    7.86     42.12
BackwardDifference(cutoff 100 Hz)            0.59    5.90     27.50
PolynomialDifferentiator(k=15, p=2)          0.00    1.32     56.53
==========================================  ======  =======  =======

(degrees behind the ideal output: the input for low-passes, the exact derivative for
differentiators).
"""

from __future__ import annotations

import math

import numpy as np

from idyn_ros.errors import ParameterError

__all__ = [
    "BackwardDifference",
    "ButterworthLowPass",
    "FirstOrderLowPass",
    "PolynomialDifferentiator",
    "apply_online",
    "butter_filtfilt",
    "central_difference",
    "estimate_derivatives",
    "lag_table",
    "savgol_derivative",
    "savgol_smooth",
    "spline_derivative",
]


# ===================================================================================== offline
def butter_filtfilt(x: np.ndarray, rate_hz: float, cutoff_hz: float, order: int = 2) -> np.ndarray:
    """Zero-phase Butterworth low-pass along axis 0 (forward-backward, doubled order, 0 lag).

    Args:
        x: (N, ...) samples at ``rate_hz``.
        rate_hz: sample rate (Hz). cutoff_hz: -3 dB of the single pass (Hz), below rate/2.
    """
    from scipy.signal import butter, sosfiltfilt

    _check_cutoff(cutoff_hz, rate_hz)
    sos = butter(order, cutoff_hz, fs=rate_hz, output="sos")
    padlen = min(3 * (2 * len(sos) + 1), x.shape[0] - 1)
    return sosfiltfilt(sos, x, axis=0, padlen=padlen)


def _window(window: int | None, n: int, polyorder: int) -> int:
    w = window if window is not None else 2 * max(polyorder, 1) + 7
    w = min(w, n if n % 2 else n - 1)
    if w % 2 == 0:
        w -= 1
    if w <= polyorder:
        raise ParameterError(f"Savitzky-Golay window {w} must exceed polyorder {polyorder} (need more samples)")
    return w


def savgol_smooth(x: np.ndarray, window: int | None = None, polyorder: int = 3) -> np.ndarray:
    """Zero-phase Savitzky-Golay smoothing along axis 0 (window in samples, odd)."""
    from scipy.signal import savgol_filter

    return savgol_filter(x, _window(window, x.shape[0], polyorder), polyorder, axis=0, mode="interp")


def savgol_derivative(
    x: np.ndarray, dt: float, order: int = 1, window: int | None = None, polyorder: int = 3
) -> np.ndarray:
    """Zero-phase Savitzky-Golay derivative of ``order`` along axis 0 (units of x per s^order).

    Args:
        dt: sample period (s). window: odd number of samples (default 2*polyorder + 7).
    """
    from scipy.signal import savgol_filter

    if x.shape[0] < 3:
        return np.gradient(x, dt, axis=0) if order == 1 and x.shape[0] > 1 else np.zeros_like(x)
    polyorder = min(polyorder, x.shape[0] - 2)
    w = _window(window, x.shape[0], max(polyorder, order))
    return savgol_filter(x, w, max(polyorder, order), deriv=order, delta=dt, axis=0, mode="interp")


def central_difference(x: np.ndarray, dt: float) -> np.ndarray:
    """Second-order central difference along axis 0 (one-sided at the ends)."""
    return np.gradient(x, dt, axis=0)


def spline_derivative(x: np.ndarray, t: np.ndarray, order: int = 1, smoothing: float | None = None) -> np.ndarray:
    """Derivative of a smoothing cubic spline through (t, x) per column (``smoothing`` as scipy's ``s``)."""
    from scipy.interpolate import UnivariateSpline, make_interp_spline

    x2 = x.reshape(x.shape[0], -1)
    out = np.empty_like(x2)
    for c in range(x2.shape[1]):
        if smoothing is None:
            spline = make_interp_spline(t, x2[:, c], k=5 if order > 1 else 3)
        else:
            spline = UnivariateSpline(t, x2[:, c], k=5 if order > 1 else 3, s=smoothing)
        out[:, c] = spline.derivative(order)(t)
    return out.reshape(x.shape)


def estimate_derivatives(
    q: np.ndarray,
    dt: float,
    dq: np.ndarray | None = None,
    method: str = "savgol",
    cutoff_hz: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Offline (zero-phase) velocity and acceleration from position and/or velocity.

    Args:
        q: (N, n) rad. dt: period (s). dq: measured (N, n) rad/s; if given, ddq differentiates it
            (one derivative less of noise amplification) and it is returned filtered.
        method: ``savgol`` (window 2p+7), ``spline`` (interpolating quintic), or ``butter``
            (filtfilt Butterworth at ``cutoff_hz``, then central differences, as in Callar 2021 §4.1).
    Returns:
        (dq, ddq), rad/s and rad/s^2.
    """
    if method == "savgol":
        if dq is None:
            return savgol_derivative(q, dt, 1), savgol_derivative(q, dt, 2, polyorder=4)
        return savgol_smooth(dq), savgol_derivative(dq, dt, 1)
    if method == "spline":
        t = np.arange(q.shape[0]) * dt
        base = q if dq is None else dq
        first = spline_derivative(base, t, 1)
        return (first, spline_derivative(base, t, 2)) if dq is None else (dq, first)
    if method == "butter":
        if cutoff_hz is None:
            raise ParameterError("method 'butter' needs cutoff_hz")
        rate = 1.0 / dt
        v = (
            butter_filtfilt(central_difference(q, dt), rate, cutoff_hz)
            if dq is None
            else butter_filtfilt(dq, rate, cutoff_hz)
        )
        return v, butter_filtfilt(central_difference(v, dt), rate, cutoff_hz)
    raise ParameterError(f"unknown differentiation method {method!r}: use savgol, spline or butter")


# ===================================================================================== online
def _check_cutoff(cutoff_hz: float, rate_hz: float) -> None:
    if not 0 < cutoff_hz < rate_hz / 2:
        raise ParameterError(f"cutoff {cutoff_hz} Hz must be in (0, {rate_hz / 2}) Hz (Nyquist at rate {rate_hz} Hz)")


class _OnlineFilter:
    """A causal LTI filter with numerator ``b`` and denominator ``a`` in z^-1 (for analysis)."""

    b: np.ndarray
    a: np.ndarray
    rate_hz: float
    ideal_phase_deg: float = 0.0  # phase of the ideal output relative to the input (+90 for d/dt)

    def response(self, f_hz: float) -> complex:
        """H(e^{j 2 pi f / rate}), the complex frequency response at ``f_hz``."""
        z_inv = np.exp(-2j * np.pi * f_hz / self.rate_hz) ** np.arange(max(len(self.b), len(self.a)))
        return complex(np.dot(self.b, z_inv[: len(self.b)]) / np.dot(self.a, z_inv[: len(self.a)]))

    def phase_lag_deg(self, f_hz: float) -> float:
        """Degrees the output lags the ideal output (input, or exact derivative) at ``f_hz``."""
        lag = self.ideal_phase_deg - math.degrees(np.angle(self.response(f_hz)))
        return float((lag + 180.0) % 360.0 - 180.0)

    def delay_s(self, f_hz: float) -> float:
        """Phase lag at ``f_hz`` expressed as a time delay (s)."""
        return self.phase_lag_deg(f_hz) / 360.0 / f_hz


def lowpass_alpha(cutoff_hz: float, rate_hz: float) -> float:
    """The step a of y += a (x - y) at ``rate_hz`` for a cutoff of ``cutoff_hz`` (0: no filter, a = 1)."""
    return 1.0 - math.exp(-2.0 * math.pi * cutoff_hz / rate_hz) if cutoff_hz > 0 else 1.0


class FirstOrderLowPass(_OnlineFilter):
    """y_k = y_{k-1} + a (x_k - y_{k-1}), a = 1 - exp(-2 pi fc / rate).

    H(z) = a / (1 - (1 - a) z^-1). Also the filter of franka_ros2's impedance example
    (``(1 - alpha) y + alpha x``), there with an unexplained alpha; here alpha comes from a cutoff.
    """

    def __init__(self, n: int, rate_hz: float, cutoff_hz: float) -> None:
        _check_cutoff(cutoff_hz, rate_hz)
        self.rate_hz = rate_hz
        self.alpha = lowpass_alpha(cutoff_hz, rate_hz)
        self.b = np.array([self.alpha])
        self.a = np.array([1.0, -(1.0 - self.alpha)])
        self.y = np.zeros(n)
        self._tmp = np.zeros(n)
        self._init = False

    def reset(self, x0: np.ndarray | None = None) -> None:
        """Restart from ``x0`` (or from the next input)."""
        if x0 is None:
            self._init = False
        else:
            self.y[:] = x0
            self._init = True

    def update(self, x: np.ndarray) -> np.ndarray:
        """Filter one sample (n,); returns the internal output array (copy it to keep it)."""
        if not self._init:
            self.y[:] = x
            self._init = True
            return self.y
        np.subtract(x, self.y, out=self._tmp)
        self._tmp *= self.alpha
        self.y += self._tmp
        return self.y


class ButterworthLowPass(_OnlineFilter):
    """Second-order Butterworth low-pass (bilinear transform with prewarping), direct form II transposed."""

    def __init__(self, n: int, rate_hz: float, cutoff_hz: float) -> None:
        _check_cutoff(cutoff_hz, rate_hz)
        self.rate_hz = rate_hz
        k = math.tan(math.pi * cutoff_hz / rate_hz)  # prewarped analog cutoff
        norm = 1.0 / (1.0 + math.sqrt(2.0) * k + k * k)
        b0 = k * k * norm
        self.b = np.array([b0, 2.0 * b0, b0])
        self.a = np.array([1.0, 2.0 * (k * k - 1.0) * norm, (1.0 - math.sqrt(2.0) * k + k * k) * norm])
        # Python floats for the per-sample path (unpacking the arrays would create numpy scalars each call)
        self._coef = (float(self.b[0]), float(self.b[1]), float(self.b[2]), float(self.a[1]), float(self.a[2]))
        self.s1 = np.zeros(n)
        self.s2 = np.zeros(n)
        self.y = np.zeros(n)
        self._tmp = np.zeros(n)
        self._init = False

    def reset(self, x0: np.ndarray | float | None = None) -> None:
        """Restart; with ``x0`` (array or scalar) the state (and ``y``) is the steady state for a constant x0."""
        self._init = False
        if x0 is not None:
            self._settle(np.asarray(x0, dtype=float))

    def _settle(self, x0: np.ndarray) -> None:
        _b0, b1, b2, a1, a2 = self._coef
        # steady state y = x0: s2 = (b2 - a2) x0, s1 = (b1 - a1) x0 + s2
        np.multiply(x0, b2 - a2, out=self.s2)
        np.multiply(x0, b1 - a1, out=self.s1)
        self.s1 += self.s2
        self.y[:] = x0
        self._init = True

    def update(self, x: np.ndarray) -> np.ndarray:
        """Filter one sample (n,); returns the internal output array."""
        if not self._init:
            self._settle(np.asarray(x, dtype=float))
        b0, b1, b2, a1, a2 = self._coef
        # y = b0 x + s1; s1 = b1 x - a1 y + s2; s2 = b2 x - a2 y
        np.multiply(x, b0, out=self.y)
        self.y += self.s1
        np.multiply(x, b1, out=self.s1)
        np.multiply(self.y, a1, out=self._tmp)
        self.s1 -= self._tmp
        self.s1 += self.s2
        np.multiply(x, b2, out=self.s2)
        np.multiply(self.y, a2, out=self._tmp)
        self.s2 -= self._tmp
        return self.y


class BackwardDifference(_OnlineFilter):
    """dx/dt ~ (x_k - x_{k-1}) rate, then a first-order low-pass at ``cutoff_hz``.

    H(z) = rate (1 - z^-1) a / (1 - (1 - a) z^-1); its lag behind the exact derivative is half a
    sample (pi f / rate rad) plus the low-pass lag.
    """

    ideal_phase_deg = 90.0

    def __init__(self, n: int, rate_hz: float, cutoff_hz: float) -> None:
        self.rate_hz = rate_hz
        self.lowpass = FirstOrderLowPass(n, rate_hz, cutoff_hz)
        a = self.lowpass.alpha
        self.b = np.array([rate_hz * a, -rate_hz * a])
        self.a = np.array([1.0, -(1.0 - a)])
        self.prev = np.zeros(n)
        self.raw = np.zeros(n)
        self._init = False

    def reset(self) -> None:
        self._init = False
        self.lowpass.reset(np.zeros_like(self.prev))

    def update(self, x: np.ndarray) -> np.ndarray:
        """Derivative estimate (units of x per s) after sample x (n,)."""
        if not self._init:
            self.prev[:] = x
            self.lowpass.reset(np.zeros_like(self.prev))
            self._init = True
        np.subtract(x, self.prev, out=self.raw)
        self.raw *= self.rate_hz
        self.prev[:] = x
        return self.lowpass.update(self.raw)


class PolynomialDifferentiator(_OnlineFilter):
    """Causal Savitzky-Golay: least-squares polynomial (order p) on the last k samples, d^m/dt^m at the newest.

    An FIR filter y_k = sum_i h_i x_{k-i}; h is fixed at construction. Exact (0 lag) for
    polynomials of order <= p; the lag grows with frequency and window length.
    """

    def __init__(self, n: int, rate_hz: float, window: int = 15, polyorder: int = 2, deriv: int = 1) -> None:
        if window <= polyorder or deriv > polyorder:
            raise ParameterError(f"need window > polyorder >= deriv, got window={window} p={polyorder} m={deriv}")
        self.rate_hz = rate_hz
        self.window = window
        dt = 1.0 / rate_hz
        tau = -np.arange(window) * dt  # sample ages: newest at 0, oldest at -(k-1) dt
        V = np.vander(tau, polyorder + 1, increasing=True)  # (k, p+1)
        pinv = np.linalg.pinv(V)  # coefficients c = pinv @ x, x ordered newest first
        self.h = math.factorial(deriv) * pinv[deriv]  # (k,) newest first
        self.b = self.h.copy()
        self.a = np.array([1.0])
        self.ideal_phase_deg = 90.0 * deriv
        self._buf = np.zeros((2 * window, n))  # each sample stored twice so the last k are contiguous
        self._hrev = self.h[::-1].copy()  # oldest first, matching the buffer view
        self._idx = 0
        self._count = 0
        self.y = np.zeros(n)

    def reset(self) -> None:
        self._count = 0
        self._idx = 0

    def update(self, x: np.ndarray) -> np.ndarray:
        """Derivative estimate after sample x (n,); until k samples arrived the first one is repeated."""
        if self._count == 0:
            self._buf[:] = x
        k = self.window
        self._buf[self._idx] = x
        self._buf[self._idx + k] = x
        self._idx = (self._idx + 1) % k
        self._count += 1
        np.dot(self._hrev, self._buf[self._idx : self._idx + k], out=self.y)
        return self.y


def apply_online(filt: _OnlineFilter, x: np.ndarray) -> np.ndarray:
    """Run an online filter over (N, n) samples (to build training data with the runtime's lag)."""
    out = np.empty_like(x, dtype=float)
    for i in range(x.shape[0]):
        out[i] = filt.update(x[i])
    return out


def lag_table(rate_hz: float = 1000.0, freqs: tuple[float, ...] = (1.0, 10.0, 50.0)) -> dict[str, list[float]]:
    """Phase lag (deg) of the default online filters at ``freqs`` (the module docstring table)."""
    filters = {
        "FirstOrderLowPass(50 Hz)": FirstOrderLowPass(1, rate_hz, 50.0),
        "ButterworthLowPass(100 Hz)": ButterworthLowPass(1, rate_hz, 100.0),
        "BackwardDifference(100 Hz)": BackwardDifference(1, rate_hz, 100.0),
        "PolynomialDifferentiator(k=15, p=2)": PolynomialDifferentiator(1, rate_hz, 15, 2),
    }
    return {name: [round(f.phase_lag_deg(fr), 2) for fr in freqs] for name, f in filters.items()}
