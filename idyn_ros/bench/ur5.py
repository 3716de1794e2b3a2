"""UR arms on real data: current -> torque gains and the torque model on the UR5 (CB2) recordings, the external
wrench against the F/T sensor next to the UR controller's own estimate, false alarms, the trust stage on the
plant, and the UR10 bag. Writes bench/results/ur5_wrench.json (``idyn bench --only ur5``).

The split (decision, from shared/data/ur5_ft/README.md, never tuned on the held-back runs): train on the
contact-free runs except No1 and No7_short; validate on No7_short (early stopping only; rbd-friction does not use
it); score the wrench on No10_Fx (the F/T run); false alarms on the contact-free runs not trained on: No7_short and
No1 (63 Hz irregular: replayed at 125 Hz, resampled linearly). No5_w and No7_with (pushes, no ground truth) are
reported against the UR's estimate only. The same scores for the model a user gets from `idyn train` on the training
runs alone (auto, no --val) are in ``user_path``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

TRAIN = ("Movement_No2", "Movement_No3_Acc", "Movement_No4_Acc", "Movement_No5_Acc_slow_no_disturbance",
         "Movement_No6_Acc_slow_Verify_Model", "Movement_No8_Singularity_Free_1", "TEST")
VAL = "Movement_No7_Acc_slow_Verify_Model_short"
SCORE = "Movement_No10_Standstill_ForceSensor_Fx"
FT_TOPIC = "/ft_sensor/wrench"
FALSE_ALARM = (VAL, "Movement_No1")
PUSHED_NO_TRUTH = ("Movement_No5_Acc_slow_w_disturbance", "Movement_No7_Acc_slow_Verify_Model_short_with_disturbance")
# each pushed run's contact-free twin (the same program without pushes): `idyn wrench --twin`'s reference
TWINS = {PUSHED_NO_TRUTH[0]: "Movement_No5_Acc_slow_no_disturbance", PUSHED_NO_TRUTH[1]: VAL}
UR10_BAG = Path("ur10_bags") / "exciting" / "ur10_exciting_trajectory.db3"
HYBRID_MINUTES = 12.0


def _data() -> Path:
    from idyn_ros.paths import shared_data_dir

    root = shared_data_dir()
    if root is None or not (root / "ur5_ft").is_dir():
        raise FileNotFoundError("../shared/data/ur5_ft is not here: this benchmark needs the real UR5 recordings")
    return root


def train_model(kind: str, out: Path, root: Path, max_minutes: float | None = None) -> dict[str, Any]:
    """Train ``kind`` on the split as `idyn train` does; returns the gains and the validation metrics."""
    from idyn_ros.dynamics.friction import DEFAULT_KINDS
    from idyn_ros.models.current_gains import currents_to_torque
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.sources import load_robot, load_split
    from idyn_ros.models.zoo import ModelConfig

    robot = load_robot("ur5")
    d = root / "ur5_ft"
    train, val, _, rate = load_split([d / r for r in TRAIN], [d / VAL], [], robot)  # idyn train's: one model rate
    effort, found, (train, val, _) = currents_to_torque(robot, train, val, (), DEFAULT_KINDS)
    cfg = ModelConfig(kind=kind, mode="2s", friction_kinds=DEFAULT_KINDS, rate_hz=rate)
    t0 = time.perf_counter()
    _, metrics = train_run(cfg, robot, train, val, (), out, max_minutes, progress=False, effort=effort)
    v = metrics["val"]
    return {
        "kind": kind, "mode": cfg.mode if kind.startswith("hybrid") else None,
        "train_seconds": time.perf_counter() - t0,
        "stopped": metrics["stopped"], "artifact": str(out / "model.onnx"),
        "gains_nm_per_a": dict(zip(robot.joint_names, found.values.tolist(), strict=True)),
        "gains_identified": dict(zip(robot.joint_names, found.identified.tolist(), strict=True)),
        "gain_prior": found.prior_source, "gain_scale_from_nominal_gravity": found.scale,
        "rigid_body_share": dict(zip(robot.joint_names, found.rigid_body_share.tolist(), strict=True)),
        "val": {"recording": VAL,
                "nmse_per_joint": v["nmse"], "nmse_mean": v["nmse_mean"],
                "nmse_note": "the same in current units as recorded and in Nm through the gains (a per-joint "
                             "constant gain cancels in nMSE)",
                "rmse_current_a": v["rmse_current_a"], "rmse_nm": v["rmse_nm"]},
        "train_nmse_per_joint": metrics["train"]["nmse"],
        "validation_overlap": metrics.get("validation_overlap"),  # No7_short replays No6's start (in training)
    }


def _wrench(model: str, bag: Path, contact_model: str, ft_topic: str | None = None,
            rate: float | None = None, plot: Path | None = None, twin: Path | None = None) -> dict[str, Any]:
    """`idyn wrench` on one recording: the summary it prints with --json (and its --plot; with --twin)."""
    from idyn_ros.control.wrench_trust import TrustSettings
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments import wrench_replay as wr

    robot = RobotModel.from_robot("ur5")
    rep = wr.replay(model, bag, robot, rate, settings=TrustSettings(contact_model=contact_model))
    summary, arrays = wr.score(rep, bag, ft_topic, robot=robot)
    if twin is not None:
        summary["twin"], _ = wr.score_twin(rep, twin, robot, arrays.get("vendor"))
    summary["notes"] = rep.notes
    if plot is not None:
        wr.plot(rep, summary, arrays, plot, title=f"{bag.name}: force at the flange (tool0 axes), environment on robot")
    return summary


def _axis(s: dict[str, Any]) -> dict[str, Any]:
    return {"rmse_n": s["rmse_n"], "rmse_mean_n": s["rmse_mean_n"], "corr": s["corr"]}


def wrench_scores(model: str, root: Path) -> dict[str, Any]:
    """No10 against the sensor (wrench and point contact models) and the false-alarm runs, ours and the UR's."""
    d = root / "ur5_ft"
    out: dict[str, Any] = {}
    for cm in ("wrench", "point"):
        s = _wrench(model, d / SCORE, cm, FT_TOPIC)
        out[f"no10_{cm}"] = {
            "recording": SCORE, "contact_model": cm, "samples_scored": s["samples_scored"],
            "ours": _axis(s["ours"]["vs_sensor"]), "ours_in_contact": _axis(s["ours"]["vs_sensor_in_contact"]),
            "direct_residual": _axis(s["direct_residual"]["vs_sensor"]),
            "ur_controller": _axis(s["vendor"]["vs_sensor"]),
            "ur_controller_in_contact": _axis(s["vendor"]["vs_sensor_in_contact"]),
            "rmse_ratio_ours_to_ur": s["rmse_ratio_ours_to_vendor"], "lag_s": {"ours": s["ours"]["lag_s"],
                                                                              "ur": s["vendor"]["lag_s"]},
            "contact_fraction": s["ours"]["contact_fraction"], "rezeros": s["ours"]["rezeros"],
            "hidden_by_friction": s["hidden_by_friction"], "conventions": s["conventions"]}
    for name in FALSE_ALARM:
        s = _wrench(model, d / name, "wrench")  # No1 (63 Hz irregular): resampled to the model's rate by default
        out[f"false_alarm_{name}"] = {
            "recording": name, "trained_on": False, "used_for_validation": name == VAL,
            "rate_hz": s["rate_hz"], "ours_force_rms_n": s["ours"]["force_rms_n"],
            "ur_controller_force_rms_n": s["vendor"]["force_rms_n"],
            "ours_contact_fraction": s["ours"]["contact_fraction"], "min_rank": s["ours"]["min_rank"],
            "bias_window_max_speed_rad_s": s["bias_window_max_speed_rad_s"]}
    for name in PUSHED_NO_TRUTH:
        s = _wrench(model, d / name, "wrench", twin=d / TWINS[name])
        tw = s["twin"]
        out[f"pushed_{name}"] = {"recording": name, "ground_truth": f"contact-free twin {TWINS[name]}",
                                 "ours_force_rms_n": s["ours"]["force_rms_n"],
                                 "ur_controller_force_rms_n": s["vendor"]["force_rms_n"],
                                 "ours_contact_fraction": s["ours"]["contact_fraction"],
                                 "twin": {k: tw[k] for k in ("shift_s", "q_rms_rad", "overlap", "scored", "per_joint",
                                                              "ours_rmse_mean_nm", "vendor_rmse_mean_nm",
                                                              "zero_rmse_mean_nm")}}
    return out


