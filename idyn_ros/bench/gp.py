"""GP benchmarks (issue 8): LIP vs SE / GIP / LSE on synthetic Panda data and real KUKA LWR4+ data,
data efficiency, energy read-outs, training time and ONNX prediction latency.

Run: ``python -m idyn_ros.bench.gp [--quick] [--sections a,b]`` or ``idyn bench --only gp``. Writes one
bench/results/gp_<section>.json per section (so sections can run in parallel processes) and
gp_data_efficiency.png. Budget knobs are the module constants.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.bench import p50_p99, times_us

# Budget (the machine is 2 shared cores): hyperparameters by L-BFGS on a random subset of the
# training set, then the posterior on all N samples (see idyn_ros.models.gp.gp).
# Issue 8 finding: accuracy is set by the hyperparameter optimum. 3-DoF Panda, 250-point L-BFGS: test nMSE
# 0.0004 % vs 107 % with all hyperparameters at 1. 6-DoF pair 0 (noise start std(y)/1000): 100 points ->
# 6.7 % (pair 1: noise basin again, 9.7 %), 250 points / 57 evaluations -> 0.94 % (paper 0.81 %), kinetic
# energy 0.28 %; 102 hyperparameters need more than 100-150 points to be identified.
HYPER_POINTS = 250
LBFGS_ITERS = 50
FIT_SECONDS = 1200.0
LSE_TRAIN_POINTS = 150  # LSE uses the autodiff operator (no closed form): fewer samples, said in the output


def _fit_cap(iterations: int) -> float:
    """Wall-time cap [s] for one L-BFGS run of ``iterations``: FIT_SECONDS per LBFGS_ITERS, never less."""
    return FIT_SECONDS * max(1.0, iterations / LBFGS_ITERS)


def _in_workers(fn: Any, items: Any, workers: int) -> list:
    """``[fn(x) for x in items]`` in ``workers`` spawn processes (each sets its own torch threads)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return list(pool.map(fn, items))


def _fit_eval(kind: str, dof: int, tr: Any, te: Any, n_train: int | None = None, friction: bool = False,
              seed: int = 0, noise_init_ratio: float | None = None, method: str = "lbfgs",
              hyper_points: int = HYPER_POINTS, shared_noise: bool = False, val: Any = None,
              noise_floor_ratio: float = 0.0, iterations: int = LBFGS_ITERS) -> dict:
    """Fit one GP kind on ``tr`` and evaluate on ``te``; noise_init_ratio None = the kind's starts (below).

    shared_noise: one noise std for all joints; used on the synthetic sets, whose noise is i.i.d. 0.01 Nm on
    every joint (the authors' simulation setting); per-joint noise on real data.
    val: a held-out set; both noise starts are fitted and the lower val nMSE kept (real data, see fit_gp).
    """
    import torch

    from idyn_ros.models.gp.gp import stack_inputs
    from idyn_ros.models.gp.train import VAL_NOISE_STARTS, fit_gp, nmse_percent

    sl = slice(None) if n_train is None else slice(0, n_train)
    idx = np.arange(tr.q.shape[0])[sl]
    if n_train is not None and n_train < tr.q.shape[0]:
        idx = np.sort(np.random.default_rng(seed).choice(tr.q.shape[0], n_train, replace=False))
    X = stack_inputs(tr.q[idx], tr.dq[idx], tr.ddq[idx])
    Y = torch.as_tensor(tr.tau_noisy[idx], dtype=torch.float64)
    # noise starts per kind: idyn_ros.models.gp.train.NOISE_STARTS (LIP/LSE low; SE/GIP both, better NLL kept)
    starts = (noise_init_ratio,) if noise_init_ratio is not None else None
    select_on = None
    if val is not None:
        select_on = (stack_inputs(val.q, val.dq, val.ddq), torch.as_tensor(val.tau, dtype=torch.float64))
        starts = starts or VAL_NOISE_STARTS
    gp, rep, start = fit_gp(kind, dof, X, Y, friction=friction, shared_noise=shared_noise, noise_starts=starts,
                            select_on=select_on, noise_floor_ratio=noise_floor_ratio, method=method,
                            iterations=iterations, max_hyper_points=hyper_points, seed=seed,
                            max_seconds=_fit_cap(iterations))
    fit_total = rep.seconds
    t0 = time.perf_counter()
    pred = gp.predict(stack_inputs(te.q, te.dq, te.ddq))[0].numpy()
    pred_s = time.perf_counter() - t0
    e = nmse_percent(pred, te.tau)
    # diagnostics: train error against the noise-free torques and the fitted noise std; a fitted noise far
    # above the true 0.01 Nm with a large train error means the optimiser explained signal as noise
    train_e = nmse_percent(gp.predict(X)[0].numpy(), tr.tau[idx])
    noise = gp.noise_std()
    return {"nmse": e, "mse": np.mean((pred - te.tau) ** 2, axis=0), "fit_seconds": fit_total,
            "predict_seconds": pred_s, "gp": gp, "n_train": len(idx),
            "train_nmse": train_e, "noise_std": noise, "nll": rep.nll, "evaluations": rep.iterations,
            "noise_start": {"ratio": start.ratio, "shared": start.shared}}


