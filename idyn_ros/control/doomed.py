"""DOOMED: direct online optimisation of modelling errors (Ratliff, Meier, Kappler, Schaal 2016).

The controller adds an offset f_offset(w) to the feedforward (Eq. 8) and w follows the gradient of
the inertia-weighted acceleration error, which is observable online because M cancels (Eq. 10-14):

    grad_w l = -J_f^T (ddq_cmd - ddq_meas)                      e := ddq_cmd - ddq_meas [rad/s^2]

Update (momentum as exponential smoother, Eq. 20-21, with the variance metric of Eq. 22):

    u <- (1 - eta lambda) u - eta (I + alpha diag(v))^-1 grad     [eta: Nm s^2/rad per tick]
    w <- gamma w + (1 - gamma) u

Decisions where the paper is silent or ambiguous (each tested in test/control/test_doomed.py):
- Eq. 22 prints no eta; we use u <- u - eta A^-1 g (the summary's reading; eta is a listed parameter).
- v = exponential running variance of the *measured* acceleration (time constant ``variance_tau`` s).
- forgetting lambda multiplies u (the integrator), so w decays to 0 through the smoother; u decays by eta lambda
  per tick, which must stay below 1 (at 1 the integrator is wiped every tick, above it flips sign every tick).
- eta is given per tick at ``reference_rate_hz`` (paper: 1 kHz) and scaled by reference/actual rate,
  so the continuous-time integral gain eta/dt stays the same at other control rates.
- optional per-joint ``scale`` (e.g. diag M_hat(q)): eta_j = eta * scale_j makes eta relative to the
  joint inertia; the delay-aware stability bound is eta_j < ~m_j (summary sec. 1), so absolute eta
  that suits a shoulder makes a light wrist joint oscillate.
- safety the paper lacks: offset saturation (|w_j| <= limit_j, also on u: anti-windup), an
  oscillation detector that freezes learning and decays w with ``decay_tau``, freeze/reset. Two
  signatures, either trips: (a) the paper's (sec. 3c): per-window mean|e| rising (x rise_factor over
  its recent minimum) while mean e ~ 0; (b) added after the plant runs: the offset swinging (total variation
  over ``osc_tv_windows`` windows > ratio x the range it covers, and > fraction x limit). (a) misses
  an oscillation present from the first tick (no lower baseline) whose |e| stays below the
  unadapted error; on the Panda with a 1 kg payload and eta 5 that happened (w swinging +-10 Nm).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from idyn_ros.dynamics.friction import DQ_LIM
from idyn_ros.parameters import DOOMED_FEATURES as FEATURES

_ADD = np.add.reduce  # one reduction per finiteness check (control/watchdog.py): a NaN/Inf makes the sum non-finite
# Ratliff 2016 sec. 3c/3d: alpha 0-0.5, gamma 0.9/0.95, eta 0.01-0.1 per tick at 1 kHz.
PAPER_ALPHA = 0.5
PAPER_GAMMA = 0.9


@dataclass
class DoomedConfig:
    """Parameters (units in comments); the defaults are the doomed node's (``parameters.DoomedParams``; a test keeps
    them equal), which follow the paper where it gives values."""

    learning_rate: float = 0.05  # eta per tick at reference_rate_hz [Nm s^2/rad] (x scale_j)
    reference_rate_hz: float = 1000.0  # rate eta is specified at (paper: 1 kHz)
    rate_hz: float = 1000.0  # actual update rate
    momentum: float = PAPER_GAMMA  # gamma in [0, 1)
    variance_gain: float = PAPER_ALPHA  # alpha [s^4/rad^2]
    forgetting: float = 0.0  # lambda [1/(Nm s^2/rad)]: u decays by learning_rate x forgetting per tick (< 1); 0 = none
    variance_tau: float = 0.1  # s, running variance time constant
    features: str = "constant"  # "constant": f = w;  "linear": f_j = phi_j(q,dq)^T w_j
    offset_limit: np.ndarray | float = 5.0  # Nm, per joint |f_j| bound (the node: 15 % of the effort limit)
    osc_window: float = 0.1  # s, detector window
    osc_rise_factor: float = 3.0  # mean|e| must exceed this x the recent minimum
    osc_min_error: float = 0.5  # rad/s^2, ignore oscillations below this mean|e|
    osc_bias_ratio: float = 0.3  # |mean e| < ratio * mean|e| counts as "mean ~ 0"
    osc_consecutive: int = 3  # windows in a row
    osc_history: int = 10  # windows kept for the recent minimum
    osc_tv_windows: int = 5  # windows over which the offset's total variation is compared with its net change
    osc_tv_ratio: float = 4.0  # total variation > ratio x the range it covers (it keeps reversing) ...
    # ... and > fraction x offset_limit. Decision: 4, not 0.5: tick-to-tick jitter over a small range adds up to a
    # path of 1-2.6 limits in 0.5 s where DOOMED tracks well (Panda, 1-2 kg payload); chatter made 5-54 limits
    osc_tv_fraction: float = 4.0
    decay_tau: float = 0.5  # s, offset decay time constant after an oscillation trip

    def validate(self) -> None:
        """Refuse settings the update cannot run with (ValueError naming the parameters)."""
        rates_ok = self.rate_hz > 0 and self.reference_rate_hz > 0
        eta_tick = self.learning_rate * self.reference_rate_hz / self.rate_hz if rates_ok else 0.0
        decay = eta_tick * self.forgetting
        at_rate = "" if eta_tick == self.learning_rate else f" ({eta_tick:g} per tick at {self.rate_hz:g} Hz)"
        checks = [
            (self.learning_rate >= 0, "learning_rate must be >= 0"),
            (0.0 <= self.momentum < 1.0, "momentum (gamma) must be in [0, 1)"),
            (self.variance_gain >= 0, "variance_gain (alpha) must be >= 0"),
            (self.forgetting >= 0, "forgetting (lambda) must be >= 0"),
            (rates_ok, "rates must be > 0"),
            (decay < 1.0, f"learning_rate x forgetting must be < 1: it is the integrator's decay per tick "
                          f"({self.learning_rate:g}{at_rate} x {self.forgetting:g} = {decay:g}); at 1 it forgets "
                          f"everything every tick, above 1 it flips sign every tick"),
            (self.features in FEATURES, f"features must be one of {FEATURES}"),
            (np.all(np.asarray(self.offset_limit) > 0), "offset_limit must be > 0"),
            (self.osc_consecutive >= 1 and self.osc_history > self.osc_consecutive,
             f"osc_consecutive must be >= 1 and below the detector's history ({self.osc_history} windows)"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


def config_from_params(params: Any, effort_limit: np.ndarray) -> DoomedConfig:
    """``DoomedConfig`` from the doomed node's parameters (``idyn_ros.parameters.DoomedParams``); an empty
    ``offset_limit`` is 15 % of the effort limit."""
    limit = params.offset_limit or tuple(0.15 * np.asarray(effort_limit, dtype=float))
    return DoomedConfig(
        learning_rate=params.learning_rate, reference_rate_hz=params.reference_rate_hz, rate_hz=params.rate_hz,
        momentum=params.momentum, variance_gain=params.variance_gain, forgetting=params.forgetting,
        variance_tau=params.variance_tau, features=params.features, offset_limit=np.asarray(limit, dtype=float),
        osc_window=params.osc_window, osc_rise_factor=params.osc_rise_factor, osc_min_error=params.osc_min_error,
        osc_bias_ratio=params.osc_bias_ratio, osc_consecutive=params.osc_consecutive,
        osc_tv_windows=params.osc_tv_windows, osc_tv_ratio=params.osc_tv_ratio,
        osc_tv_fraction=params.osc_tv_fraction, decay_tau=params.decay_tau)


def linear_features(q: np.ndarray, dq: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Per-joint features phi_j = [1, sin q_j, cos q_j, dq_j, tanh(dq_j / DQ_LIM)]  -> out (n, 5).

    Block-diagonal J_f (each joint's offset uses only its own features) keeps the update O(n):
    gradient_j = -phi_j e_j (Ratliff sec. 1, linear-in-features specialisation J_f = Phi).
    The tanh column is a smooth Coulomb term whose zone is the friction model's Coulomb zone (``friction.DQ_LIM``,
    0.02 rad/s, the width of Reuss Eq. 13's clamp).
    """
    out[:, 0] = 1.0
    np.sin(q, out=out[:, 1])
    np.cos(q, out=out[:, 2])
    out[:, 3] = dq
    np.divide(dq, DQ_LIM, out=out[:, 4])  # in place: no array per tick
    np.tanh(out[:, 4], out=out[:, 4])
    return out


