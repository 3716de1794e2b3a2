"""Model benchmarks: accuracy tables (real KUKA LWR4+ data and a synthetic known robot), ONNX
parity, runtime step latency, training throughput.

Run: ``python -m idyn_ros.bench.models [--kuka] [--synthetic] [--step] [--train-speed N] [--quick]``
or ``idyn bench --only models``. ``run_benchmarks()`` returns JSON-serialisable numbers:

- ``kuka``: per model, test nMSE per joint / mean / max on measurements_3 (trained on 1, early
  stopping on 2); nMSE = MSE / var(measured torque). Every row is exported to ONNX and the artifact
  re-evaluated by the runtime (``onnx_test_nmse_mean``, ``model_id``), DeLaN included.
- ``synthetic``: the same table on data from a perturbed "true" iiwa14, plus identified-vs-true
  parameter errors.
- ``model_step``: runtime step p50/p99 in us for the 7-DoF hybrid (both RBD backends).
- ``parity``: max |runtime - torch| over a 10 s sequence with state.
- ``training_speed``: hybrid E2E on N samples of a 7-DoF robot: wall time, epochs, learning curve,
  held-out (by trajectory) test nMSE of the hybrid vs its physics part vs nominal RBD.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.models.identification import DEFAULT_REG
from idyn_ros.models.metrics import torque_metrics

# (label, ModelConfig overrides). Learned models get the same wall-clock budget each; auto gets it per learned
# candidate it fits (it spends its total on them in turn).
TABLE: list[tuple[str, dict[str, Any]]] = [
    ("nominal URDF RBD", {"kind": "rbd", "id_method": "nominal", "friction_kinds": ()}),
    ("OLS RBD", {"kind": "rbd", "id_method": "ols", "friction_kinds": ()}),
    ("SDP RBD (consistent)", {"kind": "rbd", "id_method": "sdp", "friction_kinds": ()}),
    ("DiffBary RBD (consistent)", {"kind": "rbd", "id_method": "diffbary", "friction_kinds": ()}),
    ("nominal RBD + friction LS", {"kind": "rbd-friction", "id_method": "nominal"}),
    ("OLS RBD + friction", {"kind": "rbd-friction", "id_method": "ols"}),
    ("SDP RBD + friction", {"kind": "rbd-friction", "id_method": "sdp"}),  # its default: the geometric prior
    ("SDP RBD + friction, ridge prior", {"kind": "rbd-friction", "id_method": "sdp", "id_prior": "ridge",
                                         "reg": DEFAULT_REG}),
    ("DiffBary RBD + friction", {"kind": "rbd-friction", "id_method": "diffbary"}),
    ("hybrid E2E (DiffBary+fric+LSTM)", {"kind": "hybrid", "mode": "e2e"}),
    ("hybrid 2S (SDP+fric, then LSTM)", {"kind": "hybrid", "mode": "2s"}),
    ("hybrid-r E2E (+tau_RBD, r inputs)", {"kind": "hybrid-r", "mode": "e2e"}),
    ("hybrid-j E2E (per-joint MLP residual)", {"kind": "hybrid-j", "mode": "e2e"}),
    ("auto (idyn train's default)", {"kind": "auto"}),
    ("MLP hybrid 2S", {"kind": "mlp-hybrid", "mode": "2s"}),
    ("black-box LSTM", {"kind": "lstm"}),
    ("DeLaN + friction", {"kind": "delan", "lr": 1e-3}),
]


def _kuka_files() -> list[Path] | None:
    from idyn_ros.paths import shared_data_dir

    root = shared_data_dir()
    if root is None or not (root / "kuka_lwr4" / "measurements_3.npz").is_file():
        return None
    return [root / "kuka_lwr4" / f for f in ("kuka_lwr4.urdf", "measurements_1.npz", "measurements_2.npz",
                                              "measurements_3.npz")]


def _table(robot: Any, train: list, val: list, test: list, minutes: float, epochs: int,
           only: list[str] | None = None, out_dir: Path | None = None) -> dict[str, Any]:
    from idyn_ros.errors import TrainingError
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.zoo import E2E_KINDS, ModelConfig

    rows: dict[str, Any] = {}
    tmp = tempfile.TemporaryDirectory()  # run directories when out_dir is None: every row is exported
    root = Path(tmp.name) if out_dir is None else out_dir
    for label, over in TABLE:
        if only and not any(o in label for o in only):
            continue
        cfg = ModelConfig(epochs=epochs, **over)
        t0 = time.perf_counter()
        d = root / label.split(" (")[0].replace(" ", "_").replace("+", "")
        budget = minutes * _learned_candidates() if cfg.kind == "auto" else minutes
        try:
            res, m = train_run(cfg, robot, train, val, test, d, max_minutes=budget, progress=False,
                               allow_inconsistent=True)  # the table compares the unconstrained OLS too
        except TrainingError as exc:  # `idyn train` refuses to export it: that is this row's result, not a crash
            rows[label] = {"refused": str(exc), "seconds": round(time.perf_counter() - t0, 1)}
            print(f"  {label:<36} refused: {exc}", flush=True)
            continue
        row = {
            "test_nmse": m["test"]["nmse"], "test_nmse_mean": m["test"]["nmse_mean"],
            "test_nmse_max": m["test"]["nmse_max"], "test_rmse_nm": m["test"]["rmse_nm"],
            "test_minmax_nmse_mean": m["test"]["minmax_nmse_mean"],
            "val_nmse_mean": m["val"]["nmse_mean"], "train_nmse_mean": m["train"]["nmse_mean"],
            "seconds": round(time.perf_counter() - t0, 1), "stopped": m["stopped"],
            "model_id": m["model_id"], "onnx_test_nmse_mean": _onnx_nmse_mean(d / "model.onnx", robot, test),
        }
        if "selected" in m:
            row["selected"] = m["selected"]
        if cfg.kind == "auto":  # what a user's default model costs per tick (model_step.json "auto_on_this_data")
            step = step_latency(d / "model.onnx", n_steps=3000)
            row["runtime_step"] = {k: step[k] for k in ("pinocchio", "onnx")}
        if res.model.inertial is not None:
            from idyn_ros.models import rbd

            with __import__("torch").no_grad():
                pi = res.model.pi().double().numpy()
            row["min_pseudo_inertia_eig"] = float(rbd.min_pseudo_inertia_eig(pi).min())
            row["_pi"] = pi
        if res.model.inertial is not None and res.cfg.kind in E2E_KINDS:
            # what the physics part alone contributes inside the trained hybrid (Reuss Table II "RBD+Sign E2E")
            from idyn_ros.models.training import predict

            parts = [predict(res.model, robot.pin_model, r) for r in test]
            phys = np.concatenate([p["tau_rbd"] + p["tau_friction"] for p in parts])
            tau = np.concatenate([r.tau for r in test])
            row["physics_part_test_nmse_mean"] = torque_metrics(phys, tau)["nmse_mean"]
        rows[label] = row
        print(f"  {label:<36} test nMSE mean {row['test_nmse_mean']:.3f} max {row['test_nmse_max']:.3f}  "
              f"[{' '.join(f'{v:.2f}' for v in row['test_nmse'])}]  ONNX {row['onnx_test_nmse_mean']:.3f}  "
              f"({row['seconds']} s)", flush=True)
    tmp.cleanup()
    return rows


def _learned_candidates() -> int:
    from idyn_ros.models.auto import CANDIDATES

    return sum(1 for _, over in CANDIDATES if over["kind"] not in ("rbd", "rbd-friction"))


def _onnx_nmse_mean(artifact: Path, robot: Any, test: list) -> float:
    """Mean test nMSE of the exported artifact stepped by the runtime (state carried per recording)."""
    from idyn_ros.runtime import ModelRuntime

    rt = ModelRuntime(artifact, robot)
    pred = np.concatenate([rt.replay(r.q, r.dq, r.ddq).total for r in test])
    return torque_metrics(pred, np.concatenate([r.tau for r in test]))["nmse_mean"]


def kuka_table(minutes: float = 1.5, epochs: int = 300, only: list[str] | None = None,
               out_dir: Path | None = None) -> dict[str, Any]:
    """Train on measurements_1, validate on 2, test on 3 (another trajectory, twice as fast)."""
    from idyn_ros.models.sources import load_file, load_robot

    files = _kuka_files()
    if files is None:
        return {"skipped": "../shared/data/kuka_lwr4 not present"}
    robot = load_robot(str(files[0]))
    tr, va, te = (load_file(f, robot) for f in files[1:])
    print("KUKA LWR4+ (train 1, val 2, test 3):", flush=True)
    rows = _table(robot, tr, va, te, minutes, epochs, only, out_dir)
    for r in rows.values():
        r.pop("_pi", None)
    return {"joint_names": list(robot.joint_names), "rows": rows, "minutes_per_model": minutes}


def synthetic_table(minutes: float = 1.0, epochs: int = 300, only: list[str] | None = None) -> dict[str, Any]:
    """Same table on a perturbed iiwa14 with friction outside the model class; parameter errors."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models import rbd
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot

    robot = RobotModel.from_robot("iiwa14")
    truth = make_true_robot(robot.pin_model, seed=1)
    tr = [fourier_recording(robot.pin_model, truth, seed=10, duration=25.0)]
    va = [fourier_recording(robot.pin_model, truth, seed=11, duration=10.0)]
    te = [fourier_recording(robot.pin_model, truth, seed=12, duration=25.0, speed=2.0)]
    print("synthetic iiwa14 (train, val and test on different paths; test 2x faster):", flush=True)
    rows = _table(robot, tr, va, te, minutes, epochs, only)
    pi_true = truth.pi
    pi_nom = rbd.inertial_parameters(robot.pin_model)
    Y = rbd.regressor_batch(robot.pin_model, te[0].q, te[0].dq, te[0].ddq)
    tau_true = Y @ pi_true.ravel()
    for row in rows.values():
        pi = row.pop("_pi", None)
        if pi is None:
            continue
        row["mass_rel_error"] = (np.abs(pi[:, 0] - pi_true[:, 0]) / pi_true[:, 0]).tolist()
        row["rbd_torque_rmse_vs_truth_nm"] = float(np.sqrt(((Y @ pi.ravel() - tau_true) ** 2).mean()))
    nominal_err = float(np.sqrt(((Y @ pi_nom.ravel() - tau_true) ** 2).mean()))
    return {"rows": rows, "nominal_rbd_torque_rmse_vs_truth_nm": nominal_err,
            "true_mass_kg": pi_true[:, 0].tolist()}


