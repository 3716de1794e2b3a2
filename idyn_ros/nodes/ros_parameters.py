"""rclpy glue for ``idyn_ros.parameters``: declare a node's parameters, validate every set, keep a typed copy.

Usage in a node: ``self.params = NodeParameters(self, ControllerParams, joints=lambda: n)`` declares everything
(with descriptors: type, bounds, read-only flag), raises ParameterError for bad file values, and refuses a bad
or read-only run-time set with its reason. ``self.params.value`` is the current frozen object; it is replaced
whole after an accepted set (another thread never sees half an update), and ``on_change`` callbacks run then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from idyn_ros.errors import ParameterError
from idyn_ros.parameters import NodeParams, Param, check

P = TypeVar("P", bound=NodeParams)

_ROS_TYPES = {"bool": "PARAMETER_BOOL", "int": "PARAMETER_INTEGER", "double": "PARAMETER_DOUBLE",
              "string": "PARAMETER_STRING", "double_array": "PARAMETER_DOUBLE_ARRAY",
              "string_array": "PARAMETER_STRING_ARRAY"}


class NodeParameters(Generic[P]):
    """The declared parameters of one node and their current typed value (see the module docstring)."""

    def __init__(self, node: Any, cls: type[P], joints: Callable[[], int | None] = lambda: None,
                 configured: Callable[[], bool] = lambda: True, check: Callable[[P], str | None] | None = None) -> None:
        """``joints``: the robot's joint count once known; ``configured``: whether read-only parameters are frozen
        now; ``check``: a cross-field check of a whole candidate object (e.g. gains against the robot)."""
        self.node = node
        self.cls = cls
        self.table = {p.name: p for p in cls.table()}
        self._joints = joints
        self._configured = configured
        self._check = check
        self.on_change: list[Callable[[P], None]] = []
        for p in self.table.values():
            _declare(node, p)
        foreign = _foreign_overrides(node)
        if foreign:
            raise ParameterError(f"{node.get_name()}: no idyn_ros node has parameter(s) {foreign} (misspelt? "
                                 "docs/parameters.md lists them); rclpy would ignore them without a word")
        named = _named_parameters(node.get_name(), PROCESS_ARGS)
        others = sorted(n for n in named if not node.has_parameter(n))
        if others:
            hint = _composed_hint([n for n in others if named[n] == "-p"])
            raise ParameterError(f"{node.get_name()} has no parameter(s) {others}, given to it by name (-p, or a "
                                 f"parameter file section naming {node.get_name()}){hint}; docs/parameters.md lists "
                                 "each node's; rclpy would ignore them without a word")
        try:
            self.value: P = self.read()
        except ParameterError:  # reported where the node reads again to configure (read() raises there)
            self.value = cls()
        node.add_pre_set_parameters_callback(self._integers_as_doubles)
        node.add_on_set_parameters_callback(self._validate)
        node.add_post_set_parameters_callback(self._after_set)

    def read(self) -> P:
        """The node's current values as a validated typed object (ParameterError naming every bad value)."""
        from rclpy.exceptions import ParameterUninitializedException

        values = {}
        for name, p in self.table.items():
            try:
                value = self.node.get_parameter(name).value
            except ParameterUninitializedException:
                value = None
            values[name] = p.default if value is None else value
        return self.cls.from_values(values, self._joints())

    def check_current(self) -> None:
        """Run the cross-field check on the current values (rclpy runs it only on a set, not on start-up values):
        ParameterError with its reason if it refuses them."""
        message = self._check(self.value) if self._check is not None else None
        if message:
            raise ParameterError(f"{self.cls.__name__}: {message}")

    def _integers_as_doubles(self, params: list[Any]) -> list[Any]:
        """`ros2 param set /controller damping_ratio 2` as 2.0, as in a params file, and a whole 2.0 for an integer
        parameter as 2: each parameter keeps its declared type (any other type reaches _validate and is refused)."""
        return [integers_as_doubles(self.table[q.name], q) if q.name in self.table else q for q in params]

    def _validate(self, params: list[Any]) -> Any:
        from rcl_interfaces.msg import SetParametersResult

        ctx = self.value.values()
        ctx.update({p.name: p.value for p in params})
        for param in params:
            spec = self.table.get(param.name)
            if spec is None:
                continue  # use_sim_time and other rclpy parameters
            if spec.read_only and self._configured() and not self._unchanged(param):  # `ros2 param load` of a dump
                return SetParametersResult(successful=False, reason=(
                    f"{param.name} is read-only at run time: it takes effect at configure time (lifecycle nodes: "
                    "deactivate + cleanup, set it, configure; other nodes: restart with the new value)"))
            if param.value is None:  # `ros2 param delete`: rclpy would undeclare it, and the next read() raised
                return SetParametersResult(successful=False, reason=(
                    f"{param.name} cannot be deleted: every idyn parameter stays declared (set a value instead; "
                    f"docs/parameters.md gives its default)"))
            inert = spec.only_with and self._configured() and not self._unchanged(param)
            if inert and self.table[spec.only_with[0]].read_only and ctx[spec.only_with[0]] not in spec.only_with[1]:
                other = spec.only_with[0]  # fixed until a restart, so the new value could never act
                return SetParametersResult(successful=False, reason=(
                    f"{param.name} is read only with {spec.only_with_text()}, and {other} is {ctx[other]!r} "
                    "(read-only): the value would have no effect"))
            message = check(spec, param.value, self._joints(), ctx)
            if message:
                return SetParametersResult(successful=False, reason=message)
        if self._check is not None:
            try:
                message = self._check(self.cls.from_values(ctx, self._joints()))
            except ParameterError as exc:
                message = str(exc)
            if message:
                return SetParametersResult(successful=False, reason=message)
        return SetParametersResult(successful=True)

    def _unchanged(self, param: Any) -> bool:
        """``param`` sets the value the node has (a whole dump loaded back changes nothing read-only: accepted)."""
        from rclpy.exceptions import ParameterNotDeclaredException

        def plain(value: Any) -> Any:
            return list(value) if value is not None and not isinstance(value, (str, bool, int, float)) else value

        try:
            return plain(param.value) == plain(self.node.get_parameter(param.name).value)
        except ParameterNotDeclaredException:  # not declared (yet): not the same value
            return False

    def _after_set(self, params: list[Any]) -> None:
        if not any(p.name in self.table for p in params):
            return
        self.value = self.read()
        for callback in self.on_change:
            callback(self.value)


