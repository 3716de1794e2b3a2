"""Design an excitation trajectory for identification: Fourier series with a small regressor condition number.

The trajectory (Swevers 1997) starts and ends at rest (zero velocity and acceleration, exactly),
stays inside the robot's position, velocity and acceleration limits and inside the workspace (above the
surface the arm is mounted on, out of its own base column; both checked at 1 kHz), and is optimised for a
small condition number of the base-parameter regressor. Play it with the reference node after a
minimum-jerk move to q_d[0].
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "design an optimal Fourier excitation trajectory (min regressor condition number, within limits)"

EPILOG = """\
examples:
  idyn excite --robot panda --harmonics 5 --period 20 -o panda_excite.npz
  idyn excite --robot iiwa14 --seed 3 --budget 120 -o iiwa_excite.npz
  idyn excite --robot ur5 --fine-motion --scaffolds 8 -o ur5_fine.npz     (random fine motion instead)
  idyn excite --robot panda --payload -o panda_payload.npz   (for `idyn payload identify`)

output .npz: t (s), q_d (rad), dq_d (rad/s), ddq_d (rad/s^2) sampled at --rate over one period,
joint_names, robot, and the coefficients (q0, a, b, period, omega_f) so the series can be
evaluated at any rate; with the workspace check, its numbers (workspace_floor, workspace_tool_length,
workspace_base_clearance), against which the reference node checks its move from the arm's pose to q_d[0].
Acceleration limits: idyn_ros/data/limits.py (Panda datasheet, Drake iiwa14,
UR MoveIt config), position limits shrunk by 2 deg and velocity/acceleration by 10 % for the design.

--payload: minimise instead the condition number of the payload regressor J^T Y (columns scaled to a typical
payload: 1 kg, 0.1 m, 0.01 kg m^2), wrist-rich: the last three joints swing over up to +-2 rad, the others
+-0.5 rad about the centre of their range, at up to half the velocity and acceleration limits, 10 deg from the
position limits; --harmonics/--period default to 5 and 10 s (idyn_ros/control/payload.py).

