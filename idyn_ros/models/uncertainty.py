"""The model's torque uncertainty, from its residuals on recordings it was not fitted to (stored in the artifact).

Two numbers per joint, because a wrench observer meets two situations (``idyn_ros.control.wrench_trust``):
- ``tau_sigma_nm``: RMSE of the predicted torque while the arm does anything (bias included): what an estimate
  that was never re-zeroed, or that moves, can be off by;
- ``tau_sigma_rest_nm``: the spread of the residual *within* each rest period (its mean removed): what is left
  after a re-zero at rest (sensor noise, drift, a position loop hunting against stiction).
A rest period is every joint slower than ``REST_VELOCITY`` for at least ``REST_TIME`` (the observer's defaults).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

REST_VELOCITY = 0.01  # rad/s: = WrenchObserverParams.rest_velocity's default
REST_TIME = 0.5  # s: = WrenchObserverParams.rest_time's default


def rest_segments(t: np.ndarray, dq: np.ndarray, velocity: float = REST_VELOCITY,
                  min_time: float = REST_TIME) -> list[slice]:
    """Slices where every joint is slower than ``velocity`` for at least ``min_time`` seconds."""
    still = np.all(np.abs(dq) < velocity, axis=1)
    out, start = [], None
    for k, s in enumerate([*still, False]):
        if s and start is None:
            start = k
        elif not s and start is not None:
            if t[k - 1] - t[start] >= min_time:
                out.append(slice(start, k))
            start = None
    return out


def torque_uncertainty(splits: Sequence[tuple[str, Sequence[Any], Sequence[np.ndarray]]]) -> dict[str, Any] | None:
    """The artifact's ``uncertainty`` entry from ``(split, recordings, predictions)``, first split that has data.

    The RMSE comes from the first split with samples; the rest spread from the first split with rest periods.
    """
    out: dict[str, Any] = {}
    for split, recs, preds in splits:
        if not recs:
            continue
        res = [p - r.tau for r, p in zip(recs, preds, strict=True)]
        if "tau_sigma_nm" not in out:
            allres = np.concatenate(res)
            out.update(tau_sigma_nm=np.sqrt((allres**2).mean(0)).tolist(), split=split, samples=len(allres))
        if "tau_sigma_rest_nm" not in out:
            pieces = [e[s] - e[s].mean(0) for r, e in zip(recs, res, strict=True)
                      for s in rest_segments(r.t, r.dq)]
            if pieces:
                rest = np.concatenate(pieces)
                out.update(tau_sigma_rest_nm=np.sqrt((rest**2).mean(0)).tolist(), rest_split=split,
                           rest_periods=len(pieces), rest_samples=len(rest))
    return out or None
