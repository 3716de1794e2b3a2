"""Payload dynamic parameter identification: the flange-wrench regressor Y and its solvers (numpy + pinocchio).

Doenges 2025 formulates ``tau_ext = J^T(q) Y(a, alpha, w) phi`` (eq. 54) and never writes Y out; here it is, with
gravity in it. A rigid payload fixed to the flange, parameters in the flange frame F (pinocchio order, the
package's ``INERTIAL_PARAMETER_NAMES``):

    phi = [m, m cx, m cy, m cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]     (h = m c; L = inertia about the flange origin)

Kinematics of the flange origin in F axes: w (angular velocity), alpha (angular acceleration), a (classical linear
acceleration, not the spatial one), g (gravity vector in F axes, R^T g_world), and a_g = a - g. The wrench the
flange applies to the payload, force f and moment n about the flange origin, is linear in phi:

    f = m a_g + (S(alpha) + S(w) S(w)) h
    n = -S(a_g) h + Lmat(alpha) I + S(w) Lmat(w) I          (I = [Ixx, Ixy, Iyy, Ixz, Iyz, Izz])

    Y = [[a_g, S(alpha) + S(w)^2, 0_{3x6}], [0_{3x1}, -S(a_g), Lmat(alpha) + S(w) Lmat(w)]]     (6 x 10)

with S(v) the cross-product matrix and ``Lmat(v) I = L v``. The joint torque the payload adds to the bare arm's is
``tau_payload = J^T Y phi``, J the 6 x n flange Jacobian in F ([v; w] rows: pinocchio LOCAL). Tests check both
forms: Y phi against pinocchio's body regressor, and J^T Y phi against RNEA of the model with the payload attached
minus RNEA of the bare model. Decisions (one line each):
- the thesis' eq. 2 multiplies J_s by m and eq. 51 does not: here L is the full inertia about the flange origin
  (eq. 51), which is what the 10-vector holds;
- parameter order: pinocchio's (as every other 10-vector of the package) rather than the thesis' eq. 1 order
  (J_xy, J_xz, J_yy ...), so ``inertia.py``'s pseudo-inertia helpers apply as they are;
- sign: ``tau_payload`` is the torque the drives must add for the payload (measured with - model without); the
  wrench observer's tau_ext (what the environment applies) is its negative.

Solver (``solve_payload``): least squares, then weighted least squares with each joint's rows weighted by
1 / sigma_j of its first-pass residual (Gautier). Nuisance columns (the bare arm's own parameters, friction,
offsets) are eliminated by projecting onto their orthogonal complement, so the payload block is solved exactly as
in the joint problem and its covariance is the Schur complement. Standard deviations assume white residuals
(optimistic for filtered data). If the least-squares phi is not physically consistent (mass <= 0, inertia not
positive definite, triangle inequalities; ``inertia.check_physical_consistency``), the same objective is solved
with the pseudo-inertia constrained to be positive semi-definite (Wensing et al. 2017; a convex problem, ADMM).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pinocchio as pin

from idyn_ros.dynamics.inertia import (
    barycentric_to_pi,
    check_physical_consistency,
    pi_to_barycentric,
    pi_to_pseudo_inertia,
    pseudo_inertia_to_pi,
    skew,
)
from idyn_ros.errors import IdentificationError

__all__ = [
    "TYPICAL_SCALE",
    "FlangeMotion",
    "PayloadEstimate",
    "flange_motion",
    "joint_regressor",
    "payload_from_phi",
    "payload_phi",
    "payload_torque",
    "regressor",
    "regressor_condition",
    "solve_payload",
    "vendor_formats",
]

# Column scales of a typical payload (1 kg, CoM 0.1 m, inertia 0.01 kg m^2): the condition number is reported on
# Y diag(TYPICAL_SCALE), so each column counts with the torque a typical payload gives it (decision: unscaled, the
# inertia columns' 1e-2 magnitude alone would make every Y look ill conditioned).
TYPICAL_SCALE = np.array([1.0, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01])
MAX_CONDITION = 1e6  # above: the data do not excite the payload's parameters (refused, with what to do)


def _lmat(v: np.ndarray) -> np.ndarray:
    """(..., 3) -> (..., 3, 6) with ``_lmat(v) @ I == L v`` for I in pinocchio order [Ixx Ixy Iyy Ixz Iyz Izz]."""
    v = np.asarray(v, dtype=float)
    M = np.zeros((*v.shape[:-1], 3, 6))
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    M[..., 0, 0], M[..., 0, 1], M[..., 0, 3] = x, y, z
    M[..., 1, 1], M[..., 1, 2], M[..., 1, 4] = x, y, z
    M[..., 2, 3], M[..., 2, 4], M[..., 2, 5] = x, y, z
    return M


def regressor(w: np.ndarray, alpha: np.ndarray, a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Y (..., 6, 10) of the module docstring: flange wrench [f; n] = Y phi.

    Args (all (..., 3), flange axes): w rad/s, alpha rad/s^2, a m/s^2 (classical acceleration of the flange origin),
    g m/s^2 (gravity, e.g. R^T (0, 0, -9.81)).
    """
    w, alpha, a, g = (np.asarray(x, dtype=float) for x in (w, alpha, a, g))
    a_g = a - g
    Sw = skew(w)
    Y = np.zeros((*a_g.shape[:-1], 6, 10))
    Y[..., :3, 0] = a_g
    Y[..., :3, 1:4] = skew(alpha) + Sw @ Sw
    Y[..., 3:, 1:4] = -skew(a_g)
    Y[..., 3:, 4:] = _lmat(alpha) + Sw @ _lmat(w)
    return Y


