"""`RobotModel`: the one pinocchio-backed rigid-body model every layer uses.

Why one class: identification, training, export, runtime, sim and tests must agree on joint order,
limits and inertial parameters, so they all build their model from the same URDF through here.
Joint order is the URDF tree order (pinocchio's); anything coming from a message or a dataset is
mapped onto it by name with :meth:`RobotModel.joint_index`, never by position.

Only revolute, continuous and prismatic joints are degrees of freedom; fixed joints are merged into
their parent body by the pinocchio URDF parser (their frames stay available as frames). Continuous
joints are parsed as revolute (one angle, unbounded limits) so that ``nq == nv`` always holds.

Thread safety: a RobotModel keeps one ``pinocchio.Data`` (and its output buffers) per thread, made on first use and
reused by every method, so one model may be shared between threads (the hot loop's and an executor's).

All arrays are numpy float64 in SI units: rad, rad/s, rad/s², m, Nm, kg, kg·m².
"""

from __future__ import annotations

import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin

from idyn_ros.errors import DatasetError, ParameterError, RobotDescriptionError

__all__ = ["INERTIAL_PARAMETER_NAMES", "REFERENCE_FRAMES", "RobotModel"]

# pinocchio `Inertia.toDynamicParameters` order; inertia about the joint frame origin.
INERTIAL_PARAMETER_NAMES: tuple[str, ...] = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")

REFERENCE_FRAMES: dict[str, Any] = {
    "world": pin.ReferenceFrame.WORLD,
    "local": pin.ReferenceFrame.LOCAL,
    "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED,
}

# Armature (reflected rotor inertia) in a URDF, which has no tag for it. Decision: Drake's URDF
# extension (drake.mit.edu/doxygen_cxx/group__multibody__parsing.html), the one existing convention:
#   <transmission name="..."><joint name="J"/><actuator name="...">
#     <drake:rotor_inertia value="I_rotor"/><drake:gear_ratio value="G"/></actuator></transmission>
# with reflected inertia G^2 I_rotor (we write G = 1, I_rotor = the reflected value). Other URDF parsers
# (urdfdom, pinocchio) ignore the namespaced children, so such a file still loads everywhere;
# ``RobotModel.from_urdf`` reads it into pinocchio's ``model.armature`` (added to M(q) and RNEA).
DRAKE_NS = "http://drake.mit.edu"


def urdf_armature(xml: str) -> dict[str, float]:
    """Reflected rotor inertia per joint name (kg m^2) from Drake ``<transmission>`` tags (see above)."""
    if "rotor_inertia" not in xml:
        return {}
    root = ET.fromstring(xml)
    out: dict[str, float] = {}
    for tr in root.iter("transmission"):
        joint = tr.find("joint")
        if joint is None:
            continue
        for act in tr.iter("actuator"):
            ri = act.find(f"{{{DRAKE_NS}}}rotor_inertia")
            if ri is None:
                continue
            gr = act.find(f"{{{DRAKE_NS}}}gear_ratio")
            g = float(gr.get("value", "1")) if gr is not None else 1.0
            out[joint.get("name")] = float(ri.get("value")) * g * g
    return out


_ONE_DOF_JOINTS = re.compile(r"^JointModel(R[XYZ]|P[XYZ]|RevoluteUnaligned|PrismaticUnaligned)$")


def _read_urdf(path_or_xml: str | Path) -> str:
    """URDF text from a file path or an XML string."""
    text = str(path_or_xml)
    if text.lstrip().startswith("<"):
        return text
    path = Path(text).expanduser()
    if not path.is_file():
        raise RobotDescriptionError(
            f"URDF file not found: {path} (pass a URDF path, URDF XML or a robot name)"
        )
    return path.read_text()


def _continuous_to_revolute(xml: str) -> tuple[str, list[str]]:
    """Rewrite continuous joints as revolute so pinocchio gives them one coordinate (not cos/sin).

    Returns the new XML and the names of the rewritten joints (their limits are set to ±inf later).
    """
    try:  # parsed here first: urdfdom prints its own C++ lines to stderr before pinocchio's error
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise RobotDescriptionError(f"URDF is not valid XML: {exc}") from None
    if root.tag != "robot":
        raise RobotDescriptionError(f"not a URDF: the root element is <{root.tag}>, not <robot>")
    if "continuous" not in xml:
        return xml, []
    names = []
    for joint in root.iter("joint"):
        if joint.get("type") == "continuous":
            joint.set("type", "revolute")
            names.append(joint.get("name", "?"))
            limit = joint.find("limit")
            if limit is None:
                limit = ET.SubElement(joint, "limit")
                limit.set("effort", "0")
                limit.set("velocity", "0")
            limit.set("lower", "-3.14159265358979")
            limit.set("upper", "3.14159265358979")
    return ET.tostring(root, encoding="unicode"), names


