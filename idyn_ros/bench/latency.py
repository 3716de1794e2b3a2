"""End-to-end measurements of the control graph against the MuJoCo plant over real DDS.

Latency method: the controller copies the /joint_states stamp into the command's
``layout.dim[0].label`` (``stamp_ns=<int>``); the plant node (real-time clock: stamps are wall
time when published) records ``receive time - stamp`` for every command it gets
(``idyn_ros.nodes.plant``). We run the plant in this process (``PlantRunner``) and read its
latency ring buffer every second, so every tick of the run is counted. A tick is *missed* when no
command answering it arrived within one control period (late or never). Our nodes run in
separate processes (one per node) or composed (one process, one executor), from config/<robot>.yaml.

Tracking/wrench/DOOMED runs use the lockstep clock (sim time): deterministic however loaded the
machine is. A probe node on the plant's executor records ControllerState (position error per
tick), the wrench estimates, the plant's ground truth and AdaptationState.

``run_benchmarks()`` is what ``make bench`` calls (latency only; a few minutes).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

LATENCY_SECONDS = 12.0  # per configuration: ~10k ticks at 1 kHz after warm-up


def initial_positions(robot: str) -> list[float]:
    """Start pose: the last set point of the reference in config/<robot>.yaml (the arm's 'ready' pose)."""
    from idyn_ros.parameters import load
    from idyn_ros.robots import get_robot

    n = get_robot(robot).dof
    return [float(x) for x in load("reference", robot, n=n).setpoints[-n:]]


class Probe:
    """Subscribers on the plant runner's context; call ``attach(runner)`` after it started."""

    def __init__(self) -> None:
        self.controller_states: list[tuple[int, np.ndarray, int, str]] = []
        self.wrench: dict[str, list[tuple[int, np.ndarray]]] = {"direct": [], "momentum": []}
        self.truth: list[tuple[int, np.ndarray, float]] = []
        self.adaptation: list[tuple[int, np.ndarray, np.ndarray, bool, str]] = []
        self.diagnostics: list[tuple[str, int, str]] = []
        self.node: Any = None

    def attach(self, runner: Any) -> Probe:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped

        from idyn_ros.msg import AdaptationState, ControllerState, PlantGroundTruth
        from idyn_ros.nodes.common import HOT_IN, MONITOR

        node = self.node = rclpy.create_node("idyn_probe", context=runner.context)
        self.runner = runner

        def ns(stamp: Any) -> int:
            return stamp.sec * 1_000_000_000 + stamp.nanosec

        node.create_subscription(ControllerState, "/idyn/controller_state", lambda m: self.controller_states.append(
            (ns(m.header.stamp), np.array(m.position_error), m.mode, m.mode_reason)), MONITOR)
        for kind in ("direct", "momentum"):
            node.create_subscription(WrenchStamped, f"/idyn/wrench_estimate/{kind}",
                                     lambda m, k=kind: self.wrench[k].append((ns(m.header.stamp), _wrench(m.wrench))),
                                     MONITOR)
        node.create_subscription(PlantGroundTruth, "/plant/ground_truth", lambda m: self.truth.append(
            (ns(m.header.stamp), _wrench(m.wrench), m.payload_mass)), MONITOR)
        node.create_subscription(AdaptationState, "/idyn/adaptation", lambda m: self.adaptation.append(
            (ns(m.header.stamp), np.array(m.offset), np.array(m.acceleration_error), m.frozen, m.freeze_reason)),
            HOT_IN)
        node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: self.diagnostics.extend(
            (s.name, s.level[0] if isinstance(s.level, bytes) else int(s.level), s.message) for s in m.status),
            MONITOR)
        runner.executor.add_node(node)
        return self

    def call(self, srv_type: Any, name: str, request: Any, timeout: float = 10.0) -> Any:
        client = self.node.create_client(srv_type, name)
        deadline = time.monotonic() + timeout
        while not client.wait_for_service(timeout_sec=0.1):
            if time.monotonic() > deadline:
                raise TimeoutError(f"service {name} not available")
        future = client.call_async(request)
        while not future.done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"service {name} did not answer")
            time.sleep(0.01)
        return future.result()

    def reset_joints(self, robot: str) -> None:
        """Start pose via the plant's ~/reset_joints (initial_positions cannot be passed yet)."""
        from idyn_ros.robots import get_robot
        from idyn_ros.srv import ResetJoints

        req = ResetJoints.Request(joint_names=list(get_robot(robot).joint_names),
                                  positions=initial_positions(robot))
        res = self.call(ResetJoints, "/plant/reset_joints", req)
        if not res.success:
            raise RuntimeError(f"reset_joints failed: {res.message}")

    def sim_time(self) -> float:
        return float(self.runner.node.plant.time)

    def wait_sim(self, t: float, wall_timeout: float) -> bool:
        deadline = time.monotonic() + wall_timeout
        while self.sim_time() < t:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


