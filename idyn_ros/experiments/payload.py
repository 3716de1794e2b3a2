"""Payload identification and gripper compensation, measured: the acceptance numbers of ``bench/results/payload.json``.

Sections (``idyn bench --only payload``; everything cached under ``$IDYN_WORK_DIR/payload``, default ``runs/``):

- ``plant``: the true-profile plant, three robots, three payloads each (0.5-3 kg, CoM up to 10 cm off the flange axis,
  rotated inertia); the payload excitation (``idyn excite --payload``, cached) played once without and once with the
  payload by the drive PD the excitation data are recorded with (``experiments.models_cache.excitation_controller``),
  identified with the reference run (``control/payload.py``). Errors in mass, CoM, inertia.
- ``offline``: no simulator: recordings written as ``.npz`` from the true profile's rigid bodies + armature + its
  friction law (dry friction as a smooth sign) + 1 % torque noise, then the CLI (``idyn payload identify``) on the
  files, with ``--reference`` and with ``--model`` of a bare-arm model trained by ``idyn train`` on other files.
- ``closed_loop``: a 2 kg payload, medium gains, the bare arm's identified model (rbd-friction, SDP, from the tracking
  table's data) as feedforward: joint RMSE over chained min-jerk moves without compensation, after identification
  (baseline + payload runs played through that same controller, as ``~/identify_payload`` does), with DOOMED, both,
  and with the true payload (the bound).
- ``gripper``: UR5 (the thesis' robot) with a gripper that differs from its CAD values; the flange F/T sensor of the
  plant while moving without contact: RMS of the raw reading, of the RBD-only compensation (CAD values), and of the
  thesis' DeLaN + LSTM robot+gripper model minus the nominal bare arm and minus a DeLaN + LSTM bare-arm model.

Decisions (one line each): "1 % torque noise" = Gaussian with standard deviation 1 % of each joint's largest |tau|
in that recording; the offline data's dry friction is frictionloss tanh(dq / 0.01 rad/s) (no simulator: no
stiction); DOOMED at eta 0.1, alpha 0.5, gamma 0.9 (the doomed sweep's payload acceptance setting).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROBOTS = ("panda", "iiwa14", "ur5")
GOAL = {"mass_pct": 2.0, "com_mm": 5.0}
# not the node's defaults (eta 0.05, offset limit 15 % of the effort limit): the sweep's payload acceptance setting
DOOMED = {"eta": 0.1, "alpha": 0.5, "gamma": 0.9, "offset_limit_fraction": 0.2}


def _box(mass: float, com: Sequence[float], size: Sequence[float], rpy: Sequence[float]) -> Any:
    """A solid box payload with its axes rotated by roll-pitch-yaw (a rotated, non-diagonal inertia)."""
    from idyn_ros.robots.spec import Payload

    a, b, c = size
    diag = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    r, p, y = rpy
    Rx = np.array([[1, 0, 0], [0, math.cos(r), -math.sin(r)], [0, math.sin(r), math.cos(r)]])
    Ry = np.array([[math.cos(p), 0, math.sin(p)], [0, 1, 0], [-math.sin(p), 0, math.cos(p)]])
    Rz = np.array([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]])
    R = Rz @ Ry @ Rx
    inertia = R @ diag @ R.T
    return Payload(mass, tuple(com), tuple(inertia[i, j] for i, j in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))))


def test_payloads() -> dict[str, Any]:
    """The three unknown payloads (CoM 3.6, 7.8 and 9.9 cm off the flange axis)."""
    return {"0.5kg": _box(0.5, (0.02, -0.03, 0.04), (0.06, 0.04, 0.03), (0.3, -0.2, 0.5)),
            "1.5kg": _box(1.5, (-0.05, 0.06, 0.08), (0.10, 0.06, 0.05), (0.0, 0.6, -0.4)),
            "3.0kg": _box(3.0, (0.07, -0.07, 0.05), (0.15, 0.08, 0.06), (0.8, 0.1, 0.3))}


CLOSED_LOOP_PAYLOAD = _box(2.0, (0.04, -0.03, 0.08), (0.12, 0.08, 0.05), (0.2, 0.4, 0.1))
# The gripper test moves between working poses of the UR5 (elbow bent, wrist not aligned): the learned form maps joint
# torques through (J^T)^+, which has no inverse at the singular poses the random task points include (q = 0).
GRIPPER_POSES = ((0.3, -1.2, 1.4, -1.0, -1.5, 0.2), (-0.4, -1.6, 1.9, -1.6, -1.2, -0.5),
                 (0.8, -1.0, 1.1, -0.6, -1.9, 0.9), (0.3, -1.2, 1.4, -1.0, -1.5, 0.2))
GRIPPER_TRUE = _box(0.95, (0.004, -0.003, 0.068), (0.09, 0.06, 0.11), (0.0, 0.0, 0.15))
GRIPPER_CAD = _box(0.90, (0.0, 0.0, 0.060), (0.09, 0.06, 0.10), (0.0, 0.0, 0.0))


def work_dir() -> Path:
    return Path(os.environ.get("IDYN_WORK_DIR", "runs")) / "payload"


def _payload_json(p: Any) -> dict[str, Any]:
    return {"mass_kg": p.mass, "com_m": list(p.com), "inertia_kgm2": list(p.inertia)}


# ------------------------------------------------------------------------------------------ data
def excitation(robot: str, budget_s: float = 30.0, seed: int = 0) -> Any:
    """The robot's payload excitation, designed once and cached (the optimiser's time budget makes a redesign
    machine dependent): ``<work>/<robot>/excite.npz`` as ``idyn excite --payload`` writes it."""
    from idyn_ros.control.payload import design_excitation
    from idyn_ros.data.trajectories import FourierTrajectory
    from idyn_ros.dynamics import RobotModel

    path = work_dir() / robot / "excite.npz"
    if path.is_file():
        with np.load(path) as f:
            return FourierTrajectory(f["q0"], f["a"], f["b"], float(f["period"]))
    model = RobotModel.from_robot(robot)
    res = design_excitation(model, time_budget_s=budget_s, seed=seed)
    traj = res.trajectory
    t = np.arange(0.0, traj.period, 1e-3)
    q, dq, ddq = traj.evaluate(t)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, t=t, q_d=q, dq_d=dq, ddq_d=ddq, joint_names=np.array(model.joint_names), robot=np.array(robot),
             cond_initial=res.cond_initial, cond_optimized=res.cond_optimized, objective=np.array("payload"),
             **traj.coefficients())
    return traj


def _condition(path: Path) -> dict[str, float]:
    with np.load(path) as f:
        return {"cond_initial": float(f["cond_initial"]), "cond_optimized": float(f["cond_optimized"])}


def plant_recording(robot: str, reference: Any, payload: Any = None, controller: Any = None,
                    plant: Any = None) -> Any:
    """Play ``reference`` on the true-profile plant (drive PD unless ``controller``); the measured motion and effort
    as a ``Recording`` (ddq derived as for a file)."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.errors import DatasetError
    from idyn_ros.experiments.models_cache import excitation_controller
    from idyn_ros.models.sources import Recording, _ddq_from_dq
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import run_episode

    plant = plant or Plant(robot, "true")
    plant.set_payload(payload)
    controller = controller or excitation_controller(robot, RobotModel.from_robot(robot))
    ep = run_episode(plant, controller, reference, hold=0.5)
    if ep.failed:
        raise DatasetError(f"{robot}: the excitation run failed: {ep.reason}")
    sl = slice(int(0.5 / plant.control_dt), None)
    t, dq = ep.t[sl], ep.dq[sl]
    return Recording(t, ep.q[sl], dq, _ddq_from_dq(t, dq), ep.tau[sl], f"plant:{robot}:true")


