"""The launch description shared by panda/iiwa14/ur5.launch.py (``ros2 launch idyn_ros <robot>.launch.py``).

Arguments (``ros2 launch idyn_ros panda.launch.py --show-args``):
  mode:=hardware|mock|gazebo|mujoco   where torques go (default mock)
  model:=PATH                          exported .onnx ('' = the parameter files' model_path; none = RBD fallback)
  gains:=soft|medium|stiff             controller gain preset ('' = the files' gain_preset, medium)
  prefix:=STR                          joint/link name prefix ('' = the vendor default)
  composed:=true                       our nodes in one process (lower latency; see README)
  clock:=lockstep|realtime             mode mujoco: the embedded plant's clock ('' = the files', lockstep)
  params_file:=A.yaml[,B.yaml]         your parameter files, after config/<robot>.yaml; the arguments above win
  observer_only:=true                  only joint_state_buffer + wrench_observer, no torque commands (hardware, mock)
  nodes:=A,B                           our nodes ('' = the six); only optional ones (payload_identifier,
                                       gripper_compensation) = the six plus them; any of the six = exactly A,B
  <xacro arguments>                    robot_ip, payload_mass, payload_com_x, ... (see --show-args): the URDF of
                                       robot_state_publisher, ros2_control and Gazebo; our nodes take a payload
                                       through ~/set_payload (or payload_identifier); where no URDF is read (mode
                                       mujoco, observer_only on hardware) a xacro argument set to anything but its
                                       default is refused, and so are payload_* in modes hardware and mock (nothing
                                       there reads the URDF's inertia) and one the mode's URDF has no place for
                                       (robot_ip in mock: the vendor's hardware interface reads it on hardware only)

What starts:
  hardware | mock   robot_state_publisher, ros2_control_node (config/<robot>_controllers.yaml) and the spawners of
                    joint_state_broadcaster and the effort controller (a forward command controller on the effort
                    interface: the UR driver's forward_effort_controller, here named effort_controller like the
                    other arms'), on hardware the iiwa14's position controller too; with observer_only nothing on
                    hardware, and no effort controller in mock
  gazebo            Gazebo (ros_gz_sim) with gz_ros2_control, the /clock bridge, robot_state_publisher, spawners
  mujoco            the embedded MuJoCo plant node behind the same topics (no other package needed)
  ours              joint_state_buffer, feedforward, controller, doomed, wrench_observer, reference, or what nodes
                    and observer_only choose (one process each, or one with composed)

On hardware the reference node holds the pose the arm is found in: config/<robot>.yaml's demonstration move runs in
the simulators only. Motion is asked for: a reference mode in your parameter file (e.g. mode: npz, npz_path: an
excitation from `idyn excite`), or at run time `ros2 param set /reference mode setpoints` after setting its setpoints.

Torque control on hardware runs on the Panda and the iiwa14. lbr_fri_ros2_stack's FRI torque mode takes a torque only
with a joint position in the same cycle: on the iiwa14 the launch also spawns position_controller (a forward position
controller, config/iiwa14_controllers.yaml) and the controller sends it the measured positions with every torque
(position_command_topic), as the stack's torque demos do; the controller manager and our nodes run at 500 Hz there
(set the FRI send period to 2 ms on the smartPAD, client command mode TORQUE, control mode JOINT_IMPEDANCE_CONTROL). The
UR5 preset is refused with the reason unless observer_only:=true (RobotSpec.hardware_torque_unsupported): it is a CB3,
whose driver refuses the effort interface.
UR hardware, for an e-Series robot description of your own (ur_robot_driver >= 4.3, URPositionHardwareInterface):
torque commands run through URScript direct_torque, which needs PolyScope >= 5.23 (the driver's
forward_effort_controller is documented from 5.25.1) and an update rate of at most 500 Hz; the robot adds its own
gravity compensation (the controller sends tau - g(q): subtract_gravity) and,
by default, its own friction compensation: set its scales to 0 (friction_model_controller
~/set_friction_model_parameters) when the model has a friction part, or friction is compensated twice. Effort is
motor current unless use_currents_as_efforts:=false; the wrench observer's effort_unit is that argument when given,
else a parameter file's effort_unit, else current (the driver's default).
A CB3 (or any arm that takes no torques from us): observer_only:=true mode:=hardware starts only the buffer and the
wrench observer on the measured effort, next to the driver's own launch (ur_control.launch.py), which runs the arm
with its trajectory controllers and publishes /joint_states; nothing here commands it.

Every node's parameters, which nodes start, and the robot description come from ``idyn_ros.nodes.graph``, the
description ``idyn bringup`` runs too. On hardware the vendor adds g(q) to the command, so the controller
subtracts it (subtract_gravity) and the wrench observer reads the measured effort. A bad argument (unknown mode or
gains, a missing file, a misspelled argument name, a parameter file section or name no node of ours has, a mode
whose ROS 2 packages are not installed: hardware, mock and gazebo need ros2_control, hardware the robot's driver
too) stops the launch with its reason. So does a process the graph needs (the controller, the plant, composed; with
observer_only the wrench observer: ``graph.essential_processes``, as ROS 1's required nodes) ending with a non-zero
exit code, at start-up (a bad parameter value: the node prints why and exits 2) or later: the whole launch stops,
says which node ended, with what code and its last error line, and exits 1 (as ``idyn bringup`` does). So does,
where the robot side starts here, ros2_control_node or a controller's spawner ending with a non-zero exit code (a
controller it could not activate, e.g. the effort controller on a UR that refuses the effort interface): no torque
would reach the arm while our controller ran on. Any other node of ours that fails is an ERROR line with the same
reason, and the rest runs on. A Ctrl-C stops every process with exit code 0 and is no failure. Runs here with the
launch wheels (make setup).
"""

