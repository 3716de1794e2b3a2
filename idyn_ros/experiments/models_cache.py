"""Training data from the plant and the models of the tracking table, cached under a work dir.

Data (decision, from the plant's documented semantics in idyn_ros/sim/plant.py): the training target
is the plant's *measured joint torque* (the /joint_states effort). The plant reports the drive
torque - the command after its one-tick latency and saturation - plus a small sensor offset and
noise; it does NOT subtract friction or rotor inertia. So the effort is exactly "the torque that
produced the motion" and it is time-aligned with q, dq (the command topic is one tick early because
of the drive latency, and in lockstep its log times are wall-clock while joint states carry sim
time). Friction, armature and the sensor offset are therefore things the models must learn.

Collection (Reuss et al. 2022 Sec. IV): optimised Fourier excitations (``optimize_excitation``,
min cond(Y_b)) tracked with nominal RBD feedforward and a joint-space PD in torque units (the drive's
position loop, ``excitation_controller``; see there why not the acceleration-space presets); one
recording per trajectory; the split is by trajectory (train and validation are different trajectories).
Acceleration for training comes from ``idyn_ros.models.sources`` (zero-phase filtered derivative of
dq, Reuss Sec. IV-B). The min-jerk moves of the tracking table are never in the training data.

Models: ``identified_rbd_friction``, ``hybrid_2s``, ``hybrid_e2e`` and ``auto`` come from ONE
``idyn train --model auto`` fit (``train_auto_rows``): they are its candidates (same data, same residual gate)
and its winner; the other rows are trained on their own (``train_row``).

Cache layout: ``<workdir>/models/<robot>/data/excite_<i>.npz``, ``<workdir>/models/<robot>/<row>/
model.onnx`` + ``metrics.json``. A model is reused when its ``model.onnx`` and ``spec.json`` (the
training settings it was made with, a digest of its data files and ``CACHE_VERSION``) exist and match,
so reruns skip training.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Rows of the tracking table that need a trained artifact -> ModelConfig settings (idyn_ros.models.zoo).
MODEL_ROWS: dict[str, dict[str, Any]] = {
    "identified_rbd": {"kind": "rbd", "id_method": "sdp"},
    "identified_rbd_friction": {"kind": "rbd-friction", "id_method": "sdp"},
    "hybrid_2s": {"kind": "hybrid", "mode": "2s", "id_method": "sdp"},
    "hybrid_e2e": {"kind": "hybrid", "mode": "e2e"},
    "lstm": {"kind": "lstm"},
    "auto": {"kind": "auto"},
}
# Rows exported from one auto fit: table row -> auto candidate name (idyn_ros.models.auto.CANDIDATES); "auto" is
# whichever candidate won.
AUTO_ROWS: dict[str, str] = {"identified_rbd_friction": "rbd-friction", "hybrid_2s": "hybrid 2S",
                             "hybrid_e2e": "hybrid E2E", "auto": ""}


# Bumped when the recorded data or the models change for the same settings (4: recorded by the controller core,
# 5: the true profiles gained the joint effects of sim/joint_effects.py, 6: excitations at 0.8 of the limits and
# artifacts carrying their training velocity range, 7: auto fits the per-joint residual on every physics candidate,
# 8: validation, the gate, early stopping and auto score the model with its velocity held as the runtime holds it,
# 9: auto's per-joint 2S residuals compete as their average over the physics candidates, 10: the SDP's geometric
# prior, now its default, solved in each link's own scale, 11: the true profiles' torque ripple is a fraction of the
# drive torque), so cached data and
# artifacts made by older code are re-recorded / retrained instead of silently reused. Auto's candidate list is part
# of the auto rows' key by itself; a change of its rules (models.auto) still needs a bump here.
CACHE_VERSION = 11
# The recorded data's part of it: bumped with CACHE_VERSION when the recordings change (last at 11), not when only
# the models do, so a model change retrains without re-recording.
DATA_VERSION = 11
# Bumped when the exported artifacts change for the same data and training (2: they carry their validation
# uncertainty, which the wrench observer's trust stage reads): cached models are re-exported, the data is kept.
ARTIFACT_VERSION = 2

# Excitation feedback (decision, see ``excitation_controller``): full effort at this position error (rad).
EXCITATION_FULL_EFFORT_ERROR = 0.25
# Rotor-inertia guess for the damping gain, J_rotor ~ this x effort limit (s^2; kg m^2 per Nm). Rule of
# thumb: reflected rotor inertia grows with gear ratio, and so does the joint's peak torque. Deliberately
# on the low side: underestimating the inertia only lowers the damping ratio, overestimating it puts a
# large Kd/M on the 1 kHz loop with one tick of latency, which can destabilise it.
EXCITATION_ROTOR_INERTIA_PER_NM = 0.005


def _files_digest(paths: Sequence[Path]) -> str:
    """sha256 over the files' bytes: a re-recorded dataset at the same path invalidates the cached model."""
    import hashlib

    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