def _errors(est: Any, truth: Any) -> dict[str, Any]:
    from idyn_ros.control.payload import rms_error

    err = rms_error(est, truth)
    return {"truth": _payload_json(truth), "estimate": est.to_json(), **err,
            "com_error_mm": 1e3 * err["com_error_m"],
            "goal_met": abs(err["mass_error_pct"]) <= GOAL["mass_pct"] and 1e3 * err["com_error_m"] <= GOAL["com_mm"]}


def plant_section(robots: Sequence[str] = ROBOTS) -> dict[str, Any]:
    """Three payloads per robot on the true plant, identified against a reference run."""
    from idyn_ros.control.payload import identify_with_reference
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim.loop import FourierReference

    out: dict[str, Any] = {}
    for robot in robots:
        model = RobotModel.from_robot(robot)
        traj = excitation(robot)
        ref = FourierReference(traj)
        bare = plant_recording(robot, ref)
        rows = {}
        for name, payload in test_payloads().items():
            t0 = time.monotonic()
            est = identify_with_reference(model, [plant_recording(robot, ref, payload)], [bare])
            rows[name] = {**_errors(est, payload), "solve_s": time.monotonic() - t0}
        out[robot] = {"excitation": {**_condition(work_dir() / robot / "excite.npz"), "period_s": traj.period},
                      "payloads": rows}
        print(f"[payload] plant {robot}: " + ", ".join(
            f"{k}: mass {v['mass_error_pct']:+.2f} %, CoM {v['com_error_mm']:.2f} mm" for k, v in rows.items()),
            flush=True)
    return out


