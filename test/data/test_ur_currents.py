"""Motor currents as effort (UR drivers): what a bag says, converting with known gains, and what training reads."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from idyn_ros.errors import DatasetError, ParameterError
from idyn_ros.robots.drives import UR_JOINTS, is_ur_arm, parse_torque_constants, torque_constants

from .helpers import joint_state_cdr, synthetic_motion


def _ur_bag(path: Path, custom: dict | None = None, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """A /joint_states bag with UR joint names; ``custom`` goes into metadata.yaml custom_data."""
    from ruamel.yaml import YAML

    from idyn_ros.data.bag import BagWriter

    stamps, q, dq, cur = synthetic_motion(n, rate=125.0, n=6)
    with BagWriter(path) as writer:
        writer.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        for i in range(n):
            writer.write("/joint_states", int(stamps[i]), joint_state_cdr(stamps[i], list(UR_JOINTS), q[i], dq[i],
                                                                           cur[i]))
    if custom is not None:
        yaml = YAML()
        meta = yaml.load((path / "metadata.yaml").read_text())
        meta["rosbag2_bagfile_information"]["custom_data"] = custom
        with (path / "metadata.yaml").open("w") as f:
            yaml.dump(meta, f)
    return stamps, cur


def test_the_bags_metadata_says_what_the_effort_is(tmp_path):
    from idyn_ros.data.importers import EFFORT_UNSTATED_NOTE, import_source

    _ur_bag(tmp_path / "said", {"joint_states_effort": "motor current [A] (i_actual)"})
    ds, report = import_source(tmp_path / "said", robot="ur5")
    assert ds.effort_kind == "current" and any("custom_data" in n for n in report.notes)
    assert sum("effort_kind=current" in line for line in report.lines()) == 1  # said once, not twice per import
    _ur_bag(tmp_path / "contract", {"effort_kind": "torque"})
    assert import_source(tmp_path / "contract")[0].effort_kind == "torque"
    _ur_bag(tmp_path / "silent")
    ds, _ = import_source(tmp_path / "silent")
    assert ds.effort_kind == "torque" and EFFORT_UNSTATED_NOTE in ds.notes  # default, and says it is one
    assert import_source(tmp_path / "silent", effort_kind="current")[0].effort_kind == "current"


def test_torque_constants_convert_currents_on_import(tmp_path):
    from idyn_ros.commands import dataset as cmd
    from idyn_ros.data import load_dataset
    from idyn_ros.data.importers import convert_currents, import_source

    _, cur = _ur_bag(tmp_path / "bag", {"effort_kind": "current"})
    k = np.array([10.0, 11.0, 9.0, 4.0, 3.0, 2.0])
    ds, _ = import_source(tmp_path / "bag", robot="ur5", torque_constants=",".join(map(str, k)))
    assert ds.effort_kind == "torque"
    np.testing.assert_allclose(ds.tau, cur * k)  # on the bag's own grid: the stamps are exact
    preset, _ = import_source(tmp_path / "bag", robot="ur5", torque_constants="ur5")
    np.testing.assert_allclose(preset.tau, cur * torque_constants("ur5").as_array())
    with pytest.raises(DatasetError, match="already joint torques"):
        convert_currents(ds, k)  # already torques
    with pytest.raises(ParameterError, match="6 joints"):
        import_source(tmp_path / "bag", robot="ur5", torque_constants="1,2,3")
    out = tmp_path / "nm.npz"
    parser = __import__("argparse").ArgumentParser()
    cmd.configure(parser)
    args = parser.parse_args(["import", str(tmp_path / "bag"), "--robot", "ur5", "--torque-constants", "ur5", "-o",
                              str(out)])
    assert cmd.run(args) == 0
    saved = load_dataset(out)
    assert saved.effort_kind == "torque" and any("torque constants" in n for n in saved.notes)


def test_parse_torque_constants_and_ur_names():
    np.testing.assert_allclose(parse_torque_constants("1, 2,3,4,5,6", 6), [1, 2, 3, 4, 5, 6])
    for bad in ("1,2,x,4,5,6", "1,2,3,4,5,-6", "1,2"):
        with pytest.raises(ParameterError):
            parse_torque_constants(bad, 6)
    assert is_ur_arm(UR_JOINTS) and is_ur_arm([f"left_{j}" for j in UR_JOINTS])
    assert not is_ur_arm([f"panda_joint{i}" for i in range(1, 7)])
    assert torque_constants("panda") is None and len(torque_constants("ur5").sources) == 6


def test_training_reads_currents_and_warns_when_a_ur_bag_does_not_say(tmp_path):
    """Before: current data were refused with a hint at an import flag that converted nothing."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models.sources import TrainingWarning, load_recordings

    robot = RobotModel.from_robot("ur5")
    _ur_bag(tmp_path / "said", {"effort_kind": "current"})
    rec = load_recordings([tmp_path / "said"], robot)[0]
    assert rec.effort_kind == "current"
    _ur_bag(tmp_path / "silent")
    with pytest.warns(TrainingWarning, match="use_currents_as_efforts"):
        rec = load_recordings([tmp_path / "silent"], robot)[0]
    assert rec.effort_kind == "torque"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_recordings([tmp_path / "silent"], robot, effort_kind="current")[0].effort_kind == "current"


