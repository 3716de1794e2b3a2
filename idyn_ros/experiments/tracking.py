"""The tracking experiment: Reuss et al. 2022 Table III on the plant, per robot.

Protocol (paper Sec. V-C): 5 minimum-jerk moves between joint set points, each run at 2 s and at
10 s; metrics in degrees: joint RMSE during the move and final offset |q_d - q| at its end,
averaged over joints and moves; columns soft / medium / stiff gains; rows = feedforward models.
A row/gain where any move trips the safety layer is recorded as failed with the first reason.

Decisions:
- set points: a fixed seed draws 6 poses uniformly in the middle 50 % of each joint's range around
  the range centre (clipped to +-1.2 rad from it, and so that a 2 s move peaks at <= 80 % of the joint's
  velocity limit: the iiwa14's joint 1 ran at 143 % before); move i goes from pose i to pose i+1. Each move
  starts at rest after a 0.5 s hold at its start pose (the LSTM warm-up and the controller's hold
  start happen there, as on activation of the controller node).
- the closed loop runs in-process in lockstep (``idyn_ros.sim.loop``: the controller node's ``Controller``
  against the plant); the same moves are used for every row and gain, so the rows differ only in the
  feedforward.
- ``identified_rbd_friction``, ``hybrid_2s``, ``hybrid_e2e`` are the candidates of one ``idyn train --model
  auto`` fit and ``auto`` is its winner (``models_cache.train_auto_rows``): what a user gets by default.
- ``hybrid_doomed`` = the E2E hybrid (the paper's best model) + DOOMED (constant offset) with the
  doomed node's settings from ``config/<robot>.yaml`` (Panda: eta 0.05 x M_jj, gamma 0.9, alpha 0.5).

JSON contract (``tracking_<robot>.json``, read by outside tools; keep the keys):
``{ROW: {GAIN: {"rmse_deg": float, "final_deg": float} | {"failed": true, "reason": str}}}``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.parameters import PRESET_NAMES as GAIN_NAMES

ROWS: tuple[str, ...] = ("no_ff", "nominal_rbd", "identified_rbd", "identified_rbd_friction", "hybrid_2s",
                         "hybrid_e2e", "auto", "lstm", "hybrid_doomed")
PAPER_DURATIONS: tuple[float, ...] = (2.0, 10.0)  # Reuss Sec. V-C
PAPER_MOVES = 5
NOT_TRAINED = "no trained model"  # the reason of a cell whose model auto did not train: the tables say "not trained"


# A move between two set points peaks at 15/8 x distance / duration (min-jerk); set points are drawn so that even
# the shortest move stays within this fraction of each joint's velocity limit (a real arm faults at the limit).
MOVE_VELOCITY_FRACTION = 0.8


def setpoints(lower: np.ndarray, upper: np.ndarray, count: int = PAPER_MOVES + 1, seed: int = 3,
              velocity_limit: np.ndarray | None = None, shortest_move_s: float | None = None) -> np.ndarray:
    """``count`` joint poses (count, n) in rad inside the middle half of each range (see module doc); with
    ``velocity_limit`` (rad/s) and ``shortest_move_s``, no move between them exceeds ``MOVE_VELOCITY_FRACTION``
    of the limit."""
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(lower), lower, -np.pi)
    hi = np.where(np.isfinite(upper), upper, np.pi)
    centre, half = 0.5 * (lo + hi), np.minimum(0.25 * (hi - lo), 1.2)
    if velocity_limit is not None and shortest_move_s is not None:  # distance <= 2 half, peak 15/8 distance / T
        half = np.minimum(half, MOVE_VELOCITY_FRACTION * np.asarray(velocity_limit) * shortest_move_s / 3.75)
    return centre + rng.uniform(-1.0, 1.0, size=(count, lo.size)) * half


@dataclass
class Move:
    """One min-jerk move from ``start`` to ``goal`` (rad) in ``duration`` s."""

    start: np.ndarray
    goal: np.ndarray
    duration: float


def moves_for(robot_model: Any, n_moves: int = PAPER_MOVES, durations: Sequence[float] = PAPER_DURATIONS,
              seed: int = 3) -> list[Move]:
    """The protocol's moves: ``n_moves`` set-point transitions, each at every duration."""
    pts = setpoints(np.asarray(robot_model.lower), np.asarray(robot_model.upper), n_moves + 1, seed,
                    robot_model.velocity_limit, min(durations))
    return [Move(pts[i], pts[i + 1], float(d)) for d in durations for i in range(n_moves)]


