"""Re-export a trained model (DIR/model.pt) as an ONNX artifact, e.g. after a format change.

The artifact holds RBD (torch RNEA with the identified parameters), friction and the residual
network, with explicit recurrent state, and JSON metadata (robot, joint names, rate,
normalisation, identified parameters, training-data sha256, test metrics).
"""

from __future__ import annotations

import argparse

HELP = "re-export a trained model checkpoint (DIR/model.pt) to ONNX"

EPILOG = """examples:
  idyn export --checkpoint runs/kuka_hybrid --robot kuka_lwr4.urdf --out runs/kuka_hybrid/model.onnx
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--checkpoint", required=True, metavar="DIR_OR_PT",
                        help="run directory (uses DIR/model.pt) or a model.pt file")
    parser.add_argument("--robot", required=True, help="robot preset or URDF path the model was trained for")
    parser.add_argument("-o", "--out", required=True, metavar="X.onnx", help="artifact to write")


def run(args: argparse.Namespace) -> int:
    from idyn_ros.models.pipeline import export_model, load_model
    from idyn_ros.models.sources import load_robot

    model, ck = load_model(args.checkpoint)
    robot = load_robot(args.robot)
    model_id = export_model(model, ck, robot, args.out)
    print(f"wrote {args.out} (model {model.cfg.kind}, id {model_id})")
    return 0
