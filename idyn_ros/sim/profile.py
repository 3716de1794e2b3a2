"""Plant profiles: how the simulated robot differs from the URDF the models are built from.

Three kinds, from "equals the model" to "a particular robot on the bench":

* ``ideal``   - rigid-body dynamics of the URDF exactly: no friction of any kind, no armature,
                perfect sensors, no latency. Plant and pinocchio RNEA agree to round-off.
* ``nominal`` - everything the URDF states: its inertials plus its ``<dynamics damping friction>``
                (as viscous friction and dry frictionloss); perfect sensors, no latency. What a
                URDF-faithful simulator such as Gazebo would do.
* ``true``    - a seeded "true robot" read from ``config/profiles/<robot>_true.yaml``: perturbed
                inertials (physically consistent), reflected rotor inertia, Gaz-style friction with
                stiction and Stribeck drop, the joint effects of idyn_ros/sim/joint_effects.py
                (load-dependent friction, torque ripple, hysteresis, temperature drift), optional joint
                elasticity, torque-sensor noise and offset, encoder quantisation, command latency,
                optional payload.

A profile may also be given as a path to any YAML of the ``true`` schema (see config/profiles/README.md).
Per-joint entries are keyed by joint name; inertial perturbations by the moving joint whose rigid
body (child link + fixed descendants) they scale.

Regenerate the true profiles with ``python -m idyn_ros.sim.profile ROBOT [--seed S]``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.errors import ParameterError
from idyn_ros.robots.spec import Payload
from idyn_ros.sim.friction import FrictionParameters
from idyn_ros.sim.joint_effects import JointEffects
from idyn_ros.sim.urdf import LinkInertial

PROFILE_KINDS = ("ideal", "nominal", "true")


@dataclass(frozen=True)
class InertialPerturbation:
    """Perturbation of one rigid body (all links moved by one joint), applied per link.

    mass' = s_m m;  c' = c + com_shift;  Sigma' = s_m V diag(s_k lambda_k) V^T  with Sigma = V diag(lambda) V^T
    the second moment about the CoM. Scaling Sigma's eigenvalues by positive factors keeps the
    pseudo-inertia positive definite, so the result is physically consistent by construction
    (Wensing, Kim, Slotine, RA-L 2017: consistency <=> pseudo-inertia PD).
    """

    mass_scale: float = 1.0
    com_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    second_moment_scale: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def apply(self, link: LinkInertial) -> LinkInertial:
        if link.mass <= 0:
            return link
        sigma = 0.5 * np.trace(link.inertia) * np.eye(3) - link.inertia
        lam, V = np.linalg.eigh(sigma)
        lam = np.clip(lam, 0.0, None) * np.asarray(self.second_moment_scale) * self.mass_scale
        sigma_new = V @ np.diag(lam) @ V.T
        inertia = np.trace(sigma_new) * np.eye(3) - sigma_new
        return LinkInertial(link.mass * self.mass_scale, link.com + np.asarray(self.com_shift), inertia)


@dataclass(frozen=True)
class BodyInertial:
    """The whole rigid body a joint moves (child link + fixed descendants) in the child link's frame: an identified
    body, which replaces the URDF's links of that body instead of scaling them (``idyn identify --profile-out``)."""

    mass: float
    com: tuple[float, float, float]
    inertia: tuple[float, float, float, float, float, float]  # kg m^2 about the CoM: ixx ixy ixz iyy iyz izz

    def link(self) -> LinkInertial:
        ixx, ixy, ixz, iyy, iyz, izz = self.inertia
        return LinkInertial(self.mass, np.asarray(self.com, float),
                            np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]))


@dataclass(frozen=True)
class Elasticity:
    """Series-elastic joints: motor (rotor, reflected) inertia B, spring K (Nm/rad), damper D (Nm s/rad).

    When present, the profile's armature moves to the motor side: the link sees only the spring.
    """

    stiffness: np.ndarray
    damping: np.ndarray
    motor_inertia: np.ndarray


