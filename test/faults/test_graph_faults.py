"""Faults a user found in running the node graph with ``idyn bringup``: how it stops, and what a dead node does.

Observable outcome: exit code, the processes left, and the last effort command the robot side received (it must
be the controller's safe torque, label ``stamp_ns=-1``, never an ordinary law torque left applied).
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros


def _bringup(probe, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "idyn_ros.cli", "bringup", "--robot", "panda", *args],
                            env=probe.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _running(probe, proc: subprocess.Popen) -> list[int]:
    assert probe.spin_until(probe.active, 90), "the controller never became ACTIVE"
    n = len(probe.commands)
    # the other nodes may still be loading their models on the 2 cores: commands must flow, not within a fixed 0.5 s
    assert probe.spin_until(lambda: len(probe.commands) - n > 20, 10), "no commands flow"
    children = probe.descendants(proc.pid)
    assert len(children) >= 7, children  # plant + six nodes
    return children


def _left(children: list[int], timeout: float = 10.0) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = [p for p in children if Path(f"/proc/{p}").exists() and "zombie" not in _state(p)]
        if not left:
            return []
        time.sleep(0.1)
    return left


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "gone"


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_stopping_bringup_leaves_nothing_running_and_the_safe_torque_applied(graph_probe, how):
    """`timeout -s TERM 10 idyn bringup ...` left all seven node processes running under PID 1, past --duration."""
    probe = graph_probe
    proc = _bringup(probe, "--duration", "60")
    try:
        children = _running(probe, proc)
        t0 = time.monotonic()
        os.kill(proc.pid, getattr(signal, how))
        proc.wait(timeout=30)
        left = _left(children)
        stopped_s = time.monotonic() - t0
        probe.spin(0.5)
        out = proc.stdout.read()
        assert not left, f"left running after {how}: {left}"
        if how != "SIGKILL":
            assert proc.returncode == 0, out[-2000:]
            assert f"{how}: stopping" in out and "Traceback" not in out, out[-2000:]
        label, _tau = probe.commands[-1]
        assert label == "stamp_ns=-1", f"after {how} the last command answers a state ({label})"
        print(f"{how}: all stopped {stopped_s:.2f} s after the signal; last command the safe torque")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_dead_monitoring_node_does_not_stop_control(graph_probe):
    """`kill -9` of the feedforward node tore the whole graph down within 0.5 s and left a 20 Nm law torque."""
    probe = graph_probe
    proc = _bringup(probe, "--duration", "60", "--log-dir", "/tmp/idyn_fault_dead_node")
    try:
        children = _running(probe, proc)
        ff = next(p for p in children if "idyn_ros.nodes.start\0feedforward" in Path(f"/proc/{p}/cmdline").read_text())
        os.kill(ff, signal.SIGKILL)
        probe.spin(3.0)
        assert proc.poll() is None, "bringup ended because a monitoring node died"
        n = len(probe.commands)
        deadline = time.monotonic() + 10.0  # on a loaded machine DDS can stall a few s after a participant is killed
        while len(probe.commands) - n <= 20 and time.monotonic() < deadline:
            probe.spin(0.25)
        assert len(probe.commands) - n > 20 and probe.active(), "control stopped with the feedforward node"
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        out = proc.stdout.read()
        assert proc.returncode == 1 and "process feedforward ended" in out, out[-2000:]
        assert not _left(children)
        probe.spin(0.5)
        assert probe.commands[-1][0] == "stamp_ns=-1"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.alone  # beside another worker's test the plant's 1 kHz loop fell to ~110 states/s: stale throughout
def test_the_real_time_plant_is_controlled(graph_probe):
    """`--clock realtime` never controlled: the first ~20 ms input gap latched safe damping for good."""
    probe = graph_probe
    # a silence past max_recovery_silence latches by design (test_controller_time_faults); on this shared machine
    # under load one comes now and then (a CI run: SAFE in all 758 states of the 8 s); this test is about recovering
    proc = _bringup(probe, "--clock", "realtime", "--duration", "60", "--set", "max_recovery_silence=0")
    try:
        _running(probe, proc)
        n = len(probe.states)
        probe.spin(8.0)
        modes = [s.mode for s in probe.states[n:]]
        active = sum(m == 1 for m in modes) / max(len(modes), 1)
        recoveries = sum(a != 1 and b == 1 for a, b in itertools.pairwise(modes))
        print(f"realtime: ACTIVE in {active:.1%} of {len(modes)} published states, {recoveries} recoveries")
        # the mechanism (it comes back from safe mode; the bug latched it for good), not a share: how often this shared
        # machine delays a state past 3 ms varies run to run (1-67 % ACTIVE, 1-40 recoveries in 6 s, 130-250 states/s
        # received); `idyn bench --only latency` measures the share on a quiet machine
        assert len(modes) > 300 and recoveries >= 1, \
            f"ACTIVE in {active:.0%} of {len(modes)} ticks, {recoveries} recoveries; last reason: " \
            f"{probe.states[-1].mode_reason if probe.states else '-'}"
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
