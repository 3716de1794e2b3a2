"""Start the idyn control graph without ``ros2 launch``: the same nodes and parameters as
launch/<robot>.launch.py (both are described by ``idyn_ros.nodes.graph``), plus the embedded MuJoCo plant.

Nodes: joint_state_buffer, feedforward, controller, doomed, wrench_observer, reference (+ plant in mode mujoco).
Parameters: config/<robot>.yaml, then --params-file files, then the options below (they win over every file).
The controller configures and activates itself.

Stopping: Ctrl-C, SIGTERM (systemd, docker, `timeout`), --duration, or the controller, the plant or the composed
process dying (with --observer-only, the wrench observer too): the controller publishes its safe torque, then every
process ends; nothing is left running even if this command is killed with SIGKILL. A monitoring node that dies
(feedforward, wrench_observer, ...) is reported and the rest keeps running; the exit code is then 1.

Output: every node's WARN, ERROR and FATAL lines (and tracebacks) show here, prefixed with the node's name; the
whole output goes to --log-dir. A failure ends the run with exit code 1 and its reason: a process that ends, the
controller failing to configure (e.g. a bad --set gain_preset: nothing would be controlled), a FATAL line. A model
the nodes reject (another robot's, a broken file) is a loud ERROR, not a failure: they run on the RBD fallback, as
with --model none; in mode hardware it is a failure (fallback none, unless your files or --set choose one).

Examples:
  idyn bringup --robot panda --duration 10
  idyn bringup --robot ur5 --composed --gains soft --model ur5_hybrid.onnx
  idyn bringup --robot panda --clock realtime --set use_feedforward=false
  idyn bringup --robot iiwa14 --mode hardware --observer-only --model iiwa.onnx   # beside the lbr stack's launch
  idyn bringup --robot ur5 --mode hardware --observer-only --model ur5.onnx   # a CB3: wrench observer, no torques
"""

from __future__ import annotations

import argparse

HELP = "start the control nodes (+ the MuJoCo plant) for a robot, as ros2 launch would"

def configure(parser: argparse.ArgumentParser) -> None:
    from idyn_ros.nodes.graph import CLOCKS, MODES

    parser.add_argument("--robot", required=True, help="panda | iiwa14 | ur5")
    parser.add_argument("--mode", default="mujoco", choices=MODES,
                        help="mujoco (default): with the embedded plant; hardware | mock | gazebo: our nodes only, "
                             "next to the robot's driver / ros2_control / Gazebo started by their own launch")
    parser.add_argument("--no-plant", action="store_true",
                        help="mode mujoco without starting the plant (one runs already)")
    parser.add_argument("--composed", action="store_true",
                        help="our nodes in ONE process (default: one process per node); lower latency, see README")
    parser.add_argument("--model", default="", help="exported .onnx model (default: the files' model_path; 'none' "
                                                    "= RBD fallback, reported at ERROR)")
    parser.add_argument("--gains", default="", choices=["", "soft", "medium", "stiff"],
                        help="gain preset (default: the files' gain_preset, medium)")
    parser.add_argument("--clock", default="", choices=["", *CLOCKS],
                        help="plant clock (mode mujoco; default: the files', lockstep = sim time, deterministic)")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="wall-clock seconds to run, then stop everything (default 0 = until Ctrl-C or "
                        "SIGTERM); the lockstep plant's sim time can run much slower (about real time on an idle "
                        "2-core machine, 3-5 s of sim time in 30 s on one busy with other work)")
    parser.add_argument("--nodes", default=None,
                        help="comma-separated: only optional nodes (payload_identifier, gripper_compensation) = the "
                             "six (joint_state_buffer,feedforward,controller,doomed,wrench_observer,reference) plus "
                             "them; any of the six = exactly the nodes listed (default: the six)")
    parser.add_argument("--prefix", default="", help="joint/link name prefix ('' = the vendor default)")
    parser.add_argument("--observer-only", action="store_true",
                        help="only joint_state_buffer + wrench_observer, no torque commands (an arm that cannot take "
                             "them, e.g. a CB3 UR; modes hardware and mock)")
    parser.add_argument("--effort-unit", default="", choices=["", "torque", "current"],
                        help="mode hardware: what the driver reports as effort (UR: current unless the driver runs "
                             "with use_currents_as_efforts:=false); default: the files' effort_unit, else the "
                             "driver's default (UR: current; others: torque)")
    parser.add_argument("--executor", default="single", choices=["single", "events"],
                        help="rclpy executor for --composed (default single)")
    parser.add_argument("--params-file", action="append", default=[], metavar="FILE",
                        help="extra parameter file after config/<robot>.yaml (repeatable)")
    parser.add_argument("--log-dir", default=None, help="write each process's output to DIR/<name>.log")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="parameter for every node that declares it (repeatable), e.g. use_feedforward=false; "
                             "a name no node started here reads, or a value another option sets otherwise (--gains "
                             "and gain_preset, --model and model_path, ...), is refused")