@dataclass
class PlantProfile:
    """Everything that makes the plant differ from the URDF, resolved to arrays in ``joint_names`` order."""

    kind: str
    joint_names: tuple[str, ...]
    inertial: dict[str, InertialPerturbation | BodyInertial] = field(default_factory=dict)  # key: moving joint
    armature: np.ndarray | None = None  # kg m^2 reflected rotor inertia (n,)
    friction: FrictionParameters | None = None
    effects: JointEffects | None = None  # load friction, ripple, hysteresis, temperature (joint_effects.py)
    use_urdf_dynamics: bool = False  # nominal: URDF <dynamics damping friction>
    elasticity: Elasticity | None = None
    torque_noise_std: np.ndarray | None = None  # Nm (n,)
    torque_offset: np.ndarray | None = None  # Nm (n,)
    encoder_resolution: float = 0.0  # rad per count; 0 = exact
    velocity_noise_std: float = 0.0  # rad/s
    latency_ticks: int = 0  # control ticks between a command's arrival and the drive applying it
    payload: Payload | None = None
    seed: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        zero = np.zeros(n)
        self.armature = zero.copy() if self.armature is None else np.asarray(self.armature, float)
        self.friction = FrictionParameters.zeros(n) if self.friction is None else self.friction
        self.effects = JointEffects.zeros(n) if self.effects is None else self.effects
        self.torque_noise_std = zero.copy() if self.torque_noise_std is None else self.torque_noise_std
        self.torque_offset = zero.copy() if self.torque_offset is None else self.torque_offset
        if self.latency_ticks < 0:
            raise ParameterError(f"latency_ticks must be >= 0, got {self.latency_ticks}")
        if np.any(self.friction.stribeck_drop > self.friction.frictionloss + 1e-12):
            raise ParameterError(
                f"profile {self.source or self.kind}: stribeck_drop must not exceed frictionloss "
                "(sliding friction would push the joint along)"
            )


def profiles_dir() -> Path:
    from idyn_ros.paths import config_dir

    return config_dir() / "profiles"


def load_profile(profile: str | Path | PlantProfile, robot: str | None, joint_names: tuple[str, ...]) -> PlantProfile:
    """Resolve ``"ideal" | "nominal" | "true" | path.yaml | PlantProfile`` for a robot's joints.

    ``"true"`` reads ``config/profiles/<robot>_true.yaml``.
    """
    if isinstance(profile, PlantProfile):
        return profile
    joint_names = tuple(joint_names)
    if profile == "ideal":
        return PlantProfile("ideal", joint_names, source="ideal")
    if profile == "nominal":
        return PlantProfile("nominal", joint_names, use_urdf_dynamics=True, source="nominal")
    if profile == "true":
        if robot is None:
            raise ParameterError("profile 'true' needs a robot name; pass a YAML path for a custom URDF")
        path = profiles_dir() / f"{robot}_true.yaml"
        if not path.is_file():
            raise ParameterError(
                f"no true profile for robot {robot!r} ({path} missing); create it with "
                f"`python -m idyn_ros.sim.profile {robot}`"
            )
    else:
        path = Path(profile)
        if not path.is_file():
            raise ParameterError(
                f"unknown plant profile {str(profile)!r}: use one of {PROFILE_KINDS} or a YAML file path"
            )
    return profile_from_yaml(path, joint_names)


