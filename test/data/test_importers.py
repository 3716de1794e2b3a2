"""CSV / NPZ import, joint mapping, cleaning (sort, de-duplicate, gaps, grid) and Dataset files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from idyn_ros.data import Dataset, load_dataset
from idyn_ros.data.importers import import_source, parse_joint_map, to_dataset
from idyn_ros.data.raw import RawRecording
from idyn_ros.errors import DatasetError

from .helpers import JOINTS, synthetic_motion


def _write_wide_csv(path: Path, names: list[str] | None, n_samples: int = 200) -> tuple:
    stamps, q, dq, tau = synthetic_motion(n_samples, rate=500.0, n=len(names) if names else 7, t0_ns=0)
    n = q.shape[1]
    if names is None:
        header = (
            ["t"]
            + [f"q{i + 1}" for i in range(n)]
            + [f"dq{i + 1}" for i in range(n)]
            + [f"tau{i + 1}" for i in range(n)]
        )
    else:
        header = ["time"] + [f"{j}_pos" for j in names] + [f"{j}_vel" for j in names] + [f"{j}_eff" for j in names]
    rows = np.concatenate([stamps[:, None] / 1e9, q, dq, tau], axis=1)
    with path.open("w") as f:
        f.write(",".join(header) + "\n")
        for r in rows:
            f.write(",".join(repr(float(x)) for x in r) + "\n")
    return stamps, q, dq, tau


def test_wide_csv_numbered_columns_map_by_position(tmp_path: Path) -> None:
    _s, q, _dq, tau = _write_wide_csv(tmp_path / "a.csv", None)
    ds, report = import_source(tmp_path / "a.csv", robot="panda")
    assert ds.joint_names == tuple(JOINTS) and ds.robot == "panda"
    np.testing.assert_allclose(ds.q, q, atol=1e-12)
    np.testing.assert_allclose(ds.tau, tau, atol=1e-12)
    assert abs(ds.rate_hz - 500.0) < 1e-6
    assert any("by position" in n for n in report.notes)


def test_wide_csv_named_columns_reordered_and_renamed(tmp_path: Path) -> None:
    fer = [f"fer_joint{i}" for i in range(1, 8)]
    shuffled = [fer[i] for i in (3, 0, 6, 1, 5, 2, 4)]
    stamps, q, _dq, _tau = synthetic_motion(200, rate=500.0, t0_ns=0)
    perm = [fer.index(j) for j in shuffled]
    path = tmp_path / "b.csv"
    with path.open("w") as f:
        f.write(
            "t," + ",".join(f"{j}_position" for j in shuffled) + "," + ",".join(f"{j}_effort" for j in shuffled) + "\n"
        )
        for k in range(len(stamps)):
            vals = [stamps[k] / 1e9, *q[k, perm], *q[k, perm] * 2]
            f.write(",".join(repr(float(v)) for v in vals) + "\n")
    other = tmp_path / "c.csv"  # names no preset knows: the error proposes the prefix map
    other.write_text(path.read_text().replace("fer_", "arm_"))
    with pytest.raises(DatasetError, match=r"has none of the joints.*--joint-map.*arm_=panda_"):
        import_source(other, robot="panda")
    ds, report = import_source(path, robot="panda", joint_map="fer_=panda_")
    ds_alias, _ = import_source(path, robot="panda")  # fer_ is franka_ros2's name for the Panda: read as such
    np.testing.assert_array_equal(ds_alias.q, ds.q)
    np.testing.assert_allclose(ds.q, q, atol=1e-12)
    np.testing.assert_allclose(ds.tau, 2 * q, atol=1e-12)
    assert any("dq estimated" in n for n in report.notes)  # no velocity columns: Savitzky-Golay
    np.testing.assert_allclose(ds.dq[10:-10], _dq[10:-10], rtol=0, atol=2e-3)
    # exact renames work too and win over prefix maps
    ds2, _ = import_source(path, robot="panda", joint_map=[f"fer_joint{i}=panda_joint{i}" for i in range(1, 8)])
    np.testing.assert_array_equal(ds2.q, ds.q)


def test_long_csv_layout(tmp_path: Path) -> None:
    stamps, q, dq, tau = synthetic_motion(50, rate=100.0, n=3, t0_ns=0)
    names = ["a", "b", "c"]
    path = tmp_path / "long.csv"
    with path.open("w") as f:
        f.write("t,joint,position,velocity,effort\n")
        for k in range(len(stamps)):
            for j in (2, 0, 1):
                row = [float(stamps[k]) / 1e9, names[j], float(q[k, j]), float(dq[k, j]), float(tau[k, j])]
                f.write(",".join(x if isinstance(x, str) else repr(x) for x in row) + "\n")
    ds, _ = import_source(path, joint_names=names)
    np.testing.assert_allclose(ds.q, q, atol=1e-12)
    np.testing.assert_allclose(ds.dq, dq, atol=1e-12)


def _raw(stamps, n=2, names=("j1", "j2")) -> RawRecording:
    stamps = np.asarray(stamps, dtype=np.int64)
    values = np.stack([stamps / 1e9 * (i + 1) for i in range(n)], axis=1)
    return RawRecording(stamps, list(names), {"q": values, "dq": values, "tau": values}, "synthetic")


def test_duplicates_out_of_order_and_gaps() -> None:
    ms = 1_000_000
    stamps = [0, 2 * ms, 1 * ms, 2 * ms, 3 * ms, 4 * ms, 20 * ms, 21 * ms, 22 * ms]  # dup, swap, 16 ms gap
    ds, report = to_dataset(_raw(stamps))
    assert report.duplicates_dropped == 1 and report.out_of_order == 1
    assert report.period_ns == ms
    assert ds.segment_starts.tolist() == [0, 5]
    assert len(ds) == 8 and len(report.gaps) == 1 and report.gaps[0][1] == pytest.approx(0.016)
    np.testing.assert_allclose(ds.q[:, 0], ds.t)  # values follow their stamps after sorting
    assert [s.stop - s.start for s in ds.segments()] == [5, 3]


def test_jittered_stamps_resampled_onto_grid_and_rate_option() -> None:
    rng = np.random.default_rng(0)
    stamps = (np.arange(1000) * 8e6 + rng.normal(0, 2e5, 1000)).astype(np.int64)  # 125 Hz with jitter
    ds, report = to_dataset(_raw(stamps))
    assert report.period_ns == pytest.approx(8e6, rel=0.01)
    assert np.ptp(np.diff(ds.t)) < 1e-12
    np.testing.assert_allclose(ds.q[:, 1], 2 * (ds.t + stamps[0] / 1e9), atol=1e-9)  # linear data: exact
    ds2, _ = to_dataset(_raw(stamps), rate=250.0)
    assert abs(ds2.rate_hz - 250.0) < 1e-9 and abs(len(ds2) - 2 * len(ds)) <= 2


def test_irregular_stamps_are_said_and_upsampling_splits_no_segment() -> None:
    from idyn_ros.data.importers import IRREGULAR_NOTE, RESAMPLED_NOTE

    ms = 1_000_000
    stamps = np.cumsum(np.resize([8 * ms, 24 * ms + 200_000], 400))  # PC receive times: 8/24.2 ms alternating
    ds, report = to_dataset(_raw(stamps))
    assert any(n.startswith(IRREGULAR_NOTE) for n in ds.notes) and not any(n.startswith(RESAMPLED_NOTE)
                                                                           for n in ds.notes)
    up, report = to_dataset(_raw(stamps), rate=125.0)
    assert len(up.segments()) == 1 and not report.gaps  # a 24 ms spacing is 3 output periods, not a gap
    assert abs(up.rate_hz - 125.0) < 1e-6 and len(up) == round((stamps[-1] - stamps[0]) / (8 * ms)) + 1
    np.testing.assert_allclose(up.q[:, 1], 2 * (up.t + stamps[0] / 1e9), atol=1e-9)  # linear data: exact
    assert any(n.startswith(f"{RESAMPLED_NOTE} from 62.11 Hz") for n in up.notes)
    regular, _ = to_dataset(_raw(np.arange(400) * 8 * ms))
    assert not any(n.startswith(IRREGULAR_NOTE) for n in regular.notes)


def test_contract_npz_is_resampled_to_the_rate_asked(tmp_path: Path) -> None:
    stamps, q, dq, tau = synthetic_motion(400, rate=200.0, n=7)
    ds = Dataset(t=(stamps - stamps[0]) / 1e9, q=q, dq=dq, tau=tau, joint_names=tuple(JOINTS), effort_kind="current")
    path = ds.save(tmp_path / "contract.npz")
    same, _ = import_source(path, rate=200.0)
    np.testing.assert_array_equal(same.q, ds.q)  # already on that grid: bit-exact
    half, report = import_source(path, rate=100.0)
    assert abs(half.rate_hz - 100.0) < 1e-9 and half.effort_kind == "current"
    np.testing.assert_allclose(half.q[:200], ds.q[::2], atol=1e-12)
    assert "on a 100 Hz grid" in report.lines()[1]
    assert sum(n.startswith("effort_kind=current") for n in half.notes) == 1


def test_a_contract_npz_with_stamps_out_of_order_or_repeated_is_sorted_like_any_source(tmp_path: Path) -> None:
    """Refused by every command with "re-import the source to sort and de-duplicate", which `idyn dataset import`
    of that file refused the same way: no command read it."""
    stamps, q, dq, tau = synthetic_motion(400, rate=200.0, n=7)
    t = (stamps - stamps[0]) / 1e9
    t[[100, 101]] = t[[101, 100]]  # two samples logged out of order
    t[300] = t[299]  # a stalled clock
    path = tmp_path / "contract.npz"
    np.savez(path, t=t, q=q, dq=dq, tau=tau, joint_names=np.array(JOINTS), effort_kind=np.array("current"),
             robot=np.array(""), source=np.array("logger"))
    ds, report = import_source(path)
    assert len(ds) == 400 and ds.effort_kind == "current"  # back on the 200 Hz grid
    assert report.out_of_order == 1 and report.repeated_stamps == 1
    np.testing.assert_allclose(ds.q[100], q[101])  # sorted back into place


def test_nan_error_names_sample_and_joint() -> None:
    raw = _raw(np.arange(10) * 1_000_000)
    raw.signals["tau"] = raw.signals["tau"].copy()
    raw.signals["tau"][4, 1] = np.nan
    with pytest.raises(DatasetError, match=r"NaN value\(s\) in tau, first at sample 4.*joint 'j2'"):
        to_dataset(raw)


def test_an_inf_is_named_at_its_own_sample() -> None:
    """An inf slipped past the NaN check into resampling, which reported 2 non-finite values from the sample before."""
    raw = _raw(np.arange(10) * 1_000_000 + np.array([0, 3, -2, 4, 0, -3, 2, 1, -1, 0]) * 10_000)  # jitter: resampled
    raw.signals["q"] = raw.signals["q"].copy()
    raw.signals["q"][6, 0] = np.inf
    with pytest.raises(DatasetError, match=r"1 inf value\(s\) in q, first at sample 6 .*joint 'j1'"):
        to_dataset(raw)


def test_foreign_npz_columns_and_contract_roundtrip(tmp_path: Path) -> None:
    stamps, q, dq, tau = synthetic_motion(300, rate=200.0, n=7, t0_ns=1_460_000_000_000_000_000)
    np.savez(
        tmp_path / "kuka.npz",
        times=stamps / 1e9,
        positions=q,
        velocities=dq,
        accelerations=q,
        torques=tau,
        target_positions=q,
        target_velocities=dq,
        target_accelerations=q,
    )
    names = [f"lwr_{i}_joint" for i in range(7)]
    ds, _ = import_source(tmp_path / "kuka.npz", joint_names=names)
    assert ds.ddq is not None and ds.q_d is not None and len(ds) == 300
    np.testing.assert_allclose(ds.q, q, atol=5e-5)  # epoch seconds in float64: ~0.24 us stamp rounding
    path = ds.save(tmp_path / "out.npz")
    back = load_dataset(path)
    for key in ("t", "q", "dq", "tau", "ddq", "q_d", "dq_d", "ddq_d"):
        np.testing.assert_array_equal(getattr(back, key), getattr(ds, key))
    assert back.joint_names == ds.joint_names and back.effort_kind == "torque"
    # a contract npz can be reordered by name on load
    rev = load_dataset(path, joint_names=names[::-1])
    np.testing.assert_array_equal(rev.q, ds.q[:, ::-1])


def test_columns_imported_without_names_stay_positional_in_the_saved_dataset(tmp_path: Path) -> None:
    """Imported without --robot, the columns were saved as joint1..joint7, and training on a robot then called the
    file another robot's recording (the raw file trained, taken by position)."""
    from idyn_ros.dynamics import RobotModel

    stamps, q, dq, tau = synthetic_motion(300, rate=200.0, n=7)
    np.savez(tmp_path / "raw.npz", times=stamps / 1e9, positions=q, velocities=dq, torques=tau)
    ds, _ = import_source(tmp_path / "raw.npz")
    assert ds.joint_names == tuple(f"joint{i + 1}" for i in range(7))
    saved = ds.save(tmp_path / "saved.npz")
    iiwa = RobotModel.from_robot("iiwa14").joint_names
    again, _ = import_source(saved, robot="iiwa14")
    assert again.joint_names == tuple(iiwa)
    np.testing.assert_array_equal(again.q, ds.q)
    with pytest.raises(DatasetError, match=r"7 unnamed joint columns but the robot has 6 joints.*another robot's"):
        import_source(saved, robot="ur5")


