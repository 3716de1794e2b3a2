"""``ros2 launch idyn_ros <robot>.launch.py`` for real (the launch wheels, make setup) and the modes that need packages
absent here, rendered through the real launch file.

Live (mode mujoco, one robot each): the controller is ACTIVE with the gains the argument asked for, commands
flow, every node name is unique, and one SIGINT to the process group (a terminal's Ctrl-C) ends everything cleanly
within a few seconds, the controller's last command being its safe torque.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[2]
ROS2 = Path(sys.prefix) / "bin" / "ros2"
needs_launch = pytest.mark.skipif(not ROS2.is_file(), reason="ros2 CLI not installed (make setup installs it from "
                                                             "../shared/wheels/ros2-kilted)")


def _launch(probe, robot, *args):
    return subprocess.Popen([str(ROS2), "launch", "idyn_ros", f"{robot}.launch.py", *args], env=probe.env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


@needs_launch
@pytest.mark.parametrize(("robot", "gains", "composed"), [("panda", "soft", "false"), ("iiwa14", "stiff", "false"),
                                                          ("ur5", "soft", "true")])
def test_mujoco_mode_runs_with_the_gains_asked_for_and_stops_on_one_sigint(graph_probe, robot, gains, composed):
    from idyn_ros.msg import ControllerState

    probe = graph_probe
    proc = _launch(probe, robot, "mode:=mujoco", f"gains:={gains}", f"composed:={composed}")
    try:
        assert probe.spin_until(lambda: any(s.mode == ControllerState.MODE_ACTIVE for s in probe.states), 90), \
            "the controller never reported ACTIVE"
        active = [s for s in probe.states if s.mode == ControllerState.MODE_ACTIVE][-1]
        assert active.gain_preset == gains
        n0 = len(probe.commands)
        # a count, not a rate: a lockstep plant on a loaded 2-core CI machine runs well below real time
        assert probe.spin_until(lambda: len(probe.commands) - n0 > 50, 20), \
            f"commands do not flow: {len(probe.commands) - n0} in 20 s"
        names = probe.node.get_node_names_and_namespaces()
        ours = [n for n, _ in names if not n.startswith("_") and n != "launch_probe"]
        expected = {"plant", "joint_state_buffer", "feedforward", "controller", "doomed", "wrench_observer",
                    "reference"}
        probe.spin_until(lambda: expected <= {n for n, _ in probe.node.get_node_names_and_namespaces()}, 10)
        names = probe.node.get_node_names_and_namespaces()
        ours = [n for n, _ in names if not n.startswith("_") and n != "launch_probe"]
        assert expected <= set(ours) and len(ours) == len(set(ours)), f"node names not unique: {sorted(ours)}"
        children = probe.descendants(proc.pid)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the launch process and every node get it
        proc.wait(timeout=20)
        exit_s = time.monotonic() - t0
        probe.spin(0.3)
        log = proc.stdout.read()
        assert proc.returncode == 0, log[-3000:]
        assert exit_s < 10, f"took {exit_s:.1f} s to stop"
        assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
        assert "exit code -2" not in log and "exit code 1" not in log, log[-3000:]
        # lockstep: the plant waits for each answer, so no state is ever late (a lagging /clock once tripped it)
        assert "stale joint state" not in log, [line for line in log.splitlines() if "stale" in line][:4]
        left = [p for p in children if Path(f"/proc/{p}").exists()]
        assert not left, f"processes left running: {left}"
        label, last = probe.commands[-1]
        assert label == "stamp_ns=-1", f"the last command answers a state ({label}), not the stop"
        print(f"{robot}: stopped in {exit_s:.2f} s; last command {np.round(last, 2)}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@needs_launch
def test_a_node_that_cannot_start_stops_the_whole_launch_with_its_reason(graph_probe, tmp_path):
    """A parameter file value that stops a node at start-up used to leave the launch running without that node
    (``idyn bringup`` stopped, exit 1): now the launch stops every process too, says which node and why, exits 1."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("/**/controller:\n  ros__parameters:\n    damping_ratio: .nan\n")
    t0 = time.monotonic()
    proc = _launch(graph_probe, "panda", "mode:=mujoco", "nodes:=controller", f"params_file:={bad}")
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, out[-3000:]
    assert ("controller exited with code 2 (parameter damping_ratio contains nan (values must be finite)); "
            "stopping the launch") in out, out[-3000:]
    assert "YAML integers" not in out, out[-3000:]  # that hint is for an integer given for a double only
    assert "[plant-1]: process has finished cleanly" in out, out[-3000:]  # stopped by the launch, not left running
    assert "Timeout" not in out and "exit code -" not in out, out[-3000:]  # no node outlasted its stop deadline
    print(f"stopped in {time.monotonic() - t0:.1f} s")


