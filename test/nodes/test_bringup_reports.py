"""What ``idyn bringup`` tells a user without --log-dir: every node's WARN/ERROR/FATAL line, a failure as exit code 1
with its reason, a progress bar that ends at 100 %, and no parameter files left in the temp folder.

Each run gets TMPDIR of its own, so the parameter files a run leaves behind are visible.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros


def _bringup(probe, tmp: Path, *args: str, timeout: float = 90.0) -> tuple[int, str]:
    scratch = tmp / "tmp"
    scratch.mkdir(exist_ok=True)
    got = subprocess.run([sys.executable, "-m", "idyn_ros.cli", "bringup", "--robot", "panda", *args],
                         env=dict(probe.env, TMPDIR=str(scratch)), capture_output=True, text=True, timeout=timeout)
    return got.returncode, got.stdout + got.stderr


def _left(tmp: Path) -> list[str]:
    return sorted(p.name for p in (tmp / "tmp").iterdir() if p.name.startswith("idyn_"))


def test_a_controller_that_cannot_configure_fails_bringup_with_the_reason(graph_probe, tmp_path):
    """`--set gain_preset=bogus` printed only "starting ..." and exited 0 while nothing was controlled."""
    rc, out = _bringup(graph_probe, tmp_path, "--set", "gain_preset=bogus", "--duration", "30")
    assert rc == 1, out[-3000:]
    assert "controller: ERROR configure failed: ControllerParams: gain_preset='bogus'" in out, out[-3000:]
    assert "idyn bringup: controller failed: configure failed" in out, out[-3000:]
    assert "nothing is controlling any more" in out, out[-3000:]
    assert not _left(tmp_path), _left(tmp_path)  # removed when the run fails too


def test_a_rejected_model_is_shown_and_the_run_ends_cleanly_at_100_percent(graph_probe, tmp_path):
    """A model the nodes reject runs the RBD fallback: a loud ERROR on the terminal, exit 0 (decision); the bar
    ended at 101 % with a TqdmWarning; /tmp/idyn_panda_<node>_<hash>.yaml files stayed behind."""
    junk = tmp_path / "other_robot.onnx"
    junk.write_text("not a model")
    # 10 s: the three nodes load the model a few seconds after start on a busy 2-core machine (4 s missed one once)
    rc, out = _bringup(graph_probe, tmp_path, "--model", str(junk), "--duration", "10")
    assert rc == 0, out[-3000:]
    for node in ("controller", "feedforward", "wrench_observer"):
        assert f"{node}: ERROR" in out and "rejected" in out, out[-3000:]
    assert "TqdmWarning" not in out and "101%" not in out, out[-3000:]
    assert "100%" in out, out[-3000:]
    assert not _left(tmp_path), _left(tmp_path)


def test_a_node_that_cannot_start_is_reported_with_its_reason(graph_probe, tmp_path):
    """A monitoring node that exits at start-up (a parameter out of range): exit code 1 and its one-line reason,
    not "see --log-dir" with no log dir given."""
    rc, out = _bringup(graph_probe, tmp_path, "--set", "observer_gain=-5.0", "--duration", "6")
    assert rc == 1, out[-3000:]
    assert "process wrench_observer ended (exit code 2); last: " in out and "observer_gain" in out, out[-3000:]
    assert not _left(tmp_path), _left(tmp_path)


def test_naming_only_an_optional_node_adds_it_and_an_unworkable_subset_is_refused(graph_probe, tmp_path):
    from idyn_ros.nodes.graph import OUR_NODES, GraphSettings, select_nodes
    from idyn_ros.nodes.launcher import Launcher

    added = Launcher(GraphSettings("panda", "mujoco", nodes=select_nodes(["payload_identifier"]))).commands()
    assert list(added) == ["plant", *OUR_NODES, "payload_identifier"]
    assert select_nodes(["controller", "reference", "payload_identifier"]) == \
        ("controller", "reference", "payload_identifier")
    assert select_nodes([""]) == OUR_NODES
    rc, out = _bringup(graph_probe, tmp_path, "--nodes", "controller,payload_identifier", "--duration", "1")
    assert rc == 2 and "payload_identifier needs reference running" in out, out[-3000:]


def test_the_launcher_shows_warnings_errors_and_tracebacks_and_records_failures(tmp_path):
    """The output reading on its own (no ROS): INFO stays in the log, the rest is queued, FATAL fails."""
    from idyn_ros.nodes.graph import GraphSettings
    from idyn_ros.nodes.launcher import Launcher

    script = ("print('[INFO] [1.0] [controller]: configured'); print('[WARN] [1.1] [controller]: slow'); "
              "print('[ERROR] [1.2] [controller]: configure failed: bad gains'); "
              "print('Traceback (most recent call last):'); print('[FATAL] [1.3] [doomed]: gone')")

    class Fake(Launcher):
        def commands(self) -> dict[str, list[str]]:
            self.folder = self._folder()
            return {"controller": [sys.executable, "-c", script]}

    launcher = Fake(GraphSettings("panda", "mujoco"), tmp_path / "logs", watch=True).start()
    launcher.procs["controller"].wait(timeout=30)
    launcher.stop()
    assert launcher.lines() == [("controller", "WARN slow"), ("controller", "ERROR configure failed: bad gains"),
                                ("controller", "Traceback (most recent call last):"), ("doomed", "FATAL gone")]
    assert launcher.failures == {"controller": "configure failed: bad gains", "doomed": "gone"}
    assert "[INFO] [1.0] [controller]: configured" in (tmp_path / "logs" / "controller.log").read_text()
    quiet = Fake(GraphSettings("panda", "mujoco"), watch=True).start()
    assert quiet.folder.is_dir()  # the parameter files' temporary folder, while the processes run
    quiet.stop()
    assert not quiet.folder.exists()
