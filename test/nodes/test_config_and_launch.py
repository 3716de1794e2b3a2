"""Static checks: parameter files vs. the declarative parameter table, and launch files (AST only:
launch_ros is not installed here) referring only to existing executables, declared parameters, files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from idyn_ros.nodes import parameters as prm
from idyn_ros.robots import ROBOT_NAMES, get_robot

ROOT = Path(__file__).resolve().parents[2]
OUR_NODES = tuple(prm.NODE_PARAMETERS)


def _plant_parameters() -> set[str]:
    from idyn_ros.nodes.plant import PARAMETERS

    return set(PARAMETERS)


def _executables() -> set[str]:
    setup = (ROOT / "setup.py").read_text()
    nodes = set(re.findall(r'"(\w+)"', setup[setup.index("NODES = [") : setup.index("]", setup.index("NODES = ["))]))
    cmake = (ROOT / "CMakeLists.txt").read_text()
    cmake_nodes = set(re.search(r"set\(_nodes ([^)]*)\)", cmake).group(1).split())
    assert nodes == cmake_nodes, f"setup.py and CMakeLists.txt register different nodes: {nodes ^ cmake_nodes}"
    return nodes


def _config(robot: str) -> dict:
    return yaml.safe_load((ROOT / "config" / f"{robot}.yaml").read_text())


@pytest.mark.parametrize("robot", ROBOT_NAMES)
def test_config_keys_are_declared_and_valid(robot):
    cfg = _config(robot)
    n = get_robot(robot).dof
    declared_common = {p.name for p in prm.COMMON}
    for section, body in cfg.items():
        params = body["ros__parameters"]
        if section == "/**":
            unknown = set(params) - declared_common
            vals = params
            kinds = []
        else:
            node = section.removeprefix("/**/")
            if node == "plant":
                assert not set(params) - _plant_parameters(), f"undeclared plant parameters in {robot}.yaml"
                continue
            assert node in OUR_NODES, f"section {section} in {robot}.yaml is not one of our nodes"
            unknown = set(params) - {p.name for p in prm.params_for(node)}
            vals = {**cfg["/**"]["ros__parameters"], **params}
            kinds = [node]
        assert not unknown, f"{robot}.yaml {section}: undeclared {sorted(unknown)}"
        for kind in kinds:
            problems = prm.validate_all(kind, vals, n)
            assert not problems, problems


@pytest.mark.parametrize("robot", ROBOT_NAMES)
def test_every_node_parameter_is_in_each_config(robot):
    """One source of truth: each tunable of each node appears in config/<robot>.yaml."""
    cfg = _config(robot)
    present = set(cfg["/**"]["ros__parameters"])
    for node in OUR_NODES:
        own = set(cfg.get(f"/**/{node}", {}).get("ros__parameters", {}))
        missing = {p.name for p in prm.params_for(node)} - present - own - {"prefix"}
        assert not missing, f"{robot}.yaml lacks {node} parameters {sorted(missing)}"


def test_validator_rejects_bad_values_with_reasons():
    table = {p.name: p for p in prm.params_for("controller")}
    assert "below its minimum" in prm.check(table["presets.soft.kp"], [-1.0] * 7, 7, {})
    assert "7 joints" in prm.check(table["presets.stiff.kp"], [1.0] * 6, 7, {})
    assert "not one of" in prm.check(table["gain_preset"], "wobbly", 7, {})
    assert prm.check(table["presets.medium.kp"], [50.0] * 7, 7, {}) is None
    jsb = {p.name: p for p in prm.params_for("joint_state_buffer")}
    assert "Nyquist" in prm.check(jsb["accel_cutoff_hz"], 600.0, 7, {"rate_hz": 1000.0})
    assert "| `learning_rate` |" in prm.render_markdown()


def _launch_calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Node"]


def _kw(call: ast.Call, name: str):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def test_launch_files_reference_existing_nodes_parameters_and_files():
    common = ROOT / "launch" / "idyn_common.py"
    executables = _executables()
    calls = _launch_calls(common)
    ours = [c for c in calls if isinstance(_kw(c, "package"), ast.Name) and _kw(c, "package").id == "PACKAGE"]
    names = {_kw(c, "executable").value for c in ours}
    assert names == set(OUR_NODES) | {"plant"}, names
    assert names <= executables
    plant_params = _plant_parameters()
    for call in ours:
        exe = _kw(call, "executable").value
        declared = plant_params if exe == "plant" else {p.name for p in prm.params_for(exe)}
        for node in ast.walk(_kw(call, "parameters")):
            if isinstance(node, ast.Dict):
                for key in node.keys:
                    assert isinstance(key, ast.Constant) and key.value in declared, (exe, ast.dump(key))
        params_arg = _kw(call, "parameters")
        assert any(isinstance(e, ast.Name) and e.id == "params_file" for e in params_arg.elts), exe
    # the overrides dict passed to the controller
    text = common.read_text()
    over = re.search(r"overrides = \{([^}]*)\}", text).group(1)
    for key in re.findall(r'"(\w+)":', over):
        assert key in {p.name for p in prm.params_for("controller")}, key
    # files the launch reads exist for every robot (share layout = source layout)
    for robot in ROBOT_NAMES:
        for rel in (f"config/{robot}.yaml", f"config/{robot}_controllers.yaml", f"urdf/{robot}.urdf.xacro"):
            assert (ROOT / rel).is_file(), rel
        launch = ROOT / "launch" / f"{robot}.launch.py"
        tree = ast.parse(launch.read_text())
        gen = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "generate"]
        assert gen and gen[0].args[0].value == robot
        assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    # spawned controller names are the robot spec's and the controllers file's
    assert re.search(r'\("joint_state_broadcaster", "effort_controller"\)', text)
    for robot in ROBOT_NAMES:
        ctrl = yaml.safe_load((ROOT / "config" / f"{robot}_controllers.yaml").read_text())
        cm = ctrl["controller_manager"]["ros__parameters"]
        assert get_robot(robot).effort_controller in cm
        assert cm[get_robot(robot).effort_controller]["type"] == "effort_controllers/JointGroupEffortController"
        assert "joint_state_broadcaster" in cm
    # launch arguments
    for arg in ("mode", "model", "gains"):
        assert f'DeclareLaunchArgument("{arg}"' in text
    assert 'MODES = ("hardware", "mock", "gazebo", "mujoco")' in text
