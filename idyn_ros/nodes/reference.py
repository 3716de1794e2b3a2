"""reference: desired (q, dq, ddq) as idyn_ros/JointReference, one message per /joint_states sample.

Event-driven like the controller: each accepted joint state triggers one reference sample at the
state's stamp + ``lookahead_periods`` (the controller reads it one hop later, i.e. for its next
tick), so the reference runs on the plant's clock (sim time in lockstep, wall time in real time)
and needs no 1 kHz timer. Sources (``mode``): hold the first state; min-jerk moves through
``setpoints`` (``idyn_ros.control.reference.MinJerkMove``, Flash & Hogan); an excitation/recorded
``npz_path``; or a trajectory_msgs/JointTrajectory sent to ``~/joint_trajectory`` (starts from the
current reference at once, points resolved by joint name). Every move is checked against the joints' position,
velocity and acceleration limits (``idyn_ros.data.limits``) and the workspace (``idyn_ros.data.workspace``: above the
mounting plane, out of the base column; an arm found outside may move back in, not further out) when it is built,
never per tick: one that leaves them is refused and the node holds; the npz move-in to q_d[0] is timed by its distance
instead (``MOVE_IN_VELOCITY_FRACTION`` of the limits).
Trajectory time runs on the states' stamps and pauses with its input: after a gap in /joint_states (or a stamp jump
forward) it resumes where it stopped, and after a restart of the joint-state filter on a stamp that jumped back (bag
loop, simulator reset) the source is rebuilt from the current reference, as on a parameter change: q_d never steps.
While the controller (``controller_node``, its lifecycle transition events) is not active, the reference follows the
measured pose; when it is activated again the mode restarts from there (a move-in, the set points, a hold), as
ros2_control's joint_trajectory_controller holds the current position on activation: after a latched fault and a
deactivate + activate the arm does not travel to where the trajectory went meanwhile.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import reference as ref
from idyn_ros.control import state_estimation as se
from idyn_ros.data.limits import planning_acceleration_limits, vendor_acceleration_limits
from idyn_ros.data.trajectories import joint_line
from idyn_ros.data.workspace import (
    Workspace,
    WorkspaceGuard,
    line_problem,
    move_problem,
    problem,
    read_workspace,
    workspace_of,
)
from idyn_ros.errors import IdynError
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes.common import (
    HOT_IN,
    MONITOR,
    Diagnostics,
    JointStateProblems,
    declare_and_load,
    field_view,
    load_robot,
    stamp_to_ns,
)
from idyn_ros.parameters import ReferenceParams

REJECTED = "JointTrajectory rejected"  # the start of every refusal's log line (the payload identifier watches for it)


@functools.lru_cache(maxsize=4)
def _robot(robot: str, prefix: str) -> tuple[Any, Any]:
    """A robot preset's (RobotSpec, RobotModel), loaded once for the parameter checks (WorkspaceGuard makes its own
    pinocchio Data)."""
    return load_robot(robot, prefix)


@functools.lru_cache(maxsize=4)
def _limits(robot: str, prefix: str) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(joint names, lower, upper, velocity limit, acceleration limit) of a robot preset (rad, rad/s, rad/s^2; the
    acceleration limits the arm enforces, inf where the vendor documents none): one URDF load per robot, not one per
    parameter set."""
    spec, model = _robot(robot, prefix)
    return (tuple(model.joint_names), model.lower.copy(), model.upper.copy(), model.velocity_limit.copy(),
            vendor_acceleration_limits(spec.name, model.n))


def _segments_problem(points: np.ndarray, durations: list[float], names: tuple[str, ...], velocity: np.ndarray,
                      acceleration: np.ndarray, q_start: np.ndarray | None) -> str | None:
    """The first set-point move (from ``q_start``, skipped when it is not known yet) beyond the velocity or
    acceleration limits."""
    for i in range(len(points)):
        q_from = points[i - 1] if i else q_start
        fast = None if q_from is None else ref.move_speed_problem(q_from, points[i], durations[i], names, velocity,
                                                                  acceleration)
        if fast:
            origin = f"set point {i}" if i else "the current reference"
            return f"mode setpoints: the move from {origin} to set point {i + 1} (durations[{i}]): {fast}"
    return None


#: poses per set-point move, and at most per played trajectory, the workspace check looks at (in the executor's
#: thread, never per tick)
LINE_SAMPLES = 50
TRAJECTORY_SAMPLES = 2000
WORKSPACE_ADVICE = "workspace_check false for an arm on a wall or ceiling, workspace_floor for another table height"


