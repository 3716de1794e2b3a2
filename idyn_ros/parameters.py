"""Every parameter of every idyn node, declared once, as typed frozen dataclasses.

The idea of ros2_controllers' generate_parameter_library (not installable here), in plain Python: each node
has one dataclass whose fields are its parameters (type, default, unit, bounds, per-joint length,
read-only flag). From that one declaration come
- the ROS side (``idyn_ros.nodes.ros_parameters``: declare on a node, validate every set, read back a typed object),
- the in-process side (``load``: the same object from the same YAML files with ROS precedence, for the
  simulator loop, benchmarks and ``idyn`` commands),
- the docs (``render_markdown`` -> docs/parameters.md, kept current by a test).
A node's tick reads attributes of its frozen object (no string lookups); a parameter change builds a new
object and swaps it in whole.

Per-joint arrays (``length="n"``) must have one value per joint; an empty array means "derived from the
robot" by the rule in its description (e.g. 10 % of the effort limit), so config/<robot>.yaml holds only
what really differs per robot.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_type_hints

from idyn_ros.errors import ParameterError

ROBOTS = ("panda", "iiwa14", "ur5")
PRESET_NAMES = ("soft", "medium", "stiff")
# Choices that a module checks too: declared here (imported from anywhere), used there.
FALLBACKS = ("rbd", "gravity", "none")  # control.feedforward: feedforward without a usable model
FEEDBACK_SPACES = ("acceleration", "torque")  # control.law: where the gains act
EFFORT_UNITS = ("auto", "torque", "current")  # control.effort: what the joint-state effort is
DOOMED_FEATURES = ("constant", "linear")  # control.doomed: the learner's features
# Reuss et al. 2022 sec. VI: "the loop runs 500 iterations (0.5 s) to warm up the LSTM state".
PAPER_WARMUP_TICKS = 500


@dataclass(frozen=True)
class Spec:
    """Metadata of one parameter (stored in the dataclass field's metadata)."""

    description: str
    lo: float | None = None  # inclusive bounds for numbers and for every element of arrays
    hi: float | None = None
    choices: tuple[str, ...] = ()
    length: str | None = None  # "n": one value per joint; "n*k": a multiple of the joint count
    read_only: bool = False  # takes effect only at configure time: refused at run time
    below_nyquist: bool = False  # a frequency that must stay below rate_hz / 2
    ros_name: str = ""  # ROS name when it differs from the field name (dotted names such as presets.soft.kp)
    only_with: tuple[str, tuple[Any, ...]] | None = None  # (ROS name, its values) under which the node reads this one

    def only_with_text(self) -> str:
        """``only_with`` as the docs and the refusals say it: ``feedforward_source 'topic'``."""
        other, values = self.only_with or ("", ())
        return f"{other} {' or '.join(map(repr, values))}"


def param(default: Any, description: str, **spec: Any) -> Any:
    """A dataclass field carrying its ``Spec``; list defaults become tuples (the objects are frozen)."""
    if isinstance(default, list):
        default = tuple(default)
    return field(default=default, metadata={"idyn": Spec(description, **spec)})


@dataclass(frozen=True)
class Param:
    """One parameter as the ROS side and the docs see it."""

    name: str  # ROS name
    attr: str  # dataclass field name
    type: str  # bool | int | double | string | double_array | string_array
    default: Any
    spec: Spec

    def __getattr__(self, item: str) -> Any:  # p.lo, p.choices, ... straight from the spec
        return getattr(self.spec, item)


P = TypeVar("P", bound="NodeParams")


@dataclass(frozen=True)
class NodeParams:
    """Base of every node's parameter object."""

    @classmethod
    def table(cls) -> list[Param]:
        """The declaration as a list of ``Param`` (field order)."""
        return _table(cls)

    @classmethod
    def from_values(cls: type[P], values: Mapping[str, Any], n: int | None = None) -> P:
        """Typed object from {ROS name: value}; unknown names are ignored, missing ones take the default.

        Raises ParameterError naming every invalid value.
        """
        table = cls.table()
        merged = {p.name: p.default for p in table}
        merged.update({k: v for k, v in values.items() if k in merged})
        problems = [m for p in table if (m := check(p, merged[p.name], n, merged))]
        if problems:
            raise ParameterError(f"{cls.__name__}: " + "; ".join(problems))
        return cls(**{p.attr: _coerce(p, merged[p.name]) for p in table})

    def values(self) -> dict[str, Any]:
        """{ROS name: value} (arrays as lists), what a parameter file or a node override holds."""
        return {p.name: (list(v) if isinstance(v := getattr(self, p.attr), tuple) else v) for p in self.table()}

    def replace(self: P, n: int | None = None, **ros_values: Any) -> P:
        """A validated copy with some parameters changed (ROS names)."""
        return type(self).from_values({**self.values(), **ros_values}, n)


def _table(cls: type) -> list[Param]:
    hints = get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        spec: Spec = f.metadata["idyn"]
        out.append(Param(spec.ros_name or f.name, f.name, _ros_type(hints[f.name]), f.default, spec))
    return out


def _ros_type(hint: Any) -> str:
    if hint is bool:
        return "bool"
    if hint is int:
        return "int"
    if hint is float:
        return "double"
    if hint is str:
        return "string"
    if isinstance(hint, types.GenericAlias) and hint.__origin__ is tuple:
        return "double_array" if hint.__args__[0] is float else "string_array"
    raise TypeError(f"unsupported parameter type {hint!r}")


def _coerce(p: Param, value: Any) -> Any:
    if p.type == "double":
        return float(value)
    if p.type == "int":
        return int(value)
    if p.type == "double_array":
        return tuple(float(v) for v in value)
    if p.type == "string_array":
        return tuple(str(v) for v in value)
    return value


def check(p: Param, value: Any, n: int | None, ctx: Mapping[str, Any]) -> str | None:
    """None if ``value`` is valid for ``p``, else one line naming the problem and the fix."""
    name = p.name
    items: list[Any] = []
    if p.type in ("double", "int"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{name} must be a number, got {value!r}"
        if p.type == "int" and isinstance(value, float) and not value.is_integer():
            return f"{name} must be a whole number, got {value!r}"
        items = [value]
    elif p.type == "double_array":
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            return f"{name} must be a list of numbers, got {value!r}"
        items = list(value)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in items):
            return f"{name} must be a list of numbers, got {value!r}"
        if n is not None and items:
            if p.length == "n" and len(items) != n:
                return f"{name} has {len(items)} values but the robot has {n} joints; give one per joint"
            if p.length == "n*k" and len(items) % n:
                return f"{name} has {len(items)} values, not a multiple of the {n} joints"
    elif p.type == "string_array":
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            return f"{name} must be a list of strings, got {value!r}"
    elif p.type == "bool":
        if not isinstance(value, bool):
            return f"{name} must be true or false, got {value!r}"
    else:
        if not isinstance(value, str):
            return f"{name} must be a string, got {value!r}"
        if p.choices and value not in p.choices:
            return f"{name}={value!r} is not one of {list(p.choices)}"
    for v in items:
        if not math.isfinite(v):
            return f"{name} contains {v} (values must be finite)"
        if p.lo is not None and v < p.lo:
            return f"{name}={value} is below its minimum {p.lo}"
        if p.hi is not None and v > p.hi:
            return f"{name}={value} is above its maximum {p.hi}"
    if p.below_nyquist:
        rate = float(ctx.get("rate_hz", 1000.0))
        if float(value) >= 0.5 * rate:
            return f"{name}={value} Hz must be below Nyquist ({0.5 * rate:g} Hz at rate_hz={rate:g})"
    return None


# ------------------------------------------------------------------------------------------ the nodes
@dataclass(frozen=True)
class RobotParams(NodeParams):
    """Which robot: every node that touches joints has these."""

    robot: str = param("panda", "robot preset; joint order, limits and URDF come from it", choices=ROBOTS,
                       read_only=True)
    prefix: str = param("", "joint/link name prefix ('' = the vendor driver's default)", read_only=True)


@dataclass(frozen=True)
class CommonParams(RobotParams):
    """Shared by the control nodes (the ``/**`` section of config/<robot>.yaml)."""

    rate_hz: float = param(1000.0, "control rate (Hz): the rate /joint_states arrives at", lo=1.0, hi=10000.0,
                           read_only=True)
    joint_states_topic: str = param("/joint_states", "input joint states (sensor_msgs/JointState)", read_only=True)
    diagnostics_period: float = param(0.5, "s between /diagnostics messages", lo=0.01, hi=60.0, read_only=True)


# Parameters several nodes read, each declared by the nodes that read it (a node that declared one it never read
# took a user's value without effect); one definition here, so default and meaning cannot drift apart.
_SHARED: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "reference_topic": ("/idyn/reference", "desired motion (idyn_ros/JointReference)", {"read_only": True}),
    "feedforward_topic": ("/idyn/feedforward", "idyn_ros/FeedforwardTorque", {"read_only": True}),
    "adaptation_topic": ("/idyn/adaptation", "idyn_ros/AdaptationState from doomed", {"read_only": True}),
    "controller_state_topic": ("/idyn/controller_state", "idyn_ros/ControllerState", {"read_only": True}),
    "command_topic": ("", "effort command (std_msgs/Float64MultiArray); '' = /<effort_controller>/commands of the "
                      "robot", {"read_only": True}),
    "model_path": ("", "exported .onnx model ('' = none: the fallback, reported at ERROR)", {"read_only": True}),
    "fallback": ("rbd", "feedforward without a usable model: rbd (nominal URDF RNEA), gravity (g(q) only) or none "
                 "(refuse to configure)", {"choices": FALLBACKS, "read_only": True}),
    "warmup_ticks": (PAPER_WARMUP_TICKS, "most warm-up steps of the model's recurrent state at the current state "
                     "before use (Reuss sec. VI: 500); it stops once the state no longer changes",
                     {"lo": 0, "hi": 100000, "read_only": True}),
}