def _declare(node: Any, p: Param) -> None:
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType
    from rclpy.parameter import Parameter

    desc = ParameterDescriptor(name=p.name, type=getattr(ParameterType, _ROS_TYPES[p.type]), description=p.description,
                               read_only=False, dynamic_typing=False)  # read_only: refused in _validate after configure
    if p.type == "double" and p.lo is not None and p.hi is not None:
        desc.floating_point_range = [FloatingPointRange(from_value=float(p.lo), to_value=float(p.hi), step=0.0)]
    if p.type == "int" and p.lo is not None and p.hi is not None:
        desc.integer_range = [IntegerRange(from_value=int(p.lo), to_value=int(p.hi), step=1)]
    if p.choices:
        desc.additional_constraints = f"one of {list(p.choices)}"
    default = list(p.default) if isinstance(p.default, tuple) else p.default
    given = _coerce_override(node, p)
    try:
        if isinstance(default, list) and not default:
            # rclpy cannot infer the type of [] (it would type it BYTE_ARRAY): declare by type (an override
            # applies), then give a parameter left unset its typed empty value. A declared but unset parameter
            # is "not set" to `ros2 param get`, and one in a get_parameters request empties the whole reply
            # (`ros2 param dump` printed `ros__parameters: {}`)
            kind = Parameter.Type.DOUBLE_ARRAY if p.type == "double_array" else Parameter.Type.STRING_ARRAY
            declared = node.declare_parameter(p.name, kind, desc)
            if declared.type_ == Parameter.Type.NOT_SET:
                result = node.set_parameters([Parameter(p.name, kind, [])])[0]
                if not result.successful:
                    raise ParameterError(f"parameter {p.name}: cannot set its default []: {result.reason}")
        else:
            node.declare_parameter(p.name, default, desc)
        # Decision: declared strictly (a wrongly typed file value is refused above, with our reason), then typed
        # dynamically, so that a run-time set of the wrong type (`ros2 param set ... damping_ratio high`) reaches
        # _validate and gets our reason, not rclpy's "Wrong parameter type, expected '3' got '4'"
        desc.dynamic_typing = True
        node.set_descriptor(p.name, desc)
    except ParameterError:
        raise
    except Exception as exc:  # rclpy's InvalidParameterTypeException etc. for a wrongly typed file value
        # our own reason where it has one ("damping_ratio contains nan (values must be finite)", "... must be a
        # number, got 'high'"), clearer than rclpy's "Invalid parameter value (nan) for parameter. Reason: ..."
        try:
            ours = check(p, given, None, {}) if given is not None else None
        except Exception:  # a check that needs other values (ctx): rclpy's reason then
            ours = None
        why = ours if ours and ours.startswith(p.name) else f"{p.name}: {ours or exc}"
        raise ParameterError(f"parameter {why}{_integer_hint(p, given, exc)}") from None


