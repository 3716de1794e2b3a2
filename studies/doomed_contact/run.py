"""DOOMED against a sustained push: does the arm still yield as its gains say, and what does holding learning during
contact do? See README.md.

    python studies/doomed_contact/run.py [--robot panda] [--push 15] [--work DIR]
    python studies/doomed_contact/run.py --robot panda --poses 6 --work DIR   # the pose sweep + the payload check

Hold a pose at medium gains on the true plant with the identified RBD + friction model of the benchmarks (trained
and cached under --work like `idyn bench`), push at the flange along base x for 4 s, release, hold 4 s more. The
controller, DOOMED (``DoomedAdapter``, the doomed node's parameters) and the wrench observer with its trust stage
(the wrench_observer node's parameters) are the objects the nodes run. Variants: DOOMED off, DOOMED as the node runs
it, and DOOMED held (learning frozen, offset kept) while the trust stage flags contact, optionally not re-held for a
refractory time after a release. Writes results/<robot>.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np

SETTLE_S, BEFORE_S, PUSH_S, AFTER_S = 0.5, 4.0, 4.0, 4.0
HERE = Path(__file__).resolve().parent


#: Decided before the pose sweep's first run: the hold on contact is worth a product option if, on every arm, the
#: median over the poses of held / off pose error in the push's last 0.5 s is at least 0.5 (the yield mostly kept)
#: and, at 3-4 s after the release, held is within DOOMED's error + 0.05 deg on at least 80 % of the poses; it is
#: worth a default only if, in addition, the trust stage flags contact on under 5 % of the payload task's samples
#: (an unmodelled payload is what DOOMED is for; a hold while it reads as contact would stop that).
HOLD_RULE = {"yield_ratio_median_min": 0.5, "release_margin_deg": 0.05, "release_share_min": 0.8,
             "payload_contact_max": 0.05}


def poses(robot: str, count: int) -> list[np.ndarray]:
    """The wrench benchmark's push pose and the first ``count`` - 1 random poses as well conditioned."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.tracking import setpoints
    from idyn_ros.experiments.wrench_eval import MIN_SINGULAR_VALUE, push_pose, smallest_singular_value

    rm = RobotModel.from_robot(robot)
    out = [push_pose(robot, rm)]
    for q in setpoints(np.asarray(rm.lower), np.asarray(rm.upper), 200, seed=21):
        if len(out) >= count:
            break
        if smallest_singular_value(rm, q) >= MIN_SINGULAR_VALUE:
            out.append(q)
    return out


def loop_objects(robot: str, rm, plant, model_path: Path, doomed: bool) -> tuple:
    """(controller at medium gains, DoomedAdapter or None, WrenchObserver, TrustedWrench) as the nodes build them."""
    from idyn_ros.control.doomed import Doomed, DoomedAdapter, config_from_params
    from idyn_ros.control.wrench_trust import TrustedWrench, TrustSettings
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.experiments.wrench_eval import _observer
    from idyn_ros.parameters import load
    from idyn_ros.sim.loop import controller_for

    controller = controller_for(robot, rm, "medium", make_feedforward(rm, "model", model_path))
    adapter = None
    if doomed:
        dp = load("doomed", robot, n=rm.n)
        adapter = DoomedAdapter(Doomed(plant.n, config_from_params(dp, rm.effort_limit)), controller.feedback_model,
                                dp.inertia_scaled)
    observer = _observer(rm, model_path)
    trust = TrustedWrench.from_model(observer.rbd, observer.model,
                                     TrustSettings.from_params(load("wrench_observer", robot, n=rm.n)))
    return controller, adapter, observer, trust


