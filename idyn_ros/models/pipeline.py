"""Train -> evaluate -> export in one call (used by `idyn train`, `idyn export` and the benchmarks).

A run directory holds ``model.onnx`` (the artifact), ``metrics.json``, ``model.pt`` (everything
needed to rebuild the torch model: config, state, initial inertials, training ranges, fingerprint;
what `idyn export` re-exports from) and ``checkpoint.pt`` (per-epoch, for ``--resume``; a run that exports
removes one an earlier run left, ``remove_stale_run_files``). Every file is written atomically (temp file +
rename): a killed run leaves the previous complete file, never a partial one.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.data.atomic import atomic_write_text
from idyn_ros.errors import ModelArtifactError, ParameterError, TrainingError
from idyn_ros.models import checkpoint
from idyn_ros.models import export as ex
from idyn_ros.models.features import R_FEATURE_VERSION
from idyn_ros.models.metrics import (
    OVERLAP_RADIUS,
    OVERLAP_WARNING,
    json_ready,
    speed_coverage,
    speed_warning,
    state_overlap,
    torque_metrics,
    validation_candidates,
)
from idyn_ros.models.sources import Recording, TrainingWarning
from idyn_ros.models.training import TrainResult, fit, learning_curve, predict
from idyn_ros.models.uncertainty import torque_uncertainty
from idyn_ros.models.zoo import ModelConfig, TorqueModel


def evaluate_torch(result: TrainResult, robot: Any, recs: Sequence[Recording],
                   preds: Sequence[np.ndarray] | None = None) -> dict[str, Any]:
    """Metrics over recordings (concatenated; each run as one sequence with state carried; ``preds``: already
    predicted torques of each)."""
    if preds is None:
        preds = [predict(result.model, robot.pin_model, r)["tau"] for r in recs]
    taus = [r.tau for r in recs]
    return torque_metrics(np.concatenate(preds), np.concatenate(taus), result.tau_min, result.tau_max)


def save_model(path: str | Path, result: TrainResult, pi0: np.ndarray, metrics: dict[str, Any],
               effort: dict[str, Any] | None = None, uncertainty: dict[str, Any] | None = None,
               robot: Any = None) -> None:
    """``effort``: how the training data's efforts became torques (``models.current_gains``), None for torques;
    ``uncertainty``: ``models.uncertainty.torque_uncertainty`` of the validation residuals; ``robot``: the robot
    trained for, whose name and joints are kept so that a re-export for another robot is refused."""
    checkpoint.save({"cfg": result.cfg.to_dict(), "state": result.model.state_dict(), "n": result.model.n,
                     "robot": None if robot is None else robot.name,
                     "joint_names": None if robot is None else list(robot.joint_names),
                     "pi0": pi0, "tau_min": result.tau_min, "tau_max": result.tau_max, "dq_abs_max": result.dq_abs_max,
                     "fingerprint": result.fingerprint, "metrics": metrics,
                     "identification": result.identification, "r_feature_version": R_FEATURE_VERSION,
                     "effort": effort, "uncertainty": uncertainty}, path)


def load_model(path: str | Path) -> tuple[TorqueModel, dict[str, Any]]:
    """Rebuild the torch model from ``model.pt``."""
    path = Path(path)
    if path.is_dir():
        path = path / "model.pt"
    ck = checkpoint.load(path, "model file", "`idyn train --out DIR` writes DIR/model.pt; train again")
    cfg = ck.get("cfg") or {}
    if cfg.get("kind") in ("hybrid-r", "hybrid-j") and ck.get("r_feature_version") != R_FEATURE_VERSION:
        raise ModelArtifactError(f"{path}: this {cfg.get('kind')} model was trained with an older definition of the r "
                                 f"feature (integrated dq); exporting it would feed it another r: retrain it")
    model = TorqueModel(ModelConfig.from_dict(ck["cfg"]), ck["n"], np.asarray(ck["pi0"]))
    model.load_state_dict(ck["state"])
    model.set_velocity_hold(ck.get("dq_abs_max"))
    model.eval()
    return model, ck


def export_model(model: TorqueModel, ck: dict[str, Any], robot: Any, out: str | Path) -> str:
    """Write the ONNX artifact for a rebuilt model; returns the model id."""
    trained_for = ck.get("joint_names")  # None in a model.pt written before they were kept
    if trained_for is not None and list(trained_for) != list(robot.joint_names):
        raise ModelArtifactError(f"the model was trained for robot '{ck.get('robot')}' with joints {trained_for}, "
                                 f"not for '{robot.name}' with {list(robot.joint_names)}; pass the robot it was "
                                 "trained for")
    tr = None if ck.get("tau_min") is None else (ck["tau_min"], ck["tau_max"])
    meta = ex.build_metadata(model, robot, ck.get("fingerprint", ""), ck.get("metrics"), tr, ck.get("dq_abs_max"))
    meta["effort"] = ck.get("effort") or {"kind": "torque", "unit": "Nm"}
    meta["uncertainty"] = ck.get("uncertainty")
    return ex.export_onnx(model, robot, out, meta)


def _repeated_validation_warning(share: float, spare: list[dict[str, Any]], chose_on: dict[str, Any] | None = None
                                 ) -> str:
    """The warning for a validation that repeats the training states, naming training recordings that could validate
    (and the one auto chooses on instead, if any)."""
    scores = "its scores" if chose_on else "its scores (and auto's choice)"
    msg = (f"{share:.0%} of the validation states are already in the training data (within {OVERLAP_RADIUS:g} std): "
           f"validation repeats the training trajectory, so {scores} measure noise, not how the model carries to "
           f"another trajectory; validate on a different trajectory")
    files = [r for r in spare if r.get("whole_file", True)]  # a segment of a gapped file is no path --val can take
    if files:
        names = ", ".join(f"{r['recording']} ({r['covered']:.0%} covered)" for r in files)
        msg += f". Training recordings the others hardly cover, which could validate instead (--val): {names}"
    if chose_on:
        msg += (f". auto chooses its model on {chose_on['recording']} instead, held out of training, then fits the "
                f"model it chose again on all the training recordings")
    return msg


# Decision: a held-out recording must hold at least this share of the training samples to choose on (a few seconds
# of one motion rank candidates by chance), and the rest must keep the larger part.
MIN_HELD_SHARE = 0.05
MAX_HELD_SHARE = 0.5


def _uncovered_recording(train: Sequence[Recording], spare: Sequence[tuple[int, float]]) -> int | None:
    """Index of the training recording auto chooses on when the validation given repeats training: the one the others
    cover least (``metrics.validation_candidates``), within ``MIN_HELD_SHARE``..``MAX_HELD_SHARE`` of the samples."""
    total = sum(len(r.t) for r in train)
    for i, _ in spare:
        if MIN_HELD_SHARE <= len(train[i].t) / total <= MAX_HELD_SHARE:
            return i
    return None


def _validation_overlap(train: Sequence[Recording], val: Sequence[Recording]
                        ) -> tuple[dict[str, Any] | None, list[tuple[int, float]] | None]:
    """metrics.json's ``validation_overlap`` (None without validation) and, when validation repeats training, the
    training recordings the others cover least (``validation_candidates``), else None."""
    if not (train and val):
        return None, None
    overlap: dict[str, Any] = {"share": state_overlap(train, val), "radius_std": OVERLAP_RADIUS}
    if overlap["share"] < OVERLAP_WARNING:
        return overlap, None
    spare = validation_candidates(train)
    overlap["could_validate"] = [{"recording": _short_source(train[i].source, i), "covered": s,
                                  "whole_file": not train[i].segment} for i, s in spare]
    return overlap, spare


def warn_validation_overlap(train: Sequence[Recording], val: Sequence[Recording]) -> dict[str, Any] | None:
    """The overlap check of ``train_run`` for the kinds trained elsewhere (GPs): warns the same, returns the same."""
    overlap, spare = _validation_overlap(train, val)
    if spare is not None:
        warnings.warn(_repeated_validation_warning(overlap["share"], overlap["could_validate"]), stacklevel=2)
    return overlap


def _short_source(source: str, index: int) -> str:
    """A recording's file name without folders or topic, for messages."""
    return Path(source.split(":/", maxsplit=1)[0]).name or f"recording {index + 1}"


