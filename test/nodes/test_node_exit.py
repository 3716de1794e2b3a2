"""A node process (``nodes.common.run``) ends on its own: when its parent launcher dies, when its context shuts down,
and within the stop deadline even when a callback or its teardown never returns.

Seen once: after a SIGTERM of ``ros2 launch``, a ``reference`` node lived on under PID 1 at 82 % CPU; nothing was
left to escalate to SIGKILL once the launch process was gone. Timeouts here are generous (a loaded 2-core machine).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from idyn_ros.nodes.common import STOP_DEADLINE_S

pytestmark = pytest.mark.ros

TICKS_PER_S = os.sysconf("SC_CLK_TCK")

# A launcher that dies: starts the node with IDYN_EXIT_WITH_PARENT=<its pid>, prints the node's pid, waits.
PARENT = """
import os, subprocess, sys
log = open(sys.argv[1], "w")
env = dict(os.environ, IDYN_EXIT_WITH_PARENT=str(os.getpid()))
node = subprocess.Popen([sys.executable, *sys.argv[2:]], env=env, stdout=log, stderr=subprocess.STDOUT)
print(node.pid, flush=True)
node.wait()
"""

# Nodes run by the real run(); each prints "ready" once it spins.
NODE = """
import ctypes, os, sys
from rclpy.node import Node
from idyn_ros.nodes.common import run

class Probe(Node):
    def __init__(self):
        super().__init__(f"exit_probe_{os.getpid()}")
        self.timer = self.create_timer(0.05, self.tick)

    def tick(self):
        self.destroy_timer(self.timer)
        print("ready", flush=True)
        if sys.argv[1] == "spin_in_callback":  # never returns and burns a core, as the orphan did
            while True:
                pass
        if sys.argv[1] == "shut_down_context":  # what the hot loop did when a tick raised
            self.context.try_shutdown()
        if sys.argv[1] == "raise_in_hot_loop":  # a 1 kHz callback that raises (another node's, in a composed process)
            from std_msgs.msg import Float64
            from idyn_ros.nodes import hot_loop
            from idyn_ros.nodes.common import HOT_IN
            hot_loop.subscribe(self, Float64, f"/exit_probe_{os.getpid()}/boom", lambda m: 1 / 0, HOT_IN)
            pub = self.create_publisher(Float64, f"/exit_probe_{os.getpid()}/boom", HOT_IN)
            self.create_timer(0.05, lambda: pub.publish(Float64(data=1.0)))  # until one arrives (discovery)

    def shutdown_hook(self):
        print(f"teardown, context ok: {self.context.ok()}", flush=True)
        if sys.argv[1] == "hang_in_teardown":  # blocked in native code holding the GIL, like a DDS join that never ends
            libc = ctypes.PyDLL(None)
            while True:
                libc.pause()

sys.exit(run([Probe]))
"""


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _cpu_s(pid: int) -> float:
    """User + system CPU time of ``pid`` so far, s (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def _wait_for(done, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while not done() and time.monotonic() < end:
        time.sleep(0.05)
    return done()


def _orphan_after(ready, node_args: list[str], log: Path) -> tuple[int, float]:
    """Start a node under a parent process, wait until ``ready()``, SIGKILL the parent; (node pid, CPU s by then)."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(log), *node_args], env=_env(), stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    pid = int(parent.stdout.readline())
    try:
        assert _wait_for(lambda: ready(pid), 60), f"the node never got ready: {log.read_text()[-2000:]}"
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise
    finally:
        parent.kill()
        parent.wait()
    return pid, _cpu_s(pid)


def _gone_within(pid: int, timeout: float) -> tuple[bool, float]:
    """(gone, CPU s it used until its last sample); SIGKILLs it when it outlived ``timeout``."""
    cpu = _cpu_s(pid)
    end = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < end:
        cpu = max(cpu, _cpu_s(pid))
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return False, cpu
    return True, cpu


def test_a_real_node_whose_launcher_dies_stops_at_once_and_idles_meanwhile(rclpy_context, tmp_path):
    import rclpy

    name = f"reference_exit_{os.getpid()}"
    probe = rclpy.create_node("exit_probe_watcher", context=rclpy_context)
    try:
        pid, cpu0 = _orphan_after(lambda _pid: name in probe.get_node_names(),
                                  ["-m", "idyn_ros.nodes.reference", "--ros-args", "-r", f"__node:={name}"],
                                  tmp_path / "reference.log")
    finally:
        probe.destroy_node()
    t0 = time.monotonic()
    gone, cpu = _gone_within(pid, 15)
    assert gone, "the reference node outlived its launcher"
    assert cpu - cpu0 < 1.0, f"used {cpu - cpu0:.2f} s of CPU after its parent died"
    print(f"reference: gone {time.monotonic() - t0:.2f} s after its launcher, {cpu - cpu0:.2f} s of CPU meanwhile")


def test_a_node_stuck_spinning_in_a_callback_ends_when_its_launcher_dies(tmp_path):
    log = tmp_path / "node.log"
    pid, _ = _orphan_after(lambda _pid: "ready" in log.read_text(), ["-c", NODE, "spin_in_callback"], log)
    gone, _ = _gone_within(pid, STOP_DEADLINE_S + 10)
    assert gone, "a node spinning in a callback outlived its launcher (an orphan at 100 % CPU)"


def test_a_teardown_that_never_returns_ends_at_the_stop_deadline(tmp_path):
    log = tmp_path / "node.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", NODE, "hang_in_teardown"], env=_env(), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert _wait_for(lambda: "ready" in log.read_text(), 60), log.read_text()[-2000:]
        proc.send_signal(signal.SIGTERM)  # SIGINT and SIGTERM are ignored from the teardown on: only the deadline
        proc.wait(timeout=STOP_DEADLINE_S + 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "teardown" in text
    assert proc.returncode == -signal.SIGALRM, text[-2000:]
    assert "Timeout" in text and "in shutdown_hook" in text, text[-2000:]  # the log says where it hung


def test_a_node_whose_context_shuts_down_ends_cleanly(tmp_path):
    log = tmp_path / "node.log"
    with log.open("w") as out:
        proc = subprocess.run([sys.executable, "-c", NODE, "shut_down_context"], env=_env(), stdout=out,
                              stderr=subprocess.STDOUT, timeout=60)
    text = log.read_text()
    assert proc.returncode == 0 and "ready" in text and "teardown" in text, text[-2000:]


def test_a_raising_hot_loop_callback_stops_the_process_with_its_shutdown_hooks_still_able_to_publish(tmp_path):
    """The hot loop shut the context down on an error, so the controller's shutdown hook could not publish its hold
    torque (InvalidHandle) and the last law torque stayed applied. Now the process stops with the hooks first."""
    log = tmp_path / "node.log"
    with log.open("w") as out:
        proc = subprocess.run([sys.executable, "-c", NODE, "raise_in_hot_loop"], env=_env(), stdout=out,
                              stderr=subprocess.STDOUT, timeout=60)
    text = log.read_text()
    assert "ZeroDivisionError" in text and "teardown, context ok: True" in text, text[-2000:]
    assert proc.returncode == 1, text[-2000:]  # an error ended it
