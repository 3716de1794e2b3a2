"""run_cell's choice of feedback M(q) and the same-M acceptance (tracking.feedback_mass_decomposition)."""

from __future__ import annotations

import json

import pytest

from idyn_ros.experiments import tracking


@pytest.fixture(scope="module")
def panda():
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim import Plant

    model = RobotModel.from_robot("panda")
    return model, Plant("panda", "true"), tracking.moves_for(model, 1, (0.5,))


def test_nominal_rbd_own_feedback_is_the_urdf_m(panda):  # rel 1 %: plant sensor noise, not bit-exact
    model, plant, moves = panda
    own = tracking.run_cell("panda", model, plant, "nominal_rbd", "medium", moves, {})
    urdf = tracking.run_cell("panda", model, plant, "nominal_rbd", "medium", moves, {}, feedback="nominal")
    assert not own.get("failed") and own["rmse_deg"] == pytest.approx(urdf["rmse_deg"], rel=1e-2)


def test_missing_feedback_model_is_a_failed_cell(panda):
    model, plant, moves = panda
    cell = tracking.run_cell("panda", model, plant, "nominal_rbd", "medium", moves, {}, feedback="hybrid_e2e")
    assert cell["failed"] and "feedback M" in cell["reason"]


def test_acceptance_same_feedback_compares_like_with_like():
    c = lambda x: {"rmse_deg": x, "final_deg": 0.0}  # noqa: E731
    decomp = {"hybrid_e2e+M_of_hybrid_e2e": {"medium": c(0.2)},
              "nominal_rbd+M_of_hybrid_e2e": {"medium": c(1.0), "stiff": c(0.3)},
              "hybrid_e2e+urdf_M": {"medium": c(3.0)},
              "nominal_rbd+urdf_M": {"medium": c(6.0), "stiff": c(2.0)}}
    a = tracking.acceptance_same_feedback(decomp)
    assert a["model_M"]["ratio_hybrid_medium_to_nominal_medium"] == pytest.approx(0.2)
    assert a["model_M"]["third_of_nominal_medium"] and a["model_M"]["as_good_as_nominal_stiff"]
    assert a["urdf_M"]["ratio_hybrid_medium_to_nominal_medium"] == pytest.approx(0.5)
    assert not a["urdf_M"]["third_of_nominal_medium"] and not a["urdf_M"]["as_good_as_nominal_stiff"]
    empty = tracking.acceptance_same_feedback({})["model_M"]  # failed/missing -> null, strict JSON
    assert empty["hybrid_medium_rmse_deg"] is None and not empty["third_of_nominal_medium"]
    json.dumps(empty, allow_nan=False)
