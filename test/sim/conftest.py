"""Fixtures for the plant tests: pinocchio built from exactly the URDF the plant simulates."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from idyn_ros.sim import Plant
from idyn_ros.sim.joint_effects import JointEffects


def ripple_torque(q: np.ndarray, tau_drive: np.ndarray, e: JointEffects) -> np.ndarray:
    """The ripple formula of ``idyn_ros.sim.joint_effects``'s doc, vectorised: the reference the plant's per-step
    loop (``JointEffectState.torque``) is checked against."""
    ratio = (e.ripple_ratio * np.sin(e.ripple_order * np.asarray(q, dtype=float)[..., None] + e.ripple_phase)).sum(-1)
    return ratio * np.asarray(tau_drive, dtype=float)


class PinModel:
    """pinocchio on a plant's (true) URDF, in the plant's joint order."""

    def __init__(self, plant: Plant) -> None:
        self.model = pin.buildModelFromXML(plant.true_urdf())
        self.data = self.model.createData()
        self.idx = np.array([self.model.joints[self.model.getJointId(j)].idx_v for j in plant.joint_names])
        assert self.model.nv == plant.n
        self.lower = self.model.lowerPositionLimit[self.idx]
        self.upper = self.model.upperPositionLimit[self.idx]

    def _full(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros(self.model.nv)
        out[self.idx] = x
        return out

    def rnea(self, q, dq, ddq) -> np.ndarray:
        return pin.rnea(self.model, self.data, self._full(q), self._full(dq), self._full(ddq))[self.idx]

    def gravity(self, q) -> np.ndarray:
        return pin.computeGeneralizedGravity(self.model, self.data, self._full(q))[self.idx]

    def jacobian(self, q, frame: str) -> np.ndarray:
        """(6, n) Jacobian of the frame origin, world-aligned axes."""
        qf = self._full(q)
        fid = self.model.getFrameId(frame)
        J = pin.computeFrameJacobian(self.model, self.data, qf, fid, pin.LOCAL_WORLD_ALIGNED)
        return J[:, self.idx]

    def random_q(self, rng: np.random.Generator, margin: float = 0.1) -> np.ndarray:
        return rng.uniform(self.lower + margin, self.upper - margin)


@pytest.fixture(scope="module")
def panda_ideal() -> Plant:
    return Plant("panda", profile="ideal")


@pytest.fixture(scope="module")
def panda_pin(panda_ideal: Plant) -> PinModel:
    return PinModel(panda_ideal)


@pytest.fixture(scope="session")
def pin_model() -> type[PinModel]:
    """The PinModel class (test files cannot import conftest under --import-mode=importlib)."""
    return PinModel