def shared(name: str, description: str = "") -> Any:
    """The field of shared parameter ``name`` for a node that reads it (``description``: a node's own wording)."""
    default, text, spec = _SHARED[name]
    return param(default, description or text, **spec)


# Reuss et al. 2022 sec. V-C (Panda): soft 1, medium 50, stiff 400 on the two base joints and 200 elsewhere.
# Acceleration-space gains are inertia-normalised, so the same values serve every arm (decision).
PAPER_PRESETS = {"soft": (1.0, 1.0), "medium": (50.0, 50.0), "stiff": (400.0, 200.0)}


@dataclass(frozen=True)
class ControllerParams(CommonParams):
    reference_topic: str = shared("reference_topic")
    feedforward_topic: str = shared("feedforward_topic")
    adaptation_topic: str = shared("adaptation_topic")
    controller_state_topic: str = shared("controller_state_topic")
    command_topic: str = shared("command_topic")
    model_path: str = shared("model_path")
    fallback: str = shared("fallback")
    warmup_ticks: int = shared("warmup_ticks")
    position_command_topic: str = param(
        "", "joint positions sent with every torque (std_msgs/Float64MultiArray of the measured positions, robot "
        "order), for a torque mode that takes a position in the same cycle (lbr_fri_ros2_stack's FRI torque mode); "
        "'' = none (the launch sets /position_controller/commands for the iiwa14 on hardware)", read_only=True)
    feedforward_source: str = param(
        "embedded", "embedded: evaluate the model inside the controller (one hop, default); topic: use the "
        "feedforward node's FeedforwardTorque (feedforward_timeout applies)", choices=("embedded", "topic"),
        read_only=True)
    feedforward_timeout: float = param(
        0.01, "s; feedforward_source=topic: a feedforward received longer ago, or computed from a joint state "
        "stamped longer before the current one, sends the controller to safe mode", lo=0.0005, hi=10.0,
        only_with=("feedforward_source", ("topic",)))
    use_feedforward: bool = param(True, "false = pure feedback (for comparisons)")
    gain_preset: str = param("medium", "active gains: soft | medium | stiff (presets.<name>.kp)", choices=PRESET_NAMES)
    presets_soft_kp: tuple[float, ...] = param(
        (), "Kp of the soft preset (1/s^2 in acceleration space, Nm/rad in torque space); [] = 1 per joint "
        "(Reuss et al. 2022)", lo=0.0, hi=1e5, length="n", ros_name="presets.soft.kp")
    presets_medium_kp: tuple[float, ...] = param(
        (), "Kp of the medium preset; [] = 50 per joint (Reuss et al. 2022)", lo=0.0, hi=1e5, length="n",
        ros_name="presets.medium.kp")
    presets_stiff_kp: tuple[float, ...] = param(
        (), "Kp of the stiff preset; [] = 400 on joints 1-2, 200 on the others (Reuss et al. 2022, the lab "
        "default)", lo=0.0, hi=1e5, length="n", ros_name="presets.stiff.kp")
    damping_ratio: float = param(1.0, "zeta: Kd = 2 zeta sqrt(Kp) in acceleration space, 2 zeta sqrt(Kp M_jj) in "
                                 "torque space (M_jj at the neutral pose; critically damped at 1)", lo=0.0, hi=10.0)
    feedback_space: str = param("acceleration", "acceleration: tau_fb = M(q)(Kp e + Kd de); torque: tau_fb = Kp e "
                                "+ Kd de", choices=FEEDBACK_SPACES)
    feedback_armature: tuple[float, ...] = param(
        (), "kg m^2 per joint added to the diagonal of the feedback's M(q) (acceleration space: the torque per unit "
        "acceleration; torque space: Kd): the reflected rotor inertia a URDF without <armature> leaves out, on top "
        "of the model's own (the artifact's identified armature, else the URDF's); [] = none", lo=0.0, hi=100.0,
        length="n", read_only=True)
    effort_scale: float = param(1.0, "fraction of the URDF effort limits the command may use", lo=0.01, hi=1.0)
    torque_rate_limit: float = param(1000.0, "Nm/s per joint (<= 0 disables); Franka's is 1000", lo=-1.0, hi=1e6)
    stale_periods: float = param(3.0, "joint state older than this many periods -> safe mode (measured on the "
                                 "node's clock: sim time under use_sim_time)", lo=1.0, hi=1e6)
    max_stamp_age: float = param(0.05, "s; a joint state stamped longer ago than this on the node's clock is late "
                                 "input, and so is one stamped further ahead of it (the clocks of robot and "
                                 "controller must agree, as on one machine, with chrony/PTP, or under use_sim_time; "
                                 "0 = no check)", lo=0.0, hi=60.0)
    recovery_ticks: int = param(10, "after late input (stale state or feedforward): fresh samples in a row before "
                                "the law comes back", lo=1, hi=100000)
    recovery_ramp: float = param(0.2, "s over which the law's torque is blended back in from the safe torque after "
                                 "late input", lo=0.0, hi=10.0)
    max_recovery_silence: float = param(0.5, "s; late input during which no joint state came for longer does not "
                                        "recover by itself (the arm may have moved under the hold torque): latched "
                                        "until deactivate + activate, which holds the pose then (0 = always "
                                        "recover)", lo=0.0, hi=60.0)
    position_limit_margin: float = param(0.05, "rad; a joint measured this far past its URDF position limit sends the "
                                         "controller to safe mode (latched, like saturation; the vendor's own limit "
                                         "stop normally comes first on hardware; 0 = no check)", lo=0.0, hi=1.0)
    saturation_timeout: float = param(0.5, "s a joint's command may sit at its effort limit before the controller "
                                      "goes to safe mode (latched; 0 = never)", lo=0.0, hi=60.0)
    safe_mode: str = param("", "override the robot's safe mode: damping | zero ('' = the robot's)",
                           choices=("", "damping", "zero"))
    safe_damping: tuple[float, ...] = param((), "D of the damping hold, Nm s/rad; [] = 10 % of the effort limit "
                                            "per rad/s", lo=0.0, hi=1e4, length="n")
    subtract_gravity: bool = param(False, "the robot adds g(q) itself (vendor torque modes: true on hardware): send "
                                   "tau - g(q), and hold without g in safe mode; false: the command carries g(q) "
                                   "(simulators) and the safe hold adds g(q) of the last trusted state",
                                   read_only=True)
    use_adaptation: bool = param(True, "add the DOOMED offset from adaptation_topic")
    adaptation_timeout: float = param(0.05, "s; an older offset is dropped (set to zero, not a trip)", lo=0.001,
                                      hi=10.0)
    state_publish_divider: int = param(1, "publish ControllerState every k-th tick (doomed needs 1)", lo=1, hi=10000)

    def preset_kp(self, preset: str, n: int) -> tuple[float, ...]:
        """Kp of ``preset`` for n joints: the configured values, else the paper's rule."""
        values = getattr(self, f"presets_{preset}_kp")
        if values:
            return values
        base, rest = PAPER_PRESETS[preset]
        return tuple(base if j < 2 else rest for j in range(n))


