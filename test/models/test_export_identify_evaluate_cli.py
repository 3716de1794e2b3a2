"""`idyn export/identify/evaluate` given bad paths, wrong robots or mismatched data: one line, nothing lost."""

from __future__ import annotations

import json

import numpy as np
import pytest

from idyn_ros.cli import main


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.fixture(scope="module")
def run(iiwa, truth, tmp_path_factory):
    """A short recording and an rbd-friction run trained on it (model.pt + model.onnx)."""
    from idyn_ros.models.synthetic import fourier_recording

    d = tmp_path_factory.mktemp("review")
    rec = fourier_recording(iiwa.pin_model, truth, seed=10, duration=4.0)
    data = d / "data.npz"
    np.savez(data, t=rec.t, q=rec.q, dq=rec.dq, ddq=rec.ddq, tau=rec.tau, joint_names=np.array(iiwa.joint_names))
    assert main(["train", "--robot", "iiwa14", "--data", str(data), "--model", "rbd-friction", "--id-method", "ols",
                 "--allow-inconsistent", "--out", str(d / "run"), "--no-progress"]) == 0  # OLS: fast, consistent or not
    return d / "run", data


def test_export_never_overwrites_the_checkpoint_it_reads(run, tmp_path, capsys):
    import shutil

    out = shutil.copytree(run[0], tmp_path / "run")  # the shared run must survive the old behaviour
    before = (out / "model.pt").read_bytes()
    for target in ("model.pt", "checkpoint.pt"):
        rc = main(["export", "--checkpoint", str(out), "--robot", "iiwa14", "--out", str(out / target)])
        assert rc == 2 and ".onnx" in _one_line_error(capsys)
    assert (out / "model.pt").read_bytes() == before


def test_export_refuses_an_output_it_cannot_write_before_exporting(run, tmp_path, capsys):
    out, _ = run
    (tmp_path / "folder.onnx").mkdir()
    (tmp_path / "afile").write_text("")
    for target, said in ((tmp_path / "folder.onnx", "is a folder"), (tmp_path / "afile" / "x.onnx", "not a folder")):
        assert main(["export", "--checkpoint", str(out), "--robot", "iiwa14", "--out", str(target)]) == 2
        assert said in _one_line_error(capsys)


def test_export_refuses_a_robot_the_model_was_not_trained_for(run, tmp_path, capsys):
    out, _ = run
    rc = main(["export", "--checkpoint", str(out), "--robot", "ur5", "--out", str(tmp_path / "x.onnx")])
    assert rc == 2 and "7 joints" in _one_line_error(capsys)
    # same joint count, other robot: the artifact would carry panda's names and URDF around iiwa parameters
    rc = main(["export", "--checkpoint", str(out), "--robot", "panda", "--out", str(tmp_path / "x.onnx")])
    err = _one_line_error(capsys)
    assert rc == 2 and "lbr_A1" in err and "panda_joint1" in err
    assert not (tmp_path / "x.onnx").exists()
    assert main(["export", "--checkpoint", str(out), "--robot", "iiwa14", "--out", str(tmp_path / "x.onnx")]) == 0


def test_export_of_the_training_checkpoint_is_one_line(run, tmp_path, capsys):
    from idyn_ros.models import checkpoint

    out, _ = run
    training_state = {k: v for k, v in checkpoint.load(out / "model.pt", "model", "").items() if k != "state"}
    checkpoint.save(dict(training_state, epoch=3, opt={}), tmp_path / "checkpoint.pt")  # what --resume reads
    rc = main(["export", "--checkpoint", str(tmp_path / "checkpoint.pt"), "--robot", "iiwa14",
               "--out", str(tmp_path / "x.onnx")])
    assert rc == 2 and "lacks 'state'" in _one_line_error(capsys)
    rc = main(["export", "--checkpoint", str(out / "model.onnx"), "--robot", "iiwa14",
               "--out", str(tmp_path / "y.onnx")])
    assert rc == 2 and "is an exported artifact" in _one_line_error(capsys)


def test_identify_checks_outputs_and_tests_before_identifying(run, tmp_path, capsys, monkeypatch):
    from idyn_ros.models import identification

    _, data = run

    def never(*args, **kwargs):
        raise AssertionError("identified before checking the command line")

    monkeypatch.setattr(identification, "identify", never)
    copy = tmp_path / "copy.npz"
    copy.write_bytes(data.read_bytes())
    cases = [(["--params-out", str(copy)], "also an input"), (["--urdf-out", str(tmp_path)], "is a folder"),
             (["--test", str(tmp_path / "missing.npz")], "missing.npz")]
    for extra, said in cases:
        assert main(["identify", "--robot", "iiwa14", "--data", str(copy), "--method", "ols", *extra]) == 2
        assert said in _one_line_error(capsys)
    assert copy.read_bytes() == data.read_bytes()


def test_identify_refuses_motor_currents_read_as_torques(run, tmp_path, capsys):
    _, data = run
    current = dict(np.load(data))
    current["effort_kind"] = np.array("current")
    np.savez(tmp_path / "current.npz", **current)
    rc = main(["identify", "--robot", "iiwa14", "--data", str(tmp_path / "current.npz"), "--method", "ols"])
    err = _one_line_error(capsys)
    assert rc == 2 and "motor currents" in err and "--torque-constants K1,..,Kn -o X.npz" in err  # the other way
    assert err.startswith("idyn identify: error: ")
    rc = main(["dataset", "import", str(tmp_path / "current.npz"), "--torque-constants", "0", "-o",
               str(tmp_path / "x.npz")])
    assert rc == 2 and _one_line_error(capsys).startswith("idyn dataset import: error: ")  # was "idyn dataset:"