def diagnostics() -> dict:
    """Issue 8 evidence for where the gap to the paper comes from (LIP, pair 0: train seed 0, test seed 100).

    - 3 DoF: hyperparameters at their initial value 1 vs optimised (L-BFGS on 250 points): the kernel,
      the operator and the data are right when the optimum is reached (test nMSE ~0 %);
    - 6 DoF: noise start std(y)/10 vs std(y)/1000 with the bench budget: the high start ends in the basin
      where the small-torque joints are explained as noise (fitted noise >> 0.01 Nm, train nMSE > 1 %).
    Cost: tens of minutes on 2 busy cores (not in the default sections).
    """
    from idyn_ros.models.gp.synthetic import make_set

    out: dict[str, Any] = {}
    tr3, te3 = make_set(0, 3), make_set(100, 3)
    for label, kw in (("hyper_at_1", {"method": "none"}), ("optimised_250", {"hyper_points": 250})):
        r = _fit_eval("lip-gp", 3, tr3, te3, noise_init_ratio=0.1, **kw)
        out[f"dof3_{label}"] = {"test_nmse_percent": r["nmse"].round(4).tolist(),
                                "train_nmse_percent": r["train_nmse"].round(4).tolist(),
                                "noise_std": r["noise_std"].round(5).tolist()}
        print(f"[gp] diagnostics 3-DoF {label}: test {np.mean(r['nmse']):.4f} %", flush=True)
    tr6, te6 = make_set(0, 6), make_set(100, 6)
    for ratio in (0.1, 1e-3):
        r = _fit_eval("lip-gp", 6, tr6, te6, noise_init_ratio=ratio)
        out[f"dof6_noise_start_{ratio:g}"] = {
            "test_nmse_percent": r["nmse"].round(4).tolist(), "test_mean_percent": float(np.mean(r["nmse"])),
            "train_nmse_percent": r["train_nmse"].round(4).tolist(), "noise_std": r["noise_std"].round(5).tolist(),
            "nll_per_obs": r["nll"], "evaluations": r["evaluations"], "fit_seconds": r["fit_seconds"]}
        print(f"[gp] diagnostics 6-DoF noise start {ratio:g}: test {np.mean(r['nmse']):.3f} %", flush=True)
    return out


def synthetic_study(dof: int, pairs: int, kinds: tuple[str, ...]) -> dict:
    """Per-joint nMSE (median over pairs) for each kind; LIP energy nMSE vs pinocchio.

    Pair p trains on trajectory seed p and tests on seed 100 + p (independent trajectories, as the authors'
    Monte Carlo). Shared noise (the synthetic noise is i.i.d. on every joint).
    """
    from idyn_ros.models.gp import readouts
    from idyn_ros.models.gp.synthetic import make_set, true_energies
    from idyn_ros.models.gp.train import nmse_percent

    res: dict[str, Any] = {k: [] for k in kinds}
    energy_T, energy_U, fit_s = [], [], {k: [] for k in kinds}
    train_e: dict[str, list] = {k: [] for k in kinds}
    noise: dict[str, list] = {k: [] for k in kinds}
    gmse: dict[str, list] = {k: [] for k in kinds}
    kept_start: dict[str, list] = {k: [] for k in kinds}
    for p in range(pairs):
        tr, te = make_set(p, dof), make_set(100 + p, dof)
        for kind in kinds:
            n_train = LSE_TRAIN_POINTS if kind == "lse-gp" else None
            out = _fit_eval(kind, dof, tr, te, n_train=n_train, seed=p, shared_noise=True)
            res[kind].append(out["nmse"])
            fit_s[kind].append(out["fit_seconds"])
            train_e[kind].append(out["train_nmse"])
            noise[kind].append(out["noise_std"])
            gmse[kind].append(float(out["mse"].sum()))
            kept_start[kind].append(out["noise_start"])
            print(f"[gp] {dof}-DoF pair {p} {kind}: mean nMSE {np.mean(out['nmse']):.3f} % "
                  f"(per joint {np.round(out['nmse'], 2)}, train {np.mean(out['train_nmse']):.3f} %, "
                  f"noise std {out['noise_std'][0]:.4f}, start {out['noise_start']}, fit {out['fit_seconds']:.0f} s)",
                  flush=True)
            if kind == "lip-gp":
                T_true, U_true = true_energies(dof, te.q, te.dq)
                T_hat = readouts.kinetic_energy(out["gp"], te.q, te.dq)[0]
                U_hat = readouts.potential_energy(out["gp"], te.q)[0]
                U_hat = U_hat - U_hat[0] + U_true[0]  # U is known up to a constant: align at sample 0
                energy_T.append(float(nmse_percent(T_hat[:, None], T_true[:, None])[0]))
                energy_U.append(float(nmse_percent(U_hat[:, None], U_true[:, None])[0]))
    summary = {}
    for kind in kinds:
        arr = np.array(res[kind])  # (pairs, n)
        summary[kind] = {
            "median_nmse_percent_per_joint": np.median(arr, 0).round(4).tolist(),
            "mean_over_joints_of_median_percent": float(np.median(arr, 0).mean()),
            "global_mse_median_nm2": float(np.median(gmse[kind])),
            "n_train": LSE_TRAIN_POINTS if kind == "lse-gp" else 500,
            "fit_seconds_median": float(np.median(fit_s[kind])),
            "train_nmse_percent_median_per_joint": np.median(np.array(train_e[kind]), 0).round(4).tolist(),
            "noise_std_median": float(np.median(np.array(noise[kind]))),
            "per_pair_mean_nmse_percent": arr.mean(1).round(4).tolist(),
            "per_pair_nmse_percent": arr.round(4).tolist(),
            "noise_start_per_pair": kept_start[kind],
        }
    if "lip-gp" in kinds:
        summary["lip-gp"]["energy_nmse_percent_median"] = {
            "kinetic": float(np.median(energy_T)), "potential": float(np.median(energy_U)),
            "kinetic_per_pair": energy_T, "potential_per_pair": energy_U}
    # how often the paper's ordering (LIP < GIP < SE in mean nMSE) holds pair by pair
    order = [k for k in ("lip-gp", "gip-gp", "se-gp") if k in kinds]
    per_pair = np.array([np.array(res[k]).mean(1) for k in order])  # (kinds, pairs)
    holds = int(np.sum(np.all(np.diff(per_pair, axis=0) > 0, axis=0)))
    return {"dof": dof, "pairs": pairs, "models": summary,
            "ordering": {"kinds": order, "pairs_where_it_holds": holds, "pairs": pairs}}


def _lse_pair(dof: int, pair: int) -> dict:
    """One pair of lse_study: LSE on all 500 samples, GIP and SE refitted alongside (worker process)."""
    import torch

    torch.set_num_threads(1)
    from idyn_ros.models.gp.synthetic import make_set

    tr, te = make_set(pair, dof), make_set(100 + pair, dof)
    row: dict[str, Any] = {}
    for kind in ("lse-gp", "gip-gp", "se-gp"):
        out = _fit_eval(kind, dof, tr, te, seed=pair, shared_noise=True)
        row[kind] = {"nmse_percent": out["nmse"].round(4).tolist(), "mean_percent": float(np.mean(out["nmse"])),
                     "global_mse": float(out["mse"].sum()), "fit_seconds": out["fit_seconds"],
                     "evaluations": out["evaluations"], "noise_std": float(out["noise_std"][0])}
        print(f"[gp] lse {dof}-DoF pair {pair} {kind}: mean nMSE {np.mean(out['nmse']):.2f} % "
              f"(per joint {np.round(out['nmse'], 2)}), fit {out['fit_seconds']:.0f} s, "
              f"{out['evaluations']} evaluations", flush=True)
    return row


