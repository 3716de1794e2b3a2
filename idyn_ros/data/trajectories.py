"""Trajectories for data collection: optimal Fourier excitation, random fine motion, minimum jerk.

Each trajectory evaluates ``(q, dq, ddq)`` (each (len(t), n), rad, rad/s, rad/s^2) at given times,
so the same object feeds the reference node at 1 kHz and the limit checks here.

Fourier excitation (Swevers et al. 1997, as used in Callar 2021 §4.1):
    q_i(t) = q0_i + sum_l a_il/(w_f l) sin(w_f l t) - b_il/(w_f l) cos(w_f l t)
    dq_i   = sum_l a_il cos(w_f l t) + b_il sin(w_f l t)
    ddq_i  = sum_l -a_il w_f l sin(w_f l t) + b_il w_f l cos(w_f l t)
Zero velocity and acceleration at start and end — decision: enforce them EXACTLY by eliminating
the first harmonic's coefficients (a_i1 = -sum_{l>=2} a_il gives dq(0) = 0; b_i1 = -sum_{l>=2} l b_il
gives ddq(0) = 0; periodicity carries both to t = T), rather than by penalties or an added
polynomial: the constraints are linear, the trajectory stays one smooth periodic function that can
be repeated back to back, and the optimiser has fewer variables. The robot reaches q(0) first with
a minimum-jerk move (:func:`min_jerk`).

The coefficients minimise cond(Y_b), the condition number of the stacked base-parameter
regressor (RobotModel.regressor + base_parameters), under linear limit constraints on a time grid
(scipy SLSQP, analytic constraint Jacobian, time budget). The result is then checked at 1 kHz
against the full limits and shrunk about q0 if the grid missed a peak, so it never leaves them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from idyn_ros.errors import ParameterError

__all__ = [
    "ExcitationResult",
    "FineMotionTrajectory",
    "FourierTrajectory",
    "JointLimits",
    "MinJerkTrajectory",
    "check_limits",
    "fine_motion",
    "min_jerk",
    "optimize_excitation",
]


# ===================================================================================== limits
@dataclass(frozen=True)
class JointLimits:
    """Per-joint limits: positions (rad), velocity and acceleration magnitudes (rad/s, rad/s^2)."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray

    @classmethod
    def from_model(cls, model, acceleration: np.ndarray | None = None, robot: str | None = None) -> JointLimits:
        """Limits of a RobotModel; acceleration from ``idyn_ros.data.limits`` unless given."""
        from idyn_ros.data.limits import acceleration_limits

        acc = acceleration if acceleration is not None else acceleration_limits(robot or model.name, model.n)
        lower = np.asarray(model.lower, dtype=float)
        upper = np.asarray(model.upper, dtype=float)
        # continuous joints (unbounded) get +-pi so a trajectory stays interpretable
        lower = np.where(np.isfinite(lower) & (lower > -1e9), lower, -np.pi)
        upper = np.where(np.isfinite(upper) & (upper < 1e9), upper, np.pi)
        return cls(lower, upper, np.asarray(model.velocity_limit, dtype=float), np.asarray(acc, dtype=float))

    def shrunk(self, position_margin: float = math.radians(2.0), scale: float = 0.9) -> JointLimits:
        """Limits with a position margin (rad; 2 deg as in Callar 2021) and velocity/accel scaled."""
        return JointLimits(
            self.lower + position_margin, self.upper - position_margin, self.velocity * scale, self.acceleration * scale
        )


def check_limits(q: np.ndarray, dq: np.ndarray, ddq: np.ndarray, limits: JointLimits) -> dict[str, object]:
    """Worst use of each limit over samples: ratios <= 1 mean inside. Keys: ok, position, velocity, acceleration."""
    centre = 0.5 * (limits.upper + limits.lower)
    half = 0.5 * (limits.upper - limits.lower)
    pos = float(np.max(np.abs(q - centre) / half))
    vel = float(np.max(np.abs(dq) / limits.velocity))
    acc = float(np.max(np.abs(ddq) / limits.acceleration))
    return {"ok": pos <= 1.0 and vel <= 1.0 and acc <= 1.0, "position": pos, "velocity": vel, "acceleration": acc}