# ------------------------------------------------------------------------------------------ offline (no simulator)
def synthetic_dataset(robot: str, traj: Any, payload: Any = None, noise: float = 0.01, seed: int = 0,
                      seconds: float | None = None) -> Any:
    """A recording computed, not simulated: the true profile's arm (perturbed inertials, armature, friction law with a
    smooth dry friction, sensor offset) carrying ``payload``, exactly on ``traj``, + ``noise`` x max|tau_j| Gaussian."""
    from idyn_ros.data.dataset import Dataset
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim import Plant
    from idyn_ros.sim.friction import smooth_friction

    plant = Plant(robot, "true")  # its description and profile only: nothing is stepped
    prof = plant.profile
    arm = RobotModel.from_urdf(plant.true_urdf(), name=robot, joints=plant.joint_names,
                               flange_frame=plant.flange_link).with_armature(prof.armature)
    if payload is not None:
        arm = arm.with_payload(payload)
    duration = seconds or float(getattr(traj, "period", None) or traj.duration)
    t = np.arange(0.0, duration, 1e-3)
    q, dq, ddq = traj.evaluate(t)
    fr = prof.friction
    tau = (arm.rnea(q, dq, ddq) + smooth_friction(dq, fr) + fr.frictionloss * np.tanh(dq / 0.01)
           + prof.torque_offset)
    rng = np.random.default_rng(seed)
    tau += noise * np.abs(tau).max(0) * rng.standard_normal(tau.shape)
    return Dataset(t=t, q=q, dq=dq, tau=tau, joint_names=tuple(plant.joint_names), robot=robot,
                   source=f"synthetic:{robot}:true profile, {100 * noise:g} % torque noise (no simulator)")


def _cli_json(argv: list[str]) -> dict[str, Any]:
    """Run ``idyn ...`` in-process (the CLI's own code path) and parse its --json output."""
    from idyn_ros.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    if code != 0:
        raise RuntimeError(f"idyn {' '.join(argv)} exited with {code}")
    return json.loads(buf.getvalue())


