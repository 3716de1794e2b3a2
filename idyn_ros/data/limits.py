"""Joint acceleration limits per robot: the one place for them (URDFs carry no acceleration limits).

Position and velocity limits come from the robot's URDF (``RobotModel.lower/upper/velocity_limit``);
these fill the gap for trajectory design (excitation, fine motion, min-jerk timing).
"""

from __future__ import annotations

import numpy as np

from idyn_ros.errors import ParameterError

#: rad/s^2 per joint, in the robot's joint order.
ACCELERATION_LIMITS: dict[str, tuple[float, ...]] = {
    # Franka Emika Panda datasheet ("Robot and interface specifications", joint space limits, q̈_max)
    "panda": (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0),
    # /work/shared/reference/iiwa14_params.yaml accel_drake, from RobotLocomotion/drake
    # iiwa14_no_collision.urdf drake:acceleration (commit 0b6a9c38)
    "iiwa14": (8.57, 8.57, 8.74, 11.36, 12.23, 15.72, 15.72),
    # UR arms have no inherent acceleration limit (only torque); Universal_Robots_ROS2_Driver's
    # ur_moveit_config joint_limits.yaml uses 5.0 rad/s^2 "chosen conservatively" for every joint.
    "ur5": (5.0, 5.0, 5.0, 5.0, 5.0, 5.0),
}


#: Presets whose acceleration limits above are the arm's own (the vendor documents them as limits the arm enforces);
#: the others are planning values, which real programs exceed (the UR5's wrist 3 reverses at 90 rad/s^2 in
#: ``ur5_ft/Movement_No6``), so a user's trajectory is not refused on them.
VENDOR_ACCELERATION_LIMITS = frozenset({"panda"})


def acceleration_limits(robot: str, n: int | None = None) -> np.ndarray:
    """Acceleration limits (n,) rad/s^2 of a preset; unknown robots raise with the known names."""
    key = robot.lower()
    if key not in ACCELERATION_LIMITS:
        raise ParameterError(
            f"no documented acceleration limits for robot {robot!r}; known: {sorted(ACCELERATION_LIMITS)} "
            "(add a cited entry to idyn_ros/data/limits.py or pass --accel-limit)"
        )
    limits = np.array(ACCELERATION_LIMITS[key], dtype=np.float64)
    if n is not None and limits.size != n:
        raise ParameterError(f"{robot}: {limits.size} acceleration limits for a {n}-joint model")
    return limits


def vendor_acceleration_limits(robot: str, n: int) -> np.ndarray:
    """(n,) rad/s^2: the acceleration limits the arm itself enforces (``VENDOR_ACCELERATION_LIMITS``), inf where none
    are documented: what a user's trajectory is checked against."""
    if robot.lower() not in VENDOR_ACCELERATION_LIMITS:
        return np.full(n, np.inf)
    return acceleration_limits(robot, n)


def planning_acceleration_limits(robot: str, n: int) -> np.ndarray:
    """(n,) rad/s^2 for moves the software times itself (``acceleration_limits``; inf for a robot without an entry)."""
    try:
        return acceleration_limits(robot, n)
    except ParameterError:
        return np.full(n, np.inf)