def _wrench(w: Any) -> np.ndarray:
    return np.array([w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z])


@contextlib.contextmanager
def graph(robot: str, clock: str = "lockstep", composed: bool = False, nodes: Sequence[str] | None = None,
          overrides: Mapping[str, Any] | None = None, plant: Mapping[str, Any] | None = None,
          log_dir: str | Path | None = None, profile: str = "true", executor: str = "single"):
    """Plant in this process (+ probe), our nodes as processes. Yields (runner, probe, launcher)."""
    from idyn_ros.nodes.graph import OUR_NODES
    from idyn_ros.nodes.launcher import GraphSettings, Launcher
    from idyn_ros.nodes.plant import PlantRunner

    params = {"robot": robot, "profile": profile, "clock_mode": clock, **(plant or {})}
    settings = GraphSettings(robot, "mujoco", clock=clock, composed=composed, plant=False,
                             nodes=tuple(nodes or OUR_NODES), overrides=dict(overrides or {}))
    launcher = Launcher(settings, log_dir, executor)
    runner = PlantRunner(executor="single", **params).start()
    try:
        probe = Probe().attach(runner)
        probe.reset_joints(robot)
        launcher.start()
        try:
            yield runner, probe, launcher
        finally:
            launcher.stop()
    finally:
        runner.stop()


def tracking_rmse(probe: Probe, t_start: float, t_end: float) -> float:
    """RMSE of q_d - q in degrees over [t_start, t_end] s of plant time (all joints and ticks)."""
    errs = [e for (t, e, _m, _r) in probe.controller_states if t_start <= t * 1e-9 <= t_end]
    if not errs:
        return float("nan")
    return float(np.degrees(np.sqrt(np.mean(np.square(np.array(errs))))))


def measure_tracking(robot: str, gains: str, feedforward: bool, composed: bool = True,
                     wall_timeout: float = 240.0) -> dict[str, float]:
    """Hold 1 s, 2 s min-jerk move, 2 s back (config/<robot>.yaml reference): RMSE in degrees."""
    over = {"gain_preset": gains, "use_feedforward": feedforward, "use_adaptation": False}
    with graph(robot, "lockstep", composed, ["controller", "reference"], over) as (_runner, probe, launcher):
        ok = probe.wait_sim(5.2, wall_timeout)
        dead = launcher.dead()
    modes = {m for (_t, _e, m, _r) in probe.controller_states}
    reasons = [(round(t * 1e-9, 3), r) for (t, _e, m, r) in probe.controller_states if m != 1][:1]
    return {"hold_rmse_deg": tracking_rmse(probe, 0.2, 1.0), "move_rmse_deg": tracking_rmse(probe, 1.0, 3.0),
            "return_rmse_deg": tracking_rmse(probe, 3.0, 5.0), "completed": bool(ok), "dead": str(dead),
            "safe_mode_seen": any(m not in (1,) for m in modes), "first_safe": reasons,
            "ticks": len(probe.controller_states)}


def _join(est: list[tuple[int, np.ndarray]], truth: list[tuple[int, np.ndarray, float]], t0: float, t1: float
          ) -> tuple[np.ndarray, np.ndarray]:
    """Estimate and truth rows with the same stamp inside [t0, t1] s."""
    tmap = {t: w for (t, w, _m) in truth}
    rows = [(w, tmap[t]) for (t, w) in est if t in tmap and t0 <= t * 1e-9 <= t1]
    if not rows:
        return np.zeros((0, 6)), np.zeros((0, 6))
    e, g = zip(*rows, strict=True)
    return np.array(e), np.array(g)