def test_dataset_validation_and_select() -> None:
    t = np.arange(5) * 0.1
    with pytest.raises(DatasetError, match="shape"):
        Dataset(t=t, q=np.zeros((5, 2)), dq=np.zeros((5, 2)), tau=np.zeros((4, 2)), joint_names=("a", "b"))
    with pytest.raises(DatasetError, match="strictly increasing"):
        Dataset(t=t[::-1], q=np.zeros((5, 2)), dq=np.zeros((5, 2)), tau=np.zeros((5, 2)), joint_names=("a", "b"))
    with pytest.raises(DatasetError) as info:  # the stamps as numbers, not `np.float64(inf) -> np.float64(0.1)`
        Dataset(t=np.array([0.0, np.inf, 0.1, 0.2, 0.3]), q=np.zeros((5, 2)), dq=np.zeros((5, 2)),
                tau=np.zeros((5, 2)), joint_names=("a", "b"))
    assert "(inf -> 0.1 s)" in str(info.value) and "np." not in str(info.value)
    with pytest.raises(DatasetError, match="effort_kind"):
        Dataset(
            t=t,
            q=np.zeros((5, 2)),
            dq=np.zeros((5, 2)),
            tau=np.zeros((5, 2)),
            joint_names=("a", "b"),
            effort_kind="volts",
        )
    ds = Dataset(
        t=t,
        q=np.zeros((5, 2)),
        dq=np.zeros((5, 2)),
        tau=np.zeros((5, 2)),
        joint_names=("a", "b"),
        segment_starts=[0, 3],
    )
    part = ds.select(slice(2, 5))
    assert part.segment_starts.tolist() == [0, 1] and len(part) == 3