@needs_launch
def test_a_failing_node_the_graph_can_run_without_is_reported_and_the_rest_runs_on(graph_probe, tmp_path):
    """As ROS 1's required nodes and `idyn bringup`: only the controller, the plant or the composed process stop the
    launch; a wrench observer that cannot start is an ERROR line, and the arm stays controlled."""
    from idyn_ros.msg import ControllerState

    probe = graph_probe
    bad = tmp_path / "bad.yaml"
    bad.write_text("/**/wrench_observer:\n  ros__parameters:\n    observer_gain: .nan\n")
    said = ("ERROR: wrench_observer exited with code 2 (parameter observer_gain contains nan (values must be "
            "finite)); the other nodes run on without it")
    proc = _launch(probe, "panda", "mode:=mujoco", "nodes:=controller,wrench_observer", f"params_file:={bad}")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        assert probe.spin_until(lambda: any(s.mode == ControllerState.MODE_ACTIVE for s in probe.states), 90), \
            "the controller never reported ACTIVE"
        # the failed node's exit first (a loaded machine reported it only after the SIGINT, and then not at all)
        assert probe.spin_until(lambda: any(said in line for line in lines), 60), "".join(lines)[-3000:]
        n0 = len(probe.commands)
        assert probe.spin_until(lambda: len(probe.commands) - n0 > 50, 20), "commands do not flow after it"
        assert proc.poll() is None, "the launch stopped"
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=10)
    assert proc.returncode == 0, "".join(lines)[-3000:]


def _render(robot, ros2_control=True, **arguments):
    """Evaluate the real launch file for ``arguments`` as ros2 launch would: which Node actions run, with what.
    ``ros2_control``: as on a ROS 2 installation with ros2_control (absent here), else the argument check sees that
    robot_state_publisher, controller_manager etc. are missing."""
    from unittest import mock

    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.launch_description_sources import get_launch_description_from_python_launch_file
    from launch_ros.actions import Node

    from launch import LaunchContext

    ld = get_launch_description_from_python_launch_file(str(ROOT / "launch" / f"{robot}.launch.py"))
    installed = mock.patch.object(sys.modules["idyn_common"], "_missing_packages", lambda settings: [], create=True)
    context = LaunchContext()
    context.launch_configurations.update({k: str(v) for k, v in arguments.items()})
    nodes = {}
    for entity in ld.entities:
        if isinstance(entity, DeclareLaunchArgument | OpaqueFunction):  # the declarations, then the argument check
            with installed if ros2_control else contextlib.nullcontext():
                entity.visit(context)
        elif isinstance(entity, Node) and (entity.condition is None or entity.condition.evaluate(context)):
            entity._perform_substitutions(context)
            params = [path for path, is_file in (entity._Node__expanded_parameter_arguments or []) if is_file]
            key = entity._Node__node_executable if isinstance(entity._Node__node_executable, str) else None
            name = key or "".join(s.perform(context) for s in entity._Node__node_executable)
            nodes.setdefault(name, []).append({"params": [yaml.safe_load(Path(p).read_text()) for p in params],
                                               "files": params, "cmd": entity.cmd,
                                               "args": [_perform(part, context) for part in entity.cmd[1:]]})
    return nodes


def _perform(part, context):
    """One command-line word of a launch Node, substituted (ours and text; others as their description)."""
    try:
        return "".join(s.perform(context) for s in part)
    except Exception:  # e.g. a package lookup of a package not installed here
        return " ".join(s.describe() for s in part)


