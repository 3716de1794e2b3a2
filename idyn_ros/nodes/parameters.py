"""Every parameter of our nodes, declared once: type, default, unit/description, bounds, per-joint length.

The idea of ros2_controllers' generate_parameter_library (not installable here) with a small loader:
a node calls ``declare(node, NODE)`` in its constructor/on_configure, reads values with ``values``,
and registers ``make_validator`` as its on-set-parameters callback, so a bad value (negative gain,
wrong length, unknown preset) is rejected with a reason instead of reaching the control law.
``config/<robot>.yaml`` holds the values per robot; ``render_markdown()`` renders this table as docs;
tests check that every key in the YAML files is declared here and vice versa.

Per-joint arrays have ``length="n"``: their length must equal the number of joints (from the robot).
An empty array default means "take it from the robot description" where the description says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idyn_ros.errors import ParameterError

Validator = Callable[[str, Any, Mapping[str, Any]], str | None]


@dataclass(frozen=True)
class Param:
    """One parameter: ``type`` in bool|int|double|string|double_array|string_array."""

    name: str
    type: str
    default: Any
    description: str
    lo: float | None = None  # inclusive bounds for numbers / every element of arrays
    hi: float | None = None
    choices: tuple[str, ...] = ()
    length: str | int | None = None  # "n" = number of joints; "n*k" = multiple of n; int = fixed
    read_only: bool = False  # only at configure time (needs a cleanup/configure cycle)
    validators: tuple[str, ...] = field(default_factory=tuple)


def _p(*args: Any, **kwargs: Any) -> Param:
    return Param(*args, **kwargs)


# ---------------------------------------------------------------- shared by every node (/** section)
COMMON = [
    _p("robot", "string", "panda", "robot preset (panda|iiwa14|ur5); joint order, limits and URDF come from it",
       choices=("panda", "iiwa14", "ur5"), read_only=True),
    _p("prefix", "string", "", "joint/link name prefix ('' = vendor default)", read_only=True),
    _p("rate_hz", "double", 1000.0, "control rate (Hz): the rate /joint_states arrives at", lo=1.0, hi=10000.0,
       read_only=True),
    _p("joint_states_topic", "string", "/joint_states", "input joint states (sensor_msgs/JointState)",
       read_only=True),
    _p("reference_topic", "string", "/idyn/reference", "desired motion (idyn_ros/JointReference)", read_only=True),
    _p("state_estimate_topic", "string", "/idyn/joint_state_estimate", "clean state from joint_state_buffer",
       read_only=True),
    _p("feedforward_topic", "string", "/idyn/feedforward", "idyn_ros/FeedforwardTorque", read_only=True),
    _p("adaptation_topic", "string", "/idyn/adaptation", "idyn_ros/AdaptationState from doomed", read_only=True),
    _p("controller_state_topic", "string", "/idyn/controller_state", "idyn_ros/ControllerState", read_only=True),
    _p("command_topic", "string", "", "effort command (std_msgs/Float64MultiArray); '' = "
       "/<effort_controller>/commands from the robot spec", read_only=True),
    _p("model_path", "string", "", "exported .onnx model ('' = none: fallback, loudly)", read_only=True),
    _p("fallback", "string", "rbd", "feedforward without a usable model: rbd (nominal URDF RNEA), "
       "gravity (g(q) only) or none (refuse to configure)", choices=("rbd", "gravity", "none"), read_only=True),
    _p("warmup_ticks", "int", 500, "LSTM warm-up steps at the current state before use (Reuss sec. VI: 500)",
       lo=0, hi=100000, read_only=True),
    _p("diagnostics_period", "double", 0.5, "s between /diagnostics messages", lo=0.01, hi=60.0),
]

CONTROLLER = [
    _p("feedforward_source", "string", "embedded", "embedded: evaluate the model inside the controller "
       "(one hop, default); topic: use the feedforward node's FeedforwardTorque (watchdog timeout applies)",
       choices=("embedded", "topic"), read_only=True),
    _p("feedforward_timeout", "double", 0.01, "s; feedforward_source=topic: feedforward received longer ago, or "
       "computed from a joint state stamped longer before the current one, trips the watchdog", lo=0.0005, hi=10.0),
    _p("use_feedforward", "bool", True, "false = pure feedback (for comparisons)"),
    _p("gain_preset", "string", "medium", "active gains: soft|medium|stiff (presets.<name>.kp)",
       choices=("soft", "medium", "stiff")),
    _p("presets.soft.kp", "double_array", [1.0] * 7, "Kp of the soft preset (1/s^2 in acceleration space, "
       "Nm/rad in torque space)", lo=0.0, hi=1e5, length="n"),
    _p("presets.medium.kp", "double_array", [50.0] * 7, "Kp of the medium preset", lo=0.0, hi=1e5, length="n"),
    _p("presets.stiff.kp", "double_array", [400.0, 400.0, 200.0, 200.0, 200.0, 200.0, 200.0],
       "Kp of the stiff preset (Reuss: the lab default)", lo=0.0, hi=1e5, length="n"),
    _p("damping_ratio", "double", 1.0, "Kd = 2 zeta sqrt(Kp) (critically damped at 1)", lo=0.0, hi=10.0),
    _p("feedback_space", "string", "acceleration", "acceleration: tau_fb = M(q)(Kp e + Kd de); "
       "torque: tau_fb = Kp e + Kd de", choices=("acceleration", "torque")),
    _p("effort_scale", "double", 1.0, "fraction of the URDF effort limits the command may use", lo=0.01, hi=1.0),
    _p("torque_rate_limit", "double", 1000.0, "Nm/s per joint (<= 0 disables); Franka's is 1000",
       lo=-1.0, hi=1e6),
    _p("stale_periods", "double", 3.0, "joint state older than this many periods -> safe mode (lockstep "
       "sims: large, the plant waits for us)", lo=1.0, hi=1e6),
    _p("check_stamp_age", "bool", False, "also compare the message stamp with this node's clock (needs "
       "synchronised clocks / use_sim_time)"),
    _p("safe_mode", "string", "", "override the robot spec's safe mode: damping|zero ('' = spec)",
       choices=("", "damping", "zero")),
    _p("safe_damping", "double_array", [], "D of the damping hold, Nm s/rad ('' -> 10 % of effort limit "
       "per rad/s)", lo=0.0, hi=1e4, length="n"),
    _p("safe_gravity_compensation", "bool", False, "add g(q) of the last trusted state to the damping hold "
       "(for plants that do not compensate gravity themselves)"),
    _p("subtract_gravity", "bool", False, "send tau - g(q): the robot adds g(q) itself (RobotSpec."
       "hardware_adds_gravity; true for mode:=hardware on all three arms)", read_only=True),
    _p("use_adaptation", "bool", True, "add the DOOMED offset from adaptation_topic"),
    _p("adaptation_timeout", "double", 0.05, "s; an older offset is dropped (set to zero, not a trip)",
       lo=0.001, hi=10.0),
    _p("state_publish_divider", "int", 1, "publish ControllerState every k-th tick (doomed needs 1)",
       lo=1, hi=10000),
]

JOINT_STATE_BUFFER = [
    _p("accel_cutoff_hz", "double", 50.0, "Hz, 2nd-order Butterworth on the differenced velocity",
       lo=0.1, hi=5000.0, validators=("below_nyquist",)),
    _p("max_gap_periods", "double", 3.0, "a longer gap between samples restarts the differentiators",
       lo=1.0, hi=1e6),
    _p("use_measured_velocity", "bool", True, "use the message's velocity (else difference q)"),
    _p("stale_timeout", "double", 0.01, "s without input before the buffer reports STALE on /diagnostics",
       lo=0.001, hi=60.0),
]

FEEDFORWARD = [
    _p("publish_parts", "bool", True, "fill rbd/friction/residual (else total only)"),
]

DOOMED = [
    _p("learning_rate", "double", 0.02, "eta per tick at reference_rate_hz (Nm s^2/rad; x M_jj when "
       "inertia_scaled); paper: 0.01-0.1", lo=0.0, hi=100.0),
    _p("reference_rate_hz", "double", 1000.0, "rate learning_rate is given at (paper: 1 kHz)", lo=1.0, hi=1e5),
    _p("momentum", "double", 0.9, "gamma (paper: 0.9 or 0.95)", lo=0.0, hi=0.9999),
    _p("variance_gain", "double", 0.5, "alpha, s^4/rad^2 (paper: 0-0.5)", lo=0.0, hi=1e3),
    _p("forgetting", "double", 0.0, "lambda per tick (0 = none)", lo=0.0, hi=1e3),
    _p("variance_tau", "double", 0.1, "s, running variance time constant", lo=0.001, hi=100.0),
    _p("features", "string", "constant", "constant (f = w) or linear (per-joint features)",
       choices=("constant", "linear"), read_only=True),
    _p("inertia_scaled", "bool", True, "scale eta per joint by the model's M_jj(q) (eta then relative)"),
    _p("offset_limit", "double_array", [], "Nm per joint ('' -> 5 % of the effort limit)", lo=0.0, hi=1e4,
       length="n"),
    _p("osc_window", "double", 0.1, "s, oscillation-detector window", lo=0.005, hi=10.0),
    _p("osc_rise_factor", "double", 3.0, "mean|e| rise over its recent minimum that counts", lo=1.0, hi=1e3),
    _p("osc_min_error", "double", 0.5, "rad/s^2; ignore smaller mean|e|", lo=0.0, hi=1e4),
    _p("osc_bias_ratio", "double", 0.3, "|mean e| < ratio * mean|e| counts as zero-mean", lo=0.0, hi=1.0),
    _p("osc_consecutive", "int", 3, "suspicious windows in a row before freezing", lo=1, hi=1000),
    _p("osc_tv_windows", "int", 5, "windows over which the offset's swing is judged", lo=2, hi=1000),
    _p("osc_tv_ratio", "double", 4.0, "offset total variation > ratio x net change counts as swinging",
       lo=1.0, hi=1e3),
    _p("osc_tv_fraction", "double", 0.5, "... and total variation > fraction x offset_limit", lo=0.0, hi=1e3),
    _p("decay_tau", "double", 0.5, "s, offset decay after an oscillation freeze", lo=0.001, hi=1e3),
    _p("enabled", "bool", True, "false = publish a zero offset (learning frozen)"),
]

WRENCH_OBSERVER = [
    _p("primary", "string", "momentum", "which estimate goes to /idyn/wrench_estimate: momentum|direct",
       choices=("momentum", "direct")),
    _p("observer_gain", "double", 50.0, "K_O of the momentum observer, 1/s (bandwidth)", lo=0.1, hi=1e4),
    _p("pinv_damping", "double", 0.01, "mu of the damped pseudo-inverse of J^T", lo=0.0, hi=10.0),
    _p("deadband_force", "double", 0.0, "N; smaller force components are reported as 0", lo=0.0, hi=1e4),
    _p("deadband_torque", "double", 0.0, "Nm; smaller moment components are reported as 0", lo=0.0, hi=1e4),
    _p("lowpass_cutoff_hz", "double", 0.0, "Hz first-order low-pass on the wrench (0 = off)", lo=0.0, hi=5000.0,
       validators=("below_nyquist",)),
    _p("torque_source", "string", "command", "actuator torque: command (the effort command topic) or "
       "effort (/joint_states effort)", choices=("command", "effort"), read_only=True),
    _p("accel_cutoff_hz", "double", 20.0, "Hz; low-pass of the acceleration for the direct residual",
       lo=0.1, hi=5000.0, validators=("below_nyquist",), read_only=True),
    _p("frame_id_base", "string", "", "header.frame_id of the base-frame wrench ('' = robot base link)",
       read_only=True),
    _p("wrench_topic", "string", "/idyn/wrench_estimate", "geometry_msgs/WrenchStamped (base axes)",
       read_only=True),
    _p("external_torque_topic", "string", "/idyn/external_torque", "sensor_msgs/JointState, effort = tau_ext",
       read_only=True),
    _p("publish_divider", "int", 4, "publish the estimates every k-th state (the observers still update every "
       "tick; 4 = 250 Hz at 1 kHz, 5 publishes fewer per tick on a busy core)", lo=1, hi=1000),
]

REFERENCE = [
    _p("mode", "string", "hold", "hold (current q) | setpoints (min-jerk) | npz (excitation file) | "
       "trajectory (wait for ~/joint_trajectory)", choices=("hold", "setpoints", "npz", "trajectory")),
    _p("setpoints", "double_array", [], "rad, k set points flattened (k*n values)", length="n*k"),
    _p("durations", "double_array", [], "s per set point (k values)", lo=0.0, hi=1e5),
    _p("start_delay", "double", 1.0, "s to hold the start before the first move", lo=0.0, hi=1e5),
    _p("npz_path", "string", "", "trajectory .npz (DESIGN.md dataset; q_d/dq_d/ddq_d or q/dq/ddq)"),
    _p("loop", "bool", False, "restart the trajectory when it ends"),
    _p("lookahead_periods", "double", 1.0, "sample the reference this many periods ahead of the state "
       "stamp (the controller uses it one hop later)", lo=0.0, hi=100.0),
]

NODE_PARAMETERS: dict[str, list[Param]] = {
    "controller": CONTROLLER,
    "joint_state_buffer": JOINT_STATE_BUFFER,
    "feedforward": FEEDFORWARD,
    "doomed": DOOMED,
    "wrench_observer": WRENCH_OBSERVER,
    "reference": REFERENCE,
}


def params_for(node: str) -> list[Param]:
    """COMMON + the node's own parameters."""
    if node not in NODE_PARAMETERS:
        raise ParameterError(f"no parameter table for node '{node}' (known: {sorted(NODE_PARAMETERS)})")
    return COMMON + NODE_PARAMETERS[node]


