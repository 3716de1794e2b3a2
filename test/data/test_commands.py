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


def test_output_into_a_closed_pipe_ends_quietly() -> None:
    """`idyn dataset info ... | head`: a BrokenPipeError traceback used to follow the lines head showed."""
    import subprocess
    import sys

    code = "import sys; from idyn_ros.cli import main; sys.exit(main(['robots']))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line
    assert proc.wait(timeout=60) == 141 and proc.stderr.read() == b""
    proc.stderr.close()
