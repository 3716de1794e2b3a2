"""Inertial-parameter conversions and physical-consistency checks.

Three views of one rigid body's inertia, converted here in one place so that identification (SDP),
training (Cholesky parameterisations) and URDF loading agree:

- pinocchio 10-vector ``[m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``: first mass moment ``h = m c``
  and rotational inertia ``L`` about the joint-frame origin (= the papers' "barycentric"
  parameters l, L of Reuss et al. 2022 Eq. 4; pinocchio ``Inertia.toDynamicParameters``);
- barycentric ``(m, c, Ic)``: mass, centre of mass, inertia about the CoM (what a URDF stores),
  related by the parallel-axis theorem ``L = Ic + m S(c)^T S(c)`` (Reuss Eq. 5);
- 4x4 pseudo-inertia ``J = [[Σ, h], [h^T, m]]`` with ``Σ = ½ tr(L) 1 - L`` (Wensing et al. 2017;
  Reuss Eq. 10/17). The body is physically consistent iff ``J ≻ 0``, which implies ``m > 0``,
  ``Ic ≻ 0`` and the triangle inequalities on Ic's principal moments (Reuss Eq. 6-8).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from idyn_ros.errors import RobotDescriptionError

__all__ = [
    "assert_physically_consistent",
    "barycentric_to_pi",
    "check_physical_consistency",
    "pi_to_barycentric",
    "pi_to_pseudo_inertia",
    "pseudo_inertia_to_pi",
]

_SYM_IDX = np.array([[4, 5, 7], [5, 6, 8], [7, 8, 9]])  # L[r, c] = pi[_SYM_IDX[r, c]]


def skew(v: np.ndarray) -> np.ndarray:
    """(..., 3) -> (..., 3, 3) cross-product matrices: skew(a) @ b == a x b."""
    v = np.asarray(v, dtype=float)
    S = np.zeros((*v.shape[:-1], 3, 3))
    S[..., 0, 1], S[..., 0, 2] = -v[..., 2], v[..., 1]
    S[..., 1, 0], S[..., 1, 2] = v[..., 2], -v[..., 0]
    S[..., 2, 0], S[..., 2, 1] = -v[..., 1], v[..., 0]
    return S


def _as_links(pi: np.ndarray) -> np.ndarray:
    pi = np.asarray(pi, dtype=np.float64)
    if pi.shape[-1] != 10:
        pi = pi.reshape(-1, 10)
    return np.atleast_2d(pi)


def rotational_inertia(pi: np.ndarray) -> np.ndarray:
    """Inertia matrix L (3, 3) about the frame origin from one 10-vector (or (..., 3, 3) for (..., 10))."""
    pi = np.asarray(pi, dtype=np.float64)
    return pi[..., _SYM_IDX]


def pi_to_barycentric(pi: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """One 10-vector -> (mass kg, CoM c (3,) m, inertia about CoM Ic (3, 3) kg·m²).

    A zero mass gives c = 0 and Ic = L (nothing to shift).
    """
    pi = np.asarray(pi, dtype=np.float64).reshape(10)
    m, h, L = pi[0], pi[1:4], rotational_inertia(pi)
    if m == 0.0:
        return 0.0, np.zeros(3), L
    c = h / m
    S = skew(c)
    return float(m), c, L - m * S.T @ S  # parallel axis, Reuss Eq. 5


def barycentric_to_pi(m: float, c: np.ndarray, Ic: np.ndarray) -> np.ndarray:
    """(mass, CoM, inertia about CoM) -> 10-vector (pinocchio order, inertia about origin)."""
    c = np.asarray(c, dtype=np.float64).reshape(3)
    Ic = np.asarray(Ic, dtype=np.float64).reshape(3, 3)
    S = skew(c)
    L = Ic + m * S.T @ S
    h = m * c
    return np.array([m, *h, L[0, 0], L[0, 1], L[1, 1], L[0, 2], L[1, 2], L[2, 2]])


def pi_to_pseudo_inertia(pi: np.ndarray) -> np.ndarray:
    """10-vector -> 4x4 pseudo-inertia J = [[½ tr(L) 1 - L, h], [h^T, m]] (Wensing 2017; Reuss Eq. 17)."""
    pi = np.asarray(pi, dtype=np.float64).reshape(10)
    L = rotational_inertia(pi)
    J = np.empty((4, 4))
    J[:3, :3] = 0.5 * np.trace(L) * np.eye(3) - L
    J[:3, 3] = J[3, :3] = pi[1:4]
    J[3, 3] = pi[0]
    return J


def pseudo_inertia_to_pi(J: np.ndarray) -> np.ndarray:
    """4x4 pseudo-inertia -> 10-vector. Inverse of Σ = ½ tr(L) 1 - L is L = tr(Σ) 1 - Σ."""
    J = np.asarray(J, dtype=np.float64)
    S = 0.5 * (J[:3, :3] + J[:3, :3].T)
    L = np.trace(S) * np.eye(3) - S
    return np.array([J[3, 3], *J[:3, 3], L[0, 0], L[0, 1], L[1, 1], L[0, 2], L[1, 2], L[2, 2]])


def check_physical_consistency(
    pi: np.ndarray,
    tol: float = 1e-9,
    names: Sequence[str] | None = None,
    allow_massless: bool = False,
) -> list[str]:
    """Problems with per-link parameters ``pi`` ((n, 10) or (10 n,)); empty list if all consistent.

    Per body: mass <= 0; pseudo-inertia J not positive definite (smallest eigenvalue <= -tol, i.e.
    semi-definite bodies such as point masses or thin rods pass within ``tol``); Ic not PSD; the
    triangle inequalities of Ic's principal moments (each <= sum of the other two, within ``tol``).

    Args:
        pi: inertial parameters, pinocchio order.
        tol: absolute tolerance in kg·m² (and kg) for the eigenvalue and triangle tests.
        names: body names used in the messages (default ``link 1..n``).
        allow_massless: accept bodies with all ten parameters zero (virtual URDF links).
    """
    links = _as_links(pi)
    names = list(names) if names is not None else [f"link {k + 1}" for k in range(len(links))]
    problems: list[str] = []
    for name, p in zip(names, links, strict=True):
        if allow_massless and np.all(np.abs(p) <= tol):
            continue
        if not np.all(np.isfinite(p)):
            problems.append(f"{name}: non-finite inertial parameters {p.tolist()}")
            continue
        if p[0] <= 0.0:
            problems.append(f"{name}: mass {p[0]:.6g} kg is not positive")
            continue
        _, _, Ic = pi_to_barycentric(p)
        eig_c = np.linalg.eigvalsh(0.5 * (Ic + Ic.T))
        if eig_c[0] < -tol:
            problems.append(
                f"{name}: inertia about the CoM is not positive semi-definite (eigenvalues {eig_c})"
            )
        a, b, d = eig_c
        for lhs, r1, r2, label in ((a, b, d, "I1"), (b, a, d, "I2"), (d, a, b, "I3")):
            if lhs > r1 + r2 + tol:
                problems.append(
                    f"{name}: triangle inequality violated, principal moment {label}={lhs:.6g} > "
                    f"{r1:.6g} + {r2:.6g} kg·m² (no real mass distribution has this inertia)"
                )
        J_min = np.linalg.eigvalsh(pi_to_pseudo_inertia(p))[0]
        if J_min < -tol:
            problems.append(f"{name}: pseudo-inertia not positive definite (min eigenvalue {J_min:.3g})")
    return problems


def assert_physically_consistent(
    pi: np.ndarray, names: Sequence[str] | None = None, tol: float = 1e-9, allow_massless: bool = False
) -> None:
    """Raise ``RobotDescriptionError`` listing every inconsistent body (see check_physical_consistency)."""
    problems = check_physical_consistency(pi, tol=tol, names=names, allow_massless=allow_massless)
    if problems:
        raise RobotDescriptionError(
            "physically inconsistent inertial parameters: "
            + "; ".join(problems)
            + ". Fix the <inertial> tags of these links (mass > 0, inertia about the CoM with each "
            "principal moment <= the sum of the other two)"
        )
