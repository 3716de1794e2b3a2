"""The node graph of one robot, described once: which processes start and what each node's parameters are.

``ros2 launch idyn_ros <robot>.launch.py`` (launch/idyn_common.py) and ``idyn bringup`` (``nodes.launcher``)
both build from this module, so the two cannot drift. Each process gets ONE parameter file
(``parameter_file``): config/<robot>.yaml, then the user's files, merged as rcl merges files (sections in the
order their keys first appear, a later file overwriting values under the same key), then what the launch
arguments set (``node_overrides``) in a last section under the node's full name. rcl applies sections in that
order, so the launch arguments win over every file a user adds, whatever section (``/**``, ``/**/controller``,
``/controller``) it uses (the precedence is tested against rclpy in test/nodes/test_parameters.py).

Decisions (one line each):
- clock: with the lockstep plant (mode mujoco) and in Gazebo our nodes run on sim time (``use_sim_time``), so a
  plant that waits for a command is not "stale input"; the real-time plant and hardware use the monotonic clock;
- gravity: on hardware the vendor adds g(q) (``subtract_gravity``); the wrench observer then takes the measured
  effort, because the command lacks g(q) (``torque_source: effort``);
- an empty launch argument sets nothing: the parameter files decide;
- observer only: buffer + wrench observer on the measured effort; on hardware the vendor driver's own launch runs the
  arm (its trajectory controllers move it; a CB3 executes no torques), so no robot-side process starts here; in mock
  the robot side starts without the effort controller; gazebo and mujoco need our torques to hold the arm (refused);
- a model on hardware: one given with ``model`` that a node rejects (another robot's, a broken file) stops the launch
  (``fallback: none``, unless the user's files or ``--set`` choose one): elsewhere the nodes run on the nominal URDF;
- motion on hardware: the reference node holds the pose it finds unless the user's own files or ``--set`` choose its
  mode (config/<robot>.yaml's demonstration move is for the simulators; a real arm moves only when asked);
- effort unit on hardware: what the driver reports (``effort_unit``): the UR xacro argument
  ``use_currents_as_efforts`` when given, else a parameter file's ``effort_unit``, else the driver's default (the
  xacro's default: motor currents [A] on a UR);
- state rate on hardware: ``rate_hz`` is the rate the driver publishes /joint_states at by default where it is not
  1 kHz (the UR5 preset, a CB3: 125 Hz; the iiwa14 on lbr_fri_ros2_stack: 100 Hz; ``RobotSpec.hardware_state_rate_hz``),
  unless the user's files or ``--set`` give one; torque control through our own ros2_control_node runs at
  ``RobotSpec.hardware_torque_rate_hz`` where the arm's stack asks for another rate than 1 kHz (iiwa14: 500 Hz), in
  the controllers file and the nodes alike;
- a position with each torque: an arm whose torque mode takes one (``RobotSpec.position_controller``: the iiwa14) gets
  that forward position controller spawned on hardware, and the controller node sends it the measured positions
  (``position_command_topic``; a file or ``--set`` may name another topic, not none);
- what the mode decides (``MODE_SET``: the gravity subtraction, the observer's torque source, sim time) a parameter
  file cannot change: a file setting another value is refused (a silent override hid it), as is a section or a
  parameter name no node of ours has (rclpy drops those without a word);
- what nobody would read is refused, not dropped: a file's or ``--set``'s parameter no node started here declares,
  a ``--set`` contradicting the option that sets the same parameter, a file's robot other than the graph's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idyn_ros.errors import ParameterError
from idyn_ros.parameters import PRESET_NAMES, file_values, params_class, robot_file, section_matches

OUR_NODES: tuple[str, ...] = ("joint_state_buffer", "feedforward", "controller", "doomed", "wrench_observer",
                              "reference")
#: ``observer_only``: an arm that takes no torque commands from us (a CB3 UR, or a position-controlled one) still gets
#: the external wrench: only these nodes start, and nothing publishes effort commands.
OBSERVER_NODES: tuple[str, ...] = ("joint_state_buffer", "wrench_observer")
OBSERVER_MODES: tuple[str, ...] = ("hardware", "mock")  # the arm moves without our torques there
OPTIONAL_NODES: tuple[str, ...] = ("payload_identifier", "gripper_compensation")  # started only when named (``nodes``)
#: what an optional node cannot work without, and why
NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "payload_identifier": (("controller", "reference"),
                           "it moves the arm through the reference node and the controller"),
}
MODES: tuple[str, ...] = ("hardware", "mock", "gazebo", "mujoco")
CLOCKS: tuple[str, ...] = ("lockstep", "realtime")
NO_MODEL = "none"  # ``model``: run the RBD fallback whatever model_path the files give
#: parameters the mode sets (``node_overrides``), with the reason a user file cannot set them otherwise
MODE_SET: dict[str, str] = {
    "subtract_gravity": "on hardware the vendor adds g(q) to the command, elsewhere nothing does",
    "torque_source": "the observer reads the measured effort on hardware and with observer_only (no command to read), "
                     "the command elsewhere",
    "use_sim_time": "nodes run on /clock with the lockstep plant and Gazebo, on the monotonic clock otherwise",
}


@dataclass(frozen=True)
class GraphSettings:
    """What a user chooses when starting the graph (launch arguments / ``idyn bringup`` options)."""

    robot: str
    mode: str = "mock"
    model: str = ""  # exported .onnx; '' = the files' model_path; 'none' (NO_MODEL) = the RBD fallback
    gains: str = ""  # soft | medium | stiff; '' = the files' gain_preset
    prefix: str = ""  # joint/link name prefix; '' = the vendor default
    clock: str = ""  # mujoco: lockstep | realtime; '' = the files' clock_mode
    composed: bool = False  # our nodes in one process
    plant: bool = True  # mode mujoco: start the embedded plant (False: one runs already, e.g. a benchmark's)
    nodes: tuple[str, ...] = OUR_NODES
    params_files: tuple[str, ...] = ()  # user parameter files, after config/<robot>.yaml
    overrides: Mapping[str, Any] = field(default_factory=dict)  # more parameters, for every node declaring them
    observer_only: bool = False  # only OBSERVER_NODES, no torque commands (see the module docstring)
    effort_unit: str = ""  # hardware: what /joint_states effort is (torque | current); '' = the files' effort_unit

    def __post_init__(self) -> None:
        from idyn_ros.robots import get_robot

        get_robot(self.robot)  # UnknownRobotError lists the robots
        problems = []
        if self.mode not in MODES:
            problems.append(f"mode {self.mode!r} is not one of {list(MODES)}")
        if self.gains and self.gains not in PRESET_NAMES:
            problems.append(f"gains {self.gains!r} is not one of {list(PRESET_NAMES)}")
        if self.clock and self.clock not in CLOCKS:
            problems.append(f"clock {self.clock!r} is not one of {list(CLOCKS)}")
        if self.clock and self.mode != "mujoco":
            problems.append(f"clock:={self.clock} only applies to mode mujoco (the embedded plant), not {self.mode}")
        unknown_nodes = [n for n in self.nodes if n not in OUR_NODES + OPTIONAL_NODES]
        if unknown_nodes:
            problems.append(f"unknown nodes {unknown_nodes}; ours are {list(OUR_NODES + OPTIONAL_NODES)}")
        for node in self.active_nodes:
            needed, why = NEEDS.get(node, ((), ""))
            if lacking := [m for m in needed if m not in self.active_nodes]:
                problems.append(f"{node} needs {' and '.join(lacking)} running ({why}): name only the optional "
                                f"nodes to add them to the six, or add {','.join(lacking)} to your list")
        twice = sorted({n for n in self.nodes if self.nodes.count(n) > 1})
        if twice:
            problems.append(f"nodes named more than once: {twice} (two controllers would both command torques)")
        if self.gains and "controller" not in self.active_nodes:
            problems.append(f"gains:={self.gains} reaches only the controller, which does not start here "
                            f"(nodes: {list(self.active_nodes)})")
        blocked = get_robot(self.robot).hardware_torque_unsupported
        if self.mode == "hardware" and blocked and not self.observer_only:
            problems.append(f"mode hardware on the {self.robot} is not supported for torque control: {blocked}; "
                            f"observer_only:=true runs the wrench observer on the arm (no torque commands)")
        if self.observer_only and self.mode not in OBSERVER_MODES:
            problems.append(f"observer_only:=true needs an arm that moves without our torques: mode "
                            f"{' or '.join(OBSERVER_MODES)}, not {self.mode} (its simulated joints take only torques)")
        if self.observer_only and not self.active_nodes:
            problems.append(f"observer_only:=true runs {list(OBSERVER_NODES)}, but nodes={list(self.nodes)} has none")
        elif self.observer_only and (dropped := [n for n in (  # the nodes named, not the six select_nodes adds
                self.nodes[len(OUR_NODES):] if tuple(self.nodes[:len(OUR_NODES)]) == OUR_NODES else self.nodes)
                if n not in OBSERVER_NODES]):
            problems.append(f"observer_only:=true runs only {list(OBSERVER_NODES)}: {dropped} named in nodes would "
                            "not start")
        if self.effort_unit not in ("", "torque", "current"):
            problems.append(f"effort_unit {self.effort_unit!r} is not torque or current")
        elif self.effort_unit and self.mode != "hardware":
            problems.append(f"effort_unit {self.effort_unit} says what a driver reports: mode hardware only (in "
                            f"{self.mode} the effort is the joint torque)")
        missing = [f for f in self.params_files if not Path(f).is_file()]
        if missing:
            problems.append(f"parameter file(s) not found: {missing}")
        if self.model and self.model != NO_MODEL and not Path(self.model).is_file():
            problems.append(f"model {self.model} not found ('{NO_MODEL}': the RBD fallback)")
        undeclared = sorted(set(self.overrides) - set().union(*declared_parameters().values()))
        if undeclared:
            problems.append(f"no node has parameter(s) {undeclared} (see docs/parameters.md)")
        if empty := sorted(k for k, v in self.overrides.items() if v is None):  # `--set npz_path=`
            problems.append(f"no value for {empty} (YAML null, which a node would read as the string 'null'); an "
                            "empty string is NAME=''")
        if not problems:  # the files are read for the nodes named, once those are known to exist
            problems += self._override_problems() + self._file_problems() + self._inert_problems()
        if problems:
            raise ParameterError("; ".join(problems))

    def _override_problems(self) -> list[str]:
        """What ``overrides`` (``idyn bringup --set``) set that no process starting here reads, or that an option
        given with it sets otherwise (the option lost without a word)."""
        problems: list[str] = []
        reads = set().union(*(_reads(node) for node in self.started))
        unread = sorted(set(self.overrides) - reads)
        if unread:
            problems.append(f"no process started here ({', '.join(self.processes) or 'none'}) reads {unread}: the "
                            f"node(s) declaring it do not start (--nodes, --mode, --no-plant)")
        model = "" if self.model in ("", NO_MODEL) else str(Path(self.model).resolve())
        options = {"robot": (self.robot, self.robot), "gain_preset": (self.gains, self.gains),
                   "prefix": (self.prefix, self.prefix), "clock_mode": (self.clock, self.clock),
                   "effort_unit": (self.effort_unit, self.effort_unit), "model_path": (self.model, model)}
        for name, (option, chosen) in options.items():
            if not option or name not in self.overrides:
                continue
            given = self.overrides[name]
            if name == "model_path" and given:
                given = str(Path(str(given)).resolve())
            if given != chosen:
                problems.append(f"{name}={self.overrides[name]!r} contradicts the option that sets it to {chosen!r}; "
                                "give it once")
        forced: dict[str, tuple[Any, list[str]]] = {}  # what the mode decides, as a file may not change it (MODE_SET)
        for node in self.active_nodes:
            for name, value in node_overrides(self, node, mode_only=True).items():
                if name in self.overrides and self.overrides[name] != value:
                    forced.setdefault(name, (value, []))[1].append(node)
        problems += [f"{name}={self.overrides[name]!r}, but mode {self.mode} sets {value!r} for {', '.join(nodes)} "
                     f"({MODE_SET[name]})" for name, (value, nodes) in forced.items()]
        return problems

    def _inert_problems(self) -> list[str]:
        """What the user set that the node reads only in another configuration (``Spec.only_with``): a
        feedforward_timeout beside the embedded feedforward, setpoints with mode npz."""
        problems: list[str] = []
        for node in self.started:
            table = {p.name: p for p in params_class(node).table()}
            mine = {k: v for k, v in self.user_values(node).items() if k in table}
            final = {**file_values(list(self.files), node), **node_overrides(self, node)}
            forced = node_overrides(self, node, mode_only=True)
            for name, given in mine.items():
                default = table[name].default
                value = tuple(given) if isinstance(default, tuple) and isinstance(given, list | tuple) else given
                if table[name].only_with is None or value == default:  # the default changes nothing
                    continue
                other, values = table[name].only_with
                actual = final.get(other, table[other].default)
                if actual not in values:
                    by = f"mode {self.mode} sets it" if other in forced else "set it, or leave this out"
                    problems.append(f"{node} reads {name} only with {table[name].only_with_text()}, but runs with "
                                    f"{other}={actual!r} ({by})")
        return problems

    @property
    def started(self) -> tuple[str, ...]:
        """The nodes whose parameters this graph sets: the active ones and the embedded plant when it starts."""
        return ("plant",) * ("plant" in self.processes) + self.active_nodes

    def _file_problems(self) -> list[str]:
        """What the user's parameter files set that nothing would read, or that the mode decides otherwise."""
        from idyn_ros.parameters import read_parameter_file

        problems: list[str] = []
        declared = declared_parameters()
        ours = tuple(declared)
        anyone = set().union(*declared.values())
        for path in self.params_files:
            for key, params in read_parameter_file(path).items():
                reached = [node for node in ours if section_matches(key, node)]  # as rcl matches it (no namespace)
                if not reached:
                    problems.append(f"{path}: section {key!r} names no node of ours ({', '.join(ours)}; they run "
                                    "in no namespace: /<node>, /**/<node>, or /** for all)")
                    continue
                if empty := sorted(name for name, value in params.items() if value is None):
                    problems.append(f"{path}: section {key!r}: no value for {empty} (rcl refuses such a file; merged "
                                    "into the launch's, it would be the string 'null'); an empty string is ''")
                known = anyone if len(reached) > 1 else declared[reached[0]]
                unknown = sorted(set(params) - known)
                if unknown:
                    problems.append(f"{path}: section {key!r}: no {'node' if known is anyone else reached[0]} has "
                                    f"parameter(s) {unknown} (see docs/parameters.md)")
                    continue
                unread = sorted(set(params) - set().union(*(declared[n] for n in reached if n in self.started)))
                if unread:  # as gains:= without a controller: the node(s) declaring them do not start here
                    started = ", ".join(self.processes) or "none"
                    problems.append(f"{path}: section {key!r}: no process started here ({started}) reads {unread} "
                                    "(nodes:=, mode:=)")
        from idyn_ros.robots import get_robot

        if self.torque_on_hardware and get_robot(self.robot).position_controller and "controller" in self.active_nodes:
            mine = self.user_values("controller")
            if mine.get("position_command_topic") == "":
                problems.append(f"position_command_topic is empty, but the {self.robot}'s torque mode drops torques "
                                "that come without a joint position (module docstring): leave it unset (the "
                                f"launch's /{get_robot(self.robot).position_controller}/commands) or name your topic")
        for node in self.active_nodes:
            forced = node_overrides(self, node, mode_only=True)
            given = file_values(list(self.params_files), node)
            for name, value in forced.items():
                if name in given and given[name] != value:
                    problems.append(f"a parameter file sets {node}.{name}: {given[name]!r}, but mode {self.mode} "
                                    f"sets {value!r} ({MODE_SET[name]}); remove it from the file")
        robots = {node: r for node in self.started
                  if (r := file_values(list(self.params_files), node).get("robot", self.robot)) != self.robot}
        if self.robot_side():  # the URDF and the controllers file rendered here carry the prefix option's names
            prefixes = {node: p for node in self.started
                        if (p := self.user_values(node).get("prefix", self.prefix)) != self.prefix}
            if prefixes:
                problems.append(f"prefix {sorted(set(prefixes.values()))} for {sorted(prefixes)}, but the URDF and "
                                f"the controllers started here use {self.prefix or 'the vendor default'!r}: give it as "
                                "the prefix option (prefix:= / --prefix), which reaches both")
        if robots:  # the nodes would run another arm than the URDF, the controllers file and the plant's profile
            problems.append(f"a parameter file sets robot {sorted(set(robots.values()))} for {sorted(robots)} in a "
                            f"graph for the {self.robot}; remove it from the file (the launch file or --robot chooses "
                            "the robot)")
        return problems

    @property
    def files(self) -> list[Path]:
        """Parameter files every node reads, in order."""
        return [robot_file(self.robot), *(Path(f) for f in self.params_files)]

    @property
    def active_nodes(self) -> tuple[str, ...]:
        """Our nodes that start: ``nodes``, or their observer part with ``observer_only``."""
        return tuple(n for n in self.nodes if n in OBSERVER_NODES) if self.observer_only else tuple(self.nodes)

    @property
    def processes(self) -> list[str]:
        """Process names: the plant (mode mujoco), then ``composed`` or one per node."""
        ours = ["composed"] if self.composed else list(self.active_nodes)
        return (["plant"] if self.mode == "mujoco" and self.plant else []) + ours

    def robot_side(self) -> list[str]:
        """The ros2_control side that starts with us: robot_state_publisher, ros2_control_node and the spawned
        controllers (hardware and mock; gazebo adds its own), none on hardware with ``observer_only``."""
        if self.mode not in ("hardware", "mock", "gazebo"):
            return []
        if self.observer_only and self.mode == "hardware":
            return []
        from idyn_ros.robots import get_robot

        spec = get_robot(self.robot)
        effort = [] if self.observer_only else [spec.effort_controller]
        position = [spec.position_controller] if self.torque_on_hardware and spec.position_controller else []
        spawned = ["joint_state_broadcaster", *effort, *position]
        return ["robot_state_publisher"] + (["ros2_control_node"] if self.mode != "gazebo" else []) + spawned

    def user_values(self, node: str) -> dict[str, Any]:
        """What the user's own files and ``overrides`` set for ``node`` (not config/<robot>.yaml): where the mode's
        defaults give way."""
        return {**file_values(list(self.params_files), node), **self.overrides}

    @property
    def torque_on_hardware(self) -> bool:
        """Our controller commands a real arm's torques through our own ros2_control_node."""
        return self.mode == "hardware" and not self.observer_only

    def hardware_rate(self) -> float:
        """The rate the nodes run at on hardware when it is not 1 kHz (0 = it is): see the module docstring."""
        from idyn_ros.robots import get_robot

        return get_robot(self.robot).hardware_rate_hz(self.torque_on_hardware) if self.mode == "hardware" else 0.0

    def clock_mode(self) -> str:
        """The embedded plant's clock: the launch argument, else what the files say."""
        if self.clock:
            return self.clock
        if "clock_mode" in self.overrides:  # --set clock_mode=...: the plant takes it, so do our nodes' clocks
            return str(self.overrides["clock_mode"])
        return str(file_values(self.files, "plant").get("clock_mode", "lockstep"))

    def sim_time(self) -> bool:
        """Whether our nodes run on /clock (see the module docstring)."""
        return self.mode == "gazebo" or (self.mode == "mujoco" and self.clock_mode() == "lockstep")


