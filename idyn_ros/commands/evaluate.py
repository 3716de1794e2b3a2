"""Evaluate an exported model on recordings, running it exactly as the controller does.

Each recording is stepped through ``idyn_ros.runtime.ModelRuntime`` (ONNX Runtime, state carried
over the whole recording, reset between recordings and at each gap of one: ``models.sources`` loads a file with
gaps as one recording per contiguous segment; the scores stay per file, over all its segments). A recording at
another rate than the model's, or with irregular stamps, is first resampled onto a grid at the model's rate (linear
interpolation of its samples), as training does, and a line says so (on stderr with --json). Motor-current efforts
(UR recordings) are turned into torque with the artifact's gains (``control.effort``), as the nodes do; currents
against a model trained on torques are refused (it has no gains). Reported per joint:
  nMSE         MSE / variance of the measured torque, in % (100 = no better than the mean; --json: a fraction)
  RMSE         root mean squared error in Nm
  NMSE(minmax) MSE of torques min-max scaled with the training ranges (Reuss et al. 2022 "NMSE")
A recording that runs a joint more than 10 % faster than the model's training data gets a warning (JSON:
"speed_coverage"): the model holds friction and residual at the training speed there, as the controller does.
``--plot`` draws measured and predicted torque per joint over time, one PNG per recording.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

SHORT_SCORE_S = 1.0  # s of data under which nMSE (error / the torque's own variance there) says little
HELP = "evaluate a model.onnx on recordings: per-joint nMSE, RMSE [Nm], min-max NMSE"

EPILOG = """examples:
  idyn evaluate --model runs/kuka_hybrid/model.onnx --data measurements_3.npz
  idyn evaluate --model runs/kuka_hybrid/model.onnx --data a.mcap b.mcap --json > metrics.json
  idyn evaluate --model runs/auto --data measurements_3.npz --plot kuka_3.png
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--model", required=True, metavar="ONNX",
                        help="the model artifact, or the run directory DIR of `idyn train` (its DIR/model.onnx)")
    parser.add_argument("--data", nargs="+", required=True, metavar="F",
                        help="recordings (rosbag2 folder, .db3, .mcap, .npz, .csv)")
    parser.add_argument("--effort-kind", choices=("torque", "current"), default=None,
                        help="what the recordings' effort is (default: what each file says; torque if it says "
                             "nothing). current: motor currents [A], turned into Nm with the model's gains")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object on stdout and nothing else (an undefined nMSE is null)")
    parser.add_argument("--backend", choices=["pinocchio", "onnx"], default="pinocchio",
                        help="RBD evaluation: pinocchio from the metadata (default) or the full ONNX graph")
    parser.add_argument("--plot", metavar="OUT.png",
                        help="write a PNG of measured and predicted torque per joint over time, each joint's nMSE "
                             "beside it; with several recordings OUT_0.png, OUT_1.png, ... in --data order")


