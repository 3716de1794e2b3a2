"""The Lagrangian-inspired polynomial (LIP) kernel (Giacomuzzo et al., T-RO), in closed form.

The GP prior is put on the energies, T ~ GP(0, k_T), U ~ GP(0, k_U) (eq 14), so L = T - U has kernel
k_L = k_T + k_U (eq 18), and the torques tau = G[L] (eq 17) with the Euler-Lagrange operator

    G_i^x[f] = sum_l (dq_l d/dq_l + ddq_l d/ddq_l) df/ddq_i - df/dq_i        (eq 16)

get the n x n block kernel [K(x, x')]_ij = G_i^x G_j^x' k_L(x, x') (eq 19).

Derivatives: we derived G G' k by hand for the product structure of the LIP kernel (formulas next to
the code) instead of generating code with SymPy or differentiating with autograd at run time. The
autodiff reference in :mod:`idyn_ros.models.gp.operator` checks every block in the tests, and the
closed form is ~380x faster at 7 DoF (studies/gp_lip/README.md, kernel_timing).

Kernels (all hyperparameters positive through exp, initialised to 1 as in the paper):
- potential (eq 21): k_U = prod_j (a_j s_j s'_j + b_j c_j c'_j + e_j)   (revolute)
                                    (a_j q_j q'_j + e_j)                 (prismatic);
- kinetic (eq 24): k_T = sum_i (sum_{k<=i} v_ik dq_k dq'_k)^2 prod_{j<=i} (a_ij s s' + b_ij c c' + e_ij)^2
  (prismatic: (a_ij q q' + e_ij)^2).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from idyn_ros.models.gp.products import diag_embed, hessian_products, product_derivatives

Tensor = torch.Tensor


def split_x(x: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """x = [q, dq, ddq] (..., 3n) -> q, dq, ddq (..., n) (rad, rad/s, rad/s^2)."""
    return x[..., :n], x[..., n : 2 * n], x[..., 2 * n : 3 * n]


def joint_factors(
    q1: Tensor, q2: Tensor, a: Tensor, b: Tensor, e: Tensor, prismatic: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per-joint inhomogeneous degree-1 polynomial kernel P and its derivatives (eq 8 with p=1).

    Revolute: P = a s s' + b c c' + e on (sin q, cos q); prismatic: P = a q q' + e.

    Returns:
        P, dP/dq, dP/dq', d2P/dq dq' with the broadcast shape of the inputs.
    """
    s1, c1, s2, c2 = torch.sin(q1), torch.cos(q1), torch.sin(q2), torch.cos(q2)
    P = torch.where(prismatic, a * q1 * q2 + e, a * s1 * s2 + b * c1 * c2 + e)
    P10 = torch.where(prismatic, a * q2, a * c1 * s2 - b * s1 * c2)
    P01 = torch.where(prismatic, a * q1, a * s1 * c2 - b * c1 * s2)
    P11 = torch.where(prismatic, a + 0.0 * q1 * q2, a * c1 * c2 + b * s1 * s2)
    return P, P10, P01, P11


