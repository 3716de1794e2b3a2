"""``idyn train --model auto``: fit physics and learned-residual candidates, keep the best one on validation.

Why: which model is best depends on the robot and the data (on a real Panda log the E2E hybrid lost to its
own physics, on the real KUKA LWR4+ the E2E hybrid-r won by a factor 4), and a user cannot know in advance.

- Candidates (``CANDIDATES``): physics models (SDP-identified RBD + friction + armature with the default geometric
  prior toward the URDF and with the ridge toward it, and the URDF's RBD with least-squares friction +
  armature), and
  the learned residuals on top of the physics that scored best (the default prior's when validation repeats the
  training states; its id_method and ridge; decision: physics
  first, then learn what it misses) (per-joint hybrid-j 2S and E2E, the LSTM hybrids 2S and E2E, hybrid-r E2E), each
  with the command's training options (``base``) and its residual gate (``training.fit_residual_gate``), so on
  validation none is worse than its own physics part. The per-joint residuals (``EVERY_PHYSICS_KINDS``) are also
  fitted on each other physics candidate ("hybrid-j 2S on rbd-friction nominal"): the best physics alone need not
  be the best base for a residual, and these fits take seconds. Order: the per-joint residuals first (best on
  held-out trajectories, studies/auto_selection/README.md), so a short budget spends itself on them. The 2S ones
  compete as one model, their average over the physics candidates (``AVERAGED``); their rows stay in the table.
- Score: mean per-joint nMSE (``metrics.nmse``) on the validation recordings, each run as one sequence.
- Validation that repeats the training states (a second run of the same trajectory) cannot tell memorising from
  generalising: then only the per-joint residuals compete (``GENERALISING_KINDS``), the others are listed as skipped,
  and it does not choose the physics either (the decision in ``fit_auto``).
- Selection: the best learned candidate wins only if it beats the best physics candidate by ``LEARNED_MARGIN``
  (relative); otherwise the physics model is exported (smaller, and it generalises where a residual's gain on
  one validation trajectory may be chance).
- A physics candidate the data cannot identify (a joint that never moved leaves base parameters unexcited) is listed
  as skipped with the reason; the others (the URDF's RBD needs no identification) go on. Only when none fits does auto
  fail.
- Budget: ``max_minutes`` bounds the selection's training loops; physics candidates (seconds) first, then each
  learned candidate gets an equal share of what is left (at least ``MIN_CANDIDATE_MINUTES``), so time an early-stopped
  candidate does not use goes to the next; once less than that is left, the remaining candidates are skipped and
  listed so. Outside it: each fit's set-up (identification, seconds), the average's gate, and the refit without
  ``--val`` (the winner's own epochs again on 25 % more data).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from idyn_ros.errors import IdentificationError, ParameterError
from idyn_ros.models.identification import DEFAULT_REG
from idyn_ros.models.metrics import OVERLAP_WARNING, state_overlap, torque_metrics
from idyn_ros.models.sources import Recording
from idyn_ros.models.training import (
    TrainResult,
    apply_gate,
    fit,
    fit_again,
    fit_residual_gate,
    identify_each_once,
    learning_curve,
    predict,
    prepare,
)
from idyn_ros.models.zoo import ModelConfig, TorqueModel

# (name, ModelConfig overrides); physics candidates are those whose kind learns no residual.
# Physics candidates: the prior toward the URDF and the URDF-or-identified choice are chosen on validation (on a 2 or
# 5 s cut of real KUKA data the SDP fit extrapolated worse to the rest of the trajectory than the URDF + friction).
# Decision: the identified bases are the SDP with its default, the geometric prior at 1e-2, and with the ridge at 1e-4
# (the default before). With validation off the training states (UR5 validated on No2, the Panda plant on another
# trajectory) the per-joint residual on the geometric 1e-2 validated best of ridge 1e-4 / 1e-2 and geometric 1e-3..1 on
# both (it replaced a 100x ridge); the ridge stays a base because the average over the bases carried best to held-out
# runs (``AVERAGED``; studies/auto_selection/README.md).
PHYSICS_SETTINGS = ("id_method", "reg", "id_prior")  # what a learned candidate takes over from its physics candidate
CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("rbd-friction", {"kind": "rbd-friction"}),  # the SDP's default: the geometric prior
    ("rbd-friction ridge 1e-4", {"kind": "rbd-friction", "id_method": "sdp", "id_prior": "ridge", "reg": DEFAULT_REG}),
    # the URDF: no prior (and none inherited from --prior / --reg, which it would refuse)
    ("rbd-friction nominal", {"kind": "rbd-friction", "id_method": "nominal", "id_prior": None, "reg": None}),
    ("hybrid-j 2S", {"kind": "hybrid-j", "mode": "2s"}),
    ("hybrid-j E2E", {"kind": "hybrid-j", "mode": "e2e"}),
    ("hybrid 2S", {"kind": "hybrid", "mode": "2s"}),
    ("hybrid E2E", {"kind": "hybrid", "mode": "e2e"}),
    ("hybrid-r E2E", {"kind": "hybrid-r", "mode": "e2e"}),
)
# Decision: a learned model must beat the best physics model by 2 % (relative, validation mean nMSE) to be chosen;
# a smaller gain is within what one validation trajectory can show by chance.
LEARNED_MARGIN = 0.02
# Decision: when the validation recordings repeat the training states (``metrics.state_overlap`` at or above
# ``OVERLAP_WARNING``: a second run of the same trajectory), validation rewards memorising the trajectory, so only the
# per-joint residual competes: on unseen plant trajectories it was the one learned kind that carried (the LSTM
# residuals learned their training trajectories and carried nothing; studies/auto_selection/README.md).
GENERALISING_KINDS = ("hybrid-j",)
# Decision: the per-joint residual is fitted on every physics candidate, and validation scores the sums. On real
# KUKA data (validation a rerun of training) the residual on a 100x ridge scored better than on the physics that
# won alone (2.0-2.2 vs 2.3-2.5 % over two seeds); the LSTM residuals stay on the best physics (minutes per fit).
EVERY_PHYSICS_KINDS = ("hybrid-j",)
# Decision: the per-joint residual 2S fits on the physics candidates compete as one model, their average
# (``TorqueModel.average_over_bases``), not one by one. Which base a residual carries best from to another trajectory
# did not show on validation, and on the held-out runs of both real arms the average beat every single base (KUKA file
# 3: 13.9-18.1 % vs 19.9-26.4 % for the base validation picked, six seeds; UR5 No1 on both validation splits:
# 26.2-27.7 % vs 27.8-31.9 %; studies/auto_selection/README.md). Decided after seeing KUKA file 3 and UR5 No1.
AVERAGED = "hybrid-j 2S, averaged over the physics candidates"
SCORE = "nmse_mean"  # the validation metric (``metrics.torque_metrics`` key) candidates are ranked by
MIN_CANDIDATE_MINUTES = 0.1  # a learned candidate with less budget left than this is skipped (and listed so)


@dataclasses.dataclass
class Candidate:
    """One fitted candidate with its validation scores."""

    name: str
    result: TrainResult | None
    val: dict[str, Any]  # torque_metrics of the model on validation
    val_physics: dict[str, Any]  # torque_metrics of its RBD + friction part alone
    seconds: float
    skipped: str = ""
    member_of: str = ""  # fitted, but competes only inside this averaged candidate (``AVERAGED``)
    unranked: str = ""  # fitted as a base, but validation cannot rank it (why)

    @property
    def learned(self) -> bool:
        return self.result is not None and self.result.model.residual is not None

    def row(self) -> dict[str, Any]:
        """The candidate's line of ``metrics.json["candidates"]``."""
        out: dict[str, Any] = {"name": self.name, "seconds": round(self.seconds, 1)}
        if self.skipped:
            return {**out, "skipped": self.skipped}
        r = self.result
        out.update({"kind": r.cfg.kind, "mode": r.cfg.mode, "id_method": r.cfg.id_method, "reg": r.cfg.reg,
                    "val_nmse_mean": self.val["nmse_mean"],
                    "val_nmse_max": self.val["nmse_max"], "val_nmse": self.val["nmse"],
                    "val_physics_nmse_mean": self.val_physics["nmse_mean"], "stopped": r.stopped,
                    "epochs_run": len(r.history), "history": learning_curve(r.history)})
        if r.gate is not None:
            out["gate"] = [round(float(g), 4) for g in r.gate]
        if self.member_of:
            out["member_of"] = self.member_of
        if self.unranked:
            out["unranked"] = self.unranked
        if r.cfg.bases > 1:
            out["members"] = list(r.cfg.extra.get("bases", ()))
        return out


