"""Synthetic recordings from a known "true" robot, for tests and the identification benchmark.

The true robot is the nominal model with perturbed inertials (mass, CoM, inertia scaled per
link; still physically consistent) plus friction that is NOT in the model class (tanh Coulomb
with a 0.03 rad/s knee, viscous, a Stribeck bump, a constant offset), so identified parameters
can be compared with the truth and the residual network has something real to learn.
Trajectories are random Fourier series (Swevers 1997 form, ``idyn_ros.data.trajectories``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from idyn_ros.dynamics.inertia import rotational_inertia
from idyn_ros.models import rbd
from idyn_ros.models.sources import Recording


@dataclass
class TrueRobot:
    """Ground truth: inertials (n, 10) and friction coefficients per joint (n,) each."""

    pi: np.ndarray
    coulomb: np.ndarray  # Nm
    viscous: np.ndarray  # Nm s/rad
    stribeck: np.ndarray  # Nm, extra break-away torque
    offset: np.ndarray  # Nm

    def friction(self, dq: np.ndarray) -> np.ndarray:
        """True friction torque (..., n) in Nm."""
        return (self.coulomb * np.tanh(dq / 0.03) + self.viscous * dq
                + self.stribeck * np.exp(-((dq / 0.1) ** 2)) * np.tanh(dq / 0.01) + self.offset)


def make_true_robot(pin_model: Any, seed: int = 0, spread: float = 0.15) -> TrueRobot:
    """Perturb the nominal inertials by about ``spread`` (relative) and draw friction."""
    rng = np.random.default_rng(seed)
    pi_nom = rbd.inertial_parameters(pin_model)
    out = []
    for p in pi_nom:
        m = max(p[0], 1e-3)
        c = p[1:4] / m
        Ic = rotational_inertia(p) - m * (c @ c * np.eye(3) - np.outer(c, c))
        m2 = m * (1 + spread * rng.uniform(-1, 1))
        c2 = c + spread * 0.1 * rng.uniform(-1, 1, 3)  # up to 1.5 cm CoM shift at spread 0.15
        Ic2 = Ic * (1 + spread * rng.uniform(-1, 1))
        I2 = Ic2 + m2 * (c2 @ c2 * np.eye(3) - np.outer(c2, c2))
        out.append([m2, *(m2 * c2), I2[0, 0], I2[0, 1], I2[1, 1], I2[0, 2], I2[1, 2], I2[2, 2]])
    n = pin_model.nv
    effort = np.clip(np.asarray(pin_model.effortLimit), 10, 200)
    return TrueRobot(
        pi=np.array(out),
        coulomb=effort * rng.uniform(0.01, 0.03, n),
        viscous=effort * rng.uniform(0.005, 0.02, n),
        stribeck=effort * rng.uniform(0.0, 0.01, n),
        offset=effort * rng.uniform(-0.005, 0.005, n),
    )


def fourier_recording(
    pin_model: Any,
    truth: TrueRobot,
    seed: int = 0,
    duration: float = 20.0,
    rate_hz: float = 200.0,
    speed: float = 1.0,
    noise: float = 0.01,
    harmonics: int = 5,
    period: float = 10.0,
) -> Recording:
    """Random Fourier excitation, torques from the true robot (+ ``noise`` x torque std Gaussian).

    ``speed`` scales the time axis (2.0 = the same path family twice as fast).
    """
    from idyn_ros.data.trajectories import FourierTrajectory

    rng = np.random.default_rng(seed)
    n = pin_model.nv
    lo, hi = np.asarray(pin_model.lowerPositionLimit), np.asarray(pin_model.upperPositionLimit)
    lo = np.where(np.isfinite(lo) & (lo > -10), lo, -np.pi)
    hi = np.where(np.isfinite(hi) & (hi < 10), hi, np.pi)
    q0 = 0.5 * (lo + hi)
    a = rng.normal(0, 1, (n, harmonics))
    b = rng.normal(0, 1, (n, harmonics))
    traj = FourierTrajectory(q0, a, b, period)
    t = np.arange(0, duration, 1.0 / rate_hz)
    q, _, _ = traj.evaluate(t)
    amp = np.abs(q - q0).max(0)
    scale = np.minimum(0.6 * 0.5 * (hi - lo), 1.2) / amp  # use up to 60 % of the half range, <= 1.2 rad
    vel_lim = np.abs(np.asarray(pin_model.velocityLimit))
    # speed-up: a shorter period with the same a/w amplitudes = the same paths traversed faster
    traj = FourierTrajectory(q0, a * scale[:, None], b * scale[:, None], period / speed)
    q, dq, ddq = traj.evaluate(t)
    over = np.abs(dq).max(0) / np.maximum(vel_lim, 1e-3)
    if (over > 0.8).any():  # keep below 80 % of the velocity limit
        s = np.minimum(1.0, 0.8 / over)
        traj = FourierTrajectory(q0, traj.a * s[:, None], traj.b * s[:, None], traj.period)
        q, dq, ddq = traj.evaluate(t)
    Y = rbd.regressor_batch(pin_model, q, dq, ddq)
    tau = Y @ truth.pi.ravel() + truth.friction(dq)
    tau = tau + noise * tau.std(0) * rng.standard_normal(tau.shape)
    return Recording(t, q, dq, ddq, tau, source=f"synthetic(seed={seed}, speed={speed})")