def row_feedforward(row: str, doomed_base: str = "hybrid_e2e") -> tuple[str, str | None]:
    """(feedforward kind, model row) for a table row: ``none``/``rbd``/``model``."""
    if row == "no_ff":
        return "none", None
    if row == "nominal_rbd":
        return "rbd", None
    if row == "hybrid_doomed":
        return "model", doomed_base
    return "model", row


def make_feedforward(robot_model: Any, kind: str, model_path: str | Path | None = None,
                     rate_hz: float = 1000.0) -> Any:
    """``none`` -> None, ``rbd`` -> nominal-URDF RNEA (the fallback), ``model`` -> the exported artifact.

    A model that the runtime refuses raises (a silent RBD fallback would corrupt a comparison table).
    """
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.errors import ModelArtifactError

    if kind == "none":
        return None
    if kind == "rbd":
        return FeedforwardComputer(robot_model, None, "rbd", rate_hz)
    ff = FeedforwardComputer(robot_model, model_path, "rbd", rate_hz)
    if ff.fallback:
        raise ModelArtifactError(f"feedforward model not usable: {ff.fallback_reason}")
    return ff


def run_cell(robot: str, robot_model: Any, plant: Any, row: str, gain: str, moves: Sequence[Move],
             model_paths: dict[str, Path], keep_episodes: bool = False, doomed_base: str = "hybrid_e2e",
             feedback: str = "own") -> dict[str, Any]:
    """All moves for one row and gain; returns the JSON cell (+ ``per_move`` and ``episodes`` extras).

    ``doomed_base``: the model row under DOOMED for ``hybrid_doomed`` (the doomed node's settings from
    config/<robot>.yaml). ``feedback``: whose M(q) scales the acceleration-space feedback - ``own`` (as the
    controller node: the row's model, nominal URDF for no_ff / nominal_rbd), ``nominal`` (URDF), or a model
    row name (that artifact's identified M)."""
    from idyn_ros.control.doomed import Doomed, DoomedAdapter, config_from_params
    from idyn_ros.control.reference import MinJerkMove
    from idyn_ros.parameters import load
    from idyn_ros.sim.loop import controller_for, run_episode, tracking_metrics

    kind, model_row = row_feedforward(row, doomed_base)
    if kind == "model" and (model_row not in model_paths or not Path(model_paths[model_row]).is_file()):
        return {"failed": True, "reason": f"{NOT_TRAINED} for {model_row}"}
    ff = make_feedforward(robot_model, kind, model_paths.get(model_row) if model_row else None)
    feedback_model = None
    if feedback == "nominal":
        feedback_model = robot_model
    elif feedback != "own":
        if feedback not in model_paths or not Path(model_paths[feedback]).is_file():
            return {"failed": True, "reason": f"{NOT_TRAINED} for the feedback M ({feedback})"}
        feedback_model = make_feedforward(robot_model, "model", model_paths[feedback]).feedback_model()
    controller = controller_for(robot, robot_model, gain, ff, feedback_model)
    rmse, final, per_move, episodes = [], [], [], []
    for mv in moves:
        adapter = None
        if row == "hybrid_doomed":
            dp = load("doomed", robot, n=robot_model.n)
            adapter = DoomedAdapter(Doomed(plant.n, config_from_params(dp, robot_model.effort_limit)),
                                    controller.feedback_model, dp.inertia_scaled)
        ep = run_episode(plant, controller, MinJerkMove(mv.start, [mv.goal], [mv.duration]), hold=0.5,
                         doomed=adapter)
        m = tracking_metrics(ep)
        if keep_episodes:
            episodes.append(ep)
        if m.get("failed"):
            out = {"failed": True, "reason": f"{m['reason']} (move {len(per_move) + 1}, {mv.duration:g} s)"}
            if keep_episodes:
                out["episodes"] = episodes
            return out
        per_move.append({"duration": mv.duration, "rmse_deg": m["rmse_deg"], "final_deg": m["final_deg"],
                         "rmse_joint_deg": m["rmse_joint_deg"], "final_joint_deg": m["final_joint_deg"]})
        rmse.append(m["rmse_deg"])
        final.append(m["final_deg"])
    out = {"rmse_deg": float(np.mean(rmse)), "final_deg": float(np.mean(final)), "per_move": per_move,
           "rmse_joint_deg": np.mean([p["rmse_joint_deg"] for p in per_move], axis=0).tolist(),
           "final_joint_deg": np.mean([p["final_joint_deg"] for p in per_move], axis=0).tolist()}
    if keep_episodes:
        out["episodes"] = episodes
    return out