def profile_from_yaml(path: str | Path, joint_names: tuple[str, ...]) -> PlantProfile:
    """Read a ``true``-schema YAML (config/profiles/README.md) for the given joint order."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ParameterError(f"cannot read plant profile {path}: {exc}") from None
    return profile_from_dict(data, tuple(joint_names), source=str(path))


def profile_from_dict(data: dict[str, Any], joint_names: tuple[str, ...], source: str = "") -> PlantProfile:
    if not isinstance(data, dict) or not isinstance(data.get("joints") or {}, dict):
        raise ParameterError(f"plant profile {source} is not a mapping with a 'joints' section "
                             "(config/profiles/README.md has the schema)")
    joints = data.get("joints") or {}
    missing = [j for j in joint_names if j not in joints]
    if missing:
        raise ParameterError(
            f"plant profile {source} has no entry for joints {missing} (it has {sorted(joints)}); "
            "regenerate it with `python -m idyn_ros.sim.profile ROBOT`"
        )

    def per_joint(key: str, sub: str | None = None, default: float = 0.0, signed: bool = False) -> np.ndarray:
        """One finite number per joint (>= 0 unless ``signed``: an offset); a bad one names its joint."""
        out = []
        for j in joint_names:
            entry = joints[j] if sub is None else (joints[j].get(sub) or {})
            try:
                value = float(entry.get(key, default))
            except (TypeError, ValueError):
                value = math.nan
            if not math.isfinite(value) or (value < 0 and not signed):
                raise ParameterError(f"plant profile {source}: joint {j}: {sub + '.' if sub else ''}{key} must be a "
                                     f"finite number{'' if signed else ' >= 0'}, got {entry.get(key)!r}")
            out.append(value)
        return np.array(out)

    friction = FrictionParameters(
        frictionloss=per_joint("static", "friction"),
        phi1=per_joint("phi1", "friction", signed=True),
        phi2=per_joint("phi2", "friction", signed=True),
        phi3=per_joint("phi3", "friction", signed=True),
        viscous=per_joint("viscous", "friction"),
        stribeck_drop=per_joint("stribeck_drop", "friction", signed=True),
        stribeck_velocity=per_joint("stribeck_velocity", "friction", 0.05),
    )
    if np.any(friction.stribeck_velocity <= 0):
        raise ParameterError(f"plant profile {source}: stribeck_velocity must be > 0")
    elastic = [joints[j].get("elasticity") for j in joint_names]
    elasticity = None
    if any(e for e in elastic):
        if not all(e for e in elastic):
            raise ParameterError(f"plant profile {source}: elasticity must be given for all joints or none")
        elasticity = Elasticity(
            stiffness=per_joint("stiffness", "elasticity"),
            damping=per_joint("damping", "elasticity"),
            motor_inertia=per_joint("armature"),
        )
        if np.any(elasticity.stiffness <= 0) or np.any(elasticity.motor_inertia <= 0):
            raise ParameterError(f"plant profile {source}: elastic joints need stiffness > 0 and armature > 0")
    effects = _effects_from_dict(joints, joint_names, data.get("temperature") or {}, source)
    inertial = {joint: _inertial_entry(joint, p, source) for joint, p in (data.get("inertial") or {}).items()}
    sensors = data.get("sensors") or {}
    payload = data.get("payload")
    return PlantProfile(
        kind=str(data.get("kind", "true")),
        joint_names=joint_names,
        inertial=inertial,
        armature=per_joint("armature"),
        friction=friction,
        effects=effects,
        use_urdf_dynamics=bool(data.get("use_urdf_dynamics", False)),
        elasticity=elasticity,
        torque_noise_std=per_joint("torque_noise_std", "sensor"),
        torque_offset=per_joint("torque_offset", "sensor", signed=True),
        encoder_resolution=float(sensors.get("encoder_resolution", 0.0)),
        velocity_noise_std=float(sensors.get("velocity_noise_std", 0.0)),
        latency_ticks=_whole((data.get("command") or {}).get("latency_ticks", 0), "command.latency_ticks", source),
        payload=_payload_from_dict(payload),
        seed=int(data.get("seed", 0)),
        source=source,
    )


_PERTURBATION_KEYS = ("mass_scale", "com_shift", "second_moment_scale")
_BODY_KEYS = ("mass", "com", "inertia")


def _inertial_entry(joint: str, entry: Any, source: str) -> InertialPerturbation | BodyInertial:
    """One ``inertial`` entry: a perturbation of the URDF's body (scales) or the whole body given outright (mass)."""
    where = f"plant profile {source}: inertial of joint {joint}"
    if not isinstance(entry, dict) or not entry:
        raise ParameterError(f"{where} must be a mapping with {' / '.join(_PERTURBATION_KEYS)} or "
                             f"{' / '.join(_BODY_KEYS)}, got {entry!r}")
    unknown = sorted(set(entry) - set(_PERTURBATION_KEYS) - set(_BODY_KEYS))
    if unknown:
        raise ParameterError(f"{where}: unknown keys {unknown}")
    try:
        if "mass" not in entry:
            pert = InertialPerturbation(
                float(entry.get("mass_scale", 1.0)),
                tuple(float(v) for v in entry.get("com_shift", (0, 0, 0))),
                tuple(float(v) for v in entry.get("second_moment_scale", (1, 1, 1))),
            )
            if not (pert.mass_scale > 0 and min(pert.second_moment_scale) > 0 and len(pert.com_shift) == 3
                    and len(pert.second_moment_scale) == 3 and np.all(np.isfinite(pert.com_shift))):
                raise ValueError("scales must be > 0, com_shift and second_moment_scale three numbers")
            return pert
        if set(entry) & set(_PERTURBATION_KEYS):
            raise ValueError(f"give either {', '.join(_PERTURBATION_KEYS)} or {', '.join(_BODY_KEYS)}, not both")
        body = BodyInertial(float(entry["mass"]), tuple(float(v) for v in entry.get("com", (0, 0, 0))),
                            tuple(float(v) for v in entry.get("inertia", ())))
        if len(body.com) != 3 or len(body.inertia) != 6:
            raise ValueError("com takes 3 numbers, inertia 6 (ixx ixy ixz iyy iyz izz about the CoM)")
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{where}: {exc}") from None
    from idyn_ros.dynamics.inertia import barycentric_to_pi, check_physical_consistency

    link = body.link()
    problems = (["not finite"] if not (np.all(np.isfinite(link.inertia)) and np.all(np.isfinite(link.com))) else
                check_physical_consistency(barycentric_to_pi(link.mass, link.com, link.inertia), names=[joint]))
    if not body.mass > 0 or problems:
        raise ParameterError(f"{where}: not a physical body (mass {body.mass:g} kg; {'; '.join(problems)}): "
                             "a simulator cannot move it")
    return body


