"""Synthetic recordings for the data-layer tests (bags written with the real rosbags writer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


def joint_state_cdr(stamp_ns: int, names: list[str], q, dq, tau) -> bytes:
    """A sensor_msgs/JointState serialised to CDR with the rosbags typestore."""
    from idyn_ros.data.bag import idyn_typestore

    store = idyn_typestore()
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    sec, nsec = divmod(int(stamp_ns), 1_000_000_000)
    msg = JointState(
        header=Header(stamp=Time(sec=sec, nanosec=nsec), frame_id=""),
        name=list(names),
        position=np.asarray(q, dtype=np.float64),
        velocity=np.asarray(dq, dtype=np.float64),
        effort=np.asarray(tau, dtype=np.float64),
    )
    return bytes(store.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


def synthetic_motion(n_samples: int = 500, rate: float = 1000.0, n: int = 7, t0_ns: int = 1_700_000_000_000_000_000):
    """(stamps_ns, q, dq, tau) of a smooth motion on an exact grid."""
    period_ns = round(1e9 / rate)
    stamps = t0_ns + period_ns * np.arange(n_samples, dtype=np.int64)
    t = (stamps - t0_ns) / 1e9
    f = 0.5 + 0.1 * np.arange(n)
    q = 0.3 * np.sin(2 * np.pi * np.outer(t, f))
    dq = 0.3 * 2 * np.pi * f * np.cos(2 * np.pi * np.outer(t, f))
    tau = 5.0 * np.cos(2 * np.pi * np.outer(t, f)) + np.arange(n)
    return stamps, q, dq, tau


def write_joint_state_bag(path: Path, storage: str = "mcap", n_samples: int = 500, flush_every: int = 0, **kw):
    """Write /joint_states with BagWriter; returns (stamps, q, dq, tau)."""
    from idyn_ros.data.bag import BagWriter

    stamps, q, dq, tau = synthetic_motion(n_samples, **kw)
    with BagWriter(path, storage=storage) as writer:
        writer.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        for i in range(n_samples):
            writer.write(
                "/joint_states", int(stamps[i]) + 1000, joint_state_cdr(stamps[i], JOINTS, q[i], dq[i], tau[i])
            )
            if flush_every and (i + 1) % flush_every == 0:
                writer.flush()
    return stamps, q, dq, tau


def float64_array_cdr(values) -> bytes:
    """A std_msgs/Float64MultiArray (a ros2_control forward command) serialised to CDR."""
    from idyn_ros.data.bag import idyn_typestore

    store = idyn_typestore()
    T = store.types
    msg = T["std_msgs/msg/Float64MultiArray"](layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0),
                                              data=np.asarray(values, dtype=np.float64))
    return bytes(store.serialize_cdr(msg, "std_msgs/msg/Float64MultiArray"))
