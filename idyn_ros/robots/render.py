"""xacro -> URDF for the three arms, and the small clean-up MuJoCo needs to load that URDF.

One robot model is built from one URDF everywhere (identification, training, runtime, sim, tests);
this module is where that URDF is produced. Rendering runs the real ``xacro`` package and is cached
(same arguments -> same string: 50-200 ms for the first call, ~0.1 ms after).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from functools import cache, lru_cache
from pathlib import Path

from idyn_ros.errors import ParameterError, RobotDescriptionError
from idyn_ros.paths import config_dir
from idyn_ros.robots.spec import MODES, Payload, RobotSpec, get_robot

_PREFIX_RE = re.compile(r"[A-Za-z0-9_/]+")

# Elements that describe a controller/simulator setup, not the rigid-body model.
_NON_MODEL_TAGS = ("ros2_control", "gazebo", "transmission")


@cache
def xacro_argument_defaults(xacro_path: Path) -> dict[str, str]:
    """{name: default} of the ``<xacro:arg>`` declared in ``xacro_path`` (and the file it includes)."""
    out: dict[str, str] = {}
    for path in (xacro_path, xacro_path.parent / "common.xacro"):
        if path.is_file():
            for tag in re.findall(r"<xacro:arg\s[^>]*>", path.read_text(), flags=re.DOTALL):
                name = re.search(r'name="([^"]+)"', tag)
                default = re.search(r'default="([^"]*)"', tag)
                if name:
                    out.setdefault(name.group(1), default.group(1) if default else "")
    return out


def xacro_arguments(xacro_path: Path) -> frozenset[str]:
    """Names of the ``<xacro:arg>`` declared in ``xacro_path`` (and the file it includes)."""
    return frozenset(xacro_argument_defaults(xacro_path))


def render_urdf(
    robot: str | RobotSpec,
    mode: str = "mock",
    prefix: str | None = None,
    payload: Payload | object | None = None,
    xacro_args: Mapping[str, str] | None = None,
) -> str:
    """Render the robot's xacro to URDF XML.

    Args:
        robot: preset name (``panda``, ``iiwa14``, ``ur5``) or a RobotSpec (its prefix is used
            when ``prefix`` is not given).
        mode: ``mock`` | ``mujoco`` | ``gazebo`` | ``hardware``: which ``<ros2_control>`` hardware
            block to emit. The rigid-body model is identical in every mode (gazebo adds a ``world``
            link welded to the base).
        prefix: joint/link name prefix. None or "" -> the vendor default (``panda_``, ``lbr_``,
            ``""``); any other string replaces it (``left_`` -> ``left_joint1`` for the Panda).
        payload: rigid body fixed to the flange (mass kg, CoM m in the flange frame, inertia
            kg m^2 about the CoM); a Payload or anything with those three attributes; None or
            mass 0 -> none.
        xacro_args: further xacro arguments, e.g. ``{"hand": "false"}`` (Panda),
            ``{"robot_ip": "172.16.0.2"}``; unknown names raise. In gazebo mode
            ``controllers_file`` defaults to ``config/<robot>_controllers.yaml``.

    Returns:
        The URDF as a pretty-printed XML string.

    Raises:
        UnknownRobotError: unknown robot name.
        ParameterError: unknown mode or xacro argument, or a prefix with characters ROS names reject.
        RobotDescriptionError: the payload is not physical or xacro failed.
    """
    spec = get_robot(robot)
    if prefix and not _PREFIX_RE.fullmatch(prefix):
        raise ParameterError(
            f"prefix '{prefix}' is not usable in joint/link/TF names; use letters, digits, '_' or '/' "
            "(e.g. 'left_')"
        )
    if mode not in MODES:
        raise ParameterError(f"unknown mode '{mode}' for robot {spec.name}; valid modes: {', '.join(MODES)}")
    extra = dict(xacro_args or {})
    reserved = {"mode", "prefix"} | {k for k in extra if k.startswith("payload_")}
    if reserved & extra.keys():
        raise ParameterError(
            f"pass {sorted(reserved & extra.keys())} through render_urdf's own arguments "
            "(mode=, prefix=, payload=Payload(...)), not xacro_args"
        )
    known = xacro_arguments(spec.xacro_path)
    unknown = sorted(set(extra) - known)
    if unknown:
        raise ParameterError(
            f"unknown xacro argument(s) {unknown} for {spec.name}; valid: "
            f"{', '.join(sorted(k for k in known if k not in ('mode', 'prefix') and not k.startswith('payload_')))}"
        )
    mappings = {"mode": mode, "prefix": prefix or spec.active_prefix}
    if mode == "gazebo":
        # gz_ros2_control starts its own controller_manager from this file (effort controller +
        # joint_state_broadcaster); the per-robot file lives with the other parameter files.
        mappings["controllers_file"] = str(config_dir() / f"{spec.name}_controllers.yaml")
    if payload is not None:
        mappings.update(Payload.coerce(payload).xacro_args())
    mappings.update({k: str(v) for k, v in extra.items()})
    return _render(str(spec.xacro_path), tuple(sorted(mappings.items())))


@lru_cache(maxsize=64)
def _render(xacro_path: str, mappings: tuple[tuple[str, str], ...]) -> str:
    import xacro  # lazy: xacro pulls in yaml and friends; only needed when rendering

    try:
        document = xacro.process_file(xacro_path, mappings=dict(mappings))
    except Exception as exc:  # xacro raises XacroException and plain Python errors alike
        raise RobotDescriptionError(f"xacro failed on {xacro_path} with {dict(mappings)}: {exc}") from None
    return document.toprettyxml(indent="  ")


def strip_non_model_elements(urdf_xml: str) -> ET.Element:
    """Parse a URDF and drop ros2_control/gazebo/transmission elements and mesh geometry."""
    try:
        root = ET.fromstring(urdf_xml)
    except ET.ParseError as exc:
        raise RobotDescriptionError(f"not valid URDF XML: {exc}") from None
    if root.tag != "robot":
        raise RobotDescriptionError(f"not a URDF: root element is <{root.tag}>, expected <robot>")
    for tag in _NON_MODEL_TAGS:
        for element in root.findall(tag):
            root.remove(element)
    # Visual/collision shapes that reference meshes cannot be resolved here (no mesh packages).
    for link in root.findall("link"):
        for kind in ("visual", "collision"):
            for element in link.findall(kind):
                if element.find("geometry/mesh") is not None:
                    link.remove(element)
    return root


def urdf_for_mujoco(urdf_xml: str) -> str:
    """Make a rendered URDF loadable by ``mujoco.MjModel.from_xml_string``.

    Drops the non-model elements and meshes, and adds
    ``<mujoco><compiler discardvisual="true" fusestatic="false"/></mujoco>``: fusestatic=false keeps
    the welded bodies (flange, hand, payload) as named bodies, so ``apply_wrench(flange_link)`` and
    site lookups work; the dynamics are the same either way. URDF ``<dynamics damping friction>``
    is kept: MuJoCo turns it into dof damping / frictionloss (Panda: damping 0.003 N m s/rad; UR5
    and iiwa: none), so M(q) and the bias forces equal pinocchio's, passive forces may not.
    """
    root = strip_non_model_elements(urdf_xml)
    for element in root.findall("mujoco"):
        root.remove(element)
    mujoco_element = ET.SubElement(root, "mujoco")
    ET.SubElement(mujoco_element, "compiler", discardvisual="true", fusestatic="false")
    return ET.tostring(root, encoding="unicode")