def _setpoints_path(points: np.ndarray, q_start: np.ndarray | None, loop: bool) -> np.ndarray:
    """The poses the set-point moves pass through (min-jerk moves follow joint-space lines): from ``q_start`` when it
    is known, back to it when the moves loop."""
    knots = [*([q_start] if q_start is not None else []), *points, *([q_start] if loop and q_start is not None else [])]
    if len(knots) < 2:  # no move: the one set point (checked itself) or none
        return np.asarray(knots, dtype=float).reshape(len(knots), points.shape[1])
    return np.vstack([joint_line(a, b, LINE_SAMPLES) for a, b in itertools.pairwise(knots)])


def _workspace_problem(v: ReferenceParams, path: np.ndarray, from_arm: bool = True) -> str:
    """Why a move through ``path`` leaves the node's workspace ("" if it does not, or when workspace_check is false);
    ``from_arm``: path[0] is the arm's pose (``move_problem``'s rule), else every pose must be inside."""
    space = workspace_of(v)
    if space is None or not len(path):
        return ""
    guard = WorkspaceGuard(_robot(v.robot, v.prefix)[1], space)
    outside = move_problem(guard, path) if from_arm else problem(guard.check(path), space)
    return f"{outside} ({WORKSPACE_ADVICE})" if outside else ""


def _played_poses(traj: ref.SampledTrajectory) -> np.ndarray:
    """Poses along the curve ``traj`` plays: every 10 ms (at most TRAJECTORY_SAMPLES, evenly) and its own samples
    while there are no more than that."""
    t = np.linspace(0.0, traj.duration, int(np.clip(traj.duration / 0.01, 50, TRAJECTORY_SAMPLES)))
    if len(traj.t) <= TRAJECTORY_SAMPLES:
        t = np.union1d(t, traj.t)
    return np.array([traj.sample(float(ti))[0] for ti in t])


@functools.lru_cache(maxsize=8)
def _file_workspace_problem(path: str, mtime_ns: int, robot: str, prefix: str, space: Workspace | None) -> str:
    """``move_problem`` of a whole trajectory file, once per file version: the first state's build and every restart
    run in the hot loop's thread, and a long file (2000 poses checked) takes ~25 ms."""
    if space is None:
        return ""
    model = _robot(robot, prefix)[1]
    traj = ref.load_npz_trajectory(path, model.joint_names)
    outside = move_problem(WorkspaceGuard(model, space), _played_poses(traj))
    return f"{outside} ({WORKSPACE_ADVICE})" if outside else ""


def _settings_problem(v: ReferenceParams, q_start: np.ndarray | None = None) -> str | None:
    """A mode the reference cannot build from these parameters (refused at start and at run time), or None;
    ``q_start``: the current reference once there is one (the first set-point move starts there)."""
    names, lower, upper, velocity, acceleration = _limits(v.robot, v.prefix)
    if v.mode == "setpoints":
        k = len(v.setpoints) // len(names)  # the parameter's own check makes it a whole number of points
        if k != len(v.durations):
            return (f"mode setpoints: {k} set points but {len(v.durations)} durations; give one duration (s) per set "
                    "point (set mode hold first, then both, then mode setpoints: ros2 param load sets them one at a "
                    "time)")
        points = np.reshape(v.setpoints, (k, len(names)))
        outside = ref.limits_problem(points, names, lower, upper) if k else None
        if outside:
            return f"mode setpoints: {outside}"
        fast = _segments_problem(points, list(v.durations), names, velocity, acceleration, q_start)
        if fast:
            return fast
        outside = _workspace_problem(v, _setpoints_path(points, q_start, v.loop), from_arm=q_start is not None)
        return f"mode setpoints: the moves leave the workspace: {outside}" if outside else None
    if v.mode == "npz":
        if not v.npz_path:
            return "mode npz needs npz_path (a trajectory .npz, e.g. from `idyn excite`)"
        try:
            traj = ref.load_npz_trajectory(v.npz_path, names)
        except IdynError as exc:
            return f"mode npz: {exc}"
        outside = (ref.limits_problem(traj.q, names, lower, upper) or ref.velocity_problem(traj, names, velocity)
                   or ref.acceleration_problem(traj, names, acceleration))
        if outside:
            return f"mode npz: {v.npz_path}: {outside}"
    return None


