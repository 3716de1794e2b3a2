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


def test_the_queue_depth_description_says_reliability_follows_the_publishers() -> None:
    """It said "(RELIABLE)", but a topic with a best-effort publisher is subscribed BEST_EFFORT."""
    from idyn_ros.parameters import RecorderParams

    field = next(f for f in dataclasses.fields(RecorderParams) if f.name == "qos_depth")
    assert "RELIABLE when all of the topic's publishers are, else BEST_EFFORT" in field.metadata["idyn"].description


def test_cli_refuses_an_existing_output_folder_before_the_progress_bar(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The "exists already" refusal came after a progress bar had started."""
    from idyn_ros.cli import main

    (tmp_path / "bag").mkdir()
    assert main(["record", "-o", str(tmp_path / "bag"), "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"idyn record: error: -o {tmp_path / 'bag'} exists already; choose a new output folder (bags are " \
                  "never overwritten)", err


@pytest.mark.ros
def test_cli_names_the_topics_nothing_was_received_on_keeps_the_bag_and_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With no publisher, `idyn record -o BAG --duration 3` wrote an empty bag and exited 0 without a word."""
    from idyn_ros.cli import main

    bag = tmp_path / "bag"
    assert main(["record", "-o", str(bag), "--duration", "1", "--quiet", "/test_silent:sensor_msgs/msg/JointState",
                 "/test_never_seen"]) == 1
    err = capsys.readouterr().err
    assert f"warning: 0 messages on /test_silent, /test_never_seen (the bag {bag} is kept)" in err, err
    assert "ROS_DOMAIN_ID" in err and "ROS_AUTOMATIC_DISCOVERY_RANGE" in err and "topic name" in err
    assert (bag / "metadata.yaml").is_file()


@pytest.mark.ros
def test_a_discovered_topic_of_a_type_it_cannot_record_is_skipped_and_the_recording_goes_on(tmp_path: Path,
                                                                                             monkeypatch) -> None:
    """A topic named without a type and discovered with one this environment lacks (a vendor message not installed)
    raised in the recorder's timer and ended the whole recording."""
    import threading
    import time

    import rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    from idyn_ros.nodes import recorder

    real = recorder.message_class

    def lacking_string(msgtype: str) -> type:
        if msgtype == "std_msgs/msg/String":
            raise ParameterError(f"cannot import message type {msgtype!r} (this test's stand-in for a missing package)")
        return real(msgtype)

    monkeypatch.setattr(recorder, "message_class", lacking_string)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("test_unrecordable_publisher", context=context)
    pubs = (node.create_publisher(String, "/test_unrecordable", 10),
            node.create_publisher(JointState, "/test_recordable", 10))
    stop = threading.Event()

    def publish() -> None:
        while not stop.is_set():
            pubs[0].publish(String(data="x"))
            pubs[1].publish(JointState(name=["a"], position=[0.0]))
            time.sleep(0.01)

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    try:
        counts = run_recorder(tmp_path / "bag", ["/test_unrecordable", "/test_recordable:sensor_msgs/msg/JointState"],
                              flush_period=0.2, duration=3.0)
    finally:
        stop.set()
        thread.join()
        node.destroy_node()
        rclpy.shutdown(context=context)
    assert counts.get("/test_recordable", 0) > 20 and "/test_unrecordable" not in counts


@pytest.mark.ros
def test_the_bag_says_what_its_effort_is_and_the_importer_reads_it(tmp_path: Path) -> None:
    """A UR user had to pass --effort-kind current to import, train and wrench, every time: the bag did not say."""
    from idyn_ros.data.read_bag import bag_effort_kind

    run_recorder(tmp_path / "ur", ["/joint_states"], duration=1.0, effort_kind="current")
    assert bag_effort_kind(tmp_path / "ur") == ("current", "effort_kind: current")
    run_recorder(tmp_path / "unsaid", ["/joint_states"], duration=1.0)
    assert bag_effort_kind(tmp_path / "unsaid") == (None, "")
    with pytest.raises(ParameterError, match="effort_kind"):
        run_recorder(tmp_path / "bad", ["/joint_states"], duration=1.0, effort_kind="amps")
    assert not (tmp_path / "bad").exists()
