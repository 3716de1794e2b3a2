"""Figures for the report (matplotlib, Agg backend, PNG): every axis labelled with units, a title that
says what was run, a legend. Each function takes plain arrays/dicts and a path, returns the path.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: str | Path, dpi: int) -> Path:
    """Write ``fig`` as a PNG at ``path`` (its folder created when missing, as the commands' output checks allow)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def tracking_error(curves: dict[str, tuple[np.ndarray, np.ndarray]], path: Path, title: str) -> Path:
    """Tracking error over time: {label: (t s, mean |q_d - q| over joints in deg)}."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, (t, e) in curves.items():
        ax.plot(t, e, label=label, lw=1.2)
    ax.set_xlabel("time since move start [s]")
    ax.set_ylabel("mean joint error |q_d - q| [deg]")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(plt, fig, path, 120)


def torque_prediction(t: np.ndarray, tau: np.ndarray, preds: dict[str, np.ndarray], joint_names: Sequence[str],
                      path: Path, title: str, measured_label: str = "measured (plant effort)",
                      joint_notes: Sequence[str] | None = None, max_points: int = 20000) -> Path:
    """Measured vs predicted joint torque on held-out data, one subplot per joint.

    ``joint_notes``: a line under each joint's name (e.g. its nMSE). NaN rows in ``t`` break the lines (gaps between
    segments). Longer series are thinned to about ``max_points`` samples per line (every k-th: a figure of 10^6
    points draws no better and takes minutes)."""
    plt = _plt()
    step = max(1, int(np.ceil(len(t) / max_points)))
    t, tau = t[::step], tau[::step]
    preds = {label: p[::step] for label, p in preds.items()}
    n = tau.shape[1]
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.6 * n + 1), sharex=True)
    axes = np.atleast_1d(axes)
    for j in range(n):
        ax = axes[j]
        ax.plot(t, tau[:, j], color="k", lw=1.0, label=measured_label)
        for label, p in preds.items():
            ax.plot(t, p[:, j], lw=0.9, label=label)
        note = f"\n{joint_notes[j]}" if joint_notes is not None else ""
        ax.set_ylabel(f"{joint_names[j]}\n[Nm]{note}", fontsize=7)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=3, loc="upper right")
    axes[0].set_title(title)
    axes[-1].set_xlabel("time [s]")
    fig.tight_layout()
    return _save(plt, fig, path, 110)


def wrench_push(t: np.ndarray, applied: np.ndarray, estimates: dict[str, np.ndarray], path: Path,
                title: str) -> Path:
    """Applied vs estimated flange force (base axes), one subplot per axis."""
    plt = _plt()
    fig, axes = plt.subplots(3, 1, figsize=(9, 6.5), sharex=True)
    for i, axis in enumerate("xyz"):
        ax = axes[i]
        ax.plot(t, applied[:, i], color="k", lw=1.5, label="applied")
        for label, est in estimates.items():
            ax.plot(t, est[:, i], lw=1.0, label=label)
        ax.set_ylabel(f"F_{axis} [N]")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, ncol=3)
    axes[0].set_title(title)
    axes[-1].set_xlabel("time [s]")
    fig.tight_layout()
    return _save(plt, fig, path, 120)


def doomed_heatmaps(sweep: dict[str, Any], path: Path) -> Path:
    """M1 / M2 / RMSE heat maps over learning rate x alpha, one row per gamma; oscillating cells hatched."""
    plt = _plt()
    etas, alphas, gammas = sweep["etas"], sweep["alphas"], sweep["gammas"]
    metrics = [("m1_abs_acc_error", "M1 mean |ddq_cmd - ddq| [rad/s^2]"),
               ("m2_bias", "M2 mean (ddq_cmd - ddq) [rad/s^2]"), ("rmse_deg", "joint RMSE [deg]")]
    fig, axes = plt.subplots(len(gammas), len(metrics), figsize=(4.6 * len(metrics), 3.4 * len(gammas)),
                             squeeze=False)
    for gi, g in enumerate(gammas):
        for mi, (key, label) in enumerate(metrics):
            grid = np.full((len(alphas), len(etas)), np.nan)
            osc = np.zeros_like(grid, dtype=bool)
            for r in sweep["results"]:
                if r["gamma"] != g:
                    continue
                i, j = alphas.index(r["alpha"]), etas.index(r["eta"])
                grid[i, j] = np.nan if r.get("failed") else r[key]
                osc[i, j] = bool(r.get("oscillating"))
            ax = axes[gi, mi]
            im = ax.imshow(grid, aspect="auto", origin="lower", cmap="viridis")
            for i in range(len(alphas)):
                for j in range(len(etas)):
                    txt = "fail" if np.isnan(grid[i, j]) else f"{grid[i, j]:.2g}"
                    ax.text(j, i, txt + ("*" if osc[i, j] else ""), ha="center", va="center", fontsize=7,
                            color="w")
            ax.set_xticks(range(len(etas)), [f"{e:g}" for e in etas])
            ax.set_yticks(range(len(alphas)), [f"{a:g}" for a in alphas])
            ax.set_xlabel("learning rate eta (x M_jj, per tick) [-]")
            ax.set_ylabel("variance gain alpha [s^4/rad^2]")
            ax.set_title(f"{label}\ngamma = {g:g}", fontsize=9)
            fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(f"DOOMED on the {sweep['robot']} plant, {sweep['payload']['mass']:g} kg unmodelled payload, "
                 f"{sweep['gain']} gains (* = oscillating / frozen)", fontsize=10)
    fig.tight_layout()
    return _save(plt, fig, path, 110)


def training_summary(metrics: dict[str, Any], joint_names: Sequence[str], path: Path, title: str) -> Path:
    """What `idyn train` did, from its metrics.json: the learning curves (train dashed, validation solid; every learned
    candidate of auto, the exported one bold), auto's candidates on validation, and the exported model's nMSE per
    joint on validation (and test)."""
    plt = _plt()
    from matplotlib import ticker

    rows = [r for r in metrics.get("candidates", ()) if not r.get("skipped")]
    curves = {r["name"]: r["history"] for r in rows if len(r.get("history", {}).get("val", ())) > 1}
    if not rows and len(metrics.get("history", {}).get("val", ())) > 1:
        curves = {metrics["kind"]: metrics["history"]}
    panels = 2 + bool(rows)
    fig, axes = plt.subplots(1, panels, figsize=(5.6 * panels, 4.8))
    ax = axes[0]
    exported = {metrics.get("selected")} | {r["name"] for r in rows if r.get("member_of") == metrics.get("selected")}
    for i, (name, h) in enumerate(curves.items()):
        bold = name in exported or not rows
        color = f"C{i % 10}"
        ax.plot(h["epoch"], h["val"], color=color, lw=2.2 if bold else 1.0, label=name)
        ax.plot(h["epoch"], h["train"], color=color, lw=1.2 if bold else 0.7, ls="--")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss: MSE of torques scaled by their range [-]")
    ax.set_title("learning curves, bold: exported\n(solid: validation; dashed: training, with dropout and penalties)",
                 fontsize=9)
    ax.grid(alpha=0.3, which="both")
    if curves:
        ax.legend(fontsize=7)
    else:
        physics_only = not rows and metrics.get("kind") in ("rbd", "rbd-friction")
        ax.text(0.5, 0.5, "nothing trained by gradient\n(physics only)" if physics_only else
                "no learning curves in these metrics", ha="center", va="center", transform=ax.transAxes)
    if rows:
        ax = axes[1]
        names = [r["name"] for r in rows]
        y = np.arange(len(rows))
        ax.barh(y, [100 * r["val_nmse_mean"] for r in rows],
                color=["C3" if n == metrics.get("selected") else "C0" for n in names], label="candidate")
        ax.plot([100 * r["val_physics_nmse_mean"] for r in rows], y, "k|", ms=14, mew=2, label="its physics part")
        ax.set_yticks(y, [textwrap.fill(n, 28) for n in names], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))  # 1 2 5 10 20 ...: readable on any span
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel("validation nMSE, mean over joints [%]")
        ax.set_title(f"auto's candidates, red: exported\n({metrics.get('selected')})", fontsize=9)
        ax.grid(alpha=0.3, axis="x", which="both")
        ax.legend(fontsize=7)
    ax = axes[-1]
    x = np.arange(len(joint_names))
    splits = [s for s in ("val", "test") if s in metrics]
    for k, split in enumerate(splits):
        ax.bar(x + (k - (len(splits) - 1) / 2) * 0.4, [100 * v for v in metrics[split]["nmse"]], width=0.4,
               label=f"{split}: mean {100 * metrics[split]['nmse_mean']:.2f} %")
    ax.set_xticks(x, joint_names, rotation=45, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("nMSE [%] (100 = no better than the mean torque)")
    ax.set_title(f"exported model ({metrics['kind']}) per joint", fontsize=9)
    ax.grid(alpha=0.3, axis="y", which="both")
    if splits:
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(plt, fig, path, 110)