def test_parse_joint_map_errors() -> None:
    assert parse_joint_map("a=b, c=d") == {"a": "b", "c": "d"}
    with pytest.raises(DatasetError, match="old=new"):
        parse_joint_map(["nonsense"])


def test_the_missing_joints_hint_proposes_the_prefix_map_that_fits_most_joints() -> None:
    from idyn_ros.data.hints import prefix_hint as _prefix_hint

    assert _prefix_hint(["arm_joint4", "arm_joint1"], ["panda_joint1", "panda_joint4"]) == "arm_=panda_"
    assert _prefix_hint(["ur5_shoulder_pan_joint", "ur5_elbow_joint"], ["shoulder_pan_joint", "elbow_joint"]) == "ur5_="
    assert _prefix_hint(["ns/shoulder_pan_joint"], ["shoulder_pan_joint"]) == "ns/="
    assert _prefix_hint(["a", "b"], ["panda_joint1"]) == "a=panda_joint1"  # no shared suffix: one exact rename

    assert _prefix_hint(["panda_joint1", "arm_joint2"], ["panda_joint2"]) == "arm_=panda_"  # not panda_=panda_


def test_a_joint_that_was_not_recorded_is_not_sent_to_the_joint_map(tmp_path: Path) -> None:
    """Renaming cannot supply a joint the recording lacks; the hint said --joint-map, and the map it proposed for
    another arm's joints (panda_=panda_, a no-op) only led to the next error."""
    six = tmp_path / "six.csv"
    _write_wide_csv(six, JOINTS[:6])
    with pytest.raises(DatasetError, match=r"lacks joints.*panda_joint7") as lacks:
        import_source(six, robot="panda")
    assert "--joint-map" not in str(lacks.value) and "no renaming can supply" in str(lacks.value)
    ur = tmp_path / "ur.csv"
    _write_wide_csv(ur, ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
                         "wrist_2_joint", "wrist_3_joint", "gripper_joint"])
    with pytest.raises(DatasetError, match="lacks joints") as one_renamed:
        import_source(ur, robot="panda", joint_map="shoulder_pan_joint=panda_joint1")
    assert "panda_=panda_" not in str(one_renamed.value)
    assert "--joint-map shoulder_lift_joint=panda_joint2" in str(one_renamed.value)  # a spare name onto a missing one
    with pytest.raises(DatasetError, match="lacks joints") as from_file:
        Dataset(t=np.arange(3.0), q=np.zeros((3, 6)), dq=np.zeros((3, 6)), tau=np.zeros((3, 6)),
                joint_names=tuple(JOINTS[:6]), source="six.npz").reorder(JOINTS)
    assert "--joint-map" not in str(from_file.value) and "fer_=panda_" not in str(from_file.value)
    saved = Dataset(t=np.arange(3.0), q=np.zeros((3, 6)), dq=np.zeros((3, 6)), tau=np.zeros((3, 6)),
                    joint_names=tuple(JOINTS[:6]), source="/bags/run.mcap:/joint_states").save(tmp_path / "run.npz")
    with pytest.raises(DatasetError, match="lacks joints") as imported:  # it named only the bag it came from
        import_source(saved, robot="panda")
    assert str(imported.value).startswith(f"{saved}: ") and "run.mcap" in str(imported.value)