def offline_section(robots: Sequence[str] = ROBOTS, train_minutes: float = 3.0) -> dict[str, Any]:
    """The CLI on generated .npz files: --reference, and --model of a bare-arm model trained on other files."""
    from idyn_ros.data.trajectories import JointLimits, optimize_excitation
    from idyn_ros.dynamics import RobotModel

    out: dict[str, Any] = {}
    for robot in robots:
        d = work_dir() / robot / "offline"
        d.mkdir(parents=True, exist_ok=True)
        traj = excitation(robot)
        without = d / "without.npz"
        if not without.is_file():
            synthetic_dataset(robot, traj, None, seed=1).save(without)
        # the bare arm's training data: the payload excitation without payload and an arm excitation; validation:
        # another arm excitation (the payload runs are never in it)
        train_files = [without]
        model = RobotModel.from_robot(robot)
        full = JointLimits.from_model(model)
        lim = JointLimits(full.lower, full.upper, 0.3 * full.velocity, 0.3 * full.acceleration)
        for i in range(2):
            path = d / f"arm_excite_{i}.npz"
            if not path.is_file():
                arm_traj = optimize_excitation(model, lim, period=10.0, seed=10 + i, time_budget_s=4.0).trajectory
                synthetic_dataset(robot, arm_traj, None, seed=20 + i).save(path)
            train_files.append(path)
        onnx = d / "bare_arm" / "model.onnx"
        if not onnx.is_file():
            from idyn_ros.cli import main

            with contextlib.redirect_stdout(io.StringIO()):
                code = main(["train", "--robot", robot, "--data", *map(str, train_files[:-1]), "--val",
                             str(train_files[-1]),
                             "--model", "hybrid", "--mode", "2s", "--out", str(onnx.parent),
                             "--max-minutes", str(train_minutes), "--no-progress"])
            if code != 0:
                raise RuntimeError(f"idyn train (bare arm, {robot}) exited with {code}")
        rows: dict[str, Any] = {}
        for k, (name, payload) in enumerate(test_payloads().items()):
            with_path = d / f"with_{name}.npz"
            if not with_path.is_file():
                synthetic_dataset(robot, traj, payload, seed=100 + k).save(with_path)
            base = ["payload", "identify", "--robot", robot, "--data", str(with_path), "--json"]
            rows[name] = {
                "reference": _compare(_cli_json([*base, "--reference", str(without)]), payload),
                "model": _compare(_cli_json([*base, "--model", str(onnx)]), payload),
            }
        out[robot] = {"payloads": rows, "bare_arm_model": {"kind": "hybrid 2s (SDP rbd-friction + LSTM residual)",
                                                           "train": [p.name for p in train_files[:-1]],
                                                           "val": train_files[-1].name, "path": str(onnx),
                                                           "train_minutes": train_minutes},
                      "commands": {"reference": f"idyn payload identify --robot {robot} --data {d}/with_<name>.npz "
                                                f"--reference {without} --json",
                                   "model": f"idyn payload identify --robot {robot} --data {d}/with_<name>.npz "
                                            f"--model {onnx} --json"}}
        print(f"[payload] offline {robot}: " + ", ".join(
            f"{k}: ref {v['reference']['mass_error_pct']:+.2f} %/{v['reference']['com_error_mm']:.1f} mm, model "
            f"{v['model']['mass_error_pct']:+.2f} %/{v['model']['com_error_mm']:.1f} mm" for k, v in rows.items()),
            flush=True)
    return out


def _compare(result: dict[str, Any], truth: Any) -> dict[str, Any]:
    dm = result["mass_kg"] - truth.mass
    com = 1e3 * float(np.linalg.norm(np.subtract(result["com_m"], truth.com)))
    return {"result": result, "mass_error_pct": 100 * dm / truth.mass, "com_error_mm": com,
            "inertia_error_kgm2": float(np.abs(np.subtract(result["inertia_kgm2"], truth.inertia)).max()),
            "goal_met": abs(100 * dm / truth.mass) <= GOAL["mass_pct"] and com <= GOAL["com_mm"]}


# ------------------------------------------------------------------------------------------ closed loop
def _bare_arm_artifact(robot: str) -> Path:
    """The bare arm's identified rbd-friction model from the tracking table's data (``models_cache``)."""
    from idyn_ros.experiments import models_cache

    root = Path(os.environ.get("IDYN_WORK_DIR", "runs"))
    row = "identified_rbd_friction"
    return models_cache.bench_models(robot, root, [row], progress=False)[row]


def _task(model: Any) -> Any:
    from idyn_ros.experiments.doomed_sweep import _task as doomed_task

    return doomed_task(model, 3, 2.0)


