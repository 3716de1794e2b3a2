"""What a user sets for the graph (parameter files, ``idyn bringup --set`` and its options) takes effect or is refused
with the reason: nothing is accepted and then ignored or overridden without a word."""

from __future__ import annotations

import re

import pytest

from idyn_ros.errors import ParameterError
from idyn_ros.nodes.graph import GraphSettings, node_overrides, select_nodes
from idyn_ros.parameters import load, robot_file, section_matches

#: parameter-file section keys and whether rcl applies them to a node named controller in no namespace
KEYS = {"/**": True, "/*": True, "*": True, "**": True, "/**/*": True, "/**/**": True, "/controller": True,
        "controller": True, "/**/controller": True, "**/controller": True, "/*/controller": False,
        "/ns/controller": False, "ns/controller": False, "*/controller": False, "/**/ns/controller": False,
        "/*/*": False, "/feedforward": False}


def _file(tmp_path, text):
    path = tmp_path / f"user{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.ros
def test_section_keys_match_the_nodes_rcl_applies_them_to(tmp_path):
    """`/*` (every node, for rcl) was not applied by the in-process loader and the graph's checks; `/ns/controller`
    (no node of ours) was taken for the controller's."""
    import rclpy
    import yaml
    from rclpy.context import Context
    from rclpy.node import Node

    for key, applied in KEYS.items():
        path = tmp_path / "keys.yaml"
        path.write_text(yaml.safe_dump({key: {"ros__parameters": {"p": 1}}}))
        context = Context()
        rclpy.init(args=["--ros-args", "--params-file", str(path)], context=context)
        try:
            node = Node("controller", context=context)
            assert ("p" in node._parameter_overrides) is applied, key
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)
        assert section_matches(key, "controller") is applied, key


def test_a_section_that_reaches_none_of_our_nodes_is_refused(tmp_path):
    for key in ("/ns/controller", "/*/controller"):
        path = _file(tmp_path, f"{key}:\n  ros__parameters:\n    gain_preset: soft\n")
        with pytest.raises(ParameterError, match=rf"section '{re.escape(key)}' names no node of ours.*no namespace"):
            GraphSettings("panda", "mujoco", params_files=(path,))


def test_a_section_for_every_node_is_read_like_any_other(tmp_path):
    """``/*`` reaches every node: the mode's values are checked against it, and on hardware a reference mode it sets is
    the user's (it was overridden by the hold the graph sets when the user's files set no mode)."""
    forced = _file(tmp_path, "/*:\n  ros__parameters:\n    subtract_gravity: true\n")
    with pytest.raises(ParameterError, match=r"sets controller\.subtract_gravity: True, but mode mujoco sets False"):
        GraphSettings("panda", "mujoco", params_files=(forced,))
    moving = _file(tmp_path, "/*:\n  ros__parameters:\n    mode: trajectory\n")
    assert "mode" not in node_overrides(GraphSettings("panda", "hardware", params_files=(moving,)), "reference")
    assert node_overrides(GraphSettings("panda", "hardware"), "reference")["mode"] == "hold"


def test_a_section_no_started_node_reads_is_refused(tmp_path):
    """A section for the payload identifier without it, the plant's parameters in mode mock: as gains:= without a
    controller, nothing would read them."""
    ident = _file(tmp_path, "/payload_identifier:\n  ros__parameters:\n    design_budget: 5.0\n")
    with pytest.raises(ParameterError, match=r"section '/payload_identifier': no process started here .* reads "
                                             r"\['design_budget'\]"):
        GraphSettings("panda", "mujoco", params_files=(ident,))
    assert GraphSettings("panda", "mujoco", nodes=select_nodes(["payload_identifier"]), params_files=(ident,))
    plant = _file(tmp_path, "/**:\n  ros__parameters:\n    profile: ideal\n    gain_preset: soft\n")
    with pytest.raises(ParameterError, match=r"section '/\*\*': no process started here .* reads \['profile'\]"):
        GraphSettings("panda", "mock", params_files=(plant,))
    assert GraphSettings("panda", "mujoco", params_files=(plant,))


