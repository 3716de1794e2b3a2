"""A 6-axis force/torque sensor at the plant's flange, between the arm and whatever is fixed to it.

What it reads (decision: the convention of the wrench observer, "what the environment applies to the robot"):
the wrench the distal side - the bodies attached at the flange (``Plant.set_payload`` and the profile's payload:
a gripper, a grasped part) and any contact on them - applies to the flange, force first, in the flange frame
about its origin:

    F = [R^T f_c; R^T m_c] - Y(w, alpha, a, g) phi_attached + bias + noise

with Y phi the attached body's inertial and gravity wrench (``idyn_ros.dynamics.payload``: the wrench the flange
must apply to move it) and (f_c, m_c) a wrench the plant applies (world axes) on the flange or the payload link,
which a real contact on the tool sends through the sensor. Kinematics: the plant's true state at the end of the
control period and its mean acceleration over it (``PlantState.ddq``), which is also what MuJoCo's
``mj_rnePostConstraint`` uses for the attached body's interaction force (tested to round-off).
Noise (decision): white, 0.05 N and 0.002 Nm standard deviation by default (the resolution class of a small
6-axis sensor such as an ATI Mini45), no bias; both configurable.
"""

from __future__ import annotations

import numpy as np

from idyn_ros.dynamics.inertia import barycentric_to_pi
from idyn_ros.dynamics.payload import flange_motion, regressor

FORCE_NOISE_STD = 0.05  # N
TORQUE_NOISE_STD = 0.002  # Nm


class FlangeForceTorqueSensor:
    """Reads the plant's ground truth (state, attached bodies, applied wrench) after each step; see the module doc."""

    def __init__(self, plant: object, noise_std: tuple[float, float] = (FORCE_NOISE_STD, TORQUE_NOISE_STD),
                 bias: np.ndarray | None = None, seed: int = 0) -> None:
        from idyn_ros.dynamics import RobotModel
        from idyn_ros.sim.plant import PAYLOAD_LINK

        self.plant = plant
        d = plant.description
        self.model = RobotModel.from_urdf(d.urdf_xml, name=d.name, joints=d.joint_names, flange_frame=d.flange_link,
                                          check_inertia=False)
        self._contact_links = (d.flange_link, PAYLOAD_LINK)
        self.noise = np.repeat(np.asarray(noise_std, dtype=float), 3)
        self.bias = np.zeros(6) if bias is None else np.asarray(bias, dtype=float).reshape(6)
        self._rng = np.random.default_rng(seed)
        self.truth = np.zeros(6)  # the last reading without bias and noise

    def attached_phi(self) -> np.ndarray:
        """phi (10,) of everything fixed distal to the sensor (zeros when nothing is attached)."""
        body = self.plant._attached_payload()
        return np.zeros(10) if body is None else barycentric_to_pi(body.mass, body.com, body.inertia)

    def read(self) -> np.ndarray:
        """The reading now (6,): [f N; m Nm] in the flange frame, see the module docstring."""
        p = self.plant
        q, dq = p.data.qpos[p._qidx], p.data.qvel[p._vidx]
        fm = flange_motion(self.model, q, dq, p._ddq)
        wrench = -(regressor(fm.w[0], fm.alpha[0], fm.a[0], fm.g[0]) @ self.attached_phi())
        link, applied = p.wrench
        if link in self._contact_links:
            R = fm.R[0]  # (MuJoCo's xmat is the step's start pose until the next step computes it)
            wrench[:3] += R.T @ applied[:3]
            wrench[3:] += R.T @ applied[3:]
        self.truth = wrench
        return wrench + self.bias + self.noise * self._rng.standard_normal(6)