def test_evaluate_json_is_strict_json_when_an_nmse_is_undefined(run, tmp_path, capsys):
    out, data = run
    still = dict(np.load(data))
    still["tau"] = still["tau"].copy()
    still["tau"][:, 6] = 1.5  # a joint whose measured torque never changes: nMSE undefined
    np.savez(tmp_path / "still.npz", **still)
    assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", str(tmp_path / "still.npz"), "--json"]) == 0

    def refuse(name):
        raise AssertionError(f"{name} is not JSON")

    result = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert result["all"]["nmse"][6] is None and result["all"]["nmse"][0] > 0


def test_evaluate_refuses_currents_against_a_torque_model_saying_so(run, tmp_path, capsys):
    out, data = run
    current = dict(np.load(data))
    current["effort_kind"] = np.array("current")
    np.savez(tmp_path / "current.npz", **current)
    rc = main(["evaluate", "--model", str(out / "model.onnx"), "--data", str(tmp_path / "current.npz")])
    err = _one_line_error(capsys)
    assert rc == 2 and "trained on joint torques" in err and "--effort-kind torque" in err


def test_evaluate_refuses_a_single_sample_recording(run, tmp_path, capsys):
    out, data = run
    one = {k: (v[:1] if k != "joint_names" else v) for k, v in np.load(data).items()}
    np.savez(tmp_path / "one.npz", **one)
    assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", str(tmp_path / "one.npz")]) == 2
    err = _one_line_error(capsys)
    assert "1 sample" in err and "0 Hz" not in err


def test_evaluate_says_a_snippet_is_too_short_for_its_nmse(run, tmp_path, capsys):
    """Three samples scored 37,846,656 % nMSE on one joint with nothing said (a real UR5 snippet)."""
    out, data = run
    for k, words in ((3, True), (-1, False)):
        cut = {key: (v[:k] if key != "joint_names" else v) for key, v in np.load(data).items()}
        np.savez(tmp_path / "cut.npz", **cut)
        assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", str(tmp_path / "cut.npz")]) == 0
        assert ("score on a recording of the motion, not a snippet" in capsys.readouterr().err) == words


def test_evaluate_an_artifact_without_a_finite_rate(run, tmp_path, capsys):
    from idyn_ros.models.artifact import load_artifact, write_artifact

    out, data = run
    proto, meta = load_artifact(out / "model.onnx")
    write_artifact(proto, dict(meta, rate_hz=float("nan")), tmp_path / "norate.onnx")  # GP trained from paths
    assert main(["evaluate", "--model", str(tmp_path / "norate.onnx"), "--data", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["all"]["n_samples"] > 100


def test_evaluate_names_a_missing_metadata_key(run, tmp_path, capsys):
    from idyn_ros.models.artifact import load_artifact, write_artifact

    out, data = run
    proto, meta = load_artifact(out / "model.onnx")
    write_artifact(proto, {k: v for k, v in meta.items() if k != "urdf"}, tmp_path / "nourdf.onnx")
    assert main(["evaluate", "--model", str(tmp_path / "nourdf.onnx"), "--data", str(data)]) == 2
    assert "lacks ['urdf']" in _one_line_error(capsys)


def test_evaluate_plots_what_it_scores_one_figure_per_recording(run, tmp_path, capsys, monkeypatch):
    """--plot draws the torques the scores come from: each figure's measured and predicted series give back that
    recording's nMSE; several recordings get OUT_0.png, OUT_1.png in --data order, one gets OUT.png."""
    from idyn_ros.experiments import plots

    out, data = run
    heavier = dict(np.load(data))
    heavier["tau"] = heavier["tau"] * 1.1  # another recording, scored differently
    np.savez(tmp_path / "other.npz", **heavier)
    drawn = {}
    real = plots.torque_prediction

    def keep(t, tau, preds, names, path, title, **kwargs):
        drawn[path.name] = (tau, preds["predicted"], kwargs["joint_notes"])
        return real(t, tau, preds, names, path, title, **kwargs)

    monkeypatch.setattr(plots, "torque_prediction", keep)
    assert main(["evaluate", "--model", str(out), "--data", str(data), str(tmp_path / "other.npz"), "--json",
                 "--plot", str(tmp_path / "fit.png")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["plots"] == [str(tmp_path / "fit_0.png"), str(tmp_path / "fit_1.png")]
    for name, source in (("fit_0.png", data), ("fit_1.png", tmp_path / "other.npz")):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        tau, pred, notes = drawn[name]
        rows = ~np.isnan(tau).any(axis=1)  # the NaN row after each segment breaks the line
        nmse = ((pred[rows] - tau[rows]) ** 2).mean(0) / tau[rows].var(0)
        np.testing.assert_allclose(nmse, result["files"][str(source)]["nmse"], rtol=1e-9)
        assert notes[0] == f"nMSE {100 * nmse[0]:.1f} %"
    assert main(["evaluate", "--model", str(out), "--data", str(data), "--plot", str(tmp_path / "one.png")]) == 0
    assert (tmp_path / "one.png").is_file() and f"wrote {tmp_path / 'one.png'}" in capsys.readouterr().out
    assert main(["evaluate", "--model", str(out), "--data", str(data), str(data), "--plot",
                 str(tmp_path / "twice.png")]) == 0  # the same file twice: still one figure per --data entry
    assert (tmp_path / "twice_0.png").is_file() and (tmp_path / "twice_1.png").is_file()


def test_evaluate_refuses_a_plot_it_cannot_write_before_scoring(run, tmp_path, capsys):
    out, data = run
    (tmp_path / "folder.png").mkdir()
    for target, said in ((tmp_path / "folder.png", "is a folder"), (data, "is also an input")):
        assert main(["evaluate", "--model", str(out), "--data", str(data), "--plot", str(target)]) == 2
        assert said in _one_line_error(capsys)
