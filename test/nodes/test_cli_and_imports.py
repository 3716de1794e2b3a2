"""`idyn bringup --help`, the launcher's command lines, and no torch on the hot path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from idyn_ros.nodes.launcher import Launcher


def test_bringup_help_answers_questions():
    out = subprocess.run([sys.executable, "-m", "idyn_ros.cli", "bringup", "--help"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    for text in ("--composed", "--model", "--gains", "--duration", "Examples:", "config/<robot>.yaml", "mujoco"):
        assert text in out


def test_launcher_command_lines_use_the_parameter_file(tmp_path):
    sep = Launcher("ur5", "mujoco", composed=False, overrides={"gain_preset": "soft"}).commands()
    assert set(sep) == {"plant", "joint_state_buffer", "feedforward", "controller", "doomed", "wrench_observer",
                        "reference"}
    assert sep["controller"][2] == "idyn_ros.nodes.controller"
    params = sep["controller"][sep["controller"].index("--params-file") + 1]
    text = Path(params).read_text()
    assert "gain_preset: soft" in text and "robot: ur5" in text
    comp = Launcher("panda", None, composed=True).commands()
    assert list(comp) == ["composed"] and "--nodes" in comp["composed"]


def test_hot_path_modules_never_import_torch():
    code = ("import sys; import idyn_ros.nodes.composed as c; c.factories(list(c.NODE_NAMES)); "
            "import idyn_ros.nodes.launcher, idyn_ros.control.doomed, idyn_ros.control.wrench; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