import os
import re

from launch.actions import (
    DeclareLaunchArgument,
    IncludeLaunchDescription,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
)
from launch.condition import Condition
from launch.conditions import IfCondition
from launch.event_handlers import OnProcessExit, OnProcessIO
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from idyn_ros.errors import IdynError, ParameterError
from idyn_ros.nodes import graph
from idyn_ros.robots import get_robot
from idyn_ros.robots.render import xacro_argument_defaults
from launch import LaunchDescription, Substitution

PACKAGE = "idyn_ros"
DECLARED = ("mode", "model", "gains", "prefix", "composed", "clock", "params_file", "observer_only", "nodes")
NOT_XACRO = ("mode", "prefix", "controllers_file")  # set by the graph description, not by the user
TRUE = ("true", "1", "yes")
FALSE = ("false", "0", "no")
PAYLOAD_ADVICE = ("a payload goes on with ~/set_payload (/controller, /feedforward, /wrench_observer, /doomed, and "
                  "/plant in mode mujoco) or the payload_identifier node")
CURRENTS = "use_currents_as_efforts"  # UR xacro argument: what the driver reports as effort; '' = its default
EXTERNAL = ("gz_args",)  # launch configurations set by the launch files we include, not by the user


def _effort_unit(value):
    if value.lower() in TRUE:
        return "current"
    if value.lower() in FALSE:
        return "torque"
    raise ParameterError(f"{CURRENTS}:={value}: use true or false")


def _settings(context, robot):
    get = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    currents = context.launch_configurations.get(CURRENTS, "")
    return graph.GraphSettings(
        robot, mode=get("mode"), model=get("model"), gains=get("gains"), prefix=get("prefix"), clock=get("clock"),
        composed=get("composed").lower() in TRUE,
        params_files=tuple(f.strip() for f in get("params_file").split(",") if f.strip()),
        observer_only=get("observer_only").lower() in TRUE,
        nodes=graph.select_nodes([n.strip() for n in get("nodes").split(",")]),
        effort_unit=_effort_unit(currents) if currents else "")


def _xacro_args(args):
    """The xacro arguments to render with: an unset use_currents_as_efforts leaves the xacro's own default."""
    return {k: v for k, v in args.items() if not (k == CURRENTS and v == "")}


#: where each hardware plugin's package comes from (the hint when it is missing)
DRIVERS = {"franka_hardware": "franka_ros2", "lbr_ros2_control": "lbr_fri_ros2_stack",
           "ur_robot_driver": "Universal_Robots_ROS2_Driver"}


