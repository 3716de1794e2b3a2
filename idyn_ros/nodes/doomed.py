"""doomed: DOOMED online offset adaptation (Ratliff et al. 2016) as a node.

Pairs each measured acceleration with the command that caused it: the controller publishes
ControllerState stamped with the joint-state stamp it answered (acceleration_command = ddq_d +
feedback acceleration); when the next /joint_states sample (stamp s_k) arrives, ddq_meas =
(dq_k - dq_{k-1}) / dt is paired with the ControllerState stamped s_{k-1}. The algorithm is
``idyn_ros.control.doomed.Doomed`` (pure numpy, tested on a double integrator). Publishes
AdaptationState (offset, acceleration error, variance, frozen + reason) every tick; the
controller adds ``offset`` to its command (one more tick of delay: keep eta below ~M_jj/2, or use
inertia_scaled with learning_rate < ~0.5). Services: ~/freeze, ~/unfreeze, ~/reset (std_srvs/Trigger).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from rclpy.node import Node

from idyn_ros.control import state_estimation as se
from idyn_ros.control.doomed import Doomed, DoomedConfig
from idyn_ros.control.rbd import RigidBodyTerms
from idyn_ros.nodes import hot_loop
from idyn_ros.nodes import parameters as prm
from idyn_ros.nodes.common import HOT_IN, Diagnostics, NameMap, as_array, declare_and_load, stamp_to_ns

KIND = "doomed"
RING = 16  # controller states kept for pairing by stamp


class DoomedNode(Node):
    def __init__(self, name: str = "doomed", **kwargs: Any) -> None:
        from sensor_msgs.msg import JointState
        from std_srvs.srv import Trigger

        from idyn_ros.msg import AdaptationState, ControllerState

        super().__init__(name, **kwargs)
        v, self.spec, self.robot = declare_and_load(self, KIND)
        self.vals = v
        n = self.n = self.robot.n
        self.add_post_set_parameters_callback(self._after_set)
        self.rbd = RigidBodyTerms(self.robot.pin_model)
        limit = v["offset_limit"] or list(0.05 * self.robot.effort_limit)
        self.learner = Doomed(n, self._config(v, limit))
        if not v["enabled"]:
            self.learner.freeze("disabled by parameter 'enabled'")
        self.filter = se.JointStateFilter(self.robot.joint_names, v["rate_hz"])
        self._dq_prev = np.zeros(n)
        self.ddq_meas = np.zeros(n)
        self._ring_stamp = np.full(RING, -1, dtype=np.int64)
        self._ring_acc = np.zeros((RING, n))
        self._ring_i = 0
        self._cs_map = NameMap(self.robot.joint_names)
        self._acc_tmp = np.zeros(n)
        self.paired = 0
        self.unpaired = 0
        self.out = AdaptationState(joint_names=list(self.robot.joint_names))
        self.pub = self.create_publisher(AdaptationState, v["adaptation_topic"], HOT_IN)
        hot_loop.subscribe(self, JointState, v["joint_states_topic"], self._on_joint_state, HOT_IN)
        hot_loop.subscribe(self, ControllerState, v["controller_state_topic"], self._on_controller_state, HOT_IN)
        self.create_service(Trigger, "~/freeze", self._srv_freeze)
        self.create_service(Trigger, "~/unfreeze", self._srv_unfreeze)
        self.create_service(Trigger, "~/reset", self._srv_reset)
        self.diag = Diagnostics(self, f"idyn: {self.get_name()}", v["robot"])
        self.create_timer(v["diagnostics_period"], self._on_diagnostics)
        self._reported = ""

    @staticmethod
    def _config(v: dict[str, Any], limit: list[float]) -> DoomedConfig:
        return DoomedConfig(
            learning_rate=v["learning_rate"], reference_rate_hz=v["reference_rate_hz"], rate_hz=v["rate_hz"],
            momentum=v["momentum"], variance_gain=v["variance_gain"], forgetting=v["forgetting"],
            variance_tau=v["variance_tau"], features=v["features"], offset_limit=np.asarray(limit, dtype=float),
            osc_window=v["osc_window"], osc_rise_factor=v["osc_rise_factor"], osc_min_error=v["osc_min_error"],
            osc_bias_ratio=v["osc_bias_ratio"], osc_consecutive=v["osc_consecutive"], decay_tau=v["decay_tau"],
            osc_tv_windows=v["osc_tv_windows"], osc_tv_ratio=v["osc_tv_ratio"], osc_tv_fraction=v["osc_tv_fraction"])

    def _after_set(self, params: list[Any]) -> None:
        v = self.vals = prm.values(self, KIND)
        cfg = self.learner.cfg
        for key in ("momentum", "variance_gain", "forgetting"):
            setattr(cfg, key, v[key])
        self.learner.set_learning_rate(v["learning_rate"])
        if v["offset_limit"]:
            self.learner.limit[:] = v["offset_limit"]
        if not v["enabled"] and not self.learner.frozen:
            self.learner.freeze("disabled by parameter 'enabled'")

    def _on_controller_state(self, msg: Any) -> None:
        if not self._cs_map.resolve(msg.joint_names) or not self._cs_map.take(msg.acceleration_command,
                                                                              self._acc_tmp):
            return
        i = self._ring_i
        self._ring_stamp[i] = stamp_to_ns(msg.header.stamp)
        self._ring_acc[i] = self._acc_tmp
        self._ring_i = (i + 1) % RING

    def _on_joint_state(self, msg: Any) -> None:
        f = self.filter
        prev_ns = f.stamp_ns
        self._dq_prev[:] = f.dq
        if f.update(msg.name, msg.position, msg.velocity, msg.effort, stamp_to_ns(msg.header.stamp)) != se.OK:
            return
        if prev_ns < 0 or f.samples < 2:
            return
        hit = np.flatnonzero(self._ring_stamp == prev_ns)
        if hit.size == 0:  # the command for the previous state never arrived (controller inactive/late)
            self.unpaired += 1
            return
        self.paired += 1
        np.subtract(f.dq, self._dq_prev, out=self.ddq_meas)
        self.ddq_meas /= (f.stamp_ns - prev_ns) * 1e-9
        scale = np.diag(self.rbd.mass_matrix(f.q)) if self.vals["inertia_scaled"] else None
        L = self.learner
        offset = L.update(self._ring_acc[hit[0]], self.ddq_meas, f.q, f.dq, scale)
        o = self.out
        o.header.stamp = msg.header.stamp
        o.offset = as_array(offset)
        o.acceleration_error = as_array(-L.error)  # msg convention: measured - commanded
        o.error_variance = as_array(L.var_acc)
        o.learning_rate = L.learning_rate
        o.frozen = L.frozen
        o.freeze_reason = L.freeze_reason
        self.pub.publish(o)
        if L.frozen and L.freeze_reason != self._reported:
            self._reported = L.freeze_reason
            self.get_logger().error(f"adaptation frozen: {L.freeze_reason}")
            self.diag.set(Diagnostics.WARN, f"frozen: {L.freeze_reason}", publish=True)

    def _srv_freeze(self, request: Any, response: Any) -> Any:
        self.learner.freeze("frozen by ~/freeze")
        response.success, response.message = True, "learning frozen, offset kept"
        return response

    def _srv_unfreeze(self, request: Any, response: Any) -> Any:
        self.learner.unfreeze()
        self._reported = ""
        response.success, response.message = True, "learning resumed"
        return response

    def _srv_reset(self, request: Any, response: Any) -> Any:
        self.learner.reset()
        self._reported = ""
        if not self.vals["enabled"]:
            self.learner.freeze("disabled by parameter 'enabled'")
        response.success, response.message = True, "offset and statistics reset to zero"
        return response

    def _on_diagnostics(self) -> None:
        L = self.learner
        if not L.frozen:
            self.diag.set(Diagnostics.OK, "adapting")
        self.diag.values.update(paired=str(self.paired), unpaired=str(self.unpaired),
                                max_abs_offset=f"{np.abs(L.offset).max():.3f}")
        self.diag.publish()


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    return run([DoomedNode], argv)


if __name__ == "__main__":
    raise SystemExit(main())
