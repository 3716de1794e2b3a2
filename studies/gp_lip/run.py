"""The LIP-kernel GP studies: why our GP numbers are, or are not, the paper's (see README.md here).

Each section answers one question (README.md) and writes studies/gp_lip/results/gp_<section>.json. The
headline a user reruns (6-DoF accuracy, latency) is ``idyn bench --only gp`` (idyn_ros/bench/gp.py); the
sections here reuse its fitting helpers and budget so both measure the same fits. Run from the repository
root with idyn_ros importable: ``python studies/gp_lip/run.py --sections kernel_timing [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.bench import run_provenance, times_us, write_result
from idyn_ros.bench.gp import (
    FIT_SECONDS,
    HYPER_POINTS,
    LBFGS_ITERS,
    LSE_TRAIN_POINTS,
    fit_cap,
    fit_eval,
    run_settings,
    synthetic_accuracy,
)

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("lip-gp", "gip-gp", "se-gp")


def _in_workers(fn: Any, items: Any, workers: int) -> list:
    """``[fn(x) for x in items]`` in ``workers`` spawn processes (each sets its own torch threads)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return list(pool.map(fn, items))



def diagnostics() -> dict:
    """Where the gap to the paper comes from (LIP, pair 0: train seed 0, test seed 100).

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
        r = fit_eval("lip-gp", 3, tr3, te3, noise_init_ratio=0.1, **kw)
        out[f"dof3_{label}"] = {"test_nmse_percent": r["nmse"].round(4).tolist(),
                                "train_nmse_percent": r["train_nmse"].round(4).tolist(),
                                "noise_std": r["noise_std"].round(5).tolist()}
        print(f"[gp] diagnostics 3-DoF {label}: test {np.mean(r['nmse']):.4f} %", flush=True)
    tr6, te6 = make_set(0, 6), make_set(100, 6)
    for ratio in (0.1, 1e-3):
        r = fit_eval("lip-gp", 6, tr6, te6, noise_init_ratio=ratio)
        out[f"dof6_noise_start_{ratio:g}"] = {
            "test_nmse_percent": r["nmse"].round(4).tolist(), "test_mean_percent": float(np.mean(r["nmse"])),
            "train_nmse_percent": r["train_nmse"].round(4).tolist(), "noise_std": r["noise_std"].round(5).tolist(),
            "nll_per_obs": r["nll"], "evaluations": r["evaluations"], "fit_seconds": r["fit_seconds"]}
        print(f"[gp] diagnostics 6-DoF noise start {ratio:g}: test {np.mean(r['nmse']):.3f} %", flush=True)
    return out



def _lse_pair(dof: int, pair: int) -> dict:
    """One pair of lse_study: LSE on all 500 samples, GIP and SE refitted alongside (worker process)."""
    import torch

    torch.set_num_threads(1)
    from idyn_ros.models.gp.synthetic import make_set

    tr, te = make_set(pair, dof), make_set(100 + pair, dof)
    row: dict[str, Any] = {}
    for kind in ("lse-gp", "gip-gp", "se-gp"):
        out = fit_eval(kind, dof, tr, te, seed=pair, shared_noise=True)
        row[kind] = {"nmse_percent": out["nmse"].round(4).tolist(), "mean_percent": float(np.mean(out["nmse"])),
                     "global_mse": float(out["mse"].sum()), "fit_seconds": out["fit_seconds"],
                     "evaluations": out["evaluations"], "noise_std": float(out["noise_std"][0])}
        print(f"[gp] lse {dof}-DoF pair {pair} {kind}: mean nMSE {np.mean(out['nmse']):.2f} % "
              f"(per joint {np.round(out['nmse'], 2)}), fit {out['fit_seconds']:.0f} s, "
              f"{out['evaluations']} evaluations", flush=True)
    return row


def lse_study(dof: int, pairs: int, workers: int) -> dict:
    """LSE on all 500 samples (the paper's N; the 6-DoF study fits it on LSE_TRAIN_POINTS) vs GIP and SE.

    Same pairs, seeds and hyperparameter budget as synthetic_accuracy. Pairs run in ``workers`` processes of
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
                out = fit_eval(kind, 7, tr, te, n_train=N, seed=p, shared_noise=True)
                e_list.append(float(np.mean(out["nmse"])))
                g_list.append(float(out["mse"].sum()))
                j_list.append(out["nmse"])
                f_list.append(out["fit_seconds"])
            table[kind]["nmse_mean_percent"].append(float(np.median(e_list)))
            table[kind]["global_mse"].append(float(np.median(g_list)))
            table[kind]["nmse_percent_per_joint"].append(np.median(np.array(j_list), 0).round(3).tolist())
            table[kind]["fit_seconds"].append(float(np.median(f_list)))
            table[kind]["noise_start"].append(out["noise_start"])  # of the last pair (the study runs one)
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
    return {"sizes": list(sizes), "pairs": pairs, "table": table, "png": out_png.name if out_png else None}


# Hybrid rows of the models bench (same KUKA files and metric: train file 1, test file 3, per-joint nMSE).
KUKA_MODEL_ROWS = ("hybrid-r E2E (+tau_RBD, r inputs)", "hybrid E2E (DiffBary+fric+LSTM)",
                   "hybrid 2S (SDP+fric, then LSTM)", "SDP RBD + friction", "nominal URDF RBD")


def kuka_study(kinds: tuple[str, ...], n_train: int, test_stride: int) -> dict | None:
    """Real KUKA LWR4+: train on a random subsample of file 1, test on file 3 (every test_stride-th).

    Friction kernel on (real robot, eq 34-35), per-joint noise, noise start chosen on file 2. The learned
    hybrid models of the models bench are read from bench/results/models.json (they train on all of file 1
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
        r = fit_eval(kind, 7, tr, te, n_train=n, friction=True, seed=0, val=va, noise_floor_ratio=NOISE_FLOOR_RATIO)
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
            r = fit_eval(kind, 7, tr, te, n_train=500, friction=True, seed=0, noise_init_ratio=0.1,
                          noise_floor_ratio=floor)
            out[f"{kind}_floor_{floor:g}"] = {"mean_percent": float(np.mean(r["nmse"])),
                                              "nmse_percent_per_joint": r["nmse"].round(2).tolist(),
                                              "noise_std": r["noise_std"].round(5).tolist()}
            print(f"[gp] KUKA {kind} noise floor {floor:g}: mean nMSE {np.mean(r['nmse']):.1f} %", flush=True)
    return out




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
                     max_seconds=fit_cap(iters))
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
    out = fit_eval("lip-gp", dof, tr, te, seed=pair, shared_noise=True)
    X, Y = stack_inputs(tr.q, tr.dq, tr.ddq), torch.as_tensor(tr.tau_noisy, dtype=torch.float64)
    more = refine_gp(out["gp"], X, Y, extra, method="lbfgs", max_hyper_points=HYPER_POINTS, seed=pair,
                     max_seconds=fit_cap(extra))
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
    """LIP as in synthetic_accuracy, then ``extra`` more L-BFGS iterations on the kept fit (train.refine_gp).

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
            out = fit_eval(kind, dof, tr, te, seed=p, shared_noise=True, iterations=b)
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


SECTIONS = ("kernel_timing", "synthetic_7dof", "data_efficiency", "kuka_lwr4", "diagnostics", "noise_start_check",
            "noise_start_6dof", "noise_start_7dof", "kuka_noise_floor", "lbfgs_budget", "lse_6dof", "lse_7dof",
            "lip_refine_7dof", "gip_budget_6dof")


def run_section(name: str, a: argparse.Namespace, out_dir: Path) -> tuple[str, Any]:
    """(result file name, value) of one section with the command-line settings ``a``."""
    pairs = a.pairs if a.pairs is not None else (1 if a.quick else 10)
    requested_pairs = tuple(int(p) for p in a.check_pairs.split(",")) if a.check_pairs else None
    check_pairs = requested_pairs or CHECK_PAIRS
    floors = tuple(float(f) for f in a.floors.split(","))
    budgets = tuple(int(b) for b in a.budgets.split(","))
    fname = f"gp_{name}"
    if name == "kernel_timing":
        value = kernel_timing(dof=3 if a.quick else 7)
    elif name == "synthetic_7dof":
        value = synthetic_accuracy(7, pairs, KINDS)
    elif name == "data_efficiency":
        value = data_efficiency((50, 100, 200) if a.quick else (50, 100, 200, 500), KINDS, 1,
                                out_dir / "gp_data_efficiency.png")
    elif name == "kuka_lwr4":
        value = kuka_study(KINDS, 300 if a.quick else 500, 10 if a.quick else 1)
    elif name == "kuka_noise_floor":
        value = kuka_noise_floor(floors)
        fname += "_" + "-".join(f"{f:g}" for f in floors)
    elif name == "lbfgs_budget":
        value = lbfgs_budget(budgets)
    elif name in ("lse_6dof", "lse_7dof"):
        value = lse_study(6 if name == "lse_6dof" else 7, pairs, a.workers)
    elif name == "lip_refine_7dof":  # --check-pairs picks pairs (default: all --pairs)
        value = lip_refine_study(7, requested_pairs or tuple(range(pairs)), a.refine, a.workers)
    elif name == "gip_budget_6dof":
        value = budget_study("gip-gp", 6, pairs, budgets)
    elif name == "noise_start_check":
        value = noise_start_check()
    elif name == "noise_start_6dof":  # default: the 6-DoF pairs that ended in the noise basin, and a good one
        value = noise_start_check(tuple((f"6dof_pair{p}_N500", 6, p, 100 + p, 500, p) for p in check_pairs))
    elif name == "noise_start_7dof":  # the same on the 7-DoF pairs (pair 0 is in noise_start_check)
        value = noise_start_check(tuple((f"7dof_pair{p}_N500", 7, p, 100 + p, 500, p) for p in check_pairs))
    else:
        value = diagnostics()
    if name == "noise_start_7dof" or (name in ("noise_start_6dof", "lip_refine_7dof") and requested_pairs):
        fname += "_pairs" + "-".join(map(str, check_pairs))
    return fname, value


def main(argv: list[str] | None = None) -> int:
    """``python studies/gp_lip/run.py --sections a,b [--quick] [--pairs N] [--workers N] ...``."""
    ap = argparse.ArgumentParser(prog="python studies/gp_lip/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", required=True, help=f"comma list of {','.join(SECTIONS)}")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 pair, short data-efficiency grid, 3-DoF kernel timing, KUKA subsampled")
    ap.add_argument("--pairs", type=int, default=None, help="train/test pairs per DoF (default 10)")
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
    ap.add_argument("--out", type=Path, default=RESULTS, help=f"result folder (default {RESULTS})")
    args = sys.argv[1:] if argv is None else argv
    a = ap.parse_args(args)
    sections = tuple(a.sections.split(","))
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)} "
                 "(synthetic_6dof and latency are the headline: idyn bench --only gp)")
    import torch

    torch.set_num_threads(a.threads)  # 1: parallel sections in separate processes do not oversubscribe
    a.out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python studies/gp_lip/run.py", *args])
    provenance = run_provenance(command)  # the revision that runs (a study takes an hour; HEAD may move)
    settings = run_settings(quick=a.quick, pairs=a.pairs if a.pairs is not None else (1 if a.quick else 10))
    for name in sections:
        t0 = time.perf_counter()
        fname, value = run_section(name, a, a.out)
        payload = {"settings": settings, name: value, "seconds": time.perf_counter() - t0}
        path = write_result(fname, payload, command, provenance, directory=a.out)
        print(f"[gp study] {name}: wrote {path} ({payload['seconds']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