@dataclass
class DataSpec:
    """How much excitation data to record: ``count`` trajectories of ``period`` s, velocities and
    accelerations designed within ``speed`` x the robot's limits (Reuss: 0.1 slow / 0.4 fast)."""

    count: int = 6
    period: float = 10.0
    harmonics: int = 5
    # 0.8: the tracking moves peak at <= 0.8 of the velocity limits (tracking.MOVE_VELOCITY_FRACTION); at 0.3 the
    # recordings reached 0.3-0.45 of them and every fitted friction term was queried far outside its data
    speed: float = 0.8
    budget_s: float = 4.0  # optimiser wall time per trajectory
    seed: int = 0

    def key(self) -> dict[str, Any]:
        return {**self.__dict__, "cache_version": DATA_VERSION}


def excitation_trajectories(robot_model: Any, spec: DataSpec, progress: Callable[[str], None] | None = None) -> list:
    """``spec.count`` optimised Fourier excitations (different seeds) inside the scaled limits."""
    from idyn_ros.data.trajectories import JointLimits, optimize_excitation

    full = JointLimits.from_model(robot_model)
    lim = JointLimits(full.lower, full.upper, full.velocity * spec.speed, full.acceleration * spec.speed)
    out = []
    for i in range(spec.count):
        # joint limits only (no workspace): the embedded plant has no table, and the benchmarks were measured so
        res = optimize_excitation(robot_model, lim, harmonics=spec.harmonics, period=spec.period,
                                  seed=spec.seed + i, time_budget_s=spec.budget_s)
        out.append(res.trajectory)
        if progress:
            progress(f"excitation {i}: cond(Y_b) {res.cond_initial:.0f} -> {res.cond_optimized:.0f}")
    return out


def excitation_controller(robot: str, robot_model: Any) -> Any:
    """The controller for recording excitations: a joint-space PD in torque units, like a drive's position loop.

    Why not the controller's acceleration-space presets (decision): they scale Kp e by the *URDF* M(q), which has
    almost no inertia about distal axes (iiwa14 joint 7: M_77 ~ 1e-4 kg m^2) while the real joint carries
    reflected rotor inertia and stiction; M_77 Kp e then stays below the breakaway torque and the joint never
    moves, so its parameters are not excited. A real user records with the drive's position loop instead, whose
    gains do not depend on the model:
      Kp_j = effort_limit_j / EXCITATION_FULL_EFFORT_ERROR   (full torque at 0.25 rad error) [Nm/rad]
      Kd_j = 2 sqrt(Kp_j (M_jj + J_j)), J_j = EXCITATION_ROTOR_INERTIA_PER_NM * effort_limit_j (rotor guess)
    Stiction e_s = F_s / Kp_j is then ~0.01 rad and every joint tracks. It runs as the controller node's
    ``Controller`` (torque-space feedback, the drive gains as its stiff preset, the rotor guess as its
    ``feedback_armature``) with nominal RBD feedforward; the tracking table still uses the presets.
    """
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.sim.loop import controller_for

    return controller_for(robot, robot_model, "stiff", FeedforwardComputer(robot_model, None, "rbd"),
                          **excitation_drive_parameters(robot_model))


def excitation_drive_parameters(robot_model: Any) -> dict[str, Any]:
    """The controller parameters of ``excitation_controller``'s drive PD (torque-space feedback, the drive gains as
    the stiff preset, the rotor guess as ``feedback_armature``): the demo's DDS recording gives the controller node
    the same ones."""
    effort = np.asarray(robot_model.effort_limit, dtype=float)
    return {"feedback_space": "torque", "damping_ratio": 1.0,
            "presets.stiff.kp": (effort / EXCITATION_FULL_EFFORT_ERROR).tolist(),
            "feedback_armature": (EXCITATION_ROTOR_INERTIA_PER_NM * effort).tolist()}