def _effects_from_dict(joints: dict[str, Any], joint_names: tuple[str, ...], temperature: dict[str, Any],
                       source: str) -> JointEffects:
    """``joints.<j>.effects`` (optional per joint; absent = none) and the top-level ``temperature`` block."""
    try:
        return _parse_effects(joints, joint_names, temperature)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ParameterError(f"plant profile {source}: bad joints.<j>.effects entry ({exc}); see "
                             f"config/profiles/README.md") from None
    except ParameterError as exc:
        raise ParameterError(f"plant profile {source}: {exc}") from None


def _parse_effects(joints: dict[str, Any], joint_names: tuple[str, ...], temperature: dict[str, Any]) -> JointEffects:
    n = len(joint_names)
    entries = [joints[j].get("effects") or {} for j in joint_names]
    ripples = [e.get("ripple") or [] for e in entries]
    K = max((len(r) for r in ripples), default=0)
    ratio, order, phase = np.zeros((n, K)), np.zeros((n, K)), np.zeros((n, K))
    for i, rows in enumerate(ripples):
        for k, row in enumerate(rows):
            if "amplitude" in row:  # read as a ratio, an amplitude in Nm would be a ripple of 50-100x the torque
                raise ParameterError(f"joint {joint_names[i]}: the ripple is a fraction of the drive torque now "
                                     f"('ratio', e.g. 0.01), not an 'amplitude' in Nm; regenerate the profile "
                                     f"(python -m idyn_ros.sim.profile ROBOT) or convert its rows")
            ratio[i, k], order[i, k], phase[i, k] = (float(row.get(key, 0.0)) for key in ("ratio", "order", "phase"))

    def get(block: str | None, key: str, default: float) -> np.ndarray:
        return np.array([float(((e.get(block) or {}) if block else e).get(key, default)) for e in entries])

    return JointEffects(
        load_friction=get(None, "load_friction", 0.0), ripple_ratio=ratio, ripple_order=order, ripple_phase=phase,
        hysteresis_torque=get("hysteresis", "torque", 0.0), hysteresis_travel=get("hysteresis", "travel", 1.0),
        thermal_coefficient=get("thermal", "coefficient", 0.0),
        thermal_time_constant=get("thermal", "time_constant", 600.0),
        thermal_rise_per_watt=get("thermal", "rise_per_watt", 0.0), copper_loss=get("thermal", "copper_loss", 0.0),
        ambient=float(temperature.get("ambient", 25.0)), reference=float(temperature.get("reference", 25.0)))