@dataclass(frozen=True)
class JointStateBufferParams(CommonParams):
    state_estimate_topic: str = param("/idyn/joint_state_estimate", "the clean state it publishes "
                                      "(idyn_ros/JointStateEstimate)", read_only=True)
    accel_cutoff_hz: float = param(50.0, "Hz, 2nd-order Butterworth on the differenced velocity", lo=0.1, hi=5000.0,
                                   below_nyquist=True, read_only=True)
    max_gap_periods: float = param(3.0, "a longer gap between samples restarts the differentiators", lo=1.0, hi=1e6,
                                   read_only=True)
    use_measured_velocity: bool = param(True, "use the message's velocity (else difference q)", read_only=True)
    stale_timeout: float = param(0.01, "s without input before the buffer reports STALE on /diagnostics",
                                 lo=0.001, hi=60.0)


@dataclass(frozen=True)
class FeedforwardParams(CommonParams):
    reference_topic: str = shared("reference_topic")
    feedforward_topic: str = shared("feedforward_topic")
    model_path: str = shared("model_path")
    fallback: str = shared("fallback")
    warmup_ticks: int = shared("warmup_ticks")
    publish_parts: bool = param(True, "fill rbd/friction/residual (else total only)")


@dataclass(frozen=True)
class DoomedParams(CommonParams):
    adaptation_topic: str = shared("adaptation_topic")
    controller_state_topic: str = shared("controller_state_topic")
    model_path: str = shared("model_path")
    fallback: str = shared("fallback")
    # hi 1: no delay of a tick or more is stable above ~1 x M_jj (Ratliff summary sec. 1: 0.96 at one tick, 0.49 at two)
    learning_rate: float = param(0.05, "eta per tick at reference_rate_hz (Nm s^2/rad; x M_jj when inertia_scaled); "
                                 "paper 0.01-0.1; with inertia_scaled stable below ~0.5 at two ticks of delay",
                                 lo=0.0, hi=1.0)
    reference_rate_hz: float = param(1000.0, "rate learning_rate is given at (paper: 1 kHz)", lo=1.0, hi=1e5)
    momentum: float = param(0.9, "gamma (paper: 0.9 or 0.95)", lo=0.0, hi=0.9999)
    variance_gain: float = param(0.5, "alpha, s^4/rad^2 (paper: 0-0.5)", lo=0.0, hi=1e3)
    forgetting: float = param(0.0, "lambda, 1/(Nm s^2/rad): the learned offset's integrator decays by learning_rate x "
                              "forgetting per tick (must be < 1; 0 = no forgetting)", lo=0.0, hi=1e3)
    variance_tau: float = param(0.1, "s, running variance time constant", lo=0.001, hi=100.0)
    features: str = param("constant", "constant (f = w) or linear (per-joint features)",
                          choices=DOOMED_FEATURES, read_only=True)
    inertia_scaled: bool = param(True, "scale eta per joint by the model's M_jj(q) (eta then relative)")
    offset_limit: tuple[float, ...] = param((), "Nm per joint; [] = 15 % of the effort limit", lo=0.0, hi=1e4,
                                            length="n")
    osc_window: float = param(0.1, "s, oscillation-detector window", lo=0.005, hi=10.0)
    osc_rise_factor: float = param(3.0, "mean|e| rise over its recent minimum that counts", lo=1.0, hi=1e3)
    osc_min_error: float = param(0.5, "rad/s^2; ignore smaller mean|e|", lo=0.0, hi=1e4)
    osc_bias_ratio: float = param(0.3, "|mean e| < ratio * mean|e| counts as zero-mean", lo=0.0, hi=1.0)
    osc_consecutive: int = param(3, "suspicious windows in a row before freezing", lo=1, hi=1000)
    osc_tv_windows: int = param(5, "windows over which the offset's swing is judged", lo=2, hi=1000)
    osc_tv_ratio: float = param(4.0, "offset total variation > ratio x the range it covers counts as swinging", lo=1.0,
                                hi=1e3)
    osc_tv_fraction: float = param(4.0, "... and total variation > fraction x offset_limit", lo=0.0, hi=1e3)
    decay_tau: float = param(0.5, "s, offset decay after an oscillation freeze", lo=0.001, hi=1e3)
    enabled: bool = param(True, "false = publish a zero offset (learning frozen); disabling resets what was learned, "
                          "so re-enabling starts from zero")