def hardware_plugin_package(robot):
    """The package of the vendor's ros2_control hardware plugin that mode hardware renders (urdf/<robot>.urdf.xacro:
    franka_hardware/FrankaHardwareInterface, lbr_ros2_control::SystemInterface, ur_robot_driver/...)."""
    from idyn_ros.robots import render_urdf

    plugin = re.search(r"<plugin>\s*([^<\s]+)\s*</plugin>", render_urdf(robot, "hardware")).group(1)
    return re.split(r"/|::", plugin)[0]


def _missing_packages(settings):
    """The ROS packages the robot side of ``settings`` runs (ros2_control, robot_state_publisher, Gazebo) that the
    ament index does not have; empty for mode mujoco, which needs none."""
    import yaml
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    side = settings.robot_side()
    if not side:
        return []
    from idyn_ros.paths import config_dir

    manager = yaml.safe_load((config_dir() / f"{settings.robot}_controllers.yaml").read_text())["controller_manager"]
    types = manager["ros__parameters"]
    plugins = [types[c]["type"].split("/")[0] for c in side if isinstance(types.get(c), dict)]  # the spawned ones
    needed = ["robot_state_publisher", "controller_manager", *plugins]
    if settings.mode == "hardware":
        needed.append(hardware_plugin_package(settings.robot))
    if settings.mode == "gazebo":
        needed += ["ros_gz_sim", "ros_gz_bridge", "gz_ros2_control"]
    missing = []
    for package in dict.fromkeys(needed):
        try:
            get_package_share_directory(package)
        except PackageNotFoundError:
            missing.append(package)
    return missing


def _check_arguments(robot, declared, xacro_defaults):
    """Stops the launch on a misspelled argument (launch would ignore it), on xacro arguments when nothing reads the
    URDF (mode mujoco, observer_only on hardware), on any bad setting and on a mode whose robot side is not installed,
    before anything starts. Where the URDF is rendered, a bad xacro argument (a negative payload_mass) stops the
    launch there."""

    def check(context):
        given = context.launch_configurations
        unknown = sorted(set(given) - set(declared) - set(EXTERNAL))
        if unknown:
            raise ParameterError(f"unknown launch argument(s) {unknown}; see `ros2 launch {PACKAGE} "
                                 f"{robot}.launch.py --show-args`")
        settings = _settings(context, robot)
        # use_currents_as_efforts has a second reader: the wrench observer (effort_unit)
        changed = sorted(k for k, v in xacro_defaults.items() if given.get(k, v) != v and k != CURRENTS)
        if changed and not settings.robot_side():
            raise ParameterError(
                f"xacro argument(s) {changed} describe the URDF, which nothing reads in mode {settings.mode}"
                + (" with observer_only" if settings.observer_only else "")
                + f" (our nodes use the robot preset); {PAYLOAD_ADVICE}")
        payload = [k for k in changed if k.startswith("payload_")]
        if payload and settings.mode in ("hardware", "mock"):  # the URDF is read there, but not its inertials
            raise ParameterError(
                f"xacro argument(s) {payload} put a payload into the URDF, which in mode {settings.mode} only "
                f"robot_state_publisher and ros2_control read, neither for inertia: our nodes would run without it; "
                f"{PAYLOAD_ADVICE}")
        inert = _unrendered(settings, {k: given[k] for k in changed if not k.startswith("payload_")}, xacro_defaults)
        if inert:  # e.g. robot_ip in mode mock: the mock hardware's URDF has no place for it
            raise ParameterError(f"xacro argument(s) {inert} leave the URDF of mode {settings.mode} unchanged: nothing "
                                 "would read them (the vendor's hardware interface takes its own in mode hardware)")
        missing = _missing_packages(settings)
        driver = hardware_plugin_package(settings.robot) if settings.mode == "hardware" else None
        if missing and missing == [driver]:  # ros2_control is there, the arm's driver is not
            raise ParameterError(
                f"mode:={settings.mode} needs ROS 2 package(s) {missing}, not found in the ament index: the robot's "
                f"driver ({DRIVERS.get(driver, 'the robot vendor')}), whose hardware plugin the URDF gives "
                "ros2_control; build or install it and source its setup.bash; mode:=mujoco runs without it (the "
                "embedded MuJoCo plant)")
        if missing:  # refused here: launch's own "package not found" names one package and no way out
            gazebo = " and ros_gz + gz_ros2_control" if settings.mode == "gazebo" else ""
            raise ParameterError(
                f"mode:={settings.mode} needs ROS 2 package(s) {missing}, not found in the ament index; it needs a "
                f"ROS 2 installation with ros2_control (kilted: sudo apt install ros-kilted-ros2-control "
                f"ros-kilted-ros2-controllers ros-kilted-robot-state-publisher{gazebo}, then source "
                f"/opt/ros/kilted/setup.bash); mode:=mujoco runs without them (the embedded MuJoCo plant)")
        return []

    return OpaqueFunction(function=check)


