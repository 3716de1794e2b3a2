"""Start the node graph as OS processes without ``ros2 launch`` (``idyn bringup``, benchmarks, tests).

The graph and every node's parameters come from ``nodes.graph`` (the description the launch files use):
one process per node, or our nodes in one process (``composed``), plus the MuJoCo plant in mode mujoco.
Every process gets the one parameter file ``nodes.graph.parameter_file`` writes (robot file, user files,
launch arguments). DDS stays on loopback unless the caller set ROS_AUTOMATIC_DISCOVERY_RANGE.

Stopping (``stop``, also on SIGTERM/SIGINT of the caller via ``idyn bringup``): SIGTERM to every process group
(a node stops on it as on SIGINT; one still in Python's start-up ends silently instead of printing a
KeyboardInterrupt traceback that read as a second failure),
the node processes first so the controller publishes its safe command while the plant still listens, then
SIGKILL what has not ended after ``timeout``. Children start in their own session (a signal to their group
reaches them alone) and die with this process: ``IDYN_EXIT_WITH_PARENT`` tells each to stop cleanly once its
parent is gone (``nodes.common.run`` checks), so even a SIGKILL of the launcher leaves nothing behind.

Output: with ``watch`` (``idyn bringup``) one thread per process reads its output (into ``log_dir`` too, if given),
queues the WARN/ERROR/FATAL lines and every line not from the ROS logger (a traceback, a node's one-line start-up
error) for ``lines()``, and records failures (``failures``); without it the output goes to ``log_dir`` or nowhere
(benchmarks). Without ``log_dir`` the parameter files go to a temporary folder, removed by ``stop``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from idyn_ros.nodes.graph import OUR_NODES, GraphSettings, parameter_file

#: an rclpy console line: [SEVERITY] [time] [logger]: message
LOG_LINE = re.compile(r"\[(DEBUG|INFO|WARN|ERROR|FATAL)\] \[[^\]]*\] \[([^\]]*)\]: ?(.*)")
QUIET = ("DEBUG", "INFO")


def failure(node: str, severity: str, message: str) -> bool:
    """Failure (decision): a FATAL line, or the controller failing to configure (it runs on but controls nothing);
    an ERROR a node runs on with (a model rejected, the RBD fallback) is shown, not a failure."""
    return severity == "FATAL" or (node == "controller" and severity == "ERROR"
                                   and message.startswith("configure failed"))


class Launcher:
    """Processes for one bringup; use as a context manager (stops them on exit)."""

    def __init__(self, settings: GraphSettings, log_dir: str | Path | None = None, executor: str = "single",
                 watch: bool = False) -> None:
        self.settings = settings
        self.log_dir = Path(log_dir) if log_dir else None
        self.executor = executor
        self.watch = watch
        self.procs: dict[str, subprocess.Popen] = {}
        self.failures: dict[str, str] = {}  # {node: the line that made the run a failure}
        self.last_line: dict[str, str] = {}  # {process: its last line shown}: why it ended
        self._lines: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._readers: list[threading.Thread] = []
        self._scratch: tempfile.TemporaryDirectory | None = None  # the parameter files without log_dir

    def _folder(self) -> Path | None:
        """Where the parameter files go: ``log_dir``, else (once started) a temporary folder ``stop`` removes, else
        the temp folder (``commands`` alone)."""
        return self.log_dir or (Path(self._scratch.name) if self._scratch else None)

    def _ros_args(self, nodes: list[str], remap: str | None) -> list[str]:
        args = ["--ros-args"]
        if remap:
            args += ["-r", f"__node:={remap}"]
        return [*args, "--params-file", str(parameter_file(self.settings, nodes, self._folder()))]

    def commands(self) -> dict[str, list[str]]:
        py = sys.executable
        s = self.settings
        cmds: dict[str, list[str]] = {}
        for name in s.processes:
            if name == "composed":
                cmds[name] = [py, "-m", "idyn_ros.nodes.start", "composed", "--nodes", ",".join(s.active_nodes),
                              "--executor", self.executor, *self._ros_args(list(s.active_nodes), None)]
            else:
                cmds[name] = [py, "-m", "idyn_ros.nodes.start", name, *self._ros_args([name], name)]
        return cmds

    def start(self) -> Launcher:
        env = dict(os.environ)
        env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
        env["IDYN_EXIT_WITH_PARENT"] = str(os.getpid())
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        else:
            self._scratch = tempfile.TemporaryDirectory(prefix=f"idyn_{self.settings.robot}_")
        try:
            for name, cmd in self.commands().items():
                log = open(self.log_dir / f"{name}.log", "w") if self.log_dir else None  # noqa: SIM115
                out = subprocess.PIPE if self.watch else log or subprocess.DEVNULL
                proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                        text=self.watch, errors="replace" if self.watch else None)
                self.procs[name] = proc
                if self.watch:
                    reader = threading.Thread(target=self._read, args=(name, proc.stdout, log), daemon=True,
                                              name=f"idyn-output-{name}")
                    reader.start()
                    self._readers.append(reader)
                elif log:
                    log.close()  # the child has its own descriptor
        except BaseException:
            self.stop()
            raise
        return self

    def _read(self, process: str, stream: IO[str], log: IO[str] | None) -> None:
        """Copy one process's output to its log and queue what a user must see (see the module docstring)."""
        with contextlib.suppress(ValueError, OSError):
            for raw in stream:
                if log:
                    log.write(raw)
                    log.flush()
                line = raw.rstrip()
                logged = LOG_LINE.match(line)
                if logged:
                    severity, node, message = logged.groups()
                    text = f"{severity} {message}"
                    if failure(node, severity, message):
                        self.failures.setdefault(node, message)
                else:  # not from the logger (a traceback, a start-up error): always shown
                    severity, node, text = "", process, line
                if severity not in QUIET and line:
                    self.last_line[process] = text
                    self._lines.put((node, text))
        if log:
            log.close()

    def lines(self) -> list[tuple[str, str]]:
        """(node, line) of every line to show since the last call."""
        out = []
        while not self._lines.empty():
            out.append(self._lines.get_nowait())
        return out

    def dead(self) -> dict[str, int]:
        """{name: exit code} of processes that ended."""
        return {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}

    def kill(self, name: str) -> None:
        """SIGKILL one process (tests: a node dying)."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)

    def stop(self, timeout: float = 5.0) -> dict[str, int]:
        """SIGTERM our nodes, then (once they ended) the plant; SIGKILL after ``timeout``; returns the exit codes."""
        ours = [n for n in self.procs if n != "plant"]
        for stage in (ours, [n for n in self.procs if n == "plant"]):
            for name in stage:
                if self.procs[name].poll() is None:
                    _signal_group(self.procs[name], signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for name in stage:
                proc = self.procs[name]
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _signal_group(proc, signal.SIGKILL)
                    proc.wait(timeout=5)
        for reader in self._readers:  # the last lines (the stop) are read before this returns
            reader.join(timeout=2.0)
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None
        return {n: p.returncode for n, p in self.procs.items()}

    def __enter__(self) -> Launcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


__all__ = ["OUR_NODES", "GraphSettings", "Launcher"]
