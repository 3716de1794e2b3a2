"""wrench_observer: external joint torque and flange wrench from torque residuals.

Two estimators from ``idyn_ros.control.wrench`` (conventions and equations there):
(a) direct residual tau_model(q, dq, ddq) - tau, with ddq the raw backward difference over the
    last period and tau the command applied over that period, low-passed afterwards (the same
    filter then acts on both sides of the residual); tau_model = the learned model when
    ``model_path`` loads (FeedforwardComputer), else the nominal RBD;
(b) the generalised-momentum observer (needs no ddq): M, C, g from the learned model's identified
    inertial parameters + its friction and residual parts when a model with an RBD part is loaded,
    else the nominal RBD (``observer_rigid_body_terms``, ``LearnedModelTerms``).
Outputs (geometry_msgs/WrenchStamped, wrench applied BY the environment at the flange origin):
``wrench_topic`` (primary, base axes), ``<wrench_topic>/tool`` (primary, flange axes),
``<wrench_topic>/direct`` and ``<wrench_topic>/momentum`` (base axes); tau_ext as
sensor_msgs/JointState effort on ``external_torque_topic``.
Actuator torque: ``torque_source`` command (the effort command topic; exact in simulation) or
effort (/joint_states effort, e.g. measured joint torques on hardware).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import state_estimation as se
from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.control.wrench import (
    DirectResidual,
    LearnedModelTerms,
    MomentumObserver,
    WrenchMapper,
    observer_rigid_body_terms,
)
from idyn_ros.data.filters import ButterworthLowPass
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes import parameters as prm
from idyn_ros.nodes.common import (
    COMMAND_OUT,
    HOT_IN,
    MONITOR,
    Diagnostics,
    as_array,
    command_topic,
    declare_and_load,
    stamp_to_ns,
)

KIND = "wrench_observer"


class WrenchObserverNode(Node):
    def __init__(self, name: str = "wrench_observer", **kwargs: Any) -> None:
        from geometry_msgs.msg import WrenchStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        super().__init__(name, **kwargs)
        v, self.spec, self.robot = declare_and_load(self, KIND)
        self.vals = v
        n = self.n = self.robot.n
        self.add_post_set_parameters_callback(lambda _p: self._apply_tunables())
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v["robot"])
        self.model = None
        if v["model_path"]:
            self.model = FeedforwardComputer(self.robot, v["model_path"], "rbd", v["rate_hz"], v["warmup_ticks"])
            if self.model.fallback:
                self.get_logger().error(f"wrench observer model: {self.model.fallback_reason}")
                self.diag.set(Diagnostics.ERROR, self.model.fallback_reason, publish=True)
                self.model = None
        # M, C, g from the model's identified inertials when it has them (else nominal URDF)
        pi = self.model.inertial_parameters if self.model is not None else None
        self.rbd = observer_rigid_body_terms(self.robot, pi, self.model.armature if self.model is not None else None)
        self.model_terms = LearnedModelTerms(self.model, self.rbd) if self.model is not None else None
        self.direct = DirectResidual(self.rbd)
        self.momentum = MomentumObserver(self.rbd, v["observer_gain"])
        self.map_direct = WrenchMapper(self.rbd)
        self.map_momentum = WrenchMapper(self.rbd)
        self._apply_tunables()
        self.filter = se.JointStateFilter(self.robot.joint_names, v["rate_hz"])
        self._lp = ButterworthLowPass(n, v["rate_hz"], v["accel_cutoff_hz"])
        self._dq_prev = np.zeros(n)
        self.ddq_raw = np.zeros(n)
        self.tau_cmd = np.zeros(n)
        self.tau_applied = np.zeros(n)  # torque over the last period
        self._have_tau = False
        self.frame_base = v["frame_id_base"] or self.spec.base_link
        self.frame_tool = self.robot.flange_frame
        topic = v["wrench_topic"]
        self._ticks = 0
        self.pub = self.create_publisher(WrenchStamped, topic, MONITOR)
        self.pub_tool = self.create_publisher(WrenchStamped, f"{topic}/tool", MONITOR)
        self.pub_direct = self.create_publisher(WrenchStamped, f"{topic}/direct", MONITOR)
        self.pub_momentum = self.create_publisher(WrenchStamped, f"{topic}/momentum", MONITOR)
        self.pub_tau = self.create_publisher(JointState, v["external_torque_topic"], MONITOR)
        self._w = WrenchStamped()
        self._jt = JointState(name=list(self.robot.joint_names))
        hot_loop.subscribe(self, JointState, v["joint_states_topic"], self._on_joint_state, HOT_IN)
        if v["torque_source"] == "command":
            hot_loop.subscribe(self, Float64MultiArray, command_topic(v, self.spec), self._on_command, COMMAND_OUT)
        self.create_timer(v["diagnostics_period"], self._on_diagnostics)

    def _apply_tunables(self) -> None:
        v = self.vals = prm.values(self, KIND)
        self.momentum.K[:] = v["observer_gain"]
        fc = v["lowpass_cutoff_hz"]
        alpha = 1.0 - math.exp(-2 * math.pi * fc / v["rate_hz"]) if fc > 0 else 1.0
        for m in (self.map_direct, self.map_momentum):
            m.damping = v["pinv_damping"]
            m.deadband[:3] = v["deadband_force"]
            m.deadband[3:] = v["deadband_torque"]
            m.alpha = alpha

    def _on_command(self, msg: Any) -> None:
        if len(msg.data) == self.n:
            self.tau_cmd[:] = msg.data
            self._have_tau = True

    def _on_joint_state(self, msg: Any) -> None:
        f = self.filter
        prev_ns = f.stamp_ns
        self._dq_prev[:] = f.dq
        if f.update(msg.name, msg.position, msg.velocity, msg.effort, stamp_to_ns(msg.header.stamp)) != se.OK:
            return
        if self.vals["torque_source"] == "effort":
            if not np.all(np.isfinite(f.effort)):
                return
            self.tau_applied[:] = f.effort
        elif not self._have_tau:
            return
        else:  # the latest command answers the previous state, so it acted over the last period
            self.tau_applied[:] = self.tau_cmd
        if prev_ns < 0 or f.samples < 2:
            self.momentum.reset()
            self._lp.reset(0.0)
            return
        dt = (f.stamp_ns - prev_ns) * 1e-9
        np.subtract(f.dq, self._dq_prev, out=self.ddq_raw)
        self.ddq_raw /= dt
        q, dq = f.q, f.dq
        extra_direct = extra_momentum = None
        if self.model_terms is not None:
            extra_direct, extra_momentum = self.model_terms.update(q, dq, self.ddq_raw)
        tau_direct = self._lp.update(self.direct.update(q, dq, self.ddq_raw, self.tau_applied, extra_direct))
        tau_mom = self.momentum.update(q, dq, self.tau_applied, dt, extra_momentum)
        self._ticks += 1
        if self._ticks % self.vals["publish_divider"]:  # observers updated; Cartesian mapping only when published
            return
        base_d, _ = self.map_direct.update(q, tau_direct)
        base_m, tool_m = self.map_momentum.update(q, tau_mom)
        primary_mom = self.vals["primary"] == "momentum"
        stamp = msg.header.stamp
        self._publish(self.pub_direct, stamp, self.frame_base, base_d)
        self._publish(self.pub_momentum, stamp, self.frame_base, base_m)
        if primary_mom:
            base, tool, tau = base_m, tool_m, tau_mom
        else:
            base, tool, tau = base_d, self.map_direct.tool, tau_direct
        self._publish(self.pub, stamp, self.frame_base, base)
        self._publish(self.pub_tool, stamp, self.frame_tool, tool)
        self._jt.header.stamp = stamp
        self._jt.effort = as_array(tau)
        self.pub_tau.publish(self._jt)

    def _publish(self, pub: Any, stamp: Any, frame: str, w: np.ndarray) -> None:
        m = self._w
        m.header.stamp = stamp
        m.header.frame_id = frame
        f, t = m.wrench.force, m.wrench.torque
        f.x, f.y, f.z = float(w[0]), float(w[1]), float(w[2])
        t.x, t.y, t.z = float(w[3]), float(w[4]), float(w[5])
        pub.publish(m)

    def _on_diagnostics(self) -> None:
        if self.diag.level != Diagnostics.ERROR:
            self.diag.set(Diagnostics.OK if self.filter.samples else Diagnostics.STALE,
                          "observing" if self.filter.samples else "waiting for /joint_states")
        self.diag.publish()


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([WrenchObserverNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