def _ur_contract(path: Path, robot: str) -> Path:
    """A contract .npz of UR joint names (the UR5's and the UR10's) labelled for ``robot``."""
    from idyn_ros.robots import get_robot

    names = get_robot("ur5").joint_names
    stamps, q, dq, tau = synthetic_motion(200, rate=125.0, n=len(names))
    return Dataset(t=(stamps - stamps[0]) / 1e9, q=q, dq=dq, tau=tau, joint_names=names, robot=robot).save(path)


def test_a_dataset_labelled_for_another_robot_says_so(tmp_path: Path) -> None:
    """UR5 and UR10 share joint names: only the label tells their data apart."""
    import warnings

    from idyn_ros.data.importers import robot_label_conflict
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models.sources import TrainingWarning, load_recordings

    ur10 = _ur_contract(tmp_path / "ur10.npz", "ur10_robot")
    ds, report = import_source(ur10, robot="ur5")
    assert any("labelled for robot 'ur10_robot', used here with 'ur5'" in w for w in report.warnings)
    assert ds.robot == "ur5" and "robot label ur10_robot replaced by ur5 on import" in ds.notes
    with pytest.warns(TrainingWarning, match="labelled for robot 'ur10_robot'"):  # idyn train / evaluate
        load_recordings([ur10], RobotModel.from_robot("ur5"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrainingWarning)
        load_recordings([_ur_contract(tmp_path / "ur5.npz", "ur5")], RobotModel.from_robot("ur5"))
    with pytest.raises(DatasetError, match="labelled for robot 'iiwa14', used here with 'panda'"):
        robot_label_conflict("iiwa14", "panda", "x.npz")  # two presets: surely two arms
    assert robot_label_conflict("kuka_lwr4", "single_lwr_robot", "x.npz") == ""  # URDF stem vs <robot name>


def test_joints_of_another_robot_are_refused_for_a_preset(tmp_path: Path) -> None:
    _write_wide_csv(tmp_path / "a.csv", None)
    ur = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint", "extra_joint"]
    with pytest.raises(DatasetError, match=r"--joints names .*shoulder_pan_joint.* not joints of robot panda"):
        import_source(tmp_path / "a.csv", robot="panda", joint_names=ur)
    contract = _ur_contract(tmp_path / "ur.npz", "")
    with pytest.raises(DatasetError, match="not joints of robot panda"):
        import_source(contract, robot="panda", joint_names=ur[:6])


def test_stray_stamps_are_dropped_and_said_not_made_a_segment() -> None:
    """A zero stamp, a stale one and a future one each sat alone as a segment, moving the start or end of t."""
    ms = 1_000_000
    base = 1_700_000_000 * 10**9
    stamps = base + np.arange(100) * ms
    for stray in (0, base - 5 * 10**9, base + 10**17):
        ds, report = to_dataset(_raw(np.insert(stamps, 50, stray)))
        assert len(ds) == 100 and ds.segment_starts.tolist() == [0] and ds.t[-1] == pytest.approx(0.099)
        assert any(n.startswith("1 sample(s) alone between gaps dropped") and str(stray) in n for n in report.notes)
    ds, report = to_dataset(_raw(np.concatenate([stamps, stamps + 2 * 10**9])))  # a pause is still a gap
    assert ds.segment_starts.tolist() == [0, 100] and not any("alone" in n for n in report.notes)


def test_a_csv_with_a_byte_order_mark_reads_its_time_column(tmp_path: Path) -> None:
    _write_wide_csv(tmp_path / "a.csv", None)
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "a.csv").read_bytes())
    np.testing.assert_array_equal(import_source(bom, robot="panda")[0].q, import_source(tmp_path / "a.csv",
                                                                                         robot="panda")[0].q)


def test_an_empty_folder_holds_no_recording(tmp_path: Path) -> None:
    from idyn_ros.data.wrenches import read_joint_states

    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"no recording in folder .*empty"):
        import_source(tmp_path / "empty")
    with pytest.raises(DatasetError, match=r"no recording in folder .*empty"):  # idyn wrench reads it this way
        read_joint_states(tmp_path / "empty", JOINTS)
