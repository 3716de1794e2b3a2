"""Train an inverse-dynamics model and export it as one ONNX artifact.

Writes DIR/model.onnx (RBD + friction + residual, metadata and checksum inside), DIR/metrics.json (per-joint nMSE,
RMSE [Nm] and min-max NMSE on the train/val/test recordings, the losses per epoch), with --plot a figure of them
(DIR/training.png unless named), DIR/model.pt (re-exportable torch state) and, for a
single learned kind (not auto or a GP), DIR/checkpoint.pt (per epoch; --resume continues from it), each written
atomically. --resume refuses a checkpoint of another model; one trained on other --data/--val only with
--resume-on-new-data (fine-tuning). A run that exports removes a checkpoint.pt, model.pt or gp.pt an earlier run left
in DIR (they are not of the new model); a run that fails removes DIR again if it created it and left it empty. A
warning says when the data are few for the model (fewer torque values than fitted parameters), or unnamed (taken by
joint position); unnamed data outside the robot's joint limits are refused. Models with an RBD part evaluate friction
and residual with the velocity held to the training data's largest |dq| per joint (fitted terms do not extrapolate):
the validation, test and auto scores printed here, the exported graph and the controller all hold it the same way
(unheld, a residual fitted on slow data ran a joint into its limit in closed loop: studies/velocity_hold). A --val or
--test recording that runs a joint more than 10 % faster than the training data gets a warning (metrics.json
"speed_coverage"): record training data at the speeds the robot will run.

Motor currents as effort (UR arms; the file says so, or --effort-kind current): per-joint current -> torque
gains are identified jointly with the rigid-body and friction parameters, the scale fixed by the nominal
model's gravity (idyn_ros.models.current_gains), or taken from --torque-constants. The model predicts joint
torque in Nm, the artifact carries the gains (metadata "effort"), and metrics.json the RMSE in A and Nm.

Model kinds:
  auto          (default) fits the physics candidates (SDP RBD + friction + armature with the geometric prior and
                with the ridge, the URDF + friction) and the learned residuals on the best of them (hybrid-j
                2S/E2E, hybrid 2S/E2E, hybrid-r E2E; hybrid-j also on each other physics candidate), scores each
                on the validation recordings and exports the best; a learned one only if it beats physics by 2 %.
                The hybrid-j 2S
                fits on the physics candidates compete as one model, their average (it carried better to unseen
                runs than any single one on real KUKA and UR5 data). --max-minutes bounds the selection;
                without --val the refit (below) then repeats the chosen fit on 25 % more data for at most the
                epochs it ran (on seven recordings it added 0-14 s to selections of 10-184 s);
                metrics.json["candidates"] lists them all.
  rbd           rigid-body dynamics only (nominal URDF with --id-method nominal, else identified)
  rbd-friction  RBD + friction, identified by least squares / SDP (--id-method, --friction)
  hybrid        RBD + friction + LSTM residual (Reuss et al. 2022); --mode e2e trains all parts jointly
                (DiffBary inertials from the nominal URDF), --mode 2s freezes an SDP identification first
  hybrid-r      hybrid whose LSTM also sees tau_RBD and the rotational displacement r (Callar 2021)
  hybrid-j      hybrid with one small MLP per joint that sees only that joint's q, dq, ddq, tau_RBD and r:
                the structure of gear friction, ripple and hysteresis; generalises to other trajectories
  mlp-hybrid    RBD + friction (SDP) + stateless MLP residual, two-stage
  lstm          black-box LSTM (no physics)
  delan         Deep Lagrangian Network + friction (closed-form derivatives, exported like the others)
  delan-lstm    DeLaN first, then a residual LSTM on [q, dq, ddq, tau_DeLaN] with it frozen (Doenges 2025)
  lip-gp        Gaussian process with the Lagrangian-inspired polynomial kernel (Giacomuzzo et al.);
                se-gp, gip-gp, lse-gp are its baselines (--max-samples subsamples the training data).
                With --val the noise start (std/10 or /1000) is chosen on it; per-joint noise gets a floor
                of 1 % of std(tau) (real sensors); --gp-noise shared (simulation) has none, and lip-gp
                starts the shared noise from the largest and from the smallest joint (twice the fit
                time) and keeps the better fit (marginal likelihood; val nMSE with --val). Writes
                DIR/model.onnx (exact fast posterior mean), DIR/metrics.json, DIR/gp.pt. A GP whose held-out
                mean nMSE exceeds 100 % (worse than predicting the mean torque) is refused, not exported.

Sample rate: a model has one, the rate it must later run at (the runtime refuses another for a model with state from
tick to tick: an LSTM, the r feature; physics-only kinds run at any rate). It is --rate, else the
rate most of the training time was recorded at; every --data/--val/--test recording at another rate or with
irregular stamps is resampled onto that grid (linear interpolation of its samples), one line each.

Validation: --val recordings (another trajectory) are used for early stopping, the residual gate (each joint's
residual scaled by a factor in [0, 1] fitted on validation, so the hybrid never loses to its own physics there)
and auto's selection. Without --val, every kind that learns (all but rbd, rbd-friction) holds out the last 20 %
of the training data instead and says so; auto then fits the model it chose again on all of the training data,
tail included (the same configuration, a residual for the epochs its selection fit needed, its gate kept), so the
model you get learns from every recording you gave, as rbd-friction's does; metrics.json "val" and the uncertainty
stay those of the fit it was chosen as, scored on the tail it had not seen (--no-refit exports that fit instead).
Validation should be a different trajectory: the share of validation
states already in the training data is measured (metrics.json "validation_overlap"); above 90 % (a second run of the
same trajectory) a warning says its scores measure noise before training starts, names the training recordings the
others hardly cover (each could validate instead; metrics.json "validation_overlap" -> "could_validate"), and
auto lets only the per-joint residual (hybrid-j) compete, the one learned kind that carried to unseen trajectories
in our tests. Such a validation does not choose the physics either (a weaker prior always fits the training
states better): the residuals then sit on the default prior's physics, and the other physics candidates enter only
the average.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from idyn_ros.commands import non_negative, positive
from idyn_ros.commands.identify import DEFAULT_FRICTION, add_prior_arguments

HELP = ("train a model (auto, rbd*, hybrid, hybrid-r, hybrid-j, mlp-hybrid, lstm, delan[-lstm], *-gp) "
        "-> DIR/model.onnx")
NN_KINDS = ("auto", "rbd", "rbd-friction", "hybrid", "hybrid-r", "hybrid-j", "mlp-hybrid", "lstm", "delan",
            "delan-lstm")
PHYSICS_KINDS = ("rbd", "rbd-friction")  # nothing learned by gradient: all data identify, no tail is held out
GP_KINDS = ("lip-gp", "se-gp", "gip-gp", "lse-gp")  # == idyn_ros.models.gp.GP_KINDS (test checks)

EPILOG = """examples:
  idyn train --robot kuka_lwr4.urdf --data measurements_1.npz --val measurements_2.npz \\
      --test measurements_3.npz --out runs/kuka_auto --max-minutes 10     # --model auto: the best on validation
  idyn train --robot kuka_lwr4.urdf --data measurements_1.npz --val measurements_2.npz \\
      --test measurements_3.npz --model hybrid --mode e2e --out runs/kuka_hybrid --max-minutes 5
  idyn train --robot panda --data bags/excite_* --model rbd-friction --id-method sdp --out runs/panda_rbd
  idyn train ... --out runs/x --resume          # continue an interrupted run from runs/x/checkpoint.pt
  idyn train --robot ur5 --data ur5_ft/Movement_No6_Acc_slow_Verify_Model ur5_ft/Movement_No2 \\
      --val ur5_ft/Movement_No5_Acc_slow_no_disturbance --model rbd-friction --out runs/ur5   # currents
  idyn train --robot kuka_lwr4.urdf --data measurements_1.npz --val measurements_2.npz \\
      --test measurements_3.npz --model lip-gp --max-samples 500 --out runs/kuka_lip   # ~10 min on 2 cores
