"""Rigid-body + friction parameter identification from recorded torques.

All methods solve ``tau = Y(q, dq, ddq) pi + F(dq) phi`` in the least-squares sense, stacked over
samples (Callar 2021 Eq. 4.22, Reuss et al. 2022 Eq. 4 + Eq. 13):

- ``ols``: ordinary LS on the base parameters (QR with column pivoting, Khalil & Gautier 1991);
  unconstrained, may give negative masses (Callar 2021 reports m_4 = -0.021).
- ``wls``: the same with each joint's rows weighted by 1 / sigma_j, sigma_j the OLS residual std
  of joint j (Gautier's weighting), so that weak joints (KUKA joints 5-7) are not ignored.
- ``sdp``: physically consistent, full parameters, one LMI per link on the 4x4 pseudo-inertia
  ``J_k >= eps 1`` (Reuss Eq. 10, Wensing et al. 2018), solved with cvxpy (CLARABEL or SCS).
- ``diffbary``: same objective by gradient descent through ``J = A A^T + r 1`` (Reuss Eq. 18-21).
- ``logchol``: same through the log-Cholesky factor (Rucker & Wensing 2022).

Armature (reflected rotor inertia ``Ia_j``, kg m^2): one extra regressor column per joint,
``tau_j += Ia_j ddq_j`` (the rotor spins with the joint: geared drives reflect ``gear^2 I_rotor``,
on a Panda 0.2-0.6 kg m^2 vs link inertias of 0.01-0.05 about the wrist axes). ``Ia >= 0`` in the
consistent methods. Some armature columns lie in the span of the inertial columns (joint 1 of a
fixed-base arm: ``Ia_1 ddq_1`` is exactly ``Izz_1 ddq_1``; Panda joint 2 too), and ``Ia_j`` is nearly
collinear with ``Izz_j`` on the others. Decisions: OLS/WLS (base parameters) keep such ``Ia = 0`` and
the link parameters absorb them (same dynamics). The consistent methods keep every ``Ia`` with a ridge
toward 0 that is ``ARMATURE_RIDGE`` (1e-3) times the inertial one: along the (near-)collinear
direction the prior then keeps the URDF link inertia and puts the difference in ``Ia`` (the rotor is
what the URDF lacks; an equal ridge split it half-half, and absorbing a 0.6 kg m^2 rotor into a link
can break its triangle inequality, seen on the ideal Panda plant + FR3 armature).

The consistent methods identify the full (n, 10) parameters, which the data cannot fully
determine (only the base combinations are excited). They add a prior toward the nominal parameters:
- ``prior="ridge"`` (the default of every method but the SDP): ``reg * mean(diag(G)) * ||pi - pi_nom||^2`` with
  ``G`` the (weighted)
  Gram matrix: with the default ``reg = 1e-4`` a direction whose excitation is below 1e-4 of the
  average stays at its nominal value, while well-excited directions move by < 0.01 % of their LS
  correction. It weighs every parameter alike in its own units, so a 1e-3 kg m^2 wrist inertia is
  held no harder than a 4 kg mass.
- ``prior="geometric"`` (SDP only, and its default): ``reg * sum_k D(J_k || J_k,nom)``, the log-det divergence
  ``-log det(J0^-1 J) + tr(J0^-1 J) - 4`` of each link's pseudo-inertia from the URDF's (Lee, Wensing &
  Park 2020, "Geometric robot dynamic identification"): relative to each link's own size and
  coordinate-free; it also keeps J > 0 by itself. Friction and armature keep the ridge at ``DEFAULT_REG``.
  With a validation trajectory off the training states, the per-joint residual on it validated best at
  ``reg = 1e-2`` on the UR5 (real) and the Panda plant, and so did the physics alone on the plant
  (studies/auto_selection/README.md, "geometric prior").
  Decision: it is the SDP's default (``resolve_prior``) because on every validation off the training states here
  (real UR5 and UR10, the three plants) the identified RBD + friction validated as well as with the ridge (within 2 %)
  or better, while with the ridge it fitted the training trajectory's reruns better (studies/auto_selection,
  "prior_default"). A URDF with a link whose inertia is not physically consistent falls back to the ridge, with a
  warning; asked for explicitly, the geometric prior refuses it.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from idyn_ros.dynamics.friction import DEFAULT_KINDS, friction_regressor, friction_torque, n_columns
from idyn_ros.dynamics.inertia import pi_to_barycentric, pi_to_pseudo_inertia
from idyn_ros.errors import IdentificationError, ParameterError
from idyn_ros.models import rbd
from idyn_ros.models.metrics import nmse
from idyn_ros.models.sources import Recording

METHODS = ("ols", "wls", "sdp", "diffbary", "logchol")
DEFAULT_REG = 1e-4  # ridge toward nominal, relative to the mean Gram diagonal (see module doc)
PRIORS = ("ridge", "geometric")  # toward the nominal parameters (module doc)
GEOMETRIC_REG = 1e-2  # the geometric prior's default strength (module doc)
DEFAULT_STRENGTH = {"ridge": DEFAULT_REG, "geometric": GEOMETRIC_REG}
SDP_DEFAULT_PRIOR = "geometric"  # every other method has the ridge only (module doc)
EPS_LMI = 1e-6  # pseudo-inertia margin [kg m^2]; J_k - eps 1 must be PSD
ARMATURE_RIDGE = 1e-3  # armature ridge toward 0 relative to the inertial ridge (see module doc)


@dataclass
class IdentificationResult:
    """Identified parameters. ``pi`` (n, 10) pinocchio order; ``friction`` (n, B) per kind column."""

    method: str
    pi: np.ndarray
    friction_kinds: tuple[str, ...]
    friction: np.ndarray
    n_base: int
    weights: np.ndarray  # (n,) per-joint row weights used
    reg: float
    info: dict[str, Any] = field(default_factory=dict)
    armature: np.ndarray | None = None  # (n,) kg m^2 reflected rotor inertia, tau_j += Ia_j ddq_j

    def __post_init__(self) -> None:
        if self.armature is None:
            self.armature = np.zeros(self.pi.shape[0])

    def predict(self, pin_model: Any, rec: Recording, Y: np.ndarray | None = None) -> np.ndarray:
        """Predicted torque (N, n) in Nm for a recording."""
        if Y is None:
            Y = rbd.regressor_batch(pin_model, rec.q, rec.dq, rec.ddq)
        return (Y @ self.pi.ravel() + self.armature * rec.ddq
                + friction_torque(rec.dq, self.friction, self.friction_kinds))


def identifiable_armature(pin_model: Any, seed: int = 0, tol: float = 1e-6) -> np.ndarray:
    """(n,) bool: joint j's armature column ``ddq_j e_j`` is not in the span of the inertial columns.

    Tested on random states like ``structural_base``: relative least-squares residual of the column
    projected on the inertial regressor > ``tol`` (see module doc for what happens to the others).
    """
    rng = np.random.default_rng(seed)
    n = pin_model.nv
    m = 60
    q = rng.uniform(-np.pi, np.pi, (m, n))
    ddq = rng.normal(size=(m, n)) * 5
    W = rbd.regressor_batch(pin_model, q, rng.normal(size=(m, n)) * 2, ddq).reshape(m * n, -1)
    out = np.zeros(n, dtype=bool)
    for j in range(n):
        a = (ddq[:, :, None] * np.eye(n)[None, :, j : j + 1]).reshape(m * n)
        x, *_ = np.linalg.lstsq(W, a, rcond=None)
        out[j] = np.linalg.norm(a - W @ x) > tol * np.linalg.norm(a)
    return out


def armature_regressor(ddq: np.ndarray, joints: np.ndarray) -> np.ndarray:
    """(N, n) ddq -> (N, n, len(joints)): column c is ``ddq_j`` on row ``j = joints[c]``, zero elsewhere."""
    N, n = ddq.shape
    A = np.zeros((N, n, len(joints)))
    for c, j in enumerate(joints):
        A[:, j, c] = ddq[:, j]
    return A


def structural_base(pin_model: Any, n_friction_cols: int, seed: int = 0, tol: float = 1e-8) -> dict:
    """Base-parameter structure on random states, in the index form the solvers below use.

    The QR with column pivoting, the rank rule (``tol`` = ``RANK_RTOL``) and the map ``K`` are
    :func:`idyn_ros.dynamics.base_parameters.base_parameters_from_regressor` (what
    ``RobotModel.base_parameters`` uses); here only this module's states (q in +-pi, which also
    excites joints whose URDF limits are narrow) and the split into independent/dependent columns.
    Returns ``independent`` (sorted) = ``ind_raw`` (the column order of the base regressor),
    ``dependent``, ``beta`` with ``pi_base = pi_ind + beta @ pi_dep``, ``rank``.
    """
    from idyn_ros.dynamics.base_parameters import base_parameters_from_regressor

    rng = np.random.default_rng(seed)
    n = pin_model.nv
    m = 60
    q = rng.uniform(-np.pi, np.pi, (m, n))
    Y = rbd.regressor_batch(pin_model, q, rng.normal(size=(m, n)) * 2, rng.normal(size=(m, n)) * 5)
    W = Y.reshape(m * n, -1)
    bp = base_parameters_from_regressor(W, rtol=tol)
    ind = bp.independent  # K[:, ind] is the identity (base_parameters_from_regressor)
    dep = np.setdiff1d(np.arange(W.shape[1]), ind)
    return {"independent": np.sort(ind), "ind_raw": ind, "dependent": dep, "beta": bp.K[:, dep],
            "rank": bp.n_base, "n_inertial": W.shape[1], "n_friction": n_friction_cols}


def _stack(pin_model: Any, recs: Sequence[Recording], kinds: Sequence[str],
           arm_joints: np.ndarray) -> tuple[np.ndarray, ...]:
    """Inertial regressor with the armature columns appended (N, n, 10n + A), friction regressor, torque."""
    Ys, Fs, taus = [], [], []
    for r in recs:
        Y = rbd.regressor_batch(pin_model, r.q, r.dq, r.ddq)
        Ys.append(np.concatenate([Y, armature_regressor(r.ddq, arm_joints)], axis=2))
        Fs.append(friction_regressor(r.dq, kinds))
        taus.append(r.tau)
    return np.concatenate(Ys), np.concatenate(Fs), np.concatenate(taus)


def identify(
    pin_model: Any,
    recs: Sequence[Recording],
    method: str = "sdp",
    friction_kinds: Sequence[str] = DEFAULT_KINDS,
    reg: float | None = None,
    weights: np.ndarray | None = None,
    solver: str = "CLARABEL",
    steps: int = 3000,
    seed: int = 0,
    armature: bool = True,
    prior: str | None = None,
) -> IdentificationResult:
    """Identify inertial + armature + friction parameters from recordings (see module docstring).

    ``armature=False``: no rotor-inertia columns (Ia = 0), the rigid-body model of the URDF alone.
    ``prior``: "ridge" or "geometric" (SDP only), with strength ``reg``; None: the method's default and its
    default strength (``resolve_prior``).
    """
    if method not in METHODS:
        raise ParameterError(f"unknown identification method '{method}'; choose one of {METHODS}")
    prior, reg = resolve_prior(method, prior, reg, pin_model)
    kinds = tuple(friction_kinds)
    n = pin_model.nv
    B = n_columns(kinds)
    arm_all = np.arange(n) if armature else np.zeros(0, int)  # column 10n + j: armature of joint j
    arm_joints = np.flatnonzero(identifiable_armature(pin_model, seed)) if armature else arm_all  # in OLS/WLS
    A = len(arm_all)
    Y, F, tau = _stack(pin_model, recs, kinds, arm_all)  # (N, n, 10n + A), (N, n, nB), (N, n)
    N = len(tau)
    base = _extended_base(pin_model, arm_joints, n * B, seed)
    p_base = base["rank"] + n * B
    if N * n < 2 * p_base:
        raise IdentificationError(
            f"{N} samples x {n} joints = {N * n} equations for {p_base} base parameters "
            f"(+friction); need at least {int(np.ceil(2 * p_base / n))} samples. Record a longer "
            f"exciting trajectory (`idyn excite`) or pass more --data files"
        )
    W = np.concatenate([Y[..., base["ind_raw"]], F], axis=2).reshape(N * n, -1)
    cond = require_excitation(W, N)
    pi_nom = np.concatenate([rbd.inertial_parameters(pin_model).ravel(), np.zeros(A)])  # nominal Ia = 0
    info: dict[str, Any] = {"n_samples": N, "cond_base_regressor": cond, "n_base": base["rank"],
                            "armature_joints": arm_joints.tolist()}
    t0 = time.perf_counter()

    # OLS on base parameters (also the first pass of every other method, for the weights)
    x_b, *_ = np.linalg.lstsq(W, tau.ravel(), rcond=None)
    resid = (tau.ravel() - W @ x_b).reshape(N, n)
    sigma = np.sqrt((resid**2).sum(0) / max(N - p_base / n, 1))
    if weights is None:
        weights = np.ones(n) if method == "ols" else 1.0 / np.maximum(sigma, 1e-6)
    weights = np.asarray(weights, dtype=np.float64)

    if method in ("ols", "wls"):
        if method == "wls":
            Wt = (W.reshape(N, n, -1) * weights[None, :, None]).reshape(N * n, -1)
            x_b, *_ = np.linalg.lstsq(Wt, (tau * weights).ravel(), rcond=None)
        nb = base["rank"]
        # full pi that reproduces the base parameters: dependent columns stay nominal
        pi = pi_nom.copy()
        ind, dep = base["ind_raw"], base["dependent"]
        pi[ind] = x_b[:nb] - base["beta"] @ pi_nom[dep]
        res = IdentificationResult(method, pi[: 10 * n].reshape(n, 10), kinds, x_b[nb:].reshape(n, B), nb,
                                   weights, 0.0, info, _full_armature(n, arm_all, pi[10 * n :]))
    else:
        Wf = np.concatenate([Y, F], axis=2) * weights[None, :, None]  # (N, n, p)
        Wf = Wf.reshape(N * n, -1)
        tw = (tau * weights).ravel()
        G = Wf.T @ Wf / (N * n)
        b = Wf.T @ tw / (N * n)
        geometric = reg if prior == "geometric" else 0.0
        lam = (DEFAULT_REG if geometric else reg) * float(np.mean(np.diag(G)))
        if not geometric:  # how many parameter directions the data excite less than the ridge (these stay ~nominal)
            info["directions_held_at_nominal"] = int((np.linalg.eigvalsh(G) < lam).sum())
        x_nom = np.concatenate([pi_nom, np.zeros(n * B)])
        lam_v = np.full(len(b), lam)
        lam_v[10 * n : 10 * n + A] *= ARMATURE_RIDGE
        if geometric:  # the links' prior is the divergence; a ridge 1e-9 keeps the quadratic form definite
            lam_v[: 10 * n] = 1e-9 * float(np.mean(np.diag(G)))
        info["prior"] = f"{prior} {reg:g}"
        if method == "sdp":
            x = _solve_sdp(G, b, lam_v, x_nom, n, solver, A, geometric)
        else:
            x = _solve_gradient(G, b, lam_v, x_nom, n, method, steps, seed, A)
        p = 10 * n + A
        res = IdentificationResult(method, x[: 10 * n].reshape(n, 10), kinds, x[p:].reshape(n, B),
                                   base["rank"], weights, reg, info, _full_armature(n, arm_all, x[10 * n : p]))
        info["ridge_lambda"] = lam
    info["seconds"] = time.perf_counter() - t0
    pred = (Y @ np.concatenate([res.pi.ravel(), res.armature[arm_all]])
            + np.einsum("tnk,k->tn", F, res.friction.ravel()))
    info["armature"] = res.armature.tolist()
    info["train_nmse"] = nmse(pred, tau).tolist()
    info["min_pseudo_inertia_eig"] = rbd.min_pseudo_inertia_eig(res.pi).tolist()
    return res


def _full_armature(n: int, joints: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(n,) armature with the identified ``values`` at ``joints``, 0 elsewhere (module doc)."""
    out = np.zeros(n)
    out[joints] = values
    return out


