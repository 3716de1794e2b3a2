"""Faults a user found in the data layer: each test reproduces one and checks what the user sees.

Observable outcome only: the `idyn` exit code and its one-line message, or the exception of the
library call, and that no data is lost or overwritten.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from idyn_ros.cli import main
from idyn_ros.data import Dataset, load_dataset
from idyn_ros.data.bag import BagWarning, BagWriter
from idyn_ros.data.importers import import_source, to_dataset
from idyn_ros.data.raw import RawRecording
from idyn_ros.errors import BagReadError, DatasetError


def _load_helpers():
    """test/data/helpers.py (synthetic motions and bags written with the real rosbags writer)."""
    path = Path(__file__).parents[1] / "data" / "helpers.py"
    spec = importlib.util.spec_from_file_location("data_test_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


H = _load_helpers()
JOINTS = H.JOINTS


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.write_text(",".join(header) + "\n" + "".join(",".join(str(x) for x in r) + "\n" for r in rows))


# ------------------------------------------------------------------------ a. duplicate joint names
def test_duplicate_joint_name_in_bag_joint_states_is_refused(tmp_path: Path, capsys) -> None:
    stamps, q, dq, tau = H.synthetic_motion(50)
    names = [*JOINTS]
    names[1] = "panda_joint1"  # joint 2 published under joint 1's name
    bag = tmp_path / "bag"
    with BagWriter(bag) as writer:
        writer.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        for i in range(50):
            writer.write("/joint_states", int(stamps[i]), H.joint_state_cdr(stamps[i], names, q[i], dq[i], tau[i]))
    out = tmp_path / "out.npz"
    code, _, err = _run(capsys, "dataset", "import", str(bag), "-o", str(out))
    line = _one_line_error(err)
    assert code == 2
    assert str(bag) in line and "'panda_joint1'" in line and "more than once" in line
    assert not out.exists()
    with pytest.raises(DatasetError, match=r"panda_joint1.*more than once"):
        load_dataset(bag)


def test_duplicate_joint_column_in_csv_header_is_refused(tmp_path: Path, capsys) -> None:
    path = tmp_path / "dup.csv"
    header = ["t", "panda_joint1_pos", "panda_joint2_pos", "panda_joint1_pos", "panda_joint1_eff", "panda_joint2_eff"]
    _write_csv(path, header, [[k * 0.001, 0.1 * k, 0.2 * k, 0.3 * k, 1.0, 2.0] for k in range(100)])
    out = tmp_path / "out.npz"
    code, _, err = _run(capsys, "dataset", "import", str(path), "-o", str(out))
    line = _one_line_error(err)
    assert code == 2 and str(path) in line and "panda_joint1" in line and "twice" in line
    assert "'panda_joint1_pos'" in line  # the clashing columns are named
    assert not out.exists()


def test_joint_map_merging_two_joints_is_refused() -> None:
    stamps = np.arange(10, dtype=np.int64) * 1_000_000
    values = np.ones((10, 2))
    raw = RawRecording(stamps, ["a_j1", "b_j1"], {"q": values, "tau": values}, "rec.csv")
    with pytest.raises(DatasetError, match=r"same name.*'x_j1': \['a_j1', 'b_j1'\]"):
        to_dataset(raw, joint_map="a_=x_,b_=x_")


# ------------------------------------------------------------------------ b. time unit
def test_csv_time_in_epoch_nanoseconds_is_detected(tmp_path: Path, capsys) -> None:
    n = 500
    stamps = 1_700_000_000_123_456_789 + 1_000_000 * np.arange(n, dtype=np.int64)  # 1 kHz, epoch ns
    q = np.sin(np.arange(n) / 50.0)
    path = tmp_path / "ns.csv"
    _write_csv(path, ["t", "q1", "tau1"], [[int(s), repr(float(v)), 1.0] for s, v in zip(stamps, q, strict=True)])
    out = tmp_path / "ns.npz"
    code, text, _ = _run(capsys, "dataset", "import", str(path), "-o", str(out))
    assert code == 0
    assert "read in ns" in text and "duplicate stamps dropped: 0" in text
    assert f"{n} samples x 1 joints at 1000 Hz" in text
    ds = load_dataset(out)
    assert np.array_equal(np.round(ds.t * 1e9).astype(np.int64), stamps - stamps[0])  # exact, no float rounding
    np.testing.assert_array_equal(ds.q[:, 0], q)


def test_explicit_time_unit_overrides_detection(tmp_path: Path, capsys) -> None:
    path = tmp_path / "ms.csv"
    _write_csv(path, ["t", "q1", "tau1"], [[k * 8, 0.01 * k, 1.0] for k in range(200)])  # 8 ms steps: 125 Hz
    code, text, _ = _run(capsys, "dataset", "import", str(path), "-o", str(tmp_path / "a.npz"))
    assert code == 0 and "read in ms" in text and "at 125 Hz" in text
    code, text, _ = _run(capsys, "dataset", "import", str(path), "--time-unit", "us", "-o", str(tmp_path / "b.npz"))
    assert code == 0 and "at 1.25e+05 Hz" in text


def test_time_column_of_no_plausible_unit_is_refused(tmp_path: Path, capsys) -> None:
    path = tmp_path / "fast.csv"
    _write_csv(path, ["t", "q1", "tau1"], [[k * 5e-5, 0.01 * k, 1.0] for k in range(200)])  # 20 kHz in s: no unit fits
    out = tmp_path / "fast.npz"
    code, _, err = _run(capsys, "dataset", "import", str(path), "-o", str(out))
    line = _one_line_error(err)
    assert code == 2 and str(path) in line and "pass --time-unit" in line and not out.exists()


def test_single_stamp_recording_is_never_written(tmp_path: Path, capsys) -> None:
    path = tmp_path / "same.csv"
    _write_csv(path, ["t", "q1", "tau1"], [[5, 0.01 * k, 1.0] for k in range(50)])  # every stamp equal
    out = tmp_path / "same.npz"
    code, _, err = _run(capsys, "dataset", "import", str(path), "-o", str(out))
    line = _one_line_error(err)
    assert code == 2 and "only 1 distinct time stamp" in line and "--time-unit" in line
    assert not out.exists()
    one = Dataset(t=[0.0], q=[[0.0]], dq=[[0.0]], tau=[[0.0]], joint_names=("j",))
    with pytest.raises(DatasetError, match=r"1 sample\(s\).*at least 2 samples"):
        one.save(tmp_path / "one.npz")
    assert not (tmp_path / "one.npz").exists()


# ------------------------------------------------------------------------ c. NaN stamps
def test_nan_in_csv_time_column_names_the_rows(tmp_path: Path, capsys) -> None:
    path = tmp_path / "nan.csv"
    rows: list[list[object]] = [[k * 0.001, 0.01 * k, 1.0] for k in range(100)]
    rows[50][0] = "nan"
    rows[70][0] = ""
    _write_csv(path, ["t", "q1", "tau1"], rows)
    out = tmp_path / "nan.npz"
    code, _, err = _run(capsys, "dataset", "import", str(path), "-o", str(out))
    line = _one_line_error(err)
    assert code == 2 and str(path) in line and "2 row(s): line 52, line 72" in line  # header is line 1
    assert not out.exists()


def test_nan_in_foreign_npz_times_is_refused(tmp_path: Path) -> None:
    times = np.arange(100) * 0.005
    times[10] = np.nan
    path = tmp_path / "kuka.npz"
    np.savez(path, times=times, positions=np.zeros((100, 2)), torques=np.zeros((100, 2)))
    with pytest.raises(DatasetError, match=r"'times'.*1 row\(s\): index 10"):
        load_dataset(path)


# ------------------------------------------------------------------------ d. broken .npz
def _broken_npz_files(tmp_path: Path) -> dict[str, Path]:
    good = H.synthetic_motion(300, n=2)
    ds = Dataset(t=(good[0] - good[0][0]) / 1e9, q=good[1], dq=good[2], tau=good[3], joint_names=("a", "b"))
    whole = ds.save(tmp_path / "whole.npz").read_bytes()
    files = {"empty": tmp_path / "empty.npz", "truncated": tmp_path / "half.npz", "not an npz": tmp_path / "text.npz"}
    files["empty"].write_bytes(b"")
    files["truncated"].write_bytes(whole[: len(whole) // 2])
    files["not an npz"].write_text("t,q\n0,1\n")
    return files


def test_broken_npz_is_a_one_line_dataset_error(tmp_path: Path, capsys) -> None:
    for word, path in _broken_npz_files(tmp_path).items():
        with pytest.raises(DatasetError, match=re.escape(str(path)) + ".*" + word):
            load_dataset(path)
        code, _, err = _run(capsys, "dataset", "info", str(path))
        line = _one_line_error(err)
        assert code == 2 and str(path) in line and word in line


def test_broken_npz_given_to_train_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    path = _broken_npz_files(tmp_path)["truncated"]
    code, _, err = _run(capsys, "train", "--robot", "panda", "--model", "rbd", "--data", str(path),
                        "--out", str(tmp_path / "run"))
    line = _one_line_error(err)
    assert code == 2 and str(path) in line and "truncated" in line


# ------------------------------------------------------------------------ e. atomic writes
_KILLED_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    import numpy.lib.format as fmt
    from idyn_ros.data import Dataset
    written = []
    original = fmt.write_array
    def write_then_die(*args, **kwargs):
        if len(written) == 2:
            os.kill(os.getpid(), signal.SIGKILL)  # killed in the middle of the archive
        written.append(1)
        return original(*args, **kwargs)
    fmt.write_array = write_then_die
    t = np.arange(1000) * 0.001
    Dataset(t=t, q=np.ones((1000, 2)), dq=np.ones((1000, 2)), tau=np.ones((1000, 2)), joint_names=("a", "b")
            ).save(sys.argv[1])
    """
)


