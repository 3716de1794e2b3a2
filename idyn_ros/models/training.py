"""Training loop shared by all model kinds (Reuss et al. 2022 Sec. IV-V).

- Physics first: the RBD (+ friction) part is identified by least squares / SDP for ``rbd*``
  kinds and the 2S hybrids, or initialised at the nominal URDF (``e2e_init="identified"``: at the
  identification) for E2E hybrids, which then train inertial (DiffBary), friction and residual
  parameters jointly.
- Loss: MSE of the min-max scaled total torque, ranges from the training data (Reuss Sec. IV); plus
  ``physics_weight`` x the same loss of the physics part alone (E2E: the residual must not absorb what
  RBD + friction explain) and ``residual_penalty`` x the mean squared scaled residual (its magnitude).
- Regularisation of the residual network: AdamW weight decay on its weights only (never on physics
  parameters), dropout, Gaussian input noise (``ModelConfig``).
- Residual gate: after training, each joint's residual is scaled by g_j in [0, 1], the least-squares fit
  of ``tau - physics = g_j residual`` on the validation recordings (``fit_residual_gate``), folded into
  the output scale. On validation the gated model is then never worse than its own physics part.
- Sequence models train on windows of ``window`` steps with the hidden state reset to zero at the
  start of each window; validation runs each recording as one sequence with the state carried.
- Adam, ReduceLROnPlateau on the validation loss, early stopping, a wall-clock budget, and a
  checkpoint after every epoch, written atomically (``--resume`` continues from it).
- Resume (decision): the checkpoint records the model config, joint names, r-feature version and a
  fingerprint of the train+val data. A different architecture is refused; different data is refused
  unless ``resume_on_new_data`` (then the weights are fine-tuned and early stopping restarts on the
  new validation data); no checkpoint: a warning "starting from scratch".
- Data size (decision): warn when the recordings hold fewer torque equations (samples x joints) than
  the model has fitted parameters: the fit can then memorise them and its train nMSE means nothing.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from idyn_ros.dynamics.friction import friction_basis, n_columns
from idyn_ros.errors import IdentificationError, ModelArtifactError, ParameterError
from idyn_ros.models import checkpoint, identification, rbd
from idyn_ros.models.artifact import same_rate
from idyn_ros.models.features import R_FEATURE_VERSION
from idyn_ros.models.sources import Recording, TrainingWarning, fingerprint, model_rate
from idyn_ros.models.zoo import E2E_KINDS, KINDS, ModelConfig, TorqueModel, rotational_displacement

# torch intra-op threads. Decision: 1. On the shared 2-core machine (load ~9) 3 epochs of hybrid E2E on
# 20k samples took 26.5 s with 2 threads and 1.4 s with 1 (OpenMP threads spin-wait when the cores are
# oversubscribed); our batches (64 x 100 steps, LSTM 50) are too small for 2 threads to gain much.
MAX_THREADS = 1
CHECKPOINT_VERSION = 2  # 1: no config/data fingerprint check (refused unless resume_on_new_data)
# ModelConfig fields that change the network or its physics part: a checkpoint with other values cannot be resumed
ARCHITECTURE_FIELDS = ("kind", "mode", "id_method", "friction_kinds", "e2e_inertial", "linear_dim", "hidden",
                       "mlp_dim", "joint_dim", "delan_dim")


@dataclass
class Prepared:
    """One recording as float32 tensors (+ regressor Y when the model has an RBD part)."""

    q: torch.Tensor
    dq: torch.Tensor
    ddq: torch.Tensor
    tau: torch.Tensor
    Y: torch.Tensor | None
    r: torch.Tensor | None  # hybrid-r: Callar's r over the whole recording (causal, as the runtime sees it)


@dataclass
class TrainResult:
    model: TorqueModel
    cfg: ModelConfig
    history: list[dict[str, float]] = field(default_factory=list)
    identification: dict[str, Any] = field(default_factory=dict)
    tau_min: np.ndarray | None = None
    tau_max: np.ndarray | None = None
    fingerprint: str = ""
    stopped: str = ""  # why training stopped, for people; code reads ``early_stopped``
    early_stopped: bool = False  # validation stopped improving (not the budget or the epoch limit)
    initial_val: float = float("nan")  # validation loss of the initial (physics-only) model
    gate: np.ndarray | None = None  # (n,) residual gate fitted on validation (None: not fitted)
    dq_abs_max: np.ndarray | None = None  # (n,) largest |dq| per joint in the training data (rad/s)
    checkpoint: Path | None = None  # the checkpoint.pt this fit wrote or resumed from (None: it has none)


def learning_curve(history: Sequence[dict[str, float]]) -> dict[str, list[float]]:
    """A fit's losses per epoch for metrics.json (and the training figure): train and val (scaled MSE); an epoch
    without a train loss (a physics-only fit's single evaluation) reads NaN there."""
    return {"epoch": [int(h["epoch"]) for h in history],
            "train": [float(h.get("train", float("nan"))) for h in history],
            "val": [float(h["val"]) for h in history]}


def velocity_range(recs: Sequence[Recording]) -> np.ndarray:
    """Largest |dq| per joint over recordings: the range the runtime holds a fitted model's velocity to."""
    return np.max([np.abs(r.dq).max(axis=0) for r in recs], axis=0).astype(np.float64)


def prepare(pin_model: Any, rec: Recording, need_y: bool, need_r: bool = False) -> Prepared:
    """Tensors for one recording; Y costs ~4 us/sample (pinocchio); r is computed in float64 from q."""
    f32 = torch.float32

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(a, dtype=f32)

    Y = t(rbd.regressor_batch(pin_model, rec.q, rec.dq, rec.ddq)) if need_y else None
    r = rotational_displacement(torch.as_tensor(rec.q, dtype=torch.float64)[None])[0][0].to(f32) if need_r else None
    return Prepared(t(rec.q), t(rec.dq), t(rec.ddq), t(rec.tau), Y, r)


def _physics_init(cfg: ModelConfig, pin_model: Any,
                  recs: Sequence[Recording]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Inertial (n, 10), friction (n, B) and armature (n,) starting values + identification info."""
    pi_nom = rbd.inertial_parameters(pin_model)
    kinds = cfg.friction_kinds if cfg.has_friction else ()
    e2e = cfg.kind in E2E_KINDS and cfg.mode == "e2e"
    n = pin_model.nv
    B = n_columns(kinds)
    if not cfg.has_rbd:
        return pi_nom, np.zeros((n, B)), np.zeros(n), {}
    if cfg.id_method == "nominal" or (e2e and cfg.e2e_init == "nominal"):
        # nominal RBD; friction (and for E2E the armature, clipped >= 0) by LS on the nominal residual per joint
        tau_res = [r.tau - rbd.regressor_batch(pin_model, r.q, r.dq, r.ddq) @ pi_nom.ravel() for r in recs]
        fr = np.zeros((n, B))
        ia = np.zeros(n)
        if B or e2e:
            dq = np.concatenate([r.dq for r in recs])
            res = np.concatenate(tau_res)
            phi = friction_basis(dq, kinds) if B else np.zeros((len(dq), n, 0))  # (N, n, B)
            ddq = np.concatenate([r.ddq for r in recs])
            for j in range(n):
                cols = np.concatenate([phi[:, j], ddq[:, j : j + 1]], axis=1) if e2e else phi[:, j]
                x = np.linalg.lstsq(cols, res[:, j], rcond=None)[0]
                fr[j] = x[:B]
                if e2e:
                    ia[j] = max(float(x[B]), 0.0)
        what = "nominal" + ("+friction" if B else "") + ("+armature" if e2e else "") + ("-ls" if B or e2e else "")
        return pi_nom, fr, ia, {"method": what, "armature": ia.tolist()}
    args = (cfg.id_method, tuple(kinds), cfg.reg, cfg.seed, cfg.id_prior)
    key = None if _identified is None else (id(pin_model), rbd.inertial_parameters(pin_model).tobytes(),
                                            fingerprint(recs), args)
    # copies in and out of the memo: a model may hold the arrays it starts from (a fixed inertial module shares them)
    if key is not None and key in _identified:
        res = copy.deepcopy(_identified[key])
    else:
        res = identification.identify(pin_model, recs, cfg.id_method, kinds, reg=cfg.reg, seed=cfg.seed,
                                      prior=cfg.id_prior)
        if key is not None:
            _identified[key] = copy.deepcopy(res)
    info = {"method": res.method, **{k: v for k, v in res.info.items() if k != "seconds"}}
    return res.pi, res.friction, res.armature, info


_identified: dict[tuple, Any] | None = None  # identifications by their inputs, while ``identify_each_once`` is on


@contextlib.contextmanager
def identify_each_once() -> Iterator[None]:
    """Within it, fits that identify the same physics on the same data (auto's physics candidates and the learned
    candidates on them; SDP ~10 s each) reuse the first identification (keyed by the robot model object, its
    inertial parameters, the data's fingerprint and every identification setting)."""
    global _identified
    outer, _identified = _identified, ({} if _identified is None else _identified)
    try:
        yield
    finally:
        _identified = outer


def _features_stats(cfg: ModelConfig, model: TorqueModel, data: Sequence[Prepared]) -> None:
    """Input mean/std and residual output scale from the training data (stored in the artifact)."""
    with torch.no_grad():
        feats, targets = [], []
        for d in data:
            parts, _ = _run_sequence(model, d, stats_only=True)
            f = [d.q, d.dq, d.ddq]
            if cfg.uses_r:
                f += [parts["tau_rbd"], d.r]
            elif cfg.residual_sees_tau_rbd:
                f.append(parts["tau_rbd"])
            feats.append(torch.cat(f, -1))
            targets.append(d.tau - parts["tau_rbd"] - parts["tau_friction"])
        x = torch.cat(feats)
        y = torch.cat(targets)
        model.norm.set(x.mean(0).numpy(), x.std(0).numpy(), y.std(0).numpy())


def _run_sequence(model: TorqueModel, d: Prepared, stats_only: bool = False) -> tuple[dict[str, torch.Tensor], Any]:
    """Whole recording as one sequence, state carried (Reuss Sec. IV evaluation)."""
    Y = None if d.Y is None else d.Y[None]
    r = None if d.r is None else d.r[None]
    if stats_only:
        saved = model.residual
        model.residual = None
        try:
            parts, st = model(d.q[None], d.dq[None], d.ddq[None], Y, None, r)
        finally:
            model.residual = saved
    else:
        parts, st = model(d.q[None], d.dq[None], d.ddq[None], Y, None, r)
    return {k: v[0] for k, v in parts.items()}, st


def _windows(data: Sequence[Prepared], window: int, stride: int) -> list[tuple[int, int]]:
    out = []
    for i, d in enumerate(data):
        n = len(d.q)
        if n < window:
            out.append((i, 0))
            continue
        out += [(i, s) for s in range(0, n - window + 1, stride)]
    return out


def _batches(data: Sequence[Prepared], windows: Sequence[tuple[int, int]], order: np.ndarray, window: int,
             batch: int) -> list[list[tuple[int, int]]]:
    """The windows in ``order``, ``batch`` at a time; windows shorter than ``window`` (a recording shorter than it)
    batched apart, with the windows of their own length. Why: a batch takes its shortest window's length
    (``_batch``), so one 0.2 s recording among 20 s of data cut every window of its batch from 100 steps to 40."""
    length = {w: min(window, len(data[w[0]].q) - w[1]) for w in windows}
    full = [windows[i] for i in order if length[windows[i]] == window]
    out = [full[b0 : b0 + batch] for b0 in range(0, len(full), batch)]
    short: dict[int, list[tuple[int, int]]] = {}
    for i in order:
        if length[windows[i]] < window:
            short.setdefault(length[windows[i]], []).append(windows[i])
    for group in short.values():
        out += [group[b0 : b0 + batch] for b0 in range(0, len(group), batch)]
    return out


def _batch(data: Sequence[Prepared], idx: Sequence[tuple[int, int]], window: int) -> tuple[Any, ...]:
    sl = [(data[i], slice(s, s + window)) for i, s in idx]
    L = min(len(d.q[s]) for d, s in sl)

    def st(name: str) -> torch.Tensor:
        return torch.stack([getattr(d, name)[s][:L] for d, s in sl])

    Y = None if data[0].Y is None else st("Y")
    r = None if data[0].r is None else st("r")
    return st("q"), st("dq"), st("ddq"), st("tau"), Y, r


def evaluate_scaled(model: TorqueModel, data: Sequence[Prepared], tau_range: torch.Tensor) -> float:
    """Mean min-max scaled MSE over recordings (whole sequences)."""
    model.eval()
    with torch.no_grad():  # DeLaN too: its forward is closed form (no autograd)
        losses = []
        for d in data:
            parts, _ = _run_sequence(model, d)
            losses.append(float((((parts["tau"].detach() - d.tau) / tau_range) ** 2).mean()))
    return float(np.mean(losses))


def fit_residual_gate(model: TorqueModel, data: Sequence[Prepared]) -> np.ndarray:
    """Per-joint gate g in [0, 1] on the residual, folded into its output scale; returns g (n,).

    g_j = <e_j, r_j> / <r_j, r_j> with e = tau - (RBD + friction) and r the residual over the recordings (each
    one sequence, state carried), clipped to [0, 1]. Decision: never above 1 (a gate only trusts the residual
    less, it never extrapolates it). g_j = 0 means joint j's residual did not help on validation.
    """
    model.eval()
    num = torch.zeros(model.n, dtype=torch.float64)
    den = torch.zeros(model.n, dtype=torch.float64)
    with torch.no_grad():
        for d in data:
            parts, _ = _run_sequence(model, d)
            e = (d.tau - parts["tau_rbd"] - parts["tau_friction"]).double()
            r = parts["tau_residual"].double()
            num += (e * r).sum(0)
            den += (r * r).sum(0)
        g = torch.where(den > 0, num / den.clamp(min=1e-300), torch.zeros_like(den)).clamp(0.0, 1.0)
    fold_gate(model, g.numpy())
    return g.numpy()


def fold_gate(model: TorqueModel, gate: np.ndarray) -> None:
    """Scale each joint's residual output by its gate, in the output scale (exported with the model)."""
    with torch.no_grad():
        model.norm.y_scale.mul_(torch.as_tensor(gate, dtype=model.norm.y_scale.dtype))


def _optimizer(cfg: ModelConfig, model: TorqueModel, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """AdamW: weight decay on the network weights (residual / DeLaN) only; physics parameters never decay."""
    nets = [m for m in (model.residual, model.delan) if m is not None]
    net_ids = {id(p) for m in nets for p in m.parameters()}
    groups = [{"params": [p for p in params if id(p) not in net_ids], "weight_decay": 0.0},
              {"params": [p for p in params if id(p) in net_ids], "weight_decay": cfg.weight_decay}]
    lr = cfg.lr if cfg.kind != "delan" else min(cfg.lr, 1e-3)
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr)


def fitted_parameter_count(cfg: ModelConfig, model: TorqueModel) -> int:
    """Parameters fitted to the data: trained ones plus those identified before training (frozen physics)."""
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if not cfg.has_rbd or (cfg.kind in E2E_KINDS and cfg.mode == "e2e"):
        return trained
    identified = model.friction.numel() + (0 if cfg.id_method == "nominal" else model.n * 11)  # 10 inertial + Ia
    return trained + identified


def _warn_if_little_data(cfg: ModelConfig, model: TorqueModel, train: Sequence[Recording]) -> None:
    """The data-size rule of the module doc, with the numbers a user needs to act on it."""
    samples = sum(r.n_samples for r in train)
    seconds = sum(r.n_samples / r.rate_hz for r in train if r.n_samples > 1)
    fitted = fitted_parameter_count(cfg, model)
    values = samples * model.n
    if values >= fitted:
        return
    need = math.ceil(fitted / model.n)
    warnings.warn(
        f"little training data for the {cfg.kind} model: {seconds:.2f} s = {samples} samples x {model.n} joints = "
        f"{values} torque values for {fitted} fitted parameters, so it can memorise them and its train nMSE means "
        f"little; record at least {need} samples ({need / cfg.rate_hz:.0f} s at {cfg.rate_hz:g} Hz) or use a "
        f"smaller model (--hidden, or --model rbd-friction)", TrainingWarning, stacklevel=3)


def _same(a: Any, b: Any) -> bool:
    norm = [list(x) if isinstance(x, list | tuple) else x for x in (a, b)]
    return norm[0] == norm[1]


def _checkpoint_to_resume(path: Path, cfg: ModelConfig, robot: Any, data_sha256: str,
                          resume_on_new_data: bool) -> dict[str, Any] | None:
    """The checkpoint to continue from, after the resume rules of the module doc (None: start from scratch)."""
    if not path.exists():
        warnings.warn(f"--resume: no checkpoint in {path.parent}; starting from scratch", TrainingWarning, stacklevel=3)
        return None
    ck = checkpoint.load(path, "checkpoint", "delete it to start from scratch, or train into another --out")
    old = ck.get("cfg") or {}
    diff = [f"{k} {old.get(k)!r} -> {getattr(cfg, k)!r}" for k in ARCHITECTURE_FIELDS
            if not _same(old.get(k), getattr(cfg, k))]
    names = list(ck.get("joint_names") or [])
    if (names and names != list(robot.joint_names)) or ck.get("n") != robot.pin_model.nv:
        diff.append(f"joints {names or ck.get('n')} -> {list(robot.joint_names)}")
    if diff:
        raise ParameterError(f"{path}: cannot resume, the checkpoint is another model ({'; '.join(diff)}); repeat "
                             f"its options or train into another --out")
    if cfg.uses_r and ck.get("r_feature_version") != R_FEATURE_VERSION:
        raise ModelArtifactError(f"{path}: cannot resume, trained with an older definition of the r feature; "
                                 f"delete the checkpoint or train into another --out")
    if ck.get("data_sha256") != data_sha256:
        what = ("has no data fingerprint (older idyn_ros)" if "data_sha256" not in ck
                else "was trained on other data (--data/--val differ)")
        if not resume_on_new_data:
            raise ParameterError(f"{path}: cannot resume, the checkpoint {what}; repeat the original --data/--val, "
                                 f"pass --resume-on-new-data to fine-tune it on this data, or use another --out")
        warnings.warn(f"{path}: the checkpoint {what}: fine-tuning its weights on this data from epoch "
                      f"{ck['epoch'] + 1}; early stopping restarts on the new validation data", TrainingWarning,
                      stacklevel=3)
        ck = {**ck, "best": math.inf, "best_state": None, "bad": 0}
    return ck


def fit(
    cfg: ModelConfig,
    robot: Any,
    train: Sequence[Recording],
    val: Sequence[Recording] = (),
    out_dir: str | Path | None = None,
    max_minutes: float | None = None,
    resume: bool = False,
    progress: bool = True,
    resume_on_new_data: bool = False,
    *,
    budget_of: float | None = None,
) -> TrainResult:
    """Identify/initialise the physics part, then train the learnable parts (see module doc).

    ``budget_of``: the whole time budget when ``max_minutes`` is only this fit's share of it (a stage of delan-lstm),
    so that the stop text says which budget stopped it, not a smaller one that reads as the user's.
    """
    _check_config(cfg, max_minutes)
    # resolved here so the artifact's config says which prior and strength the identification used
    cfg.id_prior, cfg.reg = identification.resolve_prior(cfg.id_method, cfg.id_prior, cfg.reg, robot.pin_model)
    if not train:
        raise IdentificationError("no training recordings given")
    torch.set_num_threads(MAX_THREADS)
    torch.manual_seed(cfg.seed)
    pin_model = robot.pin_model
    n = pin_model.nv
    cfg.rate_hz = cfg.rate_hz or model_rate(train)[0]
    off = [f"{r.source or 'a recording'} ({r.rate_hz:.4g} Hz)" for r in [*train, *val]
           if r.n_samples > 1 and not same_rate(r.rate_hz, cfg.rate_hz)]
    if off:
        warnings.warn(f"the model's rate is {cfg.rate_hz:g} Hz but {', '.join(off)} are at another rate: a recurrent "
                      f"residual advances once per sample, so they are other inputs to it; load them with "
                      f"models.sources.load_split (as `idyn train` does) to resample them", TrainingWarning,
                      stacklevel=2)
    if cfg.kind == "mlp-hybrid":
        cfg.mode = "2s"  # Reuss: the MLP hybrid is only trained two-stage
    train_sha = fingerprint(train)
    data_sha = fingerprint([*train, *val])
    ckpt_path = Path(out_dir) / "checkpoint.pt" if out_dir else None
    if resume and ckpt_path is None:
        raise ParameterError("resume needs the run directory (out_dir) that holds checkpoint.pt")
    ck = _checkpoint_to_resume(ckpt_path, cfg, robot, data_sha, resume_on_new_data) if resume else None
    pi0, fr0, ia0, id_info = _physics_init(cfg, pin_model, train)
    model = TorqueModel(cfg, n, pi0)
    with torch.no_grad():
        model.friction.copy_(torch.as_tensor(fr0))
        model.ia.copy_(torch.as_tensor(ia0))
    model.set_velocity_hold(velocity_range(train))  # validation, test and export score what the runtime runs
    if cfg.mode == "2s" or cfg.kind in ("rbd", "rbd-friction"):
        model.freeze_physics()
    stage1 = None
    if cfg.kind == "delan-lstm" and ck is None:  # Doenges 2025 sec. 3.2: DeLaN first, frozen, then the residual LSTM
        stage1, id_info, stage2_budget = _fit_delan_stage(cfg, robot, model, train, val, max_minutes, progress)
        budget_of, max_minutes = max_minutes, stage2_budget
    if cfg.kind == "delan-lstm":
        model.delan.requires_grad_(False)
        model.friction.requires_grad_(False)
    _warn_if_little_data(cfg, model, train)
    need_y, need_r = cfg.has_rbd, cfg.uses_r
    tr = [prepare(pin_model, r, need_y, need_r) for r in train]
    va = [prepare(pin_model, r, need_y, need_r) for r in val] or tr
    _features_stats(cfg, model, tr)
    tau_all = torch.cat([d.tau for d in tr])
    tau_min, tau_max = tau_all.min(0).values, tau_all.max(0).values
    tau_range = (tau_max - tau_min).clamp(min=1e-6)  # Reuss Sec. IV min-max scaling
    result = TrainResult(model, cfg, [], id_info, tau_min.numpy().astype(np.float64),
                         tau_max.numpy().astype(np.float64), train_sha,
                         dq_abs_max=velocity_range(train), checkpoint=ckpt_path if ck is not None else None)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        result.stopped = "nothing to train (physics only)"
        result.history.append({"epoch": 0, "val": evaluate_scaled(model, va, tau_range)})
        return result

    opt = _optimizer(cfg, model, params)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.3, patience=cfg.lr_patience)
    start_epoch, best, best_state, bad = 0, math.inf, None, 0
    if ck is not None:
        model.load_state_dict(ck["model"])
        try:
            opt.load_state_dict(ck["opt"])
            sched.load_state_dict(ck["sched"])
        except (ValueError, KeyError):  # written by an older optimiser layout: the weights still resume
            warnings.warn(f"{ckpt_path}: optimiser state of an older idyn_ros; the weights resume, Adam's moments "
                          f"restart", TrainingWarning, stacklevel=2)
        start_epoch, best, best_state, bad = ck["epoch"] + 1, ck["best"], ck["best_state"], ck["bad"]
        result.history = ck["history"]
    result.initial_val = evaluate_scaled(model, va, tau_range)
    windows = _windows(tr, cfg.window, cfg.stride)
    rng = np.random.default_rng(cfg.seed)
    t0 = time.perf_counter()
    from idyn_ros.progress import progress_bar

    bar = progress_bar(range(start_epoch, cfg.epochs), desc=f"train {cfg.kind}", enabled=progress, unit="ep")
    for epoch in bar:
        train_loss = _train_epoch(cfg, model, opt, params, tr, windows, rng.permutation(len(windows)), tau_range)
        val_loss = evaluate_scaled(model, va, tau_range)
        sched.step(val_loss)
        result.history.append({"epoch": epoch, "train": train_loss, "val": val_loss,
                               "lr": opt.param_groups[0]["lr"]})
        if val_loss < best:
            best, bad = val_loss, 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
        bar.set_postfix(train=f"{train_loss:.2e}", val=f"{val_loss:.2e}", best=f"{best:.2e}")
        if ckpt_path:
            checkpoint.save({"version": CHECKPOINT_VERSION, "model": model.state_dict(), "opt": opt.state_dict(),
                             "sched": sched.state_dict(), "epoch": epoch, "best": best, "best_state": best_state,
                             "bad": bad, "history": result.history, "cfg": cfg.to_dict(), "n": n, "pi0": pi0,
                             "joint_names": list(robot.joint_names), "data_sha256": data_sha,
                             "r_feature_version": R_FEATURE_VERSION}, ckpt_path)
            result.checkpoint = ckpt_path
        if bad >= cfg.patience:
            result.stopped = f"early stop at epoch {epoch} (no val improvement for {cfg.patience})"
            result.early_stopped = True
            break
        if max_minutes is not None and time.perf_counter() - t0 > 60 * max_minutes:
            result.stopped = _budget_stop(max_minutes, budget_of, epoch)
            break
    else:
        result.stopped = f"max epochs ({cfg.epochs})"
    bar.close()
    if cfg.kind == "delan-lstm":  # the stop of each stage: the residual's alone hid a DeLaN cut short by the budget
        first = (f"stage 1 of 2 (DeLaN): {stage1.stopped}; then" if stage1 is not None
                 else "stage 1 of 2 (DeLaN) ran before --resume;")
        result.stopped = f"{first} stage 2 of 2 (residual LSTM): {result.stopped}"
    if best_state is not None:
        model.load_state_dict(best_state)
    if cfg.gate and val and cfg.has_rbd and model.residual is not None:
        result.gate = fit_residual_gate(model, va)
    return result


def _check_config(cfg: ModelConfig, max_minutes: float | None) -> None:
    """Refuse a configuration ``fit`` cannot train (ParameterError naming the setting)."""
    if cfg.kind not in KINDS:
        raise ParameterError(f"unknown model kind '{cfg.kind}'; choose one of {KINDS}")
    if cfg.mode not in ("e2e", "2s"):
        raise ParameterError(f"--mode must be e2e or 2s, not '{cfg.mode}'")
    if cfg.e2e_init not in ("nominal", "identified"):
        raise ParameterError(f"e2e_init must be nominal or identified, not '{cfg.e2e_init}'")
    if min(cfg.physics_weight, cfg.dropout, cfg.input_noise, cfg.residual_penalty, cfg.weight_decay) < 0 \
            or cfg.dropout >= 1:
        raise ParameterError("physics_weight, input_noise, residual_penalty and weight_decay must be >= 0, "
                             "dropout in [0, 1)")
    if max_minutes is not None and not max_minutes > 0:
        raise ParameterError(f"max_minutes must be > 0 (got {max_minutes}); leave it out for no time budget")
    if cfg.bases != 1:
        raise ParameterError("a model averaged over physics bases is assembled from fitted members "
                             "(TorqueModel.average_over_bases, used by --model auto), not trained as a whole")


def _fit_delan_stage(cfg: ModelConfig, robot: Any, model: TorqueModel, train: Sequence[Recording],
                     val: Sequence[Recording], max_minutes: float | None,
                     progress: bool) -> tuple[TrainResult, dict[str, Any], float | None]:
    """delan-lstm's stage 1: DeLaN fitted alone on half the budget, copied into ``model``; returns its result, the
    identification info that reports it, and the budget left for the residual LSTM."""
    t_stage1 = time.perf_counter()
    stage1 = fit(dataclasses.replace(cfg, kind="delan"), robot, train, val, None,
                 None if max_minutes is None else max_minutes / 2, False, progress, budget_of=max_minutes)
    stage1_minutes = (time.perf_counter() - t_stage1) / 60.0
    with torch.no_grad():
        model.delan.load_state_dict(stage1.model.delan.state_dict())
        model.friction.copy_(stage1.model.friction)
    id_info = {"stage1_delan": {"stopped": stage1.stopped, "epochs": len(stage1.history),
                                "val": stage1.history[-1].get("val") if stage1.history else None}}
    return stage1, id_info, stage2_minutes(max_minutes, stage1_minutes)


def _train_epoch(cfg: ModelConfig, model: TorqueModel, opt: Any, params: list, tr: Sequence[Prepared],
                 windows: list, order: np.ndarray, tau_range: torch.Tensor) -> float:
    """One pass over the training windows in ``order`` (batches of ``cfg.batch``); returns the mean scaled loss."""
    model.train()
    tot = 0.0
    for chosen in _batches(tr, windows, order, cfg.window, cfg.batch):
        q, dq, ddq, tau, Y, r = _batch(tr, chosen, cfg.window)
        parts, _ = model(q, dq, ddq, Y, None, r)  # hidden state zero at each window start; r as online
        loss = (((parts["tau"] - tau) / tau_range) ** 2).mean()
        if cfg.physics_weight:
            loss = loss + cfg.physics_weight * (((parts["tau_rbd"] + parts["tau_friction"] - tau)
                                                 / tau_range) ** 2).mean()
        if cfg.residual_penalty:
            loss = loss + cfg.residual_penalty * ((parts["tau_residual"] / tau_range) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        tot += float(loss.detach()) * len(q)
    return tot / len(windows)


def stage2_minutes(whole: float | None, stage1_minutes: float) -> float | None:
    """delan-lstm's LSTM budget: what DeLaN left of ``whole`` (an early stop passes its time on), at least half."""
    return None if whole is None else max(whole - stage1_minutes, whole / 2)


def _budget_stop(minutes: float, whole: float | None, epoch: int) -> str:
    """Why training stopped when the time budget ran out: ``minutes``, or a share of the ``whole`` one."""
    if whole is None:
        return f"time budget of {minutes:.3g} min reached at epoch {epoch}"
    return f"stopped at its share of the time budget, {minutes:.3g} of {whole:.3g} min, at epoch {epoch}"


def fit_again(result: TrainResult, robot: Any, data: Sequence[Recording], progress: bool = True) -> TrainResult:
    """``result``'s configuration fitted on ``data`` for the epochs its own fit needed (up to its best validation
    epoch), with no validation: the physics is identified on all of ``data``; its residual gate is applied again."""
    epochs = 1 + int(np.argmin([h["val"] for h in result.history])) if result.history else 1
    out = fit(dataclasses.replace(result.cfg, epochs=epochs, patience=epochs + 1), robot, data, (), progress=progress)
    out.cfg = out.model.cfg = dataclasses.replace(out.cfg, epochs=result.cfg.epochs, patience=result.cfg.patience)
    apply_gate(out, result.gate)
    return out


def apply_gate(result: TrainResult, gate: np.ndarray | None) -> None:
    """Fold a gate fitted on validation (``training.fit_residual_gate``) into a refitted model's residual scale."""
    if gate is not None and result.model.residual is not None:
        fold_gate(result.model, gate)
        result.gate = gate.copy()


def predict(model: TorqueModel, pin_model: Any, rec: Recording) -> dict[str, np.ndarray]:
    """Parts (N, n) in Nm for one recording, evaluated as one sequence with state carried."""
    d = prepare(pin_model, rec, model.inertial is not None, model.cfg.uses_r)
    model.eval()
    with torch.no_grad():  # DeLaN too: its forward is closed form (no autograd)
        parts, _ = _run_sequence(model, d)
    return {k: v.detach().numpy().astype(np.float64) for k, v in parts.items()}