def record_inprocess(robot: str, robot_model: Any, traj: Any, path: Path, gain: str = "drive",
                     plant: Any = None) -> Path:
    """Track one excitation on the true plant in-process (nominal RBD feedforward; ``gain="drive"``: the
    torque-space drive PD of ``excitation_controller``, else a controller preset) and save the recording as a
    dataset ``.npz`` (t, q, dq, tau = measured effort, q_d/dq_d/ddq_d, tau_cmd). Raises ``DatasetError`` if the
    run failed."""
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.data.dataset import Dataset
    from idyn_ros.errors import DatasetError
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import FourierReference, controller_for, run_episode

    plant = plant or Plant(robot, "true")
    controller = (excitation_controller(robot, robot_model) if gain == "drive" else
                  controller_for(robot, robot_model, gain, FeedforwardComputer(robot_model, None, "rbd")))
    ep = run_episode(plant, controller, FourierReference(traj), hold=0.5)
    if ep.failed:
        raise DatasetError(f"excitation run on the {robot} plant failed: {ep.reason}; lower DataSpec.speed")
    sl = slice(int(0.5 / plant.control_dt), None)  # drop the hold: the motion only
    ds = Dataset(t=ep.t[sl] - ep.t[sl][0], q=ep.q[sl], dq=ep.dq[sl], tau=ep.tau[sl],
                 joint_names=tuple(plant.joint_names), robot=robot, source=f"plant:{robot}:true (in-process)",
                 q_d=ep.q_d[sl], dq_d=ep.dq_d[sl], ddq_d=ep.ddq_d[sl], tau_cmd=ep.tau_cmd[sl],
                 notes=("tau = measured joint torque (plant effort = drive torque + sensor offset/noise)",))
    return ds.save(path)


def record_dataset(robot: str, workdir: Path, spec: DataSpec, progress: Any = None) -> list[Path]:
    """Record (or reuse) ``spec.count`` excitation recordings; returns their .npz paths."""
    from idyn_ros.dynamics import RobotModel

    d = Path(workdir) / "models" / robot / "data"
    key_file = d / "spec.json"
    paths = [d / f"excite_{i}.npz" for i in range(spec.count)]
    if key_file.is_file() and json.loads(key_file.read_text()) == spec.key() and all(p.is_file() for p in paths):
        return paths
    d.mkdir(parents=True, exist_ok=True)
    model = RobotModel.from_robot(robot)
    trajs = excitation_trajectories(model, spec)
    for i, traj in enumerate(trajs):
        record_inprocess(robot, model, traj, paths[i])
        if progress is not None:
            progress.update(1)
    key_file.write_text(json.dumps(spec.key()))
    return paths


