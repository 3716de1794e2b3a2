"""Preallocated pinocchio evaluations for the 1 kHz path (one ``pin.Data`` per user).

The control layer takes the pinocchio model out of ``idyn_ros.dynamics.RobotModel`` (its
``pin_model`` attribute) and keeps its own Data, so the controller, the observer and the
feedforward fallback never share mutable state (pinocchio habit: one Data per thread).
"""

from __future__ import annotations

from typing import Any

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


def model_rigid_body_terms(robot: Any, inertial_parameters: np.ndarray | None = None,
                           armature: np.ndarray | None = None, with_flange: bool = False) -> RigidBodyTerms:
    """``RigidBodyTerms`` of a loaded model: ``robot`` (an ``idyn_ros.dynamics.RobotModel``) with the model's
    identified ``inertial_parameters`` (n, 10) and ``armature`` (n,) kg m^2 when given, else its own.

    Why: every consumer of M(q) (the controller's acceleration-space feedback M(q)(Kp e + Kd de), the
    momentum observer's p = M dq) must use the same inertia as the feedforward. A URDF mass matrix
    without the reflected rotor inertia (Panda wrist: M_jj ~0.01-0.05 vs Ia ~0.2 kg m^2) scales the
    feedback down by M_jj / (M_jj + Ia), i.e. to 1/5-1/20 of the requested stiffness.
    """
    if inertial_parameters is not None:
        robot = robot.with_inertial_parameters(inertial_parameters)
    if armature is not None:
        robot = robot.with_armature(armature)
    return RigidBodyTerms(robot.pin_model, robot.flange_frame if with_flange else None)
