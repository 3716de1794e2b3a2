"""Per-joint current gains identified jointly with the rigid-body and friction parameters, and `idyn train` on
current data (the artifact predicts Nm and carries the gains; the runtime reads them)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest


@pytest.fixture(scope="module")
def ur5():
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot("ur5")


@pytest.fixture(scope="module")
def ur5_torque(ur5):
    """Torque recordings of a UR5 whose inertials are the nominal ones (so the nominal gravity is the truth)."""
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot

    truth = make_true_robot(ur5.pin_model, seed=3, spread=0.0)
    return [fourier_recording(ur5.pin_model, truth, seed=s, duration=12.0, rate_hz=125.0, noise=0.005)
            for s in (21, 22)]


TRUE_GAINS = np.array([9.0, 8.0, 7.5, 6.0, 5.0, 4.0])  # Nm/A: not the robot data's (10.7 ... 11.9)


def _currents(recs, gains=TRUE_GAINS):
    return [replace(r, tau=r.tau / gains, effort_kind="current") for r in recs]


def test_gains_are_found_up_to_the_scale_the_nominal_gravity_fixes(ur5, ur5_torque):
    from idyn_ros.models.current_gains import MIN_RIGID_BODY_SHARE, identify_gains
    from idyn_ros.robots.drives import torque_constants

    found = identify_gains(ur5, _currents(ur5_torque))
    free = found.identified
    assert free[found.reference_joint] and free.sum() >= 2
    assert np.array_equal(free, found.rigid_body_share >= MIN_RIGID_BODY_SHARE) or free.sum() == 1
    # identified joints: the truth (the nominal inertials are the truth here, so the gravity scale is exact); the
    # friction of the synthetic truth is not in the model class (tanh, Stribeck), which costs the weak joints a few %
    gravity = [1, 2]  # shoulder_lift, elbow: carry the gravity
    np.testing.assert_allclose(found.values[gravity], TRUE_GAINS[gravity], rtol=0.02)
    np.testing.assert_allclose(found.values[free], TRUE_GAINS[free], rtol=0.08)
    # the others keep the robot data's ratio to the reference joint
    prior = torque_constants("ur5").as_array()
    ref = found.reference_joint
    np.testing.assert_allclose(found.values[~free] / found.values[ref], prior[~free] / prior[ref], rtol=1e-9)
    # the scale decision: currents twice as large -> gains half as large, the same parameters
    half = identify_gains(ur5, _currents(ur5_torque, TRUE_GAINS / 2))
    np.testing.assert_allclose(half.values, found.values / 2, rtol=5e-3)  # up to the optimiser tolerance


def test_gains_need_current_data_and_gravity(ur5, ur5_torque):
    from idyn_ros.errors import IdentificationError
    from idyn_ros.models.current_gains import identify_gains

    with pytest.raises(IdentificationError, match="motor currents"):
        identify_gains(ur5, ur5_torque)


def test_a_recording_that_barely_moves_is_called_unexciting_not_wrongly_signed(ur5, ur5_torque):
    """The first half second of a real UR5 run (the arm at rest, then creeping) gave a gravity scale of -5e-9 and
    the advice to check the currents' signs; the torque path says the data do not excite the parameters."""
    from idyn_ros.errors import IdentificationError
    from idyn_ros.models.current_gains import identify_gains

    rec = _currents(ur5_torque)[0]
    still = replace(rec, t=rec.t[:400], q=np.repeat(rec.q[:1], 400, axis=0), dq=np.zeros((400, 6)),
                    ddq=np.zeros((400, 6)), tau=rec.tau[:400] * 0 + rec.tau[:1])
    with pytest.raises(IdentificationError, match="do not excite") as err:
        identify_gains(ur5, [still])
    assert "signs" not in str(err.value)


def test_idyn_train_on_currents_writes_an_artifact_in_nm_with_its_gains(ur5, ur5_torque, tmp_path):
    from idyn_ros.cli import main
    from idyn_ros.control.effort import EffortToTorque
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.data.dataset import Dataset
    from idyn_ros.runtime import ModelRuntime

    paths = []
    for i, r in enumerate(_currents(ur5_torque)):
        ds = Dataset(r.t, r.q, r.dq, r.tau, tuple(ur5.joint_names), "ur5", "current", "synthetic", ddq=r.ddq)
        paths.append(str(ds.save(tmp_path / f"cur{i}.npz")))
    out = tmp_path / "run"
    assert main(["train", "--robot", "ur5", "--data", paths[0], "--val", paths[1], "--model", "rbd-friction",
                 "--out", str(out), "--no-progress"]) == 0  # the old code refused current data here
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["effort"]["kind"] == "current"
    gains = np.asarray(metrics["effort"]["torque_constants"])
    np.testing.assert_allclose(np.asarray(metrics["val"]["rmse_current_a"]) * gains, metrics["val"]["rmse_nm"])
    assert metrics["val"]["nmse_mean"] < 0.05  # the model predicts the torques (in Nm) well
    rt = ModelRuntime(out / "model.onnx", ur5, 125.0)
    np.testing.assert_allclose(rt.torque_constants, gains)
    assert rt.uncertainty["split"] == "val" and len(rt.uncertainty["tau_sigma_nm"]) == 6
    ff = FeedforwardComputer(ur5, out / "model.onnx", "none", 125.0)
    conv = EffortToTorque("auto", 6, ff.effort_metadata)
    assert conv.unit == "current" and "model's metadata" in conv.describe()
    i = ur5_torque[1].tau[100] / TRUE_GAINS
    np.testing.assert_allclose(conv.torque(i), i * gains)
    pred = rt.step(ur5_torque[1].q[100], ur5_torque[1].dq[100], ur5_torque[1].ddq[100]).total
    assert np.abs(pred - ur5_torque[1].tau[100]).max() < 0.1 * np.abs(ur5_torque[1].tau).max()  # Nm, not A
    given = tmp_path / "given"
    assert main(["train", "--robot", "ur5", "--data", paths[0], "--model", "rbd-friction", "--out", str(given),
                 "--torque-constants", ",".join(map(str, TRUE_GAINS)), "--no-progress"]) == 0
    assert json.loads((given / "metrics.json").read_text())["effort"]["torque_constants"] == TRUE_GAINS.tolist()


