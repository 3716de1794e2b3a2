"""Every recording in ../shared/data imports."""

from __future__ import annotations

import sysconfig
import warnings
from pathlib import Path

import numpy as np
import pytest

from idyn_ros.data.bag import BagWarning
from idyn_ros.data.importers import import_source
from idyn_ros.errors import DatasetError

pytestmark = pytest.mark.realdata

UR10_URDF = (
    Path(sysconfig.get_paths()["purelib"])
    / "cmeel.prefix/share/example-robot-data/robots/ur_description/urdf/ur10_robot.urdf"
)
UR_JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)


def test_ur10_exciting_bag_without_metadata(shared_data: Path) -> None:
    src = shared_data / "ur10_bags/exciting/ur10_exciting_trajectory.db3"
    ds, _ = import_source(src, robot=str(UR10_URDF), effort_kind="current")
    assert ds.q.shape == (3441, 6) and ds.rate_hz == pytest.approx(125.0)
    assert ds.joint_names == UR_JOINTS and ds.effort_kind == "current" and ds.robot == "ur10_robot"
    ds2, _ = import_source(src, joint_names=list(UR_JOINTS))  # explicit joint list works the same
    np.testing.assert_array_equal(ds2.q, ds.q)


def test_ur10_validation_folder_with_wrong_file_name(shared_data: Path) -> None:
    with pytest.warns(BagWarning, match=r"names \['ros2.db3'\], which is not in the folder.*validation_trajectory.db3"):
        ds, _ = import_source(shared_data / "ur10_bags/validation", robot=str(UR10_URDF))
    assert ds.q.shape == (3441, 6) and ds.ddq is not None
    assert ds.rate_hz == pytest.approx(125.0) and ds.duration == pytest.approx(27.52)


def test_panda_30hz_with_fer_names(shared_data: Path) -> None:
    ds, _ = import_source(
        shared_data / "panda_bag_30hz/panda_exciting_trajectory.db3", robot="panda", joint_map="fer_=panda_"
    )
    assert ds.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    assert len(ds) == 727 and ds.rate_hz == pytest.approx(30.0, rel=0.01)


def test_panda_fer_names_are_read_as_the_panda_and_said(shared_data: Path, tmp_path: Path) -> None:
    """franka_ros2 names the Panda's joints fer_joint*: read as panda_joint* without a joint map, with a note."""
    src = shared_data / "panda_bag_30hz/panda_exciting_trajectory.db3"
    ds, report = import_source(src, robot="panda")
    ds_map, _ = import_source(src, robot="panda", joint_map="fer_=panda_")
    assert ds.joint_names == ds_map.joint_names and np.array_equal(ds.q, ds_map.q)
    assert any("fer_* read as panda_*" in n for n in report.notes)
    saved = tmp_path / "fer.npz"  # a contract .npz that kept the recorded names
    ds.joint_names = tuple(n.replace("panda_", "fer_") for n in ds.joint_names)
    ds.save(saved)
    again, report = import_source(saved, robot="panda")
    assert again.joint_names == ds_map.joint_names and any("fer_*" in n for n in report.notes)
    with pytest.raises(DatasetError, match="has none of the joints"):  # only the robot's own vendor names
        import_source(src, robot="iiwa14")
    from idyn_ros.models.sources import load_recordings, load_robot

    (rec,) = load_recordings([src], load_robot("panda"))  # what idyn train / evaluate read: by joint list
    assert np.array_equal(rec.q, ds_map.q)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_kuka_npz(shared_data: Path, k: int) -> None:
    folder = shared_data / "kuka_lwr4"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clean source: nothing to warn about
        ds, _ = import_source(folder / f"measurements_{k}.npz", robot=str(folder / "kuka_lwr4.urdf"))
    assert ds.q.shape == (5027, 7) and ds.rate_hz == pytest.approx(200.0, rel=1e-3)
    assert ds.joint_names == tuple(f"lwr_{i}_joint" for i in range(7))
    assert ds.ddq is not None and ds.q_d is not None
    if k == 1:  # README: torque std per joint of file 1
        np.testing.assert_allclose(ds.tau.std(axis=0), [0.99, 25.2, 3.05, 10.67, 0.81, 0.28, 0.25], atol=0.02)