def measure_wrench(robot: str, force: float = 10.0, push: float = 1.0, wall_timeout: float = 600.0
                   ) -> dict[str, Any]:
    """10 N at the flange along base x, y, z (plant ~/apply_wrench), then a 2 s move without contact.

    RMSE (N) of the force estimate vs the plant's applied force, per axis, for the direct residual and
    the momentum observer; 'steady' skips the first 0.2 s of each push (observer/arm transients).
    """
    from geometry_msgs.msg import Wrench

    from idyn_ros.srv import ApplyWrench

    out: dict[str, Any] = {}
    over = {"use_adaptation": False, "mode": "hold"}
    with graph(robot, "lockstep", True, ["controller", "reference", "wrench_observer"], over) as (_r, probe, _l):
        start = 1.0
        windows = []
        for axis in range(3):
            t0 = start + axis * (push + 0.5)
            if not probe.wait_sim(t0, wall_timeout):
                raise TimeoutError("plant did not reach the push time")
            w = Wrench()
            setattr(w.force, "xyz"[axis], force)
            probe.call(ApplyWrench, "/plant/apply_wrench", ApplyWrench.Request(link="", wrench=w, duration=push))
            windows.append((axis, probe.sim_time(), probe.sim_time() + push))
        probe.wait_sim(windows[-1][2] + 0.2, wall_timeout)
    for kind in ("direct", "momentum"):
        res = {}
        est0, _ = _join(probe.wrench[kind], probe.truth, 0.3, 1.0)  # still, no contact: model-error bias
        bias = est0[:, :3].mean(axis=0) if est0.size else np.zeros(3)
        res["bias_N"] = bias.round(2).tolist()
        for axis, t0, t1 in windows:
            for label, a in (("full", t0), ("steady", t0 + 0.2)):
                est, truth = _join(probe.wrench[kind], probe.truth, a, t1 - 0.01)
                if est.size:
                    err = est[:, :3] - truth[:, :3]
                    res[f"{'xyz'[axis]}_{label}_rmse_N"] = float(np.sqrt(np.mean(err**2)))
                    res[f"{'xyz'[axis]}_{label}_mean_est_N"] = est[:, :3].mean(axis=0).round(2).tolist()
                    res[f"{'xyz'[axis]}_{label}_rmse_bias_removed_N"] = float(np.sqrt(np.mean((err - bias) ** 2)))
        out[kind] = res
    # no contact while moving: false-positive level
    over = {"use_adaptation": False}
    with graph(robot, "lockstep", True, ["controller", "reference", "wrench_observer"], over) as (_r, probe, _l):
        probe.wait_sim(5.0, wall_timeout)
    for kind in ("direct", "momentum"):
        est, truth = _join(probe.wrench[kind], probe.truth, 1.0, 3.0)
        if est.size:
            out[kind]["moving_no_contact_rmse_N"] = float(np.sqrt(np.mean((est[:, :3] - truth[:, :3]) ** 2)))
            out[kind]["moving_no_contact_max_N"] = float(np.abs(est[:, :3]).max())
        est, truth = _join(probe.wrench[kind], probe.truth, 0.3, 1.0)
        if est.size:
            out[kind]["still_no_contact_rmse_N"] = float(np.sqrt(np.mean((est[:, :3] - truth[:, :3]) ** 2)))
    return out


def measure_doomed(robot: str, payload: float = 1.0, learning_rates: Sequence[float] = (0.0, 0.05, 1.0),
                   wall_timeout: float = 600.0) -> list[dict[str, Any]]:
    """Unmodelled payload (plant ~/set_payload, model does not know it): hold 1 s, 2 s move, 2 s back.

    learning_rate 0 = DOOMED disabled (baseline). Reports mean |acceleration error| (rad/s^2) and joint
    RMSE (deg) over the moves, the final offset, and whether the oscillation detector froze learning.
    """
    from geometry_msgs.msg import Point

    from idyn_ros.srv import SetPayload

    results = []
    for lr in learning_rates:
        over = {"use_adaptation": True, "learning_rate": float(lr), "enabled": lr > 0, "gain_preset": "medium"}
        with graph(robot, "lockstep", True, ["controller", "reference", "doomed"], over) as (_r, probe, _l):
            req = SetPayload.Request(mass=payload, com=Point(x=0.0, y=0.0, z=0.05), inertia=[0.0] * 6)
            res = probe.call(SetPayload, "/plant/set_payload", req)
            if not res.success:
                raise RuntimeError(res.message)
            probe.wait_sim(5.0, wall_timeout)
        acc = [np.abs(e) for (t, _o, e, _f, _r) in probe.adaptation if 1.0 <= t * 1e-9 <= 5.0]
        frozen = [r for (_t, _o, _e, f, r) in probe.adaptation if f and "oscillation" in r]
        results.append({
            "learning_rate": lr,
            "mean_abs_acc_error": float(np.mean(acc)) if acc else float("nan"),
            "hold_rmse_deg": tracking_rmse(probe, 0.2, 1.0),
            "move_rmse_deg": tracking_rmse(probe, 1.0, 5.0),
            "final_offset_Nm": probe.adaptation[-1][1].round(3).tolist() if probe.adaptation else [],
            "oscillation_caught": bool(frozen),
            "freeze_reason": frozen[0] if frozen else "",
        })
    return results