class LIPKernel(torch.nn.Module):
    """LIP block kernel for an n-DoF serial arm (revolute and prismatic joints).

    Hyperparameters (log): ``log_v`` (n, n) velocity weights v_ik (link i, joint k<=i), ``log_ka``,
    ``log_kb``, ``log_ke`` (n, n) kinetic sin/cos/offset weights (link i, joint j<=i; for a prismatic
    joint ``log_ka`` is the linear weight), ``log_ua``, ``log_ub``, ``log_ue`` (n,) potential weights.
    Entries above the diagonal of the (n, n) tables are unused (masked).
    """

    multi_output = True

    def __init__(self, n: int, prismatic: Sequence[bool] | None = None, dtype: torch.dtype = torch.float64):
        super().__init__()
        self.n = n
        z2 = torch.zeros(n, n, dtype=dtype)
        z1 = torch.zeros(n, dtype=dtype)
        self.log_v = torch.nn.Parameter(z2.clone())
        self.log_ka = torch.nn.Parameter(z2.clone())
        self.log_kb = torch.nn.Parameter(z2.clone())
        self.log_ke = torch.nn.Parameter(z2.clone())
        self.log_ua = torch.nn.Parameter(z1.clone())
        self.log_ub = torch.nn.Parameter(z1.clone())
        self.log_ue = torch.nn.Parameter(z1.clone())
        pr = torch.tensor(list(prismatic) if prismatic is not None else [False] * n, dtype=torch.bool)
        self.register_buffer("prismatic", pr)
        # link i sees joints k <= i (Prop. 2: T_i depends on joints 1..i only)
        self.register_buffer("tril", torch.tril(torch.ones(n, n, dtype=torch.bool)))

    def num_hyperparameters(self) -> int:
        """Active hyperparameters (paper count: 102 for 6 DoF, 133 for 7 DoF, all revolute)."""
        n, n_pr = self.n, int(self.prismatic.sum())
        tri = n * (n + 1) // 2
        # prismatic joints have no 'b' weight; count per (link, joint) pair and per joint
        pr_pairs = int((self.tril & self.prismatic[None, :]).sum())
        return tri + 3 * tri - pr_pairs + 3 * n - n_pr

    # ------------------------------------------------------------------ pieces
    def _kinetic_products(self, qa: Tensor, qb: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """W_i = prod_{j<=i} Q_ij^2 and derivatives, shapes (..., L) / (..., L, n) / (..., L, n, n)."""
        return product_derivatives(*self._kinetic_factors(qa, qb))

    def _kinetic_factors(self, qa: Tensor, qb: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Per (link, joint) factors w = Q^2 and derivatives (..., L, n); 1/0 for joints after the link."""
        a, b, e = self.log_ka.exp(), self.log_kb.exp(), self.log_ke.exp()  # (L, n)
        Q, Q10, Q01, Q11 = joint_factors(qa[..., None, :], qb[..., None, :], a, b, e, self.prismatic)
        # w = Q^2 (eq 24: squared inhomogeneous kernel, degree <= 2 in s, c)
        w, w10, w01 = Q * Q, 2 * Q * Q10, 2 * Q * Q01
        w11 = 2 * (Q10 * Q01 + Q * Q11)
        m = self.tril
        w = torch.where(m, w, torch.ones_like(w))  # joints after link i do not enter T_i
        zero = torch.zeros_like(w)
        w10, w01, w11 = torch.where(m, w10, zero), torch.where(m, w01, zero), torch.where(m, w11, zero)
        return w, w10, w01, w11

    def _potential_products(self, qa: Tensor, qb: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """k_U = prod_j P_j (eq 21) and derivatives, (...), (..., n), (..., n), (..., n, n)."""
        P = joint_factors(qa, qb, self.log_ua.exp(), self.log_ub.exp(), self.log_ue.exp(), self.prismatic)
        return product_derivatives(*P)

    def _vel_weights(self) -> Tensor:
        return torch.where(self.tril, self.log_v.exp(), torch.zeros_like(self.log_v))  # (L, n)

    # ------------------------------------------------------------------ kernels
    def blocks(self, xa: Tensor, xb: Tensor) -> Tensor:
        """[K(xa, xb)]_ij = G_i^xa G_j^xb (k_T + k_U) (eq 19); xa, xb broadcastable (..., 3n) -> (..., n, n).

        With u = D dq', u' = D dq, b' = D ddq (D = diag(v_i.)), A = dq'D dq, B = ddq'D dq, C = ddq'D ddq,
        E = dq'D ddq (primes = second argument x') and W derivatives W_dq = dq.dW/dq etc.:
          K_ij = 2 v_i d_ij (C W + E W_dq + B W_d' + A W_dd') + 2 v_i ddq'_i (b'_j W + u'_j W_dq)
               + 2 u_i (b'_j W_d' + u'_j W_dd') - 2 E u'_j W_qi - 2 A u'_j (H dq')_i
               - 2 u_i B W_q'j - 2 u_i A (dq H)_j + A^2 H_ij            (summed over links)
        plus d2 k_U / dq_i dq'_j for the potential.
        """
        n = self.n
        qa, dqa, ddqa = split_x(xa, n)
        qb, dqb, ddqb = split_x(xb, n)
        v = self._vel_weights()  # (L, n)
        dqa_, ddqa_, dqb_, ddqb_ = (t[..., None, :] for t in (dqa, ddqa, dqb, ddqb))  # (..., 1, n)
        u = v * dqb_  # (..., L, n)
        up = v * dqa_
        bp = v * ddqa_
        vddqb = v * ddqb_
        A = (up * dqb_).sum(-1)  # (..., L)
        B = (bp * dqb_).sum(-1)
        C = (bp * ddqb_).sum(-1)
        E = (up * ddqb_).sum(-1)
        W, g1, g2, H = self._kinetic_products(qa, qb)
        W_dq = (g1 * dqa_).sum(-1)
        W_d2 = (g2 * dqb_).sum(-1)
        Hdqb = (H * dqb_[..., None, :]).sum(-1)  # (..., L, n): (H dq')_i
        dqaH = (H * dqa_[..., :, None]).sum(-2)  # (..., L, n): (dq H)_j
        W_dd = (Hdqb * dqa_).sum(-1)
        ex = lambda t: t[..., None]  # noqa: E731  (..., L) -> (..., L, 1)
        outer = lambda a, b: torch.einsum("...li,...lj->...ij", a, b)  # noqa: E731  sum over links
        diag = diag_embed((2 * v * ex(C * W + E * W_dq + B * W_d2 + A * W_dd)).sum(-2))
        K = (
            diag
            + outer(2 * vddqb, bp * ex(W) + up * ex(W_dq))
            + outer(2 * u, bp * ex(W_d2) + up * ex(W_dd) - ex(B) * g2 - ex(A) * dqaH)
            - outer(2 * (ex(E) * g1 + ex(A) * Hdqb), up)
            + torch.einsum("...l,...lij->...ij", A * A, H)
        )
        _, _, _, HU = self._potential_products(qa, qb)
        return K + HU

    def contracted_mean(self, xs: Tensor, X: Tensor, alpha: Tensor, chunk: int = 32) -> Tensor:
        """Posterior mean sum_n K(xs, x_n) alpha_n without forming the n x n blocks (exact fast form).

        Same terms as :meth:`blocks`, contracted with alpha_n first, evaluated by
        :class:`~idyn_ros.models.gp.fast_mean.LIPFastMean` (training-only quantities precomputed; the
        module the ONNX "fast" export uses). Cost O(N n^2) per query instead of O(N n^3). Hyperparameters
        are read as constants (no gradient); :meth:`contracted_mean_reference` is the direct transcription.

        Args:
            xs: (Ns, 3n) queries; X: (N, 3n) training inputs; alpha: (N, n) posterior weights.
            chunk: queries per pass (memory ~ chunk * N * n^2 * 50 bytes).
        Returns:
            (Ns, n) torques [Nm].
        """
        from idyn_ros.models.gp.fast_mean import LIPFastMean

        fm = LIPFastMean(self, X, alpha)
        return torch.cat([fm(xs[k : k + chunk]) for k in range(0, xs.shape[0], chunk)], 0)

    def contracted_mean_reference(self, xs: Tensor, X: Tensor, alpha: Tensor) -> Tensor:
        """:meth:`contracted_mean` written term by term from :meth:`blocks` (reference for the tests).

        The Hessian of the factor product only enters through H dq' and H alpha, which dual-number
        prefix/suffix products give in O(n) (products.hessian_products).
        """
        n = self.n
        xa, xb = xs[:, None, :], X[None, :, :]
        qa, dqa, ddqa = split_x(xa, n)
        qb, dqb, ddqb = split_x(xb, n)
        al = alpha[None, :, None, :]  # (1, N, 1, n)
        v = self._vel_weights()
        dqa_, ddqa_, dqb_, ddqb_ = (t[..., None, :] for t in (dqa, ddqa, dqb, ddqb))
        u, up, bp, vddqb = v * dqb_, v * dqa_, v * ddqa_, v * ddqb_  # (Ns, N, L, n)
        A = (up * dqb_).sum(-1)
        B = (bp * dqb_).sum(-1)
        C = (bp * ddqb_).sum(-1)
        E = (up * ddqb_).sum(-1)
        dqb_L = dqb_.expand_as(u)
        al_L = al.expand_as(u)
        W, g1, g2, (Hdqb, Halpha) = hessian_products(*self._kinetic_factors(qa, qb), [dqb_L, al_L])
        W_dq = (g1 * dqa_).sum(-1)
        W_d2 = (g2 * dqb_).sum(-1)
        W_dd = (Hdqb * dqa_).sum(-1)
        upa = (up * al).sum(-1)  # u'.alpha
        bpa = (bp * al).sum(-1)  # b'.alpha
        g2a = (g2 * al).sum(-1)
        dqHa = (dqa_ * Halpha).sum(-1)  # dq H alpha
        ex = lambda t: t[..., None]  # noqa: E731
        tau = (
            2 * v * al * ex(C * W + E * W_dq + B * W_d2 + A * W_dd)
            + 2 * vddqb * ex(bpa * W + upa * W_dq)
            + 2 * u * ex(bpa * W_d2 + upa * W_dd)
            - 2 * ex(E * upa) * g1
            - 2 * ex(A * upa) * Hdqb
            - 2 * u * ex(B * g2a + A * dqHa)
            + ex(A * A) * Halpha
        ).sum((1, 2))
        Pf = joint_factors(qa, qb, self.log_ua.exp(), self.log_ub.exp(), self.log_ue.exp(), self.prismatic)
        _, _, _, (HUa,) = hessian_products(*Pf, [alpha[None].expand(xs.shape[0], -1, -1)])
        return tau + HUa.sum(1)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """Cross kernel (N1, 3n), (N2, 3n) -> (N1, N2, n, n)."""
        return self.blocks(x1[:, None, :], x2[None, :, :])

    def diag_blocks(self, x: Tensor) -> Tensor:
        """K(x_k, x_k) (N, n, n) (prior torque covariance at each input)."""
        return self.blocks(x, x)

    # ------------------------------------------------------------------ energies (Sec. III-C)
    def k_T(self, xa: Tensor, xb: Tensor) -> Tensor:
        """Kinetic prior k_T(xa, xb) (eq 24), broadcastable (..., 3n) -> (...)."""
        n = self.n
        qa, dqa, _ = split_x(xa, n)
        qb, dqb, _ = split_x(xb, n)
        A = (self._vel_weights() * dqa[..., None, :] * dqb[..., None, :]).sum(-1)
        W, _, _, _ = self._kinetic_products(qa, qb)
        return (A * A * W).sum(-1)

    def lagrangian_kernel(self):
        """k_L(q, dq, q', dq') = k_T + k_U as a scalar function (eq 18), for the autodiff operator reference."""

        def k_L(qa: Tensor, dqa: Tensor, qb: Tensor, dqb: Tensor) -> Tensor:
            z = torch.zeros_like(qa)
            return self.k_T(torch.cat([qa, dqa, z]), torch.cat([qb, dqb, z])) + self.k_U(qa, qb)

        return k_L

    def k_U(self, qa: Tensor, qb: Tensor) -> Tensor:
        """Potential prior k_U(qa, qb) (eq 21), (..., n) -> (...)."""
        return self._potential_products(qa, qb)[0]

    def cov_T_tau(self, xs: Tensor, x: Tensor) -> Tensor:
        """cov(T(xs), tau_j(x)) = G_j^x k_T(xs, x) (eq 27a), broadcastable -> (..., n).

        = sum_i [2 u'_j (E W + A W_d') - A^2 dW/dq'_j] with u' = D dq_s, E = dq_s D ddq, A = dq_s D dq.
        """
        n = self.n
        qa, dqa, _ = split_x(xs, n)
        qb, dqb, ddqb = split_x(x, n)
        v = self._vel_weights()
        up = v * dqa[..., None, :]
        A = (up * dqb[..., None, :]).sum(-1)
        E = (up * ddqb[..., None, :]).sum(-1)
        W, _, g2, _ = self._kinetic_products(qa, qb)
        W_d2 = (g2 * dqb[..., None, :]).sum(-1)
        out = 2 * up * (E * W + A * W_d2)[..., None] - (A * A)[..., None] * g2
        return out.sum(-2)

    def cov_U_tau(self, qs: Tensor, x: Tensor) -> Tensor:
        """cov(U(qs), tau_j(x)) = -G_j^x k_U(qs, x) = +dk_U(qs, q)/dq_j (eq 27b; tau = G[T - U])."""
        qb = x[..., : self.n]
        return self._potential_products(qs, qb)[2]
