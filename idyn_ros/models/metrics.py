"""Torque-prediction error metrics (numpy only, so `idyn evaluate` need not import torch).

- nMSE: MSE / variance of the measured torque, per joint (1.0 = as good as predicting the mean).
- RMSE in Nm.
- min-max NMSE: MSE of torques scaled by the training range, what Reuss et al. 2022 call "NMSE"
  (their Sec. IV; not divided by the variance). Ranges from the model's training data when known,
  else from the evaluated data.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def torque_metrics(pred: np.ndarray, tau: np.ndarray, tau_min: Any = None, tau_max: Any = None) -> dict[str, Any]:
    """Per-joint metrics and their means for predictions ``pred`` and measurements ``tau`` (N, n) Nm."""
    pred, tau = np.asarray(pred, dtype=np.float64), np.asarray(tau, dtype=np.float64)
    err = pred - tau
    mse = (err**2).mean(0)
    lo = tau.min(0) if tau_min is None else np.asarray(tau_min, dtype=np.float64)
    hi = tau.max(0) if tau_max is None else np.asarray(tau_max, dtype=np.float64)
    nmse = mse / np.maximum(tau.var(0), 1e-12)
    mm = mse / np.maximum(hi - lo, 1e-9) ** 2
    rmse = np.sqrt(mse)
    return {
        "nmse": nmse.tolist(),
        "rmse_nm": rmse.tolist(),
        "minmax_nmse": mm.tolist(),
        "nmse_mean": float(nmse.mean()),
        "nmse_max": float(nmse.max()),
        "rmse_mean_nm": float(rmse.mean()),
        "minmax_nmse_mean": float(mm.mean()),
        "n_samples": len(tau),
    }
