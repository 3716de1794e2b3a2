"""Benchmarks behind `make bench` / `idyn bench`.

Each topic is a module ``idyn_ros.bench.<topic>`` with ``run_benchmarks(**options) -> dict``; the runner
writes the dict to ``bench/results/<name>.json`` (one file per result, see README "Benchmark results")
together with the command that produced it, the machine and the git revision. Speed targets live
here, not in unit tests: a noisy 2-core machine makes timed tests flaky, so figures are compared as
ratios measured in one run.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# Topic -> one line on what it measures. Order = the order `idyn bench` runs them.
TOPICS: dict[str, str] = {
    "dynamics": "pinocchio vs torch vs ONNX RNEA, per robot",
    "models": "torque-prediction accuracy on the real KUKA data, runtime model step, training throughput",
    "gp": "LIP-kernel GP vs baselines: 6-DoF accuracy, training time, query latency",
    "recorder": "rosbag2 recorder loss at 1 kHz",
    "sim": "embedded plant: step cost, lockstep speed, real-time jitter",
    "latency": "joint state -> command latency at 1 kHz, composed and separate processes",
    "experiments": "tracking table (Table III analogue), DOOMED sweep on the plant",
    "wrench": "wrench observer on the plant: 10 N pushes and a contact-free move, per robot",
    "ur5": "UR5 real data: current gains, torque model, wrench vs F/T sensor and the UR's own estimate, false alarms",
    "payload": "payload identification (plant, offline CLI, closed loop vs DOOMED) and gripper compensation",
}


def times_us(fn: Callable[[], Any], repeat: int, warmup: int = 50) -> np.ndarray:
    """Per-call wall times in us of ``fn`` (after ``warmup`` untimed calls): the one timing loop of the benches."""
    for _ in range(warmup):
        fn()
    out = np.empty(repeat)
    for k in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        out[k] = time.perf_counter_ns() - t0
    return out / 1e3


def p50_p99(samples_us: np.ndarray) -> dict[str, float]:
    """{"p50_us", "p99_us"} of per-call times in us."""
    return {"p50_us": float(np.percentile(samples_us, 50)), "p99_us": float(np.percentile(samples_us, 99))}


def results_dir() -> Path:
    from idyn_ros.paths import share_dir

    path = Path(os.environ.get("IDYN_BENCH_RESULTS", share_dir() / "bench" / "results"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _is_result_file(path: str) -> bool:
    """Files the benchmarks and studies write themselves: a run that rewrites them leaves the code it ran clean."""
    return path.startswith("bench/results/") or path == "docs/benchmarks.md" or (
        path.startswith("studies/") and "/results/" in path)


def run_provenance(command: str) -> dict:
    """The ``_provenance`` block of a result: command, git revision (``-dirty`` if edited), UTC date, machine."""
    try:
        revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                  cwd=Path(__file__).parent, timeout=5).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                text=True, cwd=Path(__file__).parent, timeout=5).stdout.splitlines()
        dirty = any(not _is_result_file(line[3:]) for line in status)
    except (OSError, subprocess.SubprocessError):
        revision, dirty = "unknown", False
    return {
        "command": command,
        "git_revision": revision + ("-dirty" if dirty else ""),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
    }


def write_result(name: str, payload: dict, command: str, provenance: dict | None = None,
                 directory: Path | None = None) -> Path:
    """Write ``<directory>/<name>.json`` (default bench/results/): the payload's keys plus ``_provenance``.

    provenance: taken when the run started (long runs: the code revision that ran, not the HEAD at the end);
    a ``_provenance`` already in the payload wins over both. directory: e.g. a study's own results folder.
    """
    path = (directory or results_dir()) / f"{name}.json"
    prov = payload.get("_provenance") or provenance or run_provenance(command)
    from idyn_ros.data.atomic import atomic_write_text

    atomic_write_text(path, json.dumps({**payload, "_provenance": prov}, indent=2, default=float) + "\n")
    return path


def run_topic(topic: str, quick: bool = False, **options: Any) -> dict:
    """Run one topic; its module returns {result_name: payload}, or one payload named after the topic.

    ``options`` (e.g. ``robots``) go to the topics whose ``run_benchmarks`` takes them; the provenance is taken
    at the start (the revision that ran, even if HEAD moves during an hour-long run)."""
    module = importlib.import_module(f"idyn_ros.bench.{topic}")
    accepted = inspect.signature(module.run_benchmarks).parameters
    kwargs = {k: v for k, v in {"quick": quick, **options}.items() if k in accepted}
    command = f"idyn bench --only {topic}" + (" --quick" if quick else "") + "".join(
        f" --{k} {' '.join(v) if isinstance(v, tuple | list) else v}" for k, v in options.items() if k in accepted)
    provenance = run_provenance(command)
    started = time.perf_counter()
    results = module.run_benchmarks(**kwargs)
    elapsed = time.perf_counter() - started
    files = results.pop("_files", None) if isinstance(results, dict) else None
    named = files if files is not None else {topic: results}
    for name, payload in named.items():
        path = write_result(name, payload, command, provenance)
        print(f"[bench] {topic}: wrote {path} ({elapsed:.0f} s)", flush=True)
    return named


def run_all(topics: list[str] | None = None, quick: bool = False, **options: Any) -> int:
    failures = []
    for topic in topics or list(TOPICS):
        print(f"\n=== {topic}: {TOPICS.get(topic, '')} ===", flush=True)
        try:
            run_topic(topic, quick=quick, **options)
        except Exception:  # one broken topic must not hide the others' numbers
            traceback.print_exc()
            failures.append(topic)
    if failures:
        print(f"\n[bench] FAILED topics: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0
