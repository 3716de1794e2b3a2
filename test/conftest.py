"""Shared pytest fixtures.

DDS stays on loopback (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) and every test session gets its own
ROS_DOMAIN_ID so parallel runs on one machine do not see each other's topics.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
# the venv is an ament prefix (scripts/setup_env.sh): `ros2 launch idyn_ros ...` in tests finds the package there
os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join(
    p for p in (sys.prefix, os.environ.get("AMENT_PREFIX_PATH", "")) if p)
os.environ.setdefault("ROS_DOMAIN_ID", str(10 + os.getpid() % 90))
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (real robot recordings); tests needing it skip with a reason when absent."""
    from idyn_ros.paths import shared_data_dir

    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data (real robot recordings) is not present on this machine")
    return path


@pytest.fixture()
def rclpy_context():
    """An initialised rclpy context, shut down after the test."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        if context.ok():
            rclpy.shutdown(context=context)