"""


LSTM_KINDS = ("auto", "hybrid", "hybrid-r", "lstm", "delan-lstm")  # an LSTM residual (auto: hybrid and hybrid-r)
RBD_KINDS = ("auto", "rbd", "rbd-friction", "hybrid", "hybrid-r", "hybrid-j", "mlp-hybrid")  # a rigid-body part
FRICTION_KINDS = ("auto", "rbd-friction", "hybrid", "hybrid-r", "hybrid-j", "mlp-hybrid", "delan", "delan-lstm")
LEARNED_KINDS = tuple(k for k in NN_KINDS if k not in PHYSICS_KINDS)  # trained by gradient steps
#: option -> (dest, default, the kinds it applies to, what it sets): an option given for another kind is refused
#: (it would be ignored); unset, it takes the default.
KIND_OPTIONS: dict[str, tuple[str, object, tuple[str, ...], str]] = {
    "--mode": ("mode", "e2e", ("hybrid", "hybrid-r", "hybrid-j"),
               "training a hybrid's physics part with its residual or before it (auto fits both, mlp-hybrid is always "
               "before it)"),
    "--id-method": ("id_method", "sdp", RBD_KINDS, "the identification of a rigid-body part"),
    "--friction": ("friction", DEFAULT_FRICTION, FRICTION_KINDS, "a friction model"),
    "--epochs": ("epochs", 300, LEARNED_KINDS, "gradient training"),
    "--patience": ("patience", 30, LEARNED_KINDS, "gradient training"),
    "--lr": ("lr", None, LEARNED_KINDS, "gradient training"),
    "--window": ("window", 100, LEARNED_KINDS, "gradient training"),
    "--stride": ("stride", None, LEARNED_KINDS, "gradient training"),
    "--hidden": ("hidden", 50, LSTM_KINDS, "an LSTM residual"),
    "--max-samples": ("max_samples", 500, GP_KINDS, "a Gaussian process"),
    "--gp-noise": ("gp_noise", "per-joint", GP_KINDS, "a Gaussian process"),
    "--gp-refine": ("gp_refine", 0, GP_KINDS, "a Gaussian process"),
    "--gp-iterations": ("gp_iterations", None, GP_KINDS, "a Gaussian process"),  # None: planned from the budget
    "--plot": ("plot", None, NN_KINDS, "the training figure (a GP's fit: `idyn evaluate --plot`)"),
}


#: The largest random seed: numpy's legacy seeding (``np.random.seed``) takes 32 bits.
SEED_MAX = 2**32 - 1


@contextlib.contextmanager
def one_line_warnings(command: str) -> Iterator[None]:
    """Show warnings as ``idyn COMMAND: warning: ...`` lines on stderr, as they happen, each text once (a damaged bag
    read for its joint states and again for its wrench topics is one warning)."""
    shown: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if str(message) not in shown:
            shown.add(str(message))
            print(f"idyn {command}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        yield


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--robot", required=True, help="robot preset (panda, iiwa14, ur5) or URDF path")
    parser.add_argument("--data", nargs="+", required=True, metavar="F",
                        help="training recordings (rosbag2 folder, .db3, .mcap, .npz, .csv)")
    parser.add_argument("--val", nargs="+", default=[], metavar="F",
                        help="validation recordings (another trajectory) for early stopping, the residual gate and "
                             "auto's choice (default for the kinds that learn, all but rbd and rbd-friction: the last "
                             "20 %% of the training data is held out)")
    parser.add_argument("--no-refit", action="store_true",
                        help="auto without --val: export the fit chosen on the held-out tail, not its refit on all "
                             "the training data (default: refit)")
    parser.add_argument("--test", nargs="+", default=[], metavar="F",
                        help="test recordings: metrics go to metrics.json and the artifact metadata")
    parser.add_argument("--model", default="auto", metavar="KIND",
                        choices=[*NN_KINDS, *GP_KINDS],
                        help="model kind (see above; default: auto)")
    parser.add_argument("-o", "--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--mode", choices=["e2e", "2s"], default=None,
                        help="hybrid training: end to end or two-stage (default: e2e; auto fits both)")
    parser.add_argument("--id-method", default=None,
                        choices=["nominal", "ols", "wls", "sdp", "diffbary", "logchol"],
                        help="identification of the RBD part for rbd*, mlp-hybrid and 2s models (default: sdp; ols and "
                             "wls are unconstrained: a fit that makes a body physically inconsistent is not exported)")
    parser.add_argument("--allow-inconsistent", action="store_true",
                        help="export a fit with physically inconsistent bodies anyway (analysis only: its M(q) can be "
                             "indefinite, so a controller must not run it)")
    parser.add_argument("--friction", default=None,
                        help="friction kinds, comma separated or 'none' (coulomb = Reuss Eq. 13 with "
                             "dq_lim 0.02 rad/s; also viscous, asymmetric, stribeck, sigmoid, offset; default: "
                             f"{DEFAULT_FRICTION})")
    add_prior_arguments(parser)
    parser.add_argument("--seed", type=non_negative(int, SEED_MAX), default=0,
                        help=f"random seed, 0..{SEED_MAX} (default: 0)")
    parser.add_argument("--epochs", type=positive(int), default=None, help="maximum epochs (default: 300)")
    parser.add_argument("--max-minutes", type=positive(float), default=None, metavar="M",
                        help="wall-clock budget in minutes, > 0, for the fitting alone: one kind's epochs (checked "
                             "after each; delan-lstm: at most half for DeLaN, what it left for the LSTM, all of it "
                             "for the LSTM when --resume continues that), auto's candidate fits, a GP's whole fit "
                             "(every noise start with its posterior and held-out selection, then --gp-refine). Not "
                             "counted: loading the data, one kind's physics identification, auto's refit, scoring "
                             "and the export (default: none; GP kinds: 10). No effect on rbd and rbd-friction, "
                             "which have no epochs, nor with --gp-iterations: accepted with a note, for scripts that "
                             "pass it to every kind. GP kinds: a timed probe plans the L-BFGS iterations per noise "
                             "start before the fit (at most 50; printed), so the count, and with it the model, "
                             "depends on the machine's speed when the budget is what limits it; --gp-iterations "
                             "pins it")
    parser.add_argument("--patience", type=positive(int), default=None,
                        help="early-stopping patience in epochs (default: 30)")
    parser.add_argument("--lr", type=positive(float), default=None,
                        help="Adam learning rate (default: 4e-3; DeLaN: at most 1e-3)")
    parser.add_argument("--window", type=positive(int), default=None,
                        help="training window length in samples (default: 100)")
    parser.add_argument("--stride", type=positive(int), default=None,
                        help="window stride in samples (default: = window, non-overlapping)")
    parser.add_argument("--hidden", type=positive(int), default=None, help="LSTM hidden size (default: 50)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from DIR/checkpoint.pt (same model options and data; none: from scratch)")
    parser.add_argument("--resume-on-new-data", action="store_true",
                        help="with --resume: accept a checkpoint trained on other --data/--val and fine-tune it")
    parser.add_argument("--max-samples", type=positive(int), default=None,
                        help="GP kinds: training samples kept (seeded random subset; default: 500)")
    parser.add_argument("--gp-noise", choices=("per-joint", "shared"), default=None,
                        help="GP kinds: one noise std per joint (default; real sensors differ per joint) or one "
                             "shared std (i.i.d. noise, e.g. simulation: keeps a joint whose torque is mostly "
                             "noise from interpolating it)")
    parser.add_argument("--gp-iterations", type=positive(int), default=None, metavar="N",
                        help="GP kinds: L-BFGS iterations per noise start, fixed: the same seed and N give the same "
                             "model on any machine, however long it takes (default: 50, or fewer if --max-minutes "
                             "plans fewer; the run prints the count it used)")
    parser.add_argument("--gp-refine", type=non_negative(int), default=None, metavar="N",
                        help="GP kinds: after the noise starts are compared (--gp-iterations each), run N "
                             "more on the kept fit only (default: 0). Slow joints gain most: on the 7-DoF "
                             "Panda, joint 7 needs ~150 iterations (studies/gp_lip/README.md); each iteration "
                             "costs about as much as one of the first 50")
    parser.add_argument("--effort-kind", choices=("torque", "current"), default=None,
                        help="what the recordings' effort is (default: what each file says; torque if it says "
                             "nothing). current: motor currents [A] (UR drivers' default): per-joint gains are "
                             "identified with the physics and stored in the artifact")
    parser.add_argument("--rate", type=positive(float), default=None, metavar="HZ",
                        help="the model's sample rate, the control rate it will run at: recordings at another rate "
                             "are resampled to it (default: the rate most of the training time was recorded at)")
    parser.add_argument("--torque-constants", metavar="K1,..,Kn", default=None,
                        help="current data: use these gains [Nm/A] (robot joint order, or a robot's data: ur5) "
                             "instead of identifying them; each > 0")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--plot", nargs="?", const="", default=None, metavar="P.png",
                        help="also write a figure of the training: learning curves (auto: every learned candidate), "
                             "auto's candidates on validation, the exported model's nMSE per joint (default file: "
                             "DIR/training.png)")


def run(args: argparse.Namespace) -> int:
    with one_line_warnings("train"):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from idyn_ros.commands import output_folder
    from idyn_ros.errors import ParameterError

    if args.resume_on_new_data and not args.resume:
        raise ParameterError("--resume-on-new-data only applies with --resume")
    if args.resume and (args.model in GP_KINDS or args.model == "auto"):
        raise ParameterError(f"--resume applies to one neural model kind; {args.model} trains from scratch "
                             f"(drop --resume, or pass --model KIND)")
    if args.no_refit and (args.model != "auto" or args.val):
        raise ParameterError("--no-refit applies to auto without --val (only then is the chosen model refitted on "
                             "the held-out tail of the training data)")
    _refuse_options_of_other_kinds(args)
    if args.plot is not None:
        from idyn_ros.commands import writable_output

        args.plot = str(writable_output(args.plot or str(Path(args.out) / "training.png"), "--plot",
                                        [*args.data, *(args.val or []), *args.test]))
    with output_folder(args.out, "--out"):  # checked before any loading or training, which can take minutes
        budget = _budget_line(args)
        if budget:
            print(budget)
        return _train(args)


def _budget_line(args: argparse.Namespace) -> str | None:
    """What --max-minutes bounds for this kind and what it does not, said before the run (the help says it too); for
    rbd and rbd-friction, given, a note that it has no effect (not a budget line, which would read like a limit)."""
    minutes = args.max_minutes
    if args.model in GP_KINDS and args.gp_iterations is not None:
        return (f"idyn train: note: --max-minutes has no effect with --gp-iterations {args.gp_iterations}, which "
                f"fixes the fit's length" if minutes is not None else None)
    if args.model in GP_KINDS:
        minutes = 10.0 if minutes is None else minutes
        what = ("the whole fit (every noise start's optimisation, posterior and held-out selection"
                + (", then --gp-refine" if args.gp_refine else "") + "; a timed probe plans the L-BFGS iterations)")
        uncounted = ""
    elif minutes is None:
        return None
    elif args.model in PHYSICS_KINDS:  # accepted (scripts pass it for every kind), but said to do nothing here
        why = ("nothing is fitted (--id-method nominal: the URDF's parameters)"
               if args.model == "rbd" and args.id_method == "nominal" else
               f"it has no epochs, and no kind's physics identification (here --id-method {args.id_method}) is "
               f"bounded")
        return f"idyn train: note: --max-minutes has no effect with --model {args.model}: {why}"
    elif args.model == "auto":
        what = "the candidate fits (the physics ones always run, the learned ones share what is left)"
        uncounted = "the refit on all the training data" if not (args.val or args.no_refit) else ""
    else:
        staged = (" (at most half for DeLaN, what it left for the LSTM" + (
            "; all of it for the LSTM if --resume finds its checkpoint" if args.resume else "") + ")")
        what = "the epochs" + (staged if args.model == "delan-lstm" else "") + ", checked after each"
        uncounted = "the physics identification" if args.model in RBD_KINDS else ""
    return (f"idyn train: time budget {minutes:g} min (--max-minutes) for {what}; not counted: loading the data, "
            + (f"{uncounted}, " if uncounted else "") + "scoring and the export")


def _train(args: argparse.Namespace) -> int:
    """Load, train and export: the part of the command that can take minutes and writes --out."""
    from idyn_ros.dynamics.friction import parse_kinds
    from idyn_ros.errors import ParameterError
    from idyn_ros.models.pipeline import train_run
    from idyn_ros.models.sources import hold_out_tail, load_robot, load_split
    from idyn_ros.models.zoo import ModelConfig
    from idyn_ros.robots.drives import parse_torque_constants

    robot = load_robot(args.robot)
    if args.torque_constants is not None:  # refused before the data load, which can take a while
        parse_torque_constants(args.torque_constants, robot.n)
    train, val, test, rate = load_split(args.data, args.val, args.test, robot, args.effort_kind, args.rate,
                                        say=lambda line: print(f"idyn train: {line}"))
    kinds = parse_kinds(args.friction)
    note = ""
    refit = False
    if not val and args.model not in PHYSICS_KINDS:
        train, val, note = hold_out_tail(train)
        refit = args.model == "auto" and not args.no_refit
        if refit:
            note += "; auto then refits the model it chose on all the training data, tail included (--no-refit: not)"
        print(f"idyn train: {note}")  # information, not a warning: stdout (stderr stays for warnings and errors)
    # after the hold-out: current gains are identified on the training part only, and the tail converted with them
    effort, (train, val, test) = _currents_to_torque(args, robot, kinds, train, val, test)
    if args.model in GP_KINDS:
        if effort is not None:
            raise ParameterError(f"{args.model} takes torque data; convert the currents when importing "
                                 f"(`idyn dataset import ... --torque-constants ...`) or train an NN kind")
        if args.prior is not None or args.reg is not None:
            raise ParameterError(f"--prior and --reg set the RBD identification; {args.model} identifies none")
        return _train_gp(args, robot, train, val, test, note)
    cfg = ModelConfig(kind=args.model, mode=args.mode, id_method=args.id_method,
                      friction_kinds=kinds, seed=args.seed, epochs=args.epochs,
                      patience=args.patience, window=args.window, stride=args.stride or args.window,
                      hidden=args.hidden, reg=args.reg, id_prior=args.prior, rate_hz=rate)
    if args.lr is not None:
        cfg.lr = args.lr
    res, metrics = train_run(cfg, robot, train, val, test, args.out, args.max_minutes, args.resume,
                             progress=not args.no_progress, resume_on_new_data=args.resume_on_new_data,
                             effort=effort, validation_note=note,
                             refit=refit, allow_inconsistent=args.allow_inconsistent)
    if "candidates" in metrics:
        from idyn_ros.models.auto import format_candidates

        print(f"auto: candidates on validation (nMSE in %, 100 = no better than the mean torque; physics part = the "
              f"candidate's RBD + friction alone)\n"
              f"{format_candidates(metrics['candidates'], metrics['selected'])}")
    elif res.gate is not None:
        print(f"{args.model}: residual gate per joint (fitted on validation) "
              + " ".join(f"{g:.2f}" for g in res.gate))
    split = "test" if "test" in metrics else ("val" if "val" in metrics else "train")
    m = metrics[split]
    print(f"{metrics['kind']}: {metrics['stopped']}; {split} nMSE per joint [%] "
          + " ".join(f"{100 * v:.2f}" for v in m["nmse"]) + f" (mean {100 * m['nmse_mean']:.2f}; 100 = no better "
          "than the mean torque)"
          + ("; the same in current units and in Nm through the gains" if effort else ""))
    if effort is not None:
        print(f"{split} RMSE per joint: " + " ".join(f"{v:.3f}" for v in m["rmse_current_a"]) + " A = "
              + " ".join(f"{v:.2f}" for v in m["rmse_nm"]) + " Nm")
    print(f"wrote {args.out}/model.onnx (id {metrics.get('model_id')}) and {args.out}/metrics.json")
    if args.plot is not None:
        from idyn_ros.experiments.plots import training_summary

        validated = (f"validated on {len(val)} recording(s)" if args.val else
                     "validated on the held-out tail" if val else "no validation data")
        training_summary(metrics, robot.joint_names, Path(args.plot),
                         f"idyn train --model {args.model}: {len(train)} training recording(s), {validated}")
        print(f"wrote {args.plot}")
    _warn_if_bound_to_another_rate(Path(args.out) / "model.onnx", rate, args.robot)
    return 0


def _warn_if_bound_to_another_rate(model: Path, rate: float, robot: str) -> None:
    """A model with state from tick to tick runs at its data's rate only: say where the nodes run at that rate (the
    simulators at 1 kHz, a preset's hardware at its driver's rate), or warn that nowhere does unless told, here rather
    than first when the controller refuses it."""
    from idyn_ros.models.artifact import read_metadata, same_rate
    from idyn_ros.parameters import CommonParams

    control = CommonParams.__dataclass_fields__["rate_hz"].default
    if not read_metadata(model).get("state") or same_rate(control, rate):
        return
    where = {control: "in the simulators and mode mock"}
    try:
        from idyn_ros.robots import get_robot

        spec = get_robot(robot)
    except KeyError:  # a URDF, not a preset: only the nodes' default is known
        spec = None
    if spec is not None:  # the rates the nodes run at on this arm's hardware (graph.GraphSettings.hardware_rate)
        observer = spec.hardware_rate_hz(torque_control=False) or control
        torque = spec.hardware_rate_hz(torque_control=True) or control
        if not spec.hardware_torque_unsupported:
            where.setdefault(torque, "")
            where[torque] = " and ".join(filter(None, [where[torque], "in mode hardware"]))
        if not same_rate(observer, torque) or spec.hardware_torque_unsupported:
            where.setdefault(observer, "")
            where[observer] = " and ".join(filter(None, [where[observer], "in mode hardware with observer_only"]))
    runs = [f"{how} ({r:g} Hz)" for r, how in where.items() if same_rate(r, rate)]
    if runs:
        print(f"idyn train: {model} carries state from tick to tick (an LSTM or the r feature): it runs at "
              f"{rate:.4g} Hz only, where the nodes run at that rate: {'; '.join(runs)}")
        return
    known = "; ".join(f"{r:g} Hz {how}" for r, how in where.items())
    warnings.warn(f"{model} carries state from tick to tick (an LSTM or the r feature), so it runs at "
                  f"{rate:.4g} Hz only, the rate of its data; the nodes run at rate_hz {known} unless told: set "
                  f"rate_hz {rate:.4g} where the arm publishes at that rate, record at the rate the controller runs "
                  "at, or train --model rbd-friction (no state: any rate)", stacklevel=1)


def _refuse_options_of_other_kinds(args: argparse.Namespace) -> None:
    """Refuse the options of ``KIND_OPTIONS`` given for a kind that would ignore them; fill in the unset ones."""
    from idyn_ros.errors import ParameterError

    moot: dict[tuple[tuple[str, ...], str], list[str]] = {}  # (kinds, what) -> the flags given
    for flag, (dest, _, kinds, what) in KIND_OPTIONS.items():
        if getattr(args, dest) is not None and args.model not in kinds \
                and not (flag == "--mode" and args.model == "mlp-hybrid" and args.mode == "2s"):
            moot.setdefault((kinds, what), []).append(flag)
    if moot:
        flags = [flag for group in moot.values() for flag in group]
        them = "it" if len(flags) == 1 else "them"
        why = "; ".join(f"{', '.join(group)} {'is' if len(group) == 1 else 'are'} for {what}: {', '.join(kinds)}"
                        for (kinds, what), group in moot.items())
        raise ParameterError(f"--model {args.model} does not use {', '.join(flags)} ({why}); drop {them}, or pick a "
                             f"kind that uses {them}")
    for dest, default, _, _ in KIND_OPTIONS.values():
        if getattr(args, dest) is None:
            setattr(args, dest, default)


def _currents_to_torque(args: argparse.Namespace, robot, kinds: tuple[str, ...], train: list, val: list,
                        test: list) -> tuple[dict | None, tuple[list, list, list]]:
    """``models.current_gains.currents_to_torque`` with this command's options, and the line that reports it."""
    from idyn_ros.models.current_gains import currents_to_torque

    if args.torque_constants is None and all(r.effort_kind == "current" for r in train):  # seconds on many runs
        print(f"idyn train: identifying the current -> torque gains with the rigid-body and friction parameters on "
              f"{sum(r.n_samples for r in train)} samples ...", flush=True)
    effort, found, recs = currents_to_torque(robot, train, val, test, kinds, args.torque_constants, args.seed)
    if found is not None:
        held = [j for j, free in zip(robot.joint_names, found.identified, strict=True) if not free]
        print("current -> torque gains [Nm/A]: " + ", ".join(f"{j} {k:.3f}" for j, k in zip(
            robot.joint_names, found.values, strict=True)) + f"; scale fixed by the nominal gravity "
              f"(x{found.scale:.3f}); " + (f"held at the prior ratio ({found.prior_source}): {', '.join(held)}"
                                           if held else "all identified"))
    return effort, recs


