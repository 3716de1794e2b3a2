"""sim layer: the embedded MuJoCo plant with "true robot" profiles (see idyn_ros/sim/plant.py)."""

from idyn_ros.robots.spec import Payload  # the one payload type; re-exported for the plant node
from idyn_ros.sim.drive import CommandGate, GateCounters
from idyn_ros.sim.friction import FrictionParameters, smooth_friction, total_friction
from idyn_ros.sim.plant import Plant, PlantState, RobotDescription, resolve_robot
from idyn_ros.sim.profile import PROFILE_KINDS, PlantProfile, load_profile

__all__ = [
    "PROFILE_KINDS",
    "CommandGate",
    "FrictionParameters",
    "GateCounters",
    "Payload",
    "Plant",
    "PlantProfile",
    "PlantState",
    "RobotDescription",
    "load_profile",
    "resolve_robot",
    "smooth_friction",
    "total_friction",
]
