"""Record topics to a rosbag2 bag (MCAP by default, sqlite3 on request) without losing messages at 1 kHz.

Stops on Ctrl-C / SIGTERM (drains what is queued and closes a complete bag) or after --duration.
After a hard kill, `idyn dataset import BAG --recover` reads everything up to the last flush.
A topic that got no message (no publisher seen) is named in a warning and the exit code is 1; the bag is kept.
"""

from __future__ import annotations

import argparse

HELP = "record /joint_states and other topics to a rosbag2 bag (MCAP or sqlite3)"

EPILOG = """\
examples:
  idyn record -o runs/panda_01                              /joint_states only, MCAP
  idyn record -o runs/panda_02 --storage sqlite3 --duration 60
  idyn record -o runs/ur5_01 --effort-kind current          a UR driver's joint effort is motor current
  idyn record -o runs/ff /joint_states /idyn/reference:idyn_ros/msg/JointReference \\
              /effort_controller/commands:std_msgs/msg/Float64MultiArray
then: idyn dataset import runs/panda_01 --robot panda -o panda_01.npz

Log times are receive times on the system clock (ns). DDS discovery stays on this machine when
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST is set.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    from idyn_ros.nodes.recorder import build_parser

    parser.epilog = EPILOG
    build_parser(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress counter")


def run(args: argparse.Namespace) -> int:
    import os
    import sys
    from pathlib import Path

    from idyn_ros.commands import writable_output
    from idyn_ros.errors import ParameterError
    from idyn_ros.nodes.recorder import parse_topic, run_recorder
    from idyn_ros.progress import progress_bar

    if args.output:  # else the ROS parameter output:= names it (the recorder checks that one)
        writable_output(args.output, "-o", folder=True)
        if Path(args.output).exists():  # before the progress bar, which the recorder's own refusal came after
            raise ParameterError(f"-o {args.output} exists already; choose a new output folder (bags are never "
                                 "overwritten)")
    bar = progress_bar(desc="recorded", unit="msg", enabled=not args.quiet)

    def progress(counts: dict[str, int]) -> None:
        bar.update(sum(counts.values()) - bar.n)

    try:
        counts = run_recorder(args.output, args.topics, args.storage, args.qos_depth, args.flush_period, args.duration,
                              on_progress=progress, effort_kind=args.effort_kind)
    finally:
        bar.close()
    print(f"wrote {args.output}: " + (", ".join(f"{t} {c} messages" for t, c in counts.items()) or "no topic seen"))
    silent = [name for name, _ in map(parse_topic, args.topics or ["/joint_states"]) if not counts.get(name)]
    if silent:  # an empty bag and exit 0 looked like a recording
        env = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE"))
        print(f"idyn record: warning: 0 messages on {', '.join(silent)} (the bag {args.output} is kept); check that "
              f"a publisher runs, the topic name, and that ROS_DOMAIN_ID and ROS_AUTOMATIC_DISCOVERY_RANGE are the "
              f"publisher's (here {env})", file=sys.stderr)
        return 1
    return 0
