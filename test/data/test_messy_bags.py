"""Messy but real-world bags: clocks that step or stall, compressed or damaged storage, odd joint-state messages.

Each bag is small and written here with the project's BagWriter or rosbags' Writer (as rosbag2 would write it).
"""

from __future__ import annotations

import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

from idyn_ros.data.importers import import_source
from idyn_ros.errors import BagReadError, DatasetError

from .helpers import JOINTS, float64_array_cdr, joint_state_cdr, synthetic_motion, write_joint_state_bag


def import_quietly(path: Path, **options):
    """import_source with the reader's BagWarnings silenced (the report keeps them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return import_source(path, robot="panda", **options)


# ---------------------------------------------------------------- sqlite recovery
@pytest.fixture(scope="module")
def deep_db3(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A 6000-message .db3 (2.6 MB): big enough that sqlite's messages table has an interior level whose root
    entries sit near the end of the file. Returns (bag folder, q)."""
    folder = tmp_path_factory.mktemp("deep") / "bag"
    _stamps, q, _dq, _tau = write_joint_state_bag(folder, storage="sqlite3", n_samples=6000)
    return folder, q


@pytest.mark.parametrize("fraction", [0.1, 0.5])
def test_a_cut_db3_recovers_the_rows_before_the_cut(deep_db3, tmp_path: Path, fraction: float) -> None:
    folder, q = deep_db3
    db3 = next(folder.glob("*.db3"))
    data = db3.read_bytes()
    (tmp_path / "metadata.yaml").write_bytes((folder / "metadata.yaml").read_bytes())
    (tmp_path / db3.name).write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(BagReadError, match="recover"):
        import_source(tmp_path, robot="panda")
    ds, report = import_quietly(tmp_path, recover=True)
    assert len(ds) > 0.8 * fraction * 6000  # a 10 % cut holds about 530 whole rows
    np.testing.assert_array_equal(ds.q, q[: len(ds)])
    assert any("read from the data pages past the damaged index" in w for w in report.warnings)


# ---------------------------------------------------------------- compression and damaged chunks
def write_compressed_bag(path: Path, mode: str, storage: str = "mcap", n_samples: int = 300) -> np.ndarray:
    """/joint_states written by rosbags with zstd compression in ``mode`` (rosbag2's --compression-mode FILE or
    MESSAGE; STORAGE: MCAP's own chunk compression); returns q."""
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer

    from idyn_ros.data.bag import idyn_typestore

    stamps, q, dq, tau = synthetic_motion(n_samples)
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3)
    writer.set_compression(getattr(CompressionMode, mode), CompressionFormat.ZSTD)
    writer.open()
    connection = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=idyn_typestore())
    for i in range(n_samples):
        writer.write(connection, int(stamps[i]), joint_state_cdr(stamps[i], JOINTS, q[i], dq[i], tau[i]))
    writer.close()
    return q


def mcap_chunks(data: bytes | bytearray) -> list[tuple[int, int, int]]:
    """(offset of the chunk record, offset of its records, their length) of each chunk of an MCAP file."""
    chunks, pos = [], 8
    while pos + 9 <= len(data) and data[pos] != 0x02:  # up to the footer
        op, (length,) = data[pos], struct.unpack_from("<Q", data, pos + 1)
        if op == 0x06:
            (name_length,) = struct.unpack_from("<I", data, pos + 9 + 28)
            start = pos + 9 + 32 + name_length + 8
            chunks.append((pos, start, struct.unpack_from("<Q", data, start - 8)[0]))
        pos += 9 + length
    return chunks


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_bag_compressed_message_by_message_imports(tmp_path: Path, storage: str) -> None:
    q = write_compressed_bag(tmp_path / "bag", "MESSAGE", storage)
    ds, _ = import_source(tmp_path / "bag", robot="panda")
    np.testing.assert_array_equal(ds.q, q)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_file_compressed_bag_imports_and_stays_compressed(tmp_path: Path, storage: str) -> None:
    q = write_compressed_bag(tmp_path / "bag", "FILE", storage)
    packed = next((tmp_path / "bag").glob("*.zstd"))
    before = packed.read_bytes()
    ds, _ = import_source(tmp_path / "bag", robot="panda")
    np.testing.assert_array_equal(ds.q, q)
    assert packed.read_bytes() == before and sorted(p.name for p in (tmp_path / "bag").iterdir()) == sorted(
        ["metadata.yaml", packed.name]), "the user's recording is read through a copy, never changed"


