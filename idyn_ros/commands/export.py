"""Re-export a trained model (DIR/model.pt) as an ONNX artifact, e.g. after a format change.

The artifact holds RBD (torch RNEA with the identified parameters), friction and the residual
network, with explicit recurrent state, and JSON metadata (robot, joint names, rate,
normalisation, identified parameters, training-data sha256, test metrics).

The artifact is written atomically at the end, after every check: a run that fails (a model of another robot, a
damaged model.pt), is refused or is interrupted leaves an earlier --out as it was, no part of one, and no empty
folder it created.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "re-export a trained model checkpoint (DIR/model.pt) to ONNX"

EPILOG = """examples:
  idyn export --checkpoint runs/kuka_hybrid --robot kuka_lwr4.urdf --out runs/kuka_hybrid/model.onnx
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--checkpoint", required=True, metavar="DIR_OR_PT",
                        help="run directory (uses DIR/model.pt) or a model.pt file")
    parser.add_argument("--robot", required=True,
                        help="robot preset or URDF path the model was trained for (checked against the joints of "
                             "the run's model.onnx when there is one)")
    parser.add_argument("-o", "--out", required=True, metavar="X.onnx",
                        help="artifact to write (.onnx; never one of the inputs)")


def _exported_joints(artifact: Path) -> tuple[str, list[str]] | None:
    """(robot, joint names) in the metadata of the run's artifact, any format, or None: model.pt records neither."""
    import json

    import onnx

    try:
        props = {p.key: p.value for p in onnx.load(artifact, load_external_data=False).metadata_props}
        meta = json.loads(props["idyn"])
        return str(meta["robot"]), [str(j) for j in meta["joint_names"]]
    except Exception:  # missing, damaged or foreign: nothing to compare with
        return None


def run(args: argparse.Namespace) -> int:
    from idyn_ros.commands import output_file
    from idyn_ros.errors import ParameterError

    if Path(args.out).suffix != ".onnx":  # a run's other files (model.pt, checkpoint.pt) are one typo away
        raise ParameterError(f"--out {args.out}: the artifact is an .onnx file; name it X.onnx")
    checkpoint = Path(args.checkpoint)
    if checkpoint.suffix == ".onnx":  # it read as "damaged model file (UnpicklingError)"
        raise ParameterError(f"--checkpoint {checkpoint} is an exported artifact, the output of this command; pass "
                             f"the run directory it came from, or its model.pt")
    inputs = [checkpoint / "model.pt" if checkpoint.is_dir() else checkpoint, args.robot]
    with output_file(args.out, "--out", inputs):  # checked before the export, left as it was when it fails
        return _export(args, checkpoint)


def _export(args: argparse.Namespace, checkpoint: Path) -> int:
    """Load the model, check it against --robot and write --out."""
    from idyn_ros.errors import ModelArtifactError
    from idyn_ros.models.pipeline import export_model, load_model
    from idyn_ros.models.sources import load_robot

    try:
        model, ck = load_model(checkpoint)
    except KeyError as exc:  # e.g. checkpoint.pt, the training state that --resume reads
        raise ModelArtifactError(f"{checkpoint}: not a model file of `idyn train` (it lacks {exc}); pass the run "
                                 f"directory or its model.pt") from None
    robot = load_robot(args.robot)
    if robot.n != model.n:
        raise ModelArtifactError(f"{checkpoint}: the model has {model.n} joints but robot '{robot.name}' has "
                                 f"{robot.n} ({list(robot.joint_names)}); pass the robot it was trained for")
    pt = checkpoint / "model.pt" if checkpoint.is_dir() else checkpoint
    trained = _exported_joints(pt.parent / "model.onnx")
    if trained is not None and trained[1] != list(robot.joint_names):
        raise ModelArtifactError(f"{checkpoint}: the run's model.onnx says it was trained for robot '{trained[0]}' "
                                 f"with joints {trained[1]}, but --robot {args.robot} has {list(robot.joint_names)}; "
                                 f"pass the robot it was trained for")
    model_id = export_model(model, ck, robot, args.out)
    print(f"wrote {args.out} (model {model.cfg.kind}, id {model_id})")
    return 0
