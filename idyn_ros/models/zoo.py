"""The model zoo: one torch module type for every inverse-dynamics model kind.

Every model is ``tau = tau_rbd + tau_friction + tau_residual`` (Reuss et al. 2022 Eq. 11), with
parts switched off per kind, so training, evaluation and ONNX export are written once:

| kind         | RBD                        | friction      | residual                         |
|--------------|----------------------------|---------------|----------------------------------|
| rbd          | nominal or identified      | -             | -                                |
| rbd-friction | identified (SDP default)   | LS            | -                                |
| hybrid       | E2E: DiffBary, 2S: SDP     | E2E / LS      | LSTM 21->100->LSTM(50)->7 (Reuss)|
| hybrid-r     | as hybrid                  | as hybrid     | LSTM with tau_RBD and r (Callar) |
| hybrid-j     | as hybrid                  | as hybrid     | per-joint MLPs: joint j's q, dq, |
|              |                            |               | ddq, tau_RBD, r only (JointMLP); |
|              |                            |               | with ``bases`` > 1 (2S): the mean|
|              |                            |               | of fits on several physics bases |
| mlp-hybrid   | SDP (2S)                   | LS            | MLP 21->200->200->7 (Reuss)      |
| lstm         | -                          | -             | LSTM black box                   |
| delan        | DeLaN (Lutter 2019)        | learned       | -                                |
| delan-lstm   | DeLaN, trained first       | learned       | LSTM on q, dq, ddq, tau_DeLaN    |
|              | (Doenges 2025 sec. 3.2)    | (with DeLaN)  | (Doenges eq. 19), frozen DeLaN   |

``ModelConfig`` holds everything needed to rebuild a model (stored in checkpoints and ONNX metadata).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from idyn_ros.dynamics.friction import DEFAULT_KINDS, n_columns, torch_friction_torque
from idyn_ros.models import rbd
from idyn_ros.models.features import R_DEADBAND, R_LIMIT

KINDS = ("rbd", "rbd-friction", "hybrid", "hybrid-r", "hybrid-j", "mlp-hybrid", "lstm", "delan", "delan-lstm")
E2E_KINDS = ("hybrid", "hybrid-r", "hybrid-j")  # kinds whose physics part trains with the residual in mode e2e


@dataclass
class ModelConfig:
    """Everything that defines a model (architecture + training); JSON-serialisable."""

    kind: str = "hybrid"
    mode: str = "e2e"  # e2e | 2s (hybrid kinds); Reuss et al. 2022 Sec. V
    id_method: str = "sdp"  # nominal | ols | wls | sdp | diffbary | logchol (RBD of rbd*/2s models)
    friction_kinds: tuple[str, ...] = DEFAULT_KINDS
    e2e_inertial: str = "diffbary"  # diffbary | logchol: consistent parameterisation trained E2E
    linear_dim: int = 100  # Reuss Table IV: residual LSTM, 1 linear layer of 100
    hidden: int = 50  # Reuss Table IV: LSTM hidden 50
    mlp_dim: int = 200  # Reuss Table IV: residual MLP 2 x 200
    joint_dim: int = 32  # hybrid-j: width of each joint's MLP (2 hidden layers)
    # hybrid-j: + a linear term in the joint's own tau_RBD (a gain on the physics that extrapolates as the physics
    # does, where the tanh MLP saturates outside the training states)
    joint_linear: bool = False
    # hybrid-j 2S only: the residual averages this many per-joint MLPs, each fitted on another physics base
    # (``TorqueModel.average_over_bases``); 1 = one base. Assembled from fitted members, never trained as a whole.
    bases: int = 1
    delan_dim: int = 64
    window: int = 100  # Reuss Sec. IV: windows of 100 steps, hidden state reset per window
    stride: int = 100  # = window: non-overlapping
    batch: int = 16  # windows per batch (Reuss: 1000, for ~135k windows; our recordings have ~50)
    lr: float = 4e-3  # Reuss Table IV (DeLaN: 1e-3)
    epochs: int = 300
    patience: int = 30  # Reuss Sec. V: early stopping patience 30 epochs on validation loss
    lr_patience: int = 10  # ReduceLROnPlateau(factor 0.3); decision: the paper's "x0.1 after 30" is ambiguous
    weight_decay: float = 0.0  # Reuss: no regularisation mentioned; AdamW (decoupled), residual weights only
    # Decisions below measured by validation on held-out trajectories (studies/auto_selection/README.md):
    # identified: E2E starts at the id_method fit (nominal: at the URDF; val 0.0157 vs 0.0158 plant, 0.0206 vs
    # 0.0214 KUKA)
    e2e_init: str = "identified"  # nominal | identified
    # 0.3: the smallest weight that keeps the E2E physics part at its identified level (plant val physics 0.033 vs
    # 0.063 without; KUKA 0.219 vs 0.310), for a total 0.002 worse than without on both
    physics_weight: float = 0.3  # E2E: + w x loss of the physics part alone (RBD + friction must explain the data)
    # 0.2: the regulariser that helped the per-joint residual on a held-out plant trajectory (hybrid-j 2S 0.0185 ->
    # 0.0164; LSTM hybrid 2S 0.0326 -> 0.0313); weight decay and input noise did not, the magnitude penalty helped
    # only the LSTM 2S (0.0304) and hurt hybrid-j (0.0189): their fields stay, default 0
    dropout: float = 0.2  # residual network: dropout after its input layer and its LSTM/hidden layers
    input_noise: float = 0.0  # std of Gaussian noise added to the normalised residual inputs while training
    residual_penalty: float = 0.0  # + w x mean((tau_residual / training range)^2): a magnitude penalty
    gate: bool = True  # per-joint residual gate in [0, 1] fitted on validation (training.fit_residual_gate)
    reg: float | None = None  # identification prior's strength toward nominal; None: the prior's default
    id_prior: str | None = None  # ridge | geometric (SDP only); None: the method's default (identification.py)
    seed: int = 0
    rate_hz: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["friction_kinds"] = list(self.friction_kinds)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        d = dict(d)
        d["friction_kinds"] = tuple(d.get("friction_kinds", ()))
        return cls(**d)

    @property
    def has_rbd(self) -> bool:
        return self.kind in ("rbd", "rbd-friction", *E2E_KINDS, "mlp-hybrid")

    @property
    def has_friction(self) -> bool:
        return self.kind in ("rbd-friction", *E2E_KINDS, "mlp-hybrid", "delan", "delan-lstm") and bool(
            self.friction_kinds
        )

    @property
    def residual(self) -> str:
        """none | lstm | mlp | joint-mlp: the learned residual network."""
        return {"hybrid": "lstm", "hybrid-r": "lstm", "lstm": "lstm", "mlp-hybrid": "mlp",
                "hybrid-j": "joint-mlp", "delan-lstm": "lstm"}.get(self.kind, "none")

    @property
    def uses_r(self) -> bool:
        """The residual sees tau_RBD and Callar's r (Callar Eq. 4.28), r computed from q with its own state."""
        return self.kind in ("hybrid-r", "hybrid-j")

    @property
    def residual_sees_tau_rbd(self) -> bool:
        """The residual's inputs include the physics part's torque (with r: hybrid-r, hybrid-j; alone: delan-lstm)."""
        return self.uses_r or self.kind == "delan-lstm"

    @property
    def n_features_per_joint(self) -> int:
        """Residual inputs per joint: q, dq, ddq (+ tau_RBD, r for hybrid-r / hybrid-j, Callar Eq. 4.28; + tau_DeLaN
        for delan-lstm, Doenges eq. 19)."""
        return 4 + self.bases if self.uses_r else 4 if self.kind == "delan-lstm" else 3


