"""Payload identification: standard deviations follow the rate achieved; bad --rate/--cutoff are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from idyn_ros.control import payload as cp
from idyn_ros.dynamics import RobotModel
from idyn_ros.models.sources import Recording, _ddq_from_dq
from idyn_ros.robots.spec import Payload

TRUTH = Payload(1.5, (0.03, 0.08, 0.05), (0.006, 0.001, -0.0008, 0.004, 0.0005, 0.005))
RATE_HZ = 200.0


def _recording(model: RobotModel) -> Recording:
    """6 s at RATE_HZ of a slow multi-sine with the payload on, 1 % torque noise."""
    t = np.arange(0.0, 6.0, 1.0 / RATE_HZ)
    phase = np.arange(model.n)[None, :]
    centre = 0.5 * (np.asarray(model.lower) + np.asarray(model.upper))
    q = centre + 0.4 * np.sin(2 * np.pi * 0.3 * t[:, None] + phase) + 0.2 * np.sin(2 * np.pi * 0.7 * t[:, None])
    dq = 0.4 * 2 * np.pi * 0.3 * np.cos(2 * np.pi * 0.3 * t[:, None] + phase) \
        + 0.2 * 2 * np.pi * 0.7 * np.cos(2 * np.pi * 0.7 * t[:, None])
    ddq = _ddq_from_dq(t, dq)
    tau = model.with_payload(TRUTH).rnea(q, dq, ddq)
    tau += np.random.default_rng(0).normal(size=tau.shape) * 0.01 * np.abs(tau).max(0)
    return Recording(t, q, dq, ddq, tau, "synthetic")


@pytest.fixture(scope="module")
def panda() -> RobotModel:
    return RobotModel.from_robot("panda")


def test_std_scales_with_the_achieved_rate_not_the_requested_one(panda: RobotModel) -> None:
    rec = _recording(panda)

    def bare(r: Recording) -> np.ndarray:
        return panda.rnea(r.q, r.dq, r.ddq)

    at_source = cp.identify_with_model(panda, [rec], bare, rate_hz=RATE_HZ, cutoff_hz=5.0)
    above_source = cp.identify_with_model(panda, [rec], bare, rate_hz=1e9, cutoff_hz=5.0)  # keeps RATE_HZ
    assert above_source.info["std_scale_correlated_noise"] == pytest.approx(np.sqrt(RATE_HZ / 10.0))
    assert above_source.mass_std == pytest.approx(at_source.mass_std)
    np.testing.assert_allclose(above_source.inertia_std, at_source.inertia_std)


def _write(tmp_path: Path, panda: RobotModel) -> str:
    from idyn_ros.data.dataset import Dataset

    rec = _recording(panda)
    ds = Dataset(t=rec.t, q=rec.q, dq=rec.dq, tau=rec.tau, joint_names=panda.joint_names, robot="panda")
    return str(ds.save(tmp_path / "with.npz"))


@pytest.mark.parametrize("option", ["--rate", "--cutoff"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_cli_refuses_rates_that_are_not_finite_and_positive(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            option: str, value: str) -> None:
    from idyn_ros.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["payload", "identify", "--robot", "panda", "--data", str(tmp_path / "with.npz"), "--reference",
              str(tmp_path / "without.npz"), f"{option}={value}"])
    assert exit_info.value.code == 2 and f"argument {option}: must be > 0" in capsys.readouterr().err


def test_cli_refuses_a_cutoff_at_or_above_half_the_recording_rate(tmp_path: Path, panda: RobotModel,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from idyn_ros.cli import main

    data = _write(tmp_path, panda)
    vendor = tmp_path / "load.json"
    code = main(["payload", "identify", "--robot", "panda", "--data", data, "--reference", data, "--cutoff", "100",
                 "--vendor-out", str(vendor)])
    err = capsys.readouterr().err
    assert code == 2 and "cutoff 100 Hz is not below half the recording's rate (200 Hz)" in err
    assert not vendor.exists()


@pytest.mark.parametrize("options", [["--model", "bare.onnx", "--friction", "coulomb"],
                                     ["--reference", "without.npz", "--no-offsets"]])
def test_cli_refuses_an_option_the_mode_ignores(tmp_path: Path, panda: RobotModel,
                                                capsys: pytest.CaptureFixture[str], options: list[str]) -> None:
    from idyn_ros.cli import main

    code = main(["payload", "identify", "--robot", "panda", "--data", _write(tmp_path, panda), *options])
    assert code == 2 and "applies only to" in capsys.readouterr().err


def test_cli_says_when_there_is_no_payload_to_identify(tmp_path: Path, panda: RobotModel,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The same recording as --data and --reference: a few grams with a CoM a metre away, and no word about it."""
    from idyn_ros.cli import main
    from idyn_ros.data.dataset import Dataset

    data = _write(tmp_path, panda)
    assert main(["payload", "identify", "--robot", "panda", "--data", data, "--reference", data]) == 0
    assert "no payload detected" in capsys.readouterr().out
    rec = _recording(panda)
    bare = Dataset(t=rec.t, q=rec.q, dq=rec.dq, tau=panda.rnea(rec.q, rec.dq, rec.ddq), joint_names=panda.joint_names,
                   robot="panda").save(tmp_path / "bare.npz")
    assert main(["payload", "identify", "--robot", "panda", "--data", data, "--reference", str(bare)]) == 0
    assert "no payload detected" not in capsys.readouterr().out


