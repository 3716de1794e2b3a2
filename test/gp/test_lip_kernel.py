"""LIP kernel equations: closed form vs autodiff operator vs finite differences; hyperparameter count."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from idyn_ros.models.gp.lip import LIPKernel
from idyn_ros.models.gp.operator import energy_cross, operator_kernel
from idyn_ros.models.gp.products import exclusion_products, product_derivatives

F64 = torch.float64


def _random_kernel(n: int, prismatic: list[bool] | None, seed: int = 0) -> LIPKernel:
    torch.manual_seed(seed)
    k = LIPKernel(n, prismatic)
    with torch.no_grad():
        for p in k.parameters():
            p.copy_(0.4 * torch.randn_like(p))
    return k


def _energy_L(k: LIPKernel):
    return k.lagrangian_kernel()


def test_exclusion_products_handle_zero_factors() -> None:
    w = torch.tensor([[2.0, 0.0, 3.0, 5.0]], dtype=F64)
    e1, e2 = exclusion_products(w)
    assert torch.allclose(e1, torch.tensor([[0.0, 30.0, 0.0, 0.0]], dtype=F64))
    assert e2[0, 1, 3] == 6.0 and e2[0, 0, 1] == 15.0 and e2[0, 2, 2] == 0.0


def test_product_derivatives_match_autograd() -> None:
    torch.manual_seed(1)
    q1, q2 = torch.randn(5, dtype=F64, requires_grad=True), torch.randn(5, dtype=F64, requires_grad=True)

    def W(a, b):
        return (torch.sin(a) * torch.cos(b) + 0.3 * a * b + 0.1).prod()

    s1, c1, s2, c2 = torch.sin(q1), torch.cos(q1), torch.sin(q2), torch.cos(q2)
    w = s1 * c2 + 0.3 * q1 * q2 + 0.1
    Wv, g1, g2, H = product_derivatives(w, c1 * c2 + 0.3 * q2, -s1 * s2 + 0.3 * q1, -c1 * s2 + 0.3)
    ref_g1, ref_g2 = torch.autograd.functional.jacobian(W, (q1, q2))
    ref_H = torch.autograd.functional.hessian(W, (q1, q2))[0][1]
    assert torch.allclose(Wv, W(q1, q2)) and torch.allclose(g1, ref_g1) and torch.allclose(g2, ref_g2)
    assert torch.allclose(H, ref_H)


@pytest.mark.parametrize(("n", "prismatic"), [(3, [False, True, False])])
def test_closed_form_blocks_match_autodiff_operator(n: int, prismatic: list[bool] | None) -> None:
    k = _random_kernel(n, prismatic)
    X1, X2 = torch.randn(2, 3 * n, dtype=F64), torch.randn(3, 3 * n, dtype=F64)
    K = k(X1, X2)
    K_ad = operator_kernel(_energy_L(k), X1, X2, n)
    assert K.shape == (2, 3, n, n)
    assert torch.allclose(K, K_ad, rtol=1e-10, atol=1e-10 * float(K_ad.abs().max()))
    # K(x, x') = K(x', x)^T (valid covariance)
    assert torch.allclose(K, k(X2, X1).permute(1, 0, 3, 2), rtol=1e-10, atol=1e-10 * float(K.abs().max()))


def test_energy_cross_covariances_match_autodiff() -> None:
    n = 3
    k = _random_kernel(n, [False, False, True], seed=3)
    Xs, X = torch.randn(2, 3 * n, dtype=F64), torch.randn(3, 3 * n, dtype=F64)

    def kT(qa, dqa, qb, dqb):
        z = torch.zeros_like(qa)
        return k.k_T(torch.cat([qa, dqa, z]), torch.cat([qb, dqb, z]))

    assert torch.allclose(k.cov_T_tau(Xs[:, None], X[None]), energy_cross(kT, Xs, X, n), atol=1e-10)
    # tau = G[T - U]: cov(U, tau) = -G k_U
    ref_U = energy_cross(lambda qa, dqa, qb, dqb: -k.k_U(qa, qb), Xs, X, n)
    assert torch.allclose(k.cov_U_tau(Xs[:, None, :n], X[None]), ref_U, atol=1e-12)


def test_operator_against_finite_differences() -> None:
    """G_i^x k(., x') by central differences on the scalar kernel, for one (i, x, x')."""
    n = 2
    k = _random_kernel(n, None, seed=4)
    kL = _energy_L(k)
    torch.manual_seed(5)
    x, xp = torch.randn(3 * n, dtype=F64), torch.randn(3 * n, dtype=F64)
    q, dq, ddq = x[:n], x[n : 2 * n], x[2 * n :]
    h = 1e-4

    def f(qq, dd):
        return float(kL(qq, dd, xp[:n], xp[n : 2 * n]))

    def d_ddq_i(qq, dd, i):
        e = torch.zeros(n, dtype=F64)
        e[i] = h
        return (f(qq, dd + e) - f(qq, dd - e)) / (2 * h)

    i = 1
    # sum_l (dq_l d/dq_l + ddq_l d/ddq_l) d f/d dq_i = directional derivative along (dq, ddq)
    directional = (d_ddq_i(q + h * dq, dq + h * ddq, i) - d_ddq_i(q - h * dq, dq - h * ddq, i)) / (2 * h)
    e = torch.zeros(n, dtype=F64)
    e[i] = h
    dfdq = (f(q + e, dq) - f(q - e, dq)) / (2 * h)
    fd = directional - dfdq
    from idyn_ros.models.gp.operator import apply_operator_scalar

    ad = apply_operator_scalar(lambda a, b: kL(a, b, xp[:n], xp[n : 2 * n]), q, dq, ddq)[i]
    assert abs(fd - float(ad)) < 1e-5 * max(1.0, abs(float(ad)))


def test_hyperparameter_count_matches_paper() -> None:
    assert LIPKernel(6).num_hyperparameters() == 102
    assert LIPKernel(7).num_hyperparameters() == 133


def test_prior_torque_covariance_is_positive_semidefinite() -> None:
    n = 3
    k = _random_kernel(n, None, seed=6)
    X = torch.randn(6, 3 * n, dtype=F64)
    K = k(X, X).detach().permute(0, 2, 1, 3).reshape(6 * n, 6 * n)
    eig = torch.linalg.eigvalsh(0.5 * (K + K.T))
    assert eig.min() > -1e-8 * eig.max(), (float(eig.min()), float(eig.max()))
    assert np.isfinite(eig.numpy()).all()
