"""Start the node graph as OS processes without ``ros2 launch`` (``idyn bringup``, benchmarks, tests).

The graph and every node's parameters come from ``nodes.graph`` (the description the launch files use):
one process per node, or our nodes in one process (``composed``), plus the MuJoCo plant in mode mujoco.
Every process gets the one parameter file ``nodes.graph.parameter_file`` writes (robot file, user files,
launch arguments). DDS stays on loopback unless the caller set ROS_AUTOMATIC_DISCOVERY_RANGE.

Stopping (``stop``, also on SIGTERM/SIGINT of the caller via ``idyn bringup``): SIGINT to every process group,
the node processes first so the controller publishes its safe command while the plant still listens, then
SIGKILL what has not ended after ``timeout``. Children start in their own session (a signal to their group
reaches them alone) and die with this process: ``IDYN_EXIT_WITH_PARENT`` tells each to stop cleanly once its
parent is gone (``nodes.common.run`` checks), so even a SIGKILL of the launcher leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from idyn_ros.nodes.graph import OUR_NODES, GraphSettings, parameter_file


class Launcher:
    """Processes for one bringup; use as a context manager (stops them on exit)."""

    def __init__(self, settings: GraphSettings, log_dir: str | Path | None = None, executor: str = "single") -> None:
        self.settings = settings
        self.log_dir = Path(log_dir) if log_dir else None
        self.executor = executor
        self.procs: dict[str, subprocess.Popen] = {}

    def _ros_args(self, nodes: list[str], remap: str | None) -> list[str]:
        args = ["--ros-args"]
        if remap:
            args += ["-r", f"__node:={remap}"]
        return [*args, "--params-file", str(parameter_file(self.settings, nodes, self.log_dir))]

    def commands(self) -> dict[str, list[str]]:
        py = sys.executable
        s = self.settings
        cmds: dict[str, list[str]] = {}
        for name in s.processes:
            if name == "composed":
                cmds[name] = [py, "-m", "idyn_ros.nodes.composed", "--nodes", ",".join(s.active_nodes),
                              "--executor", self.executor, *self._ros_args(list(s.active_nodes), None)]
            else:
                cmds[name] = [py, "-m", f"idyn_ros.nodes.{name}", *self._ros_args([name], name)]
        return cmds

    def start(self) -> Launcher:
        env = dict(os.environ)
        env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
        env["IDYN_EXIT_WITH_PARENT"] = str(os.getpid())
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        for name, cmd in self.commands().items():
            out = open(self.log_dir / f"{name}.log", "w") if self.log_dir else subprocess.DEVNULL  # noqa: SIM115
            self.procs[name] = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                                start_new_session=True)
        return self

    def dead(self) -> dict[str, int]:
        """{name: exit code} of processes that ended."""
        return {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}

    def kill(self, name: str) -> None:
        """SIGKILL one process (tests: a node dying)."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)

    def stop(self, timeout: float = 5.0) -> dict[str, int]:
        """SIGINT our nodes, then (once they ended) the plant; SIGKILL after ``timeout``; returns the exit codes."""
        ours = [n for n in self.procs if n != "plant"]
        for stage in (ours, [n for n in self.procs if n == "plant"]):
            for name in stage:
                if self.procs[name].poll() is None:
                    _signal_group(self.procs[name], signal.SIGINT)
            deadline = time.monotonic() + timeout
            for name in stage:
                proc = self.procs[name]
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait(timeout=5)
        return {n: p.returncode for n, p in self.procs.items()}

    def __enter__(self) -> Launcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


__all__ = ["OUR_NODES", "GraphSettings", "Launcher"]