def require_excitation(W: np.ndarray, n_samples: int) -> float:
    """The scaled condition number of the stacked regressor ``W`` (rows: samples x joints, columns: base and
    friction parameters); IdentificationError when some parameter is not excited, so no fit is attempted on it."""
    sv = np.linalg.svd(W / np.maximum(np.linalg.norm(W, axis=0), 1e-12), compute_uv=False)
    cond = float(sv[0] / max(sv[-1], 1e-300))
    if sv[-1] < 1e-9 * sv[0]:
        raise IdentificationError(
            f"the data do not excite all {W.shape[1]} base parameters (scaled regressor condition "
            f"number {cond:.2g}, {n_samples} samples): the trajectory is too short or too slow. Use an "
            f"optimised excitation (`idyn excite`) that moves every joint"
        )
    return cond


def _extended_base(pin_model: Any, arm_joints: np.ndarray, n_friction_cols: int, seed: int) -> dict:
    """``structural_base`` of the inertial columns with the (independent) armature columns appended."""
    base = structural_base(pin_model, n_friction_cols, seed)
    A = len(arm_joints)
    if A:
        extra = np.asarray(arm_joints) + base["n_inertial"]  # column 10n + j of the stacked regressor
        base = dict(base, independent=np.concatenate([base["independent"], extra]),
                    ind_raw=np.concatenate([base["ind_raw"], extra]),
                    beta=np.vstack([base["beta"], np.zeros((A, base["beta"].shape[1]))]), rank=base["rank"] + A)
    return base


