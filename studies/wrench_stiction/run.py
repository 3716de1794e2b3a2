"""Study: what limits the UR5 force estimate at standstill, and friction treatments tried beyond the stiction band.

Run from the repository root with idyn_ros importable and ../shared/data/ur5_ft present:

    python studies/wrench_stiction/run.py [--work DIR]

Trains rbd-friction on the benchmark's split (``idyn_ros.bench.ur5.train_model``: contact-free runs, validation
No7_short), then replays No10 (pushed at standstill, F/T sensor) through ``idyn wrench``'s code path
(``experiments.wrench_replay``) once per variant of the stiction stage, and the two contact-free runs not trained
on (false alarms). Writes results/variants.json and results/joints_no10.png (per joint: the observer's external
torque before the band, J^T times the F/T reading, and the joint's position in 1e-4 rad).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.bench import run_provenance, write_result
from idyn_ros.bench.ur5 import FT_TOPIC, SCORE, VAL, _data, train_model
from idyn_ros.control import wrench_trust as wt
from idyn_ros.dynamics.friction import DQ_LIM
from idyn_ros.experiments import wrench_replay as wr

RESULTS = Path(__file__).resolve().parent / "results"
DT = 1.0 / 125.0


def _band(self: wt.StictionBand, dq: np.ndarray) -> np.ndarray:
    return self.level * np.clip(1.0 - np.abs(dq) / DQ_LIM, 0.0, 1.0)


class PlayBand(wt.StictionBand):
    """Play (backlash) operator: the estimate moves only when the residual leaves +- band around it, i.e. the
    friction of a stuck joint stays where it is; ``leak_s`` > 0 lets the estimate decay to zero meanwhile."""

    leak_s = 0.0

    def apply(self, tau: np.ndarray, dq: np.ndarray) -> np.ndarray:
        band = _band(self, dq)
        prev = getattr(self, "_prev", np.zeros_like(tau)) * (np.exp(-DT / self.leak_s) if self.leak_s else 1.0)
        tau[:] = self._prev = np.clip(prev, tau - band, tau + band)
        return tau


class SlipBand(wt.StictionBand):
    """Soft threshold at rest, but while a joint creeps (|dq| > ``slip``) its friction is the band in the
    direction of motion: tau_ext = residual + sign * band * sign(dq)."""

    slip, sign = 5e-4, 1.0

    def apply(self, tau: np.ndarray, dq: np.ndarray) -> np.ndarray:
        band = _band(self, dq)
        soft = np.sign(tau) * np.maximum(np.abs(tau) - band, 0.0)
        tau[:] = np.where(np.abs(dq) > self.slip, tau + self.sign * band * np.sign(dq), soft)
        return tau


class ScaledBand(wt.StictionBand):
    """The product's soft threshold with the identified break-away level times ``scale`` (is the level off?)."""

    scale = 1.0

    def __init__(self, static_friction: np.ndarray) -> None:
        super().__init__(np.asarray(static_friction, dtype=np.float64) * self.scale)


_LAST: dict[str, np.ndarray] = {}  # the residual before the band and the band, from the band to the mapper


class IntervalBand(wt.StictionBand):
    """The product's soft threshold, remembering the residual before it and the band for ``IntervalMapper``."""

    def apply(self, tau: np.ndarray, dq: np.ndarray) -> np.ndarray:
        raw = tau.copy()
        super().apply(tau, dq)
        _LAST["raw"], _LAST["band"] = raw, self.band.copy()
        return tau


