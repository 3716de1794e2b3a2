"""Gripper compensation (Doenges 2025 sec. 3.1-3.2): a flange F/T reading minus the wrench the gripper is predicted
to apply, leaving what touches the tool (contact, a payload).

Eq. 23 of the thesis maps the whole robot+gripper torque through J^-T, but the sensor only feels the bodies distal to
it. Decision (the consistent form, the summary's option 1): the gripper's wrench is what the robot+gripper model
predicts beyond the bare arm's,

    F_gripper = -(J^T)^+ (tau_RG(q, dq, ddq) - tau_R(q, dq, ddq))        compensated = F_sensor - F_gripper

in the sensor's convention (what the distal side applies to the flange, ``sim/ft_sensor.py``), J the flange Jacobian
in flange axes, (J^T)^+ the damped pseudo-inverse of ``control/wrench.py`` (for 7 joints the null-space part of the
torque difference is lost; near a singularity the damping trades accuracy for boundedness). tau_RG: a learned model
of the robot with its gripper (``delan-lstm``: DeLaN + residual LSTM, trained without payload and without contact,
the F/T sensor unused); tau_R: the bare arm, the nominal URDF's RNEA by default or a learned bare-arm model. The
baseline (``gripper=``, "RBD-only"): F_gripper = -Y(w, alpha, a, g) phi of the gripper's nominal (CAD) parameters
(``dynamics/payload.py``).

Acceleration online: backward difference of dq over the stamp interval, low-passed (``accel_cutoff_hz``); the reading
goes through the same low-pass, so prediction and reading are delayed alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from idyn_ros.control.wrench import damped_pinv_transpose


class GripperCompensation:
    """See the module docstring. ``gripper_model``: a ``FeedforwardComputer`` of the robot + gripper (learned);
    ``arm_model``: one of the bare arm (None: ``robot``'s RNEA); ``gripper``: the nominal ``Payload`` for the RBD-only
    form (used when ``gripper_model`` is None)."""

    def __init__(self, robot: Any, rate_hz: float, gripper_model: Any = None, arm_model: Any = None,
                 gripper: Any = None, damping: float = 0.01, accel_cutoff_hz: float = 20.0) -> None:
        from idyn_ros.data.filters import ButterworthLowPass
        from idyn_ros.dynamics.payload import payload_phi

        if gripper_model is None and gripper is None:
            from idyn_ros.errors import ParameterError

            raise ParameterError("gripper compensation needs a robot+gripper model or the gripper's nominal payload")
        self.robot = robot
        self.gripper_model = gripper_model
        self.arm_model = arm_model
        self.phi = None if gripper is None else payload_phi(gripper)
        self.source = "learned" if gripper_model is not None else "rbd"
        self.damping = float(damping)
        self._acc_lp = ButterworthLowPass(robot.n, rate_hz, accel_cutoff_hz)
        self._ft_lp = ButterworthLowPass(6, rate_hz, accel_cutoff_hz)
        self.ddq = np.zeros(robot.n)
        self.predicted = np.zeros(6)  # the gripper's wrench on the flange, flange axes [N; Nm]
        self.compensated = np.zeros(6)
        self._dq_prev = np.zeros(robot.n)
        self._prev_ns = -1
        self._warm = False

    def reset(self) -> None:
        self._prev_ns = -1

    def predict(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        """The gripper's wrench on the flange (6,) at one state (module docstring)."""
        if self.source == "rbd":
            from idyn_ros.dynamics.payload import flange_motion

            fm = flange_motion(self.robot, q, dq, ddq)
            return -(fm.regressor()[0] @ self.phi)
        tau_rg = self.gripper_model.compute(q, dq, ddq)
        tau_r = self.arm_model.compute(q, dq, ddq) if self.arm_model is not None else self.robot.rnea(q, dq, ddq)
        J = self.robot.frame_jacobian(q, reference="local")
        return -(damped_pinv_transpose(J, self.damping) @ (tau_rg - tau_r))

    def update(self, stamp_ns: int, q: np.ndarray, dq: np.ndarray, wrench: np.ndarray) -> bool:
        """One joint state with the F/T reading taken with it; False while starting (the first state)."""
        prev, self._prev_ns = self._prev_ns, stamp_ns
        if prev < 0 or stamp_ns <= prev:
            self._dq_prev[:] = dq
            self._acc_lp.reset(0.0)
            self._ft_lp.reset(np.asarray(wrench, dtype=float))
            if not self._warm:
                for m in (self.gripper_model, self.arm_model):
                    if m is not None:
                        m.warm_up(q)
                self._warm = True
            return False
        raw = (dq - self._dq_prev) / ((stamp_ns - prev) * 1e-9)
        self._dq_prev[:] = dq
        self.ddq[:] = self._acc_lp.update(raw)
        self.predicted[:] = self.predict(q, dq, self.ddq)
        self.compensated[:] = self._ft_lp.update(np.asarray(wrench, dtype=float)) - self.predicted
        return True