def test_uncertainty_separates_motion_from_rest():
    from idyn_ros.models.sources import Recording
    from idyn_ros.models.uncertainty import torque_uncertainty

    t = np.arange(0, 6, 0.01)
    dq = np.where(((t > 1) & (t < 2)) | ((t > 4) & (t < 5)), 0.5, 0.0)[:, None] * np.ones((1, 2))
    q = np.cumsum(dq, 0) * 0.01
    q[t >= 5] = q[(t >= 2) & (t < 4)][0]  # back to the second rest's pose: a same-pose pair of rests
    rng = np.random.default_rng(0)
    res = rng.normal(0, 0.01, (len(t), 2)) + np.where(dq > 0, 2.0, 0.0)  # big while moving
    res[t >= 5] += 0.3  # static friction holds another share after the motion
    rec = Recording(t, q, dq, np.zeros_like(q), np.zeros_like(q))
    unc = torque_uncertainty([("val", [rec], [res])])
    assert unc["rest_periods"] == 3 and unc["rest_same_pose_pairs"] >= 1
    assert np.all(np.asarray(unc["tau_sigma_nm"]) > 0.5)
    assert np.all(np.asarray(unc["tau_sigma_rest_nm"]) < 0.3) and np.all(np.asarray(unc["tau_sigma_rest_nm"]) > 0.1)


@pytest.mark.realdata
def test_ur5_gains_on_the_real_runs(shared_data, ur5):
    """The joints with a rigid-body signal come out within 10 % of the UR controller's own ratio (README)."""
    from idyn_ros.bench.ur5 import TRAIN
    from idyn_ros.models.current_gains import identify_gains
    from idyn_ros.models.sources import load_recordings

    recs = load_recordings([shared_data / "ur5_ft" / r for r in TRAIN], ur5)
    found = identify_gains(ur5, recs)
    assert found.identified[1] and found.identified[2]  # shoulder_lift and elbow carry gravity
    np.testing.assert_allclose(found.values[1:4], [10.7, 10.7, 10.2], rtol=0.1)
    assert 0.9 < found.scale < 1.2


@pytest.mark.realdata
def test_the_ur10_bag_trains(shared_data, tmp_path):
    from idyn_ros.bench.ur5 import UR10_BAG, ur10_urdf
    from idyn_ros.cli import main

    out = tmp_path / "ur10"
    assert main(["train", "--robot", str(ur10_urdf()), "--data", str(shared_data / UR10_BAG), "--effort-kind",
                 "current", "--model", "rbd-friction", "--out", str(out), "--no-progress"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["effort"]["kind"] == "current" and metrics["train"]["nmse_mean"] < 0.1


def test_without_val_the_current_gains_are_identified_on_the_training_part_only(ur5, ur5_torque, tmp_path):
    """The gains were identified on all of --data and the tail held out afterwards: early stopping, the gate and the
    choice were scored on targets scaled by gains fitted to those very samples."""
    from idyn_ros.cli import main
    from idyn_ros.data.dataset import Dataset
    from idyn_ros.dynamics.friction import DEFAULT_KINDS
    from idyn_ros.models.current_gains import currents_to_torque
    from idyn_ros.models.sources import hold_out_tail, load_recordings

    r = _currents(ur5_torque)[0]
    path = Dataset(r.t, r.q, r.dq, r.tau, tuple(ur5.joint_names), "ur5", "current", "synthetic", ddq=r.ddq).save(
        tmp_path / "cur.npz")
    out = tmp_path / "run"
    assert main(["train", "--robot", "ur5", "--data", str(path), "--model", "hybrid-j", "--epochs", "1",
                 "--out", str(out), "--no-progress"]) == 0
    gains = np.asarray(json.loads((out / "metrics.json").read_text())["effort"]["torque_constants"])
    recs = load_recordings([path], ur5)
    head, tail, _ = hold_out_tail(recs)
    _, on_head, _ = currents_to_torque(ur5, head, tail, (), DEFAULT_KINDS)
    _, on_all, _ = currents_to_torque(ur5, recs, (), (), DEFAULT_KINDS)
    np.testing.assert_allclose(gains, on_head.values, rtol=1e-12)
    assert np.abs(on_head.values - on_all.values).max() > 1e-9  # the tail would have moved them
