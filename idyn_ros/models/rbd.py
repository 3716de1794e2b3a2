"""Rigid-body-dynamics pieces the models need: batched regressors and inertial parameterisations.

``tau_RBD = Y(q, dq, ddq) @ pi`` (Reuss et al. 2022 Eq. 4) with pinocchio's joint-torque
regressor; per link ``pi_k = [m, mc_x, mc_y, mc_z, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` (pinocchio
order, inertia about the joint-frame origin = the paper's L_k). Training precomputes ``Y`` once
per sample (pinocchio, ~4 us each) so gradient steps through the RBD are one einsum.

Physically consistent parameterisations map unconstrained numbers to ``pi`` through the 4x4
pseudo-inertia ``J = [[tr(L)/2 1 - L, l], [l^T, m]]`` (Reuss Eq. 10/17), which is positive
definite iff the link is physically consistent (mass > 0, inertia > 0, triangle inequalities):
- DiffBary (Reuss Eq. 18-21): ``J = A A^T + r 1``, A lower triangular, r = 1e-8.
- log-Cholesky (Rucker & Wensing 2022): ``J = U U^T`` with U upper triangular,
  ``U = e^a [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from idyn_ros.dynamics.inertia import pi_to_pseudo_inertia
from idyn_ros.dynamics.model import inertial_parameters, regressor_batch, with_inertial_parameters

__all__ = ["R_DIFFBARY", "inertial_module", "inertial_parameters", "min_pseudo_inertia_eig", "regressor_batch",
           "with_inertial_parameters"]  # the pinocchio helpers are dynamics.model's, named here for the trainers

R_DIFFBARY = 1e-8  # Reuss et al. 2022 Eq. 12/19


# ---- physical consistency (numpy) ----


def min_pseudo_inertia_eig(pi: np.ndarray) -> np.ndarray:
    """Smallest pseudo-inertia eigenvalue per link (n,); > 0 means physically consistent."""
    return np.array([np.linalg.eigvalsh(pi_to_pseudo_inertia(p))[0] for p in np.asarray(pi)])


# ---- torch parameterisations ----


def _torch_from_pseudo(J: Any) -> Any:
    """(n, 4, 4) pseudo-inertia -> (n, 10) pinocchio-order parameters (torch)."""
    import torch

    sigma = J[:, :3, :3]
    tr = sigma.diagonal(dim1=1, dim2=2).sum(-1)  # (n,)
    ixx = tr - sigma[:, 0, 0]
    iyy = tr - sigma[:, 1, 1]
    izz = tr - sigma[:, 2, 2]
    return torch.stack(
        [J[:, 3, 3], J[:, 0, 3], J[:, 1, 3], J[:, 2, 3], ixx, -sigma[:, 0, 1], iyy, -sigma[:, 0, 2],
         -sigma[:, 1, 2], izz],
        -1,
    )


_TRIL = np.tril_indices(4)  # 10 entries: a; e b; f g c; h i j d (row-major) = Reuss Eq. 18
_TRIU = np.triu_indices(4)


def _chol(J: np.ndarray) -> np.ndarray:
    """Cholesky factor of a pseudo-inertia used as a starting point. A semi-definite or slightly
    inconsistent one (URDFs sometimes violate the triangle inequality) is first projected onto the
    PD cone by clipping its eigenvalues at 1e-9 kg m^2 (decision: start close to nominal, not fail)."""
    try:
        return np.linalg.cholesky(J)
    except np.linalg.LinAlgError:
        w, V = np.linalg.eigh(J)
        return np.linalg.cholesky((V * np.maximum(w, 1e-9)) @ V.T)


class _Lazy:
    """Build torch classes on first use so importing this module does not import torch."""

    _cache: dict[str, Any] = {}  # noqa: RUF012

    @classmethod
    def get(cls, name: str) -> Any:
        if name not in cls._cache:
            cls._cache.update(_build_torch_classes())
        return cls._cache[name]


def _build_torch_classes() -> dict[str, Any]:
    import torch
    from torch import nn

    class FixedInertial(nn.Module):
        """Frozen inertial parameters (nominal or identified), (n, 10)."""

        def __init__(self, pi: np.ndarray) -> None:
            super().__init__()
            self.register_buffer("pi_buf", torch.as_tensor(pi, dtype=torch.float64))

        def forward(self) -> torch.Tensor:
            return self.pi_buf

    class FreeInertial(nn.Module):
        """Unconstrained inertial parameters (what OLS fits), (n, 10)."""

        def __init__(self, pi: np.ndarray) -> None:
            super().__init__()
            self.pi = nn.Parameter(torch.as_tensor(pi, dtype=torch.float64))

        def forward(self) -> torch.Tensor:
            return self.pi

    class DiffBaryInertial(nn.Module):
        """Reuss et al. 2022 DiffBary: S_k = A_k A_k^T + r 1 (Eq. 12/18/19), then pi from S.

        Reading pi off the matrix product (Eq. 20-21) instead of the printed formulas avoids the
        paper's typos (l_y = e h + b i, not c h + i b; delta_8/delta_9 swapped in Eq. 19).
        Init: from the Cholesky factor of ``pi_init`` (the nominal model) when given, else the
        paper's N(0, 0.001^2); decision: a nominal warm start converges in far fewer steps.
        """

        def __init__(self, n: int, pi_init: np.ndarray | None = None, seed: int = 0) -> None:
            super().__init__()
            if pi_init is None:
                g = torch.Generator().manual_seed(seed)
                a = torch.randn(n, 10, generator=g, dtype=torch.float64) * 1e-3
            else:
                a = torch.stack(
                    [torch.as_tensor(_chol(pi_to_pseudo_inertia(p) - R_DIFFBARY * np.eye(4))[_TRIL]) for p in pi_init]
                )
            self.a = nn.Parameter(a)  # (n, 10)
            self.register_buffer("rows", torch.as_tensor(_TRIL[0]))
            self.register_buffer("cols", torch.as_tensor(_TRIL[1]))

        def forward(self) -> torch.Tensor:
            n = self.a.shape[0]
            A = torch.zeros(n, 4, 4, dtype=self.a.dtype)
            A = A.index_put((torch.arange(n)[:, None], self.rows[None], self.cols[None]), self.a)
            S = A @ A.transpose(1, 2) + R_DIFFBARY * torch.eye(4, dtype=self.a.dtype)
            return _torch_from_pseudo(S)

    class LogCholInertial(nn.Module):
        """Rucker & Wensing 2022 log-Cholesky: J = U U^T, U = e^a [[e^d1 s12 s13 t1] ...]."""

        def __init__(self, n: int, pi_init: np.ndarray) -> None:
            super().__init__()
            theta = []
            P = np.eye(4)[::-1]
            for p in pi_init:
                L = _chol(P @ pi_to_pseudo_inertia(p) @ P)
                U = P @ L @ P  # upper triangular with J = U U^T
                alpha = np.log(U[3, 3])
                Un = U / U[3, 3]
                theta.append(
                    [alpha, np.log(Un[0, 0]), np.log(Un[1, 1]), np.log(Un[2, 2]), Un[0, 1], Un[0, 2],
                     Un[1, 2], Un[0, 3], Un[1, 3], Un[2, 3]]
                )
            self.theta = nn.Parameter(torch.as_tensor(np.array(theta), dtype=torch.float64))

        def forward(self) -> torch.Tensor:
            th = self.theta
            z = torch.zeros_like(th[:, 0])
            o = torch.ones_like(th[:, 0])
            U = torch.stack(
                [
                    torch.stack([th[:, 1].exp(), th[:, 4], th[:, 5], th[:, 7]], -1),
                    torch.stack([z, th[:, 2].exp(), th[:, 6], th[:, 8]], -1),
                    torch.stack([z, z, th[:, 3].exp(), th[:, 9]], -1),
                    torch.stack([z, z, z, o], -1),
                ],
                1,
            ) * th[:, 0].exp()[:, None, None]
            return _torch_from_pseudo(U @ U.transpose(1, 2))

    return {
        "fixed": FixedInertial,
        "free": FreeInertial,
        "diffbary": DiffBaryInertial,
        "logchol": LogCholInertial,
    }


def inertial_module(kind: str, pi_init: np.ndarray, seed: int = 0, random_init: bool = False) -> Any:
    """torch module ``() -> pi (n, 10)`` for ``kind`` in fixed|free|diffbary|logchol."""
    cls = _Lazy.get(kind)
    if kind in ("fixed", "free"):
        return cls(pi_init)
    if kind == "diffbary":
        return cls(len(pi_init), None if random_init else pi_init, seed)
    return cls(len(pi_init), pi_init)
