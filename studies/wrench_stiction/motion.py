"""Study: the UR5 force estimate in motion, against contact-free twins (the same program without pushes).

Run from the repository root with idyn_ros importable and ../shared/data/ur5_ft present:

    python studies/wrench_stiction/motion.py [--work DIR]

Trains rbd-friction on the benchmark's split (``idyn_ros.bench.ur5.train_model``), replays the two pushed runs
without a sensor through ``idyn wrench``'s code path and scores them against their twins (``score_twin``), twice:
with the re-zero bias applied at its own pose only (the product since d861572) and, patched in here, everywhere as
before. Whether the trust stage's sigma holds in motion there (where the twin reference is quiet), and how exact a twin
reference is on the plant, where an arm under impedance control yields to the pushes. Then, from the
recordings alone: how much of the currents' content above 8 Hz repeats between a pushed run and its twin, and at which
spatial frequency (cycles per joint turn) the wrists' part of it sits on No6.
Writes results/motion.json.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.bench import run_provenance, write_result
from idyn_ros.bench.ur5 import PUSHED_NO_TRUTH, TWINS, _data, train_model
from idyn_ros.control import wrench_trust as wt
from idyn_ros.dynamics import RobotModel
from idyn_ros.experiments import wrench_replay as wr

RESULTS = Path(__file__).resolve().parent / "results"
HIGH_PASS_HZ = 8.0
RICHEST = "Movement_No6_Acc_slow_Verify_Model"


def twin_scores(model: str, root: Path, robot: RobotModel) -> dict[str, Any]:
    """Twin scores of both pushed runs, the bias at its pose (now) and everywhere (before)."""
    now = wt.TrustedWrench._external

    def everywhere(self: wt.TrustedWrench, tau_ext: np.ndarray, dq: np.ndarray, at_zero_pose: bool) -> None:
        now(self, tau_ext, dq, True)

    out: dict[str, Any] = {}
    d = root / "ur5_ft"
    for label, external in (("bias_at_its_pose", now), ("bias_everywhere", everywhere)):
        wt.TrustedWrench._external = external
        try:
            for name in PUSHED_NO_TRUTH:
                rep = wr.replay(model, d / name, robot)
                summary, arrays = wr.score(rep, d / name, None, robot=robot)
                twin, _ = wr.score_twin(rep, d / TWINS[name], robot, arrays.get("vendor"))
                out.setdefault(label, {})[name] = {
                    "ours_rmse_mean_nm": twin["ours_rmse_mean_nm"], "vendor_rmse_mean_nm": twin["vendor_rmse_mean_nm"],
                    "zero_rmse_mean_nm": twin["zero_rmse_mean_nm"], "per_joint": twin["per_joint"],
                    "ours_force_rms_n": summary["ours"]["force_rms_n"], "rezeros": summary["ours"]["rezeros"]}
        finally:
            wt.TrustedWrench._external = now
    return out


def sigma_calibration(model: str, root: Path, robot: RobotModel) -> dict[str, Any]:
    """Per joint, on the pushed runs' stretches where the twin reference is under 1 Nm and the joint slides: the share
    of our tau_ext within 2 sigma of it (sigma: the trust stage's moving one, the artifact's) and RMSE / sigma."""
    from idyn_ros.dynamics.friction import DQ_LIM
    from idyn_ros.models.artifact import read_metadata

    sigma = np.asarray(read_metadata(model)["uncertainty"]["tau_sigma_nm"])
    d = root / "ur5_ft"
    out: dict[str, Any] = {"sigma_nm": sigma.tolist()}
    for name in PUSHED_NO_TRUTH:
        rep = wr.replay(model, d / name, robot)
        _, reference = wr.score_twin(rep, d / TWINS[name], robot)
        err = rep.tau_ext - reference
        quiet = np.isfinite(reference) & (np.abs(reference) < 1.0) & (np.abs(rep.dq) > DQ_LIM)
        out[name] = {"within_2_sigma": [float(np.mean(np.abs(err[quiet[:, j], j]) < 2 * sigma[j])) for j in range(6)],
                     "rmse_over_sigma": [float(np.sqrt(np.mean(err[quiet[:, j], j] ** 2)) / sigma[j])
                                         for j in range(6)]}
    return out


def sigma_sources(model: str, root: Path, robot: RobotModel) -> dict[str, Any]:
    """The trust stage's moving sigma from three sources, each replayed through ``idyn wrench``'s path (patched in
    here): the artifact's (the model's validation residual RMSE, the product), the same residuals binned by each
    joint's own speed (quartiles of its moving samples, interpolated), and the observer's own tau_ext on the
    validation run where each joint slides. Contact flagged on the held-out contact-free No1 and on the pushes,
    calibration on the twins' quiet sliding stretches, No10 unchanged (its sigma is the rest one)."""
    from idyn_ros.bench.ur5 import VAL
    from idyn_ros.dynamics.friction import DQ_LIM
    from idyn_ros.models.artifact import read_metadata
    from idyn_ros.models.current_gains import to_torque
    from idyn_ros.models.sources import load_recordings
    from idyn_ros.runtime.model_runtime import ModelRuntime

    d = root / "ur5_ft"
    meta = read_metadata(model)
    artifact = np.asarray(meta["uncertainty"]["tau_sigma_nm"])
    runtime = ModelRuntime(model, robot)
    res, speed = [], []
    for r in to_torque(load_recordings([d / VAL], robot), np.asarray(meta["effort"]["torque_constants"])):
        for k in range(len(r.t)):
            res.append(runtime.step(r.q[k], r.dq[k], r.ddq[k]).total - r.tau[k])
            speed.append(np.abs(r.dq[k]))
    res, speed = np.array(res), np.array(speed)
    bins: list[tuple[np.ndarray, np.ndarray]] = []
    for j in range(robot.n):
        moving = speed[:, j] > DQ_LIM
        edges = np.quantile(speed[moving, j], np.linspace(0, 1, 5))
        parts = [moving & (speed[:, j] >= a) & (speed[:, j] <= b) for a, b in itertools.pairwise(edges)]
        bins.append((np.array([np.median(speed[m, j]) for m in parts]),
                     np.array([np.sqrt(np.mean(res[m, j] ** 2)) for m in parts])))
    val = wr.replay(model, d / VAL, robot)
    observer = np.array([np.sqrt(np.nanmean(val.tau_ext[np.abs(val.dq[:, j]) > DQ_LIM, j] ** 2))
                         for j in range(robot.n)])
    out: dict[str, Any] = {"artifact_sigma_nm": artifact.tolist(), "observer_sigma_nm": observer.tolist(),
                           "by_speed": [{"speed_rad_s": c.tolist(), "sigma_nm": v.tolist()} for c, v in bins],
                           "variants": {}}
    update, from_model = wt.TrustedWrench.update, wt.TrustedWrench.from_model.__func__

    def by_speed(self: wt.TrustedWrench, stamp_ns: int, q: np.ndarray, dq: np.ndarray, tau_ext: np.ndarray) -> Any:
        for j, (c, v) in enumerate(bins):
            self.tau_sigma[j] = np.interp(abs(dq[j]), c, v)
            self._model_var[j] = self.tau_sigma[j] ** 2
        return update(self, stamp_ns, q, dq, tau_ext)

    def observed(cls: Any, rbd: Any, m: Any, settings: Any = None, tau_sigma: Any = None,
                 tau_sigma_rest: Any = None) -> wt.TrustedWrench:
        return from_model(cls, rbd, m, settings or wt.TrustSettings(), observer, tau_sigma_rest)

    for label in ("artifact", "by_speed", "observer"):
        if label == "by_speed":
            wt.TrustedWrench.update = by_speed
        if label == "observer":
            wt.TrustedWrench.from_model = classmethod(observed)
        try:
            row: dict[str, Any] = {}
            rep = wr.replay(model, d / "Movement_No1", robot)
            row["no1_flagged"] = float(np.mean(rep.contact))
            for name in PUSHED_NO_TRUTH:
                rep = wr.replay(model, d / name, robot)
                _, ref = wr.score_twin(rep, d / TWINS[name], robot)
                largest = np.max(np.abs(np.nan_to_num(ref)), axis=1)
                sliding = np.abs(rep.dq) > DQ_LIM
                quiet = np.isfinite(ref) & (np.abs(ref) < 1.0) & sliding
                sigma = {"artifact": artifact, "observer": observer}.get(label)
                row[name] = {"flagged_push_above_15nm": float(np.mean(rep.contact[largest > 15])),
                             "flagged_all_quiet": float(np.mean(rep.contact[(largest < 1) & np.any(sliding, 1)]))}
                if sigma is not None:
                    err = rep.tau_ext - ref
                    row[name]["within_2_sigma"] = [float(np.mean(np.abs(err[quiet[:, j], j]) < 2 * sigma[j]))
                                                   for j in range(robot.n)]
            rep = wr.replay(model, d / "Movement_No10_Standstill_ForceSensor_Fx", robot)
            row["no10_ratio"] = wr.score(rep, d / "Movement_No10_Standstill_ForceSensor_Fx", "/ft_sensor/wrench",
                                         robot=robot)[0]["rmse_ratio_ours_to_vendor"]
        finally:
            wt.TrustedWrench.update, wt.TrustedWrench.from_model = update, classmethod(from_model)
        out["variants"][label] = row
    return out


