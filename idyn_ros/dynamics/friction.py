"""Joint friction models, linear in their coefficients, in numpy (runtime) and torch (training).

Every model here is ``tau_f[k] = sum_b c[k, b] * phi_b(dq[k])``: a per-joint sum of fixed basis
functions of the joint velocity. Being linear in ``c`` lets least squares / SDP identify the
coefficients together with the inertial parameters (the paper's 11th parameter per link), and
lets gradient descent learn them end to end. The numpy and torch versions evaluate the same
formulas (a test checks they agree to float precision).

Basis kinds (velocity in rad/s, torque in Nm):

- ``coulomb``: ``clamp(dq / dq_lim, -1, 1)``, Coulomb friction with a linear zone,
  Reuss et al. 2022 Eq. 13 with ``dq_lim = 0.02`` rad/s for every joint.
- ``viscous``: ``dq``.
- ``asymmetric``: two columns ``clamp(dq/dq_lim, 0, 1)`` and ``clamp(dq/dq_lim, -1, 0)``: a
  Coulomb level that differs between positive and negative motion.
- ``stribeck``: ``exp(-(dq / v_s)^2) * clamp(dq / dq_lim, -1, 1)`` with ``v_s = 0.1`` rad/s: the
  extra break-away torque near zero speed (a Stribeck bump on top of ``coulomb``).
- ``sigmoid``: ``tanh(dq / v_t)`` with ``v_t = 0.05`` rad/s, a smooth Coulomb alternative.
- ``offset``: ``1``, a constant torque (sensor offset, unmodelled gravity of cables).

Decision: ``v_s`` and ``v_t`` are fixed rather than fitted so that the model stays linear in its
coefficients (LS/SDP-compatible); 0.1 rad/s is a typical Stribeck velocity for harmonic drives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from idyn_ros.errors import ParameterError

DQ_LIM = 0.02  # rad/s, Reuss et al. 2022 Eq. 13 ("q_dot_lim = 0.02 for every joint")
V_STRIBECK = 0.1  # rad/s, decision (see module docstring)
V_TANH = 0.05  # rad/s, decision (see module docstring)

# number of basis columns each kind adds per joint
KIND_COLUMNS: dict[str, int] = {
    "coulomb": 1,
    "viscous": 1,
    "asymmetric": 2,
    "stribeck": 1,
    "sigmoid": 1,
    "offset": 1,
}
DEFAULT_KINDS: tuple[str, ...] = ("coulomb", "viscous", "offset")


def parse_kinds(kinds: str | Sequence[str] | None) -> tuple[str, ...]:
    """Normalise ``"coulomb,viscous"`` / a list / None (-> no friction) to a tuple of known kinds."""
    if kinds is None:
        return ()
    if isinstance(kinds, str):
        kinds = [k.strip() for k in kinds.split(",") if k.strip() and k.strip() != "none"]
    out = tuple(kinds)
    unknown = [k for k in out if k not in KIND_COLUMNS]
    if unknown:
        raise ParameterError(
            f"unknown friction kind(s) {unknown}; choose from {sorted(KIND_COLUMNS)} "
            f"(comma separated, e.g. 'coulomb,viscous,offset', or 'none')"
        )
    if len(set(out)) != len(out):
        raise ParameterError(f"friction kinds listed twice: {list(out)}")
    return out


def n_columns(kinds: Sequence[str]) -> int:
    """Basis columns per joint for ``kinds``."""
    return sum(KIND_COLUMNS[k] for k in kinds)


def column_names(kinds: Sequence[str]) -> list[str]:
    """One name per basis column (``asymmetric`` gives ``asymmetric+`` and ``asymmetric-``)."""
    names: list[str] = []
    for k in kinds:
        names += [f"{k}+", f"{k}-"] if k == "asymmetric" else [k]
    return names


def _basis(xp: Any, dq: Any, kinds: Sequence[str]) -> Any:
    """Shared formula for numpy (``xp=np``) and torch (``xp=torch``): (..., n) -> (..., n, B)."""
    cols = []
    s = xp.clip(dq / DQ_LIM, -1.0, 1.0) if xp is np else dq.div(DQ_LIM).clamp(-1.0, 1.0)
    for k in kinds:
        if k == "coulomb":
            cols.append(s)
        elif k == "viscous":
            cols.append(dq)
        elif k == "asymmetric":
            if xp is np:
                cols += [np.clip(s, 0.0, 1.0), np.clip(s, -1.0, 0.0)]
            else:
                cols += [s.clamp(min=0.0), s.clamp(max=0.0)]
        elif k == "stribeck":
            cols.append(xp.exp(-((dq / V_STRIBECK) ** 2)) * s)
        elif k == "sigmoid":
            cols.append(xp.tanh(dq / V_TANH))
        elif k == "offset":
            cols.append(xp.ones_like(dq))
    return xp.stack(cols, -1) if cols else None


def friction_basis(dq: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    """Basis values ``phi`` (..., n, B) for joint velocities ``dq`` (..., n) in rad/s."""
    dq = np.asarray(dq, dtype=np.float64)
    if not kinds:
        return np.zeros((*dq.shape, 0))
    return _basis(np, dq, kinds)


def friction_torque(dq: np.ndarray, coeffs: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    """Friction torque (..., n) in Nm for velocities ``dq`` (..., n) and ``coeffs`` (n, B)."""
    if not kinds:
        return np.zeros(np.shape(dq))
    return np.einsum("...nb,nb->...n", friction_basis(dq, kinds), np.asarray(coeffs, dtype=np.float64))


def default_friction_into(dq: np.ndarray, columns: tuple[np.ndarray, np.ndarray, np.ndarray], out: np.ndarray,
                          scratch: np.ndarray) -> np.ndarray:
    """``friction_torque`` of ``DEFAULT_KINDS`` for one (n,) sample into ``out``, allocating nothing (the runtime's
    1 kHz path; the general form builds a basis with clip, stack and einsum, ~11 us): ``columns`` are the coefficient
    columns (coulomb, viscous, offset), each (n,); ``scratch`` (n,) is overwritten."""
    coulomb, viscous, offset = columns
    np.divide(dq, DQ_LIM, out=scratch)
    np.maximum(scratch, -1.0, out=scratch)  # the clip of _basis, as two ufuncs into the buffer
    np.minimum(scratch, 1.0, out=scratch)
    np.multiply(scratch, coulomb, out=out)
    np.multiply(dq, viscous, out=scratch)
    out += scratch
    out += offset
    return out


def static_friction_level(coeffs: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    """Per-joint break-away torque (n,) in Nm: the velocity-sign terms' level (coulomb + stribeck + sigmoid; the
    larger side of asymmetric), 0 where the fit is unphysical (negative). At standstill friction can be anything
    within +- this, which is what the wrench observer's stiction band uses."""
    c = np.asarray(coeffs, dtype=np.float64)
    level = np.zeros(c.shape[0])
    col = 0
    for k in kinds:
        if k in ("coulomb", "stribeck", "sigmoid"):
            level += c[:, col]
        elif k == "asymmetric":
            level += np.maximum(c[:, col], c[:, col + 1])  # the level moving up, the level moving down
        col += KIND_COLUMNS[k]
    return np.maximum(level, 0.0)


def friction_regressor(dq: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    """Block-diagonal friction regressor (..., n, n*B) so that ``tau_f = F @ coeffs.ravel()``."""
    phi = friction_basis(dq, kinds)  # (..., n, B)
    n, b = phi.shape[-2], phi.shape[-1]
    out = np.zeros((*phi.shape[:-2], n, n * b))
    for j in range(n):
        out[..., j, j * b : (j + 1) * b] = phi[..., j, :]
    return out


def torch_friction_basis(dq: Any, kinds: Sequence[str]) -> Any:
    """Torch version of :func:`friction_basis` (ONNX-exportable: clip, exp, tanh, stack only)."""
    import torch

    if not kinds:
        return torch.zeros((*dq.shape, 0), dtype=dq.dtype)
    return _basis(torch, dq, kinds)


def torch_friction_torque(dq: Any, coeffs: Any, kinds: Sequence[str]) -> Any:
    """Torch version of :func:`friction_torque`: (..., n), (n, B) -> (..., n)."""
    import torch

    if not kinds:
        return torch.zeros_like(dq)
    return (torch_friction_basis(dq, kinds) * coeffs).sum(-1)
