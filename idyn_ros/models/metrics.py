"""Torque-prediction error metrics (numpy only, so `idyn evaluate` need not import torch).

- nMSE: MSE / variance of the measured torque, per joint (1.0 = as good as predicting the mean);
  :func:`nmse` is the one definition in the package, everything else calls it.
- RMSE in Nm.
- min-max NMSE: MSE of torques scaled by the training range, what Reuss et al. 2022 call "NMSE"
  (their Sec. IV; not divided by the variance). Ranges from the model's training data when known,
  else from the evaluated data.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

# Zero-variance rule: a joint whose measured std is <= 1e-6 of its RMS (or 0) gets nMSE NaN plus a RuntimeWarning,
# because the ratio would be float noise, not a score; means over joints skip NaN joints.
CONSTANT_SIGNAL_RATIO = 1e-6


def nmse(pred: Any, target: Any) -> np.ndarray:
    """Per-column nMSE = mean((pred - target)^2) / var(target), shape (n,) for (N, n) or (1,) for (N,)."""
    pred = np.asarray(pred, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if target.ndim == 1:
        pred, target = pred.reshape(-1, 1), target.reshape(-1, 1)
    if pred.shape != target.shape:
        raise ValueError(f"nmse: prediction shape {pred.shape} differs from target shape {target.shape}")
    mse = ((pred - target) ** 2).mean(0)
    var = target.var(0)
    rms = np.sqrt((target**2).mean(0))
    constant = np.sqrt(var) <= CONSTANT_SIGNAL_RATIO * rms
    if constant.any():
        cols = np.flatnonzero(constant).tolist()
        warnings.warn(f"nMSE undefined for column(s) {cols}: the measured signal is constant "
                      f"(std <= {CONSTANT_SIGNAL_RATIO:g} x RMS); reported as NaN", RuntimeWarning, stacklevel=2)
    return mse / np.where(constant, np.nan, var)


def nmse_percent(pred: Any, target: Any) -> np.ndarray:
    """:func:`nmse` in percent (the GP paper's unit), (n,)."""
    return 100.0 * nmse(pred, target)


def nan_mean(values: np.ndarray) -> float:
    """Mean over the joints that have a value (NaN when none has)."""
    values = np.asarray(values, dtype=np.float64)
    finite = ~np.isnan(values)
    return float(values[finite].mean()) if finite.any() else float("nan")


def json_ready(value: Any) -> Any:
    """``value`` with each NaN/inf float as None: strict JSON (jq, JavaScript) has no NaN, and an nMSE can be NaN."""
    if isinstance(value, np.generic | np.ndarray):
        value = value.tolist()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(item) for item in value]
    return value


def torque_metrics(pred: np.ndarray, tau: np.ndarray, tau_min: Any = None, tau_max: Any = None) -> dict[str, Any]:
    """Per-joint metrics and their means for predictions ``pred`` and measurements ``tau`` (N, n) Nm."""
    pred, tau = np.asarray(pred, dtype=np.float64), np.asarray(tau, dtype=np.float64)
    err = pred - tau
    mse = (err**2).mean(0)
    lo = tau.min(0) if tau_min is None else np.asarray(tau_min, dtype=np.float64)
    hi = tau.max(0) if tau_max is None else np.asarray(tau_max, dtype=np.float64)
    per_joint = nmse(pred, tau)
    mm = mse / np.maximum(hi - lo, 1e-9) ** 2
    rmse = np.sqrt(mse)
    finite = per_joint[~np.isnan(per_joint)]
    return {
        "nmse": per_joint.tolist(),
        "rmse_nm": rmse.tolist(),
        "minmax_nmse": mm.tolist(),
        "nmse_mean": nan_mean(per_joint),
        "nmse_max": float(finite.max()) if finite.size else float("nan"),
        "rmse_mean_nm": float(rmse.mean()),
        "minmax_nmse_mean": float(mm.mean()),
        "n_samples": len(tau),
    }


#: "The same state" for ``state_overlap``: within this many training standard deviations on every q and dq coordinate
OVERLAP_RADIUS = 0.1
#: Above this share of validation states already in the training data, validation cannot see generalisation
OVERLAP_WARNING = 0.9


