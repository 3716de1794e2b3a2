"""ModelRuntime: no torch on the hot path, refusal of wrong robot/rate, state handling."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from idyn_ros.errors import ModelArtifactError
from idyn_ros.runtime import ModelRuntime


@pytest.fixture(scope="module")
def robot():
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot("iiwa14")


@pytest.fixture(scope="module")
def artifact(robot, tmp_path_factory):
    """An untrained (epochs=0) tiny hybrid: its LSTM state still evolves, which is what we test."""
    from idyn_ros.models import export as ex
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=3.0, rate_hz=1000.0)
    cfg = ModelConfig(kind="hybrid", mode="e2e", epochs=0, linear_dim=16, hidden=8)
    res = fit(cfg, robot, [rec], progress=False)
    path = tmp_path_factory.mktemp("rt") / "model.onnx"
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot))
    return path


def test_runtime_never_imports_torch(artifact):
    code = (
        "import sys, numpy as np\n"
        "from idyn_ros.runtime import ModelRuntime\n"
        f"rt = ModelRuntime({str(artifact)!r})\n"
        "rt.step(np.zeros(7), np.zeros(7), np.zeros(7))\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('TORCH' if bad else 'CLEAN', bad[:3])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("CLEAN"), out.stdout


def test_refuses_other_robot(artifact):
    from idyn_ros.dynamics import RobotModel

    panda = RobotModel.from_robot("panda")
    with pytest.raises(ModelArtifactError) as info:
        ModelRuntime(artifact, panda)
    msg = str(info.value)
    assert "lbr_A1" in msg and "panda_joint1" in msg


def test_refuses_other_rate_and_names_both(artifact, robot):
    with pytest.raises(ModelArtifactError, match=r"1000 Hz.*500 Hz|500 Hz.*1000 Hz"):
        ModelRuntime(artifact, robot, rate_hz=500.0)
    ModelRuntime(artifact, robot, rate_hz=1000.0)  # the right rate is accepted


def test_a_model_without_recurrent_state_runs_at_any_rate(robot, tmp_path):
    """rbd-friction fitted on 125 Hz UR data was refused by the 1 kHz observer: only recurrent state needs the rate."""
    from idyn_ros.models import export as ex
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=3.0, rate_hz=125.0)
    res = fit(ModelConfig(kind="rbd-friction", epochs=0), robot, [rec], progress=False)
    path = tmp_path / "model.onnx"
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot))
    assert ModelRuntime(path, robot, rate_hz=1000.0).rate_hz == pytest.approx(125.0)


def test_refuses_non_artifacts(tmp_path):
    with pytest.raises(ModelArtifactError, match="no such model file"):
        ModelRuntime(tmp_path / "missing.onnx")
    run_dir = tmp_path / "run"  # `idyn wrench --model runs/ur5` told the user to train the model they had trained
    run_dir.mkdir()
    with pytest.raises(ModelArtifactError, match=r"a directory without a model\.onnx"):
        ModelRuntime(run_dir)
    (run_dir / "model.onnx").write_bytes(b"")
    with pytest.raises(ModelArtifactError, match=r"a directory, not a model file; pass .*run/model\.onnx"):
        ModelRuntime(run_dir)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not onnx")
    with pytest.raises(ModelArtifactError):
        ModelRuntime(bad)


def test_state_reset_and_warm_up(artifact, robot):
    rt = ModelRuntime(artifact, robot)
    q = np.full(7, 0.3)
    z = np.zeros(7)
    first = rt.step(q, z, z).total.copy()
    second = rt.step(q, z, z).total.copy()
    assert not np.allclose(first, second)  # the LSTM state moved
    rt.reset()
    np.testing.assert_allclose(rt.step(q, z, z).total, first, atol=1e-6)
    rt.reset()
    rt.warm_up(q, steps=500)  # Reuss Sec. VI: 500 iterations
    a = rt.step(q, z, z).total.copy()
    b = rt.step(q, z, z).total.copy()
    assert np.abs(a - b).max() < np.abs(first - second).max()  # settled
    hist = np.tile(q, (50, 1))
    rt.reset()
    rt.warm_up(hist, hist * 0, hist * 0)  # replay of a recorded history
    assert all(np.isfinite(s).all() for s in rt.state)


def test_replay_is_the_ticks_a_fresh_state_steps(artifact, robot):
    """The offline scorers (idyn evaluate, the benchmarks) replay a recording through the controller's step."""
    rt = ModelRuntime(artifact, robot)
    rng = np.random.default_rng(0)
    q, dq, ddq = (rng.normal(scale=0.3, size=(40, 7)) for _ in range(3))
    rt.step(q[5], dq[5], ddq[5])  # a state left over from elsewhere: replay starts fresh
    got = rt.replay(q, dq, ddq)
    rt.reset()
    for t in range(len(q)):
        tick = rt.step(q[t], dq[t], ddq[t])
        for part, whole in zip(tick, got, strict=True):
            np.testing.assert_array_equal(whole[t], part)
    assert not np.allclose(got.residual[0], got.residual[-1])  # the LSTM's state moved along the recording


