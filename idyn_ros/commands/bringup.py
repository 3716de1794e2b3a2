"""Start the idyn control graph here (no ros2 launch): the same nodes and parameter files as
launch/<robot>.launch.py, plus the embedded MuJoCo plant.

Nodes: joint_state_buffer, feedforward, controller, doomed, wrench_observer, reference (+ plant).
Parameters: config/<robot>.yaml (gains, presets, rates, topics, timeouts); the options below
override single parameters. The controller configures and activates itself (autostart).

Examples:
  idyn bringup --robot panda --sim mujoco --duration 10
  idyn bringup --robot ur5 --sim mujoco --composed --gains soft --model ur5_hybrid.onnx
  idyn bringup --robot iiwa14 --sim none --composed       # against an already running robot/plant
  idyn bringup --robot panda --clock realtime --set controller.use_feedforward=false
"""

from __future__ import annotations

import argparse

HELP = "start the control nodes (+ MuJoCo plant) for a robot from config/<robot>.yaml"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", required=True, help="panda | iiwa14 | ur5")
    parser.add_argument("--sim", default="mujoco", choices=["mujoco", "none"],
                        help="start the embedded MuJoCo plant (default mujoco) or none (a robot/plant is already "
                             "publishing /joint_states)")
    parser.add_argument("--composed", action="store_true",
                        help="all idyn nodes in ONE process on one executor (default: one process per node)")
    parser.add_argument("--model", default=None, help="exported .onnx model (default: config model_path; empty = "
                                                      "RBD fallback, reported at ERROR)")
    parser.add_argument("--gains", default=None, choices=["soft", "medium", "stiff"],
                        help="gain preset (default: config gain_preset, medium)")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="seconds to run, then stop everything (default 0 = until Ctrl-C)")
    parser.add_argument("--clock", default=None, choices=["lockstep", "realtime"],
                        help="plant clock (default: config, lockstep = sim time, deterministic)")
    parser.add_argument("--nodes", default=None,
                        help="comma-separated subset of joint_state_buffer,feedforward,controller,doomed,"
                             "wrench_observer,reference (default all)")
    parser.add_argument("--executor", default="single", choices=["single", "events"],
                        help="rclpy executor for --composed (default single; events = rclpy's "
                             "EventsExecutor, which delivered no messages to our nodes in tests here)")
    parser.add_argument("--params-file", default=None, help="parameter file (default config/<robot>.yaml)")
    parser.add_argument("--log-dir", default=None, help="write each process's output to DIR/<name>.log")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="extra parameter override for every node (repeatable), e.g. stale_periods=5.0")


def _parse_value(text: str) -> object:
    import yaml

    return yaml.safe_load(text)


def run(args: argparse.Namespace) -> int:
    import time

    from tqdm import tqdm

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.composed import NODE_NAMES
    from idyn_ros.nodes.launcher import Launcher

    overrides: dict[str, object] = {}
    if args.model is not None:
        overrides["model_path"] = args.model
    if args.gains:
        overrides["gain_preset"] = args.gains
    plant = {}
    if args.clock:
        plant["clock_mode"] = args.clock
    if args.clock != "realtime" and args.sim == "mujoco":
        # lockstep: the plant waits for our answer, wall gaps are slowness, not faults (plant has its own timeout)
        overrides.setdefault("stale_periods", 1e5)
    for item in args.set:
        if "=" not in item:
            raise ParameterError(f"--set expects NAME=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        overrides[key.strip()] = _parse_value(value)
    nodes = args.nodes.split(",") if args.nodes else list(NODE_NAMES)
    launcher = Launcher(args.robot, args.sim, args.composed, nodes, overrides, plant, args.params_file,
                        args.executor, args.log_dir)
    print(f"starting {', '.join(launcher.commands())} for {args.robot} with {launcher.params_file}")
    with launcher:
        start = time.monotonic()
        total = args.duration if args.duration > 0 else None
        with tqdm(total=total, unit="s", desc="running", bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} s") as bar:
            try:
                while total is None or time.monotonic() - start < total:
                    time.sleep(0.5)
                    bar.n = round(time.monotonic() - start, 1)
                    bar.refresh()
                    dead = launcher.dead()
                    if dead:
                        print(f"process(es) ended early: {dead}; see --log-dir for their output")
                        return 1
            except KeyboardInterrupt:
                pass
    return 0