class Doomed:
    """Online offset learner; call ``update`` once per tick with a correctly paired error."""

    N_LINEAR = 5

    def __init__(self, n: int, config: DoomedConfig | None = None) -> None:
        self.cfg = config or DoomedConfig()
        self.cfg.validate()
        self.n = n
        k = 1 if self.cfg.features == "constant" else self.N_LINEAR
        self.k = k
        self.w = np.zeros((n, k))
        self.u = np.zeros((n, k))
        self.phi = np.ones((n, k))
        self.offset = np.zeros(n)  # Nm, f_offset(w) for the last features
        self.limit = np.zeros(n)
        # -limit, set with limit (reconfigure): the clips below negated a fresh copy each tick (~3 us with np.clip's
        # dispatch); the (n, 1) views bound each joint's weights
        self._neg_limit = np.zeros(n)
        self._limit_col, self._neg_limit_col = self.limit[:, None], self._neg_limit[:, None]
        self.mean_acc = np.zeros(n)
        self.var_acc = np.zeros(n)
        self.error = np.zeros(n)  # last e = ddq_cmd - ddq_meas
        self.frozen = False
        self.freeze_reason = ""
        self.decaying = False
        self.ticks = 0
        self._prev_offset = np.zeros(n)
        self._g = np.zeros((n, k))
        self._metric = np.zeros(n)
        self._step = np.zeros(n)  # per-tick scratch: the update allocates nothing at 1 kHz
        self._tmp = np.zeros(n)
        self._tmp_nk = np.zeros((n, k))
        self._win = 0
        self.reconfigure(self.cfg)

    def reconfigure(self, config: DoomedConfig) -> None:
        """Apply new settings (a parameter change at run time), keeping what was learned; the oscillation detector
        starts over when its window or history length changes."""
        if config.features != self.cfg.features:
            raise ValueError("features cannot change at run time (the weights have another shape)")
        config.validate()
        self.cfg = config
        n = self.n
        dt = 1.0 / config.rate_hz
        self.eta = config.learning_rate * config.reference_rate_hz / config.rate_hz
        self.limit[:] = np.broadcast_to(np.asarray(config.offset_limit, dtype=float), (n,))
        np.negative(self.limit, out=self._neg_limit)
        self._beta_var = min(1.0, dt / config.variance_tau)
        self._decay = math.exp(-dt / config.decay_tau)
        win, nw = max(1, round(config.osc_window * config.rate_hz)), config.osc_tv_windows
        if win == self._win and self._m1_hist.shape[0] == config.osc_history and self._tv_hist.shape[0] == nw:
            return  # (the first call always allocates: _win starts at 0)
        self._win = win
        self._win_count = 0
        self._sum_abs = np.zeros(n)
        self._sum = np.zeros(n)
        self._m1_hist = np.full((config.osc_history, n), np.inf)
        self._hist_i = 0
        self._streak = np.zeros(n, dtype=int)
        self._tv = np.zeros(n)  # total variation of the offset in the current window
        self._tv_hist = np.zeros((nw, n))
        self._off_hist = np.full((nw, n), np.nan)  # offset at the end of the last windows
        self._lo, self._hi = np.full(n, np.inf), np.full(n, -np.inf)  # offset range in the current window
        self._lo_hist, self._hi_hist = np.full((nw, n), np.inf), np.full((nw, n), -np.inf)
        self._tv_i = 0

    @property
    def learning_rate(self) -> float:
        """Effective per-tick eta at the actual rate."""
        return self.eta

    def set_learning_rate(self, learning_rate: float) -> None:
        """A new eta, checked like any other setting (with forgetting, it sets the integrator's decay)."""
        self.reconfigure(dataclasses.replace(self.cfg, learning_rate=float(learning_rate)))

    def reset(self) -> None:
        """w = u = 0, statistics cleared, unfrozen (the reset service)."""
        self.w[:] = 0.0
        self.u[:] = 0.0
        self.offset[:] = 0.0
        self.mean_acc[:] = 0.0
        self.var_acc[:] = 0.0
        self.error[:] = 0.0
        self.frozen = False
        self.freeze_reason = ""
        self.decaying = False
        self._win_count = 0
        self._sum_abs[:] = 0.0
        self._sum[:] = 0.0
        self._m1_hist[:] = np.inf
        self._streak[:] = 0
        self._clear_swing()

    def _clear_swing(self) -> None:
        self._tv[:] = 0.0
        self._tv_hist[:] = 0.0
        self._off_hist[:] = np.nan
        self._lo[:], self._hi[:] = np.inf, -np.inf
        self._lo_hist[:], self._hi_hist[:] = np.inf, -np.inf

    def freeze(self, reason: str = "frozen by request", decay: bool = False) -> None:
        """Stop learning, keep (or with ``decay`` let decay) the current offset."""
        self.frozen = True
        self.freeze_reason = reason
        self.decaying = decay

    def unfreeze(self) -> None:
        self.frozen = False
        self.freeze_reason = ""
        self.decaying = False
        self._streak[:] = 0
        self._m1_hist[:] = np.inf
        self._clear_swing()

    def evaluate(self, q: np.ndarray | None = None, dq: np.ndarray | None = None) -> np.ndarray:
        """f_offset(w) at the given state (Nm); constant features ignore q, dq."""
        if self.k > 1:
            linear_features(q, dq, self.phi)
            np.einsum("jk,jk->j", self.phi, self.w, out=self.offset)
        else:
            self.offset[:] = self.w[:, 0]
        np.maximum(self.offset, self._neg_limit, out=self.offset)  # = np.clip(offset, -limit, limit)
        np.minimum(self.offset, self.limit, out=self.offset)
        return self.offset

    def update(
        self,
        ddq_cmd: np.ndarray,
        ddq_meas: np.ndarray,
        q: np.ndarray | None = None,
        dq: np.ndarray | None = None,
        scale: np.ndarray | None = None,
    ) -> np.ndarray:
        """One tick. ``ddq_cmd`` must be the acceleration commanded by the torque that produced
        ``ddq_meas`` (one-tick delay pairing is the caller's job). Returns the new offset (Nm),
        evaluated at (q, dq) for linear features."""
        self.ticks += 1
        e = self.error
        np.subtract(ddq_cmd, ddq_meas, out=e)
        if not math.isfinite(_ADD(e)) and not np.all(np.isfinite(e)):  # the sum first: 2 us against 5 us
            self.freeze("non-finite acceleration error", decay=False)
            return self.evaluate(q, dq)
        # running variance of the measured acceleration (Eq. 22's v)
        b, tmp = self._beta_var, self._tmp
        np.subtract(ddq_meas, self.mean_acc, out=tmp)
        tmp *= b
        self.mean_acc += tmp
        np.subtract(ddq_meas, self.mean_acc, out=tmp)
        np.square(tmp, out=tmp)
        tmp -= self.var_acc
        tmp *= b
        self.var_acc += tmp
        self._detect_oscillation(e)
        if self.frozen:
            if self.decaying:
                self.w *= self._decay
                self.u *= self._decay
            return self.evaluate(q, dq)
        # gradient g = -J_f^T e (Eq. 14); per joint with block-diagonal features
        if self.k > 1:
            linear_features(q, dq, self.phi)
            np.multiply(self.phi, e[:, None], out=self._g)
            np.negative(self._g, out=self._g)
        else:
            np.negative(e, out=self._g[:, 0])
        np.multiply(self.var_acc, self.cfg.variance_gain, out=self._metric)
        self._metric += 1.0
        step = np.divide(self.eta, self._metric, out=self._step)  # (n,)
        if scale is not None:
            step *= scale
        if self.cfg.forgetting > 0:
            self.u *= 1.0 - self.eta * self.cfg.forgetting
        np.multiply(step[:, None], self._g, out=self._tmp_nk)
        self.u -= self._tmp_nk
        gamma = self.cfg.momentum
        self.w *= gamma
        np.multiply(self.u, 1.0 - gamma, out=self._tmp_nk)
        self.w += self._tmp_nk
        # saturation (anti-windup on u as well); for linear features bound each weight by limit
        for weights in (self.u, self.w):  # = np.clip(weights, -limit, limit) per joint
            np.maximum(weights, self._neg_limit_col, out=weights)
            np.minimum(weights, self._limit_col, out=weights)
        return self.evaluate(q, dq)

    def _detect_oscillation(self, e: np.ndarray) -> None:
        tmp = self._tmp
        np.abs(e, out=tmp)
        self._sum_abs += tmp
        self._sum += e
        np.subtract(self.offset, self._prev_offset, out=tmp)
        np.abs(tmp, out=tmp)
        self._tv += tmp
        self._prev_offset[:] = self.offset
        np.minimum(self._lo, self.offset, out=self._lo)
        np.maximum(self._hi, self.offset, out=self._hi)
        self._win_count += 1
        if self._win_count < self._win:
            return
        m1 = self._sum_abs / self._win
        m2 = self._sum / self._win
        self._win_count = 0
        self._sum_abs[:] = 0.0
        self._sum[:] = 0.0
        baseline = self._m1_hist.min(axis=0)
        rising = (
            (m1 > self.cfg.osc_rise_factor * baseline)
            & (m1 > self.cfg.osc_min_error)
            & (np.abs(m2) < self.cfg.osc_bias_ratio * m1)
        )
        i = self._tv_i
        oldest = self._off_hist[i].copy()  # offset osc_tv_windows windows ago (NaN until filled)
        self._tv_hist[i] = self._tv
        self._off_hist[i] = self.offset
        self._lo_hist[i], self._hi_hist[i] = self._lo, self._hi
        self._lo[:], self._hi[:] = np.inf, -np.inf
        self._tv_i = (i + 1) % self._tv_hist.shape[0]
        self._tv[:] = 0.0
        tv = self._tv_hist.sum(axis=0)
        net = np.abs(self.offset - oldest)
        # decision: an oscillation reverses again and again, so its path is many times the range it covers (chatter
        # from too high a learning rate: 10-60x); compared with the net change instead, a slow wander tripped it
        # (Panda wrist, true plant, identified model: path 1.15 Nm, range 0.44 Nm, net 0.26 Nm), and freezing there
        # cost 13x in tracking (0.69 vs 0.055 deg)
        swing = self._hi_hist.max(axis=0) - self._lo_hist.min(axis=0)
        swinging = np.isfinite(oldest) & (tv > self.cfg.osc_tv_ratio * swing) & (
            tv > self.cfg.osc_tv_fraction * self.limit)
        suspicious = rising | swinging
        self._streak = np.where(suspicious, self._streak + 1, 0)
        self._m1_hist[self._hist_i] = m1
        self._hist_i = (self._hist_i + 1) % self._m1_hist.shape[0]
        if not self.frozen and np.any(self._streak >= self.cfg.osc_consecutive):
            j = int(np.argmax(self._streak))
            what = (f"mean|e| {m1[j]:.2f} rad/s^2 rose > {self.cfg.osc_rise_factor:g}x its recent minimum "
                    f"{baseline[j]:.2f} while mean e = {m2[j]:.2f}" if rising[j] else
                    f"offset swings over {swing[j]:.2f} Nm (total variation {tv[j]:.2f} Nm, net change "
                    f"{net[j]:.2f} Nm) in {self._tv_hist.shape[0] * self.cfg.osc_window:g} s")
            self.freeze(f"oscillation on joint {j}: {what}; learning frozen, offset decaying "
                        f"(tau {self.cfg.decay_tau:g} s). Lower learning_rate, then call reset", decay=True)