def _integer_hint(p: Param, given: Any, exc: Exception) -> str:
    """The YAML-integer hint, only where rclpy refused the type of an integer (or of integers in an array) given
    for a double parameter: a nan, a string, a value out of range have other causes. (``_coerce_override``
    converts plain integers and all-integer arrays; a mix such as ``[0, 1.5]`` still reaches rclpy.)"""
    from rclpy.exceptions import InvalidParameterTypeException

    values = given if isinstance(given, list | tuple) else [given]
    integers = any(isinstance(v, int) and not isinstance(v, bool) for v in values)
    if p.type.startswith("double") and integers and isinstance(exc, InvalidParameterTypeException):
        return " (write 0.0, not 0: YAML integers are not doubles)"
    return ""


def _coerce_override(node: Any, p: Param) -> Any:
    """A YAML or launch override ``1`` for a double parameter (``[0, 1]`` for a double array) is taken as 1.0:
    rclpy would refuse it as INTEGER, a trap every user falls into once. Returns the value given (None: none)."""
    from rclpy.parameter import Parameter

    overrides = getattr(node, "_parameter_overrides", None)
    given = overrides.get(p.name) if isinstance(overrides, dict) else None
    if given is None:
        return None
    value = given.value
    if p.type.endswith("array") and isinstance(value, list | tuple) and not value:
        overrides.pop(p.name)  # [] is the default (derived from the robot); rclpy would type it BYTE_ARRAY
    elif p.type == "string" and isinstance(value, bool | int | float):  # `-p profile:=true` arrives as a YAML bool
        overrides[p.name] = Parameter(p.name, Parameter.Type.STRING, str(value).lower() if isinstance(value, bool)
                                      else str(value))
    else:
        overrides[p.name] = integers_as_doubles(p, given)
    return value


def integers_as_doubles(p: Param, param: Any) -> Any:
    """``param`` with an integer (an all-integer array) given for a double (double array) parameter as doubles, and
    a whole double given for an integer parameter as an integer; any other parameter unchanged."""
    from rclpy.parameter import Parameter

    if p.type == "double" and param.type_ == Parameter.Type.INTEGER:
        return Parameter(p.name, Parameter.Type.DOUBLE, float(param.value))
    if p.type == "double_array" and param.type_ == Parameter.Type.INTEGER_ARRAY:  # a list, or array('q') from a msg
        return Parameter(p.name, Parameter.Type.DOUBLE_ARRAY, [float(v) for v in param.value])
    if p.type == "int" and param.type_ == Parameter.Type.DOUBLE and float(param.value).is_integer():
        return Parameter(p.name, Parameter.Type.INTEGER, int(param.value))
    return param


