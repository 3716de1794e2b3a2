"""pip-installable idyn_ros: the library, the `idyn` command and one console script per node.

Under a ROS 2 install, CMakeLists.txt installs the same package with colcon; here, scripts/setup_env.sh
installs it editable into .venv after building msg/ into that prefix.
"""

from pathlib import Path

from setuptools import find_packages, setup

NODES = [
    "joint_state_buffer",
    "feedforward",
    "controller",
    "doomed",
    "wrench_observer",
    "reference",
    "payload_identifier",
    "gripper_compensation",
    "plant",
    "recorder",
    "composed",
]


def _data_files() -> list[tuple[str, list[str]]]:
    """Share files where ament/ROS tools look for them (share/idyn_ros/...)."""
    root = Path(__file__).parent
    files = [("share/ament_index/resource_index/packages", ["resource/idyn_ros"]),
             ("share/idyn_ros", ["package.xml"])]
    for folder in ("launch", "config", "urdf"):
        for path in sorted((root / folder).rglob("*")):
            if path.is_file():
                files.append((f"share/idyn_ros/{path.parent.relative_to(root)}", [str(path.relative_to(root))]))
    return files


setup(
    name="idyn_ros",
    version="0.1.0",
    description="Learned inverse-dynamics feedforward for torque-controlled robot arms (ROS 2)",
    packages=find_packages(include=["idyn_ros", "idyn_ros.*"]),
    python_requires=">=3.11",
    data_files=_data_files(),
    entry_points={
        "console_scripts": [
            "idyn = idyn_ros.cli:main",
            *[f"idyn-{name.replace('_', '-')} = idyn_ros.nodes.{name}:main" for name in NODES],
        ]
    },
)
