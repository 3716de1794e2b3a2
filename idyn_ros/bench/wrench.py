"""Benchmark topic ``wrench``: the wrench observer on the embedded plant, per robot (``experiments.wrench_eval``).

``run_benchmarks(quick=False, robots=...)`` returns ``{"_files": {"wrench_observer_<robot>": ...}}``: 10 N pushes
at the flange and a contact-free move, estimated with the nominal RBD and with the model ``idyn train`` gives by
default (``auto``, the same cached model the tracking tables use: ``models_cache.bench_models``, trained on the
first run, ~5 min per robot). The pushes and the move stay away from singularities (``wrench_eval``'s module doc).
"""

from __future__ import annotations

from typing import Any

from idyn_ros.bench.experiments import ROBOTS


def run_benchmarks(quick: bool = False, robots: tuple[str, ...] = ROBOTS) -> dict[str, Any]:
    """See the module docstring."""
    from idyn_ros.bench.experiments import _work_dir
    from idyn_ros.experiments import models_cache, wrench_eval

    files: dict[str, Any] = {}
    for robot in robots:
        model = models_cache.bench_models(robot, _work_dir(), ["auto"], quick)["auto"]
        result = wrench_eval.evaluate(robot, model)
        learned, nominal = result["learned"], result["nominal_rbd"]
        print(f"{robot}: 10 N pushes, momentum observer RMSE {learned['push']['momentum']['rmse_mean_n']:.2f} N "
              f"(auto) vs {nominal['push']['momentum']['rmse_mean_n']:.2f} N (nominal RBD); contact-free move |F| "
              f"RMS {learned['moving_no_contact']['momentum']['rms_n']:.2f} vs "
              f"{nominal['moving_no_contact']['momentum']['rms_n']:.2f} N", flush=True)
        files[f"wrench_observer_{robot}"] = result
    return {"_files": files}
