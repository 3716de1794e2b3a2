"""Identify a payload fixed to the flange (mass, CoM, inertia about the CoM) from joint-torque recordings.

tau_payload = J^T(q) Y(a, alpha, w, g) phi (Doenges 2025 eq. 54, with Y written out and gravity in it:
idyn_ros/dynamics/payload.py). The arm's own dynamics come from a recording without the payload (--reference: both
are identified in one least-squares problem, the payload is the difference at the flange body) or from a trained
model of the bare arm (--model). Plain least squares first; when its result is not physically consistent (mass <= 0,
inertia not positive definite, triangle inequalities) the constrained solve is reported instead. Play an excitation
from `idyn excite --payload` for both recordings. The result ends in a verdict: a payload, no payload (the mass is
within 3 sigma of zero), or undetermined (the data do not excite the payload's parameters, or the result is not
physical). --vendor-out is written atomically after the identification: the payload's forms, or an empty flange's
(mass 0, which clears a payload set before) when there is no payload. A run that fails, is refused, is interrupted or
is undetermined leaves an earlier file there as it was, no part of one, and no empty folder it created (exit 2 when
undetermined, after printing the result).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from idyn_ros.commands.identify import DEFAULT_FRICTION

HELP = "identify a flange payload (mass, CoM, inertia) from recordings with and without it, or with a bare-arm model"

EPILOG = """examples:
  idyn excite --robot ur5 --payload -o ur5_payload_excite.npz
  idyn payload identify --robot ur5 --data with.npz --reference without.npz
  idyn payload identify --robot panda --data with.mcap --model bare_arm/model.onnx --json
  idyn payload identify --robot iiwa14 --data with.npz --reference without.npz --vendor-out load.json

