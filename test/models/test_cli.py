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


@pytest.fixture(scope="module")
def with_payload(iiwa, synth, tmp_path_factory):
    """The training recording again with 2 kg on the flange: `payload identify --data` it, --reference files[0]."""
    from idyn_ros.robots.spec import Payload

    rec = synth[0]
    extra = iiwa.with_payload(Payload(2.0, (0.0, 0.02, 0.08), (0.004, 0.0, 0.0, 0.004, 0.0, 0.002))).rnea(
        rec.q, rec.dq, rec.ddq) - iiwa.rnea(rec.q, rec.dq, rec.ddq)
    f = tmp_path_factory.mktemp("payload") / "with.npz"
    np.savez(f, t=rec.t, q=rec.q, dq=rec.dq, ddq=rec.ddq, tau=rec.tau + extra, joint_names=np.array(iiwa.joint_names))
    return str(f)


def test_train_then_evaluate_json(files, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["train", "--robot", "iiwa14", "--data", files[0], "--val", files[1], "--model", "rbd-friction",
               "--out", str(out), "--seed", "1", "--max-minutes", "1", "--no-progress"])
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
    # the run directory stands for its model.onnx (it read as "not an ONNX file")
    assert main(["evaluate", "--model", str(out), "--data", files[2], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["all"]["nmse"] == m["nmse"]


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


def test_a_full_disk_is_one_line_and_other_os_errors_keep_their_traceback(files, tmp_path, capsys, monkeypatch):
    """A full disk while writing the output printed a traceback (export alone turned it into a line)."""
    import errno
    import os

    def full(*_args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "new" / "p.json"
    args = ["identify", "--robot", "iiwa14", "--data", files[0], "--method", "ols", "--params-out", str(out)]
    monkeypatch.setattr(os, "fsync", full)
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert err == "idyn identify: error: [Errno 28] No space left on device" and not out.parent.exists()
    monkeypatch.setattr(os, "fsync", lambda *_: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(OSError, match="I/O error"):
        main(args)


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


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.fixture()
def no_loading(monkeypatch):
    """`idyn train` must refuse before it loads (or trains on) anything."""
    from idyn_ros.models import sources

    def never(*args, **kwargs):
        raise AssertionError("loaded data before checking the command line")

    monkeypatch.setattr(sources, "load_split", never)


def test_train_refuses_an_output_folder_it_cannot_write_before_loading(files, tmp_path, capsys, no_loading):
    """The mkdir inside the pipeline ended in a FileNotFoundError traceback, after the data were loaded."""
    (tmp_path / "afile").write_text("")
    for out, said in (("/proc/x", "cannot write in /proc"), (str(tmp_path / "afile"), "is a file; give a folder"),
                      (str(tmp_path / "afile" / "run"), "is a file, not a folder")):
        assert main(["train", "--robot", "iiwa14", "--data", files[0], "--model", "rbd", "-o", out]) == 2
        assert said in _one_line(capsys)


def test_train_refuses_options_its_model_kind_would_ignore(files, tmp_path, capsys, no_loading):
    """`--model rbd --mode 2s --gp-refine 5 --max-samples 10 --hidden 7` trained plain rbd and said nothing."""
    base = ["train", "--robot", "iiwa14", "--data", files[0], "-o", str(tmp_path / "run")]
    assert main([*base, "--model", "rbd", "--mode", "2s", "--gp-refine", "5", "--max-samples", "10",
                 "--hidden", "7"]) == 2
    err = _one_line(capsys)
    assert "--model rbd does not use --mode, --hidden, --max-samples, --gp-refine" in err
    assert "--max-samples, --gp-refine are for a Gaussian process" in err
    cases = [(["--model", "rbd-friction", "--epochs", "3"], "--epochs"), (["--model", "lip-gp", "--window", "50"],
             "--window"), (["--model", "hybrid-j", "--hidden", "8"], "--hidden"), (["--model", "auto", "--mode", "2s"],
             "auto fits both"), (["--model", "lstm", "--friction", "viscous"], "--friction"),
             (["--model", "mlp-hybrid", "--mode", "e2e"], "--mode")]
    for extra, said in cases:
        assert main([*base, *extra]) == 2, extra
        err = _one_line(capsys)
        assert said in err and "does not use" in err, err
    # options the kind uses, and a kind's own defaults, get through to the data loading
    for extra in (["--model", "hybrid", "--mode", "2s", "--hidden", "8", "--epochs", "2"], ["--model", "rbd"],
                  ["--model", "lip-gp", "--max-samples", "50", "--gp-refine", "1"], ["--model", "mlp-hybrid",
                  "--mode", "2s"], ["--id-method", "ols", "--friction", "viscous", "--window", "50"]):
        with pytest.raises(AssertionError, match="loaded data"):
            main([*base, *extra])


def test_train_says_what_max_minutes_bounds_and_what_it_does_not(files, tmp_path, capsys, no_loading):
    """--max-minutes 5 ran far longer: loading, identification, auto's refit and the export are outside it, and
    neither the help nor the run said so."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert ("Not counted: loading the data, one kind's physics identification, auto's refit, scoring and the "
            "export") in said
    base = ["train", "--robot", "iiwa14", "--data", files[0], "-o", str(tmp_path / "run")]
    not_counted = "; not counted: loading the data, "
    for extra, line in (
            (["--model", "hybrid", "--max-minutes", "5"], "time budget 5 min (--max-minutes) for the epochs, checked "
             f"after each{not_counted}the physics identification, scoring and the export"),
            (["--max-minutes", "2"], f"for the candidate fits (the physics ones always run, the learned ones share "
             f"what is left){not_counted}the refit on all the training data, scoring and the export"),
            (["--model", "lip-gp", "--gp-refine", "5"], "time budget 10 min (--max-minutes) for the whole fit (every "
             "noise start's optimisation, posterior and held-out selection, then --gp-refine; a timed probe plans the "
             f"L-BFGS iterations){not_counted}scoring and the export"),
            (["--model", "lip-gp", "--gp-iterations", "8", "--max-minutes", "1"], "idyn train: note: --max-minutes has "
             "no effect with --gp-iterations 8, which fixes the fit's length"),
            (["--model", "hybrid"], "")):  # no budget: no line
        with pytest.raises(AssertionError, match="loaded data"):
            main([*base, *extra])
        out = capsys.readouterr().out
        assert (line in out) if line else "budget" not in out, (extra, out)


def test_max_minutes_for_a_kind_without_epochs_is_a_note_not_a_budget(files, tmp_path, capsys, no_loading):
    """rbd and rbd-friction accept --max-minutes (scripts pass it to every kind), but it bounds nothing for them: said
    so as a note when it is given. The line said "rbd is identified in one solve", also of nominal (nothing fitted)
    and of the iterative diffbary/logchol."""
    base = ["train", "--robot", "iiwa14", "--data", files[0], "-o", str(tmp_path / "run")]
    note = "idyn train: note: --max-minutes has no effect with --model"
    for extra, said in (
            (["--model", "rbd-friction", "--max-minutes", "5"], f"{note} rbd-friction: it has no epochs, and no "
             "kind's physics identification (here --id-method sdp) is bounded"),
            (["--model", "rbd", "--id-method", "diffbary", "--max-minutes", "5"], f"{note} rbd: it has no epochs, "
             "and no kind's physics identification (here --id-method diffbary) is bounded"),
            (["--model", "rbd", "--id-method", "nominal", "--max-minutes", "5"], f"{note} rbd: nothing is fitted "
             "(--id-method nominal: the URDF's parameters)"),
            (["--model", "rbd-friction"], "")):  # not given: nothing to say
        with pytest.raises(AssertionError, match="loaded data"):
            main([*base, *extra])
        out = capsys.readouterr().out
        assert "budget" not in out and ((said in out) if said else "--max-minutes" not in out), (extra, out)
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "No effect on rbd and rbd-friction, which have no epochs" in " ".join(capsys.readouterr().out.split())


def test_delan_lstm_says_which_stage_its_share_of_the_budget_stopped(files, tmp_path, capsys, monkeypatch):
    """--max-minutes 0.001 printed "time budget of 0.0005 min reached at epoch 0": half the budget given, for the
    residual stage alone, with the DeLaN stage's stop not said at all."""
    from idyn_ros.models import pipeline

    monkeypatch.setattr(pipeline, "export_problem", lambda *args, **kwargs: None)  # one epoch fits badly: export it
    out = tmp_path / "run"
    assert main(["train", "--robot", "iiwa14", "--data", files[0], "--val", files[1], "--model", "delan-lstm",
                 "--max-minutes", "0.001", "--hidden", "8", "--window", "50", "-o", str(out), "--no-progress"]) == 0
    share = "stopped at its share of the time budget, 0.0005 of 0.001 min, at epoch 0"
    stopped = f"stage 1 of 2 (DeLaN): {share}; then stage 2 of 2 (residual LSTM): {share}"
    printed = capsys.readouterr().out
    assert f"delan-lstm: {stopped}; val nMSE" in printed and "time budget of 0.0005" not in printed, printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stopped"] == stopped and metrics["identification"]["stage1_delan"]["stopped"] == share


def test_a_negative_number_list_is_an_options_value():
    """`--torque-constants -10,2,...` stopped in argparse with "expected one argument" ('=' was needed)."""
    from idyn_ros.cli import attach_negative_lists

    assert attach_negative_lists(["--torque-constants", "-10,2", "--a", "-1", "-o", "-1,2", "--b=-1,2", "--", "--c",
                                  "-1,2"]) == ["--torque-constants=-10,2", "--a", "-1", "-o", "-1,2", "--b=-1,2",
                                               "--", "--c", "-1,2"]


def test_train_takes_torque_constants_that_start_with_a_minus(files, tmp_path, no_loading, capsys):
    """They reach the command's gain check (> 0), not argparse's "expected one argument", and it refuses them
    before loading any data (``no_loading`` fails a load)."""
    for value in ("-10,1,1,1,1,1,1", "-.5,1,1,1,1,1,1"):
        assert main(["train", "--robot", "iiwa14", "--data", files[0], "-o", str(tmp_path / "run"),
                     "--torque-constants", value]) == 2
        assert "every gain must be a finite number > 0" in capsys.readouterr().err


def test_unnamed_data_outside_the_limits_gets_advice_that_is_not_a_circle(iiwa, tmp_path, capsys):
    """The refusal advised `idyn dataset import FILE --robot ROBOT`, which wrote the very file refused."""
    from idyn_ros.dynamics import RobotModel

    panda = RobotModel.from_robot("panda")
    q = 0.5 * (np.clip(panda.lower, -3, 3) + np.clip(panda.upper, -3, 3)) + np.zeros((300, 7))
    q[:, 5] -= 1.9
    t = np.arange(300) / 200.0
    src = tmp_path / "kuka.npz"
    np.savez(src, times=t, positions=q + 0.01 * np.sin(t)[:, None], torques=np.ones_like(q))
    imported = ["dataset", "import", str(src), "--robot", "panda", "-o", str(tmp_path / "kp.npz")]
    assert main(imported) == 2  # refused where the columns are assigned, not after a successful import
    assert "leave the limits of robot 'panda'" in _one_line(capsys)
    assert main(["train", "--robot", "panda", "--data", str(src), "--model", "rbd", "-o", str(tmp_path / "r")]) == 2
    err = _one_line(capsys)
    assert "leave the limits" in err and "pick the robot it was recorded on" in err and "--joints" in err


def test_data_errors_suggest_options_that_exist(iiwa):
    """They suggested `idyn dataset --joint-map old=new` (no `import`) and `idyn dataset --drop-nonfinite` (none)."""
    from idyn_ros.data.dataset import Dataset
    from idyn_ros.errors import DatasetError
    from idyn_ros.models.sources import to_recording

    n = 50
    t = np.arange(n) / 100.0
    z = np.zeros((n, 7))
    other = Dataset(t=t, q=z, dq=z, tau=z, joint_names=tuple(f"j{i}" for i in range(7)))
    with pytest.raises(DatasetError) as info:
        to_recording(other, iiwa, "x.npz")
    assert "`idyn dataset import SRC --joint-map old=new -o OUT.npz`" in str(info.value)

    from types import SimpleNamespace

    raw = SimpleNamespace(t=t, q=z.copy(), dq=z, tau=z, ddq=None, joint_names=list(iiwa.joint_names))  # no checks
    raw.q[3, 2] = np.nan
    with pytest.raises(DatasetError) as info:
        to_recording(raw, iiwa, "x.npz")
    assert "drop-nonfinite" not in str(info.value) and "no idyn option drops them" in str(info.value)



def _interrupt(fd: int) -> None:
    """os.fsync stand-in: Ctrl-C while a file is written, after the write made its folders (data.atomic)."""
    raise KeyboardInterrupt


@pytest.mark.parametrize("command", ["identify", "export", "payload"])
def test_identify_export_and_payload_leave_no_empty_folder_when_they_fail(files, with_payload, tmp_path, capsys,
                                                                         monkeypatch, command):
    """Interrupted while writing their one output file, they left the folders they had made for it, empty; `idyn
    train` removes its own (commands.output_folder). A file the user had stays as it was."""
    import os

    run = tmp_path / "run"
    if command == "export":
        assert main(["train", "--robot", "iiwa14", "--data", files[0], "--model", "rbd-friction", "--id-method",
                     "ols", "--allow-inconsistent", "-o", str(run), "--no-progress"]) == 0
    option, args = {"identify": ("--params-out", ["identify", "--robot", "iiwa14", "--data", files[0], "--method",
                                                  "ols"]),
                    "export": ("--out", ["export", "--checkpoint", str(run), "--robot", "iiwa14"]),
                    "payload": ("--vendor-out", ["payload", "identify", "--robot", "iiwa14", "--data", with_payload,
                                                 "--reference", files[0]])}[command]
    name = "m.onnx" if command == "export" else "out.json"
    new, kept = tmp_path / "new", tmp_path / "kept"  # kept: a folder and a file of the user's
    kept.mkdir()
    (kept / name).write_text("the user's")
    # refused: a recording or model that is not there
    missing = [str(tmp_path / "missing") if a in (files[0], str(run)) else a for a in args]
    assert main([*missing, option, str(new / "a" / name)]) == 2
    assert not new.exists()
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", _interrupt)
        assert main([*args, option, str(new / "a" / name)]) == 130
        assert not new.exists()  # the folders it made for the file are gone again
        assert main([*args, option, str(kept / name)]) == 130
    assert (kept / name).read_text() == "the user's" and os.listdir(kept) == [name]
    assert main([*args, option, str(new / "a" / name)]) == 0
    assert (new / "a" / name).stat().st_size > 0


def test_identify_that_refuses_its_urdf_writes_no_parameters_either(files, tmp_path, capsys):
    """An OLS fit with inconsistent bodies refused --urdf-out, exit 2, after --params-out had been overwritten."""
    params = tmp_path / "p.json"
    params.write_text("the user's")
    rc = main(["identify", "--robot", "iiwa14", "--data", files[0], "--method", "ols", "--params-out", str(params),
               "--urdf-out", str(tmp_path / "new" / "x.urdf")])
    assert rc == 2 and params.read_text() == "the user's" and not (tmp_path / "new").exists()
    err = _one_line(capsys)
    assert "physically inconsistent" in err and "nothing written (drop --urdf-out to write --params-out alone)" in err
    profile = tmp_path / "arm.yaml"
    rc = main(["identify", "--robot", "iiwa14", "--data", files[0], "--method", "ols", "--params-out", str(params),
               "--profile-out", str(profile)])
    assert rc == 2 and params.read_text() == "the user's" and not profile.exists()
    err = _one_line(capsys)
    assert "a simulator cannot move them" in err and "(drop --profile-out to write --params-out alone)" in err


def test_identify_writes_both_files_or_neither(files, tmp_path, capsys, monkeypatch):
    """--params-out was replaced before the URDF was written, so a full disk at the URDF left the user a new
    parameter file next to an old URDF."""
    import errno
    import os

    params, urdf = tmp_path / "p.json", tmp_path / "x.urdf"
    params.write_text("the user's parameters")
    urdf.write_text("the user's urdf")
    real_fsync, calls = os.fsync, []

    def full_at_the_second(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_at_the_second)
    assert main(["identify", "--robot", "iiwa14", "--data", files[0], "--method", "sdp", "--params-out", str(params),
                 "--urdf-out", str(urdf)]) == 1
    assert "No space left on device" in _one_line(capsys)
    assert params.read_text() == "the user's parameters" and urdf.read_text() == "the user's urdf"
    assert sorted(os.listdir(tmp_path)) == ["p.json", "x.urdf"]  # no temp file left either


@pytest.mark.parametrize("command", [["train", "--robot", "ur5", "--data", "x.npz", "-o", "x", "--torque-constants",
                                      "-10,2"], ["dataset", "import", "x.npz", "-o", "y.npz"]])
def test_an_unknown_option_is_refused_with_the_usage_of_the_command_it_was_given_to(capsys, command):
    """`idyn train ... --bogus` printed the top-level usage ("usage: idyn [-h] COMMAND ...")."""
    name = " ".join(command[:2] if command[0] == "dataset" else command[:1])
    with pytest.raises(SystemExit) as info:
        main([*command, "--bogus"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith(f"usage: idyn {name} "), err
    assert err.strip().splitlines()[-1] == f"idyn {name}: error: unrecognized arguments: --bogus"


@pytest.mark.parametrize(("command", "said"), [("identify", "SDP solver (default: CLARABEL)"),
                                               ("train", "sigmoid, offset; default: {})")])
def test_help_states_the_default_of_the_solver_and_of_the_friction(capsys, command, said):
    """`identify --solver` and `train --friction` did not say what runs when they are not given."""
    from idyn_ros.commands.train import KIND_OPTIONS

    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert said.format(KIND_OPTIONS["--friction"][1]) in " ".join(capsys.readouterr().out.split())  # what train uses


def test_payload_refusing_a_model_names_its_option_not_the_nodes_parameters(files, tmp_path, capsys):
    """The refusal ended in the node's advice: "Set model_path to an artifact exported for iiwa14 or set fallback
    to rbd|gravity", parameters `idyn payload` does not have."""
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not onnx")
    assert main(["payload", "identify", "--robot", "iiwa14", "--data", files[0], "--model", str(junk)]) == 2
    err = _one_line(capsys)
    assert err.endswith("; give --model an artifact exported for iiwa14") and "model_path" not in err, err


@pytest.mark.realdata
def test_the_ur5_help_example_validates_on_another_trajectory(shared_data, tmp_path, capsys):
    """Its --val (Movement_No7_Acc_slow_Verify_Model_short replays Movement_No6's start) drew the warning that
    validation repeats 100 % of the training states."""
    from idyn_ros.commands.train import EPILOG

    example = EPILOG[EPILOG.index("idyn train --robot ur5"):].split("#")[0].replace("\\\n", " ").split()
    args = [str(shared_data / w) if w.startswith("ur5_ft/") else w for w in example[2:]]
    args[args.index("--out") + 1] = str(tmp_path / "ur5")
    assert main(["train", *args, "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "validation states are already in the training data" not in err, err


def test_the_commands_default_friction_is_the_models():
    """identify, train and payload name it as a string (no numpy import for --help); it must stay the model's."""
    from idyn_ros.commands import identify, payload, train
    from idyn_ros.dynamics.friction import DEFAULT_KINDS

    assert identify.DEFAULT_FRICTION == payload.DEFAULT_FRICTION == ",".join(DEFAULT_KINDS)
    assert train.KIND_OPTIONS["--friction"][1] == identify.DEFAULT_FRICTION


def test_train_plot_draws_the_learning_curves_metrics_json_keeps(files, tmp_path, capsys, monkeypatch):
    """--plot: the figure of a run comes from its metrics.json, which now keeps each fit's losses per epoch."""
    from idyn_ros.experiments import plots

    drawn = []
    real = plots.training_summary
    monkeypatch.setattr(plots, "training_summary", lambda metrics, *a: drawn.append(metrics) or real(metrics, *a))
    out = tmp_path / "run"
    assert main(["train", "--robot", "iiwa14", "--data", files[0], "--val", files[1], "--test", files[2],
                 "--model", "hybrid-j", "--mode", "2s", "--epochs", "3", "--id-method", "ols", "--allow-inconsistent",
                 "--out", str(out), "--no-progress", "--plot"]) == 0
    assert f"wrote {out / 'training.png'}" in capsys.readouterr().out
    assert (out / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((out / "metrics.json").read_text())
    curve = metrics["history"]
    assert curve["epoch"] == [0, 1, 2] and len(curve["train"]) == len(curve["val"]) == metrics["epochs_run"] == 3
    assert all(v > 0 for v in curve["train"] + curve["val"])
    assert drawn[0]["history"] == curve and drawn[0]["test"]["nmse"] == metrics["test"]["nmse"]
    # physics only: one evaluation, no training loss (null in strict JSON); the figure says nothing was trained
    assert main(["train", "--robot", "iiwa14", "--data", files[0], "--model", "rbd-friction", "--out",
                 str(tmp_path / "rbdf"), "--no-progress", "--plot", str(tmp_path / "figs" / "rbdf.png")]) == 0
    assert json.loads((tmp_path / "rbdf" / "metrics.json").read_text())["history"]["train"] == [None]
    assert (tmp_path / "figs" / "rbdf.png").is_file()  # its folder created


def test_train_refuses_a_plot_it_would_not_draw_or_could_not_write(files, tmp_path, capsys):
    for extra, said in ((["--model", "lip-gp", "--plot"], "does not use --plot"),
                        (["--plot", files[0]], "is also an input"),
                        (["--plot", str(tmp_path)], "is a folder")):
        assert main(["train", "--robot", "iiwa14", "--data", files[0], "--out", str(tmp_path / "run"),
                     "--no-progress", *extra]) == 2
        assert said in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before any work