def test_a_file_setting_another_robot_is_refused(tmp_path):
    """The nodes would run the UR5 beside the Panda's URDF, controllers file and plant profile."""
    other = _file(tmp_path, "/**:\n  ros__parameters:\n    robot: ur5\n")
    with pytest.raises(ParameterError, match=r"sets robot \['ur5'\].*graph for the panda"):
        GraphSettings("panda", "mujoco", params_files=(other,))
    same = _file(tmp_path, "/**:\n  ros__parameters:\n    robot: panda\n")
    assert GraphSettings("panda", "mujoco", params_files=(same,))


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"mode": "mujoco", "overrides": {"design_budget": 5.0}}, "design_budget"),  # payload_identifier not started
    ({"mode": "mock", "overrides": {"physics_rate": 2000.0}}, "physics_rate"),  # no plant in mode mock
    ({"mode": "mujoco", "plant": False, "overrides": {"profile": "ideal"}}, "profile"),  # the plant runs already
    ({"mode": "mujoco", "overrides": {"start_type_description_service": False}}, "start_type_description_service"),
])
def test_a_set_parameter_no_started_process_reads_is_refused(kwargs, name):
    with pytest.raises(ParameterError, match=rf"no process started here .* reads \['{name}'\]"):
        GraphSettings("panda", **kwargs)


def test_a_set_parameter_that_a_started_process_reads_is_accepted():
    s = GraphSettings("panda", "mujoco", nodes=select_nodes(["payload_identifier"]),
                      overrides={"design_budget": 5.0, "physics_rate": 2000.0, "use_sim_time": True})
    assert node_overrides(s, "payload_identifier")["design_budget"] == 5.0
    assert node_overrides(s, "plant")["physics_rate"] == 2000.0


def test_a_set_parameter_contradicting_an_option_is_refused(tmp_path):
    """--set won over --gains, --model, --robot, ... without a word."""
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    cases = [({"gains": "soft"}, {"gain_preset": "stiff"}, "gain_preset='stiff' contradicts"),
             ({"model": "none"}, {"model_path": str(model)}, "model_path=.* contradicts the option that sets it to ''"),
             ({}, {"robot": "ur5"}, "robot='ur5' contradicts"),
             ({"clock": "lockstep"}, {"clock_mode": "realtime"}, "clock_mode='realtime' contradicts")]
    for options, overrides, said in cases:
        with pytest.raises(ParameterError, match=said):
            GraphSettings("panda", "mujoco", overrides=overrides, **options)
    same = GraphSettings("panda", "mujoco", gains="soft", model=str(model), overrides={
        "gain_preset": "soft", "model_path": str(model)})
    assert node_overrides(same, "controller")["gain_preset"] == "soft"


def test_a_set_parameter_without_a_value_is_refused():
    """`--set npz_path=` (YAML null) reached the node as the string 'null' (rcl's reading of null)."""
    with pytest.raises(ParameterError, match=r"no value for \['npz_path'\].*NAME=''"):
        GraphSettings("panda", "mujoco", overrides={"npz_path": None})
    assert node_overrides(GraphSettings("panda", "mujoco", overrides={"npz_path": ""}), "reference")["npz_path"] == ""


def test_a_file_parameter_without_a_value_is_refused(tmp_path):
    """rcl refuses `npz_path:` with no value; merged into the launch's file it became npz_path: null, the string."""
    path = _file(tmp_path, "/reference:\n  ros__parameters:\n    npz_path:\n    start_delay: 2.0\n")
    with pytest.raises(ParameterError, match=r"section '/reference': no value for \['npz_path'\]"):
        GraphSettings("panda", "mujoco", params_files=(path,))


def test_set_clock_mode_moves_the_nodes_to_the_plants_clock():
    """--set clock_mode=realtime ran the plant on the wall clock while our nodes waited for a /clock it never sent."""
    s = GraphSettings("panda", "mujoco", overrides={"clock_mode": "realtime"})
    assert node_overrides(s, "plant")["clock_mode"] == "realtime"
    assert s.sim_time() is False and node_overrides(s, "controller")["use_sim_time"] is False


def test_observer_only_refuses_the_nodes_named_that_it_would_not_start():
    """They were dropped without a word (the payload identifier, a controller named beside the observer)."""
    for nodes, dropped in ((select_nodes(["payload_identifier"]), r"\['payload_identifier'\]"),
                           (("joint_state_buffer", "wrench_observer", "controller"), r"\['controller'\]")):
        with pytest.raises(ParameterError, match=rf"observer_only:=true runs only .*: {dropped} named in nodes"):
            GraphSettings("ur5", "mock", observer_only=True, nodes=nodes)
    assert GraphSettings("ur5", "mock", observer_only=True).active_nodes == ("joint_state_buffer", "wrench_observer")