def _parse_value(text: str) -> object:
    """NAME=VALUE's value as a parameter file's (YAML, numbers as rcl reads them)."""
    import yaml

    from idyn_ros.errors import ParameterError
    from idyn_ros.parameters import rcl_yaml_loader

    try:
        return yaml.load(text, Loader=rcl_yaml_loader())  # a SafeLoader
    except yaml.YAMLError as exc:
        raise ParameterError(f"--set value {text!r} is not a parameter value: {str(exc).splitlines()[0]}") from None


def run(args: argparse.Namespace) -> int:
    import signal
    import time

    from tqdm import tqdm

    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.graph import GraphSettings, essential_processes, select_nodes
    from idyn_ros.nodes.launcher import Launcher
    from idyn_ros.progress import progress_bar

    if not args.duration >= 0.0:  # also NaN
        raise ParameterError(f"--duration must be >= 0 s (0: until Ctrl-C or SIGTERM), got {args.duration:g}")
    if args.executor != "single" and not args.composed:  # each node process runs its own: the option reached none
        raise ParameterError(f"--executor {args.executor} applies to --composed only (one process per node runs "
                             "each node's own executor)")
    if args.log_dir:  # before any process starts
        from idyn_ros.commands import writable_output

        writable_output(args.log_dir, "--log-dir", folder=True)
    overrides: dict[str, object] = {}
    for item in args.set:
        if "=" not in item:
            raise ParameterError(f"--set expects NAME=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        overrides[key.strip()] = _parse_value(value)
    nodes = select_nodes([n.strip() for n in (args.nodes or "").split(",")])
    settings = GraphSettings(args.robot, args.mode, args.model, args.gains, args.prefix, args.clock, args.composed,
                             not args.no_plant, nodes, tuple(args.params_file), overrides,
                             observer_only=args.observer_only, effort_unit=args.effort_unit)
    launcher = Launcher(settings, args.log_dir, args.executor, watch=True)
    print(f"starting {', '.join(settings.processes)} for {args.robot} (mode {args.mode}) with "
          f"{', '.join(str(f) for f in settings.files)}", flush=True)
    stop: list[str] = []

    def request_stop(signum: int, _frame: object) -> None:
        stop.append(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    reported: set[str] = set()
    code = 0
    essential = essential_processes(settings.observer_only)
    failed: set[str] = set()

    def show() -> int:
        """Print the nodes' lines and new failures; 1 once a node failed."""
        for node, line in launcher.lines():
            tqdm.write(f"{node}: {line}")
        for node, why in list(launcher.failures.items()):
            if node not in failed:
                failed.add(node)
                tqdm.write(f"idyn bringup: {node} failed: {why}")
        return 1 if failed else 0

    try:
        with launcher:
            start = time.monotonic()
            total = args.duration if args.duration > 0 else None
            shape = "{l_bar}{bar}| {n:.0f}/{total_fmt} s"
            with progress_bar(total=total, unit="s", desc="running", bar_format=shape) as bar:
                while not stop and (total is None or time.monotonic() - start < total):
                    time.sleep(0.2)
                    elapsed = time.monotonic() - start
                    bar.n = round(min(elapsed, total) if total else elapsed, 1)  # the last sleep overshoots
                    bar.refresh()
                    code = max(code, show())
                    for name, rc in launcher.dead().items():
                        if name not in reported:
                            reported.add(name)
                            code = 1
                            why = launcher.last_line.get(name)
                            tqdm.write(f"idyn bringup: process {name} ended (exit code {rc})"
                                       + (f"; last: {why}" if why else "")
                                       + ("" if name in essential else "; the other nodes run on without it"))
                    if (reported | failed) & essential:
                        tqdm.write("idyn bringup: nothing is controlling any more: stopping the graph")
                        break
            if stop:
                first = " (the controller sends its safe torque first)" if "controller" in settings.active_nodes else ""
                tqdm.write(f"idyn bringup: {stop[0]}: stopping{first}")
        code = max(code, show())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code and not args.log_dir:
        print("idyn bringup: failed (exit code 1); --log-dir DIR keeps every node's whole output", flush=True)
    return code