def measure_latency(robot: str = "panda", composed: bool = True, seconds: float = LATENCY_SECONDS,
                    warmup: float = 2.0, executor: str = "single", nodes: Sequence[str] | None = None,
                    model_path: str | Path | None = None) -> dict[str, float]:
    """Real-time plant at the config rate, all our nodes active (or ``nodes``); stats of state -> command latency."""
    from idyn_ros.nodes.graph import OUR_NODES
    from idyn_ros.nodes.launcher import GraphSettings, Launcher
    from idyn_ros.nodes.plant import PlantRunner

    params = {"robot": robot, "profile": "true", "clock_mode": "realtime"}
    overrides = {"model_path": str(model_path)} if model_path else {}
    launcher = Launcher(GraphSettings(robot, "mujoco", clock="realtime", composed=composed, plant=False,
                                      nodes=tuple(nodes or OUR_NODES), overrides=overrides), executor=executor)
    runner = PlantRunner(executor="events", **params).start()
    samples: list[np.ndarray] = []
    try:
        Probe().attach(runner).reset_joints(robot)
        launcher.start()
        node = runner.node
        deadline = time.monotonic() + 60.0
        while node._n_latency == 0 and time.monotonic() < deadline:  # wait for the graph to answer
            time.sleep(0.1)
        time.sleep(warmup)
        n0, t0 = node._n_latency, node.ticks
        last = n0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(1.0)
            n = node._n_latency
            buf = node._latency
            idx = np.arange(last, n) % buf.size
            samples.append(buf[idx].copy())
            last = n
        ticks = node.ticks - t0
        dead = launcher.dead()
    finally:
        launcher.stop()
        runner.stop()
    lat = np.concatenate(samples) * 1e6 if samples else np.zeros(0)
    period_us = 1e6 / 1000.0
    on_time = int(np.sum(lat <= period_us))
    missed = max(ticks - on_time, 0)
    return {
        "p50_us": float(np.percentile(lat, 50)) if lat.size else float("nan"),
        "p99_us": float(np.percentile(lat, 99)) if lat.size else float("nan"),
        "max_us": float(lat.max()) if lat.size else float("nan"),
        "missed_per_10k": float(1e4 * missed / max(ticks, 1)),
        "ticks": int(ticks),
        "commands": int(lat.size),
        "dead_processes": len(dead),
    }