@needs_launch
@pytest.mark.parametrize("robot", ["panda", "iiwa14"])  # the UR5 preset: refused (test_graph_observer_only)
def test_hardware_mode_renders_gravity_subtraction_and_the_vendor_control_stack(robot):
    from idyn_ros.robots import get_robot

    nodes = _render(robot, mode="hardware", gains="stiff", prefix="")
    assert {"robot_state_publisher", "ros2_control_node", "spawner", "controller"} <= set(nodes)
    assert "plant" not in nodes
    ctrl = nodes["controller"][0]["params"][0]["/controller"]["ros__parameters"]
    assert ctrl["subtract_gravity"] is True and ctrl["gain_preset"] == "stiff" and ctrl["use_sim_time"] is False
    wrench = nodes["wrench_observer"][0]["params"][0]["/wrench_observer"]["ros__parameters"]
    assert wrench["torque_source"] == "effort"
    urdf = next(iter(nodes["ros2_control_node"][0]["params"][0].values()))["ros__parameters"]["robot_description"]
    assert "<ros2_control" in urdf and "mock_components" not in urdf  # the vendor's hardware plugin
    controllers = yaml.safe_load(Path(nodes["ros2_control_node"][0]["files"][1]).read_text())
    assert controllers[get_robot(robot).effort_controller]["ros__parameters"]["joints"] == \
        list(get_robot(robot).joint_names)
    spawned = [c["args"][0] for c in nodes["spawner"]]
    position = get_robot(robot).position_controller  # the iiwa14's FRI torque mode takes a position with each torque
    assert spawned == ["joint_state_broadcaster", get_robot(robot).effort_controller, *filter(None, [position])]
    if position:
        assert ctrl["position_command_topic"] == f"/{position}/commands"
        assert controllers[position]["ros__parameters"]["interface_name"] == "position"
        assert controllers["controller_manager"]["ros__parameters"]["update_rate"] == ctrl["rate_hz"] == 500
    # a real arm holds where it is: config/<robot>.yaml's demonstration move (mode setpoints) is for the simulators
    assert nodes["reference"][0]["params"][0]["/reference"]["ros__parameters"]["mode"] == "hold"


def _exit_handlers(robot, **arguments):
    """The launch description's OnProcessExit handlers and its Node actions by executable and arguments, after the
    argument declarations ran for ``arguments`` (as `_render`)."""
    from unittest import mock

    from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler
    from launch.event_handlers import OnProcessExit
    from launch.launch_description_sources import get_launch_description_from_python_launch_file
    from launch_ros.actions import Node

    from launch import LaunchContext

    ld = get_launch_description_from_python_launch_file(str(ROOT / "launch" / f"{robot}.launch.py"))
    installed = mock.patch.object(sys.modules["idyn_common"], "_missing_packages", lambda settings: [], create=True)
    context = LaunchContext()
    context.launch_configurations.update({k: str(v) for k, v in arguments.items()})
    handlers, nodes = [], []
    for entity in ld.entities:
        if isinstance(entity, DeclareLaunchArgument | OpaqueFunction):
            with installed:
                entity.visit(context)
        elif isinstance(entity, RegisterEventHandler) and isinstance(entity.event_handler, OnProcessExit):
            handlers.append(entity.event_handler)
        elif isinstance(entity, Node):
            words = [str(getattr(a, "text", a)) for a in (entity._Node__arguments or [])]
            nodes.append((entity._Node__node_executable, words, entity))
    return handlers, nodes, context


@pytest.mark.parametrize("which", ["effort_controller", "ros2_control_node"])
def test_on_hardware_a_robot_side_process_that_fails_stops_the_launch_with_its_reason(which):
    """Nothing reaches the arm without ros2_control_node and the effort controller: a spawner that could not activate
    it (a UR on PolyScope < 5.23 refuses the effort interface, a driver whose on_init failed) ended with exit code 1
    while our controller ran on, ACTIVE, commanding a controller that was not running (one switched on later by hand
    would have pulled the arm back to the pose held at start)."""
    pytest.importorskip("launch_ros")
    from launch.events.process import ProcessExited

    handlers, nodes, context = _exit_handlers("panda", mode="hardware")
    if which == "ros2_control_node":
        action = next(a for exe, _, a in nodes if exe == "ros2_control_node")
    else:
        action = next(a for exe, words, a in nodes if exe == "spawner" and which in words)
    exe = "spawner" if which != "ros2_control_node" else which
    event = ProcessExited(action=action, name=f"{exe}-9", cmd=[exe], cwd=None, env=None, pid=1, returncode=1)
    with pytest.raises(Exception, match=f"{which}.*exited with code 1.*stopping the launch"):
        for handler in handlers:
            handler.handle(event, context)
    ok = ProcessExited(action=action, name=f"{exe}-9", cmd=[exe], cwd=None, env=None, pid=1, returncode=0)
    for handler in handlers:  # a spawner that activated its controller ends with 0: nothing to say
        handler.handle(ok, context)


