"""The real ROS 2 pipeline for the demo's recording and the DDS cross-check of one tracking cell.

Processes (all on loopback DDS, ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``, one private
``ROS_DOMAIN_ID`` so parallel runs on this machine do not hear each other):

    recorder (idyn_ros.nodes.recorder, rosbag2 MCAP)   <- /joint_states
    plant    (idyn_ros.nodes.plant, lockstep sim clock) <-> controller (idyn_ros.nodes.controller)
    reference (idyn_ros.nodes.reference)                 -> /idyn/reference

started with ``idyn_ros.nodes.launcher.Launcher`` from the graph description ``idyn bringup`` and the launch
files use (``nodes.graph``: our nodes on the lockstep plant's sim time). This process watches ``/clock`` (sim
time) to know when the trajectory is done and shows it as a progress bar. Only ``/joint_states`` (stamped in sim
time) is recorded: the command topic carries no header, so its bag log time (wall clock) cannot be aligned with
sim-time stamps (and the training target is the joint-state effort anyway, models_cache module docstring); the
reference node publishes BEST_EFFORT, which the recorder's RELIABLE subscription cannot receive, so the
reference is recomputed from its known definition where needed (``cross_check``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.errors import IdynError

RECORD_TOPICS = ("/joint_states",)


def ensure_ros_env() -> dict[str, str]:
    """Loopback discovery and a private domain id (unless the caller chose one); returns the env."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    # decision: a per-process domain (100..199) keeps parallel demos/tests on one machine apart
    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return dict(os.environ)