def payload_contact(robot: str, model_path: Path) -> dict:
    """Share of samples the trust stage flags contact on while DOOMED adapts to the sweep's unmodelled payload
    (``doomed_sweep``'s task and payload, this model as the feedforward and the observer's)."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.doomed_sweep import DEFAULT_PAYLOAD, _task
    from idyn_ros.sim import Payload, Plant
    from idyn_ros.sim.loop import run_episode

    rm = RobotModel.from_robot(robot)
    out = {}
    for mass in (0.0, DEFAULT_PAYLOAD["mass"]):
        plant = Plant(robot, "true")
        if mass:
            plant.set_payload(Payload(float(mass), tuple(DEFAULT_PAYLOAD["com"])))
        controller, adapter, observer, trust = loop_objects(robot, rm, plant, model_path, doomed=True)
        task = _task(rm, 3, 2.0)
        observer.warm_up(task.points[0])
        flags: list[float] = []

        def on_tick(k: int, state, _command, observer=observer, trust=trust, flags=flags) -> None:
            if observer.update(round(state.t * 1e9), state.q, state.dq, state.tau):
                flags.append(float(trust.update(round(state.t * 1e9), state.q, state.dq,
                                                observer.tau_momentum).contact))

        ep = run_episode(plant, controller, task, hold=0.5, doomed=adapter, on_tick=on_tick)
        out[f"payload_{mass:g}kg"] = {"failed": bool(ep.failed), "contact_fraction": float(np.mean(flags[500:]))}
    return out


def episode(robot: str, model_path: Path, push_n: float, variant: str, refractory_s: float = 0.0,
            q0: np.ndarray | None = None) -> dict:
    """One push at ``q0`` (default: the wrench benchmark's push pose); ``variant``: off | doomed | held."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.wrench_eval import push_pose
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import Hold, run_episode

    rm = RobotModel.from_robot(robot)
    plant = Plant(robot, "true")
    q0 = push_pose(robot, rm) if q0 is None else q0
    controller, adapter, observer, trust = loop_objects(robot, rm, plant, model_path, doomed=variant != "off")
    observer.warm_up(q0)
    total = BEFORE_S + PUSH_S + AFTER_S
    n_ticks = round((SETTLE_S + total) / plant.control_dt) + 2
    log = {k: np.zeros(n_ticks) for k in ("t", "error_deg", "offset_nm", "contact")}
    released = {"at": -1e9, "in_contact": False}

    def on_tick(k: int, state, _command) -> None:
        if k >= n_ticks:
            return
        log["t"][k] = state.t
        log["error_deg"][k] = np.degrees(np.sqrt(np.mean((state.q - q0) ** 2)))
        if observer.update(round(state.t * 1e9), state.q, state.dq, state.tau):
            contact = trust.update(round(state.t * 1e9), state.q, state.dq, observer.tau_momentum).contact
            log["contact"][k] = contact
            if variant == "held":
                if released["in_contact"] and not contact:
                    released["at"], released["in_contact"] = state.t, False
                if contact and state.t - released["at"] >= refractory_s:
                    released["in_contact"] = True
                    if not adapter.learner.frozen:
                        adapter.learner.freeze("contact")
                elif adapter.learner.frozen and adapter.learner.freeze_reason == "contact":
                    adapter.learner.unfreeze()
        if adapter is not None:
            log["offset_nm"][k] = np.linalg.norm(adapter.learner.offset)

    wrench = np.zeros(6)
    wrench[0] = push_n
    t_on = SETTLE_S + BEFORE_S
    ep = run_episode(plant, controller, Hold(q0, duration=total), hold=SETTLE_S, doomed=adapter, on_tick=on_tick,
                     events=[(t_on, lambda p: p.apply_wrench(None, wrench, PUSH_S))])
    t = log["t"] - log["t"][0]

    def mean(key: str, a: float, b: float) -> float:
        return float(log[key][(t >= a) & (t < b)].mean())

    t_off = t_on + PUSH_S
    return {
        "variant": variant, "refractory_s": refractory_s, "failed": bool(ep.failed),
        "error_deg": {"before": mean("error_deg", t_on - 0.5, t_on), "push_0.3_0.8s": mean("error_deg", t_on + 0.3,
                      t_on + 0.8), "push_last_0.5s": mean("error_deg", t_off - 0.5, t_off),
                      "release_0.5_1s": mean("error_deg", t_off + 0.5, t_off + 1.0),
                      "release_3_4s": mean("error_deg", t_off + 3.0, t_off + 4.0)},
        "offset_norm_nm": {"before": mean("offset_nm", t_on - 0.5, t_on), "push_end": mean("offset_nm", t_off - 0.5,
                           t_off), "release_3_4s": mean("offset_nm", t_off + 3.0, t_off + 4.0)},
        "contact_fraction": {"before": mean("contact", SETTLE_S + 1.0, t_on), "push": mean("contact", t_on + 0.1,
                             t_off), "after_release": mean("contact", t_off + 1.0, t_off + 4.0)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="panda")
    ap.add_argument("--push", type=float, default=15.0, help="N along base x at the flange")
    ap.add_argument("--work", type=Path, default=Path("runs"), help="data and model cache (as idyn bench)")
    ap.add_argument("--poses", type=int, default=0, help="the pose sweep at this many poses and the payload check "
                    "(writes results/<robot>_poses.json)")
    args = ap.parse_args()
    from idyn_ros.experiments.models_cache import bench_data_spec, record_dataset, split_paths, train_row

    paths = record_dataset(args.robot, args.work, bench_data_spec(False))
    train, val = split_paths(paths)
    model = train_row(args.robot, "identified_rbd_friction", train, val,
                      args.work / "models" / args.robot / "identified_rbd_friction", 4.0, 300)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if args.poses:
        sweep = []
        for i, q0 in enumerate(poses(args.robot, args.poses)):
            row = {v: episode(args.robot, model, args.push, v, 0.0, q0) for v in ("off", "doomed", "held")}
            row["pose"] = q0.round(4).tolist()
            print(i, json.dumps({v: row[v]["error_deg"] for v in ("off", "doomed", "held")}), flush=True)
            sweep.append(row)
        out = {"_provenance": {"command": f"python studies/doomed_contact/run.py --robot {args.robot} --push "
                               f"{args.push:g} --poses {args.poses}", "revision": rev},
               "rule": HOLD_RULE, "poses": sweep, "payload": payload_contact(args.robot, model)}
        print(json.dumps(out["payload"]))
        (HERE / "results" / f"{args.robot}_poses.json").write_text(json.dumps(out, indent=1) + "\n")
        return
    runs = [episode(args.robot, model, args.push, v, r) for v, r in
            (("off", 0.0), ("doomed", 0.0), ("held", 0.0), ("held", 1.0))]
    for r in runs:
        print(json.dumps(r))
    out = {"_provenance": {"command": f"python studies/doomed_contact/run.py --robot {args.robot} --push {args.push:g}",
                           "revision": rev, "model": "identified_rbd_friction (bench data spec)",
                           "gains": "medium", "push_n": args.push, "push_s": PUSH_S}, "runs": runs}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / f"{args.robot}.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