class Normaliser(nn.Module):
    """Fixed affine maps stored as buffers (exported into the graph and in the metadata)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.register_buffer("x_mean", torch.zeros(n_in))
        self.register_buffer("x_std", torch.ones(n_in))
        self.register_buffer("y_scale", torch.ones(n_out))  # residual output scale [Nm]

    def set(self, x_mean: np.ndarray, x_std: np.ndarray, y_scale: np.ndarray) -> None:
        self.x_mean.copy_(torch.as_tensor(x_mean))
        self.x_std.copy_(torch.as_tensor(np.maximum(x_std, 1e-6)))
        self.y_scale.copy_(torch.as_tensor(np.maximum(y_scale, 1e-6)))

    def to_dict(self) -> dict[str, list[float]]:
        return {k: getattr(self, k).tolist() for k in ("x_mean", "x_std", "y_scale")}


class LSTMResidual(nn.Module):
    """Reuss Fig. 1: Linear(F->100) -> LayerNorm -> PReLU -> LSTM(50) -> Linear(50->n).

    Decision: one LayerNorm after the first Linear (the paper only says "in between the layers").
    """

    def __init__(self, n_in: int, n_out: int, linear_dim: int, hidden: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.inp = nn.Sequential(nn.Linear(n_in, linear_dim), nn.LayerNorm(linear_dim), nn.PReLU())
        self.lstm = nn.LSTM(linear_dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, n_out)
        self.drop = nn.Dropout(dropout)  # identity in eval mode, so absent from the exported graph
        self.hidden = hidden

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None) -> Any:
        y, (h, c) = self.lstm(self.drop(self.inp(x)), state)  # (B, T, H)
        return self.out(self.drop(y)), (h, c)


class MLPResidual(nn.Module):
    """Reuss Table IV residual MLP: F -> 200 -> 200 -> n with PReLU, stateless."""

    def __init__(self, n_in: int, n_out: int, dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, dim), nn.PReLU(), nn.Linear(dim, dim), nn.PReLU(),
                                 nn.Linear(dim, n_out))
        self.drop = nn.Dropout(dropout)  # after each hidden layer; identity in eval mode (and in the export)
        self.hidden = 0

    def forward(self, x: torch.Tensor, state: Any = None) -> Any:
        net = self.net
        h = self.drop(net[1](net[0](x)))
        h = self.drop(net[3](net[2](h)))
        return net[4](h), state


TAU_RBD_FEATURE = 3  # hybrid-j's per-joint features: [q, dq, ddq, tau_RBD, r]


class JointMLPResidual(nn.Module):
    """One small MLP per joint: joint j's residual from joint j's own features only (hybrid-j).

    Why: the effects left after RBD + friction in a geared joint (load-dependent gear friction via tau_RBD_j,
    torque ripple via q_j, hysteresis via r_j) are local to the joint; a network that sees every joint's state
    also fits how the joints move together on the training trajectories, which does not carry over to another
    trajectory (seen on the plant: the coupled LSTM and MLP residuals gained nothing on held-out trajectories,
    per-joint MLPs halved the physics error). Input: features (..., F n) feature-major as the other residuals
    ([q, dq, ddq, tau_RBD, r]); each joint: F -> d -> d -> 1 with tanh; the last layer starts at zero (the model
    starts as its physics part). Stateless: r carries the history. ``linear_feature`` >= 0: + w_j x that feature
    (normalised), w starting at zero.
    """

    def __init__(self, n: int, n_features: int, dim: int, dropout: float = 0.0, linear_feature: int = -1) -> None:
        super().__init__()
        self.n, self.f, self.linear_feature = n, n_features, linear_feature
        self.w1 = nn.Parameter(torch.randn(n, n_features, dim) / n_features**0.5)
        self.b1 = nn.Parameter(torch.zeros(n, 1, dim))
        self.w2 = nn.Parameter(torch.randn(n, dim, dim) / dim**0.5)
        self.b2 = nn.Parameter(torch.zeros(n, 1, dim))
        self.w3 = nn.Parameter(torch.zeros(n, dim, 1))
        self.b3 = nn.Parameter(torch.zeros(n))
        if linear_feature >= 0:
            self.w_linear = nn.Parameter(torch.zeros(n, 1))
        self.drop = nn.Dropout(dropout)
        self.hidden = 0

    def forward(self, x: torch.Tensor, state: Any = None) -> Any:
        lead = x.shape[:-1]
        xj = x.reshape(-1, self.f, self.n).permute(2, 0, 1)  # (n, M, F): a batched matmul per joint
        h = self.drop(torch.tanh(torch.matmul(xj, self.w1) + self.b1))
        h = self.drop(torch.tanh(torch.matmul(h, self.w2) + self.b2))
        out = torch.matmul(h, self.w3)[..., 0]  # (n, M)
        if self.linear_feature >= 0:
            out = out + xj[..., self.linear_feature] * self.w_linear
        y = out.transpose(0, 1) + self.b3  # (M, n)
        return y.reshape(*lead, self.n), state


class BaseAveragedResidual(nn.Module):
    """The mean of B per-joint residuals, member b fitted on physics base b and fed that base's tau_RBD. Input:
    features (..., (4 + B) n) feature-major [q, dq, ddq, tau_RBD,1 .. tau_RBD,B, r]; each member's output is scaled
    by its own training scale (``member_scale``) before the mean. The members run as one ``JointMLPResidual`` over
    B n "joints" (member b's joint j is b n + j): one batched matmul per layer, not B.

    Why: which physics base a residual extrapolates best from cannot be seen on validation that repeats training, and
    on both real arms' held-out runs the average beat every single base (studies/auto_selection/README.md).
    """

    def __init__(self, n: int, bases: int, dim: int, dropout: float = 0.0, linear: bool = False) -> None:
        super().__init__()
        self.n, self.bases, self.hidden = n, bases, 0
        self.joints = JointMLPResidual(bases * n, 5, dim, dropout, TAU_RBD_FEATURE if linear else -1)
        self.register_buffer("member_scale", torch.ones(bases, n))  # each member's output scale [Nm]

    def load_member(self, b: int, member: JointMLPResidual) -> None:
        """Copy a fitted single-base residual into member slot ``b``."""
        rows = slice(b * self.n, (b + 1) * self.n)
        for name, value in member.state_dict().items():
            getattr(self.joints, name).data[rows] = value

    def forward(self, x: torch.Tensor, state: Any = None) -> Any:
        lead, B = x.shape[:-1], self.bases
        f = x.reshape(*lead, 4 + B, self.n)
        reps = (1,) * len(lead) + (1, B)
        xb = torch.cat([f[..., 0:3, :].repeat(reps), f[..., 3 : 3 + B, :].reshape(*lead, 1, B * self.n),
                        f[..., 3 + B :, :].repeat(reps)], -2)  # (..., 5, B n): [q, dq, ddq, own tau_RBD, r]
        y, _ = self.joints(xb.reshape(*lead, 5 * B * self.n))
        return (y.reshape(*lead, B, self.n) * self.member_scale).mean(-2), state


def rotational_displacement_step(q: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One tick of Callar's r (``idyn_ros.models.features``): q (B, n) rad, state (B, 4, n) -> r (B, n), state.

    State rows: q at the last reversal, furthest q in the current direction, direction (+1, -1, 0 = not
    moving yet), started (0 = no sample yet); all zeros = fresh. Same branches as the numpy
    ``control.state_estimation.RotationalDisplacement.update``, written with where/compare only (ONNX).
    """
    anchor, extreme, direction, started = state.unbind(-2)
    fresh = started < 0.5
    anchor = torch.where(fresh, q, anchor)
    extreme = torch.where(fresh, q, extreme)
    moving = direction != 0
    further = moving & ((q - extreme) * direction >= 0)
    reverse = moving & ~further & ((extreme - q) * direction > R_DEADBAND)
    start = ~moving & ((q - anchor).abs() > R_DEADBAND)
    anchor = torch.where(reverse, extreme, anchor)
    extreme = torch.where(further | reverse | start, q, extreme)
    direction = torch.where(reverse, -direction, torch.where(start, torch.sign(q - anchor), direction))
    r = torch.where(direction != 0, (q - anchor).clamp(-R_LIMIT, R_LIMIT), torch.zeros_like(q))
    return r, torch.stack([anchor, extreme, direction, torch.ones_like(q)], -2)


def rotational_displacement(q: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Callar's r over sequences: q (B, T, n) rad -> r (B, T, n) rad and the state after the last tick."""
    B, T, n = q.shape
    state = q.new_zeros(B, 4, n) if state is None else state
    if q.dtype == torch.float64 and not (q.requires_grad or state.requires_grad):
        r, after = _rotational_displacement_floats(q.detach().cpu().numpy(), state.detach().cpu().numpy())
        return torch.from_numpy(r).to(q.device), torch.from_numpy(after).to(q.device)
    out = []
    for t in range(T):
        r, state = rotational_displacement_step(q[:, t], state)
        out.append(r)
    return torch.stack(out, 1), state


def _rotational_displacement_floats(q: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``rotational_displacement_step``'s branches on Python floats, one joint at a time: the same float64 results
    (tested), ~100x faster than stepping tensors per sample (the demo's 70k samples x 7 joints, which every hybrid-j
    fit prepares: 21.9 s -> 0.18 s)."""
    B, T, n = q.shape
    r = np.zeros((B, T, n), dtype=np.float64)
    after = np.array(state, dtype=np.float64)
    for b in range(B):
        for j in range(n):
            anchor, extreme, direction, started = after[b, :, j].tolist()
            out = [0.0] * T
            for t, x in enumerate(q[b, :, j].tolist()):
                if started < 0.5:
                    anchor = extreme = x
                    started = 1.0
                if direction != 0.0:
                    if (x - extreme) * direction >= 0.0:
                        extreme = x
                    elif (extreme - x) * direction > R_DEADBAND:
                        anchor, extreme, direction = extreme, x, -direction
                elif abs(x - anchor) > R_DEADBAND:
                    extreme = x
                    direction = 1.0 if x > anchor else -1.0
                if direction != 0.0:
                    d = x - anchor
                    out[t] = R_LIMIT if d > R_LIMIT else (-R_LIMIT if d < -R_LIMIT else d)
            r[b, :, j] = out
            after[b, :, j] = (anchor, extreme, direction, started)
    return r, after


def hold_velocity(dq: torch.Tensor, hold: torch.Tensor) -> torch.Tensor:
    """dq clipped to +-hold per joint (``TorqueModel.set_velocity_hold``; the exported step graph uses it too)."""
    return torch.minimum(torch.maximum(dq, -hold), hold)


class TorqueModel(nn.Module):
    """tau = Y(q,dq,ddq) pi + F(dq) phi + residual(q, dq, ddq [, tau_rbd, r]); see module doc."""

    def __init__(self, cfg: ModelConfig, n: int, pi_init: np.ndarray) -> None:
        super().__init__()
        self.cfg, self.n = cfg, n
        torch.manual_seed(cfg.seed)
        self.inertial = None
        if cfg.has_rbd:
            trainable = cfg.kind in E2E_KINDS and cfg.mode == "e2e"
            kind = cfg.e2e_inertial if trainable else "fixed"
            self.inertial = rbd.inertial_module(kind, pi_init, cfg.seed)
        # armature Ia (reflected rotor inertia, kg m^2): tau_RBD,j += Ia_j ddq_j (identification.py module
        # doc); identified for rbd*/2S, trained for E2E (clamped >= 0 in ``armature()``), unused without RBD
        self.ia = nn.Parameter(torch.zeros(n, dtype=torch.float64), requires_grad=cfg.has_rbd)
        B = n_columns(cfg.friction_kinds) if cfg.has_friction else 0
        self.friction = nn.Parameter(torch.zeros(n, B, dtype=torch.float64))
        if cfg.residual == "lstm":
            self.residual: nn.Module | None = LSTMResidual(
                n * cfg.n_features_per_joint, n, cfg.linear_dim, cfg.hidden, cfg.dropout
            )
        elif cfg.residual == "mlp":
            self.residual = MLPResidual(3 * n, n, cfg.mlp_dim, cfg.dropout)
        elif cfg.residual == "joint-mlp":
            linear = TAU_RBD_FEATURE if cfg.joint_linear else -1
            self.residual = (JointMLPResidual(n, cfg.n_features_per_joint, cfg.joint_dim, cfg.dropout, linear)
                             if cfg.bases == 1 else BaseAveragedResidual(n, cfg.bases, cfg.joint_dim, cfg.dropout,
                                                                         cfg.joint_linear))
        else:
            self.residual = None
        self.norm = Normaliser(n * cfg.n_features_per_joint, n)
        self.delan = DeLaN(n, cfg.delan_dim) if cfg.kind in ("delan", "delan-lstm") else None
        # the velocity hold (``set_velocity_hold``): +inf = none; rebuilt from the checkpoint's dq_abs_max on load
        self.register_buffer("dq_hold", torch.full((n,), torch.inf, dtype=torch.float64), persistent=False)
        if cfg.bases > 1:
            if cfg.kind != "hybrid-j" or cfg.mode != "2s":
                raise ValueError(f"bases > 1 is a hybrid-j 2S model (averaged over physics bases), not {cfg.kind} "
                                 f"{cfg.mode}")
            # each base's inertial parameters (flattened (n, 10)) and armature: the members' tau_RBD features
            self.register_buffer("base_pi", torch.zeros(cfg.bases, n * 10, dtype=torch.float64))
            self.register_buffer("base_ia", torch.zeros(cfg.bases, n, dtype=torch.float64))

    @classmethod
    def average_over_bases(cls, members: list[TorqueModel]) -> TorqueModel:
        """One model whose prediction is the mean of ``members``' (hybrid-j 2S fits on different physics bases, same
        training data): RBD and friction are linear in their parameters, so the physics part is the members' mean
        parameters, and the residual is ``BaseAveragedResidual`` with each member fed its own base's tau_RBD."""
        first = members[0]
        if len(members) < 2 or any(m.cfg.kind != "hybrid-j" or m.cfg.mode != "2s" or m.cfg.bases != 1 or
                                   m.cfg.friction_kinds != first.cfg.friction_kinds or
                                   m.cfg.joint_dim != first.cfg.joint_dim or
                                   m.cfg.joint_linear != first.cfg.joint_linear for m in members):
            raise ValueError("average_over_bases takes two or more hybrid-j 2S models of one architecture")
        if not all(torch.equal(m.dq_hold, first.dq_hold) for m in members):
            raise ValueError("average_over_bases: the members were trained on different data (velocity holds differ)")
        n, B = first.n, len(members)
        cfg = replace(first.cfg, bases=B)
        with torch.no_grad():
            pis = torch.stack([m.pi().double().reshape(-1) for m in members])
            out = cls(cfg, n, pis.mean(0).reshape(n, 10).numpy())
            out.base_pi.copy_(pis)
            out.base_ia.copy_(torch.stack([m.armature().double() for m in members]))
            out.ia.copy_(out.base_ia.mean(0))
            out.friction.copy_(torch.stack([m.friction.detach() for m in members]).mean(0))
            out.dq_hold.copy_(first.dq_hold)
            for b, m in enumerate(members):
                out.residual.load_member(b, m.residual)
                out.residual.member_scale[b] = m.norm.y_scale
            # features [q, dq, ddq, tau_RBD,1..B, r]: q, dq, ddq, r are the same data for every member
            mean = first.norm.x_mean.reshape(5, n)
            std = first.norm.x_std.reshape(5, n)
            x_mean = torch.cat([mean[:3], *(m.norm.x_mean.reshape(5, n)[3:4] for m in members), mean[4:]])
            x_std = torch.cat([std[:3], *(m.norm.x_std.reshape(5, n)[3:4] for m in members), std[4:]])
            out.norm.x_mean.copy_(x_mean.reshape(-1))
            out.norm.x_std.copy_(x_std.reshape(-1))
            out.norm.y_scale.fill_(1.0)
        out.freeze_physics()
        out.eval()
        return out

    # ---- parameters ----
    def pi(self) -> torch.Tensor:
        """(n, 10) inertial parameters, float64."""
        assert self.inertial is not None, "model kind without RBD"
        return self.inertial()

    def armature(self) -> torch.Tensor:
        """(n,) armature Ia >= 0 (kg m^2), float64."""
        return self.ia.clamp(min=0.0)

    def set_velocity_hold(self, dq_abs_max: np.ndarray | None) -> None:
        """Friction and residual see |dq| held to ``dq_abs_max`` (the training data's largest, per joint); RBD the
        measured dq. Decision: fitted terms do not extrapolate (closed loop on the plant, models fitted on slow data
        tracked faster moves better held, and unheld a residual ran a joint into its limit: studies/velocity_hold),
        and scoring, export and the runtime all hold the same way. Only models with
        an RBD part: the physics-like parts of lstm / DeLaN need the measured velocity."""
        with torch.no_grad():
            self.dq_hold.fill_(torch.inf)
            if dq_abs_max is not None and self.inertial is not None:
                self.dq_hold.copy_(torch.as_tensor(np.asarray(dq_abs_max, dtype=np.float64)))

    def held(self, dq: torch.Tensor) -> torch.Tensor:
        """dq held to the velocity range (``set_velocity_hold``), for friction and the residual."""
        return hold_velocity(dq, self.dq_hold.to(dq.dtype))

    def rbd_features(self, Y: torch.Tensor | None, ddq: torch.Tensor, tau_rbd: torch.Tensor) -> list[torch.Tensor]:
        """The residual's tau_RBD input(s): the model's own, or each physics base's (``average_over_bases``)."""
        if self.cfg.bases == 1:
            return [tau_rbd.detach()]
        assert Y is not None, "a model averaged over bases needs the regressor Y"
        return [torch.einsum("btnk,k->btn", Y, self.base_pi[b].to(Y.dtype)) + ddq * self.base_ia[b].to(ddq.dtype)
                for b in range(self.cfg.bases)]

    def freeze_physics(self) -> None:
        """2S training: keep identified RBD + friction fixed (Reuss Sec. V '2S')."""
        self.friction.requires_grad_(False)
        self.ia.requires_grad_(False)
        if self.inertial is not None:
            for p in self.inertial.parameters():
                p.requires_grad_(False)

    @property
    def state_size(self) -> int:
        return int(getattr(self.residual, "hidden", 0) or 0)

    # ---- forward over sequences (training / offline evaluation) ----
    def forward(
        self,
        q: torch.Tensor,
        dq: torch.Tensor,
        ddq: torch.Tensor,
        Y: torch.Tensor | None,
        state: Any = None,
        r: torch.Tensor | None = None,
    ) -> tuple[dict[str, torch.Tensor], Any]:
        """Inputs (B, T, n) (+ Y (B, T, n, 10n)); returns parts dict of (B, T, n) and next state.

        hybrid-r / hybrid-j: ``r`` (B, T, n) precomputed over the whole recording (training windows), else
        computed from q with the r state in ``state[2]`` (``state`` = (h, c, r state); h, c None when stateless).
        """
        zeros = torch.zeros_like(q)
        tau_rbd = zeros
        if self.inertial is not None:
            assert Y is not None, "RBD models need the regressor Y"
            tau_rbd = torch.einsum("btnk,k->btn", Y, self.pi().reshape(-1).to(Y.dtype)) + ddq * self.armature().to(
                ddq.dtype)
        if self.delan is not None:
            tau_rbd = self.delan(q, dq, ddq)
        dq_fit = self.held(dq)
        tau_f = zeros
        if self.friction.numel():
            tau_f = torch_friction_torque(dq_fit, self.friction.to(q.dtype), self.cfg.friction_kinds)
        tau_res = zeros
        new_state = state
        if self.residual is not None:
            feats = [q, dq_fit, ddq]
            r_state = None
            if self.cfg.uses_r:
                if r is None:
                    r, r_state = rotational_displacement(q, None if state is None else state[2])
                feats += [*self.rbd_features(Y, ddq, tau_rbd), r.to(q.dtype)]
            elif self.cfg.residual_sees_tau_rbd:
                feats.append(tau_rbd.detach())
            x = (torch.cat(feats, -1) - self.norm.x_mean) / self.norm.x_std
            if self.training and self.cfg.input_noise > 0:
                x = x + self.cfg.input_noise * torch.randn_like(x)
            lstm_state = None if state is None or state[0] is None else (state[0], state[1])
            y, hc = self.residual(x, lstm_state)
            tau_res = y * self.norm.y_scale
            new_state = (hc[0], hc[1], r_state) if hc is not None else (None, None, r_state)
        return {"tau": tau_rbd + tau_f + tau_res, "tau_rbd": tau_rbd, "tau_friction": tau_f,
                "tau_residual": tau_res}, new_state


class DeLaN(nn.Module):
    """Deep Lagrangian Network (Lutter et al. 2019; Doenges 2025 Sec. 3.2, eq. 10/55-58), closed form.

    Lagrangian ``1/2 dq^T M(q) dq - V(q)``, ``M = L L^T + eps 1``, L lower triangular from an MLP on q
    (softplus + 1e-3 diagonal, so M is positive definite), V(q) from the same trunk. Euler-Lagrange:
    ``tau = M ddq + dM/dt dq - 1/2 d/dq (dq^T M dq) + dV/dq``.

    Why closed form: the derivatives d/dq are propagated layer by layer through the network (chain
    rule, as in Lutter et al.'s DeLaN: dh/dq = diag(act'(a)) W dh_prev/dq), so the forward pass is
    plain matmuls/elementwise ops: it exports to ONNX and needs no autograd at inference (autograd
    is used only for training the weights). :meth:`forward_autograd` is the autograd reference
    that a test compares against (float64: max difference 5e-15 Nm at |tau| <= 36 Nm, 3e-12 at 6e3).
    """

    def __init__(self, n: int, dim: int, eps: float = 1e-3) -> None:
        super().__init__()
        self.n, self.eps = n, eps
        self.trunk = nn.Sequential(nn.Linear(n, dim), nn.Softplus(), nn.Linear(dim, dim), nn.Softplus())
        self.l_diag = nn.Linear(dim, n)
        self.l_off = nn.Linear(dim, n * (n - 1) // 2)
        self.pot = nn.Linear(dim, 1)
        tril = torch.tril_indices(n, n, -1)
        self.register_buffer("tril", tril)
        # constant 0/1 maps from the network outputs to vec(L) (row-major): vec(L) = d @ D + o @ S;
        # not persistent, so checkpoints written before them still load
        D = torch.zeros(n, n * n)
        D[torch.arange(n), torch.arange(n) * (n + 1)] = 1.0
        S = torch.zeros(n * (n - 1) // 2, n * n)
        S[torch.arange(S.shape[0]), tril[0] * n + tril[1]] = 1.0
        self.register_buffer("to_diag", D, persistent=False)
        self.register_buffer("to_off", S, persistent=False)

    def _L(self, d: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
        """(B, n) diagonal + (B, m) strictly-lower entries -> L (B, n, n)."""
        return (d @ self.to_diag + o @ self.to_off).reshape(-1, self.n, self.n)

    def mass_and_potential(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q (B, n) -> M (B, n, n), V (B,)."""
        h = self.trunk(q)
        L = self._L(nn.functional.softplus(self.l_diag(h)) + 1e-3, self.l_off(h))
        M = L @ L.transpose(-1, -2) + self.eps * torch.eye(self.n, dtype=q.dtype)
        return M, self.pot(h).squeeze(-1)

    @staticmethod
    def _softplus_grad(a: torch.Tensor) -> torch.Tensor:
        """d softplus / da, matching torch's softplus (threshold 20: identity above, slope exactly 1)."""
        return torch.where(a > 20.0, torch.ones_like(a), torch.sigmoid(a))

    def forward(self, q: torch.Tensor, dq: torch.Tensor, ddq: torch.Tensor) -> torch.Tensor:
        """tau (..., n) for q, dq, ddq (..., n); analytic derivatives (see class doc)."""
        shape, n = q.shape, self.n
        q, dq, ddq = (a.reshape(-1, n) for a in (q, dq, ddq))
        lin1, lin2 = self.trunk[0], self.trunk[2]
        # trunk values and transposed Jacobians G = (dh/dq)^T (B, n, dim), layer by layer (chain rule:
        # dh/dq = diag(softplus'(a)) W dh_prev/dq); the transposed layout keeps every product a plain
        # (B n, dim) x (dim, k) matmul
        a1 = lin1(q)
        G = lin1.weight.T * self._softplus_grad(a1).unsqueeze(-2)
        a2 = lin2(nn.functional.softplus(a1))
        G = (G @ lin2.weight.T) * self._softplus_grad(a2).unsqueeze(-2)
        h = nn.functional.softplus(a2)
        ad = self.l_diag(h)
        d = nn.functional.softplus(ad) + 1e-3
        dd_T = (G @ self.l_diag.weight.T) * self._softplus_grad(ad).unsqueeze(-2)  # (B, n, n): [k, i] = d d_i/d q_k
        o = self.l_off(h)
        do_T = G @ self.l_off.weight.T  # (B, n, m): [k, j] = d o_j / d q_k
        dV_dq = (G @ self.pot.weight.T).squeeze(-1)  # (B, n): gravity torque, Doenges eq. 58
        L = self._L(d, o)
        # dL/dt = sum_k dL/dq_k dq_k (L is linear in d, o)
        dq_row = dq.unsqueeze(-2)
        Ldot = self._L((dq_row @ dd_T).squeeze(-2), (dq_row @ do_T).squeeze(-2))
        w = (L.transpose(-1, -2) @ dq.unsqueeze(-1)).squeeze(-1)  # L^T dq
        # dM/dt dq = (Ldot L^T + L Ldot^T) dq
        Mdot_dq = (Ldot @ w.unsqueeze(-1) + L @ (Ldot.transpose(-1, -2) @ dq.unsqueeze(-1))).squeeze(-1)
        # 1/2 d/dq_k (dq^T M dq) = dq^T (dL/dq_k) (L^T dq) = <vec(dq w^T), vec(dL/dq_k)>
        P = (dq.unsqueeze(-1) * w.unsqueeze(-2)).reshape(-1, n * n, 1)
        dkin_dq = (dd_T @ (self.to_diag @ P) + do_T @ (self.to_off @ P)).squeeze(-1)
        M = L @ L.transpose(-1, -2) + self.eps * torch.eye(n, dtype=q.dtype)
        tau = (M @ ddq.unsqueeze(-1)).squeeze(-1) + Mdot_dq - dkin_dq + dV_dq
        return tau.reshape(shape)

    def forward_autograd(self, q: torch.Tensor, dq: torch.Tensor, ddq: torch.Tensor) -> torch.Tensor:
        """The same torque with the derivatives from torch autograd (reference for tests; not exportable)."""
        shape = q.shape
        q, dq, ddq = (a.reshape(-1, self.n) for a in (q, dq, ddq))
        with torch.enable_grad():
            q = q if q.requires_grad else q.detach().requires_grad_(True)
            M, V = self.mass_and_potential(q)
            Mdq = (M @ dq.unsqueeze(-1)).squeeze(-1)
            kin = 0.5 * (dq * Mdq).sum(-1)  # 1/2 dq^T M dq
            dkin_dq = torch.autograd.grad(kin.sum(), q, create_graph=True)[0]
            dV_dq = torch.autograd.grad(V.sum(), q, create_graph=True)[0]
            Mdot_dq = _jvp_rows(Mdq, q, dq)  # dM/dt dq = (d(M dq)/dq) dq
        tau = (M @ ddq.unsqueeze(-1)).squeeze(-1) + Mdot_dq - dkin_dq + dV_dq
        return tau.reshape(shape)


def _jvp_rows(f: torch.Tensor, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """(d f / d q) v per sample, f (B, n) of q (B, n): n reverse passes (n <= 7)."""
    cols = []
    for i in range(f.shape[-1]):
        g = torch.autograd.grad(f[:, i].sum(), q, create_graph=True)[0]  # (B, n) = d f_i / d q
        cols.append((g * v).sum(-1))
    return torch.stack(cols, -1)