class ClockWatcher:
    """A tiny rclpy node in this process that follows /clock (sim time, s)."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node("idyn_demo_clock", context=self.context)
        self.sim_time = -1.0
        qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.node.create_subscription(Clock, "/clock", self._on_clock, qos)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def _on_clock(self, msg: Any) -> None:
        self.sim_time = msg.clock.sec + msg.clock.nanosec * 1e-9

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=max(0.0, min(0.05, end - time.monotonic())))

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


def run_pipeline(robot: str, bag: Path, sim_seconds: float, controller: dict[str, Any],
                 plant: dict[str, Any], log_dir: Path, wall_timeout: float, desc: str = "record",
                 progress: bool = True) -> dict[str, Any]:
    """Recorder + plant + controller + reference until ``sim_seconds`` of sim time have passed.

    Returns message counts, wall time, the real-time factor and ``discovery_s`` (nodes started -> plant started,
    once they all subscribe). Raises IdynError when the loop does
    not reach ``sim_seconds`` within ``wall_timeout`` s (wall), naming the logs to read.
    """
    from idyn_ros.nodes.launcher import GraphSettings, Launcher
    from idyn_ros.progress import progress_bar

    env = ensure_ros_env()
    log_dir.mkdir(parents=True, exist_ok=True)
    bag = Path(bag)
    if bag.exists():
        import shutil

        shutil.rmtree(bag)
    rec_log = open(log_dir / "recorder.log", "w")  # noqa: SIM115 (closed below)
    recorder = subprocess.Popen([sys.executable, "-m", "idyn_ros.nodes.recorder", "-o", str(bag), *RECORD_TOPICS],
                                env=env, stdout=rec_log, stderr=subprocess.STDOUT, start_new_session=True)
    watcher = ClockWatcher()
    # composed (decision): controller + reference in one process = one process less to schedule per tick
    nodes = Launcher(GraphSettings(robot, "mujoco", clock="lockstep", composed=True, plant=False,
                                   nodes=("controller", "reference"), overrides=controller), log_dir)
    launchers = [nodes]
    t0 = time.monotonic()
    reached = False
    try:
        # Start order (decision): recorder and nodes first, the plant last, once everyone subscribes to
        # /joint_states. If the plant starts first, the controller's answer to the plant's very first
        # state can be lost before discovery completes; the braked plant then repeats that state with
        # the same stamp, which the controller drops as a duplicate, and lockstep never starts.
        nodes.start()
        deadline = t0 + wall_timeout
        # the recorder, and each node process once: its hot loop shares one subscription per topic (nodes.hot_loop),
        # so the composed controller + reference count as one (waiting for 3 burned the whole 60 s every run)
        expected = 1 + len(nodes.procs)
        while watcher.node.count_subscribers("/joint_states") < expected and time.monotonic() < t0 + 60:
            watcher.spin(0.2)
            if nodes.dead():
                raise IdynError(f"{desc}: node process(es) {nodes.dead()} exited early; see the logs in {log_dir}")
        watcher.spin(0.5)
        # the plant waits for them too: the controller can match it before the recorder does, and a recorder that
        # joins a running lockstep loop misses its start (seen: a bag without its first 1.5 s, or with no state)
        plant_proc = Launcher(GraphSettings(robot, "mujoco", clock="lockstep", nodes=(),
                                            overrides={**plant, "lockstep_subscribers": expected}), log_dir)
        launchers.append(plant_proc)
        plant_proc.start()
        started = time.monotonic()
        discovery_s = started - t0
        with progress_bar(total=round(sim_seconds, 1), desc=desc, unit="sim s", enabled=progress,
                  bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} sim s [{elapsed}<{remaining}]") as bar:
            while time.monotonic() < deadline:
                watcher.spin(0.2)
                shown = round(min(max(watcher.sim_time, 0.0), sim_seconds), 1)
                if shown != bar.n:
                    bar.n = shown
                    bar.refresh()
                if watcher.sim_time < 0.1 and time.monotonic() - started > 30:
                    raise IdynError(f"{desc}: the lockstep loop did not start within 30 s (sim time "
                                    f"{watcher.sim_time:.3f} s); see the logs in {log_dir}")
                if watcher.sim_time >= sim_seconds:
                    reached = True
                    break
                dead = {**nodes.dead(), **plant_proc.dead()}
                if dead:
                    raise IdynError(f"{desc}: node process(es) {dead} exited early; see the logs in {log_dir}")
    finally:
        wall = time.monotonic() - t0
        sim_reached = watcher.sim_time
        for launcher in reversed(launchers):
            launcher.stop()
        if recorder.poll() is None:
            os.killpg(recorder.pid, signal.SIGINT)
        try:
            recorder.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(recorder.pid, signal.SIGKILL)
            recorder.wait(timeout=5)
        rec_log.close()
        watcher.close()
    if not reached:
        raise IdynError(f"{desc}: the lockstep loop reached only {sim_reached:.1f} of {sim_seconds:.1f} sim s "
                        f"in {wall_timeout:.0f} s wall; see the logs in {log_dir}")
    return {"wall_s": wall, "sim_s": sim_reached, "real_time_factor": sim_reached / max(wall, 1e-9),
            "discovery_s": discovery_s, "bag": str(bag)}


def excitation_npz(robot_model: Any, trajectories: list, path: Path, rate_hz: float = 1000.0,
                   transition_s: float = 2.0) -> tuple[Path, list[tuple[float, float]]]:
    """Chain excitation trajectories into one reference ``.npz`` (t, q_d, dq_d, ddq_d) with min-jerk
    transitions between them (``transition_s``, longer where a joint would pass half its velocity or acceleration
    limit, as the reference node's own move-in); returns the path and each excitation's (start, end) time (s, from
    the file's t = 0)."""
    from idyn_ros.control.reference import move_in_duration
    from idyn_ros.data.limits import planning_acceleration_limits
    from idyn_ros.data.trajectories import min_jerk

    acceleration = planning_acceleration_limits(robot_model.name, len(robot_model.joint_names))
    dt = 1.0 / rate_hz
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    windows = []
    t_now = 0.0
    q_end = None
    for traj in trajectories:
        q_begin = traj.evaluate(np.array([0.0]))[0][0]
        if q_end is not None:
            move = max(transition_s, move_in_duration(q_end, q_begin, robot_model.velocity_limit, acceleration))
            parts.append(min_jerk(q_end, q_begin, move, np.arange(0.0, move, dt)))
            t_now += parts[-1][0].shape[0] * dt
        parts.append(traj.evaluate(np.arange(0.0, traj.period, dt)))
        windows.append((t_now, t_now + parts[-1][0].shape[0] * dt))
        t_now = windows[-1][1]
        q_end = traj.evaluate(np.array([traj.period]))[0][0]
    parts_q, parts_dq, parts_ddq = zip(*parts, strict=True)
    q = np.concatenate(parts_q)
    t = np.arange(q.shape[0]) * dt
    np.savez(path, t=t, q_d=q, dq_d=np.concatenate(parts_dq), ddq_d=np.concatenate(parts_ddq),
             joint_names=np.array(robot_model.joint_names))
    return Path(path), windows


def split_recording(dataset: Any, windows: list[tuple[float, float]], offset_s: float, out_dir: Path,
                    stem: str) -> list[Path]:
    """Cut an imported recording into one ``.npz`` per excitation window (t shifted by ``offset_s``,
    the reference's start delay); splits by trajectory, never by sample."""
    paths = []
    for i, (a, b) in enumerate(windows):
        sel = np.flatnonzero((dataset.t >= a + offset_s) & (dataset.t < b + offset_s))
        if sel.size < 100:
            raise IdynError(f"recording {dataset.source} covers only {sel.size} samples of excitation {i} "
                            f"({a + offset_s:.1f}..{b + offset_s:.1f} s); record longer")
        part = dataset.select(sel)
        part.t = part.t - part.t[0]
        part.segment_starts = np.zeros(1, dtype=np.int64)
        paths.append(part.save(out_dir / f"{stem}_{i}.npz"))
    return paths


def window_problem(q: np.ndarray, dq: np.ndarray, q_ref: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                   velocity_limit: np.ndarray) -> str | None:
    """Why a recorded excitation window is not a recording of the arm playing it (None: it is).

    The controller's tracking error itself is no reason (a recording is valid data whatever the tracking), but an arm
    that left its joint limits or ran far past its velocity limits was out of control (seen once under load: 27 rad/s
    and 0.35 rad past a limit, then held still in safe mode for the rest), and one that barely moved was held.
    Decision: past a limit by > 0.05 rad, over 2x a velocity limit (a lagging controller that still tracks overshot to
    1.5x on the demo's excitations), or under half the reference's motion (std of q, mean over joints).
    """
    past = np.maximum(lower - q, q - upper).max(0)
    if past.max() > 0.05:
        j = int(past.argmax())
        return f"joint {j + 1} went {past[j]:.2f} rad past its limit"
    ratio = (np.abs(dq) / velocity_limit).max(0)
    if ratio.max() > 2.0:
        j = int(ratio.argmax())
        return f"joint {j + 1} ran at {ratio[j]:.1f}x its velocity limit"
    moved, asked = float(q.std(0).mean()), float(q_ref.std(0).mean())
    if moved < 0.5 * asked:
        return f"the arm barely moved ({np.degrees(moved):.1f} of {np.degrees(asked):.1f} deg std asked)"
    return None


def _window_metrics(t: np.ndarray, q: np.ndarray, q_d: np.ndarray, a: float, b: float) -> dict[str, float]:
    sel = (t >= a - 1e-9) & (t <= b + 1e-9)
    if not sel.any():
        raise IdynError(f"no state in the measured window {a:.2f}..{b:.2f} s: the recording spans "
                        f"{t[0] if t.size else float('nan'):.3f}..{t[-1] if t.size else float('nan'):.3f} s "
                        f"({t.size} states)")
    e = np.degrees(q_d[sel] - q[sel])
    return {"rmse_deg": float(np.sqrt((e**2).mean(0)).mean()), "final_deg": float(np.abs(e[-1]).mean()),
            "samples": int(sel.sum())}


def cross_check(robot: str, start: np.ndarray, goal: np.ndarray, duration: float, gain: str, work: Path,
                model_path: str = "", hold: float = 0.5, move_in: float = 3.0,
                progress: bool = True) -> dict[str, Any]:
    """One tracking cell both ways: over DDS (plant + controller + reference nodes, lockstep) and
    in-process (``sim.loop.run_episode``), the same reference and gains; returns both metrics.

    Both start at the plant's default pose, move in to ``start`` in ``move_in`` s, then do the measured
    min-jerk move ``start -> goal`` in ``duration`` s. (The plant node cannot take ``initial_positions``
    from the command line yet - its empty-list default is typed BYTE_ARRAY by rclpy - so the move-in
    replaces a reset.) DDS metrics: q from the recorded bag vs the reference node's q_d recomputed at
    the recorded stamps.
    """
    from idyn_ros.control.reference import MinJerkMove
    from idyn_ros.data import load_dataset
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import controller_for, run_episode

    a, b = hold + move_in, hold + move_in + duration
    bag = work / "cross_check_bag"
    controller = {"gain_preset": gain, "model_path": model_path, "fallback": "rbd",
                  "use_adaptation": False,
                  "mode": "setpoints", "setpoints": [float(x) for x in (*start, *goal)],
                  "durations": [float(move_in), float(duration)], "start_delay": float(hold)}
    info = run_pipeline(robot, bag, b + 0.3, controller, {"profile": "true"}, work / "logs_cross_check",
                        wall_timeout=240.0, desc="DDS cross-check", progress=progress)
    ds = load_dataset(bag, robot=robot)
    # the reference node's trajectory: MinJerkMove(first state, [first state, *setpoints], [start_delay,
    # *durations]) sampled at stamp - first stamp + one period (its lookahead); the first stamp is sim 0
    t = ds.t - ds.t[0]
    chain = MinJerkMove(ds.q[0], [ds.q[0], start, goal], [hold, move_in, duration])
    q_d = np.array([chain.sample(tk + 1e-3)[0] for tk in t])
    dds_m = _window_metrics(t, ds.q, q_d, a, b)
    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    q0 = plant.state().q_true.copy()
    ff = make_feedforward(robot_model, "model" if model_path else "rbd", model_path or None)
    # no position-limit trip here: the plant's default pose can sit on a limit (Panda joint 4 at -4 deg)
    # and the DDS nodes have no such check either; this compares the loops, not the safety layer
    inf = np.full(plant.n, np.inf)
    ep = run_episode(plant, controller_for(robot, robot_model, gain, ff, use_adaptation=False),
                     MinJerkMove(q0, [start, goal], [move_in, duration]), hold=hold, q_start=q0, limits=(-inf, inf))
    inproc = {"failed": True, "reason": ep.reason} if ep.failed else _window_metrics(ep.t, ep.q, ep.q_d, a, b)
    return {"robot": robot, "gain": gain, "row": "model" if model_path else "nominal_rbd", "duration_s": duration,
            "dds": {**info, **dds_m}, "in_process": inproc}