@pytest.mark.realdata
def test_the_ur5_ft_bags_are_currents(shared_data):
    from idyn_ros.data.importers import import_source

    ds, _ = import_source(shared_data / "ur5_ft" / "Movement_No10_Standstill_ForceSensor_Fx", robot="ur5")
    assert ds.effort_kind == "current" and ds.joint_names == UR_JOINTS


def test_torque_constants_refuse_torques_and_never_scale_twice(tmp_path):
    """--torque-constants used to force effort_kind current, so torques were scaled, and scaled again on re-import."""
    from idyn_ros.data.importers import import_source

    k = "10,11,9,4,3,2"
    _ur_bag(tmp_path / "torque", {"effort_kind": "torque"})
    with pytest.raises(DatasetError, match="not motor currents"):
        import_source(tmp_path / "torque", robot="ur5", torque_constants=k)
    _, cur = _ur_bag(tmp_path / "silent")  # a source that does not say: --torque-constants says they are currents
    converted, report = import_source(tmp_path / "silent", robot="ur5", torque_constants=k)
    np.testing.assert_allclose(converted.tau, cur * np.array([10, 11, 9, 4, 3, 2]))
    assert not any(n.startswith("effort_kind not stated") for n in report.notes)
    path = converted.save(tmp_path / "nm.npz")
    for effort_kind in (None, "current"):
        with pytest.raises(DatasetError, match="already joint torques"):
            import_source(path, torque_constants=k, effort_kind=effort_kind)


def test_an_effort_kind_against_the_bags_metadata_is_noted(tmp_path):
    from idyn_ros.data.importers import import_source

    _ur_bag(tmp_path / "bag", {"effort_kind": "current"})
    ds, _ = import_source(tmp_path / "bag", robot="ur5", effort_kind="torque")
    assert ds.effort_kind == "torque"
    assert "effort_kind current stated by the source overridden: torque (--effort-kind)" in ds.notes


def test_a_value_that_starts_with_a_minus_reaches_the_check_of_the_gains(tmp_path, capsys):
    """`--torque-constants -10,...` stopped with argparse's "expected one argument" (it read the value as an option):
    users had to write --torque-constants=-10,..."""
    from idyn_ros.cli import main

    _ur_bag(tmp_path / "bag", {"effort_kind": "current"})
    for flag in (["--torque-constants", "-10,1,1,1,1,1"], ["--torque-constants=-10,1,1,1,1,1"]):
        assert main(["dataset", "import", str(tmp_path / "bag"), "--robot", "ur5", *flag, "-o",
                     str(tmp_path / "nm.npz")]) == 2
        assert "every gain must be a finite number > 0" in capsys.readouterr().err
    assert not (tmp_path / "nm.npz").exists()
    with pytest.raises(ParameterError, match="> 0"):
        parse_torque_constants("-10,1,1,1,1,1", 6)