def run(args: argparse.Namespace) -> int:
    from idyn_ros.commands.train import one_line_warnings

    with one_line_warnings("evaluate"):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    import json
    import math
    import sys
    import warnings

    import numpy as np

    from idyn_ros.control.effort import EffortToTorque
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.errors import DatasetError
    from idyn_ros.models.artifact import require_keys
    from idyn_ros.models.metrics import json_ready, speed_coverage, speed_warning, torque_metrics
    from idyn_ros.models.sources import load_file
    from idyn_ros.runtime import ModelRuntime, read_metadata

    if Path(args.model).is_dir() and (Path(args.model) / "model.onnx").is_file():  # a run directory
        args.model = str(Path(args.model) / "model.onnx")
    plots = _plot_paths(args.plot, [args.model, *args.data]) if args.plot else []
    meta = read_metadata(args.model)
    require_keys(meta, ("model_kind", "urdf"), args.model)
    robot = RobotModel.from_urdf(meta["urdf"], name=meta["robot"])
    model_rate = float(meta.get("rate_hz") or 0.0)  # artifacts without a (finite) rate take each recording's own
    model_rate = model_rate if math.isfinite(model_rate) and model_rate > 0 else None
    files = [load_file(path, robot, args.effort_kind, rate_hz=model_rate,
                       say=lambda line: print(f"idyn evaluate: {line}", file=sys.stderr if args.json else None))
             for path in args.data]  # per file: a file with gaps is one recording per segment
    recs = [rec for segments in files for rec in segments]
    trained_on = (meta.get("effort") or {}).get("kind", "torque")
    for path, rec in zip(args.data, (segments[0] for segments in files), strict=True):  # before stepping any: a bad
        if rec.n_samples < 2:  # file late must not waste minutes (segments of a file share its effort kind)
            raise DatasetError(f"{path}: {rec.n_samples} sample(s); a score needs a recording of 2 or more")
        if rec.effort_kind == "current" and trained_on != "current":
            raise DatasetError(f"{path}: its efforts are motor currents [A] but the model was trained on joint torques "
                               f"[Nm] and has no gains to convert them; score it on torque recordings, or pass "
                               f"--effort-kind torque if these efforts are in fact torques")
    seconds = sum(rec.duration for rec in recs)
    if seconds < SHORT_SCORE_S:
        warnings.warn(f"the data hold {seconds:.3g} s ({sum(rec.n_samples for rec in recs)} samples): nMSE divides by "
                      "the torque's variance over that stretch, next to nothing, so it can read millions of %; "
                      "score on a recording of the motion, not a snippet (RMSE in Nm still holds)", stacklevel=1)
    per_file = {}
    preds, taus = [], []
    for i, (path, segments) in enumerate(zip(args.data, files, strict=True)):
        conv = EffortToTorque(segments[0].effort_kind, segments[0].tau.shape[1], meta.get("effort"))
        if conv.warning:  # e.g. a model trained on currents scored against efforts read as Nm
            warnings.warn(f"{path}: {conv.warning}; pass --effort-kind current if its efforts are currents",
                          stacklevel=1)
        rt = ModelRuntime(args.model, robot, rate_hz=segments[0].rate_hz, rbd_backend=args.backend)
        file_preds = [rt.replay(rec.q, rec.dq, rec.ddq).total for rec in segments]  # a fresh state each
        file_taus = [conv.torque(rec.tau) for rec in segments]
        per_file[str(path)] = torque_metrics(np.concatenate(file_preds), np.concatenate(file_taus),
                                             meta.get("tau_min"), meta.get("tau_max"))
        if len(segments) > 1:
            per_file[str(path)]["segments"] = len(segments)
        if plots:
            _plot(plots[i], path, segments, file_preds, file_taus, per_file[str(path)], meta)
        preds += file_preds
        taus += file_taus
    total = torque_metrics(np.concatenate(preds), np.concatenate(taus), meta.get("tau_min"), meta.get("tau_max"))
    out = {"model": str(args.model), "model_id": meta.get("model_id"), "model_kind": meta["model_kind"],
           "joint_names": meta["joint_names"], "all": total, "files": per_file}
    if rt.velocity_hold is not None:
        out["speed_coverage"] = speed_coverage(rt.velocity_hold, recs)
        message = speed_warning("the data", out["speed_coverage"], meta["joint_names"])
        if message:
            warnings.warn(message, stacklevel=1)
    if plots:
        out["plots"] = [str(p) for p in plots]
        print("idyn evaluate: wrote " + ", ".join(out["plots"]), file=sys.stderr if args.json else None)
    if args.json:
        print(json.dumps(json_ready(out), allow_nan=False))  # NaN (constant joint) as null: strict JSON
        return 0
    split = f" ({len(recs)} contiguous segments)" if len(recs) > len(args.data) else ""
    print(f"model {meta['model_kind']} ({meta.get('model_id')}) on {len(args.data)} recording(s){split}, "
          f"{total['n_samples']} samples")
    w = max(16, *(len(name) + 2 for name in meta["joint_names"]))  # UR names are long (shoulder_lift_joint)
    print(f"{'joint':<{w}}{'nMSE [%]':>10}{'RMSE [Nm]':>12}{'NMSE(minmax)':>14}")
    for j, name in enumerate(meta["joint_names"]):
        print(f"{name:<{w}}{100 * total['nmse'][j]:>10.2f}{total['rmse_nm'][j]:>12.4f}"
              f"{total['minmax_nmse'][j]:>14.6f}")
    print(f"{'mean':<{w}}{100 * total['nmse_mean']:>10.2f}{total['rmse_mean_nm']:>12.4f}"
          f"{total['minmax_nmse_mean']:>14.6f}")
    return 0


def _plot_paths(text: str, inputs: list[str]) -> list[Path]:
    """OUT.png, or OUT_0.png ... for several recordings (``inputs``: the model, then the recordings); each checked
    writable before any work."""
    from idyn_ros.commands import writable_output

    out = writable_output(text, "--plot", inputs)
    if len(inputs) == 2:
        return [out]
    return [writable_output(str(out.with_name(f"{out.stem}_{i}{out.suffix or '.png'}")), "--plot", inputs)
            for i in range(len(inputs) - 1)]


def _with_gaps(parts: list[np.ndarray]) -> np.ndarray:
    """The segments of one recording in a row, a NaN row between them (a plotted line breaks there)."""
    import numpy as np

    gap = np.full((1, *parts[0].shape[1:]), np.nan)
    return np.concatenate([x for part in parts for x in (part, gap)])


def _plot(path: Path, source: str, segments: list[Any], preds: list[np.ndarray], taus: list[np.ndarray],
          scores: dict[str, Any], meta: dict[str, Any]) -> None:
    """One recording's figure: measured and predicted torque per joint, each joint's nMSE beside it."""
    import numpy as np

    from idyn_ros.experiments.plots import torque_prediction

    unit = "Nm (currents x the model's gains)" if segments[0].effort_kind == "current" else "Nm"
    notes = [f"nMSE {100 * v:.1f} %" if np.isfinite(v) else "nMSE -" for v in scores["nmse"]]
    title = (f"{Path(source).name}: {meta['model_kind']} model, mean nMSE {100 * scores['nmse_mean']:.2f} %, "
             f"RMSE {scores['rmse_mean_nm']:.3g} {unit}")
    torque_prediction(_with_gaps([rec.t for rec in segments]), _with_gaps(taus), {"predicted": _with_gaps(preds)},
                      meta["joint_names"], path, title, measured_label="measured", joint_notes=notes)
