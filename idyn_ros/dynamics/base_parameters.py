"""Base (identifiable) parameters of the joint-torque regressor, by QR with column pivoting.

Why: the 10 n standard inertial parameters are not all identifiable from joint torques; some never
affect tau (e.g. inertias of link 1 about axes other than its joint axis) and others only in fixed
linear combinations (e.g. ``Iyy_1 + Izz_2``). Least squares must run on an independent set.
Method (Gautier 1990/1991): stack Y over random states, ``Y P = Q R`` with column pivoting; the
first r pivoted columns are independent, and with ``R = [[R1, R2], [0, ~0]]``
``Y pi = Y[:, independent] (pi_1 + R1^-1 R2 pi_2)``, i.e. ``K = [1, R1^-1 R2] P^T``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from idyn_ros.dynamics.model import RobotModel
from idyn_ros.errors import IdentificationError

__all__ = ["BaseParameters", "base_parameters", "numerical_rank"]

# Rank threshold relative to the largest |R_ii|. The stacked regressor of an exact rigid-body model
# has an exact null space: its dropped |R_ii| are rounding level, ~4e-16 relative (measured on
# panda/ur5/lwr4 with 200 random states), while the smallest kept one is ~8e-2 relative. 1e-8 sits
# in that gap with 6+ decades of margin on each side, and is far above max(N, p) * eps ~ 3e-13
# (the numpy matrix_rank default, which would be too tight for regressors built from real, noisy
# states); decision: a fixed relative 1e-8 is simpler to explain and stable across sample counts.
RANK_RTOL = 1e-8

# Coefficients in K smaller than this (absolute) are rounding noise of R1^-1 R2 and set to 0.
K_ATOL = 1e-9


@dataclass
class BaseParameters:
    """Base-parameter map of a regressor with p columns.

    Attributes:
        n_base: number of base parameters r.
        independent: (r,) column indices of the regressor that form the base (pivot order).
        K: (r, p) with ``pi_base = K @ pi`` and ``Y @ pi == Y[:, independent] @ (K @ pi)`` for all states.
        names: human-readable combination per base parameter, e.g. ``"Iyy_1 + Izz_2"``.
        column_names: names of the p standard parameters.
        rank_tol: absolute threshold on |R_ii| that decided the rank.
        r_diag: (p,) |R_ii| of the pivoted QR (for diagnostics).
    """

    n_base: int
    independent: np.ndarray
    K: np.ndarray
    names: list[str]
    column_names: list[str]
    rank_tol: float
    r_diag: np.ndarray = field(repr=False)

    def project(self, pi: np.ndarray) -> np.ndarray:
        """Base parameters ``K @ pi`` (r,) from standard parameters (p,) (or (n, 10) -> raveled)."""
        return self.K @ np.asarray(pi, dtype=np.float64).ravel()

    def select(self, Y: np.ndarray) -> np.ndarray:
        """Base regressor: the independent columns of Y (..., p) -> (..., r)."""
        return np.asarray(Y)[..., self.independent]


def numerical_rank(r_diag: np.ndarray, rtol: float = RANK_RTOL) -> tuple[int, float]:
    """Rank from the |R_ii| of a pivoted QR and the absolute tolerance used (see RANK_RTOL)."""
    r_diag = np.abs(np.asarray(r_diag))
    tol = rtol * float(r_diag[0]) if r_diag.size else 0.0
    return int(np.sum(r_diag > tol)), tol


def _combination_name(coeffs: np.ndarray, names: Sequence[str], lead: int) -> str:
    parts = [names[lead]]
    for j in np.flatnonzero(coeffs):
        if j == lead:
            continue
        c = coeffs[j]
        sign = "-" if c < 0 else "+"
        mag = abs(c)
        term = names[j] if abs(mag - 1.0) < 1e-9 else f"{mag:.6g}*{names[j]}"
        parts.append(f"{sign} {term}")
    return " ".join(parts)


def base_parameters_from_regressor(
    Y: np.ndarray, column_names: Sequence[str] | None = None, rtol: float = RANK_RTOL
) -> BaseParameters:
    """Base parameters of a stacked regressor Y (rows, p)."""
    Y = np.asarray(Y, dtype=np.float64)
    rows, p = Y.shape
    if rows < p:
        raise IdentificationError(
            f"need at least as many regressor rows as parameters to find the base ({rows} < {p}); "
            "use more samples"
        )
    names = list(column_names) if column_names is not None else [f"p{j}" for j in range(p)]
    _, R, perm = scipy.linalg.qr(Y, mode="economic", pivoting=True)
    r_diag = np.abs(np.diag(R))
    r, tol = numerical_rank(r_diag, rtol)
    if r == 0:
        raise IdentificationError("the regressor is zero: no parameter is identifiable from these states")
    R1, R2 = R[:r, :r], R[:r, r:]
    beta = scipy.linalg.solve_triangular(R1, R2)  # (r, p - r): dependent columns in terms of the base
    beta[np.abs(beta) < K_ATOL] = 0.0
    K = np.zeros((r, p))
    K[np.arange(r), perm[:r]] = 1.0
    K[:, perm[r:]] = beta
    order = np.argsort(perm[:r], kind="stable")  # list base parameters link by link, not in pivot order
    K = K[order]
    independent = np.array(perm[:r][order], dtype=np.intp)
    combo = [_combination_name(K[i], names, independent[i]) for i in range(r)]
    return BaseParameters(r, independent, K, combo, names, tol, r_diag)


def base_parameters(
    model: RobotModel,
    n_samples: int = 200,
    seed: int = 0,
    friction_kinds: Sequence[str] | str | None = None,
    rtol: float = RANK_RTOL,
) -> BaseParameters:
    """Base parameters of ``model`` from its regressor stacked over ``n_samples`` random states.

    Args:
        model: the robot.
        n_samples: random states (q uniform in limits, dq ~ N(0, 1 rad/s), ddq ~ N(0, 3 rad/s²)).
        seed: RNG seed (the result is deterministic for a given seed).
        friction_kinds: friction columns appended after the 10 n inertial ones (e.g. ``"viscous,coulomb"``).
        rtol: rank threshold relative to the largest |R_ii| (see RANK_RTOL for the reasoning).
    """
    q, dq, ddq = model.random_states(n_samples, rng=seed)
    Y = model.stacked_regressor(q, dq, ddq, friction_kinds=friction_kinds)
    names = model.parameter_names()
    if friction_kinds:
        from idyn_ros.dynamics import friction

        kinds = friction.parse_kinds(friction_kinds)
        cols = friction.column_names(kinds)
        names += [f"{c}_{j + 1}" for j in range(model.n) for c in cols]
    return base_parameters_from_regressor(Y, names, rtol)