def test_a_payload_in_the_urdf_is_refused_where_nothing_reads_its_inertia():
    """payload_mass:= on hardware reached only robot_state_publisher and the driver's URDF: our nodes ran without it."""
    pytest.importorskip("launch_ros")
    for mode in ("hardware", "mock"):
        with pytest.raises(Exception, match=r"\['payload_mass'\] put a payload into the URDF.*~/set_payload"):
            _render("panda", mode=mode, payload_mass="1.0")
    assert _render("panda", mode="hardware", robot_ip="10.0.0.2")  # the driver's own arguments stay


def test_on_hardware_a_model_the_nodes_reject_stops_the_launch(tmp_path):
    """On a real arm a rejected model:= (another robot's) ran the arm on the nominal URDF with an ERROR line."""
    pytest.importorskip("launch_ros")
    model = tmp_path / "m.onnx"
    model.write_text("not a model")
    last = _render("panda", mode="hardware", model=str(model))["controller"][0]["params"][0]["/controller"]
    assert last["ros__parameters"]["fallback"] == "none"
    mine = tmp_path / "mine.yaml"
    mine.write_text("/**:\n  ros__parameters:\n    fallback: gravity\n")
    nodes = _render("panda", mode="hardware", model=str(model), params_file=str(mine))
    assert "fallback" not in nodes["controller"][0]["params"][0]["/controller"]["ros__parameters"]  # the file's
    sim = _render("panda", mode="mujoco", model=str(model))["controller"][0]["params"][0]["/controller"]
    assert "fallback" not in sim["ros__parameters"]  # the simulators run on the nominal URDF, loudly


def test_on_hardware_the_reference_moves_only_when_the_user_asks(tmp_path):
    """`ros2 launch ... mode:=hardware` swung a real arm through the robot file's 2 s demonstration move at start."""
    pytest.importorskip("launch_ros")
    mine = tmp_path / "excite.yaml"
    mine.write_text("/**/reference:\n  ros__parameters:\n    mode: npz\n    npz_path: /data/excite.npz\n")
    nodes = _render("panda", mode="hardware", params_file=str(mine))
    last = nodes["reference"][0]["params"][0]["/reference"]["ros__parameters"]
    assert "mode" not in last  # the user's file decides
    assert nodes["reference"][0]["params"][0]["/**/reference"]["ros__parameters"]["mode"] == "npz"
    sim = _render("panda", mode="mujoco")["reference"][0]["params"][0]
    assert "mode" not in sim["/reference"]["ros__parameters"]  # the simulators keep the demonstration move


def test_launch_arguments_win_over_a_users_parameter_file(tmp_path):
    pytest.importorskip("launch_ros")
    mine = tmp_path / "mine.yaml"
    mine.write_text("/**/controller:\n  ros__parameters:\n    gain_preset: stiff\n    damping_ratio: 0.9\n"
                    "/controller:\n  ros__parameters:\n    gain_preset: medium\n")
    nodes = _render("panda", mode="mock", gains="soft", params_file=str(mine))
    params = nodes["controller"][0]["params"][0]
    assert list(params)[-1] == "/controller"
    assert params["/controller"]["ros__parameters"]["gain_preset"] == "soft"
    assert params["/**/controller"]["ros__parameters"]["damping_ratio"] == 0.9  # the file's other values stay
    assert nodes["controller"][0]["params"][0]["/controller"]["ros__parameters"]["subtract_gravity"] is False
    assert "robot_state_publisher" in nodes and "plant" not in nodes
    with pytest.raises(Exception, match="not found"):
        _render("panda", mode="mock", params_file=str(tmp_path / "missing.yaml"))


