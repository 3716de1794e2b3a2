"""ROS 2 node emulating ros2_control around the embedded MuJoCo plant (idyn_ros.sim.Plant).

Why: there is no ros2_control here, so this node exposes exactly what a robot with
joint_state_broadcaster + an effort forward controller exposes, and the controllers cannot tell
the difference:

    publishes  /joint_states                     sensor_msgs/JointState (position, velocity, effort =
                                                  measured joint torque, see idyn_ros/sim/plant.py)
    subscribes /<effort_controller>/commands     std_msgs/Float64MultiArray, joint order = robot spec
    publishes  /clock                            rosgraph_msgs/Clock (lockstep mode only: sim time)
               ~/ground_truth                    idyn_ros/PlantGroundTruth (applied wrench, J^T F, payload)
               <ft_sensor_topic>                 geometry_msgs/WrenchStamped, flange F/T sensor (when set)
               /diagnostics                      command rejects/clamps, watchdog, rate, latency; lockstep:
                                                  answer_wait (state published -> its command in, wall)
                                                  and tick (this node's command callback, wall)
    services   ~/apply_wrench ~/set_payload ~/reset_joints   (idyn_ros/srv)

Two clocks (parameter ``clock_mode``):
- ``lockstep``: publish the state, wait for the command that answers it, step one control period,
  publish the next state. Deterministic, as fast as the loop allows; stamps are sim time and /clock
  is published. If no command comes within ``lockstep_wait`` s (wall), the drive watchdog applies
  zero torque for that period and the plant moves on.
- ``realtime``: a wall-clock timer at ``rate_hz`` steps the plant with the latest command;
  stamps are wall time, no /clock. The watchdog zeroes the torque when the newest accepted command
  is older than ``command_timeout``.
Until the first valid command the brakes are engaged, like a real arm before its controller is
activated: the arm holds still (the drive applies nothing), but its clock keeps running. In lockstep
the plant waits 0.1 s (wall) for an answer, then lets one control period pass with
the brakes holding (zero drive torque, position held, velocity 0) and republishes the state with that
period's fresh, strictly later stamp. Why not repeat the old state: a controller drops a state whose
stamp it has already seen as a duplicate, so if its answer to the first state was lost (sent before
DDS discovery matched it to the plant) or it subscribed late, an identical republish would deadlock
the lockstep start. The same holds after ``~/reset_joints`` (its state also gets a fresh stamp) and
once running (a lockstep timeout steps one period at zero torque, see above): every state published
in lockstep has a stamp strictly later than the previous one. Brake periods do not count as
``ticks``; they are counted in ``brake_ticks`` (/diagnostics).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Any

import numpy as np
import rclpy
from rclpy.node import Node

from idyn_ros.nodes.common import (
    COMMAND_OUT,
    MONITOR,
    STAMP_LABEL,
    field_view,
    ns_to_stamp,
    payload_service,
    refuse_clock_change,
)

MAX_CATCH_UP = 10  # realtime: control periods one late timer callback may catch up
GT_IDLE_EVERY = 100  # ticks between ground-truth messages while nothing is applied
BRAKED_REPUBLISH_S = 0.1  # lockstep, before the first command: wall time between braked states
# ~/apply_wrench refuses more: beyond any contact these arms survive (joint torques <= 320 Nm), and 1e300 N only
# made MuJoCo reset its state as unstable while the ground truth reported 1e299 Nm
MAX_WRENCH_FORCE = 1e4  # N
MAX_WRENCH_MOMENT = 1e3  # Nm


class PlantNode(Node):
    """The plant as a ROS 2 node. Parameters: ``idyn_ros.parameters.PlantParams``; ``overrides`` (ROS names)
    set them from Python, e.g. ``PlantNode(robot="ur5", profile="ideal")``."""

    def __init__(self, *, context: Any = None, node_name: str = "plant", **overrides: Any) -> None:
        from idyn_ros.errors import ParameterError
        from idyn_ros.nodes.common import load_robot
        from idyn_ros.nodes.ros_parameters import NodeParameters, to_ros_parameter
        from idyn_ros.parameters import PlantParams

        table = {p.name for p in PlantParams.table()}
        unknown = sorted(set(overrides) - table)
        if unknown:
            raise ParameterError(f"unknown plant parameters {unknown}; known: {sorted(table)}")
        super().__init__(node_name, context=context,
                         parameter_overrides=[to_ros_parameter(k, v) for k, v in overrides.items()])
        joints: list[int] = []
        self.params = NodeParameters(self, PlantParams, joints=lambda: joints[0] if joints else None)
        _spec, robot = load_robot(self.params.value.robot, self.params.value.prefix)
        joints.append(robot.n)
        # the plant is the clock: it never follows /clock (stamps from a /clock nobody publishes: 0, going backwards)
        refuse_clock_change(self, "the plant is the clock (lockstep: it publishes /clock; realtime: wall time); "
                                  "use_sim_time is not for the plant")
        self._configure(self.params.read())

    # --- setup ---------------------------------------------------------------------------------------

    def _configure(self, p: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from idyn_ros.msg import PlantGroundTruth
        from idyn_ros.sim import CommandGate, Plant
        from idyn_ros.srv import ApplyWrench, ResetJoints

        self.plant = Plant(p.robot, profile=p.profile, physics_rate_hz=p.physics_rate, control_rate_hz=p.rate_hz,
                           seed=p.seed, initial_positions=list(p.initial_positions) or None, prefix=p.prefix)
        plant = self.plant
        self.gate = CommandGate(plant.effort_limit, p.on_bad_command, p.command_timeout)
        self.lockstep = p.clock_mode == "lockstep"
        self.timeout = p.lockstep_wait if self.lockstep else p.command_timeout
        self.wait_for = p.lockstep_subscribers
        self.gt_every = p.ground_truth_decimation
        controller = p.controller or plant.description.effort_controller
        self.command_topic = f"/{controller}/commands"

        # Preallocated messages: the hot path writes into numpy views of their own float64[] arrays (field_view)
        self._js = JointState()
        self._js.name = list(plant.joint_names)
        self._js_q, self._js_dq, self._js_tau = (field_view(self._js, name, plant.n)
                                                 for name in ("position", "velocity", "effort"))
        self._gt = PlantGroundTruth()
        self._gt.joint_names = list(plant.joint_names)
        self._gt_external = field_view(self._gt, "external_torque", len(plant.joint_names))  # written each publish
        self._clock_msg = Clock()
        self.pub_js = self.create_publisher(JointState, "/joint_states", COMMAND_OUT)
        self.pub_gt = self.create_publisher(PlantGroundTruth, "~/ground_truth", MONITOR)
        self.pub_clock = self.create_publisher(Clock, "/clock", COMMAND_OUT) if self.lockstep else None
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", MONITOR)
        # RELIABLE depth 10 like ros2_control's forward controller (SystemDefaultsQoS): in lockstep
        # every command is one tick, none may be dropped.
        self.sub_cmd = self.create_subscription(Float64MultiArray, self.command_topic, self._on_command, MONITOR)
        self._ft = None
        if p.ft_sensor_topic:
            self._configure_ft_sensor(p)
        self.create_service(ApplyWrench, "~/apply_wrench", self._srv_apply_wrench)
        self.set_payload_service = payload_service(self, self._set_payload)  # the nodes' one: parsing, plausibility
        self.create_service(ResetJoints, "~/reset_joints", self._srv_reset_joints)

        self.ticks = 0
        self.overruns = 0
        self._rt_origin_wall = time.monotonic()
        self._rt_ticks = 0
        self.lockstep_timeouts = 0
        self.brake_ticks = 0
        self._zero = np.zeros(plant.n)
        self._last_publish_wall = time.monotonic()
        self._start_wall = time.monotonic()
        self._start_sim = plant.time
        self._periods = np.zeros(4096)  # realtime: wall period of the last ticks (s), ring buffer
        self._latency = np.zeros(4096)  # command latency from the stamp probe (s), ring buffer
        self._n_periods = 0
        self._n_latency = 0
        # lockstep: wall time from publishing a state to its answer arriving in _on_command (s), ring buffer:
        # the loop's round trip outside this node (DDS both ways, executors, the controller)
        self._answer_wait = np.zeros(4096)
        self._n_answer_wait = 0
        self._tick_wall = np.zeros(4096)  # lockstep: wall time of this node's own command callback (s)
        self._n_tick_wall = 0
        self._last_tick_wall = 0.0
        if self.lockstep:
            self.create_timer(min(self.timeout, BRAKED_REPUBLISH_S / 2), self._lockstep_watchdog)
        else:
            self.create_timer(plant.control_dt, self._realtime_tick)
        self.create_timer(p.diagnostics_period, self.publish_diagnostics)
        self._publish()
        self.get_logger().info(
            f"plant {plant.robot_name} profile={plant.profile.kind} {p.clock_mode} "
            f"{1.0 / plant.control_dt:.0f} Hz control / {1.0 / plant.physics_dt:.0f} Hz physics; "
            f"commands on {self.command_topic}"
        )

    # --- hot path ------------------------------------------------------------------------------------

    def _on_command(self, msg: Any) -> None:
        start = time.monotonic()
        if self.lockstep and not self.gate.started and self.pub_js.get_subscription_count() < self.wait_for:
            return  # braked until every expected listener matched (lockstep_subscribers); the republish goes on
        accepted = self.gate.submit(msg.data, self.plant.time)
        dim = msg.layout.dim
        if dim and dim[0].label.startswith(STAMP_LABEL):
            self._record_latency(dim[0].label)
        if self.lockstep and (accepted or self.gate.started):
            self._answer_wait[self._n_answer_wait % self._answer_wait.size] = start - self._last_publish_wall
            self._n_answer_wait += 1
            self._advance(self.gate.command(self.plant.time))
            self._tick_wall[self._n_tick_wall % self._tick_wall.size] = self._last_publish_wall - start
            self._n_tick_wall += 1

    def _advance(self, tau: np.ndarray) -> None:
        self.plant.advance(tau)
        self.ticks += 1
        self._publish()

    def _publish(self) -> None:
        """Publish /clock (lockstep) and /joint_states from the plant's sensors, without allocating
        per tick (the readings go straight into the preallocated message, see _configure)."""
        plant = self.plant
        if self.lockstep:
            ns = round(plant.time * 1e9)
            ns_to_stamp(ns, self._clock_msg.clock)
            self.pub_clock.publish(self._clock_msg)
            ns_to_stamp(ns, self._js.header.stamp)
        else:
            self._js.header.stamp = self.get_clock().now().to_msg()
        plant.measure(self._js_q, self._js_dq, self._js_tau)
        self.pub_js.publish(self._js)
        if self._ft is not None:
            self._publish_ft()
        # ground truth: every gt_every ticks while a wrench acts, else every GT_IDLE_EVERY ticks
        # (service calls publish it at once), so an idle plant does not pay a third publish per tick.
        every = self.gt_every if plant.wrench_link else GT_IDLE_EVERY
        if self.ticks % every == 0:
            self._publish_ground_truth()
        self._last_publish_wall = time.monotonic()

    def _configure_ft_sensor(self, p: Any) -> None:
        """The flange F/T sensor (idyn_ros.sim.ft_sensor) on ``ft_sensor_topic``, one reading per published state."""
        from geometry_msgs.msg import WrenchStamped

        from idyn_ros.sim.ft_sensor import FlangeForceTorqueSensor

        self._ft = FlangeForceTorqueSensor(self.plant, seed=p.seed)
        self._ft_msg = WrenchStamped()
        self._ft_msg.header.frame_id = self.plant.flange_link
        self.pub_ft = self.create_publisher(WrenchStamped, p.ft_sensor_topic, MONITOR)

    def _publish_ft(self) -> None:
        m = self._ft_msg
        m.header.stamp = self._js.header.stamp
        w = self._ft.read()
        f, t = m.wrench.force, m.wrench.torque
        f.x, f.y, f.z, t.x, t.y, t.z = (float(v) for v in w)
        self.pub_ft.publish(m)

    def _publish_ground_truth(self) -> None:
        gt = self._gt
        gt.header.stamp = self._js.header.stamp
        self._gt_external[:] = self.plant.external_torque
        link, w = self.plant.wrench
        gt.link = link
        f, m = gt.wrench.force, gt.wrench.torque
        f.x, f.y, f.z, m.x, m.y, m.z = (float(v) for v in w)
        gt.payload_mass = self.plant.payload_mass
        self.pub_gt.publish(gt)

    def _lockstep_watchdog(self) -> None:
        # braked (no command yet): republish soon, an answer lost before discovery completed must not stall the start
        wait = self.timeout if self.gate.started else min(self.timeout, BRAKED_REPUBLISH_S)
        if time.monotonic() - self._last_publish_wall <= wait:
            return
        if self.gate.started:  # the controller stopped answering: one period at zero torque
            self.lockstep_timeouts += 1
            self.gate.expire()
            self._advance(self.gate.command(self.plant.time))
        else:  # brakes on: time passes, the arm is held; a fresh stamp for late/lost answers
            self._brake_tick()

    def _brake_tick(self) -> None:
        """Lockstep, brakes engaged: one control period passes with the arm held, then publish.

        The plant has no brake of its own, so: step one period at zero torque (sim time and a timed
        wrench advance as usual), then put the arm back where the brakes hold it (reset: q held, dq 0).
        """
        held = self.plant.state().q_true
        self.plant.advance(self._zero)
        self.plant.reset(held)
        self.brake_ticks += 1
        self._publish()

    def _realtime_tick(self) -> None:
        """Wall-clock tick: step as many control periods as wall time has advanced (sim time tracks
        wall time; a late callback catches up, at most MAX_CATCH_UP periods, each counted)."""
        now = time.monotonic()
        if self._last_tick_wall:
            self._periods[self._n_periods % self._periods.size] = now - self._last_tick_wall
            self._n_periods += 1
        self._last_tick_wall = now
        if self.gate.started:
            due = int((now - self._rt_origin_wall) / self.plant.control_dt) - self._rt_ticks
            if due > MAX_CATCH_UP:
                self.overruns += due - MAX_CATCH_UP
                self._rt_ticks += due - MAX_CATCH_UP  # sim time falls behind by the dropped periods
                due = MAX_CATCH_UP
            for _ in range(max(due, 0)):
                self.plant.advance(self.gate.command(self.plant.time))
                self.ticks += 1
                self._rt_ticks += 1
        else:
            self._rt_origin_wall = now
            self._rt_ticks = 0
        self._publish()

    def _record_latency(self, label: str) -> None:
        try:
            stamp_ns = int(label[len(STAMP_LABEL):])
        except ValueError:
            return
        if stamp_ns <= 0:  # "-1": the controller's watchdog answered no state (a safe command), nothing to time
            return
        now_ns = round(self.plant.time * 1e9) if self.lockstep else self.get_clock().now().nanoseconds
        self._latency[self._n_latency % self._latency.size] = (now_ns - stamp_ns) * 1e-9
        self._n_latency += 1

    # --- services ------------------------------------------------------------------------------------

    def _srv_apply_wrench(self, request: Any, response: Any) -> Any:
        from idyn_ros.errors import IdynError

        w = request.wrench
        wrench = np.array([w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z])
        force, moment = math.hypot(*wrench[:3]), math.hypot(*wrench[3:])  # a NaN/inf: apply_wrench names it
        if math.isfinite(force + moment) and (force > MAX_WRENCH_FORCE or moment > MAX_WRENCH_MOMENT):
            response.success = False
            response.message = (f"wrench of {force:g} N, {moment:g} Nm is beyond {MAX_WRENCH_FORCE:g} N, "
                                 f"{MAX_WRENCH_MOMENT:g} Nm: no contact these arms survive; nothing applied")
            return response
        try:
            self.plant.apply_wrench(request.link, wrench, float(request.duration))
        except IdynError as exc:
            response.success, response.message = False, str(exc)
            return response
        link = request.link or self.plant.flange_link
        response.success = True
        response.message = "cleared" if request.duration <= 0 else f"wrench on {link} for {request.duration} s"
        self._publish_ground_truth()
        return response

    def _set_payload(self, payload: Any) -> str:
        """~/set_payload: the payload goes on the simulated flange (the ground truth says so at once)."""
        self.plant.set_payload(payload)
        self._publish_ground_truth()
        total = self.plant.payload_mass  # the profile's own payload included
        if payload is None or payload.mass == 0.0:
            return "payload removed" + (f" (the profile's {total:.3f} kg stays at {self.plant.flange_link})"
                                        if total else "")
        return f"payload {total:.3f} kg at {self.plant.flange_link}"

    def _srv_reset_joints(self, request: Any, response: Any) -> Any:
        from idyn_ros.errors import IdynError

        names = list(request.joint_names)
        if len(names) != len(request.positions):
            response.success = False
            response.message = f"{len(names)} joint names but {len(request.positions)} positions"
            return response
        unknown = [j for j in names if j not in self.plant.joint_names]
        twice = sorted({j for j in names if names.count(j) > 1})
        if twice:
            response.success, response.message = False, f"joints named more than once: {twice}"
            return response
        if unknown:
            response.success = False
            response.message = f"unknown joints {unknown}; joints: {list(self.plant.joint_names)}"
            return response
        q = self.plant.state().q_true  # joints not named keep their position (decision)
        for name, value in zip(names, request.positions, strict=True):
            q[self.plant.joint_names.index(name)] = value
        try:
            self.plant.reset(q)
        except IdynError as exc:
            response.success, response.message = False, str(exc)
            return response
        self.gate.reset()  # brakes on until the next valid command
        if self.lockstep:  # a fresh stamp: the controller must not drop the new position as a duplicate
            self._brake_tick()
        else:
            self._publish()
        response.success, response.message = True, "reset; brakes engaged until the next command"
        return response

    # --- diagnostics ---------------------------------------------------------------------------------

    def diagnostics(self) -> dict[str, Any]:
        """Counters and rates as plain numbers (also published on /diagnostics)."""
        c = self.gate.counters
        wall = max(time.monotonic() - self._start_wall, 1e-9)
        out: dict[str, Any] = {
            "ticks": self.ticks,
            "sim_time": self.plant.time,
            "real_time_factor": (self.plant.time - self._start_sim) / wall,
            "commands_received": c.received,
            "commands_accepted": c.accepted,
            "commands_clamped": c.clamped,
            "rejected_wrong_length": c.rejected_length,
            "rejected_nan_inf": c.rejected_nonfinite,
            "rejected_over_limit": c.rejected_limit,
            "watchdog_trips": c.watchdog_trips,
            "lockstep_timeouts": self.lockstep_timeouts,
            "brake_ticks": self.brake_ticks,
            "realtime_overruns": self.overruns,
            "watchdog_active": self.gate.watchdog_active,
            "last_error": self.gate.last_error,
        }
        for name, buf, count in (("period", self._periods, self._n_periods),
                                 ("latency", self._latency, self._n_latency),
                                 ("answer_wait", self._answer_wait, self._n_answer_wait),
                                 ("tick", self._tick_wall, self._n_tick_wall)):
            if count:
                data = buf[: min(count, buf.size)]
                out[f"{name}_p50_us"] = float(np.percentile(data, 50) * 1e6)
                out[f"{name}_p99_us"] = float(np.percentile(data, 99) * 1e6)
                if name == "period":  # jitter = |period - control period|
                    err = np.abs(data - self.plant.control_dt)
                    out["period_error_p50_us"] = float(np.percentile(err, 50) * 1e6)
                    out["period_error_p99_us"] = float(np.percentile(err, 99) * 1e6)
        return out

    def publish_diagnostics(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

        d = self.diagnostics()
        if d["watchdog_active"]:
            level, message = DiagnosticStatus.ERROR, "no valid command: watchdog applies zero torque"
        elif not self.gate.started:
            level, message = DiagnosticStatus.OK, "brakes engaged: waiting for the first command"
        elif d["commands_received"] > d["commands_accepted"] or d["commands_clamped"]:
            level, message = DiagnosticStatus.WARN, f"bad commands seen: {d['last_error']}"
        else:
            level, message = DiagnosticStatus.OK, "running"
        status = DiagnosticStatus(level=level, name=f"idyn plant: {self.plant.robot_name}", message=message,
                                  hardware_id=f"mujoco:{self.plant.robot_name}")
        status.values = [KeyValue(key=k, value=str(v)) for k, v in d.items()]
        msg = DiagnosticArray()
        msg.header.stamp = self._js.header.stamp
        msg.status = [status]
        self.pub_diag.publish(msg)


class PlantRunner:
    """Run a PlantNode in a background thread with its own rclpy context (tests, demos, benchmarks).

    Use as ``with PlantRunner(robot="ur5", profile="ideal") as runner: ...``; ``runner.node`` is the
    node (read it only from the runner's callbacks or after ``stop()`` for exact numbers).
    """

    def __init__(self, executor: str = "single", **params: Any) -> None:
        self.params = params
        self.executor_kind = executor
        self.node: PlantNode | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> PlantRunner:
        from rclpy.context import Context

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = PlantNode(context=self.context, **self.params)
        if self.executor_kind == "events":
            from rclpy.experimental import EventsExecutor

            self.executor = EventsExecutor(context=self.context)
        else:
            from rclpy.executors import SingleThreadedExecutor

            self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._running = True
        self._thread = threading.Thread(target=self._spin, name="plant", daemon=True)
        self._thread.start()
        return self

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException, ShutdownException

        # EventsExecutor.spin() in a non-main thread stalls after one timer event with the Kilted
        # wheels (seen here), so "events" spins with spin_once; "single" (default) uses spin().
        with contextlib.suppress(ExternalShutdownException, ShutdownException):
            if self.executor_kind != "events":
                self.executor.spin()
                return
            while self._running and self.context.ok():
                self.executor.spin_once(timeout_sec=0.05)

    def stop(self) -> None:
        if self._thread is None:
            return
        self._running = False
        if self.executor_kind != "events":
            rclpy.shutdown(context=self.context)  # makes spin() return
        self._thread.join(timeout=5.0)
        self.executor.shutdown()
        self.node.destroy_node()
        if self.context.ok():
            rclpy.shutdown(context=self.context)
        self._thread = None

    def __enter__(self) -> PlantRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def help_text() -> str:
    """The node's usage and parameter table (``idyn-plant --help``)."""
    from idyn_ros.nodes.ros_parameters import parameter_help
    from idyn_ros.parameters import PlantParams

    return "\n".join([__doc__.strip(), "", parameter_help(PlantParams), "", "Examples:",
                      "  idyn-plant --ros-args -p robot:=ur5 -p profile:=ideal",
                      "  idyn-plant --ros-args -p robot:=panda -p clock_mode:=realtime -p on_bad_command:=clamp",
                      "  python -m idyn_ros.sim.profile iiwa14 --seed 3   # regenerate a true profile"])


def main(args: list[str] | None = None) -> int:
    """Console script ``idyn-plant``: ``idyn-plant --ros-args -p robot:=ur5 -p clock_mode:=realtime``."""
    import sys

    from idyn_ros.nodes.common import run

    argv = list(sys.argv if args is None else args)
    own = argv[: argv.index("--ros-args")] if "--ros-args" in argv else argv
    if "-h" in own or "--help" in own:
        print(help_text())
        return 0
    # a SingleThreadedExecutor and plain subscriptions: with the Kilted wheels the EventsExecutor here neither
    # delivered the command subscription reliably next to a timer nor returned on SIGINT (seen here)
    return run([PlantNode], argv, hot_loop=False)


if __name__ == "__main__":
    raise SystemExit(main())
