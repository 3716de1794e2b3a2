"""Recorder node over real DDS (loopback): record -> import round trip is exact; signals and SIGKILL."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from idyn_ros.data.bag import BagWarning
from idyn_ros.data.importers import import_source

from .helpers import JOINTS, synthetic_motion

pytestmark = pytest.mark.ros


def _start_recorder(bag: Path, storage: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "idyn_ros.nodes.recorder",
            "-o",
            str(bag),
            "--storage",
            storage,
            "--flush-period",
            "0.2",
            *extra,
            "/joint_states",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _publish(context, n: int, rate: float = 1000.0) -> tuple:
    import rclpy
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    stamps, q, dq, tau = synthetic_motion(n)
    node = rclpy.create_node("test_publisher", context=context)
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5000, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(JointState, "/joint_states", qos)
    deadline = time.monotonic() + 20
    while pub.get_subscription_count() < 1:
        assert time.monotonic() < deadline, "recorder never subscribed"
        time.sleep(0.05)
    time.sleep(0.5)
    msg = JointState()
    msg.name = JOINTS
    t0 = time.monotonic()
    for i in range(n):
        while time.monotonic() < t0 + i / rate:
            time.sleep(0.0002)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamps[i]), 1_000_000_000)
        msg.position, msg.velocity, msg.effort = q[i].tolist(), dq[i].tolist(), tau[i].tolist()
        pub.publish(msg)
    assert pub.wait_for_all_acked(rclpy.duration.Duration(seconds=10))
    node.destroy_node()
    return stamps, q, dq, tau


@pytest.mark.parametrize(("storage", "stop"), [("mcap", signal.SIGINT), ("sqlite3", signal.SIGTERM)])
def test_live_record_import_roundtrip_is_exact(tmp_path: Path, rclpy_context, storage: str, stop: int) -> None:
    bag = tmp_path / "bag"
    rec = _start_recorder(bag, storage)
    try:
        stamps, q, dq, tau = _publish(rclpy_context, 800)
    finally:
        time.sleep(0.3)
        rec.send_signal(stop)
        out, _ = rec.communicate(timeout=30)
    assert rec.returncode == 0, out
    assert (bag / "metadata.yaml").is_file()  # closed cleanly: a complete bag
    ds, _ = import_source(bag, robot="panda")
    assert len(ds) == 800
    np.testing.assert_array_equal(np.round(ds.t * 1e9).astype(np.int64), stamps - stamps[0])
    np.testing.assert_array_equal(ds.q, q)
    np.testing.assert_array_equal(ds.dq, dq)
    np.testing.assert_array_equal(ds.tau, tau)


def _publish_until_exit(context, rec: subprocess.Popen, rate: float = 1000.0, limit_s: float = 60.0):
    """Publish /joint_states at ``rate`` from the match until ``rec`` has exited; None if it exited unmatched.

    Returns (stamps, q, before_ns, after_ns) of the messages published, the last two the system clock just before and
    just after each publish (its DDS source timestamp, which the recorder's stop is compared with, lies between).
    """
    import rclpy
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    stamps, q, dq, tau = synthetic_motion(int(limit_s * rate))
    node = rclpy.create_node("test_publisher", context=context)
    try:
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5000, reliability=ReliabilityPolicy.RELIABLE)
        pub = node.create_publisher(JointState, "/joint_states", qos)
        deadline = time.monotonic() + 20
        while pub.get_subscription_count() < 1:
            if rec.poll() is not None:
                return None
            assert time.monotonic() < deadline, "recorder never subscribed"
            time.sleep(0.05)
        time.sleep(0.5)
        msg = JointState()
        msg.name = JOINTS
        before, after = [], []
        t0 = time.monotonic()
        for i in range(len(stamps)):
            if i % 20 == 0 and rec.poll() is not None:
                break
            while time.monotonic() < t0 + i / rate:
                time.sleep(0.0002)
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamps[i]), 1_000_000_000)
            msg.position, msg.velocity, msg.effort = q[i].tolist(), dq[i].tolist(), tau[i].tolist()
            before.append(time.time_ns())
            pub.publish(msg)
            after.append(time.time_ns())
        else:
            raise AssertionError(f"the recorder still ran after {limit_s} s of publishing")
    finally:
        node.destroy_node()
    k = len(before)
    return stamps[:k], q[:k], np.array(before), np.array(after)


def test_duration_ends_the_recording_while_the_publisher_runs_on(tmp_path: Path, rclpy_context) -> None:
    """`idyn record --duration 8` against a live 1 kHz publisher wrote 11 s: the drain after the stop, meant for
    what was queued, took 3 s more of new messages. What was published after the stop is not recorded now.

    Checked against the instant the recorder says it stopped, not a wall-clock guess: every message published
    before it is in the bag, none published after it. --duration counts from the recorder's start, discovery
    included; on a loaded machine that can use it all up (the stop before the first message: nothing to check),
    so that case is run again with a longer duration instead of failing.
    """
    for attempt, duration in enumerate((1.5, 6.0, 24.0)):
        bag = tmp_path / f"bag{attempt}"
        rec = _start_recorder(bag, "mcap", "--duration", str(duration))
        try:
            sent = _publish_until_exit(rclpy_context, rec)
        finally:
            out, _ = rec.communicate(timeout=30)
        assert rec.returncode == 0, out
        stop_ns = int(re.search(r"stopped at (\d+) ns \(system clock\) after --duration", out).group(1))
        if sent is not None and sent[3][0] < stop_ns:  # the first message was published before the stop
            break
    else:
        pytest.fail(f"the recorder stopped before the first message in all attempts (last --duration {duration})")
    stamps, q, before, after = sent
    assert before[-1] > stop_ns  # the publisher ran on past the stop: the case the drain got wrong
    ds, _ = import_source(bag, robot="panda")
    n = len(ds)
    # all published before the stop (after < stop), nothing published after it (before > stop); the one message
    # whose publish call spans the stop instant may go either way
    assert np.sum(after < stop_ns) <= n <= np.sum(before <= stop_ns), (n, np.sum(after < stop_ns))
    np.testing.assert_array_equal(np.round(ds.t * 1e9).astype(np.int64), (stamps - stamps[0])[:n])
    np.testing.assert_array_equal(ds.q, q[:n])


def test_sigkilled_recorder_bag_is_recoverable(tmp_path: Path, rclpy_context) -> None:
    bag = tmp_path / "bag"
    rec = _start_recorder(bag, "mcap")
    try:
        _stamps, q, _dq, _tau = _publish(rclpy_context, 1000)
        time.sleep(0.8)  # > flush period: everything published is durable
    finally:
        rec.kill()
        rec.communicate(timeout=30)
    assert not (bag / "metadata.yaml").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BagWarning)
        ds, _ = import_source(bag, robot="panda", recover=True)
    assert len(ds) == 1000
    np.testing.assert_array_equal(ds.q, q)


def test_best_effort_publishers_are_recorded(tmp_path: Path, rclpy_context) -> None:
    """A RELIABLE reader does not match a BEST_EFFORT writer (e.g. /idyn/reference): the recorder picks
    the reliability from the publishers' offered QoS, also re-subscribing a typed topic it subscribed
    RELIABLE before any publisher existed."""
    import rclpy
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    from idyn_ros.data.bag import BagReader

    typed, untyped, n = "/test_be_typed", "/test_be_untyped", 200
    best_effort = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    node = rclpy.create_node("test_be_publisher", context=rclpy_context)
    pubs = {untyped: node.create_publisher(JointState, untyped, best_effort)}  # exists before the recorder
    rec = subprocess.Popen(
        [sys.executable, "-m", "idyn_ros.nodes.recorder", "-o", str(tmp_path / "bag"), "--flush-period", "0.2",
         f"{typed}:sensor_msgs/msg/JointState", untyped],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not node.get_subscriptions_info_by_topic(typed):  # subscribed before its publisher exists
            assert time.monotonic() < deadline and rec.poll() is None, "recorder never subscribed"
            time.sleep(0.05)
        pubs[typed] = node.create_publisher(JointState, typed, best_effort)
        while not all(p.get_subscription_count() for p in pubs.values()):  # matched only once best-effort
            assert time.monotonic() < deadline and rec.poll() is None, "best-effort publishers never matched"
            time.sleep(0.05)
        time.sleep(0.3)
        msg = JointState()
        msg.name = JOINTS
        for i in range(n):
            msg.header.stamp.sec, msg.header.stamp.nanosec = 1, i
            for pub in pubs.values():
                pub.publish(msg)
            time.sleep(0.005)
        time.sleep(0.5)
    finally:
        node.destroy_node()
        rec.send_signal(signal.SIGINT)
        out, _ = rec.communicate(timeout=30)
    assert rec.returncode == 0, out
    assert f"recording {typed} (sensor_msgs/msg/JointState) RELIABLE (no publisher yet)" in out, out
    assert f"recording {typed} (sensor_msgs/msg/JointState) BEST_EFFORT" in out, out
    assert f"recording {untyped} (sensor_msgs/msg/JointState) BEST_EFFORT" in out, out
    for topic in (typed, untyped):
        got = [deserialize_message(data, JointState).header.stamp.nanosec
               for _t, _ns, data in BagReader(tmp_path / "bag").messages([topic])]
        assert got == list(range(n)), (topic, len(got))


@pytest.mark.slow
def test_recorder_benchmark_short_run_loses_nothing() -> None:
    from idyn_ros.bench.recorder import run_benchmarks

    result = run_benchmarks(duration_s=3.0, storages=("mcap",))["mcap"]
    assert result["published"] == 3000 and result["lost"] == 0 and result["duplicates"] == 0
