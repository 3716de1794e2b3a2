"""The whole loop on the embedded MuJoCo plant (true-robot profile), end to end in about --minutes (default 10;
528 s measured on 2 cores, every row trained):

  1. design optimised Fourier excitations (min cond(Y_b))
  2. record them over DDS: plant node (lockstep sim clock) + controller node (a drive's PD in torque
     space, gains from the effort limits; nominal RBD feedforward) + reference node + rosbag2 recorder,
     on loopback
  3. import the bag, `idyn train --model auto`: identified RBD + friction (SDP) and the learned residuals
     on it (time-boxed), each exported to ONNX
  4. closed-loop min-jerk moves at soft / medium / stiff with: no feedforward, nominal RBD,
     identified RBD + friction, hybrid 2S, hybrid E2E, auto's choice, hybrid 2S + DOOMED (in-process
     lockstep, same classes as the controller node)
  5. print the table; write the report folder: report.md, results.json, table.txt and plots
     (tracking error over time, torque prediction vs measurement on held-out data, a push on the
     flange with the estimated wrench vs the applied one)
"""

from __future__ import annotations

import argparse

from idyn_ros.commands import positive

HELP = "record -> identify/train -> export -> closed loop on the MuJoCo plant, with a report (~10 min)"

EPILOG = """\
examples:
  idyn demo                                   panda, report in reports/demo-panda/
  idyn demo --robot iiwa14 --out /tmp/iiwa    another robot, another folder
  idyn demo --robot ur5 --minutes 5           a shorter budget (less training, noisier numbers)
  idyn demo --skip-dds                        record in-process only (no ROS processes)

units: the table is joint RMSE during the move and final offset |q_d - q| at its end, in degrees,
averaged over joints and moves (Reuss et al. 2022, Table III). Gains: the controller's presets as
config/<robot>.yaml loads them (docs/parameters.md: soft/medium/stiff Kp in 1/s^2, acceleration-space
feedback, critically damped). Intermediate files
(excitation, bag, datasets, models) go to --work; reruns retrain (the bench caches instead).
DDS stays on loopback (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST) with a private ROS_DOMAIN_ID
unless you set one.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--robot", default="panda", choices=("panda", "iiwa14", "ur5"),
                        help="robot preset (default panda)")
    parser.add_argument("-o", "--out", default=None, metavar="DIR",
                        help="report folder (default reports/demo-<robot>/)")
    parser.add_argument("--work", default=None, metavar="DIR",
                        help="work folder for bag, datasets and models (default runs/demo/<robot>/)")
    parser.add_argument("--minutes", type=positive(float), default=10.0, metavar="M",
                        help="total time budget in minutes (default 10): sets the DDS recording time box "
                        "(~12 %%, at least twice the recording's ~90 s of sim time) and the auto fit's training "
                        "time (~35 %%)")
    parser.add_argument("--moves", type=positive(int), default=3,
                        help="min-jerk moves per cell, 2 s each (default 3; the paper's protocol is 5 x (2 s, 10 s): "
                        "`idyn bench --only experiments`)")
    parser.add_argument("--skip-dds", action="store_true",
                        help="do not start ROS processes; record the excitations in-process")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    import json

    from idyn_ros.commands import writable_output
    from idyn_ros.experiments import dds
    from idyn_ros.experiments.demo import run_demo
    from idyn_ros.experiments.tracking import format_table

    for option, folder in (("--out", args.out), ("--work", args.work)):
        if folder:  # checked before the recording and the training, which take minutes
            writable_output(folder, option, folder=True)
    dds.ensure_ros_env()
    s = run_demo(args.robot, args.out, args.minutes, args.work, n_moves=args.moves, skip_dds=args.skip_dds,
                 progress=not args.quiet)
    print()
    print(f"idyn demo: {args.robot}, min-jerk moves (2 s), RMSE / final offset in deg")
    print(format_table(s["table"]))
    print()
    print(f"acceptance (hybrid 2S): {json.dumps(s['acceptance'])}")
    print(f"acceptance (auto, {s['models']['auto'].get('selected')}): {json.dumps(s['acceptance_auto'])}")
    print(f"report: {args.out or f'reports/demo-{args.robot}'}/report.md  ({s['total_s']:.0f} s total)")
    return 0