def measure_callback_cost(robot: str = "panda", ticks: int = 3000, model_path: str | Path | None = None
                          ) -> dict[str, Any]:
    """Wall time of each node's per-tick callbacks, in process with no DDS wait (what one tick costs the CPU).

    One tick = the reference node's and then the controller's /joint_states callback (the whole controller core
    + the feedforward model + publish), then the monitoring nodes'. Top-level p50/p99/max are the controller's
    state callback (the state -> command path); ``nodes`` has every callback and ``sum_p50_us`` their sum.
    ``model_path``: the exported model the nodes load (default: none, the RBD fallback).
    """
    import rclpy
    from rclpy.context import Context
    from sensor_msgs.msg import JointState

    from idyn_ros.control.controller import MODE_ACTIVE
    from idyn_ros.nodes.controller import ControllerNode
    from idyn_ros.nodes.doomed import DoomedNode
    from idyn_ros.nodes.feedforward import FeedforwardNode
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode
    from idyn_ros.nodes.reference import ReferenceNode
    from idyn_ros.nodes.ros_parameters import to_ros_parameter
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode
    from idyn_ros.parameters import load
    from idyn_ros.robots import get_robot

    ctx = Context()
    rclpy.init(context=ctx)
    n = get_robot(robot).dof

    def make(cls: Any, section: str) -> Any:
        values = load(section, robot, n=n).values()
        if model_path:
            values["model_path"] = str(model_path)
        return cls(context=ctx, parameter_overrides=[to_ros_parameter(k, v) for k, v in values.items()])

    try:
        ctrl, refn = make(ControllerNode, "controller"), make(ReferenceNode, "reference")
        if ctrl.core is None or not ctrl.core.active:
            raise RuntimeError("controller did not activate; see its log")
        if model_path and ctrl.core.ff.fallback:
            raise RuntimeError(f"the controller did not load {model_path}: {ctrl.core.ff.fallback_reason}")
        jsb, ffn = make(JointStateBufferNode, "joint_state_buffer"), make(FeedforwardNode, "feedforward")
        doom, wr = make(DoomedNode, "doomed"), make(WrenchObserverNode, "wrench_observer")
        q0 = np.array(initial_positions(robot))
        msg = JointState(name=list(get_robot(robot).joint_names), position=q0.tolist(), velocity=[0.0] * n,
                         effort=[0.0] * n)
        calls = [("reference", lambda: refn._on_joint_state(msg)), ("controller <- reference",
                 lambda: ctrl._on_reference(refn.out)), ("controller", lambda: ctrl._on_joint_state(msg)),
                 ("joint_state_buffer", lambda: jsb._on_joint_state(msg)),
                 ("feedforward <- reference", lambda: ffn._on_reference(refn.out)),
                 ("feedforward", lambda: ffn._on_joint_state(msg)),
                 ("doomed <- controller_state", lambda: doom._on_controller_state(ctrl.state_msg)),
                 ("doomed", lambda: doom._on_joint_state(msg)),
                 ("wrench_observer <- command", lambda: wr._on_command(ctrl.cmd)),
                 ("wrench_observer", lambda: wr._on_joint_state(msg))]
        times = np.zeros((ticks, len(calls)))
        active = 0
        for k in range(ticks):
            # wall-clock stamps: the controller's stamp-age check must see fresh input, or this times the safe path
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
            msg.position = (q0 + 0.05 * np.sin(2 * np.pi * 0.5 * k * 1e-3)).tolist()
            for c, (_, call) in enumerate(calls):
                t0 = time.perf_counter_ns()
                call()
                times[k, c] = (time.perf_counter_ns() - t0) * 1e-3
            active += ctrl.core.mode == MODE_ACTIVE
        if active < 0.95 * ticks:
            raise RuntimeError(f"controller ACTIVE in only {active}/{ticks} timed ticks ({ctrl.core.reason}): "
                               "the cost would be the safe path's")
        for node in (ctrl, refn, jsb, ffn, doom, wr):
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
    times = times[ticks // 10 :]
    per_node = {name: {"p50_us": float(np.percentile(times[:, c], 50)), "p99_us": float(np.percentile(times[:, c], 99))}
                for c, (name, _) in enumerate(calls)}
    main = times[:, 2]
    return {"p50_us": float(np.percentile(main, 50)), "p99_us": float(np.percentile(main, 99)),
            "max_us": float(main.max()), "nodes": per_node,
            "sum_p50_us": float(sum(v["p50_us"] for v in per_node.values()))}


PING_TOPIC, PONG_TOPIC = "/idyn_bench/ping", "/idyn_bench/pong"


def _lean_wait(wait_set: Any, sub: Any, timeout_ns: int) -> Any:
    """One WaitSet wait on one subscription (no executor); the taken message or None."""
    wait_set.clear_entities()
    wait_set.add_subscription(sub.handle)
    wait_set.wait(timeout_ns)
    if wait_set.get_ready_entities("subscription"):
        info = sub.handle.take_message(sub.msg_type, sub.raw)
        return info[0] if info is not None else None
    return None


def echo_main() -> None:
    """The far end of ``measure_transport_floor``: answer each JointState with a Float64MultiArray, nothing else."""
    import rclpy
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.common import COMMAND_OUT, HOT_IN

    rclpy.init()
    node = rclpy.create_node("idyn_bench_echo", start_parameter_services=False)
    pub = node.create_publisher(Float64MultiArray, PONG_TOPIC, COMMAND_OUT)
    sub = node.create_subscription(JointState, PING_TOPIC, lambda _m: None, HOT_IN)
    out = Float64MultiArray(data=[0.0] * 7)
    wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, node.context.handle)
    while rclpy.ok():
        if _lean_wait(wait_set, sub, 100_000_000) is not None:
            pub.publish(out)


def _ping(ctx: Any, pub: Any, sub: Any, msg: Any, seconds: float, answers: Any = None) -> list[float]:
    """1 kHz: publish ``msg`` (a JointState, its stamp advanced each time), wait up to 5 ms for the answer on ``sub``
    (``answers(reply, stamp_ns)`` tells a reply to this very message; default: any); round trips in us."""
    from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

    wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, ctx.handle)
    rtt: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter_ns()
        stamp = time.time_ns()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
        pub.publish(msg)
        while time.perf_counter_ns() - t0 < 5_000_000:
            reply = _lean_wait(wait_set, sub, 5_000_000 - (time.perf_counter_ns() - t0))
            if reply is not None and (answers is None or answers(reply, stamp)):
                rtt.append((time.perf_counter_ns() - t0) * 1e-3)
                break
        while time.perf_counter_ns() - t0 < 1_000_000:
            time.sleep(50e-6)
    return rtt


