"""Identify rigid-body inertial and friction parameters from recordings; write them as a URDF.

Methods (all on tau = Y(q,dq,ddq) pi + F(dq) phi, stacked over samples):
  ols       ordinary least squares on the base parameters (unconstrained; may be non-physical)
  wls       OLS with each joint weighted by 1/sigma_j of its OLS residual
  sdp       physically consistent: one LMI per link on the 4x4 pseudo-inertia (cvxpy, CLARABEL/SCS)
  diffbary  same objective by Adam + L-BFGS through J = A A^T + 1e-8 (Reuss et al. 2022 Eq. 18-21)
  logchol   same through the log-Cholesky factor (Rucker & Wensing 2022)
The consistent methods regularise toward the nominal URDF parameters (--prior, --reg): the SDP by default
with the geometric prior (each link's pseudo-inertia held relative to its own size, strength 1e-2), the
others with a ridge relative to the mean excitation (1e-4 keeps unexcited directions at their nominal values).
The written URDF (--urdf-out) reloads in pinocchio; for ols/wls it is only written if every link is
physically consistent. Friction coefficients go to --params-out (JSON) since URDF cannot hold them. --profile-out
writes all of it as a plant profile: the embedded simulator then runs the robot as identified (a preset robot only).
The files are written together at the end, after every check (a URDF refused writes none; all are complete on disk
before any replaces an old file): a run that fails, is refused or is interrupted leaves no part of a file, no empty
folder it created, and the files it was to write as they were.
Recordings of motor currents (UR drivers) are refused: `idyn train --model rbd-friction` identifies their gains.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "identify inertial + friction parameters (ols, wls, sdp, diffbary, logchol) -> URDF"
DEFAULT_FRICTION = "coulomb,viscous,offset"  # dynamics.friction.DEFAULT_KINDS, kept light for --help; train, payload

EPILOG = """examples:
  idyn identify --robot kuka_lwr4.urdf --data measurements_1.npz --method sdp --urdf-out kuka_id.urdf
  idyn identify --robot iiwa14 --data excite.mcap --method diffbary --friction coulomb,viscous \\
      --urdf-out iiwa_id.urdf --params-out iiwa_id.json --test excite_val.mcap
  idyn identify --robot panda --data excite.mcap --profile-out my_panda.yaml   # a simulator of your arm:
  idyn bringup --robot panda --set profile=my_panda.yaml