def user_path(root: Path, out: Path) -> dict[str, Any]:
    """What a UR user gets: `idyn train --robot ur5 --data <the training runs>` (auto without --val: a held-out
    tail, then the winner refitted on all of it), run through the CLI, and its wrench scores."""
    import contextlib
    import io
    import json

    from idyn_ros.cli import main

    d = root / "ur5_ft"
    argv = ["train", "--robot", "ur5", "--data", *(str(d / r) for r in TRAIN), "--out", str(out), "--no-progress"]
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the bench prints its own tables
        if main(argv) != 0:
            raise RuntimeError(f"idyn {' '.join(argv)} failed")
    metrics = json.loads((out / "metrics.json").read_text())
    return {"command": "idyn train --robot ur5 --data <ur5_ft/{" + ",".join(TRAIN) + "}> --out DIR",
            "selected": metrics["selected"], "validation_data": metrics["validation_data"],
            "train_seconds": time.perf_counter() - t0, "wrench": wrench_scores(str(out / "model.onnx"), root)}


def ur10_urdf() -> Path:
    """example-robot-data's UR10 URDF (the cmeel wheel in the venv)."""
    import sys

    found = sorted(Path(sys.prefix).glob("lib/python*/site-packages/cmeel.prefix/share/example-robot-data/robots/"
                                         "ur_description/urdf/ur10_robot.urdf"))
    if not found:
        raise FileNotFoundError("example-robot-data's ur10_robot.urdf is not installed (the example-robot-data wheel)")
    return found[0]


