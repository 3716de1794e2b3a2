"""Per-joint current -> torque gains identified jointly with the rigid-body and friction parameters.

A UR arm reports motor currents i_j [A]; the model needs torques tau_j = k_j i_j [Nm]. The gains enter the
identification equations as ``k_j i_j = Y_j(q, dq, ddq) pi + F_j(dq) phi`` (Gautier & Briot's joint
identification of drive gains and dynamic parameters), with the residual measured in current, where the
noise is. Given the gains, the best base parameters are a weighted least-squares solve, so the gains are found
by minimising that solve's residual over the gains alone (variable projection; a handful of unknowns).

Decisions (each tested in test/models/test_current_gains.py):
- Overall scale: the equations are homogeneous (all gains x c and all parameters x c fit equally well), so one
  number must come from outside. It is fixed by the nominal model: the identified gravity torque over the
  training poses is least-squares scaled onto the nominal URDF's. Gravity is what the nominal UR description
  gets right (the vendor's published link masses and centres of mass), while its inertias are placeholders
  (urdf/ur5.urdf.xacro); no recording here carries a known mass (the F/T run is held for scoring).
- Which gains the data can tell: a joint's gain is identified only where rigid-body terms (inertia, gravity,
  coupling) explain at least ``MIN_RIGID_BODY_SHARE`` of its current variance; elsewhere friction and offset
  (rows of that joint alone) absorb any gain, so a free gain follows model errors (the UR5 wrists ran off to
  45 Nm/A against the controller's own 11.9). Such a joint keeps its prior gain relative to the reference joint
  (the one with the largest rigid-body share).
- Priors: the robot data (``idyn_ros.robots.drives``) when the arm has them; else every joint starts from the
  gain the nominal model gives the reference joint (per-joint least squares of nominal torque on current).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from idyn_ros.dynamics.friction import DEFAULT_KINDS
from idyn_ros.errors import IdentificationError, ParameterError
from idyn_ros.models import identification, rbd
from idyn_ros.models.sources import Recording

#: Share of a joint's current variance the rigid-body part must explain for its gain to be identified (decision:
#: on the UR5 data joints 2-4 reach 0.40-0.95, joints 1, 5, 6 0.15, 0.01, 0.01).
MIN_RIGID_BODY_SHARE = 0.3
SCALE_FIXED_BY = ("nominal model: identified gravity torque least-squares scaled onto the nominal URDF's over the "
                  "training poses")
GRAVITY_POSES = 2000  # training poses (evenly spaced) for the scale: g(q) costs ~10 us each


@dataclass
class CurrentGains:
    """Identified gains k [Nm/A] and how they were found (all arrays (n,), robot joint order)."""

    values: np.ndarray
    identified: np.ndarray  # bool: from the data (else held at the prior ratio to the reference joint)
    prior: np.ndarray
    prior_source: str
    reference_joint: int
    scale: float  # the factor the gravity match applied
    rigid_body_share: np.ndarray
    residual_std_a: np.ndarray  # per joint, current units
    info: dict[str, Any] = field(default_factory=dict)

    def to_metadata(self, joint_names: Sequence[str]) -> dict[str, Any]:
        """The artifact's ``effort`` entry (``idyn_ros.runtime`` reads kind, unit and torque_constants)."""
        return {
            "kind": "current",
            "unit": "A",
            "torque_constants": [float(v) for v in self.values],
            "joint_names": list(joint_names),
            "identified": [bool(v) for v in self.identified],
            "prior": [float(v) for v in self.prior],
            "prior_source": self.prior_source,
            "reference_joint": list(joint_names)[self.reference_joint],
            "scale_fixed_by": SCALE_FIXED_BY,
            "scale": float(self.scale),
            "rigid_body_share": [float(v) for v in self.rigid_body_share],
            "min_rigid_body_share": MIN_RIGID_BODY_SHARE,
        }


def known_gains(values: np.ndarray, source: str) -> dict[str, Any]:
    """The ``effort`` metadata entry for gains the user gave (nothing identified)."""
    return {"kind": "current", "unit": "A", "torque_constants": [float(v) for v in values], "identified": None,
            "prior_source": source, "scale_fixed_by": "given"}


def to_torque(recs: Sequence[Recording], gains: np.ndarray) -> list[Recording]:
    """Recordings with motor currents turned into torques k_j i_j (torque recordings are returned unchanged)."""
    return [replace(r, tau=r.tau * gains, effort_kind="torque") if r.effort_kind == "current" else r for r in recs]