# ---------------------------------------------------------------- named validators
def _below_nyquist(name: str, value: Any, ctx: Mapping[str, Any]) -> str | None:
    rate = float(ctx.get("rate_hz", 1000.0))
    if float(value) >= 0.5 * rate:
        return f"{name}={value} Hz must be below Nyquist ({0.5 * rate} Hz at rate_hz={rate})"
    return None


VALIDATORS: dict[str, Validator] = {"below_nyquist": _below_nyquist}


def check(param: Param, value: Any, n: int | None, ctx: Mapping[str, Any]) -> str | None:
    """None if ``value`` is valid for ``param``, else a message naming the problem and the fix."""
    name = param.name
    if param.type in ("double", "int"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{name} must be a number, got {value!r}"
        items = [value]
    elif param.type == "double_array":
        items = list(value)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in items):
            return f"{name} must be a list of numbers, got {value!r}"
        if n is not None and items:
            if param.length == "n" and len(items) != n:
                return f"{name} has {len(items)} values but the robot has {n} joints; give one per joint"
            if param.length == "n*k" and len(items) % n:
                return f"{name} has {len(items)} values, not a multiple of the {n} joints"
    elif param.type == "bool":
        if not isinstance(value, bool):
            return f"{name} must be true/false, got {value!r}"
        items = []
    else:
        items = []
        if param.choices and value not in param.choices:
            return f"{name}={value!r} is not one of {list(param.choices)}"
    for v in items:
        if math.isnan(v):
            return f"{name} contains NaN"
        if param.lo is not None and v < param.lo:
            return f"{name}={value} is below its minimum {param.lo}" + (" (gains must be >= 0)" if "kp" in name else "")
        if param.hi is not None and v > param.hi:
            return f"{name}={value} is above its maximum {param.hi}"
    for vname in param.validators:
        message = VALIDATORS[vname](name, value, ctx)
        if message:
            return message
    return None


