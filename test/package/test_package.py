"""The package as a user meets it: layout, colcon build, the `idyn` command, the no-torch rule."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)


def _setup_py_nodes() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "NODES":
            return [elt.value for elt in node.value.elts]
    raise AssertionError("setup.py has no NODES list")


def test_layout_has_every_part() -> None:
    for path in ("package.xml", "CMakeLists.txt", "setup.py", "README.md", "Makefile", ".ci/run",
                 "idyn_ros", "launch", "config", "msg", "srv", "urdf", "test", "requirements.in",
                 "requirements.lock"):
        assert (ROOT / path).exists(), f"{path} is missing"


def test_node_executables_agree_between_setup_py_and_cmake() -> None:
    """`ros2 run idyn_ros X` (CMake) and the pip console scripts name the same nodes, and each exists."""
    cmake = (ROOT / "CMakeLists.txt").read_text()
    cmake_nodes = re.search(r"set\(_nodes ([^)]*)\)", cmake).group(1).split()
    assert sorted(cmake_nodes) == sorted(_setup_py_nodes())
    for name in cmake_nodes:
        module = ROOT / "idyn_ros" / "nodes" / f"{name}.py"
        assert module.is_file(), f"node {name} is registered but {module} does not exist"
        assert re.search(r"^def main\(", module.read_text(), re.M), f"{module} has no main()"


def test_torch_pinned_exactly() -> None:
    lock = (ROOT / "requirements.lock").read_text().splitlines()
    assert "torch==2.13.0" in lock
    pinned = [line for line in lock if line and not line.startswith("#")]
    assert all("==" in line for line in pinned), "every locked requirement must be pinned with =="


def test_idyn_help_lists_every_command() -> None:
    from idyn_ros.cli import COMMANDS, _available_commands

    out = subprocess.run([str(VENV / "bin" / "idyn"), "--help"], capture_output=True, text=True, check=True)
    for name in _available_commands():
        assert name in out.stdout
        sub = subprocess.run([str(VENV / "bin" / "idyn"), name, "--help"], capture_output=True, text=True)
        assert sub.returncode == 0, f"idyn {name} --help failed: {sub.stderr}"
    missing = set(COMMANDS) - set(_available_commands())
    assert not missing, f"commands without a module: {sorted(missing)}"


def test_hot_path_layers_never_import_torch() -> None:
    """runtime/, control/ and nodes/ are what the 1 kHz loop imports: torch costs seconds and jitter."""
    modules = ["idyn_ros.runtime", "idyn_ros.control"]
    modules += [f"idyn_ros.nodes.{p.stem}" for p in sorted((ROOT / "idyn_ros" / "nodes").glob("*.py"))
                if p.stem != "__init__"]
    for sub in sorted((ROOT / "idyn_ros" / "control").glob("*.py")):
        modules.append(f"idyn_ros.control.{sub.stem}")
    for sub in sorted((ROOT / "idyn_ros" / "runtime").glob("*.py")):
        modules.append(f"idyn_ros.runtime.{sub.stem}")
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    assert 'torch' not in sys.modules, f'{name} imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))


@pytest.mark.ros
def test_colcon_build_installs_a_working_package(tmp_path: Path) -> None:
    """What a user with a ROS 2 install does: `colcon build`, then the installed package imports."""
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "idyn_ros").symlink_to(ROOT)
    env = dict(os.environ, AMENT_PREFIX_PATH=str(VENV), CMAKE_PREFIX_PATH=str(VENV),
               PATH=f"{VENV / 'bin'}:{os.environ['PATH']}")
    result = subprocess.run(
        [str(VENV / "bin" / "colcon"), "build", "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}",
         "-DBUILD_TESTING=OFF"],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    prefix = workspace / "install" / "idyn_ros"
    for name in _setup_py_nodes():
        assert (prefix / "lib" / "idyn_ros" / name).is_file()
    for folder in ("launch", "config", "urdf"):
        assert (prefix / "share" / "idyn_ros" / folder).is_dir()
    site = prefix / "lib" / "python3.11" / "site-packages"
    check = (
        "import idyn_ros, idyn_ros.msg, idyn_ros.srv\n"
        "from idyn_ros.paths import share_dir\n"
        f"assert str(share_dir()).startswith({str(prefix)!r}), share_dir()\n"
        "assert idyn_ros.__file__.startswith(%r), idyn_ros.__file__\n" % str(site)
    )
    library_path = f"{prefix / 'lib'}:{os.environ.get('LD_LIBRARY_PATH', '')}"
    run_env = dict(env, PYTHONPATH=str(site), LD_LIBRARY_PATH=library_path, AMENT_PREFIX_PATH=f"{prefix}:{VENV}")
    # The installed copy must win over the editable checkout that the venv also has on sys.path.
    result = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(site)!r})\n" + check],
                            cwd=tmp_path, env=run_env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]



def test_activating_the_venv_lets_ros2_launch_find_the_package(tmp_path: Path) -> None:
    """After `make setup`, `source .venv/bin/activate` names the venv as an ament prefix (once, however often it
    is sourced), so `ros2 launch idyn_ros ...` finds the launch files without exporting anything by hand."""
    if not (VENV / "bin" / "ros2").is_file():
        pytest.skip("no ros2 CLI in this venv (a ROS 2 install provides it)")
    env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "VIRTUAL_ENV")}
    script = (f"source {VENV / 'bin' / 'activate'} && source {VENV / 'bin' / 'activate'} && "
              "echo \"prefix=$AMENT_PREFIX_PATH\" && python -c 'from ament_index_python.packages import "
              "get_package_share_directory as s; print(\"share=\" + s(\"idyn_ros\"))'")
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"prefix={VENV}\n" in result.stdout, result.stdout
    assert f"share={VENV / 'share' / 'idyn_ros'}" in result.stdout, result.stdout

@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_controller_manager_config_matches_robot(robot: str) -> None:
    """The ros2_control controllers file names the robot's joints and the effort controller we command."""
    import yaml

    from idyn_ros.robots import get_robot

    spec = get_robot(robot)
    config = yaml.safe_load((ROOT / "config" / f"{robot}_controllers.yaml").read_text())
    manager = config["controller_manager"]["ros__parameters"]
    # ur5: ur_robot_driver's forward_effort_controller, a forward command controller on the effort interface
    forward = robot == "ur5"
    assert manager[spec.effort_controller]["type"] == ("forward_command_controller/ForwardCommandController" if forward
                                                       else "effort_controllers/JointGroupEffortController")
    if forward:
        assert config[spec.effort_controller]["ros__parameters"]["interface_name"] == "effort"
    assert manager["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
    assert tuple(config[spec.effort_controller]["ros__parameters"]["joints"]) == spec.joint_names
