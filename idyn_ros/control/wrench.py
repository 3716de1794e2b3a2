"""External joint torque and flange wrench from torque residuals (Callar 2021; De Luca momentum observer).

Convention (decision, tested against the plant's ground truth): the estimate is the torque/wrench
the *environment applies to the robot*, tau_ext = J^T F (as in ``ApplyWrench``/``PlantGroundTruth``):

    M(q) ddq + C(q,dq) dq + g(q) + tau_f = tau + tau_ext          (tau: joint actuator torque)

(a) direct residual, needs ddq:        tau_ext = tau_model(q, dq, ddq) - tau
    (Callar Eq. 3.10 writes tau_dyn - tau_meas: same sign; "tau_measured - tau_model" would be the
    reaction torque, i.e. -tau_ext)
(b) generalised-momentum observer, no ddq (De Luca et al.):
    p = M dq,  r_k = K_O (p_k - p_0 - sum_i (tau_i + C_i^T dq_i - g_i - tau_f,i + r_{i-1}) dt)
    (from dp/dt = tau + C^T dq - g - tau_f + tau_ext, since dM/dt = C + C^T);  r -> tau_ext with
    first-order dynamics of bandwidth K_O (1/s).
Wrench: F = (J^T)^+ tau_ext with the damped pseudo-inverse (J^T)^+ = (J J^T + mu^2 I)^-1 J, J the 6xn
flange Jacobian in base-aligned axes (LOCAL_WORLD_ALIGNED): F = [f (N); m (Nm)] at the flange origin.
Tool frame: f_tool = R^T f, m_tool = R^T m. For n = 7 the null-space part of tau_ext is lost; near a
singularity mu trades accuracy for boundedness (Doenges sec. 6.3).

Model side with a learned artifact (``observer_model`` + ``LearnedModelTerms``): both
observers take M, C, g (and RNEA) from the artifact's identified inertial parameters, and add only its
friction and residual parts. (Adding them on top of the nominal-URDF M, C, g kept the nominal model's
bias in the momentum observer.) A model kind without an RBD part (lstm, delan) cannot be split into
M, C, g: the direct residual then uses its total torque, the momentum observer the nominal RBD alone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from idyn_ros.dynamics import RobotModel


def damped_pinv_transpose(J: np.ndarray, damping: float) -> np.ndarray:
    """(J^T)^+ = (J J^T + mu^2 I)^-1 J  (6 x n), mu = ``damping``."""
    JJt = J @ J.T
    JJt[np.diag_indices(6)] += damping * damping
    return np.linalg.solve(JJt, J)


def observer_model(robot: RobotModel, inertial_parameters: np.ndarray | None = None,
                   armature: np.ndarray | None = None) -> RobotModel:
    """The observers' M, C, g, RNEA and flange Jacobian: ``robot`` with the identified ``inertial_parameters``
    (n, 10) and ``armature`` (n,) when given, else its nominal URDF inertials."""
    return robot.with_identified(inertial_parameters, armature)



PUBLISH_RATE_HZ = 250.0  # the estimates' publishing rate when publish_divider is 0 (auto): every 4th state at 1 kHz


def publish_every(divider: int, rate_hz: float) -> int:
    """Every how many states the wrench observer maps and publishes its estimate (the trust stage runs then too):
    ``divider`` when set, else (0) the states come at about ``PUBLISH_RATE_HZ`` or slower: 4 at 1 kHz, 2 at 500 Hz,
    1 at a CB3's 125 Hz (a fixed 4 published a 125 Hz robot's estimate at 31 Hz)."""
    return divider if divider > 0 else max(1, round(rate_hz / PUBLISH_RATE_HZ))

class LearnedModelTerms:
    """The learned model's torque beyond the observers' RBD terms, into preallocated buffers (Nm).

    ``model`` is a loaded ``FeedforwardComputer`` (``compute``, ``total``, ``friction``, ``residual``,
    ``inertial_parameters``); ``rbd`` the observers' terms (from ``observer_model`` with the
    same inertial parameters). ``update(q, dq, ddq) -> (extra_direct, extra_momentum | None)``.
    """

    def __init__(self, model: Any, rbd: RobotModel) -> None:
        self.model = model
        self.rbd = rbd
        self.identified = model.inertial_parameters is not None
        self.extra = np.zeros(rbd.n)

    def update(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        m = self.model
        m.compute(q, dq, ddq)
        if self.identified:  # rbd.rnea == the model's RBD part: both observers add friction + residual
            np.add(m.friction, m.residual, out=self.extra)
            return self.extra, self.extra
        np.subtract(m.total, self.rbd.rnea(q, dq, ddq), out=self.extra)  # direct: the model's total torque
        return self.extra, None


class DirectResidual:
    """tau_ext = tau_model(q, dq, ddq) - tau  (Nm); tau_model from RBD (+ optional extra, e.g. friction)."""

    def __init__(self, rbd: RobotModel) -> None:
        self.rbd = rbd
        self.tau_ext = np.zeros(rbd.n)

    def update(
        self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, tau: np.ndarray, tau_model_extra: np.ndarray | None = None
    ) -> np.ndarray:
        np.subtract(self.rbd.rnea(q, dq, ddq), tau, out=self.tau_ext)
        if tau_model_extra is not None:
            self.tau_ext += tau_model_extra
        return self.tau_ext


class MomentumObserver:
    """De Luca's generalised-momentum residual r (Nm): dr/dt = K (tau_ext - r), stepped exactly over each period.

    Decision: r_k = a r_{k-1} + (1 - a) ((p_k - p_{k-1}) / dt - (tau - g + C^T dq)) with a = exp(-K dt), the exact
    response of the observer's first-order filter to a torque constant over the period, rather than the rectangle
    rule (a = 1 - K dt, the same to first order): that one diverges once K dt > 2, and replayed at 20 Hz with the
    default K = 50 /s it read 1e78 N; this is stable at every rate and keeps the bandwidth K.
    """

    def __init__(self, rbd: RobotModel, gain: float | np.ndarray = 50.0) -> None:
        self.rbd = rbd
        self.K = np.broadcast_to(np.asarray(gain, dtype=float), (rbd.n,)).copy()  # 1/s
        self.r = np.zeros(rbd.n)
        self._p_prev = np.zeros(rbd.n)  # the momentum M(q) dq at the previous state
        self._M = np.zeros((rbd.n, rbd.n))
        self._C = np.zeros((rbd.n, rbd.n))
        self._p = np.zeros(rbd.n)  # per-tick scratch: the update allocates nothing at 1 kHz
        self._beta = np.zeros(rbd.n)
        self._tmp = np.zeros(rbd.n)
        self._a_minus_1 = np.zeros(rbd.n)  # exp(-K dt) - 1 for the period _a_dt (constant while K and dt are)
        self._a_dt = math.nan
        self.started = False

    def set_gain(self, gain: float | np.ndarray) -> None:
        """K (1/s) at run time."""
        self.K[:] = gain
        self._a_dt = math.nan

    def reset(self) -> None:
        self.started = False
        self.r[:] = 0.0

    def update(
        self, q: np.ndarray, dq: np.ndarray, tau: np.ndarray, dt: float, tau_model_extra: np.ndarray | None = None
    ) -> np.ndarray:
        """One step with the actuator torque ``tau`` applied over the last ``dt`` s (Nm)."""
        p = np.matmul(self.rbd.mass_matrix(q, out=self._M), dq, out=self._p)
        if not self.started:
            self._p_prev[:] = p
            self.r[:] = 0.0
            self.started = True
            return self.r
        beta, tmp, a_minus_1 = self._beta, self._tmp, self._a_minus_1
        np.matmul(dq, self.rbd.coriolis_matrix(q, dq, out=self._C), out=beta)  # C^T dq
        np.subtract(self.rbd.gravity(q), beta, out=beta)  # g - C^T dq
        if tau_model_extra is not None:
            beta += tau_model_extra  # friction etc. on the model side
        np.subtract(p, self._p_prev, out=tmp)  # this period's tau_ext: the momentum change the model does not explain
        tmp /= dt
        tmp -= tau
        tmp += beta
        if dt != self._a_dt:  # once per period length, not per tick
            np.multiply(self.K, -dt, out=a_minus_1)
            np.expm1(a_minus_1, out=a_minus_1)
            self._a_dt = dt
        tmp -= self.r  # r += (1 - a) (tau_ext - r)
        tmp *= a_minus_1
        self.r -= tmp
        self._p_prev[:] = p
        return self.r


class WrenchMapper:
    """tau_ext -> flange wrench in base and tool axes, with optional dead-band and low-pass."""

    def __init__(self, rbd: RobotModel, damping: float = 0.01, deadband: np.ndarray | float = 0.0,
                 lowpass_alpha: float = 1.0) -> None:
        self.rbd = rbd
        self.damping = float(damping)
        self.deadband = np.broadcast_to(np.asarray(deadband, dtype=float), (6,)).copy()  # [N x3, Nm x3]
        self.alpha = float(lowpass_alpha)  # y += alpha (x - y); 1 = no filter
        self.base = np.zeros(6)
        self.tool = np.zeros(6)
        self._init = False

    def update(self, q: np.ndarray, tau_ext: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        J, R = self.rbd.flange_jacobian(q)
        return self.apply(damped_pinv_transpose(J, self.damping), R, tau_ext)

    def apply(self, pinv_t: np.ndarray, R: np.ndarray, tau_ext: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``update`` with (J^T)^+ (``damped_pinv_transpose`` with this mapper's damping) and the flange rotation R
        already computed at this q."""
        F = pinv_t @ tau_ext
        if self.alpha < 1.0 and self._init:
            self.base += self.alpha * (F - self.base)
        else:
            self.base[:] = F
            self._init = True
        out = self.base.copy()  # a new array per estimate: callers keep it (the estimate's rate, not the tick's)
        out[np.abs(out) < self.deadband] = 0.0
        np.matmul(out[:3], R, out=self.tool[:3])  # R^T f
        np.matmul(out[3:], R, out=self.tool[3:])
        return out, self.tool


