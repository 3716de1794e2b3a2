"""The auxiliary nodes when time goes wrong on /joint_states: pauses, stamp jumps forward and back, stalled stamps.
Callbacks are called directly on real nodes (no spinning), with messages built as a driver sends them."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control.state_estimation import STALLED_SAMPLES

pytestmark = pytest.mark.ros

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
TARGET = Q0 + np.array([0.6, 0.4, 0.0, 0.5, 0.0, -0.4, 0.0])
S = 1_000_000_000
MS = 1_000_000
BASE = 1_764_000_000 * S


def _joint_state(stamp_ns, q=Q0, dq=None):
    from sensor_msgs.msg import JointState

    dq = np.zeros(7) if dq is None else dq
    msg = JointState(name=PANDA, position=[float(x) for x in q], velocity=[float(x) for x in dq], effort=[])
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp_ns // S, stamp_ns % S
    return msg


def _ms(first, last, offset_ns=0):
    return [BASE + offset_ns + k * MS for k in range(first, last)]


def _capture(node, log):
    """The node's log lines (into ``log``, the log_recorder fixture) and its published /diagnostics (level, message)."""
    diag = []
    node.get_logger = lambda: log
    node.diag.pub.publish = lambda m: diag.extend((s.level[0], s.message) for s in m.status)
    return log, diag


def _reference_node(context):
    from rclpy.parameter import Parameter

    from idyn_ros.nodes.reference import ReferenceNode

    node = ReferenceNode(context=context, parameter_overrides=[
        Parameter("mode", value="setpoints"), Parameter("setpoints", value=TARGET.tolist()),
        Parameter("durations", value=[3.0]), Parameter("start_delay", value=0.1)])
    out = []
    node.pub.publish = lambda m: out.append(np.array(m.positions))
    return node, out


CASES = {  # stamps: 1 s of states, then the fault at the 1001st
    "0.5 s pause": _ms(0, 1000) + _ms(1500, 2000),
    "stamps jump +5 s, nothing missing": _ms(0, 1000) + _ms(1000, 1500, 5 * S),
    "stamps jump back 2 s (bag loop)": _ms(0, 1000) + _ms(1000, 1500, -2 * S),
}


@pytest.mark.parametrize("case", CASES)
def test_the_reference_time_pauses_with_its_input_and_never_steps(rclpy_context, case, log_recorder):
    """q_d stepped 9.46 deg after a 0.5 s pause and 28.8 deg after a +5 s stamp jump (the move's peak: 21 deg/s, 0.02
    deg a period); after a 2 s jump back it published 1 reference in 500 states."""
    node, out = _reference_node(rclpy_context)
    try:
        _capture(node, log_recorder)
        for stamp in CASES[case]:
            node._on_joint_state(_joint_state(stamp))
        assert len(out) == len(CASES[case])
        q = np.array(out)
        step = np.degrees(np.abs(np.diff(q, axis=0)).max(axis=1))
        assert step[900:].max() < 0.05, f"q_d steps {step[999]:.2f} deg at the fault"
        assert np.abs(q[-1] - q[999]).max() > 0.005  # and it keeps moving after it
    finally:
        node.destroy_node()


def test_the_reference_says_a_restart_once_and_counts_the_rest(rclpy_context, log_recorder):
    """A looped bag: every loop restarts the filter; one WARN on the log and on /diagnostics, not one per loop."""
    from idyn_ros.control import state_estimation as se
    from idyn_ros.nodes.common import Diagnostics

    node, out = _reference_node(rclpy_context)
    try:
        log, diag = _capture(node, log_recorder)
        loops = 3
        for _ in range(loops):
            for stamp in _ms(0, 300):
                node._on_joint_state(_joint_state(stamp))
        assert len(out) == loops * 300
        assert node.problems.counts == {se.RESTART_BACKWARDS: loops - 1}
        assert [level for level, _ in log.lines if level in ("warning", "error")] == ["warning"]
        warned = [m for level, m in diag if level == Diagnostics.WARN]
        assert len(warned) == 1 and "jumped back by 299.000 ms" in warned[0]
        node.problems.publish()
        assert node.diag.values["input_restarts"] == str(loops - 1)
    finally:
        node.destroy_node()


def test_the_buffer_logs_once_per_kind_and_publishes_through_restarts(rclpy_context, log_recorder):
    """After a jump back it logged every sample (the reason carries the ms: 209 ERROR lines in 1.2 s) and published
    nothing until the stamps passed the old maximum; stalled stamps were silently dropped."""
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode

    node = JointStateBufferNode(context=rclpy_context)
    try:
        log, _ = _capture(node, log_recorder)
        out = []
        node.pub.publish = lambda m: out.append((np.array(m.position), np.array(m.acceleration_raw)))
        stamps = _ms(0, 200) + _ms(100, 200) + _ms(50, 200) + _ms(0, 200)  # three jumps back, each a different size
        moving = np.zeros(7)
        for i, stamp in enumerate(stamps):
            moving[0] = 1e-4 * i
            node._on_joint_state(_joint_state(stamp, Q0 + moving))
        for _ in range(50):  # then stamps stall while the joints move
            moving[0] += 1e-4
            node._on_joint_state(_joint_state(stamps[-1], Q0 + moving))
        stalls = 50 // STALLED_SAMPLES  # every STALLED_SAMPLES-th of them restarts on its live state, the rest drop
        assert len(out) == len(stamps) + stalls
        assert [level for level, _ in log.lines] == ["warning", "warning"]  # one per kind
        assert np.all(np.isfinite([a for _, a in out]))
        assert node.problems.restarts == 3 + stalls and node.rejected == 0
    finally:
        node.destroy_node()