def _held_for(rt: ModelRuntime, q: np.ndarray, steps: int) -> list[np.ndarray]:
    """The state after ``steps`` plain steps at q held from zero: what the warm-up must equal."""
    rt.reset()
    z = np.zeros_like(q)
    for _ in range(steps):
        rt.step(q, z, z)
    return rt.state


def test_warm_up_stops_at_a_fixed_point_with_the_state_all_steps_give(robot, tmp_path):
    """Once a step leaves the state unchanged the rest repeat it: the per-joint residual's settles in 1 step."""
    from idyn_ros.models import export as ex
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=2.0, rate_hz=1000.0)
    res = fit(ModelConfig(kind="hybrid-j", mode="2s", id_method="ols", epochs=0, gate=False), robot, [rec],
              progress=False)
    path = tmp_path / "joint.onnx"
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot))
    rt = ModelRuntime(path, robot)
    q = np.full(7, 0.3)
    expected = _held_for(rt, q, 500)
    rt.reset()
    assert rt.warm_up(q, steps=500) == 2  # step 1 sets the rotational displacement's state, step 2 repeats it
    for got, want in zip(rt.state, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_an_lstm_warm_up_ends_where_all_its_steps_end(artifact, robot):
    rt = ModelRuntime(artifact, robot)
    q = np.full(7, 0.3)
    expected = _held_for(rt, q, 300)
    rt.reset()
    assert rt.warm_up(q, steps=300) > 2
    for got, want in zip(rt.state, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_backends_agree(artifact, robot):
    rng = np.random.default_rng(0)
    a = ModelRuntime(artifact, robot, rbd_backend="pinocchio")
    b = ModelRuntime(artifact, robot, rbd_backend="onnx")
    for _ in range(200):
        q, dq, ddq = rng.normal(size=(3, 7))
        pa, pb = a.step(q, dq, ddq), b.step(q, dq, ddq)
        for k in ("total", "rbd", "friction", "residual"):
            assert np.abs(getattr(pa, k) - getattr(pb, k)).max() < 1e-5 * max(1.0, np.abs(pb.total).max())


def test_fitted_parts_are_held_to_the_training_velocity_range(robot, tmp_path):
    """Friction beyond the training data's |dq| equals friction at its edge; the RBD part sees the measured dq."""
    from idyn_ros.models import export as ex
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=2.0, rate_hz=1000.0)
    res = fit(ModelConfig(kind="rbd-friction", id_method="ols"), robot, [rec], progress=False)
    np.testing.assert_allclose(res.dq_abs_max, np.abs(rec.dq).max(axis=0))
    path = tmp_path / "model.onnx"
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot, dq_abs_max=res.dq_abs_max))
    rt = ModelRuntime(path, robot)
    np.testing.assert_allclose(rt.dq_fit_limit, res.dq_abs_max)
    q, ddq = np.full(robot.n, 0.3), np.zeros(robot.n)
    edge = rt.step(q, rt.dq_fit_limit, ddq)
    edge_friction, edge_rbd = edge.friction.copy(), edge.rbd.copy()
    beyond = rt.step(q, 3.0 * rt.dq_fit_limit, ddq)
    np.testing.assert_allclose(beyond.friction, edge_friction)
    assert not np.allclose(beyond.rbd, edge_rbd)  # Coriolis at the measured velocity
    np.testing.assert_allclose(beyond.rbd, robot.with_identified(rt.inertial, rt.armature).rnea(
        q, 3.0 * rt.dq_fit_limit, ddq), atol=1e-9)
    inside = 0.5 * rt.dq_fit_limit
    np.testing.assert_allclose(rt.step(q, inside, ddq).friction, robot_friction(rt, inside))
    # counted for the controller's diagnostics: the edge itself is not beyond, 3x is (once), 0.5x is not
    assert rt.ticks_beyond_hold == 1
    np.testing.assert_allclose(rt.peak_speed_ratio, 3.0)


