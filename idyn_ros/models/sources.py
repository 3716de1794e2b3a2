"""Robot and recording loading for identification and training.

The models layer needs two things from below: a robot model (pinocchio model + joint names) and
recordings in the robot's joint order with ``q, dq, ddq, tau``. They come from
``idyn_ros.dynamics.RobotModel`` and ``idyn_ros.data.load_dataset``; this module adapts them to
the small :class:`Recording` the training code uses (float64, checked, in model joint order) and
rejects data that cannot be used with an error that says what to do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.errors import DatasetError


@dataclass
class Recording:
    """One trajectory in model joint order. Units: s, rad, rad/s, rad/s^2, Nm."""

    t: np.ndarray  # (N,)
    q: np.ndarray  # (N, n)
    dq: np.ndarray  # (N, n)
    ddq: np.ndarray  # (N, n)
    tau: np.ndarray  # (N, n)
    source: str = ""

    @property
    def n_samples(self) -> int:
        return len(self.t)

    @property
    def rate_hz(self) -> float:
        """Median sample rate in Hz."""
        return float(1.0 / np.median(np.diff(self.t))) if len(self.t) > 1 else 0.0


def load_robot(robot: Any) -> Any:
    """``RobotModel`` for a preset name, a URDF path, or an existing RobotModel (returned as is)."""
    if hasattr(robot, "pin_model"):
        return robot
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot(str(robot))


def _ddq_from_dq(t: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """Acceleration from velocity when a recording has none: zero-phase filtered derivative."""
    try:
        from idyn_ros.data import filters

        return np.asarray(filters.differentiate(dq, t))  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        from scipy.signal import butter, filtfilt

        fs = 1.0 / np.median(np.diff(t))
        # 5 Hz zero-phase Butterworth on dq before differencing: Reuss et al. 2022 Sec. IV-B
        b, a = butter(2, min(5.0 / (fs / 2), 0.99))
        return np.gradient(filtfilt(b, a, dq, axis=0), t, axis=0)


def to_recording(ds: Any, robot: Any, source: str = "") -> Recording:
    """Reorder a ``Dataset`` to the robot's joint order and check it (names, NaNs, shapes)."""
    if getattr(ds, "effort_kind", "torque") == "current":
        raise DatasetError(
            f"{source or 'dataset'}: efforts are motor currents (A), not torques; convert them with the "
            f"drive's torque constants when importing (`idyn dataset --effort-kind torque ...`) before training"
        )
    names = list(getattr(ds, "joint_names", []) or [])
    q = np.asarray(ds.q, dtype=np.float64)
    if names:
        missing = [j for j in robot.joint_names if j not in names]
        if missing:
            raise DatasetError(
                f"{source or 'dataset'}: joints {missing} of robot '{robot.name}' are not in the data "
                f"(data has {names}); pick the right --robot or rename the joints when importing "
                f"(`idyn dataset --joint-map old=new`)"
            )
        idx = np.array([names.index(j) for j in robot.joint_names])
    elif q.shape[1] == robot.n:
        idx = np.arange(robot.n)
    else:
        raise DatasetError(f"{source}: data has {q.shape[1]} joints, robot '{robot.name}' has {robot.n}")
    t = np.asarray(ds.t, dtype=np.float64)
    dq = np.asarray(ds.dq, dtype=np.float64)[:, idx]
    ddq_raw = getattr(ds, "ddq", None)
    ddq = _ddq_from_dq(t, dq) if ddq_raw is None else np.asarray(ddq_raw, dtype=np.float64)[:, idx]
    rec = Recording(t, q[:, idx], dq, ddq, np.asarray(ds.tau, dtype=np.float64)[:, idx], source)
    for field in ("t", "q", "dq", "ddq", "tau"):
        arr = getattr(rec, field)
        bad = ~np.isfinite(arr)
        if bad.any():
            rows = np.flatnonzero(bad.reshape(len(arr), -1).any(1))
            raise DatasetError(
                f"{source or 'dataset'}: {int(bad.sum())} NaN/inf values in '{field}' (first at sample "
                f"{rows[0]} of {len(arr)}); clean or cut the recording first "
                f"(e.g. `idyn dataset --drop-nonfinite`), or re-record"
            )
    return rec


def load_recordings(paths: Sequence[str | Path], robot: Any) -> list[Recording]:
    """Load each path (anything ``idyn_ros.data.load_dataset`` reads) in the robot's joint order.

    Files without joint names (e.g. FloBaRoID npz) get the robot's names by column position.
    """
    from idyn_ros.data import load_dataset

    out = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise DatasetError(f"{path}: no such file or folder")
        ds = load_dataset(path, joint_names=list(robot.joint_names))
        out.append(to_recording(ds, robot, source=str(path)))
    return out


def fingerprint(recs: Sequence[Recording]) -> str:
    """sha256 over the training arrays (t, q, dq, ddq, tau as float64, in order)."""
    h = hashlib.sha256()
    for r in recs:
        for a in (r.t, r.q, r.dq, r.ddq, r.tau):
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()
