"""`idyn train --model lip-gp|se-gp|gip-gp|lse-gp`: fit a GP model on datasets, evaluate, export ONNX.

The models engineer's train command dispatches here for the GP kinds (``train_gp``). Training data are
subsampled to ``max_samples`` (exact GPs are cubic in N: N = 500 with n = 7 is a 3500 x 3500 Cholesky).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from idyn_ros.data.atomic import atomic_write_text
from idyn_ros.errors import DatasetError, ModelArtifactError, ParameterError, TrainingError
from idyn_ros.models import checkpoint
from idyn_ros.models.gp import GP_KINDS
from idyn_ros.models.gp.baselines import FrictionKernel, GIPKernel, LSEKernel, SEKernel
from idyn_ros.models.gp.gp import FitReport, GPInverseDynamics, stack_inputs
from idyn_ros.models.gp.lip import LIPKernel
from idyn_ros.models.metrics import json_ready, nan_mean, nmse_percent

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def joint_is_prismatic(robot_model: Any) -> list[bool]:
    """Prismatic flags from the pinocchio joint types (P*, PrismaticUnaligned)."""
    pm = robot_model.pin_model
    out = []
    for j in range(1, pm.njoints):
        name = pm.joints[j].shortname()
        out.append("Prismatic" in name or name[:-1].endswith("JointModelP"))
    return out


def make_gp(kind: str, n: int, X: torch.Tensor, Y: torch.Tensor, prismatic: list[bool] | None = None,
            friction: bool = False, noise_init_ratio: float = 0.1, shared_noise: bool = False,
            noise_floor_ratio: float = 0.0, shared_noise_start: str = "max") -> GPInverseDynamics:
    """A GP of the given kind: kernel hyperparameters 1 (as the paper), noise ``noise_init_ratio`` * std(y).

    Args:
        friction: add the real-robot friction kernel (eq 34/35): LIP linear + SE, GIP linear, LSE linear.
        noise_init_ratio: initial noise std per joint as a fraction of std(y) (see NOISE_STARTS).
        shared_noise: one noise std for all joints (see GPInverseDynamics).
        noise_floor_ratio: noise floor per joint as a fraction of std(y) (see NOISE_FLOOR_RATIO).
        shared_noise_start: "max" or "min" of the per-joint starts for the shared std (see GPInverseDynamics).
    """
    if kind not in GP_KINDS:
        raise ParameterError(f"unknown GP kind '{kind}'; choose one of {', '.join(GP_KINDS)}")
    x_std, y_std = X.std(0), Y.std(0)
    fk = None
    if kind == "lip-gp":
        kern: torch.nn.Module = LIPKernel(n, prismatic)
        fk = FrictionKernel(n, se=True, x_std=x_std, y_std=y_std) if friction else None
    elif kind == "se-gp":
        kern = SEKernel(n, x_std, y_std)
    elif kind == "gip-gp":
        kern = GIPKernel(n, prismatic)
        fk = FrictionKernel(n, se=False) if friction else None
    else:
        kern = LSEKernel(n, x_std[n : 2 * n])
        fk = FrictionKernel(n, se=False) if friction else None
    return GPInverseDynamics(kern, n, friction=fk, noise_std=(y_std * noise_init_ratio).numpy(),
                             shared_noise=shared_noise, noise_floor_std=(y_std * noise_floor_ratio).numpy(),
                             shared_noise_start=shared_noise_start)


# Noise starts (x std(y)): LIP/LSE start low, else signal is fitted as noise (studies/gp_lip/README.md).
NOISE_STARTS: dict[str, tuple[float, ...]] = {"lip-gp": (1e-3,), "lse-gp": (1e-3,), "se-gp": (0.1, 1e-3),
                                              "gip-gp": (0.1, 1e-3)}
# With held-out data to judge by, every kind tries both starts (fit_gp's select_on).
VAL_NOISE_STARTS: tuple[float, ...] = (0.1, 1e-3)


# LIP fits both shared-noise starts, keeps the lower NLL: neither wins everywhere (studies/gp_lip/README.md).
SHARED_NOISE_STARTS: dict[str, tuple[str, ...]] = {"lip-gp": ("max", "min")}


@dataclass(frozen=True)
class NoiseStart:
    """The start a kept fit came from: noise std = ``ratio`` x std(y), and the ``shared`` rule if one std."""

    ratio: float
    shared: str | None = None


# Real-data noise floor (x std(y), fixed a priori): without one the GP interpolates (studies/gp_lip/README.md).
NOISE_FLOOR_RATIO = 0.01

# Decision: a fit whose mean nMSE on held-out data exceeds 100 % (worse than predicting each joint's mean torque)
# is refused, not exported: on real KUKA data an unvalidated LIP fit reached 42,174 % (noise fitted to ~0).
HELDOUT_MAX_NMSE_PERCENT = 100.0

# Validation samples used to choose the noise start (every k-th sample of the validation recordings).
VAL_SELECTION_POINTS = 1000

# Decision: a time budget is planned, not polled: a timed probe fixes the L-BFGS iterations of every noise start (then
# of the refinement) before the fit, which never reads the clock; a seed plus that count (printed, pinned by
# ``iterations``/--gp-iterations) gives the same model, where a clock cut mid-optimisation gave a different one.

#: L-BFGS iterations per noise start unless a count is given or a smaller time budget plans fewer.
DEFAULT_ITERATIONS = 50

#: Marginal-likelihood evaluations per L-BFGS iteration that a plan counts: torch's L-BFGS stops at 1.25 x its
#: iterations (its max_eval default); line searches mostly take one.
EVALS_PER_ITERATION = 1.25


def grid_floor(x: float) -> int:
    """The largest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (1 or 1.5 x a power of two) not above ``x``; 0 below 1.

    Why a coarse grid: the probe's seconds vary by a few % from run to run; rounded down onto steps 33-50 % apart,
    the same budget on the same machine mostly plans the same count, hence the same model.
    """
    if not x >= 1:
        return 0
    k = 1
    while k * 2 <= x:
        k *= 2
    return k * 3 // 2 if k >= 2 and k * 3 // 2 <= x else k


@dataclass(frozen=True)
class FitPlan:
    """How a time budget was spent before the fit: L-BFGS iterations per noise start and for the refinement.

    ``eval_seconds``: one marginal likelihood and its gradient on the hyperparameter subset; ``fixed_seconds``: per
    fit, the posterior on all samples plus the held-out scoring that picks the start; ``probe_seconds``: the probe.
    """

    iterations: int
    refine_iterations: int
    starts: int
    eval_seconds: float
    fixed_seconds: float
    probe_seconds: float
    budget_seconds: float

    @property
    def predicted_seconds(self) -> float:
        """The fit's expected wall time, probe included (each iteration counted at EVALS_PER_ITERATION)."""
        per_iteration = EVALS_PER_ITERATION * self.eval_seconds
        return (self.probe_seconds + self.starts * (self.fixed_seconds + self.iterations * per_iteration)
                + (self.fixed_seconds + self.refine_iterations * per_iteration if self.refine_iterations else 0.0))

    @property
    def least_seconds(self) -> float:
        """The shortest this fit can be: the probe, and one iteration, the posterior and the selection per start."""
        return self.probe_seconds + self.starts * (self.fixed_seconds + EVALS_PER_ITERATION * self.eval_seconds)

    def describe(self, kind: str) -> str:
        """One line, said before the fit: the count the budget bought, from what, and how to pin it."""
        refine = f", then {self.refine_iterations} for the refinement" if self.refine_iterations else ""
        line = (f"{kind}: time budget {self.budget_seconds:.0f} s: a {self.probe_seconds:.1f} s probe "
                f"({self.eval_seconds:.2f} s per likelihood evaluation, {self.fixed_seconds:.1f} s per posterior and "
                f"held-out selection) plans {self.starts} noise start(s) x {self.iterations} L-BFGS "
                f"iterations{refine}, about {self.predicted_seconds:.0f} s; the count follows this machine's speed "
                f"(--gp-iterations {self.iterations} pins it)")
        if self.predicted_seconds > self.budget_seconds:
            line += (f"; the budget is below the least this fit takes, about {self.least_seconds:.0f} s (probe, "
                     f"then one iteration, a posterior and a selection per start): it will run over")
        return line