def scores(result: TrainResult, robot: Any, recs: Sequence[Recording]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics of the model, metrics of its physics part) over recordings, each one sequence."""
    full, phys, taus = [], [], []
    for rec in recs:
        parts = predict(result.model, robot.pin_model, rec)
        full.append(parts["tau"])
        phys.append(parts["tau_rbd"] + parts["tau_friction"])
        taus.append(rec.tau)
    tau = np.concatenate(taus)
    lo, hi = result.tau_min, result.tau_max
    return torque_metrics(np.concatenate(full), tau, lo, hi), torque_metrics(np.concatenate(phys), tau, lo, hi)


def physics_only(result: TrainResult) -> TrainResult:
    """The physics part of a hybrid as an ``rbd-friction`` model (same parameters, no residual network)."""
    old = result.model
    cfg = dataclasses.replace(result.cfg, kind="rbd-friction", mode="2s", bases=1,
                              extra={**result.cfg.extra, "physics_of": result.cfg.kind})
    with torch.no_grad():
        model = TorqueModel(cfg, old.n, old.pi().detach().numpy())
        model.friction.copy_(old.friction)
        model.ia.copy_(old.ia)
        model.dq_hold.copy_(old.dq_hold)
    model.freeze_physics()
    model.eval()
    return dataclasses.replace(result, model=model, cfg=cfg, gate=None)


def _fit_candidate(name: str, settings: dict[str, Any], robot: Any, train: Sequence[Recording],
                   val: Sequence[Recording], budget: float | None, progress: bool,
                   whole_budget: float | None = None) -> Candidate:
    t1 = time.perf_counter()
    res = fit(ModelConfig.from_dict(settings), robot, train, val, max_minutes=budget, progress=progress,
              budget_of=whole_budget)  # the stop text names the share and auto's whole budget
    v, vp = scores(res, robot, val)
    return Candidate(name, res, v, vp, time.perf_counter() - t1)


def _average(results: Sequence[TrainResult], names: Sequence[str]) -> TrainResult:
    """The mean of hybrid-j 2S fits on different physics bases as one result (no gate)."""
    first = results[0]
    model = TorqueModel.average_over_bases([r.model for r in results])
    model.cfg.id_method = "mean of the members' bases"
    model.cfg.extra = {**model.cfg.extra, "bases": list(names)}
    return dataclasses.replace(first, model=model, cfg=model.cfg, gate=None, history=[],
                               stopped=f"the mean of {len(results)} fits (members: their own rows)",
                               identification={"method": "mean of the members' physics parameters",
                                               "members": list(names)})


def average_candidate(members: Sequence[Candidate], robot: Any, val: Sequence[Recording]) -> Candidate:
    """The ``AVERAGED`` candidate from fitted hybrid-j 2S candidates on different physics bases, gated on validation
    like any hybrid (``training.fit_residual_gate``); marks the members."""
    t1 = time.perf_counter()
    members = [c for c in members if c.result is not None]
    result = _average([c.result for c in members], [c.name for c in members])
    if result.cfg.gate:
        result.gate = fit_residual_gate(result.model, [prepare(robot.pin_model, r, True, True) for r in val])
    v, vp = scores(result, robot, val)
    for c in members:
        c.member_of = AVERAGED
    return Candidate(AVERAGED, result, v, vp, time.perf_counter() - t1)


def refit(winner: Candidate, done: Sequence[Candidate], robot: Any, data: Sequence[Recording],
          progress: bool = True) -> TrainResult:
    """The winner fitted again on ``data`` (its training data and the recordings it was chosen on), so the model
    a user gets learns from all their recordings; an average refits each member. Gates stay those of selection."""
    if winner.name != AVERAGED:
        out = fit_again(winner.result, robot, data, progress)
    else:
        members = [c for c in done if c.member_of == AVERAGED and c.result is not None]
        out = _average([fit_again(c.result, robot, data, progress) for c in members], [c.name for c in members])
        apply_gate(out, winner.result.gate)
    out.stopped = f"{winner.result.stopped}; then refitted on all the training data"
    return out


@identify_each_once()
def fit_auto(base: ModelConfig, robot: Any, train: Sequence[Recording], val: Sequence[Recording],
             max_minutes: float | None = None, progress: bool = True,
             candidates: Sequence[tuple[str, dict[str, Any]]] = CANDIDATES,
             overlap: float | None = None, score: str = SCORE, refit_on: Sequence[Recording] | None = None
             ) -> tuple[TrainResult, list[Candidate]]:
    """Fit every candidate (``base`` with its overrides), score on ``val``, return (winner, all candidates).
    ``overlap``: ``metrics.state_overlap(train, val)`` when the caller has it already; ``score``: the validation
    metric that ranks the physics bases and the candidates; ``refit_on``: fit the winner again on these recordings
    (``refit``) before export. Each physics base is identified once (``training.identify_each_once``)."""
    if not val:
        raise ParameterError("auto selection needs validation recordings (idyn train holds out a tail without --val)")
    t0 = time.perf_counter()
    physics = [(n, o) for n, o in candidates if ModelConfig(**{**base.to_dict(), **o}).residual == "none"]
    learned = [(n, o) for n, o in candidates if (n, o) not in physics]
    overlap = state_overlap(train, val) if overlap is None else overlap
    repeated = overlap >= OVERLAP_WARNING
    repeats = [(n, o) for n, o in learned if o.get("kind") not in GENERALISING_KINDS] if repeated else []
    learned = [c for c in learned if c not in repeats]
    done: list[Candidate] = []
    same_physics: dict[tuple, str] = {}
    for name, over in physics:
        settings = {**base.to_dict(), **over, "extra": dict(base.extra)}
        key = _physics_key(settings, robot)
        if key in same_physics:  # e.g. --prior ridge makes the default candidate the ridge one: fit it once
            done.append(Candidate(name, None, {}, {}, 0.0, skipped=f"the same physics as {same_physics[key]}"))
            continue
        same_physics[key] = name
        try:
            done.append(_fit_candidate(name, settings, robot, train, val, None, progress))
        except IdentificationError as exc:  # e.g. a joint that never moved: the URDF candidate still fits
            done.append(Candidate(name, None, {}, {}, 0.0, skipped=f"cannot be identified on this data: {exc}"))
    if physics and not any(c.result is not None for c in done):
        raise IdentificationError("; ".join(f"{c.name}: {c.skipped}" for c in done))
    fits = [(name, over, {}) for name, over in learned]
    not_made: list[str] = []
    if physics:  # learned candidates sit on the best physics candidate; per-joint ones on each of them as well
        ranked = [c for c in done if c.result is not None]
        # decision: a validation that repeats training ranks priors by training fit, which a weaker prior always wins
        # (the ridge ahead of the geometric prior on real KUKA and UR5, 21.9 vs 22.8 % and 26.3 vs 29.2 %); so the
        # default prior, chosen on validations off the training states (``identification.resolve_prior``), is the
        # base, and the other bases enter only the average (their 2S residuals; their E2E fits are not made)
        if repeated:
            for c in ranked[1:]:
                c.unranked = "validation repeats the training states: the default prior is the base"
        else:
            ranked.sort(key=lambda c: c.val[score])
        bases = [(c.name, {k: getattr(c.result.cfg, k) for k in PHYSICS_SETTINGS}) for c in ranked]
        fits = []
        for name, over in learned:
            for i, (pname, pbase) in enumerate(bases):
                if i > 0 and over.get("kind") not in EVERY_PHYSICS_KINDS:
                    continue
                fit_name = name if i == 0 else f"{name} on {pname}"
                if i > 0 and repeated and over.get("mode") != "2s":  # not a member of the average
                    not_made.append(fit_name)
                else:
                    fits.append((fit_name, over, pbase))
    for i, (name, over, pbase) in enumerate(fits):
        budget = None
        if max_minutes is not None:
            left = max_minutes - (time.perf_counter() - t0) / 60.0
            if left < MIN_CANDIDATE_MINUTES:  # skipped from the back: the first (per-joint) candidates keep their time
                done.append(Candidate(name, None, {}, {}, 0.0, skipped=f"time budget used up ({max_minutes:g} min)"))
                continue
            budget = max(left / (len(fits) - i), MIN_CANDIDATE_MINUTES)
        done.append(_fit_candidate(name, {**base.to_dict(), **pbase, **over, "extra": dict(base.extra)}, robot,
                                   train, val, budget, progress, max_minutes))
    members = [c for c in done if c.result is not None and (c.result.cfg.kind, c.result.cfg.mode) == ("hybrid-j", "2s")]
    if len(members) >= 2:
        done.append(average_candidate(members, robot, val))
    done += [Candidate(name, None, {}, {}, 0.0, skipped=f"validation repeats the training states ({overlap:.0%}): "
                                                         f"only {', '.join(GENERALISING_KINDS)} residuals compete")
             for name, _ in repeats]
    done += [Candidate(name, None, {}, {}, 0.0, skipped="validation repeats the training states: single-base "
                                                        "residuals only on the default prior") for name in not_made]
    winner = choose(done, score)
    result = winner.result if refit_on is None else refit(winner, done, robot, refit_on, progress)
    if result.gate is not None and not np.any(result.gate > 0):
        result = physics_only(result)  # every joint's residual gated off: export no network
    result.cfg.extra = {**result.cfg.extra, "selected_by": "auto", "candidate": winner.name}
    return result, done


def _physics_key(settings: dict[str, Any], robot: Any) -> tuple:
    """What a physics candidate identifies with: the method and, for an identification, its resolved prior."""
    from idyn_ros.models.identification import resolve_prior

    method = settings.get("id_method")
    if method == "nominal":
        return (settings.get("kind"), method, tuple(settings.get("friction_kinds") or ()))
    return (settings.get("kind"), method, tuple(settings.get("friction_kinds") or ()),
            *resolve_prior(method, settings.get("id_prior"), settings.get("reg"), robot.pin_model))


def choose(done: Sequence[Candidate], score: str = SCORE) -> Candidate:
    """The winner among fitted, ranked candidates by validation ``score``: the best physics one, unless the best
    learned one beats it by ``LEARNED_MARGIN``."""
    fitted = [c for c in done if c.result is not None and not c.member_of and not c.unranked]
    best_phys = min((c for c in fitted if not c.learned), key=lambda c: c.val[score], default=None)
    best_learned = min((c for c in fitted if c.learned), key=lambda c: c.val[score], default=None)
    winner = best_phys or best_learned
    if best_learned is not None and best_phys is not None and \
            best_learned.val[score] < (1.0 - LEARNED_MARGIN) * best_phys.val[score]:
        winner = best_learned
    assert winner is not None and winner.result is not None  # the physics candidate never needs a budget
    return winner


def format_candidates(rows: Sequence[dict[str, Any]], winner: str | None) -> str:
    """Terminal table of ``metrics.json["candidates"]``: validation nMSE in % (metrics.json keeps fractions), its
    physics part's, the gate."""
    w = max([22, *(len(r["name"]) + 2 for r in rows)])
    lines = [f"{'candidate':<{w}}{'val nMSE % mean':>16}{'worst joint':>13}{'physics part':>14}  gate / note"]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"{r['name']:<{w}}{'-':>16}{'-':>13}{'-':>14}  skipped: {r['skipped']}")
            continue
        gate = "gate " + " ".join(f"{g:.2f}" for g in r["gate"]) if "gate" in r else ""
        if r.get("member_of"):
            gate = (gate + "; " if gate else "") + "competes in the average"
        if r.get("unranked"):
            gate = (gate + "; " if gate else "") + f"not ranked: {r['unranked']}"
        mark = "  <- exported" if r["name"] == winner else ""
        lines.append(f"{r['name']:<{w}}{100 * r['val_nmse_mean']:>16.2f}{100 * r['val_nmse_max']:>13.2f}"
                     f"{100 * r['val_physics_nmse_mean']:>14.2f}  {gate}{mark}")
    return "\n".join(lines)
