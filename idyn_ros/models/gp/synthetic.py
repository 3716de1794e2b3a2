"""Synthetic Panda data as in Giacomuzzo et al. Sec. V-A (ideal rigid-body model, no friction).

Trajectories (eq 33): q_i(t) = sum_{l=1}^{Ns} [a_l/(w l) sin(w l t) - b_l/(w l) cos(w l t)] + mid_i, with
a, b ~ U(-c, c) and c shrunk until the Table I limits on q, dq, ddq hold. 500 samples = 50 s at 10 Hz
(the authors sample 100 Hz and keep every 10th). Torques from pinocchio RNEA on the example-robot-data
Panda (fingers locked); lower-DoF arms lock the trailing joints at 0. Training torques get N(0, 0.01^2)
noise [Nm]; test torques are noiseless (nMSE against the true torque, as the authors' code).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

# Table I (paper): position, velocity and acceleration limits of the simulated Panda.
Q_MIN = np.array([-2.3, -1.4, -2.3, -2.7, -2.3, 0.2, -2.3])  # rad
Q_MAX = np.array([2.3, 1.4, 2.3, -0.3, 2.3, 3.2, 2.3])  # rad
DQ_MAX = np.array([2.2, 2.2, 2.2, 2.2, 2.6, 2.6, 2.6])  # rad/s
DDQ_MAX = np.array([15, 7.5, 10, 12.5, 15, 20, 20])  # rad/s^2 (unit stripped in the text; assumed)
N_SINES = 50  # authors' code
OMEGA_F = 2 * np.pi * 0.02  # rad/s, fundamental (50 s period)
TORQUE_NOISE_STD = 0.01  # Nm


def panda_urdf_path() -> str:
    """The example-robot-data Panda URDF shipped in the venv (cmeel prefix)."""
    import sys
    from pathlib import Path

    rel = "cmeel.prefix/share/example-robot-data/robots/panda_description/urdf/panda.urdf"
    for p in map(Path, sys.path):
        if (p / rel).is_file():
            return str(p / rel)
    from idyn_ros.errors import RobotDescriptionError

    raise RobotDescriptionError("example-robot-data Panda URDF not found on sys.path; install the "
                                "example-robot-data wheel (scripts/setup_env.sh does)")


@lru_cache(maxsize=4)
def panda_model(dof: int = 7):
    """RobotModel of the first ``dof`` Panda joints (others and the fingers locked at 0)."""
    from idyn_ros.dynamics import RobotModel

    joints = [f"panda_joint{i}" for i in range(1, dof + 1)]
    return RobotModel.from_urdf(panda_urdf_path(), name="panda", joints=joints)


def fourier_trajectory(rng: np.random.Generator, t: np.ndarray, dof: int,
                       n_sines: int = N_SINES, omega: float = OMEGA_F) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random sum-of-sines (eq 33) within Table I limits; returns q, dq, ddq (len(t), dof)."""
    l = np.arange(1, n_sines + 1)
    arg = omega * np.outer(t, l)  # (T, Ns)
    sn, cs = np.sin(arg), np.cos(arg)
    out = [np.empty((t.size, dof)) for _ in range(3)]
    for j in range(dof):
        mid, half = 0.5 * (Q_MIN[j] + Q_MAX[j]), 0.5 * (Q_MAX[j] - Q_MIN[j])
        c = 0.1 * (Q_MAX[j] - Q_MIN[j])
        for attempt in range(10_000):
            if attempt and attempt % 11 == 0:
                c *= 0.8  # authors' code: shrink after every 11 failed draws
            a, b = rng.uniform(-c, c, n_sines), rng.uniform(-c, c, n_sines)
            q = sn @ (a / (omega * l)) - cs @ (b / (omega * l)) + mid
            dq = cs @ a + sn @ b
            ddq = -sn @ (a * omega * l) + cs @ (b * omega * l)
            if (np.abs(q - mid) <= half).all() and (np.abs(dq) <= DQ_MAX[j]).all() and (
                np.abs(ddq) <= DDQ_MAX[j]
            ).all():
                break
        out[0][:, j], out[1][:, j], out[2][:, j] = q, dq, ddq
    return out[0], out[1], out[2]


@dataclass
class SyntheticSet:
    """One trajectory: inputs (N, n) [rad, rad/s, rad/s^2], true and noisy torques (N, n) [Nm]."""

    q: np.ndarray
    dq: np.ndarray
    ddq: np.ndarray
    tau: np.ndarray
    tau_noisy: np.ndarray


def make_set(seed: int, dof: int = 7, n_samples: int = 500, rate_hz: float = 10.0,
             noise_std: float = TORQUE_NOISE_STD) -> SyntheticSet:
    """One random trajectory sampled at ``rate_hz`` (500 samples at 10 Hz = 50 s, as the paper)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_samples) / rate_hz
    q, dq, ddq = fourier_trajectory(rng, t, dof)
    tau = panda_model(dof).rnea(q, dq, ddq)
    return SyntheticSet(q, dq, ddq, tau, tau + rng.normal(0.0, noise_std, tau.shape))


def true_energies(dof: int, q: np.ndarray, dq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ground-truth kinetic 0.5 dq' M dq [J] and potential energy [J] (pinocchio)."""
    import pinocchio as pin

    rm = panda_model(dof)
    m, d = rm.pin_model, rm.data
    T = np.array([pin.computeKineticEnergy(m, d, a, b) for a, b in zip(q, dq, strict=True)])
    U = np.array([pin.computePotentialEnergy(m, d, a) for a in q])
    return T, U
