"""`idyn dataset`, `idyn excite`, `idyn record` from the command line (through idyn_ros.cli.main)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from idyn_ros.cli import main

from .helpers import write_joint_state_bag


def test_dataset_import_info_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_joint_state_bag(tmp_path / "bag", "mcap", 300)
    out = tmp_path / "ds.npz"
    assert main(["dataset", "import", str(tmp_path / "bag"), "--robot", "panda", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "300 samples x 7 joints at 1000 Hz" in text
    data = np.load(out)
    assert data["q"].shape == (300, 7) and str(data["effort_kind"]) == "torque"
    assert main(["dataset", "info", str(out), "--plot", str(tmp_path / "p.png")]) == 0
    text = capsys.readouterr().out
    assert "rate 1000 Hz" in text and "panda_joint7" in text and "tau std" in text
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dataset_import_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_joint_state_bag(tmp_path / "bag", "sqlite3", 50)
    code = main(["dataset", "import", str(tmp_path / "bag"), "--robot", "iiwa14", "-o", str(tmp_path / "x.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "has none of the joints" in err and "another robot" in err
    assert "--joint-map" in err and "Traceback" not in err


def test_excite_writes_trajectory_within_limits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "traj.npz"
    code = main(["excite", "--robot", "ur5", "--harmonics", "3", "--period", "8", "--budget", "2", "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "random initial guess" in text and "-> inside" in text
    data = np.load(out)
    assert data["q_d"].shape == (8000, 6) and float(data["cond_optimized"]) < float(data["cond_initial"])
    assert {"a", "b", "q0", "period", "omega_f"} <= set(data.files)


def test_record_help_answers_questions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["record", "--help"])
    text = capsys.readouterr().out
    assert "--storage" in text and "sqlite3" in text and "examples" in text and "SIGKILL" in text


def test_record_help_says_how_the_ros_parameter_names_the_bag(capsys: pytest.CaptureFixture[str]) -> None:
    """-o said "...; or ROS parameter output", not what to write."""
    with pytest.raises(SystemExit):
        main(["record", "--help"])
    assert "or the ROS parameter output:=BAG" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(("options", "said"), [(["--urdf"], "--urdf needs a robot: `idyn robots ROBOT --urdf`"),
                                               (["ur5", "--mode", "hardware"], "--mode: only for the printed URDF; "
                                                "add --urdf"),
                                               (["--prefix", "left_"], "--prefix: only for the printed URDF")])
def test_robots_refuses_options_it_would_ignore(capsys: pytest.CaptureFixture[str], options: list[str],
                                               said: str) -> None:
    """`idyn robots --urdf` listed the table, `idyn robots ur5 --mode hardware` printed the robot: options ignored."""
    assert main(["robots", *options]) == 2
    assert said in _one_line(capsys)


def test_output_into_a_closed_pipe_ends_quietly() -> None:
    """`idyn dataset info ... | head`: a BrokenPipeError traceback used to follow the lines head showed."""
    import subprocess
    import sys

    code = "import sys; from idyn_ros.cli import main; sys.exit(main(['robots']))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line
    assert proc.wait(timeout=60) == 141 and proc.stderr.read() == b""
    proc.stderr.close()


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def _unnamed_npz(path: Path, q: np.ndarray, rate: float = 200.0) -> Path:
    """A foreign npz without joint names (FloBaRoID-like columns), as the KUKA recordings are."""
    t = np.arange(len(q)) / rate
    np.savez(path, times=t, positions=q, velocities=np.gradient(q, t, axis=0), torques=np.ones_like(q))
    return path


def test_outputs_that_cannot_be_written_are_refused_before_the_work(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each used to end in a FileNotFoundError traceback, excite only after its whole optimisation budget."""
    from idyn_ros.data import importers, trajectories

    write_joint_state_bag(tmp_path / "bag", "mcap", 50)
    (tmp_path / "afile").write_text("")
    ds = tmp_path / "ds.npz"
    assert main(["dataset", "import", str(tmp_path / "bag"), "-o", str(ds)]) == 0

    def never(*args, **kwargs):
        raise AssertionError("worked before checking the output")

    monkeypatch.setattr(importers, "import_source", never)
    monkeypatch.setattr(trajectories, "optimize_excitation", never)
    cases = [["dataset", "import", str(tmp_path / "bag"), "-o", "/proc/x.npz"],
             ["dataset", "import", str(tmp_path / "bag"), "-o", str(tmp_path / "afile" / "x.npz")],
             ["dataset", "import", str(tmp_path / "bag"), str(ds), "-o", "/proc/x.npz"],  # OUT_0, OUT_1
             ["dataset", "info", str(ds), "--plot", "/proc/x.png"],
             ["excite", "--robot", "ur5", "--budget", "600", "-o", "/proc/x.npz"]]
    for argv in cases:
        assert main(argv) == 2, argv
        err = _one_line(capsys)
        assert ("cannot write in /proc" in err or "is a file, not a folder" in err), err
    assert not (tmp_path / "afile").is_dir()


