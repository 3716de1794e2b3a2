"""doomed: DOOMED online offset adaptation (Ratliff et al. 2016) as a node.

Glue around ``idyn_ros.control.doomed.DoomedAdapter`` (the pairing of each measured acceleration with the
command that caused it, and the learner), which the simulator loop runs too. The controller publishes
ControllerState stamped with the joint-state stamp it answered (acceleration_command = ddq_d + feedback
acceleration, mode); each /joint_states sample then pairs with the command stamped at the previous sample.
Publishes AdaptationState (offset, acceleration error, the measured acceleration's variance, frozen + reason) every
paired tick; the controller adds ``offset`` one tick later. ``enabled: false`` publishes a zero offset and resets
the learner (re-enabling starts from zero). Services: ~/freeze, ~/unfreeze, ~/reset (std_srvs/Trigger) and
~/set_payload (idyn_ros/SetPayload: the step's inertia includes the payload, the learner starts from zero).
The step scales with the inertia of ``model_path`` (its ``fallback`` applies: a rejected model is an ERROR in the
log and a WARN on /diagnostics, ``none`` refuses to start). A joint-state filter restart (stamps jumped back or
stalled) is not paired, nor is the state after it; it and rejected samples are reported once per kind. A controller
reconfigured with another model (ControllerState.model_id) resets the offset, learned for the old one's error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import state_estimation as se
from idyn_ros.control.controller import MODE_ACTIVE
from idyn_ros.control.doomed import Doomed, DoomedAdapter, config_from_params
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
    stamp_to_ns,
)
from idyn_ros.parameters import DoomedParams

DISABLED = "disabled by parameter 'enabled'"  # the freeze reason the parameter sets (and lifts again)
FROZEN_BY_REQUEST = "frozen by ~/freeze"


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
        from std_srvs.srv import Trigger

        from idyn_ros.msg import AdaptationState, ControllerState

        super().__init__(name, **kwargs)
        self.params, self.spec, self.robot = declare_and_load(self, DoomedParams, check=_settings_problem)
        v = self.params.value
        n = self.n = self.robot.n
        # ticks run in the hot loop's thread, parameters and services in the executor's: every callback that touches
        # the learner holds one lock (a parameter change rebuilds its detector arrays one by one; a tick in between
        # indexed past the end of one)
        self._lock = threading.Lock()
        self.params.on_change.append(self._serialised(self._on_params))
        learner = Doomed(n, config_from_params(v, self.robot.effort_limit))
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v.robot)
        # the step scales with the controller's feedback inertia: the model's identified M(q) when it has one;
        # fallback 'none' raises here (refuses to start), like the feedforward node
        ff = FeedforwardComputer(self.robot, v.model_path or None, v.fallback, v.rate_hz, 0)
        self.model_id = ff.model_id
        self.model_problem = ff.fallback_reason if ff.fallback and v.model_path else ""
        if self.model_problem:
            self.get_logger().error(f"doomed: {self.model_problem}; the step scales with the nominal URDF's inertia")
        self._inertia_bare = ff.feedback_model()
        self.payload: Any = None  # the payload the step's inertia includes (~/set_payload)
        self.adapter = DoomedAdapter(learner, self._inertia_bare, v.inertia_scaled)
        self._enabled = v.enabled
        self._reported = ""  # the freeze reason last logged
        if not v.enabled:
            learner.freeze(DISABLED)
            self._reported = DISABLED
        # DoomedAdapter differences dq itself: the filter's ddq is not read
        self.filter = se.JointStateFilter(self.robot.joint_names, v.rate_hz, estimate_acceleration=False)
        self.problems = JointStateProblems(self, self.diag, self.filter)
        self._cs_map = NameMap(self.robot.joint_names)
        self._acc_tmp = np.zeros(n)
        self.out = AdaptationState(joint_names=list(self.robot.joint_names))
        self._offset, self._acc_error, self._error_variance = (field_view(self.out, name, n) for name in (
            "offset", "acceleration_error", "error_variance"))  # written each publish
        self.pub = self.create_publisher(AdaptationState, v.adaptation_topic, HOT_IN)
        hot_loop.subscribe_joint_states(self, v.joint_states_topic, self._serialised(self._on_joint_state))
        hot_loop.subscribe(self, ControllerState, v.controller_state_topic,
                           self._serialised(self._on_controller_state), HOT_IN)
        self.create_service(Trigger, "~/freeze", self._serialised(self._srv_freeze))
        self.create_service(Trigger, "~/unfreeze", self._serialised(self._srv_unfreeze))
        self.create_service(Trigger, "~/reset", self._serialised(self._srv_reset))
        payload_service(self, self._serialised(self._set_payload))
        self._paired_reported = 0  # adapter.paired at the last diagnostics report
        self.create_timer(v.diagnostics_period, self._on_diagnostics)
        self._on_diagnostics()

    def _serialised(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        """``callback`` holding the node's lock (uncontended in the hot loop: well under a microsecond)."""
        def run(*args: Any) -> Any:
            with self._lock:
                return callback(*args)
        return run

    @property
    def learner(self) -> Doomed:
        return self.adapter.learner

    def _on_params(self, v: DoomedParams) -> None:
        L = self.learner
        L.reconfigure(config_from_params(v, self.robot.effort_limit))  # every run-time parameter
        self.adapter.inertia_scaled = v.inertia_scaled
        self._enabled = v.enabled
        if not v.enabled and L.freeze_reason != DISABLED:
            # decision: disabling forgets what was learned; an offset learned before is not trusted after re-enabling
            L.reset()
            L.freeze(DISABLED)
            self._reported = DISABLED
            self.get_logger().info("adaptation disabled by parameter 'enabled': offset reset, publishing zero")
        elif v.enabled and L.frozen and L.freeze_reason == DISABLED:
            L.reset()  # enabled again, from zero (again: a tick racing the reset above may have moved w)
            self._reported = ""

    def _set_payload(self, payload: Any) -> str:
        """What DOOMED learned compensated the arm without this payload: kept, it would count twice once the
        feedforward includes the payload (payload_identifier applies it to both)."""
        if payload == self.payload:
            return f"{describe_payload(payload)} already in DOOMED's inertia; offset kept"
        model = self._inertia_bare if payload is None else self._inertia_bare.with_payload(payload)
        self.adapter.set_inertia_model(model)
        self.payload = payload
        self.get_logger().info(f"{describe_payload(payload)} in DOOMED's inertia; offset reset to zero")
        return f"{describe_payload(payload)} in DOOMED's inertia; offset reset to zero"

    def _on_controller_state(self, msg: Any) -> None:
        if msg.model_id != self.adapter.controller_model:
            self._on_controller_model(msg.model_id)
        if self._cs_map.resolve(msg.joint_names) and self._cs_map.take(msg.acceleration_command, self._acc_tmp):
            self.adapter.on_command(stamp_to_ns(msg.header.stamp), self._acc_tmp,
                                    msg.mode == MODE_ACTIVE and not msg.mode_reason)  # not while recovering

    def _on_controller_model(self, model_id: str) -> None:
        """A controller reconfigured with another model: the offset goes; a model other than DOOMED's own (its step's
        inertia) is said once per model."""
        before = self.adapter.on_controller_model(model_id)
        log = self.get_logger()
        if before is not None:
            log.info(f"the controller's feedforward changed ({before} -> {model_id}): offset reset to zero")
        if model_id and model_id != self.model_id:
            log.warning(f"the controller runs feedforward {model_id}, DOOMED's step scales with the inertia of "
                        f"{self.model_id} (parameter model_path): give both the same model")

    def _on_joint_state(self, msg: Any, source: object = None) -> None:
        f = self.filter
        status = self.problems.update(msg, source)
        if status != se.OK:
            if status is not None:  # the stamps started over: this state and the next are no pair
                self.adapter.restart()
            return
        offset = self.adapter.on_state(f.stamp_ns, f.q, f.dq)
        if offset is None:
            return
        L = self.learner
        o = self.out
        o.header.stamp = msg.header.stamp
        if self._enabled:
            self._offset[:] = offset
        else:
            self._offset.fill(0.0)  # what 'enabled: false' promises, whatever the learner holds
        np.negative(L.error, out=self._acc_error)  # msg convention: measured - commanded
        self._error_variance[:] = L.var_acc  # Eq. 22's v: the measured acceleration's variance (AdaptationState.msg)
        o.learning_rate = L.learning_rate
        o.frozen = L.frozen
        o.freeze_reason = L.freeze_reason
        self.pub.publish(o)
        if L.frozen and L.freeze_reason != self._reported:
            self._reported = L.freeze_reason
            asked = L.freeze_reason in (FROZEN_BY_REQUEST, DISABLED)  # requested (service, parameter): not a fault
            (self.get_logger().info if asked else self.get_logger().error)(f"adaptation frozen: {L.freeze_reason}")
            self.diag.set(Diagnostics.WARN, f"frozen: {L.freeze_reason}", publish=True)

    def _srv_freeze(self, request: Any, response: Any) -> Any:
        self.learner.freeze(FROZEN_BY_REQUEST)
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
            self._reported = DISABLED
        response.success, response.message = True, "offset and statistics reset to zero"
        return response

    def _on_diagnostics(self) -> None:
        """Level and message from the learner's state each period, so no earlier report can outlive its cause."""
        L, a = self.learner, self.adapter
        paired = a.paired - self._paired_reported
        self._paired_reported = a.paired
        if L.frozen:
            level, message = Diagnostics.WARN, f"frozen: {L.freeze_reason}"
        elif paired == 0 and (rate := self.filter.rate_problem()):
            level, message = Diagnostics.WARN, f"nothing paired: {rate}"
        elif paired == 0:
            level, message = Diagnostics.OK, (f"waiting for the controller: nothing paired in the last "
                                              f"{self.params.value.diagnostics_period:g} s (controller not active, "
                                              f"in safe mode or recovering, or no joint states)")
        else:
            level, message = Diagnostics.OK, "adapting"
        if self.model_problem:
            level, message = Diagnostics.WARN, f"{message}; step scaled with the nominal URDF: {self.model_problem}"
        self.diag.set(level, message, model_id=self.model_id, paired=a.paired, unpaired=a.unpaired, gaps=a.gaps,
                      early=a.early, restarts=a.restarts, max_abs_offset=f"{np.abs(L.offset).max():.3f}",
                      payload=describe_payload(self.payload))
        self.problems.publish()


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([DoomedNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
