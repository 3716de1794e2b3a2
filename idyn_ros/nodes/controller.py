"""Joint impedance / computed-torque controller (lifecycle node): /joint_states -> effort command.

Why it looks like this:
- event-driven: the command is computed inside the /joint_states callback (one hop plant ->
  controller -> plant), not on a timer; a 1-period timer only watches for a silent input;
- the feedforward model runs inside this process (``FeedforwardComputer``, feedforward_source
  = embedded) so the chain is short; the feedforward node publishes the same computation for
  monitoring. feedforward_source = topic uses that node instead (its timeout trips the watchdog);
- the law is ``idyn_ros.control.law.impedance_torque`` (equation in its docstring); this file is glue;
- the command's ``layout.dim[0].label`` is ``stamp_ns=<joint-state stamp>``: the plant (or a probe)
  measures state -> command latency from it (docs/interfaces.md, nodes/);
- safety: ``idyn_ros.control.watchdog`` latches a trip (stale / NaN / missing joint / feedforward
  timeout) and the same tick's command is the robot's safe torque; reason on ControllerState and
  /diagnostics. Re-activating (deactivate + activate) clears it.
Lifecycle: configure loads robot + model and creates pubs/subs; activate captures the current q as
the hold reference and warms the model up; deactivate stops commanding; cleanup destroys everything.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn

from idyn_ros.control import law
from idyn_ros.control import state_estimation as se
from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.control.rbd import RigidBodyTerms
from idyn_ros.control.watchdog import Watchdog
from idyn_ros.errors import IdynError
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes import parameters as prm
from idyn_ros.nodes.common import (
    COMMAND_OUT,
    HOT_IN,
    MONITOR,
    STAMP_LABEL,
    Diagnostics,
    NameMap,
    as_array,
    command_topic,
    load_robot,
    stamp_to_ns,
)
from idyn_ros.nodes.hot_loop import HotLoop

KIND = "controller"


class ControllerNode(LifecycleNode):
    """See the module docstring. ``autostart`` (constructor) configures and activates at once."""

    def __init__(self, name: str = "controller", autostart: bool = True, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.vals = prm.declare(self, KIND)
        self._configured = False
        self._active = False
        self.n: int | None = None
        self.add_on_set_parameters_callback(
            prm.make_validator(self, KIND, lambda: self.n, lambda: self._configured))
        self.add_post_set_parameters_callback(self._after_set)
        self._subs: list[Any] = []
        self._pubs: list[Any] = []
        self._timers: list[Any] = []
        self.diag: Diagnostics | None = None
        if autostart and self.trigger_configure() == TransitionCallbackReturn.SUCCESS:
            self.trigger_activate()

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        from std_msgs.msg import Float64MultiArray, MultiArrayDimension

        from idyn_ros.msg import ControllerState

        self.vals = prm.values(self, KIND)
        v = self.vals
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v["robot"])
        try:
            self.spec, self.robot = load_robot(v)
            self.n = n = self.robot.n
            problems = prm.validate_all(KIND, v, n)
            if problems:
                raise IdynError("; ".join(problems))
            self.joint_names = self.robot.joint_names
            self.rbd = RigidBodyTerms(self.robot.pin_model)
            self.embedded = v["feedforward_source"] == "embedded"
            self.ff = FeedforwardComputer(self.robot, v["model_path"] or None, v["fallback"], v["rate_hz"],
                                          v["warmup_ticks"], rbd=RigidBodyTerms(self.robot.pin_model))
            # feedback inertia = the model's (identified inertials + armature), nominal URDF in fallback
            self.rbd_fb = self.ff.feedback_terms()
        except IdynError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            self.diag.set(Diagnostics.ERROR, f"configure failed: {exc}", publish=True)
            self.diag.destroy()
            return TransitionCallbackReturn.FAILURE
        if self.ff.fallback:  # loud, once
            self.get_logger().error(f"feedforward: {self.ff.fallback_reason}")
        self.period = 1.0 / v["rate_hz"]
        self.filter = se.JointStateFilter(self.joint_names, v["rate_hz"], max_gap_periods=v["stale_periods"])
        self.watchdog = Watchdog(self.period, v["stale_periods"], v["feedforward_timeout"])
        self.safe_mode = v["safe_mode"] or self.spec.safe_mode
        damping = v["safe_damping"] or list(0.1 * self.robot.effort_limit)
        self.safe_damping = np.asarray(damping, dtype=float)
        self.limiter = law.TorqueLimiter(self.robot.effort_limit, v["torque_rate_limit"], self.period,
                                         v["effort_scale"])
        self._update_gains()
        # preallocated tick buffers
        z = np.zeros
        self.q_d, self.dq_d, self.ddq_d = z(n), z(n), z(n)
        self.tau, self.tau_fb, self.acc_fb, self.tau_ff = z(n), z(n), z(n), z(n)
        self.offset, self.zero = z(n), z(n)
        self.ff_topic = z(n)
        self._ref_map, self._ff_map, self._off_map = NameMap(self.joint_names), NameMap(self.joint_names), \
            NameMap(self.joint_names)
        self._ref_ns = self._ff_ns = self._off_ns = -1
        self._ff_stamp_ns = -1  # stamp of the joint state the topic feedforward was computed from
        self._have_ref = False
        self._last_rx_ns = -1
        self._hold_set = False
        self._first_command = True
        self.ticks = 0
        self.deadline_misses = 0
        self.compute_us_max = 0.0
        self._reported_trip = ""
        # messages reused every tick
        self.cmd = Float64MultiArray()
        self._dim = MultiArrayDimension(label="", size=n, stride=n)
        self.cmd.layout.dim = [self._dim]
        self.state_msg = ControllerState(joint_names=list(self.joint_names))
        self.cmd_topic = command_topic(v, self.spec)
        self._create_io()
        self._configured = True
        self.diag.set(Diagnostics.WARN if self.ff.fallback else Diagnostics.OK,
                      "configured" + (f"; {self.ff.fallback_reason}" if self.ff.fallback else ""), publish=True,
                      model_id=self.ff.model_id, command_topic=self.cmd_topic)
        self.get_logger().info(
            f"configured for {self.spec.name} ({n} joints), feedforward {self.ff.model_id} "
            f"({v['feedforward_source']}), gains {v['gain_preset']}, commands on {self.cmd_topic}")
        return TransitionCallbackReturn.SUCCESS

    def _create_io(self) -> None:
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from idyn_ros.msg import AdaptationState, ControllerState, FeedforwardTorque, JointReference

        v = self.vals
        self.cmd_pub = self.create_publisher(Float64MultiArray, self.cmd_topic, COMMAND_OUT)
        self.state_pub = self.create_publisher(ControllerState, v["controller_state_topic"], MONITOR)
        self._pubs = [self.cmd_pub, self.state_pub]
        self._subs = [  # the 1 kHz inputs: on the process's hot loop when run as a node (see nodes.hot_loop)
            hot_loop.subscribe(self, JointState, v["joint_states_topic"], self._on_joint_state, HOT_IN, urgent=True),
            hot_loop.subscribe(self, JointReference, v["reference_topic"], self._on_reference, HOT_IN),
            hot_loop.subscribe(self, AdaptationState, v["adaptation_topic"], self._on_adaptation, HOT_IN),
        ]
        if not self.embedded:
            self._subs.append(hot_loop.subscribe(self, FeedforwardTorque, v["feedforward_topic"],
                                                 self._on_feedforward, HOT_IN))
        self._timers = [self.create_timer(v["diagnostics_period"], self._on_diagnostics_timer)]
        if HotLoop.enabled():  # the watchdog runs where the ticks run: no 1 kHz executor timer
            HotLoop.for_context(self.context).every(self.period, self._on_watchdog_timer)
        else:
            self._timers.append(self.create_timer(self.period, self._on_watchdog_timer))

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        self.watchdog.clear()
        self.filter.reset()
        self._hold_set = False  # next valid state becomes the hold reference (no jump)
        self._have_ref = False
        self._reported_trip = ""
        self._last_rx_ns = -1
        self._active = True
        self.diag.set(Diagnostics.WARN if self.ff.fallback else Diagnostics.OK, "active, waiting for joint state",
                      publish=True)
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._active = False
        self.diag.set(Diagnostics.OK, "inactive (not commanding)", publish=True)
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self._destroy_io()
        self._configured = False
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self._active = False
        self._destroy_io()
        return TransitionCallbackReturn.SUCCESS

    def _destroy_io(self) -> None:
        for t in self._timers:
            self.destroy_timer(t)
        for s in self._subs:
            hot_loop.unsubscribe(self, s)
        if HotLoop.enabled():
            HotLoop.for_context(self.context).cancel(self._on_watchdog_timer)
        for p in self._pubs:
            self.destroy_publisher(p)
        self._timers, self._subs, self._pubs = [], [], []
        if self.diag is not None:
            self.diag.destroy()
            self.diag = None

    # ------------------------------------------------------------------ parameters
    def _after_set(self, params: list[Any]) -> None:
        self.vals = prm.values(self, KIND)
        if self._configured:
            self._update_gains()
            self.limiter.limit[:] = self.robot.effort_limit * self.vals["effort_scale"]

    def _update_gains(self) -> None:
        v = self.vals
        self.preset = v["gain_preset"]
        kp = np.asarray(v[f"presets.{self.preset}.kp"], dtype=float)
        self.feedback_space = v["feedback_space"]
        if self.feedback_space == "torque":  # Kd = 2 zeta sqrt(Kp M_jj) at the neutral pose (decision)
            inertia = np.diag(self.rbd_fb.mass_matrix(np.clip(np.zeros(self.n), self.robot.lower, self.robot.upper)))
            kd = law.critical_damping(kp, v["damping_ratio"], "torque", inertia)
        else:
            kd = law.critical_damping(kp, v["damping_ratio"])
        # swap whole arrays (a callback in another thread never sees half-updated gains)
        self.kp, self.kd = kp, kd
        self.use_ff = v["use_feedforward"]
        self.use_offset = v["use_adaptation"]

    # ------------------------------------------------------------------ inputs
    def _on_reference(self, msg: Any) -> None:
        if not self._ref_map.resolve(msg.joint_names):
            self.watchdog.trip(f"reference lacks joint(s) {self._ref_map.missing}")
            return
        m = self._ref_map
        if not (m.take(msg.positions, self.q_d) and m.take(msg.velocities, self.dq_d)
                and m.take(msg.accelerations, self.ddq_d)):
            self.watchdog.trip("reference arrays do not match its joint names")
            return
        self._have_ref = True

    def _on_feedforward(self, msg: Any) -> None:
        if self._ff_map.resolve(msg.joint_names) and self._ff_map.take(msg.total, self.ff_topic):
            self._ff_ns = time.monotonic_ns()
            self._ff_stamp_ns = stamp_to_ns(msg.header.stamp)

    def _on_adaptation(self, msg: Any) -> None:
        if self._off_map.resolve(msg.joint_names) and self._off_map.take(msg.offset, self.offset):
            self._off_ns = time.monotonic_ns()

    # ------------------------------------------------------------------ the tick
    def _on_joint_state(self, msg: Any) -> None:
        now = time.monotonic_ns()
        self._last_rx_ns = now
        if not self._active:
            return
        stamp_ns = stamp_to_ns(msg.header.stamp)
        status = self.filter.update(msg.name, msg.position, msg.velocity, msg.effort, stamp_ns)
        if status == se.DUPLICATE:
            return
        wd = self.watchdog
        if status != se.OK:
            wd.trip(f"/joint_states rejected: {self.filter.reason}")
        if self.filter.samples == 0:  # nothing trusted yet: cannot even hold
            return
        q, dq = self.filter.q, self.filter.dq
        if not self._hold_set:
            self._start_hold(q)
        if self.vals["check_stamp_age"] and not wd.tripped:
            age = self.get_clock().now().nanoseconds - stamp_ns
            if age > wd.stale_ns:
                wd.trip(f"stale joint state: stamp {age * 1e-6:.2f} ms old")
        tau = self.tau
        waiting = not self.embedded and self.use_ff and self._ff_ns < 0
        if not wd.tripped and not waiting:
            self._law(q, dq, now, stamp_ns)
        if wd.tripped or waiting:  # waiting: topic feedforward not seen yet -> hold safely, no latch
            law.safe_torque(self.safe_mode, dq, self.safe_damping,
                            self.rbd.gravity(q) if self.vals["safe_gravity_compensation"] else None, tau)
            self.tau_fb[:] = 0.0
        elif self.vals["subtract_gravity"]:  # the robot adds g(q) itself (hardware); safe torque is sent as is
            tau -= self.rbd.gravity(q)
        if self._first_command:  # decision: activation releases the held arm with the full law torque
            self.limiter.reset(tau)
            self._first_command = False
        self.limiter.apply(tau)
        self._dim.label = f"{STAMP_LABEL}{stamp_ns}"
        self.cmd.data = as_array(tau)
        self.cmd_pub.publish(self.cmd)
        # after the command: bookkeeping and monitoring (not on the state -> command path)
        self.ticks += 1
        elapsed_us = (time.monotonic_ns() - now) * 1e-3
        if elapsed_us > 1e6 * self.period:
            self.deadline_misses += 1
        self.compute_us_max = max(self.compute_us_max, elapsed_us)
        if self.ticks % self.vals["state_publish_divider"] == 0:
            self._publish_state(msg.header.stamp)
        if wd.tripped and self._reported_trip != wd.reason:
            self._report_trip()

    def _start_hold(self, q: np.ndarray) -> None:
        if not self._have_ref:
            self.q_d[:] = q
            self.dq_d[:] = 0.0
            self.ddq_d[:] = 0.0
        self._first_command = True  # the rate limiter starts from the first command (no sag while ramping)
        if self.embedded and self.ff.runtime is not None:
            self.ff.warm_up(q)
        self._hold_set = True

    def _law(self, q: np.ndarray, dq: np.ndarray, now: int, stamp_ns: int) -> None:
        wd = self.watchdog
        if self.use_ff:
            if self.embedded:
                self.tau_ff[:] = self.ff.compute(q, dq, self.ddq_d)
            elif wd.check_ff_age(now, self._ff_ns) and wd.check_ff_lag(stamp_ns, self._ff_stamp_ns):
                self.tau_ff[:] = self.ff_topic
        else:
            self.tau_ff[:] = 0.0
        offset = self.offset if (self.use_offset and self._off_ns >= 0
                                 and now - self._off_ns < self.vals["adaptation_timeout"] * 1e9) else self.zero
        if not (wd.check_finite("reference q_d", self.q_d) and wd.check_finite("reference dq_d", self.dq_d)
                and wd.check_finite("reference ddq_d", self.ddq_d) and wd.check_finite("feedforward", self.tau_ff)
                and wd.check_finite("adaptation offset", offset)):
            return
        M = self.rbd_fb.mass_matrix(q) if self.feedback_space == "acceleration" else None
        law.impedance_torque(q, dq, self.q_d, self.dq_d, self.tau_ff, offset, M, self.kp, self.kd,
                             self.feedback_space, out_tau=self.tau, out_fb=self.tau_fb, out_acc=self.acc_fb)
        wd.check_finite("command", self.tau)

    def _publish_state(self, stamp: Any) -> None:
        from idyn_ros.msg import ControllerState

        s = self.state_msg
        s.header.stamp = stamp  # = the joint-state stamp this tick answered (doomed pairs by it)
        s.position_error = as_array(self.q_d - self.filter.q)
        s.velocity_error = as_array(self.dq_d - self.filter.dq)
        s.tau_feedforward = as_array(self.tau_ff)
        s.tau_offset = as_array(self.offset)
        s.tau_feedback = as_array(self.tau_fb)
        s.tau_command = as_array(self.tau)
        s.acceleration_command = as_array(self.ddq_d + self.acc_fb)
        wd = self.watchdog
        if not self._active:
            s.mode, s.mode_reason = ControllerState.MODE_INACTIVE, "inactive"
        elif wd.tripped or (not self.embedded and self.use_ff and self._ff_ns < 0):
            s.mode = ControllerState.MODE_SAFE_ZERO if self.safe_mode == "zero" else ControllerState.MODE_SAFE_DAMPING
            s.mode_reason = wd.reason or "waiting for the first feedforward on feedforward_topic"
        else:
            s.mode = ControllerState.MODE_ACTIVE
            s.mode_reason = ""
        s.gain_preset = self.preset
        s.deadline_misses = self.deadline_misses
        s.ticks = self.ticks
        self.state_pub.publish(s)

    def _report_trip(self) -> None:
        self._reported_trip = self.watchdog.reason
        self.get_logger().error(f"SAFE MODE ({self.safe_mode}): {self.watchdog.reason}")
        self.diag.set(Diagnostics.ERROR, f"safe mode ({self.safe_mode}): {self.watchdog.reason}", publish=True)

    # ------------------------------------------------------------------ timers
    def _on_watchdog_timer(self) -> None:
        if not self._active or self._last_rx_ns < 0 or self.watchdog.tripped:
            return
        if not self.watchdog.check_state_age(time.monotonic_ns(), self._last_rx_ns):
            # no state to answer: command the safe torque from the last trusted state now
            tau = law.safe_torque(self.safe_mode, self.filter.dq, self.safe_damping,
                                  self.rbd.gravity(self.filter.q) if self.vals["safe_gravity_compensation"]
                                  else None, self.tau)
            self.limiter.apply(tau)
            self._dim.label = f"{STAMP_LABEL}-1"
            self.cmd.data = as_array(tau)
            self.cmd_pub.publish(self.cmd)
            self._report_trip()

    def _on_diagnostics_timer(self) -> None:
        if self.diag is None:
            return
        if self._active and not self.watchdog.tripped and self.filter.samples > 0:
            level = Diagnostics.WARN if self.ff.fallback else Diagnostics.OK
            self.diag.set(level, "active" + (f"; {self.ff.fallback_reason}" if self.ff.fallback else ""))
        self.diag.values.update(ticks=str(self.ticks), deadline_misses=str(self.deadline_misses),
                                compute_us_max=f"{self.compute_us_max:.1f}", gain_preset=self.preset)
        self.diag.publish()


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([ControllerNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
