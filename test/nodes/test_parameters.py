"""The one parameter declaration (idyn_ros/parameters.py): robot files, docs, validation, and the in-process
loader agreeing with what a real rclpy node reads from the same files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from idyn_ros import parameters as prm
from idyn_ros.errors import ParameterError
from idyn_ros.robots import ROBOT_NAMES, get_robot

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("robot", ROBOT_NAMES)
def test_every_node_loads_valid_parameters_from_each_robot_file(robot):
    n = get_robot(robot).dof
    for node in prm.NODES:
        params = prm.load(node, robot, n=n)
        if "robot" in params.values():
            assert params.robot == robot


@pytest.mark.parametrize("robot", ROBOT_NAMES)
def test_robot_files_hold_only_what_differs_from_the_defaults(robot):
    data = yaml.safe_load((ROOT / "config" / f"{robot}.yaml").read_text())
    for section, body in data.items():
        node = section.removeprefix("/**/")
        tables = [prm.CommonParams] if section == "/**" else [prm.params_class(node)]
        defaults = {p.name: p.default for cls in tables for p in cls.table()}
        for name, value in body["ros__parameters"].items():
            assert name in defaults, f"{robot}.yaml {section}: {name} is not a parameter of {node}"
            default = list(defaults[name]) if isinstance(defaults[name], tuple) else defaults[name]
            assert name == "robot" or value != default, f"{robot}.yaml {section}: {name} repeats its default"


def test_docs_are_generated_from_the_declaration():
    assert (ROOT / "docs" / "parameters.md").read_text() == prm.render_markdown(), \
        "docs/parameters.md is stale: python -m idyn_ros.parameters > docs/parameters.md"


def test_docs_give_a_node_summary_that_wraps_in_its_docstring_whole():
    """Only the docstring's first line was kept: gripper_compensation's ended in "; not in the default"."""
    assert "(``idyn_ros.nodes.gripper_compensation``); not in the default graph.\n" in prm.render_markdown()


def test_values_are_checked_with_reasons():
    table = {p.name: p for p in prm.ControllerParams.table()}
    assert "below its minimum" in prm.check(table["presets.soft.kp"], [-1.0] * 7, 7, {})
    assert "7 joints" in prm.check(table["presets.stiff.kp"], [1.0] * 6, 7, {})
    assert "not one of" in prm.check(table["gain_preset"], "wobbly", 7, {})
    assert "finite" in prm.check(table["damping_ratio"], float("nan"), 7, {})
    assert prm.check(table["presets.medium.kp"], [50.0] * 7, 7, {}) is None
    jsb = {p.name: p for p in prm.JointStateBufferParams.table()}
    assert "Nyquist" in prm.check(jsb["accel_cutoff_hz"], 600.0, 7, {"rate_hz": 1000.0})
    with pytest.raises(ParameterError, match=r"damping_ratio.*below its minimum"):
        prm.ControllerParams.from_values({"damping_ratio": -1.0})
    params = prm.ControllerParams.from_values({"gain_preset": "soft", "presets.soft.kp": [2, 2, 2, 2, 2, 2, 2]}, 7)
    assert params.gain_preset == "soft" and params.presets_soft_kp == (2.0,) * 7  # typed: floats, a tuple
    with pytest.raises(ParameterError, match="not 'panda'"):
        prm.load("controller", "panda", files=[ROOT / "config" / "ur5.yaml"])


def test_a_frozen_object_per_node_no_string_lookups():
    params = prm.load("controller", "panda", n=7)
    with pytest.raises(AttributeError):
        params.gain_preset = "stiff"  # frozen: a change is a new object, swapped whole
    assert params.replace(7, gain_preset="stiff").gain_preset == "stiff"
    assert params.preset_kp("stiff", 6) == (400.0, 400.0, 200.0, 200.0, 200.0, 200.0)


@pytest.mark.ros
def test_loader_applies_the_precedence_rclpy_applies(tmp_path, rclpy_context):
    """Node sections beat the wildcard whichever file sets them; a later file wins under the same key; a key
    first seen later wins over earlier ones. A real rclpy node reads the same files as ``load``."""
    import rclpy

    from idyn_ros.nodes.ros_parameters import NodeParameters

    own = tmp_path / "own.yaml"
    own.write_text("/**:\n  ros__parameters:\n    gain_preset: soft\n    damping_ratio: 0.7\n"
                   "/**/controller:\n  ros__parameters:\n    torque_rate_limit: 500.0\n")
    late = tmp_path / "late.yaml"
    late.write_text("/controller:\n  ros__parameters:\n    torque_rate_limit: 250.0\n    effort_scale: 0.5\n"
                    "/**/controller:\n  ros__parameters:\n    torque_rate_limit: 100.0\n")
    base = tmp_path / "base.yaml"
    base.write_text("/**:\n  ros__parameters:\n    robot: panda\n"
                    "/**/controller:\n  ros__parameters:\n    gain_preset: stiff\n    torque_rate_limit: 900.0\n")
    files = [base, own, late]
    args = ["--ros-args", *[a for f in files for a in ("--params-file", str(f))]]
    context = rclpy.context.Context()
    rclpy.init(args=args, context=context)
    try:
        node = rclpy.create_node("controller", context=context)
        from_ros = NodeParameters(node, prm.ControllerParams).value
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    in_process = prm.load("controller", "panda", files=files)
    assert from_ros == in_process
    assert in_process.gain_preset == "stiff"  # /**/controller (first seen in base) beats /** (own)
    assert in_process.damping_ratio == 0.7
    assert in_process.torque_rate_limit == 250.0  # /controller is first seen last: it wins
    assert in_process.effort_scale == 0.5


@pytest.mark.ros
@pytest.mark.parametrize("node_name", ["joint_state_buffer", "wrench_observer", "doomed", "feedforward", "reference"])
def test_use_sim_time_set_at_run_time_is_refused(rclpy_context, node_name):
    """`ros2 param set /joint_state_buffer use_sim_time true` said "successful" and moved the node's timers to a
    /clock nobody published: its /diagnostics (the stale-input report included) stopped for good."""
    from rclpy.parameter import Parameter

    from idyn_ros.nodes import composed

    (factory,) = composed.factories([node_name])
    node = factory(context=rclpy_context)
    try:
        result = node.set_parameters([Parameter("use_sim_time", value=True)])[0]
        assert not result.successful and "use_sim_time is read at start" in result.reason
        assert node.get_parameter("use_sim_time").value is False
        assert node.set_parameters([Parameter("use_sim_time", value=False)])[0].successful  # no change: fine
    finally:
        node.destroy_node()
