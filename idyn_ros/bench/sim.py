"""Benchmarks of the embedded plant: physics cost, lockstep speed with a controller in another
process over DDS and with an in-process command source (no round trip), and real-time mode
period jitter.

Why separate processes: the acceptance question is "how fast does the loop run with the plant
node in it", and two rclpy nodes in one process share the GIL, which measures Python, not the loop.

``run_benchmarks()`` is called by ``make bench``; ``python -m idyn_ros.bench.sim`` prints the numbers.
The integrator choice and the drift breakdown per plant effect are a study: studies/plant_integrator/.
The echo controller (``python -m idyn_ros.bench.sim controller ...``) answers every /joint_states
with a joint-space PD hold (no model: cheap and deterministic) and stamps the state it answers in
the command's layout label (the latency probe of idyn_ros.nodes.common).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

from idyn_ros.bench import p50_p99, times_us


def physics_step_cost(robot: str = "panda", profile: str = "true", steps: int = 2000) -> dict[str, float]:
    """Wall time of Plant.step (one 1 kHz control period incl. friction and state readout), us."""
    from idyn_ros.sim import Plant

    plant = Plant(robot, profile=profile)
    tau = np.zeros(plant.n)
    return p50_p99(times_us(lambda: plant.step(tau), steps, warmup=100))


def node_tick_cost(robot: str = "panda", ticks: int = 2000) -> dict[str, float]:
    """The plant node's own work per lockstep tick (command callback: validate, step, publish
    /clock + /joint_states), called directly without DDS delivery, us. The rest of a loop period is
    rclpy executor + DDS + the controller."""
    import rclpy
    from rclpy.context import Context
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.plant import PlantNode

    context = Context()
    rclpy.init(context=context)
    try:
        node = PlantNode(context=context, robot=robot, profile="true")
        msg = Float64MultiArray(data=[0.0] * node.plant.n)
        samples = times_us(lambda: node._on_command(msg), ticks, warmup=100)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return p50_p99(samples)


def inprocess_lockstep(robot: str = "panda", seconds: float = 3.0, profile: str = "true") -> dict[str, Any]:
    """Lockstep sim s per wall s with the plant node in the loop but no DDS round trip: an in-process
    command source calls the node's command callback (what the executor runs when a command
    arrives) with a PD hold computed from the /joint_states message the node just published, in
    the same Float64MultiArray form with the stamp label the echo controller sends. The node still
    publishes /clock and /joint_states to DDS, to a matched reader in a second context (its own
    participant, not spun: the writer does its delivery work, nothing reads it back). Being in the
    same process, that delivery may be cheaper than to another process (one loaded run: JointState
    publish p50 6.4 us unmatched, 10.9 us to a spinning reader process).

    The difference to the DDS loop (``loop_benchmark``) is the round trip: executor wake-ups,
    serialisation and delivery both ways, and the controller process.
    """
    import rclpy
    from rclpy.context import Context
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension

    from idyn_ros.nodes.common import HOT_IN, STAMP_LABEL, stamp_to_ns
    from idyn_ros.nodes.plant import PlantNode

    plant_ctx, reader_ctx = Context(), Context()
    rclpy.init(context=plant_ctx)
    rclpy.init(context=reader_ctx)
    try:
        node = PlantNode(context=plant_ctx, robot=robot, profile=profile, command_timeout=10.0)
        reader = rclpy.create_node("idyn_bench_reader", context=reader_ctx)
        reader.create_subscription(JointState, "/joint_states", lambda _msg: None, HOT_IN)
        deadline = time.monotonic() + 10.0
        while node.pub_js.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        matched = node.pub_js.get_subscription_count()
        js = node._js  # the message the node publishes (the source reads what a controller would receive)
        n = node.plant.n
        hold = np.array(js.position)
        kp, kd = 100.0, 10.0
        cmd = Float64MultiArray()
        dim = MultiArrayDimension(label="", size=n, stride=n)
        cmd.layout.dim = [dim]

        def source() -> None:  # the echo controller's work (controller_main), minus DDS
            tau = kp * (hold - np.asarray(js.position)) - kd * np.asarray(js.velocity)
            dim.label = f"{STAMP_LABEL}{stamp_to_ns(js.header.stamp)}"
            cmd.data = tau.tolist()  # stored as array.array('d'), the type rclpy delivers float64[] in

        for _ in range(200):  # warm-up
            source()
            node._on_command(cmd)
        ticks0, t_sim0 = node.ticks, node.plant.time
        callback = np.empty(int(seconds * 50_000))  # s per callback, preallocated (>= 20 us per tick)
        k = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds and k < callback.size:
            source()
            t0 = time.perf_counter()
            node._on_command(cmd)
            callback[k] = time.perf_counter() - t0
            k += 1
        wall = time.perf_counter() - start
        ticks = node.ticks - ticks0
        callback = callback[:k]
        sim = node.plant.time - t_sim0
        moved = float(np.abs(np.asarray(js.position) - hold).max())
        rejected = node.gate.counters.rejected
        reader.destroy_node()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=reader_ctx)
        rclpy.shutdown(context=plant_ctx)
    return {
        "sim_seconds_per_wall_second": sim / wall,
        "ticks": ticks,
        "node_callback_p50_us": float(np.percentile(callback, 50) * 1e6),
        "node_callback_p99_us": float(np.percentile(callback, 99) * 1e6),
        "node_callback_share_of_wall": float(callback.sum() / wall),
        "loop_mean_us": wall / max(ticks, 1) * 1e6,
        "matched_readers": matched,
        "max_drift_from_hold_rad": moved,
        "commands_rejected": rejected,
        "load_average_1min": os.getloadavg()[0],
    }


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("ROS_DOMAIN_ID", str(10 + os.getpid() % 90))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _start_plant(robot: str, clock_mode: str, profile: str, env: dict[str, str]) -> subprocess.Popen:
    args = [sys.executable, "-m", "idyn_ros.nodes.plant", "--ros-args", "-p", f"robot:={robot}",
            "-p", f"clock_mode:={clock_mode}", "-p", f"profile:={profile}", "-p", "diagnostics_period:=0.5"]
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _run_controller(robot: str, seconds: float, env: dict[str, str], timeout: float) -> dict[str, Any]:
    args = [sys.executable, "-m", "idyn_ros.bench.sim", "controller", "--robot", robot, "--seconds", str(seconds)]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"echo controller failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def loop_benchmark(robot: str = "panda", clock_mode: str = "lockstep", seconds: float = 5.0,
                   profile: str = "true") -> dict[str, Any]:
    """Plant node + echo controller, two processes over DDS on loopback; numbers from both ends."""
    env = _env()
    plant = _start_plant(robot, clock_mode, profile, env)
    try:
        return _run_controller(robot, seconds, env, timeout=seconds + 60.0)
    finally:
        plant.terminate()
        try:
            plant.wait(timeout=10)
        except subprocess.TimeoutExpired:
            plant.kill()
            plant.wait()


def controller_main(robot: str, seconds: float) -> int:
    """Echo controller: PD hold at the first received q; prints one JSON line of measurements."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension

    from idyn_ros.nodes.common import COMMAND_OUT, HOT_IN, MONITOR, STAMP_LABEL
    from idyn_ros.nodes.hot_loop import HotLoop
    from idyn_ros.robots import get_robot

    spec = get_robot(robot)
    n = len(spec.joint_names)
    kp, kd = 100.0, 10.0
    cmd = Float64MultiArray()
    dim = MultiArrayDimension(label="", size=n, stride=n)
    cmd.layout.dim = [dim]
    stamps: list[int] = []
    walls: list[float] = []
    diag: dict[str, str] = {}
    hold: list[np.ndarray] = []

    with rclpy.init():
        node = rclpy.create_node("idyn_bench_echo_controller")
        pub = node.create_publisher(Float64MultiArray, f"/{spec.effort_controller}/commands", COMMAND_OUT)

        def on_state(msg: JointState) -> None:
            q = np.asarray(msg.position)
            if not hold:
                hold.append(q.copy())
            tau = kp * (hold[0] - q) - kd * np.asarray(msg.velocity)
            ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            dim.label = f"{STAMP_LABEL}{ns}"
            cmd.data = tau.tolist()
            pub.publish(cmd)
            stamps.append(ns)
            walls.append(time.monotonic())

        def on_diag(msg: DiagnosticArray) -> None:
            for status in msg.status:
                if status.name.startswith("idyn plant"):
                    diag.clear()
                    diag.update({kv.key: kv.value for kv in status.values})

        # the states come through the same lean wait loop our nodes use (idyn_ros/nodes/hot_loop.py)
        loop = HotLoop.for_context(node.context)
        loop.subscribe(JointState, "/joint_states", on_state, HOT_IN)
        loop.start()
        node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, MONITOR)
        # SingleThreadedExecutor: EventsExecutor.spin_once stalls with the Kilted wheels (seen here).
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        deadline = time.monotonic() + 30.0
        while not stamps and time.monotonic() < deadline:  # discovery + plant start-up
            executor.spin_once(timeout_sec=0.1)
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            executor.spin_once(timeout_sec=0.1)
        HotLoop.stop_all()
        executor.shutdown()
        node.destroy_node()

    if len(stamps) < 20:
        print(json.dumps({"error": f"only {len(stamps)} joint states received"}))
        return 1
    skip = len(stamps) // 5  # drop the warm-up fifth
    sim = (stamps[-1] - stamps[skip]) * 1e-9
    wall = walls[-1] - walls[skip]
    periods = np.diff(np.asarray(walls[skip:])) * 1e6
    out = {
        "robot": robot,
        "states_received": len(stamps),
        "sim_seconds": sim,
        "wall_seconds": wall,
        "sim_per_wall": sim / wall if wall > 0 else 0.0,
        "arrival_period_p50_us": float(np.percentile(periods, 50)),
        "arrival_period_p99_us": float(np.percentile(periods, 99)),
        "plant_diagnostics": diag,
    }
    print(json.dumps(out))
    return 0


