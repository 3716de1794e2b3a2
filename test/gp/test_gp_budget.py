"""GP training's budget: a seeded fit with a fixed L-BFGS count never reads the clock, and a time budget is turned
into such a count before the fit (plan_fit), so the count printed reproduces the model.

No test here depends on this machine's speed: where time matters, the clock is a fake one.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
import torch

from idyn_ros.models.gp import train as gp_train
from idyn_ros.models.gp import train_gp
from idyn_ros.models.gp.synthetic import make_set, panda_model


def _dataset(seed: int, dof: int, n: int):
    from idyn_ros.data import Dataset

    s = make_set(seed, dof, n_samples=n)
    rm = panda_model(dof)
    return Dataset(t=np.arange(n) / 10.0, q=s.q, dq=s.dq, tau=s.tau_noisy, ddq=s.ddq,
                   joint_names=rm.joint_names, robot="panda", source=f"synthetic seed {seed}")


def _jumping_clock(step_s: float):
    """A perf_counter that advances ``step_s`` per call: a machine so loaded that every step looks slow."""
    ticks = itertools.count()
    return lambda: next(ticks) * step_s


def _train(tmp_path, name: str, **kw) -> tuple[dict, dict]:
    rm = panda_model(2)
    metrics = train_gp("lip-gp", rm, [_dataset(0, 2, 40)], [_dataset(100, 2, 60)], tmp_path / name, seed=3,
                       max_samples=30, friction=True, max_hyper_points=30, **kw)
    state = torch.load(tmp_path / name / "gp.pt", weights_only=False)["state_dict"]
    return metrics, {k: v.clone() for k, v in state.items()}


def _assert_same_model(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k, value in a.items():
        torch.testing.assert_close(value, b[k], rtol=0, atol=0, msg=k)


def test_a_seeded_fit_with_a_fixed_count_is_the_same_however_slow_the_clock_says_the_machine_is(
        tmp_path, monkeypatch) -> None:
    """Two runs with the same seed and L-BFGS count gave different models: a wall-clock cut inside the optimisation
    landed at another step when the machine was busier. A fixed count must not read the clock at all."""
    steady, _ = _train(tmp_path, "steady", iterations=6, max_minutes=0.05)
    monkeypatch.setattr(time, "perf_counter", _jumping_clock(10.0))  # every call: 10 s later (3 s budget)
    loaded, state_loaded = _train(tmp_path, "loaded", iterations=6, max_minutes=0.05)
    monkeypatch.undo()
    _, state_steady = _train(tmp_path, "steady2", iterations=6, max_minutes=0.05)
    _assert_same_model(state_steady, state_loaded)
    assert loaded["fit"]["iterations"] == steady["fit"]["iterations"]
    assert loaded["iterations"] == steady["iterations"] == 6 and loaded["fit_plan"] is None


def test_a_budget_plans_a_count_before_the_fit_and_that_count_pinned_gives_the_same_model(
        tmp_path, monkeypatch) -> None:
    """With a budget the probe decides the count; then the fit runs without the clock, so the count that the run
    reports, pinned (--gp-iterations), makes the identical model. The probe is faked (a slow machine: 1 s per
    likelihood evaluation) so the plan is known: (60 s - 3 s probe - 2 starts x 2 s) / (2 x 1.25 s) = 21.2 -> 16."""
    monkeypatch.setattr(gp_train, "probe_fit", lambda *a, **k: (1.0, 2.0, 3.0))
    planned, state_planned = _train(tmp_path, "planned", max_minutes=1.0)
    assert planned["iterations"] == 16 and planned["fit_plan"]["iterations"] == 16
    assert planned["noise_starts_fitted"] == 2 and planned["fit_plan"]["predicted_seconds"] <= 60.0
    monkeypatch.setattr(time, "perf_counter", _jumping_clock(100.0))  # the fit itself: never cut by the clock
    again, state_again = _train(tmp_path, "again", max_minutes=1.0)
    monkeypatch.undo()
    pinned, state_pinned = _train(tmp_path, "pinned", iterations=16)
    _assert_same_model(state_planned, state_again)
    _assert_same_model(state_planned, state_pinned)
    assert pinned["fit_plan"] is None and again["fit"]["iterations"] == planned["fit"]["iterations"]


def test_the_real_probe_leaves_the_fit_as_an_unprobed_run_with_that_count(tmp_path) -> None:
    planned, state_planned = _train(tmp_path, "planned", max_minutes=0.2)
    _, state_pinned = _train(tmp_path, "pinned", iterations=planned["iterations"])
    _assert_same_model(state_planned, state_pinned)
    plan = planned["fit_plan"]
    assert plan["eval_seconds"] > 0 and plan["fixed_seconds"] > 0 and plan["probe_seconds"] > 0


@pytest.mark.parametrize(("x", "expected"), [(0.5, 0), (1, 1), (1.9, 1), (2, 2), (3, 3), (5.9, 4), (6, 6), (7, 6),
                                             (8, 8), (11.9, 8), (12, 12), (23, 16), (24, 24), (47, 32), (1000, 768)])
def test_grid_floor_rounds_down_to_one_or_one_and_a_half_times_a_power_of_two(x: float, expected: int) -> None:
    assert gp_train.grid_floor(x) == expected


def test_plan_gives_the_noise_starts_the_budget_first_and_the_refinement_what_is_left() -> None:
    plan = gp_train.plan_fit
    assert plan(600, 2, 0.1, 1.0, 0.5).iterations == 50  # affordable: the count asked for, whole
    assert plan(600, 2, 0.1, 1.0, 0.5, iterations=37).iterations == 37
    p = plan(60, 2, 1.0, 2.0, 3.0)
    assert (p.iterations, p.refine_iterations) == (16, 0) and p.predicted_seconds <= 60
    assert plan(10, 2, 1.0, 2.0, 3.0).iterations == 1  # not even one affords: one (the run says it took longer)
    # the starts take 2 x 16 x 1.25 = 40 s of the 53 s left; the refinement's posterior 2 s; 11 s / 1.25 -> 8
    p = plan(60, 2, 1.0, 2.0, 3.0, refine_iterations=100)
    assert (p.iterations, p.refine_iterations) == (16, 8) and p.predicted_seconds <= 60
    assert plan(600, 2, 0.1, 1.0, 0.5, refine_iterations=20).refine_iterations == 20
    assert plan(600, 2, 0.1, 1.0, 0.5, refine_iterations=20) == plan(600, 2, 0.1, 1.0, 0.5, refine_iterations=20)


def test_time_line_names_the_count_that_reproduces_the_model() -> None:
    from idyn_ros.commands.train import _gp_time_line

    plan = gp_train.plan_fit(12, 2, 0.5, 1.0, 1.5)
    metrics = {"train_seconds": 11.2, "noise_starts_fitted": 2, "iterations": plan.iterations, "refine_iterations": 0,
               "fit_plan": {**plan.__dict__, "predicted_seconds": plan.predicted_seconds},
               "scoring_seconds": 3.4, "export_seconds": 1.2}
    line = _gp_time_line("lip-gp", metrics)
    assert f"2 noise start(s) x {plan.iterations} L-BFGS iterations" in line
    assert f"--gp-iterations {plan.iterations} gives this model on any machine" in line
    assert "not in the budget: scoring 3.4 s, export 1.2 s" in line
    assert "over" not in plan.describe("lip-gp")
    short = gp_train.plan_fit(5, 2, 0.5, 1.0, 1.5)  # least: 1.5 + 2 x (1 + 0.625) = 4.75 s, one iteration each
    assert short.iterations == 1 and "it will run over" not in short.describe("lip-gp")
    over = gp_train.plan_fit(4, 2, 0.5, 1.0, 1.5)
    assert over.iterations == 1 and "below the least this fit takes, about 5 s" in over.describe("lip-gp")