def ur10(root: Path, out: Path) -> dict[str, Any]:
    """The UR10 exciting-trajectory bag (no metadata: efforts declared as currents) trains (rbd-friction)."""
    from idyn_ros.dynamics.friction import DEFAULT_KINDS
    from idyn_ros.models.current_gains import currents_to_torque
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.sources import load_recordings, load_robot
    from idyn_ros.models.zoo import ModelConfig

    robot = load_robot(ur10_urdf())
    train = load_recordings([root / UR10_BAG], robot, effort_kind="current")
    effort, found, (train, _, _) = currents_to_torque(robot, train, (), (), DEFAULT_KINDS)
    _, metrics = train_run(ModelConfig(kind="rbd-friction", friction_kinds=DEFAULT_KINDS), robot, train, (), (),
                           out, progress=False, effort=effort)
    return {"bag": str(UR10_BAG), "urdf": "example-robot-data ur_description/urdf/ur10_robot.urdf",
            "gains_nm_per_a": dict(zip(robot.joint_names, found.values.tolist(), strict=True)),
            "gain_prior": found.prior_source, "train_nmse_per_joint": metrics["train"]["nmse"],
            "note": "no validation recording of this robot's joint states exists in shared/data; train nMSE only"}


def plant_trust_with_model(out: Path, quick: bool) -> dict[str, Any]:
    """The trust stage on the plant with an identified RBD + friction model of it (sigma from its validation
    residuals, the stiction band from its friction), as the node runs it; the data is the tracking benchmark's."""
    from idyn_ros.bench.experiments import _work_dir
    from idyn_ros.experiments import models_cache, wrench_trust_eval
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.sources import load_recordings, load_robot
    from idyn_ros.models.zoo import ModelConfig

    work = models_cache.bench_work_dir(_work_dir(), quick)
    train, val = models_cache.split_paths(models_cache.record_dataset("ur5", work, models_cache.bench_data_spec(quick)))
    robot = load_robot("ur5")
    train_run(ModelConfig(kind="rbd-friction"), robot, load_recordings(train, robot), load_recordings(val, robot),
              (), out, progress=False)
    return {"model": "rbd-friction identified on the plant's excitation data (train/val by trajectory)",
            "pushes": wrench_trust_eval.evaluate("ur5", model_path=out / "model.onnx")}