# Decision: a kind without an identified physics part whose validation mean nMSE exceeds 100 % (worse than predicting
# each joint's mean torque) is refused, as a GP is (models.gp.train.HELDOUT_MAX_NMSE_PERCENT); a hybrid's residual gate
# already keeps it at least as good as its physics on validation
NO_PHYSICS_KINDS = ("lstm", "delan", "delan-lstm")
HELDOUT_MAX_NMSE = 1.0


def export_problem(model: TorqueModel, kind: str, robot: Any, val_metrics: dict[str, Any] | None,
                   allow_inconsistent: bool = False) -> str | None:
    """Why a trained model must not be exported, or None: bodies the fit made physically inconsistent (consistent in
    the URDF, not in the fit: M(q) can be indefinite, and a computed-torque controller inverts it), or a kind without
    physics that validates worse than the mean torque."""
    if model.inertial is not None and not allow_inconsistent:
        import torch

        from idyn_ros.dynamics.inertia import check_physical_consistency

        with torch.no_grad():
            pi = model.pi().double().numpy().reshape(-1, 10)
        nominal = np.asarray(robot.inertial_parameters(), dtype=np.float64).reshape(-1, 10)
        broken = []
        for name, fitted, urdf in zip(robot.joint_names, pi, nominal, strict=True):
            problems = check_physical_consistency(fitted, names=[f"body of {name}"])
            if problems and not check_physical_consistency(urdf):
                broken.append(problems[0])
        if broken:
            return (f"the fit made {len(broken)} bod{'y' if len(broken) == 1 else 'ies'} physically inconsistent "
                    f"({'; '.join(broken[:3])}), so M(q) can be indefinite. Identify with --id-method sdp (the "
                    "default), diffbary or logchol; --allow-inconsistent exports it anyway, for analysis only")
    held = None if val_metrics is None else val_metrics.get("nmse_mean")
    if kind in NO_PHYSICS_KINDS and held is not None and not held <= HELDOUT_MAX_NMSE:  # NaN too
        return (f"the {kind} fit is worse than predicting the mean torque on validation (mean nMSE {100 * held:.4g} "
                "%); give it more or other data, or use a kind with physics (idyn train --model auto)")
    return None


