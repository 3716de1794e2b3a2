"""Model and training faults a user found: each test asserts what the user sees (exit code and the one
line of `idyn`, or the exception of the library call) and that nothing is lost."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from idyn_ros.cli import main
from idyn_ros.errors import ModelArtifactError, ParameterError

TINY = {"linear_dim": 16, "hidden": 8, "window": 50, "stride": 50, "batch": 8}
FAST = ["--no-progress", "--window", "50"]


@pytest.fixture(scope="module")
def iiwa():
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot("iiwa14")


@pytest.fixture(scope="module")
def panda():
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot("panda")


def _recording(robot, seed: int, duration: float):
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot

    return fourier_recording(robot.pin_model, make_true_robot(robot.pin_model, seed=1), seed=seed, duration=duration)


def _save(path: Path, rec, names=None) -> str:
    if names is None:  # a foreign file without joint names (FloBaRoID layout, like the KUKA recordings)
        np.savez(path, times=rec.t, positions=rec.q, velocities=rec.dq, accelerations=rec.ddq, torques=rec.tau)
    else:
        np.savez(path, t=rec.t, q=rec.q, dq=rec.dq, ddq=rec.ddq, tau=rec.tau, joint_names=np.array(names))
    return str(path)


@pytest.fixture(scope="module")
def files(iiwa, tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    names = list(iiwa.joint_names)
    return {"a": _save(d / "a.npz", _recording(iiwa, 10, 4.0), names),
            "b": _save(d / "b.npz", _recording(iiwa, 11, 4.0), names),
            "one_second": _save(d / "one_second.npz", _recording(iiwa, 12, 1.0), names)}


@pytest.fixture(scope="module")
def hybrid_run(iiwa, files, tmp_path_factory):
    """A trained 7-DoF hybrid run directory (model.onnx, model.pt, checkpoint.pt, metrics.json)."""
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.sources import load_recordings
    from idyn_ros.models.zoo import ModelConfig

    out = tmp_path_factory.mktemp("hybrid")
    cfg = ModelConfig(kind="hybrid", mode="e2e", epochs=1, **TINY)
    train_run(cfg, iiwa, load_recordings([files["a"]], iiwa), out_dir=out, progress=False)
    return out


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err  # one line
    return err


# 1. an empty / foreign / truncated model.onnx ----------------------------------------------------------------
def test_unusable_model_file_says_what_it_is(files, hybrid_run, tmp_path, capsys):
    good = (hybrid_run / "model.onnx").read_bytes()
    cases = {"empty.onnx": (b"", "empty file (0 bytes)"),
             "text.onnx": (b"this is not a model\n", "not an ONNX file"),
             "archive.onnx": (Path(files["a"]).read_bytes(), "not an ONNX file"),
             "half.onnx": (good[: len(good) // 2], "truncated ONNX file")}
    for name, (data, expected) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert main(["evaluate", "--model", str(path), "--data", files["b"]]) == 2
        err = _err(capsys)
        assert expected in err and str(path) in err, err
        with pytest.raises(ModelArtifactError, match=re.escape(expected)):
            from idyn_ros.runtime import ModelRuntime

            ModelRuntime(path)


# 2. flipped bytes must not load under the same model id -------------------------------------------------------
def test_damaged_model_is_refused_by_its_checksum(iiwa, files, hybrid_run, tmp_path, capsys):
    import onnx

    from idyn_ros.runtime import ModelRuntime

    good = (hybrid_run / "model.onnx").read_bytes()
    data = bytearray(good)
    # 2,000 flipped bytes inside the weights: the protobuf still parses, the numbers are wrong
    regions = []
    for init in onnx.load_from_string(good).graph.initializer:
        if len(init.raw_data) >= 64:
            start = good.find(init.raw_data)
            regions += range(start, start + len(init.raw_data))
    rng = np.random.default_rng(0)
    for i in rng.choice(regions, size=2000, replace=False):
        data[i] ^= 0xFF
    bad = tmp_path / "model.onnx"
    bad.write_bytes(bytes(data))
    onnx.load_from_string(bytes(data))  # still a well-formed ONNX file: only a checksum can tell
    with pytest.raises(ModelArtifactError, match="checksum mismatch") as info:
        ModelRuntime(bad, iiwa)
    assert str(bad) in str(info.value)
    assert main(["evaluate", "--model", str(bad), "--data", files["b"]]) == 2
    err = _err(capsys)
    assert "checksum mismatch" in err and str(bad) in err
    ModelRuntime(hybrid_run / "model.onnx", iiwa)  # the intact file still loads


def test_export_is_deterministic_and_verifiable(iiwa, hybrid_run, tmp_path):
    from idyn_ros.models.pipeline import export_model, load_model
    from idyn_ros.runtime import ModelRuntime

    model, ck = load_model(hybrid_run)
    first, second = tmp_path / "a.onnx", tmp_path / "b.onnx"
    assert export_model(model, ck, iiwa, first) == export_model(model, ck, iiwa, second)
    assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    ModelRuntime(first, iiwa)


# 3. atomic files; a damaged checkpoint is a clear error ----------------------------------------------------------
def test_kill_while_saving_keeps_the_previous_checkpoint(iiwa, files, tmp_path, monkeypatch):
    """Simulates SIGKILL in the middle of torch.save: half the bytes written, then the process is gone."""
    import torch

    from idyn_ros.models.sources import load_recordings
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    recs = load_recordings([files["a"]], iiwa)
    fit(ModelConfig(kind="lstm", epochs=1, **TINY), iiwa, recs, out_dir=tmp_path, progress=False)
    before = (tmp_path / "checkpoint.pt").read_bytes()
    real_save = torch.save

    def killed_while_writing(obj, f, *args, **kwargs):
        buf = io.BytesIO()
        real_save(obj, buf, *args, **kwargs)
        data = buf.getvalue()[: len(buf.getvalue()) // 2]
        if isinstance(f, str | Path):
            Path(f).write_bytes(data)
        else:
            f.write(data)
        raise KeyboardInterrupt  # the process dies here

    monkeypatch.setattr(torch, "save", killed_while_writing)
    with pytest.raises(KeyboardInterrupt):
        fit(ModelConfig(kind="lstm", epochs=3, **TINY), iiwa, recs, out_dir=tmp_path, resume=True, progress=False)
    monkeypatch.setattr(torch, "save", real_save)
    assert (tmp_path / "checkpoint.pt").read_bytes() == before  # nothing lost
    res = fit(ModelConfig(kind="lstm", epochs=2, **TINY), iiwa, recs, out_dir=tmp_path, resume=True, progress=False)
    assert [h["epoch"] for h in res.history] == [0, 1]


def test_truncated_or_empty_checkpoint_is_a_clear_error(files, tmp_path, capsys):
    out = tmp_path / "run"
    # hybrid: one epoch of a black-box LSTM is worse than the mean torque, which train refuses to export
    args = ["train", "--robot", "iiwa14", "--data", files["a"], "--model", "hybrid", "--hidden", "4", "--epochs", "1",
            "--out", str(out), *FAST]
    assert main(args) == 0
    capsys.readouterr()
    ckpt = out / "checkpoint.pt"
    full = ckpt.read_bytes()
    for data, expected in ((full[: len(full) // 3], "damaged or truncated checkpoint"),
                           (b"", "empty checkpoint (0 bytes")):
        ckpt.write_bytes(data)
        assert main([*args, "--resume"]) == 2
        err = _err(capsys)
        assert expected in err and str(ckpt) in err, err


# 4. --resume with other data, another model, or no checkpoint --------------------------------------------------
def test_resume_checks_model_and_data(files, tmp_path, capsys):
    out = tmp_path / "run"
    base = ["train", "--robot", "iiwa14", "--model", "hybrid", "--epochs", "1", "--out", str(out), *FAST]
    assert main([*base, "--data", files["a"], "--hidden", "4", "--resume"]) == 0
    err = capsys.readouterr().err
    assert f"no checkpoint in {out}; starting from scratch" in err
    before = (out / "model.onnx").read_bytes()

    assert main([*base, "--data", files["a"], "--hidden", "6", "--resume"]) == 2
    err = _err(capsys)
    assert "cannot resume, the checkpoint is another model (hidden 4 -> 6)" in err

    assert main([*base, "--data", files["b"], "--hidden", "4", "--resume", "--epochs", "2"]) == 2
    err = _err(capsys)
    assert "trained on other data" in err and "--resume-on-new-data" in err
    assert (out / "model.onnx").read_bytes() == before  # refused runs leave the run directory as it was

    assert main([*base, "--data", files["b"], "--hidden", "4", "--resume", "--resume-on-new-data",
                 "--epochs", "2"]) == 0
    assert "fine-tuning its weights on this data" in capsys.readouterr().err


def test_a_failed_train_removes_only_the_empty_folder_it_created(files, tmp_path, capsys, monkeypatch):
    """A refusal or Ctrl-C after the data were loaded left the -o folder it had created behind, empty."""
    from idyn_ros.models import pipeline

    def refuse(*args, **kwargs):
        return "refused for this test"

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    base = ["train", "--robot", "iiwa14", "--data", files["a"], "--model", "rbd", "--id-method", "nominal",
            "--no-progress"]
    monkeypatch.setattr(pipeline, "export_problem", refuse)
    assert main([*base, "--out", str(tmp_path / "new" / "run")]) == 2
    assert "refused for this test" in _err(capsys)
    assert not (tmp_path / "new").exists()  # the run folder and the parent it created for it
    had = tmp_path / "had"  # a folder the user had, empty or not, stays as it was
    (had / "empty").mkdir(parents=True)
    (had / "notes.txt").write_text("mine")
    for out in (had, had / "empty"):
        assert main([*base, "--out", str(out)]) == 2
    assert (had / "notes.txt").read_text() == "mine" and (had / "empty").is_dir()
    monkeypatch.setattr(pipeline, "export_problem", interrupt)
    assert main([*base, "--out", str(had / "new")]) == 130
    assert not (had / "new").exists() and (had / "empty").is_dir()
    # a checkpoint written before the refusal is kept, with its folder: --resume can continue it
    monkeypatch.setattr(pipeline, "export_problem", refuse)
    assert main(["train", "--robot", "iiwa14", "--data", files["a"], "--model", "hybrid", "--hidden", "4",
                 "--epochs", "1", "--out", str(tmp_path / "kept"), *FAST]) == 2
    assert "its checkpoint.pt stays, for --resume" in capsys.readouterr().err.strip().splitlines()[-1]
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["checkpoint.pt"]


def test_a_run_that_exports_removes_an_earlier_runs_checkpoint_and_state(files, tmp_path, capsys):
    """A hybrid's checkpoint.pt stayed next to the rbd model trained into its folder after it: --resume there would
    continue the old hybrid."""
    out = tmp_path / "run"
    hybrid = ["train", "--robot", "iiwa14", "--data", files["a"], "--model", "hybrid", "--hidden", "4", "--epochs",
              "1", "--out", str(out), *FAST]
    assert main(hybrid) == 0
    assert main([*hybrid, "--resume"]) == 0  # resumed at its last epoch, no new one written: still this run's
    assert (out / "checkpoint.pt").is_file()
    (out / "gp.pt").write_bytes(b"a GP run's state")  # `idyn export` of a folder must not meet another run's state
    capsys.readouterr()
    assert main(["train", "--robot", "iiwa14", "--data", files["a"], "--model", "rbd", "--id-method", "nominal",
                 "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"removed {out / 'checkpoint.pt'}, left by an earlier run" in err
    assert f"removed {out / 'gp.pt'}, left by an earlier run" in err
    assert not (out / "checkpoint.pt").exists() and not (out / "gp.pt").exists() and (out / "model.onnx").is_file()
    assert main([*hybrid, "--resume"]) == 0
    assert f"no checkpoint in {out}; starting from scratch" in capsys.readouterr().err


# 5. too little data for the model --------------------------------------------------------------------------------
def test_little_data_warns_with_the_numbers(files, tmp_path, capsys):
    rc = main(["train", "--robot", "iiwa14", "--data", files["one_second"], "--val", files["a"], "--model", "lstm",
               "--hidden", "8", "--epochs", "1", "--out", str(tmp_path / "x"), *FAST])
    err = capsys.readouterr().err
    # said before training; one epoch on 1 s then validates worse than the mean torque: refused, not exported
    assert rc == 2 and "worse than predicting the mean torque" in err
    line = next(x for x in err.splitlines() if "little training data" in x)
    assert line.startswith("idyn train: warning: little training data for the lstm model: 1.00 s = 200 samples x 7")
    assert "1400 torque values" in line and "fitted parameters" in line


# 6. non-positive --max-minutes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "-1"])
def test_non_positive_max_minutes_is_refused(files, tmp_path, capsys, value):
    with pytest.raises(SystemExit) as info:
        main(["train", "--robot", "iiwa14", "--data", files["a"], "--model", "lstm", "--out", str(tmp_path),
              "--max-minutes", value])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        f"argument --max-minutes: must be > 0, got {value}")
    assert not any(tmp_path.iterdir())


def test_library_refuses_non_positive_time_budget(iiwa, files):
    from idyn_ros.models.sources import load_recordings
    from idyn_ros.models.training import fit
    from idyn_ros.models.zoo import ModelConfig

    with pytest.raises(ParameterError, match="max_minutes must be > 0"):
        fit(ModelConfig(kind="lstm", **TINY), iiwa, load_recordings([files["a"]], iiwa), max_minutes=0)


# 7. data of another robot ----------------------------------------------------------------------------------------
def test_data_of_another_robot_is_refused(iiwa, panda, files, tmp_path, capsys):
    from idyn_ros.dynamics import RobotModel

    panda_named = _save(tmp_path / "panda.npz", _recording(panda, 20, 4.0), list(panda.joint_names))
    iiwa_unnamed = _save(tmp_path / "kuka_unnamed.npz", _recording(iiwa, 21, 4.0))
    six_unnamed = _save(tmp_path / "six.npz", _recording(RobotModel.from_robot("ur5"), 22, 2.0))
    base = ["train", "--robot", "panda", "--model", "rbd", "--id-method", "nominal", "--out", str(tmp_path / "o")]

    # unnamed data in another robot's range, given as --val by position
    assert main([*base, "--data", panda_named, "--val", iiwa_unnamed]) == 2
    err = _err(capsys)
    assert iiwa_unnamed in err and "leave the limits of robot 'panda'" in err and "no joint names" in err
    # another joint count
    assert main([*base, "--data", panda_named, "--val", six_unnamed]) == 2
    err = _err(capsys)
    assert six_unnamed in err and "6 unnamed joint columns" in err and "another robot's recording; pick" in err
    assert "--joints" not in err  # six columns cannot name seven joints
    # named data of another robot
    assert main([*base, "--data", files["a"]]) == 2
    err = _err(capsys)
    assert files["a"] in err and "panda_joint1" in err
    # unnamed data that fits the robot: accepted, with a note that columns were taken by position
    iiwa_as_iiwa = ["train", "--robot", "iiwa14", "--model", "rbd", "--id-method", "nominal", "--data", iiwa_unnamed,
                    "--out", str(tmp_path / "p")]
    assert main(iiwa_as_iiwa) == 0
    assert "recorded without joint names; its 7 columns are taken as lbr_A1..lbr_A7" in capsys.readouterr().err
    # named data of this robot but outside its limits (offsets, degrees): a warning, not a refusal
    shifted = _recording(iiwa, 23, 2.0)
    shifted.q[:, 1] += 3.0  # ends 0.7 rad beyond the upper limit
    named_out = _save(tmp_path / "shifted.npz", shifted, list(iiwa.joint_names))
    assert main([*iiwa_as_iiwa[:-4], "--data", named_out, "--out", str(tmp_path / "q")]) == 0
    err = capsys.readouterr().err
    assert "idyn train: warning:" in err and "lbr_A2 spans" in err and "check joint offsets" in err