def check_prior(prior: str, method: str) -> None:
    """ParameterError for an unknown prior, or the geometric one with a method other than the SDP."""
    if prior not in PRIORS:
        raise ParameterError(f"unknown identification prior '{prior}'; choose one of {PRIORS}")
    if prior == "geometric" and method != "sdp":
        raise ParameterError(f"the geometric prior needs the SDP identification (`idyn train --id-method sdp`, "
                             f"`idyn identify --method sdp`), not '{method}'")


def inconsistent_links(pin_model: Any) -> list[int]:
    """Links (1-based) whose nominal (URDF) pseudo-inertia is not positive definite: no geometric prior toward it."""
    pi_nom = rbd.inertial_parameters(pin_model)
    return [k + 1 for k in range(len(pi_nom)) if np.linalg.eigvalsh(pi_to_pseudo_inertia(pi_nom[k]))[0] <= 0]


def resolve_prior(method: str, prior: str | None, reg: float | None, pin_model: Any = None) -> tuple[str, float]:
    """(prior, strength) an identification uses: None takes the method's default prior (the SDP: geometric, unless
    ``pin_model``'s URDF has an inconsistent link, then the ridge with a warning; others: ridge), and the prior's
    default strength. The geometric prior asked for explicitly refuses such a URDF (IdentificationError)."""
    defaulted = prior is None
    if defaulted:
        prior = SDP_DEFAULT_PRIOR if method == "sdp" else "ridge"
    check_prior(prior, method)
    bad = inconsistent_links(pin_model) if prior == "geometric" and pin_model is not None else []
    if bad and defaulted:
        warnings.warn(f"the URDF's inertia of link(s) {bad} is not physically consistent (pseudo-inertia not "
                      f"positive definite): identifying with the ridge prior instead of the default geometric one",
                      stacklevel=2)
        prior = "ridge"
    elif bad:
        raise IdentificationError(f"the geometric prior needs every link's nominal (URDF) inertia physically "
                                  f"consistent; the pseudo-inertia of link(s) {bad} is not positive definite: use the "
                                  f"ridge prior (--prior ridge)")
    reg = DEFAULT_STRENGTH[prior] if reg is None else reg
    if not (np.isfinite(reg) and reg >= 0):
        raise ParameterError(f"the prior's strength --reg must be a finite number >= 0, got {reg}")
    return prior, float(reg)