def plan_fit(budget_seconds: float, starts: int, eval_seconds: float, fixed_seconds: float, probe_seconds: float,
             iterations: int = DEFAULT_ITERATIONS, refine_iterations: int = 0) -> FitPlan:
    """Iterations per noise start (at most ``iterations``, at least 1), then for the refinement (at most
    ``refine_iterations``, possibly 0) that fit ``budget_seconds`` with the probe's costs; on :func:`grid_floor`
    unless the count asked for fits whole. The noise starts come first: they decide which fit is kept."""
    per_iteration = EVALS_PER_ITERATION * max(eval_seconds, 1e-9)
    left = budget_seconds - probe_seconds - starts * fixed_seconds
    affordable = left / (starts * per_iteration)
    its = iterations if affordable >= iterations else max(1, grid_floor(affordable))
    refine = 0
    if refine_iterations:
        affordable = (left - starts * its * per_iteration - fixed_seconds) / per_iteration
        refine = refine_iterations if affordable >= refine_iterations else grid_floor(affordable)
    return FitPlan(its, refine, starts, eval_seconds, fixed_seconds, probe_seconds, budget_seconds)


#: Held-out points the probe predicts; the selection's cost is scaled from them (prediction is linear in points).
PROBE_PREDICT_POINTS = 128