def test_step_of_an_rbd_friction_model_is_rnea_plus_friction_torque_at_the_held_velocity(robot, tmp_path):
    """step calls pinocchio directly, holds dq with np.maximum/np.minimum and evaluates the default friction kinds
    with in-place ufuncs: RBD identical to RobotModel.rnea, friction within 1e-12 of friction_torque (the formula
    training uses) at np.clip(dq, -hold, hold), inside and beyond the training speed."""
    from idyn_ros.dynamics.friction import DEFAULT_KINDS
    from idyn_ros.models import export as ex
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=2.0, rate_hz=1000.0)
    res = fit(ModelConfig(kind="rbd-friction", id_method="ols"), robot, [rec], progress=False)
    path = tmp_path / "model.onnx"
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot, dq_abs_max=res.dq_abs_max))
    rt = ModelRuntime(path, robot)
    assert tuple(rt.meta["parameters"]["friction_kinds"]) == DEFAULT_KINDS
    rbd = robot.with_identified(rt.inertial, rt.armature)
    rng = np.random.default_rng(3)
    for _ in range(300):
        q, ddq = rng.normal(size=(2, robot.n))
        dq = rng.normal(size=robot.n) * rt.dq_fit_limit * rng.choice([0.01, 0.5, 3.0])
        p = rt.step(q, dq, ddq)
        np.testing.assert_array_equal(p.rbd, rbd.rnea(q, dq, ddq))
        expected = robot_friction(rt, np.clip(dq, -rt.dq_fit_limit, rt.dq_fit_limit))
        np.testing.assert_allclose(p.friction, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
        np.testing.assert_array_equal(p.total, p.rbd + p.friction)


def test_the_feedforward_says_when_the_robot_outruns_the_training_data(robot, tmp_path):
    """The controller node logs this line once and counts the ticks on /diagnostics."""
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.models import export as ex
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=2.0, rate_hz=1000.0)
    res = fit(ModelConfig(kind="rbd-friction", id_method="ols"), robot, [rec], progress=False)
    path = tmp_path / "model.onnx"
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot, dq_abs_max=res.dq_abs_max))
    ff = FeedforwardComputer(robot, path)
    assert ff.model_id == f"model.onnx:{ff.runtime.model_id}" and ff.runtime.model_id  # the id `idyn train` prints
    q, ddq = np.full(robot.n, 0.3), np.zeros(robot.n)
    ff.compute(q, 0.5 * res.dq_abs_max, ddq)
    assert ff.training_speed_note() == ""
    dq = 0.5 * res.dq_abs_max
    dq[2] = 1.5 * res.dq_abs_max[2]
    ff.compute(q, dq, ddq)
    note = ff.training_speed_note()
    assert ff.ticks_beyond_training_speed == 1  # of 2 ticks: the same words as idyn train / idyn evaluate
    assert f"({robot.joint_names[2]} 1.5x its largest speed; 50% of the samples beyond it)" in note


def test_offline_scores_export_and_runtime_hold_the_velocity_alike(robot, tmp_path):
    """Beyond the training |dq|, what `idyn train` scores (torch), the whole exported graph and the split runtime
    give the same torque: the friction and the per-joint residual see the held velocity in all three."""
    import dataclasses

    import torch

    from idyn_ros.models import export as ex
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit, predict
    from idyn_ros.models.zoo import ModelConfig

    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=2.0, rate_hz=1000.0)
    res = fit(ModelConfig(kind="hybrid-j", mode="2s", id_method="ols", epochs=3, gate=False), robot, [rec],
              progress=False)
    with torch.no_grad():
        res.model.residual.w3.add_(0.3)  # a residual that is not zero, so the velocity it sees matters
    path = tmp_path / "model.onnx"
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot, dq_abs_max=res.dq_abs_max))
    fast = dataclasses.replace(rec, dq=3.0 * rec.dq)  # every joint beyond its training range most of the time
    offline = predict(res.model, robot.pin_model, fast)
    for backend in ("pinocchio", "onnx"):
        rt = ModelRuntime(path, robot, rbd_backend=backend)
        online = np.array([rt.step(q, dq, ddq).total.copy() for q, dq, ddq in zip(fast.q, fast.dq, fast.ddq,
                                                                                   strict=True)])
        np.testing.assert_allclose(online, offline["tau"], atol=2e-4 * np.abs(offline["tau"]).max(), err_msg=backend)
    held = predict(res.model, robot.pin_model, dataclasses.replace(fast, dq=np.clip(fast.dq, -res.dq_abs_max,
                                                                                    res.dq_abs_max)))
    np.testing.assert_allclose(offline["tau_friction"], held["tau_friction"], atol=1e-9)
    assert not np.allclose(offline["tau_rbd"], held["tau_rbd"])  # RBD at the measured velocity


def robot_friction(rt: ModelRuntime, dq: np.ndarray) -> np.ndarray:
    from idyn_ros.dynamics.friction import friction_torque

    params = rt.meta["parameters"]
    return friction_torque(dq, np.asarray(params["friction"]), tuple(params["friction_kinds"]))