def test_bringup_refuses_an_executor_with_separate_processes(capsys, monkeypatch):
    """--executor events reached no process without --composed (each node process runs its own)."""
    from idyn_ros.cli import main
    from idyn_ros.nodes.launcher import Launcher

    def never(*args, **kwargs):
        raise AssertionError("started before checking --executor")

    monkeypatch.setattr(Launcher, "__init__", never)
    assert main(["bringup", "--robot", "panda", "--executor", "events"]) == 2
    assert "--executor events applies to --composed only" in capsys.readouterr().err


def test_a_number_in_exponent_form_is_a_number_as_rcl_reads_it(tmp_path):
    """rcl reads max_stamp_age: 5e-2 as 0.05; the loader read the string '5e-2' (YAML 1.1) and refused it."""
    path = _file(tmp_path, "/**/controller:\n  ros__parameters:\n    max_stamp_age: 5e-2\n"
                           "    torque_rate_limit: 1E+3\n")
    params = load("controller", "panda", files=[robot_file("panda"), path])
    assert (params.max_stamp_age, params.torque_rate_limit) == (0.05, 1000.0)
    from idyn_ros.commands.bringup import _parse_value  # --set NAME=VALUE: the same reading

    assert _parse_value("5e-2") == 0.05 and _parse_value("[1, 2]") == [1, 2] and _parse_value("soft") == "soft"


@pytest.mark.parametrize(("mode", "overrides"), [("hardware", {"subtract_gravity": False}),
                                                 ("hardware", {"torque_source": "command"}),
                                                 ("mujoco", {"use_sim_time": False})])
def test_a_set_parameter_against_what_the_mode_decides_is_refused_as_in_a_file(mode, overrides):
    """--set subtract_gravity=false on hardware won over the mode (the vendor adds g(q): the arm got it twice), where a
    parameter file doing the same is refused; the value the mode sets itself is accepted."""
    name = next(iter(overrides))
    with pytest.raises(ParameterError, match=rf"{name}=.*but mode {mode} sets"):
        GraphSettings("panda", mode, overrides=overrides)
    same = {name: {"subtract_gravity": True, "torque_source": "effort", "use_sim_time": True}[name]}
    assert GraphSettings("panda", mode, overrides=same).mode == mode


def test_a_prefix_given_past_the_prefix_option_is_refused_where_a_urdf_is_rendered(tmp_path):
    """A file's prefix reached our nodes only: the URDF and the controllers file of mode mock kept the vendor names,
    and the nodes said "missing joint" at run time. Beside a driver's own launch (observer only) it is the user's."""
    mine = tmp_path / "prefix.yaml"
    mine.write_text("/**:\n  ros__parameters:\n    prefix: left_\n")
    with pytest.raises(ParameterError, match="give it as the prefix option"):
        GraphSettings("panda", "mock", params_files=(str(mine),))
    assert GraphSettings("panda", "mock", prefix="left_", params_files=(str(mine),)).prefix == "left_"
    assert GraphSettings("panda", "hardware", observer_only=True, params_files=(str(mine),)).robot_side() == []


SCALARS = ["1_000", "2026-01-01", "1:30", "0b11", "0o10", "010", "089", "0x1F", "-0x10", "+5", "99999999999999999999",
           "5e-2", "1E+3", "1.", ".5", "1e400", "0x1p3", ".inf", "-.Inf", ".NaN", "NaN", "inf", "y", "N", "yes", "Off",
           "TRUE", "1e", "soft", "'0.5'", '"true"']


@pytest.mark.ros
def test_parameter_files_are_read_as_rcl_reads_them(tmp_path):
    """The graph checks what a node will get, so a file must load as rcl loads it: PyYAML read `1_000` as 1000 and
    `2026-01-01` as a date (a node gets text), `y` and `NaN` as text (a node gets true and nan). Compared with a
    real rclpy node given the same file."""
    import math

    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node

    from idyn_ros.parameters import read_parameter_file

    path = _file(tmp_path, "/**:\n  ros__parameters:\n" + "".join(f"    p{i}: {v}\n" for i, v in enumerate(SCALARS)))
    ours = read_parameter_file(path)["/**"]
    context = Context()
    rclpy.init(context=context, args=["--ros-args", "--params-file", str(path)])
    try:
        node = Node("scalar_probe", context=context, automatically_declare_parameters_from_overrides=True)
        for i, text in enumerate(SCALARS):
            rcl, mine = node.get_parameter(f"p{i}").value, ours[f"p{i}"]
            same = rcl == mine or (isinstance(rcl, float) and math.isnan(rcl) and math.isnan(mine))
            assert type(rcl) is type(mine) and same, f"{text}: rcl {rcl!r}, ours {mine!r}"
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    assert read_parameter_file(_file(tmp_path, "/**:\n  ros__parameters:\n    on: 1\n"))["/**"] == {"on": 1}