@dataclass(frozen=True)
class WrenchObserverParams(CommonParams):
    command_topic: str = shared("command_topic")
    model_path: str = shared("model_path")
    fallback: str = shared("fallback")
    warmup_ticks: int = shared("warmup_ticks")
    primary: str = param("momentum", "which estimate goes to wrench_topic: momentum | direct",
                         choices=("momentum", "direct"))
    observer_gain: float = param(50.0, "K_O of the momentum observer, 1/s (bandwidth)", lo=0.1, hi=1e4)
    pinv_damping: float = param(0.01, "mu of the damped pseudo-inverse of J^T (an isotropic prior on the wrench)",
                                lo=0.0, hi=10.0)
    deadband_force: float = param(0.0, "N; smaller force components of the /direct and /momentum topics are reported "
                                  "as 0 (never on wrench_topic: the contact flag says what is significant)", lo=0.0,
                                  hi=1e4)
    deadband_torque: float = param(0.0, "Nm; as deadband_force, for moments", lo=0.0, hi=1e4)
    lowpass_cutoff_hz: float = param(0.0, "Hz, first-order low-pass on the /direct and /momentum wrenches (0 = off)",
                                     lo=0.0, hi=5000.0, below_nyquist=True)
    torque_source: str = param("command", "actuator torque: command (the effort command topic) or effort "
                               "(/joint_states effort; on hardware, where the command lacks g(q))",
                               choices=("command", "effort"), read_only=True)
    effort_unit: str = param("auto", "what /joint_states effort is (torque_source effort): auto (what the model was "
                             "trained on: motor current for a model trained on a UR's currents, or when "
                             "torque_constants are set), torque [Nm], or "
                             "current [A] (tau = k i; a UR driver's default)", choices=EFFORT_UNITS,
                             read_only=True, only_with=("torque_source", ("effort",)))
    torque_constants: tuple[float, ...] = param((), "Nm/A per joint for current efforts; [] = the model's identified "
                                                "gains, else the robot data's", lo=1e-6, hi=1e4, length="n",
                                                read_only=True, only_with=("torque_source", ("effort",)))
    min_singular_value: float = param(0.05, "wrench directions whose singular value of J is smaller are not "
                                      "estimated and are flagged (rank, diagnostics) instead of shrunk silently",
                                      lo=0.0, hi=10.0)
    contact_model: str = param("wrench", "wrench: any wrench at the flange; point: a contact near the flange, whose "
                               "moment there is about point_moment_nm (forces then come with redundancy)",
                               choices=("wrench", "point"))
    point_moment_nm: float = param(1.0, "Nm, 1-sigma of the moment a point contact transmits at the flange origin",
                                   lo=1e-6, hi=1e4)
    auto_rezero: bool = param(True, "re-zero at rest by itself (still for rest_time, estimate steady, no contact "
                              "detected; at a new pose the first rest window is taken as contact-free)")
    contact_expected: bool = param(False, "a contact may hold while the arm comes to rest: no automatic re-zero")
    rest_velocity: float = param(0.01, "rad/s; every joint slower = still (left above twice this)", lo=1e-6, hi=10.0)
    rest_time: float = param(0.5, "s still before a re-zero window, and its length", lo=0.01, hi=60.0)
    pose_tolerance: float = param(0.05, "rad; this close (every joint) to the last re-zero's pose keeps its bias and "
                                  "the rest sigma", lo=0.0, hi=10.0)
    settle_time: float = param(2.0, "s; with auto_rezero, a flagged contact that stays steady this long at rest is "
                               "taken as friction holding part of a past push and zeroed (0 = never)", lo=0.0,
                               hi=3600.0)
    contact_on_sigma: float = param(6.0, "contact when the force is this many sigma from zero (6, not 3-4: sigma "
                                    "comes from contact-free data; see control/wrench_trust.py)", lo=0.1, hi=1e3)
    contact_off_sigma: float = param(3.0, "contact released below this many sigma (<= contact_on_sigma)", lo=0.1,
                                     hi=1e3)
    stiction_band: bool = param(True, "at standstill, report per joint the external torque closest to zero that the "
                                "model's break-away friction allows (a joint held by static friction shows no "
                                "contact); off without a friction model")
    tau_sigma: tuple[float, ...] = param((), "Nm per joint, 1-sigma of the model torque while moving; [] = the model's "
                                         "validation RMSE, else 5 % of the effort limit", lo=0.0, hi=1e4, length="n",
                                         read_only=True)
    tau_sigma_rest: tuple[float, ...] = param((), "Nm per joint, after a re-zero at rest; [] = the model's "
                                              "within-rest spread, else a fifth of tau_sigma", lo=0.0, hi=1e4,
                                              length="n", read_only=True)
    accel_cutoff_hz: float = param(20.0, "Hz; low-pass of the acceleration for the direct residual", lo=0.1,
                                   hi=5000.0, below_nyquist=True, read_only=True)
    frame_id_base: str = param("", "header.frame_id of the base-frame wrench ('' = the robot's base link)",
                               read_only=True)
    wrench_topic: str = param("/idyn/wrench_estimate", "geometry_msgs/WrenchStamped (base axes), the trusted "
                              "estimate; also <topic>/tool (flange axes), /sigma (1-sigma, flange axes), /hidden "
                              "(the most force the stiction band can hide, flange axes), /contact (std_msgs/Bool), "
                              "/direct and /momentum (raw, base axes)", read_only=True)
    external_torque_topic: str = param("/idyn/external_torque", "sensor_msgs/JointState, effort = tau_ext",
                                       read_only=True)
    publish_divider: int = param(0, "publish the estimates every k-th state (the observers still update every "
                                 "tick; the trust stage runs on published states); 0 = auto: about 250 Hz, k = "
                                 "round(rate_hz / 250), at least 1 (4 at 1 kHz, 1 at 125 Hz)", lo=0, hi=1000)


