"""An external-wrench estimate a user can trust: re-zeroing at rest, an uncertainty, contact detection and a
reduced-rank estimate that says where it is blind, after the residual observers of ``control.wrench``.

What users ask vendors for, and what each part here answers:
- drifting estimates at rest, pose-dependent bias: ``BiasTracker`` re-zeros the external joint torque at rest
  (a request, e.g. the node's ``~/rezero`` service, or automatically: see its docstring), in joint space,
  because the bias is the model's error at this pose and that lives in joint torques; it applies at that pose
  only (within ``pose_tolerance``), where the rest spread applies too;
- "how far can I trust it": ``TrustedWrench`` carries a per-axis 1-sigma from the model's validation residuals
  (``models.uncertainty``: the RMSE while moving or away from the last re-zero's pose; near that pose the rest
  spread, blended towards the RMSE as a joint speeds up to ``BLEND_SPEEDS`` x ``rest_velocity``);
- stiction at standstill (a position-controlled arm held still by a PI loop winds its motor torque up and down
  inside the static-friction band, and a push leaves part of itself in that band): ``StictionBand`` reports the
  external joint torque closest to zero that the model's break-away friction allows (a soft threshold that fades
  out as the joint starts sliding), and ``WrenchEstimate.hidden_tool`` how much force per axis it can hide then (not
  silent: a user sees how large a push can go unseen at standstill);
- contact detection: ``ContactDetector``, the force's Mahalanobis distance against that sigma, with hysteresis;
- silent zeroing near singularities: ``ContactWrenchMapper`` drops the wrench directions the joint torques cannot
  see (singular values of J below ``min_singular_value``), estimates the rest, and reports the rank and the
  dropped directions instead of shrinking them quietly (a damped inverse does that).

Conventions as ``control.wrench``: the wrench the environment applies to the robot at the flange origin,
[f (N); m (Nm)], base axes (LOCAL_WORLD_ALIGNED) and flange axes (``tool``). J is used as is: 1 Nm of moment weighs
as 1 N of force (a characteristic length of 1 m, about a UR5's reach), in the singular values and the fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from idyn_ros.dynamics import RobotModel
from idyn_ros.dynamics.friction import DQ_LIM
from idyn_ros.errors import ParameterError

if TYPE_CHECKING:
    from idyn_ros.parameters import WrenchObserverParams

CONTACT_MODELS = ("wrench", "point")
#: Without a model uncertainty (no model, or an artifact from before it was recorded): 5 % of each joint's effort
#: limit while moving, a fifth of that after a re-zero at rest (decision; says so in ``TrustedWrench.describe``).
FALLBACK_SIGMA_OF_LIMIT = 0.05
FALLBACK_REST_FRACTION = 0.2
#: Near the re-zeroed pose a joint's sigma goes from the rest spread (still) to the moving RMSE (at this many times
#: rest_velocity and faster), quadratically in speed (decision: a push that makes a compliant arm yield slowly
#: stays judged against the rest spread; a motion against the model's whole error).
BLEND_SPEEDS = 10.0


@dataclass(frozen=True)
class TrustSettings:
    """The tunables: the wrench_observer node's parameters of the same names, ``damping`` its ``pinv_damping``
    (defaults equal to the node's: a test checks it, so ``idyn wrench`` scores what the node publishes)."""

    min_singular_value: float = 0.05  # singular values of J below this: direction dropped and flagged
    damping: float = 0.01  # isotropic prior on the wrench (the damped pseudo-inverse's mu); 0 = none
    contact_model: str = "wrench"  # wrench: any [f; m]; point: contact near the flange, moment ~ point_moment_nm
    point_moment_nm: float = 1.0  # 1-sigma of the moment a point contact transmits at the flange origin
    auto_rezero: bool = True
    rest_velocity: float = 0.01  # rad/s: every joint slower -> still (leaves still above twice this)
    rest_time: float = 0.5  # s still before the arm counts as at rest, and the averaging window of a re-zero
    pose_tolerance: float = 0.05  # rad: this close (every joint) to the last re-zero's pose is the same pose
    settle_time: float = 2.0  # s: a "contact" that stays still this long at rest is settled friction: zeroed (0 = off)
    # contact when the force is this many sigma from zero, released below contact_off_sigma (hysteresis). Decision:
    # 6 / 3, not a Gaussian 3-4: sigma comes from contact-free data and misses the share of a push that static
    # friction keeps in the joints afterwards (on the simulated UR5: 4-5 sigma after 5-20 N pushes; the threshold
    # sweep of experiments/wrench_trust_eval.py: 0 % false alarms from 6 sigma on, 5 N still detected up to 8)
    contact_on_sigma: float = 6.0
    contact_off_sigma: float = 3.0
    stiction_band: bool = True  # soft-threshold each joint by its break-away friction at standstill (StictionBand)

    @classmethod
    def from_params(cls, v: WrenchObserverParams) -> TrustSettings:
        """From the node's ``WrenchObserverParams`` (ParameterError for an inconsistent pair)."""
        try:
            return cls(min_singular_value=v.min_singular_value, damping=v.pinv_damping,
                       contact_model=v.contact_model, point_moment_nm=v.point_moment_nm, auto_rezero=v.auto_rezero,
                       rest_velocity=v.rest_velocity, rest_time=v.rest_time, pose_tolerance=v.pose_tolerance,
                       settle_time=v.settle_time, contact_on_sigma=v.contact_on_sigma,
                       contact_off_sigma=v.contact_off_sigma, stiction_band=v.stiction_band)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None

    def __post_init__(self) -> None:
        if self.contact_model not in CONTACT_MODELS:
            raise ValueError(f"contact_model {self.contact_model!r} is not one of {list(CONTACT_MODELS)}")
        if not 0 < self.contact_off_sigma <= self.contact_on_sigma:
            raise ValueError(f"need 0 < contact_off_sigma ({self.contact_off_sigma}) <= contact_on_sigma "
                             f"({self.contact_on_sigma}): the release threshold is the lower one")


def block_rotate(R: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[R^T f; R^T m] of a 6-vector (base axes -> flange axes)."""
    return np.concatenate([R.T @ v[:3], R.T @ v[3:]])


class ContactWrenchMapper:
    """tau_ext (n,) -> wrench (6,) by weighted least squares on the observable subspace of J^T, with its covariance.

    ``map(q, tau, sigma)``: rows weighted by 1/sigma_j^2 (joints the model predicts badly count less); with
    ``contact_model="point"`` the moment gets a zero-mean prior of ``point_moment_nm`` (a push near the tool
    transmits little moment, so 6 joint torques estimate 3 forces with redundancy). Directions with a singular
    value below ``min_singular_value`` are not estimated (zero) and listed in ``unobservable``.
    """

    def __init__(self, rbd: RobotModel, settings: TrustSettings = TrustSettings()) -> None:
        self.rbd = rbd
        self.settings = settings
        n = rbd.n
        self.P = np.zeros((6, n))  # F = P tau at the last map()
        self.cov = np.zeros((6, 6))  # covariance of F (base axes)
        self.rank = 6
        self.unobservable = _NO_DIRECTIONS  # base-axes unit wrenches not estimated, (k, 6)
        self.singular_values = np.zeros(min(6, n))
        self.R = np.eye(3)
        self._w = np.zeros(n)  # per-joint weights 1/sigma^2, in units of their mean
        self._jw = np.zeros((6, n))  # J diag(w)
        self._h = np.zeros((6, 6))  # the information matrix J W J^T + priors
        self._f = np.zeros(6)

    def map(self, q: np.ndarray, tau: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """The wrench (6,) for ``tau``; P, cov, rank and unobservable describe it (a view: copy to keep it)."""
        J, self.R = self.rbd.flange_jacobian(q)
        w = self._w
        np.maximum(sigma, 1e-9, out=w)
        np.square(w, out=w)
        np.reciprocal(w, out=w)
        scale = float(w.mean())  # information in units of the mean joint, so damping keeps its old meaning
        w /= scale
        np.multiply(J, w, out=self._jw)
        H = self._h
        np.matmul(self._jw, J.T, out=H)
        H.flat[::7] += self.settings.damping ** 2
        if self.settings.contact_model == "point":
            H.flat[21::7] += 1.0 / (scale * self.settings.point_moment_nm ** 2)  # the moment's diagonal
        s = np.linalg.svd(J, compute_uv=False)
        self.singular_values = s
        if len(s) == 6 and s[-1] >= self.settings.min_singular_value:  # every direction kept: U H^-1 U^T = H^-1
            h_inv = np.linalg.inv(H)
            self.rank, self.unobservable = 6, _NO_DIRECTIONS
        else:
            U = np.linalg.svd(J, full_matrices=True)[0]
            keep = np.zeros(6, dtype=bool)
            keep[: len(s)] = s >= self.settings.min_singular_value
            Ur = U[:, keep]
            self.rank = int(keep.sum())
            self.unobservable = U[:, ~keep].T
            Hr = Ur.T @ H @ Ur
            h_inv = Ur @ (np.linalg.inv(Hr) if self.rank else np.zeros((0, 0))) @ Ur.T
        np.matmul(h_inv, self._jw, out=self.P)
        np.divide(h_inv, scale, out=self.cov)
        return np.dot(self.P, tau, out=self._f)


_NO_DIRECTIONS = np.zeros((0, 6))
_NO_DIRECTIONS.flags.writeable = False


class StictionBand:
    """tau_ext -> the value closest to zero within +- the static-friction band, per joint (a soft threshold).

    At standstill a joint's friction is anything within +- its break-away level F_s (the identified Coulomb level),
    so a residual inside that band is no evidence of contact. The band is F_s (1 - |dq| / DQ_LIM), 0 from the speed
    where the identified Coulomb term is fully developed (decision: the band and the model's Coulomb term then
    cover exactly the range of friction the model allows). On the real UR5 (CB2) pushed at standstill it took the
    force error against the F/T sensor from 1.9x to 0.8x the UR controller's own (``idyn bench --only ur5``).
    """

    def __init__(self, static_friction: np.ndarray) -> None:
        self.level = np.asarray(static_friction, dtype=np.float64).copy()
        self.band = np.zeros_like(self.level)
        self._mag = np.zeros_like(self.level)

    def apply(self, tau: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """Shrink ``tau`` (n,) in place towards zero by the band at speeds ``dq``; returns it."""
        band = self.band
        np.abs(dq, out=band)
        band *= -1.0 / DQ_LIM
        band += 1.0
        np.clip(band, 0.0, 1.0, out=band)
        band *= self.level
        mag = np.abs(tau, out=self._mag)
        np.subtract(mag, band, out=mag)
        np.maximum(mag, 0.0, out=mag)
        np.copysign(mag, tau, out=tau)
        return tau


class RestDetector:
    """Still = every |dq_j| below ``rest_velocity``; at rest = still for ``rest_time`` s (left above twice the
    velocity: hysteresis, so encoder noise near the threshold does not flicker it)."""

    def __init__(self, settings: TrustSettings) -> None:
        self.settings = settings
        self.still_since_ns = -1
        self.at_rest = False

    def update(self, stamp_ns: int, dq: np.ndarray) -> bool:
        speed = float(np.max(np.abs(dq))) if len(dq) else 0.0
        limit = self.settings.rest_velocity * (2.0 if self.still_since_ns >= 0 else 1.0)
        if speed >= limit:
            self.still_since_ns = -1
            self.at_rest = False
            return False
        if self.still_since_ns < 0:
            self.still_since_ns = stamp_ns
        self.at_rest = (stamp_ns - self.still_since_ns) * 1e-9 >= self.settings.rest_time
        return self.at_rest


def mahalanobis(x: np.ndarray, cov: np.ndarray, rcond: float = 1e-9) -> float:
    """sqrt(x^T cov^+ x) for a symmetric PSD ``cov``, directions with eigenvalue below rcond x the largest dropped:
    what ``pinv(cov, rcond, hermitian=True)`` gives, from one eigh without forming the pseudo-inverse.

    A well-conditioned 3x3 ``cov`` (the contact detector's force covariance, away from singular poses) takes
    ``_mahalanobis_3x3``: the same distance from a Cholesky factorisation in Python floats (1.4 us against 24 us).
    """
    if cov.shape == (3, 3) and rcond <= CHOLESKY_MIN_EIGEN_RATIO:
        distance = _mahalanobis_3x3(x, cov)
        if distance is not None:
            return distance
    w, v = np.linalg.eigh(cov)
    a = np.abs(w)
    keep = a > rcond * a.max()  # an all-zero cov keeps nothing: distance 0
    proj = v.T @ x
    return float(np.sqrt(max(float(np.sum(proj[keep] ** 2 / w[keep])), 0.0)))


#: ``_mahalanobis_3x3`` answers for a covariance whose smallest eigenvalue is above this fraction of its largest: there
#: it agrees with the eigh version to ~1e-13 (both round like eps x condition number), and the eigh version drops
#: nothing. Nearly singular ones (poses near a singularity) keep the eigh version.
CHOLESKY_MIN_EIGEN_RATIO = 1e-3


def _mahalanobis_3x3(x: np.ndarray, cov: np.ndarray) -> float | None:
    """sqrt(x^T cov^-1 x) by cov = L L^T (Cholesky) of a 3x3 SPD ``cov``; None unless its smallest eigenvalue is
    above ``CHOLESKY_MIN_EIGEN_RATIO`` x its largest, told without eigenvalues: the largest is at most the trace, the
    smallest at least det / (sum of the principal 2x2 minors)."""
    (a, _, _), (b, d, _), (c, e, f) = cov.tolist()  # the lower triangle, as eigh reads it
    if not a > 0.0:
        return None
    l11 = math.sqrt(a)
    l21, l31 = b / l11, c / l11
    pivot2 = d - l21 * l21
    if not pivot2 > 0.0:
        return None
    l22 = math.sqrt(pivot2)
    l32 = (e - l31 * l21) / l22
    pivot3 = f - l31 * l31 - l32 * l32
    det = a * pivot2 * pivot3
    minors = (a * d - b * b) + (a * f - c * c) + (d * f - e * e)
    if not (pivot3 > 0.0 and minors > 0.0 and det > CHOLESKY_MIN_EIGEN_RATIO * minors * (a + d + f)):
        return None
    x0, x1, x2 = x.tolist()
    y0 = x0 / l11  # solve L y = x: then x^T cov^-1 x = |y|^2
    y1 = (x1 - l21 * y0) / l22
    y2 = (x2 - l31 * y0 - l32 * y1) / math.sqrt(pivot3)
    return math.sqrt(y0 * y0 + y1 * y1 + y2 * y2)


class ContactDetector:
    """contact when the force's Mahalanobis distance exceeds ``contact_on_sigma``; released below
    ``contact_off_sigma``."""

    def __init__(self, settings: TrustSettings) -> None:
        self.settings = settings
        self.contact = False
        self.score = 0.0

    def update(self, force: np.ndarray, cov_force: np.ndarray) -> bool:
        self.score = mahalanobis(force, cov_force)
        limit = self.settings.contact_off_sigma if self.contact else self.settings.contact_on_sigma
        self.contact = self.score > limit
        return self.contact


class BiasTracker:
    """The external joint torque's bias, re-zeroed on request or automatically at rest.

    Automatic (``auto_rezero``, unless contact is expected): each full ``rest_time`` window at rest ends with
    ``bias = mean of the window`` when the estimate was steady over it (force spread within the release
    threshold), no contact was detected in it and, at the pose of the last re-zero, the bias moves by no more than
    the release threshold (drift; a larger shift is a force too small to flag, or a friction state), except at a
    new pose: at rest away from the last re-zero's pose
    (more than ``pose_tolerance`` on some joint) the old bias is stale (it is pose-dependent), so the detector
    cannot be trusted there, and the window is taken as contact-free if no contact was detected on the way there
    (from leaving the last rest, contact at that moment included: a push that deflects a compliant arm to a new
    rest keeps its contact). A contact that begins during a contact-free motion and holds into the new rest is
    absorbed: say so beforehand (``contact_expected``). Settled friction: after a push, static friction can keep
    part of it in the joints, an offset that looks like a light contact forever; a flagged contact that stays
    steady for ``settle_time`` at rest is taken as that and zeroed (decision: a hand held perfectly still on the
    tool that long is absorbed too; 0 turns it off). A request (``request()``) zeros at the next update.
    """

    def __init__(self, n: int, settings: TrustSettings) -> None:
        self.settings = settings
        self.bias = np.zeros(n)
        self.zeroed = False
        self.zeroed_at_ns = -1
        self.q_zero = np.full(n, np.nan)  # pose of the last re-zero
        self.contact_expected = False
        self._contact_in_motion = False  # contact detected since leaving the last rest (or at that moment)
        self._steady_contact_s = 0.0  # how long a flagged contact has stayed steady at rest
        self._was_at_rest = False
        self._requested = False
        self._sum = np.zeros(n)
        self._fsum = np.zeros(3)
        self._bias_force = np.zeros(3)  # the raw force the last automatic re-zero took as bias
        self._fsq = np.zeros(3)
        self._count = 0
        self._start_ns = -1
        self._contact_seen = False

    def request(self) -> None:
        self._requested = True

    def restart(self) -> None:
        """Drop the current window and the rest it started in (``TrustedWrench.restart``); bias and pending request
        stay."""
        self._reset_window()
        self._was_at_rest = False
        self._steady_contact_s = 0.0

    def _reset_window(self) -> None:
        self._sum[:] = 0.0
        self._fsum[:] = 0.0
        self._fsq[:] = 0.0
        self._count = 0
        self._start_ns = -1
        self._contact_seen = False

    def same_pose(self, q: np.ndarray) -> bool:
        """Whether ``q`` is the pose of the last re-zero (within ``pose_tolerance``)."""
        return self.zeroed and bool(np.all(np.abs(q - self.q_zero) <= self.settings.pose_tolerance))

    def update(self, stamp_ns: int, q: np.ndarray, at_rest: bool, tau_raw: np.ndarray, force_raw: np.ndarray,
               contact: bool, sigma_force_rest: np.ndarray) -> bool:
        """One sample; True when the bias was (re)set now."""
        leaving = self._was_at_rest and not at_rest
        self._was_at_rest = at_rest
        if self._requested:
            self._requested = False
            self._set(stamp_ns, q, tau_raw)
            self._bias_force[:] = force_raw
            self._reset_window()
            return True
        if not at_rest:
            self._contact_in_motion = contact if leaving else (self._contact_in_motion or contact)
            self._steady_contact_s = 0.0
            self._reset_window()
            return False
        if self._start_ns < 0:
            self._start_ns = stamp_ns
        self._sum += tau_raw
        self._fsum += force_raw
        self._fsq += force_raw * force_raw
        self._count += 1
        self._contact_seen |= contact
        if (stamp_ns - self._start_ns) * 1e-9 < self.settings.rest_time:
            return False
        mean_f = self._fsum / self._count
        spread = np.sqrt(np.maximum(self._fsq / self._count - mean_f * mean_f, 0.0))
        steady = bool(np.all(spread <= self.settings.contact_off_sigma * sigma_force_rest))
        fresh = not self.same_pose(q) and not self._contact_in_motion  # a new pose reached without contact
        # at the pose it already knows, a re-zero only follows drift: a shift beyond the release threshold is a force
        # too small to flag (or a friction state), which the bias must not absorb
        drift = not self.same_pose(q) or bool(np.all(np.abs(mean_f - self._bias_force)
                                                      <= self.settings.contact_off_sigma * sigma_force_rest))
        span = (stamp_ns - self._start_ns) * 1e-9
        self._steady_contact_s = self._steady_contact_s + span if steady and self._contact_seen else 0.0
        settled = 0 < self.settings.settle_time <= self._steady_contact_s
        ok = (self.settings.auto_rezero and not self.contact_expected and steady
              and (fresh or settled or (not self._contact_seen and drift)))
        mean = self._sum / self._count
        self._reset_window()
        if ok:
            self._set(stamp_ns, q, mean)
            self._bias_force[:] = mean_f
        return ok

    def _set(self, stamp_ns: int, q: np.ndarray, tau: np.ndarray) -> None:
        self._contact_in_motion = False
        self._steady_contact_s = 0.0
        self.bias[:] = tau
        self.zeroed = True
        self.zeroed_at_ns = stamp_ns
        self.q_zero[:] = q


@dataclass
class WrenchEstimate:
    """One trusted estimate (arrays owned by the ``TrustedWrench`` and reused by its next update)."""

    base: np.ndarray = field(default_factory=lambda: np.zeros(6))  # [f N; m Nm], base axes
    tool: np.ndarray = field(default_factory=lambda: np.zeros(6))  # the same in flange axes
    sigma_tool: np.ndarray = field(default_factory=lambda: np.zeros(6))  # 1-sigma per flange axis (inf: dropped)
    # per flange axis, the most the stiction band can hide: sum_j |P_ij| band_j (0 while every joint slides)
    hidden_tool: np.ndarray = field(default_factory=lambda: np.zeros(6))
    tau_ext: np.ndarray = field(default_factory=lambda: np.zeros(0))  # external joint torque after the bias, Nm
    contact: bool = False
    contact_score: float = 0.0  # the force's distance from zero, in sigma
    rank: int = 6
    singular: bool = False  # some wrench direction is not estimated (near a singularity)
    unobservable_tool: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))  # flange-axes unit wrenches
    at_rest: bool = False
    zeroed: bool = False  # a re-zero's bias applies here (at the pose it was taken at)
    rezeroed: bool = False  # this update set a new bias


# where the artifact's uncertainty was measured (``models.uncertainty.torque_uncertainty``'s split), as said
SIGMA_SPLITS = {"val": "the model's validation residuals", "test": "the model's test residuals",
                "train": "the model's training residuals (no held-out data: optimistic; train with --val for an "
                         "honest sigma)",
                "val_repeats_training": "the model's validation residuals, but its validation repeats the training "
                                        "states (optimistic; validate on another trajectory for an honest sigma)",
                "parameter": "the tau_sigma parameter"}


class TrustedWrench:
    """The trust stage of the wrench observer: bias, mapping, uncertainty, contact (module doc).

    Args:
        rbd: the observers' robot model (``WrenchObserver.rbd``).
        tau_sigma: per-joint 1-sigma of the model torque while moving (Nm; the artifact's ``tau_sigma_nm``).
        tau_sigma_rest: after a re-zero at rest (``tau_sigma_rest_nm``); None: ``FALLBACK_REST_FRACTION`` of it.
        static_friction: per-joint break-away friction (Nm) for the stiction band; None: no band (no friction model).
    """

    def __init__(self, rbd: RobotModel, settings: TrustSettings = TrustSettings(),
                 tau_sigma: np.ndarray | None = None, tau_sigma_rest: np.ndarray | None = None,
                 static_friction: np.ndarray | None = None, sigma_split: str = "val") -> None:
        n = rbd.n
        self.settings = settings
        self.sigma_source = SIGMA_SPLITS.get(sigma_split, f"the model's {sigma_split} residuals")
        if tau_sigma is None:
            tau_sigma = FALLBACK_SIGMA_OF_LIMIT * np.asarray(rbd.effort_limit, dtype=np.float64)
            self.sigma_source = f"{FALLBACK_SIGMA_OF_LIMIT:.0%} of the effort limits (no model uncertainty)"
        if tau_sigma_rest is None:
            tau_sigma_rest = FALLBACK_REST_FRACTION * np.asarray(tau_sigma, dtype=np.float64)
            self.sigma_source += f"; at rest {FALLBACK_REST_FRACTION:g} of that (no rest spread recorded)"
        self.tau_sigma = np.asarray(tau_sigma, dtype=np.float64).reshape(n)
        self.tau_sigma_rest = np.asarray(tau_sigma_rest, dtype=np.float64).reshape(n)
        self.mapper = ContactWrenchMapper(rbd, settings)
        self.rest = RestDetector(settings)
        self.detector = ContactDetector(settings)
        self.bias = BiasTracker(n, settings)
        self.stiction = None if static_friction is None else StictionBand(np.reshape(static_friction, n))
        self.out = WrenchEstimate(tau_ext=np.zeros(n))
        self._raw_force = np.zeros(3)
        self._sigma = self.tau_sigma.copy()
        self._rest_var = np.minimum(self.tau_sigma_rest, self.tau_sigma) ** 2
        self._model_var = self.tau_sigma**2
        self._tool_p = np.zeros((6, n))  # the mapping to flange axes, |.| in place (hidden_tool)
        self._rest_sigma_sq = self.tau_sigma_rest**2
        self._T = np.zeros((6, 6))  # base -> flange axes for [f; m]: blockdiag(R^T, R^T)
        self._prev_ns = -1  # stamp of the last update

    @classmethod
    def from_model(cls, rbd: RobotModel, model: Any, settings: TrustSettings = TrustSettings(),
                   tau_sigma: Any = None, tau_sigma_rest: Any = None) -> TrustedWrench:
        """With the uncertainty a loaded ``FeedforwardComputer`` carries (its artifact's), if any; ``tau_sigma`` /
        ``tau_sigma_rest`` (the node's parameters, empty = unset) override it."""
        unc = (getattr(model, "uncertainty", None) if model is not None else None) or {}
        split = unc.get("split", "val")
        if split == "val" and unc.get("val_repeats_training"):
            split = "val_repeats_training"
        sig = np.asarray(unc["tau_sigma_nm"]) if unc.get("tau_sigma_nm") else None
        rest = np.asarray(unc["tau_sigma_rest_nm"]) if unc.get("tau_sigma_rest_nm") else None
        if tau_sigma is not None and len(tau_sigma):
            sig, split = np.asarray(tau_sigma, dtype=np.float64), "parameter"
        rest_split = unc.get("rest_split")
        if tau_sigma_rest is not None and len(tau_sigma_rest):
            rest, rest_split = np.asarray(tau_sigma_rest, dtype=np.float64), None
        trusted = cls(rbd, settings, sig, rest,
                      getattr(model, "static_friction", None) if model is not None else None, split)
        if rest is not None and rest_split and rest_split != unc.get("split"):  # e.g. a validation with no rests
            trusted.sigma_source += f"; at rest from {SIGMA_SPLITS.get(rest_split, rest_split)}"
        return trusted

    def describe(self) -> str:
        s = self.settings
        return (f"trust: sigma from {self.sigma_source}; contact at {s.contact_on_sigma:g} sigma (released at "
                f"{s.contact_off_sigma:g}); {self.describe_band()}; auto re-zero "
                f"{'on' if s.auto_rezero else 'off'} after {s.rest_time:g} s below {s.rest_velocity:g} rad/s; "
                f"contact model {s.contact_model}; directions with singular value < {s.min_singular_value:g} "
                f"dropped and flagged")

    def describe_band(self) -> str:
        if self.stiction is None:
            return "no stiction band (the model has no friction model)"
        levels = " ".join(f"{x:.2g}" for x in self.stiction.level)
        return f"stiction band {'on' if self.settings.stiction_band else 'off'} (break-away Nm: {levels})"

    def set_settings(self, settings: TrustSettings) -> None:
        """New tunables (a parameter change); the bias and the rest/contact states stay."""
        self.settings = settings
        for part in (self.mapper, self.rest, self.detector, self.bias):
            part.settings = settings

    def rezero(self) -> None:
        """Zero the estimate at the next update (the node's ``~/rezero`` service)."""
        self.bias.request()

    def restart(self) -> None:
        """Start the rest detector and the bias window over (the observer restarted: a gap, a stamp going back): they
        measure time by stamps, and a window spanning a gap counts time nobody watched; the bias itself is kept."""
        self.rest.still_since_ns = -1
        self.rest.at_rest = False
        self.bias.restart()

    def _hidden(self, T: np.ndarray) -> None:
        """out.hidden_tool: the band removes at most band_j from joint j, so at most sum_j |P_ij| band_j from axis i of
        the estimate; with P J^T = 1 (wrench model, full rank) that also bounds a contact force the joints' static
        friction can hold entirely, the estimate reading zero."""
        if self.stiction is None or not self.settings.stiction_band:
            self.out.hidden_tool[:] = 0.0
            return
        np.matmul(T, self.mapper.P, out=self._tool_p)
        np.abs(self._tool_p, out=self._tool_p)
        np.dot(self._tool_p, self.stiction.band, out=self.out.hidden_tool)

    def _external(self, tau_ext: np.ndarray, dq: np.ndarray, at_zero_pose: bool) -> None:
        """out.tau_ext = the observer's estimate minus the bias at the bias's own pose (elsewhere the estimate as is),
        through the stiction band when on."""
        if at_zero_pose:
            np.subtract(tau_ext, self.bias.bias, out=self.out.tau_ext)
        else:
            self.out.tau_ext[:] = tau_ext
        if self.stiction is not None and self.settings.stiction_band:
            self.stiction.apply(self.out.tau_ext, dq)

    def update(self, stamp_ns: int, q: np.ndarray, dq: np.ndarray, tau_ext: np.ndarray) -> WrenchEstimate:
        """One estimate from the observer's external joint torque ``tau_ext`` (Nm) at state (q, dq); a stamp not after
        the previous one restarts the rest and bias windows first (after a gap, the caller says so: ``restart()``)."""
        if stamp_ns <= self._prev_ns:
            self.restart()
        self._prev_ns = stamp_ns
        out = self.out
        at_rest = self.rest.update(stamp_ns, dq)
        sigma = self._sigma
        # decision: the bias applies at the pose it was taken at only, as the rest spread does: it is the model's
        # error at that pose plus the static-friction state the joints were stuck in, and both are stale elsewhere
        # (carried into motion it read as force: pushes in motion on the real UR5, studies/wrench_stiction)
        at_zero_pose = self.bias.same_pose(q)
        if at_zero_pose:
            blend = np.minimum(1.0, (np.abs(dq) / (BLEND_SPEEDS * self.settings.rest_velocity)) ** 2)
            np.sqrt(self._rest_var + (self._model_var - self._rest_var) * blend, out=sigma)
        else:
            sigma[:] = self.tau_sigma
        self._external(tau_ext, dq, at_zero_pose)
        out.base[:] = self.mapper.map(q, out.tau_ext, sigma)
        cov = self.mapper.cov
        contact = self.detector.update(out.base[:3], cov[:3, :3])
        np.dot(self.mapper.P[:3], tau_ext, out=self._raw_force)
        rest_force_sigma = np.sqrt((self.mapper.P[:3] ** 2) @ self._rest_sigma_sq)  # diag(P S P^T), S diagonal
        out.rezeroed = self.bias.update(stamp_ns, q, at_rest, tau_ext, self._raw_force, contact, rest_force_sigma)
        if out.rezeroed:  # the new bias applies from this sample on, at this pose
            self._external(tau_ext, dq, True)
            out.base[:] = self.mapper.P @ out.tau_ext
            contact = self.detector.update(out.base[:3], cov[:3, :3])
        R = self.mapper.R
        out.tool[:] = block_rotate(R, out.base)
        T = self._T
        T[:3, :3] = T[3:, 3:] = R.T
        var = np.einsum("ij,jk,ik->i", T, cov, T)  # diag(T cov T^T)
        if self.mapper.rank < 6:  # a dropped direction's component along an axis is unknown
            dropped = (T @ self.mapper.unobservable.T) ** 2  # (6, k)
            var[dropped.sum(1) > 1e-6] = np.inf
        out.sigma_tool[:] = np.sqrt(np.maximum(var, 0.0))
        self._hidden(T)
        out.contact = contact
        out.contact_score = self.detector.score
        out.rank = self.mapper.rank
        out.singular = self.mapper.rank < min(6, self.mapper.rbd.n)
        out.unobservable_tool = (T @ self.mapper.unobservable.T).T
        out.at_rest = at_rest
        out.zeroed = at_zero_pose or out.rezeroed
        return out
