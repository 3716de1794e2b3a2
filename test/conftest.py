"""Shared pytest fixtures.

DDS stays on loopback (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) and every test session gets its own
ROS_DOMAIN_ID so parallel runs on one machine do not see each other's topics, nor a graph in the shell's domain.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
# the venv is an ament prefix (scripts/setup_env.sh): `ros2 launch idyn_ros ...` in tests finds the package there
os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join(
    p for p in (sys.prefix, os.environ.get("AMENT_PREFIX_PATH", "")) if p)


def _test_domain() -> int:
    """Never the domain the shell names (a robot's graph may run there, and tests publish effort commands):
    IDYN_TEST_DOMAIN_ID if set, else one per xdist worker, consecutive from one drawn for the run (so the workers
    of a run never share a domain, and parallel runs rarely do)."""
    chosen = os.environ.get("IDYN_TEST_DOMAIN_ID")
    if chosen:
        return int(chosen)
    users = os.environ.get("ROS_DOMAIN_ID", "0")
    free = [d for d in range(10, 100) if str(d) != users]
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # shared by the workers of one run
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ...
    draw = int(run, 16) if run else os.getpid()
    return free[(draw + int(worker.removeprefix("gw") or 0)) % len(free)]


os.environ["ROS_DOMAIN_ID"] = str(_test_domain())
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent

# A test that hangs (seen: Fast DDS deadlocked destroying a publisher, in native code holding the GIL) would hang CI
# for good. Past this limit (setup + call + teardown) faulthandler's watchdog thread, which needs no GIL, prints every
# thread's stack and ends the process with exit code 1: the xdist worker, whose test pyproject.toml's addopts then run
# once more in a new one (with -n 0, pytest itself: a red run that says where).
HANG_LIMIT_S = float(os.environ.get("IDYN_TEST_HANG_LIMIT_S", "600"))
SLOW_HANG_LIMIT_S = 6 * HANG_LIMIT_S  # tests marked slow train models or simulate minutes; `make test` skips them
_hang_report_stream: Any = None


def pytest_configure(config: pytest.Config) -> None:
    """Keep a copy of the real stderr: pytest's capture redirects fd 2 while a test runs, and a report written
    there would vanish with the process."""
    global _hang_report_stream
    if HANG_LIMIT_S > 0 and _hang_report_stream is None:
        _hang_report_stream = os.fdopen(os.dup(sys.__stderr__.fileno()), "w")


def pytest_unconfigure(config: pytest.Config) -> None:
    global _hang_report_stream
    if _hang_report_stream is not None:
        _hang_report_stream.close()
        _hang_report_stream = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Arm the hang limit around one test (a later arming replaces an earlier one: one test at a time)."""
    import faulthandler

    if _hang_report_stream is None:
        yield
        return
    limit = SLOW_HANG_LIMIT_S if item.get_closest_marker("slow") else HANG_LIMIT_S
    faulthandler.dump_traceback_later(limit, exit=True, file=_hang_report_stream)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def _turns_dir(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """Where the xdist workers of this run take turns (their base temp folders' common parent); None without xdist."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    folder = tmp_path_factory.getbasetemp().parent / "cpu-turns"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(autouse=True)
def _cpu_turn(request: pytest.FixtureRequest, _turns_dir: Path | None) -> Any:
    """A test marked ``alone`` (a live 1 kHz loop whose assertion is about keeping time) runs with no test in the
    other worker: while it waits, that worker starts none, and it waits for the one running there."""
    import fcntl

    if _turns_dir is None:
        yield
        return
    alone = request.node.get_closest_marker("alone") is not None
    waiting = _turns_dir / f"waiting-{os.environ['PYTEST_XDIST_WORKER']}"
    with open(_turns_dir / "lock", "a") as lock:
        if alone:
            waiting.touch()
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
            finally:
                waiting.unlink(missing_ok=True)
        else:
            while any(_turns_dir.glob("waiting-*")):
                time.sleep(0.05)
            fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (real robot recordings); tests needing it skip with a reason when absent."""
    from idyn_ros.paths import shared_data_dir

    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data (real robot recordings) is not present on this machine")
    return path


CONTROLLER_MANAGER_DOUBLE = REPO_ROOT / "test" / "doubles" / "controller_manager_msgs"


@pytest.fixture(scope="session")
def controller_manager_interfaces() -> None:
    """ros2_control's controller_manager_msgs importable in this process: the installed one if any (a robot's ROS
    install), else a test double of the fields idyn_ros reads, built once into build/test_doubles (never the venv,
    where it would shadow a robot's real one) and loaded from there."""
    import ctypes
    import fcntl
    import hashlib
    import subprocess
    import sysconfig

    try:
        import controller_manager_msgs.srv  # noqa: F401
        return
    except ImportError:
        pass
    root = REPO_ROOT / "build" / "test_doubles"
    prefix = root / "prefix"
    sources = sorted(p for p in CONTROLLER_MANAGER_DOUBLE.rglob("*") if p.is_file())
    built_for = f"{sys.prefix} {sys.version}".encode()  # another venv or Python builds it again
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources) + built_for).hexdigest()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:  # the xdist workers build it once between them
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = root / "built.sha256"
        if not stamp.is_file() or stamp.read_text() != digest:
            done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "build_interfaces.sh"), sys.prefix,
                                   str(CONTROLLER_MANAGER_DOUBLE), str(root / "build"), str(prefix)],
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"building the controller_manager_msgs double: {done.stdout[-3000:]}" \
                                         f"{done.stderr[-3000:]}"
            stamp.write_text(digest)
    lib = prefix / "lib"
    # typesupport is found by name along LD_LIBRARY_PATH (read when first looked up) and links the generated C
    # libraries, which the loader resolves only against what is already loaded: load those first
    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(lib), os.environ.get("LD_LIBRARY_PATH")) if p)
    for part in ("generator_c", "typesupport_c", "typesupport_fastrtps_c", "typesupport_introspection_c",
                 "generator_py"):
        ctypes.CDLL(str(lib / f"libcontroller_manager_msgs__rosidl_{part}.so"), mode=ctypes.RTLD_GLOBAL)
    site = sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)})
    sys.path.insert(0, site)