--json prints exactly: mass_kg, mass_std_kg, com_m, com_std_m (flange frame), inertia_kgm2, inertia_std_kgm2
([ixx, ixy, ixz, iyy, iyz, izz] about the CoM, flange axes) and consistency (least_squares_consistent, problems,
solve: least_squares | constrained, condition_number), verdict (result: payload | no payload | undetermined,
reason). --vendor-out writes the result as Franka SetLoad, UR
set_target_payload, KUKA load data and this package's xacro payload arguments (an empty flange, mass 0, when there is
no payload; nothing when undetermined, exit 2).
"""


def configure(parser: argparse.ArgumentParser) -> None:
    from idyn_ros.commands import positive

    parser.epilog = EPILOG
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    ident = actions.add_parser("identify", help="identify the payload", description=__doc__,
                               epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ident.add_argument("--robot", required=True, help="robot preset (panda, iiwa14, ur5) or URDF path")
    ident.add_argument("--data", nargs="+", required=True, metavar="WITH",
                       help="recordings with the payload attached (rosbag2 folder, .db3, .mcap, .npz, .csv)")
    arm = ident.add_mutually_exclusive_group(required=True)
    arm.add_argument("--reference", nargs="+", metavar="WITHOUT", help="recordings of the same arm without it")
    arm.add_argument("--model", metavar="M.onnx", help="an exported model of the bare arm (`idyn train`)")
    ident.add_argument("--friction", default=None,
                       help="--reference: the arm's friction kinds, comma separated or 'none' (default: "
                       f"{DEFAULT_FRICTION})")
    ident.add_argument("--no-offsets", action="store_true",
                       help="--model: do not leave a constant torque offset per joint free")
    ident.add_argument("--rate", type=positive(float), default=100.0,
                       help="Hz the data are decimated to (default: 100; a slower recording keeps its own rate)")
    ident.add_argument("--cutoff", type=positive(float), default=5.0,
                       help="Hz of the zero-phase low-pass applied alike to all signals, below half the recordings' "
                       "rate (default: 5)")
    ident.add_argument("--json", action="store_true", help="print the result as JSON (keys above) and nothing else")
    ident.add_argument("--vendor-out", metavar="F.json",
                       help="write the vendor forms of the result (mass 0 for no payload; none when undetermined)")


def _check_options(args: argparse.Namespace) -> None:
    """Refuse an option the chosen mode would ignore (the bare-arm model already holds its friction)."""
    from idyn_ros.errors import ParameterError

    if args.model and args.friction is not None:
        raise ParameterError("--friction applies only to --reference: the bare-arm model brings its own friction")
    if args.reference and args.no_offsets:
        raise ParameterError("--no-offsets applies only to --model: with --reference the offsets are part of "
                             "--friction (drop 'offset' there)")


def run(args: argparse.Namespace) -> int:
    import contextlib

    from idyn_ros.commands import output_file
    from idyn_ros.commands.train import one_line_warnings

    _check_options(args)
    with contextlib.ExitStack() as stack:
        if args.vendor_out:  # checked before the identification
            inputs = [args.robot, *args.data, *(args.reference or []), *([args.model] if args.model else [])]
            stack.enter_context(output_file(args.vendor_out, "--vendor-out", inputs))
        stack.enter_context(one_line_warnings("payload"))
        return _identify(args)


def _identify(args: argparse.Namespace) -> int:
    import json

    from idyn_ros.control import payload as cp
    from idyn_ros.dynamics.friction import parse_kinds
    from idyn_ros.dynamics.payload import vendor_formats
    from idyn_ros.errors import IdentificationError
    from idyn_ros.models.sources import load_recordings, load_robot

    robot = load_robot(args.robot)

    def say(line: str) -> None:  # how a file was read (split at its gaps, joints renamed): stderr, away from --json
        print(f"idyn payload: {line}", file=sys.stderr)

    with_payload = load_recordings(args.data, robot, say=say)
    reference = load_recordings(args.reference, robot, say=say) if args.reference else []
    if args.reference:
        kinds = parse_kinds(args.friction or DEFAULT_FRICTION)
        est = cp.identify_with_reference(robot, with_payload, reference, kinds, args.rate, args.cutoff)
    else:
        est = cp.identify_with_model(robot, with_payload, cp.artifact_predictor(robot, args.model), args.rate,
                                     args.cutoff, offsets=not args.no_offsets)
    verdict, why = cp.payload_verdict(est)
    if args.vendor_out and verdict != "undetermined":
        from idyn_ros.data.atomic import atomic_write_text
        from idyn_ros.robots.spec import Payload

        told = est.payload if verdict == "payload" else Payload(0.0)  # no payload: tell the robot its flange is empty
        atomic_write_text(args.vendor_out, json.dumps({**est.to_json(), "verdict": {"result": verdict, "reason": why},
                                                       "robot": robot.name, "flange_frame": robot.flange_frame,
                                                       **vendor_formats(told)}, indent=2) + "\n")
    if args.json:
        print(json.dumps({**est.to_json(), "verdict": {"result": verdict, "reason": why}}, indent=2))
    else:
        _print_result(args, robot, est, verdict, why)
    if args.vendor_out and verdict == "undetermined":  # after the result, which says why
        raise IdentificationError(f"{args.vendor_out} not written: {_verdict_line(verdict, why)}")
    return 0


def _print_result(args: argparse.Namespace, robot: Any, est: Any, verdict: str, why: str) -> None:
    """The human-readable result: the estimate with its standard deviations, then the verdict."""
    p = est.payload
    print(f"{robot.name}: {est.n_samples} samples ({est.info['mode']}: "
          + ("recordings with and without the payload" if args.reference else f"bare-arm model {args.model}") + ")")
    print(f"mass     {p.mass:.4f} +- {est.mass_std:.4f} kg")
    print("CoM      " + "  ".join(f"{1e3 * c:+.2f}" for c in p.com) + "  mm (flange frame)  +- "
          + " ".join(f"{1e3 * s:.2f}" for s in est.com_std))
    print("inertia  " + "  ".join(f"{v:+.5f}" for v in p.inertia) + "  kg m^2 (ixx ixy ixz iyy iyz izz, about the CoM)")
    print("     +-  " + "  ".join(f"{s:.5f}" for s in est.inertia_std))
    print(f"payload regressor condition number {est.condition_number:.1f}; residual RMS per joint "
          + " ".join(f"{r:.3f}" for r in est.residual_rms) + " Nm")
    if est.physically_consistent:
        print("physically consistent (least squares)")
    else:
        print("least squares NOT physically consistent (" + "; ".join(est.ls_problems)
              + "): reporting the constrained solve")
    print(f"verdict: {_verdict_line(verdict, why)}")
    if args.vendor_out and verdict != "undetermined":
        what = "" if verdict == "payload" else "an empty flange, mass 0: "
        print(f"wrote {args.vendor_out} ({what}Franka SetLoad, UR set_target_payload, KUKA load data, xacro arguments)")


def _verdict_line(verdict: str, why: str) -> str:
    """"payload", "no payload detected: ..." or "undetermined: ...": the verdict once, then its reason."""
    return {"payload": "payload", "no payload": why}.get(verdict, f"{verdict}: {why}")