def _unrendered(settings, changed, xacro_defaults):
    """The xacro arguments in ``changed`` (name: value given) whose value does not change the URDF of
    ``settings.mode``: each rendered alone against the defaults."""
    if not changed:
        return []
    defaults = _xacro_args(dict(xacro_defaults))
    plain = graph.robot_description(settings, defaults)
    return sorted(k for k, v in changed.items() if graph.robot_description(settings, {**defaults, k: v}) == plain)


def _starts(robot, name):
    """Condition: ``name`` is one of the processes the graph description starts (ours or the robot side)."""

    def predicate(context):
        s = _settings(context, robot)
        return name in s.processes or name in s.robot_side()

    return Condition(predicate=predicate)


class NodeParameters(Substitution):
    """The one parameter file of a process running ``nodes`` (``graph.parameter_file``; None: the graph's active
    nodes, for the composed process), made at launch time."""

    def __init__(self, robot, nodes=None):
        super().__init__()
        self.robot, self.nodes = robot, None if nodes is None else list(nodes)

    def describe(self):
        which = ", ".join(self.nodes) if self.nodes is not None else "the active nodes"
        return f"idyn parameters for {which} (config/{self.robot}.yaml + params_file + arguments)"

    def perform(self, context):
        s = _settings(context, self.robot)
        return str(graph.parameter_file(s, self.nodes if self.nodes is not None else list(s.active_nodes)))


class ActiveNodes(Substitution):
    """``--nodes`` of the composed process: the graph's active nodes."""

    def __init__(self, robot):
        super().__init__()
        self.robot = robot

    def describe(self):
        return "the active nodes (all, or the observer's with observer_only)"

    def perform(self, context):
        return ",".join(_settings(context, self.robot).active_nodes)


class RobotDescription(Substitution):
    """The URDF for the mode (``graph.robot_description``) with the xacro arguments given at launch."""

    def __init__(self, robot, xacro_names):
        super().__init__()
        self.robot, self.xacro_names = robot, list(xacro_names)

    def describe(self):
        return f"rendered urdf/{self.robot}.urdf.xacro"

    def perform(self, context):
        args = {name: LaunchConfiguration(name).perform(context) for name in self.xacro_names}
        return graph.robot_description(_settings(context, self.robot), _xacro_args(args))


class ControllersFile(Substitution):
    """config/<robot>_controllers.yaml, its joints renamed for the prefix."""

    def __init__(self, robot):
        super().__init__()
        self.robot = robot

    def describe(self):
        return f"config/{self.robot}_controllers.yaml"

    def perform(self, context):
        return str(graph.controllers_file(_settings(context, self.robot)))


#: lines saying why a process ended, best first: our start-up error ("controller: error: ...") or the last line of a
#: Python traceback ("ValueError: ..."), a FATAL log line, an ERROR log line (some are not fatal: the RBD fallback)
WHY_LINES = (re.compile(r"^\S+: error: |^[A-Za-z_.]*(Error|Exception)\b"), re.compile(r"\[FATAL\]"),
             re.compile(r"\[ERROR\]"))


class NodeExitedError(IdynError):
    """One of our processes ended with a non-zero exit code while the launch was running."""