def step_latency(artifact: Path | None = None, n_steps: int = 5000) -> dict[str, Any]:
    """Runtime step p50/p99 (us) for a 7-DoF hybrid (trains a short one when no artifact given)."""
    from idyn_ros.runtime import ModelRuntime

    tmp = None
    robot = None
    if artifact is None:
        tmp = tempfile.TemporaryDirectory()
        artifact, robot = small_hybrid(Path(tmp.name))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_steps, 3, 7))
    out: dict[str, Any] = {"artifact": str(artifact)}
    for backend in ("pinocchio", "onnx"):
        rt = ModelRuntime(artifact, robot, rbd_backend=backend)
        rt.warm_up(X[0, 0], steps=500)
        ts = np.empty(n_steps)
        for i in range(n_steps):
            t0 = time.perf_counter_ns()
            rt.step(X[i, 0], X[i, 1], X[i, 2])
            ts[i] = time.perf_counter_ns() - t0
        out[backend] = {"p50_us": float(np.percentile(ts, 50) / 1e3), "p99_us": float(np.percentile(ts, 99) / 1e3)}
    out["p50_us"], out["p99_us"] = out["pinocchio"]["p50_us"], out["pinocchio"]["p99_us"]
    if tmp is not None:
        tmp.cleanup()
    return out