def closed_loop_robot(robot: str, payload: Any = CLOSED_LOOP_PAYLOAD) -> dict[str, Any]:
    """One robot of ``closed_loop_section``."""
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.control.payload import excitation_plan, identify_with_reference
    from idyn_ros.control.reference import SampledTrajectory
    from idyn_ros.data.trajectories import JointLimits
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import controller_for

    model = RobotModel.from_robot(robot)
    artifact = _bare_arm_artifact(robot)

    def controller() -> Any:
        return controller_for(robot, model, "medium", FeedforwardComputer(model, artifact, "none"))

    plant = Plant(robot, "true")
    task = _task(model)
    # ~/identify_payload in-process: the plan it sends the reference node, played by the running controller
    t, q, dq, ddq = excitation_plan(task.sample(0.0)[0], excitation(robot), JointLimits.from_model(model), 1000.0)
    plan = SampledTrajectory(t, q, dq, ddq)
    t0 = time.monotonic()
    bare = plant_recording(robot, plan, None, controller(), plant)
    loaded = plant_recording(robot, plan, payload, controller(), plant)
    est = identify_with_reference(model, [loaded], [bare])
    ident_s = time.monotonic() - t0
    rows = {name: _tracking_run(plant, controller(), model, task, payload, known, doomed)
            for name, known, doomed in (("without_compensation", None, False), ("identified", est.payload, False),
                                        ("doomed", None, True), ("identified_and_doomed", est.payload, True),
                                        ("true_payload_known", payload, False))}
    plant.set_payload(None)
    out = {"rmse_deg": {k: v.get("rmse_deg") for k, v in rows.items()},
           "final_deg": {k: v.get("final_deg") for k, v in rows.items()}, "runs": rows,
           "identification": {**_errors(est, payload), "wall_s": ident_s, "excitation_played_s": float(t[-1])},
           "feedforward": f"bare arm rbd-friction (SDP) {artifact}"}
    print(f"[payload] closed loop {robot} RMSE deg: " + ", ".join(
        f"{k} {v:.3f}" for k, v in out["rmse_deg"].items() if v is not None), flush=True)
    return out


def _tracking_run(plant: Any, controller: Any, model: Any, task: Any, payload: Any, known: Any,
                  doomed: bool) -> dict[str, Any]:
    """The task on the plant carrying ``payload``; the controller told ``known`` (or nothing), DOOMED on or off."""
    from idyn_ros.control.doomed import Doomed, DoomedAdapter, DoomedConfig
    from idyn_ros.sim.loop import run_episode, tracking_metrics

    if known is not None:
        controller.set_payload(known)
    adapter = None
    if doomed:
        learner = Doomed(plant.n, DoomedConfig(learning_rate=DOOMED["eta"], momentum=DOOMED["gamma"],
                                               variance_gain=DOOMED["alpha"],
                                               offset_limit=DOOMED["offset_limit_fraction"]
                                               * np.asarray(model.effort_limit)))
        adapter = DoomedAdapter(learner, controller.feedback_model)
    plant.set_payload(payload)
    return tracking_metrics(run_episode(plant, controller, task, hold=0.5, doomed=adapter))


def closed_loop_section(robots: Sequence[str] = ROBOTS, payload: Any = CLOSED_LOOP_PAYLOAD) -> dict[str, Any]:
    """Tracking RMSE at medium gains with the payload: unknown, identified online, DOOMED, both, known."""
    out: dict[str, Any] = {robot: closed_loop_robot(robot, payload) for robot in robots}
    out["_setup"] = {"payload": _payload_json(payload), "gains": "medium", "task": "3 chained min-jerk moves of 2 s",
                     "doomed": DOOMED, "plant": "true profile, in-process lockstep (sim/loop.py)"}
    return out


# ------------------------------------------------------------------------------------------ gripper compensation
def _record_set(robot: str, trajs: Any, count: int, folder: Path, gripper: Any) -> list[Path]:
    """``count`` excitations (``trajs()`` designs them, only if a file is missing) on the true plant with ``gripper``
    attached (drive PD), saved as dataset files (cached)."""
    from idyn_ros.data.dataset import Dataset
    from idyn_ros.robots import get_robot
    from idyn_ros.sim.loop import FourierReference

    paths = [folder / f"excite_{i}.npz" for i in range(count)]
    if all(p.is_file() for p in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    for path, traj in zip(paths, trajs(), strict=True):
        rec = plant_recording(robot, FourierReference(traj), gripper)
        Dataset(t=rec.t - rec.t[0], q=rec.q, dq=rec.dq, tau=rec.tau, joint_names=get_robot(robot).joint_names,
                robot=robot, source=rec.source).save(path)
    return paths


def _train_delan_lstm(robot: str, files: Sequence[Path], out: Path, minutes: float) -> Path:
    onnx = out / "model.onnx"
    if onnx.is_file():
        return onnx
    from idyn_ros.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["train", "--robot", robot, "--data", *map(str, files[:-1]), "--val", str(files[-1]),
                     "--model", "delan-lstm", "--out", str(out), "--max-minutes", str(minutes), "--no-progress"])
    if code != 0:
        raise RuntimeError(f"idyn train delan-lstm ({robot}) exited with {code}")
    return onnx