# ---------------------------------------------------------------- rclpy glue (imports rclpy lazily)
_TYPES = {
    "bool": "PARAMETER_BOOL",
    "int": "PARAMETER_INTEGER",
    "double": "PARAMETER_DOUBLE",
    "string": "PARAMETER_STRING",
    "double_array": "PARAMETER_DOUBLE_ARRAY",
    "string_array": "PARAMETER_STRING_ARRAY",
}


def declare(node: Any, node_kind: str) -> dict[str, Any]:
    """Declare every parameter of ``node_kind`` on ``node``; return {name: value}.

    Raises ParameterError for any invalid value (given by a parameter file or override).
    """
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType

    table = params_for(node_kind)
    for p in table:
        ptype = getattr(ParameterType, _TYPES[p.type])
        desc = ParameterDescriptor(
            name=p.name, type=ptype, description=p.description, read_only=False, dynamic_typing=False
        )
        if p.type == "double" and p.lo is not None and p.hi is not None:
            desc.floating_point_range = [FloatingPointRange(from_value=float(p.lo), to_value=float(p.hi), step=0.0)]
        if p.type == "int" and p.lo is not None and p.hi is not None:
            desc.integer_range = [IntegerRange(from_value=int(p.lo), to_value=int(p.hi), step=1)]
        if p.choices:
            desc.additional_constraints = f"one of {list(p.choices)}"
        default = p.default
        if p.type == "double_array":
            default = [float(x) for x in default]
        if p.type == "double" and isinstance(default, int):
            default = float(default)
        try:
            if p.type == "double_array" and not default:
                # an empty list has no inferable type: declare by type, then the override (if any) applies
                from rclpy.parameter import Parameter

                node.declare_parameter(p.name, Parameter.Type.DOUBLE_ARRAY, desc)
            else:
                node.declare_parameter(p.name, default, desc)
        except Exception as exc:  # rclpy raises InvalidParameterTypeException etc. for bad file values
            raise ParameterError(f"parameter {p.name}: {exc}") from None
    return values(node, node_kind)


