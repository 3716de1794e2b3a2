"""URDF surgery for the MuJoCo plant: strip what MuJoCo must not see, rewrite inertials, add a payload.

Why here and not in robots/: these edits exist only to make MuJoCo's physics equal pinocchio's on the
same URDF (no meshes, no implicit damping/friction from ``<dynamics>``, no static-body fusion) and
to build the "true robot" from perturbed inertials. Everything is plain XML text in, XML text out,
so the same string can be handed to pinocchio for parity tests.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from idyn_ros.errors import RobotDescriptionError

# Tags MuJoCo would interpret (meshes, <dynamics damping/friction>) or that only a ROS tool reads.
_STRIP_LINK_TAGS = ("visual", "collision")
_STRIP_JOINT_TAGS = ("dynamics", "safety_controller", "calibration", "mimic")
_STRIP_ROOT_TAGS = ("transmission", "gazebo", "ros2_control", "mujoco")

# MuJoCo compiler options that keep it equal to pinocchio on the same URDF:
# fusestatic=false keeps every URDF link as a body (frames survive, wrenches can target them);
# balanceinertia=false and inertiafromgeom=false keep the URDF inertials untouched;
# discardvisual: there are none left anyway; angle=radian is the URDF convention.
_COMPILER = {
    "fusestatic": "false",
    "balanceinertia": "false",
    "inertiafromgeom": "false",
    "discardvisual": "true",
    "angle": "radian",
}


@dataclass(frozen=True)
class LinkInertial:
    """Inertial of one link in its own frame: mass (kg), CoM (m), inertia about the CoM (kg m^2, 3x3)."""

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    def pseudo_inertia(self) -> np.ndarray:
        """4x4 pseudo-inertia J = [[Sigma + m c c^T, m c], [m c^T, m]] (Wensing et al. 2017).

        Sigma = tr(I)/2 * 1 - I is the mass-weighted second moment about the CoM. The link is physically
        consistent iff J is positive definite (or semi-definite for point/degenerate bodies).
        """
        sigma = 0.5 * np.trace(self.inertia) * np.eye(3) - self.inertia
        c = self.com
        J = np.zeros((4, 4))
        J[:3, :3] = sigma + self.mass * np.outer(c, c)
        J[:3, 3] = J[3, :3] = self.mass * c
        J[3, 3] = self.mass
        return J


def _parse(xml: str) -> ET.Element:
    try:
        return ET.fromstring(xml)
    except ET.ParseError as exc:
        raise RobotDescriptionError(f"URDF is not valid XML ({exc}); pass the rendered URDF text") from None


def _rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def _floats(text: str | None, default: str) -> np.ndarray:
    return np.array([float(v) for v in (text or default).split()])


def strip_for_mujoco(xml: str) -> str:
    """URDF text -> URDF text MuJoCo compiles into exactly the URDF's rigid-body dynamics.

    Removes visuals/collisions (MuJoCo cannot load package:// meshes, and contacts are off anyway),
    ``<dynamics>`` (MuJoCo would turn damping/friction into joint damping/frictionloss: the plant
    profile adds those explicitly), ROS-only tags, and sets the compiler options listed in _COMPILER.
    """
    root = _parse(xml)
    for tag in _STRIP_ROOT_TAGS:
        for element in root.findall(tag):
            root.remove(element)
    for link in root.findall("link"):
        for tag in _STRIP_LINK_TAGS:
            for element in link.findall(tag):
                link.remove(element)
    for joint in root.findall("joint"):
        for tag in _STRIP_JOINT_TAGS:
            for element in joint.findall(tag):
                joint.remove(element)
    mujoco = ET.SubElement(root, "mujoco")
    ET.SubElement(mujoco, "compiler", _COMPILER)
    return ET.tostring(root, encoding="unicode")


#: A link that carries no mass: a fixed link whose mass an identified body (``BodyInertial``) already includes.
EMPTY_LINK = LinkInertial(0.0, np.zeros(3), np.zeros((3, 3)))


def read_inertials(xml: str) -> dict[str, LinkInertial]:
    """All link inertials expressed in the link frame (the URDF ``<inertial><origin rpy>`` rotated out)."""
    out: dict[str, LinkInertial] = {}
    for link in _parse(xml).findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        origin = inertial.find("origin")
        xyz = _floats(origin.get("xyz") if origin is not None else None, "0 0 0")
        rpy = _floats(origin.get("rpy") if origin is not None else None, "0 0 0")
        mass_el = inertial.find("mass")
        mass = float(mass_el.get("value", "0")) if mass_el is not None else 0.0
        inertia_el = inertial.find("inertia")
        attrib = inertia_el.attrib if inertia_el is not None else {}
        v = {k: float(attrib.get(k, "0")) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        I = np.array(
            [
                [v["ixx"], v["ixy"], v["ixz"]],
                [v["ixy"], v["iyy"], v["iyz"]],
                [v["ixz"], v["iyz"], v["izz"]],
            ]
        )
        R = _rpy_matrix(rpy)
        out[link.get("name")] = LinkInertial(mass, xyz, R @ I @ R.T)
    return out


def write_inertials(xml: str, inertials: dict[str, LinkInertial]) -> str:
    """Replace the inertial of each named link (link frame, rpy = 0)."""
    root = _parse(xml)
    links = {link.get("name"): link for link in root.findall("link")}
    missing = sorted(set(inertials) - set(links))
    if missing:
        raise RobotDescriptionError(f"links {missing} are not in the URDF (links: {sorted(links)})")
    for name, value in inertials.items():
        link = links[name]
        for old in link.findall("inertial"):
            link.remove(old)
        link.insert(0, _inertial_element(value))
    return ET.tostring(root, encoding="unicode")


def _inertial_element(value: LinkInertial) -> ET.Element:
    inertial = ET.Element("inertial")
    ET.SubElement(inertial, "origin", {"xyz": " ".join(repr(float(v)) for v in value.com), "rpy": "0 0 0"})
    ET.SubElement(inertial, "mass", {"value": repr(float(value.mass))})
    I = value.inertia
    ET.SubElement(
        inertial,
        "inertia",
        {k: repr(float(v)) for k, v in zip(("ixx", "ixy", "ixz", "iyy", "iyz", "izz"),
                                          (I[0, 0], I[0, 1], I[0, 2], I[1, 1], I[1, 2], I[2, 2]), strict=True)},
    )
    return inertial


def add_fixed_link(xml: str, parent_link: str, name: str, value: LinkInertial) -> str:
    """Attach a new link with the given inertial rigidly (fixed joint, identity origin) to ``parent_link``."""
    root = _parse(xml)
    if parent_link not in {link.get("name") for link in root.findall("link")}:
        raise RobotDescriptionError(f"cannot attach {name!r}: link {parent_link!r} is not in the URDF")
    link = ET.SubElement(root, "link", {"name": name})
    link.append(_inertial_element(value))
    joint = ET.SubElement(root, "joint", {"name": f"{name}_joint", "type": "fixed"})
    ET.SubElement(joint, "parent", {"link": parent_link})
    ET.SubElement(joint, "child", {"link": name})
    ET.SubElement(joint, "origin", {"xyz": "0 0 0", "rpy": "0 0 0"})
    return ET.tostring(root, encoding="unicode")


def moving_joints(xml: str) -> list[str]:
    """Names of the non-fixed joints in document order."""
    return [j.get("name") for j in _parse(xml).findall("joint") if j.get("type") not in ("fixed", None)]


def rigid_bodies(xml: str) -> dict[str, list[str]]:
    """For every moving joint, the links it moves as one rigid body: its child + fixed descendants."""
    root = _parse(xml)
    children: dict[str, list[tuple[str, str]]] = {}
    for j in root.findall("joint"):
        children.setdefault(j.find("parent").get("link"), []).append((j.get("type"), j.find("child").get("link")))

    def collect(link: str) -> list[str]:
        out = [link]
        for jtype, child in children.get(link, []):
            if jtype == "fixed":
                out += collect(child)
        return out

    return {
        j.get("name"): collect(j.find("child").get("link"))
        for j in root.findall("joint")
        if j.get("type") not in ("fixed", None)
    }


def leaf_link(xml: str) -> str:
    """The last link of the chain through moving joints (fallback flange when the robot spec has none)."""
    joints = [j for j in _parse(xml).findall("joint") if j.get("type") not in ("fixed", None)]
    if not joints:
        raise RobotDescriptionError("URDF has no moving joint")
    return joints[-1].find("child").get("link")


def effort_limits(xml: str, joint_names: list[str] | tuple[str, ...]) -> np.ndarray:
    """URDF ``<limit effort>`` per joint (Nm); inf when absent."""
    root = _parse(xml)
    joints = {j.get("name"): j for j in root.findall("joint")}
    out = np.full(len(joint_names), np.inf)
    for i, name in enumerate(joint_names):
        limit = joints[name].find("limit") if name in joints else None
        if limit is not None and limit.get("effort") is not None and float(limit.get("effort")) > 0:
            out[i] = float(limit.get("effort"))
    return out


def urdf_joint_dynamics(xml: str, joint_names: list[str] | tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """URDF ``<dynamics damping friction>`` per joint -> (viscous Nm s/rad, dry friction Nm); 0 when absent."""
    joints = {j.get("name"): j for j in _parse(xml).findall("joint")}
    damping = np.zeros(len(joint_names))
    friction = np.zeros(len(joint_names))
    for i, name in enumerate(joint_names):
        dyn = joints[name].find("dynamics") if name in joints else None
        if dyn is not None:
            damping[i] = float(dyn.get("damping", "0"))
            friction[i] = float(dyn.get("friction", "0"))
    return damping, friction
