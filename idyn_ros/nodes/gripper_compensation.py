"""gripper_compensation: a flange F/T sensor's reading minus the wrench its gripper is predicted to apply
(``idyn_ros.control.gripper.GripperCompensation``: the thesis' DeLaN + LSTM robot+gripper model minus the bare arm,
or the RBD-only form from the gripper's nominal parameters).

In: /joint_states and ``ft_topic`` (WrenchStamped, flange frame). Out, per joint state (with the newest reading):
``compensated_topic`` (reading - gripper, i.e. contact and anything grasped) and ``<ft_topic>/gripper`` (the
prediction), both in the reading's frame. Not in the default graph (``idyn bringup --nodes ...,gripper_compensation``).
A reading with a non-finite value is dropped (one would stay in the low-pass for good), and nothing is published
while the newest reading is older than ``STALE_READING_S`` (a sensor that stopped): diagnostics say which. The
compensation's acceleration estimate restarts after a gap in /joint_states and when the joint-state filter restarts
(stamps jumped back or stalled; said once per kind).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import state_estimation as se
from idyn_ros.control.gripper import GripperCompensation
from idyn_ros.errors import ParameterError, RobotDescriptionError
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes.common import HOT_IN, MONITOR, Diagnostics, JointStateProblems, declare_and_load
from idyn_ros.parameters import GripperCompensationParams

STALE_READING_S = 0.1  # s without a new F/T reading: the compensation stops instead of reusing the last one


def _settings_problem(v: GripperCompensationParams) -> str | None:
    """The two forms take different parameters: one given for the form not in use would be ignored, so it is
    refused."""
    if v.arm_model_path and not v.gripper_model_path:
        return ("arm_model_path is subtracted from gripper_model_path's prediction, but gripper_model_path is empty "
                "(the RBD-only form from gripper_mass/com/inertia runs then): set both, or neither")
    nominal = [name for name, given in (("gripper_mass", v.gripper_mass), ("gripper_com", any(v.gripper_com)),
                                        ("gripper_inertia", any(v.gripper_inertia))) if given]
    if v.gripper_model_path and nominal:
        return (f"{nominal} describe the RBD-only form, which gripper_model_path replaces: leave them at 0, or "
                "gripper_model_path empty")
    return None


class GripperCompensationNode(Node):
    def __init__(self, name: str = "gripper_compensation", **kwargs: Any) -> None:
        from geometry_msgs.msg import WrenchStamped

        from idyn_ros.control.feedforward import FeedforwardComputer
        from idyn_ros.robots.spec import Payload

        super().__init__(name, **kwargs)
        self.params, self.spec, self.robot = declare_and_load(self, GripperCompensationParams,
                                                                check=_settings_problem)
        v = self.params.value
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v.robot)
        gripper_model = arm_model = gripper = None
        if v.gripper_model_path:  # "none": a model that does not load is an error here, not a silent fallback
            gripper_model = FeedforwardComputer(self.robot, v.gripper_model_path, "none", v.rate_hz, v.warmup_ticks,
                                                advice=f"set gripper_model_path to a model exported for {v.robot}")
            if v.arm_model_path:
                arm_model = FeedforwardComputer(self.robot, v.arm_model_path, "none", v.rate_hz, v.warmup_ticks,
                                                advice=f"set arm_model_path to a model exported for {v.robot}")
        else:
            try:
                gripper = Payload(v.gripper_mass, tuple(v.gripper_com), tuple(v.gripper_inertia))
            except RobotDescriptionError as exc:  # it said "Payload inertia ...": name the parameters to fix
                raise ParameterError(f"gripper_inertia (the gripper's, about its CoM): {exc}") from None
        self.comp = GripperCompensation(self.robot, v.rate_hz, gripper_model, arm_model, gripper, v.pinv_damping,
                                        v.accel_cutoff_hz)
        self.params.on_change.append(lambda p: setattr(self.comp, "damping", p.pinv_damping))
        self.filter = se.JointStateFilter(self.robot.joint_names, v.rate_hz, estimate_acceleration=False)  # q, dq
        self.problems = JointStateProblems(self, self.diag, self.filter)
        self.reading = np.zeros(6)
        self.frame = ""
        self._have_reading = False
        self._reading_at = 0.0  # time.monotonic() of the newest accepted reading
        self.dropped = 0  # readings with a non-finite value
        self._problem = ""
        out = v.compensated_topic or f"{v.ft_topic.rstrip('/')}/compensated"
        self.pub = self.create_publisher(WrenchStamped, out, MONITOR)
        self.pub_gripper = self.create_publisher(WrenchStamped, f"{v.ft_topic.rstrip('/')}/gripper", MONITOR)
        self._msg = WrenchStamped()
        hot_loop.subscribe(self, WrenchStamped, v.ft_topic, self._on_wrench, HOT_IN)
        hot_loop.subscribe_joint_states(self, v.joint_states_topic, self._on_joint_state)
        self.create_timer(v.diagnostics_period, self.problems.publish)
        self.diag.set(Diagnostics.OK, f"{self.comp.source} compensation", publish=True)

    def _on_wrench(self, msg: Any) -> None:
        f, t = msg.wrench.force, msg.wrench.torque
        values = (f.x, f.y, f.z, t.x, t.y, t.z)
        if not all(map(math.isfinite, values)):
            self.dropped += 1
            self._report(f"F/T readings with a non-finite value dropped: {self.dropped}")
            return
        self.reading[:] = values
        self.frame = msg.header.frame_id
        self._have_reading = True
        self._reading_at = time.monotonic()

    def _on_joint_state(self, msg: Any, source: object = None) -> None:
        f = self.filter
        gaps = f.gaps
        status = self.problems.update(msg, source)
        if status is None:
            return
        if status != se.OK or f.gaps != gaps:  # no acceleration across a gap or a restart
            self.comp.reset()
        if not self._have_reading:
            return
        if time.monotonic() - self._reading_at > STALE_READING_S:
            self._report(f"no F/T reading on {self.params.value.ft_topic} for more than {STALE_READING_S:g} s: "
                         "nothing published")
            return
        if not self.comp.update(f.stamp_ns, f.q, f.dq, self.reading):
            return
        if self._problem:  # readings are back
            self._problem = ""
            self.diag.set(Diagnostics.OK, f"{self.comp.source} compensation")
        self._publish(self.pub, msg.header.stamp, self.comp.compensated)
        self._publish(self.pub_gripper, msg.header.stamp, self.comp.predicted)

    def _report(self, problem: str) -> None:
        """One WARN per new kind of problem (not per message: this runs at the sensor's rate)."""
        kind = problem.split(":", maxsplit=1)[0]
        if kind != self._problem:
            self._problem = kind
            self.get_logger().warning(problem)
        self.diag.set(Diagnostics.WARN, problem)

    def _publish(self, pub: Any, stamp: Any, w: np.ndarray) -> None:
        m = self._msg
        m.header.stamp = stamp
        m.header.frame_id = self.frame or self.robot.flange_frame
        f, t = m.wrench.force, m.wrench.torque
        f.x, f.y, f.z = float(w[0]), float(w[1]), float(w[2])
        t.x, t.y, t.z = float(w[3]), float(w[4]), float(w[5])
        pub.publish(m)


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([GripperCompensationNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