def values(node: Any, node_kind: str) -> dict[str, Any]:
    """Current values (empty/unset arrays as [])."""
    out = {}
    from rclpy.exceptions import ParameterUninitializedException

    for p in params_for(node_kind):
        try:
            value = node.get_parameter(p.name).value
        except ParameterUninitializedException:
            value = None
        if value is None:
            value = [] if p.type.endswith("array") else p.default
        elif p.type == "double_array":
            value = [float(x) for x in value]
        out[p.name] = value
    return out


def validate_all(node_kind: str, vals: Mapping[str, Any], n: int | None) -> list[str]:
    """All problems in a full set of values (used at configure)."""
    table = {p.name: p for p in params_for(node_kind)}
    return [msg for name, value in vals.items() if name in table if (msg := check(table[name], value, n, vals))]


def make_validator(node: Any, node_kind: str, n_joints: Callable[[], int | None], configured: Callable[[], bool]):
    """on-set-parameters callback: rejects invalid values and read-only changes after configure."""
    from rcl_interfaces.msg import SetParametersResult

    table = {p.name: p for p in params_for(node_kind)}

    def callback(params: Iterable[Any]) -> SetParametersResult:
        ctx = values(node, node_kind) if all(node.has_parameter(p) for p in table) else {}
        for param in params:
            ctx[param.name] = param.value
        for param in params:
            spec = table.get(param.name)
            if spec is None:
                continue  # use_sim_time etc.
            if spec.read_only and configured():
                return SetParametersResult(
                    successful=False,
                    reason=f"{param.name} can only change while unconfigured (deactivate + cleanup first)",
                )
            value = param.value
            if value is None:
                continue
            if spec.type == "double_array":
                value = [float(x) for x in value]
            message = check(spec, value, n_joints(), ctx)
            if message:
                return SetParametersResult(successful=False, reason=message)
        return SetParametersResult(successful=True)

    return callback


def render_markdown() -> str:
    """The parameter tables as Markdown (docs)."""
    lines = []
    for kind in ["common", *NODE_PARAMETERS]:
        table = COMMON if kind == "common" else NODE_PARAMETERS[kind]
        lines += [f"### {kind}", "", "| name | type | default | bounds | description |", "|---|---|---|---|---|"]
        for p in table:
            bounds = f"[{p.lo}, {p.hi}]" if p.lo is not None or p.hi is not None else (
                "/".join(p.choices) if p.choices else "")
            lines.append(f"| `{p.name}` | {p.type} | `{p.default}` | {bounds} | {p.description} |")
        lines.append("")
    return "\n".join(lines)
