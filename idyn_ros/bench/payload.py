"""Benchmark topic ``payload``: payload identification (plant, offline CLI on generated files, closed loop vs DOOMED)
and gripper compensation; writes ``bench/results/payload.json`` (``idyn_ros.experiments.payload`` says what each
section measures and how; data and trained models are cached under ``$IDYN_WORK_DIR/payload``).

``idyn bench --only payload`` runs everything (first run ~1 h on this 2-core machine: recordings, a bare-arm model per
robot, two DeLaN + LSTM models; reruns reuse them); ``--quick`` trains for a minute per model; ``--robots`` limits the
per-robot sections.
"""

from __future__ import annotations

from typing import Any

from idyn_ros.experiments.payload import ROBOTS


def run_benchmarks(quick: bool = False, robots: tuple[str, ...] = ROBOTS) -> dict[str, Any]:
    from idyn_ros.experiments import payload

    return {"_files": {"payload": payload.run(robots, quick=quick)}}