def _solve_sdp(G: np.ndarray, b: np.ndarray, lam: np.ndarray, x_nom: np.ndarray, n: int, solver: str,
               n_armature: int = 0, geometric: float = 0.0) -> np.ndarray:
    """min x'Gx - 2b'x + sum lam_i (x_i - x_nom,i)^2 [+ geometric sum_k D(J_k || J_k,nom)]
    s.t.  J_k(pi_k) >= eps 1 (Reuss Eq. 10), Ia >= 0 (module doc)."""
    import cvxpy as cp

    p = len(b)
    M = G + np.diag(lam)
    L = np.linalg.cholesky(M)
    c = np.linalg.solve(L, b + lam * x_nom)  # |L'x - c|^2 = x'Mx - 2(b + lam x_nom)'x + const
    x = cp.Variable(p)
    cons = []
    divergence = 0
    for k in range(n):
        m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = (x[10 * k + i] for i in range(10))
        J = cp.bmat(
            [
                [(iyy + izz - ixx) / 2, -ixy, -ixz, hx],
                [-ixy, (ixx + izz - iyy) / 2, -iyz, hy],
                [-ixz, -iyz, (ixx + iyy - izz) / 2, hz],
                [hx, hy, hz, m],
            ]
        )  # Reuss Eq. 17
        J = (J + J.T) / 2
        cons.append(J >> EPS_LMI * np.eye(4))
        if geometric:  # log-det divergence to the nominal pseudo-inertia, up to constants (Lee et al. 2020)
            J0 = pi_to_pseudo_inertia(x_nom[10 * k : 10 * k + 10])  # positive definite (``identify`` checks)
            # in J0's own scale (W = J0^-1/2 J J0^-1/2, the same divergence -log det W + tr W - 4): a wrist's J0 has
            # eigenvalues near 1e-5 kg m^2, and the unscaled log det left CLARABEL "optimal_inaccurate" on plant data
            w0, v0 = np.linalg.eigh(J0)
            S = v0 @ np.diag(w0 ** -0.5) @ v0.T
            W = S @ J @ S
            divergence = divergence - cp.log_det((W + W.T) / 2) + cp.trace(W)
    if n_armature:
        cons.append(x[10 * n : 10 * n + n_armature] >= 0)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(L.T @ x - c) + geometric * divergence), cons)
    try:
        prob.solve(solver=solver)
    except cp.error.SolverError as exc:
        raise IdentificationError(f"SDP solver {solver} failed ({exc}); try --solver SCS") from None
    if x.value is None or prob.status not in ("optimal", "optimal_inaccurate"):
        raise IdentificationError(f"SDP identification ended with status '{prob.status}'")
    out = np.asarray(x.value)
    # solvers stop at ~1e-8 from the boundary: pull any link back inside the cone toward nominal
    pi = out[: 10 * n].reshape(n, 10)
    for k in range(n):
        t = 1.0
        while rbd.min_pseudo_inertia_eig(pi[k : k + 1])[0] <= 0 and t > 1e-6:
            t *= 0.5
            pi[k] = (1 - t) * pi[k] + t * x_nom[10 * k : 10 * k + 10]
    out[: 10 * n] = pi.ravel()
    out[10 * n : 10 * n + n_armature] = np.maximum(out[10 * n : 10 * n + n_armature], 0.0)  # solver round-off
    return out