def lse_study(dof: int, pairs: int, workers: int) -> dict:
    """LSE on all 500 samples (the paper's N; the 6-DoF study fits it on LSE_TRAIN_POINTS) vs GIP and SE.

    Same pairs, seeds and hyperparameter budget as synthetic_study. Pairs run in ``workers`` processes of
    one torch thread each. Asks whether the paper's GIP < LSE < SE holds once LSE sees as much data.
    """
    from functools import partial

    rows = _in_workers(partial(_lse_pair, dof), range(pairs), workers)
    out: dict[str, Any] = {"dof": dof, "pairs": pairs, "n_train": 500, "hyper_points": HYPER_POINTS, "per_pair": rows}
    for kind in ("lse-gp", "gip-gp", "se-gp"):
        arr = np.array([r[kind]["nmse_percent"] for r in rows])
        out[kind] = {"median_nmse_percent_per_joint": np.median(arr, 0).round(4).tolist(),
                     "mean_over_joints_of_median_percent": float(np.median(arr, 0).mean()),
                     "global_mse_median_nm2": float(np.median([r[kind]["global_mse"] for r in rows])),
                     "fit_seconds_median": float(np.median([r[kind]["fit_seconds"] for r in rows]))}
    means = {k: np.array([r[k]["mean_percent"] for r in rows]) for k in ("gip-gp", "lse-gp", "se-gp")}
    out["ordering"] = {"kinds": ["gip-gp", "lse-gp", "se-gp"], "pairs": pairs,
                       "gip_lse_se_holds": int(np.sum((means["gip-gp"] < means["lse-gp"])
                                                      & (means["lse-gp"] < means["se-gp"]))),
                       "lse_below_se": int(np.sum(means["lse-gp"] < means["se-gp"]))}
    return out


def data_efficiency(sizes: tuple[int, ...], kinds: tuple[str, ...], pairs: int, out_png: Path | None) -> dict:
    """nMSE (per joint, mean over joints) and global MSE (sum of per-joint MSE, the paper's Fig. 4) vs N, 7 DoF.

    Training subsets are random draws of N from one 500-sample trajectory (seed 200 + p), tested on an
    independent trajectory (seed 300 + p). Shared noise, as the synthetic study.
    """
    from idyn_ros.models.gp.synthetic import make_set

    table: dict[str, dict[str, list]] = {
        k: {"nmse_mean_percent": [], "global_mse": [], "nmse_percent_per_joint": [], "fit_seconds": [],
            "noise_start": []}
        for k in kinds}
    for kind in kinds:
        for N in sizes:
            e_list, g_list, j_list, f_list = [], [], [], []
            for p in range(pairs):
                tr, te = make_set(200 + p, 7), make_set(300 + p, 7)
                out = _fit_eval(kind, 7, tr, te, n_train=N, seed=p, shared_noise=True)
                e_list.append(float(np.mean(out["nmse"])))
                g_list.append(float(out["mse"].sum()))
                j_list.append(out["nmse"])
                f_list.append(out["fit_seconds"])
            table[kind]["nmse_mean_percent"].append(float(np.median(e_list)))
            table[kind]["global_mse"].append(float(np.median(g_list)))
            table[kind]["nmse_percent_per_joint"].append(np.median(np.array(j_list), 0).round(3).tolist())
            table[kind]["fit_seconds"].append(float(np.median(f_list)))
            table[kind]["noise_start"].append(out["noise_start"])  # of the last pair (the bench runs one)
            print(f"[gp] data efficiency {kind} N={N}: nMSE {np.median(e_list):.3f} % "
                  f"(per joint {np.round(np.median(np.array(j_list), 0), 2)}), global MSE {np.median(g_list):.3f}",
                  flush=True)
    if out_png is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
        for kind in kinds:
            axes[0].semilogy(sizes, table[kind]["global_mse"], "o-", label=kind)
            axes[1].semilogy(sizes, table[kind]["nmse_mean_percent"], "o-", label=kind)
        axes[0].set_ylabel("global MSE [Nm^2] (sum over joints)")
        axes[1].set_ylabel("nMSE [%], mean over joints")
        for ax in axes:
            ax.set_xlabel("training samples N")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend()
        fig.suptitle(f"7-DoF Panda (synthetic), held-out trajectory, median of {pairs} pair(s)")
        fig.tight_layout()
        fig.savefig(out_png, dpi=120)
        plt.close(fig)
    return {"sizes": list(sizes), "pairs": pairs, "table": table, "png": str(out_png) if out_png else None}


# Hybrid rows of the models bench (same KUKA files and metric: train file 1, test file 3, per-joint nMSE).
KUKA_MODEL_ROWS = ("hybrid-r E2E (+tau_RBD, r inputs)", "hybrid E2E (DiffBary+fric+LSTM)",
                   "hybrid 2S (SDP+fric, then LSTM)", "SDP RBD + friction", "nominal URDF RBD")