@dataclass(frozen=True)
class WorkspaceParams(CommonParams):
    """Where a node moves the arm (``idyn_ros.data.workspace``): above its mounting plane, out of its base column."""

    workspace_check: bool = param(True, "keep the arm's moves and designed excitations in the workspace below (false: "
                                  "joint limits only, an arm on a wall or ceiling; as `idyn excite --no-workspace`)",
                                  read_only=True)
    workspace_floor: float = param(0.10, "m the joints after the second, the flange and the tool tip stay above the "
                                   "mounting plane (as `idyn excite --floor`)", lo=-10.0, hi=10.0, read_only=True)
    workspace_tool_length: float = param(0.10, "m from the flange to the tool tip checked with it", lo=0.0, hi=2.0,
                                         read_only=True)
    workspace_base_clearance: float = param(0.15, "m the wrist, flange and tool tip stay from the base axis below the "
                                            "shoulder", lo=0.0, hi=2.0, read_only=True)


@dataclass(frozen=True)
class ReferenceParams(WorkspaceParams):
    reference_topic: str = shared("reference_topic")
    mode: str = param("hold", "hold (current q) | setpoints (min-jerk) | npz (excitation file) | trajectory "
                      "(wait for ~/joint_trajectory); a move past a joint's position, velocity or acceleration limit, "
                      "or out of the workspace (workspace_*), is refused (the node holds; acceleration: where the arm "
                      "has its own, the Panda's)",
                      choices=("hold", "setpoints", "npz", "trajectory"))
    setpoints: tuple[float, ...] = param((), "rad, k set points flattened (k*n values), inside the joint limits",
                                         length="n*k", only_with=("mode", ("setpoints",)))
    durations: tuple[float, ...] = param((), "s of the min-jerk move to each set point (k values; the first from the "
                                         "current pose); one peaking above a joint's velocity limit (1.875 x distance "
                                         "/ duration) or acceleration limit (5.77 x distance / duration^2) is "
                                         "refused", lo=0.0, hi=1e5, only_with=("mode", ("setpoints",)))
    start_delay: float = param(1.0, "s to hold the start pose before the first move (npz: before the move to q_d[0], "
                               "which then takes what its distance needs at half the velocity and acceleration "
                               "limits)", lo=0.0,
                               hi=1e5)
    npz_path: str = param("", "trajectory .npz (q_d/dq_d/ddq_d or q/dq/ddq; refused if it leaves the position, "
                          "velocity or acceleration limits, or the workspace: the one `idyn excite` recorded in it, "
                          "else workspace_*), played after start_delay and the move to its first point",
                          only_with=("mode", ("npz",)))
    loop: bool = param(False, "restart the trajectory when it ends")
    lookahead_periods: float = param(1.0, "sample the reference this many periods ahead of the state stamp (the "
                                     "controller uses it one hop later)", lo=0.0, hi=100.0)
    controller_node: str = param("/controller", "the controller's lifecycle node: while it is not active the reference "
                                 "follows the measured pose, and on its activation the mode restarts from there ('' = "
                                 "ignore it)", read_only=True)