def run_benchmarks() -> dict[str, Any]:
    """What ``make bench`` records (a few tens of seconds)."""
    results: dict[str, Any] = {
        "physics_step_panda_true": physics_step_cost("panda", "true"),
        "node_tick_panda_true": node_tick_cost("panda"),
    }
    # The same loop two ways: over DDS with the echo controller in another process (what users run),
    # and with an in-process command source calling the node's callback (the plant node's own cost).
    results["lockstep_panda_inprocess"] = inprocess_lockstep("panda", seconds=3.0)
    lock = loop_benchmark("panda", "lockstep", seconds=5.0)
    results["lockstep_panda"] = {
        "sim_seconds_per_wall_second": lock["sim_per_wall"],
        "round_trip_p50_us": lock["arrival_period_p50_us"],
        "round_trip_p99_us": lock["arrival_period_p99_us"],
        "commands_rejected": int(lock["plant_diagnostics"].get("rejected_wrong_length", 0)),
        # the plant's own split of a period (wall): its command callback vs waiting for the answer
        # (DDS both ways + both executors + the echo controller)
        "plant_tick_p50_us": float(lock["plant_diagnostics"].get("tick_p50_us", "nan")),
        "plant_tick_p99_us": float(lock["plant_diagnostics"].get("tick_p99_us", "nan")),
        "plant_answer_wait_p50_us": float(lock["plant_diagnostics"].get("answer_wait_p50_us", "nan")),
        "plant_answer_wait_p99_us": float(lock["plant_diagnostics"].get("answer_wait_p99_us", "nan")),
        "load_average_1min": os.getloadavg()[0],
    }
    rt = loop_benchmark("panda", "realtime", seconds=5.0)
    d = rt["plant_diagnostics"]
    results["realtime_panda"] = {
        # realtime stamps are wall time, so the ratio comes from the plant's own counter
        "sim_seconds_per_wall_second": float(d.get("real_time_factor", "nan")),
        "overruns": int(d.get("realtime_overruns", 0)),
        "plant_period_p50_us": float(d.get("period_p50_us", "nan")),
        "plant_period_p99_us": float(d.get("period_p99_us", "nan")),
        "plant_period_error_p50_us": float(d.get("period_error_p50_us", "nan")),
        "plant_period_error_p99_us": float(d.get("period_error_p99_us", "nan")),
        "state_arrival_period_p50_us": rt["arrival_period_p50_us"],
        "state_arrival_period_p99_us": rt["arrival_period_p99_us"],
        "command_latency_p50_us": float(d.get("latency_p50_us", "nan")),
        "command_latency_p99_us": float(d.get("latency_p99_us", "nan")),
        "watchdog_trips": int(d.get("watchdog_trips", 0)),
    }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what")
    ctl = sub.add_parser("controller", help="run the echo controller (used by the loop benchmarks)")
    ctl.add_argument("--robot", default="panda")
    ctl.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.what == "controller":
        return controller_main(args.robot, args.seconds)
    print(json.dumps(run_benchmarks(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