def to_ros_parameter(name: str, value: Any) -> Any:
    """A Python/numpy value -> an rclpy Parameter (sequences of numbers as DOUBLE_ARRAY, so [] is typed)."""
    import numpy as np
    from rclpy.parameter import Parameter

    if isinstance(value, list | tuple | np.ndarray):
        if all(isinstance(v, str) for v in value) and len(value):
            return Parameter(name, Parameter.Type.STRING_ARRAY, [str(v) for v in value])
        return Parameter(name, Parameter.Type.DOUBLE_ARRAY, [float(v) for v in value])
    if isinstance(value, np.generic):
        value = value.item()
    return Parameter(name, value=value)


def parameter_help(cls: type[NodeParams]) -> str:
    """``--help`` text: one line per parameter (name, default, bounds, description)."""
    lines = ["Parameters (--ros-args -p name:=value, or a --params-file):"]
    for p in cls.table():
        default = list(p.default) if isinstance(p.default, tuple) else p.default
        bounds = f" one of {'|'.join(p.choices)};" if p.choices else (
            f" [{p.lo:g}, {p.hi:g}];" if p.lo is not None and p.hi is not None else "")
        lines.append(f"  {p.name:<24} default {default!r:<10}{bounds} {p.description}")
    return "\n".join(lines)


PROCESS_ARGS: list[str] = []  # the arguments rclpy.init got in this process (nodes.common.run records them)


def _declared_by() -> dict[str, list[str]]:
    """Each idyn_ros parameter name -> the nodes that declare it."""
    from idyn_ros.parameters import NODES

    owners: dict[str, list[str]] = {}
    for node, cls in NODES.items():
        for p in cls.table():
            owners.setdefault(p.name, []).append(node)
    return owners


def _composed_hint(from_p: list[str]) -> str:
    """What to do instead of ``-p`` for parameters only some nodes of a process have (a composed process)."""
    if not from_p:
        return ""
    owners = _declared_by()
    where = "; ".join(f"{n}: /{' or /'.join(owners[n])}" for n in from_p if n in owners)
    return (" (-p reaches every node of its process: in a composed process, give it in the parameter file section of "
            f"the node that has it{', ' + where if where else ''})")


def _named_parameters(node_name: str, argv: list[str]) -> dict[str, str]:
    """The parameter names ``argv`` gives node ``node_name`` by name, each with where ("-p" or the file):
    ``-p NAME:=VALUE`` (a node process's own command line) and the sections of its ``--params-file`` that name it
    (``/name``, ``/**/name``). A wildcard section (``/**``) reaches every node and may hold other nodes' names, so it
    is not counted."""
    from idyn_ros.parameters import read_parameter_file, section_matches

    names: dict[str, str] = {}
    ros_args = False
    for i, word in enumerate(argv):
        if word in ("--ros-args", "--"):
            ros_args = word == "--ros-args"
        elif ros_args and word in ("-p", "--param") and i + 1 < len(argv) and ":=" in argv[i + 1]:
            names[argv[i + 1].split(":=", 1)[0]] = "-p"
        elif ros_args and word == "--params-file" and i + 1 < len(argv):
            try:
                sections = read_parameter_file(argv[i + 1])
            except ParameterError:  # rcl has read it already; what it refuses is said there
                continue
            names.update((name, argv[i + 1]) for key, params in sections.items()
                         if key.rstrip("/").rsplit("/", 1)[-1] == node_name and section_matches(key, node_name)
                         for name in params)
    return names


def _foreign_overrides(node: Any) -> list[str]:
    """Names given to ``node`` (``-p``, parameter files) that no idyn_ros node declares.

    A name another of our nodes declares passes: a ``/**`` section legitimately reaches every node."""
    anyone = {"use_sim_time", *_declared_by()}
    given = getattr(node, "_parameter_overrides", {})  # rclpy keeps -p and file values here; no public accessor
    return sorted(name for name in given
                  if name not in anyone and not node.has_parameter(name) and not name.startswith("qos_overrides."))
