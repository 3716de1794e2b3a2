"""doomed: DOOMED online offset adaptation (Ratliff et al. 2016) as a node.

Glue around ``idyn_ros.control.doomed.DoomedAdapter`` (the pairing of each measured acceleration with the
command that caused it, and the learner), which the simulator loop runs too. The controller publishes
ControllerState stamped with the joint-state stamp it answered (acceleration_command = ddq_d + feedback
acceleration, mode); each /joint_states sample then pairs with the command stamped at the previous sample.
Publishes AdaptationState (offset, acceleration error, variance, frozen + reason) every paired tick; the
controller adds ``offset`` one tick later. Services: ~/freeze, ~/unfreeze, ~/reset (std_srvs/Trigger).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import state_estimation as se
from idyn_ros.control.controller import MODE_ACTIVE, NameMap
from idyn_ros.control.doomed import Doomed, DoomedAdapter, config_from_params
from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes.common import HOT_IN, Diagnostics, declare_and_load, field_view, stamp_to_ns
from idyn_ros.parameters import DoomedParams

DISABLED = "disabled by parameter 'enabled'"  # the freeze reason the parameter sets (and lifts again)


def _settings_problem(v: DoomedParams) -> str | None:
    """A cross-field problem of the DOOMED settings (e.g. osc_consecutive against the detector's history), refused
    before it applies."""
    try:
        config_from_params(v, np.ones(1)).validate()
    except ValueError as exc:
        return str(exc)
    return None


class DoomedNode(Node):
    def __init__(self, name: str = "doomed", **kwargs: Any) -> None:
        from sensor_msgs.msg import JointState
        from std_srvs.srv import Trigger

        from idyn_ros.msg import AdaptationState, ControllerState

        super().__init__(name, **kwargs)
        self.params, self.spec, self.robot = declare_and_load(self, DoomedParams, check=_settings_problem)
        v = self.params.value
        n = self.n = self.robot.n
        self.params.on_change.append(self._on_params)
        learner = Doomed(n, config_from_params(v, self.robot.effort_limit))
        # the step scales with the controller's feedback inertia: the model's identified M(q) when it has one
        inertia = FeedforwardComputer(self.robot, v.model_path or None, "rbd", v.rate_hz, 0).feedback_model()
        self.adapter = DoomedAdapter(learner, inertia, v.inertia_scaled)
        if not v.enabled:
            learner.freeze(DISABLED)
        self.filter = se.JointStateFilter(self.robot.joint_names, v.rate_hz)
        self._cs_map = NameMap(self.robot.joint_names)
        self._acc_tmp = np.zeros(n)
        self.out = AdaptationState(joint_names=list(self.robot.joint_names))
        self._offset, self._acc_error, self._error_variance = (field_view(self.out, name, n) for name in (
            "offset", "acceleration_error", "error_variance"))  # written each publish
        self.pub = self.create_publisher(AdaptationState, v.adaptation_topic, HOT_IN)
        hot_loop.subscribe(self, JointState, v.joint_states_topic, self._on_joint_state, HOT_IN)
        hot_loop.subscribe(self, ControllerState, v.controller_state_topic, self._on_controller_state, HOT_IN)
        self.create_service(Trigger, "~/freeze", self._srv_freeze)
        self.create_service(Trigger, "~/unfreeze", self._srv_unfreeze)
        self.create_service(Trigger, "~/reset", self._srv_reset)
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v.robot)
        self.create_timer(v.diagnostics_period, self._on_diagnostics)
        self._reported = ""

    @property
    def learner(self) -> Doomed:
        return self.adapter.learner

    def _on_params(self, v: DoomedParams) -> None:
        self.learner.reconfigure(config_from_params(v, self.robot.effort_limit))  # every run-time parameter
        self.adapter.inertia_scaled = v.inertia_scaled
        if not v.enabled and not self.learner.frozen:
            self.learner.freeze(DISABLED)
        elif v.enabled and self.learner.frozen and self.learner.freeze_reason == DISABLED:
            self.learner.unfreeze()  # enabled again (a freeze by ~/freeze or the detector stays)

    def _on_controller_state(self, msg: Any) -> None:
        if self._cs_map.resolve(msg.joint_names) and self._cs_map.take(msg.acceleration_command, self._acc_tmp):
            self.adapter.on_command(stamp_to_ns(msg.header.stamp), self._acc_tmp,
                                    msg.mode == MODE_ACTIVE and not msg.mode_reason)  # not while recovering

    def _on_joint_state(self, msg: Any) -> None:
        f = self.filter
        if f.update(msg.name, msg.position, msg.velocity, msg.effort, stamp_to_ns(msg.header.stamp)) != se.OK:
            return
        offset = self.adapter.on_state(f.stamp_ns, f.q, f.dq)
        if offset is None:
            return
        L = self.learner
        o = self.out
        o.header.stamp = msg.header.stamp
        self._offset[:] = offset
        np.negative(L.error, out=self._acc_error)  # msg convention: measured - commanded
        self._error_variance[:] = L.var_acc
        o.learning_rate = L.learning_rate
        o.frozen = L.frozen
        o.freeze_reason = L.freeze_reason
        self.pub.publish(o)
        if L.frozen and L.freeze_reason != self._reported:
            self._reported = L.freeze_reason
            asked = L.freeze_reason in ("frozen by ~/freeze", DISABLED)  # requested (service, parameter): not a fault
            (self.get_logger().info if asked else self.get_logger().error)(f"adaptation frozen: {L.freeze_reason}")
            self.diag.set(Diagnostics.WARN, f"frozen: {L.freeze_reason}", publish=True)

    def _srv_freeze(self, request: Any, response: Any) -> Any:
        self.learner.freeze("frozen by ~/freeze")
        response.success, response.message = True, "learning frozen, offset kept"
        return response

    def _srv_unfreeze(self, request: Any, response: Any) -> Any:
        """Refused while the parameter 'enabled' is false: the service must not override the parameter."""
        if not self.params.value.enabled:
            response.success, response.message = False, "learning is disabled by parameter 'enabled': set it to true"
            return response
        self.learner.unfreeze()
        self._reported = ""
        response.success, response.message = True, "learning resumed"
        return response

    def _srv_reset(self, request: Any, response: Any) -> Any:
        self.learner.reset()
        self._reported = ""
        if not self.params.value.enabled:
            self.learner.freeze(DISABLED)
        response.success, response.message = True, "offset and statistics reset to zero"
        return response

    def _on_diagnostics(self) -> None:
        L = self.learner
        if not L.frozen:
            self.diag.set(Diagnostics.OK, "adapting")
        self.diag.values.update(paired=str(self.adapter.paired), unpaired=str(self.adapter.unpaired),
                                gaps=str(self.adapter.gaps),
                                max_abs_offset=f"{np.abs(L.offset).max():.3f}")
        self.diag.publish()


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([DoomedNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