def probe_fit(kind: str, n: int, X: torch.Tensor, Y: torch.Tensor, prismatic: list[bool] | None, friction: bool,
              shared_noise: bool, noise_ratio: float, noise_floor_ratio: float, max_hyper_points: int, seed: int,
              select_on: tuple[torch.Tensor, torch.Tensor] | None) -> tuple[float, float, float]:
    """Time what a fit repeats: (one likelihood + gradient on the hyperparameter subset, best of 2 [s]; the
    posterior on all of X plus scoring ``select_on``, that from PROBE_PREDICT_POINTS of it [s]; the probe's own
    wall time [s]).

    On the first noise start's GP, a throwaway: the global torch RNG is restored, so the fit that follows is the
    one an unprobed run with the same count makes.
    """
    t0 = time.perf_counter()
    with torch.random.fork_rng():
        gp = make_gp(kind, n, X, Y, prismatic, friction=friction, noise_init_ratio=noise_ratio,
                     shared_noise=shared_noise, noise_floor_ratio=noise_floor_ratio)
        idx = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(seed))[:max_hyper_points]
        evals = []
        for _ in range(2):  # the first also pays one-off costs (allocations, kernel set-up)
            t = time.perf_counter()
            gp.nll(X[idx], Y[idx]).backward()
            evals.append(time.perf_counter() - t)
        t = time.perf_counter()
        gp.condition(X, Y)
        fixed = time.perf_counter() - t
        if select_on is not None:
            m = select_on[0].shape[0]
            t = time.perf_counter()
            gp.predict(select_on[0][:PROBE_PREDICT_POINTS])
            fixed += (time.perf_counter() - t) * m / min(m, PROBE_PREDICT_POINTS)
    return min(evals), fixed, time.perf_counter() - t0


def fit_gp(kind: str, n: int, X: torch.Tensor, Y: torch.Tensor, prismatic: list[bool] | None = None,
           friction: bool = False, shared_noise: bool = False, noise_starts: tuple[float, ...] | None = None,
           select_on: tuple[torch.Tensor, torch.Tensor] | None = None, noise_floor_ratio: float = 0.0,
           shared_noise_starts: tuple[str, ...] | None = None, refine_iterations: int = 0,
           **fit_kwargs: Any) -> tuple[GPInverseDynamics, FitReport, NoiseStart]:
    """Build and fit a GP from each noise start (``noise_starts`` x ``shared_noise_starts``).

    Defaults: NOISE_STARTS[kind]; with shared noise also SHARED_NOISE_STARTS[kind] (else "max").
    Keeps the fit with the lowest marginal likelihood (same hyperparameter subset: same seed), or, when
    ``select_on = (X_val, Y_val)`` is given, the lowest mean nMSE on that held-out trajectory. Decision: on
    real recordings select on held-out data: the marginal likelihood of smooth, densely sampled torques
    can prefer noise -> 0, which interpolates and extrapolates wildly (studies/gp_lip/README.md, real KUKA data).
    ``fit_kwargs`` go to :meth:`GPInverseDynamics.fit` (method, iterations, max_hyper_points, seed, max_seconds).
    ``refine_iterations`` > 0: the kept fit then runs that many more L-BFGS iterations (:func:`refine_gp`).

    Returns:
        (gp, report of the kept fit with ``seconds`` summed over all starts, its noise start).
    """
    if refine_iterations < 0:
        raise ParameterError(f"refine_iterations must be >= 0, got {refine_iterations}")
    ratios = noise_starts if noise_starts is not None else NOISE_STARTS.get(kind, (0.1,))
    shared_rules: tuple[str | None, ...] = (None,)
    if shared_noise:
        shared_rules = shared_noise_starts or SHARED_NOISE_STARTS.get(kind, ("max",))
    if not ratios or not shared_rules:
        raise ParameterError("fit_gp needs at least one noise start")
    best: tuple[GPInverseDynamics, FitReport, NoiseStart] | None = None
    best_score, total = math.inf, 0.0
    for ratio in ratios:
        for rule in shared_rules:
            gp = make_gp(kind, n, X, Y, prismatic, friction=friction, noise_init_ratio=ratio,
                         shared_noise=shared_noise, noise_floor_ratio=noise_floor_ratio,
                         shared_noise_start=rule or "max")
            rep = gp.fit(X, Y, **fit_kwargs)
            total += rep.seconds
            if select_on is not None:
                pred = gp.predict(select_on[0])[0].numpy()
                score = nan_mean(nmse_percent(pred, select_on[1].numpy()))
            else:
                score = rep.nll
            if best is None or (math.isfinite(score) and score < best_score):
                best, best_score = (gp, rep, NoiseStart(ratio, rule)), score
    assert best is not None  # both start lists are non-empty, so the loop kept one
    gp, rep, start = best
    if refine_iterations:
        more = refine_gp(gp, X, Y, refine_iterations, **fit_kwargs)
        total += more.seconds
        rep = FitReport(nll=more.nll, iterations=rep.iterations + more.iterations, seconds=0.0,
                        method=rep.method, hyper_points=rep.hyper_points)
    rep.seconds = total
    return gp, rep, start


