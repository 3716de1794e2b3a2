"""rosbag2 reading/writing: exact round trips, damaged and killed bags, messy real-world layouts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from idyn_ros.data.bag import BagReader, BagWarning, BagWriter
from idyn_ros.data.importers import import_source
from idyn_ros.errors import BagReadError, DatasetError

from .helpers import JOINTS, joint_state_cdr, write_joint_state_bag

STORAGES = [("mcap", "mcap"), ("sqlite3", "db3")]


@pytest.mark.parametrize(("storage", "ext"), STORAGES)
def test_roundtrip_is_exact(tmp_path: Path, storage: str, ext: str) -> None:
    stamps, q, dq, tau = write_joint_state_bag(tmp_path / "bag", storage, 400)
    ds, report = import_source(tmp_path / "bag", joint_names=JOINTS)
    assert np.array_equal(np.round(ds.t * 1e9).astype(np.int64), stamps - stamps[0])
    assert np.array_equal(ds.q, q) and np.array_equal(ds.dq, dq) and np.array_equal(ds.tau, tau)
    assert report.period_ns == 1_000_000 and report.duplicates_dropped == 0
    # a single storage file without its folder (bare .db3 / .mcap) reads the same
    bare = tmp_path / f"bare.{ext}"
    shutil.copy(tmp_path / "bag" / f"bag.{ext}", bare)
    ds2, _ = import_source(bare, joint_names=JOINTS)
    assert np.array_equal(ds2.q, q)


@pytest.mark.parametrize(("storage", "ext"), STORAGES)
def test_rosbags_reads_our_bags(tmp_path: Path, storage: str, ext: str) -> None:
    from rosbags.highlevel import AnyReader

    write_joint_state_bag(tmp_path / "bag", storage, 50)
    with AnyReader([tmp_path / "bag"]) as reader:
        assert sum(1 for _ in reader.messages()) == 50


@pytest.mark.parametrize(("storage", "ext"), STORAGES)
@pytest.mark.parametrize("fraction", [0.3, 0.8])
def test_truncated_bag_names_offset_and_recovers(tmp_path: Path, storage: str, ext: str, fraction: float) -> None:
    _stamps, q, _dq, _tau = write_joint_state_bag(tmp_path / "bag", storage, 3000, flush_every=100)
    full = (tmp_path / "bag" / f"bag.{ext}").read_bytes()
    cut = tmp_path / f"cut.{ext}"
    cut.write_bytes(full[: int(len(full) * fraction)])
    with pytest.raises(BagReadError) as err:
        import_source(cut, joint_names=JOINTS)
    text = str(err.value)
    assert str(cut) in text and "byte offset" in text and "message index" in text and "--recover" in text
    with pytest.warns(BagWarning, match="damaged"):
        ds, _ = import_source(cut, joint_names=JOINTS, recover=True)
    assert 0.5 * fraction * 3000 < len(ds) < 3000
    assert np.array_equal(ds.q, q[: len(ds)])  # the readable part is exactly the first messages


_KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {test_dir!r})
    from data.helpers import JOINTS, joint_state_cdr, synthetic_motion
    from idyn_ros.data.bag import BagWriter
    stamps, q, dq, tau = synthetic_motion(3000)
    w = BagWriter({path!r}, storage={storage!r})
    w.add_topic("/joint_states", "sensor_msgs/msg/JointState")
    for i in range(3000):
        w.write("/joint_states", int(stamps[i]), joint_state_cdr(stamps[i], JOINTS, q[i], dq[i], tau[i]))
        if i == 1999:
            w.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize(("storage", "ext"), STORAGES)
def test_sigkilled_writer_is_recoverable(tmp_path: Path, storage: str, ext: str) -> None:
    from .helpers import synthetic_motion

    bag = tmp_path / "killed"
    script = _KILLED_WRITER.format(test_dir=str(Path(__file__).parent.parent), path=str(bag), storage=storage)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not (bag / "metadata.yaml").exists()
    with pytest.raises(BagReadError, match="recover"):
        import_source(bag, joint_names=JOINTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BagWarning)
        ds, _ = import_source(bag, joint_names=JOINTS, recover=True)
    _s, q, _dq, _tau = synthetic_motion(3000)
    assert 2000 <= len(ds) <= 3000  # everything up to the flush, maybe more
    assert np.array_equal(ds.q, q[: len(ds)])


def test_metadata_naming_a_missing_file_warns_and_reads(tmp_path: Path) -> None:
    write_joint_state_bag(tmp_path / "bag", "sqlite3", 30)
    (tmp_path / "bag" / "bag.db3").rename(tmp_path / "bag" / "renamed.db3")
    with pytest.warns(BagWarning, match=r"names \['bag.db3'\].*renamed.db3"):
        ds, report = import_source(tmp_path / "bag", joint_names=JOINTS)
    assert len(ds) == 30 and any("bag.db3" in w for w in report.warnings)


def test_not_a_bag_and_empty_files(tmp_path: Path) -> None:
    empty = tmp_path / "x.db3"
    empty.write_bytes(b"")
    with pytest.raises(BagReadError, match="empty"):
        BagReader(empty).topics()
    junk = tmp_path / "y.mcap"
    junk.write_bytes(b"hello world, not mcap")
    with pytest.raises(BagReadError, match="neither"):
        BagReader(junk).topics()
    text_file = tmp_path / "y.txt"
    text_file.write_text("1,2")
    with pytest.raises(DatasetError, match="unknown format"):
        import_source(text_file)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_custom_types_and_reference_topic(tmp_path: Path, storage: str) -> None:
    from idyn_ros.data.bag import idyn_typestore

    store = idyn_typestore()
    Ref = store.types["idyn_ros/msg/JointReference"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    n = 100
    with BagWriter(tmp_path / "bag", storage=storage) as w:
        w.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        w.add_topic("/idyn/reference", "idyn_ros/msg/JointReference")
        for i in range(n):
            stamp = 1_000_000_000 + i * 1_000_000
            q = np.full(7, 0.01 * i)
            w.write("/joint_states", stamp, joint_state_cdr(stamp, JOINTS, q, q, q))
            ref = Ref(
                header=Header(stamp=Time(sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id=""),
                joint_names=JOINTS[::-1],  # reversed on purpose: resolved by name
                positions=q[::-1] + 1.0,
                velocities=np.zeros(7),
                accelerations=np.zeros(7),
            )
            w.write("/idyn/reference", stamp, bytes(store.serialize_cdr(ref, "idyn_ros/msg/JointReference")))
    ds, _ = import_source(tmp_path / "bag", joint_names=JOINTS)
    assert ds.q_d is not None
    np.testing.assert_allclose(ds.q_d, ds.q + 1.0)


def test_writer_refuses_existing_output(tmp_path: Path) -> None:
    (tmp_path / "bag").mkdir()
    with pytest.raises(DatasetError, match="exists"):
        BagWriter(tmp_path / "bag")
    assert os.path.isdir(tmp_path / "bag")


def test_commands_and_ground_truth_wrench_topics(tmp_path: Path) -> None:
    from idyn_ros.data.bag import idyn_typestore

    store = idyn_typestore()
    T = store.types
    header = lambda s: T["std_msgs/msg/Header"](  # noqa: E731
        stamp=T["builtin_interfaces/msg/Time"](sec=s // 10**9, nanosec=s % 10**9), frame_id=""
    )
    n = 60
    with BagWriter(tmp_path / "bag", storage="mcap") as w:
        w.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        w.add_topic("/effort_controller/commands", "std_msgs/msg/Float64MultiArray")
        w.add_topic("/plant/ground_truth", "idyn_ros/msg/PlantGroundTruth")
        for i in range(n):
            stamp = 2_000_000_000 + i * 2_000_000
            q = np.full(7, 0.001 * i)
            w.write("/joint_states", stamp, joint_state_cdr(stamp, JOINTS, q, q, q))
            cmd = T["std_msgs/msg/Float64MultiArray"](
                layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0), data=q * 10
            )
            w.write("/effort_controller/commands", stamp, bytes(store.serialize_cdr(cmd, cmd.__msgtype__)))
            vec = T["geometry_msgs/msg/Vector3"]
            truth = T["idyn_ros/msg/PlantGroundTruth"](
                header=header(stamp),
                joint_names=JOINTS,
                external_torque=np.zeros(7),
                link="flange",
                wrench=T["geometry_msgs/msg/Wrench"](
                    force=vec(x=1.0 * i, y=0.0, z=-9.81), torque=vec(x=0.0, y=0.0, z=0.5)
                ),
                payload_mass=0.0,
            )
            w.write("/plant/ground_truth", stamp, bytes(store.serialize_cdr(truth, truth.__msgtype__)))
    ds, _ = import_source(tmp_path / "bag", robot="panda")
    np.testing.assert_allclose(ds.tau_cmd, ds.q * 10)
    assert ds.wrench.shape == (n, 6)
    np.testing.assert_allclose(ds.wrench[:, 0], np.arange(n))
    np.testing.assert_allclose(ds.wrench[:, 2], -9.81)


@pytest.mark.parametrize("size", [20, 60])
def test_a_db3_cut_inside_its_header_is_said_to_be_truncated(tmp_path: Path, size: int) -> None:
    write_joint_state_bag(tmp_path / "bag", "sqlite3", 50)
    cut = tmp_path / "cut.db3"
    cut.write_bytes(next((tmp_path / "bag").glob("*.db3")).read_bytes()[:size])
    with pytest.raises(BagReadError, match=f"{size} bytes, shorter than the 100-byte header.*truncated"):
        import_source(cut, joint_names=JOINTS)


def test_an_mcap_cut_before_its_first_channel_is_said_to_be_truncated(tmp_path: Path) -> None:
    write_joint_state_bag(tmp_path / "bag", "mcap", 50)
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(next((tmp_path / "bag").glob("*.mcap")).read_bytes()[:30])
    with pytest.raises(BagReadError, match=r"no topic is readable.*truncated or damaged"):
        import_source(cut, joint_names=JOINTS)


def _bag_with_commands(path: Path, command_topic: str, ragged_at: int | None = None) -> None:
    """/joint_states, a String topic and a Float64MultiArray command topic, 60 samples at 500 Hz."""
    from idyn_ros.data.bag import idyn_typestore

    from .helpers import float64_array_cdr

    store = idyn_typestore()
    text = bytes(store.serialize_cdr(store.types["std_msgs/msg/String"](data="x"), "std_msgs/msg/String"))
    with BagWriter(path, storage="mcap") as w:
        w.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        w.add_topic("/status", "std_msgs/msg/String")
        w.add_topic(command_topic, "std_msgs/msg/Float64MultiArray")
        for i in range(60):
            stamp = 2_000_000_000 + i * 2_000_000
            q = np.full(7, 0.001 * i)
            w.write("/joint_states", stamp, joint_state_cdr(stamp, JOINTS, q, q, q))
            w.write("/status", stamp, text)
            w.write(command_topic, stamp, float64_array_cdr(q[:6] if i == ragged_at else q * 10))


def test_a_wrench_topic_of_another_type_or_the_joint_states_is_refused(tmp_path: Path) -> None:
    _bag_with_commands(tmp_path / "bag", "/effort_controller/commands")
    with pytest.raises(DatasetError, match="--wrench-topic /status is std_msgs/msg/String; it must be one of"):
        import_source(tmp_path / "bag", robot="panda", wrench_topic="/status")
    with pytest.raises(DatasetError, match=r"--wrench-topic /joint_states is .*the joint-state topic itself"):
        import_source(tmp_path / "bag", robot="panda", wrench_topic="/joint_states")


def test_only_effort_commands_of_one_length_become_tau_cmd(tmp_path: Path) -> None:
    _bag_with_commands(tmp_path / "ragged", "/effort_controller/commands", ragged_at=30)
    ds, report = import_source(tmp_path / "ragged", robot="panda")
    assert ds.tau_cmd is None and any("messages hold [6, 7] values" in n for n in report.notes)
    _bag_with_commands(tmp_path / "position", "/forward_position_controller/commands")
    ds, report = import_source(tmp_path / "position", robot="panda")
    assert ds.tau_cmd is None and any("does not say it commands effort" in n for n in report.notes)
    _bag_with_commands(tmp_path / "effort", "/joint_group_effort_controller/commands")
    assert import_source(tmp_path / "effort", robot="panda")[0].tau_cmd is not None


def _two_publishers_bag(path: Path, second: list[str], first: list[str] = JOINTS) -> None:
    """/joint_states from two publishers: ``first`` every 2 ms, ``second`` 0.1 ms after every other one."""
    with BagWriter(path, storage="mcap") as w:
        w.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        for i in range(100):
            stamp = 2_000_000_000 + i * 2_000_000
            q = np.full(len(first), 0.001 * i)
            w.write("/joint_states", stamp, joint_state_cdr(stamp, first, q, q, q))
            if i % 2 == 0:
                z = np.zeros(len(second))
                w.write("/joint_states", stamp + 100_000, joint_state_cdr(stamp + 100_000, second, z, z, z))


def test_a_grippers_messages_on_the_joint_state_topic_are_skipped_and_counted(tmp_path: Path) -> None:
    fingers = ["panda_finger_joint1", "panda_finger_joint2"]
    _two_publishers_bag(tmp_path / "gripper", fingers)
    ds, report = import_source(tmp_path / "gripper", robot="panda")
    assert len(ds) == 100 and ds.rate_hz == pytest.approx(500.0)
    assert any(n.startswith("50 of 150 messages skipped") and "panda_finger_joint1" in n for n in report.notes)
    _two_publishers_bag(tmp_path / "split", JOINTS[4:], first=JOINTS[:4])  # one arm state in two messages
    with pytest.raises(DatasetError, match=r"name only some of the joints.*lacks \['panda_joint5'"):
        import_source(tmp_path / "split", robot="panda")