class ExitWatch:
    """Stops the launch when one of ``ours`` (Node actions) that the graph needs (``graph.essential_processes``)
    ends with a non-zero exit code outside a shutdown; another of ours that fails is reported, the rest runs on.
    So does a process of the robot side that torques go through (``robot_side``: {label: Node action}: ros2_control_node
    and the controllers' spawners, which end with 0 once their controller is active): without it nothing reaches the
    arm, and our controller ran on ACTIVE (a spawner that could not activate the effort controller, e.g. a UR whose
    software refuses the effort interface; one activated later by hand got the law's torque towards the pose held at
    start).

    Raising from the exit handler is what makes launch shut everything down (SIGINT to every process, the controller
    sends its safe torque) and ``ros2 launch`` exit with 1, printing the reason; launch's ``Shutdown`` action would
    exit 0, as if nothing had failed. The reason carries the process's last error line (what our nodes print before
    they exit 2 on a bad parameter), kept from its output."""

    def __init__(self, ours, robot_side=None):
        self.ours = list(ours)
        self.robot_side = dict(robot_side or {})
        self.last: dict[int, tuple[int, str]] = {}  # id(action) -> (rank in WHY_LINES, line) of its best last line

    def handlers(self):
        return [RegisterEventHandler(OnProcessIO(on_stdout=self._output, on_stderr=self._output)),
                RegisterEventHandler(OnProcessExit(on_exit=self._exited))]

    def _is_ours(self, action):
        return any(action is mine for mine in self.ours) or self._robot_label(action) is not None

    def _robot_label(self, action):
        return next((label for label, theirs in self.robot_side.items() if action is theirs), None)

    def _output(self, event):
        if not self._is_ours(event.action):
            return None
        for raw in event.text.decode(errors="replace").splitlines():
            line = raw.strip()
            rank = next((i for i, why in enumerate(WHY_LINES) if why.search(line)), None)
            if rank is not None and rank <= self.last.get(id(event.action), (len(WHY_LINES), ""))[0]:
                self.last[id(event.action)] = (rank, line)
        return None

    def _exited(self, event, context):
        if not self._is_ours(event.action) or event.returncode == 0 or context.is_shutdown:
            return None  # not ours, a clean end, or any end during a shutdown (Ctrl-C, another node's failure)
        name = event.process_name.rsplit("-", 1)[0]
        code = event.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        last = re.sub(r"^\S+: error: ", "", self.last.get(id(event.action), (0, ""))[1])  # "controller: error: "
        what = f"{name} {how}" + (f" ({last[-400:]})" if last else "")
        robot = self._robot_label(event.action)
        if robot is not None:
            raise NodeExitedError(f"{robot} {how}" + (f" ({last[-400:]})" if last else "")
                                  + "; stopping the launch: no torque reaches the arm without it")
        observer_only = context.launch_configurations.get("observer_only", "false") == "true"
        if name not in graph.essential_processes(observer_only):
            return LogInfo(msg=f"ERROR: {what}; the other nodes run on without it")
        raise NodeExitedError(f"{what}; stopping the launch, which cannot run without it")


def _mode_is(*modes):
    return IfCondition(PythonExpression(["'", LaunchConfiguration("mode"), f"' in {tuple(modes)!r}"]))


