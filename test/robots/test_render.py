"""Every robot x mode renders, loads in pinocchio and MuJoCo, and matches its source's joints and limits."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from idyn_ros.robots import MODES, ROBOT_NAMES, get_robot, render_urdf, urdf_for_mujoco

CASES = [(robot, mode) for robot in ROBOT_NAMES for mode in MODES]

EXPECTED_PLUGIN = {
    "mock": {r: "mock_components/GenericSystem" for r in ROBOT_NAMES},
    "mujoco": {r: "idyn_ros/MujocoSystem" for r in ROBOT_NAMES},
    "gazebo": {r: "gz_ros2_control/GazeboSimSystem" for r in ROBOT_NAMES},
    "hardware": {
        "panda": "franka_hardware/FrankaHardwareInterface",
        "iiwa14": "lbr_ros2_control::SystemInterface",
        "ur5": "ur_robot_driver/URPositionHardwareInterface",
    },
}


def _ros2_control(urdf: str) -> ET.Element:
    blocks = ET.fromstring(urdf).findall("ros2_control")
    assert len(blocks) == 1, f"expected one <ros2_control> block, found {len(blocks)}"
    return blocks[0]


@pytest.mark.parametrize(("robot", "mode"), CASES)
def test_renders_and_pinocchio_matches_source(robot, mode, source_joints):
    import pinocchio as pin

    spec = get_robot(robot)
    model = pin.buildModelFromXML(render_urdf(robot, mode=mode))
    source = source_joints[robot]
    assert model.nq == model.nv == spec.dof == len(source)
    assert tuple(model.names[1:]) == spec.joint_names == tuple(j.name for j in source)
    np.testing.assert_array_equal(model.lowerPositionLimit, [j.lower for j in source])
    np.testing.assert_array_equal(model.upperPositionLimit, [j.upper for j in source])
    np.testing.assert_array_equal(model.velocityLimit, [j.velocity for j in source])
    np.testing.assert_array_equal(model.effortLimit, [j.effort for j in source])
    assert model.existFrame(spec.flange_link) and model.existFrame(spec.base_link)


@pytest.mark.parametrize(("robot", "mode"), CASES)
def test_mujoco_loads_with_same_joints_and_limits(robot, mode, source_joints):
    import mujoco

    spec = get_robot(robot)
    m = mujoco.MjModel.from_xml_string(urdf_for_mujoco(render_urdf(robot, mode=mode)))
    source = source_joints[robot]
    assert m.nq == m.nv == spec.dof
    assert tuple(m.joint(i).name for i in range(m.njnt)) == spec.joint_names
    np.testing.assert_array_equal(m.jnt_range, [[j.lower, j.upper] for j in source])
    assert m.jnt_limited.all()
    # MuJoCo maps the URDF effort limit onto the joint's actuator force range.
    assert m.jnt_actfrclimited.all()
    np.testing.assert_array_equal(m.jnt_actfrcrange, [[-j.effort, j.effort] for j in source])
    # fusestatic=false: the flange survives as a named body (wrenches target it).
    assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, spec.flange_link) >= 0


@pytest.mark.parametrize(("robot", "mode"), CASES)
def test_ros2_control_effort_on_every_joint(robot, mode, source_joints):
    spec = get_robot(robot)
    block = _ros2_control(render_urdf(robot, mode=mode))
    assert block.get("type") == "system"
    assert block.find("hardware/plugin").text.strip() == EXPECTED_PLUGIN[mode][robot]
    joints = {j.get("name"): j for j in block.findall("joint")}
    assert tuple(joints) == spec.joint_names
    effort_limit = {j.name: j.effort for j in source_joints[robot]}
    for name, joint in joints.items():
        commands = {c.get("name"): c for c in joint.findall("command_interface")}
        states = {s.get("name") for s in joint.findall("state_interface")}
        assert "effort" in commands, f"{robot}/{mode}: {name} has no effort command interface"
        assert {"position", "velocity", "effort"} <= states
        bounds = {p.get("name"): float(p.text) for p in commands["effort"].findall("param")}
        assert bounds == {"min": -effort_limit[name], "max": effort_limit[name]}


def test_sim_modes_expose_exactly_effort_command():
    """mock/mujoco/gazebo: effort is the only command (gz_ros2_control takes one command per joint)."""
    for robot in ROBOT_NAMES:
        for mode in ("mock", "mujoco", "gazebo"):
            block = _ros2_control(render_urdf(robot, mode=mode))
            for joint in block.findall("joint"):
                assert [c.get("name") for c in joint.findall("command_interface")] == ["effort"]


def test_mock_initial_positions_inside_limits(source_joints):
    for robot in ROBOT_NAMES:
        block = _ros2_control(render_urdf(robot, mode="mock"))
        for joint, src in zip(block.findall("joint"), source_joints[robot], strict=True):
            pos = next(s for s in joint.findall("state_interface") if s.get("name") == "position")
            q0 = float(pos.find("param").text)
            assert src.lower <= q0 <= src.upper, f"{robot} {src.name}: initial {q0} outside limits"


def test_hardware_parameters():
    panda = _ros2_control(render_urdf("panda", mode="hardware", xacro_args={"robot_ip": "10.0.0.7"}))
    params = {p.get("name"): p.text for p in panda.findall("hardware/param")}
    assert params["robot_ip"] == "10.0.0.7"
    assert params["arm_id"] == "panda"

    iiwa = _ros2_control(render_urdf("iiwa14", mode="hardware", xacro_args={"port_id": "30201"}))
    params = {p.get("name"): p.text for p in iiwa.findall("hardware/param")}
    assert params["port_id"] == "30201"
    assert params["client_command_mode"] == "torque"
    assert params["remote_host"] == "INADDR_ANY"
    assert {"fri_client_sdk_major_version", "fri_client_sdk_minor_version", "rt_prio", "open_loop"} <= params.keys()
    assert iiwa.find("sensor[@name='auxiliary_sensor']") is not None

    ur5 = _ros2_control(render_urdf("ur5", mode="hardware", xacro_args={"robot_ip": "192.168.1.5"}))
    params = {p.get("name"): p.text for p in ur5.findall("hardware/param")}
    assert params["robot_ip"] == "192.168.1.5"
    assert params["script_filename"].endswith("external_control.urscript")
    assert params["output_recipe_filename"].endswith("rtde_output_recipe.txt")
    assert params["input_recipe_filename"].endswith("rtde_input_recipe.txt")
    assert params["reverse_port"] == "50001" and params["script_sender_port"] == "50002"
    assert params["ur_type"] == "ur5" and params["use_currents_as_efforts"] == "true"
    for joint in ur5.findall("joint"):  # the driver's on_init requires position AND velocity commands
        assert [c.get("name") for c in joint.findall("command_interface")] == ["position", "velocity", "effort"]
    for joint in panda.findall("joint"):  # franka_hardware: effort as the single command interface
        assert [c.get("name") for c in joint.findall("command_interface")] == ["effort"]


def test_gazebo_plugin_and_world_weld(tmp_path):
    controllers = tmp_path / "controllers.yaml"
    for robot in ROBOT_NAMES:
        spec = get_robot(robot)
        root = ET.fromstring(render_urdf(robot, mode="gazebo", xacro_args={"controllers_file": str(controllers)}))
        plugin = root.find("gazebo/plugin")
        assert plugin.get("filename") == "gz_ros2_control-system"
        assert plugin.get("name") == "gz_ros2_control::GazeboSimROS2ControlPlugin"
        assert plugin.find("parameters").text == str(controllers)
        weld = [j for j in root.findall("joint") if j.find("parent").get("link") == "world"]
        assert len(weld) == 1 and weld[0].find("child").get("link") == spec.base_link


def test_no_mesh_or_package_references():
    for robot, mode in CASES:
        urdf = render_urdf(robot, mode=mode)
        assert "package://" not in urdf and "<mesh" not in urdf


def test_the_franka_interface_version_reaches_the_driver_only_when_given():
    """franka_ros2 releases that check it refused to start: "Parameter 'version' is not set"."""
    def hardware(urdf: str) -> str:
        return urdf[urdf.index("<hardware>"):urdf.index("</hardware>")]

    assert '<param name="version">0.1.0</param>' in hardware(
        render_urdf("panda", mode="hardware", xacro_args={"franka_version": "0.1.0"}))
    assert "version" not in hardware(render_urdf("panda", mode="hardware"))
