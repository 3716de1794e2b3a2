"""Recorder start-up: bad input is refused with one clear line and leaves no bag behind."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from idyn_ros.errors import DatasetError, ParameterError
from idyn_ros.nodes.recorder import run_recorder


@pytest.mark.ros
def test_an_unknown_message_type_leaves_no_bag_and_a_rerun_works(tmp_path: Path) -> None:
    bag = tmp_path / "b1"
    for _ in range(2):  # the second attempt must not find a leftover "b1 exists already"
        with pytest.raises(DatasetError, match="unknown message type 'std_msgs/msg/Nope'"):
            run_recorder(bag, ["/foo:std_msgs/msg/Nope"], duration=1.0)
        assert not bag.exists()


@pytest.mark.parametrize("duration", [-5.0, 0.0, float("nan"), float("inf")])
def test_a_duration_that_is_not_a_positive_number_of_seconds_is_refused(tmp_path: Path, duration: float) -> None:
    with pytest.raises(ParameterError, match="duration must be a number of seconds > 0"):
        run_recorder(tmp_path / "bag", ["/joint_states"], duration=duration)
    assert not (tmp_path / "bag").exists()


@pytest.mark.parametrize("value", ["-5", "nan", "0"])
def test_cli_refuses_a_bad_duration(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    from idyn_ros.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["record", "-o", str(tmp_path / "bag"), f"--duration={value}"])
    assert exit_info.value.code == 2 and "argument --duration: must be > 0" in capsys.readouterr().err
    assert not (tmp_path / "bag").exists()


@pytest.mark.ros
def test_output_is_required_as_its_description_says(tmp_path: Path) -> None:
    from idyn_ros.parameters import RecorderParams

    field = next(f for f in dataclasses.fields(RecorderParams) if f.name == "output")
    assert "required" in field.metadata["idyn"].description
    with pytest.raises(ParameterError, match="no output bag"):
        run_recorder("", ["/joint_states"], duration=1.0)
