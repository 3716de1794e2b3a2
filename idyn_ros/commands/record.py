"""Record topics to a rosbag2 bag (MCAP by default, sqlite3 on request) without losing messages at 1 kHz.

Stops on Ctrl-C / SIGTERM (drains what is queued and closes a complete bag) or after --duration.
After a hard kill, `idyn dataset import BAG --recover` reads everything up to the last flush.
"""

from __future__ import annotations

import argparse

HELP = "record /joint_states and other topics to a rosbag2 bag (MCAP or sqlite3)"

EPILOG = """\
examples:
  idyn record -o runs/panda_01                              /joint_states only, MCAP
  idyn record -o runs/panda_02 --storage sqlite3 --duration 60
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
    from tqdm import tqdm

    from idyn_ros.commands import writable_output
    from idyn_ros.nodes.recorder import run_recorder

    if args.output:  # else the ROS parameter output:= names it (the recorder checks that one)
        writable_output(args.output, "-o", folder=True)
    bar = tqdm(desc="recorded", unit="msg", disable=args.quiet)

    def progress(counts: dict[str, int]) -> None:
        bar.update(sum(counts.values()) - bar.n)

    try:
        counts = run_recorder(args.output, args.topics, args.storage, args.qos_depth, args.flush_period, args.duration,
                              on_progress=progress)
    finally:
        bar.close()
    print(f"wrote {args.output}: " + (", ".join(f"{t} {c} messages" for t, c in counts.items()) or "no topic seen"))
    return 0
