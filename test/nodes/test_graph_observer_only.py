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


@pytest.mark.parametrize("robot", ["ur5"])
def test_torque_control_on_hardware_is_refused_where_the_driver_cannot_take_our_torques(robot):
    """The UR5 preset is a CB3, whose driver refuses the effort interface. Observing still works."""
    with pytest.raises(ParameterError, match=rf"mode hardware on the {robot} is not supported for torque control: .*"
                                             r"observer_only:=true"):
        GraphSettings(robot, mode="hardware")
    assert GraphSettings(robot, mode="hardware", observer_only=True).active_nodes == \
        ("joint_state_buffer", "wrench_observer")
    assert GraphSettings(robot, mode="mock").robot == robot  # the mock and the simulators take torques


def test_the_iiwa14_on_hardware_gets_a_position_with_every_torque(tmp_path):
    """lbr_fri_ros2_stack's FRI torque mode drops a torque that comes without a joint position: torque control was
    refused on the iiwa14. Now the position controller is spawned beside the effort controller, the controller node
    sends it the measured positions, and both run at the stack's torque rate (500 Hz)."""
    import yaml

    from idyn_ros.nodes.graph import controllers_file, node_overrides

    s = GraphSettings("iiwa14", mode="hardware")
    assert s.robot_side()[-2:] == ["effort_controller", "position_controller"]
    ctrl = node_overrides(s, "controller")
    assert ctrl["position_command_topic"] == "/position_controller/commands" and ctrl["rate_hz"] == 500.0
    assert node_overrides(s, "wrench_observer")["rate_hz"] == 500.0  # every node at the controller manager's rate
    manager = yaml.safe_load(controllers_file(s, tmp_path).read_text())
    assert manager["controller_manager"]["ros__parameters"]["update_rate"] == 500
    assert manager["position_controller"]["ros__parameters"]["interface_name"] == "position"
    # beside the stack's own launch (observer only) its 100 Hz stays, and nothing of ours commands
    observer = GraphSettings("iiwa14", mode="hardware", observer_only=True)
    assert observer.robot_side() == [] and node_overrides(observer, "wrench_observer")["rate_hz"] == 100.0
    # mock and the simulators take torques alone: no position controller, the file's 1 kHz
    mock = GraphSettings("iiwa14", mode="mock")
    assert "position_controller" not in mock.robot_side() and "position_command_topic" not in node_overrides(
        mock, "controller")
    assert yaml.safe_load(controllers_file(mock).read_text())["controller_manager"]["ros__parameters"][
        "update_rate"] == 1000
    # a topic of the user's own is taken; none at all is refused (the torques would be dropped)
    mine = GraphSettings("iiwa14", mode="hardware", overrides={"position_command_topic": "/lbr/positions"})
    assert "position_command_topic" not in node_overrides(mine, "controller", mode_only=True)
    assert node_overrides(mine, "controller")["position_command_topic"] == "/lbr/positions"
    with pytest.raises(ParameterError, match="position_command_topic is empty"):
        GraphSettings("iiwa14", mode="hardware", overrides={"position_command_topic": ""})