def train_run(
    cfg: ModelConfig,
    robot: Any,
    train: Sequence[Recording],
    val: Sequence[Recording] = (),
    test: Sequence[Recording] = (),
    out_dir: str | Path | None = None,
    max_minutes: float | None = None,
    resume: bool = False,
    progress: bool = True,
    resume_on_new_data: bool = False,
    effort: dict[str, Any] | None = None,
    validation_note: str = "",
    refit: bool = False,
    choose_on_uncovered: bool = False,
    allow_inconsistent: bool = False,
) -> tuple[TrainResult, dict[str, Any]]:
    """Fit, compute train/val/test metrics, and (with ``out_dir``) save model.pt/model.onnx/metrics.json.

    ``cfg.kind == "auto"``: the candidates of ``idyn_ros.models.auto`` are fitted and the winner is saved;
    ``metrics["candidates"]`` lists every candidate's validation scores. ``validation_note``: where the
    validation data came from (e.g. a held-out tail), recorded in metrics.json. ``effort``: the recordings'
    efforts were motor currents turned into torques with ``effort["torque_constants"]``
    (``models.current_gains``): stored in the artifact, and the metrics get the RMSE in current units too.
    ``refit`` (auto only, for a validation held out of the user's training data): the winner is fitted again on
    train + val (``models.auto.refit``); ``metrics["val"]`` and the uncertainty stay those of the fit it was chosen as.
    ``choose_on_uncovered`` (auto; off: 22 % worse on a plant in studies/auto_selection, ``uncovered_validation``):
    when ``val`` repeats the training states, choose on the training recording the others cover least instead
    (``_uncovered_recording``), then refit the winner on all of ``train`` (and on ``val`` too with ``refit``);
    ``metrics["val"]`` is then that recording's score, ``metrics["val_given"]`` the one of ``val``.
    With ``out_dir``, ``export_problem`` refuses (TrainingError, no model written) a fit that made a body physically
    inconsistent (unless ``allow_inconsistent``: baselines in a comparison) or, without a physics part, one that is
    worse than the mean torque on validation.
    """
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    overlap, spare = _validation_overlap(train, val)
    held: int | None = None  # auto: the training recording it chooses on instead of a validation that repeats training
    if spare is not None:  # said before training, which can take minutes
        if cfg.kind == "auto" and choose_on_uncovered:
            held = _uncovered_recording(train, spare)
        if held is not None:
            overlap["chose_on"] = overlap["could_validate"][[i for i, _ in spare].index(held)]
        warnings.warn(_repeated_validation_warning(overlap["share"], overlap["could_validate"],
                                                   overlap.get("chose_on")), stacklevel=2)
    n_val = sum(r.n_samples for r in val)
    if val and n_val < cfg.window:  # decision: a warning, not a refusal: a user may know how little data they have
        uses = "early stopping, the residual gate" + (" and auto's choice" if cfg.kind == "auto" else "")
        warnings.warn(f"the validation data hold {n_val} samples, fewer than one training window ({cfg.window}): "
                      f"its score, {uses} rest on them and mean little; validate on a longer recording of another "
                      f"motion, or leave --val out (a tail of the training data is then held out)", TrainingWarning,
                      stacklevel=2)
    candidates = None
    given_val: list[Recording] = []  # the validation passed in, when auto chose on a training recording instead
    if cfg.kind == "auto":
        from idyn_ros.models.auto import fit_auto

        if resume:
            raise ParameterError("--resume applies to one model kind; auto fits several candidates (drop --resume)")
        select_on = list(train)
        refit_on = [*train, *val] if refit and val else None
        if held is not None:
            given_val, val = list(val), [train[held]]
            select_on = [r for i, r in enumerate(train) if i != held]
            refit_on = [*train, *given_val] if refit else list(train)
            note = f"auto chose on {overlap['chose_on']['recording']} (held out of training), not on the given --val"
            validation_note = f"{validation_note}; {note}" if validation_note else note
        res, candidates = fit_auto(cfg, robot, select_on, val, max_minutes, progress,
                                   overlap=None if overlap is None or held is not None else overlap["share"],
                                   refit_on=refit_on)
        chosen = res  # the fit validation scored: the exported one, or before its refit
        if refit_on is not None:
            chosen = next(c.result for c in candidates if c.name == res.cfg.extra["candidate"])
    elif refit:  # decision: not for one kind (studies/auto_selection, time_split_kinds: > 2 % worse on 4 of 21)
        raise ParameterError("refit applies to auto (a single kind keeps the fit its validation stopped)")
    else:
        res = chosen = fit(cfg, robot, train, val, out_dir, max_minutes, resume, progress, resume_on_new_data)
    preds = {name: [predict(m.model, robot.pin_model, r)["tau"] for r in recs]
             for name, recs, m in (("train", train, res), ("val", val, chosen), ("test", test, res))}
    metrics: dict[str, Any] = {"kind": res.cfg.kind, "mode": res.cfg.mode, "stopped": res.stopped,
                               "epochs_run": len(res.history), "history": learning_curve(res.history),
                               "identification": res.identification,
                               "train": evaluate_torch(res, robot, train, preds["train"])}
    if validation_note:
        metrics["validation_data"] = validation_note
    if overlap is not None:
        metrics["validation_overlap"] = overlap
    if res.gate is not None:
        metrics["residual_gate"] = [float(g) for g in res.gate]
    if candidates is not None:
        metrics["selected"] = res.cfg.extra.get("candidate")
        metrics["candidates"] = [c.row() for c in candidates]
    if val:
        metrics["val"] = evaluate_torch(chosen, robot, val, preds["val"])
    if given_val:  # the exported model on the validation passed in (it repeats training: not what auto chose on)
        metrics["val_given"] = evaluate_torch(res, robot, given_val,
                                              [predict(res.model, robot.pin_model, r)["tau"] for r in given_val])
    if test:
        metrics["test"] = evaluate_torch(res, robot, test, preds["test"])
    hold = res.model.dq_hold.detach().numpy()
    if np.all(np.isfinite(hold)):
        for split, recs in (("val", val if chosen is res else ()), ("test", test)):
            if recs:
                coverage = speed_coverage(hold, recs)
                metrics.setdefault("speed_coverage", {})[split] = coverage
                message = speed_warning(f"the {'validation' if split == 'val' else 'test'} data", coverage,
                                        robot.joint_names)
                if message:
                    warnings.warn(message, stacklevel=2)
    uncertainty = torque_uncertainty([(name, recs, preds[name]) for name, recs in
                                      (("val", val), ("test", test), ("train", train))])
    if uncertainty and uncertainty.get("split") == "val" and overlap is not None and held is None:
        uncertainty["val_repeats_training"] = bool(overlap["share"] >= OVERLAP_WARNING)  # the trust stage says so
    if effort is not None:
        gains = np.asarray(effort["torque_constants"], dtype=np.float64)
        metrics["effort"] = effort
        for split in ("train", "val", "test"):
            if split in metrics:  # nMSE is the same in A and in Nm (a per-joint constant gain cancels)
                metrics[split]["rmse_current_a"] = (np.asarray(metrics[split]["rmse_nm"]) / gains).tolist()
    if out_dir is not None:
        problem = export_problem(res.model, res.cfg.kind, robot, metrics.get("val"), allow_inconsistent)
        if problem:
            kept = "; its checkpoint.pt stays, for --resume" if res.checkpoint else ""
            raise TrainingError(f"{problem}; not exported (no model written to {out_dir}{kept})")
        out = Path(out_dir)
        pi0 = res.model.pi().detach().numpy() if res.model.inertial is not None else np.zeros((res.model.n, 10))
        save_model(out / "model.pt", res, pi0, metrics, effort, uncertainty, robot)
        model, ck = load_model(out / "model.pt")
        metrics["model_id"] = export_model(model, ck, robot, out / "model.onnx")
        atomic_write_text(out / "metrics.json", json.dumps(json_ready(metrics), indent=2, allow_nan=False) + "\n")
        remove_stale_run_files(out, res.checkpoint, "model.pt")
    return res, metrics


def remove_stale_run_files(out_dir: str | Path, checkpoint: Path | None, state: str) -> None:
    """Remove what an earlier run left in ``out_dir`` that is not of this run's model, saying so: a checkpoint.pt
    other than ``checkpoint`` (the one this fit wrote or resumed from), and the other kind's state file (``state``
    is this run's: model.pt of a network, gp.pt of a GP).

    Why: --resume continues checkpoint.pt and `idyn export` re-exports model.pt, so both must be of the model in
    their folder; an earlier run's would continue or re-export that run instead.
    """
    out = Path(out_dir)
    stale = [out / name for name in ("model.pt", "gp.pt") if name != state]
    if checkpoint != out / "checkpoint.pt":
        stale.append(out / "checkpoint.pt")
    for path in stale:
        if path.exists():
            path.unlink()
            warnings.warn(f"removed {path}, left by an earlier run: it is not of the model now in {out_dir}",
                          stacklevel=2)
