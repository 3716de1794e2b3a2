"""The three supported arms as data: joint order, frames, which xacro, and where the numbers came from.

Everything a layer above needs to know about *which* robot it talks to lives here, so that joint
order is resolved by name from one place. Dynamics numbers (masses, inertias, limits) live in the
xacro files under ``urdf/`` (one source of truth, also used by ROS launch files); tunables (gains,
rates, topics) live in ``config/<robot>.yaml``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np

from idyn_ros.errors import RobotDescriptionError, UnknownRobotError
from idyn_ros.paths import urdf_dir

ROBOT_NAMES: tuple[str, ...] = ("panda", "iiwa14", "ur5")
MODES: tuple[str, ...] = ("mock", "mujoco", "gazebo", "hardware")

SafeMode = Literal["damping", "zero"]


@dataclass(frozen=True)
class RobotSpec:
    """Static description of one arm.

    Names carry ``default_prefix``; :meth:`with_prefix` gives the same robot under another prefix
    (e.g. two arms in one cell).

    Attributes:
        name: preset name (one of ``ROBOT_NAMES``).
        joint_names: actuated joints in kinematic order, vendor ROS 2 driver convention.
        base_link: root link of the arm.
        flange_link: end-effector frame in which wrenches and payloads are expressed.
        xacro_path: the ``*.urdf.xacro`` file rendered by ``render_urdf``.
        effort_controller: name of the ros2_control effort forward controller
            (commands go to ``/<effort_controller>/commands``).
        safe_mode: what the safety layer commands on a fault: ``"damping"`` (tau = -D dq, the arm
            sags slowly under gravity but never whips) or ``"zero"`` (tau = 0).
        default_prefix: the vendor driver's default name prefix (``panda_``, ``lbr_``, ``""``).
        source: where kinematics, inertials and limits were taken from.
        hardware_adds_gravity: in ``hardware`` mode the vendor controller adds its own g(q) to the
            commanded effort (true for all three: libfranka torque control, FRI torque mode, UR
            direct_torque), so a feedforward must send tau - g(q) there; mock/mujoco/gazebo expect
            the full torque.
        recorded_prefixes: other prefixes the vendor's current ROS 2 stack gives the same joints
            (franka_ros2's franka_description names the Panda ``fer``): recordings that carry them are
            read as this robot's joints, and the import says so.
        hardware_torque_unsupported: why our torque commands cannot drive this arm through its vendor driver as
            rendered here ("" = they can): ``mode hardware`` is then refused unless ``observer_only``.
        hardware_state_rate_hz: the rate the vendor's driver publishes /joint_states at on hardware by default, when
            it is not the nodes' 1 kHz (0 = it is): the launch sets the nodes' ``rate_hz`` to it there (CB3 UR:
            125 Hz; lbr_fri_ros2_stack: 100 Hz, its FRI send period of 10 ms).
        position_controller: a ros2_control forward position controller the arm's torque mode needs beside the
            effort controller ("" = none): the controller sends it the measured joint positions with every torque
            (lbr_fri_ros2_stack: FRI torque mode takes a torque only with a joint position in the same cycle).
        hardware_torque_rate_hz: the controller manager's update rate for torque control through our own hardware
            launch, when not the controllers file's 1 kHz (0 = that): the launch renders it into the controllers
            file and sets the nodes' ``rate_hz`` to it (iiwa14: 500 Hz, the lbr stack's torque setup).
    """

    name: str
    joint_names: tuple[str, ...]
    base_link: str
    flange_link: str
    xacro_path: Path
    default_prefix: str
    source: str
    effort_controller: str = "effort_controller"
    safe_mode: SafeMode = "damping"
    hardware_adds_gravity: bool = True
    prefix: str = ""  # prefix the names above carry ("" = default_prefix)
    recorded_prefixes: tuple[str, ...] = ()
    hardware_torque_unsupported: str = ""
    hardware_state_rate_hz: float = 0.0
    position_controller: str = ""
    hardware_torque_rate_hz: float = 0.0

    def hardware_rate_hz(self, torque_control: bool) -> float:
        """The rate our nodes run at on this arm's hardware when it is not 1 kHz (0 = it is): with ``torque_control``
        through our own launch ``hardware_torque_rate_hz`` where set, else the driver's ``hardware_state_rate_hz``."""
        if torque_control and self.hardware_torque_rate_hz:
            return self.hardware_torque_rate_hz
        return self.hardware_state_rate_hz

    @property
    def dof(self) -> int:
        """Number of actuated joints."""
        return len(self.joint_names)

    @property
    def active_prefix(self) -> str:
        """The prefix the names of this spec carry."""
        return self.prefix or self.default_prefix

    def with_prefix(self, prefix: str | None) -> RobotSpec:
        """This robot with every joint/link name re-prefixed (None or "" -> vendor default)."""
        new = prefix or self.default_prefix
        old = self.active_prefix
        if new == old:
            return self

        def swap(name: str) -> str:
            return new + name[len(old) :]

        return replace(
            self,
            joint_names=tuple(swap(n) for n in self.joint_names),
            base_link=swap(self.base_link),
            flange_link=swap(self.flange_link),
            prefix="" if new == self.default_prefix else new,
        )