def kuka_study(kinds: tuple[str, ...], n_train: int, test_stride: int) -> dict | None:
    """Real KUKA LWR4+: train on a random subsample of file 1, test on file 3 (every test_stride-th).

    Friction kernel on (real robot, eq 34-35), per-joint noise, noise start chosen on file 2. The learned
    hybrid models of the models issue are read from bench/results/models.json (they train on all of file 1
    with file 2 for early stopping and test on all of file 3), so the comparison names that file's revision.
    """
    from idyn_ros.bench import results_dir
    from idyn_ros.models.gp.synthetic import SyntheticSet
    from idyn_ros.models.gp.train import NOISE_FLOOR_RATIO
    from idyn_ros.paths import shared_data_dir

    root = shared_data_dir()
    if root is None or not (root / "kuka_lwr4" / "measurements_1.npz").is_file():
        return None

    def load(i: int, stride: int = 1) -> SyntheticSet:
        d = np.load(root / "kuka_lwr4" / f"measurements_{i}.npz")
        s = slice(None, None, stride)
        tau = d["torques"][s]
        return SyntheticSet(d["positions"][s], d["velocities"][s], d["accelerations"][s], tau, tau)

    tr, va, te = load(1), load(2, 5), load(3, test_stride)
    out: dict[str, Any] = {"n_train": n_train, "n_test": int(te.q.shape[0]), "test_stride": test_stride,
                           "train_file": "measurements_1.npz", "test_file": "measurements_3.npz",
                           "noise_start_selected_on": "measurements_2.npz, every 5th sample (val nMSE, fit_gp)",
                           "noise_floor_ratio": NOISE_FLOOR_RATIO}
    for kind in kinds:
        n = LSE_TRAIN_POINTS if kind == "lse-gp" else n_train
        r = _fit_eval(kind, 7, tr, te, n_train=n, friction=True, seed=0, val=va, noise_floor_ratio=NOISE_FLOOR_RATIO)
        out[kind] = {"nmse_percent_per_joint": r["nmse"].round(3).tolist(), "mean_percent": float(np.mean(r["nmse"])),
                     "max_percent": float(np.max(r["nmse"])), "n_train": n, "fit_seconds": r["fit_seconds"],
                     "noise_std": r["noise_std"].round(5).tolist(), "noise_start": r["noise_start"]}
        print(f"[gp] KUKA {kind}: mean nMSE {np.mean(r['nmse']):.2f} % (per joint {np.round(r['nmse'], 1)})",
              flush=True)
    models_json = results_dir() / "models.json"
    if models_json.is_file():
        saved = json.loads(models_json.read_text())
        rows = saved.get("kuka", {}).get("rows", {})
        out["from_models_bench"] = {
            "file": "bench/results/models.json", "revision": saved.get("_provenance", {}).get("git_revision"),
            "n_train": "all of file 1 (5027 samples), file 2 for early stopping",
            "rows": {name: {"nmse_percent_per_joint": (100 * np.array(rows[name]["test_nmse"])).round(3).tolist(),
                            "mean_percent": 100 * float(rows[name]["test_nmse_mean"]),
                            "max_percent": 100 * float(rows[name]["test_nmse_max"])}
                     for name in KUKA_MODEL_ROWS if name in rows}}
    return out


def kuka_noise_floor(floors: tuple[float, ...]) -> dict:
    """Sensitivity of the KUKA result to the noise floor (train.NOISE_FLOOR_RATIO, fixed a priori at 1 %).

    Same split as kuka_lwr4 with the noise start fixed at std(y)/10 (the start kuka_lwr4's validation picks),
    LIP and SE at each floor; test nMSE on file 3.
    """
    from idyn_ros.models.gp.synthetic import SyntheticSet
    from idyn_ros.paths import shared_data_dir

    root = shared_data_dir()
    if root is None or not (root / "kuka_lwr4" / "measurements_1.npz").is_file():
        return {}

    def load(i: int) -> SyntheticSet:
        d = np.load(root / "kuka_lwr4" / f"measurements_{i}.npz")
        return SyntheticSet(d["positions"], d["velocities"], d["accelerations"], d["torques"], d["torques"])

    tr, te = load(1), load(3)
    out: dict[str, Any] = {}
    for floor in floors:
        for kind in ("lip-gp", "se-gp"):
            r = _fit_eval(kind, 7, tr, te, n_train=500, friction=True, seed=0, noise_init_ratio=0.1,
                          noise_floor_ratio=floor)
            out[f"{kind}_floor_{floor:g}"] = {"mean_percent": float(np.mean(r["nmse"])),
                                              "nmse_percent_per_joint": r["nmse"].round(2).tolist(),
                                              "noise_std": r["noise_std"].round(5).tolist()}
            print(f"[gp] KUKA {kind} noise floor {floor:g}: mean nMSE {np.mean(r['nmse']):.1f} %", flush=True)
    return out


