"""What a user sets for the graph (parameter files, ``idyn bringup --set`` and its options) takes effect or is refused
with the reason: nothing is accepted and then ignored or overridden without a word."""

from __future__ import annotations

import re

import pytest

from idyn_ros.errors import ParameterError
from idyn_ros.nodes.graph import GraphSettings, node_overrides
from idyn_ros.parameters import section_matches

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