def tracking_table(robot: str, model_paths: dict[str, Path], rows: Sequence[str] = ROWS,
                   gains: Sequence[str] = GAIN_NAMES, n_moves: int = PAPER_MOVES,
                   durations: Sequence[float] = PAPER_DURATIONS, progress: bool = True,
                   on_cell: Callable[[str, str, dict], None] | None = None) -> dict[str, dict[str, dict]]:
    """The table as the JSON contract (cells without the per-move extras)."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.progress import progress_bar
    from idyn_ros.sim import Plant

    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    moves = moves_for(robot_model, n_moves, durations)
    table: dict[str, dict[str, dict]] = {row: {} for row in rows}
    sim_s = sum(m.duration + 0.5 for m in moves)
    with progress_bar(total=len(rows) * len(gains), desc=f"{robot}: tracking ({sim_s:.0f} s sim per cell)",
              unit="cell", enabled=progress) as bar:
        for row in rows:
            for gain in gains:
                cell = run_cell(robot, robot_model, plant, row, gain, moves, model_paths)
                table[row][gain] = contract_cell(cell)
                if on_cell is not None:
                    on_cell(row, gain, cell)
                bar.update(1)
    return table


def feedback_mass_decomposition(robot: str, model_paths: dict[str, Path], table: dict[str, dict[str, dict]],
                                hybrid_rows: Sequence[str] = ("hybrid_2s", "hybrid_e2e"),
                                gains: Sequence[str] = ("medium", "stiff"), n_moves: int = PAPER_MOVES,
                                durations: Sequence[float] = PAPER_DURATIONS,
                                progress: bool = True) -> dict[str, Any]:
    """Separate the feedforward's share of the hybrid-vs-nominal gap from the feedback M(q)'s share.

    Why: the controller scales the acceleration-space feedback by the loaded model's M(q) (identified
    inertials + armature, ``run_cell`` feedback ``own``), while ``nominal_rbd`` uses the URDF M, which lacks
    the rotor inertia; so the table's hybrid rows differ from nominal_rbd in two things. Here each pair is
    run with the same M: ``<ff>+urdf_M`` and ``<ff>+M_of_<h>`` for ff in nominal_rbd and each hybrid h.
    Cells equal to table cells (same ff and M) are copied, not rerun. Returns ``{label: {gain: cell},
    "ratios": {...}}``; ratio = hybrid RMSE / nominal_rbd RMSE with the same M at that gain (None if a cell failed).
    """
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.progress import progress_bar
    from idyn_ros.sim import Plant

    robot_model = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    moves = moves_for(robot_model, n_moves, durations)
    # (label, row, feedback, table row whose cell is identical or None)
    plan: list[tuple[str, str, str, str | None]] = [("nominal_rbd+urdf_M", "nominal_rbd", "nominal", "nominal_rbd")]
    for h in hybrid_rows:
        plan += [(f"nominal_rbd+M_of_{h}", "nominal_rbd", h, None), (f"{h}+urdf_M", h, "nominal", None),
                 (f"{h}+M_of_{h}", h, h, h)]
    out: dict[str, Any] = {}
    todo = sum(1 for *_, same in plan for g in gains if not (same and g in table.get(same, {})))
    with progress_bar(total=todo, desc=f"{robot}: feedback-M decomposition", unit="cell", enabled=progress) as bar:
        for label, row, fb, same in plan:
            out[label] = {}
            for g in gains:
                if same and g in table.get(same, {}):
                    out[label][g] = dict(table[same][g])
                    continue
                out[label][g] = contract_cell(run_cell(robot, robot_model, plant, row, g, moves, model_paths,
                                                       feedback=fb))
                bar.update(1)

    def r(label: str, g: str) -> float:
        c = out[label][g]
        return math.inf if c.get("failed") else float(c["rmse_deg"])

    ratios: dict[str, Any] = {}
    for h in hybrid_rows:
        for g in gains:
            ratios[f"{h}/nominal_rbd@{g}, both urdf_M"] = _num(r(f"{h}+urdf_M", g) / r("nominal_rbd+urdf_M", g))
            ratios[f"{h}/nominal_rbd@{g}, both M_of_{h}"] = _num(r(f"{h}+M_of_{h}", g) / r(f"nominal_rbd+M_of_{h}", g))
    out["ratios"] = ratios
    return out


def contract_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """Only the contract keys of a cell."""
    if cell.get("failed"):
        return {"failed": True, "reason": str(cell.get("reason", ""))}
    return {"rmse_deg": float(cell["rmse_deg"]), "final_deg": float(cell["final_deg"])}


def format_table(table: dict[str, dict[str, dict]], gains: Sequence[str] = GAIN_NAMES) -> str:
    """Plain-text table: RMSE / final offset in degrees per gain, ``failed`` with a short reason."""
    head = f"{'row':<26}" + "".join(f"{g + ' rmse/final [deg]':>26}" for g in gains)
    lines = [head, "-" * len(head)]
    for row, cells in table.items():
        parts = []
        for g in gains:
            c = cells.get(g, {})
            if not c:
                parts.append(f"{'-':>26}")
            elif c.get("failed"):  # a candidate auto did not train never ran: not a failure of the controller
                text = "not trained" if c["reason"].startswith(NOT_TRAINED) else \
                    f"failed ({c['reason'].split(':')[0]})"
                parts.append(f"{text if len(text) <= 25 else text[:24] + '~':>26}")  # the column stays aligned
            else:
                parts.append(f"{c['rmse_deg']:>14.3f} / {c['final_deg']:<9.3f}")
        lines.append(f"{row:<26}" + "".join(parts))
    return "\n".join(lines)


def _num(x: float) -> float | None:
    """A failed/missing cell's RMSE or ratio -> None (JSON null): strict JSON has no Infinity, and outside
    tools parse the result files (decision)."""
    return float(x) if math.isfinite(x) else None


def acceptance(table: dict[str, dict[str, dict]], hybrid_row: str = "hybrid_e2e") -> dict[str, Any]:
    """The Panda claims of the README: hybrid@medium <= nominal@medium / 3 and <= nominal@stiff (RMSE)."""

    def rmse(row: str, gain: str) -> float:
        c = table.get(row, {}).get(gain, {})
        return math.inf if (not c or c.get("failed")) else float(c["rmse_deg"])

    h, nm, ns = rmse(hybrid_row, "medium"), rmse("nominal_rbd", "medium"), rmse("nominal_rbd", "stiff")
    return {"hybrid_row": hybrid_row, "hybrid_medium_rmse_deg": _num(h), "nominal_medium_rmse_deg": _num(nm),
            "nominal_stiff_rmse_deg": _num(ns),
            "ratio_hybrid_medium_to_nominal_medium": _num(h / nm if nm else math.inf),
            "third_of_nominal_medium": bool(math.isfinite(h) and h <= nm / 3.0),
            "as_good_as_nominal_stiff": bool(math.isfinite(h) and h <= ns)}


def acceptance_same_feedback(decomp: dict[str, Any], hybrid_row: str = "hybrid_e2e") -> dict[str, Any]:
    """The Panda claims with the same feedback M on both sides (``feedback_mass_decomposition`` output):
    the feedforward's own share. Decision: the model's M is the deployed configuration (the controller
    node loads it with the model), so ``<hybrid>+M_of_<hybrid>`` is compared with ``nominal_rbd`` given that
    same M; the URDF-M pair is reported alongside."""

    def rmse(label: str, gain: str) -> float:
        c = decomp.get(label, {}).get(gain, {})
        return math.inf if (not c or c.get("failed")) else float(c["rmse_deg"])

    out: dict[str, Any] = {"hybrid_row": hybrid_row}
    for m_label, h_label, n_label in (("model_M", f"{hybrid_row}+M_of_{hybrid_row}", f"nominal_rbd+M_of_{hybrid_row}"),
                                      ("urdf_M", f"{hybrid_row}+urdf_M", "nominal_rbd+urdf_M")):
        h, nm, ns = rmse(h_label, "medium"), rmse(n_label, "medium"), rmse(n_label, "stiff")
        out[m_label] = {"hybrid_medium_rmse_deg": _num(h), "nominal_medium_rmse_deg": _num(nm),
                        "nominal_stiff_rmse_deg": _num(ns),
                        "ratio_hybrid_medium_to_nominal_medium": _num(h / nm if nm else math.inf),
                        "third_of_nominal_medium": bool(math.isfinite(h) and h <= nm / 3.0),
                        "as_good_as_nominal_stiff": bool(math.isfinite(h) and h <= ns)}
    return out