def essential_processes(observer_only: bool) -> frozenset[str]:
    """The processes whose failure stops the graph (`ros2 launch` and `idyn bringup` alike), as ROS 1's
    ``required``: without them nothing controls (controller, composed) or nothing is controlled (plant); with
    observer_only the observer is the graph's purpose. Any other node's failure is reported, the rest runs on."""
    return frozenset(("controller", "composed", "plant") + (("wrench_observer",) if observer_only else ()))


def select_nodes(names: Sequence[str]) -> tuple[str, ...]:
    """The ``nodes`` a user's list means: only optional nodes named = the six plus them (the docs say "add"),
    any of the six named = exactly that subset (plus the optional ones named); empty = the six."""
    names = tuple(n for n in names if n)
    if not names or all(n in OPTIONAL_NODES for n in names):
        return OUR_NODES + names
    return names


def driver_effort_unit(s: GraphSettings) -> str:
    """What the robot's driver reports as effort by default: the xacro's ``use_currents_as_efforts`` default (a UR:
    current), '' for a robot without that argument (its effort is torque)."""
    from idyn_ros.robots import get_robot
    from idyn_ros.robots.render import xacro_argument_defaults

    default = xacro_argument_defaults(get_robot(s.robot).xacro_path).get("use_currents_as_efforts", "")
    return {"true": "current", "false": "torque"}.get(default.lower(), "")