class ReferenceNode(Node):
    def __init__(self, name: str = "reference", **kwargs: Any) -> None:
        from trajectory_msgs.msg import JointTrajectory

        from idyn_ros.msg import JointReference

        super().__init__(name, **kwargs)
        self.t0_ns = -1  # before declare_and_load: its check asks for the current reference
        self.params, self.spec, self.robot = declare_and_load(self, ReferenceParams, check=self._settings_problem)
        v = self.params.value
        self.n = self.robot.n
        self.acceleration_limit = _limits(v.robot, v.prefix)[4]  # a user's moves are checked against these
        self.move_acceleration = planning_acceleration_limits(self.spec.name, self.n)  # the node's own moves, timed
        self.params.on_change.append(self._restart)
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v.robot)
        self.filter = se.JointStateFilter(self.robot.joint_names, v.rate_hz, estimate_acceleration=False)  # reads q
        self.problems = JointStateProblems(self, self.diag, self.filter)
        self.source: Any = None
        # the executor's swaps (a trajectory, a parameter change) and the hot loop's tick never interleave: a tick
        # that saw the new source must also see its start time, and a restart must not leave it None mid-tick
        self._swap = threading.Lock()
        self.q_last = np.zeros(self.n)
        self.out = JointReference(joint_names=list(self.robot.joint_names))
        self._positions, self._velocities, self._accelerations = (field_view(self.out, name, self.n) for name in (
            "positions", "velocities", "accelerations"))  # written each publish
        self.pub = self.create_publisher(JointReference, v.reference_topic, HOT_IN)
        hot_loop.subscribe_joint_states(self, v.joint_states_topic, self._on_joint_state)
        self.create_subscription(JointTrajectory, "~/joint_trajectory", self._on_trajectory, MONITOR)
        self._following = False  # the controller is not active: publish the measured pose (module docstring)
        self._zeros = np.zeros(self.n)
        if v.controller_node:
            from lifecycle_msgs.msg import TransitionEvent

            self.create_subscription(TransitionEvent, f"{v.controller_node.rstrip('/')}/transition_event",
                                     self._on_controller_transition, 10)
        self.create_timer(v.diagnostics_period, self.problems.publish)
        self.lookahead_ns = int(v.lookahead_periods * 1e9 / v.rate_hz)

    def _settings_problem(self, v: ReferenceParams) -> str | None:
        """The module check with the current reference as the start of the first set-point move, once there is one."""
        return _settings_problem(v, self.q_last.copy() if self.t0_ns >= 0 else None)

    def _restart(self, v: ReferenceParams) -> None:
        with self._swap:
            self.lookahead_ns = int(v.lookahead_periods * 1e9 / v.rate_hz)
        self._rebuild()  # from the current reference

    def _rebuild(self) -> None:
        """Build the mode's source from q_last here, in the executor's thread (loading and checking an npz takes
        ms, which in the 1 kHz callback of a composed process stalled every node), and swap it in. Before the first
        state there is no pose to start from: the first state builds it."""
        if self.t0_ns < 0:
            with self._swap:
                self.source = None
            return
        source = self._build_or_hold(self.q_last.copy())
        with self._swap:
            self.source, self.t0_ns = source, self.filter.stamp_ns

    def _build_or_hold(self, q_start: np.ndarray) -> Any:
        """The mode's source from ``q_start``, or a hold there when it cannot be built (said: log, /diagnostics)."""
        try:
            source = self._build(q_start)
            self.diag.set(Diagnostics.OK, f"mode {self.params.value.mode}", publish=True)
            return source
        except IdynError as exc:
            self.get_logger().error(str(exc))
            self.diag.set(Diagnostics.ERROR, str(exc), publish=True)
            return self._hold(q_start)

    def _build(self, q_start: np.ndarray) -> Any:
        v = self.params.value
        n = self.n
        mode = v.mode
        if mode == "setpoints":
            flat = np.asarray(v.setpoints, dtype=float)
            points = flat.reshape(-1, n) if flat.size else np.zeros((0, n))
            durations = list(v.durations)
            if len(durations) != len(points):
                raise IdynError(f"reference: {len(points)} set points but {len(durations)} durations; give one "
                                "duration (s) per set point")
            # decision: a first move too fast from where the arm is now is refused (the node holds), not stretched:
            # the user timed it, and a silently longer move shifts every later set point against their plan
            fast = _segments_problem(points, durations, self.robot.joint_names, self.robot.velocity_limit,
                                     self.acceleration_limit, q_start)
            if fast:
                raise IdynError(f"reference: {fast}; holding the current pose")
            outside = _workspace_problem(v, _setpoints_path(points, q_start, v.loop))
            if outside:
                raise IdynError(f"reference: mode setpoints: the moves from the current pose would leave the "
                                f"workspace: {outside}; refused, holding the current pose")
            if v.loop and len(points):  # decision: a loop closes with a limit-safe move back, never a jump to the start
                points = [*points, q_start]
                durations = [*durations, ref.move_in_duration(points[-2], q_start, self.robot.velocity_limit,
                                                              self.move_acceleration)]
            return ref.MinJerkMove(q_start, [q_start, *points], [v.start_delay, *durations])
        if mode == "npz":
            names = self.robot.joint_names
            traj = ref.load_npz_trajectory(v.npz_path, names)
            fast = (ref.velocity_problem(traj, names, self.robot.velocity_limit)  # the file may have changed
                    or ref.acceleration_problem(traj, names, self.acceleration_limit))
            if fast:
                raise IdynError(f"reference: {v.npz_path}: {fast}; refused, holding the current pose")
            space = read_workspace(v.npz_path)  # what `idyn excite` designed it in: the move-in must stay there too
            if space is not None:
                outside = line_problem(WorkspaceGuard(self.robot, space), q_start, traj.q[0], LINE_SAMPLES)
                if outside:
                    raise IdynError(f"reference: the move from the current pose to the start of {v.npz_path} would "
                                    f"leave the workspace the trajectory was designed in ({outside}); bring the arm "
                                    "nearer its start first (mode setpoints); refused, holding the current pose")
            else:  # a file that records no workspace: the move-in and the file against the node's own
                try:
                    version = os.stat(v.npz_path).st_mtime_ns
                except OSError as exc:  # gone since it was loaded
                    raise IdynError(f"reference: {v.npz_path}: {exc}; holding the current pose") from None
                outside = (_workspace_problem(v, joint_line(q_start, traj.q[0], LINE_SAMPLES))
                           or _file_workspace_problem(v.npz_path, version, v.robot, v.prefix, workspace_of(v)))
                if outside:
                    raise IdynError(f"reference: {v.npz_path} records no workspace, and the move to it or the file "
                                    f"leaves the node's: {outside}; refused, holding the current pose")
            # hold start_delay, then a move-in timed by its distance (MOVE_IN_VELOCITY_FRACTION), then the trajectory
            move = ref.move_in_duration(q_start, traj.q[0], self.robot.velocity_limit, self.move_acceleration)
            self.get_logger().info(f"mode npz: holding {v.start_delay:g} s, moving to the trajectory's start in "
                                   f"{move:.3g} s; the trajectory starts {v.start_delay + move:.3g} s after the first "
                                   "state")
            played = _Chain(ref.MinJerkMove(q_start, [q_start, traj.q[0]], [v.start_delay, move]), traj)
            if not v.loop:
                return played
            back = ref.move_in_duration(traj.q[-1], q_start, self.robot.velocity_limit,  # closes the loop (above)
                                        self.move_acceleration)
            return _Chain(played, ref.MinJerkMove(traj.q[-1], [q_start], [back]))
        return ref.MinJerkMove(q_start, [], [])  # hold (also "trajectory" until one arrives)

    def _on_controller_transition(self, msg: Any) -> None:
        """The controller left ACTIVE (deactivated, cleaned up, shut down): follow the arm; it is ACTIVE again: the
        mode restarts from the measured pose."""
        from lifecycle_msgs.msg import State

        goal, who = msg.goal_state.id, self.params.value.controller_node
        if goal in (State.PRIMARY_STATE_UNCONFIGURED, State.PRIMARY_STATE_INACTIVE, State.PRIMARY_STATE_FINALIZED):
            with self._swap:
                self._following = True
            self.diag.set(Diagnostics.WARN, f"{who} not active: following the measured pose", publish=True)
        elif goal == State.PRIMARY_STATE_ACTIVE and self._following:
            self._rebuild()  # from q_last, the measured pose followed until now
            with self._swap:
                self._following = False
            self.get_logger().info(f"{who} active: mode {self.params.value.mode} restarts from the measured pose")

    def _on_trajectory(self, msg: Any) -> None:
        """A JointTrajectory replaces the reference from the current one; a bad one is refused (logged), not raised."""
        if self._following:  # it would be dropped on activation: say so now (the payload identifier fails at once)
            self.get_logger().error(f"{REJECTED}: the controller {self.params.value.controller_node} is not active; "
                                    "send it once the controller is")
            return
        try:
            idx = [list(msg.joint_names).index(j) for j in self.robot.joint_names]
        except ValueError:
            self.get_logger().error(f"{REJECTED}: it lacks joints of {list(self.robot.joint_names)}")
            return
        pts, width = msg.points, len(msg.joint_names)
        ragged = [k for k, p in enumerate(pts) if len(p.positions) != width
                  or len(p.velocities) not in (0, width) or len(p.accelerations) not in (0, width)]
        if ragged:  # indexing them raised IndexError in this callback
            self.get_logger().error(f"{REJECTED}: point(s) {ragged[:5]} do not have one position (and "
                                    f"velocity, acceleration if any) per joint name ({width})")
            return
        times = [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in pts]
        pos = [[p.positions[i] for i in idx] for p in pts]
        vel = [[p.velocities[i] for i in idx] for p in pts] if all(len(p.velocities) for p in pts) else None
        acc = [[p.accelerations[i] for i in idx] for p in pts] if all(len(p.accelerations) for p in pts) else None
        try:
            source = ref.from_joint_trajectory_points(times, pos, vel, acc, self.q_last.copy())
        except IdynError as exc:
            self.get_logger().error(f"{REJECTED}: {exc}")
            return
        outside = (ref.limits_problem(pos, self.robot.joint_names, self.robot.lower, self.robot.upper)  # its points
                   or ref.velocity_problem(source, self.robot.joint_names, self.robot.velocity_limit)  # speeds
                   or ref.acceleration_problem(source, self.robot.joint_names, self.acceleration_limit))
        if outside:
            self.get_logger().error(f"{REJECTED}: {outside}")
            return
        outside = _workspace_problem(self.params.value, _played_poses(source))
        if outside:
            self.get_logger().error(f"{REJECTED}: it would leave the workspace: {outside}")
            return
        with self._swap:
            self.source = source
            self.t0_ns = self.filter.stamp_ns

    def _on_joint_state(self, msg: Any, source: object = None) -> None:
        f = self.filter
        prev_ns, gaps = f.stamp_ns, f.gaps
        # not problems.update: a restart is reported after the rebuild below, whose OK it would otherwise hide
        status = f.update(msg.name, msg.position, msg.velocity, msg.effort, stamp_to_ns(msg.header.stamp), source)
        if status != se.OK and status not in se.RESTARTS:
            if status not in se.SKIPPED:
                self.problems.report(status)
            return
        with self._swap:
            if status in (se.RESTART_BACKWARDS, se.RESTART_SOURCE):  # time jumped back, or another publisher's:
                # start over from the current reference
                self.source = None
            elif f.gaps != gaps and self.t0_ns >= 0:  # time pauses with the input: resume one period on
                self.t0_ns += f.stamp_ns - prev_ns - f.period_ns
            if self._following:  # the controller is not active: the arm's pose, at rest (nothing is built or played)
                q, dq, ddq = f.q, self._zeros, self._zeros
            else:
                q, dq, ddq = self._sample(f)
        self.q_last[:] = q
        o = self.out
        o.header.stamp = msg.header.stamp
        self._positions[:], self._velocities[:], self._accelerations[:] = q, dq, ddq
        self.pub.publish(o)
        if status != se.OK:  # after the rebuild, whose OK it replaces
            self.problems.report(status)

    def _sample(self, f: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The source at this state's stamp + the lookahead; built first when there is none (the first state, a
        restart of the input's time line). Called under ``_swap``."""
        if self.source is None:  # the first state, or a restart of the input's time line
            self.source = self._build_or_hold((f.q if self.t0_ns < 0 else self.q_last).copy())
            self.t0_ns = f.stamp_ns
        t = (f.stamp_ns + self.lookahead_ns - self.t0_ns) * 1e-9
        if self.params.value.loop and self.source.duration > 0 and t > self.source.duration:
            self.t0_ns = f.stamp_ns
            t = 0.0
        return self.source.sample(t)

    @staticmethod
    def _hold(q: np.ndarray) -> Any:
        return ref.MinJerkMove(q, [], [])


class _Chain:
    """Two trajectories one after the other."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second
        self.duration = first.duration + second.duration

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if t < self.first.duration:
            return self.first.sample(t)
        return self.second.sample(t - self.first.duration)


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([ReferenceNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