def state_overlap(train: Any, val: Any, radius: float = OVERLAP_RADIUS, max_points: int = 50_000) -> float:
    """Share of the validation samples whose (q, dq) lies within ``radius`` training std (every coordinate) of a
    training sample. Near 1: the validation recording repeats the training trajectory, so its score measures noise,
    not how the model carries to another trajectory (real KUKA file 2 vs 1: 1.0; file 3 vs 1: 0.0)."""
    from scipy.spatial import cKDTree

    X = np.concatenate([np.hstack([r.q, r.dq]) for r in train])
    V = np.concatenate([np.hstack([r.q, r.dq]) for r in val])
    if len(X) == 0 or len(V) == 0:
        return float("nan")
    X = X[:: max(1, len(X) // max_points)]
    scale = X.std(0)
    scale[scale < 1e-9] = 1.0  # a joint that does not move: compare it in its own units
    dist, _ = cKDTree(X / scale).query(V / scale, p=np.inf)
    return float(np.mean(dist <= radius))


def validation_candidates(train: Any, radius: float = OVERLAP_RADIUS) -> list[tuple[int, float]]:
    """(index, share of its states the other training recordings cover) for each training recording the others cover
    less than ``OVERLAP_WARNING``, least covered first: what could validate when the given validation repeats
    training (a recording no other one covers is a trajectory the model would otherwise never be checked on)."""
    if len(train) < 2:
        return []
    shares = [(i, state_overlap([r for j, r in enumerate(train) if j != i], [rec], radius))
              for i, rec in enumerate(train)]
    return sorted(((i, s) for i, s in shares if s < OVERLAP_WARNING), key=lambda x: x[1])


#: A recording that runs some joint faster than this multiple of the training data's largest |dq| gets a warning
SPEED_WARNING = 1.1


def speed_coverage(dq_hold: Any, recs: Any) -> dict[str, Any]:
    """How far recordings run beyond the speeds a model holds friction and residual to
    (``TorqueModel.set_velocity_hold``): per joint the largest |dq| over the hold, and the share of samples with some
    joint beyond it."""
    speed = np.asarray(dq_hold, dtype=np.float64)
    hold = np.maximum(speed, 1e-9)
    dq = np.abs(np.concatenate([r.dq for r in recs]))
    ratio = dq.max(0) / hold
    ratio[(speed <= 0.0) & (ratio > 0.0)] = np.inf  # a joint that never moved in training: no ratio to 0 rad/s
    return {"ratio": ratio.tolist(), "share_beyond": float(np.mean(np.any(dq > hold, axis=1)))}


def speed_warning(what: str, coverage: dict[str, Any], joint_names: Any, held: bool = True) -> str | None:
    """The user-facing warning for ``speed_coverage`` beyond ``SPEED_WARNING``, else None. A ratio of inf is a joint
    that moved where the training data never did; ``held``: the model holds friction and residual at the training
    speed (kinds without an RBD part do not: they extrapolate)."""
    ratio = np.asarray(coverage["ratio"], dtype=np.float64)
    order = np.argsort(-ratio)
    fast = [f"{joint_names[j]} {ratio[j]:.1f}x" for j in order if SPEED_WARNING < ratio[j] < np.inf]
    never = [str(joint_names[j]) for j in order if ratio[j] == np.inf]
    if not fast and not never:
        return None
    beyond = ([f"{', '.join(fast)} its largest speed"] if fast else []) + (
        [f"{', '.join(never)} beyond a training range of 0 rad/s"] if never else [])
    there = ("The model holds friction and residual at the training speed there (closed-loop safety: unheld, a fitted "
             "residual ran a joint into its limit)" if held else
             "This model kind has no rigid-body part to hold at the training speed: it extrapolates there")
    return (f"{what} runs faster than the training data ({', '.join(beyond)}; "
            f"{coverage['share_beyond']:.0%} of the samples beyond it). {there}, so "
            f"expect a larger error on those samples; record training data that covers the speeds the robot will run")
