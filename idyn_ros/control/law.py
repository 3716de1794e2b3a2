"""Joint impedance / computed-torque control law, torque limits and safe modes.

The law is a pure function so it can be tested without ROS; ``control.controller.Controller`` runs it each tick.
Reference: Reuss et al. 2022, Appendix B / Eq. 14 (tau_ref = tau_ff + tau_fb), with the feedback
in acceleration space through the model inertia (summary sec. 7.1 recommendation), or as a plain
torque-space PD (option ``feedback_space="torque"``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from idyn_ros.parameters import FEEDBACK_SPACES


def critical_damping(
    kp: np.ndarray, damping_ratio: float = 1.0, space: str = "acceleration", inertia_diag: np.ndarray | None = None
) -> np.ndarray:
    """Damping gains for a damping ratio zeta.

    acceleration space (unit virtual mass): Kd = 2 zeta sqrt(Kp)        [1/s]  (Reuss: "critically damped")
    torque space (joint j sees inertia M_jj): Kd = 2 zeta sqrt(Kp M_jj) [Nm s/rad]
    """
    kp = np.asarray(kp, dtype=float)
    if space == "acceleration":
        return 2.0 * damping_ratio * np.sqrt(kp)
    if inertia_diag is None:
        raise ValueError("torque-space critical damping needs the joint inertias M_jj")
    return 2.0 * damping_ratio * np.sqrt(kp * np.asarray(inertia_diag, dtype=float))


def impedance_torque(
    q: np.ndarray,
    dq: np.ndarray,
    q_d: np.ndarray,
    dq_d: np.ndarray,
    tau_ff: np.ndarray,
    tau_offset: np.ndarray,
    M: np.ndarray | None,
    kp: np.ndarray,
    kd: np.ndarray,
    feedback_space: str = "acceleration",
    out_tau: np.ndarray | None = None,
    out_fb: np.ndarray | None = None,
    out_acc: np.ndarray | None = None,
) -> np.ndarray:
    """Joint impedance / computed-torque law.

        e = q_d - q,  de = dq_d - dq                                        [rad, rad/s]
        acceleration space: a_fb = Kp e + Kd de,  tau_fb = M(q) a_fb        [Kp 1/s^2, Kd 1/s]
        torque space:       tau_fb = Kp e + Kd de                            [Kp Nm/rad, Kd Nm s/rad]
        tau = tau_ff(q, dq, ddq_d) + tau_offset + tau_fb                     [Nm]

    ``tau_ff`` is the (learned or RBD) model at the desired acceleration (Reuss Eq. 1/14),
    ``tau_offset`` the DOOMED offset (Ratliff Eq. 8). ``out_acc`` receives a_fb (rad/s^2) in
    acceleration space (for torque space: zeros, DOOMED then sees the feedforward only).
    Returns ``out_tau`` (allocated when None); ``out_fb`` receives tau_fb.
    """
    n = q.shape[0]
    tau = np.empty(n) if out_tau is None else out_tau
    fb = np.empty(n) if out_fb is None else out_fb
    acc = np.empty(n) if out_acc is None else out_acc
    np.subtract(q_d, q, out=acc)
    acc *= kp
    np.subtract(dq_d, dq, out=fb)
    fb *= kd
    acc += fb
    if feedback_space == "acceleration":
        if M is None:
            raise ValueError("acceleration-space feedback needs the mass matrix M(q)")
        np.dot(M, acc, out=fb)
    elif feedback_space == "torque":
        fb[:] = acc
        acc[:] = 0.0
    else:
        raise ValueError(f"feedback_space must be one of {FEEDBACK_SPACES}, got {feedback_space!r}")
    np.add(tau_ff, tau_offset, out=tau)
    tau += fb
    return tau


class TorqueLimiter:
    """Clips |tau| to the effort limit and |d tau/dt| to the rate limit, in place.

    Effort limits come from the URDF (``<limit effort>``), scaled by ``effort_scale`` (<= 1).
    The torque rate limit (Nm/s) is per robot in config (the URDF has none; Franka's
    documented limit is 1000 Nm/s). rate_limit <= 0 disables the rate limit.
    """

    def __init__(self, effort_limit: Sequence[float], rate_limit: float, dt: float, effort_scale: float = 1.0):
        self.limit = np.zeros(len(effort_limit))
        self.prev = np.zeros_like(self.limit)
        self._lo = np.empty_like(self.limit)
        self._hi = np.empty_like(self.limit)
        self.set_limits(effort_limit, rate_limit, dt, effort_scale)

    def set_limits(self, effort_limit: Sequence[float], rate_limit: float, dt: float,
                   effort_scale: float = 1.0) -> None:
        """New limits, applied from the next ``apply`` (run-time parameter changes)."""
        limit = np.asarray(effort_limit, dtype=float) * float(effort_scale)
        if np.any(~np.isfinite(limit)) or np.any(limit <= 0):
            raise ValueError(f"effort limits must be finite and > 0, got {limit}")
        self.limit[:] = limit
        self._neg_limit = -self.limit
        self.limit_near = 0.999 * self.limit  # "at the limit" for saturation monitoring
        self.max_step = float(rate_limit) * float(dt) if rate_limit > 0 else np.inf

    def reset(self, tau: np.ndarray | float = 0.0) -> None:
        self.prev[:] = tau

    def apply(self, tau: np.ndarray) -> np.ndarray:
        """Clip ``tau`` in place (ufuncs with out=: no temporaries on the 1 kHz path) and remember it."""
        np.minimum(tau, self.limit, out=tau)
        np.maximum(tau, self._neg_limit, out=tau)
        if self.max_step != np.inf:
            np.subtract(self.prev, self.max_step, out=self._lo)
            np.add(self.prev, self.max_step, out=self._hi)
            np.minimum(tau, self._hi, out=tau)
            np.maximum(tau, self._lo, out=tau)
        self.prev[:] = tau
        return tau


def safe_torque(
    mode: str, dq: np.ndarray, damping: np.ndarray, gravity: np.ndarray | None, out: np.ndarray
) -> np.ndarray:
    """Torque in safe mode (per robot, ``RobotSpec.safe_mode``).

    "zero":    tau = 0 (the robot's brakes/own gravity compensation hold it)
    "damping": tau = g(q) - D dq   [D Nm s/rad]; g is the gravity torque at the last trusted q, or
               omitted (None) where the robot compensates gravity itself. Non-finite dq -> g only.
    """
    if mode == "zero":
        out[:] = 0.0
        return out
    if np.all(np.isfinite(dq)):
        np.multiply(damping, dq, out=out)
        np.negative(out, out=out)
    else:
        out[:] = 0.0
    if gravity is not None:
        out += gravity
    return out