def test_gazebo_mode_gets_the_controllers_file_and_sim_time():
    pytest.importorskip("launch_ros")
    nodes = _render("iiwa14", mode="gazebo", prefix="left_")
    urdf = next(iter(nodes["robot_state_publisher"][0]["params"][0].values()))["ros__parameters"]["robot_description"]
    assert "gz_ros2_control" in urdf
    controllers_file = urdf.split("<parameters>")[1].split("</parameters>")[0].strip()
    joints = yaml.safe_load(Path(controllers_file).read_text())["effort_controller"]["ros__parameters"]["joints"]
    from idyn_ros.robots import get_robot

    assert joints == list(get_robot("iiwa14").with_prefix("left_").joint_names)  # the prefix reaches ros2_control
    assert {"create", "parameter_bridge", "spawner"} <= set(nodes)
    for node in ("controller", "doomed", "wrench_observer"):
        assert nodes[node][0]["params"][0][f"/{node}"]["ros__parameters"]["use_sim_time"] is True


def test_mujoco_mode_passes_the_prefix_to_the_plant_and_starts_no_robot_state_publisher():
    pytest.importorskip("launch_ros")
    nodes = _render("panda", mode="mujoco", prefix="fr3_", clock="realtime")
    assert "robot_state_publisher" not in nodes and "ros2_control_node" not in nodes
    plant = nodes["plant"][0]["params"][0]["/plant"]["ros__parameters"]
    assert plant == {"prefix": "fr3_", "clock_mode": "realtime"}
    ctrl = nodes["controller"][0]["params"][0]["/controller"]["ros__parameters"]
    assert ctrl["prefix"] == "fr3_" and ctrl["use_sim_time"] is False