def test_dataset_save_killed_midway_leaves_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "ds.npz"
    t = np.arange(300) * 0.01
    old = Dataset(t=t, q=np.zeros((300, 2)), dq=np.zeros((300, 2)), tau=np.zeros((300, 2)), joint_names=("a", "b"))
    old.save(target)
    before = target.read_bytes()
    proc = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(target)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert target.read_bytes() == before  # the previous dataset is intact, not half overwritten
    np.testing.assert_array_equal(load_dataset(target).t, t)


def test_dataset_save_that_fails_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "new.npz"
    t = np.arange(300) * 0.01
    ds = Dataset(t=t, q=np.zeros((300, 2)), dq=np.zeros((300, 2)), tau=np.zeros((300, 2)), joint_names=("a", "b"))
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return original(*args, **kwargs)

    import numpy.lib.format as fmt

    original = fmt.write_array
    monkeypatch.setattr(fmt, "write_array", failing)
    with pytest.raises(OSError, match="No space"):
        ds.save(target)
    assert list(tmp_path.iterdir()) == []  # neither a half new.npz nor a temp file


def test_bag_metadata_yaml_is_put_in_place_whole_and_last(tmp_path: Path, monkeypatch) -> None:
    import os

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(("replace", f"{src} -> {dst}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    H.write_joint_state_bag(tmp_path / "bag", "mcap", 20)
    meta = tmp_path / "bag" / "metadata.yaml"
    put = [i for i, (kind, what) in enumerate(events) if kind == "replace" and what.endswith(f"-> {meta}")]
    assert put, events
    staged = events[put[-1]][1].split(" -> ")[0]
    synced = [what for kind, what in events[: put[-1]] if kind == "fsync"]
    assert staged in synced  # the file renamed onto metadata.yaml was on disk first
    assert str(tmp_path / "bag" / "bag.mcap") in synced  # and so were the messages it counts
    assert "message_count: 20" in meta.read_text()


# ------------------------------------------------------------------------ f. recovery of a cut MCAP
def _top_level_chunks(data: bytes) -> list[tuple[int, int]]:
    """(offset, record length) of the top-level MCAP chunk records (opcode 0x06)."""
    out, pos = [], 8
    while pos + 9 <= len(data):
        op = data[pos]
        (length,) = struct.unpack_from("<Q", data, pos + 1)
        if op == 0x06:
            out.append((pos, length))
        if op == 0x02:
            break
        pos += 9 + length
    return out


def test_recover_cut_mcap_keeps_complete_messages_of_the_cut_chunk(tmp_path: Path, capsys) -> None:
    bag = tmp_path / "bag"
    _stamps, q, _dq, _tau = H.write_joint_state_bag(bag, "mcap", 3000, flush_every=100)  # 30 chunks of 100
    storage = bag / "bag.mcap"
    data = storage.read_bytes()
    start, length = _top_level_chunks(data)[-1]
    storage.write_bytes(data[: start + 9 + length // 2])  # cut in the middle of the last chunk
    out = tmp_path / "part.npz"
    code, _, err = _run(capsys, "dataset", "import", str(bag), "-o", str(out))
    assert code == 2 and "pass --recover" in _one_line_error(err) and not out.exists()
    code, text, _ = _run(capsys, "dataset", "import", str(bag), "--recover", "-o", str(out))
    assert code == 0
    kept = int(re.search(r"kept (\d+) of 3000 messages written \(metadata\.yaml\)", text).group(1))
    assert 2900 + 45 <= kept < 3000  # the complete messages of the cut chunk's first half too
    ds = load_dataset(out)
    assert len(ds) == kept
    np.testing.assert_array_equal(ds.q, q[:kept])
    # the same storage file without its folder: the written count is unknown and said so
    bare = tmp_path / "bare.mcap"
    shutil.copy(storage, bare)
    with pytest.warns(BagWarning, match=rf"kept {kept} messages \(how many were written is unknown"):
        ds2, _ = import_source(bare, joint_names=JOINTS, recover=True)
    assert len(ds2) == kept


def test_recover_cut_sqlite_bag_reports_kept_of_written(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    _stamps, q, _dq, _tau = H.write_joint_state_bag(bag, "sqlite3", 3000, flush_every=100)
    storage = bag / "bag.db3"
    data = storage.read_bytes()
    storage.write_bytes(data[: len(data) // 2])
    with pytest.warns(BagWarning, match=r"kept (\d+) of 3000 messages written \(metadata\.yaml\)") as caught:
        ds, _ = import_source(bag, joint_names=JOINTS, recover=True)
    kept = int(re.search(r"kept (\d+) of 3000", " ".join(str(w.message) for w in caught)).group(1))
    assert len(ds) == kept and 0 < kept < 3000
    np.testing.assert_array_equal(ds.q, q[:kept])


def test_recover_cut_zstd_chunk_recovers_what_decompresses(tmp_path: Path) -> None:
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer

    from idyn_ros.data.bag import idyn_typestore

    n = 8000  # three chunks (rosbags closes one at 1 MiB); the last holds ~8 zstd blocks
    stamps, q, dq, tau = H.synthetic_motion(n)
    bag = tmp_path / "zbag"
    writer = Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    writer.open()
    conn = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=idyn_typestore())
    for i in range(n):
        writer.write(conn, int(stamps[i]), H.joint_state_cdr(stamps[i], JOINTS, q[i], dq[i], tau[i]))
    writer.close()
    storage = next(bag.glob("*.mcap"))
    data = storage.read_bytes()
    start, length = _top_level_chunks(data)[-1]
    (last_chunk_first_time,) = struct.unpack_from("<Q", data, start + 9)
    in_complete_chunks = int(np.count_nonzero(stamps < last_chunk_first_time))
    storage.write_bytes(data[: start + 9 + length // 2])
    with pytest.raises(BagReadError, match="recover"):
        import_source(bag, joint_names=JOINTS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BagWarning)
        ds, _ = import_source(bag, joint_names=JOINTS, recover=True)
    text = " ".join(str(w.message) for w in caught)
    assert "zstd-compressed" in text and f"of {n} messages written (metadata.yaml)" in text
    assert in_complete_chunks < len(ds) < n
    np.testing.assert_array_equal(ds.q, q[: len(ds)])


def test_recover_cut_lz4_chunk_recovers_what_decompresses(tmp_path: Path) -> None:
    """rosbags writes no lz4 chunks, so the last chunk of a plain bag is re-encoded as lz4 (as the mcap CLI does)."""
    import lz4.frame

    n = 4000
    bag = tmp_path / "bag"
    _stamps, q, _dq, _tau = H.write_joint_state_bag(bag, "mcap", n)  # chunks of 1 MiB, the last one cut below
    storage = bag / "bag.mcap"
    data = storage.read_bytes()
    start, _length = _top_level_chunks(data)[-1]
    head = data[start + 9 : start + 9 + 28]  # start/end time, uncompressed size, crc
    (name_len,) = struct.unpack_from("<I", data, start + 9 + 28)
    records_at = start + 9 + 28 + 4 + name_len
    (records_len,) = struct.unpack_from("<Q", data, records_at)
    records = data[records_at + 8 : records_at + 8 + records_len]
    packed = lz4.frame.compress(records)
    body = head + struct.pack("<I", 3) + b"lz4" + struct.pack("<Q", len(packed)) + packed
    chunk = b"\x06" + struct.pack("<Q", len(body)) + body
    storage.write_bytes(data[:start] + chunk[: len(chunk) // 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BagWarning)
        ds, _ = import_source(bag, joint_names=JOINTS, recover=True)
    text = " ".join(str(w.message) for w in caught)
    assert "lz4-compressed" in text and f"of {n} messages written (metadata.yaml)" in text
    (last_chunk_first_time,) = struct.unpack_from("<Q", data, start + 9)
    in_complete_chunks = int(np.count_nonzero(_stamps + 1000 < last_chunk_first_time))  # helper logs at stamp + 1 us
    assert in_complete_chunks < len(ds) < n
    np.testing.assert_array_equal(ds.q, q[: len(ds)])


# ------------------------------------------------------------------------ g. hints name the user's command
def _options_named_outside_commands(line: str) -> set[str]:
    """--options the message tells the user to pass, ignoring those inside a quoted `idyn ...` command."""
    return set(re.findall(r"--[a-z][a-z-]+", re.sub(r"`[^`]*`", "", line)))


def _train_options() -> set[str]:
    from idyn_ros.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return {s for a in sub.choices["train"]._actions for s in a.option_strings}


def test_train_hints_point_to_dataset_import(tmp_path: Path, capsys) -> None:
    fer = [j.replace("panda_", "arm_") for j in JOINTS]  # names no preset knows (the Panda's fer_ is read as such)
    stamps, q, dq, tau = H.synthetic_motion(200)
    bag = tmp_path / "fer"
    with BagWriter(bag) as writer:
        writer.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        for i in range(200):
            writer.write("/joint_states", int(stamps[i]), H.joint_state_cdr(stamps[i], fer, q[i], dq[i], tau[i]))
    code, _, err = _run(capsys, "train", "--robot", "panda", "--model", "rbd", "--data", str(bag),
                        "--out", str(tmp_path / "run"))
    line = _one_line_error(err)
    assert code == 2 and "has none of the joints" in line
    assert "`idyn dataset import SRC --joint-map arm_=panda_ -o OUT.npz`" in line
    assert _options_named_outside_commands(line) <= _train_options(), line

    cut = tmp_path / "cut"
    H.write_joint_state_bag(cut, "mcap", 1000, flush_every=100)
    data = (cut / "cut.mcap").read_bytes()
    (cut / "cut.mcap").write_bytes(data[: len(data) // 2])
    code, _, err = _run(capsys, "train", "--robot", "panda", "--model", "rbd", "--data", str(cut),
                        "--out", str(tmp_path / "run2"))
    line = _one_line_error(err)
    assert code == 2 and "`idyn dataset import SRC --recover -o OUT.npz`" in line
    assert _options_named_outside_commands(line) <= _train_options(), line

    # inside `idyn dataset import`, which has the option, the hint names it directly
    code, _, err = _run(capsys, "dataset", "import", str(bag), "--robot", "panda", "-o", str(tmp_path / "x.npz"))
    assert code == 2 and "pass --joint-map arm_=panda_" in _one_line_error(err)
