"""Replay a recording through the wrench observer (the node's classes) and score it against a force/torque sensor.

  idyn wrench --model M.onnx --data SRC -o OUT.npz [--ft-topic T] [--twin RUN] [--plot P.png] [--json]

SRC: a rosbag2 bag (folder, .mcap, .db3) or a dataset .npz. Stray stamps are dropped and the observer starts over
after each gap (> 3 periods), as the importer does. Each joint state is fed with its header stamp to the
direct residual and the momentum observer (idyn_ros.control.wrench) and the trust stage (bias re-zeroed at rest,
uncertainty, contact detection, reduced rank near singularities: idyn_ros.control.wrench_trust), as the
wrench_observer node runs them with torque_source effort and its default parameters (the options below set the
ones of the same names). Efforts are converted to torque with the model's gains
when they are motor currents (a UR driver's default).

OUT.npz: t [s] (joint-state header stamps; t_ns the same in integer ns), wrench (N, 6) = [fx fy fz tx ty tz]
applied by the environment to the robot at the flange origin in flange axes (tool0 on a UR), wrench_base (N, 6)
the same in base axes, frame; also sigma (1-sigma per flange axis), contact, contact_score, rank, at_rest,
rezeroed, tau_ext, wrench_direct (the direct residual through its own trust stage; = wrench with --primary
direct), hidden (per flange axis, the most force the stiction band can hide at that
state: 0 while the joints slide), and with --ft-topic the sensor and vendor wrenches on the same stamps
(sign-normalised, flange axes, bias kept).

Scoring (--ft-topic): every signal minus its mean over the initial rest window (--bias-window), forces only,
per-axis RMSE and correlation against the sensor, for ours and for the vendor's own estimate when the bag has
one (--vendor-topic, default ur_robot_driver's /force_torque_sensor_broadcaster/wrench, which reports the wrench
the robot applies: --vendor-sign -1). Rate: the model's; a recording at another rate or with irregular stamps
is resampled onto it (linear interpolation, as idyn evaluate does); --rate resamples to another (a model with
recurrent state refuses a rate not its own).
With the stiction band on, also the force no estimate from currents can see without reading the arm's own stick-slip
as force: the sensor's RMSE on the samples where zero force explains every joint's current within its static
friction (``hidden_by_friction``: a floor for an estimate that stays quiet there, as ours does).

Without a sensor (--twin RUN): a contact-free recording of the same motion, e.g. the same robot program run once
without pushes, is a reference for the external joint torque: with the same positions, velocities and
accelerations the arm needs the same torque, so the twin's torque minus this run's is what the environment applied,
anywhere on the arm. The twin is aligned in time by its joint positions (refused when they differ by more than
0.01 rad RMS) and each joint is scored while it slides in both runs (a stuck joint's torque can sit anywhere in its
static-friction band): ours (tau_ext), the vendor's wrench mapped to the joints, and zero. OUT.npz then also holds
tau_ext_twin_reference (N, n), NaN outside the twin. The reference holds when the pushes do not change the motion
(a stiff position loop, as a UR's); an arm that yields under them moves differently, which needs torque too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

FLAGS = {"observer_gain": "--observer-gain", "point_moment_nm": "--point-moment"}  # node parameter -> option
HELP = "replay a recording through the wrench observer; score it against an F/T sensor (RMSE, plot)"

EPILOG = """examples:
  idyn wrench --model runs/ur5/model.onnx --data ur5_ft/Movement_No10_Standstill_ForceSensor_Fx \\
      -o no10.npz --ft-topic /ft_sensor/wrench --plot no10.png
  idyn wrench --model runs/ur5/model.onnx --data ur5_ft/Movement_No1 -o no1.npz --json   # 62 Hz, irregular
  idyn wrench --model runs/ur5/model.onnx --data ur5_ft/Movement_No7_Acc_slow_Verify_Model_short_with_disturbance \\
      -o no7w.npz --twin ur5_ft/Movement_No7_Acc_slow_Verify_Model_short --plot no7w.png   # pushes in motion
