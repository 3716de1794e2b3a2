"""Drive data: what a joint's reported effort means and, for current-reporting arms, the current -> torque gains.

A UR controller reports motor currents [A] as joint effort: ``ur_robot_driver`` does so on a CB3 and on an
e-Series unless it runs with ``use_currents_as_efforts:=false`` (PolyScope >= 5.23 / 10.11). Joint torque is
then ``tau_j = k_j * i_j`` with a per-joint gain k_j [Nm/A] (motor torque constant x gear ratio, as the
controller sees it). These values are starting points (priors) for ``idyn train``, which identifies the gains
jointly with the rigid-body and friction parameters (``idyn_ros.models.current_gains``); a user who knows the
gains of their arm passes them to ``idyn dataset import --torque-constants`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from idyn_ros.errors import ParameterError

#: Joint names of Universal Robots arms as ur_robot_driver publishes them (any tf_prefix in front).
UR_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
             "wrist_3_joint")


@dataclass(frozen=True)
class TorqueConstants:
    """Per-joint current -> torque gains of one arm, with where each value comes from.

    Attributes:
        values: k_j [Nm/A], robot joint order.
        sources: one line per joint: the public source, or why the value is assumed.
        note: what the numbers are good for.
    """

    values: tuple[float, ...]
    sources: tuple[str, ...]
    note: str = ""

    def as_array(self) -> np.ndarray:
        return np.asarray(self.values, dtype=np.float64)


_UR5_RATIO = ("UR controller's own static ratio target torque / target current in the standstill logs of "
              "kkufieta/ur5_modeling_force_estimate (Apache-2.0), UR5 CB2")
#: UR5 (CB2/CB3). Joints 2-5: the controller's own ratio (shared/data/ur5_ft/README.md). Joints 1 and 6 carry no
#: static load in those logs, so no ratio: assumed equal to the joint of the same size next to them.
UR5 = TorqueConstants(
    values=(10.7, 10.7, 10.7, 10.2, 11.9, 11.9),
    sources=("assumed = shoulder_lift_joint (same joint size on the UR5); no public value",
             _UR5_RATIO, _UR5_RATIO, _UR5_RATIO, _UR5_RATIO,
             "assumed = wrist_2_joint (same joint size on the UR5); no public value"),
    note="priors: the thesis that recorded these logs fitted 7.5, 6.8, 7.1, 2.8, 3.2, 3.4 Nm/A with offsets "
         "against its own model; the two public sets differ by 35 % on the large joints",
)

_TORQUE_CONSTANTS = {"ur5": UR5}


def torque_constants(robot: str) -> TorqueConstants | None:
    """The robot data gains of a preset (None when the robot reports torques or no value is public)."""
    return _TORQUE_CONSTANTS.get(str(robot).strip().lower())


def is_ur_arm(joint_names: tuple[str, ...] | list[str]) -> bool:
    """Whether the joints are a UR arm's, as ur_robot_driver names them (any common tf_prefix)."""
    names = list(joint_names)
    if len(names) != len(UR_JOINTS):
        return False
    prefix = names[0][: len(names[0]) - len(UR_JOINTS[0])]
    return all(n == prefix + u for n, u in zip(names, UR_JOINTS, strict=True))


def valid_torque_constants(k: np.ndarray, n: int) -> bool:
    """Whether ``k`` is n motor torque constants: finite, > 0 Nm/A (tau = k i)."""
    return k.shape == (n,) and bool(np.all(np.isfinite(k))) and not np.any(k <= 0)


def parse_torque_constants(text: str | list[str] | tuple[float, ...], n: int) -> np.ndarray:
    """``"k1,...,kn"`` (Nm/A, joint order) or a preset name (``ur5``) -> (n,) positive gains; ParameterError else."""
    if isinstance(text, str) and text.strip().lower() in _TORQUE_CONSTANTS:
        values = _TORQUE_CONSTANTS[text.strip().lower()].as_array()
    else:
        items = text.split(",") if isinstance(text, str) else list(text)
        try:
            values = np.array([float(str(v).strip()) for v in items if str(v).strip()], dtype=np.float64)
        except ValueError:
            raise ParameterError(f"--torque-constants {text!r}: expected {n} numbers in Nm/A separated by commas "
                                 f"(robot joint order) or a preset name ({', '.join(_TORQUE_CONSTANTS)})") from None
    if values.shape != (n,):
        raise ParameterError(f"--torque-constants has {values.size} values for {n} joints; give one gain [Nm/A] "
                             f"per joint, in the robot's joint order")
    if not valid_torque_constants(values, n):
        raise ParameterError(f"--torque-constants {values.tolist()}: every gain must be a finite number > 0 Nm/A")
    return values