#: the parameters rclpy declares on every node: `ros2 param dump` writes them too, so a dumped file loads back
RCLPY_PARAMETERS: tuple[str, ...] = ("use_sim_time", "start_type_description_service")


def declared_parameters() -> dict[str, set[str]]:
    """{node: the ROS parameter names it declares} for every node the graph can start (with rclpy's own)."""
    return {n: {p.name for p in params_class(n).table()} | set(RCLPY_PARAMETERS)
            for n in (*OUR_NODES, *OPTIONAL_NODES, "plant")}


def _reads(node: str) -> set[str]:
    """The names ``node_overrides`` passes on to ``node``: its declared parameters, and use_sim_time but on the
    plant (its clock is its own)."""
    return {p.name for p in params_class(node).table()} | ({"use_sim_time"} if node != "plant" else set())


def node_overrides(s: GraphSettings, node: str, mode_only: bool = False) -> dict[str, Any]:
    """The parameters the launch arguments set for ``node`` (ROS names; only those the node declares);
    ``mode_only``: only those the mode decides (``MODE_SET``)."""
    declared = {p.name for p in params_class(node).table()}
    out: dict[str, Any] = {}
    if s.prefix:
        out["prefix"] = s.prefix
    if node == "plant":
        if s.clock:
            out["clock_mode"] = s.clock
    else:
        out["use_sim_time"] = s.sim_time()
        if s.model:
            out["model_path"] = "" if s.model == NO_MODEL else str(Path(s.model).resolve())
        if node == "controller":
            out["subtract_gravity"] = s.mode == "hardware"
            if s.gains:
                out["gain_preset"] = s.gains
        if s.mode == "hardware":  # a real arm's defaults (module doc); the user's own files and --set still decide
            mine = s.user_values(node)
            if s.model and s.model != NO_MODEL and "fallback" not in mine:
                out["fallback"] = "none"  # a rejected model stops the launch, not runs the arm on the nominal URDF
            if node == "reference" and "mode" not in mine:
                out["mode"] = "hold"  # the robot files' demonstration move is for the simulators
            from idyn_ros.robots import get_robot

            position = get_robot(s.robot).position_controller
            if node == "controller" and s.torque_on_hardware and position and "position_command_topic" not in mine:
                out["position_command_topic"] = f"/{position}/commands"
            rate = s.hardware_rate()
            if rate and "rate_hz" not in mine:
                out["rate_hz"] = rate  # the driver's state rate (a CB3 UR: 125 Hz), not the nodes' 1 kHz
                files = file_values(list(s.files), node)
                for p in params_class(node).table():  # a filter default above the new Nyquist (the buffer's 50 Hz
                    if p.below_nyquist and p.name not in mine and files.get(p.name, p.default) >= rate / 2:
                        out[p.name] = 0.4 * rate  # at 100 Hz) follows the rate; one the user set is checked as given
        if node == "wrench_observer":
            out["torque_source"] = "effort" if s.mode == "hardware" or s.observer_only else "command"
            unit = s.effort_unit or driver_effort_unit(s)
            if s.mode == "hardware" and unit and (s.effort_unit or "effort_unit" not in file_values(s.files, node)):
                out["effort_unit"] = unit
    if mode_only:
        return {k: v for k, v in out.items() if k in MODE_SET and (k in declared or k == "use_sim_time")}
    out.update({k: v for k, v in s.overrides.items() if k in declared or (k == "use_sim_time" and node != "plant")})
    return {k: v for k, v in out.items() if k in declared or k == "use_sim_time"}