def small_hybrid(out: Path, epochs: int = 2, robot_name: str = "iiwa14", rate_hz: float = 200.0
                 ) -> tuple[Path, Any]:
    """A hybrid of the default architecture, briefly trained on a synthetic recording at ``rate_hz``: what costs
    time at run time is the architecture, not the training."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.zoo import ModelConfig

    robot = RobotModel.from_robot(robot_name)
    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), duration=10.0, rate_hz=rate_hz)
    train_run(ModelConfig(kind="hybrid", epochs=epochs), robot, [rec], out_dir=out, progress=False)
    return out / "model.onnx", robot


def parity(seconds: float = 10.0) -> dict[str, Any]:
    """Max |runtime - torch| over ``seconds`` of a 200 Hz test trajectory, state carried."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models.pipeline import load_model
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import predict
    from idyn_ros.runtime import ModelRuntime

    with tempfile.TemporaryDirectory() as tmp:
        artifact, robot = small_hybrid(Path(tmp))
        model, _ = load_model(Path(tmp))
        rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model), seed=5, duration=seconds)
        ref = predict(model, robot.pin_model, rec)
        out: dict[str, Any] = {"seconds": seconds, "steps": rec.n_samples,
                               "max_abs_tau_nm": float(np.abs(ref["tau"]).max())}
        for backend in ("pinocchio", "onnx"):
            rt = ModelRuntime(artifact, RobotModel.from_robot("iiwa14"), rbd_backend=backend)
            got, _, _, res = rt.replay(rec.q, rec.dq, rec.ddq)
            out[backend] = {"max_abs_diff_tau_nm": float(np.abs(got - ref["tau"]).max()),
                            "max_abs_diff_residual_nm": float(np.abs(res - ref["tau_residual"]).max())}
    return out