@pytest.fixture()
def rclpy_context():
    """An initialised rclpy context, shut down after the test."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        if context.ok():
            rclpy.shutdown(context=context)


class LogRecorder:
    """Stands in for a node's logger: what it was told, as (level, text) in order."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, level: str):
        return lambda text, *_args, **_kwargs: self.lines.append((level, text))


@pytest.fixture()
def log_recorder() -> LogRecorder:
    """A fresh stand-in logger (``node.get_logger = lambda: log``)."""
    return LogRecorder()


def _call_service(executor: Any, client: Any, request: Any, timeout: float = 10.0) -> Any:
    """Call a service, spinning ``executor`` until it is available and has answered (asserting within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while not client.wait_for_service(timeout_sec=0.01):
        executor.spin_once(timeout_sec=0.01)
        assert time.monotonic() < deadline, f"{client.srv_name} not available"
    future = client.call_async(request)
    while not future.done():
        executor.spin_once(timeout_sec=0.01)
        assert time.monotonic() < deadline, f"{client.srv_name} did not answer"
    return future.result()


@pytest.fixture()
def call_service():
    """``call_service(executor, client, request, timeout=10.0)``: the service's answer (tests import nothing from
    each other under --import-mode=importlib, so shared helpers are fixtures)."""
    return _call_service


class GraphProbe:
    """A node watching a node graph started by a test (ros2 launch, idyn bringup) in a ROS domain of its own:
    nodes other tests of this session leave in the shared domain must not show up in the graph."""

    def __init__(self, domain: int) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import Float64MultiArray

        from idyn_ros.msg import ControllerState
        from idyn_ros.nodes.common import COMMAND_OUT, MONITOR

        self.domain = domain
        self.env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1",
                        ROS_DOMAIN_ID=str(domain))
        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node("graph_probe", context=self.context)
        self.states: list = []
        self.commands: list = []  # (label, array)
        self.node.create_subscription(ControllerState, "/idyn/controller_state", self.states.append, MONITOR)
        self.node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                      lambda m: self.commands.append((m.layout.dim[0].label, list(m.data))),
                                      COMMAND_OUT)
        self.exe = SingleThreadedExecutor(context=self.context)
        self.exe.add_node(self.node)

    def spin_until(self, done, timeout: float) -> bool:
        import time

        end = time.monotonic() + timeout
        while not done() and time.monotonic() < end:
            self.exe.spin_once(timeout_sec=0.05)
        return done()

    def spin(self, seconds: float) -> None:
        self.spin_until(lambda: False, seconds)

    def active(self) -> bool:
        return any(s.mode == 1 for s in self.states[-5:])

    @staticmethod
    def descendants(pid: int) -> list[int]:
        return descendants(pid)

    def close(self) -> None:
        import rclpy

        self.exe.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (to check that nothing is left running)."""
    import subprocess

    rows = subprocess.run(["ps", "-eo", "pid,ppid"], capture_output=True, text=True, check=True).stdout.split("\n")[1:]
    children: dict[int, list[int]] = {}
    for line in rows:
        if line.strip():
            p, pp = (int(x) for x in line.split())
            children.setdefault(pp, []).append(p)
    todo, found = [pid], []
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


@pytest.fixture()
def graph_probe():
    """A ``GraphProbe`` in a domain of its own (``probe.env`` starts processes in the same domain)."""
    probe = GraphProbe((int(os.environ.get("ROS_DOMAIN_ID", "0")) + 113) % 232)
    try:
        yield probe
    finally:
        probe.close()