def test_a_cut_file_compressed_bag_is_a_bag_error_and_recover_reads_what_decompresses(tmp_path: Path) -> None:
    q = write_compressed_bag(tmp_path / "bag", "FILE", "mcap", n_samples=3000)
    packed = next((tmp_path / "bag").glob("*.zstd"))
    packed.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])  # a copy that stopped half way
    with pytest.raises(BagReadError, match=r"zstd-compressed as a whole\) does not decompress past byte"):
        import_source(tmp_path / "bag", robot="panda")
    ds, report = import_quietly(tmp_path / "bag", recover=True)
    assert 0 < len(ds) < len(q)
    np.testing.assert_array_equal(ds.q, q[: len(ds)])
    assert any("reading the part that decompressed" in w for w in report.warnings), report.warnings


def test_a_zstd_chunk_that_does_not_decompress_is_a_bag_error(tmp_path: Path) -> None:
    write_compressed_bag(tmp_path / "bag", "STORAGE")
    mcap = next((tmp_path / "bag").glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    _chunk, start, _length = mcap_chunks(data)[0]
    data[start : start + 16] = b"\xff" * 16  # the zstd frame's header: bytes a decompressor must refuse
    mcap.write_bytes(bytes(data))
    with pytest.raises(BagReadError, match="zstd data does not decompress"):
        import_source(tmp_path / "bag", robot="panda")


def test_a_chunk_that_fails_its_crc_is_damage_and_recover_reads_the_other_chunks(tmp_path: Path) -> None:
    _stamps, q, _dq, _tau = write_joint_state_bag(tmp_path / "bag", flush_every=100)
    mcap = next((tmp_path / "bag").glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    chunks = mcap_chunks(data)
    assert len(chunks) == 6  # the first holds the schema and channel records
    for chunk, start, length in chunks:  # rosbags stores CRC 0 (unchecked); rosbag2 stores the real one
        struct.pack_into("<I", data, chunk + 9 + 24, zlib.crc32(data[start : start + length]))
    _chunk, start, length = chunks[3]  # messages 200..299
    data[start + length // 2] ^= 0x10  # bit rot: still a valid message, with a wrong value
    mcap.write_bytes(bytes(data))
    with pytest.raises(BagReadError, match="do not match the chunk's CRC"):
        import_source(tmp_path / "bag", robot="panda")
    ds, report = import_quietly(tmp_path / "bag", recover=True)
    assert len(ds.segments()) == 2 and len(ds) == 400
    np.testing.assert_array_equal(ds.q[:200], q[:200])
    np.testing.assert_array_equal(ds.q[200:], q[300:])
    assert any("1 chunk(s) cannot be read" in w for w in report.warnings)


# ---------------------------------------------------------------- clocks (--stamps)
def write_stamped_bag(path: Path, header_ns, log_ns, commands: bool = False, unstamped_wrench=None,
                      motion: tuple | None = None) -> dict:
    """/joint_states with the given header stamps and log times; optionally effort commands answering each state
    (no header: placed by log time) and an F/T WrenchStamped whose header stamp is 0 (fz per message). Returns the
    motion (q, dq, tau) written: ``motion``, or a smooth one."""
    from idyn_ros.data.bag import BagWriter, idyn_typestore

    store = idyn_typestore()
    T = store.types
    q, dq, tau = motion or synthetic_motion(len(header_ns))[1:]
    with BagWriter(path) as writer:
        writer.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        if commands:
            writer.add_topic("/effort_controller/commands", "std_msgs/msg/Float64MultiArray")
        if unstamped_wrench is not None:
            writer.add_topic("/ft_sensor/wrench", "geometry_msgs/msg/WrenchStamped")
        for i, (h, t) in enumerate(zip(header_ns, log_ns, strict=True)):
            writer.write("/joint_states", int(t), joint_state_cdr(h, JOINTS, q[i], dq[i], tau[i]))
            if commands:  # sent 0.3 ms after the state it answers
                writer.write("/effort_controller/commands", int(t) + 300_000, float64_array_cdr(tau[i]))
            if unstamped_wrench is not None:
                V = T["geometry_msgs/msg/Vector3"]
                msg = T["geometry_msgs/msg/WrenchStamped"](
                    header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=0, nanosec=0),
                                                    frame_id="ft"),
                    wrench=T["geometry_msgs/msg/Wrench"](force=V(x=0.0, y=0.0, z=float(unstamped_wrench[i])),
                                                         torque=V(x=0.0, y=0.0, z=0.0)))
                writer.write("/ft_sensor/wrench", int(t) + 200_000,
                             bytes(store.serialize_cdr(msg, "geometry_msgs/msg/WrenchStamped")))
    return {"q": q, "dq": dq, "tau": tau}


T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def grid(n: int, t0: int = T0) -> np.ndarray:
    """n stamps 1 ms apart from t0."""
    return t0 + MS * np.arange(n, dtype=np.int64)


def two_runs() -> tuple[np.ndarray, np.ndarray]:
    """(header, log) of two simulator runs in one bag: sim time starts at 1 ms in both; 1 s between them."""
    return np.r_[grid(300, MS), grid(300, MS)], np.r_[grid(300), grid(300, T0 + 1300 * MS)]


def clock_step() -> tuple[np.ndarray, np.ndarray]:
    """(header, log) of a robot clock stepped back by 0.2 s (an NTP correction) after 300 of 600 messages."""
    header = grid(600)
    header[300:] -= 200 * MS
    return header, grid(600) + 50_000


@pytest.mark.parametrize(("case", "segments"), [(two_runs, 2), (clock_step, 1)])
def test_a_header_clock_that_jumps_back_is_refused_and_log_times_keep_every_message(tmp_path: Path, case,
                                                                                     segments: int) -> None:
    header, log = case()
    motion = write_stamped_bag(tmp_path / "bag", header, log)
    with pytest.raises(DatasetError, match=r"jump back by 0\.\d+ s at message 300.*stamps='log'"):
        import_source(tmp_path / "bag", robot="panda")
    ds, _ = import_source(tmp_path / "bag", robot="panda", stamps="log")
    assert len(ds) == 600 and len(ds.segments()) == segments
    np.testing.assert_array_equal(ds.q, motion["q"])
    ds, _ = import_source(tmp_path / "bag", robot="panda", stamps="header")  # sorted by stamp, as asked
    assert len(ds) < 600


def test_commands_logged_on_another_clock_land_on_the_joint_states_clock(tmp_path: Path) -> None:
    header = grid(400)
    motion = write_stamped_bag(tmp_path / "bag", header, header + 35 * MS, commands=True)  # robot clock 35 ms behind
    ds, _ = import_source(tmp_path / "bag", robot="panda")
    assert np.abs(ds.tau_cmd - motion["tau"]).max() < 0.05  # each command next to the state it answers
    assert any("-0.035 s from the bag's log times" in note for note in ds.notes)


def test_idyn_wrench_places_an_unstamped_wrench_on_the_joint_states_clock(tmp_path: Path) -> None:
    from idyn_ros.data.wrenches import read_joint_states, read_wrenches

    header = grid(400)
    fz = np.where(np.arange(400) >= 200, 10.0, 0.0)  # a 10 N step at the 200th state
    write_stamped_bag(tmp_path / "bag", header, header + 40 * MS, unstamped_wrench=fz)
    series = read_joint_states(tmp_path / "bag", JOINTS)
    ft = read_wrenches(tmp_path / "bag", ["/ft_sensor/wrench"], series.log_to_header_ns)["/ft_sensor/wrench"]
    step_at = ft.t_ns[np.flatnonzero(ft.values[:, 2] > 5)[0]]
    assert abs(step_at - series.t_ns[200]) < MS


def test_a_stalled_stamp_is_told_apart_from_a_message_sent_twice(tmp_path: Path) -> None:
    header = grid(500)
    header[200:230] = header[200]  # the driver's stamp stalls for 30 ms while the arm moves
    log = grid(500) + 50_000
    write_stamped_bag(tmp_path / "bag", header, log)
    ds, report = import_source(tmp_path / "bag", robot="panda")
    assert (report.repeated_stamps, report.duplicates_dropped) == (29, 0)
    assert any("29 message(s) repeat the stamp of the one before with other positions" in w and "stamps='log'" in w
               for w in report.warnings)
    assert "29 repeated stamps with other positions dropped" in ds.notes
    ds, report = import_source(tmp_path / "bag", robot="panda", stamps="log")
    assert len(ds) == 500 and report.repeated_stamps == 0


def test_a_message_recorded_twice_is_a_duplicate(tmp_path: Path) -> None:
    again = np.r_[np.arange(250), 249, np.arange(250, 500)]  # message 249 recorded a second time
    _stamps, q, dq, tau = synthetic_motion(500)
    write_stamped_bag(tmp_path / "bag", grid(500)[again], grid(501) + 50_000, motion=(q[again], dq[again], tau[again]))
    _ds, report = import_source(tmp_path / "bag", robot="panda")
    assert (report.duplicates_dropped, report.repeated_stamps) == (1, 0)


# ---------------------------------------------------------------- joint-state messages
def write_messages(path: Path, messages: dict[str, list[tuple[int, bytes]]], types: dict[str, str]) -> None:
    """A bag holding ``messages[topic] = [(log_ns, cdr), ...]``; topics of ``types`` with none stay empty."""
    from idyn_ros.data.bag import BagWriter

    with BagWriter(path) as writer:
        for topic, msgtype in types.items():
            writer.add_topic(topic, msgtype)
        for log_ns, topic, cdr in sorted((t, topic, c) for topic, items in messages.items() for t, c in items):
            writer.write(topic, log_ns, cdr)


def test_one_message_per_joint_with_one_stamp_is_one_state(tmp_path: Path) -> None:
    stamps, q, dq, tau = synthetic_motion(300)
    per_joint = [(int(stamps[i]) + 1000 * j, joint_state_cdr(stamps[i], [JOINTS[j]], [q[i, j]], [dq[i, j]],
                                                             [tau[i, j]]))
                 for i in range(300) for j in range(7)]
    write_messages(tmp_path / "bag", {"/joint_states": per_joint}, {"/joint_states": "sensor_msgs/msg/JointState"})
    ds, _ = import_source(tmp_path / "bag", robot="panda")
    np.testing.assert_array_equal(ds.q, q)
    assert any(note.startswith("1800 messages merged into the one before") for note in ds.notes)


@pytest.mark.parametrize(("field", "message"), [
    ("effort", r"6 of 300 messages have an empty effort array .* The recording holds no NaN"),
    ("short", r"300 message\(s\) have effort arrays of another length than their names; .* has 7 effort values "
              "for 9 names"),
])
def test_a_missing_or_short_field_is_named_not_called_nan(tmp_path: Path, field: str, message: str) -> None:
    stamps, q, dq, tau = synthetic_motion(300)
    names = [*JOINTS, "panda_finger_joint1", "panda_finger_joint2"] if field == "short" else JOINTS
    fingers = [0.04, 0.04] if field == "short" else []
    items = [(int(stamps[i]), joint_state_cdr(stamps[i], names, [*q[i], *fingers], [*dq[i], *fingers],
                                              [] if field == "effort" and i % 50 == 49 else tau[i]))
             for i in range(300)]
    write_messages(tmp_path / "bag", {"/joint_states": items}, {"/joint_states": "sensor_msgs/msg/JointState"})
    with pytest.raises(DatasetError, match=message):
        import_source(tmp_path / "bag", robot="panda")


def test_an_empty_joint_states_topic_points_to_the_one_with_data(tmp_path: Path) -> None:
    stamps, q, dq, tau = synthetic_motion(100)
    items = [(int(stamps[i]), joint_state_cdr(stamps[i], JOINTS, q[i], dq[i], tau[i])) for i in range(100)]
    types = {"/joint_states": "sensor_msgs/msg/JointState", "/franka/joint_states": "sensor_msgs/msg/JointState"}
    write_messages(tmp_path / "bag", {"/franka/joint_states": items}, types)
    with pytest.raises(DatasetError, match=r"holds no messages; joint states are on /franka/joint_states: .*"
                                           r"topic='/franka/joint_states'"):
        import_source(tmp_path / "bag", robot="panda")


def test_a_damaged_command_message_is_a_bag_error_and_recover_skips_it(tmp_path: Path) -> None:
    stamps, q, dq, tau = synthetic_motion(300)
    states = [(int(stamps[i]), joint_state_cdr(stamps[i], JOINTS, q[i], dq[i], tau[i])) for i in range(300)]
    commands = [(int(stamps[i]) + 1000, float64_array_cdr(tau[i]) if i != 100 else b"\x00\x01\x00\x00" + b"\xff" * 20)
                for i in range(300)]
    write_messages(tmp_path / "bag", {"/joint_states": states, "/effort_controller/commands": commands},
                   {"/joint_states": "sensor_msgs/msg/JointState",
                    "/effort_controller/commands": "std_msgs/msg/Float64MultiArray"})
    with pytest.raises(BagReadError, match=r"on /effort_controller/commands .* cannot be decoded"):
        import_source(tmp_path / "bag", robot="panda")
    ds, report = import_quietly(tmp_path / "bag", recover=True)
    assert len(ds) == 300 and ds.tau_cmd is not None
    assert any("/effort_controller/commands" in w and "skipped" in w for w in report.warnings)


# ---------------------------------------------------------------- what the reports say
def write_split_bag(folder: Path, files: int, metadata: bool = True) -> None:
    """A bag split into ``files`` MCAP files of 50 messages each (rosbag2's max_bagfile_size): folder/bag_<k>.mcap,
    with a metadata.yaml naming them in order, or without one."""
    from ruamel.yaml import YAML

    folder.mkdir()
    for k in range(files):
        write_joint_state_bag(folder / f"part{k}", n_samples=50, t0_ns=T0 + k * 50 * MS)
        (folder / f"part{k}" / f"part{k}.mcap").rename(folder / f"bag_{k}.mcap")
        meta = folder / f"part{k}" / "metadata.yaml"
        if metadata and k == 0:
            yaml = YAML(typ="safe")
            doc = yaml.load(meta.read_text())
            doc["rosbag2_bagfile_information"]["relative_file_paths"] = [f"bag_{i}.mcap" for i in range(files)]
            doc["rosbag2_bagfile_information"]["files"] = []
            with (folder / "metadata.yaml").open("w") as f:
                yaml.dump(doc, f)
        meta.unlink()
        (folder / f"part{k}").rmdir()


def test_a_missing_split_file_is_said_to_leave_a_gap(tmp_path: Path) -> None:
    write_split_bag(tmp_path / "bag", 4)
    (tmp_path / "bag" / "bag_1.mcap").unlink()
    ds, report = import_quietly(tmp_path / "bag")
    assert any("names ['bag_1.mcap'], which is not in the folder; reading the 3 file(s) that are there: the time "
               "the missing ones recorded is a gap" in w for w in report.warnings)
    assert len(ds.segments()) == 2
    assert any(note.startswith("bag reader: ") and "bag_1.mcap" in note for note in ds.notes)  # kept in the .npz


def test_a_split_bag_without_metadata_is_read_in_the_order_of_its_numbers(tmp_path: Path) -> None:
    write_split_bag(tmp_path / "bag", 11, metadata=False)
    ds, report = import_quietly(tmp_path / "bag")
    assert report.out_of_order == 0 and len(ds) == 550
    assert any("in name order: bag_0.mcap, bag_1.mcap, bag_2.mcap" in w for w in report.warnings)


def test_a_recovered_part_stays_marked_in_the_dataset(tmp_path: Path) -> None:
    write_joint_state_bag(tmp_path / "bag", n_samples=300, flush_every=100)
    mcap = tmp_path / "bag" / "bag.mcap"
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size * 2 // 3])
    ds, _ = import_quietly(tmp_path / "bag", recover=True)
    assert any(note.startswith("bag reader: ") and "of 300 messages written" in note for note in ds.notes)


def test_import_warns_of_positions_beyond_the_joint_limits_and_info_gives_gaps_from_to(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from idyn_ros.cli import main

    _stamps, q, dq, tau = synthetic_motion(400)
    header = grid(400)
    header[200:] += 500 * MS  # the recording paused for half a second
    write_stamped_bag(tmp_path / "bag", header, header, motion=(np.degrees(q) + 90, np.degrees(dq), tau))
    assert main(["dataset", "import", str(tmp_path / "bag"), "--robot", "panda", "-o", str(tmp_path / "d.npz")]) == 0
    out = capsys.readouterr().out
    assert "warning: " in out and "leave the limits of robot 'panda'" in out and "units (rad)" in out
    assert "gap of 0.501 s from t = 0.199 to 0.7 s (new segment)" in out
    assert main(["dataset", "info", str(tmp_path / "d.npz")]) == 0
    assert "gaps: 0.501 s (t = 0.199 to 0.7 s)" in capsys.readouterr().out
