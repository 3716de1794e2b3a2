"""Real KUKA LWR4+ recordings (FloBaRoID): train on 1, validate on 2, test on 3 (another trajectory)."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.models.metrics import torque_metrics

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def kuka(shared_data):
    from idyn_ros.models.sources import load_recordings, load_robot

    root = shared_data / "kuka_lwr4"
    robot = load_robot(str(root / "kuka_lwr4.urdf"))
    recs = load_recordings([root / f"measurements_{i}.npz" for i in (1, 2, 3)], robot)
    return robot, recs


def test_nominal_rbd_baseline_matches_the_data_readme(kuka):
    """README: nominal URDF RBD on file 3 = 147 % mean nMSE (checks loading, joint order, units)."""
    from idyn_ros.models import rbd

    robot, (_, _, test) = kuka
    pred = rbd.regressor_batch(robot.pin_model, test.q, test.dq, test.ddq) @ rbd.inertial_parameters(
        robot.pin_model).ravel()
    assert torque_metrics(pred, test.tau)["nmse_mean"] == pytest.approx(1.47, abs=0.03)


@pytest.mark.slow
def test_consistent_identification_generalises_better_than_ols(kuka):
    from idyn_ros.models.identification import identify

    robot, (train, _, test) = kuka
    scores = {}
    for method in ("ols", "sdp"):
        res = identify(robot.pin_model, [train], method, ())
        scores[method] = torque_metrics(res.predict(robot.pin_model, test), test.tau)["nmse_mean"]
    assert scores["sdp"] < 0.5 * scores["ols"], scores


@pytest.mark.slow
def test_hybrid_e2e_meets_the_target(kuka):
    """Target: mean test nMSE <= 30 % with no joint at or above 100 %. Met again since the SDP identification the E2E
    starts at holds the links with the geometric prior (bench: 17 %, joint 6 at 86 %, velocity held; with the ridge
    33 % and 178 %)."""
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.zoo import ModelConfig

    robot, (train, val, test) = kuka
    _, m = train_run(ModelConfig(kind="hybrid", mode="e2e", epochs=60), robot, [train], [val], [test],
                     max_minutes=4, progress=False)
    nmse = np.asarray(m["test"]["nmse"])
    assert nmse.mean() <= 0.30 and nmse.max() < 1.0, nmse


def test_an_ols_fit_that_breaks_a_body_is_not_exported_unless_asked(kuka, tmp_path):
    """`idyn train --id-method ols` exported a model whose M(q) is indefinite on every sample of file 3, silently;
    `idyn identify --method ols` already refused its URDF."""
    from idyn_ros.errors import TrainingError
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.zoo import ModelConfig

    robot, (train, val, _) = kuka
    cfg = ModelConfig(kind="rbd", id_method="ols", friction_kinds=())
    with pytest.raises(TrainingError, match=r"physically inconsistent.*--id-method sdp"):
        train_run(cfg, robot, [train], [val], (), tmp_path / "refused", progress=False)
    assert not (tmp_path / "refused" / "model.onnx").exists()
    train_run(cfg, robot, [train], [val], (), tmp_path / "asked", progress=False, allow_inconsistent=True)
    assert (tmp_path / "asked" / "model.onnx").is_file()
    sdp = ModelConfig(kind="rbd", id_method="sdp", friction_kinds=())
    train_run(sdp, robot, [train], [val], (), tmp_path / "sdp", progress=False)  # consistent: exported as before
    assert (tmp_path / "sdp" / "model.onnx").is_file()