def generate(robot):
    """The LaunchDescription for ``robot`` (called by <robot>.launch.py)."""
    spec = get_robot(robot)
    xacro_defaults = {k: v for k, v in xacro_argument_defaults(spec.xacro_path).items() if k not in NOT_XACRO}
    if CURRENTS in xacro_defaults:  # '' = unset: the xacro's default for the driver, the files' for the observer
        xacro_defaults[CURRENTS] = ""
    description = ParameterValue(RobotDescription(robot, xacro_defaults), value_type=str)
    env = {"IDYN_EXIT_WITH_PARENT": str(os.getpid())}  # our nodes end if this launch process is killed
    # the robot side torques go through (ExitWatch stops the launch when one of these fails); each spawner starts only
    # where graph.GraphSettings.robot_side names its controller (the position controller: on hardware)
    spawnable = ("joint_state_broadcaster", spec.effort_controller, *filter(None, [spec.position_controller]))
    robot_side = {
        "ros2_control_node": Node(package="controller_manager", executable="ros2_control_node", output="screen",
                                  parameters=[{"robot_description": description}, ControllersFile(robot)],
                                  condition=_starts(robot, "ros2_control_node")),
        **{f"the spawner of {name}": Node(package="controller_manager", executable="spawner", output="screen",
                                          arguments=[name, "--controller-manager", "/controller_manager"],
                                          condition=_starts(robot, name))
           for name in spawnable},
    }
    actions = [
        DeclareLaunchArgument("mode", default_value="mock", choices=list(graph.MODES),
                              description="where torques go: hardware | mock | gazebo | mujoco"),
        DeclareLaunchArgument("model", default_value="",
                              description="exported .onnx ('' = the files' model_path; none = RBD fallback)"),
        DeclareLaunchArgument("gains", default_value="", choices=["", "soft", "medium", "stiff"],
                              description="soft | medium | stiff ('' = the files' gain_preset)"),
        DeclareLaunchArgument("prefix", default_value="", description="joint/link name prefix ('' = vendor default)"),
        DeclareLaunchArgument("composed", default_value="false", choices=["true", "false"],
                              description="our nodes in one process (lower latency)"),
        DeclareLaunchArgument("clock", default_value="", choices=["", *graph.CLOCKS],
                              description="mode mujoco: lockstep | realtime ('' = the files', lockstep: sim time)"),
        DeclareLaunchArgument("params_file", default_value="",
                              description="your parameter files (comma-separated), read after config/"
                                          f"{robot}.yaml; the arguments above win over them"),
        DeclareLaunchArgument("observer_only", default_value="false", choices=["true", "false"],
                              description="only joint_state_buffer + wrench_observer, no torque commands (an arm that "
                                          "takes none from us, e.g. a CB3 UR; modes hardware and mock)"),
        DeclareLaunchArgument("nodes", default_value="",
                              description=f"our nodes, comma-separated ('' = {','.join(graph.OUR_NODES)}); "
                                          f"naming only optional ones ({','.join(graph.OPTIONAL_NODES)}) adds them "
                                          "to those six, naming any of the six starts exactly the list"),
        *[DeclareLaunchArgument(name, default_value=default, description=f"xacro argument of urdf/{robot}.urdf.xacro"
                                + (" ('' = the driver's default, true; the wrench observer then takes a parameter "
                                   "file's effort_unit, else current; true = motor current, false = torque)"
                                   if name == CURRENTS else ""))
          for name, default in xacro_defaults.items()],
        _check_arguments(robot, DECLARED + tuple(xacro_defaults), xacro_defaults),
        # ---- the robot side
        Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
             parameters=[{"robot_description": description}], condition=_starts(robot, "robot_state_publisher")),
        robot_side["ros2_control_node"],
        IncludeLaunchDescription(PythonLaunchDescriptionSource(_gz_launch()), condition=_mode_is("gazebo"),
                                 launch_arguments={"gz_args": "-r empty.sdf"}.items()),
        Node(package="ros_gz_sim", executable="create", output="screen", condition=_mode_is("gazebo"),
             arguments=["-topic", "robot_description", "-name", robot]),
        Node(package="ros_gz_bridge", executable="parameter_bridge", output="screen", condition=_mode_is("gazebo"),
             arguments=["/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock"]),
        *[robot_side[f"the spawner of {name}"] for name in spawnable],
    ]
    ours = [
        Node(package=PACKAGE, executable="plant", name="plant", namespace="", output="screen",
             parameters=[NodeParameters(robot, ["plant"])], condition=_starts(robot, "plant"), additional_env=env),
        # ---- our nodes: separate processes, or one
        *[Node(package=PACKAGE, executable=name, name=name, namespace="", output="screen",
               parameters=[NodeParameters(robot, [name])], condition=_starts(robot, name), additional_env=env)
          for name in graph.OUR_NODES + graph.OPTIONAL_NODES],
        Node(package=PACKAGE, executable="composed", output="screen", arguments=["--nodes", ActiveNodes(robot)],
             parameters=[NodeParameters(robot)], condition=_starts(robot, "composed"), additional_env=env),
    ]
    return LaunchDescription([*actions, *ExitWatch(ours, robot_side).handlers(), *ours])


def _gz_launch():
    """ros_gz_sim's gz_sim.launch.py (mode gazebo only; resolved when that mode is chosen)."""

    class GzLaunch(Substitution):
        def describe(self):
            return "ros_gz_sim/launch/gz_sim.launch.py"

        def perform(self, context):
            from ament_index_python.packages import get_package_share_directory

            return os.path.join(get_package_share_directory("ros_gz_sim"), "launch", "gz_sim.launch.py")

    return GzLaunch()