def _solve_gradient(
    G: np.ndarray, b: np.ndarray, lam: np.ndarray, x_nom: np.ndarray, n: int, kind: str, steps: int, seed: int,
    n_armature: int = 0,
) -> np.ndarray:
    """Same objective as the SDP by Adam (+ L-BFGS polish) through a consistent parameterisation.

    Armature ``Ia = s^2`` (>= 0); decision: start at s = 0.03 (Ia ~ 1e-3 kg m^2), not at the nominal
    0, where the gradient of s^2 vanishes.
    """
    import torch

    torch.manual_seed(seed)
    pi_mod = rbd.inertial_module(kind, x_nom[: 10 * n].reshape(n, 10), seed)
    s_arm = torch.nn.Parameter(torch.full((n_armature,), 0.03, dtype=torch.float64))
    fr = torch.nn.Parameter(torch.zeros(len(b) - 10 * n - n_armature, dtype=torch.float64))
    Gt, bt, xn, lt = (torch.as_tensor(a) for a in (G, b, x_nom, lam))
    scale = float(b @ np.linalg.lstsq(G + np.diag(lam), b, rcond=None)[0]) or 1.0

    def loss_fn() -> torch.Tensor:
        x = torch.cat([pi_mod().reshape(-1), s_arm**2, fr])
        return (x @ Gt @ x - 2 * bt @ x + (lt * (x - xn) ** 2).sum()) / scale

    params = [*pi_mod.parameters(), s_arm, fr]
    opt = torch.optim.Adam(params, lr=1e-3)  # Reuss et al. 2022 use Adam for DiffBary
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    lbfgs = torch.optim.LBFGS(params, max_iter=500, line_search_fn="strong_wolfe", tolerance_grad=1e-12)

    def closure() -> torch.Tensor:
        lbfgs.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    lbfgs.step(closure)
    with torch.no_grad():
        return torch.cat([pi_mod().reshape(-1), s_arm**2, fr]).numpy().copy()