def _gp_time_line(kind: str, metrics: dict) -> str:
    """Where a GP run's time went, and the L-BFGS counts that reproduce its model (--gp-iterations, --gp-refine)."""
    plan, fit = metrics.get("fit_plan"), metrics["train_seconds"]
    refine = metrics["refine_iterations"]
    line = (f"{kind}: fit {fit:.1f} s" + (f" (planned {plan['predicted_seconds']:.0f} s of "
                                           f"{plan['budget_seconds']:.0f} s)" if plan else "")
            + f": {metrics['noise_starts_fitted']} noise start(s) x {metrics['iterations']} L-BFGS iterations"
            + (f", then {refine} for --gp-refine" if refine else ""))
    if plan is not None:
        line += (f"; --gp-iterations {metrics['iterations']}" + (f" --gp-refine {refine}" if refine else "")
                 + " gives this model on any machine")
    return line + (f"; not in the budget: scoring {metrics['scoring_seconds']:.1f} s, export "
                   f"{metrics['export_seconds']:.1f} s")


def _train_gp(args: argparse.Namespace, robot, train: list, val: list, test: list, note: str = "") -> int:
    from idyn_ros.models.gp import train_gp
    from idyn_ros.models.pipeline import remove_stale_run_files, warn_validation_overlap

    metrics = train_gp(args.model, robot, train, val, args.out, seed=args.seed, max_samples=args.max_samples,
                       max_minutes=args.max_minutes if args.max_minutes is not None else 10.0,
                       iterations=args.gp_iterations, say=print,
                       shared_noise=args.gp_noise == "shared", test_datasets=test,
                       refine_iterations=args.gp_refine, validation_note=note,
                       validation_overlap=warn_validation_overlap(train, val))
    remove_stale_run_files(args.out, None, "gp.pt")  # a GP has no checkpoint: one in --out is an earlier run's
    print(_gp_time_line(args.model, metrics))
    for split in ("val", "test"):
        if f"{split}_nmse_mean_percent" in metrics:
            print(f"{args.model}: {split} nMSE per joint [%] "
                  + " ".join(f"{v:.2f}" for v in metrics[f"{split}_nmse_percent"])
                  + f" (mean {metrics[f'{split}_nmse_mean_percent']:.2f})")
    if metrics.get("onnx"):
        print(f"wrote {args.out}/model.onnx and {args.out}/metrics.json")
    else:
        print(f"wrote {args.out}/metrics.json and {args.out}/gp.pt, no model.onnx: {metrics.get('onnx_error')}")
    return 0