def split_paths(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """By trajectory: the last recording (at least one) is validation, the rest training."""
    n_val = max(1, len(paths) // 5)
    return list(paths[:-n_val]), list(paths[-n_val:])


def _cached(out_dir: Path, spec: dict[str, Any]) -> bool:
    spec_file = Path(out_dir) / "spec.json"
    onnx_file = Path(out_dir) / "model.onnx"
    return onnx_file.is_file() and spec_file.is_file() and json.loads(spec_file.read_text()) == spec


def _export_row(res: Any, robot_model: Any, va: Sequence[Any], out_dir: Path, spec: dict[str, Any],
                extra: dict[str, Any]) -> Path:
    """model.onnx + metrics.json (validation summary) + spec.json of one row; returns model.onnx."""
    from idyn_ros.models import export
    from idyn_ros.models.auto import scores
    from idyn_ros.models.training import predict
    from idyn_ros.models.uncertainty import torque_uncertainty

    full, phys = scores(res, robot_model, va)
    summary = {"val_nmse_mean": full["nmse_mean"], "val_rmse_mean_nm": full["rmse_mean_nm"],
               "val_nmse_joint": full["nmse"], "val_physics_nmse_mean": phys["nmse_mean"], "kind": res.cfg.kind,
               "mode": res.cfg.mode, "stopped": res.stopped, "epochs_run": len(res.history),
               "residual_gate": None if res.gate is None else res.gate.tolist(),
               "identification": {k: v for k, v in res.identification.items() if not isinstance(v, np.ndarray)},
               **extra}
    meta = export.build_metadata(res.model, robot_model, res.fingerprint, summary, (res.tau_min, res.tau_max),
                                 res.dq_abs_max)
    meta["uncertainty"] = torque_uncertainty([("val", va, [predict(res.model, robot_model.pin_model, r)["tau"]
                                                             for r in va])])
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = out_dir / "model.onnx"
    export.export_onnx(res.model, robot_model, onnx_path, meta)
    (out_dir / "metrics.json").write_text(json.dumps(summary, indent=2, default=float))
    (out_dir / "spec.json").write_text(json.dumps(spec))
    return onnx_path


def _row_spec(name: str, settings: dict[str, Any], train: Sequence[Path], val: Sequence[Path], minutes: float,
              epochs: int, seed: int) -> dict[str, Any]:
    return {"row": name, **settings, "train": [str(p) for p in train], "val": [str(p) for p in val],
            "minutes": minutes, "epochs": epochs, "seed": seed, "cache_version": CACHE_VERSION,
            "artifact_version": ARTIFACT_VERSION,
            "data_sha256": _files_digest([*train, *val])}


def train_row(robot: str, row: str, train: Sequence[Path], val: Sequence[Path], out_dir: Path,
              minutes: float, epochs: int = 200, seed: int = 0, progress: bool = True) -> Path:
    """Fit and export the model of one table row on its own (cached by ``spec.json``); returns ``model.onnx``.

    Uses ``idyn_ros.models.training.fit`` (or ``auto.fit_auto`` for the auto row) + ``idyn_ros.models.export``.
    """
    spec = _row_spec(row, MODEL_ROWS[row], train, val, minutes, epochs, seed)
    if _cached(out_dir, spec):
        return Path(out_dir) / "model.onnx"
    import torch  # noqa: F401  (training layer; never imported by control/runtime)

    from idyn_ros.models import training
    from idyn_ros.models.auto import fit_auto
    from idyn_ros.models.sources import load_recordings, load_robot
    from idyn_ros.models.zoo import ModelConfig

    robot_model = load_robot(robot)
    tr = load_recordings(train, robot_model)
    va = load_recordings(val, robot_model)
    cfg = ModelConfig(**MODEL_ROWS[row], epochs=epochs, seed=seed)
    t0 = time.perf_counter()
    if cfg.kind == "auto":
        res, _ = fit_auto(cfg, robot_model, tr, va, minutes, progress)
    else:
        res = training.fit(cfg, robot_model, tr, va, out_dir=None, max_minutes=minutes, progress=progress)
    return _export_row(res, robot_model, va, out_dir, spec, {"fit_seconds": time.perf_counter() - t0})


def train_auto_rows(robot: str, train: Sequence[Path], val: Sequence[Path], root: Path, minutes: float,
                    epochs: int = 200, seed: int = 0, progress: bool = True,
                    rows: Sequence[str] = tuple(AUTO_ROWS)) -> dict[str, Path]:
    """One auto fit (``minutes`` in total); its candidates and winner exported as the ``AUTO_ROWS`` rows (cached).

    Each row's metrics.json carries the auto fit's whole candidate table (``auto_candidates``) and, for the auto
    row, which candidate won (``selected``)."""
    from idyn_ros.models.auto import CANDIDATES  # in the key: a changed candidate set retrains (imports torch)

    root = Path(root)
    candidates = [[name, dict(sorted(over.items()))] for name, over in CANDIDATES]
    specs = {row: _row_spec(row, {"kind": "auto", "candidate": AUTO_ROWS[row], "candidates": candidates}, train, val,
                            minutes, epochs, seed) for row in rows}
    if all(_cached(root / row, specs[row]) for row in rows):
        return {row: root / row / "model.onnx" for row in rows}
    import torch  # noqa: F401  (training layer)

    from idyn_ros.models.auto import fit_auto
    from idyn_ros.models.sources import load_recordings, load_robot
    from idyn_ros.models.zoo import ModelConfig

    robot_model = load_robot(robot)
    tr = load_recordings(train, robot_model)
    va = load_recordings(val, robot_model)
    t0 = time.perf_counter()
    winner, candidates = fit_auto(ModelConfig(kind="auto", epochs=epochs, seed=seed), robot_model, tr, va, minutes,
                                  progress)
    table = [c.row() for c in candidates]
    extra = {"auto_candidates": table, "selected": winner.cfg.extra.get("candidate"),
             "fit_seconds": time.perf_counter() - t0}
    by_name = {c.name: c.result for c in candidates if c.result is not None}
    out = {}
    for row in rows:
        res = winner if row == "auto" else by_name.get(AUTO_ROWS[row])
        if res is None:
            continue  # a candidate skipped for want of budget: the row reports "no trained model"
        out[row] = _export_row(res, robot_model, va, root / row, specs[row], extra)
    return out


def ensure_models(robot: str, workdir: Path, rows: Sequence[str], data: DataSpec, minutes_per_model: float,
                  epochs: int = 200, progress: bool = True) -> dict[str, Path]:
    """Record the data (cached) and train every row in ``rows`` that needs a model (cached): the ``AUTO_ROWS``
    among them in one auto fit of ``minutes_per_model`` per learned candidate, the others one by one."""
    from idyn_ros.models.auto import CANDIDATES
    from idyn_ros.progress import progress_bar

    with progress_bar(total=data.count, desc=f"{robot}: excitation data", unit="traj", enabled=progress) as bar:
        paths = record_dataset(robot, workdir, data, bar)
        bar.update(data.count - bar.n)
    train, val = split_paths(paths)
    root = Path(workdir) / "models" / robot
    out: dict[str, Path] = {}
    auto_rows = [r for r in rows if r in AUTO_ROWS]
    if auto_rows:
        learned = sum(1 for _, o in CANDIDATES if o["kind"] not in ("rbd", "rbd-friction"))
        out.update(train_auto_rows(robot, train, val, root, minutes_per_model * learned, epochs,
                                   progress=progress, rows=auto_rows))
    for row in rows:
        if row in MODEL_ROWS and row not in AUTO_ROWS:
            out[row] = train_row(robot, row, train, val, root / row, minutes_per_model, epochs, progress=progress)
    return out


def bench_data_spec(quick: bool = False) -> DataSpec:
    """The plant data every benchmark trains on (tracking tables, payload, UR5 trust stage): one spec, so one cache
    (two specs in one work dir re-recorded and retrained each other's models on every run)."""
    return DataSpec(count=4 if quick else 6, period=8.0 if quick else 10.0, budget_s=3.0 if quick else 8.0)


def bench_work_dir(workdir: Path, quick: bool = False) -> Path:
    """Where the benchmarks cache data and models: quick runs apart (other data and training specs)."""
    return Path(workdir) / "quick" if quick else Path(workdir)


def bench_models(robot: str, workdir: Path, rows: Sequence[str], quick: bool = False,
                 progress: bool = True) -> dict[str, Path]:
    """``ensure_models`` with the benchmarks' data and training specs: every benchmark gets the same cached model."""
    return ensure_models(robot, bench_work_dir(workdir, quick), rows, bench_data_spec(quick),
                         minutes_per_model=1.0 if quick else 4.0, epochs=60 if quick else 300, progress=progress)


def heldout_predictions(model_path: Path, robot: str, dataset_path: Path, max_seconds: float = 10.0) -> dict:
    """Runtime (ONNX, no torch) predictions on a held-out recording vs the measured torque.

    Steps the artifact tick by tick with its recurrent state at the recording's measured q, dq and
    filtered acceleration, as the feedforward would (the state reset at each gap: a file with gaps loads as one
    recording per segment). Returns t, tau (measured), and the prediction over its first ``max_seconds`` of samples.
    """
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models.sources import load_recordings
    from idyn_ros.runtime import ModelRuntime

    robot_model = RobotModel.from_robot(robot)
    recs = load_recordings([dataset_path], robot_model)
    rt = ModelRuntime(model_path, robot=robot_model)
    left = math.ceil(max_seconds * recs[0].rate_hz)
    out: dict[str, list] = {"t": [], "tau": [], "pred": [], "rbd": []}
    for rec in recs:
        N = min(len(rec.t), left)
        p = rt.replay(rec.q[:N], rec.dq[:N], rec.ddq[:N])
        for key, value in (("t", rec.t[:N]), ("tau", rec.tau[:N]), ("pred", p.total), ("rbd", p.rbd)):
            out[key].append(value)
        left -= N
        if left <= 0:
            break
    return {key: np.concatenate(parts) for key, parts in out.items()}
