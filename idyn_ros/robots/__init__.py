"""Robot descriptions as data: which arms exist, their joint order and frames, and their URDF.

Bottom layer: imports nothing from the rest of idyn_ros except ``errors`` and ``paths``, and never
imports torch, pinocchio or mujoco (the runtime and nodes import it on the hot path's startup).
"""

from idyn_ros.robots.render import render_urdf, strip_non_model_elements, urdf_for_mujoco, xacro_arguments
from idyn_ros.robots.spec import MODES, ROBOT_NAMES, Payload, RobotSpec, get_robot

__all__ = [
    "MODES",
    "ROBOT_NAMES",
    "Payload",
    "RobotSpec",
    "get_robot",
    "render_urdf",
    "strip_non_model_elements",
    "urdf_for_mujoco",
    "xacro_arguments",
]
