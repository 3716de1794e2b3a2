"""feedforward: the exported model at (q, dq, ddq_d) -> idyn_ros/FeedforwardTorque (total and parts).

Runs ``idyn_ros.control.feedforward.FeedforwardComputer`` (ONNX Runtime, no torch) on every
/joint_states sample with the latest reference acceleration. In the default bringup the controller
embeds the same class (one hop) and this node publishes for monitoring/recording; with the
controller's ``feedforward_source: topic`` this node is the source and its silence trips the
controller's watchdog. Without a model, or with one for another robot/rate, it says so loudly
(ERROR log once + /diagnostics ERROR) and publishes the configured fallback (``fallback: true``).
When the joint-state filter restarts (stamps jumped back or stalled) the model's recurrent state is warmed up again
at the live state, and the node says so once per kind (log, /diagnostics).
"""

from __future__ import annotations

import array
import math
import time
from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import state_estimation as se
from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.control.state_estimation import NameMap
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes.common import (
    HOT_IN,
    Diagnostics,
    JointStateProblems,
    declare_and_load,
    describe_payload,
    field_view,
    payload_service,
)
from idyn_ros.nodes.controller import controller_in_process
from idyn_ros.parameters import FeedforwardParams

PARTS = ("rbd", "friction", "residual")  # FeedforwardTorque fields filled while publish_parts


class FeedforwardNode(Node):
    def __init__(self, name: str = "feedforward", **kwargs: Any) -> None:
        from idyn_ros.msg import FeedforwardTorque, JointReference

        super().__init__(name, **kwargs)
        self.params, self.spec, self.robot = declare_and_load(self, FeedforwardParams)
        v = self.params.value
        n = self.n = self.robot.n
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v.robot)
        self.ff = FeedforwardComputer(self.robot, v.model_path or None, v.fallback, v.rate_hz, v.warmup_ticks)
        if self.ff.fallback:
            self.get_logger().error(f"feedforward: {self.ff.fallback_reason}")
            self.diag.set(Diagnostics.ERROR, self.ff.fallback_reason, publish=True, model_id=self.ff.model_id)
        else:
            self.diag.set(Diagnostics.OK, f"model {self.ff.model_id}", publish=True, model_id=self.ff.model_id)
        self.filter = se.JointStateFilter(self.robot.joint_names, v.rate_hz, estimate_acceleration=False)  # q, dq
        self.problems = JointStateProblems(self, self.diag, self.filter)
        self.ddq_d = np.zeros(n)
        self._ref = NameMap(self.robot.joint_names)
        self._warm = False
        self.out = FeedforwardTorque(joint_names=list(self.robot.joint_names), model_id=self.ff.model_id,
                                     fallback=self.ff.fallback)
        self._total = field_view(self.out, "total", self.robot.n)  # written each publish
        self._parts: tuple[np.ndarray, ...] | None = None  # rbd, friction, residual while publish_parts
        self.pub = self.create_publisher(FeedforwardTorque, v.feedforward_topic, HOT_IN)
        hot_loop.subscribe_joint_states(self, v.joint_states_topic, self._on_joint_state)
        hot_loop.subscribe(self, JointReference, v.reference_topic, self._on_reference, HOT_IN)
        self.create_timer(v.diagnostics_period, self.problems.publish)
        payload_service(self, self._set_payload)

    def _set_payload(self, payload: Any) -> str:
        self.ff.set_payload(payload)
        return f"{describe_payload(payload)} in the feedforward"

    def _on_reference(self, msg: Any) -> None:
        """A reference with a non-finite acceleration is dropped (the previous one stays): it would publish a NaN
        feedforward, and a learned model would keep it in its recurrent state."""
        if self._ref.resolve(msg.joint_names) and all(map(math.isfinite, msg.accelerations)):
            self._ref.take(msg.accelerations, self.ddq_d)

    def _on_joint_state(self, msg: Any, source: object = None) -> None:
        f = self.filter
        status = self.problems.update(msg, source)
        if status is None:
            return
        if status != se.OK:  # a restart
            self._warm = False  # a recurrent state built on the old history: warm up again at the live state
        o = self.out
        ff = self._controllers_computation(f.stamp_ns)
        if ff is None:  # compute it here (another process than the controller, or it takes our topic)
            if not self._warm:
                self.ff.warm_up(f.q)
                self._warm = True
            t0 = time.perf_counter_ns()
            self.ff.compute(f.q, f.dq, self.ddq_d)
            o.compute_time_us = (time.perf_counter_ns() - t0) * 1e-3
            ff = self.ff
        else:
            o.compute_time_us = 0.0
        o.header.stamp = msg.header.stamp
        self._total[:] = ff.total
        if self.params.value.publish_parts:
            if self._parts is None:
                self._parts = tuple(field_view(o, name, self.robot.n) for name in PARTS)
            for view, part in zip(self._parts, (ff.rbd_part, ff.friction, ff.residual), strict=True):
                view[:] = part
        elif self._parts is not None:  # turned off at run time: empty again, as before it was on
            for name in PARTS:
                setattr(o, name, array.array("d"))
            self._parts = None
        self.pub.publish(o)

    def _controllers_computation(self, stamp_ns: int) -> Any:
        """The controller's own feedforward for this very state when it runs in this process with the same model
        (composed): the same numbers, not computed twice (~50 us a tick with a learned model)."""
        core = controller_in_process(self.context)
        if (core is None or not core.embedded or not core.params.use_feedforward or not core.active
                or core.ff.model_id != self.ff.model_id or core.ff.payload != self.ff.payload
                or core.filter.stamp_ns != stamp_ns):
            return None
        return core.ff


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([FeedforwardNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
