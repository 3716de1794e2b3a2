"""controller (lifecycle node): /joint_states -> effort command, around ``idyn_ros.control.controller.Controller``.

The node is glue: parameters in, messages in, ``Controller.update`` per joint state, command out. Everything a
tick decides (hold, release, watchdog, limits, safe torque, gravity subtraction) is in the core, which the
simulator loop and the benchmarks run too.

- event-driven: the command is computed inside the /joint_states callback (one hop plant -> controller ->
  plant); a one-period check (``Controller.check_input``) answers a silent input by stepping the command to the
  hold torque (gravity at the last pose); an error inside a tick latches safe mode and sends the hold torque in
  that tick;
- the command's ``layout.dim[0].label`` is ``stamp_ns=<joint-state stamp>`` (``-1`` for a watchdog command):
  the plant or a probe measures state -> command latency from it;
- clocks: input ages are measured on the node's clock under ``use_sim_time`` (the lockstep plant's /clock, so
  a plant waiting for us is not "stale"), else on the monotonic clock; under sim time a state stamped ahead of
  /clock was read before its /clock (stamps and /clock are one source: not a clock out of sync): it counts as
  received at its stamp up to ``SIM_CLOCK_LAG_NS`` (1 s) ahead, and one stamped further ahead as received
  ``stale_periods`` after now (one stamped an hour ahead must not blind the silence check for that hour); states
  with no /clock yet are late input after ``NO_CLOCK_STATES`` of them (a missing clock blinds the silence check);
- a payload set through ``~/set_payload`` is kept across cleanup + configure (the feedforward and observer nodes
  keep theirs); a ``model_path`` set on the unconfigured node is loaded once to check it: one that would not load
  is refused with the reason, so configure keeps the model that works instead of falling back to nominal RBD;
- deactivate and shutdown publish the hold torque once, so the last law torque never stays applied.
- a command topic nothing but our own nodes subscribes to for ``NO_LISTENER_S`` while commanding (the robot's effort
  controller not loaded or not configured, under another name, the vendor's own launch beside ``idyn bringup``) is an
  ERROR on /diagnostics and in the log, once per episode: the torques reach no robot. A forward controller that is
  configured but not active still subscribes: where ros2_control's interfaces are installed its controller manager
  is asked (``nodes.controller_manager``), and a listed controller that is not active is the same ERROR.
Lifecycle: configure loads robot + model and creates pubs/subs; activate holds the current pose; deactivate
stops commanding; cleanup destroys everything.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from typing import Any

import numpy as np
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn

from idyn_ros.control.controller import Controller
from idyn_ros.errors import IdynError
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes.common import (
    COMMAND_OUT,
    HOT_IN,
    MONITOR,
    STAMP_LABEL,
    Diagnostics,
    command_topic,
    describe_payload,
    field_view,
    payload_service,
    stamp_to_ns,
)
from idyn_ros.nodes.controller_manager import ControllerManagerWatch
from idyn_ros.nodes.hot_loop import HotLoop
from idyn_ros.nodes.ros_parameters import NodeParameters
from idyn_ros.parameters import ControllerParams

SATURATION_WARN_S = 0.05  # diagnostics WARN when a joint's command has sat at its limit this long
_IN_PROCESS: dict[int, Controller] = {}  # rclpy context id -> the configured controller core of this process


# a fault of the kind last logged, and recovered from, is logged again at most this often (wall s); /diagnostics
# still reports each one (its faults count): on a loaded real-time graph stale-input episodes came about once a second
REPEAT_LOG_S = 10.0
SIM_CLOCK_LAG_NS = 1_000_000_000  # a state stamped further ahead of /clock than this is not /clock lagging
# under use_sim_time, this many states in a row before any /clock are not the hot loop reading a state before the
# executor reads the first /clock (lockstep start-up) but a missing clock: no input age can be measured, so safe
NO_CLOCK_STATES = 50
NO_CLOCK = ("use_sim_time is true but no /clock has been received: input ages cannot be measured, so a silent "
            "driver would go unnoticed (start the clock source, or set use_sim_time false)")
# s (wall) the command topic may have no subscriber while the controller commands before that is an error: the robot
# side (ros2_control's spawners, the plant) starts beside us and subscribes within a second or two
NO_LISTENER_S = 2.0

def _fault_kind(reason: str) -> str:
    """What a watchdog reason is about, without its measured values ("stale joint state: none for 4.1 ms ...")."""
    return reason.split(":", 1)[0]


def controller_in_process(context: Any) -> Controller | None:
    """The controller core running in this process under ``context`` (a composed process), if any."""
    return _IN_PROCESS.get(id(context))


class ControllerNode(LifecycleNode):
    """See the module docstring. ``autostart`` (constructor) configures and activates at once."""

    def __init__(self, name: str = "controller", autostart: bool = True, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.core: Controller | None = None
        self.params = NodeParameters(self, ControllerParams, joints=lambda: self.core and self.core.n,
                                     configured=lambda: self.core is not None, check=self._check)
        self.params.on_change.append(self._on_params)
        self.add_on_set_parameters_callback(self._refuse_clock_change)
        self._subs: list[Any] = []
        self._pubs: list[Any] = []
        self.position_pub: Any = None  # position_command_topic's publisher, when set
        self._timers: list[Any] = []
        self.diag: Diagnostics | None = None
        self.deadline_misses = 0
        self.compute_us_max = 0.0
        self._reported = ""
        self._logged_kind, self._logged_at, self._unlogged = "", -REPEAT_LOG_S, 0  # the log's throttle (REPEAT_LOG_S)
        self._speed_noted = False  # the training-speed warning is logged once (diagnostics timer)
        self._slow_noted = False  # so is the input-rate warning
        self._foreign_noted = False  # and the note on another publisher's /joint_states
        self._second_source_noted = False  # and the one on a second publisher of the robot's joints
        self._rivals_said: list[str] = []  # other publishers on the command topic, as last said
        self._unheard_since: float | None = None  # monotonic s since which nothing subscribes to the command topic
        self._unheard_said = self._unheard_what = ""  # ... and the topic and reason last said (once per episode)
        self._cm_watch: ControllerManagerWatch | None = None  # asks ros2_control whether our controllers are active
        self._clipped_seen = 0  # core.reference_clipped at the last diagnostics report
        self._payload: Any = None  # the last payload accepted by ~/set_payload: re-applied at every configure
        # the hot loop's tick and the executor's stop / watchdog timer never interleave: a tick that read "active"
        # must not publish its law torque after the stop's hold torque
        self._tick_lock = threading.Lock()
        payload_service(self, self._set_payload)
        if autostart and self.trigger_configure() == TransitionCallbackReturn.SUCCESS:
            self.trigger_activate()

    # ------------------------------------------------------------------ lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        from std_msgs.msg import Float64MultiArray, MultiArrayDimension

        from idyn_ros.msg import ControllerState

        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", self.params.value.robot)
        try:
            p = self.params.value = self.params.read()
            self.core = core = Controller.for_robot(p)
            self._clipped_seen = 0
        except IdynError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            self.diag.set(Diagnostics.ERROR, f"configure failed: {exc}", publish=True)
            self.diag.destroy()
            self.core = None
            return TransitionCallbackReturn.FAILURE
        ff = core.ff
        if ff.fallback:  # loud, once
            self.get_logger().error(f"feedforward: {ff.fallback_reason}")
        self._restore_payload(core)
        use_sim_time = self.get_parameter("use_sim_time").value
        self._now = (lambda: self.get_clock().now().nanoseconds) if use_sim_time else time.monotonic_ns
        self._sim_time = bool(use_sim_time)
        self._states_without_clock = 0
        n = core.n
        self.cmd = Float64MultiArray()
        self._dim = MultiArrayDimension(label="", size=n, stride=n)
        self.cmd.layout.dim = [self._dim]
        self._cmd_data = field_view(self.cmd, "data", n)
        self.position_cmd = Float64MultiArray()  # the measured positions sent with each torque (position_command_topic)
        self._position_data = field_view(self.position_cmd, "data", n)
        self.state_msg = ControllerState(joint_names=list(core.joint_names), model_id=ff.model_id)
        self._state_fields = {name: field_view(self.state_msg, name, n) for name in (  # written each publish
            "position_error", "velocity_error", "tau_feedforward", "tau_offset", "tau_feedback", "tau_command",
            "acceleration_command")}
        self.cmd_topic = command_topic(p.command_topic, p.robot)
        self._create_io(p)
        _IN_PROCESS[id(self.context)] = core
        self.diag.set(Diagnostics.WARN if ff.fallback else Diagnostics.OK,
                      "configured" + (f"; {ff.fallback_reason}" if ff.fallback else ""), publish=True,
                      model_id=ff.model_id, command_topic=self.cmd_topic)
        self.get_logger().info(
            f"configured for {p.robot} ({n} joints), feedforward {ff.model_id} ({p.feedforward_source}), gains "
            f"{p.gain_preset}, commands on {self.cmd_topic}"
            + (f" with the measured positions on {p.position_command_topic}" if p.position_command_topic else "")
            + f", clock {'sim' if use_sim_time else 'monotonic'}"
            + (", subtracting g(q) (the robot adds it)" if p.subtract_gravity else "")
            + (f", feedback armature +{list(p.feedback_armature)} kg m^2" if p.feedback_armature else ""))
        return TransitionCallbackReturn.SUCCESS

    def _create_io(self, p: ControllerParams) -> None:
        from std_msgs.msg import Float64MultiArray

        from idyn_ros.msg import AdaptationState, ControllerState, FeedforwardTorque, JointReference

        self.cmd_pub = self.create_publisher(Float64MultiArray, self.cmd_topic, COMMAND_OUT)
        self.state_pub = self.create_publisher(ControllerState, p.controller_state_topic, MONITOR)
        self.position_pub = (self.create_publisher(Float64MultiArray, p.position_command_topic, COMMAND_OUT)
                             if p.position_command_topic else None)
        self._pubs = [self.cmd_pub, self.state_pub, *([self.position_pub] if self.position_pub else [])]
        self._cm_watch = ControllerManagerWatch(self, self._command_topics())
        if self._cm_watch.unusable:
            self.get_logger().warning(self._cm_watch.unusable)
        self._subs = [  # the 1 kHz inputs: on the process's hot loop when run as a node (see nodes.hot_loop)
            hot_loop.subscribe_joint_states(self, p.joint_states_topic, self._on_joint_state, urgent=True),
            hot_loop.subscribe(self, JointReference, p.reference_topic, self._on_reference, HOT_IN),
            hot_loop.subscribe(self, AdaptationState, p.adaptation_topic, self._on_adaptation, HOT_IN),
        ]
        if p.feedforward_source == "topic":
            self._subs.append(hot_loop.subscribe(self, FeedforwardTorque, p.feedforward_topic,
                                                 self._on_feedforward, HOT_IN))
        self._timers = [self.create_timer(p.diagnostics_period, self._on_diagnostics_timer)]
        if HotLoop.enabled():  # the input check runs where the ticks run: no 1 kHz executor timer
            HotLoop.for_context(self.context).every(self.core.period, self._on_input_check)
        else:
            self._timers.append(self.create_timer(self.core.period, self._on_input_check))

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        self.core.activate()
        self._reported = self._logged_kind = ""
        self.diag.set(Diagnostics.WARN if self.core.ff.fallback else Diagnostics.OK, "active, waiting for joint state",
                      publish=True)
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self.stop_commanding()
        self.diag.set(Diagnostics.OK, "inactive (not commanding)", publish=True)
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self._destroy_io()
        _IN_PROCESS.pop(id(self.context), None)
        self.core = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self.stop_commanding()
        self._destroy_io()
        return TransitionCallbackReturn.SUCCESS

    def shutdown_hook(self) -> None:
        """Called by ``nodes.common.run`` when the process is asked to stop: leave the safe torque applied."""
        self.stop_commanding()

    def stop_commanding(self) -> None:
        """Publish the hold torque from the last trusted state once, then stop commanding."""
        core = self.core
        if core is None or not core.active:
            return
        with self._tick_lock:  # a tick running in the hot loop finishes (and publishes) first, never after this
            tau = core.stop()
            published = tau is not None and bool(self._pubs)
            if published:
                self._publish_command(tau, -1)
        if published:
            from rclpy.duration import Duration

            self.cmd_pub.wait_for_all_acked(Duration(seconds=0.5))  # delivered before the process may end
            if self.position_pub is not None:
                self.position_pub.wait_for_all_acked(Duration(seconds=0.5))

    def _destroy_io(self) -> None:
        for t in self._timers:
            self.destroy_timer(t)
        for s in self._subs:
            hot_loop.unsubscribe(self, s)
        if HotLoop.enabled():
            HotLoop.for_context(self.context).cancel(self._on_input_check)
        for p in self._pubs:
            self.destroy_publisher(p)
        self._timers, self._subs, self._pubs = [], [], []
        self.position_pub = None
        if self._cm_watch is not None:
            self._cm_watch.destroy()
            self._cm_watch = None
        if self.diag is not None:
            self.diag.destroy()
            self.diag = None

    def _set_payload(self, payload: Any) -> str:
        """~/set_payload: the payload enters feedforward, feedback M(q) and safe hold at the next tick."""
        if self.core is None:
            raise IdynError("the controller is not configured; configure it first")
        with self._tick_lock:  # set from the executor thread: no tick between the feedforward's and feedback's parts
            self.core.set_payload(payload)
        self._payload = self.core.payload
        message = f"{describe_payload(payload)} included from the next tick"
        self.get_logger().info(message)
        return message

    def _restore_payload(self, core: Controller) -> None:
        """A new core (configure) carries the payload the old one had: the other nodes still include it."""
        if self._payload is None:
            return
        try:
            core.set_payload(self._payload)
        except IdynError as exc:  # not expected (it was accepted before); say so rather than drop it silently
            self.get_logger().error(f"payload from before cleanup NOT included: {exc}")
            self._payload = None
            return
        self.get_logger().info(f"{describe_payload(self._payload)} kept from before cleanup")

    # ------------------------------------------------------------------ parameters
    def _check(self, candidate: ControllerParams) -> str | None:
        if self.core is not None:
            return self.core.check_params(candidate)
        if candidate.model_path and candidate.model_path != self.params.value.model_path:
            return _model_problem(candidate)
        return None

    def _refuse_clock_change(self, params: list[Any]) -> Any:
        """use_sim_time picks the clock input ages are measured on at configure: refused while configured (it would
        leave the ages on the old clock and move only the stamp-age check to the new one)."""
        from rcl_interfaces.msg import SetParametersResult

        for p in params:
            if p.name == "use_sim_time" and self.core is not None and bool(p.value) != self._sim_time:
                return SetParametersResult(successful=False, reason=(
                    "use_sim_time takes effect at configure time: deactivate + cleanup, set it, configure"))
        return SetParametersResult(successful=True)

    def _on_params(self, value: ControllerParams) -> None:
        if self.core is not None:
            with self._tick_lock:  # set from the executor thread: no tick sees new gains with old limits or ramp
                self.core.set_params(value)

    # ------------------------------------------------------------------ inputs
    def _on_reference(self, msg: Any) -> None:
        self.core.set_reference(msg.joint_names, msg.positions, msg.velocities, msg.accelerations)

    def _on_feedforward(self, msg: Any) -> None:
        self.core.set_feedforward(msg.joint_names, msg.total, stamp_to_ns(msg.header.stamp), self._now())

    def _on_adaptation(self, msg: Any) -> None:
        self.core.set_offset(msg.joint_names, msg.offset, self._now())

    # ------------------------------------------------------------------ the tick
    def _on_joint_state(self, msg: Any, source: object = None) -> None:
        with self._tick_lock:
            try:
                self._tick(msg, source)
            except Exception as exc:  # whatever broke, the arm gets the hold torque this tick
                self._fail(exc, msg.header.stamp)

    def _fail(self, exc: BaseException, stamp: Any) -> None:
        """An error inside the tick: latch safe mode, send the hold torque now, say why once (with the traceback)."""
        core = self.core
        tau = core.fail(f"internal error in the tick: {type(exc).__name__}: {exc}") if core is not None else None
        if tau is not None:
            self._publish_command(tau, -1)
            with contextlib.suppress(Exception):  # monitoring only: the error is reported below either way
                self._publish_state(stamp)
        if core is not None and self._reported != core.watchdog.reason:
            self.get_logger().error("".join(traceback.format_exception(exc)).rstrip())
            self._report_trip()

    def _tick(self, msg: Any, source: object = None) -> None:
        start = time.monotonic_ns()
        core = self.core
        stamp_ns = stamp_to_ns(msg.header.stamp)
        now_ns = self._now()
        clock_ns = None
        if core.params.max_stamp_age > 0:
            # the ROS clock: under sim time the reading just taken, else system time, read without building an rclpy
            # Time (4-6 us on the state -> command path)
            clock_ns = now_ns if self._sim_time else time.time_ns()
        no_clock = self._sim_time and not now_ns
        if no_clock:  # no /clock yet: late input after NO_CLOCK_STATES states (recovers)
            self._states_without_clock += 1
            if self._states_without_clock > NO_CLOCK_STATES:
                core.watchdog.late(NO_CLOCK)
        if self._sim_time and stamp_ns > now_ns:  # the hot loop reads states before the executor reads /clock:
            # in sim time a state is never received before its stamp (else, once /clock catches up, its silence looks
            # long: a capped receive time tripped the stale check in lockstep), unless it is far ahead of any /clock
            # lag: then one stale period on (a stamp an hour ahead would blind the silence check for that hour)
            now_ns = stamp_ns if stamp_ns - now_ns <= SIM_CLOCK_LAG_NS else now_ns + core.watchdog.stale_ns
            if clock_ns is not None:
                clock_ns = max(clock_ns, stamp_ns)  # one source: ahead of /clock is not a clock out of sync
        tau = core.update(msg.name, msg.position, msg.velocity, msg.effort, stamp_ns, now_ns, clock_ns, source)
        if no_clock:  # received before any /clock: no silence is measured from here
            core.restart_silence_clock()
        if tau is None:  # nothing to send; a fault before any trusted state (e.g. another robot's joints) is said
            self._report_new_fault()
            return
        self._publish_command(tau, stamp_ns)
        # after the command: bookkeeping and monitoring (not on the state -> command path)
        elapsed_us = (time.monotonic_ns() - start) * 1e-3
        if elapsed_us > 1e6 * core.period and not self._sim_time:  # under sim time the plant waits: no deadline
            self.deadline_misses += 1
        self.compute_us_max = max(self.compute_us_max, elapsed_us)
        if core.ticks % core.params.state_publish_divider == 0:
            self._publish_state(msg.header.stamp)
        self._report_new_fault()

    def _publish_command(self, tau: Any, stamp_ns: int) -> None:
        if self.position_pub is not None and self.core.filter.samples:  # first: the arm's stack reads both in one
            self._position_data[:] = self.core.filter.q  # cycle; never a position before one was measured
            self.position_pub.publish(self.position_cmd)
        self._dim.label = f"{STAMP_LABEL}{stamp_ns}"
        self._cmd_data[:] = tau
        self.cmd_pub.publish(self.cmd)

    def _publish_state(self, stamp: Any) -> None:
        core, s = self.core, self.state_msg
        s.header.stamp = stamp  # = the joint-state stamp this tick answered (doomed pairs by it)
        f = self._state_fields
        np.subtract(core.q_d, core.filter.q, out=f["position_error"])
        np.subtract(core.dq_d, core.filter.dq, out=f["velocity_error"])
        f["tau_feedforward"][:] = core.tau_ff
        f["tau_offset"][:] = core.offset_applied
        f["tau_feedback"][:] = core.tau_fb
        f["tau_command"][:] = core.tau
        f["acceleration_command"][:] = core.acceleration_command
        s.mode = core.mode
        s.mode_reason = core.reason
        s.gain_preset = core.params.gain_preset
        s.deadline_misses = self.deadline_misses
        s.ticks = core.ticks
        self.state_pub.publish(s)

    def _report_new_fault(self) -> None:
        """Report the watchdog's fault once per kind (a late-input reason carries its measured age, which changes)."""
        wd = self.core.watchdog
        if wd.tripped and _fault_kind(self._reported) != _fault_kind(wd.reason):
            self._report_trip()

    def _report_trip(self) -> None:
        core = self.core
        reason = self._reported = core.watchdog.reason
        self.diag.set(Diagnostics.ERROR, f"safe mode ({core.safe_mode}): {reason}", publish=True)
        kind, now = _fault_kind(reason), time.monotonic()
        if kind == self._logged_kind and now - self._logged_at < REPEAT_LOG_S:
            self._unlogged += 1  # the same kind again soon after: counted, said with the next one logged
            return
        more = (f" ({self._unlogged} more such fault(s) in the last {now - self._logged_at:.0f} s not logged; "
                "/diagnostics counts them)") if self._unlogged and kind == self._logged_kind else ""
        self._logged_kind, self._logged_at, self._unlogged = kind, now, 0
        self.get_logger().error(f"SAFE MODE ({core.safe_mode}): {reason}{more}")

    def _on_input_check(self) -> None:
        with self._tick_lock:
            tau = self.core.check_input(self._now()) if self.core is not None else None
            if tau is not None:
                self._publish_command(tau, -1)
        if tau is not None:
            self._report_new_fault()

    def _check_listener(self, core: Controller, diag: Diagnostics) -> None:
        """ERROR while the torques (or the positions that must come with them) go to a topic nothing but our own nodes
        subscribes to (the robot's controller not loaded, under another name, or the vendor's own launch beside
        ``idyn bringup``), or to a controller its manager lists as not active: said once per episode."""
        commanding = core.active and core.filter.samples > 0
        if commanding and self._cm_watch is not None:
            self._cm_watch.poll()
        topic, what = self._command_problem() if commanding else ("", "")
        if not topic:
            if self._unheard_said:
                self.get_logger().warning(f"the commands on {self._unheard_said} reach a robot's controller again")
            self._unheard_since, self._unheard_said, self._unheard_what = None, "", ""
            return
        now = time.monotonic()
        if self._unheard_since is None:
            self._unheard_since = now
        if now - self._unheard_since < NO_LISTENER_S:
            return
        diag.set(Diagnostics.ERROR, what)
        if self._unheard_what != what:  # a new topic or a new reason (not loaded -> inactive) is said again
            self.get_logger().error(what)
            self._unheard_said, self._unheard_what = topic, what

    def _command_topics(self) -> list[str]:
        """Our command topics: torques, then positions when sent."""
        return [self.cmd_topic, *([self.position_pub.topic_name] if self.position_pub is not None else [])]

    def _command_problem(self) -> tuple[str, str]:
        """(topic, why its commands reach no robot) for the first such command topic, else ("", "")."""
        for topic in self._command_topics():
            if self._executors(topic):
                continue
            if topic == self.cmd_topic:
                return topic, (f"nothing subscribes to {topic} that could execute it (only our own nodes, if any): the "
                               "torques reach no robot (on hardware: is the robot's effort controller loaded and "
                               "active? `ros2 control list_controllers`; beside the vendor's own launch, load a "
                               "forward effort controller there or set command_topic to its topic)")
            return topic, (f"nothing subscribes to {topic} (position_command_topic) that could execute it: the arm's "
                           "torque mode drops torques that come without a position (on hardware: is the position "
                           "controller loaded and active? `ros2 control list_controllers`)")
        stopped = self._cm_watch.not_active() if self._cm_watch is not None else []
        return (stopped[0].topic, stopped[0].message()) if stopped else ("", "")

    def _executors(self, topic: str) -> list[str]:
        """The nodes subscribed to ``topic`` that may execute it: not our own (the wrench observer reads the command in
        the simulators, through its process's hidden hot-loop node; a recorder records it; neither moves an arm)."""
        from idyn_ros.nodes.graph import OPTIONAL_NODES, OUR_NODES

        ours = {*OUR_NODES, *OPTIONAL_NODES, "recorder", "composed"}
        return sorted(f"{i.node_namespace.rstrip('/')}/{i.node_name}"
                      for i in self.get_subscriptions_info_by_topic(topic)
                      if i.node_name not in ours and not i.node_name.startswith(hot_loop.NODE_PREFIX))

    def _other_commanders(self) -> list[str]:
        """The other nodes publishing on our command topic (a graph query, at the diagnostics period)."""
        me = (self.get_name(), self.get_namespace())
        return sorted(f"{i.node_namespace.rstrip('/')}/{i.node_name}"
                      for i in self.get_publishers_info_by_topic(self.cmd_topic)
                      if (i.node_name, i.node_namespace) != me)

    def _on_diagnostics_timer(self) -> None:
        core, diag = self.core, self.diag
        if diag is None or core is None:
            return
        wd = core.watchdog
        if core.active and not wd.tripped and core.filter.samples > 0:
            if self._reported:  # recovered from late input (said when the fault was)
                if not self._unlogged:
                    self.get_logger().warning(f"recovered after: {self._reported}")
                self._reported = ""
            clipped, self._clipped_seen = core.reference_clipped - self._clipped_seen, core.reference_clipped
            if core.saturation_s > SATURATION_WARN_S:
                diag.set(Diagnostics.WARN, f"commands at the effort limit for {core.saturation_s:.2f} s (limit "
                         f"{core.params.saturation_timeout:g} s, then safe mode)")
            elif clipped > 0:
                diag.set(Diagnostics.WARN, f"{clipped} reference(s) beyond a joint limit since the last report: held "
                         "at the limit")
            else:
                level = Diagnostics.WARN if core.ff.fallback else Diagnostics.OK
                diag.set(level, "active" + (f"; {core.ff.fallback_reason}" if core.ff.fallback else ""))
        elif core.active and not wd.tripped and core.filter.foreign:  # nothing of ours yet, only someone else's
            diag.set(Diagnostics.WARN, f"waiting for joint state: {core.filter.foreign_note()}")
        speed_note = core.ff.training_speed_note()
        if speed_note and not self._speed_noted:  # once per run; the count stays on /diagnostics
            self.get_logger().warning(speed_note)
            self._speed_noted = True
        if core.filter.foreign and not self._foreign_noted:  # another publisher on the topic: said once, counted
            self.get_logger().warning(core.filter.foreign_note())
            self._foreign_noted = True
        if core.filter.second_source and not self._second_source_noted:  # a second publisher of our joints: the same
            self.get_logger().warning(core.filter.second_source_note())
            self._second_source_noted = True
        slow = core.filter.rate_problem()  # the likely cause of stale-input safe mode on a UR at 1 kHz settings
        if slow and not self._slow_noted:
            self.get_logger().warning(slow)
            self._slow_noted = True
        self._check_listener(core, diag)
        rivals = self._other_commanders()
        if rivals:  # nothing we send can make that safe: said loudly, each time the set of publishers changes
            what = (f"other node(s) {rivals} also publish on {self.cmd_topic}: the arm gets their torques and ours in "
                    "turn; stop them (a second launch of this controller, a teleop or test publisher)")
            diag.set(Diagnostics.ERROR, what)
            if rivals != self._rivals_said:
                self.get_logger().error(what)
        self._rivals_said = rivals
        misses = "n/a (sim time: the simulator waits for each command)" if self._sim_time else str(self.deadline_misses)
        diag.values.update(ticks=str(core.ticks), deadline_misses=misses,
                           ticks_beyond_training_speed=str(core.ff.ticks_beyond_training_speed),
                           compute_us_max=f"{self.compute_us_max:.1f}", gain_preset=core.params.gain_preset,
                           faults=str(wd.trips), recoveries=str(wd.recoveries), input_gaps=str(core.filter.gaps),
                           longest_input_silence_ms=f"{core.longest_silence_ns * 1e-6:.1f}",
                           references_beyond_limits=str(core.reference_clipped),
                           input_foreign=str(core.filter.foreign),
                           input_second_source=str(core.filter.second_source),
                           controller_manager=self._cm_watch.summary() if self._cm_watch is not None else "")
        diag.publish()


def _model_problem(params: ControllerParams) -> str | None:
    """None, or why the artifact at ``params.model_path`` would not load for this robot and rate (the runtime's
    ModelArtifactError text), as configure would load it."""
    from pathlib import Path

    from idyn_ros.dynamics import RobotModel
    from idyn_ros.runtime import ModelRuntime

    path = Path(params.model_path)
    try:
        if not path.is_file():
            return f"model_path {path}: file not found"
        ModelRuntime(path, robot=RobotModel.from_robot(params.robot, prefix=params.prefix), rate_hz=params.rate_hz)
    except IdynError as exc:
        return f"model_path {path} rejected: {exc}"
    except Exception as exc:  # a file onnxruntime cannot parse (truncated, still being copied)
        return f"model_path {path} could not be loaded: {type(exc).__name__}: {exc}"
    return None


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([ControllerNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