def _payload_inertia(payload: Any) -> pin.Inertia:
    """pinocchio Inertia (at the flange origin) from a ``Payload(mass, com, inertia)``.

    ``inertia`` is about the payload CoM, either a 3x3 matrix or the URDF six
    ``(ixx, ixy, ixz, iyy, iyz, izz)`` in kg·m²; ``com`` in m in the flange frame.
    """
    mass = float(payload.mass)
    com = np.asarray(getattr(payload, "com", np.zeros(3)), dtype=np.float64).reshape(3)
    inertia = np.asarray(getattr(payload, "inertia", np.zeros((3, 3))), dtype=np.float64)
    if inertia.size == 6:
        ixx, ixy, ixz, iyy, iyz, izz = inertia.ravel()
        inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    inertia = inertia.reshape(3, 3)
    if mass < 0:
        raise RobotDescriptionError(f"payload mass must be >= 0 kg, got {mass}")
    try:
        return pin.Inertia(mass, com, inertia)
    except RuntimeError as exc:  # pinocchio's refusal would end the process serving a ~/set_payload call
        raise RobotDescriptionError(f"payload inertia {inertia.tolist()} kg m^2 refused: {exc}") from None


def _preset_flange(name: str, pm: pin.Model) -> str | None:
    """The preset's flange frame when ``name`` is a known robot and the URDF has that frame, else None."""
    try:
        from idyn_ros import robots

        spec = robots.get_robot(name)
    except (ImportError, KeyError):  # UnknownRobotError is a KeyError: not a preset
        return None
    for frame in (spec.flange_link, *(spec.with_prefix(p).flange_link for p in _joint_prefixes(spec, pm))):
        if pm.existFrame(frame):
            return frame
    return None


def _joint_prefixes(spec: Any, pm: pin.Model) -> list[str]:
    """Prefixes p such that the URDF's first joint is p + (spec's first joint without its prefix)."""
    bare = spec.joint_names[0][len(spec.active_prefix) :]
    first = pm.names[1] if pm.njoints > 1 else ""
    return [first[: -len(bare)]] if bare and first.endswith(bare) and first != spec.joint_names[0] else []


def inertial_parameters(pin_model: pin.Model) -> np.ndarray:
    """(n, 10) per moving body, pinocchio order ``[m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``."""
    return np.array([pin_model.inertias[j].toDynamicParameters() for j in range(1, pin_model.njoints)])


def with_inertial_parameters(pin_model: pin.Model, pi: Any) -> pin.Model:
    """Copy of ``pin_model`` whose bodies carry ``pi`` ((n, 10) or (10 n,), pinocchio order)."""
    pi = np.asarray(pi, dtype=np.float64).reshape(pin_model.njoints - 1, 10)
    model = pin_model.copy()
    for j in range(1, model.njoints):
        model.inertias[j] = pin.Inertia.FromDynamicParameters(pi[j - 1])
    return model


def regressor_batch(pin_model: pin.Model, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray,
                    data: pin.Data | None = None) -> np.ndarray:
    """Joint-torque regressor for N samples: (N, n) x3 -> (N, n, 10 n), float64 (``rnea == Y @ pi.ravel()``)."""
    data = data if data is not None else pin_model.createData()
    out = np.empty((q.shape[0], q.shape[1], 10 * (pin_model.njoints - 1)))
    for i in range(q.shape[0]):
        out[i] = pin.computeJointTorqueRegressor(pin_model, data, q[i], dq[i], ddq[i])
    return out


