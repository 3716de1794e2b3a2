"""`idyn bringup --help`, the launcher's command lines, and no torch on the hot path."""

from __future__ import annotations

import re
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


def test_merged_parameter_file_has_no_yaml_aliases(tmp_path):
    """rcl refuses parameter files with anchors/aliases ("Will not support aliasing"): a list override
    written into every section must be dumped as a copy, also when the source file itself uses anchors."""
    import yaml

    src = tmp_path / "p.yaml"
    src.write_text("/**:\n  ros__parameters:\n    robot: panda\n    lst: &a [1.0, 2.0]\n"
                   "/**/controller:\n  ros__parameters:\n    other: *a\n"
                   "/**/doomed:\n  ros__parameters: {}\n")
    kp = [3.0, 4.0, 5.0]
    launcher = Launcher("panda", None, overrides={"presets.soft.kp": kp, "gain_preset": "soft"}, params_file=src)
    text = launcher._merged_file(launcher.overrides).read_text()
    events = list(yaml.parse(text))
    assert not any(isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) for e in events), text
    assert "&" not in text and not re.search(r"\*[A-Za-z0-9_]", text), text  # no &anchor/*alias ("/**" is fine)
    data = yaml.safe_load(text)
    assert set(data) == {"/**", "/**/controller", "/**/doomed"}
    for section in data.values():
        assert section["ros__parameters"]["presets.soft.kp"] == kp
        assert section["ros__parameters"]["gain_preset"] == "soft"
    assert data["/**"]["ros__parameters"]["lst"] == [1.0, 2.0]
    assert data["/**/controller"]["ros__parameters"]["other"] == [1.0, 2.0]
    # the real config file too
    real = Launcher("panda", None, overrides={"presets.soft.kp": kp})
    text = real._merged_file(real.overrides).read_text()
    assert not any(isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) for e in yaml.parse(text))
    assert "&id" not in text and "*id" not in text
    assert all(s["ros__parameters"]["presets.soft.kp"] == kp for s in yaml.safe_load(text).values())
