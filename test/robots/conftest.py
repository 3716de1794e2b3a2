"""Fixtures that read the SOURCE values our xacros were written from (never our own output).

- Panda, UR5: the URDFs shipped in the example-robot-data wheel (manufacturer values).
- iiwa 14: /work/shared/reference/iiwa14_params.yaml (lbr_fri_ros2_stack CAD values, KUKA limits);
  a copy-free fallback is impossible, so tests that need it skip when the file is absent.
"""

from __future__ import annotations

import sysconfig
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

ERD_ROBOTS = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
SOURCE_URDF = {
    "panda": ERD_ROBOTS / "panda_description" / "urdf" / "panda.urdf",
    "ur5": ERD_ROBOTS / "ur_description" / "urdf" / "ur5_robot.urdf",
}


def _iiwa_yaml() -> Path:
    from idyn_ros.paths import shared_data_dir

    data = shared_data_dir()
    shared = data.parent if data is not None else Path(__file__).resolve().parents[3] / "shared"
    return shared / "reference" / "iiwa14_params.yaml"


IIWA_YAML = _iiwa_yaml()


@dataclass(frozen=True)
class SourceJoint:
    """One actuated joint as the source states it (rad, rad/s, Nm)."""

    name: str
    lower: float
    upper: float
    velocity: float
    effort: float


def _urdf_joints(path: Path, skip: tuple[str, ...] = ()) -> list[SourceJoint]:
    root = ET.parse(path).getroot()
    joints = []
    for joint in root.findall("joint"):
        if joint.get("type") not in ("revolute", "continuous", "prismatic") or joint.get("name") in skip:
            continue
        limit = joint.find("limit")
        joints.append(
            SourceJoint(
                name=joint.get("name"),
                lower=float(limit.get("lower")),
                upper=float(limit.get("upper")),
                velocity=float(limit.get("velocity")),
                effort=float(limit.get("effort")),
            )
        )
    return joints


@pytest.fixture(scope="session")
def source_urdf_path():
    """robot name -> path of the example-robot-data URDF (panda, ur5)."""
    for path in SOURCE_URDF.values():
        if not path.is_file():
            pytest.skip(f"example-robot-data URDF missing: {path}")
    return dict(SOURCE_URDF)


@pytest.fixture(scope="session")
def iiwa_source() -> dict:
    """The parsed iiwa14_params.yaml."""
    import yaml

    if not IIWA_YAML.is_file():
        pytest.skip(f"{IIWA_YAML} (iiwa 14 source parameters) is not present")
    return yaml.safe_load(IIWA_YAML.read_text())


@pytest.fixture(scope="session")
def source_joints(source_urdf_path, iiwa_source) -> dict[str, list[SourceJoint]]:
    """robot name -> actuated joints with limits, as stated by the source (arm only for the Panda)."""
    iiwa = [
        SourceJoint(
            name=f"lbr_{name}",
            lower=float(j["lower"]),
            upper=float(j["upper"]),
            velocity=float(j["velocity"]),
            effort=float(j["effort_kuka_spec"]),
        )
        for name, j in iiwa_source["joints"].items()
        if j.get("type", "revolute") != "fixed"
    ]
    return {
        "panda": _urdf_joints(source_urdf_path["panda"], skip=("panda_finger_joint1", "panda_finger_joint2")),
        "iiwa14": iiwa,
        "ur5": _urdf_joints(source_urdf_path["ur5"]),
    }


def _reference_model(path: Path):
    """pinocchio model of a source URDF; for the Panda the fingers are locked at 0 (our hand decision)."""
    import numpy as np
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(path))
    fingers = [model.getJointId(n) for n in ("panda_finger_joint1", "panda_finger_joint2") if model.existJointName(n)]
    if fingers:
        model = pin.buildReducedModel(model, fingers, np.zeros(model.nq))
    return model


@pytest.fixture(scope="session")
def reference_models(source_urdf_path):
    """robot name -> pinocchio model of the example-robot-data URDF (panda reduced, ur5)."""
    return {name: _reference_model(path) for name, path in source_urdf_path.items()}
