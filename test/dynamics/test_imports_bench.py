"""Layering guards and the benchmark entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_dynamics_import_does_not_pull_torch() -> None:
    """runtime/control/nodes import idyn_ros.dynamics; it must not import torch (only torch_rnea does)."""
    code = (
        "import sys; import idyn_ros.dynamics, idyn_ros.dynamics.inertia, idyn_ros.dynamics.base_parameters; "
        "from idyn_ros.dynamics import RobotModel; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_run_benchmarks_returns_json_numbers() -> None:
    from idyn_ros.bench.dynamics import run_benchmarks

    res = run_benchmarks(robots=("ur5",))
    json.dumps(res)
    r = res["ur5"]
    assert r["dof"] == 6 and r["base_parameters"] == 36
    assert r["torch_f64_max_abs_err_1000"] < 1e-9
    assert r["onnx_f32_rel_err_1000"] < 1e-5
    assert 0 < r["pinocchio_rnea_us_p50"] < r["onnx_ort_b1_us_p50"]


def test_gp_bench_keeps_only_the_headline() -> None:
    """`idyn bench --only gp` is the 6-DoF accuracy table and latency; the studies are studies/gp_lip/run.py."""
    from idyn_ros.bench import gp
    from idyn_ros.errors import ParameterError

    assert gp.SECTIONS == ("synthetic_6dof", "latency")
    with pytest.raises(ParameterError, match=r"studies/gp_lip/run\.py"):
        gp.run_benchmarks(sections=("lse_6dof",))


def test_sim_bench_has_no_study_commands() -> None:
    """The integrator comparison and drift breakdown are studies/plant_integrator/run.py, not bench commands."""
    from idyn_ros.bench import sim

    assert not hasattr(sim, "integrator_comparison") and not hasattr(sim, "drift_breakdown")
    with pytest.raises(SystemExit):
        sim.main(["integrators"])


def test_a_fit_idyn_train_refuses_is_a_row_of_the_models_table_not_a_crash(monkeypatch) -> None:
    """A time-budgeted DeLaN worse than the mean torque made `idyn bench --only models` fail as a whole."""
    from idyn_ros.bench import models as bench_models
    from idyn_ros.bench.report import _model_rows
    from idyn_ros.errors import TrainingError
    from idyn_ros.models import pipeline

    def refuse(*_args, **_kwargs):
        raise TrainingError("the delan fit is worse than predicting the mean torque on validation")

    monkeypatch.setattr(pipeline, "train_run", refuse)
    rows = bench_models._table(None, [], [], [], minutes=0.1, epochs=1, only=["DeLaN"])
    assert rows and all("worse than predicting" in r["refused"] for r in rows.values())
    assert any("refused" in line for line in _model_rows(rows))
