"""The graph description's observer-only bringup and effort unit (what launch and idyn bringup both start)."""

from __future__ import annotations

import pytest

from idyn_ros.errors import ParameterError
from idyn_ros.nodes.graph import GraphSettings, node_overrides, parameter_yaml


def test_observer_only_starts_the_buffer_and_the_observer_on_the_measured_effort():
    s = GraphSettings("ur5", mode="hardware", observer_only=True, effort_unit="current")
    assert s.processes == ["joint_state_buffer", "wrench_observer"]
    assert s.robot_side() == []  # on hardware the driver's own launch runs the arm
    assert node_overrides(s, "wrench_observer")["torque_source"] == "effort"
    assert node_overrides(s, "wrench_observer")["effort_unit"] == "current"
    composed = GraphSettings("ur5", mode="mock", observer_only=True, composed=True)
    assert composed.processes == ["composed"] and composed.active_nodes == ("joint_state_buffer", "wrench_observer")
    assert composed.robot_side() == ["robot_state_publisher", "ros2_control_node", "joint_state_broadcaster"]
    assert "/controller:" not in parameter_yaml(composed, list(composed.active_nodes))


def test_observer_only_refusals_name_the_reason():
    with pytest.raises(ParameterError, match=r"observer_only.*mujoco"):
        GraphSettings("ur5", mode="mujoco", observer_only=True)
    with pytest.raises(ParameterError, match="has none"):
        GraphSettings("ur5", mode="hardware", observer_only=True, nodes=("controller",))
    with pytest.raises(ParameterError, match="effort_unit"):
        GraphSettings("ur5", mode="hardware", observer_only=True, effort_unit="amps")


def test_bringup_observer_only_commands(tmp_path):
    from idyn_ros.nodes.launcher import Launcher

    s = GraphSettings("ur5", mode="hardware", observer_only=True)
    cmds = Launcher(s, tmp_path).commands()
    assert set(cmds) == {"joint_state_buffer", "wrench_observer"}
    full = Launcher(GraphSettings("panda", mode="hardware"), tmp_path).commands()
    assert "controller" in full and "wrench_observer" in full


@pytest.mark.parametrize("robot", ["iiwa14", "ur5"])
def test_torque_control_on_hardware_is_refused_where_the_driver_cannot_take_our_torques(robot):
    """The iiwa's lbr stack dropped our torques without a word (FRI torque mode wants a joint position with each
    torque); the UR5 preset is a CB3, whose driver refuses the effort interface. Observing still works."""
    with pytest.raises(ParameterError, match=rf"mode hardware on the {robot} is not supported for torque control: .*"
                                             r"observer_only:=true"):
        GraphSettings(robot, mode="hardware")
    assert GraphSettings(robot, mode="hardware", observer_only=True).active_nodes == \
        ("joint_state_buffer", "wrench_observer")
    assert GraphSettings(robot, mode="mock").robot == robot  # the mock and the simulators take torques
