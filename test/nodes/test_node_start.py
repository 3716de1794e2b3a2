"""A node process stopped while its modules still import ends quietly (``idyn_ros.nodes.start``).

When one node fails at start-up, a launch or `idyn bringup` stops the others, some still importing numpy, rclpy or
pinocchio; they printed a KeyboardInterrupt traceback that read as a second failure.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros


@pytest.mark.parametrize("node", ["wrench_observer", "composed"])
def test_a_stop_during_the_imports_exits_0_without_a_traceback(node):
    # -X importtime prints a line as each module finishes importing: numpy done, the node module is not yet
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "idyn_ros.nodes.start", node],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if line.startswith("import time:") and line.split("|")[-1].strip() == "numpy":
                proc.send_signal(signal.SIGINT)
                break
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert proc.returncode == 0 and not said, (proc.returncode, said[-5:])


def test_the_node_executables_go_through_it():
    """What `ros2 launch` runs (<prefix>/lib/idyn_ros/<node>, written by make setup) and `idyn bringup`'s commands."""
    from pathlib import Path

    from idyn_ros.nodes.graph import GraphSettings
    from idyn_ros.nodes.launcher import Launcher

    lib = Path(sys.prefix) / "lib" / "idyn_ros"
    if not lib.is_dir():
        pytest.skip("no ament layout in this environment (make setup writes it)")
    for script in lib.iterdir():
        assert f'run_node("{script.name}")' in script.read_text(), script
    commands = Launcher(GraphSettings("panda", mode="mujoco")).commands()
    assert commands and all(cmd[1:4] == ["-m", "idyn_ros.nodes.start", name] for name, cmd in commands.items())