def parameter_yaml(s: GraphSettings, nodes: Sequence[str]) -> str:
    """The one parameter file of a process running ``nodes`` (see the module docstring)."""
    import yaml

    from idyn_ros.parameters import read_parameter_file

    class _NoAlias(yaml.SafeDumper):  # rcl refuses YAML aliases ("Will not support aliasing")
        def ignore_aliases(self, data: Any) -> bool:
            return True

    sections: dict[str, dict[str, Any]] = {}
    for path in s.files:
        for key, params in read_parameter_file(path).items():
            sections.setdefault(key, {}).update(params)
    for node in nodes:
        key = f"/{node}"
        merged = {**sections.pop(key, {}), **_plain(node_overrides(s, node))}  # last: applied after every file
        sections[key] = merged
    body = {key: {"ros__parameters": params} for key, params in sections.items()}
    return yaml.dump(body, Dumper=_NoAlias, sort_keys=False)


def parameter_file(s: GraphSettings, nodes: Sequence[str], folder: Path | None = None) -> Path:
    """``parameter_yaml`` in a file named by its content (in a temp folder by default); returns its path."""
    import hashlib
    import tempfile

    text = parameter_yaml(s, nodes)
    folder = Path(folder or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"idyn_{s.robot}_{'_'.join(nodes) if len(nodes) == 1 else 'nodes'}_" \
                    f"{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml"
    if not path.is_file():
        from idyn_ros.data.atomic import atomic_write_text

        atomic_write_text(path, text)
    return path


def _plain(values: Mapping[str, Any]) -> dict[str, Any]:
    """YAML-safe values: tuples and numpy arrays as lists of floats, numpy scalars as Python numbers."""
    out = {}
    for k, value in values.items():
        v = value.tolist() if hasattr(value, "tolist") else value
        if isinstance(v, tuple | list):
            v = [float(x) if isinstance(x, int | float) and not isinstance(x, bool) else x for x in v]
        out[k] = v
    return out


def controllers_file(s: GraphSettings, folder: Path | None = None) -> Path:
    """config/<robot>_controllers.yaml for ros2_control / gz_ros2_control, its joints renamed for ``s.prefix``."""
    import tempfile

    import yaml

    from idyn_ros.data.atomic import atomic_write_text
    from idyn_ros.paths import config_dir
    from idyn_ros.robots import get_robot

    path = config_dir() / f"{s.robot}_controllers.yaml"
    rate = get_robot(s.robot).hardware_torque_rate_hz if s.torque_on_hardware else 0.0
    if not s.prefix and not rate:
        return path
    rename = dict(zip(get_robot(s.robot).joint_names, get_robot(s.robot).with_prefix(s.prefix).joint_names,
                      strict=True))
    data = yaml.safe_load(path.read_text())
    if rate:  # the arm's stack asks for this rate in torque mode (module docstring); the nodes get it as rate_hz
        data["controller_manager"]["ros__parameters"]["update_rate"] = int(rate)
    for body in data.values():
        params = body.get("ros__parameters", {}) if isinstance(body, dict) else {}
        if isinstance(params.get("joints"), list):
            params["joints"] = [rename.get(j, j) for j in params["joints"]]
    out = Path(folder or tempfile.gettempdir()) / f"idyn_{s.robot}_{s.prefix.strip('/')}{s.mode}_controllers.yaml"
    atomic_write_text(out, yaml.safe_dump(data, sort_keys=False))
    return out


def robot_description(s: GraphSettings, xacro_args: Mapping[str, str] | None = None) -> str:
    """The URDF for robot_state_publisher / ros2_control / Gazebo in ``s.mode``: the robot's xacro with the prefix,
    the payload (``payload_*`` xacro arguments) and any other xacro argument (e.g. ``robot_ip``)."""
    from idyn_ros.robots import Payload, render_urdf

    args = {k: str(v) for k, v in (xacro_args or {}).items()}
    payload_args = {k: args.pop(k) for k in list(args) if k.startswith("payload_")}
    payload = None
    try:
        f = {k: float(v or 0.0) for k, v in payload_args.items()}
    except ValueError as exc:
        raise ParameterError(f"payload arguments must be numbers: {exc}") from None
    if f.get("payload_mass", 0.0) < 0.0:
        raise ParameterError(f"payload_mass must be >= 0 kg (0: none), got {f['payload_mass']:g}")
    if f.get("payload_mass", 0.0) > 0.0:
        payload = Payload(f["payload_mass"], (f.get("payload_com_x", 0.0), f.get("payload_com_y", 0.0),
                                              f.get("payload_com_z", 0.0)),
                          tuple(f.get(f"payload_{c}", 0.0) for c in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")))
    if s.mode == "gazebo":
        args["controllers_file"] = str(controllers_file(s))
    return render_urdf(s.robot, s.mode if s.mode != "mujoco" else "mock", s.prefix or None, payload, args)