def _payload_from_dict(payload: dict[str, Any] | None) -> Payload | None:
    if not payload or float(payload.get("mass", 0.0)) == 0.0:
        return None
    return Payload(
        float(payload["mass"]),
        tuple(float(v) for v in payload.get("com", (0, 0, 0))),
        tuple(float(v) for v in payload.get("inertia", (0,) * 6)),
    )


# --- generating the seeded true profiles -------------------------------------------------------------

# Gaz, Cognetti, Oliva, Robuffo Giordano, De Luca, "Dynamic Identification of the Franka Emika Panda
# Robot With Retrieval of Feasible Parameters Using Penalty-Based Optimization", IEEE RA-L 2019,
# friction model eq. (9), identified values (as published with the authors' Panda dynamic model):
GAZ_PANDA_PHI1 = (0.54615, 0.87224, 0.64068, 1.2794, 0.83904, 0.30301, 0.56489)  # Nm
GAZ_PANDA_PHI2 = (5.1181, 9.0657, 10.136, 5.5903, 8.3469, 17.133, 10.336)  # s/rad
GAZ_PANDA_PHI3 = (0.039533, 0.025882, -0.04607, 0.036194, 0.026226, -0.021047, 0.0035526)  # rad/s
PANDA_EFFORT = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)  # Nm, Franka datasheet (Gaz's joints)
# Reflected rotor inertia of the FR3 axes published by Franka (as quoted in Drake's
# franka_description README): 0.6057, 0.6057, 0.4625, 0.4625, 0.2055, 0.2055, 0.2055 kg m^2.
FR3_ARMATURE = (0.605721456, 0.605721456, 0.462474144, 0.462474144, 0.205544064, 0.205544064, 0.205544064)


# Joint effects of the true profiles (idyn_ros/sim/joint_effects.py); each source and why this magnitude:
# config/profiles/README.md. Drawn from their own random stream (seed, 1), so adding them kept every other value.
LOAD_FRICTION = 0.04  # dry friction per Nm of drive torque (Bittencourt et al. IROS 2010; HD efficiency vs load)
GEAR_RATIO = 100  # strain-wave gear ratio assumed for every joint (LWR/iiwa: 100-160, Callar 2021 Sec. 2)
RIPPLE_LOW = 0.01  # x drive torque: orders 1 and 2 per output revolution (eccentricity; assumed)
RIPPLE_MESH = 0.005  # x drive torque: order 2 N, twice per wave-generator turn (Tuttle & Seering 1996; assumed)
# Decision: the ripple is a fraction of the transmitted torque, its ratios summing to at most 3 % (2.5 % +20 %), below
# the smallest load friction (3.2 %): a joint's dry friction always holds the ripple of the torque it transmits, so
# an arm held against gravity, or hanging free, does not wander by itself (as a load-free torque of 0.5 % of the
# effort limit per order, 2.4-2.75x the breakaway friction, it swung a gravity-compensated Panda's joint 1 by 18 deg
# in 2 s).
HYSTERESIS_TORQUE = 0.5  # x Gaz phi1: Dahl pre-sliding amplitude (assumed)
HYSTERESIS_TRAVEL = 0.035  # rad (2 deg): 3 x_h ~ 6 deg, where Callar's iiwa hysteresis loop saturates
THERMAL_COEFFICIENT = 0.01  # 1/K: friction falls 1 %/K as the gear warms (assumed; Wolf & Iskandar ICRA 2018)
THERMAL_TIME_CONSTANT = 600.0  # s: joints warm over minutes (assumed)
THERMAL_RISE_PER_WATT = 2.0  # K/W steady-state rise (assumed)
COPPER_WATTS_AT_QUARTER_EFFORT = 8.0  # W of copper loss at 25 % of the effort limit (assumed)


def _r(x: float, digits: int = 5) -> float:
    """Plain rounded float (YAML cannot write numpy scalars)."""
    return round(float(x), digits)


def _panda_like(i: int, n: int) -> int:
    """Which Panda joint a joint of an n-DoF arm borrows its friction shape from (base ... wrist)."""
    return round(i * 6 / max(n - 1, 1))