def refine_gp(gp: GPInverseDynamics, X: torch.Tensor, Y: torch.Tensor, extra_iterations: int,
              **fit_kwargs: Any) -> FitReport:
    """Continue the L-BFGS fit of ``gp`` from its current hyperparameters for ``extra_iterations`` more.

    Why: the noise starts are compared after a short budget, and only the kept one earns more. On 7 DoF the
    last joint's hyperparameters are the last the optimiser reaches (studies/gp_lip/README.md). The same
    ``seed`` draws the same hyperparameter subset; L-BFGS restarts its curvature history, and the posterior
    is re-conditioned on all of (X, Y).
    """
    if fit_kwargs.get("method", "lbfgs") != "lbfgs":
        raise ParameterError("refining a GP fit continues L-BFGS; it needs method='lbfgs'")
    return gp.fit(X, Y, **{**fit_kwargs, "iterations": extra_iterations})


def _recordings(ds: Any, robot_model: Any) -> list:
    """``ds`` (a path, a Dataset or a Recording) as the robot's Recordings, one per contiguous segment: the loader and
    the acceleration estimate every other model's training uses (``models.sources``)."""
    from idyn_ros.models.sources import load_file, split_segments, to_recording

    if isinstance(ds, str | Path):
        return load_file(ds, robot_model)
    if not hasattr(ds, "joint_names"):  # idyn_ros.models.sources.Recording: already in the robot's order
        return [ds]
    return split_segments(to_recording(ds, robot_model, source=str(ds.source or "")), ds.segment_starts)


def _concat(datasets: list[Any], robot_model: Any) -> Arrays:
    recs = [rec for d in datasets for rec in _recordings(d, robot_model)]
    return tuple(np.concatenate([getattr(r, k) for r in recs]) for k in ("q", "dq", "ddq", "tau"))  # type: ignore


