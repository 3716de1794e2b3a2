"""The model's torque uncertainty, from its residuals on recordings it was not fitted to where there are any (stored
in the artifact with the split each number came from: validation first, then test, then, with neither, the training
fit itself, which the wrench observer then calls optimistic).

Two numbers per joint, because a wrench observer meets two situations (``idyn_ros.control.wrench_trust``):
- ``tau_sigma_nm``: RMSE of the predicted torque while the arm does anything (bias included): what an estimate
  that was never re-zeroed, or that moves, can be off by;
- ``tau_sigma_rest_nm``: what is left after a re-zero at rest: the spread of the residual within each rest period
  (its mean removed: noise, drift, a position loop hunting against stiction) and, added in quadrature, how much
  the mean moves between rests at the same pose (static friction holding another share after a motion or a push).
A rest period is every joint slower than ``REST_VELOCITY`` for at least ``REST_TIME`` (the observer's defaults);
"the same pose" for the shift: within ``SAME_POSE`` on every joint (decision: a few degrees change a gravity bias
little, while static friction shifts it by up to its whole band; a wrist left 4 degrees off by stiction on the
simulated UR5 is still the same pose).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

REST_VELOCITY = 0.01  # rad/s: = WrenchObserverParams.rest_velocity's default
REST_TIME = 0.5  # s: = WrenchObserverParams.rest_time's default
SAME_POSE = 0.1  # rad


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
            pieces, means, poses = [], [], []
            for r, e in zip(recs, res, strict=True):
                for s in rest_segments(r.t, r.dq):
                    pieces.append(e[s] - e[s].mean(0))
                    means.append(e[s].mean(0))
                    poses.append(r.q[s].mean(0))
            if pieces:
                rest = np.concatenate(pieces)
                within = (rest**2).mean(0)
                shifts = [means[a] - means[b] for a in range(len(means)) for b in range(a)
                          if np.all(np.abs(poses[a] - poses[b]) <= SAME_POSE)]
                between = (np.array(shifts) ** 2).mean(0) / 2 if shifts else np.zeros_like(within)  # var of a mean
                out.update(tau_sigma_rest_nm=np.sqrt(within + between).tolist(), rest_split=split,
                           rest_periods=len(pieces), rest_samples=len(rest), rest_same_pose_pairs=len(shifts))
    return out or None
