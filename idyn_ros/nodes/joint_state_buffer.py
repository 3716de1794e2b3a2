"""joint_state_buffer: /joint_states -> clean, ordered state with causal dq/ddq estimates.

Glue around ``idyn_ros.control.state_estimation.JointStateFilter`` (the controller embeds the
same class so both see identical estimates). Publishes ``idyn_ros/JointStateEstimate`` on
``state_estimate_topic`` for every accepted sample; rejected samples (NaN/Inf, missing joint, negative stamp) are
dropped and reported on /diagnostics (ERROR) and in the log, once per kind; a restart of the filter (stamps jumped
back or stalled: ``state_estimation.RESTARTS``) publishes the live sample and is reported once per kind as a WARN;
late and re-sent samples are dropped and counted; no input for ``stale_timeout`` s is reported as STALE.
"""

from __future__ import annotations

import array
import time
from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import state_estimation as se
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes.common import HOT_IN, Diagnostics, JointStateProblems, declare_and_load, field_view
from idyn_ros.parameters import JointStateBufferParams


class JointStateBufferNode(Node):
    def __init__(self, name: str = "joint_state_buffer", **kwargs: Any) -> None:
        from idyn_ros.msg import JointStateEstimate

        super().__init__(name, **kwargs)
        self.params, self.spec, robot = declare_and_load(self, JointStateBufferParams)
        v = self.params.value  # all read-only but the stale timeout, which is read at each check
        self.n = robot.n
        self.filter = se.JointStateFilter(robot.joint_names, v.rate_hz, v.accel_cutoff_hz, v.max_gap_periods,
                                          use_measured_velocity=v.use_measured_velocity,
                                          track_rotational_displacement=True)  # published as rotational_displacement
        self._dq_prev = np.zeros(self.n)
        self.ddq_raw = np.zeros(self.n)
        self.out = JointStateEstimate(joint_names=list(robot.joint_names))
        self._fields = {name: field_view(self.out, name, self.n) for name in (  # written each publish
            "position", "velocity", "acceleration", "acceleration_raw", "rotational_displacement")}
        self._effort: np.ndarray | None = None  # the effort field's view while the input carries efforts
        self.pub = self.create_publisher(JointStateEstimate, v.state_estimate_topic, HOT_IN)
        hot_loop.subscribe_joint_states(self, v.joint_states_topic, self._on_joint_state)
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v.robot)
        self.create_timer(v.diagnostics_period, self._on_diagnostics)
        self._last_rx = -1
        self.accepted = 0
        self.problems = JointStateProblems(self, self.diag, self.filter)  # logged once per status code, not reason

    @property
    def rejected(self) -> int:
        """Samples refused (not finite, a missing joint, a negative stamp; restarts and drops are counted apart)."""
        return self.problems.rejected

    def _on_joint_state(self, msg: Any, source: object = None) -> None:
        self._last_rx = time.monotonic_ns()
        f = self.filter
        prev_ns = f.stamp_ns
        self._dq_prev[:] = f.dq
        if self.problems.update(msg, source) is None:
            return
        self.accepted += 1
        if not f.ddq_restarted:  # the raw difference restarts where the filtered one does (gaps, restarts)
            np.subtract(f.dq, self._dq_prev, out=self.ddq_raw)
            self.ddq_raw /= (f.stamp_ns - prev_ns) * 1e-9
        else:
            self.ddq_raw[:] = 0.0
        o = self.out
        o.header.stamp = msg.header.stamp
        v = self._fields
        v["position"][:] = f.q
        v["velocity"][:] = f.dq
        v["acceleration"][:] = f.ddq
        v["acceleration_raw"][:] = self.ddq_raw
        v["rotational_displacement"][:] = f.estimate.r
        if len(msg.effort):
            if self._effort is None:
                self._effort = field_view(o, "effort", self.n)
            self._effort[:] = f.effort
        elif self._effort is not None:  # an input without efforts publishes none
            o.effort = array.array("d")
            self._effort = None
        self.pub.publish(o)

    def _on_diagnostics(self) -> None:
        now = time.monotonic_ns()
        v = self.params.value
        if self._last_rx < 0:
            self.diag.set(Diagnostics.STALE, f"no /joint_states on {v.joint_states_topic} yet")
        elif now - self._last_rx > v.stale_timeout * 1e9:
            self.diag.set(Diagnostics.STALE, f"no /joint_states for {(now - self._last_rx) * 1e-9:.3f} s")
        elif self.diag.level != Diagnostics.ERROR:  # an input error stays reported (latched)
            problem = self.problems.dropping_note() or self.filter.rate_problem()
            self.diag.set(Diagnostics.WARN if problem else Diagnostics.OK, problem or "ok")
        self.diag.values.update(accepted=self.accepted, rejected=self.rejected, **self.problems.values())
        self.diag.values = {k: str(v) for k, v in self.diag.values.items()}
        self.diag.publish()


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([JointStateBufferNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