@dataclass(frozen=True)
class PayloadIdentifierParams(WorkspaceParams):
    """The ``~/identify_payload`` service (``idyn_ros.nodes.payload_identifier``); not in the default graph."""

    reference_topic: str = shared("reference_topic")
    controller_state_topic: str = shared("controller_state_topic")
    model_path: str = shared("model_path", "model of the bare arm (.onnx) the payload is identified against "
                             "without a bare-arm recording (baseline_path, record_baseline); '' = one is needed")
    excitation_path: str = param("", "payload excitation .npz (`idyn excite --payload`); '' = design one at start "
                                 "(design_budget s of optimiser time)", read_only=True)
    design_budget: float = param(20.0, "s of optimiser time when excitation_path is empty", lo=1.0, hi=3600.0,
                                 read_only=True, only_with=("excitation_path", ("",)))
    reference_node: str = param("/reference", "the reference node whose ~/joint_trajectory plays the excitation",
                                read_only=True)
    set_payload_services: tuple[str, ...] = param(
        ("/controller/set_payload", "/feedforward/set_payload", "/wrench_observer/set_payload", "/doomed/set_payload"),
        "idyn_ros/SetPayload services an identification with apply=true sends the result to")
    baseline_path: str = param("", "bare-arm recording (.npz) the payload is identified against; a call with "
                               "record_baseline=true writes it ('' = kept in memory); without one, model_path is the "
                               "bare arm")
    result_path: str = param("", "JSON written after each identification: result, standard deviations, vendor forms "
                             "('' = none)")
    move_speed: float = param(0.2, "fraction of the velocity/acceleration limits of the move to the excitation's "
                              "start", lo=0.01, hi=1.0)
    settle_s: float = param(1.0, "s held at the excitation's start before it plays", lo=0.0, hi=60.0)
    point_rate_hz: float = param(100.0, "JointTrajectory points per second sent to the reference node", lo=10.0,
                                 hi=1000.0)
    wall_timeout: float = param(600.0, "s (wall) an identification may take before it is abandoned", lo=1.0,
                                hi=86400.0)


@dataclass(frozen=True)
class GripperCompensationParams(CommonParams):
    """Gripper compensation of a flange F/T sensor (``idyn_ros.nodes.gripper_compensation``); not in the default
    graph."""

    warmup_ticks: int = shared("warmup_ticks")
    ft_topic: str = param("/ft_sensor/wrench", "the F/T sensor (geometry_msgs/WrenchStamped, flange frame, what the "
                          "tool side applies to the flange)", read_only=True)
    compensated_topic: str = param("", "reading minus the gripper's predicted wrench ('' = <ft_topic>/compensated); "
                                   "the prediction goes to <ft_topic>/gripper", read_only=True)
    gripper_model_path: str = param("", "model of the robot WITH its gripper (.onnx, e.g. delan-lstm); '' = the "
                                    "RBD-only form from gripper_mass/com/inertia", read_only=True)
    arm_model_path: str = param("", "model of the bare arm (.onnx) subtracted from the gripper model; '' = the nominal "
                                "URDF's RNEA", read_only=True)
    gripper_mass: float = param(0.0, "kg, the gripper's nominal (CAD) mass for the RBD-only form", lo=0.0, hi=1000.0,
                                read_only=True)
    gripper_com: tuple[float, ...] = param((0.0, 0.0, 0.0), "m, its CoM in the flange frame", lo=-10.0, hi=10.0,
                                           read_only=True)
    gripper_inertia: tuple[float, ...] = param((0.0,) * 6, "kg m^2, ixx ixy ixz iyy iyz izz about its CoM", lo=-100.0,
                                               hi=100.0, read_only=True)
    pinv_damping: float = param(0.01, "mu of the damped pseudo-inverse of J^T", lo=0.0, hi=10.0)
    accel_cutoff_hz: float = param(20.0, "Hz; low-pass of the acceleration and of the reading", lo=0.1, hi=5000.0,
                                   below_nyquist=True, read_only=True)


@dataclass(frozen=True)
class PlantParams(RobotParams):
    """The embedded MuJoCo plant (``idyn_ros.nodes.plant``), standing in for ros2_control + the robot."""

    rate_hz: float = param(1000.0, "command/state rate (Hz), the ros2_control update rate", lo=1.0, hi=10000.0,
                           read_only=True)
    profile: str = param("true", "plant profile: ideal | nominal | true | path to a profile YAML "
                         "(config/profiles/README.md)", read_only=True)
    physics_rate: float = param(1000.0, "MuJoCo steps per second (Hz); an integer multiple of rate_hz", lo=1.0,
                                hi=100000.0, read_only=True)
    clock_mode: str = param("lockstep", "lockstep (sim time on /clock, waits for each command, deterministic) | "
                            "realtime (wall-clock timer)", choices=("lockstep", "realtime"), read_only=True)
    command_timeout: float = param(0.1, "realtime: s without a valid command before the drive applies zero torque",
                                   lo=0.001, hi=60.0, read_only=True, only_with=("clock_mode", ("realtime",)))
    lockstep_wait: float = param(1.0, "lockstep: s (wall) the plant waits for the answer to a state before it lets "
                                 "one period pass at zero torque (a controller that died); sim time, and so the "
                                 "controllers' clock, stands still meanwhile", lo=0.001, hi=600.0, read_only=True,
                                 only_with=("clock_mode", ("lockstep",)))
    lockstep_subscribers: int = param(0, "lockstep: /joint_states subscriptions the plant waits for, braked and "
                                      "ignoring commands, before the first command starts the loop (so a recorder "
                                      "started beside the controller misses no state); 0 = start on the first "
                                      "command", lo=0, hi=1000, read_only=True, only_with=("clock_mode", ("lockstep",)))
    on_bad_command: str = param("reject", "commands beyond the effort limits: reject (keep the previous) | clamp",
                                choices=("reject", "clamp"), read_only=True)
    initial_positions: tuple[float, ...] = param((), "rad at start, robot joint order; [] = 0 clipped into each "
                                                 "joint's range", length="n", read_only=True)
    seed: int = param(0, "seed of the sensor noise", lo=0, hi=2**31 - 1, read_only=True)
    controller: str = param("", "effort controller name; '' = the robot's effort_controller", read_only=True)
    ground_truth_decimation: int = param(1, "publish ~/ground_truth every N ticks while a wrench acts (otherwise "
                                         "every 100 ticks and on every service call)", lo=1, hi=100000,
                                         read_only=True)
    diagnostics_period: float = param(1.0, "s (wall) between /diagnostics messages", lo=0.01, hi=60.0,
                                      read_only=True)
    ft_sensor_topic: str = param("", "publish a flange force/torque sensor on this topic (geometry_msgs/WrenchStamped, "
                                 "flange frame, what the attached payload and contact apply to the flange; "
                                 "idyn_ros/sim/ft_sensor.py); '' = no sensor", read_only=True)