def test_the_feedforward_warms_its_model_up_again_after_a_restart_and_keeps_publishing(rclpy_context, log_recorder):
    """After a jump back it published nothing until the stamps passed the old maximum (a looped bag: never)."""
    from idyn_ros.nodes.feedforward import FeedforwardNode

    node = FeedforwardNode(context=rclpy_context)
    try:
        _capture(node, log_recorder)
        published, warmed = [], []
        node.pub.publish = published.append
        node.ff.warm_up = lambda q, *a: warmed.append(np.array(q))
        for stamp in _ms(0, 100) + _ms(0, 100):
            node._on_joint_state(_joint_state(stamp))
        assert len(published) == 200
        assert len(warmed) == 2  # at the first state and at the restart
    finally:
        node.destroy_node()


def _wrench_node(context):
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    node = WrenchObserverNode(context=context)
    node._on_command(Float64MultiArray(data=node.observer.rbd.gravity(Q0).tolist()))  # holds the arm: no contact
    forces = []
    node.pub.publish = lambda m: forces.append(np.linalg.norm([m.wrench.force.x, m.wrench.force.y,
                                                               m.wrench.force.z]))
    return node, forces


def test_the_wrench_observer_restarts_its_rest_and_bias_windows_after_a_gap(rclpy_context):
    """The rest detector and the bias window measured rest_time across a 0.6 s gap: at rest at the first state after
    it, and a re-zero averaged over it."""
    node, _ = _wrench_node(rclpy_context)
    try:
        rest_ms = round(node.trust.settings.rest_time * 1000)
        for stamp in _ms(0, 300) + _ms(300 + rest_ms + 100, 300 + rest_ms + 200):
            node._on_joint_state(_joint_state(stamp))
        resumed = BASE + (300 + rest_ms + 100) * MS
        assert not node.trust.out.at_rest  # 100 ms of watched stillness after the gap
        assert node.trust.bias.zeroed_at_ns < resumed
    finally:
        node.destroy_node()


def test_the_wrench_observer_keeps_estimating_after_a_jump_back_and_says_so_once(rclpy_context, log_recorder):
    from idyn_ros.nodes.common import Diagnostics

    node, forces = _wrench_node(rclpy_context)
    try:
        log, diag = _capture(node, log_recorder)
        for stamp in _ms(0, 400) + _ms(0, 400) + _ms(0, 400):
            node._on_joint_state(_joint_state(stamp))
        assert len(forces) > 250  # every 4th state (publish_divider), in all three runs
        assert max(forces) < 1e-6
        assert node.observer.updates > 1150
        assert [level for level, _ in log.lines if level in ("warning", "error")] == ["warning"]
        assert [level for level, _ in diag].count(Diagnostics.WARN) == 1
    finally:
        node.destroy_node()


def test_the_gripper_compensation_keeps_compensating_after_a_jump_back(rclpy_context, log_recorder):
    from geometry_msgs.msg import WrenchStamped

    from idyn_ros.nodes.gripper_compensation import GripperCompensationNode

    node = GripperCompensationNode(context=rclpy_context)
    try:
        log, _ = _capture(node, log_recorder)
        out = []
        node.pub.publish = out.append
        reading = WrenchStamped()
        reading.wrench.force.z = -5.0
        resets = []
        reset = node.comp.reset
        node.comp.reset = lambda: (resets.append(1), reset())
        for stamp in _ms(0, 50) + _ms(0, 50) + _ms(60, 70):
            node._on_wrench(reading)  # a sensor at the joint states' rate (an older reading is stale)
            node._on_joint_state(_joint_state(stamp))
        assert len(out) == 50 - 1 + 50 - 1 + 10 - 1  # the first after a start, a restart or a gap: the baseline
        assert len(resets) == 2 and [level for level, _ in log.lines] == ["warning"]
    finally:
        node.destroy_node()


def test_late_samples_are_dropped_silently_by_every_node(rclpy_context, log_recorder):
    """A sample 1 ms out of order is not an error (ROS filters drop them): no log, no diagnostics, nothing published."""
    node, out = _reference_node(rclpy_context)
    try:
        log, diag = _capture(node, log_recorder)
        for stamp in [*_ms(0, 10), BASE + 8 * MS, *_ms(10, 20)]:
            node._on_joint_state(_joint_state(stamp))
        assert len(out) == 20 and log.lines == [] and [level for level, _ in diag] == [0]  # 'mode setpoints'
        assert node.filter.dropped == 1
    finally:
        node.destroy_node()



def test_the_buffer_says_when_it_drops_every_state_instead_of_ok(rclpy_context):
    """A driver that never fills header.stamp: every state after the first was a duplicate, dropped, while the
    buffer's /diagnostics said "ok" and it published nothing."""
    from idyn_ros.nodes.common import Diagnostics
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode

    node = JointStateBufferNode(context=rclpy_context)
    try:
        node.pub.publish = lambda m: None
        for _ in range(200):
            node._on_joint_state(_joint_state(0, Q0))  # stamp 0 every time
        node._on_diagnostics()
        assert node.diag.level == Diagnostics.WARN
        assert node.diag.message.startswith("dropping nearly every joint state (199 of 200")
        for k in range(1, 50):  # stamps that advance: fine again
            node._on_joint_state(_joint_state(k * 1_000_000, Q0))
        node._on_diagnostics()
        assert node.diag.level == Diagnostics.OK, node.diag.message
    finally:
        node.destroy_node()