class RobotModel:
    """Rigid-body model of a fixed-base arm, backed by pinocchio.

    Attributes:
        name: robot name (preset name or URDF robot name).
        joint_names: DoF joint names in model order.
        n: number of DoF.
        pin_model: the pinocchio Model (fixed joints merged).
        urdf_xml: the URDF the model was built from.
        lower, upper: position limits (n,) in rad or m (±inf for continuous joints).
        velocity_limit: (n,) rad/s or m/s.  effort_limit: (n,) Nm or N.
        flange_frame: name of the end-effector frame used for wrenches and payloads.
    """

    def __init__(
        self,
        pin_model: pin.Model,
        urdf_xml: str,
        name: str | None = None,
        flange_frame: str | None = None,
        unbounded_joints: Sequence[str] = (),
    ) -> None:
        bad = [
            (pin_model.names[j], pin_model.joints[j].shortname())
            for j in range(1, pin_model.njoints)
            if not _ONE_DOF_JOINTS.match(pin_model.joints[j].shortname())
        ]
        if bad:
            raise RobotDescriptionError(
                f"joints {bad} are not 1-DoF revolute/prismatic joints; only revolute, continuous, "
                "prismatic and fixed joints are supported (fixed-base arms)"
            )
        if pin_model.nv == 0:
            raise RobotDescriptionError("the URDF has no revolute/prismatic joint: nothing to control")
        self.pin_model: pin.Model = pin_model
        self._local = threading.local()  # one pinocchio Data (and output buffers) per thread
        self.urdf_xml = urdf_xml
        self.name = name or pin_model.name
        self.joint_names: tuple[str, ...] = tuple(pin_model.names[1:])
        self.n: int = pin_model.nv
        self.lower = np.array(pin_model.lowerPositionLimit, dtype=np.float64)
        self.upper = np.array(pin_model.upperPositionLimit, dtype=np.float64)
        for jn in unbounded_joints:
            if jn in self.joint_names:
                k = self.joint_names.index(jn)
                self.lower[k], self.upper[k] = -np.inf, np.inf
        self.velocity_limit = np.array(pin_model.velocityLimit, dtype=np.float64)
        self.effort_limit = np.array(pin_model.effortLimit, dtype=np.float64)
        self._unbounded = tuple(unbounded_joints)
        self.flange_frame: str = flange_frame or self._default_flange()
        if not pin_model.existFrame(self.flange_frame):
            raise RobotDescriptionError(
                f"flange frame '{self.flange_frame}' is not in the URDF; frames: {self.frame_names()}"
            )
        self._flange_id = pin_model.getFrameId(self.flange_frame)
        self._strict_lower = np.tril(np.ones((self.n, self.n), dtype=bool), -1)

    @property
    def data(self) -> pin.Data:
        """This thread's pinocchio Data (pinocchio habit: one Data per thread, never shared)."""
        try:
            return self._local.data
        except AttributeError:
            self._local.data = self.pin_model.createData()
            return self._local.data

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_robot(cls, name_or_urdf_path: str | Path, prefix: str = "", payload: Any = None) -> RobotModel:
        """Model of a robot preset (``panda``, ``iiwa14``, ``ur5``) or of a URDF file.

        Args:
            name_or_urdf_path: preset name (see ``idyn_ros.robots.ROBOT_NAMES``) or a ``.urdf`` path.
            prefix: joint/link name prefix replacing the vendor default (presets only, "" = default).
            payload: ``Payload(mass [kg], com [m, flange frame], inertia [kg·m², about CoM])``
                rigidly attached to the flange, or None.
        """
        text = str(name_or_urdf_path)
        if text.lstrip().startswith("<") or text.endswith((".urdf", ".xml")) or Path(text).is_file():
            model = cls.from_urdf(text)
            if payload is not None:
                model = model.with_payload(payload)
            return model
        from idyn_ros import robots  # lazy: robots/ may be absent in stripped installs

        spec = robots.get_robot(text).with_prefix(prefix)  # UnknownRobotError lists the known names
        xml = robots.render_urdf(text, mode="mock", prefix=prefix, payload=payload)
        return cls.from_urdf(xml, name=spec.name, joints=spec.joint_names, flange_frame=spec.flange_link)

    @classmethod
    def from_urdf(
        cls,
        path_or_xml: str | Path,
        name: str | None = None,
        *,
        joints: Sequence[str] | None = None,
        flange_frame: str | None = None,
        check_inertia: bool = True,
    ) -> RobotModel:
        """Model from a URDF file path or URDF XML string.

        Args:
            path_or_xml: URDF path or XML text.
            name: robot name (default: the URDF ``<robot name>``).
            joints: keep only these joints as DoF (in this order must match the tree order); all
                other movable joints are locked at 0 (e.g. the Panda gripper fingers).
            flange_frame: end-effector frame (default: the preset's flange if ``name`` is a preset
                robot, else the last body frame on the last joint).
            check_inertia: raise ``RobotDescriptionError`` naming the body if a link's inertial
                parameters are not physically consistent (massless virtual links are allowed).
        """
        xml = _read_urdf(path_or_xml)
        xml, unbounded = _continuous_to_revolute(xml)
        try:
            pm = pin.buildModelFromXML(xml)
        except (RuntimeError, ValueError) as exc:
            raise RobotDescriptionError(f"cannot parse URDF: {exc}") from None
        if joints is not None:
            joints = tuple(joints)
            missing = [j for j in joints if not pm.existJointName(j)]
            if missing:
                raise RobotDescriptionError(
                    f"joints {missing} are not in the URDF; its movable joints are {list(pm.names[1:])}"
                )
            lock = [pm.getJointId(jn) for jn in pm.names[1:] if jn not in joints]
            if lock:
                pm = pin.buildReducedModel(pm, lock, pin.neutral(pm))
            if tuple(pm.names[1:]) != joints:
                raise RobotDescriptionError(
                    f"joint order {list(joints)} differs from the URDF tree order {list(pm.names[1:])}; "
                    "list the joints from base to tip"
                )
        if flange_frame is None and name is not None:
            flange_frame = _preset_flange(name, pm)
        for jname, value in urdf_armature(xml).items():
            if pm.existJointName(jname) and pm.joints[pm.getJointId(jname)].nv == 1:
                pm.armature[pm.joints[pm.getJointId(jname)].idx_v] = value
        model = cls(pm, xml, name=name, flange_frame=flange_frame, unbounded_joints=unbounded)
        if check_inertia:
            from idyn_ros.dynamics.inertia import assert_physically_consistent

            assert_physically_consistent(model.inertial_parameters(), model.body_names(), allow_massless=True)
        return model

    def copy(self) -> RobotModel:
        """Independent copy (its own pinocchio model and Data)."""
        return RobotModel(self.pin_model.copy(), self.urdf_xml, self.name, self.flange_frame, self._unbounded)

    def with_payload(self, payload: Any, frame: str | None = None) -> RobotModel:
        """New model with ``payload`` rigidly attached at ``frame`` (default: the flange)."""
        frame = frame or self.flange_frame
        fid = self._frame_id(frame)
        f = self.pin_model.frames[fid]
        pm = self.pin_model.copy()
        pm.appendBodyToJoint(f.parentJoint, _payload_inertia(payload), f.placement)
        return RobotModel(pm, self.urdf_xml, self.name, self.flange_frame, self._unbounded)

    # ------------------------------------------------------------------ names and indices
    def _default_flange(self) -> str:
        last = self.pin_model.njoints - 1
        bodies = [
            f.name for f in self.pin_model.frames if f.parentJoint == last and f.type == pin.FrameType.BODY
        ]
        return bodies[-1] if bodies else self.pin_model.frames[-1].name

    def frame_names(self) -> list[str]:
        """All frame names (links, joints, fixed frames)."""
        return [f.name for f in self.pin_model.frames]

    def body_names(self) -> list[str]:
        """Name of the moving link after each joint (n,), in model order."""
        out = []
        for j in range(1, self.pin_model.njoints):
            bodies = [
                f.name for f in self.pin_model.frames if f.parentJoint == j and f.type == pin.FrameType.BODY
            ]
            out.append(bodies[0] if bodies else self.pin_model.names[j])
        return out

    def _frame_id(self, frame: str | None) -> int:
        if frame is None:
            return self._flange_id
        if not self.pin_model.existFrame(frame):
            raise RobotDescriptionError(f"frame '{frame}' is not in the model; frames: {self.frame_names()}")
        return self.pin_model.getFrameId(frame)

    def joint_index(self, names: Sequence[str]) -> np.ndarray:
        """Positions of ``names`` in model order: ``q_model[model.joint_index(msg.name)] = msg.position``.

        Raises:
            DatasetError: naming the joints that the model does not have.
        """
        lookup = {jn: k for k, jn in enumerate(self.joint_names)}
        missing = [jn for jn in names if jn not in lookup]
        if missing:
            raise DatasetError(
                f"joints {missing} are not joints of robot '{self.name}' "
                f"(its joints: {list(self.joint_names)}); "
                "check the joint-name prefix or pass a joint map"
            )
        return np.array([lookup[jn] for jn in names], dtype=np.intp)

    def model_order(self, names: Sequence[str]) -> np.ndarray:
        """Indices ``idx`` such that ``x_model = x_msg[idx]`` for a message ordered as ``names``.

        Raises:
            DatasetError: if a model joint is absent from ``names``.
        """
        lookup = {jn: k for k, jn in enumerate(names)}
        missing = [jn for jn in self.joint_names if jn not in lookup]
        if missing:
            raise DatasetError(
                f"message/dataset lacks joints {missing} of robot '{self.name}' (has {list(names)})"
            )
        return np.array([lookup[jn] for jn in self.joint_names], dtype=np.intp)

    # ------------------------------------------------------------------ input checks
    def _vec(self, x: Any, what: str) -> np.ndarray:
        a = np.asarray(x, dtype=np.float64)
        if a.ndim == 0 or a.shape[-1] != self.n:
            raise DatasetError(
                f"{what} must have shape (n,) or (N, n) with n={self.n} for '{self.name}', got {a.shape}"
            )
        return a

    def _batched(self, fn: Any, *arrays: np.ndarray) -> np.ndarray:
        """Apply a per-sample pinocchio function over (N, n) inputs (or once for (n,))."""
        if arrays[0].ndim == 1:
            return fn(*arrays)
        first = fn(*(a[0] for a in arrays))
        out = np.empty((arrays[0].shape[0], *np.shape(first)))
        out[0] = first
        for k in range(1, arrays[0].shape[0]):
            out[k] = fn(*(a[k] for a in arrays))
        return out

    # ------------------------------------------------------------------ dynamics
    def rnea(self, q: Any, dq: Any, ddq: Any) -> np.ndarray:
        """Inverse dynamics tau = M(q) ddq + C(q,dq) dq + g(q) in Nm, (n,) or (N, n) (RNEA)."""
        q, dq, ddq = self._vec(q, "q"), self._vec(dq, "dq"), self._vec(ddq, "ddq")
        m, d = self.pin_model, self.data
        if q.ndim == 1:  # hot path: no closure
            return pin.rnea(m, d, q, dq, ddq)
        return self._batched(lambda a, b, c: pin.rnea(m, d, a, b, c), q, dq, ddq)

    def mass_matrix(self, q: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Joint-space inertia M(q) (n, n) or (N, n, n), symmetrised (CRBA fills the upper triangle).

        ``out`` (n, n): written in place and returned (the 1 kHz path; pinocchio's binding still returns its own copy
        of M, one (n, n) array per call).
        """
        q = self._vec(q, "q")
        m, d = self.pin_model, self.data
        if out is not None:
            M = pin.crba(m, d, q)
            np.copyto(out, M)
            np.copyto(out, M.T, where=self._strict_lower)
            return out

        def one(a: np.ndarray) -> np.ndarray:
            M = pin.crba(m, d, a)
            return np.triu(M) + np.triu(M, 1).T

        return self._batched(one, q)

    def gravity(self, q: Any) -> np.ndarray:
        """Gravity torque g(q) in Nm."""
        q = self._vec(q, "q")
        m, d = self.pin_model, self.data
        if q.ndim == 1:  # hot path: no closure
            return pin.computeGeneralizedGravity(m, d, q)
        return self._batched(lambda a: pin.computeGeneralizedGravity(m, d, a), q)

    def nonlinear_effects(self, q: Any, dq: Any) -> np.ndarray:
        """C(q,dq) dq + g(q) in Nm (= rnea with ddq = 0)."""
        q, dq = self._vec(q, "q"), self._vec(dq, "dq")
        m, d = self.pin_model, self.data
        return self._batched(lambda a, b: pin.nonLinearEffects(m, d, a, b), q, dq)

    def coriolis(self, q: Any, dq: Any) -> np.ndarray:
        """Coriolis/centrifugal torque C(q,dq) dq in Nm."""
        return self.nonlinear_effects(q, dq) - self.gravity(q)

    def coriolis_matrix(self, q: Any, dq: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Coriolis matrix C(q,dq) (n, n) with dM/dt - 2C skew-symmetric (pinocchio's choice).

        ``out`` (n, n): written in place and returned (the 1 kHz path; pinocchio's binding still returns its own copy,
        one (n, n) array per call).
        """
        q, dq = self._vec(q, "q"), self._vec(dq, "dq")
        m, d = self.pin_model, self.data
        if out is not None:
            np.copyto(out, pin.computeCoriolisMatrix(m, d, q, dq))
            return out
        return self._batched(lambda a, b: pin.computeCoriolisMatrix(m, d, a, b).copy(), q, dq)

    def frame_jacobian(self, q: Any, frame: str | None = None, reference: str = "world") -> np.ndarray:
        """Frame Jacobian (6, n) [linear; angular] mapping dq to the frame's twist.

        Args:
            q: joint positions (n,) (or (N, n) -> (N, 6, n)).
            frame: frame name (default: the flange).
            reference: ``world`` (spatial twist at the world origin), ``local`` (body twist in the
                frame) or ``local_world_aligned`` (frame-origin velocity in world axes).
        """
        q = self._vec(q, "q")
        if reference not in REFERENCE_FRAMES:
            raise RobotDescriptionError(
                f"reference must be one of {list(REFERENCE_FRAMES)}, got '{reference}'"
            )
        fid, rf = self._frame_id(frame), REFERENCE_FRAMES[reference]
        m, d = self.pin_model, self.data

        def one(a: np.ndarray) -> np.ndarray:
            pin.computeJointJacobians(m, d, a)
            pin.updateFramePlacements(m, d)
            return pin.getFrameJacobian(m, d, fid, rf)

        return self._batched(one, q)

    def flange_jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(J, R) at one state: the 6xn flange Jacobian [v; w] of the flange origin in base-aligned axes
        (LOCAL_WORLD_ALIGNED: J^T maps a wrench [f; m] at the flange origin in base axes to joint torques)
        and the flange rotation (3, 3). Both are views into this thread's Data: copy to keep them."""
        m, d = self.pin_model, self.data
        J = pin.computeFrameJacobian(m, d, q, self._flange_id, pin.LOCAL_WORLD_ALIGNED)
        return J, d.oMf[self._flange_id].rotation

    def frame_placement(self, q: Any, frame: str | None = None) -> np.ndarray:
        """World pose of ``frame`` (default flange) as a 4x4 homogeneous matrix (or (N, 4, 4))."""
        q = self._vec(q, "q")
        fid = self._frame_id(frame)
        m, d = self.pin_model, self.data

        def one(a: np.ndarray) -> np.ndarray:
            pin.forwardKinematics(m, d, a)
            return pin.updateFramePlacement(m, d, fid).homogeneous

        return self._batched(one, q)

    # ------------------------------------------------------------------ parameters and regressors
    def inertial_parameters(self) -> np.ndarray:
        """(n, 10) per moving link, pinocchio order ``[m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``.

        ``m c`` and the inertia are expressed in the joint frame, the inertia about its origin.
        """
        return inertial_parameters(self.pin_model)

    def with_inertial_parameters(self, pi: Any) -> RobotModel:
        """New model with per-link parameters ``pi`` ((n, 10) or (10 n,), pinocchio order)."""
        pm = with_inertial_parameters(self.pin_model, pi)
        return RobotModel(pm, self.urdf_xml, self.name, self.flange_frame, self._unbounded)

    @property
    def armature(self) -> np.ndarray:
        """(n,) reflected rotor inertia per joint (kg m^2); pinocchio adds it to M(q) and RNEA."""
        return np.array(self.pin_model.armature, dtype=np.float64)

    def with_armature(self, armature: Any) -> RobotModel:
        """New model with armature ``armature`` (n,) kg m^2 (tau_j += Ia_j ddq_j, M_jj += Ia_j)."""
        a = np.asarray(armature, dtype=np.float64).reshape(self.n)
        if np.any(~np.isfinite(a)) or np.any(a < 0):
            raise ParameterError(f"armature must be finite and >= 0 (kg m^2), got {a}")
        pm = self.pin_model.copy()
        pm.armature = a
        return RobotModel(pm, self.urdf_xml, self.name, self.flange_frame, self._unbounded)

    def with_identified(self, inertial_parameters: Any = None, armature: Any = None) -> RobotModel:
        """This model with a trained artifact's identified inertials (n, 10) and armature (n,) where given.

        Every user of M(q) (the controller's acceleration-space feedback, the momentum observer's p = M dq)
        must use the feedforward's inertia: a URDF M without the reflected rotor inertia (Panda wrist M_jj
        ~0.01-0.05 vs Ia ~0.2 kg m^2) scales the feedback to 1/5-1/20 of the requested stiffness.
        """
        model = self if inertial_parameters is None else self.with_inertial_parameters(inertial_parameters)
        return model if armature is None else model.with_armature(armature)

    def parameter_names(self) -> list[str]:
        """Names of the 10 n standard parameters, e.g. ``Izz_3`` (1-based link index)."""
        return [f"{p}_{j + 1}" for j in range(self.n) for p in INERTIAL_PARAMETER_NAMES]

    def regressor(self, q: Any, dq: Any, ddq: Any) -> np.ndarray:
        """Joint torque regressor Y (n, 10 n), ``rnea(q,dq,ddq) == Y @ pi.ravel()``; (N, n, 10 n) batched."""
        q, dq, ddq = self._vec(q, "q"), self._vec(dq, "dq"), self._vec(ddq, "ddq")
        if q.ndim == 1:
            return pin.computeJointTorqueRegressor(self.pin_model, self.data, q, dq, ddq).copy()
        return regressor_batch(self.pin_model, q, dq, ddq, self.data)

    def friction_regressor(self, dq: Any, kinds: Sequence[str] | str | None = None) -> np.ndarray:
        """Friction regressor (n, n B) (or (N, n, n B)), coefficients ``c (n, B)`` joint-major.

        ``tau_f = F @ c.ravel()``; basis per kind as in :mod:`idyn_ros.dynamics.friction` (default
        ``friction.DEFAULT_KINDS``), e.g. ``coulomb`` = clamp(dq / 0.02, -1, 1), Coulomb with a linear zone (Reuss et
        al. 2022 Eq. 13; the zone's width is the friction module's, the one the exported models use), ``viscous`` = dq,
        ``offset`` = 1.

        Args:
            dq: joint velocities (n,) or (N, n) in rad/s.
            kinds: basis kinds (names or a comma-separated string).
        """
        from idyn_ros.dynamics import friction

        kinds = friction.parse_kinds(friction.DEFAULT_KINDS if kinds is None else kinds)
        return friction.friction_regressor(self._vec(dq, "dq"), kinds)

    def stacked_regressor(
        self,
        q: Any,
        dq: Any,
        ddq: Any,
        friction_kinds: Sequence[str] | str | None = None,
    ) -> np.ndarray:
        """Regressor for N samples stacked sample-major: (N n, 10 n [+ n B]).

        Row ``k n + i`` is joint ``i`` of sample ``k`` (so it matches ``tau.reshape(-1)`` of an (N, n) array).
        Friction columns, if any, follow the 10 n inertial ones.
        """
        q2 = np.atleast_2d(self._vec(q, "q"))
        dq2, ddq2 = np.atleast_2d(self._vec(dq, "dq")), np.atleast_2d(self._vec(ddq, "ddq"))
        Y = self.regressor(q2, dq2, ddq2)
        if friction_kinds:
            Y = np.concatenate([Y, self.friction_regressor(dq2, friction_kinds)], axis=-1)
        return Y.reshape(-1, Y.shape[-1])

    def base_parameters(
        self, n_samples: int = 200, seed: int = 0, friction_kinds: Sequence[str] | str | None = None
    ) -> Any:
        """Base parameters (:class:`idyn_ros.dynamics.base_parameters.BaseParameters`) of this model."""
        from idyn_ros.dynamics.base_parameters import base_parameters

        return base_parameters(self, n_samples=n_samples, seed=seed, friction_kinds=friction_kinds)

    def random_states(
        self,
        n_samples: int,
        rng: np.random.Generator | int | None = 0,
        dq_scale: float = 1.0,
        ddq_scale: float = 3.0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Random (q, dq, ddq) (N, n): q uniform within limits (±pi where unbounded), dq, ddq normal.

        ``dq_scale`` rad/s and ``ddq_scale`` rad/s² are the standard deviations.
        """
        rng = np.random.default_rng(rng)
        lo = np.where(np.isfinite(self.lower), self.lower, -np.pi)
        hi = np.where(np.isfinite(self.upper), self.upper, np.pi)
        q = rng.uniform(lo, hi, size=(n_samples, self.n))
        dq = rng.normal(0.0, dq_scale, size=(n_samples, self.n))
        ddq = rng.normal(0.0, ddq_scale, size=(n_samples, self.n))
        return q, dq, ddq

    def __repr__(self) -> str:
        joints = list(self.joint_names)
        return f"RobotModel(name={self.name!r}, n={self.n}, joints={joints}, flange={self.flange_frame!r})"