@dataclass(frozen=True)
class RecorderParams(NodeParams):
    """The rosbag2 recorder behind ``idyn record``."""

    output: str = param("", "bag folder to create (required, must not exist)", read_only=True)
    storage: str = param("mcap", "rosbag2 storage: mcap | sqlite3", choices=("mcap", "sqlite3"), read_only=True)
    topics: tuple[str, ...] = param(("/joint_states",), "topics to record", read_only=True)
    qos_depth: int = param(10000, "subscription queue depth per topic (KEEP_LAST; RELIABLE when all of the topic's "
                           "publishers are, else BEST_EFFORT): what a slow disk may fall behind by", lo=1, hi=1000000,
                           read_only=True)
    flush_period: float = param(0.5, "s between flushes to disk (what a SIGKILL can lose at most)", lo=0.01,
                                hi=60.0, read_only=True)
    effort_kind: str = param("", "what the joint states' effort is, written into the bag (metadata.yaml custom_data "
                             "effort_kind) so that import, train and wrench read it without a flag: torque | current "
                             "(a UR driver's default: motor current) | '' (not stated)",
                             choices=("", "torque", "current"), read_only=True)


NODES: dict[str, type[NodeParams]] = {
    "controller": ControllerParams,
    "joint_state_buffer": JointStateBufferParams,
    "feedforward": FeedforwardParams,
    "doomed": DoomedParams,
    "wrench_observer": WrenchObserverParams,
    "reference": ReferenceParams,
    "payload_identifier": PayloadIdentifierParams,
    "gripper_compensation": GripperCompensationParams,
    "plant": PlantParams,
    "recorder": RecorderParams,
}


def params_class(node: str) -> type[NodeParams]:
    if node not in NODES:
        raise ParameterError(f"no parameters for node '{node}' (known: {sorted(NODES)})")
    return NODES[node]


# ------------------------------------------------------------------------------------------ files
def section_matches(key: str, node_name: str) -> bool:
    """Does a parameter-file section ``key`` address node ``node_name`` (root namespace, as ours run)? rcl's rule:
    the key's names between slashes (the leading slash optional) against the node's full name, ``*`` one name,
    ``**`` any number: ``/**``, ``/*``, ``/**/name`` and ``/name`` reach it; ``/ns/name`` and ``/*/name`` do not
    (checked against rclpy in test/nodes/test_graph_parameters.py)."""
    return _names_match(key.strip("/").split("/"), [node_name])


def _names_match(pattern: list[str], names: list[str]) -> bool:
    if not pattern:
        return not names
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_names_match(rest, names[i:]) for i in range(len(names) + 1))
    return bool(names) and head in ("*", names[0]) and _names_match(rest, names[1:])


def _flatten(prefix: str, node: Any, out: dict[str, Any]) -> dict[str, Any]:
    """Nested YAML -> dotted names (``presets: {soft: {kp: [...]}}`` -> ``presets.soft.kp``), as rcl does."""
    if isinstance(node, dict):
        for k, v in node.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = node
    return out


_RCL_TRUE = frozenset(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"])
_RCL_FALSE = frozenset(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"])
_RCL_SPECIAL_FLOATS = {f"{sign}.{word}": float(f"{sign or '+'}inf") for sign in ("", "+", "-")
                       for word in ("inf", "Inf", "INF")} | {f".{word}": float("nan") for word in ("nan", "NaN", "NAN")}
_C_INTEGER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")  # strtoll, base 0
_C_DECIMAL_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|infinity|nan)",
                              re.IGNORECASE)  # strtod
_C_HEX_FLOAT = re.compile(r"[-+]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][-+]?[0-9]+)?")
_INT64 = 2**63


def rcl_scalar(text: str) -> bool | int | float | str:
    """An unquoted YAML scalar as rcl's parameter parser reads it (rcl_yaml_param_parser get_value): the YAML 1.1 bool
    words, then a C integer (strtoll base 0: ``010`` is 8), then a C double (``089``, ``inf``, ``.nan``), else text.
    PyYAML differs on ``1_000``, ``2026-01-01``, ``1:30``, ``0b11`` (text for rcl), ``y``/``n`` and ``NaN``."""
    if text in _RCL_TRUE or text in _RCL_FALSE:
        return text in _RCL_TRUE
    if _C_INTEGER.fullmatch(text):
        sign, digits = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
        base = 16 if digits[:2] in ("0x", "0X") else 8 if digits.startswith("0") and len(digits) > 1 else 10
        value = sign * int(digits[2:] if base == 16 else digits, base)
        if -_INT64 <= value < _INT64:  # beyond int64 strtoll fails and strtod takes it
            return value
    if text in _RCL_SPECIAL_FLOATS:
        return _RCL_SPECIAL_FLOATS[text]
    if _C_DECIMAL_FLOAT.fullmatch(text):
        value = float(text)
        return value if math.isfinite(value) or re.search("inf|nan", text, re.IGNORECASE) else text  # ERANGE
    if _C_HEX_FLOAT.fullmatch(text):
        return float.fromhex(text)
    return text


_NO_VALUE = frozenset(("", "~", "null", "Null", "NULL"))


@functools.cache
def rcl_yaml_loader() -> Any:
    """A SafeLoader that reads scalars as rcl does (``rcl_scalar``; quoted ones stay text). The YAML 1.1 rules read
    ``5e-2`` as text, which the in-process loader then refused, and ``1_000`` as 1000 where a node got the string.
    An empty scalar and YAML's null words load as None, which the graph's checks refuse by name (rcl refuses the
    empty one and reads ``null`` as the string 'null')."""
    import yaml

    class RclLoader(yaml.SafeLoader):
        yaml_implicit_resolvers: ClassVar[dict] = {}  # every scalar is text here; the constructor below decides

        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            if isinstance(node, yaml.MappingNode):  # names stay text (a parameter called `on` is not True)
                self.flatten_mapping(node)
                return {self.construct_scalar(k) if isinstance(k, yaml.ScalarNode) else self.construct_object(k, deep):
                        self.construct_object(v, deep) for k, v in node.value}
            return super().construct_mapping(node, deep)

        def construct_sequence(self, node: Any, deep: bool = False) -> list:
            items = super().construct_sequence(node, deep)
            kinds = {type(v).__name__ for v in items}
            if len(kinds) > 1:  # rcl refuses the whole file ("Sequence should be of same type")
                raise yaml.constructor.ConstructorError(
                    None, None, f"a list mixes {' and '.join(sorted(kinds))} values, which rcl refuses (write 1.0, "
                    "not 1, in a list of decimals)", node.start_mark)
            return items

    def scalar(loader: Any, node: Any) -> Any:
        text = loader.construct_scalar(node)
        if node.style is not None:  # quoted: text, as rcl keeps it
            return text
        return None if text in _NO_VALUE else rcl_scalar(text)

    RclLoader.add_constructor("tag:yaml.org,2002:str", scalar)
    return RclLoader


