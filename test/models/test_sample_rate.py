"""One sample rate per model: mixed-rate and irregular recordings are resampled to it, in `idyn train` and
`idyn evaluate` (models.sources.load_split / load_recordings)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from idyn_ros.cli import main
from idyn_ros.models.sources import Recording, load_split, model_rate


def _save(path, rec: Recording, names, keep: np.ndarray | None = None) -> str:
    """``rec`` (or its samples ``keep``) as a foreign-layout npz: its own stamps, imported like any source."""
    idx = np.arange(rec.n_samples) if keep is None else keep
    np.savez(path, times=rec.t[idx], positions=rec.q[idx], velocities=rec.dq[idx], accelerations=rec.ddq[idx],
             torques=rec.tau[idx], joint_names=np.array(names))
    return str(path)


def _irregular(n: int) -> np.ndarray:
    """Sample indices stepping 1, 3, 1, 3, ...: from a 200 Hz grid, 5/15 ms alternating (100 Hz mean), like the
    UR5 runs logged at PC receive time."""
    return np.cumsum(np.resize([0, 1, 3], n // 2 + 1)[: n // 2])


@pytest.fixture(scope="module")
def files(iiwa, synth, tmp_path_factory):
    d = tmp_path_factory.mktemp("rates")
    train, val, test = synth  # 200 Hz
    names = iiwa.joint_names
    return {"train": _save(d / "train.npz", train, names),
            "train_100": _save(d / "train_100.npz", val, names, np.arange(0, val.n_samples, 2)),
            "val": _save(d / "val.npz", val, names),
            "test": _save(d / "test.npz", test, names),
            "test_irregular": _save(d / "test_irregular.npz", test, names, _irregular(test.n_samples))}


def _rec(rate: float, seconds: float, source: str = "") -> Recording:
    t = np.arange(0.0, seconds, 1.0 / rate)
    z = np.zeros((len(t), 2))
    return Recording(t, z, z, z, z, source)


def test_model_rate_is_the_rate_of_most_seconds_then_the_higher():
    rate, why = model_rate([_rec(100.0, 10.0), _rec(500.0, 4.0), _rec(101.0, 1.0)])  # 101 Hz counts as 100 Hz
    assert rate == pytest.approx(100.0) and "11.0 s of the 15.0 s" in why
    assert model_rate([_rec(100.0, 5.0), _rec(500.0, 5.0)])[0] == pytest.approx(500.0)  # a tie: the higher
    assert model_rate([_rec(100.0, 5.0)], requested=250.0) == (250.0, "--rate")


def test_mixed_and_irregular_recordings_are_resampled_to_the_model_rate(iiwa, synth, files):
    lines: list[str] = []
    train, val, test, rate = load_split([files["train"], files["train_100"]], [files["val"]],
                                        [files["test_irregular"]], iiwa, say=lines.append)
    assert rate == pytest.approx(200.0)
    assert lines[0].startswith("model rate 200 Hz (the rate of 12.0 s of the 18.0 s")
    resampled = [line for line in lines[1:] if "resampled from" in line]
    assert len(resampled) == 2 and "train_100.npz: resampled from 100 Hz" in resampled[0]
    assert "test_irregular.npz" in resampled[1] and "irregular stamps" in resampled[1]
    assert len(lines) == 3  # the recordings already at 200 Hz are left alone, silently
    for rec in [*train, *val, *test]:
        np.testing.assert_allclose(np.diff(rec.t), 0.005, atol=1e-9)
    np.testing.assert_array_equal(train[0].tau, synth[0].tau)  # on-rate data untouched
    # the irregular test run on the 200 Hz grid is the original motion (linear interpolation of smooth data)
    original = synth[2]
    n = test[0].n_samples
    np.testing.assert_allclose(test[0].q, original.q[:n], atol=2e-3)
    assert np.sqrt(np.mean((test[0].tau - original.tau[:n]) ** 2)) < 0.02 * original.tau.std()


def test_train_on_mixed_rates_then_evaluate_an_irregular_recording(files, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["train", "--robot", "iiwa14", "--data", files["train"], files["train_100"], "--val", files["val"],
               "--model", "rbd-friction", "--out", str(out), "--seed", "1", "--no-progress"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "idyn train: model rate 200 Hz" in printed and "train_100.npz: resampled from 100 Hz" in printed
    meta = json.loads((out / "metrics.json").read_text())
    assert meta["val"]["nmse_mean"] < 0.1
    from idyn_ros.runtime import read_metadata

    assert read_metadata(out / "model.onnx")["rate_hz"] == pytest.approx(200.0)
    # evaluate: the same motion at its own 200 Hz and logged irregularly at ~100 Hz (resampled to 200 Hz)
    scores = {}
    for name in ("test", "test_irregular"):
        assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", files[name], "--json"]) == 0
        captured = capsys.readouterr()
        scores[name] = json.loads(captured.out)["all"]["nmse_mean"]
        assert ("resampled from" in captured.err) == (name == "test_irregular")
    assert scores["test"] < 0.1
    assert scores["test_irregular"] == pytest.approx(scores["test"], abs=0.01)


def test_irregular_stamps_at_the_model_rate_are_said_once(iiwa, synth, tmp_path):
    from idyn_ros.models.sources import load_recordings

    rec = synth[1]
    jitter = np.where(np.arange(rec.n_samples) % 2, 0.0015, 0.0)  # 6.5/3.5 ms alternating around 5 ms
    path = tmp_path / "jittery.npz"
    np.savez(path, times=rec.t + jitter, positions=rec.q, velocities=rec.dq, accelerations=rec.ddq,
             torques=rec.tau, joint_names=np.array(iiwa.joint_names))
    lines: list[str] = []
    (out,) = load_recordings([path], iiwa, rate_hz=200.0, say=lines.append)
    assert len(lines) == 1 and "irregular stamps" in lines[0] and "on the model's 200 Hz grid" in lines[0]
    assert out.n_samples == rec.n_samples and out.rate_hz == pytest.approx(200.0)
    assert load_recordings([path], iiwa, say=lines.append)[0].irregular_stamps and len(lines) == 1  # no rate: silent


def test_a_model_with_state_trained_off_the_control_rate_is_called_so(files, tmp_path, capsys):
    """A hybrid-j (the r feature: state from tick to tick) at 200 Hz runs at 200 Hz only; the nodes' default is 1 kHz,
    and before, the first word of it was the controller refusing the model."""
    out = tmp_path / "run"
    rc = main(["train", "--robot", "iiwa14", "--data", files["train"], "--val", files["val"], "--model", "hybrid-j",
               "--mode", "2s", "--epochs", "1", "--out", str(out), "--seed", "1", "--no-progress"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "carries state from tick to tick" in err and "runs at 200 Hz only" in err and "rate_hz 200" in err
    main(["train", "--robot", "iiwa14", "--data", files["train"], "--val", files["val"], "--model", "rbd-friction",
          "--out", str(tmp_path / "physics"), "--no-progress"])
    assert "carries state" not in capsys.readouterr().err  # physics runs at any rate


def test_a_model_with_state_at_a_preset_s_hardware_rate_says_where_it_runs(tmp_path, capsys):
    """A UR5 user's 125 Hz model (a CB3's rate, which mode hardware sets) was told to set rate_hz 125 by hand."""
    from unittest import mock

    from idyn_ros.commands.train import _warn_if_bound_to_another_rate

    with mock.patch("idyn_ros.models.artifact.read_metadata", return_value={"state": True}):
        _warn_if_bound_to_another_rate(tmp_path / "m.onnx", 125.0, "ur5")
        out = capsys.readouterr()
        assert "runs at 125 Hz only" in out.out and "mode hardware with observer_only (125 Hz)" in out.out
        assert not out.err
        _warn_if_bound_to_another_rate(tmp_path / "m.onnx", 500.0, "iiwa14")  # the iiwa14's torque mode
        assert "in mode hardware (500 Hz)" in capsys.readouterr().out
        with pytest.warns(UserWarning, match=r"runs at 200 Hz only.*500 Hz in mode hardware.*set rate_hz 200"):
            _warn_if_bound_to_another_rate(tmp_path / "m.onnx", 200.0, "iiwa14")
        _warn_if_bound_to_another_rate(tmp_path / "m.onnx", 1000.0, "panda")  # the nodes' own rate: nothing to say
        assert not capsys.readouterr().out
