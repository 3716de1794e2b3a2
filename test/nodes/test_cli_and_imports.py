"""`idyn bringup --help`, the launcher's command lines, and no torch on the hot path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from idyn_ros.nodes.graph import OUR_NODES, GraphSettings, parameter_yaml
from idyn_ros.nodes.launcher import Launcher


def test_bringup_help_answers_questions():
    out = subprocess.run([sys.executable, "-m", "idyn_ros.cli", "bringup", "--help"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    for text in ("--composed", "--model", "--gains", "--duration", "Examples:", "config/<robot>.yaml", "mujoco",
                 "SIGTERM", "--mode"):
        assert text in out


def test_bench_help_names_every_topic():
    from idyn_ros.bench import TOPICS
    from idyn_ros.commands import bench

    listed = re.findall(r"^  (\w+) ", bench.__doc__, flags=re.M)
    assert listed == list(TOPICS)  # what each writes, in the order `idyn bench` runs them


def test_launcher_command_lines_follow_the_graph_description(tmp_path):
    user = tmp_path / "mine.yaml"
    user.write_text("/controller:\n  ros__parameters:\n    gain_preset: stiff\n    damping_ratio: 0.8\n")
    sep = Launcher(GraphSettings("ur5", "mujoco", gains="soft", params_files=(str(user),))).commands()
    assert set(sep) == {"plant", "joint_state_buffer", "feedforward", "controller", "doomed", "wrench_observer",
                        "reference"}
    cmd = sep["controller"]
    assert cmd[2:4] == ["idyn_ros.nodes.start", "controller"] and "__node:=controller" in cmd
    files = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--params-file"]
    assert len(files) == 1
    data = yaml.safe_load(Path(files[0]).read_text())
    assert next(iter(data)) == "/**" and list(data)[-1] == "/controller"  # robot file first, launch arguments last
    assert data["/**"]["ros__parameters"]["robot"] == "ur5"
    assert data["/controller"]["ros__parameters"] == {"gain_preset": "soft", "damping_ratio": 0.8,
                                                      "use_sim_time": True, "subtract_gravity": False}
    comp = Launcher(GraphSettings("panda", "mujoco", composed=True, plant=False)).commands()
    assert list(comp) == ["composed"] and "--nodes" in comp["composed"]
    files = [comp["composed"][i + 1] for i, a in enumerate(comp["composed"]) if a == "--params-file"]
    assert {f"/{n}" for n in OUR_NODES} <= set(yaml.safe_load(Path(files[0]).read_text()))


def test_parameter_file_has_no_yaml_aliases():
    """rcl refuses parameter files with anchors/aliases ("Will not support aliasing"): the same list override
    for several nodes must be dumped as copies."""
    kp = [3.0, 4.0, 5.0, 1.0, 1.0, 1.0, 1.0]
    text = parameter_yaml(GraphSettings("panda", "mujoco", overrides={"presets.soft.kp": kp, "offset_limit": kp}),
                          list(OUR_NODES))
    assert not any(isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) for e in yaml.parse(text)), text
    assert "&" not in text and not re.search(r"\*[A-Za-z0-9_]", text), text
    data = yaml.safe_load(text)
    assert data["/controller"]["ros__parameters"]["presets.soft.kp"] == kp
    assert data["/doomed"]["ros__parameters"]["offset_limit"] == kp
    assert "presets.soft.kp" not in data["/doomed"]["ros__parameters"]  # only where declared


def test_hot_path_modules_never_import_torch():
    code = ("import sys; import idyn_ros.nodes.composed as c; c.factories(list(c.NODE_NAMES)); "
            "import idyn_ros.nodes.launcher, idyn_ros.control.doomed, idyn_ros.control.wrench; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_output_folders_that_cannot_be_written_are_refused_before_anything_starts(tmp_path, capsys, monkeypatch):
    """`idyn record -o`, `idyn demo -o/--work` and `idyn bringup --log-dir` ended in a mkdir traceback."""
    from idyn_ros.cli import main
    from idyn_ros.experiments import dds

    def never(*args, **kwargs):
        raise AssertionError("started before checking the output folder")

    monkeypatch.setattr(dds, "ensure_ros_env", never)
    monkeypatch.setattr(Launcher, "__init__", never)
    (tmp_path / "afile").write_text("")
    cases = [(["record", "-o", "/proc/bag", "--duration", "1"], "-o /proc/bag: cannot write in /proc"),
             (["demo", "--skip-dds", "-o", "/proc/x"], "--out /proc/x: cannot write in /proc"),
             (["demo", "--skip-dds", "--work", str(tmp_path / "afile")], "is a file; give a folder"),
             (["bringup", "--robot", "panda", "--log-dir", "/proc/logs"], "--log-dir /proc/logs: cannot write")]
    for argv, said in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and said in err, err