def read_parameter_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """{section key: {ROS name: value}} of a ROS parameter file, nested names flattened; ParameterError if broken."""
    import yaml

    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=rcl_yaml_loader()) or {}  # a SafeLoader
    except (OSError, yaml.YAMLError) as exc:
        raise ParameterError(f"cannot read parameter file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ParameterError(f"parameter file {path} is not a mapping of node sections")
    out = {}
    for key, body in data.items():
        params = body.get("ros__parameters") if isinstance(body, dict) else None
        if not isinstance(params, dict):
            raise ParameterError(f"{path}: section {key!r} has no ros__parameters mapping")
        out[str(key)] = _flatten("", params, {})
    return out


def file_values(files: Sequence[str | Path], node_name: str) -> dict[str, Any]:
    """{ROS name: value} for ``node_name`` from parameter files, with the precedence rclpy applies.

    rcl merges all files into one table of sections keyed by node pattern, in the order each key first
    appears; a later file overwrites values under the same key; rclpy then applies the matching sections in
    that order. So ``/**`` (first seen in the robot file) is applied before ``/**/controller``, whichever
    file sets it. Tested against a real rclpy node in test/nodes.
    """
    sections: dict[str, dict[str, Any]] = {}
    for path in files:
        for key, params in read_parameter_file(path).items():
            sections.setdefault(key, {}).update(params)
    out: dict[str, Any] = {}
    for key, params in sections.items():
        if section_matches(key, node_name):
            out.update(params)
    return out


def robot_file(robot: str) -> Path:
    """config/<robot>.yaml."""
    from idyn_ros.paths import config_dir

    return config_dir() / f"{robot}.yaml"


def load(node: str, robot: str, files: Sequence[str | Path] | None = None,
         overrides: Mapping[str, Any] | None = None, n: int | None = None) -> Any:
    """The typed parameters ``node`` gets when started for ``robot`` from ``files`` (default config/<robot>.yaml)
    with ``overrides`` on top: what the simulator loop, benchmarks and ``idyn`` commands use, with the same
    precedence the ROS nodes see."""
    files = [robot_file(robot)] if files is None else list(files)
    values = file_values(files, node)
    values.update(overrides or {})
    if "robot" in values and values["robot"] != robot and "robot" not in (overrides or {}):
        raise ParameterError(f"{files[0]} is for robot {values['robot']!r}, not {robot!r}")
    cls = params_class(node)
    if "robot" in {p.name for p in cls.table()}:
        values["robot"] = robot
    return cls.from_values(values, n)


# ------------------------------------------------------------------------------------------ docs
def render_markdown() -> str:
    """docs/parameters.md: every node's parameters (a test keeps the file equal to this)."""
    lines = ["# Parameters", "",
             "Generated from `idyn_ros/parameters.py` by `python -m idyn_ros.parameters > docs/parameters.md`; do "
             "not edit by hand. Values per robot: `config/<robot>.yaml` (only what differs from these defaults). "
             "Read-only parameters take effect at configure time and are refused at run time. A name no node "
             "declares (a typo) stops the node at start-up, and `ros2 launch` / `idyn bringup` refuse it in a "
             "parameter file. An integer given for a double (`2` for `2.0`, in a file, a launch argument or `ros2 "
             "param set`) is taken as the double.", ""]
    for name, cls in NODES.items():
        own = [p for p in cls.table() if not _inherited(cls, p.attr)]
        base = [b.__name__ for b in cls.__mro__[1:] if b not in (NodeParams, object) and dataclasses.is_dataclass(b)]
        lines += [f"## {name}", ""]
        if cls.__doc__ and not cls.__doc__.startswith(cls.__name__):
            lines += [_summary(cls), ""]
        if base:
            lines += [f"Also: the parameters of {', '.join(f'`{b}`' for b in base)}.", ""]
        lines += _rows(own)
    for cls in (RobotParams, CommonParams, WorkspaceParams):
        own = [p for p in cls.table() if not _inherited(cls, p.attr)]
        lines += [f"## `{cls.__name__}`", "", _summary(cls), "", *_rows(own)]
    return "\n".join(lines).rstrip() + "\n"


def _summary(cls: type) -> str:
    """The docstring's first paragraph on one line (its first line alone cuts a wrapped sentence)."""
    return " ".join(inspect.cleandoc(cls.__doc__).split("\n\n")[0].split())


def _inherited(cls: type, attr: str) -> bool:
    return any(attr in getattr(b, "__dataclass_fields__", {}) for b in cls.__mro__[1:])


def _rows(params: list[Param]) -> list[str]:
    out = ["| name | type | default | bounds | description |", "|---|---|---|---|---|"]
    for p in params:
        bounds = " / ".join(p.choices) if p.choices else (
            f"[{p.lo:g}, {p.hi:g}]" if p.lo is not None and p.hi is not None else "")
        default = json.dumps(list(p.default) if isinstance(p.default, tuple) else p.default)
        flag = (f" (only with {p.only_with_text()})" if p.only_with else "") + (" (read-only)" if p.read_only else "")
        text = f"{p.description}{flag}".replace("|", "\\|")
        out.append(f"| `{p.name}` | {p.type} | `{default}` | {bounds.replace('|', '/')} | {text} |")
    return [*out, ""]


if __name__ == "__main__":
    print(render_markdown(), end="")