def training_speed(n_samples: int = 100_000, max_minutes: float = 10.0, epochs: int = 300,
                   batch: int = 64) -> dict[str, Any]:
    """Hybrid E2E on ``n_samples`` of 7-DoF data from a "true" iiwa14: wall time, epochs, learning curve,
    and held-out test nMSE of the hybrid vs its physics part vs nominal RBD.

    Why this data: the true robot has perturbed inertials and friction outside the model class
    (``models.synthetic``), so the hybrid has something to learn. Each recording is ONE period
    (10 s) of its own random Fourier path: longer recordings of a periodic path repeat the same
    samples, which is what made an earlier version of this benchmark (5 paths x 100 s) overfit from
    epoch 1 on (train loss falling, validation rising). Validation and test are other paths (split by
    trajectory, never by sample). "Converged" = early stopping fired (no validation improvement for
    ``patience`` epochs), not the time budget; ``val_curve`` shows the flattening.
    """
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models import rbd
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.models.training import fit, predict
    from idyn_ros.models.zoo import ModelConfig

    robot = RobotModel.from_robot("iiwa14")
    pin = robot.pin_model
    truth = make_true_robot(pin, seed=1)
    period, rate = 10.0, 200.0
    n_tr = max(1, round(n_samples / (period * rate)))

    def paths(seed0: int, k: int) -> list:
        return [fourier_recording(pin, truth, seed=seed0 + i, duration=period, period=period, rate_hz=rate)
                for i in range(k)]

    tr, va, te = paths(10_000, n_tr), paths(20_000, 5), paths(30_000, 10)
    cfg = ModelConfig(kind="hybrid", mode="e2e", epochs=epochs, batch=batch)
    t0 = time.perf_counter()
    res = fit(cfg, robot, tr, va, max_minutes=max_minutes, progress=False)
    wall = time.perf_counter() - t0

    tau = np.concatenate([r.tau for r in te])
    parts = [predict(res.model, pin, r) for r in te]
    pi_nom = rbd.inertial_parameters(pin).ravel()
    nominal = np.concatenate([rbd.regressor_batch(pin, r.q, r.dq, r.ddq) @ pi_nom for r in te])
    true_tau = np.concatenate([rbd.regressor_batch(pin, r.q, r.dq, r.ddq) @ truth.pi.ravel() + truth.friction(r.dq)
                               for r in te])

    def nmse(pred: np.ndarray) -> dict[str, float]:
        m = torque_metrics(pred, tau)
        return {"mean": m["nmse_mean"], "max": m["nmse_max"]}

    vals = [h["val"] for h in res.history]
    step = max(1, len(vals) // 20)
    return {
        "n_samples": int(sum(r.n_samples for r in tr)), "n_train_paths": n_tr, "n_val_paths": len(va),
        "n_test_paths": len(te), "batch": batch, "wall_s": round(wall, 1), "epochs": len(res.history),
        "s_per_epoch": round(wall / max(len(res.history), 1), 2), "stopped": res.stopped,
        "converged": res.early_stopped,
        "best_epoch": int(np.argmin(vals)) if vals else None,
        "val_initial_physics_only": res.initial_val,
        "val_curve": [[i, vals[i]] for i in sorted({*range(0, len(vals), step), len(vals) - 1}) if i >= 0],
        "test_nmse": {
            "hybrid": nmse(np.concatenate([p["tau"] for p in parts])),
            "hybrid_physics_part": nmse(np.concatenate([p["tau_rbd"] + p["tau_friction"] for p in parts])),
            "nominal_rbd": nmse(nominal),
            "truth_noise_floor": nmse(true_tau),
        },
    }


def run_benchmarks(quick: bool = False) -> dict[str, Any]:
    """All model benchmarks (a few minutes with ``quick``; ~25 min in full on a loaded 2-core box)."""
    import torch

    torch.set_num_threads(1)  # see models.training.MAX_THREADS
    minutes = 0.3 if quick else 1.5
    out: dict[str, Any] = {}
    out["model_step"] = step_latency()
    print(f"model_step: {out['model_step']}", flush=True)
    out["parity"] = parity(10.0)
    print(f"parity: {out['parity']}", flush=True)
    out["kuka"] = kuka_table(minutes=minutes)
    auto = out["kuka"].get("rows", {}).get("auto (idyn train's default)", {})
    if "runtime_step" in auto:
        out["model_step"]["auto_on_kuka"] = {"selected": auto.get("selected"), **auto["runtime_step"]}
    out["synthetic"] = synthetic_table(minutes=minutes / 1.5)
    out["training_speed"] = training_speed(20_000 if quick else 100_000, max_minutes=2 if quick else 10)
    print(f"training_speed: {out['training_speed']}", flush=True)
    return {**out, "_files": {"models": out, "model_step": out["model_step"]}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kuka", action="store_true", help="KUKA LWR4+ table")
    p.add_argument("--synthetic", action="store_true", help="synthetic known-robot table")
    p.add_argument("--step", action="store_true", help="runtime step latency + parity")
    p.add_argument("--train-speed", type=int, default=0, metavar="N", help="hybrid E2E on N samples")
    p.add_argument("--minutes", type=float, default=1.5, help="training budget per learned model")
    p.add_argument("--only", nargs="*", help="only table rows whose label contains one of these")
    p.add_argument("--out", type=Path, help="write the JSON here")
    p.add_argument("--keep-models", type=Path, help="keep the KUKA run directories here")
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # see models.training.MAX_THREADS
    res: dict[str, Any] = {}
    if a.step:
        res["model_step"] = step_latency()
        res["parity"] = parity()
    if a.kuka:
        res["kuka"] = kuka_table(a.minutes, only=a.only, out_dir=a.keep_models)
    if a.synthetic:
        res["synthetic"] = synthetic_table(a.minutes, only=a.only)
    if a.train_speed:
        res["training_speed"] = training_speed(a.train_speed)
    text = json.dumps(res, indent=2, default=float)
    if a.out:
        a.out.write_text(text)
    print(text if len(text) < 4000 else f"(JSON written to {a.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