@dataclass
class FlangeMotion:
    """Flange kinematics per sample, flange axes: w, alpha, a (classical), g (gravity) (N, 3); J (N, 6, n) LOCAL;
    R (N, 3, 3) the flange's orientation in the base frame."""

    w: np.ndarray
    alpha: np.ndarray
    a: np.ndarray
    g: np.ndarray
    J: np.ndarray
    R: np.ndarray

    def regressor(self) -> np.ndarray:
        """Y (N, 6, 10)."""
        return regressor(self.w, self.alpha, self.a, self.g)


def flange_motion(model: Any, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, frame: str | None = None) -> FlangeMotion:
    """Flange (or ``frame``) kinematics of a ``RobotModel`` at (N, n) states (one pinocchio pass per sample)."""
    q, dq, ddq = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (q, dq, ddq))
    m, d = model.pin_model, model.data
    fid = m.getFrameId(frame or model.flange_frame)
    N = q.shape[0]
    out = FlangeMotion(np.empty((N, 3)), np.empty((N, 3)), np.empty((N, 3)), np.empty((N, 3)), np.empty((N, 6, m.nv)),
                       np.empty((N, 3, 3)))
    g_world = np.array(m.gravity.linear)
    local = pin.ReferenceFrame.LOCAL
    for k in range(N):
        pin.forwardKinematics(m, d, q[k], dq[k], ddq[k])
        pin.updateFramePlacement(m, d, fid)
        v = pin.getFrameVelocity(m, d, fid, local)
        acc = pin.getFrameClassicalAcceleration(m, d, fid, local)
        out.w[k] = v.angular
        out.alpha[k] = acc.angular
        out.a[k] = acc.linear
        out.R[k] = d.oMf[fid].rotation
        out.g[k] = out.R[k].T @ g_world
        pin.computeJointJacobians(m, d, q[k])
        out.J[k] = pin.getFrameJacobian(m, d, fid, local)
    return out


