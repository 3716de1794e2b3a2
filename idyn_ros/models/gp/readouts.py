"""Physical read-outs of a trained energy-based GP (LIP, LSE): energies, gravity, inertia, Coriolis.

Sec. III-C: T, U and tau are jointly Gaussian, so
  T^(x*) = K_Ttau(x*, X) alpha, U^(x*) = K_Utau(x*, X) alpha                  (eq 28)
  var T = k_T(x*, x*) - K_Ttau K^-1 K_tauT  (and likewise for U)               (eq 29)
with K_Ttau = G^x k_T(x*, x) and K_Utau = -G^x k_U(x*, x) = +dk_U/dq (tau = G[T - U]).
U is identifiable only up to a constant (the torques see dU/dq); callers align it (paper footnote).

From the torque posterior (friction/SE terms excluded by construction of the query):
  g(q) = tau^(q, 0, 0), C(q, dq) dq = tau^(q, dq, 0) - g(q), M(q) ddq = tau^(q, 0, ddq) - g(q);
  M^_ii = 2 T^(q, e_i), M^_ij = T^(q, e_i + e_j) - T^(q, e_i) - T^(q, e_j)  (M^ is symmetric but
  not guaranteed positive definite: ``mass_matrix`` reports it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from idyn_ros.models.gp.gp import GPInverseDynamics, GPTrainingError, stack_inputs

Tensor = torch.Tensor


def _energy_cross(gp: GPInverseDynamics, which: str, xs: Tensor) -> Tensor:
    """(Ns, N, n) cov(E(xs), tau(X))."""
    k = gp.kernel
    if which == "T":
        if hasattr(k, "cov_T_tau"):
            return k.cov_T_tau(xs[:, None, :], gp.X[None, :, :])
    elif hasattr(k, "cov_U_tau"):
        return k.cov_U_tau(xs[:, None, : gp.n], gp.X[None, :, :])
    raise GPTrainingError(f"kernel {type(k).__name__} has no separate energy read-out; use the LIP kernel")


def _energy_prior(gp: GPInverseDynamics, which: str, xs: Tensor) -> Tensor:
    k = gp.kernel
    return k.k_T(xs, xs) if which == "T" else k.k_U(xs[:, : gp.n], xs[:, : gp.n])


@torch.no_grad()
def energy(gp: GPInverseDynamics, which: str, q: np.ndarray, dq: np.ndarray | None = None,
           return_var: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Posterior mean of the kinetic ("T", J) or potential ("U", J, up to a constant) energy, (N,).

    Args:
        q, dq: (N, n) positions [rad] and velocities [rad/s] (dq unused for U).
        return_var: also return the posterior variance (eq 29) [J^2].
    """
    if not gp.multi_output or gp.X is None:
        raise GPTrainingError("energy read-outs need a trained multi-output energy GP (LIP)")
    q = np.atleast_2d(q)
    dq = np.zeros_like(q) if dq is None else np.atleast_2d(dq)
    xs = stack_inputs(q, dq, np.zeros_like(q))
    means, vars_ = [], []
    for s in range(0, xs.shape[0], 64):
        x = xs[s : s + 64]
        c = _energy_cross(gp, which, x)  # (s, N, n)
        means.append(torch.einsum("snj,nj->s", c, gp.alpha))
        if return_var:
            V = torch.linalg.solve_triangular(gp._chol, c.reshape(x.shape[0], -1).T, upper=False)
            vars_.append((_energy_prior(gp, which, x) - (V * V).sum(0)).clamp_min(0.0))
    mean = torch.cat(means).numpy()
    return mean, (torch.cat(vars_).numpy() if return_var else None)


def kinetic_energy(gp: GPInverseDynamics, q: np.ndarray, dq: np.ndarray,
                   return_var: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """T^(q, dq) [J] (eq 28a) and optionally its variance (eq 29a)."""
    return energy(gp, "T", q, dq, return_var)


def potential_energy(gp: GPInverseDynamics, q: np.ndarray,
                     return_var: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """U^(q) [J] up to an additive constant (eq 28b) and optionally its variance (eq 29b)."""
    return energy(gp, "U", q, None, return_var)


def gravity(gp: GPInverseDynamics, q: np.ndarray, return_var: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """g^(q) = tau^(q, 0, 0) (N, n) [Nm] and optionally its posterior variance."""
    q = np.atleast_2d(q)
    z = np.zeros_like(q)
    mean, var = gp.predict(stack_inputs(q, z, z), return_var=return_var)
    return mean.numpy(), (var.numpy() if var is not None else None)


def coriolis(gp: GPInverseDynamics, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """C^(q, dq) dq = tau^(q, dq, 0) - g^(q) (N, n) [Nm]."""
    q, dq = np.atleast_2d(q), np.atleast_2d(dq)
    z = np.zeros_like(q)
    return gp.predict_numpy(q, dq, z) - gp.predict_numpy(q, z, z)


@dataclass
class MassMatrixReadout:
    """M^(q) (N, n, n) [kg m^2], its smallest eigenvalue per sample, and which samples are not PD."""

    M: np.ndarray
    min_eig: np.ndarray
    not_positive_definite: np.ndarray  # indices of samples with min_eig <= 0


def mass_matrix(gp: GPInverseDynamics, q: np.ndarray) -> MassMatrixReadout:
    """M^ from the kinetic-energy posterior (polarisation of T^(q, .)), symmetric by construction."""
    q = np.atleast_2d(q)
    N, n = q.shape
    dirs = [np.eye(n)[i] for i in range(n)]
    T1 = np.stack([kinetic_energy(gp, q, np.tile(d, (N, 1)))[0] for d in dirs], -1)  # (N, n)
    M = np.zeros((N, n, n))
    for i in range(n):
        M[:, i, i] = 2 * T1[:, i]
        for j in range(i + 1, n):
            Tij = kinetic_energy(gp, q, np.tile(dirs[i] + dirs[j], (N, 1)))[0]
            M[:, i, j] = M[:, j, i] = Tij - T1[:, i] - T1[:, j]
    eig = np.linalg.eigvalsh(M)[:, 0]
    return MassMatrixReadout(M=M, min_eig=eig, not_positive_definite=np.flatnonzero(eig <= 0))
