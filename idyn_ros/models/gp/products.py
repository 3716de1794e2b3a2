"""Derivatives of products of per-joint kernel factors, without division.

Every polynomial kernel used here (LIP kinetic/potential, GIP) is a product over joints of factors
w_k(q_k, q'_k). The Lagrange operator needs W = prod_k w_k, its gradients in q and q' and the mixed
Hessian d2W/dq dq'. We build them from prefix/suffix products ("product of all factors except l, m")
instead of W / w_l, because a factor can be exactly zero (e.g. a s s' + b c c' + e at opposite angles).

Works with torch (training, export) through plain elementwise ops and Python loops over the joints
(n <= 7), so the same code exports to ONNX without CumProd (which ONNX lacks).
"""

from __future__ import annotations

import torch


def diag_embed(d: torch.Tensor) -> torch.Tensor:
    """(..., m) -> (..., m, m) diagonal matrices (ONNX-exportable, unlike torch.diag_embed)."""
    return d[..., None] * torch.eye(d.shape[-1], dtype=d.dtype, device=d.device)


def exclusion_products(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Products of all factors but one / but two.

    Args:
        w: (..., m) factors.

    Returns:
        excl1 (..., m) with excl1[l] = prod_{k != l} w_k, and excl2 (..., m, m) with
        excl2[l, m] = prod_{k not in {l, m}} w_k (diagonal = excl1).
    """
    m = w.shape[-1]
    cols = [w[..., k] for k in range(m)]
    one = torch.ones_like(cols[0])
    pre = [one]
    for k in range(m - 1):
        pre.append(pre[-1] * cols[k])
    suf = [one] * m
    for k in range(m - 2, -1, -1):
        suf[k] = suf[k + 1] * cols[k + 1]
    excl1 = [pre[k] * suf[k] for k in range(m)]
    rows: list[list[torch.Tensor]] = [[one] * m for _ in range(m)]
    for l in range(m):
        rows[l][l] = excl1[l]
        mid = one
        for j in range(l + 1, m):
            val = pre[l] * mid * suf[j]
            rows[l][j] = val
            rows[j][l] = val
            mid = mid * cols[j]
    excl2 = torch.stack([torch.stack(r, dim=-1) for r in rows], dim=-2)
    return torch.stack(excl1, dim=-1), excl2


def product_derivatives(
    w: torch.Tensor, w10: torch.Tensor, w01: torch.Tensor, w11: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """W = prod_k w_k and its derivatives, where factor k depends only on (q_k, q'_k).

    Args:
        w, w10, w01, w11: (..., m) factor values and dw/dq_k, dw/dq'_k, d2w/dq_k dq'_k.

    Returns:
        W (...), dW/dq (..., m), dW/dq' (..., m), d2W/dq dq' (..., m, m) with [l, j] = d2W/dq_l dq'_j.
    """
    excl1, excl2 = exclusion_products(w)
    W = excl1[..., 0] * w[..., 0]
    g1 = w10 * excl1
    g2 = w01 * excl1
    H = w10[..., :, None] * w01[..., None, :] * excl2 + diag_embed((w11 - w10 * w01) * excl1)
    return W, g1, g2, H


def excluded_dual_sums(w: torch.Tensor, zs: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """excl1[l] = prod_{k != l} w_k and, for each z, D[l] = sum_{m != l} prod_{k not in {l, m}} w_k z_m.

    D[l] is the first-order (epsilon) part of prod_{k != l} (w_k + eps z_k): prefix/suffix products in
    dual numbers give it in O(m) per vector instead of forming excl2 (O(m^2)). Used for the exact
    alpha-contracted posterior mean (H y products without the Hessian matrix).

    Args:
        w: (..., m) factors; zs: list of (..., m) tangent vectors.
    """
    m = w.shape[-1]
    cols = [w[..., k] for k in range(m)]
    zc = [[z[..., k] for k in range(m)] for z in zs]
    one = torch.ones_like(cols[0])
    zero = torch.zeros_like(cols[0])
    pre0, pre1 = [one], [[zero] for _ in zs]
    for k in range(m - 1):
        for d in range(len(zs)):
            pre1[d].append(pre1[d][-1] * cols[k] + pre0[-1] * zc[d][k])
        pre0.append(pre0[-1] * cols[k])
    suf0 = [one] * m
    suf1 = [[zero] * m for _ in zs]
    for k in range(m - 2, -1, -1):
        for d in range(len(zs)):
            suf1[d][k] = suf1[d][k + 1] * cols[k + 1] + suf0[k + 1] * zc[d][k + 1]
        suf0[k] = suf0[k + 1] * cols[k + 1]
    excl1 = torch.stack([pre0[k] * suf0[k] for k in range(m)], dim=-1)
    duals = [torch.stack([pre0[k] * suf1[d][k] + pre1[d][k] * suf0[k] for k in range(m)], dim=-1)
             for d in range(len(zs))]
    return excl1, duals


def hessian_products(
    w: torch.Tensor, w10: torch.Tensor, w01: torch.Tensor, w11: torch.Tensor, ys: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """W, dW/dq, dW/dq' and H y = (d2W/dq dq') y for each y, without forming H.

    (H y)_l = w10_l D_l(w01 * y) + w11_l excl1_l y_l, with D from :func:`excluded_dual_sums`.
    """
    excl1, duals = excluded_dual_sums(w, [w01 * y for y in ys])
    W = excl1[..., 0] * w[..., 0]
    Hy = [w10 * d + w11 * excl1 * y for d, y in zip(duals, ys, strict=True)]
    return W, w10 * excl1, w01 * excl1, Hy