def test_no_payload_writes_the_vendor_forms_of_an_empty_flange(tmp_path: Path, panda: RobotModel,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """--json and --vendor-out gave a few grams at a CoM a metre away as a ready-to-paste set_target_payload, with
    the text mode's "no payload detected" nowhere in either. No payload is a result: its forms say mass 0, which
    clears a payload set before."""
    import json

    from idyn_ros.cli import main

    data, vendor = _write(tmp_path, panda), tmp_path / "out" / "load.json"
    args = ["payload", "identify", "--robot", "panda", "--data", data, "--reference", data, "--vendor-out", str(vendor)]
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["verdict"]["result"] == "no payload" and "no payload detected" in out
    written = json.loads(vendor.read_text())
    assert written["verdict"]["result"] == "no payload"
    assert written["ur_set_target_payload"]["urscript"] == "set_target_payload(0, [0, 0, 0], [0, 0, 0, 0, 0, 0])"
    assert written["franka_set_load"]["mass"] == 0.0 and written["kuka_load_data"]["M"] == 0.0
    vendor.unlink()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "verdict: no payload detected: the mass is within" in out and "an empty flange, mass 0" in out
    assert vendor.exists()


def test_an_arm_that_hardly_moved_determines_no_payload(tmp_path: Path, panda: RobotModel,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A UR5 standing still (condition 3e5) came out "no payload: the mass is within 15.457 kg of zero", which is
    no evidence of an empty flange: the data determine nothing."""
    import json

    from idyn_ros.cli import main
    from idyn_ros.data.dataset import Dataset

    t = np.arange(0.0, 6.0, 1.0 / RATE_HZ)
    centre = 0.5 * (np.asarray(panda.lower) + np.asarray(panda.upper))
    files = []
    for name, arm in (("with", panda.with_payload(TRUTH)), ("without", panda)):
        q = centre + 0.01 * np.sin(2 * np.pi * 0.3 * t[:, None] + np.arange(panda.n)[None, :])  # 0.6 deg
        dq = np.gradient(q, t, axis=0)
        tau = arm.rnea(q, dq, _ddq_from_dq(t, dq)) + np.random.default_rng(len(files)).normal(size=q.shape) * 0.05
        files.append(str(Dataset(t=t, q=q, dq=dq, tau=tau, joint_names=panda.joint_names, robot="panda")
                         .save(tmp_path / f"{name}.npz")))
    args = ["payload", "identify", "--robot", "panda", "--data", files[0], "--reference", files[1], "--json"]
    assert main(args) == 0
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict["result"] == "undetermined" and "did not determine" in verdict["reason"], verdict
    vendor = tmp_path / "load.json"
    assert main([*args, "--vendor-out", str(vendor)]) == 2
    assert f"{vendor} not written: undetermined: the data did not determine" in capsys.readouterr().err
    assert not vendor.exists()


def test_cli_refuses_a_vendor_out_it_cannot_write_before_identifying(tmp_path: Path, panda: RobotModel,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from idyn_ros.cli import main
    from idyn_ros.models import sources

    data = _write(tmp_path, panda)

    def never(*args, **kwargs):
        raise AssertionError("loaded the recordings before checking --vendor-out")

    monkeypatch.setattr(sources, "load_recordings", never)
    for out, said in (("/proc/load.json", "cannot write in /proc"), (data, "also an input")):
        code = main(["payload", "identify", "--robot", "panda", "--data", data, "--reference", data,
                     "--vendor-out", out])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.count("\n") == 0 and f"--vendor-out {out}" in err and said in err, err