def latency_study(n_train: int, reps: int) -> dict:
    """Training time and prediction latency of the 7-DoF LIP GP at N = n_train (issue 8 acceptance).

    Fits the LIP with the bench settings (so the timing is the real training cost: hyperparameters on
    HYPER_POINTS samples, then the posterior on all N), then: the fast (alpha-contracted) vs direct posterior
    mean in float64, and p50/p99 of one query through each exported ONNX graph and through ModelRuntime.
    """
    import tempfile

    import onnxruntime as ort
    import torch

    from idyn_ros.models.gp.export import export_onnx
    from idyn_ros.models.gp.gp import stack_inputs
    from idyn_ros.models.gp.synthetic import make_set
    from idyn_ros.models.gp.train import fit_gp

    tr = make_set(7, 7)
    idx = slice(0, n_train)
    X = stack_inputs(tr.q[idx], tr.dq[idx], tr.ddq[idx])
    Y = torch.as_tensor(tr.tau_noisy[idx], dtype=torch.float64)
    gp, rep, start = fit_gp("lip-gp", 7, X, Y, shared_noise=True, iterations=LBFGS_ITERS,
                        max_hyper_points=HYPER_POINTS, max_seconds=FIT_SECONDS)
    t0 = time.perf_counter()
    gp.condition(X, Y)
    cond_s = time.perf_counter() - t0
    res: dict[str, Any] = {"n_train": n_train, "dof": 7, "torch_threads": torch.get_num_threads(),
                           "training_seconds": rep.seconds, "hyper_points": rep.hyper_points,
                           "noise_start_kept": {"ratio": start.ratio, "shared": start.shared},
                           "lbfgs_evaluations": rep.iterations, "condition_seconds": cond_s}
    print(f"[gp] training 7-DoF LIP, N = {n_train}: {rep.seconds:.0f} s ({rep.iterations} evaluations on "
          f"{rep.hyper_points} points; posterior on all N {cond_s:.1f} s)", flush=True)
    xs = stack_inputs(*(make_set(8, 7, n_samples=20).__dict__[k] for k in ("q", "dq", "ddq")))
    with torch.no_grad():  # exactness of the fast form in float64 (brief: 1e-6 relative)
        direct = gp.predict(xs)[0]
        fast = gp.kernel.contracted_mean(xs, gp.X, gp.alpha)
        terms = (gp.cross(xs, gp.X).abs() * gp.alpha.abs()[None, :, None, :]).sum((1, 3))  # sum_n,j |K_ij a_j|
    res["fast_vs_direct_float64_max_rel"] = float((fast - direct).abs().max() / direct.abs().max())
    # how much the sum cancels: float64 rounding of either form scales with sum |K alpha| / |tau|
    res["cancellation_factor"] = float(terms.max() / direct.abs().max())
    meta = {"model_kind": "lip-gp", "robot": "panda", "joint_names": [f"panda_joint{i}" for i in range(1, 8)],
            "sample_rate_hz": 10.0}
    # 20 held-out queries (another trajectory), rounded to the float32 the graph takes
    xs32 = xs.numpy().astype(np.float32)
    feed_list = [{"q": xs32[i : i + 1, :7], "dq": xs32[i : i + 1, 7:14], "ddq": xs32[i : i + 1, 14:]}
                 for i in range(xs32.shape[0])]
    feeds = feed_list[0]
    ref = gp.predict(torch.as_tensor(xs32.astype(np.float64)))[0].numpy()
    outs = {}
    with tempfile.TemporaryDirectory() as d:
        for form in ("direct", "fast"):
            path = export_onnx(gp, Path(d) / f"lip_{form}.onnx", meta, form=form)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            got = np.concatenate([sess.run(["tau"], f)[0] for f in feed_list])
            outs[form] = got
            res[f"onnx_{form}"] = {
                **p50_p99(times_us(lambda sess=sess: sess.run(None, feeds), reps, warmup=20)),
                "nodes": len(__import__("onnx").load(str(path)).graph.node),
                "max_rel_err_vs_torch_posterior": float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))}
        diff = np.max(np.abs(outs["fast"] - outs["direct"])) / np.max(np.abs(outs["direct"]))
        res["fast_vs_direct_onnx_max_rel"] = float(diff)
        from idyn_ros.runtime import ModelRuntime

        for form in ("direct", "fast"):  # the artifact through the same runtime the controller uses
            # no inertial parameters in a GP artifact: the whole graph must run ("onnx" backend)
            rt = ModelRuntime(str(Path(d) / f"lip_{form}.onnx"), rbd_backend="onnx")
            step = lambda rt=rt: rt.step(xs32[0, :7], xs32[0, 7:14], xs32[0, 14:])  # noqa: E731
            res[f"runtime_{form}"] = p50_p99(times_us(step, reps, warmup=20))
        print(f"[gp] one 7-DoF query, N = {n_train}, runtime: direct p50 {res['runtime_direct']['p50_us']:.0f} us, "
              f"fast p50 {res['runtime_fast']['p50_us']:.0f} us / p99 {res['runtime_fast']['p99_us']:.0f} us; "
              f"fast vs direct {res['fast_vs_direct_onnx_max_rel']:.1e} (ONNX), "
              f"{res['fast_vs_direct_float64_max_rel']:.1e} (float64)", flush=True)
    # Weight-space bound: for 7 DoF the kinetic posterior spans sum_i 5^i * i(i+1)/2 trig monomials;
    # one M(q) evaluation is at least a (1 x 78125) @ (78125 x 28) product. Time just that product.
    n_feat = 5**7
    B = np.random.default_rng(0).standard_normal((n_feat, 28))
    phi = np.ones(n_feat)
    tw = times_us(lambda: phi @ B, max(20, reps // 20), warmup=2)
    res["weight_space_lower_bound_us"] = {"p50": float(np.percentile(tw, 50)),
                                          "coefficients": int(sum(5**i * i * (i + 1) // 2 for i in range(1, 8)))}
    return res


def kernel_timing(dof: int = 7, n1: int = 10, n2: int = 10, reps: int = 2) -> dict:
    """Closed-form LIP blocks (lip.py) vs the generic autodiff operator (operator.py) on the same kernel.

    The decision in lip.py (hand-derived G G' k instead of autodiff at run time) rests on this timing; both
    are timed with and without the backward pass that training needs, on n1 x n2 pairs of random inputs.
    """
    import torch

    from idyn_ros.models.gp.lip import LIPKernel
    from idyn_ros.models.gp.operator import operator_kernel

    torch.manual_seed(0)
    k = LIPKernel(dof)
    with torch.no_grad():
        for p in k.parameters():
            p.copy_(0.4 * torch.randn_like(p))
    X1, X2 = torch.randn(n1, 3 * dof, dtype=torch.float64), torch.randn(n2, 3 * dof, dtype=torch.float64)

    def best(fn) -> float:  # s; the first call's tracing overhead is in the other reps' min
        return float(times_us(fn, reps, warmup=0).min()) * 1e-6

    def closed(backward: bool) -> None:
        K = k(X1, X2)
        if backward:
            K.sum().backward()

    def autodiff(backward: bool) -> None:
        K = operator_kernel(k.lagrangian_kernel(), X1, X2, dof)
        if backward:
            K.sum().backward()

    with torch.no_grad():
        diff = (k(X1, X2) - operator_kernel(k.lagrangian_kernel(), X1, X2, dof)).abs().max()
        scale = k(X1, X2).abs().max()
    pairs = n1 * n2
    out = {"dof": dof, "pairs": pairs, "max_rel_diff": float(diff / scale)}
    for label, bw in (("forward", False), ("forward_backward", True)):
        tc, ta = best(lambda bw=bw: closed(bw)), best(lambda bw=bw: autodiff(bw))
        out[label] = {"closed_form_us_per_block": 1e6 * tc / pairs, "autodiff_us_per_block": 1e6 * ta / pairs,
                      "speedup": ta / tc}
    print(f"[gp] kernel timing {dof} DoF: closed form {out['forward']['closed_form_us_per_block']:.1f} us/block, "
          f"autodiff {out['forward']['autodiff_us_per_block']:.1f} us/block (x{out['forward']['speedup']:.0f}; with "
          f"backward x{out['forward_backward']['speedup']:.0f}), max rel diff {out['max_rel_diff']:.1e}", flush=True)
    return out


def noise_start_check(cases: tuple | None = None) -> dict:
    """Shared-noise start at the largest vs the smallest joint's std(y)/1000 (LIP; the study uses the largest).

    Cases: 6-DoF pair 3 and 7-DoF pair 0 at N = 500 (the study's seeds), 7-DoF N = 50 and 100 (the
    data-efficiency draws). Reports test nMSE, global MSE, fitted noise and the marginal likelihood of both
    starts, and whether the lower marginal likelihood picks the lower test error (the candidate fix).
    """
    import torch

    from idyn_ros.models.gp.gp import stack_inputs
    from idyn_ros.models.gp.synthetic import make_set
    from idyn_ros.models.gp.train import make_gp, nmse_percent

    cases = cases or (("6dof_pair3_N500", 6, 3, 103, 500, 3), ("7dof_pair0_N500", 7, 0, 100, 500, 0),
                      ("7dof_N50", 7, 200, 300, 50, 0), ("7dof_N100", 7, 200, 300, 100, 0))
    out: dict[str, Any] = {}
    for name, dof, s_tr, s_te, N, seed in cases:
        tr, te = make_set(s_tr, dof), make_set(s_te, dof)
        idx = np.arange(500) if N >= 500 else np.sort(np.random.default_rng(seed).choice(500, N, replace=False))
        X, Y = stack_inputs(tr.q[idx], tr.dq[idx], tr.ddq[idx]), torch.as_tensor(tr.tau_noisy[idx])
        Xt = stack_inputs(te.q, te.dq, te.ddq)
        row: dict[str, Any] = {}
        for start in ("max", "min"):
            gp = make_gp("lip-gp", dof, X, Y, noise_init_ratio=1e-3, shared_noise=True, shared_noise_start=start)
            rep = gp.fit(X, Y, iterations=LBFGS_ITERS, max_hyper_points=HYPER_POINTS, seed=seed,
                         max_seconds=FIT_SECONDS)
            pred = gp.predict(Xt)[0].numpy()
            e = nmse_percent(pred, te.tau)
            row[start] = {"test_nmse_percent": e.round(3).tolist(), "mean_percent": float(e.mean()),
                          "global_mse": float(np.mean((pred - te.tau) ** 2, 0).sum()),
                          "noise_std": float(gp.noise_std()[0]), "nll": rep.nll, "fit_seconds": rep.seconds}
            print(f"[gp] noise start {name} {start}: mean nMSE {e.mean():.2f} % (per joint {np.round(e, 2)}), "
                  f"noise {gp.noise_std()[0]:.4f}, NLL {rep.nll:.3f}", flush=True)
        pick = min(("max", "min"), key=lambda k: row[k]["nll"])
        best = min(("max", "min"), key=lambda k: row[k]["global_mse"])
        row["nll_picks"], row["lower_global_mse"] = pick, best
        out[name] = row
    out["nll_pick_is_better_in"] = sum(out[c[0]]["nll_picks"] == out[c[0]]["lower_global_mse"] for c in cases)
    out["cases"] = len(cases)
    return out


def lbfgs_budget(budgets: tuple[int, ...], pair: int = 0) -> dict:
    """7-DoF LIP, one study pair: test nMSE vs the L-BFGS iteration budget (the study uses LBFGS_ITERS).

    Shared noise started at the smallest joint (the start the 7-DoF study keeps on pair 0 by marginal
    likelihood), hyperparameters on HYPER_POINTS samples as the study, time cap scaled with the budget. Asks
    whether joint 7 (torque std 0.03 Nm, 3x the noise) is missed for want of optimisation.
    """
    import torch

    from idyn_ros.models.gp.gp import stack_inputs
    from idyn_ros.models.gp.synthetic import make_set
    from idyn_ros.models.gp.train import make_gp, nmse_percent

    tr, te = make_set(pair, 7), make_set(100 + pair, 7)
    X, Y = stack_inputs(tr.q, tr.dq, tr.ddq), torch.as_tensor(tr.tau_noisy)
    Xt = stack_inputs(te.q, te.dq, te.ddq)
    out: dict[str, Any] = {"pair": pair, "shared_noise_start": "min", "hyper_points": HYPER_POINTS}
    for iters in budgets:
        gp = make_gp("lip-gp", 7, X, Y, noise_init_ratio=1e-3, shared_noise=True, shared_noise_start="min")
        rep = gp.fit(X, Y, iterations=iters, max_hyper_points=HYPER_POINTS, seed=pair,
                     max_seconds=_fit_cap(iters))
        e = nmse_percent(gp.predict(Xt)[0].numpy(), te.tau)
        e_train = nmse_percent(gp.predict(X)[0].numpy(), tr.tau)
        out[f"iterations_{iters}"] = {
            "test_nmse_percent": e.round(4).tolist(), "mean_percent": float(e.mean()),
            "train_nmse_percent": e_train.round(4).tolist(), "noise_std": float(gp.noise_std()[0]),
            "nll": rep.nll, "evaluations": rep.iterations, "fit_seconds": rep.seconds}
        print(f"[gp] L-BFGS budget {iters}: mean nMSE {e.mean():.2f} % (per joint {np.round(e, 2)}), "
              f"NLL {rep.nll:.4f}, {rep.iterations} evaluations, {rep.seconds:.0f} s", flush=True)
    return out


def _refine_pair(dof: int, extra: int, pair: int) -> dict:
    """One pair of lip_refine_study: the study's LIP fit (both starts, LBFGS_ITERS), then ``extra`` more."""
    import torch

    torch.set_num_threads(1)
    from idyn_ros.models.gp.gp import stack_inputs
    from idyn_ros.models.gp.synthetic import make_set
    from idyn_ros.models.gp.train import nmse_percent, refine_gp

    tr, te = make_set(pair, dof), make_set(100 + pair, dof)
    out = _fit_eval("lip-gp", dof, tr, te, seed=pair, shared_noise=True)
    X, Y = stack_inputs(tr.q, tr.dq, tr.ddq), torch.as_tensor(tr.tau_noisy, dtype=torch.float64)
    more = refine_gp(out["gp"], X, Y, extra, method="lbfgs", max_hyper_points=HYPER_POINTS, seed=pair,
                     max_seconds=_fit_cap(extra))
    e = nmse_percent(out["gp"].predict(stack_inputs(te.q, te.dq, te.ddq))[0].numpy(), te.tau)
    row = {"noise_start": out["noise_start"],
           "study": {"nmse_percent": out["nmse"].round(4).tolist(), "mean_percent": float(np.mean(out["nmse"])),
                     "nll": out["nll"], "fit_seconds": out["fit_seconds"]},
           "refined": {"nmse_percent": e.round(4).tolist(), "mean_percent": float(e.mean()), "nll": more.nll,
                       "evaluations": more.iterations, "fit_seconds": more.seconds}}
    print(f"[gp] refine {dof}-DoF pair {pair}: mean nMSE {np.mean(out['nmse']):.2f} -> {e.mean():.2f} %, "
          f"J{dof} {out['nmse'][-1]:.1f} -> {e[-1]:.1f} %, NLL {out['nll']:.4f} -> {more.nll:.4f}, "
          f"+{more.seconds:.0f} s", flush=True)
    return row


def lip_refine_study(dof: int, pair_list: tuple[int, ...], extra: int, workers: int) -> dict:
    """LIP as in synthetic_study, then ``extra`` more L-BFGS iterations on the kept fit (train.refine_gp).

    Asks whether refining only the kept start buys what lbfgs_budget found for one start run longer, per pair
    and at what cost. Pairs run in ``workers`` processes of one torch thread each.
    """
    from functools import partial

    rows = _in_workers(partial(_refine_pair, dof, extra), pair_list, workers)
    out: dict[str, Any] = {"dof": dof, "pairs": list(pair_list), "extra_iterations": extra,
                           "per_pair": dict(zip(map(str, pair_list), rows, strict=True))}
    for stage in ("study", "refined"):
        arr = np.array([r[stage]["nmse_percent"] for r in rows])
        out[stage] = {"median_nmse_percent_per_joint": np.median(arr, 0).round(4).tolist(),
                      "mean_over_joints_of_median_percent": float(np.median(arr, 0).mean()),
                      "fit_seconds_median": float(np.median([r[stage]["fit_seconds"] for r in rows]))}
    return out


def budget_study(kind: str, dof: int, pairs: int, budgets: tuple[int, ...]) -> dict:
    """Test nMSE of one kind over the study's pairs at each L-BFGS budget (its usual noise starts, shared noise).

    Asks whether a baseline's gap to the paper is the optimiser budget (the authors run ~5000 Adam steps);
    the GIP is cheap enough (~30 s per 6-DoF fit at 50 iterations) to answer it on every pair.
    """
    from idyn_ros.models.gp.synthetic import make_set

    per_budget: dict[int, list] = {b: [] for b in budgets}
    seconds: dict[int, list] = {b: [] for b in budgets}
    for p in range(pairs):
        tr, te = make_set(p, dof), make_set(100 + p, dof)
        for b in budgets:
            out = _fit_eval(kind, dof, tr, te, seed=p, shared_noise=True, iterations=b)
            per_budget[b].append(out["nmse"])
            seconds[b].append(out["fit_seconds"])
            print(f"[gp] {kind} {dof}-DoF pair {p}, {b} iterations: mean nMSE {np.mean(out['nmse']):.2f} % "
                  f"(per joint {np.round(out['nmse'], 2)}), fit {out['fit_seconds']:.0f} s", flush=True)
    out_: dict[str, Any] = {"kind": kind, "dof": dof, "pairs": pairs}
    for b in budgets:
        arr = np.array(per_budget[b])
        out_[f"iterations_{b}"] = {"median_nmse_percent_per_joint": np.median(arr, 0).round(4).tolist(),
                                   "mean_over_joints_of_median_percent": float(np.median(arr, 0).mean()),
                                   "per_pair_mean_nmse_percent": arr.mean(1).round(4).tolist(),
                                   "fit_seconds_median": float(np.median(seconds[b]))}
    return out_


# 6-DoF pairs of noise_start_6dof: the basin pairs of the 10-pair study (2, 5, 8, 9; 3 is in noise_start_check)
# and pair 0, which was not in the basin
CHECK_PAIRS = (0, 2, 5, 8, 9)

SECTIONS = ("kernel_timing", "latency", "synthetic_6dof", "synthetic_7dof", "data_efficiency", "kuka_lwr4",
            "diagnostics", "noise_start_check", "noise_start_6dof", "noise_start_7dof", "kuka_noise_floor",
            "lbfgs_budget", "lse_6dof", "lse_7dof", "lip_refine_7dof", "gip_budget_6dof")
# the rest (diagnostics, noise-start checks, floors, budgets, LSE on 500 samples) only on request: each costs
# tens of minutes to hours
DEFAULT_SECTIONS = SECTIONS[:6]


def run_benchmarks(quick: bool = False, pairs: int | None = None, sections: tuple[str, ...] | None = None,
                   lse: bool | None = None, command: str | None = None,
                   check_pairs: tuple[int, ...] | None = None, floors: tuple[float, ...] = (0.0, 0.01, 0.05),
                   budgets: tuple[int, ...] = (50, 150, 400), workers: int = 1, refine: int = 100) -> dict:
    """GP figures, one result file per section: bench/results/gp_<section>.json.

    Each section's file is written as soon as the section ends (a study takes tens of minutes on 2 cores,
    and sections can run in parallel processes). quick=True: 1 pair, short data-efficiency grid (smoke run).
    Default: 10 pairs per DoF (the issue's 10+), LSE on 6 DoF.
    """
    from idyn_ros.bench import _provenance, write_result

    pairs = pairs if pairs is not None else (1 if quick else 10)
    quick_sections = ("kernel_timing", "latency", "synthetic_6dof", "data_efficiency", "kuka_lwr4")
    sections = sections or (quick_sections if quick else DEFAULT_SECTIONS)
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        from idyn_ros.errors import ParameterError

        raise ParameterError(f"unknown GP bench sections {unknown}; choose from {', '.join(SECTIONS)}")
    lse = (not quick) if lse is None else lse
    kinds = ("lip-gp", "gip-gp", "se-gp")
    settings = {"hyper_points": HYPER_POINTS, "lbfgs_iters": LBFGS_ITERS, "fit_seconds_cap": FIT_SECONDS,
                "noise_starts": _noise_starts(), "lse_train_points": LSE_TRAIN_POINTS, "quick": quick,
                "pairs": pairs, "torch_threads": _torch_threads()}
    requested_pairs = tuple(check_pairs) if check_pairs else None
    check_pairs = requested_pairs or CHECK_PAIRS
    command = command or "idyn bench --only gp" + (" --quick" if quick else "")
    provenance = _provenance(command)  # the revision that runs (a study takes an hour; HEAD may move)
    files: dict[str, Any] = {}
    for name in sections:
        t0 = time.perf_counter()
        if name == "kernel_timing":
            value = kernel_timing()
        elif name == "latency":
            value = latency_study(500, 200 if quick else 1000)
        elif name == "synthetic_6dof":
            value = synthetic_study(6, pairs, kinds + (("lse-gp",) if lse else ()))
        elif name == "synthetic_7dof":
            value = synthetic_study(7, pairs, kinds)
        elif name == "data_efficiency":
            value = data_efficiency((50, 100, 200) if quick else (50, 100, 200, 500), kinds, 1,
                                    _results_dir() / "gp_data_efficiency.png")
        elif name == "kuka_lwr4":
            value = kuka_study(kinds, 300 if quick else 500, 10 if quick else 1)
        elif name == "kuka_noise_floor":
            value = kuka_noise_floor(floors)
        elif name == "lbfgs_budget":
            value = lbfgs_budget(budgets)
        elif name in ("lse_6dof", "lse_7dof"):
            value = lse_study(6 if name == "lse_6dof" else 7, pairs, workers)
        elif name == "lip_refine_7dof":  # --check-pairs picks pairs (default: all --pairs)
            value = lip_refine_study(7, requested_pairs or tuple(range(pairs)), refine, workers)
        elif name == "gip_budget_6dof":  # --budgets; the 6-DoF study's GIP is 9.00 % against the paper's 4.89 %
            value = budget_study("gip-gp", 6, pairs, budgets)
        elif name == "noise_start_check":
            value = noise_start_check()
        elif name == "noise_start_6dof":  # default: the other 6-DoF pairs that ended in the noise basin, and a good one
            value = noise_start_check(tuple((f"6dof_pair{p}_N500", 6, p, 100 + p, 500, p) for p in check_pairs))
        elif name == "noise_start_7dof":  # the same on the 7-DoF study's pairs (--check-pairs; pair 0 is in the check)
            value = noise_start_check(tuple((f"7dof_pair{p}_N500", 7, p, 100 + p, 500, p) for p in check_pairs))
        else:
            value = diagnostics()
        payload = {"settings": settings, name: value, "seconds": time.perf_counter() - t0, "_provenance": provenance}
        fname = f"gp_{name}"
        if name == "noise_start_7dof" or (name in ("noise_start_6dof", "lip_refine_7dof") and requested_pairs):
            fname += "_pairs" + "-".join(map(str, check_pairs))
        if name == "kuka_noise_floor":
            fname += "_" + "-".join(f"{f:g}" for f in floors)
        files[fname] = payload
        write_result(fname, payload, command, provenance)
    return {"_files": files}


def _noise_starts() -> dict:
    from idyn_ros.models.gp.train import NOISE_STARTS, SHARED_NOISE_STARTS

    return {"ratio": dict(NOISE_STARTS), "shared_noise_start": dict(SHARED_NOISE_STARTS)}


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _results_dir() -> Path:
    from idyn_ros.bench import results_dir

    return results_dir()


def main(argv: list[str] | None = None) -> int:
    """``python -m idyn_ros.bench.gp [--quick] [--pairs N] [--sections a,b] [--lse|--no-lse]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m idyn_ros.bench.gp", description=main.__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 pair, 6 DoF, short N grid")
    ap.add_argument("--pairs", type=int, default=None, help="train/test pairs per DoF (default 10; issue: 10+)")
    ap.add_argument("--check-pairs", default=None,
                    help="noise_start_6dof/7dof (default 0,2,5,8,9) and lip_refine_7dof (default all --pairs): "
                         "comma list of pairs; a list other than the default gets its own result file")
    ap.add_argument("--floors", default="0,0.01,0.05", help="kuka_noise_floor: comma list of floor ratios")
    ap.add_argument("--budgets", default="50,150,400",
                    help="lbfgs_budget, gip_budget_6dof: comma list of L-BFGS iteration budgets")
    ap.add_argument("--workers", type=int, default=1,
                    help="lse_6dof/lse_7dof/lip_refine_7dof: pairs fitted in parallel processes")
    ap.add_argument("--refine", type=int, default=100,
                    help="lip_refine_7dof: L-BFGS iterations added to the kept fit (default 100)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1; run sections in parallel)")
    ap.add_argument("--sections", default=None, help=f"comma list of {','.join(SECTIONS)}")
    ap.add_argument("--lse", action=argparse.BooleanOptionalAction, default=None,
                    help="include the LSE baseline (autodiff kernel, slow; default on unless --quick)")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    secs = tuple(a.sections.split(",")) if a.sections else None
    import torch

    torch.set_num_threads(a.threads)  # 1: parallel sections in separate processes do not oversubscribe
    cmd = "python -m idyn_ros.bench.gp " + " ".join(sys.argv[1:] if argv is None else argv)
    cp = tuple(int(p) for p in a.check_pairs.split(",")) if a.check_pairs else None
    res = run_benchmarks(quick=a.quick, pairs=a.pairs, sections=secs, lse=a.lse, command=cmd.strip(), check_pairs=cp,
                         floors=tuple(float(f) for f in a.floors.split(",")),
                         budgets=tuple(int(b) for b in a.budgets.split(",")), workers=a.workers,
                         refine=a.refine)
    print("[gp] wrote " + ", ".join(f"bench/results/{k}.json" for k in res["_files"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
