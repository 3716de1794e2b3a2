"""The iiwa14's torque control graph on hardware (`idyn bringup --mode hardware`, our nodes only) against a stand-in for
lbr_fri_ros2_stack's controller manager: no KUKA here, so a test node publishes the arm's joint states at the stack's
torque rate and takes both command topics, as its effort and position controllers would."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def _quiet_for(seconds: float, count):
    """A ``done()`` for ``spin_until``: true once ``count()`` has not changed for ``seconds``."""
    last = [count(), time.monotonic()]

    def done() -> bool:
        if count() != last[0]:
            last[:] = [count(), time.monotonic()]
        return time.monotonic() - last[1] >= seconds

    return done


def test_every_torque_reaches_the_arm_with_the_measured_positions(graph_probe):
    """FRI torque mode keeps its last command while the position or the torque is NaN: a torque must come with a
    position (the measured one, as the stack's torque demos send), both at 500 Hz, gravity left to the robot."""
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    probe = graph_probe
    node = probe.node
    names = [f"lbr_A{i}" for i in range(1, 8)]
    q = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.8, 0.0])
    deep = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
    # every command kept until taken: the loop below takes one callback per turn, the effort subscription's first, so
    # positions queue up, and a bounded history dropped the oldest of them (a 15-40 % shortfall, the test's own loss)
    every = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_ALL)
    states = node.create_publisher(JointState, "/joint_states", deep)
    torques, positions = [], []
    node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                             lambda m: torques.append(np.array(m.data)), every)
    node.create_subscription(Float64MultiArray, "/position_controller/commands",
                             lambda m: positions.append(np.array(m.data)), every)
    proc = subprocess.Popen([sys.executable, "-m", "idyn_ros.cli", "bringup", "--robot", "iiwa14", "--mode", "hardware",
                             "--model", "none", "--duration", "30"], env=probe.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    msg = JointState(name=names, position=q.tolist(), velocity=[0.0] * 7, effort=[0.0] * 7)
    try:
        period, due = 0.002, time.monotonic()
        end = due + 25.0
        while time.monotonic() < end and proc.poll() is None:
            if time.monotonic() >= due:
                msg.header.stamp = node.get_clock().now().to_msg()
                states.publish(msg)
                due = max(due + period, time.monotonic() - period)
            probe.exe.spin_once(timeout_sec=max(0.0, due - time.monotonic()))
            if len(torques) > 2000 and probe.active():
                break
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
        probe.spin_until(_quiet_for(1.0, lambda: len(torques) + len(positions)), 60.0)  # every queued message
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(torques) > 2000, out[-3000:]
    assert len(positions) == len(torques), (len(positions), len(torques))  # one position with every torque
    np.testing.assert_array_equal(np.array(positions), np.tile(q, (len(positions), 1)))
    assert probe.states and probe.states[-1].ticks > 0
    # at rest the law's torque is the model's without gravity (the robot adds it): RBD at rest, no gravity, is 0
    assert np.abs(np.median(np.array(torques[-500:]), axis=0)).max() < 1e-6
