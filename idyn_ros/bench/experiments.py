"""Benchmark topic ``experiments``: the tracking tables (Reuss et al. 2022 Table III analogue) per robot,
and the DOOMED sweep with an unmodelled payload, on the embedded plant (the wrench observer: topic ``wrench``).

``run_benchmarks(quick=False)`` returns ``{"_files": {"tracking_panda": ..., "tracking_iiwa14": ...,
"tracking_ur5": ..., "doomed_sweep": ...}}``; the runner writes one JSON per
key into bench/results/. ``tracking_<robot>.json`` keys are a contract (idyn_ros/experiments/tracking.py):
``{ROW: {GAIN: {"rmse_deg", "final_deg"} | {"failed": true, "reason"}}}``; extra keys start with ``_``.

Models come from plant recordings (``idyn_ros.experiments.models_cache``), cached under
``$IDYN_WORK_DIR`` (default ``runs/``): ``runs/models/<robot>/<row>/model.onnx`` (quick mode:
``runs/quick/models/...``), so reruns skip recording and training.
``quick``: 2 moves of 2 s, short training (1 min per model), a small DOOMED grid (``idyn bench --only
experiments --quick --robots panda`` is the smoke run).
Full mode: the paper's protocol, 5 moves x (2 s, 10 s) per cell, 9 rows x 3 gains per robot; on this
shared 2-core machine (load ~10) one cell costs ~1-1.5 min, so a robot takes ~30 min plus ~15 min of
recording and training on the first run (DOOMED sweep ~8 min).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

ROBOTS = ("panda", "iiwa14", "ur5")


def _work_dir() -> Path:
    return Path(os.environ.get("IDYN_WORK_DIR", "runs"))


def tracking_for(robot: str, quick: bool) -> dict[str, Any]:
    """One robot's table + extras (``_models``, ``_acceptance``, ``_protocol``, ``_feedback_mass_matrix``:
    nominal_rbd vs hybrid rows at medium/stiff with the same feedback M, URDF and model)."""
    from idyn_ros.experiments import models_cache, tracking

    t0 = time.monotonic()
    rows = [r for r in tracking.ROWS]
    paths = models_cache.bench_models(robot, _work_dir(), rows, quick)
    n_moves = 2 if quick else tracking.PAPER_MOVES
    durations = (2.0,) if quick else tracking.PAPER_DURATIONS
    table = tracking.tracking_table(robot, paths, rows, n_moves=n_moves, durations=durations)
    out: dict[str, Any] = dict(table)
    out["_protocol"] = {"moves": n_moves, "durations_s": list(durations), "plant": "true profile",
                        "loop": "in-process lockstep 1 kHz (idyn_ros/sim/loop.py: the controller node's Controller)",
                        "seconds": time.monotonic() - t0}
    import json

    out["_models"] = {r: json.loads((Path(p).parent / "metrics.json").read_text()) for r, p in paths.items()}
    out["_acceptance"] = {row: tracking.acceptance(table, row) for row in ("hybrid_e2e", "hybrid_2s", "auto")}
    print(f"\n{robot}: RMSE / final offset [deg]\n{tracking.format_table(table)}\n"
          f"acceptance: {out['_acceptance']}", flush=True)
    # the same comparison with the same feedback M(q) on both sides (tracking.feedback_mass_decomposition)
    t1 = time.monotonic()
    decomp = tracking.feedback_mass_decomposition(robot, paths, table, n_moves=n_moves, durations=durations)
    decomp["_seconds"] = time.monotonic() - t1
    out["_feedback_mass_matrix"] = decomp
    for row in ("hybrid_e2e", "hybrid_2s"):
        out["_acceptance"][row]["same_feedback_M"] = tracking.acceptance_same_feedback(decomp, row)
    cells = {k: v for k, v in decomp.items() if not k.startswith("_") and k != "ratios"}
    print(f"{robot}: feedback-M decomposition (RMSE / final [deg])\n"
          f"{tracking.format_table(cells, gains=('medium', 'stiff'))}\nratios: {decomp['ratios']}", flush=True)
    return out


def run_benchmarks(quick: bool = False, robots: tuple[str, ...] = ROBOTS) -> dict[str, Any]:
    """See the module docstring. ``robots``: whose tracking tables to run (files of the others are left as they
    are); the DOOMED sweep runs on the Panda, when it is among them."""
    from idyn_ros.experiments import doomed_sweep

    files: dict[str, Any] = {}
    for robot in robots:
        files[f"tracking_{robot}"] = tracking_for(robot, quick)
    if "panda" not in robots:
        return {"_files": files}
    if quick:
        sweep = doomed_sweep.sweep("panda", etas=(0.0, 0.1, 1.0), alphas=(0.0, 0.5), gammas=(0.9,), n_moves=2)
    else:
        sweep = doomed_sweep.sweep("panda")
    sweep["acceptance_medium"] = doomed_sweep.payload_acceptance("panda", eta=0.1)
    try:
        from idyn_ros.bench import results_dir
        from idyn_ros.experiments import plots

        sweep["heatmap_png"] = str(plots.doomed_heatmaps(sweep, results_dir() / "doomed_sweep.png"))
    except Exception as exc:  # a figure must not lose the numbers
        sweep["heatmap_error"] = str(exc)
    files["doomed_sweep"] = sweep
    return {"_files": files}


if __name__ == "__main__":
    import json
    import sys

    res = run_benchmarks(quick="--quick" in sys.argv)
    print(json.dumps({k: list(v)[:3] for k, v in res["_files"].items()}))
