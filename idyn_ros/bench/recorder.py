"""Recorder benchmark: a 1 kHz JointState publisher and the recorder in separate processes, over DDS.

What "loses nothing at 1 kHz" means: for the whole run, every published message must be in the bag
(published count == written count, and every sequence number present exactly once). The
publisher stamps each message with its sequence number in ``header.frame_id``.

``run_benchmarks(duration_s=600)`` is what ``make bench`` calls; ``python -m idyn_ros.bench.recorder
--duration 60`` runs it by hand. The publisher keeps the 1 kHz schedule by absolute deadlines and
catches up in bursts when the (shared, 2-core) machine delays it, which is the harder case for
the recorder.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "/bench/joint_states"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


def publish(duration_s: float, rate_hz: float, topic: str = TOPIC, wait_subscribers: float = 20.0) -> dict:
    """Publish JointState at ``rate_hz`` for ``duration_s`` (run in its own process); returns counts."""
    import rclpy
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    rclpy.init()
    node = rclpy.create_node("idyn_bench_publisher")
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10000, reliability=ReliabilityPolicy.RELIABLE)
    pub = node.create_publisher(JointState, topic, qos)
    deadline = time.monotonic() + wait_subscribers
    while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    if pub.get_subscription_count() < 1:
        raise RuntimeError(f"no subscriber on {topic} after {wait_subscribers} s")
    time.sleep(0.5)  # let discovery settle in both directions before the first reliable sample
    msg = JointState()
    msg.name = JOINTS
    period = 1.0 / rate_hz
    count = round(duration_s * rate_hz)
    t0 = time.monotonic()
    late_max = 0.0
    for k in range(count):
        target = t0 + k * period
        now = time.monotonic()
        if target > now:
            time.sleep(target - now)
        else:
            late_max = max(late_max, now - target)
        stamp = time.time_ns()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
        msg.header.frame_id = str(k)
        x = k * period
        msg.position = [x + j for j in range(7)]
        msg.velocity = [1.0] * 7
        msg.effort = [0.1 * j for j in range(7)]
        pub.publish(msg)
    elapsed = time.monotonic() - t0
    acked = pub.wait_for_all_acked(rclpy.duration.Duration(seconds=10.0))
    node.destroy_node()
    rclpy.shutdown()
    return {
        "published": count,
        "elapsed_s": elapsed,
        "achieved_rate_hz": count / elapsed,
        "max_late_s": late_max,
        "all_acked": bool(acked),
    }


def run_benchmarks(
    duration_s: float | None = None,
    rate_hz: float = 1000.0,
    storages: tuple[str, ...] = ("mcap", "sqlite3"),
    quick: bool = False,
) -> dict:
    """Loss test per storage: MCAP (the default format) for ``duration_s`` (default 600 s: a long
    recording session), sqlite3 for min(duration, 60 s); ``quick`` makes both 30 s.

    Returns:
        ``{storage: numbers}`` as returned by :func:`run_one`.
    """
    duration = 30.0 if quick else (600.0 if duration_s is None else duration_s)
    out = {}
    for storage in storages:
        d = duration if storage == "mcap" else min(duration, 60.0)
        out[storage] = run_one(d, rate_hz, storage)
    return out


def run_one(duration_s: float = 600.0, rate_hz: float = 1000.0, storage: str = "mcap") -> dict:
    """Record a ``rate_hz`` JointState stream for ``duration_s`` and count losses.

    Returns:
        JSON-serialisable numbers: published, written, lost, duplicates, achieved publish rate,
        bag size, recorder CPU time.
    """
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    with tempfile.TemporaryDirectory(prefix="idyn_bench_rec_") as tmp:
        bag = Path(tmp) / "bag"
        recorder = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "idyn_ros.nodes.recorder",
                "-o",
                str(bag),
                "--storage",
                storage,
                f"{TOPIC}:sensor_msgs/msg/JointState",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            pub = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "idyn_ros.bench.recorder",
                    "--publish",
                    "--duration",
                    str(duration_s),
                    "--rate",
                    str(rate_hz),
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=duration_s + 120,
                check=False,
            )
            if pub.returncode != 0:
                raise RuntimeError(f"publisher failed: {pub.stderr[-2000:]}")
            published = json.loads(pub.stdout.strip().splitlines()[-1])
        finally:
            recorder.send_signal(signal.SIGINT)
            try:
                rec_out, _ = recorder.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                recorder.kill()
                rec_out, _ = recorder.communicate()
        if recorder.returncode != 0:
            raise RuntimeError(f"recorder exited with {recorder.returncode}: {rec_out[-2000:]}")
        from idyn_ros.data.bag import BagReader, idyn_typestore

        store = idyn_typestore()
        seqs = []
        for _topic, _t, raw in BagReader(bag).messages([TOPIC]):
            seqs.append(int(store.deserialize_cdr(raw, "sensor_msgs/msg/JointState").header.frame_id))
        size = sum(p.stat().st_size for p in bag.iterdir())
    unique = set(seqs)
    expected = published["published"]
    return {
        "storage": storage,
        "duration_s": duration_s,
        "rate_hz": rate_hz,
        "published": expected,
        "written": len(seqs),
        "lost": expected - len(unique & set(range(expected))),
        "duplicates": len(seqs) - len(unique),
        "achieved_publish_rate_hz": round(published["achieved_rate_hz"], 2),
        "publisher_max_late_ms": round(1e3 * published["max_late_s"], 2),
        "bag_bytes": size,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of publishing (default 60)")
    parser.add_argument("--rate", type=float, default=1000.0, help="publish rate in Hz (default 1000)")
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    parser.add_argument("--publish", action="store_true", help="internal: be the publisher process")
    args = parser.parse_args(argv)
    if args.publish:
        print(json.dumps(publish(args.duration, args.rate)), flush=True)
        return 0
    print(json.dumps(run_one(args.duration, args.rate, args.storage), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
