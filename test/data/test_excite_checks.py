"""`idyn excite` refuses bad options with one clear line and writes nothing then; it names the file it wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from idyn_ros.cli import main


def test_accel_limits_must_be_one_value_or_one_per_joint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.npz"
    code = main(["excite", "--robot", "panda", "-o", str(out), "--budget", "2", "--accel-limit", "1", "2", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "--accel-limit takes 1 value (all joints) or 7" in err and "got 3" in err
    assert not out.exists()


@pytest.mark.parametrize("options", [
    ["--rate", "0"], ["--rate", "-5"], ["--rate", "nan"], ["--period", "-1"], ["--period", "0"],
    ["--period", "inf"], ["--fine-motion", "--scaffolds", "0"], ["--accel-limit", "nan"], ["--accel-limit", "-1"],
    ["--accel-limit", "0"], ["--budget", "-1"], ["--budget", "nan"], ["--harmonics", "0"], ["--seed", "-1"],
])
def test_numbers_out_of_range_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               options: list[str]) -> None:
    out = tmp_path / "x.npz"
    with pytest.raises(SystemExit) as exit_info:
        main(["excite", "--robot", "panda", "-o", str(out), *options])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"argument {options[-2]}: must be" in err and "Traceback" not in err
    assert not out.exists()


def test_a_trajectory_outside_the_limits_is_not_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from idyn_ros.data import trajectories

    def outside(*_args: object) -> dict[str, object]:
        return {"ok": False, "position": 0.5, "velocity": 0.5, "acceleration": 1.2}

    monkeypatch.setattr(trajectories, "check_limits", outside)
    out = tmp_path / "x.npz"
    code = main(["excite", "--robot", "ur5", "--fine-motion", "--rate", "10", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 2 and "OUTSIDE" in captured.out and "was not written" in captured.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("options", [["--harmonics", "3"], ["--period", "8"], ["--budget", "2"]])
def test_fine_motion_refuses_the_fourier_options_it_would_ignore(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 options: list[str]) -> None:
    out = tmp_path / "x.npz"
    assert main(["excite", "--robot", "ur5", "--fine-motion", "-o", str(out), *options]) == 2
    assert f"--fine-motion does not use {options[0]}" in capsys.readouterr().err
    assert not out.exists()


def test_scaffolds_need_fine_motion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["excite", "--robot", "ur5", "--scaffolds", "3", "-o", str(tmp_path / "x.npz")]) == 2
    assert "--scaffolds applies only to --fine-motion" in capsys.readouterr().err


def test_output_without_extension_reports_the_file_written(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "traj_noext"
    assert main(["excite", "--robot", "ur5", "--fine-motion", "--rate", "10", "-o", str(out)]) == 0
    assert f"wrote {out}.npz" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["traj_noext.npz"]


def test_output_in_a_missing_folder_is_refused_before_designing(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nodir" / "x.npz"
    assert main(["excite", "--robot", "ur5", "--fine-motion", "-o", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