def test_a_list_rcl_would_refuse_is_refused_before_any_node_starts(tmp_path, capsys):
    """rcl refuses a whole file whose list mixes 1 and 2.5 (every node then failed at start with rcl's parse error);
    a --set value that is no YAML was a traceback."""
    from idyn_ros.cli import main

    mixed = _file(tmp_path, "/**/controller:\n  ros__parameters:\n    presets:\n      soft:\n        kp: [1, 2.5]\n")
    with pytest.raises(ParameterError, match="a list mixes float and int values, which rcl refuses"):
        GraphSettings("panda", "mujoco", params_files=(str(mixed),))
    assert main(["bringup", "--robot", "panda", "--set", "presets.soft.kp=[1, 2.5]", "--set", "x=[a"]) == 2
    assert "--set value '[1, 2.5]' is not a parameter value: a list mixes" in capsys.readouterr().err
    assert main(["bringup", "--robot", "panda", "--set", "x=[a"]) == 2
    assert "--set value '[a' is not a parameter value" in capsys.readouterr().err


def test_a_node_declares_only_the_shared_parameters_it_reads(tmp_path):
    """Every node declared every shared topic and model parameter: joint_state_buffer took model_path from a file or
    --set and never read it. Now a value only a node that ignores it would get is refused by name."""
    from idyn_ros.nodes.graph import declared_parameters

    declared = declared_parameters()
    assert "model_path" not in declared["joint_state_buffer"] and "command_topic" not in declared["reference"]
    assert {"model_path", "warmup_ticks", "command_topic"} <= declared["wrench_observer"]
    mine = _file(tmp_path, "/**/joint_state_buffer:\n  ros__parameters:\n    model_path: /tmp/m.onnx\n")
    with pytest.raises(ParameterError, match=r"no joint_state_buffer has parameter\(s\) \['model_path'\]"):
        GraphSettings("panda", "mujoco", params_files=(str(mine),))
    with pytest.raises(ParameterError, match=r"reads \['model_path'\]"):
        GraphSettings("panda", "mujoco", nodes=("joint_state_buffer",), overrides={"model_path": "/tmp/m.onnx"})
    assert "model_path" in GraphSettings("panda", "mujoco", nodes=("controller",),
                                         overrides={"model_path": "none"}).overrides


def test_a_value_the_configuration_never_reads_is_refused(tmp_path):
    """feedforward_timeout beside the embedded feedforward, npz_path without mode npz, effort_unit where the wrench
    observer takes the command as its torque: each was accepted and did nothing. The default, or the setting that
    makes it act, is accepted."""
    cases = [({"feedforward_timeout": 0.02}, r"controller reads feedforward_timeout only with feedforward_source "
              r"'topic', but runs with feedforward_source='embedded' \(set it, or leave this out\)"),
             ({"npz_path": "/tmp/x.npz"}, r"reference reads npz_path only with mode 'npz', but runs with "
              r"mode='setpoints'"),
             ({"command_timeout": 0.2}, r"plant reads command_timeout only with clock_mode 'realtime'")]
    for overrides, message in cases:
        with pytest.raises(ParameterError, match=message):
            GraphSettings("panda", "mujoco", overrides=overrides)
    mine = _file(tmp_path, "/**/wrench_observer:\n  ros__parameters:\n    effort_unit: current\n")
    with pytest.raises(ParameterError, match=r"runs with torque_source='command' \(mode mujoco sets it\)"):
        GraphSettings("ur5", "mujoco", params_files=(mine,))
    GraphSettings("panda", "mujoco", overrides={"feedforward_timeout": 0.02, "feedforward_source": "topic"})
    GraphSettings("panda", "mujoco", overrides={"npz_path": "", "setpoints": []}, nodes=("reference",))
    GraphSettings("panda", "mujoco", overrides={"command_timeout": 0.2}, clock="realtime")