"""


def configure(parser: argparse.ArgumentParser) -> None:
    from idyn_ros.commands import positive
    from idyn_ros.control.wrench_trust import CONTACT_MODELS, TrustSettings
    from idyn_ros.experiments.wrench_replay import BIAS_WINDOW_S, VENDOR_TOPIC
    from idyn_ros.parameters import WrenchObserverParams

    d, node = TrustSettings(), WrenchObserverParams()  # the wrench_observer node's defaults
    parser.epilog = EPILOG
    parser.add_argument("--model", required=True, metavar="M.onnx", help="exported model (idyn train)")
    parser.add_argument("--data", required=True, metavar="SRC", help="rosbag2 bag or dataset .npz")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="estimates (see above)")
    parser.add_argument("--robot", help="robot preset or URDF (default: the model's)")
    parser.add_argument("--topic", help="joint-state topic (default /joint_states)")
    parser.add_argument("--rate", type=float, help="resample the joint states to this rate [Hz] and run the "
                        "observer and model at it (default: the model's rate)")
    parser.add_argument("--effort-unit", choices=("auto", "torque", "current"), default="auto",
                        help="what the joint-state effort is (default auto: what the recording says, else what "
                             "the model was trained on)")
    parser.add_argument("--primary", choices=("momentum", "direct"), default="momentum",
                        help="which observer feeds the trust stage and OUT.npz wrench (default momentum)")
    parser.add_argument("--observer-gain", type=float, default=node.observer_gain,
                        help=f"K_O of the momentum observer [1/s] (default {node.observer_gain:g}, the node's)")
    parser.add_argument("--contact-model", choices=CONTACT_MODELS, default=d.contact_model,
                        help="wrench: any wrench at the flange; point: a contact near the flange, little moment, "
                             f"forces estimated with redundancy (default {d.contact_model}, the node's)")
    parser.add_argument("--point-moment", type=float, default=None, metavar="NM",
                        help=f"with --contact-model point: 1-sigma moment the contact transmits at the flange [Nm] "
                             f"(default {d.point_moment_nm:g}, the node's)")
    parser.add_argument("--no-auto-rezero", action="store_true", help="no automatic re-zero at rest")
    parser.add_argument("--no-stiction-band", action="store_true",
                        help="report the raw residual at standstill (default: per joint the external torque closest "
                             "to zero that the model's break-away friction allows)")
    parser.add_argument("--ft-topic", help="WrenchStamped topic of an F/T sensor to score against")
    parser.add_argument("--ft-sign", type=float, choices=(1.0, -1.0), default=None,
                        help="with --ft-topic: +1 (default) if the sensor reports the wrench applied to it "
                             "(environment on robot), -1 if the one it applies")
    parser.add_argument("--vendor-topic", default=None, help=f"the vendor's estimate (default {VENDOR_TOPIC} when "
                        "the bag has it; '' for none; a topic named here must be in the bag)")
    parser.add_argument("--vendor-sign", type=float, choices=(1.0, -1.0), default=-1.0,
                        help="-1 (default): the vendor reports the wrench the robot applies (ur_robot_driver)")
    parser.add_argument("--bias-window", type=positive(float), default=BIAS_WINDOW_S, metavar="S",
                        help=f"seconds of rest, arm still and free, whose mean is each signal's bias: from our "
                             f"first automatic re-zero when it comes within 3 windows of the start, else from the "
                             f"start; the JSON says where it fell (default {BIAS_WINDOW_S:g})")
    parser.add_argument("--twin", metavar="RUN", help="a contact-free recording of the same motion (the same "
                        "program without pushes): its torques minus this one's are the external joint torque, a "
                        "reference without a sensor; scored per joint while it slides")
    parser.add_argument("--plot", metavar="P.png", help="forces over time: sensor, vendor, ours with 2-sigma (with "
                        "--twin also P_twin.png: joint torques against the twin)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--recover", action="store_true",
                        help="read what a damaged or unfinished bag holds (a recording killed mid-write, a truncated "
                             "copy): the messages before the damage, said on stderr; --data, --twin and the sensor "
                             "topics alike")


def _check_options(args: argparse.Namespace) -> None:
    """Refuse an option that the other options make moot, and outputs that cannot be written: before the replay."""
    from idyn_ros.commands import writable_output
    from idyn_ros.control.wrench_trust import TrustSettings
    from idyn_ros.errors import ParameterError

    if args.point_moment is not None and args.contact_model != "point":
        raise ParameterError(f"--point-moment applies to a point contact; add --contact-model point, or drop "
                             f"--point-moment (--contact-model {args.contact_model} estimates any flange moment)")
    if args.point_moment is None:
        args.point_moment = TrustSettings().point_moment_nm
    if args.ft_sign is not None and not args.ft_topic:
        raise ParameterError("--ft-sign is the sign of the F/T sensor of --ft-topic; add --ft-topic, or drop --ft-sign")
    if args.ft_sign is None:
        args.ft_sign = 1.0
    inputs = [args.model, args.data, *([args.twin] if args.twin else [])]
    writable_output(args.output, "-o", inputs)
    if args.plot:
        writable_output(args.plot, "--plot", inputs)
        if args.twin:
            writable_output(str(_twin_png(args.plot)), "--plot", inputs)


def _twin_png(plot: str) -> Path:
    """P_twin.png next to --plot P.png."""
    return Path(plot).with_name(Path(plot).stem + "_twin.png")


def run(args: argparse.Namespace) -> int:
    from idyn_ros.commands.train import one_line_warnings

    with one_line_warnings("wrench"):  # a recovered bag, a resampled recording: one line each
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from idyn_ros.control.wrench_trust import TrustSettings
    from idyn_ros.errors import ParameterError
    from idyn_ros.experiments import wrench_replay as wr
    from idyn_ros.models.artifact import read_metadata
    from idyn_ros.parameters import WrenchObserverParams

    _check_options(args)
    robot = wr.robot_for(read_metadata(args.model), args.robot)  # a damaged or foreign file stops here, said once
    try:  # checked as the node checks its parameters, refused in the words of this command
        node = WrenchObserverParams().replace(robot.n, observer_gain=args.observer_gain,
                                              contact_model=args.contact_model, point_moment_nm=args.point_moment,
                                              auto_rezero=not args.no_auto_rezero,
                                              stiction_band=not args.no_stiction_band)
    except ParameterError as exc:
        message = str(exc).removeprefix("WrenchObserverParams: ")
        for param, flag in FLAGS.items():
            message = message.replace(param, flag)
        raise ParameterError(message) from None
    settings = TrustSettings.from_params(node)
    rep = wr.replay(args.model, args.data, robot, args.rate, args.effort_unit, settings, node.observer_gain,
                    primary=args.primary, topic=args.topic, recover=args.recover)
    vendor_topic = wr.VENDOR_TOPIC if args.vendor_topic is None else args.vendor_topic or None
    summary, arrays = wr.score(rep, args.data, args.ft_topic, vendor_topic, args.ft_sign, args.vendor_sign,
                               args.bias_window, robot, vendor_required=args.vendor_topic is not None,
                               recover=args.recover)
    reference = None
    if args.twin:
        summary["twin"], reference = wr.score_twin(rep, args.twin, robot, arrays.get("vendor"), args.topic,
                                                   args.bias_window, recover=args.recover)
        arrays["tau_ext_twin_reference"] = reference
    summary["notes"] = rep.notes
    path = rep.save(args.output, arrays)
    summary["output"] = str(path)
    if args.plot:
        summary["plot"] = str(wr.plot(rep, summary, arrays, args.plot, bias_window_s=args.bias_window))
        if reference is not None:
            twin_png = _twin_png(args.plot)
            summary["plot_twin"] = str(wr.plot_twin(rep, summary["twin"], reference, robot.joint_names, twin_png))
    if args.json:
        print(json.dumps(summary, indent=2, default=float))
    else:
        _print(summary)
    return 0


def _print(s: dict) -> None:
    out = sys.stdout
    for note in s["notes"]:
        print(f"note: {note}", file=out)
    ours = s["ours"]
    print(f"ours: |f| RMS {ours['force_rms_n']:.2f} N after the bias window, contact {ours['contact_fraction']:.0%} "
          f"of the time, {ours['rezeros']} re-zero(s), min rank {ours['min_rank']}", file=out)
    for who in ("ours", "direct_residual", "vendor"):
        v = s.get(who, {}).get("vs_sensor")
        if v:
            r, c = v["rmse_n"], v["corr"]
            print(f"{who:>15} vs sensor: RMSE x {r['x']:.2f} y {r['y']:.2f} z {r['z']:.2f} N (mean "
                  f"{v['rmse_mean_n']:.2f}); corr x {c['x']:.2f} y {c['y']:.2f} z {c['z']:.2f}", file=out)
    if "vendor" in s and "vs_sensor" not in s["vendor"]:
        print(f"vendor: |f| RMS {s['vendor']['force_rms_n']:.2f} N after the bias window", file=out)
    if "rmse_ratio_ours_to_vendor" in s:
        print(f"RMSE ours / vendor: {s['rmse_ratio_ours_to_vendor']:.2f}", file=out)
    if "hidden_by_friction" in s:
        h = s["hidden_by_friction"]
        f = h["floor_rmse_n"]
        ratio = f" = {h['floor_ratio_to_vendor']:.2f}x the vendor's" if "floor_ratio_to_vendor" in h else ""
        print(f"static friction: on {h['share_of_samples']:.0%} of the samples zero force explains every joint's "
              f"current; an estimate that stays quiet there errs by at least x {f['x']:.2f} y {f['y']:.2f} "
              f"z {f['z']:.2f} N RMSE (mean {h['floor_rmse_mean_n']:.2f}{ratio})", file=out)
        if "sensor_within_hidden_bound" in h:
            m = h["hidden_bound_median_n"]
            print(f"  there the sensor stayed within the force the band can hide (OUT.npz hidden, median "
                  f"x {m['x']:.1f} y {m['y']:.1f} z {m['z']:.1f} N) on {h['sensor_within_hidden_bound']:.0%} of the "
                  f"samples", file=out)
    if "twin" in s:
        tw = s["twin"]
        print(f"twin {Path(tw['twin']).name}: shifted {tw['shift_s']:+.3f} s, positions {tw['q_rms_rad']:.4f} rad RMS "
              f"apart; external joint torque RMSE while each joint slides [Nm]:", file=out)
        for name, pj in tw["per_joint"].items():
            ur = f", vendor {pj['vendor_rmse_nm']:.2f}" if "vendor_rmse_nm" in pj else ""
            print(f"  {name:>20}: ours {pj['ours_rmse_nm']:.2f}{ur}, zero {pj['zero_rmse_nm']:.2f} (corr ours "
                  f"{pj['ours_corr']:.2f}, {pj['samples']} samples)", file=out)
        ur = f", vendor {tw['vendor_rmse_mean_nm']:.2f}" if "vendor_rmse_mean_nm" in tw else ""
        print(f"  {'mean':>20}: ours {tw['ours_rmse_mean_nm']:.2f}{ur}, zero {tw['zero_rmse_mean_nm']:.2f} (the "
              f"twin's own run-to-run variation is in every one of them)", file=out)
    if "warning" in s:
        print(f"warning: {s['warning']}", file=out)
    plots = " and ".join(s[k] for k in ("plot", "plot_twin") if k in s)
    print(f"wrote {s['output']}" + (f" and {plots}" if plots else ""), file=out)