class WrenchObserver:
    """The wrench_observer node's tick without ROS: both observers and their wrenches, from trusted joint states.

    ``update(stamp_ns, q, dq, tau)`` takes one state and the actuator torque that acted over the period before
    it (Nm); the direct residual uses the raw backward-difference acceleration over the stamp interval and
    low-passes its joint torques (``accel_cutoff_hz``); the momentum observer needs no acceleration. Both restart at a
    state stamped not after the previous one or more than ``max_gap_periods`` after it (the joint-state filter's
    gap): integrated over a gap with the last torque, the momentum observer read hundreds of N. ``wrenches()``
    maps both to the flange (only when published: the Cartesian mapping costs a Jacobian per estimate). With a
    learned ``model`` (a ``FeedforwardComputer`` not in fallback) both observers take M, C, g from its identified
    inertials and add its friction + residual. The node and the simulator experiments call this class.
    """

    def __init__(self, robot: RobotModel, rate_hz: float, model: Any = None, observer_gain: float = 50.0,
                 accel_cutoff_hz: float = 20.0, max_gap_periods: float = 3.0) -> None:
        from idyn_ros.data.filters import ButterworthLowPass

        self.model = model if model is not None and not model.fallback else None
        pi = self.model.inertial_parameters if self.model is not None else None
        arm = self.model.armature if self.model is not None else None
        self.rbd = observer_model(robot, pi, arm)
        self.model_terms = LearnedModelTerms(self.model, self.rbd) if self.model is not None else None
        self.direct = DirectResidual(self.rbd)
        self.momentum = MomentumObserver(self.rbd, observer_gain)
        self.map_direct, self.map_momentum = WrenchMapper(self.rbd), WrenchMapper(self.rbd)
        self._lp = ButterworthLowPass(robot.n, rate_hz, accel_cutoff_hz)
        # the learned model's inputs get a low-passed acceleration (decision: it was trained on a smooth one; a raw
        # backward difference at 125 Hz made a residual LSTM spike by 100 N on the UR5 recordings)
        self._lp_ddq = ButterworthLowPass(robot.n, rate_hz, accel_cutoff_hz)
        self.ddq_raw = np.zeros(robot.n)
        self._dq_prev = np.zeros(robot.n)
        self._prev_ns = -1
        self.max_gap_ns = int(max_gap_periods * round(1e9 / rate_hz))  # a longer step between states restarts
        self.tau_direct = np.zeros(robot.n)  # Nm, external joint torque estimates
        self.tau_momentum = self.momentum.r
        self.updates = 0

    def set_tunables(self, observer_gain: float, pinv_damping: float, deadband_force: float, deadband_torque: float,
                     lowpass_alpha: float) -> None:
        """Run-time parameters (``lowpass_alpha``: y += alpha (x - y) on the wrench, 1 = off)."""
        self.momentum.set_gain(observer_gain)
        for m in (self.map_direct, self.map_momentum):
            m.damping = pinv_damping
            m.deadband[:3] = deadband_force
            m.deadband[3:] = deadband_torque
            m.alpha = lowpass_alpha

    payload: Any = None  # the Payload counted as part of the robot (set_payload), None: none

    def set_payload(self, payload: Any) -> None:
        """Count a payload fixed to the flange (``Payload``; None or mass 0: none) as part of the robot, so its
        dynamics are not reported as an external wrench: both observers' model becomes ``rbd`` with it attached
        (a learned model's terms stay the bare arm's, see LearnedModelTerms); the observers restart at the next
        state."""
        from idyn_ros.robots.spec import Payload

        p = None if payload is None else Payload.coerce(payload)
        model = self.rbd if p is None or p.mass == 0.0 else self.rbd.with_payload(p)
        self.direct.rbd = self.momentum.rbd = model
        self.payload = None if model is self.rbd else p
        self.reset()

    def warm_up(self, q: np.ndarray) -> None:
        if self.model is not None:
            self.model.warm_up(q)

    def reset(self) -> None:
        """Start over at the next state (a gap, a re-zero)."""
        self._prev_ns = -1
        self.momentum.reset()
        self._lp.reset(0.0)
        self._lp_ddq.reset(0.0)

    def update(self, stamp_ns: int, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> bool:
        """One state; False while starting (the first state, and the first after a gap or a stamp going back, only
        sets the baseline)."""
        prev, self._prev_ns = self._prev_ns, stamp_ns
        if prev < 0 or stamp_ns <= prev or stamp_ns - prev > self.max_gap_ns:
            self._dq_prev[:] = dq
            self.momentum.reset()
            self._lp.reset(0.0)
            self._lp_ddq.reset(0.0)
            return False
        dt = (stamp_ns - prev) * 1e-9
        np.subtract(dq, self._dq_prev, out=self.ddq_raw)
        self.ddq_raw /= dt
        self._dq_prev[:] = dq
        extra_direct = extra_momentum = None
        if self.model_terms is not None:
            extra_direct, extra_momentum = self.model_terms.update(q, dq, self._lp_ddq.update(self.ddq_raw))
        self.tau_direct[:] = self._lp.update(self.direct.update(q, dq, self.ddq_raw, tau, extra_direct))
        self.momentum.update(q, dq, tau, dt, extra_momentum)
        self.updates += 1
        return True

    def wrenches(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(direct, momentum) flange wrenches [f N; m Nm] in base axes at ``q``; tool axes in ``map_*.tool``."""
        direct, momentum = self.map_direct, self.map_momentum
        # one Jacobian and one damped pseudo-inverse serve both mappers (a second pair cost ~27 us per estimate)
        J, R = direct.rbd.flange_jacobian(q)
        pinv_t = damped_pinv_transpose(J, direct.damping)
        base_direct = direct.apply(pinv_t, R, self.tau_direct)[0]
        if momentum.rbd is direct.rbd and momentum.damping == direct.damping:  # as set_tunables sets them
            return base_direct, momentum.apply(pinv_t, R, self.tau_momentum)[0]
        return base_direct, momentum.update(q, self.tau_momentum)[0]