def test_a_rate_far_above_the_recordings_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """--rate 1e9 on a 200 Hz recording tried to allocate 187 GiB; --rate 1e6 wrote 10 GB."""
    from idyn_ros.data import importers

    src = _unnamed_npz(tmp_path / "src.npz", np.linspace(0, 1, 400)[:, None] * np.ones((1, 3)))
    out = tmp_path / "y.npz"
    for rate in ("2001", "1e6", "1e9"):  # the old code wrote the first, and tried to allocate GBs for the others
        assert main(["dataset", "import", str(src), "-o", str(out), "--rate", rate]) == 2
        err = _one_line(capsys)
        assert "times the recording's own 200 Hz" in err and "choose --rate 2000 or less" in err, err
    assert not out.exists()
    assert main(["dataset", "import", str(src), "-o", str(out), "--rate", "2000"]) == 0
    assert "3991 samples" in capsys.readouterr().out
    monkeypatch.setattr(importers, "MAX_SAMPLES", 1000)  # any rate: more samples than an import writes
    assert main(["dataset", "import", str(src), "-o", str(tmp_path / "z.npz"), "--rate", "1000"]) == 2
    assert "1,996 samples, more than the 1,000" in _one_line(capsys)


def test_options_a_source_cannot_use_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--time-unit on a bag (stamps in ns) and the bag-only options on a file were ignored without a word."""
    write_joint_state_bag(tmp_path / "bag", "mcap", 50)
    src = _unnamed_npz(tmp_path / "src.npz", np.zeros((50, 7)))
    out = str(tmp_path / "o.npz")
    assert main(["dataset", "import", str(tmp_path / "bag"), "--time-unit", "ms", "-o", out]) == 2
    assert "--time-unit" in (err := _one_line(capsys)) and "rosbag2 bag" in err
    assert main(["dataset", "info", str(tmp_path / "bag"), "--time-unit", "s"]) == 2
    assert "--time-unit" in _one_line(capsys)
    for extra in (["--topic", "/joint_states"], ["--recover"], ["--wrench-topic", "/ft"]):
        assert main(["dataset", "import", str(src), *extra, "-o", out]) == 2
        err = _one_line(capsys)
        assert extra[0] in err and "applies to rosbag2 bags" in err
    # the defaults trigger nothing
    assert main(["dataset", "import", str(tmp_path / "bag"), "--time-unit", "auto", "-o", out]) == 0


def test_unnamed_columns_outside_the_robots_limits_are_refused_on_import(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Imported by position as a Panda, a KUKA recording was written, and `idyn train` then refused it, advising
    the very import that had written it."""
    from idyn_ros.dynamics import RobotModel

    panda = RobotModel.from_robot("panda")
    inside = 0.5 * (np.clip(panda.lower, -3, 3) + np.clip(panda.upper, -3, 3))
    q = inside + 0.1 * np.sin(np.linspace(0, 6, 400))[:, None]
    fits = _unnamed_npz(tmp_path / "fits.npz", q)
    out = tmp_path / "kp.npz"
    assert main(["dataset", "import", str(fits), "--robot", "panda", "-o", str(out)]) == 0
    capsys.readouterr()
    q[:, 5] -= 1.9  # panda_joint6 down to -0.02 - 1.8 rad: another arm's range
    other = _unnamed_npz(tmp_path / "other.npz", q)
    assert main(["dataset", "import", str(other), "--robot", "panda", "-o", str(tmp_path / "no.npz")]) == 2
    err = _one_line(capsys)
    assert "leave the limits of robot 'panda'" in err and "panda_joint6" in err and "no joint names" in err
    assert "--joints" in err and not (tmp_path / "no.npz").exists()
    # without --robot the columns get no robot's names and nothing is checked
    assert main(["dataset", "import", str(other), "-o", str(tmp_path / "anon.npz")]) == 0


def test_dataset_import_refuses_an_output_that_is_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-o emptydir/` wrote emptydir.npz next to the folder, without a word."""
    write_joint_state_bag(tmp_path / "bag", "mcap", 50)
    (tmp_path / "emptydir").mkdir()
    for out in (tmp_path / "emptydir", f"{tmp_path / 'new'}/"):
        assert main(["dataset", "import", str(tmp_path / "bag"), "-o", str(out)]) == 2
        assert "is a folder; give the file to write" in _one_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bag", "emptydir"]