@needs_launch
def test_ros2_param_get_on_a_hardware_mode_controller(graph_probe):
    """The rendered hardware parameter set, read back with the real `ros2 param get` from a running controller."""
    files = _render("panda", mode="hardware")["controller"][0]["files"]
    env = graph_probe.env
    node = subprocess.Popen([str(Path(sys.prefix) / "lib" / "idyn_ros" / "controller"), "--ros-args", "-r",
                             "__node:=controller", "--params-file", files[0]], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = ""
        for _ in range(30):
            got = subprocess.run([str(ROS2), "param", "get", "--no-daemon", "/controller", "subtract_gravity"],
                                 env=env, capture_output=True, text=True, timeout=30)
            out = got.stdout
            if "value is" in out:
                break
            time.sleep(0.5)
        assert out.strip() == "Boolean value is: True", out
    finally:
        os.killpg(node.pid, signal.SIGINT)
        node.wait(timeout=20)
        assert node.returncode == 0, node.stdout.read()[-2000:]


@needs_launch
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_stopping_ros2_launch_itself_leaves_nothing_and_the_safe_torque_applied(graph_probe, how):
    """systemd/docker stop the launch process alone (SIGTERM), or it gets killed (SIGKILL): our nodes still stop,
    and the controller's last command is its safe torque."""
    from idyn_ros.msg import ControllerState

    probe = graph_probe
    proc = _launch(probe, "panda", "mode:=mujoco")
    try:
        assert probe.spin_until(lambda: any(s.mode == ControllerState.MODE_ACTIVE for s in probe.states), 90)
        children = probe.descendants(proc.pid)
        t0 = time.monotonic()
        os.kill(proc.pid, getattr(signal, how))
        proc.wait(timeout=30)
        end = time.monotonic() + 15
        while time.monotonic() < end and [p for p in children if Path(f"/proc/{p}").exists()]:
            time.sleep(0.1)
        left = [p for p in children if Path(f"/proc/{p}").exists()]
        assert not left, f"left running after {how} of ros2 launch: {left}"
        probe.spin(0.5)
        assert probe.commands[-1][0] == "stamp_ns=-1"
        print(f"{how} of ros2 launch: everything stopped within {time.monotonic() - t0:.1f} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_ur5_observer_only_on_hardware_starts_the_buffer_and_the_observer_and_nothing_that_commands():
    pytest.importorskip("launch_ros")
    nodes = _render("ur5", mode="hardware", observer_only="true")
    assert set(nodes) == {"joint_state_buffer", "wrench_observer"}, sorted(nodes)  # the driver's launch runs the arm
    wrench = nodes["wrench_observer"][0]["params"][0]["/wrench_observer"]["ros__parameters"]
    assert wrench["torque_source"] == "effort" and wrench["effort_unit"] == "current"  # the xacro default: currents
    buffer = nodes["joint_state_buffer"][0]["params"][0]["/joint_state_buffer"]["ros__parameters"]
    assert wrench["rate_hz"] == buffer["rate_hz"] == 125.0  # a CB3 publishes at 125 Hz, not the nodes' 1 kHz
    composed = _render("ur5", mode="hardware", observer_only="true", composed="true")
    assert set(composed) == {"composed"}
    args = composed["composed"][0]["args"]
    assert args[args.index("--nodes") + 1] == "joint_state_buffer,wrench_observer", args
    assert set(composed["composed"][0]["params"][0]) >= {"/joint_state_buffer", "/wrench_observer"}
    assert "/controller" not in composed["composed"][0]["params"][0]


def test_a_users_rate_wins_over_the_drivers_on_hardware(tmp_path):
    pytest.importorskip("launch_ros")
    mine = tmp_path / "rate.yaml"
    mine.write_text("/**:\n  ros__parameters:\n    rate_hz: 500.0\n")
    nodes = _render("ur5", mode="hardware", observer_only="true", params_file=str(mine))
    assert "rate_hz" not in nodes["wrench_observer"][0]["params"][0]["/wrench_observer"]["ros__parameters"]
    mock = _render("ur5", mode="mock", observer_only="true")  # our own ros2_control runs at 1 kHz
    assert "rate_hz" not in mock["wrench_observer"][0]["params"][0]["/wrench_observer"]["ros__parameters"]
    iiwa = _render("iiwa14", mode="hardware", observer_only="true")  # lbr_fri_ros2_stack: 100 Hz
    assert iiwa["wrench_observer"][0]["params"][0]["/wrench_observer"]["ros__parameters"]["rate_hz"] == 100.0
    buffer = iiwa["joint_state_buffer"][0]["params"][0]["/joint_state_buffer"]["ros__parameters"]
    assert buffer["accel_cutoff_hz"] == 40.0  # its 50 Hz default is the Nyquist frequency at 100 Hz: refused there
    panda = _render("panda", mode="hardware")  # franka_ros2 at 1 kHz: the default
    assert "rate_hz" not in panda["controller"][0]["params"][0]["/controller"]["ros__parameters"]


def test_ur5_observer_only_in_mock_keeps_the_robot_side_but_spawns_no_effort_controller():
    pytest.importorskip("launch_ros")
    nodes = _render("ur5", mode="mock", observer_only="true")
    assert {"robot_state_publisher", "ros2_control_node", "joint_state_buffer", "wrench_observer"} <= set(nodes)
    spawned = [c["args"][0] for c in nodes["spawner"]]
    assert spawned == ["joint_state_broadcaster"], spawned
    assert "controller" not in nodes and "feedforward" not in nodes


@pytest.mark.parametrize("mode", ["mujoco", "gazebo"])
def test_observer_only_is_refused_where_the_arm_needs_our_torques(mode):
    pytest.importorskip("launch_ros")
    with pytest.raises(Exception, match="observer_only"):
        _render("ur5", mode=mode, observer_only="true")


def test_use_currents_as_efforts_reaches_the_wrench_observer():
    pytest.importorskip("launch_ros")
    for value, unit in (("true", "current"), ("false", "torque")):
        nodes = _render("ur5", mode="hardware", observer_only="true", use_currents_as_efforts=value)
        wrench = nodes["wrench_observer"][0]["params"][0]["/wrench_observer"]["ros__parameters"]
        assert wrench["effort_unit"] == unit
    panda = _render("panda", mode="hardware")["wrench_observer"][0]["params"][0]["/wrench_observer"]
    assert "effort_unit" not in panda["ros__parameters"]  # no such argument: the files' (auto) decide


def test_the_nodes_argument_starts_the_optional_payload_nodes_and_refuses_unknown_ones():
    pytest.importorskip("launch_ros")
    ours = "joint_state_buffer,feedforward,controller,doomed,wrench_observer,reference"
    nodes = _render("panda", mode="mujoco", nodes=f"{ours},payload_identifier")
    assert {"payload_identifier", "controller", "plant"} <= set(nodes) and "gripper_compensation" not in nodes
    added = _render("panda", mode="mujoco", nodes="payload_identifier")  # as the docs say: adds it to the six
    assert set(added) == {"plant", *ours.split(","), "payload_identifier"}, sorted(added)
    subset = _render("panda", mode="mujoco", nodes="joint_state_buffer,wrench_observer")  # naming any of the six
    assert set(subset) == {"plant", "joint_state_buffer", "wrench_observer"}, sorted(subset)
    with pytest.raises(Exception, match="payload_identifier needs reference running"):
        _render("panda", mode="mujoco", nodes="controller,payload_identifier")  # a subset it cannot work in
    assert "/payload_identifier" in nodes["payload_identifier"][0]["params"][0]
    composed = _render("panda", mode="mujoco", composed="true", nodes=f"{ours},gripper_compensation")
    args = composed["composed"][0]["args"]
    assert args[args.index("--nodes") + 1].endswith("gripper_compensation"), args
    with pytest.raises(Exception, match="unknown nodes"):
        _render("panda", mode="mujoco", nodes="controller,payload_identifer")


def test_modes_that_need_ros2_control_are_refused_up_front_when_it_is_not_installed():
    """`ros2 launch idyn_ros panda.launch.py` (mode mock) ended in launch's own "package 'robot_state_publisher' not
    found" here; the argument check says what is missing and that mode:=mujoco needs none of it."""
    pytest.importorskip("launch_ros")
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        get_package_share_directory("controller_manager")
        pytest.skip("ros2_control is installed here")
    except PackageNotFoundError:
        pass
    for robot, mode in (("panda", "mock"), ("panda", "hardware"), ("iiwa14", "gazebo")):
        with pytest.raises(Exception, match=rf"mode:={mode} needs ROS 2 package\(s\) \['robot_state_publisher', "
                                            r"'controller_manager'.*ros2_control.*ros-kilted-ros2-control.*"
                                            r"mode:=mujoco runs without them"):
            _render(robot, ros2_control=False, mode=mode)
    assert "plant" in _render("panda", ros2_control=False, mode="mujoco")
    assert _render("ur5", ros2_control=False, mode="hardware", observer_only="true")  # next to the driver's launch


@pytest.mark.parametrize(("robot", "driver"), [("panda", "franka_hardware")])  # the others: refused before
def test_hardware_mode_without_the_vendors_driver_is_refused_up_front(robot, driver):
    """With ros2_control installed but not the robot's driver, mode:=hardware passed the up-front check and
    ros2_control_node failed on the hardware plugin, the arm's driver, while our nodes started."""
    pytest.importorskip("launch_ros")
    from unittest import mock

    from ament_index_python.packages import PackageNotFoundError

    def share(package):
        if package == driver:
            raise PackageNotFoundError(package)
        return f"/opt/ros/kilted/share/{package}"

    with mock.patch("ament_index_python.packages.get_package_share_directory", share):
        with pytest.raises(Exception, match=rf"mode:=hardware needs ROS 2 package\(s\) \['{driver}'\].*driver"):
            _render(robot, ros2_control=False, mode="hardware")
        assert "ros2_control_node" in _render(robot, ros2_control=False, mode="mock")  # the driver is for hardware
        assert "wrench_observer" in _render(robot, ros2_control=False, mode="hardware", observer_only="true")


@needs_launch
def test_ros2_launch_in_the_default_mode_says_what_is_missing():
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        get_package_share_directory("robot_state_publisher")
        pytest.skip("robot_state_publisher is installed here")
    except PackageNotFoundError:
        pass
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    got = subprocess.run([str(ROS2), "launch", "idyn_ros", "panda.launch.py"], env=env, capture_output=True,
                         text=True, timeout=120)
    out = got.stdout + got.stderr
    assert got.returncode != 0, out[-2000:]
    assert "mode:=mock needs ROS 2 package(s) ['robot_state_publisher'" in out and "mode:=mujoco" in out, out[-2000:]
    assert "searching:" not in out, out[-2000:]  # not launch's own error, which names one package and no way out


def test_a_misspelled_argument_or_a_xacro_argument_nothing_reads_stops_the_launch():
    pytest.importorskip("launch_ros")
    with pytest.raises(Exception, match=r"unknown launch argument\(s\) \['gain'\]"):
        _render("ur5", mode="mock", gain="soft")
    with pytest.raises(Exception, match="nothing reads in mode mujoco"):
        _render("panda", mode="mujoco", payload_mass="1.0")
    with pytest.raises(Exception, match="nothing reads in mode hardware with observer_only"):
        _render("ur5", mode="hardware", observer_only="true", payload_mass="1.0")
    assert _render("ur5", mode="hardware", observer_only="true", use_currents_as_efforts="false")  # the observer's
    with pytest.raises(Exception, match="payload_mass must be >= 0"):
        _render("panda", mode="gazebo", payload_mass="-5")  # the one mode whose URDF carries the payload
    with pytest.raises(Exception, match="use true or false"):
        _render("ur5", mode="hardware", observer_only="true", use_currents_as_efforts="flase")
    with pytest.raises(Exception, match="more than once"):
        _render("ur5", mode="mock", nodes="controller,controller")
    with pytest.raises(Exception, match="reaches only the controller"):
        _render("ur5", mode="hardware", observer_only="true", gains="stiff")


def test_a_xacro_argument_the_modes_urdf_has_no_place_for_stops_the_launch():
    """robot_ip:= in mode mock (the mock hardware reads no address) was accepted and went nowhere."""
    pytest.importorskip("launch_ros")
    with pytest.raises(Exception, match=r"\['robot_ip'\] leave the URDF of mode mock unchanged"):
        _render("panda", mode="mock", robot_ip="10.0.0.2")
    with pytest.raises(Exception, match=r"\['port_id'\] leave the URDF of mode gazebo unchanged"):
        _render("iiwa14", mode="gazebo", port_id="31111")
    assert _render("panda", mode="hardware", robot_ip="10.0.0.2")  # the driver's
    assert _render("panda", mode="mock", hand="false")  # the URDF's own


def test_a_parameter_file_with_a_name_no_node_has_or_a_value_the_mode_decides_stops_the_launch(tmp_path):
    pytest.importorskip("launch_ros")
    typo = tmp_path / "typo.yaml"
    typo.write_text("/**/wrench_observer:\n  ros__parameters:\n    obsever_gain: 200.0\n"
                    "/**/wrench_observr:\n  ros__parameters:\n    observer_gain: 300.0\n")
    with pytest.raises(Exception, match=r"no wrench_observer has parameter\(s\) \['obsever_gain'\].*"
                                        r"'/\*\*/wrench_observr' names no node of ours"):
        _render("panda", mode="hardware", params_file=str(typo))
    forced = tmp_path / "forced.yaml"
    forced.write_text("/**/controller:\n  ros__parameters:\n    subtract_gravity: false\n")
    with pytest.raises(Exception, match=r"sets controller\.subtract_gravity: False, but mode hardware sets True"):
        _render("panda", mode="hardware", params_file=str(forced))
    assert _render("panda", mode="mock", params_file=str(forced))  # the value the mode sets anyway: accepted


def test_a_files_effort_unit_counts_unless_use_currents_as_efforts_is_given(tmp_path):
    pytest.importorskip("launch_ros")
    torque = tmp_path / "torque.yaml"
    torque.write_text("/**/wrench_observer:\n  ros__parameters:\n    effort_unit: torque\n")

    def unit(**arguments):  # what the node gets: rcl applies the sections in order, the last value set wins
        params = _render("ur5", mode="hardware", observer_only="true", **arguments)["wrench_observer"][0]["params"][0]
        return [v for body in params.values() if (v := body["ros__parameters"].get("effort_unit"))][-1]

    assert unit() == "current"  # the driver's default (the xacro's)
    assert unit(params_file=str(torque)) == "torque"  # the file's, not overridden
    assert unit(params_file=str(torque), use_currents_as_efforts="true") == "current"  # the argument wins


def test_model_none_runs_the_fallback_whatever_the_files_say(tmp_path):
    pytest.importorskip("launch_ros")
    mine = tmp_path / "model.yaml"
    mine.write_text("/**:\n  ros__parameters:\n    model_path: /somewhere/model.onnx\n")
    nodes = _render("ur5", mode="mock", model="none", params_file=str(mine))
    assert nodes["controller"][0]["params"][0]["/controller"]["ros__parameters"]["model_path"] == ""
