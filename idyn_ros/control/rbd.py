"""Preallocated pinocchio evaluations for the 1 kHz path (one ``pin.Data`` per user).

The control layer takes the pinocchio model out of ``idyn_ros.dynamics.RobotModel`` (its
``pin_model`` attribute) and keeps its own Data, so the controller, the observer and the
feedforward fallback never share mutable state (pinocchio habit: one Data per thread).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from idyn_ros.errors import RobotDescriptionError


class RigidBodyTerms:
    """M(q), g(q), RNEA, C(q,dq), flange Jacobian for a fixed-base arm with nq == nv."""

    def __init__(self, pin_model: pin.Model, flange_frame: str | None = None) -> None:
        if pin_model.nq != pin_model.nv:
            raise RobotDescriptionError(
                f"model '{pin_model.name}' has nq={pin_model.nq} != nv={pin_model.nv} (continuous or "
                "floating joints); the controller needs revolute/prismatic joints with limits"
            )
        self.model = pin_model
        self.data = pin_model.createData()
        self.n = pin_model.nv
        self._M = np.zeros((self.n, self.n))  # mass_matrix() output, reused: no allocation per tick
        self._strict_lower = np.tril(np.ones((self.n, self.n), dtype=bool), -1)
        self.zero = np.zeros(self.n)
        self.frame_id = -1
        if flange_frame is not None:
            if not pin_model.existFrame(flange_frame):
                raise RobotDescriptionError(f"flange frame '{flange_frame}' is not in model '{pin_model.name}'")
            self.frame_id = pin_model.getFrameId(flange_frame)

    def rnea(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        """Inverse dynamics M ddq + C dq + g (Nm)."""
        return pin.rnea(self.model, self.data, q, dq, ddq)

    def gravity(self, q: np.ndarray) -> np.ndarray:
        """g(q) (Nm)."""
        return pin.computeGeneralizedGravity(self.model, self.data, q)

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """Symmetric M(q) (kg m^2); CRBA fills only the upper triangle, mirrored here.

        Returns a buffer that the next call overwrites: copy it to keep it.
        """
        M = pin.crba(self.model, self.data, q)
        np.copyto(self._M, M)
        np.copyto(self._M, M.T, where=self._strict_lower)
        return self._M

    def coriolis_matrix(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """C(q, dq) with dM/dt = C + C^T (pinocchio's Christoffel-consistent choice)."""
        return pin.computeCoriolisMatrix(self.model, self.data, q, dq)

    def flange_jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(J, R): 6xn Jacobian [v; w] of the flange origin in base-aligned axes, and the flange rotation.

        LOCAL_WORLD_ALIGNED: linear velocity of the flange origin, both parts in base axes, so
        J^T maps a wrench [f; m] at the flange origin in base axes to joint torques.
        """
        J = pin.computeFrameJacobian(self.model, self.data, q, self.frame_id, pin.LOCAL_WORLD_ALIGNED)
        return J, self.data.oMf[self.frame_id].rotation
