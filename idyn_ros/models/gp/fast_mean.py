"""Exact alpha-contracted LIP posterior mean with every training-only quantity precomputed (export "fast" form).

tau(x) = sum_n K(x, x_n) alpha_n for the LIP kernel (:mod:`idyn_ros.models.gp.lip`): the same terms as
:meth:`LIPKernel.blocks` contracted with alpha (:meth:`LIPKernel.contracted_mean_reference`), only evaluated
in another order, so that the query-dependent work is a short chain of large float64 ops with the training
index N last (ONNX Runtime cost is set by the elements touched, ~0.35 ns each, plus ~0.5 us per node):

- layout (B, joint j, link l, component c, N); the potential k_U is an extra "link" l = n over all joints,
  so kinetic and potential factors share one pipeline; joints after a link have factor 1;
- per (j, l, N) the factor w (Q^2 kinetic, P potential) and the halved derivatives wh10, wh11 and the
  tangents z = w01 (dq', alpha) are sums over <= 6 rank-1 monomials (query feature of (sin q_j, cos q_j)
  x training constant), i.e. one small batched MatMul each with constant coefficients;
- W = prod_j w_j, the exclusion products E0_i = prod_{k != i} w_k and the dual sums
  D_i(z) = sum_{m != i} z_m prod_{k not in {i, m}} w_k come from one prefix and one suffix pass in dual
  numbers (w, z), division-free (a factor can vanish);
- the Jacobian rows G = dW/dq, H = (H dq', H alpha) (halved) give every term: their dq-contractions
  (W_dq, W_dd, dq H alpha; MatMul), their kappa-contraction over (l, N) (the per-joint terms
  -2 E u'a g1 - 2 A u'a H dq' + A^2 H alpha + H_U alpha; MatMul), and link scalars S1..S3 (bilinear in
  [A, E, u'a, B, C, b'a] and the W-scalars) contracted with 2 v_li {alpha, ddq', dq'}_ni.

All derivative factors are halved (wh = w'/2, the 2 is folded into the contractions) to save multiplies.
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor


class LIPFastMean(torch.nn.Module):
    """sum_n K_LIP(x, x_n) alpha_n for a fixed training set; forward (B, 3n) -> (B, n), float64.

    Args:
        kernel: a :class:`~idyn_ros.models.gp.lip.LIPKernel` (its current hyperparameters are baked in).
        X: (N, 3n) training inputs; alpha: (N, n) posterior weights.
    """

    def __init__(self, kernel: torch.nn.Module, X: Tensor, alpha: Tensor):
        super().__init__()
        n = kernel.n
        self.n = n
        Lp = n + 1  # n kinetic links + the potential
        dt = X.dtype
        with torch.no_grad():
            X, alpha = X.detach(), alpha.detach()
            qb, dqb, ddqb = X[:, :n], X[:, n : 2 * n], X[:, 2 * n : 3 * n]
            pr = kernel.prismatic.detach()
            tril = kernel.tril
            # weights per (link, joint), links 0..n-1 kinetic, link n potential: (Lp, n)
            ka, kb, ke = (torch.where(tril, p.exp(), torch.zeros_like(p)) for p in
                          (kernel.log_ka, kernel.log_kb, kernel.log_ke))
            a = torch.cat([ka, kernel.log_ua.exp()[None]], 0).T[:, :, None]  # (n, Lp, 1)
            b = torch.cat([kb, kernel.log_ub.exp()[None]], 0).T[:, :, None]
            e = torch.cat([ke, kernel.log_ue.exp()[None]], 0).T[:, :, None]
            kin = torch.cat([tril, torch.zeros(1, n, dtype=torch.bool)], 0).T[:, :, None]  # (n, Lp, 1)
            pot = torch.zeros(n, Lp, 1, dtype=torch.bool)
            pot[:, n] = True
            # Factor Q = a u1 + b u2 + e with u1 = F1 F1', u2 = F2 F2' (F1, F2 = sin, cos revolute; q, 0
            # prismatic; d = d/dq). Kinetic w = Q^2 and the halved derivatives wh10 = Q Q10, wh01 = Q Q01,
            # wh11 = Q10 Q01 + Q Q11 are quadratic in (a, b, e); potential w = P, wh = P'/2 are linear. Each
            # is sum_k coef_k[j, l] qf_k[j] tf_k[j, N] with rank-1 monomials (query feature x training feature),
            # so one small MatMul per quantity over K <= 6 monomials (coefficients zero for j > l: w = 1).
            zero, one = torch.zeros_like(a), torch.ones_like(a)
            quad = lambda c2, cab, ca, cb, ce: torch.where(  # noqa: E731
                kin, torch.cat([a * a * c2, a * b * cab, b * b * c2, a * e * ca, b * e * cb, e * e * ce], -1),
                torch.where(pot, torch.cat([zero, zero, zero, a, b, e], -1),
                            torch.cat([zero, zero, zero, zero, zero, one * ce], -1)))
            self.register_buffer("cw", quad(1.0, 2.0, 2.0, 2.0, 1.0).contiguous(), persistent=False)
            c5 = quad(1.0, 1.0, 1.0, 1.0, 0.0)[..., :5]
            c5 = torch.where(pot, 0.5 * c5, c5)
            self.register_buffer("c5", c5.contiguous(), persistent=False)  # (n, Lp, 5) for wh10, wh01, wh11
            # training features (n, N): F1', F2', F1d', F2d'
            s2, c2, q2 = torch.sin(qb).T, torch.cos(qb).T, qb.T
            pv = pr[:, None]
            F1, F2 = torch.where(pv, q2, s2), torch.where(pv, 0.0, c2)
            F1d, F2d = torch.where(pv, 1.0, c2), torch.where(pv, 0.0, -s2)
            ones = torch.ones_like(s2)
            st = lambda *t: torch.stack(t, 1)  # noqa: E731  -> (n, K, N)
            self.register_buffer("tw", st(F1 * F1, F1 * F2, F2 * F2, F1, F2, ones).contiguous(), persistent=False)
            self.register_buffer("t10", st(F1 * F1, F1 * F2, F2 * F2, F1, F2).contiguous(), persistent=False)
            t01 = st(F1 * F1d, F1 * F2d + F2 * F1d, F2 * F2d, F1d, F2d)
            y2 = torch.stack([dqb.T, alpha.T], 1)[:, None, :, :]  # (n, 1, 2, N): (dq', alpha)
            # tangents z = w01 (dq', alpha) = 2 wh01 (dq', alpha), (n, 5, 2 N)
            self.register_buffer("tz", (2 * t01[:, :, None, :] * y2).reshape(n, 5, -1).contiguous(), persistent=False)
            self.register_buffer("t11", t01.contiguous(), persistent=False)
            # query features [F1, F2, F1d, F2d, 1] = [s, c, q] @ Mq + mq, then their products per monomial
            prf = pr.to(dt)
            r = 1.0 - prf
            Mq = torch.zeros(n, 3, 5, dtype=dt)
            mq = torch.zeros(n, 1, 5, dtype=dt)
            Mq[:, 0, 0], Mq[:, 2, 0] = r, prf  # F1 = sin q | q
            Mq[:, 1, 1] = r  # F2 = cos q | 0
            Mq[:, 1, 2], mq[:, 0, 2] = r, prf  # F1d = cos q | 1
            Mq[:, 0, 3] = -r  # F2d = -sin q | 0
            mq[:, 0, 4] = 1.0
            self.register_buffer("Mq", Mq, persistent=False)
            self.register_buffer("mq", mq, persistent=False)
            # monomial query parts from the outer product f f^T (25) -> w: 6 | wh10: 5 | wh01: 5 | wh11: 5
            P = torch.zeros(5, 5, 21, dtype=dt)
            i1, i2, i1d, i2d, i0 = range(5)
            for k, (x, y) in enumerate([(i1, i1), (i1, i2), (i2, i2), (i1, i0), (i2, i0), (i0, i0)]):
                P[x, y, k] = 1.0  # w: F1^2, F1 F2, F2^2, F1, F2, 1
            for k, terms in enumerate([[(i1, i1d)], [(i1, i2d), (i2, i1d)], [(i2, i2d)], [(i1d, i0)], [(i2d, i0)]]):
                for x, y in terms:
                    P[x, y, 6 + k] += 1.0  # wh10: F1 F1d, F1 F2d + F2 F1d, F2 F2d, F1d, F2d
            for k, (x, y) in enumerate([(i1, i1), (i1, i2), (i2, i2), (i1, i0), (i2, i0)]):
                P[x, y, 11 + k] = 1.0  # wh01: F1^2, F1 F2, F2^2, F1, F2
            for k, terms in enumerate([[(i1, i1d)] * 2, [(i1d, i2), (i1, i2d)], [(i2, i2d)] * 2, [(i1d, i0)],
                                       [(i2d, i0)]]):
                for x, y in terms:
                    P[x, y, 16 + k] += 1.0  # wh11: 2 F1 F1d, F1d F2 + F1 F2d, 2 F2 F2d, F1d, F2d
            self.register_buffer("Pq", P.reshape(25, 21), persistent=False)
            self.register_buffer("y2", y2.contiguous(), persistent=False)
            # link scalars X = [A, E, u'a, B, C, b'a] (Lp, 6, N): (v [dq; ddq]) @ (dq', ddq', alpha)^T
            v = torch.where(tril, kernel.log_v.exp(), torch.zeros_like(kernel.log_v))
            vp = torch.cat([v, torch.zeros(1, n, dtype=dt)], 0)  # (Lp, n), potential row 0
            self.register_buffer("vp", vp[:, None, :].contiguous(), persistent=False)  # (Lp, 1, n)
            self.register_buffer("train3", torch.cat([dqb.T, ddqb.T, alpha.T], 1).contiguous(), persistent=False)
            # S = [S1, S2, S3] = C18 . (X_a Z_b) with Z = [W_dq, W_dd, dqHa, W, W_d', g2a]:
            #   S1 = E W_dq + A W_dd + C W + B W_d', S2 = u'a W_dq + b'a W, S3 = u'a W_dd - A dqHa + b'a W_d' - B g2a
            C9 = torch.zeros(3, 3, 3, dtype=dt)
            C9[0, 1, 0] = C9[0, 0, 1] = C9[1, 2, 0] = C9[2, 2, 1] = 1.0
            C9[2, 0, 2] = -1.0
            self.register_buffer("C18", torch.cat([C9.reshape(3, 9)] * 2, 1), persistent=False)
            # kappa = 2 (-2 E u'a, -2 A u'a, A^2) (+ 2 H_U alpha on the potential link)
            self.register_buffer("kapc", torch.tensor([-4.0, -4.0, 2.0], dtype=dt)[:, None], persistent=False)
            kap2 = torch.zeros(Lp, 3, 1, dtype=dt)
            kap2[n, 2] = 2.0
            self.register_buffer("kap_pot", kap2, persistent=False)
            # S terms: tau_i += sum_{l,N} 2 v_li [alpha S1 + ddq' S2 + dq' S3]_Ni
            self.register_buffer("v2T", (2 * vp).T.contiguous(), persistent=False)  # (n, Lp)
            self.register_buffer("ytab", torch.cat([alpha.T, ddqb.T, dqb.T], 1).contiguous(), persistent=False)

    def forward(self, xs: Tensor) -> Tensor:
        n = self.n
        Bq = xs.shape[0]
        q = xs[:, :n]
        u = torch.stack([torch.sin(q), torch.cos(q), q], -1)[:, :, None, :]  # (B, n, 1, 3)
        f = u @ self.Mq + self.mq  # (B, n, 1, 5): F1, F2, F1d, F2d, 1
        qf = (f.reshape(Bq, n, 5, 1) * f).reshape(Bq, n, 1, 25) @ self.Pq  # (B, n, 1, 21)
        qw, q10, q01, q11 = torch.split(qf.reshape(Bq, n, 21, 1), [6, 5, 5, 5], dim=2)
        # factor products, layout (B, j, Lp, c, N)
        w = (self.cw @ (qw * self.tw)).reshape(Bq, n, n + 1, 1, -1)
        wh10 = (self.c5 @ (q10 * self.t10)).reshape(Bq, n, n + 1, 1, -1)
        zt = (self.c5 @ (q01 * self.tz)).reshape(Bq, n, n + 1, 2, -1)  # tangents (w01 dq', w01 alpha)
        wh11 = (self.c5 @ (q11 * self.t11)).reshape(Bq, n, n + 1, 1, -1)
        if n == 1:
            return self._tail(xs, w, zt, torch.ones_like(w), torch.zeros_like(zt), wh10, wh11)
        ws = torch.split(w, 1, dim=1)
        zs = torch.split(zt, 1, dim=1)
        # prefix products in dual numbers: pre_j = prod_{k<j} (w_k + eps z_k)
        p0, pd = [None] * n, [None] * n
        p0[1], pd[1] = ws[0], zs[0]
        for j in range(1, n - 1):
            p0[j + 1] = p0[j] * ws[j]
            pd[j + 1] = pd[j] * ws[j] + p0[j] * zs[j]
        # suffix products: suf_j = prod_{k>j}
        s0, sd = [None] * n, [None] * n
        s0[n - 2], sd[n - 2] = ws[n - 1], zs[n - 1]
        for j in range(n - 3, -1, -1):
            s0[j] = s0[j + 1] * ws[j + 1]
            sd[j] = sd[j + 1] * ws[j + 1] + s0[j + 1] * zs[j + 1]
        # full products (W, W_d', g2.alpha) per link
        W = s0[0] * ws[0]
        Wd = sd[0] * ws[0] + s0[0] * zs[0]  # (B, 1, Lp, 2, N)
        E0 = torch.cat([s0[0]] + [p0[i] * s0[i] for i in range(1, n - 1)] + [p0[n - 1]], 1)
        D = torch.cat([sd[0]] + [p0[i] * sd[i] + pd[i] * s0[i] for i in range(1, n - 1)] + [pd[n - 1]], 1)
        return self._tail(xs, W, Wd, E0, D, wh10, wh11)

    def _tail(self, xs: Tensor, W: Tensor, Wd: Tensor, E0: Tensor, D: Tensor, wh10: Tensor, wh11: Tensor) -> Tensor:
        n, Bq = self.n, xs.shape[0]
        dq = xs[:, n : 2 * n]
        # Jacobian rows (halved): G = dW/dq / 2, H = (H dq', H alpha) / 2, (B, i, Lp, 1|2, N)
        G = wh10 * E0
        H = wh10 * D + (wh11 * E0) * self.y2
        # dq-contractions over joints: W_dq = 2 dq.G, (W_dd, dq H alpha) = 2 dq.H, (B, Lp, 1|2, N)
        Lp = n + 1
        dq2 = (2 * dq)[:, None, :]  # (B, 1, n)
        Gm, Hm = G.reshape(Bq, n, -1), H.reshape(Bq, n, -1)
        Z = torch.cat([(dq2 @ Gm).reshape(Bq, Lp, 1, -1), (dq2 @ Hm).reshape(Bq, Lp, 2, -1),
                       W.reshape(Bq, Lp, 1, -1), Wd.reshape(Bq, Lp, 2, -1)], 2).reshape(Bq, Lp, 2, 1, 3, -1)
        # link scalars X = [A, E, u'a | B, C, b'a]
        X = (self.vp * xs[:, n : 3 * n].reshape(Bq, 1, 2, n)) @ self.train3  # (B, Lp, 2, 3N)
        X = X.reshape(Bq, Lp, 2, 3, 1, -1)
        S = self.C18 @ (X * Z).reshape(Bq, Lp, 18, -1)  # (B, Lp, 3, N)
        U = self.v2T @ S.reshape(Bq, Lp, -1)  # (B, n, 3N)
        tau = (U * self.ytab).sum(-1)
        # per-joint terms: sum_{l,N} kappa . (G, H1, H2)
        kap = X[:, :, 0, [1, 0, 0], 0] * (X[:, :, 0, [2, 2, 0], 0] * self.kapc) + self.kap_pot  # (B, Lp, 3, N)
        kap0, kap12 = torch.split(kap, [1, 2], 2)
        tau = tau + (Gm @ kap0.reshape(Bq, -1, 1)).reshape(Bq, n)
        tau = tau + (Hm @ kap12.reshape(Bq, -1, 1)).reshape(Bq, n)
        return tau