"""


def add_prior_arguments(parser: argparse.ArgumentParser) -> None:
    """--prior and --reg, shared with `idyn train` (``idyn_ros.models.identification``, module doc)."""
    from idyn_ros.models.identification import DEFAULT_STRENGTH, PRIORS, SDP_DEFAULT_PRIOR

    parser.add_argument("--prior", choices=PRIORS, default=None,
                        help=f"the identification's prior toward the nominal URDF: geometric (the log-det divergence "
                             f"of each link's pseudo-inertia, relative to the link's size; SDP only) or ridge; "
                             f"default {SDP_DEFAULT_PRIOR} for the SDP, ridge for the other methods")
    parser.add_argument("--reg", type=float, default=None,
                        help=f"the prior's strength: ridge relative to the mean excitation (default "
                             f"{DEFAULT_STRENGTH['ridge']:g}), geometric (default {DEFAULT_STRENGTH['geometric']:g}); "
                             f"larger keeps weakly excited parameters nearer nominal")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--robot", required=True, help="robot preset (panda, iiwa14, ur5) or URDF path")
    parser.add_argument("--data", nargs="+", required=True, metavar="F",
                        help="recordings (rosbag2 folder, .db3, .mcap, .npz, .csv)")
    parser.add_argument("--method", choices=["ols", "wls", "sdp", "diffbary", "logchol"], default="sdp",
                        help="identification method (default: sdp)")
    parser.add_argument("--friction", default=DEFAULT_FRICTION,
                        help=f"friction kinds, comma separated or 'none' (default: {DEFAULT_FRICTION})")
    add_prior_arguments(parser)
    parser.add_argument("--solver", choices=["CLARABEL", "SCS"], default="CLARABEL",
                        help="SDP solver (default: CLARABEL)")
    parser.add_argument("--urdf-out", metavar="X.urdf",
                        help="write the identified model as a URDF (an ols or wls fit with a physically inconsistent "
                             "body is refused, and then --params-out is not written either)")
    parser.add_argument("--params-out", metavar="X.json", help="write all identified parameters as JSON")
    parser.add_argument("--profile-out", metavar="X.yaml",
                        help="write the identified robot as a plant profile (bodies, rotor inertia, friction; ideal "
                             "sensors) for the embedded simulator: idyn bringup --robot R --set profile=X.yaml; "
                             "preset robots only (panda, iiwa14, ur5)")
    parser.add_argument("--test", nargs="*", default=[], metavar="F", help="recordings to report nMSE on")


def run(args: argparse.Namespace) -> int:
    import contextlib

    from idyn_ros.commands import output_file
    from idyn_ros.commands.train import one_line_warnings
    from idyn_ros.errors import ParameterError

    inputs = [args.robot, *args.data, *args.test]
    with contextlib.ExitStack() as stack:
        outputs = {"--urdf-out": args.urdf_out, "--params-out": args.params_out, "--profile-out": args.profile_out}
        for option, out in outputs.items():
            if out:  # checked before the identification, which can take minutes
                stack.enter_context(output_file(out, option, inputs))
        named = [(option, Path(out).resolve()) for option, out in outputs.items() if out]
        for i, (option, path) in enumerate(named):
            twin = next((other for other, p in named[:i] if p == path), None)
            if twin:
                raise ParameterError(f"{twin} and {option} are the same file {path}; give each its own name")
        if args.profile_out:
            from idyn_ros.robots import ROBOT_NAMES

            if args.robot not in ROBOT_NAMES:
                raise ParameterError(f"--profile-out: the embedded plant simulates the presets {', '.join(ROBOT_NAMES)}"
                                     f", not {args.robot}; identify with --robot <preset> (its URDF is the one the "
                                     f"plant builds on)")
        stack.enter_context(one_line_warnings("identify"))
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    import json

    import numpy as np

    from idyn_ros.data.atomic import write_together
    from idyn_ros.dynamics.friction import parse_kinds
    from idyn_ros.errors import DatasetError, IdentificationError
    from idyn_ros.models.identification import identify, write_urdf
    from idyn_ros.models.metrics import torque_metrics
    from idyn_ros.models.sources import load_file, load_robot

    robot = load_robot(args.robot)

    def say(line: str) -> None:  # how a file was read (split at its gaps, joints renamed): on stderr, as a warning is
        print(f"idyn identify: {line}", file=sys.stderr)

    data = [load_file(path, robot, say=say) for path in args.data]  # per file (with gaps: a recording per segment)
    tests = [load_file(path, robot, say=say) for path in args.test]  # a wrong --test path fails now, not after the fit
    for path, segments in zip([*args.data, *args.test], [*data, *tests], strict=True):
        if segments[0].effort_kind == "current":
            raise DatasetError(f"{path}: its efforts are motor currents [A], and identify fits joint torques [Nm]: "
                               f"every parameter would come out scaled by the unknown gains; identify them with "
                               f"`idyn train --model rbd-friction` (it finds the current gains too), convert them "
                               f"with known gains and identify the result (`idyn dataset import {path} "
                               f"--torque-constants K1,..,Kn -o X.npz`; `--torque-constants ur5` takes the UR5's "
                               f"published ones), or record torques")
    recs = [rec for segments in data for rec in segments]
    res = identify(robot.pin_model, recs, args.method, parse_kinds(args.friction), reg=args.reg,
                   solver=args.solver, prior=args.prior)
    from idyn_ros.dynamics.inertia import check_physical_consistency

    eig = np.asarray(res.info["min_pseudo_inertia_eig"])
    problems = check_physical_consistency(res.pi, names=[f"body of {j}" for j in robot.joint_names])
    n_armature = len(res.info["armature_joints"])  # identifiable rotor inertias count as base parameters too
    print(f"{args.method}: {res.info['n_samples']} samples, {res.n_base} base parameters ({res.n_base - n_armature} "
          f"rigid-body, as `idyn excite` counts them, + {n_armature} armature), "
          f"regressor condition {res.info['cond_base_regressor']:.3g}, {res.info['seconds']:.1f} s")
    if "directions_held_at_nominal" in res.info:
        print(f"ridge toward nominal: {res.info['directions_held_at_nominal']} of {res.pi.size + res.friction.size} "
              f"parameter directions are excited less than the ridge and stay near nominal")
    if "prior" in res.info:
        print(f"prior toward nominal: {res.info['prior']}" + (" (log-det divergence per link, relative to its size)"
                                                              if res.info["prior"].startswith("geometric") else ""))
    print("train nMSE per joint [%]: " + " ".join(f"{100 * v:.2f}" for v in res.info["train_nmse"]))
    print("physically consistent links: " + " ".join("yes" if e > 0 else "NO" for e in eig))
    print("armature (reflected rotor inertia, kg m^2): " + " ".join(f"{v:.4f}" for v in res.armature))
    for path, segments in zip(args.test, tests, strict=True):
        m = torque_metrics(np.concatenate([res.predict(robot.pin_model, rec) for rec in segments]),
                           np.concatenate([rec.tau for rec in segments]))
        print(f"test {path}: nMSE [%] " + " ".join(f"{100 * v:.2f}" for v in m["nmse"])
              + f" (mean {100 * m['nmse_mean']:.2f})")
    xml = profile = None
    if (args.urdf_out or args.profile_out) and problems:  # refused before any file is written: nothing changes
        what = "a URDF cannot hold them" if args.urdf_out else "a simulator cannot move them"
        refused = " and ".join(o for o, v in (("--urdf-out", args.urdf_out), ("--profile-out", args.profile_out)) if v)
        raise IdentificationError(
            f"{args.method} gave physically inconsistent bodies ({'; '.join(problems[:3])}); {what}. Use --method "
            f"sdp, diffbary or logchol"
            + (f"; nothing written (drop {refused} to write --params-out alone)" if args.params_out else "")
        )
    if args.profile_out:
        from idyn_ros.sim.profile import IDENTIFIED_HEADER, identified_profile, profile_yaml

        data, notes = identified_profile(robot.name, tuple(robot.joint_names), res.pi, res.armature,
                                         tuple(res.friction_kinds), res.friction)
        header = IDENTIFIED_HEADER.format(robot=robot.name, method=args.method)
        profile = profile_yaml(data, header + "".join(f"# note: {n}\n" for n in notes))
        for note in notes:
            say(note)
    if args.urdf_out:
        xml = write_urdf(robot.urdf_xml, robot.pin_model, res.pi, res.armature)
        from idyn_ros.dynamics import RobotModel

        check = RobotModel.from_urdf(xml, name=robot.name, joints=robot.joint_names, check_inertia=False)
        err = max(np.abs(check.inertial_parameters() - res.pi).max(), np.abs(check.armature - res.armature).max())
    params = None if not args.params_out else json.dumps({
        "method": res.method, "robot": robot.name, "joint_names": list(robot.joint_names),
        "inertial": res.pi.tolist(), "friction_kinds": list(res.friction_kinds),
        "friction": res.friction.tolist(), "armature": res.armature.tolist(), "info": res.info}, indent=2)
    write_together({args.params_out: params, args.urdf_out: xml, args.profile_out: profile})
    if params is not None:
        print(f"wrote {args.params_out}")
    if xml is not None:
        print(f"wrote {args.urdf_out} (reloaded: max parameter difference {err:.2e}, "
              f"consistency check: {len(check_physical_consistency(check.inertial_parameters()))} problems)")
    if profile is not None:
        print(f"wrote {args.profile_out}: simulate it with idyn bringup --robot {robot.name} --set "
              f"profile={args.profile_out}")
    return 0