MAX_PAYLOAD_MASS = 100.0  # kg: 7x the largest rated payload of these arms (iiwa 14: 14 kg)
MAX_PAYLOAD_COM = 2.0  # m from the flange: twice the reach of these arms


@dataclass(frozen=True)
class Payload:
    """A rigid body fixed to the flange (tool, grasped object): the one payload type of the package.

    Used by the xacro render (``payload_*`` arguments), ``RobotModel.from_robot(payload=...)``, the
    simulated plant (profile payload and its ``~/set_payload`` service) and the experiments.

    Attributes:
        mass: kg (0 = no payload).
        com: centre of mass in the flange frame, m.
        inertia: (ixx, ixy, ixz, iyy, iyz, izz) about the CoM, axes parallel to the flange frame,
            kg m^2 (URDF and SetPayload.srv order); a symmetric 3x3 matrix is accepted and stored as
            those six. Zeros = point mass.
    """

    mass: float
    com: tuple[float, float, float] = (0.0, 0.0, 0.0)
    inertia: tuple[float, float, float, float, float, float] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        # Normalise to plain float tuples (hashable: render_urdf caches on it).
        object.__setattr__(self, "mass", float(self.mass))
        object.__setattr__(self, "com", tuple(float(c) for c in self.com))
        inertia = self.inertia
        rows = list(inertia)
        if len(rows) == 3 and all(hasattr(r, "__len__") and len(r) == 3 for r in rows):  # 3x3 matrix
            (ixx, ixy, ixz), (_, iyy, iyz), (_, _, izz) = rows
            inertia = (ixx, ixy, ixz, iyy, iyz, izz)
        object.__setattr__(self, "inertia", tuple(float(i) for i in inertia))
        if len(self.com) != 3 or len(self.inertia) != 6:
            raise RobotDescriptionError(
                f"Payload needs com=(x, y, z) and inertia=(ixx, ixy, ixz, iyy, iyz, izz); "
                f"got {len(self.com)} and {len(self.inertia)} values"
            )
        values = (self.mass, *self.com, *self.inertia)
        if not all(math.isfinite(v) for v in values):
            raise RobotDescriptionError(f"Payload has a non-finite value: {self}")
        if self.mass < 0.0:
            raise RobotDescriptionError(f"Payload mass must be >= 0 kg (0 = none), got {self.mass}")
        # Physical consistency <=> principal moments >= 0 and each <= the sum of the other two (the
        # pseudo-inertia is then PSD; Wensing et al. RA-L 2017); off-diagonal terms count via the eigenvalues.
        moments = np.linalg.eigvalsh(self.inertia_matrix())
        tol = 1e-12 + 1e-9 * float(np.abs(moments).max())
        if moments[0] < -tol or moments[2] > moments[0] + moments[1] + tol:
            ixx, _, _, iyy, _, izz = self.inertia
            raise RobotDescriptionError(
                f"Payload inertia (ixx, iyy, izz) = ({ixx}, {iyy}, {izz}) kg m^2 (principal moments "
                f"{', '.join(f'{m:.4g}' for m in moments)}) is not physically consistent: "
                "moments must be >= 0 and each <= the sum of the other two"
            )
        if moments[0] < 0.0:  # within the tolerance (a constrained solve's rounding): pinocchio refuses any negative
            # moment, and the controller process that was sent one ended; lifting the diagonal keeps the CoM and mass
            lift = tol - float(moments[0])
            ixx, ixy, ixz, iyy, iyz, izz = self.inertia
            object.__setattr__(self, "inertia", (ixx + lift, ixy, ixz, iyy + lift, iyz, izz + lift))

    def inertia_matrix(self) -> np.ndarray:
        """The symmetric 3x3 inertia about the CoM (kg m^2), flange-frame axes."""
        ixx, ixy, ixz, iyy, iyz, izz = self.inertia
        return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])

    def implausible(self) -> str | None:
        """None, or why no arm here carries this payload (a typo or garbage, not a tool: a 1e300 kg payload made the
        controller's hold torque NaN). Consistent payloads this large are legal for the models, so it is the
        services and the controller that refuse them, not ``Payload`` itself."""
        if self.mass > MAX_PAYLOAD_MASS:
            return f"payload mass {self.mass:g} kg is beyond {MAX_PAYLOAD_MASS:g} kg: no arm here carries that"
        distance = math.hypot(*self.com)
        if distance > MAX_PAYLOAD_COM:
            return f"payload CoM {distance:g} m from the flange is beyond {MAX_PAYLOAD_COM:g} m"
        largest = float(np.linalg.eigvalsh(self.inertia_matrix())[-1])
        if largest > self.mass * MAX_PAYLOAD_COM**2:  # a body of this mass within that radius has no more
            return (f"payload inertia {largest:g} kg m^2 is beyond mass x ({MAX_PAYLOAD_COM:g} m)^2 = "
                    f"{self.mass * MAX_PAYLOAD_COM**2:g} kg m^2")
        return None

    @classmethod
    def coerce(cls, payload: object) -> Payload:
        """A Payload from any object with ``mass``, ``com``, ``inertia`` (e.g. a SetPayload request's fields)."""
        if isinstance(payload, cls):
            return payload
        try:
            return cls(payload.mass, tuple(payload.com), tuple(payload.inertia))  # type: ignore[attr-defined]
        except AttributeError:
            raise RobotDescriptionError(
                f"payload must have mass, com and inertia attributes (use idyn_ros.robots.Payload); "
                f"got {type(payload).__name__}"
            ) from None

    def xacro_args(self) -> dict[str, str]:
        """The ``payload_*`` xacro arguments for this payload."""
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        args = {"payload_mass": repr(self.mass)}
        args.update({f"payload_com_{axis}": repr(v) for axis, v in zip("xyz", self.com, strict=True)})
        args.update({f"payload_{k}": repr(v) for k, v in zip(keys, self.inertia, strict=True)})
        return args


