"""The ROS domain each test process takes (``test/conftest.py``): the xdist workers of one run never share one, and
none takes the domain the shell names (a robot's graph may run there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).resolve().parent.parent / "conftest.py"


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