def generate_true_profile(robot: str, urdf_xml: str, joint_names: tuple[str, ...], seed: int) -> dict[str, Any]:
    """A seeded true-robot profile (dict ready for YAML) for any arm.

    Friction: the Gaz 2019 Panda values for the Panda; for other arms the same shape with amplitudes
    scaled by (effort limit / Panda effort limit) - an assumption, stated in the YAML. Breakaway
    friction, Stribeck drop, viscous, armature of non-Panda arms and sensor figures are assumed orders
    of magnitude, randomised +-20 % by the seed so each profile is "a particular robot".
    """
    from idyn_ros.sim.urdf import effort_limits, rigid_bodies

    rng = np.random.default_rng(seed)
    n = len(joint_names)
    effort = effort_limits(urdf_xml, joint_names)
    bodies = rigid_bodies(urdf_xml)
    joints: dict[str, Any] = {}
    for i, name in enumerate(joint_names):
        k = _panda_like(i, n)
        ratio = 1.0 if robot == "panda" else float(np.clip(effort[i] / PANDA_EFFORT[k], 0.3, 5.0))
        jitter = lambda: float(rng.uniform(0.8, 1.2))  # noqa: E731
        phi1 = GAZ_PANDA_PHI1[k] * (1.0 if robot == "panda" else ratio * jitter())
        static = 0.4 * phi1 * jitter()
        armature = FR3_ARMATURE[k] * (1.0 if robot == "panda" else ratio * jitter())
        joints[name] = {
            "armature": _r(armature, 6),
            "friction": {
                "static": _r(static, 5),
                "phi1": _r(phi1, 6),
                "phi2": GAZ_PANDA_PHI2[k],
                "phi3": GAZ_PANDA_PHI3[k],
                "viscous": _r(0.1 * ratio * jitter(), 5),
                "stribeck_drop": _r(0.5 * static * jitter(), 5),
                "stribeck_velocity": _r(0.05 * jitter(), 5),
            },
            "sensor": {
                "torque_noise_std": _r(0.0005 * max(effort[i], 1.0) * jitter(), 5),
                "torque_offset": _r(float(rng.normal(0.0, 0.002 * max(effort[i], 1.0))), 5),
            },
            "elasticity": None,
        }
    effects_rng = np.random.default_rng([seed, 1])
    for i, name in enumerate(joint_names):
        joints[name]["effects"] = _joint_effects(effects_rng, effort[i], joints[name]["friction"]["phi1"])
    inertial = {}
    for name in joint_names:
        if not bodies.get(name):
            continue
        inertial[name] = {
            "mass_scale": _r(float(rng.choice([-1, 1]) * rng.uniform(0.10, 0.20) + 1.0), 4),
            "com_shift": [round(float(v), 4) for v in rng.uniform(-0.03, 0.03, 3)],
            "second_moment_scale": [round(float(v), 4) for v in rng.uniform(0.8, 1.25, 3)],
        }
    return {
        "robot": robot,
        "kind": "true",
        "seed": seed,
        "inertial": inertial,
        "joints": joints,
        "sensors": {"encoder_resolution": float(2 * np.pi / 2**20), "velocity_noise_std": 0.001},
        "command": {"latency_ticks": 1},
        "temperature": {"ambient": 25.0, "reference": 25.0},
        "payload": None,
    }


def _joint_effects(rng: np.random.Generator, effort: float, phi1: float) -> dict[str, Any]:
    """One joint's ``effects`` entry: the module constants above, randomised +-20 %, random ripple phases."""
    def jitter() -> float:
        return float(rng.uniform(0.8, 1.2))

    effort = max(effort, 1.0)
    ripple = [{"ratio": _r(RIPPLE_LOW * jitter(), 5), "order": order,
               "phase": _r(rng.uniform(0, 2 * np.pi), 4)} for order in (1, 2)]
    ripple.append({"ratio": _r(RIPPLE_MESH * jitter(), 5), "order": 2 * GEAR_RATIO,
                   "phase": _r(rng.uniform(0, 2 * np.pi), 4)})
    return {
        "load_friction": _r(LOAD_FRICTION * jitter(), 5),
        "ripple": ripple,
        "hysteresis": {"torque": _r(HYSTERESIS_TORQUE * phi1 * jitter(), 5), "travel": HYSTERESIS_TRAVEL},
        "thermal": {"coefficient": THERMAL_COEFFICIENT, "time_constant": THERMAL_TIME_CONSTANT,
                    "rise_per_watt": THERMAL_RISE_PER_WATT,
                    "copper_loss": _r(COPPER_WATTS_AT_QUARTER_EFFORT / (0.25 * effort) ** 2, 7)},
    }


