"""How the suite's two xdist workers share the machine (``test/conftest.py``): each in a ROS domain of its own,
never the one the shell names (a robot's graph may run there), and a test marked ``alone`` with no test beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent.parent
CONFTEST = TEST_DIR / "conftest.py"


def _domain(**env: str) -> int:
    """The ROS_DOMAIN_ID conftest.py sets in a fresh process with ``env`` (run there: it rewrites os.environ)."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("IDYN_TEST_DOMAIN_ID", "PYTEST_XDIST_TESTRUNUID", "PYTEST_XDIST_WORKER")}
    code = f"import os, runpy; runpy.run_path({str(CONFTEST)!r}); print(os.environ['ROS_DOMAIN_ID'])"
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                         timeout=120, check=True)
    return int(out.stdout.split()[-1])


def test_the_workers_of_a_run_take_distinct_domains_and_never_the_shells() -> None:
    for run in ("0", "4f" * 16, "31"):  # 0x31: worker gw0 would land on the shell's 59 (10 + 49) but for the skip
        domains = [_domain(PYTEST_XDIST_TESTRUNUID=run, PYTEST_XDIST_WORKER=f"gw{i}", ROS_DOMAIN_ID="59")
                   for i in range(4)]
        assert len(set(domains)) == 4, domains
        assert 59 not in domains and all(10 <= d < 100 for d in domains), domains
    assert _domain(IDYN_TEST_DOMAIN_ID="7") == 7


TIMED_TESTS = """
import os
import time

import pytest


def _log(name, seconds):
    start = time.time()
    time.sleep(seconds)
    with open(os.environ["TIMES"], "a") as f:
        f.write(f"{name} {start} {time.time()}\\n")


@pytest.mark.parametrize("k", range(6))
def test_beside(k):
    _log(f"beside{k}", 0.4)


@pytest.mark.alone
def test_alone():
    _log("alone", 0.6)


@pytest.mark.alone
def test_alone_too():
    _log("alone_too", 0.6)
"""


def test_a_test_marked_alone_runs_with_no_test_in_the_other_worker(tmp_path: Path) -> None:
    (tmp_path / "test_timed.py").write_text(TIMED_TESTS)
    times = tmp_path / "times.txt"
    env = dict(os.environ, PYTHONPATH=str(TEST_DIR), TIMES=str(times))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-c", str(TEST_DIR.parent / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-n", "2", str(tmp_path / "test_timed.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    spans = {name: (float(a), float(b)) for name, a, b in (line.split() for line in times.read_text().splitlines())}
    assert len(spans) == 8
    for name in ("alone", "alone_too"):
        start, end = spans[name]
        beside = [other for other, (a, b) in spans.items() if other != name and a < end and b > start]
        assert not beside, f"{name} ran beside {beside}: {spans}"
    overlapping = sum(a < b2 and a2 < b for n1, (a, b) in spans.items() for n2, (a2, b2) in spans.items() if n1 < n2)
    assert overlapping >= 1, spans  # the others do run side by side