class DoomedAdapter:
    """DOOMED as the doomed node runs it, without ROS: pairs each measured acceleration with the command that
    caused it, then updates the learner. The node and the simulator loop both call this object.

    The controller reports, per tick, the acceleration it commanded (ddq_d + feedback) with the stamp of the
    joint state it answered (``on_command``); when the next joint state (stamp s_k) arrives, ddq_meas =
    (dq_k - dq_{k-1}) / (s_k - s_{k-1}) is paired with the command stamped s_{k-1} (``on_state``). Ticks the
    controller spent in safe mode command no acceleration and are not paired (decision: DOOMED must not learn
    the safe hold's error). Neither is a state that follows a missed one (more than ``MAX_GAP_PERIODS`` control
    periods after the previous): its acceleration spans several ticks' commands, not the one it would be paired
    with (a loaded machine dropping joint states made that error swing and trip the oscillation detector). Nor is
    one less than ``MIN_INTERVAL_PERIODS`` after the previous: velocity noise over microseconds is a huge
    acceleration (2 us: |e| 1171 rad/s^2, a 3 Nm offset step); it is skipped, and the next state pairs with the
    state before it. After ``restart`` (the joint-state stamps started over) the next state is only a baseline.
    """

    RING = 16  # commands kept for pairing by stamp
    MAX_GAP_PERIODS = 1.5  # a longer stamp interval means a joint state was missed: not paired
    MIN_INTERVAL_PERIODS = 0.5  # a shorter stamp interval is an extra state, not a control period: not paired

    def __init__(self, learner: Doomed, model: Any = None, inertia_scaled: bool = True) -> None:
        """``model``: a ``RobotModel`` whose diag M(q) scales the step (``inertia_scaled``)."""
        if inertia_scaled and model is None:
            raise ValueError("inertia_scaled DOOMED needs the model whose M(q) scales the step")
        self.learner = learner
        self.model = model
        self.inertia_scaled = inertia_scaled
        n = learner.n
        self._stamps = np.full(self.RING, -1, dtype=np.int64)
        self._acc = np.zeros((self.RING, n))
        self._i = 0
        self._prev_stamp = -1
        self._dq_prev = np.zeros(n)
        self._M = np.zeros((n, n))
        self.ddq_meas = np.zeros(n)
        self.paired = 0
        self.unpaired = 0
        self.gaps = 0  # states not paired because the one before them was missed
        self.early = 0  # states not paired because they came less than MIN_INTERVAL_PERIODS after the previous
        self.restarts = 0  # times the stamps started over (``restart``)
        self._max_gap_ns = round(self.MAX_GAP_PERIODS * 1e9 / learner.cfg.rate_hz)
        self._min_interval_ns = round(self.MIN_INTERVAL_PERIODS * 1e9 / learner.cfg.rate_hz)
        self.errors: list[np.ndarray] | None = None  # set to [] to keep every update's error e (rad/s^2)
        self.controller_model: str | None = None  # the controller's feedforward model_id, once it reported one

    def restart(self) -> None:
        """The joint-state stamps started over (jumped back or stalled): the previous state is no baseline, so the
        next state is not paired either."""
        self._prev_stamp = -1
        self.restarts += 1

    def set_inertia_model(self, model: Any) -> None:
        """The arm's inertia changed (a payload applied or removed): what was learned compensated the old dynamics
        (it would count twice once the feedforward includes the payload), so the learner starts from zero, and the
        step scales with the new M(q). A freeze (request, parameter, detector) stays."""
        self.model = model
        self._start_over()

    def on_controller_model(self, model_id: str) -> str | None:
        """The controller reports the feedforward it runs; returns the one it ran before when that changed (the
        offset compensated that model's error, so the learner starts from zero), else None. The first report
        only records it."""
        before = self.controller_model
        if model_id == before:
            return None
        self.controller_model = model_id
        if before is None:
            return None
        self._start_over()
        return before

    def _start_over(self) -> None:
        """Forget the offset, keep a freeze (request, parameter, detector)."""
        learner = self.learner
        frozen, reason = learner.frozen, learner.freeze_reason
        learner.reset()
        if frozen:
            learner.freeze(reason)

    def on_command(self, stamp_ns: int, acceleration_command: np.ndarray, active: bool = True) -> None:
        """The controller answered the state stamped ``stamp_ns`` by commanding this acceleration (rad/s^2)."""
        if not active:
            return
        i = self._i
        self._stamps[i] = stamp_ns
        self._acc[i] = acceleration_command
        self._i = (i + 1) % self.RING

    def _slot_of(self, stamp_ns: int) -> int:
        """Ring slot of the command stamped ``stamp_ns``, -1 if none; newest first (it is nearly always the last)."""
        stamps, ring = self._stamps, self.RING
        for back in range(1, ring + 1):
            i = (self._i - back) % ring
            if stamps[i] == stamp_ns:
                return i
        return -1

    def on_state(self, stamp_ns: int, q: np.ndarray, dq: np.ndarray) -> np.ndarray | None:
        """A trusted joint state; returns the new offset (Nm) when it could be paired, else None."""
        prev = self._prev_stamp
        if 0 <= prev < stamp_ns < prev + self._min_interval_ns:  # an extra state: pair the next one with prev
            self.early += 1
            return None
        self._prev_stamp = stamp_ns
        dq_prev = self._dq_prev
        if prev < 0 or stamp_ns <= prev:
            dq_prev[:] = dq
            return None
        if stamp_ns - prev > self._max_gap_ns:
            self.gaps += 1
            dq_prev[:] = dq
            return None
        slot = self._slot_of(prev)
        if slot < 0:  # the command for the previous state never came (controller inactive, safe or late)
            self.unpaired += 1
            dq_prev[:] = dq
            return None
        np.subtract(dq, dq_prev, out=self.ddq_meas)
        self.ddq_meas /= (stamp_ns - prev) * 1e-9
        dq_prev[:] = dq
        scale = np.diag(self.model.mass_matrix(q, out=self._M)) if self.inertia_scaled else None
        self.paired += 1
        offset = self.learner.update(self._acc[slot], self.ddq_meas, q, dq, scale)
        if self.errors is not None:
            self.errors.append(self.learner.error.copy())
        return offset