def joint_regressor(model: Any, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
    """J^T Y (N, n, 10): ``tau_payload = joint_regressor(...) @ phi`` (module docstring)."""
    fm = flange_motion(model, q, dq, ddq)
    return np.einsum("kri,krp->kip", fm.J, fm.regressor())


def payload_phi(payload: Any) -> np.ndarray:
    """phi (10,) pinocchio order from a ``Payload`` (mass, CoM in the flange frame, inertia about the CoM)."""
    from idyn_ros.robots.spec import Payload

    p = Payload.coerce(payload)
    return barycentric_to_pi(p.mass, np.asarray(p.com), p.inertia_matrix())


def payload_from_phi(phi: np.ndarray) -> Any:
    """The ``Payload`` of a physically consistent phi (RobotDescriptionError otherwise)."""
    from idyn_ros.robots.spec import Payload

    m, c, Ic = pi_to_barycentric(phi)
    Ic = 0.5 * (Ic + Ic.T)
    return Payload(m, tuple(c), (Ic[0, 0], Ic[0, 1], Ic[0, 2], Ic[1, 1], Ic[1, 2], Ic[2, 2]))


class PayloadTorque:
    """tau_payload(q, dq, ddq) (n,) Nm on the 1 kHz path: RNEA of the model with the payload minus the bare model's.

    Why not J^T Y phi here: two RNEA passes (~3 us) cost less than the kinematics + Jacobian + Y (tests show both
    agree). ``model`` is any RobotModel (nominal or identified: the difference does not depend on the arm's own
    parameters, RNEA being linear in them).
    """

    def __init__(self, model: Any, payload: Any) -> None:
        from idyn_ros.robots.spec import Payload

        self.payload = Payload.coerce(payload)
        self.bare = model
        self.loaded = model.with_payload(self.payload)
        self.out = np.zeros(model.n)

    def __call__(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        np.subtract(self.loaded.rnea(q, dq, ddq), self.bare.rnea(q, dq, ddq), out=self.out)
        return self.out

    def gravity(self, q: np.ndarray) -> np.ndarray:
        """The payload's gravity torque (n,) Nm."""
        np.subtract(self.loaded.gravity(q), self.bare.gravity(q), out=self.out)
        return self.out


def payload_torque(model: Any, payload: Any, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
    """J^T Y phi (N, n) for (N, n) states: the torque the drives add for ``payload``."""
    return joint_regressor(model, q, dq, ddq) @ payload_phi(payload)


def regressor_condition(Ap: np.ndarray, nuisance: np.ndarray | None = None) -> float:
    """Condition number of the payload regressor (rows, 10) with columns scaled by TYPICAL_SCALE, after eliminating
    ``nuisance`` columns (rows, k) when given (what the solver sees)."""
    A = np.asarray(Ap, dtype=float).reshape(-1, 10) * TYPICAL_SCALE
    if nuisance is not None:
        A = _project_out(np.asarray(nuisance, dtype=float).reshape(A.shape[0], -1), A)[0][0]
    s = np.linalg.svd(A, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else math.inf


def _project_out(nuisance: np.ndarray, *blocks: np.ndarray) -> tuple[tuple[np.ndarray, ...], int]:
    """(each block minus its projection on span(nuisance), rank of nuisance) (rank-revealing SVD, scaled columns)."""
    norms = np.linalg.norm(nuisance, axis=0)
    keep = norms > 0
    if not keep.any():
        return blocks, 0
    U, s, _ = np.linalg.svd(nuisance[:, keep] / norms[keep], full_matrices=False)
    U = U[:, s > 1e-10 * s[0]]
    return tuple(b - U @ (U.T @ b) for b in blocks), U.shape[1]


# ------------------------------------------------------------------------------------------ the estimate
@dataclass
class PayloadEstimate:
    """An identified payload. ``payload`` is the physically consistent result (the constrained solve when plain
    least squares was not consistent); standard deviations (mass kg, CoM m, inertia kg m^2 in URDF order) are the
    (weighted) least-squares covariance mapped to ``payload``'s mass, CoM and inertia."""

    payload: Any
    mass_std: float
    com_std: np.ndarray
    inertia_std: np.ndarray
    phi: np.ndarray  # (10,) pinocchio order, the reported solution
    phi_ls: np.ndarray  # (10,) plain (weighted) least squares
    covariance: np.ndarray  # (10, 10) of phi_ls
    ls_problems: tuple[str, ...]  # physical-consistency problems of phi_ls (empty: consistent)
    solve: str  # least_squares | constrained
    condition_number: float
    residual_rms: np.ndarray  # (n,) Nm per joint, after the fit
    n_samples: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def physically_consistent(self) -> bool:
        """Whether plain least squares already gave a physical payload."""
        return not self.ls_problems

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` (exactly these keys)."""
        p = self.payload
        def finite(x: float) -> float | None:  # JSON has no infinity: an undetermined std is null
            return float(x) if math.isfinite(x) else None

        return {
            "mass_kg": p.mass, "mass_std_kg": finite(self.mass_std),
            "com_m": list(p.com), "com_std_m": [finite(x) for x in self.com_std],
            "inertia_kgm2": list(p.inertia), "inertia_std_kgm2": [finite(x) for x in self.inertia_std],
            "consistency": {"least_squares_consistent": self.physically_consistent,
                            "problems": list(self.ls_problems), "solve": self.solve,
                            "condition_number": float(self.condition_number)},
        }


def _barycentric_vector(phi: np.ndarray) -> np.ndarray:
    """phi -> [m, cx, cy, cz, ixx, ixy, ixz, iyy, iyz, izz] (inertia about the CoM, URDF order)."""
    m, c, Ic = pi_to_barycentric(phi)
    return np.array([m, *c, Ic[0, 0], Ic[0, 1], Ic[0, 2], Ic[1, 1], Ic[1, 2], Ic[2, 2]])


def _barycentric_std(phi: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """First-order standard deviations of _barycentric_vector(phi) (central-difference Jacobian)."""
    J = np.zeros((10, 10))
    for k in range(10):
        h = 1e-6 * max(abs(phi[k]), 1e-3)
        e = np.zeros(10)
        e[k] = h
        J[:, k] = (_barycentric_vector(phi + e) - _barycentric_vector(phi - e)) / (2 * h)
    return np.sqrt(np.maximum(np.diag(J @ cov @ J.T), 0.0))


_PSD_SCALE = np.array([0.1, 0.1, 0.1, 1.0])  # pseudo-inertia J -> D^-1 J D^-1: entries ~1 for a typical payload


def _pseudo_inertia_map() -> np.ndarray:
    """(16, 10): vec(D^-1 J(TYPICAL_SCALE * x) D^-1) = K @ x, J the pseudo-inertia (linear in phi)."""
    K = np.zeros((16, 10))
    for k in range(10):
        e = np.zeros(10)
        e[k] = TYPICAL_SCALE[k]
        K[:, k] = (pi_to_pseudo_inertia(e) / np.outer(_PSD_SCALE, _PSD_SCALE)).reshape(-1)
    return K


def _constrained(Rs: np.ndarray, c: np.ndarray, iterations: int = 5000, tol: float = 1e-10) -> np.ndarray:
    """phi minimising ||Rs phi / TYPICAL_SCALE - c|| with a positive semi-definite pseudo-inertia: a convex problem
    (a quadratic over the PSD cone), solved by ADMM with the cone projection an eigenvalue clip (Boyd et al. 2011,
    sec. 5); the result is read off the projected (PSD) matrix, so it is physically consistent by construction."""
    K = _pseudo_inertia_map()
    H = 2.0 * Rs.T @ Rs
    KtK = K.T @ K
    rho = float(np.linalg.eigvalsh(H)[-1] / np.linalg.eigvalsh(KtK)[-1])
    system = np.linalg.inv(H + rho * KtK)
    g = 2.0 * Rs.T @ c
    x = np.linalg.lstsq(Rs, c, rcond=None)[0]
    Z = K @ x
    U = np.zeros(16)
    for _ in range(iterations):
        x = system @ (g + rho * K.T @ (Z - U))
        Kx = K @ x
        e, V = np.linalg.eigh((Kx + U).reshape(4, 4))
        Z_new = ((V * np.maximum(e, 0.0)) @ V.T).reshape(-1)
        U += Kx - Z_new
        dual = rho * np.linalg.norm(Z_new - Z)
        Z = Z_new
        if np.linalg.norm(Kx - Z) < tol * max(1.0, np.linalg.norm(Z)) and dual < tol * max(1.0, np.linalg.norm(g)):
            break
    J = Z.reshape(4, 4) * np.outer(_PSD_SCALE, _PSD_SCALE)
    return pseudo_inertia_to_pi(0.5 * (J + J.T))


def solve_payload(Ap: np.ndarray, tau: np.ndarray, nuisance: np.ndarray | None = None,
                  weighted: bool = True) -> PayloadEstimate:
    """Payload parameters from ``tau = Ap phi + nuisance x + noise`` (module docstring).

    Args:
        Ap: (N, n, 10) payload joint regressor (``joint_regressor``; zero rows for samples without the payload).
        tau: (N, n) torque the regressors must explain (Nm).
        nuisance: (N, n, k) other unknowns' columns (bare-arm parameters, friction, offsets) or None.
        weighted: second pass with rows weighted by 1 / sigma_j per joint.
    Raises:
        IdentificationError: the data do not excite all ten payload parameters.
    """
    Ap = np.asarray(Ap, dtype=float)
    tau = np.asarray(tau, dtype=float)
    N, n = tau.shape
    if Ap.shape != (N, n, 10):
        raise IdentificationError(f"payload regressor must be (N, n, 10) = ({N}, {n}, 10), got {Ap.shape}")
    k = 0 if nuisance is None else nuisance.shape[-1]
    if N * n < 3 * (10 + k):
        raise IdentificationError(f"{N} samples x {n} joints are too few for 10 payload + {k} other parameters; "
                                  "record a longer excitation (`idyn excite --payload`)")
    weights = np.ones(n)
    passes = 2 if weighted else 1
    for it in range(passes):
        A = (Ap * weights[None, :, None]).reshape(-1, 10) * TYPICAL_SCALE
        b = (tau * weights).reshape(-1)
        rank = 0
        if nuisance is not None:
            (A, b), rank = _project_out((nuisance * weights[None, :, None]).reshape(N * n, k), A, b)
        s = np.linalg.svd(A, compute_uv=False)
        cond = float(s[0] / s[-1]) if s[-1] > 0 else math.inf
        if not cond < MAX_CONDITION:
            raise IdentificationError(
                f"the data do not excite the payload's 10 parameters (scaled regressor condition {cond:.3g}): the "
                "wrist must rotate through many orientations with the payload attached; play an excitation from "
                "`idyn excite --payload`")
        x, *_ = np.linalg.lstsq(A, b, rcond=None)
        resid = (b - A @ x).reshape(N, n) / weights
        dof = max(N * n - 10 - rank, 1)
        sigma = np.sqrt((resid**2).sum(0) / max(dof / n, 1.0))
        if it + 1 < passes:
            weights = 1.0 / np.maximum(sigma, 1e-9 * max(float(sigma.max()), 1e-12))
    r_w = (resid * weights).reshape(-1)
    s2 = float(r_w @ r_w) / dof
    G = A.T @ A
    cov = s2 * np.linalg.inv(G) * np.outer(TYPICAL_SCALE, TYPICAL_SCALE)
    phi_ls = x * TYPICAL_SCALE
    problems = tuple(check_physical_consistency(phi_ls, names=["payload"]))
    phi, solve = phi_ls, "least_squares"
    if problems:
        Q, R = np.linalg.qr(A)
        phi = _constrained(R, Q.T @ b)
        solve = "constrained"
    # linearised at the reported payload, not at phi_ls: at a least-squares mass of -5.6 kg the CoM of a reported
    # 0.07 kg came out +- 1.3 mm; the CoM of a near-zero mass is undetermined and its std says so
    with np.errstate(divide="ignore", invalid="ignore"):
        std = _barycentric_std(phi, cov)
    std = np.where(np.isfinite(std), std, math.inf)
    est = PayloadEstimate(payload_from_phi(phi), float(std[0]), std[1:4], std[4:], phi, phi_ls, cov, problems, solve,
                          regressor_condition(Ap, nuisance), np.sqrt((resid**2).mean(0)), N)
    est.info["row_weights"] = weights.tolist()
    return est


# ------------------------------------------------------------------------------------------ vendor formats
def _zyx_euler_deg(R: np.ndarray) -> tuple[float, float, float]:
    """(A, B, C) in degrees with R = Rz(A) Ry(B) Rx(C) (KUKA: A about Z, B about the new Y, C about the new X)."""
    B = math.asin(max(-1.0, min(1.0, -R[2, 0])))
    if abs(math.cos(B)) > 1e-9:
        A = math.atan2(R[1, 0], R[0, 0])
        C = math.atan2(R[2, 1], R[2, 2])
    else:  # gimbal lock: put the whole rotation about z in A
        A = math.atan2(-R[0, 1], R[1, 1])
        C = 0.0
    return math.degrees(A), math.degrees(B), math.degrees(C)


def principal_axes(inertia: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(moments (3,) ascending, R (3, 3) with columns the principal axes in flange axes, det R = +1)."""
    moments, R = np.linalg.eigh(0.5 * (inertia + inertia.T))
    if np.linalg.det(R) < 0:
        R[:, 2] = -R[:, 2]
    return moments, R


def vendor_formats(payload: Any, sequence_names: Sequence[str] = ()) -> dict[str, Any]:
    """The payload in the form each vendor's controller takes (all in the flange frame, SI unless stated).

    - Franka ``franka_msgs/srv/SetLoad`` (libfranka ``Robot::setLoad``): mass, center_of_mass = F_x_Cload (m),
      load_inertia 3x3 about the CoM, column-major (docs.ros.org franka_msgs/srv/SetLoad);
    - UR: URScript ``set_target_payload(m, cog, inertia)`` with inertia [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] about the CoG,
      tool flange axes (UR Script manual, PolyScope >= 5.10), and the ur_robot_driver's ``ur_msgs/srv/SetPayload``
      (mass, center_of_gravity; no inertia);
    - KUKA load data: M (kg), X, Y, Z (mm), A, B, C (deg: principal axes Rz(A) Ry(B) Rx(C)), JX, JY, JZ (kg m^2
      about those axes) (KUKA KR IONTEC manual, "Load center of gravity and mass moment of inertia");
    - ``xacro``: this package's ``payload_*`` xacro arguments.
    """
    from idyn_ros.robots.spec import Payload

    p = Payload.coerce(payload)
    I = p.inertia_matrix()
    ixx, ixy, ixz, iyy, iyz, izz = p.inertia
    moments, R = principal_axes(I)
    A, B, C = _zyx_euler_deg(R)
    cog = [float(v) for v in p.com]
    ur_inertia = [ixx, iyy, izz, ixy, ixz, iyz]

    def numbers(values: Sequence[float]) -> str:
        return ", ".join(f"{v:.6g}" for v in values)

    return {
        "franka_set_load": {"mass": p.mass, "center_of_mass": cog,
                            "load_inertia": [float(v) for v in I.T.reshape(-1)]},
        "ur_set_target_payload": {
            "mass": p.mass, "cog": cog, "inertia": ur_inertia,
            "urscript": f"set_target_payload({p.mass:.6g}, [{numbers(cog)}], [{numbers(ur_inertia)}])"},
        "ur_msgs_set_payload": {"mass": p.mass, "center_of_gravity": {"x": cog[0], "y": cog[1], "z": cog[2]}},
        "kuka_load_data": {"M": p.mass, "X": 1000 * cog[0], "Y": 1000 * cog[1], "Z": 1000 * cog[2], "A": A, "B": B,
                           "C": C, "JX": float(moments[0]), "JY": float(moments[1]), "JZ": float(moments[2])},
        "xacro": p.xacro_args(),
    }
