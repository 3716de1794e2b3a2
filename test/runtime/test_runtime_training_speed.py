"""ModelRuntime's training-speed diagnostics for every model kind, and its refusal of an unknown effort kind."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.errors import ModelArtifactError
from idyn_ros.runtime import ModelRuntime

Q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


@pytest.fixture(scope="module")
def robot():
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot("panda")


@pytest.fixture(scope="module")
def recording(robot):
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot

    return fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=2.0, rate_hz=1000.0)


def _export(robot, recording, kind: str, path, zero_joint: int | None = None):
    """An untrained (epochs=0) artifact of ``kind`` recording the training data's largest |dq|, as `idyn train`
    exports it; ``zero_joint``: that joint never moved in the training data."""
    from idyn_ros.models import export as ex
    from idyn_ros.models.training import fit, velocity_range
    from idyn_ros.models.zoo import ModelConfig

    res = fit(ModelConfig(kind=kind, epochs=0, linear_dim=16, hidden=8), robot, [recording], progress=False)
    speed = velocity_range([recording])
    if zero_joint is not None:
        speed[zero_joint] = 0.0
        res.model.set_velocity_hold(speed)
    ex.export_onnx(res.model, robot, path, ex.build_metadata(res.model, robot, dq_abs_max=speed))
    return speed


def test_a_model_without_an_rbd_part_still_says_when_the_robot_outruns_its_training_data(robot, recording, tmp_path):
    """lstm / delan run unheld (they extrapolate worst), yet their metadata records the training speed: the ticks
    beyond it were never counted, so the controller never warned for them."""
    from idyn_ros.control.feedforward import FeedforwardComputer

    path = tmp_path / "lstm.onnx"
    speed = _export(robot, recording, "lstm", path)
    ff = FeedforwardComputer(robot, path, "rbd", 1000.0, 0)
    assert ff.runtime.velocity_hold is None  # not held: its physics-like parts need the measured velocity
    for k in range(100):
        ff.compute(Q, 3.0 * speed * np.sin(2 * np.pi * k / 100), np.zeros(7))
    assert ff.runtime.ticks == 100 and ff.ticks_beyond_training_speed > 50
    np.testing.assert_allclose(ff.runtime.training_speed, speed)
    note = ff.training_speed_note()
    assert "runs faster than the training data" in note and "3.0x its largest speed" in note
    assert "extrapolates there" in note and "holds friction and residual" not in note


def test_a_joint_that_never_moved_in_training_is_reported_without_a_ratio(robot, recording, tmp_path):
    """A training range of 0 rad/s gave a ratio of 1e8 ("panda_joint7 100000000.0x its largest speed")."""
    from idyn_ros.control.feedforward import FeedforwardComputer

    path = tmp_path / "zero.onnx"
    _export(robot, recording, "rbd-friction", path, zero_joint=6)
    ff = FeedforwardComputer(robot, path, "rbd", 1000.0, 0)
    dq = np.zeros(7)
    dq[6] = 0.1
    ff.compute(Q, dq, np.zeros(7))
    assert ff.runtime.peak_speed_ratio[6] == np.inf and np.all(ff.runtime.peak_speed_ratio[:6] == 0.0)
    note = ff.training_speed_note()
    assert "(panda_joint7 beyond a training range of 0 rad/s; 100% of the samples beyond it)" in note
    assert "100000000" not in note


@pytest.mark.parametrize("kind", ["Current", "amps", None])
def test_an_effort_kind_other_than_torque_or_current_is_refused(robot, recording, tmp_path, kind):
    """It loaded and was taken as torque, while every malformed 'current' entry is refused."""
    from idyn_ros.models.artifact import load_artifact, write_artifact

    good = tmp_path / "model.onnx"
    _export(robot, recording, "rbd-friction", good)
    proto, meta = load_artifact(good)
    path = tmp_path / "effort.onnx"
    write_artifact(proto, dict(meta, effort={"kind": kind, "torque_constants": [10.0] * 7}), path)
    with pytest.raises(ModelArtifactError, match="neither 'torque' nor 'current'"):
        ModelRuntime(path, robot)
    write_artifact(proto, dict(meta, effort={"kind": "current", "torque_constants": [10.0] * 7}), path)
    assert ModelRuntime(path, robot).torque_constants.tolist() == [10.0] * 7
