"""`idyn identify/train/evaluate/export` as scripts call them (in-process through idyn_ros.cli.main)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from idyn_ros.cli import main


@pytest.fixture(scope="module")
def files(iiwa, synth, tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    out = []
    for name, rec in zip(("train", "val", "test"), synth, strict=True):
        f = d / f"{name}.npz"
        np.savez(f, t=rec.t, q=rec.q, dq=rec.dq, ddq=rec.ddq, tau=rec.tau, joint_names=np.array(iiwa.joint_names))
        out.append(str(f))
    return out


def test_train_then_evaluate_json(files, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["train", "--robot", "iiwa14", "--data", files[0], "--val", files[1], "--model", "rbd-friction",
               "--out", str(out), "--seed", "1", "--epochs", "1", "--max-minutes", "1", "--no-progress"])
    assert rc == 0
    assert (out / "model.onnx").is_file() and (out / "metrics.json").is_file()
    capsys.readouterr()
    assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", files[2], "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)  # the whole stdout is exactly one JSON object
    m = result["all"]
    assert len(m["nmse"]) == len(m["rmse_nm"]) == len(m["minmax_nmse"]) == 7
    assert m["nmse_mean"] < 0.1  # SDP + friction on a known robot, other trajectory 2x faster
    # ... so the user is told the model holds friction at the training speed on most of it
    assert max(result["speed_coverage"]["ratio"]) > 1.5 and result["speed_coverage"]["share_beyond"] > 0.3
    assert "runs faster than the training data" in captured.err
    assert "speed_coverage" in json.loads((out / "metrics.json").read_text())  # train measured its validation too
    # the human-readable form names every joint
    assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", files[2]]) == 0
    assert "lbr_A7" in capsys.readouterr().out


def test_identify_writes_a_consistent_urdf(files, tmp_path, capsys):
    import pinocchio as pin

    from idyn_ros.dynamics.inertia import check_physical_consistency
    from idyn_ros.models.rbd import inertial_parameters

    urdf = tmp_path / "id.urdf"
    rc = main(["identify", "--robot", "iiwa14", "--data", files[0], "--method", "sdp", "--urdf-out", str(urdf),
               "--params-out", str(tmp_path / "p.json"), "--test", files[2]])
    assert rc == 0
    model = pin.buildModelFromUrdf(str(urdf))
    assert check_physical_consistency(inertial_parameters(model)) == []
    params = json.loads((tmp_path / "p.json").read_text())
    assert np.asarray(params["friction"]).shape == (7, 3)
    assert "test" in capsys.readouterr().out


def test_identify_with_the_geometric_prior_and_its_refusals(files, tmp_path, capsys):
    rc = main(["identify", "--robot", "iiwa14", "--data", files[0], "--prior", "geometric"])
    assert rc == 0 and "prior toward nominal: geometric 0.01" in capsys.readouterr().out
    rc = main(["identify", "--robot", "iiwa14", "--data", files[0], "--method", "wls", "--prior", "geometric"])
    assert rc == 2 and "needs the SDP" in capsys.readouterr().err
    rc = main(["train", "--robot", "iiwa14", "--data", files[0], "--model", "lip-gp", "--prior", "geometric",
               "--out", str(tmp_path / "gp")])
    assert rc == 2 and "identifies none" in capsys.readouterr().err


def test_wrong_robot_is_one_line_error(files, tmp_path, capsys):
    rc = main(["train", "--robot", "panda", "--data", files[0], "--model", "rbd", "--out", str(tmp_path / "x")])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "panda_joint1" in err


def test_help_answers_questions(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    for needle in ("--max-minutes", "examples:", "rad/s", "hybrid", "--mode"):
        assert needle in text


def test_evaluate_turns_motor_currents_into_torque_with_the_artifacts_gains(files, tmp_path, capsys):
    gains = np.linspace(2.0, 5.0, 7)
    currents = []
    for f in (files[0], files[2]):
        data = dict(np.load(f))
        data["tau"] = data["tau"] / gains  # what a UR driver would publish: motor current [A]
        data["effort_kind"] = np.array("current")
        currents.append(str(tmp_path / f"current_{len(currents)}.npz"))
        np.savez(currents[-1], **data)
    out = tmp_path / "run"
    assert main(["train", "--robot", "iiwa14", "--data", currents[0], "--model", "rbd-friction", "-o", str(out),
                 "--torque-constants", ",".join(f"{k:g}" for k in gains), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", currents[1], "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["all"]
    assert m["nmse_mean"] < 0.1  # torques against torques (k * i), not against the currents
    # a file that does not say its efforts are currents: scored as Nm, which used to pass silently; now said, and
    # --effort-kind current scores it right
    unstated = dict(np.load(currents[1]))
    del unstated["effort_kind"]
    np.savez(tmp_path / "unstated.npz", **unstated)
    assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", str(tmp_path / "unstated.npz")]) == 0
    assert "trained on motor currents" in capsys.readouterr().err
    assert main(["evaluate", "--model", str(out / "model.onnx"), "--data", str(tmp_path / "unstated.npz"), "--json",
                 "--effort-kind", "current"]) == 0
    assert json.loads(capsys.readouterr().out)["all"]["nmse_mean"] == pytest.approx(m["nmse_mean"])


@pytest.mark.parametrize(("option", "value", "said"), [("--seed", "-1", "must be in 0..4294967295"),
                                                       ("--lr", "-1", "must be > 0"), ("--lr", "nan", "must be > 0"),
                                                       ("--gp-refine", "-1", "must be >= 0")])
def test_train_refuses_bad_numbers_before_numpy_or_torch_does(tmp_path, capsys, option, value, said):
    with pytest.raises(SystemExit) as info:
        main(["train", "--robot", "iiwa14", "--data", "x.npz", "--out", str(tmp_path / "run"), f"{option}={value}"])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"argument {option}: {said}, got {value}")