def train_gp(kind: str, robot_model: Any, train_datasets: list[Any], val_datasets: list[Any], out_dir: str | Path,
             seed: int = 0, max_samples: int = 500, max_minutes: float | None = 10.0, friction: bool = True,
             method: str = "lbfgs", max_hyper_points: int = 250, iterations: int | None = None,
             shared_noise: bool = False, test_datasets: list[Any] | None = None,
             noise_floor_ratio: float | None = None, refine_iterations: int = 0,
             validation_note: str = "", validation_overlap: dict | None = None,
             say: Callable[[str], None] | None = None) -> dict:
    """Train a GP inverse-dynamics model; write ``out_dir/model.onnx`` and ``out_dir/metrics.json``.

    Args:
        kind: one of GP_KINDS.
        robot_model: idyn_ros.dynamics.RobotModel (joint order, prismatic joints, name).
        train_datasets, val_datasets: Dataset objects or paths (anything ``load_dataset`` reads). With
            validation data, both noise starts (std(y)/10, /1000) are fitted and the one with the lower
            validation nMSE is kept (fit_gp: the marginal likelihood overfits real recordings); without,
            NOISE_STARTS[kind] and the marginal likelihood decide.
        test_datasets: reported only (``test_nmse_percent``), never used for a choice.
        noise_floor_ratio: noise floor per joint as a fraction of std(y); None: NOISE_FLOOR_RATIO with per-joint
            noise (real recordings), 0 with shared noise (i.i.d. simulated noise: a floor of 1 % of std(y) would
            be 0.15 Nm on the Panda's joint 2 against 0.01 Nm true noise).
        max_samples: training samples kept (random subset, seeded); the GP conditions on all of them.
        max_minutes: wall-time budget of the whole fit (every noise start's optimisation, posterior and selection
            scoring, the refinement), planned by :func:`plan_fit` from a timed probe (:func:`probe_fit`) when
            ``iterations`` is None; None: no budget. Not counted: loading, the val/test metrics, the export.
        iterations: L-BFGS iterations per noise start, pinned (the budget then plans nothing: the same seed and
            count give the same model on any machine); None: DEFAULT_ITERATIONS, or fewer if the budget says so.
        friction: add the friction kernel (real robots; eq 34-35).
        method: "lbfgs" (full batch on max_hyper_points samples) or "adam" (minibatch, lr 0.01).
        shared_noise: one noise std for all joints (i.i.d. noise, e.g. simulation) instead of one per joint.
        max_hyper_points: 250 because the 102-133 LIP hyperparameters are not identified by 100-150 points
            (6-DoF Panda test nMSE 6.7 % with 100 points, 0.94 % with 250: studies/gp_lip/README.md).
        refine_iterations: more L-BFGS iterations for the kept fit only (refine_gp); 0 = none; a budget (with
            ``iterations`` None) may plan fewer, after the noise starts.
        validation_note: where the validation data came from (e.g. a held-out tail), kept in metrics.json.
        validation_overlap: ``pipeline.warn_validation_overlap``'s result, kept in metrics.json as for the NN kinds.
        say: told the plan a budget made (:meth:`FitPlan.describe`) before the fit starts.

    Raises:
        TrainingError: the validation mean nMSE exceeds HELDOUT_MAX_NMSE_PERCENT; nothing is written.

    Returns:
        metrics dict (also written to metrics.json): per-joint and mean val nMSE [%], train time [s], ...
    """
    if not train_datasets:
        raise DatasetError("train_gp needs at least one training dataset")
    if max_minutes is not None and not max_minutes > 0:
        raise ParameterError(f"max_minutes must be > 0 (got {max_minutes})")
    if iterations is not None and not iterations >= 1:
        raise ParameterError(f"iterations must be >= 1 (got {iterations})")
    out_dir = Path(out_dir)
    torch.manual_seed(seed)
    q, dq, ddq, tau = _concat(list(train_datasets), robot_model)
    rng = np.random.default_rng(seed)
    if q.shape[0] > max_samples:
        keep = np.sort(rng.choice(q.shape[0], max_samples, replace=False))
        q, dq, ddq, tau = q[keep], dq[keep], ddq[keep], tau[keep]
    n = robot_model.n
    X, Y = stack_inputs(q, dq, ddq), torch.as_tensor(tau, dtype=torch.float64)
    if noise_floor_ratio is None:
        noise_floor_ratio = 0.0 if shared_noise else NOISE_FLOOR_RATIO
    select_on, starts = None, None
    if val_datasets:
        vq, vdq, vddq, vtau = _concat(list(val_datasets), robot_model)
        stride = max(1, vq.shape[0] // VAL_SELECTION_POINTS)  # prediction cost: every stride-th sample
        select_on = (stack_inputs(vq[::stride], vdq[::stride], vddq[::stride]),
                     torch.as_tensor(vtau[::stride], dtype=torch.float64))
        starts = VAL_NOISE_STARTS
    prismatic = joint_is_prismatic(robot_model)
    ratios = starts if starts is not None else NOISE_STARTS.get(kind, (0.1,))
    n_starts = len(ratios) * (len(SHARED_NOISE_STARTS.get(kind, ("max",))) if shared_noise else 1)
    t0 = time.perf_counter()
    plan, max_seconds = None, None
    if iterations is None and max_minutes is not None and method == "lbfgs":
        probe = probe_fit(kind, n, X, Y, prismatic, friction, shared_noise, ratios[0], noise_floor_ratio,
                          max_hyper_points, seed, select_on)
        plan = plan_fit(60.0 * max_minutes, n_starts, *probe, refine_iterations=refine_iterations)
        iterations, refine_iterations = plan.iterations, plan.refine_iterations
        if say is not None:
            say(plan.describe(kind))
    elif iterations is None and max_minutes is not None:  # Adam: epochs of minibatches, still cut by the clock
        max_seconds = 60.0 * max_minutes / n_starts
    iterations = DEFAULT_ITERATIONS if iterations is None else iterations
    gp, report, noise_start = fit_gp(kind, n, X, Y, prismatic, friction=friction,
                                     shared_noise=shared_noise, noise_starts=starts, select_on=select_on,
                                     noise_floor_ratio=noise_floor_ratio, refine_iterations=refine_iterations,
                                     method=method, iterations=iterations, max_hyper_points=max_hyper_points,
                                     seed=seed, max_seconds=max_seconds)
    train_s = time.perf_counter() - t0
    metrics: dict[str, Any] = {
        "model_kind": kind, "robot": robot_model.name, "n_train": int(q.shape[0]), "seed": seed,
        "train_seconds": train_s, "fit": report.__dict__, "friction_kernel": friction,
        "noise": "shared" if shared_noise else "per-joint", "noise_std": gp.noise_std().tolist(),
        "noise_start_ratio": noise_start.ratio, "shared_noise_start": noise_start.shared,
        "noise_floor_ratio": noise_floor_ratio, "iterations": iterations, "noise_starts_fitted": n_starts,
        "refine_iterations": refine_iterations,
        "fit_plan": None if plan is None else {**plan.__dict__, "predicted_seconds": plan.predicted_seconds,
                                               "least_seconds": plan.least_seconds},
    }
    t_scoring = time.perf_counter()
    for split, datasets in (("val", val_datasets), ("test", test_datasets)):
        if datasets:
            sq, sdq, sddq, stau = _concat(list(datasets), robot_model)
            e = nmse_percent(gp.predict(stack_inputs(sq, sdq, sddq))[0].numpy(), stau)
            metrics.update({f"{split}_nmse_percent": e.tolist(), f"{split}_nmse_mean_percent": nan_mean(e),
                            f"n_{split}": int(sq.shape[0])})
    if validation_note:
        metrics["validation_data"] = validation_note
    if validation_overlap is not None:
        metrics["validation_overlap"] = validation_overlap
    held = metrics.get("val_nmse_mean_percent")
    if held is not None and not held <= HELDOUT_MAX_NMSE_PERCENT:  # NaN too
        worst = int(np.nanargmax(metrics["val_nmse_percent"])) if np.isfinite(held) else 0
        raise TrainingError(
            f"the {kind} fit blows up on held-out data: mean nMSE {held:.4g} % (joint "
            f"{robot_model.joint_names[worst]}: {metrics['val_nmse_percent'][worst]:.4g} %), worse than predicting "
            f"the mean torque; not exported ({out_dir} left as it was). Fitted noise std "
            f"{np.round(metrics['noise_std'], 4).tolist()} Nm: give it more or other data (--max-samples, --data), "
            f"--val with another trajectory, or a more robust kind (idyn train --model auto)")
    metrics["scoring_seconds"] = time.perf_counter() - t_scoring
    t_export = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    rate = float(getattr(train_datasets[0], "rate_hz", float("nan"))) if not isinstance(
        train_datasets[0], str | Path) else float("nan")
    try:
        from idyn_ros.models.gp.export import export_onnx

        export_onnx(gp, out_dir / "model.onnx", {
            "model_kind": kind, "robot": robot_model.name, "joint_names": list(robot_model.joint_names),
            "sample_rate_hz": rate, "rate_hz": rate, "n_train": int(q.shape[0]),
            "urdf": robot_model.urdf_xml,  # lets `idyn evaluate` and the runtime rebuild the robot
            "test_metrics": {k: metrics[k] for k in ("val_nmse_percent", "test_nmse_percent") if k in metrics},
        })
        metrics["onnx"] = str(out_dir / "model.onnx")
    except ModelArtifactError as exc:  # the LSE baseline: metrics and checkpoint only
        metrics["onnx"] = None
        metrics["onnx_error"] = str(exc)
        (out_dir / "model.onnx").unlink(missing_ok=True)  # an earlier run's model must not pass for this one
    metrics["export_seconds"] = time.perf_counter() - t_export  # the ONNX graph; the files below take ms
    atomic_write_text(out_dir / "metrics.json", json.dumps(json_ready(metrics), indent=2, allow_nan=False) + "\n")
    checkpoint.save({"state_dict": gp.state_dict(), "X": gp.X, "Y": Y, "kind": kind, "friction": friction,
                     "shared_noise": shared_noise, "joint_names": list(robot_model.joint_names)}, out_dir / "gp.pt")
    return metrics
