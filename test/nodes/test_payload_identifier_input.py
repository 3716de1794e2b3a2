"""payload_identifier's joint-state input: a filter restart during the excitation abandons the call with the reason;
restarts and rejections are said once per kind. Callbacks are called directly with messages."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.ros

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def _state(ns: int, q=None):
    from sensor_msgs.msg import JointState

    q = Q0 if q is None else q
    msg = JointState(name=PANDA, position=[float(x) for x in q], velocity=[0.0] * 7, effort=[1.0] * 7)
    msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
    return msg




def test_a_restart_during_the_excitation_abandons_the_call_and_is_said_once(rclpy_context, log_recorder):
    """Stamps jumping back mid-recording broke the recording's time axis: the old node dropped the restarted samples
    in silence and waited out the plan's end on the old time line (wall_timeout, 600 s)."""
    from rclpy.parameter import Parameter
    from rclpy.task import Future

    from idyn_ros.control import payload as cp
    from idyn_ros.errors import IdynError
    from idyn_ros.nodes.payload_identifier import PayloadIdentifierNode

    node = PayloadIdentifierNode(context=rclpy_context, parameter_overrides=[Parameter("design_budget", value=1.0)])
    try:
        log = log_recorder
        node.get_logger = lambda: log
        reports: list = []
        node.diag.publish = lambda: reports.append((node.diag.level, node.diag.message))
        node._on_joint_state(_state(5_000_000_000))
        node.log, node._done = cp.JointStateLog(7, 1000), Future()  # what _play starts
        node._until_ns = 5_000_000_000 + 500_000_000
        for k in range(1, 20):
            node._on_joint_state(_state(5_000_000_000 + k * 1_000_000))
        assert not node._done.done() and node.log.size == 19
        node._on_joint_state(_state(1_000_000_000))  # the source restarted: 4 s back
        assert node._done.done() and node._until_ns == -1
        with pytest.raises(IdynError, match=r"stamps started over during the excitation.*call again"):
            node._done.result()
        for k in range(1, 3):  # again, and on the new time line: said once
            node._on_joint_state(_state(1_000_000_000 + k * 1_000_000))
            node._on_joint_state(_state(k * 1_000_000))
        bad = _state(3_000_000_000, np.full(7, np.nan))
        node._on_joint_state(bad)
        node._on_joint_state(bad)
        assert [level for level, _ in log.lines] == ["warning", "error"]
        assert "stamp jumped back" in log.lines[0][1] and "non-finite position" in log.lines[1][1]
        assert [level for level, _ in reports] == [1, 2]
    finally:
        node.destroy_node()
