"""Fixtures for the dynamics tests: arm models from URDFs that ship with the venv or ../shared/data.

The robot presets (``RobotModel.from_robot("panda")``) are used when ``idyn_ros.robots`` provides
them; the example-robot-data URDFs (Panda, UR5) and the LWR4+ URDF keep these tests independent of it.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from idyn_ros.dynamics import RobotModel

ERD = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data"
ERD_ROBOTS = ERD / "robots"
PANDA_URDF = ERD_ROBOTS / "panda_description" / "urdf" / "panda.urdf"
UR5_URDF = ERD_ROBOTS / "ur_description" / "urdf" / "ur5_robot.urdf"
PANDA_JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


def presets_available() -> bool:
    try:
        from idyn_ros import robots

        return hasattr(robots, "render_urdf") and hasattr(robots, "get_robot")
    except ImportError:
        return False


def erd_model(name: str) -> RobotModel:
    """Example-robot-data model: ``panda`` (arm only, fingers locked) or ``ur5``."""
    if name == "panda":
        return RobotModel.from_urdf(PANDA_URDF, joints=PANDA_JOINTS)
    return RobotModel.from_urdf(UR5_URDF)


@pytest.fixture(scope="session")
def panda() -> RobotModel:
    return erd_model("panda")


@pytest.fixture(scope="session")
def ur5() -> RobotModel:
    return erd_model("ur5")


@pytest.fixture(params=["panda", "ur5"], scope="session")
def arm(request: pytest.FixtureRequest) -> RobotModel:
    return erd_model(request.param)
