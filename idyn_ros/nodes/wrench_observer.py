"""wrench_observer: external joint torque and flange wrench from torque residuals.

Two estimators from ``idyn_ros.control.wrench`` (conventions and equations there):
(a) direct residual tau_model(q, dq, ddq) - tau, with ddq the raw backward difference over the
    last period and tau the command applied over that period, low-passed afterwards (the same
    filter then acts on both sides of the residual); tau_model = the learned model when
    ``model_path`` loads (FeedforwardComputer), else the nominal RBD;
(b) the generalised-momentum observer (needs no ddq): M, C, g from the learned model's identified
    inertial parameters + its friction and residual parts when a model with an RBD part is loaded,
    else the nominal RBD. Both run in ``idyn_ros.control.wrench.WrenchObserver``, which experiments use too.
Outputs (geometry_msgs/WrenchStamped, wrench applied BY the environment at the flange origin):
``wrench_topic`` (primary after the trust stage of ``idyn_ros.control.wrench_trust``: re-zeroed at rest,
reduced rank near singularities; base axes), ``<wrench_topic>/tool`` (the same, flange axes),
``<wrench_topic>/sigma`` (its 1-sigma per flange axis; inf for a direction it cannot see),
``<wrench_topic>/hidden`` (per flange axis, the most force the stiction band can hide at this state; 0 when moving),
``<wrench_topic>/contact`` (std_msgs/Bool), ``<wrench_topic>/direct`` and ``<wrench_topic>/momentum`` (raw, base
axes); tau_ext after the bias as sensor_msgs/JointState effort on ``external_torque_topic``. Service ``~/rezero``
(std_srvs/Trigger) zeros the estimate at the next state, at this pose (the bias applies within ``pose_tolerance`` of
it; elsewhere the estimate is the model's residual as is). ``idyn wrench`` replays a recording through the same
classes.
Actuator torque: ``torque_source`` command (the effort command topic; exact in simulation) or
effort (/joint_states effort: joint torques, or motor currents on a UR, converted with the model's gains by
``idyn_ros.control.effort``; the node says which on start-up).
Time: the observers and the trust stage's rest and bias windows restart after a gap in /joint_states and whenever the
joint-state filter restarts (stamps jumped back or stalled), which is said once per kind (log, /diagnostics).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import state_estimation as se
from idyn_ros.control.effort import EffortToTorque
from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.control.wrench import WrenchObserver, publish_every
from idyn_ros.control.wrench_trust import TrustedWrench, TrustSettings
from idyn_ros.data.filters import lowpass_alpha
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes.common import (
    COMMAND_OUT,
    MONITOR,
    Diagnostics,
    JointStateProblems,
    command_topic,
    declare_and_load,
    describe_payload,
    field_view,
    payload_service,
)
from idyn_ros.parameters import WrenchObserverParams
from idyn_ros.robots.drives import torque_constants


def _settings_problem(v: WrenchObserverParams) -> str | None:
    """A parameter set the trust stage refuses (e.g. a release threshold above the contact threshold), or None (the
    momentum observer is stable at every gain and rate)."""
    from idyn_ros.errors import ParameterError

    try:
        TrustSettings.from_params(v)
    except ParameterError as exc:
        return str(exc)
    return None


class WrenchObserverNode(Node):
    def __init__(self, name: str = "wrench_observer", **kwargs: Any) -> None:
        from geometry_msgs.msg import WrenchStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Bool, Float64MultiArray
        from std_srvs.srv import Trigger

        super().__init__(name, **kwargs)
        self.params, self.spec, self.robot = declare_and_load(self, WrenchObserverParams, check=_settings_problem)
        v = self.params.value
        n = self.n = self.robot.n
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v.robot)
        model = None
        if v.model_path or v.fallback == "none":
            # fallback none refuses to start without a usable model, as in the controller and doomed (on hardware the
            # graph sets it with model:=); rbd and gravity: the observers run on the nominal URDF (g(q) alone would
            # read every motion as contact)
            model = FeedforwardComputer(self.robot, v.model_path or None, "none" if v.fallback == "none" else "rbd",
                                        v.rate_hz, v.warmup_ticks)
            if model.fallback:
                self.get_logger().error(f"wrench observer model: {model.fallback_reason}")
                self.diag.set(Diagnostics.ERROR, model.fallback_reason, publish=True)
        self.observer = WrenchObserver(self.robot, v.rate_hz, model, v.observer_gain, v.accel_cutoff_hz)
        self.effort = None
        if v.torque_source == "effort":
            data = torque_constants(v.robot)
            self.effort = EffortToTorque(v.effort_unit, n, model.effort_metadata if model is not None else None,
                                         v.torque_constants, None if data is None else data.as_array())
            self.get_logger().info(self.effort.describe())
            if self.effort.warning:
                self.get_logger().warning(self.effort.warning)
        self.trust = TrustedWrench.from_model(self.observer.rbd, self.observer.model, TrustSettings.from_params(v),
                                              v.tau_sigma, v.tau_sigma_rest)
        self.get_logger().info(self.trust.describe())
        self._apply_tunables(v)
        self.params.on_change.append(self._apply_tunables)
        # the observer differences dq itself: the filter's ddq is not read
        self.filter = se.JointStateFilter(self.robot.joint_names, v.rate_hz, estimate_acceleration=False)
        self.observer.max_gap_ns = self.filter.max_gap_ns  # both restart past the same gap
        self.problems = JointStateProblems(self, self.diag, self.filter)
        self.tau_cmd = np.zeros(n)
        self.tau_applied = np.zeros(n)  # torque over the last period
        self._have_tau = False
        self._warm = False
        self._no_effort = False  # the last joint state carried no (finite) effort for some joint (torque_source effort)
        self.frame_base = v.frame_id_base or self.spec.base_link
        self.frame_tool = self.robot.flange_frame
        topic = v.wrench_topic
        self.pub = self.create_publisher(WrenchStamped, topic, MONITOR)
        self.pub_tool = self.create_publisher(WrenchStamped, f"{topic}/tool", MONITOR)
        self.pub_direct = self.create_publisher(WrenchStamped, f"{topic}/direct", MONITOR)
        self.pub_momentum = self.create_publisher(WrenchStamped, f"{topic}/momentum", MONITOR)
        self.pub_sigma = self.create_publisher(WrenchStamped, f"{topic}/sigma", MONITOR)
        self.pub_hidden = self.create_publisher(WrenchStamped, f"{topic}/hidden", MONITOR)
        self.pub_contact = self.create_publisher(Bool, f"{topic}/contact", MONITOR)
        self.pub_tau = self.create_publisher(JointState, v.external_torque_topic, MONITOR)
        self._contact_msg = Bool()
        self.create_service(Trigger, "~/rezero", self._srv_rezero)
        self._w = WrenchStamped()
        self._jt = JointState(name=list(self.robot.joint_names))
        self._jt_effort = field_view(self._jt, "effort", self.robot.n)  # written each publish
        hot_loop.subscribe_joint_states(self, v.joint_states_topic, self._on_joint_state)
        if v.torque_source == "command":
            hot_loop.subscribe(self, Float64MultiArray, command_topic(v.command_topic, v.robot), self._on_command,
                               COMMAND_OUT)
        self.create_timer(v.diagnostics_period, self._on_diagnostics)
        payload_service(self, self._set_payload)

    def _set_payload(self, payload: Any) -> str:
        """~/set_payload: the payload counts as part of the robot, not as contact (observers restart)."""
        self.observer.set_payload(payload)
        return f"{describe_payload(payload)} counted as part of the robot"

    def _apply_tunables(self, v: WrenchObserverParams) -> None:
        alpha = lowpass_alpha(v.lowpass_cutoff_hz, v.rate_hz)
        self.observer.set_tunables(v.observer_gain, v.pinv_damping, v.deadband_force, v.deadband_torque, alpha)
        self.trust.set_settings(TrustSettings.from_params(v))
        self.trust.bias.contact_expected = v.contact_expected
        self.publish_every = publish_every(v.publish_divider, v.rate_hz)  # read per tick, set on each parameter change

    def _srv_rezero(self, _request: Any, response: Any) -> Any:
        self.trust.rezero()
        response.success = True
        response.message = "the estimate is zeroed at the next joint state, for this pose (pose_tolerance)"
        return response

    def _on_command(self, msg: Any) -> None:
        """A non-finite command is dropped (the plant keeps the previous one; the observer would keep it for good)."""
        if len(msg.data) == self.n and all(map(math.isfinite, msg.data)):
            self.tau_cmd[:] = msg.data
            self._have_tau = True

    def _on_joint_state(self, msg: Any, source: object = None) -> None:
        f = self.filter
        status = self.problems.update(msg, source)
        if status is None:
            return
        if status != se.OK:  # a restart
            self.observer.reset()  # the observers start over on this live state
            self._warm = False  # and a learned model's recurrent state with them
        v = self.params.value
        if v.torque_source == "effort":
            self._no_effort = not np.all(np.isfinite(f.effort))  # said on /diagnostics
            if self._no_effort:
                return
            self.effort.torque(f.effort, out=self.tau_applied)
        elif not self._have_tau:
            return
        else:  # the latest command answers the previous state, so it acted over the last period
            self.tau_applied[:] = self.tau_cmd
        obs = self.observer
        if not self._warm:
            obs.warm_up(f.q)
            self._warm = True
        if not obs.update(f.stamp_ns, f.q, f.dq, self.tau_applied):  # (re)starting: a gap, a restart, the first
            self.trust.restart()
            return
        if obs.updates % self.publish_every:  # observers updated; Cartesian mapping only when published
            return
        q = f.q
        base_d, base_m = obs.wrenches(q)
        stamp = msg.header.stamp
        self._publish(self.pub_direct, stamp, self.frame_base, base_d)
        self._publish(self.pub_momentum, stamp, self.frame_base, base_m)
        est = self.trust.update(f.stamp_ns, q, f.dq, obs.tau_momentum if v.primary == "momentum" else obs.tau_direct)
        self._publish(self.pub, stamp, self.frame_base, est.base)
        self._publish(self.pub_tool, stamp, self.frame_tool, est.tool)
        self._publish(self.pub_sigma, stamp, self.frame_tool, est.sigma_tool)
        self._publish(self.pub_hidden, stamp, self.frame_tool, est.hidden_tool)
        self._contact_msg.data = bool(est.contact)
        self.pub_contact.publish(self._contact_msg)
        self._jt.header.stamp = stamp
        self._jt_effort[:] = est.tau_ext
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
        est = self.trust.out
        values = {"rank": est.rank, "contact": est.contact, "contact_score": f"{est.contact_score:.2f}",
                  "zeroed": est.zeroed, "at_rest": est.at_rest,
                  "effort": self.effort.describe() if self.effort is not None else "effort not used (torque_source "
                                                                                      "command)"}
        if est.singular:
            values["unobservable_tool"] = "; ".join(" ".join(f"{x:+.2f}" for x in u) for u in est.unobservable_tool)
        if self.diag.level != Diagnostics.ERROR:
            if not self.filter.samples:
                self.diag.set(Diagnostics.STALE, "waiting for /joint_states", **values)
            elif slow := self.problems.dropping_note() or self.filter.rate_problem():
                self.diag.set(Diagnostics.WARN, slow, **values)
            elif self._no_effort:
                self.diag.set(Diagnostics.WARN, f"the joint states on {self.params.value.joint_states_topic} carry no "
                              "effort for every joint (torque_source: effort): no estimate until they do", **values)
            elif est.singular:
                self.diag.set(Diagnostics.WARN, f"near a singularity: {6 - est.rank} wrench direction(s) not "
                              f"estimated (see unobservable_tool)", **values)
            else:
                self.diag.set(Diagnostics.OK, "observing", **values)
        else:
            self.diag.values.update({k: str(x) for k, x in values.items()})
        if self.problems.counts or self.filter.dropped:
            self.diag.values.update(self.problems.values())
        self.diag.publish()


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([WrenchObserverNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
