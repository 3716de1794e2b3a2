"""payload_identifier: the ``~/identify_payload`` service (idyn_ros/IdentifyPayload), around ``control/payload.py``.

One call: send the payload excitation to the reference node (its ``~/joint_trajectory``: a min-jerk move to the
excitation's start, a settle, the excitation, a hold), record /joint_states (position, velocity, effort = measured
joint torque) until it has played, and then either keep the run as the bare-arm reference (``record_baseline``,
nothing attached) or identify the payload against that reference (or, without one, against the bare-arm model in
``model_path``), reply with the result, its standard deviations and the vendor forms (Franka SetLoad, UR
set_target_payload, KUKA load data, xacro arguments), write ``result_path``, and with ``apply`` send it to every
``set_payload_services`` entry (controller, feedforward, wrench observer, doomed) so they include it at once.
A joint-state filter restart (stamps jumped back or stalled) during the excitation abandons the call with the reason
(the recording's time axis broke); it and rejected samples are reported once per kind (log, /diagnostics).
The plan starts from the reference node's current q_d (``reference_topic``), where the reference plays a
JointTrajectory from, once it holds (the measured pose sags below it: a plan from there began with a step the
reference refused). The call fails, nothing recorded, identified or applied and the baseline kept, when the reference
node logs that it refused the plan (/rosout) or the recording shows the arm did not play it
(``control.payload.excitation_problem``), or before it plays anything when the controller's latest state is not
ACTIVE (safe mode: the arm would not play it); an estimate the data did not determine or that is not physically
consistent (``control.payload.payload_verdict``) answers success=false with its numbers and is never applied. One
that finds no payload succeeds and applies an empty flange (mass 0), which clears a payload applied before the tool
came off.

Decisions: the service callback is a coroutine (rclpy awaits it) in a reentrant callback group, so the executor
keeps serving the joint states, the clients and other services while the excitation plays; the solve itself (a
few s) runs in the callback. Effort
must be joint torque: a UR driver that reports motor currents (its default) must be switched to torques
(``use_currents_as_efforts``) first. Not in the default graph: start it with the others when needed
(``idyn bringup --nodes ...,payload_identifier``).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future

from idyn_ros.control import payload as cp
from idyn_ros.control import state_estimation as se
from idyn_ros.control.controller import MODE_ACTIVE
from idyn_ros.data.workspace import Workspace, WorkspaceGuard, move_problem, read_workspace, workspace_of
from idyn_ros.errors import IdynError
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes.common import (
    HOT_IN,
    MONITOR,
    Diagnostics,
    JointStateProblems,
    declare_and_load,
    describe_payload,
    stamp_to_ns,
)
from idyn_ros.nodes.reference import REJECTED
from idyn_ros.parameters import PayloadIdentifierParams

PROGRESS_STEPS = 4  # the excitation's progress is logged at each quarter (a service call has no feedback)
RECORD_MARGIN_S = 0.5  # s recorded after the plan should have ended (the reference starts one state late)
CONNECT_TIMEOUT_S = 10.0  # s (wall) a call waits for the first joint state and for the reference node
APPLY_TIMEOUT_S = 5.0  # s (wall) apply waits for each set_payload reply (a wedged server must not hold the node busy)
AT_REST_RAD_S = 1e-6  # |dq_d| below this on every joint: the reference holds, the plan may start from its q_d
REFERENCE_STALE_NS = 1_000_000_000  # a reference stamped this far from the latest joint state is not the current one


class PayloadIdentifierNode(Node):
    def __init__(self, name: str = "payload_identifier", **kwargs: Any) -> None:
        from rcl_interfaces.msg import Log
        from trajectory_msgs.msg import JointTrajectory

        from idyn_ros.msg import ControllerState, JointReference
        from idyn_ros.srv import IdentifyPayload

        super().__init__(name, **kwargs)
        self._designer: threading.Thread | None = None  # the start-up design, when there is one
        self._closing = threading.Event()  # set by destroy_node: the design stops at its next progress report
        self._loaded: tuple[str, list] | None = None  # (path, its recordings) checked by _baseline_problem
        self.params, self.spec, self.robot = declare_and_load(self, PayloadIdentifierParams, check=self._check)
        self.params.on_change.append(self._on_params)
        v = self.params.value
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v.robot)
        self.filter = se.JointStateFilter(self.robot.joint_names, v.rate_hz, estimate_acceleration=False)  # q, dq
        self.problems = JointStateProblems(self, self.diag, self.filter)
        from idyn_ros.data.trajectories import JointLimits

        self.limits = JointLimits.from_model(self.robot)
        self.log: cp.JointStateLog | None = None
        self._until_ns = -1
        self._done: Future | None = None
        self._finish = threading.Lock()  # the joint states and a refusal on /rosout both end a recording
        # (origin stamp ns, t, q, s from the origin to the excitation's start) of the last plan sent
        self._plan: tuple[int, np.ndarray, np.ndarray, float] | None = None
        self._reference_msg: Any = None  # the reference node's latest JointReference (read by _reference)
        self._controller_msg: Any = None  # the controller's latest ControllerState, if one was seen
        self._busy = False
        self.baseline: list | None = None  # the bare-arm reference's recordings (a file with gaps: one per segment)
        self._baseline_from = ""  # the file self.baseline was loaded from or saved to
        self.last_result: dict[str, Any] = {}
        self.excitation: Any = None
        self.workspace: Workspace | None = None  # what the excitation was designed in: the plan is checked against it
        self.excitation_error = ""
        self._design_until = 0.0  # time.monotonic() by which the design started at start-up should be done
        self._on_params(v)
        if v.excitation_path:
            from idyn_ros.control.reference import load_npz_trajectory

            self.excitation = load_npz_trajectory(v.excitation_path, self.robot.joint_names)
            self.workspace = read_workspace(v.excitation_path)
        else:  # designing takes design_budget s: in the background, the service waits for it
            self._design_until = time.monotonic() + v.design_budget
            self._designer = threading.Thread(target=self._design, args=(v.design_budget,), daemon=True)
            self._designer.start()
        self.traj_pub = self.create_publisher(JointTrajectory, f"{v.reference_node.rstrip('/')}/joint_trajectory",
                                              MONITOR)
        hot_loop.subscribe_joint_states(self, v.joint_states_topic, self._on_joint_state)
        # the plan starts where the reference node is (it plays a JointTrajectory from its current q_d, not from the
        # measured q: planning from the measured q put the tracking error into the first 10 ms and it was refused)
        self.create_subscription(JointReference, v.reference_topic, self._on_reference, HOT_IN)
        # a controller in safe mode would not play the excitation: the call fails before sending it, not 30 s later
        hot_loop.subscribe(self, ControllerState, v.controller_state_topic, self._on_controller_state, HOT_IN)
        # a refusal is only logged by the reference node: seen here, the call ends at once with its reason
        self._reference_logger = v.reference_node.strip("/").replace("/", ".")
        self.create_subscription(Log, "/rosout", self._on_rosout, 100)
        # reentrant: the node's default group is mutually exclusive, and a pending service coroutine holding it
        # would keep its own wake-up timer and the set_payload replies from ever running
        self.group = ReentrantCallbackGroup()
        self.create_service(IdentifyPayload, "~/identify_payload", self._srv_identify, callback_group=self.group)
        self.create_timer(v.diagnostics_period, self.problems.publish)
        self.diag.set(Diagnostics.OK, "ready" if self.excitation is not None else "designing the excitation",
                      publish=True)

    def _check(self, v: PayloadIdentifierParams) -> str | None:
        """The cross-field check of a candidate parameter set (run time and start-up), or None."""
        return self._service_names_problem(v) or self._baseline_problem(v)

    def _service_names_problem(self, v: PayloadIdentifierParams) -> str | None:
        """A set_payload_services entry that names no valid service (create_client would raise at apply time)."""
        for name in v.set_payload_services:
            try:
                self.resolve_service_name(name)
            except RuntimeError as exc:  # rclpy's RCLError: "failed to resolve name: <why>, at <file>"
                return f"set_payload_services: {name!r} is not a valid service name ({str(exc).split(', at ')[0]})"
        return None

    def _baseline_problem(self, v: PayloadIdentifierParams) -> str | None:
        """Refuse a baseline_path that names a file which is not a bare-arm recording of this robot."""
        path = v.baseline_path
        if (getattr(self, "robot", None) is None or not path or path == getattr(self, "_baseline_from", "")
                or not Path(path).is_file()):
            return None  # at declaration (checked when loaded), the file in use, or one the next baseline call writes
        from idyn_ros.models.sources import load_recordings

        try:
            self._loaded = (path, load_recordings([path], self.robot))
        except Exception as exc:  # any reason the file is not a recording of this robot
            return f"baseline_path {path}: not a bare-arm recording of {self.robot.name}: {exc}"
        return None

    def _on_params(self, v: PayloadIdentifierParams) -> None:
        """A baseline_path naming an existing recording is the bare-arm reference from now on (at start, when set)."""
        path = v.baseline_path
        if not path or path == self._baseline_from or not Path(path).is_file():
            return
        if self._loaded is None or self._loaded[0] != path:
            problem = self._baseline_problem(v)
            if problem:
                raise IdynError(problem)
        self.baseline, self._baseline_from = self._loaded[1], path
        self.get_logger().info(f"bare-arm reference loaded from {path} "
                               f"({sum(rec.n_samples for rec in self.baseline)} samples)")

    def _design(self, budget: float) -> None:
        def still_wanted(_elapsed: float, _cond: float) -> None:  # the optimiser's progress hook, every 0.5 s
            if self._closing.is_set():
                raise IdynError("the node was destroyed while designing")

        try:
            v = self.params.value
            space = workspace_of(v)
            self.excitation = cp.design_excitation(self.robot.copy(), time_budget_s=budget, workspace=space,
                                                   progress=still_wanted).trajectory
            self.workspace = space
            self.get_logger().info("designed the payload excitation in the " + (
                space.describe() if space is not None else "joint limits only (workspace_check false)"))
            self.diag.set(Diagnostics.OK, "ready")
        except Exception as exc:  # reported by the next call; the node stays up
            self.excitation_error = f"designing the payload excitation failed: {type(exc).__name__}: {exc}"
            self.diag.set(Diagnostics.ERROR, self.excitation_error)

    def destroy_node(self) -> None:
        """Stop a start-up design still running first: it would keep an optimiser and the GIL busy for its budget."""
        self._closing.set()
        if self._designer is not None:
            self._designer.join(timeout=5.0)
        super().destroy_node()

    # ------------------------------------------------------------------ recording
    def _on_joint_state(self, msg: Any, source: object = None) -> None:
        f = self.filter
        status = self.problems.update(msg, source)
        if status != se.OK:
            if status is not None and self._until_ns >= 0:  # a restart while recording: its time axis broke
                self._end(error=IdynError(
                    f"the joint-state stamps started over during the excitation ({f.reason}): the recording is "
                    "unusable; call again"))
            return
        log = self.log
        if log is None or self._until_ns < 0:
            return
        full = not log.append(f.stamp_ns * 1e-9, f.q, f.dq, f.effort)
        if f.stamp_ns >= self._until_ns or full:
            self._end(result=full)

    def _end(self, result: Any = None, error: Exception | None = None) -> None:
        """Stop recording with a result or an exception, once (whichever of the inputs comes first)."""
        with self._finish:
            if self._until_ns < 0 or self._done is None or self._done.done():
                return
            self._until_ns = -1
            if error is not None:
                self._done.set_exception(error)
            else:
                self._done.set_result(result)

    def _on_reference(self, msg: Any) -> None:
        self._reference_msg = msg  # 1 kHz: kept as it is, read when a call needs it

    def _on_controller_state(self, msg: Any) -> None:
        self._controller_msg = msg  # the same

    def _reference(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The reference node's latest (q_d, dq_d) in model joint order, or None (none yet, or not usable)."""
        msg = self._reference_msg
        if msg is None or abs(stamp_to_ns(msg.header.stamp) - self.filter.stamp_ns) > REFERENCE_STALE_NS:
            return None
        try:
            idx = [list(msg.joint_names).index(j) for j in self.robot.joint_names]
            q = np.array([msg.positions[i] for i in idx], dtype=float)
            dq = np.array([msg.velocities[i] for i in idx], dtype=float) if len(msg.velocities) else np.zeros(len(q))
        except (ValueError, IndexError):  # not this robot's joints: not a reference to start from
            return None
        return (q, dq) if np.all(np.isfinite(q)) and np.all(np.isfinite(dq)) else None

    def _on_rosout(self, msg: Any) -> None:
        if self._until_ns >= 0 and msg.name == self._reference_logger and msg.msg.startswith(REJECTED):
            self._end(error=IdynError(f"the reference node refused the excitation ({msg.msg}); nothing recorded"))

    def _play(self) -> float:
        """Send the plan to the reference node and start recording; returns the plan's duration (s)."""
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        v = self.params.value
        reference = self._reference()
        start = reference[0] if reference is not None else self.filter.q.copy()  # see the reference_topic subscription
        t, q, dq, ddq = cp.excitation_plan(start, self.excitation, self.limits, v.point_rate_hz,
                                           v.move_speed, v.settle_s)
        if self.workspace is not None:  # the moves to and from the excitation were not part of its design
            outside = move_problem(WorkspaceGuard(self.robot, self.workspace), np.vstack([start, q]))
            if outside:
                raise IdynError(f"the plan from the current pose through the payload excitation would leave the "
                                f"workspace it was designed in ({outside}); bring the arm nearer the excitation's "
                                "start first; nothing was sent")
        msg = JointTrajectory(joint_names=list(self.robot.joint_names))
        msg.points = [JointTrajectoryPoint(positions=q[k].tolist(), velocities=dq[k].tolist(),
                                           accelerations=ddq[k].tolist(),
                                           time_from_start=Duration(sec=int(t[k]), nanosec=round(t[k] % 1 * 1e9)))
                      for k in range(len(t))]
        duration = float(t[-1])
        self.log = cp.JointStateLog(self.robot.n, int((duration + 2 * RECORD_MARGIN_S + 1.0) * v.rate_hz * 1.2))
        self._done = Future()
        self._plan = (self.filter.stamp_ns, np.concatenate([[0.0], t]), np.vstack([start, q]),
                      cp.excitation_span(start, self.excitation, self.limits, v.move_speed, v.settle_s)[0])
        self._until_ns = self.filter.stamp_ns + int((duration + RECORD_MARGIN_S) * 1e9)
        self.traj_pub.publish(msg)
        return duration

    # ------------------------------------------------------------------ the service
    async def _srv_identify(self, request: Any, response: Any) -> Any:
        if self._busy:
            response.success, response.message = False, "an identification is already running"
            return response
        self._busy = True
        try:
            await self._identify(request, response)
        except IdynError as exc:
            response.success, response.message = False, str(exc)
            self.diag.set(Diagnostics.WARN, str(exc), publish=True)
        except Exception as exc:  # a failed solve etc.: the caller gets the reason, the node stays up
            response.success, response.message = False, f"identification failed: {type(exc).__name__}: {exc}"
            self.get_logger().error(response.message)
            self.diag.set(Diagnostics.WARN, response.message, publish=True)
        finally:
            self._until_ns = -1
            self._busy = False
        return response

    async def _identify(self, request: Any, response: Any) -> None:
        v = self.params.value
        if self.excitation is None:
            raise IdynError(self.excitation_error or self._designing_message())
        if not request.record_baseline and self.baseline is None and not v.model_path:
            raise IdynError("no bare-arm reference: call once with record_baseline=true and no payload attached, "
                            "or set model_path to a model of the bare arm")
        await self._wait_until_ready()
        rec = await self._play_and_record(request.record_baseline)
        if request.record_baseline:
            self._keep_baseline(rec, response)
            return
        if self.baseline is not None:
            est = cp.identify_with_reference(self.robot, [rec], self.baseline)
        else:
            est = cp.identify_with_model(self.robot, [rec], cp.artifact_predictor(self.robot, v.model_path))
        verdict, why = cp.payload_verdict(est)
        self._fill(response, est, verdict, why)
        if verdict == "undetermined":  # the estimate stays in the response for inspection, nowhere else
            response.success = False
            response.message += f"; NOT applied: {why}"
            self.get_logger().error(response.message)
            self.diag.set(Diagnostics.WARN, response.message, publish=True)
            return
        if verdict == "no payload":
            response.message += f"; {why}"
        if request.apply:  # no payload applies an empty flange: it clears an earlier payload, whose tool came off
            response.message += "; " + await self._apply(est.payload if verdict == "payload" else None)
        self._write_result(response)

    def _designing_message(self) -> str:
        """Why a call while the start-up design runs is refused, with how long to wait (it said only 'call again',
        and the design takes design_budget s, 20 by default) and how to skip the wait."""
        left = max(0.0, self._design_until - time.monotonic())
        return (f"the payload excitation is still being designed (design_budget {self.params.value.design_budget:g} s):"
                f" call again in about {left + 1:.0f} s, or start the node with excitation_path set to a file from "
                f"`idyn excite --robot {self.robot.name} --payload`")

    async def _wait_until_ready(self) -> None:
        """Until joint states arrive, the reference node listens and its reference holds still; then refuse unless
        the controller is active (the arm would not play the excitation)."""
        v = self.params.value
        started = time.monotonic()
        while self.filter.samples == 0 or self.traj_pub.get_subscription_count() == 0:  # a graph just started
            if time.monotonic() - started > CONNECT_TIMEOUT_S:
                if self.filter.samples == 0:
                    raise IdynError(f"no joint state received on {v.joint_states_topic}")
                raise IdynError(f"nobody subscribes to {self.traj_pub.topic_name}: is the reference node running?")
            await _yield_once(self)
        while (reference := self._reference()) is not None and np.abs(reference[1]).max() > AT_REST_RAD_S:
            if time.monotonic() - started > v.wall_timeout:
                raise IdynError(f"the reference on {v.reference_topic} kept moving for wall_timeout="
                                f"{v.wall_timeout:g} s; the excitation starts from a holding reference")
            await _yield_once(self)
        state = self._controller_msg
        if state is not None and state.mode != MODE_ACTIVE:
            raise IdynError(f"the controller is not active ({state.mode_reason or f'mode {state.mode}'}): the arm "
                            "would not play the excitation; nothing sent")

    async def _play_and_record(self, baseline: bool) -> Any:
        """Play the excitation and return what the joint states recorded meanwhile (a Recording), refused when it
        carries no efforts or the arm did not follow the plan."""
        v = self.params.value
        duration = self._play()
        self.get_logger().info(f"playing the payload excitation ({duration:.1f} s)")
        started, origin_ns, said = time.monotonic(), self._plan[0], 1
        while not self._done.done():  # the executor serves everything else meanwhile
            if time.monotonic() - started > v.wall_timeout:
                raise IdynError(f"the excitation did not finish within wall_timeout={v.wall_timeout:g} s")
            played_s = (self.filter.stamp_ns - origin_ns) * 1e-9  # on the joint states' clock, as the plan runs
            if said < PROGRESS_STEPS and played_s >= said * duration / PROGRESS_STEPS:  # the caller waits in silence
                self.get_logger().info(f"payload excitation: {played_s:.1f} of {duration:.1f} s played")
                said += 1
            await _yield_once(self)
        self._done.result()  # raises why the recording was abandoned
        rec = self.log.recording(f"live:{v.joint_states_topic}", v.rate_hz)  # on the even grid, as a file would be
        if not np.all(np.isfinite(rec.tau)):
            raise IdynError(f"the joint states on {v.joint_states_topic} carry no effort (joint torque): nothing to "
                            "identify from")
        origin_ns, t_plan, q_plan, start_s = self._plan
        not_played = cp.excitation_problem(t_plan, q_plan, rec.t - origin_ns * 1e-9, rec.q, self.robot.joint_names)
        if not_played:
            what = "the bare-arm reference is unchanged" if baseline else "nothing identified or applied"
            raise IdynError(f"{not_played}; {what}")
        # decision: the excitation alone, not the move in (it differs between calls: the baseline's from where the
        # arm was, the next from the excitation's end; what the model lacks differs with the motion, which the
        # reference mode would take for payload), nor the holds around it (cp.excitation_span)
        t0 = origin_ns * 1e-9 + start_s
        return cp.from_time(rec, t0, t0 + cp.excitation_duration(self.excitation))

    def _keep_baseline(self, rec: Any, response: Any) -> None:
        """The bare-arm reference for later identifications, also written to baseline_path when set."""
        v = self.params.value
        self.baseline = [rec]
        where = ""
        if v.baseline_path:
            try:
                self._save(rec, v.baseline_path)
                self._baseline_from = v.baseline_path
                where = f", saved to {v.baseline_path}"
            except OSError as exc:  # the reference stands for this run: say the file is missing
                where = f", kept in memory only: baseline_path {v.baseline_path} not written: {exc}"
                self.diag.set(Diagnostics.WARN, f"baseline_path {v.baseline_path} not written: {exc}", publish=True)
        response.success = True
        response.message = f"bare-arm reference recorded ({len(rec.t)} samples{where})"

    def _write_result(self, response: Any) -> None:
        """The last result as JSON at result_path, when set; a file that cannot be written is said, not fatal."""
        v = self.params.value
        if not v.result_path:
            return
        from idyn_ros.data.atomic import atomic_write_text

        try:
            atomic_write_text(v.result_path, json.dumps(self.last_result, indent=2) + "\n")
        except OSError as exc:  # the identification stands (and may be applied): say the file is missing
            response.message += f"; result_path {v.result_path} not written: {exc}"
            self.diag.set(Diagnostics.WARN, f"result_path {v.result_path} not written: {exc}", publish=True)

    def _fill(self, response: Any, est: Any, verdict: str, why: str) -> None:
        from idyn_ros.dynamics.payload import vendor_formats
        from idyn_ros.robots.spec import Payload

        p = est.payload
        response.success = True
        response.mass = p.mass
        response.com.x, response.com.y, response.com.z = p.com
        response.inertia = list(p.inertia)
        response.mass_std = float(est.mass_std)
        response.com_std = [float(x) for x in est.com_std]
        response.inertia_std = [float(x) for x in est.inertia_std]
        response.physically_consistent = est.physically_consistent
        response.solve = est.solve
        response.condition_number = float(est.condition_number)
        vendor = vendor_formats(p if verdict == "payload" else Payload(0.0))  # what to tell the robot
        response.vendor_json = json.dumps(vendor)
        self.last_result = {**est.to_json(), "verdict": {"result": verdict, "reason": why}, "robot": self.robot.name,
                            "flange_frame": self.robot.flange_frame, **vendor}
        response.message = (f"{describe_payload(p)} (+- {est.mass_std:.3f} kg), {est.solve}, condition number "
                            f"{est.condition_number:.0f}")
        self.get_logger().info(response.message)

    async def _apply(self, payload: Any) -> str:
        """Send ``payload`` (None: an empty flange, mass 0) to every set_payload_services entry."""
        from idyn_ros.srv import SetPayload

        req = SetPayload.Request()
        if payload is not None:
            req.mass, req.inertia = payload.mass, list(payload.inertia)
            req.com.x, req.com.y, req.com.z = payload.com
        done, failed = [], []
        for name in self.params.value.set_payload_services:
            client = self.create_client(SetPayload, name, callback_group=self.group)
            try:
                if not client.wait_for_service(timeout_sec=1.0):
                    failed.append(f"{name} (not available)")
                    continue
                future = client.call_async(req)
                started = time.monotonic()
                while not future.done() and time.monotonic() - started < APPLY_TIMEOUT_S:
                    await _yield_once(self)
                reply = future.result() if future.done() else None
                if reply is None:
                    failed.append(f"{name} (no answer within {APPLY_TIMEOUT_S:g} s)")
                    continue
                (done if reply.success else failed).append(name if reply.success else f"{name} ({reply.message})")
            finally:
                self.destroy_client(client)
        what = "applied to" if payload is not None else "no payload applied to"
        return f"{what} {', '.join(done) or 'nothing'}" + (f"; NOT applied to {', '.join(failed)}" if failed else "")

    def _save(self, rec: Any, path: str) -> None:
        from idyn_ros.data.dataset import Dataset

        Dataset(t=rec.t - rec.t[0], q=rec.q, dq=rec.dq, tau=rec.tau, joint_names=tuple(self.robot.joint_names),
                robot=self.robot.name, source=rec.source).save(path)


async def _yield_once(node: PayloadIdentifierNode) -> None:
    """Give the executor a turn (rclpy has no sleep for coroutines): a future completed by a 20 ms timer on the steady
    clock. A timer on the node's clock waits 20 ms of sim time: while the lockstep plant crawls (1 ms per lockstep_wait
    with the controller inactive) or /clock stands, each turn took 20 s or never came, and the wall timeouts with it."""
    from rclpy.clock import Clock, ClockType

    future = Future()
    timer = node.create_timer(0.02, lambda: future.done() or future.set_result(None), callback_group=node.group,
                              clock=Clock(clock_type=ClockType.STEADY_TIME))
    try:
        await future
    finally:
        node.destroy_timer(timer)


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([PayloadIdentifierNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
