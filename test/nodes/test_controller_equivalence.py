"""The controller node and the controller core give the same torque, tick by tick.

The node runs its production path: subscriptions on the process's hot loop (not the executor fallback), the
input check on that loop, parameters and lifecycle on the executor, sim time from /clock. Next to it a bare
``Controller`` built from the node's own parameter object gets the same inputs. Over a few hundred ticks:
start-up (hold and release), a reference, a stale input (safe, then the ramped recovery), a gain change at run
time, a NaN (latched), re-activation (the stop command) and a restart.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
T0 = 5_000_000_000


class SideBySide:
    def __init__(self, context):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from idyn_ros.control.controller import Controller
        from idyn_ros.msg import JointReference
        from idyn_ros.nodes.common import COMMAND_OUT, HOT_IN
        from idyn_ros.nodes.controller import ControllerNode
        from idyn_ros.nodes.hot_loop import HotLoop

        overrides = {"use_sim_time": True, "max_stamp_age": 0.03, "stale_periods": 20.0, "recovery_ticks": 5,
                     "recovery_ramp": 0.01}
        self.node = ControllerNode(context=context,
                                   parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        assert HotLoop.enabled() and self.node._subs[0] not in self.node.subscriptions  # on the hot loop
        HotLoop.start_all()
        self.core = Controller.for_robot(self.node.params.value)
        self.core.activate()
        self.script = rclpy.create_node("script", context=context)
        self.clock_pub = self.script.create_publisher(Clock, "/clock", 10)
        self.state_pub = self.script.create_publisher(JointState, "/joint_states", COMMAND_OUT)
        self.ref_pub = self.script.create_publisher(JointReference, "/idyn/reference", HOT_IN)
        self.commands: dict[str, np.ndarray] = {}
        self.script.create_subscription(Float64MultiArray, "/effort_controller/commands", self._on_cmd, COMMAND_OUT)
        self.exe = SingleThreadedExecutor(context=context)
        for n in (self.node, self.script):
            self.exe.add_node(n)
        self.Clock, self.JointState, self.JointReference = Clock, JointState, JointReference
        self.now = T0
        self.compared = 0
        self.stale_commands = 0
        self._wait(lambda: self.state_pub.get_subscription_count() > 0 and self.clock_pub.get_subscription_count()
                   > 0 and self.ref_pub.get_subscription_count() > 0, "discovery")
        self.set_clock(T0)

    def _on_cmd(self, msg):
        self.commands.setdefault(msg.layout.dim[0].label, []).append(np.array(msg.data))

    def _wait(self, done, what, timeout=5.0):
        end = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < end, f"timed out waiting for {what}"
            self.exe.spin_once(timeout_sec=0.001)

    def set_clock(self, t_ns):
        self.now = t_ns
        msg = self.Clock()
        msg.clock.sec, msg.clock.nanosec = divmod(t_ns, 1_000_000_000)
        self.clock_pub.publish(msg)
        self._wait(lambda: self.node.get_clock().now().nanoseconds == t_ns, "the node's sim clock")

    def reference(self, q, dq, ddq):
        msg = self.JointReference(joint_names=PANDA, positions=list(q), velocities=list(dq), accelerations=list(ddq))
        self.ref_pub.publish(msg)
        core = self.node.core  # the first one after activation is blended in from the held pose: q_d is not q yet
        self._wait(lambda: np.array_equal(core.q_d, q) or np.array_equal(core._ref_raw[0], q), "the reference")
        self.core.set_reference(PANDA, q, dq, ddq)

    def tick(self, q, dq):
        """One state 1 ms after the last: the node's command and the core's must be the same."""
        t = self.now + 1_000_000
        self.set_clock(t)
        msg = self.JointState(name=PANDA, position=[float(x) for x in q], velocity=[float(x) for x in dq])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
        label = f"stamp_ns={t}"
        self.state_pub.publish(msg)
        expected = self.core.update(PANDA, msg.position, msg.velocity, msg.effort, t, t, t)
        if expected is None:
            time.sleep(0.02)
            self.exe.spin_once(timeout_sec=0.0)
            assert label not in self.commands, "the core sent nothing, the node did"
            return None
        self._wait(lambda: label in self.commands, f"the node's answer to {label}")
        got = self.commands[label][-1]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12, err_msg=label)
        assert self.node.core.mode == self.core.mode and self.node.core.reason == self.core.reason
        self.compared += 1
        return got

    def stale(self, gap_ns):
        """The state stops for ``gap_ns`` of sim time: both step to the same hold torque.

        The node's watchdog runs every wall-clock period, so while sim time stands still it may step more than once
        before the next state; the core steps until it holds too, and the two are compared there."""
        before = len(self.commands.get("stamp_ns=-1", []))
        self.set_clock(self.now + gap_ns)
        self._wait(lambda: len(self.commands.get("stamp_ns=-1", [])) > before, "the node's watchdog command")
        self._wait(lambda: self.node.core._holding_silent, "the node's hold torque")
        expected = self.core.check_input(self.now)
        assert expected is not None
        for _ in range(10_000):
            if self.core._holding_silent:
                break
            expected = self.core.check_input(self.now).copy()
        self._wait(lambda: np.array_equal(self.commands["stamp_ns=-1"][-1], self.node.core.tau), "the last command")
        np.testing.assert_allclose(self.commands["stamp_ns=-1"][-1], expected, rtol=0, atol=1e-12)
        self.stale_commands += 1

    def close(self):
        from idyn_ros.nodes.hot_loop import HotLoop

        HotLoop.stop_all()
        self.node.destroy_node()
        self.script.destroy_node()


@pytest.fixture()
def hot(rclpy_context):
    from idyn_ros.nodes.hot_loop import HotLoop

    HotLoop.enable(True)
    rig = SideBySide(rclpy_context)
    try:
        yield rig
    finally:
        rig.close()
        HotLoop.enable(False)


def _state(k):
    w = 2 * math.pi * 0.5
    return Q0 + 0.05 * math.sin(w * k * 1e-3), np.full(7, 0.05 * w * math.cos(w * k * 1e-3))


def test_node_and_core_send_the_same_torque_every_tick(hot):
    from rclpy.parameter import Parameter

    from idyn_ros.control.controller import MODE_ACTIVE, MODE_SAFE_DAMPING

    k = 0
    for _ in range(60):  # start-up: hold the first state, release with the full law torque
        hot.tick(*_state(k))
        k += 1
    hot.reference(Q0 + 0.02, np.zeros(7), np.zeros(7))
    for _ in range(60):
        hot.tick(*_state(k))
        k += 1
    hot.stale(40_000_000)  # 40 ms without a state (> 20 periods): safe torque from the last trusted state
    assert hot.core.mode == MODE_SAFE_DAMPING and "stale" in hot.core.reason
    for _ in range(40):  # fresh again: safe for 5 ticks, then the law ramps back in over 10 ms
        hot.tick(*_state(k))
        k += 1
    assert hot.core.mode == MODE_ACTIVE and hot.core.watchdog.recoveries == 1
    assert hot.node.set_parameters([Parameter("gain_preset", value="stiff")])[0].successful
    hot._wait(lambda: hot.node.core.params.gain_preset == "stiff", "the gain change")
    hot.core.set_params(hot.node.params.value)
    for _ in range(60):
        hot.tick(*_state(k))
        k += 1
    q, dq = _state(k)
    q[3] = float("nan")
    hot.tick(q, dq)  # a NaN: the safe torque in the same tick, latched
    k += 1
    for _ in range(20):
        hot.tick(*_state(k))
        k += 1
    assert hot.core.mode == MODE_SAFE_DAMPING and "non-finite position" in hot.core.reason
    before = len(hot.commands.get("stamp_ns=-1", []))
    hot.node.trigger_deactivate()  # the stop command: the safe torque, left applied
    hot._wait(lambda: len(hot.commands.get("stamp_ns=-1", [])) > before, "the stop command")
    np.testing.assert_allclose(hot.commands["stamp_ns=-1"][-1], hot.core.stop(), rtol=0, atol=1e-12)
    hot.node.trigger_activate()
    hot.core.activate()
    for _ in range(60):  # a new hold at the current state and a new release
        hot.tick(*_state(k))
        k += 1
    assert hot.core.mode == MODE_ACTIVE
    assert hot.compared >= 300 and hot.stale_commands == 1