def _gripper_from_ft(robot: str, model: Any) -> Any:
    """The classical alternative to a learned model: the gripper's parameters from the F/T sensor itself, while the
    payload excitation plays without contact (``control.payload.identify_from_wrench``)."""
    from idyn_ros.control.payload import identify_from_wrench
    from idyn_ros.experiments.models_cache import excitation_controller
    from idyn_ros.models.sources import Recording, _ddq_from_dq
    from idyn_ros.sim import Plant
    from idyn_ros.sim.ft_sensor import FlangeForceTorqueSensor
    from idyn_ros.sim.loop import FourierReference, run_episode

    plant = Plant(robot, "true")
    plant.set_payload(GRIPPER_TRUE)
    sensor = FlangeForceTorqueSensor(plant, seed=11)
    log: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
    run_episode(plant, excitation_controller(robot, model), FourierReference(excitation(robot)), hold=0.5,
                on_tick=lambda k, st, _c: log.append((st.t, st.q, st.dq, sensor.read())))
    t = np.array([x[0] for x in log])
    q, dq, w = (np.array([x[i] for x in log]) for i in (1, 2, 3))
    return identify_from_wrench(model, [Recording(t, q, dq, _ddq_from_dq(t, dq), np.zeros_like(q))], [w])


def gripper_section(robot: str = "ur5", train_minutes: float = 6.0, n_data: int = 5) -> dict[str, Any]:
    """Compensated F/T RMS while moving without contact: raw, RBD-only (CAD gripper), DeLaN + LSTM (two arms)."""
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.control.gripper import GripperCompensation
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.models_cache import DataSpec, excitation_trajectories
    from idyn_ros.sim import Plant
    from idyn_ros.sim.ft_sensor import FlangeForceTorqueSensor
    from idyn_ros.sim.loop import controller_for, run_episode

    model = RobotModel.from_robot(robot)
    d = work_dir() / robot / "gripper"
    designed: list[Any] = []

    def trajs() -> list[Any]:  # the same trajectories for both sets, designed once
        if not designed:
            designed.extend(excitation_trajectories(model, DataSpec(count=n_data, period=10.0, speed=0.3,
                                                                    budget_s=4.0, seed=50)))
        return designed

    with_gripper = _record_set(robot, trajs, n_data, d / "data_gripper", GRIPPER_TRUE)
    bare = _record_set(robot, trajs, n_data, d / "data_bare", None)
    rg_path = _train_delan_lstm(robot, with_gripper, d / "delan_lstm_gripper", train_minutes)
    r_path = _train_delan_lstm(robot, bare, d / "delan_lstm_bare", train_minutes)

    def learned(path: Path) -> Any:
        return FeedforwardComputer(model, path, "none", 1000.0)

    ft_identified = _gripper_from_ft(robot, model)
    variants = {
        "rbd_only_cad": GripperCompensation(model, 1000.0, gripper=GRIPPER_CAD),
        "rbd_ft_identified": GripperCompensation(model, 1000.0, gripper=ft_identified.payload),
        "learned_minus_nominal_arm": GripperCompensation(model, 1000.0, learned(rg_path)),
        "learned_minus_learned_arm": GripperCompensation(model, 1000.0, learned(rg_path), learned(r_path)),
        "rbd_true_gripper_bound": GripperCompensation(model, 1000.0, gripper=GRIPPER_TRUE),
    }
    plant = Plant(robot, "true")
    plant.set_payload(GRIPPER_TRUE)
    sensor = FlangeForceTorqueSensor(plant, seed=7)
    controller = controller_for(robot, model, "medium")
    controller.set_payload(GRIPPER_CAD)  # the controller knows the gripper by its CAD values
    logs: dict[str, list[np.ndarray]] = {k: [] for k in ("raw", *variants)}
    times: list[float] = []

    def on_tick(k: int, state: Any, _cmd: np.ndarray) -> None:
        reading = sensor.read()
        stamp = round(state.t * 1e9)
        ok = [comp.update(stamp, state.q, state.dq, reading) for comp in variants.values()]
        if all(ok):
            times.append(state.t)
            logs["raw"].append(reading.copy())
            for name, comp in variants.items():
                logs[name].append(comp.compensated.copy())

    from idyn_ros.control.reference import MinJerkMove

    poses = [np.array(p) for p in GRIPPER_POSES]
    ep = run_episode(plant, controller, MinJerkMove(poses[0], poses[1:], [2.0] * (len(poses) - 1)), hold=0.5,
                     on_tick=on_tick)
    sv_min = min(float(np.linalg.svd(model.frame_jacobian(q, reference="local"), compute_uv=False)[-1])
                 for q in ep.q[:: 100])
    t = np.asarray(times)
    moving = (t >= ep.move_start + 0.1) & (t <= ep.move_end)  # the first 0.1 s: filters settle
    rows = {}
    for name, values in logs.items():
        w = np.asarray(values)[moving]
        rows[name] = {"force_rms_n": float(np.sqrt((np.linalg.norm(w[:, :3], axis=1) ** 2).mean())),
                      "torque_rms_nm": float(np.sqrt((np.linalg.norm(w[:, 3:], axis=1) ** 2).mean())),
                      "force_p99_n": float(np.percentile(np.linalg.norm(w[:, :3], axis=1), 99))}
    print(f"[payload] gripper {robot}: " + ", ".join(f"{k} {v['force_rms_n']:.2f} N / {v['torque_rms_nm']:.3f} Nm"
                                                      for k, v in rows.items()), flush=True)
    return {"robot": robot, "rms": rows, "gripper_true": _payload_json(GRIPPER_TRUE),
            "gripper_cad": _payload_json(GRIPPER_CAD),
            "gripper_identified_from_ft": _errors(ft_identified, GRIPPER_TRUE),
            "sensor_noise": {"force_n": sensor.noise[0], "torque_nm": sensor.noise[3]},
            "models": {"robot_plus_gripper": str(rg_path), "bare_arm": str(r_path), "kind": "delan-lstm",
                       "train_minutes_each": train_minutes, "data": f"{n_data} excitations x 10 s per model "
                                                                    "(last one validation)"},
            "task": "3 min-jerk moves of 2 s between working poses (GRIPPER_POSES), medium gains, no contact; RMS "
                    "over the moves", "jacobian_min_singular_value": sv_min}