_HEADER = """\
# "True robot" plant profile for {robot} (seed {seed}). Generated by
#   python -m idyn_ros.sim.profile {robot} --seed {seed}
# Semantics: config/profiles/README.md. Units SI (kg, m, kg m^2, Nm, rad, rad/s).
# inertial: per moving joint, scales the rigid body it moves (child link + fixed descendants):
#   mass_scale, com_shift (m, link frame), second_moment_scale (principal second moments; keeps the
#   pseudo-inertia positive definite, i.e. physically consistent).
# joints.<j>.armature: reflected rotor inertia (kg m^2). Panda: FR3 values published by Franka;
#   other arms: assumed, scaled from the Panda by effort limit.
# joints.<j>.friction: static = MuJoCo frictionloss (breakaway, Nm); phi1..phi3 = Gaz et al. RA-L 2019
#   eq. (9) sigmoid (Panda: identified values; others: amplitude scaled by effort ratio, assumed);
#   viscous (Nm s/rad), stribeck_drop (Nm), stribeck_velocity (rad/s): assumed.
# joints.<j>.sensor: torque_noise_std, torque_offset (Nm) of the joint torque reading.
# joints.<j>.elasticity: null, or {{stiffness: Nm/rad, damping: Nm s/rad}} (armature then = motor inertia).
# joints.<j>.effects (idyn_ros/sim/joint_effects.py; sources and magnitudes in config/profiles/README.md):
#   load_friction: dry friction per Nm of drive torque (strain-wave gear; Bittencourt et al. IROS 2010);
#   ripple: drive torque x ratio x sin(order q + phase), the part the transmission does not pass on; orders 1, 2
#     per output turn and 2 x gear ratio (gear mesh,
#     Tuttle & Seering 1996; the iiwa's periodic transmission deflection, Chawda & Niemeyer IROS 2017);
#   hysteresis: Dahl pre-sliding, torque Nm over travel rad (Callar 2021: iiwa loop saturates after ~6 deg);
#   thermal: friction x (1 - coefficient (T - reference)), T rising to ambient + rise_per_watt x losses with
#     time_constant s; losses = friction power + copper_loss x tau^2 (Wolf & Iskandar ICRA 2018).
# temperature: ambient (= start, a cold robot) and reference (where the friction values hold), deg C.
"""


def profile_yaml(data: dict[str, Any], header: str | None = None) -> str:
    """A profile as YAML text under a comment header (the generator's by default)."""
    import yaml

    header = _HEADER.format(robot=data["robot"], seed=data["seed"]) if header is None else header
    return header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=110)