def run_benchmarks(quick: bool = False) -> dict[str, Any]:
    from idyn_ros.experiments import wrench_trust_eval

    root = _data()
    payload: dict[str, Any] = {
        "split": {"train": list(TRAIN), "val": VAL, "score": SCORE, "false_alarm": list(FALSE_ALARM),
                  "pushed_without_ground_truth": list(PUSHED_NO_TRUTH)},
        "decisions": {
            "rate": "the model's (idyn wrench's default): each recording at its own 125 Hz; No1 (63 Hz irregular) "
                    "resampled onto 125 Hz",
            "effort": "motor current [A] (the bags' metadata say so), tau = k i with the gains identified in training",
            "scoring": "forces in tool0 axes, environment on robot; sensor as recorded (+1), UR estimate negated "
                       "(-1); each signal minus its own mean over one initial rest window; forces only",
        },
        "commands": [
            "idyn train --robot ur5 --data <ur5_ft/{" + ",".join(TRAIN) + "}> --val ur5_ft/" + VAL
            + " --model rbd-friction --out runs/ur5_rbdf",
            "idyn wrench --model runs/ur5_rbdf/model.onnx --data ur5_ft/" + SCORE + " -o no10.npz --ft-topic "
            + FT_TOPIC + " --plot no10.png [--contact-model point]",
            "idyn wrench --model runs/ur5_rbdf/model.onnx --data ur5_ft/Movement_No1 -o no1.npz",
            "idyn wrench --model runs/ur5_rbdf/model.onnx --data ur5_ft/" + PUSHED_NO_TRUTH[1] + " -o no7w.npz "
            "--twin ur5_ft/" + TWINS[PUSHED_NO_TRUTH[1]] + " --plot no7w.png",
        ],
        "models": {},
    }
    with tempfile.TemporaryDirectory(prefix="idyn_ur5_") as tmp:
        kinds = ("rbd-friction",) if quick else ("rbd-friction", "hybrid")
        for kind in kinds:
            out = Path(tmp) / kind
            info = train_model(kind, out, root, None if kind == "rbd-friction" else HYBRID_MINUTES)
            info["wrench"] = wrench_scores(str(out / "model.onnx"), root)
            info.pop("artifact")
            payload["models"][kind] = info
        best = min(payload["models"], key=lambda k: payload["models"][k]["val"]["nmse_mean"])
        from idyn_ros.bench import results_dir  # the report links <name>.png next to <name>.json

        _wrench(str(Path(tmp) / best / "model.onnx"), root / "ur5_ft" / SCORE, "wrench", FT_TOPIC,
                plot=results_dir() / "ur5_wrench.png")
        if not quick:
            payload["user_path"] = user_path(root, Path(tmp) / "user_auto")
        payload["ur10"] = ur10(root, Path(tmp) / "ur10")
        payload["plant_trust_identified_model"] = plant_trust_with_model(Path(tmp) / "plant_rbdf", quick)
    payload["plant_trust"] = {"pushes": wrench_trust_eval.evaluate("ur5"),
                              "singular_pose": wrench_trust_eval.singular("ur5")}
    s = payload["models"][best]["wrench"]
    payload["headline"] = {
        "model": best, "val_nmse_mean": payload["models"][best]["val"]["nmse_mean"],
        "no10_force_rmse_n": {cm: {"ours": s[f"no10_{cm}"]["ours"]["rmse_n"],
                                   "ur_controller": s[f"no10_{cm}"]["ur_controller"]["rmse_n"],
                                   "ratio_mean": s[f"no10_{cm}"]["rmse_ratio_ours_to_ur"]}
                              for cm in ("wrench", "point")},
        "goal_half_of_ur": bool(min(s[f"no10_{cm}"]["rmse_ratio_ours_to_ur"] for cm in ("wrench", "point")) <= 0.5),
        "false_alarm_force_rms_n": {n: {"ours": s[f"false_alarm_{n}"]["ours_force_rms_n"],
                                        "ur_controller": s[f"false_alarm_{n}"]["ur_controller_force_rms_n"]}
                                    for n in FALSE_ALARM},
    }
    return {"_files": {"ur5_wrench": payload}}