# ===================================================================================== Fourier
@dataclass
class FourierTrajectory:
    """Finite Fourier series trajectory (Swevers 1997). ``a``, ``b`` (n, L); ``q0`` (n,); ``period`` s."""

    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray
    period: float

    @property
    def omega(self) -> float:
        """Fundamental angular frequency w_f = 2 pi / period (rad/s)."""
        return 2.0 * math.pi / self.period

    @property
    def harmonics(self) -> int:
        return int(self.a.shape[1])

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, dq, ddq) at times ``t`` (s), each (len(t), n)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        wl = self.omega * np.arange(1, self.harmonics + 1)  # (L,)
        s, c = np.sin(np.outer(t, wl)), np.cos(np.outer(t, wl))  # (T, L)
        q = self.q0 + s @ (self.a / wl).T - c @ (self.b / wl).T
        dq = c @ self.a.T + s @ self.b.T
        ddq = -s @ (self.a * wl).T + c @ (self.b * wl).T
        return q, dq, ddq

    def coefficients(self) -> dict[str, np.ndarray]:
        return {
            "q0": self.q0,
            "a": self.a,
            "b": self.b,
            "period": np.array(self.period),
            "omega_f": np.array(self.omega),
        }


def _reduced_basis(t: np.ndarray, omega: float, harmonics: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bases (T, 2(L-1)) mapping free coefficients [a_2..a_L, b_2..b_L] to q - q0, dq, ddq.

    a_1 and b_1 are eliminated (module docstring), which makes dq(0) = ddq(0) = 0 hold exactly.
    """
    L = harmonics
    wl = omega * np.arange(1, L + 1)
    s, c = np.sin(np.outer(t, wl)), np.cos(np.outer(t, wl))
    ls = np.arange(1, L + 1)
    # a-part: sum_{l>=2} a_l (f_l - f_1); b-part: sum_{l>=2} b_l (g_l - l g_1)
    Bq = np.concatenate([s[:, 1:] / wl[1:] - s[:, :1] / wl[0], -c[:, 1:] / wl[1:] + ls[1:] * c[:, :1] / wl[0]], axis=1)
    Bdq = np.concatenate([c[:, 1:] - c[:, :1], s[:, 1:] - ls[1:] * s[:, :1]], axis=1)
    Bddq = np.concatenate(
        [-s[:, 1:] * wl[1:] + s[:, :1] * wl[0], c[:, 1:] * wl[1:] - ls[1:] * c[:, :1] * wl[0]], axis=1
    )
    return Bq, Bdq, Bddq


def _full_coefficients(x: np.ndarray, harmonics: int) -> tuple[np.ndarray, np.ndarray]:
    """Free coefficients (n, 2(L-1)) -> full a, b (n, L)."""
    L = harmonics
    a_free, b_free = x[:, : L - 1], x[:, L - 1 :]
    ls = np.arange(2, L + 1)
    a = np.concatenate([-a_free.sum(axis=1, keepdims=True), a_free], axis=1)
    b = np.concatenate([-(b_free * ls).sum(axis=1, keepdims=True), b_free], axis=1)
    return a, b


@dataclass
class ExcitationResult:
    """Outcome of :func:`optimize_excitation` (condition numbers of the base regressor on the eval grid)."""

    trajectory: FourierTrajectory
    initial: FourierTrajectory
    cond_initial: float
    cond_optimized: float
    n_base: int
    evaluations: int
    seconds: float
    limit_check_1khz: dict[str, object] = field(default_factory=dict)
    stopped_by: str = ""
    workspace_check: dict[str, object] = field(default_factory=dict)  # empty: no workspace asked for


def optimize_excitation(
    model,
    limits: JointLimits,
    harmonics: int = 5,
    period: float = 20.0,
    seed: int = 0,
    time_budget_s: float = 60.0,
    max_evaluations: int | None = None,
    n_eval: int = 100,
    n_constraint: int | None = None,
    position_margin: float = math.radians(2.0),
    limit_scale: float = 0.9,
    progress: Callable[[float, float], None] | None = None,
    objective: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None,
    workspace: Any = None,
) -> ExcitationResult:
    """Fourier excitation minimising cond(Y_b) within ``limits`` (see module docstring).

    Args:
        model: RobotModel (``regressor``, ``base_parameters``, ``n``).
        limits: full joint limits; the optimiser uses ``limits.shrunk(position_margin, limit_scale)``.
        harmonics: L. period: s (w_f = 2 pi / period). seed: random initial guess.
        time_budget_s: wall-clock budget for the optimiser (s); the best feasible point so far is kept.
        max_evaluations: also stop after this many evaluations of the objective: the same result on any machine
            (a time budget alone gives a loaded machine a worse trajectory).
        n_eval: samples per period for cond(Y_b). n_constraint: samples per period for the limit
            constraints (default 20 per cycle of the highest harmonic; peaks between samples are
            covered by the 10 % margin and by the 1 kHz check afterwards).
        progress: called as ``progress(elapsed_s, best_cond)`` at most every 0.5 s.
        objective: ``objective(q, dq, ddq) -> (rows, p)`` regressor whose condition number is minimised instead of the
            base-parameter regressor's (e.g. the payload regressor, ``idyn_ros.dynamics.payload``).
        workspace: a ``data.workspace.Workspace`` the trajectory must stay in (above the mounting plane, out of the
            base column): a constraint of the optimiser on the constraint grid, a start that satisfies it, and a
            check at 1 kHz (shrunk about q0 until it passes; ``workspace_check``). None: joint limits only.
    """
    from scipy.optimize import minimize

    if harmonics < 2:
        raise ParameterError("need at least 2 harmonics (the first is used up by the zero start/end constraints)")
    t0 = time.monotonic()
    n, L = model.n, harmonics
    m = 2 * (L - 1)
    omega = 2.0 * math.pi / period
    inner = limits.shrunk(position_margin, limit_scale)
    centre = 0.5 * (inner.lower + inner.upper)
    half = 0.5 * (inner.upper - inner.lower)
    if np.any(half <= 0):
        raise ParameterError("position range smaller than the 2 x margin for some joint")

    stacked = objective
    if stacked is None:
        base = model.base_parameters()
        cols = np.asarray(base.independent)
        n_columns = int(base.n_base)

        def stacked(q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
            Y = np.asarray(model.regressor(q, dq, ddq))  # (T, n, 10 n)
            return Y.reshape(-1, Y.shape[-1])[:, cols]
    else:
        n_columns = 0
    t_eval = np.linspace(0.0, period, n_eval, endpoint=False)
    Eq, Edq, Eddq = _reduced_basis(t_eval, omega, L)

    def unpack(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return z[:n], z[n:].reshape(n, m)

    def cond_of(z: np.ndarray) -> float:
        q0, X = unpack(z)
        q, dq, ddq = q0 + Eq @ X.T, Edq @ X.T, Eddq @ X.T
        Yb = stacked(q, dq, ddq)
        # cond(Y_b) = sqrt(cond(Y_b^T Y_b)); einsum + a small eigvalsh instead of an SVD of the tall
        # matrix: threaded BLAS made that SVD ~500x slower on a loaded 2-core machine (0.5 s vs 1 ms).
        eig = np.linalg.eigvalsh(np.einsum("ki,kj->ij", Yb, Yb))
        return float(math.sqrt(eig[-1] / eig[0])) if eig[0] > 0 else float("inf")

    # linear constraints G z <= h on the constraint grid
    n_constraint = n_constraint or 20 * harmonics
    t_con = np.linspace(0.0, period, n_constraint, endpoint=False)
    Cq, Cdq, Cddq = _reduced_basis(t_con, omega, L)
    rows, rhs = [], []
    for i in range(n):
        for B, bound, with_q0 in (
            (Cq, half[i], True),
            (Cdq, inner.velocity[i], False),
            (Cddq, inner.acceleration[i], False),
        ):
            for sign in (1.0, -1.0):
                G = np.zeros((B.shape[0], n + n * m))
                G[:, n + i * m : n + (i + 1) * m] = sign * B
                if with_q0:
                    G[:, i] = sign
                    rhs.append(np.full(B.shape[0], bound + sign * centre[i]))
                else:
                    rhs.append(np.full(B.shape[0], bound))
                rows.append(G)
    G = np.concatenate(rows)
    h = np.concatenate(rhs)

    guard = None
    constraints = [{"type": "ineq", "fun": lambda z: h - G @ z, "jac": lambda _z: -G}]
    if workspace is not None:
        from idyn_ros.data.workspace import WorkspaceGuard

        guard = WorkspaceGuard(model, workspace)
        # a finer grid than the limits' (a pose is not linear in z) and WORKSPACE_GRID_MARGIN on it, so that the
        # 1 kHz check afterwards rarely has to shrink the result
        ws_grid = _reduced_basis(np.linspace(0.0, period, max(n_constraint, WORKSPACE_GRID), endpoint=False),
                                 omega, L)[0]
        dq_dz = np.zeros((len(ws_grid), n, n + n * m))  # q(t) = q0 + Cq X': linear in z
        for i in range(n):
            dq_dz[:, i, i] = 1.0
            dq_dz[:, i, n + i * m : n + (i + 1) * m] = ws_grid

        def pose_grid(z: np.ndarray) -> np.ndarray:
            q0_, X_ = unpack(z)
            return q0_ + ws_grid @ X_.T

        constraints.append({"type": "ineq", "fun": lambda z: guard.margins(pose_grid(z))[0] - WORKSPACE_GRID_MARGIN,
                            "jac": lambda z: guard.margins(pose_grid(z), dq_dz)[1]})

    def feasible(z: np.ndarray) -> bool:
        inside = bool(np.all(G @ z <= h + 1e-9))
        return inside and (guard is None or bool(guard.margins(pose_grid(z))[0].min() >= 0.0))

    rng = np.random.default_rng(seed)

    def random_guess() -> np.ndarray:
        """Random coefficients X, each joint scaled to 80 % of its tightest inner limit on the constraint grid."""
        X = rng.normal(size=(n, m))
        ratio = np.max(np.stack([np.abs(Cq @ X.T).max(axis=0) / half, np.abs(Cdq @ X.T).max(axis=0) / inner.velocity,
                                 np.abs(Cddq @ X.T).max(axis=0) / inner.acceleration]), axis=0)
        return X / ratio[:, None] * 0.8

    X0 = random_guess()
    q0 = centre.copy()
    if guard is not None:
        q0, X0 = _workspace_start(guard, inner, q0, X0, rng, ws_grid)
    z0 = np.concatenate([q0, X0.ravel()])
    cond0 = cond_of(z0)
    best = {"z": z0, "cond": cond0, "evals": 1}
    deadline = t0 + time_budget_s

    class _OutOfTime(Exception):  # noqa: N818 (control flow, not an error)
        pass

    last_report = [t0]

    def objective(z: np.ndarray) -> float:
        now = time.monotonic()
        if now > deadline or (max_evaluations is not None and best["evals"] >= max_evaluations):
            raise _OutOfTime
        c = cond_of(z)
        best["evals"] += 1
        if c < best["cond"] and feasible(z):
            best["z"], best["cond"] = z.copy(), c
        if progress is not None and now - last_report[0] > 0.5:
            last_report[0] = now
            progress(now - t0, best["cond"])
        return math.log10(c)

    stopped_by = "converged"
    start = z0
    try:
        while True:
            minimize(objective, start, method="SLSQP", constraints=constraints,
                     options={"maxiter": 500, "ftol": 1e-6})
            if guard is None:
                break
            # decision: inside a workspace the feasible set is narrow and SLSQP stops in a local optimum early; start
            # again from another feasible random guess until the budget (without one the result stays as it was)
            try:
                q0_start, X_start = _workspace_start(guard, inner, centre.copy(), random_guess(), rng, ws_grid)
            except ParameterError:  # no other feasible start found: keep the best so far
                break
            start = np.concatenate([q0_start, X_start.ravel()])
            stopped_by = "restarts"
    except _OutOfTime:
        stopped_by = (f"time budget {time_budget_s:g} s" if max_evaluations is None or best["evals"] < max_evaluations
                      else f"{max_evaluations} evaluations")

    def to_traj(z: np.ndarray) -> FourierTrajectory:
        q0_, X = unpack(z)
        a, b = _full_coefficients(X, L)
        return FourierTrajectory(q0_.copy(), a, b, period)

    traj = to_traj(best["z"])
    traj, check = fit_into_limits(traj, limits)
    workspace_check: dict[str, object] = {}
    if guard is not None:
        traj, workspace_check = fit_into_workspace(traj, guard)
    cond_final = cond_of(np.concatenate([traj.q0, _reduced_from_full(traj.a, traj.b).ravel()]))
    return ExcitationResult(
        trajectory=traj,
        initial=to_traj(z0),
        cond_initial=cond0,
        cond_optimized=cond_final,
        n_base=n_columns or int(np.shape(stacked(*traj.evaluate(np.zeros(1))))[-1]),
        evaluations=best["evals"],
        seconds=time.monotonic() - t0,
        limit_check_1khz=check,
        stopped_by=stopped_by,
        workspace_check=workspace_check,
    )


WORKSPACE_GRID = 400  # samples per period for the workspace constraint
WORKSPACE_GRID_MARGIN = 0.02  # m kept on that grid, for what lies between its samples


def _workspace_start(guard: Any, inner: JointLimits, q0: np.ndarray, X0: np.ndarray, rng: np.random.Generator,
                     grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A start inside the workspace: the pose nearest the range centres that is inside it (the centres, else the
    nearest of 400 random poses in the inner limits), and the oscillation about it halved until the whole constraint
    grid is inside too (decision: a feasible start, since SLSQP from an infeasible one can end infeasible)."""
    if guard.margins(q0[None])[0].min() < WORKSPACE_GRID_MARGIN:
        half = 0.5 * (inner.upper - inner.lower)
        poses = q0 + rng.uniform(-1.0, 1.0, (400, q0.size)) * half
        ok = [p for p in poses if guard.margins(p[None])[0].min() >= WORKSPACE_GRID_MARGIN]
        if not ok:
            raise ParameterError("no pose inside the joint limits keeps the arm in the workspace (above the floor, "
                                 "out of the base column): lower the floor or the base clearance")
        q0 = min(ok, key=lambda p: float(np.sum(((p - q0) / half) ** 2)))
    for _ in range(30):
        if guard.margins(q0 + grid @ X0.T)[0].min() >= WORKSPACE_GRID_MARGIN:
            return q0, X0
        X0 = 0.5 * X0
    return q0, 0.0 * X0


def fit_into_workspace(traj: FourierTrajectory, guard: Any, rate_hz: float = 1000.0
                       ) -> tuple[FourierTrajectory, dict[str, object]]:
    """Check the workspace at ``rate_hz`` over one period (the optimiser saw a grid); shrink the oscillation about q0
    by 10 % steps until it passes. Returns the trajectory and its check (``data.workspace.WorkspaceGuard.check``)."""
    t = np.arange(0.0, traj.period + 0.5 / rate_hz, 1.0 / rate_hz)
    scale = 1.0
    for _ in range(40):
        shrunk = FourierTrajectory(traj.q0, traj.a * scale, traj.b * scale, traj.period)
        check = guard.check(shrunk.evaluate(t)[0])
        if check["ok"]:
            break
        scale *= 0.9
    check.update(rate_hz=rate_hz, shrunk=scale < 1.0, scale=scale)
    return shrunk, check


def _reduced_from_full(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.concatenate([a[:, 1:], b[:, 1:]], axis=1)


def fit_into_limits(traj: FourierTrajectory, limits: JointLimits, rate_hz: float = 1000.0):
    """Check at ``rate_hz`` over one period; shrink the oscillation about q0 per joint if a limit is exceeded.

    Scaling a and b by s < 1 scales dq, ddq and q - q0 by s and keeps dq(0) = ddq(0) = 0.
    Returns the (possibly shrunk) trajectory and the 1 kHz limit check of it.
    """
    t = np.arange(0.0, traj.period + 0.5 / rate_hz, 1.0 / rate_hz)
    q, dq, ddq = traj.evaluate(t)
    if np.any(traj.q0 <= limits.lower) or np.any(traj.q0 >= limits.upper):
        raise ParameterError("q0 of the excitation lies outside the joint limits")
    up = (q - traj.q0).max(axis=0)  # largest excursion above q0 (rad)
    down = (traj.q0 - q).max(axis=0)
    tiny = 1e-300
    scale = np.ones(traj.q0.size)
    scale = np.minimum(scale, np.where(up > 0, 0.999 * (limits.upper - traj.q0) / np.maximum(up, tiny), 1.0))
    scale = np.minimum(scale, np.where(down > 0, 0.999 * (traj.q0 - limits.lower) / np.maximum(down, tiny), 1.0))
    scale = np.minimum(scale, 0.999 * limits.velocity / np.maximum(np.abs(dq).max(axis=0), tiny))
    scale = np.minimum(scale, 0.999 * limits.acceleration / np.maximum(np.abs(ddq).max(axis=0), tiny))
    if np.any(scale < 1.0):
        traj = FourierTrajectory(traj.q0, traj.a * scale[:, None], traj.b * scale[:, None], traj.period)
        q, dq, ddq = traj.evaluate(t)
    check = check_limits(q, dq, ddq, limits)
    check["rate_hz"] = rate_hz
    check["samples"] = int(t.size)
    check["shrunk_joints"] = [int(i) for i in np.flatnonzero(scale < 1.0)]
    return traj, check


def joint_line(q_from: np.ndarray, q_to: np.ndarray, samples: int) -> np.ndarray:
    """``samples`` poses (samples, n) on the joint-space straight line from ``q_from`` to ``q_to``, both included: the
    path of a min-jerk move between them."""
    return q_from + np.linspace(0.0, 1.0, samples)[:, None] * (np.asarray(q_to) - q_from)


def _scaffolds_inside(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray, count: int, current: np.ndarray,
                      may_move_start: bool, inside: Callable[[np.ndarray], bool]) -> tuple[np.ndarray, np.ndarray]:
    """(start, scaffolds (count, n)): each scaffold drawn again until it and the joint-space line to it from the
    previous pose are ``inside`` (25 points along it: the reach is a min-jerk move along that line). When ``current``
    is not inside and no start was given, the start is a pose inside drawn first."""

    def draw(prev: np.ndarray | None) -> np.ndarray:
        for _ in range(2000):
            pose = rng.uniform(lo, hi)
            path = [pose] if prev is None else joint_line(prev, pose, 25)
            if all(inside(p) for p in path):
                return pose
        raise ParameterError("no scaffold pose (and move to it) inside the limits keeps the arm in the workspace: "
                             "lower --floor or --base-clearance")

    if not inside(current):
        if not may_move_start:
            raise ParameterError("the start pose of the fine motion is outside the workspace")
        current = draw(None)
    out, prev = [], current
    for _ in range(count):
        prev = draw(prev)
        out.append(prev)
    return current, np.array(out)


# ===================================================================================== min jerk
def min_jerk_profile(s: Any) -> tuple[Any, Any, Any]:
    """The Flash & Hogan quintic and its first two derivatives in s (float or array)."""
    return 10 * s**3 - 15 * s**4 + 6 * s**5, 30 * s**2 - 60 * s**3 + 30 * s**4, 60 * s - 180 * s**2 + 120 * s**3


def min_jerk(
    q_start: np.ndarray, q_end: np.ndarray, duration: float, t: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Minimum-jerk point-to-point move (Flash & Hogan 1985 quintic), rest to rest.

    q(s) = q_start + (q_end - q_start)(10 s^3 - 15 s^4 + 6 s^5), s = t / duration clipped to [0, 1]; at rest
    before 0 and after ``duration`` (a duration <= 0 is already at ``q_end``).
    Peak |dq| = 1.875 |D| / T, peak |ddq| = 5.7735 |D| / T^2.
    Returns (q, dq, ddq), each (n,) for a scalar t (the 1 kHz reference path: no array work on t) or
    (len(t), n) for an array t.
    """
    q0 = np.asarray(q_start, dtype=float)
    d = np.asarray(q_end, dtype=float) - q0
    if np.ndim(t) == 0:
        tt = float(t)
        if duration <= 0 or tt >= duration:
            return q0 + d, np.zeros_like(d), np.zeros_like(d)
        s = max(tt, 0.0) / duration
        p, v, a = min_jerk_profile(s)
        return q0 + p * d, (v / duration) * d, (a / duration**2) * d
    t = np.asarray(t, dtype=float).reshape(-1)
    if duration <= 0:
        zeros = np.zeros((t.size, d.size))
        return q0 + d + zeros, zeros, zeros.copy()
    s = np.clip(t / duration, 0.0, 1.0)[:, None]
    inside = ((t >= 0) & (t <= duration))[:, None]
    p, v, a = min_jerk_profile(s)
    return q0 + p * d, v / duration * inside * d, a / duration**2 * inside * d


MIN_JERK_PEAK = 1.875  # a min-jerk move's peak speed is 15/8 x distance / duration (Flash & Hogan)
MIN_JERK_PEAK_ACCELERATION = 10.0 / math.sqrt(3.0)  # and its peak |acceleration| 10/sqrt(3) x distance / duration^2


def min_jerk_duration(q_start: np.ndarray, q_end: np.ndarray, velocity: np.ndarray, acceleration: np.ndarray) -> float:
    """Shortest min-jerk duration (s) keeping peak |dq| <= velocity and |ddq| <= acceleration per joint."""
    d = np.abs(np.asarray(q_end) - np.asarray(q_start))
    tv = MIN_JERK_PEAK * d / velocity
    ta = np.sqrt(MIN_JERK_PEAK_ACCELERATION * d / acceleration)
    return float(max(np.max(tv), np.max(ta), 1e-3))


@dataclass
class MinJerkTrajectory:
    """A min-jerk move as a trajectory object (``evaluate(t)``)."""

    q_start: np.ndarray
    q_end: np.ndarray
    duration: float

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return min_jerk(self.q_start, self.q_end, self.duration, t)


# ===================================================================================== fine motion
def _window(t: np.ndarray, length: float, ramp: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smooth 0 -> 1 -> 0 window over [0, length] with min-jerk ramps of ``ramp`` s: (w, w', w'')."""
    up = min_jerk(np.zeros(1), np.ones(1), ramp, t)
    down = min_jerk(np.zeros(1), np.ones(1), ramp, length - t)
    w = up[0][:, 0] * down[0][:, 0]
    dw = up[1][:, 0] * down[0][:, 0] - up[0][:, 0] * down[1][:, 0]
    ddw = up[2][:, 0] * down[0][:, 0] - 2 * up[1][:, 0] * down[1][:, 0] + up[0][:, 0] * down[2][:, 0]
    return w, dw, ddw


@dataclass
class FineMotionTrajectory:
    """Random fine motion (Callar 2021, Algorithm 4.10 "RFMA"): scaffold poses joined by min-jerk
    reaches, with small superposed sinusoids explored around each scaffold.

    Per scaffold and joint: e(t) = w(t) sum_{k=1..3} A_k sin(2 pi f_k t + phi_k) with a smooth window
    w (rest at both ends, so phases join with continuous q, dq, ddq).
    """

    scaffolds: np.ndarray  # (S, n)
    reach_durations: np.ndarray  # (S,) s; reach k goes from scaffold k-1 (or start) to k
    explore_durations: np.ndarray  # (S,)
    amplitudes: np.ndarray  # (S, n, 3) rad
    frequencies: np.ndarray  # (S, n, 3) Hz
    phases: np.ndarray  # (S, n, 3) rad
    start: np.ndarray  # (n,)
    ramp: float = 0.5

    @property
    def duration(self) -> float:
        return float(self.reach_durations.sum() + self.explore_durations.sum())

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        n = self.start.size
        q = np.tile(self.start, (t.size, 1)).astype(float)
        dq = np.zeros((t.size, n))
        ddq = np.zeros((t.size, n))
        t0, prev = 0.0, self.start
        for k in range(len(self.scaffolds)):
            tr, te = self.reach_durations[k], self.explore_durations[k]
            target = self.scaffolds[k]
            sel = (t >= t0) & (t < t0 + tr)
            if sel.any():
                q[sel], dq[sel], ddq[sel] = min_jerk(prev, target, tr, t[sel] - t0)
            t1 = t0 + tr
            sel = (t >= t1) & (t < t1 + te) if k < len(self.scaffolds) - 1 else t >= t1
            if sel.any():
                tau = np.minimum(t[sel] - t1, te)
                w, dw, ddw = _window(tau, te, self.ramp)
                arg = 2 * np.pi * self.frequencies[k][None] * tau[:, None, None] + self.phases[k][None]  # (T, n, 3)
                om = 2 * np.pi * self.frequencies[k][None]
                e = (self.amplitudes[k][None] * np.sin(arg)).sum(-1)
                de = (self.amplitudes[k][None] * om * np.cos(arg)).sum(-1)
                dde = (-self.amplitudes[k][None] * om**2 * np.sin(arg)).sum(-1)
                q[sel] = target + w[:, None] * e
                dq[sel] = dw[:, None] * e + w[:, None] * de
                ddq[sel] = ddw[:, None] * e + 2 * dw[:, None] * de + w[:, None] * dde
            t0, prev = t1 + te, target
        return q, dq, ddq


def fine_motion(
    limits: JointLimits,
    n_scaffolds: int = 10,
    seed: int = 0,
    start: np.ndarray | None = None,
    explore_s: tuple[float, float] = (20.0, 25.0),
    amplitude_deg: tuple[float, float] = (0.5, 3.0),
    frequency_hz: tuple[float, float] = (0.05, 1.0),
    reach_speed: tuple[float, float] = (0.6, 0.9),
    explore_speed: tuple[float, float] = (0.1, 0.3),
    position_margin: float = math.radians(5.0),
    inside: Callable[[np.ndarray], bool] | None = None,
) -> FineMotionTrajectory:
    """Random fine-motion trajectory (Callar 2021 RFMA), within ``limits`` by construction.

    Decisions where the thesis is garbled (summary §3, open question 10): amplitudes A in degrees,
    frequencies f in Hz drawn from ``frequency_hz`` (the thesis' f in [-4, 4] has no unit; a sign
    only flips the phase), exploration 20-25 s (2000-2500 waypoints at ~100/s). Each joint's
    sinusoid amplitudes are scaled so its velocity and acceleration stay below a random 10-30 %
    of the limits (the thesis' "relative speed"), reaches run at 60-90 %. Scaffolds are uniform in
    the position limits minus a margin, visited in greedy nearest-neighbour order; with ``inside`` (e.g. a
    ``data.workspace`` check) each is drawn instead until it and the reach to it are inside. The exploration about a
    scaffold is not checked here: check the whole trajectory before running it (``idyn excite`` does, and refuses to
    write it).
    """
    rng = np.random.default_rng(seed)
    n = limits.lower.size
    lo, hi = limits.lower + position_margin, limits.upper - position_margin
    points = rng.uniform(lo, hi, size=(n_scaffolds, n))
    current = np.clip(start if start is not None else 0.5 * (lo + hi), lo, hi)
    if inside is None:
        order, remaining = [], list(range(n_scaffolds))
        pos = current
        while remaining:  # greedy nearest neighbour (the thesis uses a kd-tree; same order)
            j = min(remaining, key=lambda r: float(np.linalg.norm(points[r] - pos)))
            order.append(j)
            remaining.remove(j)
            pos = points[j]
        scaffolds = points[order]
    else:
        current, scaffolds = _scaffolds_inside(rng, lo, hi, n_scaffolds, current, start is None, inside)
    reach, explore = np.zeros(n_scaffolds), rng.uniform(*explore_s, size=n_scaffolds)
    amps = np.radians(rng.uniform(*amplitude_deg, size=(n_scaffolds, n, 3)))
    freqs = rng.uniform(*frequency_hz, size=(n_scaffolds, n, 3))
    phases = rng.uniform(0, 2 * np.pi, size=(n_scaffolds, n, 3))
    prev = current
    ramp = 0.5
    for k in range(n_scaffolds):
        speed = rng.uniform(*reach_speed)
        reach[k] = min_jerk_duration(prev, scaffolds[k], speed * limits.velocity, speed * limits.acceleration)
        prev = scaffolds[k]
        # bound |e'| <= sum A 2 pi f (+ window terms) and |e''| similarly; scale A per joint into budget
        rel = rng.uniform(*explore_speed)
        om = 2 * np.pi * freqs[k]
        wd, wdd = 1.875 / ramp, 5.7735 / ramp**2  # peak |w'|, |w''| of the min-jerk ramps
        vmax = (amps[k] * (om + wd)).sum(-1)
        amax = (amps[k] * (om**2 + 2 * wd * om + wdd)).sum(-1)
        s = np.minimum(1.0, np.minimum(rel * limits.velocity / vmax, rel * limits.acceleration / amax))
        s = np.minimum(
            s, (np.minimum(scaffolds[k] - limits.lower, limits.upper - scaffolds[k]) * 0.9) / amps[k].sum(-1)
        )
        amps[k] *= s[:, None]
    return FineMotionTrajectory(scaffolds, reach, explore, amps, freqs, phases, current, ramp)