def twin_on_the_plant(gains: str) -> dict[str, Any]:
    """How exact the twin reference is when the arm yields: the UR5 plant (true profile) runs one slow reference twice
    under ``gains`` with the RBD feedforward, the second time pushed at the flange (20 N down at 3 s, 15 N along x at
    6 s, 1 s each); per joint while it slides in both runs, the twin reference (free torque - pushed torque) against
    the plant's true external joint torque."""
    from idyn_ros.data.trajectories import FourierTrajectory
    from idyn_ros.dynamics.friction import DQ_LIM
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import FourierReference, controller_for, run_episode

    robot = RobotModel.from_robot("ur5")
    q0 = np.array([0.0, -1.571, 1.571, -1.571, -1.571, 0.0])
    rng = np.random.default_rng(1)
    reference = FourierReference(FourierTrajectory(q0, 0.15 * rng.normal(0, 1, (6, 3)),
                                                   0.15 * rng.normal(0, 1, (6, 3)), 10.0))
    def push(wrench: np.ndarray) -> Any:
        return lambda plant: plant.apply_wrench(None, wrench, 1.0)

    runs = []
    for pushes in ((), ((3.0, [0.0, 0.0, -20.0]), (6.0, [15.0, 0.0, 0.0]))):
        events = [(t0, push(np.concatenate([f, np.zeros(3)]))) for t0, f in pushes]
        controller = controller_for("ur5", robot, gains, make_feedforward(robot, "rbd", None))
        ep = run_episode(Plant("ur5", "true"), controller, reference, hold=0.5, events=events)
        if ep.failed:
            raise RuntimeError(ep.reason)
        runs.append(ep)
    free, pushed = runs
    error = (free.tau - pushed.tau) - pushed.tau_ext
    slide = (np.abs(free.dq) > DQ_LIM) & (np.abs(pushed.dq) > DQ_LIM)

    def rms(x: np.ndarray) -> list[float]:
        return [float(np.sqrt(np.mean(x[slide[:, j], j] ** 2))) if slide[:, j].any() else float("nan")
                for j in range(6)]

    return {"gains": gains, "q_apart_rms_mrad": (1e3 * np.sqrt(np.mean((free.q - pushed.q) ** 2, 0))).tolist(),
            "true_rms_nm": rms(pushed.tau_ext), "twin_error_rms_nm": rms(error)}