def write_profile_yaml(data: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(profile_yaml(data))


IDENTIFIED_HEADER = """\
# Plant profile of an identified {robot} ({method}), written by `idyn identify --profile-out`.
# Simulate it: idyn bringup --robot {robot} --set profile=<this file>   (schema: config/profiles/README.md)
# inertial: each joint's whole body (child link + fixed links) as identified, in the child link's frame.
# joints.<j>: armature and friction as identified, mapped to the plant's friction (notes below); ideal sensors
#   (the identification's residual is model error, not sensor noise) and no command latency.
"""


def _g(x: float) -> float:
    """Plain float to 9 significant digits: an identified value written as it was fitted, small inertias too."""
    return float(f"{float(x):.9g}")


def identified_profile(robot: str, joint_names: tuple[str, ...], pi: np.ndarray, armature: np.ndarray,
                       friction_kinds: tuple[str, ...], friction: np.ndarray) -> tuple[dict[str, Any], list[str]]:
    """The plant profile (YAML-ready) of an identified model, and notes on what the plant cannot hold as identified.

    Friction (``idyn_ros.dynamics.friction`` kinds -> the plant's): coulomb -> static (MuJoCo's frictionloss, which
    also holds a joint at rest); stribeck c_s -> static + c_s breaking away, falling by c_s once sliding; sigmoid c
    tanh(dq / v_t) -> Gaz phi1 = 2 c, phi2 = 2 / v_t, phi3 = 0 (the same curve); viscous -> viscous; offset -> the
    torque sensor's offset; asymmetric -> static at the mean of its two levels (the plant's dry friction is symmetric).
    A negative level is set to 0: friction in a simulator that drives its joint would make it run away.
    """
    from idyn_ros.dynamics.friction import KIND_COLUMNS, V_STRIBECK, V_TANH
    from idyn_ros.dynamics.inertia import pi_to_barycentric

    notes: list[str] = []
    inertial: dict[str, Any] = {}
    joints: dict[str, Any] = {}
    for i, name in enumerate(joint_names):
        mass, com, ic = pi_to_barycentric(pi[i])
        inertial[name] = {"mass": _g(mass), "com": [_g(v) for v in com],
                          "inertia": [_g(ic[a, b]) for a, b in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))]}
        columns = iter(friction[i])
        level: dict[str, Any] = {}
        for kind in friction_kinds:
            values = [float(next(columns)) for _ in range(KIND_COLUMNS[kind])]
            level[kind] = values if kind == "asymmetric" else values[0]
        if "asymmetric" in level:
            up, down = level.pop("asymmetric")
            level["coulomb"] = level.get("coulomb", 0.0) + 0.5 * (up + down)
            notes.append(f"{name}: asymmetric dry friction {up:.3g} / {down:.3g} Nm simulated as "
                         f"{0.5 * (up + down):.3g} Nm both ways")
        for kind in ("coulomb", "stribeck", "sigmoid", "viscous"):
            if level.get(kind, 0.0) < 0:
                notes.append(f"{name}: identified {kind} {level[kind]:.3g} is negative, simulated as 0")
                level[kind] = 0.0
        coulomb, drop, sigmoid = level.get("coulomb", 0.0), level.get("stribeck", 0.0), level.get("sigmoid", 0.0)
        joints[name] = {
            "armature": _g(armature[i]),
            "friction": {"static": _g(coulomb + drop), "phi1": _g(2 * sigmoid), "phi2": 2.0 / V_TANH,
                         "phi3": 0.0, "viscous": _g(level.get("viscous", 0.0)), "stribeck_drop": _g(drop),
                         "stribeck_velocity": V_STRIBECK},
            "sensor": {"torque_noise_std": 0.0, "torque_offset": _g(level.get("offset", 0.0))},
            "elasticity": None,
        }
    data = {"robot": robot, "kind": "identified", "seed": 0, "inertial": inertial, "joints": joints,
            "sensors": {"encoder_resolution": 0.0, "velocity_noise_std": 0.0}, "command": {"latency_ticks": 0},
            "payload": None}
    return data, notes


def main(argv: list[str] | None = None) -> int:
    """Regenerate config/profiles/<robot>_true.yaml from the robot's URDF and a seed."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("robot", help="panda | iiwa14 | ur5")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the perturbation (default 7)")
    parser.add_argument("--urdf", help="URDF file instead of idyn_ros.robots.render_urdf(robot, mode='mujoco')")
    parser.add_argument("--out", type=Path, help="output path (default config/profiles/<robot>_true.yaml)")
    args = parser.parse_args(argv)
    from idyn_ros.sim.plant import resolve_robot

    desc = resolve_robot(args.robot, Path(args.urdf).read_text() if args.urdf else None)
    data = generate_true_profile(args.robot, desc.urdf_xml, desc.joint_names, args.seed)
    out = args.out or profiles_dir() / f"{args.robot}_true.yaml"
    write_profile_yaml(data, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def _whole(value: Any, what: str, source: str) -> int:
    """A count the profile gives (ticks): a whole number >= 0, not silently truncated."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != int(value):
        raise ParameterError(f"plant profile {source}: {what} must be a whole number >= 0, got {value!r}")
    return int(value)
