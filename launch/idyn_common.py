"""The launch description shared by panda/iiwa14/ur5.launch.py (``ros2 launch idyn_ros <robot>.launch.py``).

Arguments (``ros2 launch idyn_ros panda.launch.py --show-args``):
  mode:=hardware|mock|gazebo|mujoco   where torques go (default mock)
  model:=PATH                          exported .onnx ('' = the parameter files' model_path; none = RBD fallback)
  gains:=soft|medium|stiff             controller gain preset ('' = the files' gain_preset, medium)
  prefix:=STR                          joint/link name prefix ('' = the vendor default)
  composed:=true                       our six nodes in one process (lower latency; see README)
  clock:=lockstep|realtime             mode mujoco: the embedded plant's clock ('' = the files', lockstep)
  params_file:=A.yaml[,B.yaml]         your parameter files, after config/<robot>.yaml; the arguments above win
  <xacro arguments>                    robot_ip, payload_mass, payload_com_x, ... (see --show-args)

What starts:
  hardware | mock   robot_state_publisher, ros2_control_node (config/<robot>_controllers.yaml) and the spawners of
                    joint_state_broadcaster and effort_controller (effort_controllers/JointGroupEffortController)
  gazebo            Gazebo (ros_gz_sim) with gz_ros2_control, the /clock bridge, robot_state_publisher, spawners
  mujoco            the embedded MuJoCo plant node behind the same topics (no other package needed)
  always            joint_state_buffer, feedforward, controller, doomed, wrench_observer, reference (or composed)

Every node's parameters, which nodes start, and the robot description come from ``idyn_ros.nodes.graph``, the
description ``idyn bringup`` runs too. On hardware the vendor adds g(q) to the command, so the controller
subtracts it (subtract_gravity) and the wrench observer reads the measured effort. A bad argument (unknown mode
or gains, a missing file) stops the launch with its reason. Runs here with the launch wheels (make setup).
"""

import os

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition, UnlessCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from idyn_ros.nodes import graph
from idyn_ros.robots import get_robot
from idyn_ros.robots.render import xacro_argument_defaults
from launch import LaunchDescription, Substitution

PACKAGE = "idyn_ros"
OWN_ARGS = ("mode", "model", "gains", "prefix", "composed", "clock", "params_file")
NOT_XACRO = ("mode", "prefix", "controllers_file")  # set by the graph description, not by the user


def _settings(context, robot):
    get = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    return graph.GraphSettings(
        robot, mode=get("mode"), model=get("model"), gains=get("gains"), prefix=get("prefix"), clock=get("clock"),
        composed=get("composed").lower() in ("true", "1", "yes"),
        params_files=tuple(f.strip() for f in get("params_file").split(",") if f.strip()))


class NodeParameters(Substitution):
    """The one parameter file of a process running ``nodes`` (``graph.parameter_file``), made at launch time."""

    def __init__(self, robot, nodes):
        super().__init__()
        self.robot, self.nodes = robot, list(nodes)

    def describe(self):
        return f"idyn parameters for {', '.join(self.nodes)} (config/{self.robot}.yaml + params_file + arguments)"

    def perform(self, context):
        return str(graph.parameter_file(_settings(context, self.robot), self.nodes))


class RobotDescription(Substitution):
    """The URDF for the mode (``graph.robot_description``) with the xacro arguments given at launch."""

    def __init__(self, robot, xacro_names):
        super().__init__()
        self.robot, self.xacro_names = robot, list(xacro_names)

    def describe(self):
        return f"rendered urdf/{self.robot}.urdf.xacro"

    def perform(self, context):
        args = {name: LaunchConfiguration(name).perform(context) for name in self.xacro_names}
        return graph.robot_description(_settings(context, self.robot), args)


class ControllersFile(Substitution):
    """config/<robot>_controllers.yaml, its joints renamed for the prefix."""

    def __init__(self, robot):
        super().__init__()
        self.robot = robot

    def describe(self):
        return f"config/{self.robot}_controllers.yaml"

    def perform(self, context):
        return str(graph.controllers_file(_settings(context, self.robot)))


def _mode_is(*modes):
    return IfCondition(PythonExpression(["'", LaunchConfiguration("mode"), f"' in {tuple(modes)!r}"]))


def generate(robot):
    """The LaunchDescription for ``robot`` (called by <robot>.launch.py)."""
    spec = get_robot(robot)
    xacro_defaults = {k: v for k, v in xacro_argument_defaults(spec.xacro_path).items() if k not in NOT_XACRO}
    description = ParameterValue(RobotDescription(robot, xacro_defaults), value_type=str)
    env = {"IDYN_EXIT_WITH_PARENT": str(os.getpid())}  # our nodes end if this launch process is killed
    actions = [
        DeclareLaunchArgument("mode", default_value="mock", choices=list(graph.MODES),
                              description="where torques go: hardware | mock | gazebo | mujoco"),
        DeclareLaunchArgument("model", default_value="", description="exported .onnx ('' = the files' model_path)"),
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
        *[DeclareLaunchArgument(name, default_value=default, description=f"xacro argument of urdf/{robot}.urdf.xacro")
          for name, default in xacro_defaults.items()],
        # ---- the robot side
        Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
             parameters=[{"robot_description": description}], condition=_mode_is("hardware", "mock", "gazebo")),
        Node(package="controller_manager", executable="ros2_control_node", output="screen",
             parameters=[{"robot_description": description}, ControllersFile(robot)],
             condition=_mode_is("hardware", "mock")),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(_gz_launch()), condition=_mode_is("gazebo"),
                                 launch_arguments={"gz_args": "-r empty.sdf"}.items()),
        Node(package="ros_gz_sim", executable="create", output="screen", condition=_mode_is("gazebo"),
             arguments=["-topic", "robot_description", "-name", robot]),
        Node(package="ros_gz_bridge", executable="parameter_bridge", output="screen", condition=_mode_is("gazebo"),
             arguments=["/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock"]),
        *[Node(package="controller_manager", executable="spawner", output="screen",
               arguments=[name, "--controller-manager", "/controller_manager"],
               condition=_mode_is("hardware", "mock", "gazebo"))
          for name in ("joint_state_broadcaster", spec.effort_controller)],
        Node(package=PACKAGE, executable="plant", name="plant", namespace="", output="screen",
             parameters=[NodeParameters(robot, ["plant"])], condition=_mode_is("mujoco"), additional_env=env),
        # ---- our nodes: separate processes, or one
        *[Node(package=PACKAGE, executable=name, name=name, namespace="", output="screen",
               parameters=[NodeParameters(robot, [name])], condition=UnlessCondition(LaunchConfiguration("composed")),
               additional_env=env)
          for name in graph.OUR_NODES],
        Node(package=PACKAGE, executable="composed", output="screen", arguments=["--nodes", ",".join(graph.OUR_NODES)],
             parameters=[NodeParameters(robot, graph.OUR_NODES)],
             condition=IfCondition(LaunchConfiguration("composed")), additional_env=env),
    ]
    return LaunchDescription(actions)


def _gz_launch():
    """ros_gz_sim's gz_sim.launch.py (mode gazebo only; resolved when that mode is chosen)."""

    class GzLaunch(Substitution):
        def describe(self):
            return "ros_gz_sim/launch/gz_sim.launch.py"

        def perform(self, context):
            from ament_index_python.packages import get_package_share_directory

            return os.path.join(get_package_share_directory("ros_gz_sim"), "launch", "gz_sim.launch.py")

    return GzLaunch()
