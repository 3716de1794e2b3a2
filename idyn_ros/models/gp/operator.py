"""The Euler-Lagrange operator applied to any scalar energy kernel, by automatic differentiation.

G_i^x[f] = sum_l (dq_l d/dq_l + ddq_l d/ddq_l) df/ddq_i - df/dq_i   (Giacomuzzo et al., eq 16-17),
i.e. the forward-mode directional derivative of grad_dq f along (dq, ddq) minus grad_q f.
The torque block kernel is G^x G^x' k(x, x') (eq 19): the operator is applied in x with x' fixed, then
in x' with x fixed.

This is the generic (slow) path: the reference for the closed-form LIP kernel in the tests and the
implementation of the LSE baseline (Cheng & Huang), whose kernel is an SE on [cos q, sin q, dq].
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.func import grad, jacfwd, jvp, vmap

Tensor = torch.Tensor
# energy kernel k(q, dq, q', dq') -> scalar
EnergyKernel = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


def apply_operator_scalar(f: Callable[[Tensor, Tensor], Tensor], q: Tensor, dq: Tensor, ddq: Tensor) -> Tensor:
    """G^x[f] at (q, dq, ddq) for a scalar f(q, dq): returns (n,)."""
    g_dq = grad(f, argnums=1)
    _, directional = jvp(g_dq, (q, dq), (dq, ddq))
    return directional - grad(f, argnums=0)(q, dq)


def apply_operator_vector(h: Callable[[Tensor, Tensor], Tensor], q: Tensor, dq: Tensor, ddq: Tensor) -> Tensor:
    """G^x applied to each component of a vector function h(q, dq) (m,): returns (m, n)."""
    j_dq = jacfwd(h, argnums=1)
    _, directional = jvp(j_dq, (q, dq), (dq, ddq))
    return directional - jacfwd(h, argnums=0)(q, dq)


def operator_block(k: EnergyKernel, x1: Tensor, x2: Tensor, n: int) -> Tensor:
    """[K]_ij = G_i^x1 G_j^x2 k(x1, x2) for one pair, x = [q, dq, ddq] (3n,) -> (n, n)."""
    q1, dq1, ddq1 = x1[:n], x1[n : 2 * n], x1[2 * n :]
    q2, dq2, ddq2 = x2[:n], x2[n : 2 * n], x2[2 * n :]

    def inner(qb: Tensor, dqb: Tensor) -> Tensor:  # G^x1 k(., x2) as a function of x2: (n,)
        return apply_operator_scalar(lambda qa, dqa: k(qa, dqa, qb, dqb), q1, dq1, ddq1)

    return apply_operator_vector(inner, q2, dq2, ddq2)  # [i (x1 index), j (x2 index)]


def operator_kernel(k: EnergyKernel, X1: Tensor, X2: Tensor, n: int) -> Tensor:
    """Cross kernel (N1, 3n) x (N2, 3n) -> (N1, N2, n, n) by autodiff (vmapped over pairs)."""
    pair = vmap(vmap(lambda a, b: operator_block(k, a, b, n), in_dims=(None, 0)), in_dims=(0, None))
    return pair(X1, X2)


def energy_cross(k: EnergyKernel, Xs: Tensor, X: Tensor, n: int) -> Tensor:
    """cov(L(xs), tau_j(x)) = G_j^x k(xs, x) by autodiff: (Ns, 3n), (N, 3n) -> (Ns, N, n)."""

    def one(xs: Tensor, x: Tensor) -> Tensor:
        qs, dqs = xs[:n], xs[n : 2 * n]
        return apply_operator_scalar(lambda qb, dqb: k(qs, dqs, qb, dqb), x[:n], x[n : 2 * n], x[2 * n :])

    return vmap(vmap(one, in_dims=(None, 0)), in_dims=(0, None))(Xs, X)
