"""The suite's hang limit (``test/conftest.py``): a test stuck in native code holding the GIL ends its process with
every thread's stack instead of hanging CI for good; with the project's addopts that process is an xdist worker, and
the test runs once more in a new one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent.parent

# ctypes.PyDLL keeps the GIL across the call, as Fast DDS did while rclpy destroyed a publisher
HANGING_TESTS = '''
import ctypes


def test_passes_quickly():
    assert True


def test_hangs_holding_the_gil():
    ctypes.PyDLL(None).sleep(120)
'''


def test_a_test_that_hangs_holding_the_gil_ends_the_run_with_its_stack(tmp_path: Path) -> None:
    (tmp_path / "test_hanging.py").write_text(HANGING_TESTS)
    env = dict(os.environ, IDYN_TEST_HANG_LIMIT_S="1", PYTHONPATH=str(TEST_DIR))
    # the suite's conftest as a plugin, in a pytest of its own that knows nothing else of this project
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-c", os.devnull, "--rootdir", str(tmp_path),
         str(tmp_path / "test_hanging.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Timeout (0:00:01)!" in proc.stderr
    assert "test_hangs_holding_the_gil" in proc.stderr  # the stuck frame, by name
    assert "test_hanging.py" in proc.stderr


FLAKY_TESTS = '''
import ctypes
from pathlib import Path

FLAG = Path(__file__).with_name("hung_once")


def test_hangs_the_first_time_only():
    if not FLAG.exists():
        FLAG.write_text("")
        ctypes.PyDLL(None).sleep(120)


def test_hangs_every_time():
    ctypes.PyDLL(None).sleep(120)


def test_fails_an_assertion():
    assert 1 == 2


def test_runs_after_them():
    assert True
'''


def test_the_suites_options_rerun_a_hung_test_once_and_nothing_else(tmp_path: Path) -> None:
    """With pyproject.toml's addopts: a test that hung once passes on its rerun in a new worker, one that hangs again
    fails, an assertion is not rerun, and the run goes on after them."""
    (tmp_path / "test_flaky.py").write_text(FLAKY_TESTS)
    env = dict(os.environ, IDYN_TEST_HANG_LIMIT_S="1", PYTHONPATH=str(TEST_DIR))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-c", str(TEST_DIR.parent / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-rA", str(tmp_path / "test_flaky.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "PASSED test_flaky.py::test_hangs_the_first_time_only" in out
    assert "FAILED test_flaky.py::test_hangs_every_time - worker 'gw" in out
    assert "FAILED test_flaky.py::test_fails_an_assertion - assert 1 == 2" in out
    assert "PASSED test_flaky.py::test_runs_after_them" in out
    assert "2 failed, 2 passed, 2 rerun" in out
