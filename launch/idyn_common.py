"""Shared launch logic for panda/iiwa14/ur5 (``ros2 launch idyn_ros <robot>.launch.py``).

Arguments:
  mode:=hardware|mock|gazebo|mujoco   where torques go (default mock)
  model:=PATH                          exported .onnx (default: config model_path; empty = RBD fallback)
  gains:=soft|medium|stiff             controller gain preset (default medium)
  prefix:=STR                          joint/link name prefix ('' = vendor default)
hardware/mock: robot_state_publisher + ros2_control_node (controllers from config/<robot>_controllers.yaml)
and spawners for joint_state_broadcaster and the effort forward controller (effort_controllers/
JointGroupEffortController named ``effort_controller``, as in the robot spec). gazebo: gz_ros2_control
inside Gazebo (ros_gz_sim), same spawners. mujoco: the embedded MuJoCo plant node instead of ros2_control.
In every mode our nodes run with config/<robot>.yaml: joint_state_buffer, feedforward, controller,
doomed, wrench_observer, reference. On hardware the vendor adds g(q) to the command, so the controller
subtracts it (subtract_gravity) and the safe damping hold needs no gravity term.
Needs a real ROS 2 install (launch, launch_ros, xacro, controller_manager); not runnable in this venv.
"""

import os

import xacro
from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

PACKAGE = "idyn_ros"
MODES = ("hardware", "mock", "gazebo", "mujoco")
OUR_NODES = ("joint_state_buffer", "feedforward", "controller", "doomed", "wrench_observer", "reference")


def _share(*parts):
    return os.path.join(get_package_share_directory(PACKAGE), *parts)


def _setup(context, robot):
    mode = LaunchConfiguration("mode").perform(context)
    if mode not in MODES:
        raise RuntimeError(f"mode:={mode} is not one of {MODES}")
    model = LaunchConfiguration("model").perform(context)
    gains = LaunchConfiguration("gains").perform(context)
    prefix = LaunchConfiguration("prefix").perform(context)
    params_file = _share("config", f"{robot}.yaml")
    controllers_file = _share("config", f"{robot}_controllers.yaml")
    xacro_file = _share("urdf", f"{robot}.urdf.xacro")
    mappings = {"mode": mode}
    if prefix:
        mappings["prefix"] = prefix
    robot_description = xacro.process_file(xacro_file, mappings=mappings).toxml()
    hardware = mode == "hardware"

    actions = [
        Node(package="robot_state_publisher", executable="robot_state_publisher", output="screen",
             parameters=[{"robot_description": robot_description}]),
    ]
    if mode in ("hardware", "mock"):
        actions.append(Node(package="controller_manager", executable="ros2_control_node", output="screen",
                            parameters=[{"robot_description": robot_description}, controllers_file]))
    elif mode == "gazebo":
        gz_launch = os.path.join(get_package_share_directory("ros_gz_sim"), "launch", "gz_sim.launch.py")
        actions.append(IncludeLaunchDescription(PythonLaunchDescriptionSource(gz_launch),
                                                launch_arguments={"gz_args": "-r empty.sdf"}.items()))
        actions.append(Node(package="ros_gz_sim", executable="create", output="screen",
                            arguments=["-string", robot_description, "-name", robot]))
    if mode in ("hardware", "mock", "gazebo"):
        for controller in ("joint_state_broadcaster", "effort_controller"):
            actions.append(Node(package="controller_manager", executable="spawner", output="screen",
                                arguments=[controller, "--controller-manager", "/controller_manager"]))
    else:  # mujoco: the embedded plant emulates joint_state_broadcaster + the effort forward controller
        actions.append(Node(package=PACKAGE, executable="plant", name="plant", output="screen",
                            parameters=[params_file, {"robot": robot}]))

    overrides = {"prefix": prefix, "subtract_gravity": hardware, "safe_gravity_compensation": not hardware}
    if model:
        overrides["model_path"] = model
    actions += [
        Node(package=PACKAGE, executable="joint_state_buffer", name="joint_state_buffer", output="screen",
             parameters=[params_file, {"prefix": prefix}]),
        Node(package=PACKAGE, executable="feedforward", name="feedforward", output="screen",
             parameters=[params_file, {"prefix": prefix, "model_path": model} if model else
                         {"prefix": prefix}]),
        Node(package=PACKAGE, executable="controller", name="controller", output="screen",
             parameters=[params_file, overrides, {"gain_preset": gains}]),
        Node(package=PACKAGE, executable="doomed", name="doomed", output="screen",
             parameters=[params_file, {"prefix": prefix}]),
        Node(package=PACKAGE, executable="wrench_observer", name="wrench_observer", output="screen",
             parameters=[params_file, {"prefix": prefix, "torque_source": "effort" if hardware else "command"}]),
        Node(package=PACKAGE, executable="reference", name="reference", output="screen",
             parameters=[params_file, {"prefix": prefix}]),
    ]
    return actions


def generate(robot):
    """The LaunchDescription for ``robot`` (called by <robot>.launch.py)."""
    return LaunchDescription([
        DeclareLaunchArgument("mode", default_value="mock", description="hardware | mock | gazebo | mujoco"),
        DeclareLaunchArgument("model", default_value="", description="exported .onnx model ('' = config)"),
        DeclareLaunchArgument("gains", default_value="medium", description="soft | medium | stiff"),
        DeclareLaunchArgument("prefix", default_value="", description="joint/link name prefix ('' = default)"),
        OpaqueFunction(function=_setup, args=[robot]),
    ])
