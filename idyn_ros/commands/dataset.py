"""Convert recordings to the dataset contract and inspect datasets.

  idyn dataset import SRC... -o OUT.npz    rosbag2 folder / .db3 / .mcap / .csv / .npz -> dataset .npz
  idyn dataset info FILE [--plot out.png]  rate, duration, joint ranges, torque std, gaps

Imported data is reordered to the robot's joint order by name, sorted, de-duplicated, split at
gaps (> 3 sample periods) and resampled onto a uniform grid (rate = median spacing, or --rate). A sample alone
between gaps (a zero, stale or future stamp) is dropped; messages naming none of the robot's joints (e.g. a
gripper's on the same topic) are skipped; the notes count both.
"""

from __future__ import annotations

import argparse
import json

from idyn_ros.commands import positive

HELP = "import recordings (rosbag2, CSV, NPZ) into the dataset .npz contract; inspect and plot datasets"

_EPILOG_IMPORT = """\
examples:
  idyn dataset import ur10_exciting_trajectory.db3 --robot path/to/ur10_robot.urdf --effort-kind current -o ur10.npz
  idyn dataset import ur5_bag/ --robot ur5 --torque-constants 10.7,10.7,10.7,10.2,11.9,11.9 -o ur5_nm.npz
  idyn dataset import panda_exciting_trajectory.db3 --robot panda -o panda.npz     (franka_ros2's fer_* names
        are read as panda_* without --joint-map; a line says so)
  idyn dataset import my_arm.db3 --robot panda --joint-map arm_=panda_ -o panda.npz
  idyn dataset import run1/ run2/ -o runs.npz        (several sources -> runs_0.npz, runs_1.npz)
  idyn dataset import crashed_bag/ --recover -o part.npz

CSV layouts: wide `t,q1..qn,dq1..,tau1..` or `t,<joint>_pos,<joint>_vel,<joint>_eff`,
or long `t,joint,position,velocity,effort`. Time unit: --time-unit, else a header suffix
(t_ns, time_ms, t_us, t_s), else detected from the median step (the unit giving 5 Hz..5 kHz).
NPZ: the dataset contract, or named columns (times, positions, velocities, accelerations,
torques, target_positions, ...). Units: SI, radians.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dataset_command", metavar="ACTION", required=True)
    imp = sub.add_parser(
        "import",
        help="convert recordings to dataset .npz files",
        description="Convert recordings to dataset .npz files (one file per source: splits stay by recording).",
        epilog=_EPILOG_IMPORT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("sources", nargs="+", metavar="SRC", help="rosbag2 folder, .db3, .mcap, .csv or .npz")
    imp.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT.npz",
        help="output file; with several sources, OUT_0.npz, OUT_1.npz, ...",
    )
    imp.add_argument(
        "--robot",
        help="preset (panda, iiwa14, ur5) or URDF path: joint order and names (default: keep the source's order)",
    )
    imp.add_argument("--joints", help="explicit comma-separated joint order (overrides --robot's)")
    imp.add_argument(
        "--joint-map",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="rename joints before matching; repeatable or comma-separated; a prefix form "
        "such as arm_=panda_ renames every arm_* joint (--robot panda reads franka_ros2's fer_* without it)",
    )
    imp.add_argument("--rate", type=positive(float), help="output sample rate in Hz, at most 10x the source's "
                     "(default: 1 / median sample spacing)")
    imp.add_argument(
        "--effort-kind",
        choices=("torque", "current"),
        help="what the effort column is (default: what the source says, else torque; UR drivers report motor "
        "currents unless use_currents_as_efforts:=false)",
    )
    imp.add_argument(
        "--torque-constants",
        metavar="K1,..,Kn",
        help="the efforts are motor currents [A]: store torques k_j * i_j [Nm] with these per-joint gains "
        "[Nm/A], each > 0 (output joint order), or a robot's data (ur5); without it, `idyn train` identifies the "
        "gains",
    )
    imp.add_argument("--topic", help="joint-state or JointTrajectory topic in a bag (default /joint_states, else "
                     "the bag's only JointState topic, else its only JointTrajectory topic)")
    imp.add_argument(
        "--wrench-topic",
        help="geometry_msgs/WrenchStamped or idyn_ros/PlantGroundTruth topic stored as wrench [f; n] "
        "(default: the single PlantGroundTruth topic, if any)",
    )
    imp.add_argument(
        "--recover", action="store_true", help="import the readable part of a truncated bag or of a killed recording"
    )
    _add_stamps(imp)
    _add_time_unit(imp)
    imp.set_defaults(_action=_run_import)

    info = sub.add_parser(
        "info",
        help="print rate, duration, ranges, torque std, gaps; optionally plot",
        description="Print a dataset summary (any readable source; bags/CSV are imported on the fly).",
        epilog="example:\n  idyn dataset info ur10.npz --plot ur10.png\n  idyn dataset info bag/ --robot panda --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    info.add_argument("file", help="dataset .npz, or any importable source")
    info.add_argument("--robot", help="preset or URDF path (for sources that need a joint order)")
    info.add_argument("--joint-map", action="append", default=[], metavar="OLD=NEW", help="as for import")
    info.add_argument("--recover", action="store_true", help="as for import")
    _add_stamps(info)
    info.add_argument("--plot", metavar="OUT.png", help="write a PNG of q, dq, tau over time (one subplot each)")
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_time_unit(info)
    info.set_defaults(_action=_run_info)


def _add_stamps(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stamps",
        choices=("auto", "header", "log"),
        default="auto",
        help="what places a bag's joint states in time: auto (default) their header.stamp, or the bag's log time "
        "when every stamp is 0, and refused when the stamps jump back; header: header.stamp, sorted even across a "
        "jump back (messages delivered late); log: the time the recorder logged each message, for a robot clock "
        "that stepped, stalled or restarted (two runs in one bag become two segments)",
    )


def _add_time_unit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--time-unit",
        choices=("auto", "s", "ms", "us", "ns"),
        default="auto",
        help="unit of a CSV / NPZ time column (default auto: a t_ns-style header suffix, else the unit that "
        "puts the median step at 5 Hz..5 kHz)",
    )


def run(args: argparse.Namespace) -> int:
    return args._action(args)


def _options(args: argparse.Namespace) -> dict:
    return {
        "robot": args.robot,
        "joint_map": args.joint_map or None,
        "recover": args.recover,
        "time_unit": args.time_unit,
        "stamps": args.stamps,
    }


def _targets(args: argparse.Namespace) -> list:
    """The file each source is written to (``Dataset.save`` gives it the suffix .npz), each checked now: before
    the first import, not after it."""
    import os
    from pathlib import Path

    from idyn_ros.commands import writable_output
    from idyn_ros.errors import ParameterError

    out = Path(args.output)
    if out.is_dir() or args.output.endswith(("/", os.sep)):  # Path() drops the slash: emptydir/ became emptydir.npz
        raise ParameterError(f"-o {args.output} is a folder; give the file to write, e.g. -o {out / 'recording.npz'}")
    many = len(args.sources) > 1
    targets = [out.with_name(f"{out.stem}_{i}{out.suffix or '.npz'}") if many else out
               for i in range(len(args.sources))]
    targets = [t if t.suffix == ".npz" else t.with_suffix(".npz") for t in targets]
    for target in targets:
        writable_output(str(target), "-o", args.sources)
    return targets


def _check_source_options(args: argparse.Namespace, sources: list[str]) -> None:
    """Refuse an option that none of ``sources`` can use: bags carry their own stamps, files have no topics."""
    from idyn_ros.data.bag import is_bag
    from idyn_ros.errors import ParameterError

    bags = [src for src in sources if is_bag(src)]
    files = [src for src in sources if src not in bags]
    if args.time_unit != "auto" and bags:
        raise ParameterError(f"--time-unit sets the unit of a CSV / NPZ time column, but {bags[0]} is a rosbag2 bag, "
                             f"whose stamps are nanoseconds; drop --time-unit")
    bag_only = [flag for flag, given in (("--topic", getattr(args, "topic", None)),
                                         ("--wrench-topic", getattr(args, "wrench_topic", None)),
                                         ("--recover", args.recover),
                                         ("--stamps", args.stamps != "auto")) if given]
    if bag_only and files:
        raise ParameterError(f"{' and '.join(bag_only)} appl{'ies' if len(bag_only) == 1 else 'y'} to rosbag2 bags, "
                             f"but {files[0]} is not one; drop {' '.join(bag_only)}")


def _check_positions(dataset, robot: str, source: str) -> list[str]:
    """The joint-limit check `idyn train` applies (``models.sources.check_positions``), at import where the data can
    still be fixed: columns assigned to ``robot``'s joints by position are refused when they leave its limits;
    named ones give the warning returned (degrees, joint offsets)."""
    import warnings

    from idyn_ros.data.importers import UNNAMED_NOTE
    from idyn_ros.models.sources import TrainingWarning, check_positions, load_robot

    unnamed = any(note.startswith(UNNAMED_NOTE) for note in dataset.notes)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always", TrainingWarning)
        check_positions(dataset.q, load_robot(robot), source, unnamed=unnamed, joints=dataset.joint_names)
    return [str(w.message) for w in got if issubclass(w.category, TrainingWarning)]


def _run_import(args: argparse.Namespace) -> int:
    import warnings

    from idyn_ros.data.importers import import_source
    from idyn_ros.progress import progress_bar

    targets = _targets(args)
    _check_source_options(args, args.sources)
    many = len(args.sources) > 1
    for src, target in zip(progress_bar(args.sources, desc="import", unit="file", enabled=many), targets, strict=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the report lists them
            dataset, report = import_source(
                src,
                joint_names=args.joints.split(",") if args.joints else None,
                rate=args.rate,
                effort_kind=args.effort_kind,
                topic=args.topic,
                wrench_topic=args.wrench_topic,
                torque_constants=args.torque_constants,
                **_options(args),
            )
        if args.robot:
            report.warnings += _check_positions(dataset, args.robot, src)
        path = dataset.save(target)
        for line in report.lines():
            print(line)
        print(
            f"wrote {path}: {len(dataset)} samples x {dataset.n} joints at {dataset.rate_hz:.4g} Hz, "
            f"{len(dataset.segments())} segment(s), effort_kind={dataset.effort_kind}"
        )
    return 0


def _run_info(args: argparse.Namespace) -> int:
    import warnings

    from idyn_ros.data.importers import import_source

    if args.plot:  # checked before the import, which can take a while on a large bag
        from idyn_ros.commands import writable_output

        writable_output(args.plot, "--plot", [args.file])
    _check_source_options(args, [args.file])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset, report = import_source(args.file, **_options(args))
        if args.robot:
            report.warnings += _check_positions(dataset, args.robot, args.file)
    summary = dataset.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_summary(summary))
        for w in report.warnings:
            print(f"warning: {w}")
    if args.plot:
        path = plot_dataset(dataset, args.plot)
        print(f"plot: {path}")
    return 0


def format_summary(s: dict) -> str:
    """Human-readable ``idyn dataset info`` text."""
    unit = "Nm" if s["effort_kind"] == "torque" else "driver units, current-based"
    lines = [
        f"source:      {s['source']}",
        f"robot:       {s['robot'] or '(unknown)'}",
        f"samples:     {s['samples']}  rate {s['rate_hz']:.4g} Hz  duration {s['duration_s']:.3f} s",
        f"segments:    {s['segments']}  gaps: "
        + (", ".join(f"{g['length_s']:.3g} s (t = {g['at_s'] - g['length_s']:.4g} to {g['at_s']:.4g} s)"
                     for g in s["gaps"]) or "none"),
        f"effort_kind: {s['effort_kind']}"
        + ("  (UR effort is motor-current based, not joint torque)" if s["effort_kind"] == "current" else ""),
        f"optional:    {', '.join(s['optional']) or 'none'}",
        f"{'joint':<24}{'q min':>10}{'q max':>10}{'|dq| max':>10}  tau std [{unit}]",
    ]
    for j, name in enumerate(s["joints"]):
        lines.append(
            f"{name:<24}{s['q_min'][j]:>10.3f}{s['q_max'][j]:>10.3f}{s['dq_absmax'][j]:>10.3f}  {s['tau_std'][j]:.4g}"
        )
    lines += [f"note: {n}" for n in s["notes"]]
    return "\n".join(lines)


def plot_dataset(dataset, path: str):
    """PNG with three stacked subplots (q rad, dq rad/s, tau) sharing the time axis; joints in the legend."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unit = "Nm" if dataset.effort_kind == "torque" else "current-based, driver units"
    fig, axes = plt.subplots(3, 1, sharex=True, figsize=(11, 8.5), constrained_layout=True)
    for ax, values, label in zip(
        axes, (dataset.q, dataset.dq, dataset.tau), ("q [rad]", "dq [rad/s]", f"effort [{unit}]"), strict=True
    ):
        for seg in dataset.segments():
            for j in range(dataset.n):
                ax.plot(
                    dataset.t[seg],
                    values[seg, j],
                    lw=0.8,
                    color=f"C{j % 10}",
                    label=dataset.joint_names[j] if seg.start == 0 else None,
                )
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8, ncol=min(dataset.n, 4))
    axes[-1].set_xlabel("t [s]")
    name = Path(dataset.source.split(":/")[0]).name  # "file.db3:/joint_states" -> "file.db3"
    axes[0].set_title(f"{name}  ({dataset.robot or 'robot?'}, {dataset.rate_hz:.4g} Hz, {len(dataset)} samples)")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