def write_urdf(urdf_xml: str, pin_model: Any, pi: np.ndarray, armature: np.ndarray | None = None) -> str:
    """URDF text with each moving body's <inertial> replaced by ``pi`` (n, 10), and ``armature`` (n,)
    (kg m^2, when given) as Drake ``<transmission>`` rotor inertias (convention and reason:
    ``idyn_ros.dynamics.model.DRAKE_NS``; ``RobotModel.from_urdf`` loads them back).

    The identified body of joint k is the joint's child link plus every link fixed to it (pinocchio
    merges them); the merged links' own <inertial> elements are removed so that the reloaded
    model has exactly ``pi``. The inertial frame is placed at the CoM with identity rotation.
    """
    import xml.etree.ElementTree as ET

    from idyn_ros.dynamics.model import DRAKE_NS

    ET.register_namespace("drake", DRAKE_NS)
    root = ET.fromstring(urdf_xml)
    joints = {j.get("name"): j for j in root.findall("joint")}
    links = {lk.get("name"): lk for lk in root.findall("link")}
    children: dict[str, list[Any]] = {}
    for j in joints.values():
        children.setdefault(j.find("parent").get("link"), []).append(j)
    for k in range(1, pin_model.njoints):
        jname = pin_model.names[k]
        if jname not in joints:
            raise IdentificationError(f"joint '{jname}' of the model is not in the URDF text")
        child = joints[jname].find("child").get("link")
        stack = [child]
        while stack:  # drop inertials of links fixed to this body
            name = stack.pop()
            for j in children.get(name, []):
                if j.get("type") == "fixed":
                    c = j.find("child").get("link")
                    el = links[c].find("inertial")
                    if el is not None:
                        links[c].remove(el)
                    stack.append(c)
        p = pi[k - 1]
        m, c, Ic = pi_to_barycentric(p)
        link = links[child]
        el = link.find("inertial")
        if el is not None:
            link.remove(el)
        el = ET.SubElement(link, "inertial")
        ET.SubElement(el, "origin", xyz=" ".join(f"{v:.10g}" for v in c), rpy="0 0 0")
        ET.SubElement(el, "mass", value=f"{m:.10g}")
        ET.SubElement(
            el, "inertia", ixx=f"{Ic[0, 0]:.10g}", ixy=f"{Ic[0, 1]:.10g}", ixz=f"{Ic[0, 2]:.10g}",
            iyy=f"{Ic[1, 1]:.10g}", iyz=f"{Ic[1, 2]:.10g}", izz=f"{Ic[2, 2]:.10g}",
        )
    if armature is not None:
        for tr in [t for t in root.findall("transmission") if t.get("name", "").startswith("idyn_armature_")]:
            root.remove(tr)  # a re-identified URDF replaces its old armature
        for k in range(1, pin_model.njoints):
            jname = pin_model.names[k]
            tr = ET.SubElement(root, "transmission", name=f"idyn_armature_{jname}")
            ET.SubElement(tr, "type").text = "transmission_interface/SimpleTransmission"
            ET.SubElement(tr, "joint", name=jname)
            act = ET.SubElement(tr, "actuator", name=f"idyn_armature_{jname}_motor")
            ET.SubElement(act, f"{{{DRAKE_NS}}}rotor_inertia", value=f"{float(armature[k - 1]):.10g}")
            ET.SubElement(act, f"{{{DRAKE_NS}}}gear_ratio", value="1")
    return ET.tostring(root, encoding="unicode")
