"""Run the benchmarks: print tables and write bench/results/*.json (tracking keys: docs/interfaces.md, experiments).

Each JSON file carries `_provenance` (command, git revision, date, machine). Topics:
  dynamics     pinocchio vs torch vs ONNX RNEA
  models       accuracy on the real KUKA LWR4+ data, runtime model step (model_step.json), training speed
  gp           LIP-kernel GP vs SE/GIP/LSE
  recorder     rosbag2 recorder loss at 1 kHz
  sim          plant lockstep speed and real-time jitter
  latency      joint state -> command latency at 1 kHz (latency.json)
  experiments  tracking tables (tracking_<robot>.json), DOOMED sweep
  wrench       wrench observer on the plant: 10 N pushes, a contact-free move (wrench_observer_<robot>.json)
  ur5          real UR5 data: current gains, torque model, wrench vs F/T sensor and the UR's own estimate
  payload      payload identification (plant, offline CLI, closed loop vs DOOMED)
`--report` regenerates docs/benchmarks.md from the result files (after the runs, if topics are named).
"""

from __future__ import annotations

import argparse

HELP = "benchmarks: print tables and write bench/results/*.json"


def configure(parser: argparse.ArgumentParser) -> None:
    from idyn_ros.bench import TOPICS

    parser.add_argument("--only", nargs="+", choices=list(TOPICS), metavar="TOPIC",
                        help=f"run only these topics (default: all): {', '.join(TOPICS)}")
    parser.add_argument("--quick", action="store_true",
                        help="shorter runs (fewer samples/seeds) for a smoke check; numbers are noisier")
    parser.add_argument("--robots", nargs="+", choices=["panda", "iiwa14", "ur5"], default=None,
                        help="experiments and wrench: the robots they run (default all three); the DOOMED "
                             "sweep runs with the panda")
    parser.add_argument("--report", action="store_true",
                        help="write docs/benchmarks.md from bench/results/*.json (alone: no runs; with --only: "
                             "after them)")


def run(args: argparse.Namespace) -> int:
    from idyn_ros.bench import run_all

    options = {"robots": tuple(args.robots)} if args.robots else {}
    status = 0 if args.report and not args.only else run_all(args.only, quick=args.quick, **options)
    if args.report:
        from idyn_ros.bench.report import write_report

        status = write_report() or status
    return status