workspace (idyn_ros/data/workspace.py): joint limits alone let an optimal excitation take a table-mounted arm
through the table (the UR5's went 0.84 m below its base) or fold the wrist into the base. Checked: the origins
of the joints after the second, the flange and a tool tip --tool-length beyond it stay --floor above the
mounting plane (the base frame's z = 0), and the wrist, flange and tool tip stay --base-clearance from the base
axis below the shoulder. This is no collision check (no link shapes, fixtures or other links): look at the
trajectory and play it slowly first. --no-workspace: joint limits only (an arm on a wall or ceiling).
"""


def configure(parser: argparse.ArgumentParser) -> None:
    from idyn_ros.commands import non_negative, positive
    from idyn_ros.data.workspace import DEFAULT_BASE_RADIUS, DEFAULT_FLOOR, DEFAULT_TOOL_LENGTH

    parser.epilog = EPILOG
    parser.add_argument("--robot", required=True, help="preset (panda, iiwa14, ur5) or URDF path")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.npz",
                        help="trajectory file to write (.npz is appended when missing)")
    parser.add_argument("--harmonics", type=positive(int), default=None,
                        help="number of harmonics L, at least 2 (default 5)")
    parser.add_argument("--period", type=positive(float), default=None,
                        help="period in s (default 20: w_f = 0.1 pi rad/s; --payload: 10)")
    parser.add_argument("--seed", type=non_negative(int), default=0,
                        help="random initial guess / fine-motion seed (default 0)")
    parser.add_argument("--budget", type=positive(float), default=None, help="optimiser time budget in s (default 60)")
    parser.add_argument("--rate", type=positive(float), default=1000.0, help="output sample rate in Hz (default 1000)")
    parser.add_argument(
        "--accel-limit",
        type=positive(float),
        nargs="+",
        metavar="RAD_S2",
        help="acceleration limits (rad/s^2): one for all joints or one per joint; default from idyn_ros/data/limits.py",
    )
    parser.add_argument(
        "--fine-motion", action="store_true", help="write a random fine-motion trajectory (Callar 2021 RFMA) instead"
    )
    parser.add_argument("--scaffolds", type=positive(int), default=None,
                        help="fine motion: number of scaffold poses (default 10)")
    parser.add_argument("--payload", action="store_true",
                        help="design for payload identification (well-conditioned payload regressor, wrist-rich)")
    parser.add_argument("--floor", type=float, default=DEFAULT_FLOOR, metavar="M",
                        help=f"m the checked points stay above the mounting plane, the base frame's z = 0 (default "
                             f"{DEFAULT_FLOOR:g}; negative for an arm on a pedestal that may reach below its base)")
    parser.add_argument("--tool-length", type=non_negative(float), default=DEFAULT_TOOL_LENGTH, metavar="M",
                        help=f"m from the flange along its z axis to the tool tip, which is checked too (default "
                             f"{DEFAULT_TOOL_LENGTH:g}: a hand or gripper)")
    parser.add_argument("--base-clearance", type=non_negative(float), default=DEFAULT_BASE_RADIUS, metavar="M",
                        help=f"m the wrist, flange and tool tip stay from the base axis below the shoulder (default "
                             f"{DEFAULT_BASE_RADIUS:g})")
    parser.add_argument("--no-workspace", action="store_true",
                        help="no workspace check, joint limits only (an arm mounted on a wall or a ceiling)")


def _check_options(args: argparse.Namespace) -> None:
    """Refuse options that the chosen kind of trajectory would silently ignore."""
    from idyn_ros.errors import ParameterError

    if args.payload and args.fine_motion:
        raise ParameterError("--payload designs a Fourier excitation; it cannot be combined with --fine-motion")
    fourier_only = [name for name in ("harmonics", "period", "budget") if getattr(args, name) is not None]
    if args.fine_motion and fourier_only:
        given = " ".join(f"--{name}" for name in fourier_only)
        raise ParameterError(f"--fine-motion does not use {given} (only the Fourier excitation does); "
                             f"leave out {given}")
    if args.harmonics is not None and args.harmonics < 2:
        raise ParameterError("--harmonics must be at least 2: the first is used up by the zero start/end constraints")
    if not args.fine_motion and args.scaffolds is not None:
        raise ParameterError("--scaffolds applies only to --fine-motion; drop it or add --fine-motion")


def _output_path(text: str) -> Path:
    """The file to write (``.npz`` appended as numpy would), refused when its folder does not exist."""
    from idyn_ros.errors import ParameterError

    path = Path(text if text.endswith(".npz") else text + ".npz")
    if not path.parent.is_dir():
        raise ParameterError(f"folder {path.parent} of -o {text} does not exist; create it or choose another -o")
    return path


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from idyn_ros.commands import writable_output
    from idyn_ros.data.trajectories import JointLimits, check_limits, fine_motion, optimize_excitation
    from idyn_ros.data.workspace import Workspace, WorkspaceGuard, problem, workspace_arrays
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.errors import ParameterError
    from idyn_ros.progress import progress_bar

    _check_options(args)
    output = writable_output(str(_output_path(args.output)), "-o", [args.robot])  # before the optimiser's budget
    model = RobotModel.from_robot(args.robot)
    acc = np.array(args.accel_limit, dtype=float) if args.accel_limit else None
    if acc is not None and acc.size not in (1, model.n):
        raise ParameterError(f"--accel-limit takes 1 value (all joints) or {model.n} (one per joint of "
                             f"{args.robot}), got {acc.size}")
    if acc is not None and acc.size == 1:
        acc = np.full(model.n, acc[0])
    limits = JointLimits.from_model(model, acceleration=acc)
    extra: dict[str, np.ndarray] = {}
    if args.period is None:
        args.period = 10.0 if args.payload else 20.0
    if args.harmonics is None:
        args.harmonics = 5
    if args.budget is None:
        args.budget = 60.0
    if args.scaffolds is None:
        args.scaffolds = 10
    workspace = None if args.no_workspace else Workspace(args.floor, args.tool_length, args.base_clearance)
    if workspace is not None:
        print(workspace.describe())
    if args.fine_motion:
        inside = None
        if workspace is not None:  # scaffold poses well inside the workspace (the moves between are checked below)
            from idyn_ros.data.trajectories import WORKSPACE_GRID_MARGIN

            guard = WorkspaceGuard(model, workspace)

            def inside(pose: np.ndarray) -> bool:
                return bool(guard.margins(pose[None])[0].min() >= 5 * WORKSPACE_GRID_MARGIN)
        traj = fine_motion(limits, n_scaffolds=args.scaffolds, seed=args.seed, inside=inside)
        t = np.arange(0.0, traj.duration, 1.0 / args.rate)
        q, dq, ddq = traj.evaluate(t)
        check = check_limits(q, dq, ddq, limits)
        print(f"fine motion: {args.scaffolds} scaffolds, {traj.duration:.1f} s")
    else:
        desc = "optimising cond(J^T Y)" if args.payload else "optimising cond(Y_b)"
        with progress_bar(total=round(args.budget), desc=desc, unit="s") as bar:

            def progress(elapsed: float, cond: float) -> None:
                bar.set_postfix_str(f"best cond {cond:.1f}")
                bar.update(max(0, min(round(elapsed), bar.total) - bar.n))

            if args.payload:
                from idyn_ros.control.payload import design_excitation

                result = design_excitation(model, limits, harmonics=args.harmonics, period=args.period,
                                           seed=args.seed, time_budget_s=args.budget, progress=progress,
                                           workspace=workspace)
            else:
                result = optimize_excitation(
                    model,
                    limits,
                    harmonics=args.harmonics,
                    period=args.period,
                    seed=args.seed,
                    time_budget_s=args.budget,
                    progress=progress,
                    workspace=workspace,
                )
        traj = result.trajectory
        t = np.arange(0.0, traj.period, 1.0 / args.rate)
        q, dq, ddq = traj.evaluate(t)
        check = check_limits(q, dq, ddq, limits)
        what = "payload regressor (10 parameters, scaled)" if args.payload else f"base parameters: {result.n_base}"
        print(f"{what}; optimiser: {result.evaluations} evaluations in {result.seconds:.1f} s ({result.stopped_by})")
        name = "cond(J^T Y)" if args.payload else "cond(Y_b)"
        print(
            f"condition number {name}: random initial guess {result.cond_initial:.1f} -> "
            f"optimised {result.cond_optimized:.1f}"
        )
        extra = {k: v for k, v in traj.coefficients().items()}
        extra["cond_initial"] = np.array(result.cond_initial)
        extra["cond_optimized"] = np.array(result.cond_optimized)
        extra["objective"] = np.array("payload" if args.payload else "base_parameters")
    print(
        f"limits at {args.rate:g} Hz ({t.size} samples), worst use: position {100 * check['position']:.1f} %, "
        f"velocity {100 * check['velocity']:.1f} %, acceleration {100 * check['acceleration']:.1f} % -> "
        + ("inside" if check["ok"] else "OUTSIDE")
    )
    # A trajectory outside the limits or the workspace is never written: playing it could drive the arm into them.
    if not check["ok"]:
        remedy = "another --seed" if args.fine_motion else "fewer --harmonics, a longer --period or another --seed"
        raise ParameterError(f"the trajectory is outside the limits at {args.rate:g} Hz, so {output} was not written; "
                             f"try larger --accel-limit values, {remedy}")
    if workspace is not None:
        space = WorkspaceGuard(model, workspace).check(q)
        print(f"workspace at {args.rate:g} Hz: closest to the floor margin {space['floor_margin']:.3f} m, to the base "
              f"column {space['base_margin']:.3f} m -> " + ("inside" if space["ok"] else "OUTSIDE"))
        if not space["ok"]:
            raise ParameterError(f"the trajectory leaves the workspace ({problem(space, workspace)}), so {output} "
                                 f"was not written; try another --seed, or check --floor / --base-clearance against "
                                 f"your cell")
        extra.update(workspace_arrays(workspace))  # the reference node checks its move to q_d[0] against it
    from idyn_ros.data.atomic import atomic_writer

    with atomic_writer(output) as file:
        np.savez(
            file,
            t=t,
            q_d=q,
            dq_d=dq,
            ddq_d=ddq,
            joint_names=np.array(model.joint_names),
            robot=np.array(str(args.robot)),
            **extra,
        )
    print(f"wrote {output}")
    return 0