def _panda() -> RobotSpec:
    return RobotSpec(
        name="panda",
        joint_names=tuple(f"panda_joint{i}" for i in range(1, 8)),
        base_link="panda_link0",
        flange_link="panda_link8",
        xacro_path=urdf_dir() / "panda.urdf.xacro",
        default_prefix="panda_",
        recorded_prefixes=("fer_",),  # franka_ros2 (franka_description >= 0.4): fer_joint1..7 on a Panda
        hardware_adds_gravity=True,  # libfranka: commanded torques exclude gravity, the robot adds it
        source=(
            "example-robot-data panda_description/urdf/panda.urdf (from franka_ros "
            "franka_description panda.urdf.xacro); Franka Hand welded to panda_link8, fingers at 0"
        ),
    )


def _iiwa14() -> RobotSpec:
    return RobotSpec(
        name="iiwa14",
        joint_names=tuple(f"lbr_A{i}" for i in range(1, 8)),
        base_link="lbr_link_0",
        flange_link="lbr_link_ee",
        xacro_path=urdf_dir() / "iiwa14.urdf.xacro",
        default_prefix="lbr_",
        hardware_adds_gravity=True,  # FRI torque mode: torque is superposed on KUKA's gravity compensation
        # lbr_fri_ros2_stack's controller manager runs at 100 Hz (lbr_description/ros2_control/lbr_controllers.yaml
        # update_rate), matching the FRI send period of 10 ms its lbr_bringup docs select on the smartPAD: the rate
        # beside the stack's own launch (observer_only)
        hardware_state_rate_hz=100.0,
        # FRI torque mode uses a torque only with a joint position in the same cycle (lbr_fri_ros2
        # interfaces/torque_command.cpp: a NaN position keeps the last command); the stack's torque demos send the
        # measured position, with a FRI send period of 2 ms and update_rate 500 (lbr_demos docs)
        position_controller="position_controller",
        hardware_torque_rate_hz=500.0,
        source=(
            "shared/reference/iiwa14_params.yaml = lbr-stack/lbr_fri_ros2_stack@218d723 "
            "lbr_description iiwa14 (CAD inertials normalised to 29.9 kg, limits from "
            "joint_limits.yaml); effort limits KUKA spec 320/320/176/176/110/40/40 Nm"
        ),
    )


def _ur5() -> RobotSpec:
    return RobotSpec(
        name="ur5",
        joint_names=(
            "shoulder_pan_joint",
            "shoulder_lift_joint",
            "elbow_joint",
            "wrist_1_joint",
            "wrist_2_joint",
            "wrist_3_joint",
        ),
        base_link="base_link",
        flange_link="tool0",
        xacro_path=urdf_dir() / "ur5.urdf.xacro",
        default_prefix="",
        # UR script manual, direct_torque: "always compensates for gravity" (+ scaled friction
        # compensation); a CB3 UR5 has no torque mode at all, this holds for e-Series
        hardware_adds_gravity=True,
        hardware_torque_unsupported=(
            "this is the UR5 (CB3) model, and ur_robot_driver refuses the effort interface below PolyScope 5.23, "
            "which runs on e-Series arms only (a UR5e has other kinematics and inertias: a robot of its own, "
            "not this preset)"),
        hardware_state_rate_hz=125.0,  # a CB3 controller's real-time interface runs at 125 Hz (e-Series: 500 Hz)
        source=(
            "example-robot-data ur_description/urdf/ur5_robot.urdf (ROS-Industrial ur_description; "
            "wrist inertias 40-100x too large there, kept verbatim)"
        ),
    )


_BUILDERS = {"panda": _panda, "iiwa14": _iiwa14, "ur5": _ur5}


def get_robot(name: str | RobotSpec) -> RobotSpec:
    """The preset called ``name`` (case-insensitive); a RobotSpec is returned unchanged.

    Raises:
        UnknownRobotError: ``name`` is not one of ``ROBOT_NAMES``.
    """
    if isinstance(name, RobotSpec):
        return name
    key = str(name).strip().lower()
    if key not in _BUILDERS:
        raise UnknownRobotError(
            f"unknown robot '{name}'; known robots: {', '.join(ROBOT_NAMES)} "
            "(or pass a URDF path where a URDF is accepted)"
        )
    return _BUILDERS[key]()