def robot_prior(robot: Any) -> tuple[np.ndarray | None, str]:
    """The robot data gains for this robot (by preset name and joint count), else (None, "")."""
    from idyn_ros.robots.drives import torque_constants

    data = torque_constants(getattr(robot, "name", ""))
    if data is None or len(data.values) != robot.n:
        return None, ""
    return data.as_array(), f"robot data ({robot.name}, idyn_ros.robots.drives)"


class _Problem:
    """Per-joint normal equations of ``i_j = A_j x / k_j`` (A = base regressor + friction columns)."""

    def __init__(self, pin_model: Any, recs: Sequence[Recording], kinds: Sequence[str], seed: int) -> None:
        from idyn_ros.dynamics.friction import n_columns

        n = pin_model.nv
        arm = np.flatnonzero(identification.identifiable_armature(pin_model, seed))
        self.base = identification._extended_base(pin_model, arm, n * n_columns(kinds), seed)
        Y, F, current = identification._stack(pin_model, recs, kinds, np.arange(n))
        self.nb = self.base["rank"]
        A = np.concatenate([Y[..., self.base["ind_raw"]], F], axis=2)  # (N, n, p)
        self.A, self.i = A, current
        self.M = np.einsum("tjp,tjq->jpq", A, A)
        self.m = np.einsum("tjp,tj->jp", A, current)
        self.s = (current * current).sum(0)
        self.n, self.p = n, A.shape[2]

    def solve(self, k: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """Base + friction parameters minimising sum_j |i_j - A_j x / k_j|^2 / sigma_j^2 (torque units)."""
        w = 1.0 / (k * sigma) ** 2
        H = np.einsum("j,jpq->pq", w, self.M)
        g = np.einsum("j,jp->p", 1.0 / (k * sigma**2), self.m)
        H[np.diag_indices(self.p)] += 1e-12 * np.trace(H) / self.p
        return np.linalg.solve(H, g)

    def cost(self, k: np.ndarray, sigma: np.ndarray) -> float:
        x = self.solve(k, sigma)
        per_joint = self.s - 2 * (self.m @ x) / k + np.einsum("p,jpq,q->j", x, self.M, x) / k**2
        return float((per_joint / sigma**2).sum())

    def current_residual(self, k: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self.i - (self.A @ x) / k

    def rigid_body_share(self, k: np.ndarray, x: np.ndarray) -> np.ndarray:
        rigid = (self.A[..., : self.nb] @ x[: self.nb]) / k
        return rigid.var(0) / np.maximum(self.i.var(0), 1e-300)


def _nominal_prior(robot: Any, recs: Sequence[Recording]) -> tuple[np.ndarray, str]:
    """Every joint at the gain the nominal model gives the joint it explains best (see module doc)."""
    current = np.concatenate([r.tau for r in recs])
    nominal = np.concatenate([robot.rnea(r.q, r.dq, r.ddq) for r in recs])
    corr = np.array([abs(np.corrcoef(nominal[:, j], current[:, j])[0, 1]) if nominal[:, j].std() > 0 else 0.0
                     for j in range(robot.n)])
    j = int(np.nanargmax(corr))
    k = float(nominal[:, j] @ nominal[:, j] / (nominal[:, j] @ current[:, j]))
    if not (np.isfinite(k) and k > 0):
        raise IdentificationError("the nominal model does not explain the currents of any joint (no joint's nominal "
                                  "torque correlates positively with its current); pass the gains with "
                                  "--torque-constants")
    name = robot.joint_names[j]
    return np.full(robot.n, k), f"nominal model: every joint at the gain of {name} (least squares of nominal torque " \
                                f"on current, correlation {corr[j]:.2f})"


def identify_gains(robot: Any, recs: Sequence[Recording], friction_kinds: Sequence[str] = DEFAULT_KINDS,
                   prior: np.ndarray | None = None, seed: int = 0) -> CurrentGains:
    """Per-joint gains from current recordings (module doc); ``prior`` (n,) Nm/A overrides the robot data."""
    from scipy.optimize import minimize

    if not recs or any(r.effort_kind != "current" for r in recs):
        raise IdentificationError("gain identification needs recordings whose efforts are motor currents")
    n = robot.n
    if prior is not None:
        k0, source = np.asarray(prior, dtype=np.float64), "given prior"
    else:
        k0, source = robot_prior(robot)
        if k0 is None:
            k0, source = _nominal_prior(robot, recs)
    problem = _Problem(robot.pin_model, recs, tuple(friction_kinds), seed)
    N = len(problem.i)
    if N * n < 2 * (problem.p + n):
        raise IdentificationError(f"{N} samples x {n} joints are too few for {problem.p} parameters and {n} gains; "
                                  f"record longer contact-free motion")
    identification.require_excitation(problem.A.reshape(N * n, -1), N)  # else the gravity scale below is noise
    sigma = problem.i.std(0) + 1e-9
    x = problem.solve(k0, sigma)
    sigma = problem.current_residual(k0, x).std(0) + 1e-9
    share0 = problem.rigid_body_share(k0, x)
    ref = int(np.argmax(share0))
    free = share0 >= MIN_RIGID_BODY_SHARE
    free[ref] = True
    moving = np.flatnonzero(free & (np.arange(n) != ref))  # the reference gain stays: the cost is scale-free

    def gains(z: np.ndarray) -> np.ndarray:
        k = k0.copy()
        k[moving] = k0[moving] * np.exp(z)
        return k

    k = k0.copy()
    for _ in range(2):  # re-weight once with the residual of the first solution (Gautier's WLS)
        if moving.size:
            sol = minimize(lambda z, s=sigma: problem.cost(gains(z), s), np.log(k[moving] / k0[moving]),
                           method="BFGS")
            k = gains(sol.x)
        x = problem.solve(k, sigma)
        sigma = problem.current_residual(k, x).std(0) + 1e-9
    scale = _gravity_scale(robot, recs, problem, x)
    values = k * scale
    return CurrentGains(values, free, k0, source, ref, scale, problem.rigid_body_share(k, x), sigma,
                        {"samples": N, "moving_gains": [robot.joint_names[j] for j in moving]})


def _gravity_scale(robot: Any, recs: Sequence[Recording], problem: _Problem, x: np.ndarray) -> float:
    """c with c * g_identified(q) closest to the nominal g(q) over the training poses (the scale decision)."""
    q = np.concatenate([r.q for r in recs])
    q = q[np.linspace(0, len(q) - 1, min(GRAVITY_POSES, len(q))).astype(int)]
    zeros = np.zeros_like(q)
    Y = rbd.regressor_batch(robot.pin_model, q, zeros, zeros)
    Y = np.concatenate([Y, np.zeros((len(q), robot.n, robot.n))], axis=2)[..., problem.base["ind_raw"]]
    g_id = Y @ x[: problem.nb]
    g_nom = np.array([robot.gravity(qk) for qk in q])
    denom = float((g_id * g_id).sum())
    if denom <= 1e-12 * max(float((g_nom * g_nom).sum()), 1e-300) or float((g_nom * g_nom).sum()) < 1e-12:
        raise IdentificationError("no gravity torque in these recordings to fix the gains' scale (a horizontal arm?); "
                                  "pass the gains with --torque-constants")
    c = float((g_id * g_nom).sum() / denom)
    if not c > 0:
        raise IdentificationError(f"the identified gravity points against the nominal one (scale {c:.3g}): the "
                                  f"currents' signs do not match the joint directions; check the recording")
    return c


def currents_to_torque(robot: Any, train: Sequence[Recording], val: Sequence[Recording] = (),
                       test: Sequence[Recording] = (), friction_kinds: Sequence[str] = DEFAULT_KINDS,
                       torque_constants: Any = None, seed: int = 0
                       ) -> tuple[dict[str, Any] | None, CurrentGains | None, tuple[list, list, list]]:
    """What ``idyn train`` does with motor-current recordings: (artifact ``effort`` entry, identified gains or None,
    (train, val, test) in Nm). Torque recordings pass unchanged (entry None); ``torque_constants`` (values or a
    preset name) replaces the identification."""
    from idyn_ros.robots.drives import parse_torque_constants

    train_kinds = {r.effort_kind for r in train}
    if len(train_kinds) > 1:
        raise ParameterError("the training recordings mix torque and motor-current efforts; train on one kind "
                             "(or convert the currents when importing: `idyn dataset import SRC --torque-constants "
                             "K1,..,Kn -o OUT.npz`)")
    if "current" not in train_kinds and not any(r.effort_kind == "current" for r in (*val, *test)):
        if torque_constants:
            raise ParameterError("--torque-constants applies to motor-current data; these recordings hold torques "
                                 "(pass --effort-kind current if they are currents)")
        return None, None, (list(train), list(val), list(test))
    found = None
    if torque_constants:
        gains = parse_torque_constants(torque_constants, robot.n)
        effort = known_gains(gains, f"given: --torque-constants {torque_constants}")
    elif "current" not in train_kinds:
        raise ParameterError("validation/test recordings hold motor currents but the training ones torques: the "
                             "gains cannot be identified from them; pass --torque-constants")
    else:
        found = identify_gains(robot, train, tuple(friction_kinds) or DEFAULT_KINDS, seed=seed)
        gains = found.values
        effort = found.to_metadata(robot.joint_names)
    return effort, found, (to_torque(train, gains), to_torque(val, gains), to_torque(test, gains))