def ripple(root: Path, robot: RobotModel) -> dict[str, Any]:
    """Currents above HIGH_PASS_HZ: correlation between each pushed run and its aligned twin, and the strongest
    spatial frequency of each joint on the richest run (Lomb-Scargle over q while the joint moves)."""
    from scipy.signal import butter, filtfilt, lombscargle

    from idyn_ros.data.wrenches import read_joint_states

    d = root / "ur5_ft"
    names = robot.joint_names
    out: dict[str, Any] = {"high_pass_hz": HIGH_PASS_HZ, "repeat_corr": {}, "spatial_peak": {}}
    for pushed, free in TWINS.items():
        a, b = read_joint_states(d / pushed, names), read_joint_states(d / free, names)
        ta, tb = (a.t_ns - a.t_ns[0]) * 1e-9, (b.t_ns - b.t_ns[0]) * 1e-9
        shift, _ = wr.align_twin(ta, a.q, tb, b.q)  # both from their own first message
        fs = 1.0 / np.median(np.diff(ta))
        hb, ha = butter(2, HIGH_PASS_HZ / (fs / 2), "high")
        inside = (ta + shift >= tb[0]) & (ta + shift <= tb[-1])
        corr = []
        for j in range(len(names)):
            x = filtfilt(hb, ha, a.effort[:, j])[inside]
            y = np.interp(ta[inside] + shift, tb, filtfilt(hb, ha, b.effort[:, j]))
            corr.append(float(np.corrcoef(x, y)[0, 1]))
        out["repeat_corr"][pushed] = dict(zip(names, corr, strict=True))
    s = read_joint_states(d / RICHEST, names)
    fs = 1.0 / np.median(np.diff(s.t_ns * 1e-9))
    hb, ha = butter(2, HIGH_PASS_HZ / (fs / 2), "high")
    cycles_per_rad = np.linspace(5.0, 400.0, 8000)
    for j, name in enumerate(names):
        h = filtfilt(hb, ha, s.effort[:, j])
        moving = np.abs(s.dq[:, j]) > 0.05
        power = lombscargle(s.q[moving, j], h[moving] - h[moving].mean(), 2 * np.pi * cycles_per_rad, normalize=True)
        k = int(np.argmax(power))
        out["spatial_peak"][name] = {"cycles_per_joint_turn": float(cycles_per_rad[k] * 2 * np.pi),
                                     "normalised_power": float(power[k]),
                                     "high_pass_current_std_a": float(h[moving].std()),
                                     "current_std_a": float(s.effort[moving, j].std())}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("runs") / "study_wrench_stiction")
    args = parser.parse_args()
    root = _data()
    robot = RobotModel.from_robot("ur5")
    model = train_model("rbd-friction", args.work, root)["artifact"]
    scores = twin_scores(model, root, robot)
    for label, runs in scores.items():
        for name, r in runs.items():
            print(f"{label:<17} {name:<60} ours {r['ours_rmse_mean_nm']:.2f} UR {r['vendor_rmse_mean_nm']:.2f} zero "
                  f"{r['zero_rmse_mean_nm']:.2f} Nm; |f| RMS {r['ours_force_rms_n']:.1f} N", flush=True)
    calib = sigma_calibration(model, root, robot)
    for name in PUSHED_NO_TRUTH:
        c = calib[name]
        print(f"sigma in motion, {name}: within 2 sigma " + " ".join(f"{v:.2f}" for v in c["within_2_sigma"])
              + "; RMSE / sigma " + " ".join(f"{v:.2f}" for v in c["rmse_over_sigma"]))
    sources = sigma_sources(model, root, robot)
    for label, row in sources["variants"].items():
        print(f"sigma from {label:<9}: No1 flagged {row['no1_flagged']:.2%}; pushes above 15 Nm flagged "
              + " / ".join(f"{row[n]['flagged_push_above_15nm']:.1%}" for n in PUSHED_NO_TRUTH) + "; quiet flagged "
              + " / ".join(f"{row[n]['flagged_all_quiet']:.1%}" for n in PUSHED_NO_TRUTH)
              + f"; No10 {row['no10_ratio']:.3f}", flush=True)
    plant = [twin_on_the_plant(g) for g in ("stiff", "medium")]
    for p in plant:
        print(f"plant, {p['gains']} gains: twins apart " + " ".join(f"{v:.1f}" for v in p["q_apart_rms_mrad"])
              + " mrad; true external torque " + " ".join(f"{v:.2f}" for v in p["true_rms_nm"])
              + " Nm; twin reference error " + " ".join(f"{v:.2f}" for v in p["twin_error_rms_nm"]) + " Nm")
    rip = ripple(root, robot)
    for name, c in rip["repeat_corr"].items():
        print(f"above {HIGH_PASS_HZ:g} Hz, {name} vs its twin: corr " + " ".join(f"{v:.2f}" for v in c.values()))
    for name, p in rip["spatial_peak"].items():
        print(f"{RICHEST} {name}: peak at {p['cycles_per_joint_turn']:.0f} cycles per joint turn "
              f"(power {p['normalised_power']:.2f}); high-passed current std {p['high_pass_current_std_a']:.3f} A "
              f"of {p['current_std_a']:.3f} A")
    RESULTS.mkdir(parents=True, exist_ok=True)
    prov = run_provenance("python studies/wrench_stiction/motion.py")
    payload = {"model": "rbd-friction", "twins": scores, "sigma_calibration": calib, "sigma_sources": sources,
               "twin_on_the_plant": plant,
               "ripple": rip}
    print(f"wrote {write_result('motion', payload, '', prov, RESULTS)}")


if __name__ == "__main__":
    main()