ADVICE = (
    "Identification is one-shot and explicit: ~30 s of excitation once per payload gives mass, CoM and inertia with "
    "standard deviations, which the feedforward, the feedback's M(q), the safe hold and the wrench observer all use at "
    "once, and which the vendor controller can take (Franka SetLoad, UR set_target_payload, KUKA load data). Use it "
    "when the payload is known to change (tool change, a grasp of a known part) and there are 30 s for the motion. "
    "DOOMED is continuous and model-free: it needs no excitation and follows slow changes; on the bench's moves it "
    "tracked better than the identified payload, as it also takes in what the bare-arm model misses. But it learns "
    "only a per-joint torque offset for the current motion, so it relearns whenever the motion or the load changes, "
    "and it tells nothing about the payload (no vendor load data, no wrench-observer correction, nothing for the safe "
    "hold). Use both: identify a payload you know of, and let DOOMED take what no model has (unmodelled friction, a "
    "payload picked mid-motion, slow drift).")


def run(robots: Sequence[str] = ROBOTS, sections: Sequence[str] = ("plant", "offline", "closed_loop", "gripper"),
        quick: bool = False) -> dict[str, Any]:
    """Every section (``bench/results/payload.json``)."""
    t0 = time.monotonic()
    out: dict[str, Any] = {"goal": GOAL}
    if "plant" in sections:
        out["plant"] = plant_section(robots)
    if "offline" in sections:
        out["offline"] = offline_section(robots, train_minutes=1.0 if quick else 3.0)
    if "closed_loop" in sections:
        out["closed_loop"] = closed_loop_section(robots)
    if "gripper" in sections:
        out["gripper"] = gripper_section(train_minutes=1.0 if quick else 6.0, n_data=3 if quick else 5)
    out["advice_identification_vs_doomed"] = ADVICE
    out["_seconds"] = time.monotonic() - t0
    return out