class IntervalMapper(wt.ContactWrenchMapper):
    """Each joint's static-friction band as an interval in the wrench fit (dead-zone least squares): the wrench whose
    joint torques stay within +- band of each joint's residual costs nothing there, instead of fitting the wrench to
    each joint's soft-thresholded residual. A stuck joint that does not feel the push (the elbow) then no longer
    pulls the estimate towards zero. Active-set iterations from the product's estimate."""

    def map(self, q: np.ndarray, tau: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        force = super().map(q, tau, sigma)
        if "raw" not in _LAST:
            return force
        r, b = _LAST["raw"], _LAST["band"]
        J, _ = self.rbd.flange_jacobian(q)
        w = 1.0 / np.maximum(sigma, 1e-9) ** 2
        scale = float(np.mean(w))
        w = w / scale
        prior = 1e-6 * np.eye(6)  # only picks the smallest wrench when the intervals allow many
        if self.settings.contact_model == "point":
            prior[3:, 3:] += np.eye(3) / (scale * self.settings.point_moment_nm ** 2)
        for _ in range(20):
            x = J.T @ force - r
            wa = w * (np.abs(x) > b)
            new = np.linalg.solve((J * wa) @ J.T + prior, (J * wa) @ (r + np.sign(x) * b))
            done = np.allclose(new, force, atol=1e-6)
            force = new
            if done:
                break
        return force


def _variant(base: type, **attrs: Any) -> type:
    return type(base.__name__, (base,), attrs)


VARIANTS: dict[str, Callable[[], tuple[Any, ...]]] = {
    "no band": lambda: (wt.StictionBand, wt.TrustSettings(stiction_band=False)),
    "soft threshold (the product's StictionBand)": lambda: (wt.StictionBand, wt.TrustSettings()),
    "play operator": lambda: (PlayBand, wt.TrustSettings()),
    "play operator, leak 0.5 s": lambda: (_variant(PlayBand, leak_s=0.5), wt.TrustSettings()),
    "play operator, leak 2 s": lambda: (_variant(PlayBand, leak_s=2.0), wt.TrustSettings()),
    "slip direction (+), creep 5e-4 rad/s": lambda: (SlipBand, wt.TrustSettings()),
    "slip direction (-), creep 5e-4 rad/s": lambda: (_variant(SlipBand, sign=-1.0), wt.TrustSettings()),
    "slip direction (+), creep 2e-3 rad/s": lambda: (_variant(SlipBand, slip=2e-3), wt.TrustSettings()),
    "band as an interval in the wrench fit (dead zone)": lambda: (IntervalBand, wt.TrustSettings(), IntervalMapper),
    "soft threshold, break-away level x 0.6": lambda: (_variant(ScaledBand, scale=0.6), wt.TrustSettings()),
    "soft threshold, break-away level x 0.8": lambda: (_variant(ScaledBand, scale=0.8), wt.TrustSettings()),
    "soft threshold, break-away level x 1.25": lambda: (_variant(ScaledBand, scale=1.25), wt.TrustSettings()),
    "soft threshold, break-away level x 1.5": lambda: (_variant(ScaledBand, scale=1.5), wt.TrustSettings()),
}


def score_variant(model: str, root: Path, band_cls: type, settings: wt.TrustSettings,
                  mapper_cls: type = wt.ContactWrenchMapper) -> dict[str, Any]:
    d = root / "ur5_ft"
    saved = wt.StictionBand, wt.ContactWrenchMapper
    wt.StictionBand, wt.ContactWrenchMapper = band_cls, mapper_cls  # TrustedWrench builds both from the module's names
    _LAST.clear()
    try:
        out: dict[str, Any] = {}
        for cm in ("wrench", "point"):
            s = dict(settings.__dict__, contact_model=cm)
            rep = wr.replay(model, d / SCORE, "ur5", None, settings=wt.TrustSettings(**s))
            summary, _ = wr.score(rep, d / SCORE, FT_TOPIC, robot="ur5")
            out[f"no10_{cm}"] = {"rmse_n": summary["ours"]["vs_sensor"]["rmse_n"],
                                 "ratio_to_ur": summary["rmse_ratio_ours_to_vendor"]}
        for name, rate in ((VAL, None), ("Movement_No1", 125.0)):
            rep = wr.replay(model, d / name, "ur5", rate, settings=settings)
            summary, _ = wr.score(rep, d / name, None, robot="ur5")
            out[f"false_alarm_{name}"] = summary["ours"]["force_rms_n"]
        return out
    finally:
        wt.StictionBand, wt.ContactWrenchMapper = saved


def bounds(model: str, root: Path) -> dict[str, Any]:
    """Two limits on No10, per contact model.

    - ``no_false_force``: ``idyn wrench``'s ``hidden_by_friction``, the sensor force on the samples where zero force
      explains every joint's residual within its static-friction band. An estimator that stays quiet there (what
      keeps the hunting and the contact-free runs from reading as force) errs by that force: a floor for it.
    - ``oracle_gate_10n``: the band skipped exactly while the sensor reads more than 10 N (its estimate without the
      band there, with it elsewhere): does letting pushes through help, if one could tell them from the hunting?"""
    d = root / "ur5_ft"
    out: dict[str, Any] = {}
    for cm in ("wrench", "point"):
        reps = {on: wr.replay(model, d / SCORE, "ur5", None,
                              settings=wt.TrustSettings(contact_model=cm, stiction_band=on)) for on in (True, False)}
        summary, arrays = wr.score(reps[True], d / SCORE, FT_TOPIC, robot="ur5")
        hidden = summary["hidden_by_friction"]
        row: dict[str, Any] = {
            "vendor_rmse_mean_n": summary["vendor"]["vs_sensor"]["rmse_mean_n"],
            "ours_rmse_mean_n": summary["ours"]["vs_sensor"]["rmse_mean_n"],
            "no_false_force": {"share_of_samples": hidden["share_of_samples"], "rmse_n": hidden["floor_rmse_n"],
                               "ratio_to_ur": hidden["floor_ratio_to_vendor"]}}
        window = wr._bias_window(reps[True], wr.BIAS_WINDOW_S)
        sensor = arrays["sensor"][:, :3] - arrays["sensor"][window, :3].mean(0)
        push = np.linalg.norm(sensor, axis=1) > 10.0
        mixed = reps[True]
        mixed.wrench = np.where(push[:, None], reps[False].wrench, reps[True].wrench)
        s, _ = wr.score(mixed, d / SCORE, FT_TOPIC, robot="ur5")
        row["oracle_gate_10n"] = {"ratio_to_ur": s["rmse_ratio_ours_to_vendor"],
                                  "rmse_n": s["ours"]["vs_sensor"]["rmse_n"]}
        out[cm] = row
        print(f"{cm}: floor for estimators without false force {hidden['floor_ratio_to_vendor']:.2f}x the UR's "
              f"error (F = 0 fits {hidden['share_of_samples'] * 100:.0f} % of the samples); band "
              f"skipped while the sensor reads > 10 N: {s['rmse_ratio_ours_to_vendor']:.2f}x", flush=True)
    return out


def joints_plot(model: str, root: Path, path: Path) -> None:
    """Per joint on No10: the observer's residual before the band and re-zero, and J^T F_sensor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = root / "ur5_ft"
    raw: list[np.ndarray] = []
    saved = wt.TrustedWrench._external

    def keep(self: wt.TrustedWrench, tau_ext: np.ndarray, dq: np.ndarray, at_zero_pose: bool) -> None:
        if self is trust_of[0]:
            raw.append(tau_ext.copy())
        saved(self, tau_ext, dq, at_zero_pose)

    trust_of: list[Any] = []
    saved_init = wt.TrustedWrench.__init__

    def init(self: wt.TrustedWrench, *a: Any, **k: Any) -> None:
        saved_init(self, *a, **k)
        if not trust_of:
            trust_of.append(self)  # the first one replay builds is the momentum observer's

    wt.TrustedWrench._external, wt.TrustedWrench.__init__ = keep, init
    try:
        rep = wr.replay(model, d / SCORE, "ur5", None, settings=wt.TrustSettings(stiction_band=False,
                                                                                 auto_rezero=False))
    finally:
        wt.TrustedWrench._external, wt.TrustedWrench.__init__ = saved, saved_init
    _, arrays = wr.score(rep, d / SCORE, FT_TOPIC, robot="ur5")
    t = (rep.t_ns - rep.t_ns[0]) * 1e-9
    tau = np.vstack([np.full((len(t) - len(raw), 6), np.nan), raw])
    from idyn_ros.experiments.wrench_replay import robot_for
    from idyn_ros.models.artifact import read_metadata

    rbd = robot_for(read_metadata(model), "ur5")
    ft = np.nan_to_num(arrays["sensor"])
    true = np.zeros_like(tau)
    for k in range(len(t)):
        J, R = rbd.flange_jacobian(rep.q[k])
        true[k] = J.T @ np.concatenate([R @ ft[k, :3], R @ ft[k, 3:]])
    win = (t > 1.0) & (t < 2.0)
    fig, ax = plt.subplots(6, 2, figsize=(14, 14), sharex=True)
    for j, name in enumerate(rbd.joint_names):
        ax[j, 0].plot(t, tau[:, j] - np.nanmean(tau[win, j]), lw=0.7, label="observer, no band, no re-zero")
        ax[j, 0].plot(t, true[:, j] - true[win, j].mean(), "k", lw=1.0, label="J^T F/T sensor")
        ax[j, 0].set_ylabel(f"{name}\nNm")
        ax[j, 1].plot(t, (rep.q[:, j] - rep.q[win, j].mean()) * 1e4, lw=0.7)
        ax[j, 1].set_ylabel("q - q0 [1e-4 rad]")
    ax[0, 0].legend(loc="upper left")
    ax[-1, 0].set_xlabel("t [s]")
    ax[-1, 1].set_xlabel("t [s]")
    fig.suptitle(f"{SCORE}: external joint torque vs the F/T sensor mapped to the joints")
    fig.tight_layout()
    fig.savefig(path, dpi=70)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("runs") / "study_wrench_stiction")
    args = parser.parse_args()
    root = _data()
    info = train_model("rbd-friction", args.work, root)
    model = info["artifact"]
    rows = {}
    for name, make in VARIANTS.items():
        rows[name] = score_variant(model, root, *make())
        r = rows[name]
        print(f"{name:<45} No10 / UR: wrench {r['no10_wrench']['ratio_to_ur']:.2f} point "
              f"{r['no10_point']['ratio_to_ur']:.2f}; false alarms |f| RMS {r[f'false_alarm_{VAL}']:.1f} / "
              f"{r['false_alarm_Movement_No1']:.1f} N", flush=True)
    limits = bounds(model, root)
    RESULTS.mkdir(parents=True, exist_ok=True)
    joints_plot(model, root, RESULTS / "joints_no10.png")
    prov = run_provenance("python studies/wrench_stiction/run.py")
    payload = {"model": "rbd-friction", "variants": rows, "bounds": limits}
    print(f"wrote {write_result('variants', payload, '', prov, RESULTS)}")


if __name__ == "__main__":
    main()
