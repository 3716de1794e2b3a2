"""Baseline kernels compared with LIP in Giacomuzzo et al. (Sec. V), plus the friction kernel (eq 34).

- SE: one GP per joint, ARD squared-exponential on x = [q, dq, ddq] (eq 4).
- GIP (Dalla Libera & Carli 2019): one GP per joint, a degree-1 polynomial kernel (with offset) on
  [ddq, dq_k dq_l] times prod_j of a squared (degree-2) polynomial kernel on (sin q_j, cos q_j).
- LSE (Cheng & Huang 2015): one ARD-SE kernel on the Lagrangian over z = [cos q, sin q, dq], pushed
  through the same operator G as LIP (autodiff, :mod:`idyn_ros.models.gp.operator`).
- Friction (eq 34): per joint, linear in phi = [dq_i, tanh(dq_i / eps)] plus an SE on x; added to the
  diagonal blocks only (no cross-joint terms).

Independent kernels return (n, N1, N2) (one Gram matrix per joint); multi-output ones (N1, N2, n, n).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from idyn_ros.models.gp.operator import operator_kernel

Tensor = torch.Tensor

# Decision: sign(dq) is replaced by tanh(dq / 0.01) (rad/s): differentiable, and equal to sign(dq)
# within 1e-4 for |dq| > 0.05 rad/s; the paper leaves dq ~ 0 open (summary sec. 7.3).
COULOMB_EPS = 0.01


def _sq_dist(x1: Tensor, x2: Tensor, inv_l2: Tensor) -> Tensor:
    """sum_d (x1_d - x2_d)^2 / l_d^2 with inv_l2 (..., D): x1 (N1, D), x2 (N2, D) -> (..., N1, N2)."""
    d = x1[:, None, :] - x2[None, :, :]  # (N1, N2, D)
    return torch.einsum("abd,...d->...ab", d * d, inv_l2)


class SEKernel(torch.nn.Module):
    """ARD-SE per joint: k_i = s_i exp(-sum_d (x_d - x'_d)^2 / l_id^2) on x = [q, dq, ddq] (eq 4)."""

    multi_output = False

    def __init__(self, n: int, x_std: Tensor | None = None, y_std: Tensor | None = None):
        super().__init__()
        self.n = n
        dt = torch.float64
        ls = x_std.clamp_min(1e-3) if x_std is not None else torch.ones(3 * n, dtype=dt)
        self.log_l = torch.nn.Parameter(torch.log(ls).expand(n, 3 * n).clone())
        sc = y_std.clamp_min(1e-3) if y_std is not None else torch.ones(n, dtype=dt)
        self.log_s = torch.nn.Parameter(torch.log(sc**2).clone())  # scale initialised to var(tau_i)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """(N1, 3n), (N2, 3n) -> (n, N1, N2)."""
        return self.log_s.exp()[:, None, None] * torch.exp(-_sq_dist(x1, x2, torch.exp(-2 * self.log_l)))

    def diag(self, x: Tensor) -> Tensor:
        """Prior variance (n, N)."""
        return self.log_s.exp()[:, None].expand(self.n, x.shape[0])


class GIPKernel(torch.nn.Module):
    """GIP per joint: (s0 + sum_k a_k ddq_k ddq'_k + sum_{k<=l} b_kl dq_k dq_l dq'_k dq'_l)
    * prod_j (a_j s_j s'_j + b_j c_j c'_j + e_j)^2 (revolute; prismatic: (a q q' + e)^2)."""

    multi_output = False

    def __init__(self, n: int, prismatic: Sequence[bool] | None = None):
        super().__init__()
        self.n = n
        dt = torch.float64
        iu = torch.triu_indices(n, n)
        self.register_buffer("iu", iu)
        npair = iu.shape[1]
        self.log_s0 = torch.nn.Parameter(torch.zeros(n, dtype=dt))
        self.log_acc = torch.nn.Parameter(torch.zeros(n, n, dtype=dt))
        self.log_vel = torch.nn.Parameter(torch.zeros(n, npair, dtype=dt))
        self.log_a = torch.nn.Parameter(torch.zeros(n, n, dtype=dt))
        self.log_b = torch.nn.Parameter(torch.zeros(n, n, dtype=dt))
        self.log_e = torch.nn.Parameter(torch.zeros(n, n, dtype=dt))
        pr = torch.tensor(list(prismatic) if prismatic is not None else [False] * n, dtype=torch.bool)
        self.register_buffer("prismatic", pr)

    def _linear_part(self, x1: Tensor, x2: Tensor) -> Tensor:
        n = self.n
        dq1, ddq1 = x1[:, n : 2 * n], x1[:, 2 * n :]
        dq2, ddq2 = x2[:, n : 2 * n], x2[:, 2 * n :]
        p1 = dq1[:, self.iu[0]] * dq1[:, self.iu[1]]  # (N1, npair)
        p2 = dq2[:, self.iu[0]] * dq2[:, self.iu[1]]
        lin = torch.einsum("ak,bk,ik->iab", ddq1, ddq2, self.log_acc.exp())
        lin = lin + torch.einsum("ak,bk,ik->iab", p1, p2, self.log_vel.exp())
        return lin + self.log_s0.exp()[:, None, None]

    def _trig_part(self, q1: Tensor, q2: Tensor) -> Tensor:
        a, b, e = (t.exp()[:, None, None, :] for t in (self.log_a, self.log_b, self.log_e))  # (n,1,1,n)
        qa, qb = q1[None, :, None, :], q2[None, None, :, :]
        rev = a * torch.sin(qa) * torch.sin(qb) + b * torch.cos(qa) * torch.cos(qb) + e
        P = torch.where(self.prismatic, a * qa * qb + e, rev)
        return (P * P).prod(-1)  # (n, N1, N2)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        """(N1, 3n), (N2, 3n) -> (n, N1, N2)."""
        return self._linear_part(x1, x2) * self._trig_part(x1[:, : self.n], x2[:, : self.n])

    def diag(self, x: Tensor) -> Tensor:
        return torch.stack([torch.diagonal(k) for k in self.forward(x, x)])


class LSEKernel(torch.nn.Module):
    """LSE: k_L = s exp(-sum_d (z_d - z'_d)^2 / l_d^2), z = [cos q, sin q, dq]; torques via G (autodiff)."""

    multi_output = True

    def __init__(self, n: int, dq_std: Tensor | None = None):
        super().__init__()
        self.n = n
        dt = torch.float64
        l0 = torch.ones(3 * n, dtype=dt)
        if dq_std is not None:
            l0[2 * n :] = dq_std.clamp_min(1e-2)
        self.log_l = torch.nn.Parameter(torch.log(l0))
        self.log_s = torch.nn.Parameter(torch.zeros((), dtype=dt))

    def energy(self, qa: Tensor, dqa: Tensor, qb: Tensor, dqb: Tensor) -> Tensor:
        za = torch.cat([torch.cos(qa), torch.sin(qa), dqa])
        zb = torch.cat([torch.cos(qb), torch.sin(qb), dqb])
        d = za - zb
        return self.log_s.exp() * torch.exp(-(d * d * torch.exp(-2 * self.log_l)).sum())

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return operator_kernel(self.energy, x1, x2, self.n)

    def diag_blocks(self, x: Tensor) -> Tensor:
        import torch.func as tf

        from idyn_ros.models.gp.operator import operator_block

        return tf.vmap(lambda a: operator_block(self.energy, a, a, self.n))(x)


class FrictionKernel(torch.nn.Module):
    """Per-joint friction/unmodelled kernel (eq 34): phi_i' S_i phi_i + optional SE on x.

    phi_i = [dq_i, tanh(dq_i / COULOMB_EPS)] (viscous, Coulomb). Returns the diagonal (n, N1, N2).
    """

    def __init__(self, n: int, se: bool = True, x_std: Tensor | None = None, y_std: Tensor | None = None):
        super().__init__()
        self.n = n
        dt = torch.float64
        self.log_fv = torch.nn.Parameter(torch.zeros(n, dtype=dt))
        self.log_fc = torch.nn.Parameter(torch.zeros(n, dtype=dt))
        self.se = SEKernel(n, x_std, y_std) if se else None
        if self.se is not None:
            with torch.no_grad():
                self.se.log_s -= 2 * torch.log(torch.tensor(10.0))  # start the residual SE small (1/10 std)

    def features(self, x: Tensor) -> tuple[Tensor, Tensor]:
        dq = x[:, self.n : 2 * self.n]
        return dq, torch.tanh(dq / COULOMB_EPS)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        v1, c1 = self.features(x1)
        v2, c2 = self.features(x2)
        K = self.log_fv.exp()[:, None, None] * (v1.T[:, :, None] * v2.T[:, None, :])
        K = K + self.log_fc.exp()[:, None, None] * (c1.T[:, :, None] * c2.T[:, None, :])
        if self.se is not None:
            K = K + self.se(x1, x2)
        return K
