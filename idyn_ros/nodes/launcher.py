"""Start the idyn node graph as OS processes from the same parameter files ``ros2 launch`` uses.

There is no launch/launch_ros here, so ``idyn bringup`` (and benchmarks/tests) use this small
process manager: one process per node (default) or all our nodes in one process (``composed``),
plus the MuJoCo plant node when ``sim == "mujoco"``. Every process gets
``--ros-args --params-file config/<robot>.yaml`` and the same ``-p`` overrides; DDS stays on
loopback (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST unless the caller set it).
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from idyn_ros.errors import ParameterError
from idyn_ros.nodes.composed import NODE_NAMES


class Launcher:
    """Processes for one bringup; use as a context manager (stops them on exit)."""

    def __init__(
        self,
        robot: str,
        sim: str | None = "mujoco",
        composed: bool = False,
        nodes: Sequence[str] = NODE_NAMES,
        overrides: Mapping[str, Any] | None = None,
        plant_overrides: Mapping[str, Any] | None = None,
        params_file: str | Path | None = None,
        executor: str = "single",
        log_dir: str | Path | None = None,
    ) -> None:
        from idyn_ros.paths import config_dir
        from idyn_ros.robots import get_robot

        get_robot(robot)  # UnknownRobotError early
        self.robot = robot
        self.params_file = Path(params_file) if params_file else config_dir() / f"{robot}.yaml"
        if not self.params_file.is_file():
            raise ParameterError(f"parameter file not found: {self.params_file}")
        if sim not in (None, "none", "mujoco"):
            raise ParameterError(f"--sim must be mujoco or none here (gazebo/hardware need `ros2 launch`), got {sim}")
        self.sim = sim if sim != "none" else None
        self.composed = composed
        self.nodes = list(nodes)
        self.overrides = dict(overrides or {})
        self.plant_overrides = dict(plant_overrides or {})
        self.executor = executor
        self.log_dir = Path(log_dir) if log_dir else None
        self.procs: dict[str, subprocess.Popen] = {}

    def _ros_args(self, overrides: Mapping[str, Any], node_name: str | None = None) -> list[str]:
        args = ["--ros-args", "--params-file", str(self._merged_file(overrides))]
        if node_name:
            args += ["-r", f"__node:={node_name}"]
        return args

    def _merged_file(self, overrides: Mapping[str, Any]) -> Path:
        """config/<robot>.yaml with ``overrides`` written into every section (a node-specific section of
        the file would otherwise win over a global ``-p``); a temp file per distinct override set."""
        import hashlib
        import tempfile

        import yaml

        class _NoAliasDumper(yaml.SafeDumper):
            """Never emit anchors/aliases (rcl: "Will not support aliasing"), e.g. for anchors in the file."""

            def ignore_aliases(self, data: Any) -> bool:
                return True

        if not overrides:
            return self.params_file
        data = yaml.safe_load(self.params_file.read_text())
        for section in data.values():
            # a copy per section: shared list objects would be dumped as &id001/*id001, which rcl rejects
            section.setdefault("ros__parameters", {}).update(copy.deepcopy(dict(overrides)))
        text = yaml.dump(data, Dumper=_NoAliasDumper, sort_keys=False)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        path = Path(tempfile.gettempdir()) / f"idyn_{self.robot}_{digest}.yaml"
        path.write_text(text)
        return path

    def commands(self) -> dict[str, list[str]]:
        py = sys.executable
        cmds: dict[str, list[str]] = {}
        if self.sim == "mujoco":
            cmds["plant"] = [py, "-m", "idyn_ros.nodes.plant", *self._ros_args(self.plant_overrides, "plant")]
        if self.composed:
            cmds["composed"] = [py, "-m", "idyn_ros.nodes.composed", "--nodes", ",".join(self.nodes),
                                "--executor", self.executor, *self._ros_args(self.overrides)]
        else:
            for name in self.nodes:
                cmds[name] = [py, "-m", f"idyn_ros.nodes.{name}", *self._ros_args(self.overrides, name)]
        return cmds

    def start(self) -> Launcher:
        env = dict(os.environ)
        env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("OMP_NUM_THREADS", "1")
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
        """Kill one process (tests: 'feedforward node killed')."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)

    def stop(self, timeout: float = 5.0) -> dict[str, int]:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        return {n: p.returncode for n, p in self.procs.items()}

    def __enter__(self) -> Launcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