def _stats(rtt: list[float], seconds: float) -> dict[str, float]:
    r = np.array(rtt[len(rtt) // 8 :])  # after discovery settles
    return {"p50_us": float(np.percentile(r, 50)), "p99_us": float(np.percentile(r, 99)), "max_us": float(r.max()),
            "answered": len(rtt), "seconds": seconds}


def _wait_matched(pub: Any, sub: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while sub.get_publisher_count() == 0 or pub.get_subscription_count() == 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not appear on DDS within {timeout:.0f} s")
        time.sleep(0.05)


def measure_transport_floor(seconds: float = 8.0) -> dict[str, float]:
    """Round trip JointState -> Float64MultiArray through a second process that does nothing but answer,
    both ends on a bare rcl WaitSet (no executor): the floor under any node's state -> command latency here."""
    import os
    import signal
    import subprocess
    import sys

    import rclpy
    from rclpy.context import Context
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.common import COMMAND_OUT, HOT_IN

    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    ctx = Context()
    rclpy.init(context=ctx)
    proc = subprocess.Popen([sys.executable, "-m", "idyn_ros.bench.latency", "echo"], env=env,
                            stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        node = rclpy.create_node("idyn_bench_ping", context=ctx, start_parameter_services=False)
        pub = node.create_publisher(JointState, PING_TOPIC, COMMAND_OUT)
        sub = node.create_subscription(Float64MultiArray, PONG_TOPIC, lambda _m: None, HOT_IN)
        msg = JointState(name=[f"joint{i}" for i in range(7)], position=[0.0] * 7, velocity=[0.0] * 7,
                         effort=[0.0] * 7)
        _wait_matched(pub, sub, "the echo process")
        rtt = _ping(ctx, pub, sub, msg, seconds)
        node.destroy_node()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
        rclpy.shutdown(context=ctx)
    return _stats(rtt, seconds)


def measure_graph_rtt(robot: str = "panda", composed: bool = True, nodes: Sequence[str] | None = None,
                      model_path: str | Path | None = None, seconds: float = 8.0) -> dict[str, float]:
    """The same pinger as ``measure_transport_floor``, with our nodes instead of the echo process: a JointState
    of the robot (a slow sine about its ready pose) to /joint_states, the round trip ends when the command that
    answers it (its ``stamp_ns`` label) arrives. Real-time clock (no sim time), the model loaded when given."""
    import rclpy
    from rclpy.context import Context
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.common import COMMAND_OUT, STAMP_LABEL
    from idyn_ros.nodes.graph import OUR_NODES
    from idyn_ros.nodes.launcher import GraphSettings, Launcher
    from idyn_ros.robots import get_robot

    overrides = {"model_path": str(model_path)} if model_path else {}
    launcher = Launcher(GraphSettings(robot, "mujoco", clock="realtime", composed=composed, plant=False,
                                      nodes=tuple(nodes or OUR_NODES), overrides=overrides))
    ctx = Context()
    rclpy.init(context=ctx)
    launcher.start()
    try:
        node = rclpy.create_node("idyn_bench_graph_ping", context=ctx, start_parameter_services=False)
        pub = node.create_publisher(JointState, "/joint_states", COMMAND_OUT)
        sub = node.create_subscription(Float64MultiArray, f"/{get_robot(robot).effort_controller}/commands",
                                       lambda _m: None, COMMAND_OUT)
        q0 = np.array(initial_positions(robot))
        msg = JointState(name=list(get_robot(robot).joint_names), position=q0.tolist(), velocity=[0.0] * q0.size,
                         effort=[0.0] * q0.size)
        _wait_matched(pub, sub, "the controller")
        rtt = _ping(ctx, pub, sub, msg, seconds,
                    lambda reply, stamp: reply.layout.dim[0].label == f"{STAMP_LABEL}{stamp}")
        node.destroy_node()
        dead = launcher.dead()
    finally:
        launcher.stop()
        rclpy.shutdown(context=ctx)
    return {**_stats(rtt, seconds), "dead_processes": len(dead)}


def measure_realtime_control(robot: str = "panda", seconds: float = 30.0, model_path: str | Path | None = None,
                             composed: bool = False) -> dict[str, Any]:
    """``idyn bringup --clock realtime`` as a user runs it (separate processes by default), watched from here:
    the fraction of published ControllerStates in ACTIVE, how often the controller went safe and came back (late
    input, e.g. a scheduling stall) and why, and the tracking RMSE of the reference's moves (deg)."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from idyn_ros.msg import ControllerState
    from idyn_ros.nodes.common import MONITOR
    from idyn_ros.nodes.launcher import GraphSettings, Launcher

    overrides = {"model_path": str(model_path)} if model_path else {}
    launcher = Launcher(GraphSettings(robot, "mujoco", clock="realtime", composed=composed, overrides=overrides))
    ctx = Context()
    rclpy.init(context=ctx)
    states: list[tuple[int, str, np.ndarray]] = []
    launcher.start()
    try:
        node = rclpy.create_node("idyn_bench_realtime_probe", context=ctx)
        node.create_subscription(ControllerState, "/idyn/controller_state", lambda m: states.append(
            (m.mode, m.mode_reason, np.array(m.position_error))), MONITOR)
        exe = SingleThreadedExecutor(context=ctx)
        exe.add_node(node)
        deadline = time.monotonic() + 90.0
        while not any(m == ControllerState.MODE_ACTIVE for m, _, _ in states[-5:]):
            if time.monotonic() > deadline:
                raise RuntimeError("the controller never became ACTIVE")
            exe.spin_once(timeout_sec=0.05)
        states.clear()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            exe.spin_once(timeout_sec=0.05)
        dead = launcher.dead()
        node.destroy_node()
    finally:
        launcher.stop()
        rclpy.shutdown(context=ctx)
    modes = np.array([m for m, _, _ in states])
    active = modes == ControllerState.MODE_ACTIVE
    went_safe = int(np.sum(active[:-1] & ~active[1:]))
    came_back = int(np.sum(~active[:-1] & active[1:]))
    reasons: dict[str, int] = {}
    for (m, r, _), was in zip(states[1:], active[:-1], strict=True):
        if was and m != ControllerState.MODE_ACTIVE:
            key = r.split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
    err = np.degrees(np.array([e for m, _, e in states if m == ControllerState.MODE_ACTIVE]))
    return {"seconds": seconds, "states": int(modes.size),
            "active_fraction": float(active.mean()) if modes.size else 0.0,
            "went_safe": went_safe, "came_back": came_back, "safe_reasons": reasons,
            "tracking_rmse_deg": float(np.sqrt((err**2).mean(0)).mean()) if err.size else float("nan"),
            "dead_processes": len(dead), "composed": composed}


def measure_command_rate(starter: str = "launch", composed: bool = False, robot: str = "panda",
                         seconds: float = 10.0) -> dict[str, Any]:
    """Effort commands per wall second with the lockstep MuJoCo plant (sim time), the graph started the way users
    start it: ``ros2 launch idyn_ros <robot>.launch.py mode:=mujoco`` or ``idyn bringup`` (each stopped with one
    SIGINT). In lockstep the plant steps once per command, so this is the simulator's speed too."""
    import os
    import shutil
    import signal
    import subprocess
    import sys

    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.msg import ControllerState
    from idyn_ros.nodes.common import COMMAND_OUT, MONITOR

    if starter == "launch":
        ros2 = shutil.which("ros2") or str(Path(sys.executable).parent / "ros2")
        cmd = [ros2, "launch", "idyn_ros", f"{robot}.launch.py", "mode:=mujoco", f"composed:={str(composed).lower()}"]
    else:
        cmd = [sys.executable, "-m", "idyn_ros.cli", "bringup", "--robot", robot, *(["--composed"] if composed else [])]
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("AMENT_PREFIX_PATH", sys.prefix)
    ctx = Context()
    rclpy.init(context=ctx)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    counts = {"commands": 0, "active": False}
    try:
        node = rclpy.create_node("idyn_bench_rate_probe", context=ctx)
        node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                 lambda _m: counts.__setitem__("commands", counts["commands"] + 1), COMMAND_OUT)
        node.create_subscription(ControllerState, "/idyn/controller_state", lambda m: counts.__setitem__(
            "active", counts["active"] or m.mode == ControllerState.MODE_ACTIVE), MONITOR)
        exe = SingleThreadedExecutor(context=ctx)
        exe.add_node(node)
        deadline = time.monotonic() + 90.0
        while not counts["active"]:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{starter}: the controller never became ACTIVE")
            exe.spin_once(timeout_sec=0.05)
        exe.spin_once(timeout_sec=1.0)
        n0, t0 = counts["commands"], time.monotonic()
        while time.monotonic() - t0 < seconds:
            exe.spin_once(timeout_sec=0.05)
        rate = (counts["commands"] - n0) / (time.monotonic() - t0)
        node.destroy_node()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        rclpy.shutdown(context=ctx)
    return {"starter": starter, "composed": composed, "commands_per_s": rate, "seconds": seconds,
            "exit_code": proc.returncode}


def latency_model() -> Path:
    """The learned model the latency runs load: the Panda hybrid (2S) the experiments topic trained, else a
    briefly trained hybrid of the same architecture (its cost, not its accuracy, matters here)."""
    import os

    from idyn_ros.parameters import load

    work = Path(os.environ.get("IDYN_WORK_DIR", "runs"))
    trained = work / "models" / "panda" / "hybrid_2s" / "model.onnx"
    if trained.is_file():
        return trained
    rate = load("controller", "panda").rate_hz
    path = work / "bench" / f"latency_hybrid_{rate:g}hz" / "model.onnx"
    if not path.is_file():
        from idyn_ros.bench.models import small_hybrid

        # at the nodes' rate: a model of another sample rate is refused and the nodes would time the RBD fallback
        small_hybrid(path.parent, epochs=2, robot_name="panda", rate_hz=rate)
    return path


def run_benchmarks(quick: bool = False) -> dict:
    """Latency /joint_states -> command at 1 kHz with a learned hybrid loaded, on the Panda:

    - ``pinger``: the transport floor (a do-nothing echo process) and our nodes (composed, the controller alone,
      separate processes) answered to the same bare-WaitSet pinger in one run, and the p99 ratios to the floor;
    - ``composed`` / ``separate``: against the real-time plant (its executor receives the commands);
    - ``controller_callback``: every node's per-tick callback in process, no DDS.
    """
    model = latency_model()
    seconds = 4.0 if quick else 8.0
    floor = measure_transport_floor(seconds)
    pinger = {"floor": floor,
              "composed": measure_graph_rtt("panda", True, model_path=model, seconds=seconds),
              "composed_controller_only": measure_graph_rtt("panda", True, ["controller"], model, seconds),
              "separate": measure_graph_rtt("panda", False, model_path=model, seconds=seconds)}
    pinger["p99_ratio_to_floor"] = {k: v["p99_us"] / floor["p99_us"] for k, v in pinger.items() if k != "floor"}
    out = {"model": str(model), "pinger": pinger}
    out["composed"] = measure_latency("panda", composed=True, model_path=model, seconds=seconds + 4)
    out["composed_controller_only"] = measure_latency("panda", composed=True, nodes=["controller"],
                                                      model_path=model, seconds=seconds + 4)
    out["separate"] = measure_latency("panda", composed=False, model_path=model, seconds=seconds + 4)
    rt_seconds = 10.0 if quick else 30.0
    out["command_rate_lockstep"] = {f"{starter}_{'composed' if composed else 'separate'}":
                                    measure_command_rate(starter, composed, seconds=5.0 if quick else 10.0)
                                    for starter in ("launch", "bringup") for composed in (False, True)}
    out["realtime_control"] = {kind: measure_realtime_control("panda", rt_seconds, model, kind == "composed")
                               for kind in ("composed", "separate")}
    out["controller_callback"] = measure_callback_cost("panda", model_path=model)
    out["controller_callback_without_model"] = measure_callback_cost("panda")
    c, ratio = pinger["composed"], pinger["p99_ratio_to_floor"]["composed"]
    print(f"latency (us, p50 / p99): floor {floor['p50_us']:.0f} / {floor['p99_us']:.0f}; composed "
          f"{c['p50_us']:.0f} / {c['p99_us']:.0f} (p99 x{ratio:.2f} the floor); controller callback p50 "
          f"{out['controller_callback']['p50_us']:.0f}", flush=True)
    return out


if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == "echo":
        echo_main()
    elif len(sys.argv) > 1 and sys.argv[1] == "floor":
        print(json.dumps(measure_transport_floor()))
    elif len(sys.argv) > 1 and sys.argv[1] == "callback":
        print(json.dumps({r: measure_callback_cost(r, model_path=latency_model() if r == "panda" else None)
                          for r in ("panda", "iiwa14", "ur5")}))
    elif len(sys.argv) > 2 and sys.argv[1] == "wrench":
        print(json.dumps(measure_wrench(sys.argv[2])), flush=True)
    elif len(sys.argv) > 2 and sys.argv[1] == "doomed":
        for row in measure_doomed(sys.argv[2]):
            print(json.dumps(row), flush=True)
    elif len(sys.argv) > 1 and sys.argv[1] == "tracking":
        robot = sys.argv[2]
        for gains in ("soft", "medium", "stiff"):
            for ff in (True, False):
                print(json.dumps({"robot": robot, "gains": gains, "feedforward": ff,
                                  **measure_tracking(robot, gains, ff)}), flush=True)
    else:
        print(json.dumps(run_benchmarks(), indent=2))
