"""docs/benchmarks.md from bench/results/*.json: one section per result file with its key numbers.

Why generated: the numbers a reader sees must be the committed results, and a test compares the document
with this module's output, so it cannot drift from them. Run ``python -m idyn_ros.bench.report`` (or
``idyn bench --report``) in a source checkout after a benchmark run; ``--check`` only compares.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from idyn_ros.bench import TOPICS
from idyn_ros.data.atomic import atomic_write_text
from idyn_ros.errors import ParameterError
from idyn_ros.experiments.tracking import NOT_TRAINED

Lines = list[str]

# The paper's 6-DoF synthetic table (Giacomuzzo et al., T-RO): mean nMSE over joints [%], and the LIP's
# kinetic / potential energy nMSE [%], for comparison.
PAPER_SYNTHETIC_6DOF = {"lip-gp": 0.81, "gip-gp": 4.89, "se-gp": 15.09, "lse-gp": 12.26}
PAPER_ENERGY_6DOF = (0.21, 0.00)
GP_NAMES = {"lip-gp": "LIP", "gip-gp": "GIP", "se-gp": "SE", "lse-gp": "LSE"}


def fmt(x: Any) -> str:
    """A number as a reader wants it: ints as is, else 3 significant digits, fixed point from 0.001 to 1e5."""
    if x is None:
        return "n/a"
    if isinstance(x, bool | str):
        return str(x)
    if isinstance(x, int):
        return str(x)
    x = float(x)
    if math.isnan(x):
        return "n/a"
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 1e5 or ax < 1e-3:
        return f"{x:.2e}"
    if ax >= 100:
        return f"{x:.0f}"
    return f"{x:#.3g}"


def code(text: str) -> str:
    """``text`` as a markdown code span, also when it contains backticks."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def joints(values: Iterable[Any], scale: float = 1.0) -> str:
    return " / ".join(fmt(v * scale) for v in values)


def table(header: list[str], rows: Iterable[Iterable[Any]]) -> Lines:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def _dynamics(d: dict) -> Lines:
    rows = [[robot, r["dof"], r["base_parameters"], r["pinocchio_rnea_us_p50"], r["onnx_ort_b1_us_p50"],
             r["onnx_ort_b1_us_p99"], r["onnx_nodes"], r["torch_eager_f64_b1_us_p50"],
             r["torch_f64_max_abs_err_1000"], r["onnx_f32_max_abs_err_1000"]]
            for robot, r in d.items() if not robot.startswith("_")]
    return ["RNEA per robot; errors are the max over 1000 random states against pinocchio.", "",
            *table(["robot", "DoF", "base parameters", "pinocchio p50 [us]", "ONNX Runtime p50 [us]",
                    "ONNX Runtime p99 [us]", "ONNX nodes", "torch eager p50 [us]", "torch f64 max error [Nm]",
                    "ONNX f32 max error [Nm]"], rows)]


def _model_step(d: dict) -> Lines:
    return ["One runtime step of the 7-DoF hybrid (ModelRuntime): RBD in pinocchio + friction/LSTM in ONNX "
            "Runtime (the default), or the whole graph in ONNX Runtime.", "",
            *table(["RBD backend", "p50 [us]", "p99 [us]"],
                   [[name, d[name]["p50_us"], d[name]["p99_us"]] for name in ("pinocchio", "onnx") if name in d]),
            *([] if "auto_on_kuka" not in d else
              ["", f"`idyn train`'s default model on the real KUKA data ({d['auto_on_kuka']['selected']}):", "",
               *table(["RBD backend", "p50 [us]", "p99 [us]"],
                      [[name, d["auto_on_kuka"][name]["p50_us"], d["auto_on_kuka"][name]["p99_us"]]
                       for name in ("pinocchio", "onnx")])])]


def _model_rows(rows: dict) -> Lines:
    """One line per model; a fit `idyn train` refused to export shows as refused, with why."""
    return table(["model", "test nMSE mean [%]", "worst joint [%]", "train [s]", "stopped"],
                 [[name, "refused", "", r["seconds"], r["refused"]] if "refused" in r else
                  [name, 100 * r["test_nmse_mean"], 100 * r["test_nmse_max"], r["seconds"], r["stopped"]]
                  for name, r in rows.items()])


def _models(d: dict) -> Lines:
    out: Lines = []
    if "kuka" in d:
        out += ["**Real KUKA LWR4+** (train file 1, validate 2, test 3): per-joint nMSE, mean and worst joint.", "",
                *_model_rows(d["kuka"]["rows"])]
    if "synthetic" in d:
        out += ["**Synthetic 7-DoF \"true\" robot** (same metric).", "", *_model_rows(d["synthetic"]["rows"])]
    if "training_speed" in d:
        t = d["training_speed"]
        tn = t["test_nmse"]
        out += ["**Training speed**, hybrid E2E:", "",
                *table(["samples", "epochs", "wall [s]", "s per epoch", "test nMSE hybrid [%]",
                        "its RBD + friction part [%]", "nominal RBD [%]", "stopped"],
                       [[t["n_samples"], t["epochs"], t["wall_s"], t["s_per_epoch"], 100 * tn["hybrid"]["mean"],
                         100 * tn["hybrid_physics_part"]["mean"], 100 * tn["nominal_rbd"]["mean"], t["stopped"]]])]
    if "parity" in d:
        p = d["parity"]
        out += [f"**ONNX vs torch**, {fmt(p['seconds'])} s with recurrent state ({p['steps']} steps), max |tau| "
                f"{fmt(p['max_abs_tau_nm'])} Nm:", "",
                *table(["RBD backend", "max torque difference [Nm]", "max residual difference [Nm]"],
                       [[k, p[k]["max_abs_diff_tau_nm"], p[k]["max_abs_diff_residual_nm"]]
                        for k in ("pinocchio", "onnx") if k in p])]
    return out


def _gp_synthetic(d: dict) -> Lines:
    s = d["synthetic_6dof"]
    rows = []
    for kind, m in s["models"].items():
        rows.append([GP_NAMES.get(kind, kind), m["mean_over_joints_of_median_percent"],
                     f"{PAPER_SYNTHETIC_6DOF[kind]:g}" if kind in PAPER_SYNTHETIC_6DOF else "",
                     joints(m["median_nmse_percent_per_joint"]), m["global_mse_median_nm2"], m["n_train"],
                     m["fit_seconds_median"]])
    o = s["ordering"]
    out = [f"Synthetic {s['dof']}-DoF Panda, 500 samples, {s['pairs']} train/test pair(s) (independent "
           "trajectories); nMSE = median over pairs per joint, then mean over joints.", "",
           *table(["GP", "nMSE [%]", "paper [%]", "per joint [%]", "global MSE [Nm^2]", "train samples",
                   "fit p50 [s]"], rows),
           f"Ordering {' < '.join(GP_NAMES.get(k, k) for k in o['kinds'])} holds on {o['pairs_where_it_holds']} "
           f"of {o['pairs']} pairs."]
    energy = s["models"].get("lip-gp", {}).get("energy_nmse_percent_median")
    if energy:
        out[-1] += (f" LIP energies (nMSE vs pinocchio): kinetic {fmt(energy['kinetic'])} %, potential "
                    f"{fmt(energy['potential'])} % (paper {PAPER_ENERGY_6DOF[0]:.2f} / {PAPER_ENERGY_6DOF[1]:.2f}).")
    return [*out, ""]


def _gp_latency(d: dict) -> Lines:
    lat = d["latency"]
    rows = [[f"ModelRuntime, {form}", lat[f"runtime_{form}"]["p50_us"] / 1e3, lat[f"runtime_{form}"]["p99_us"] / 1e3,
             ""] for form in ("fast", "direct")]
    rows += [[f"ONNX Runtime, {form}", lat[f"onnx_{form}"]["p50_us"] / 1e3, lat[f"onnx_{form}"]["p99_us"] / 1e3,
              lat[f"onnx_{form}"]["nodes"]] for form in ("fast", "direct")]
    return [f"LIP GP, {lat['dof']} DoF, N = {lat['n_train']}: training {fmt(lat['training_seconds'])} s "
            f"({lat['lbfgs_evaluations']} L-BFGS evaluations of the kept fit on {lat['hyper_points']} points, "
            f"{lat['torch_threads']} torch thread(s), both noise starts); one query:", "",
            *table(["path", "p50 [ms]", "p99 [ms]", "graph nodes"], rows),
            f"Fast (alpha-contracted) = direct posterior mean to {fmt(lat['fast_vs_direct_float64_max_rel'])} "
            f"(float64, relative); ONNX vs torch posterior {fmt(lat['onnx_fast']['max_rel_err_vs_torch_posterior'])}.",
            ""]


def _recorder(d: dict) -> Lines:
    rows = [[r["storage"], r["duration_s"], r["rate_hz"], r["published"], r["written"], r["lost"], r["duplicates"],
             r["bag_bytes"] / 1e6] for k, r in d.items() if not k.startswith("_")]
    return ["rosbag2 recorder at 1 kHz, publisher and recorder in separate processes.", "",
            *table(["storage", "duration [s]", "rate [Hz]", "published", "written", "lost", "duplicates",
                    "bag [MB]"], rows)]


def _sim(d: dict) -> Lines:
    rows: list[list[Any]] = []
    if "physics_step_panda_true" in d:
        p = d["physics_step_panda_true"]
        rows.append(["physics step, one 1 kHz period (Plant.step)", f"{fmt(p['p50_us'])} / {fmt(p['p99_us'])} us"])
    if "node_tick_panda_true" in d:
        p = d["node_tick_panda_true"]
        rows.append(["plant node tick (callback, no DDS)", f"{fmt(p['p50_us'])} / {fmt(p['p99_us'])} us"])
    if "lockstep_panda_inprocess" in d:
        p = d["lockstep_panda_inprocess"]
        rows.append(["lockstep, in-process command source",
                     f"{fmt(p['sim_seconds_per_wall_second'])} sim s per wall s"])
    if "lockstep_panda" in d:
        p = d["lockstep_panda"]
        rows += [["lockstep, controller over DDS", f"{fmt(p['sim_seconds_per_wall_second'])} sim s per wall s"],
                 ["lockstep DDS round trip", f"{fmt(p['round_trip_p50_us'])} / {fmt(p['round_trip_p99_us'])} us"],
                 ["lockstep plant tick / answer wait, p50",
                  f"{fmt(p['plant_tick_p50_us'])} / {fmt(p['plant_answer_wait_p50_us'])} us"]]
    if "realtime_panda" in d:
        p = d["realtime_panda"]
        rows += [["real-time factor (real-time clock mode)", fmt(p["sim_seconds_per_wall_second"])],
                 ["real-time period error", f"{fmt(p['plant_period_error_p50_us'])} / "
                                            f"{fmt(p['plant_period_error_p99_us'])} us"],
                 ["real-time overruns / watchdog trips", f"{p['overruns']} / {p['watchdog_trips']}"],
                 ["real-time command latency", f"{fmt(p['command_latency_p50_us'])} / "
                                               f"{fmt(p['command_latency_p99_us'])} us"]]
    return ["Embedded MuJoCo plant, Panda, true profile; pairs are p50 / p99.", "",
            *table(["what", "value"], rows)]


def _latency(d: dict) -> Lines:
    out: Lines = []
    if "model" in d:
        out += [f"With a learned hybrid loaded ({Path(d['model']).name} of the experiments' Panda hybrid 2S).", ""]
    pinger = d.get("pinger")
    if pinger:
        labels = {"floor": "transport floor: a do-nothing echo process", "composed": "our six nodes, composed",
                  "composed_controller_only": "the controller alone", "separate": "our six nodes, separate processes"}
        ratio = pinger.get("p99_ratio_to_floor", {})
        rows = [[label, pinger[k]["p50_us"], pinger[k]["p99_us"], pinger[k]["max_us"],
                 fmt(ratio[k]) if k in ratio else "1"] for k, label in labels.items() if k in pinger]
        out += ["Round trip JointState -> command from the same bare-WaitSet pinger at 1 kHz, measured in one run:",
                "", *table(["answering", "p50 [us]", "p99 [us]", "max [us]", "p99 / floor p99"], rows)]
    labels = {"transport_floor": "transport floor: reply from a do-nothing process",
              "composed": "composed, all nodes", "composed_controller_only": "composed, controller only",
              "separate": "separate processes"}
    rows = [[label, d[k]["p50_us"] / 1e3, d[k]["p99_us"] / 1e3, d[k]["max_us"] / 1e3,
             fmt(d[k]["missed_per_10k"]) if "missed_per_10k" in d[k] else ""]
            for k, label in labels.items() if k in d]
    out += ["Against the real-time plant (its executor receives the commands; a tick is missed when its command "
            "comes later than one period):", "",
            *table(["path", "p50 [ms]", "p99 [ms]", "max [ms]", "missed per 10k ticks"], rows)]
    rt = d.get("realtime_control")
    if rt:
        rows = [[kind, v["seconds"], f"{100 * v['active_fraction']:.1f} %", v["went_safe"], v["came_back"],
                 v["tracking_rmse_deg"]] for kind, v in rt.items()]
        out += ["`idyn bringup --clock realtime` watched for a while: share of ControllerStates in ACTIVE, how often "
                "late input sent the controller to its safe torque and how often it came back:", "",
                *table(["processes", "s", "ACTIVE", "went safe", "came back", "tracking RMSE [deg]"], rows)]
    for key, title in (("controller_callback", "with the model"), ("controller_callback_without_model",
                                                                    "without a model (RBD fallback)")):
        cb = d.get(key)
        if cb:
            out += [f"Per-tick callback cost in process, no DDS, {title}:", "",
                    *table(["node callback", "p50 [us]", "p99 [us]"],
                           [[name, v["p50_us"], v["p99_us"]] for name, v in cb["nodes"].items()]),
                    f"Sum of the six nodes' tick callbacks: p50 {fmt(cb['sum_p50_us'])} us.", ""]
    return out


def _tracking(d: dict) -> Lines:
    gains = ("soft", "medium", "stiff")

    def cell(r: dict) -> str:
        if r.get("failed"):
            return "not trained" if str(r.get("reason", "")).startswith(NOT_TRAINED) else "failed"
        return fmt(r["rmse_deg"])

    rows = [[row, *(cell(d[row][g]) if g in d[row] else "" for g in gains)]
            for row in d if not row.startswith("_")]
    proto = d.get("_protocol", {})
    durations = " / ".join(fmt(s) for s in proto.get("durations_s", []))
    out = [f"Joint RMSE [deg], {proto.get('moves', '?')} moves x {durations} s on the "
           f"{proto.get('plant', 'plant')}; \"failed\" = left the joint limits, \"not trained\" = `auto` did not "
           "train that candidate within its budget.", "",
           *table(["feedforward", *(f"{g} [deg]" for g in gains)], rows)]
    acc = d.get("_acceptance", {})
    if acc:
        acc_rows = []
        for name, a in acc.items():
            same = a.get("same_feedback_M", {})
            acc_rows.append([name, a["hybrid_medium_rmse_deg"], a["nominal_medium_rmse_deg"],
                             a["nominal_stiff_rmse_deg"], a["ratio_hybrid_medium_to_nominal_medium"],
                             same.get("model_M", {}).get("ratio_hybrid_medium_to_nominal_medium", float("nan")),
                             same.get("urdf_M", {}).get("ratio_hybrid_medium_to_nominal_medium", float("nan"))])
        out += ["Gain claim: hybrid at medium gain vs nominal RBD (ratio of RMSE; \"same M\" = both rows with the "
                "same feedback mass matrix):", "",
                *table(["hybrid", "hybrid medium [deg]", "nominal medium [deg]", "nominal stiff [deg]", "ratio",
                        "ratio, same model M", "ratio, same URDF M"], acc_rows)]
    return out


def _doomed(d: dict) -> Lines:
    rows = []
    for key, label in (("acceptance_medium", "nominal RBD"), ("acceptance_medium_hybrid", "learned hybrid")):
        if key in d:
            a = d[key]
            rows.append([label, a["without"]["rmse_deg"], a["with"]["rmse_deg"], a["rmse_ratio"],
                         f"eta {a['eta']:g}, alpha {a['alpha']:g}, gamma {a['gamma']:g}"])
    payload = d.get("payload", {})
    out = [f"DOOMED on the {d.get('robot', '?')} plant with an unmodelled {fmt(payload.get('mass', float('nan')))} kg "
           f"payload, {d.get('gain', '?')} gain, {d.get('task', '')}: joint RMSE without / with adaptation.", "",
           *table(["feedforward", "without [deg]", "with [deg]", "ratio", "setting"], rows)]
    onset = d.get("oscillation_onset_eta")
    if onset:
        out += [f"Sweep over {len(d.get('results', []))} settings; learning rate eta at which oscillation starts: "
                + "; ".join(f"{k.replace(',', ', ')}: {v:g}" for k, v in onset.items()) + ".", ""]
    return out


def _wrench(d: dict) -> Lines:
    rows = []
    for key, label in (("learned", "learned model (auto)"), ("nominal_rbd", "nominal RBD")):
        if key in d:
            r = d[key]
            rows.append([label, r["push"]["direct"]["rmse_mean_n"], r["push"]["momentum"]["rmse_mean_n"],
                         r["moving_no_contact"]["direct"]["rms_n"], r["moving_no_contact"]["momentum"]["rms_n"]])
    return [f"Wrench observer on the {d.get('robot', '?')} plant: {fmt(d.get('push_n', float('nan')))} N pushes "
            f"of {fmt(d.get('push_s', float('nan')))} s at the flange (RMSE, mean over x/y/z), and moving without "
            "contact (RMS of the estimate). Pose: the plant's start pose, smallest singular value of the flange "
            f"Jacobian {fmt(d.get('push_pose_smallest_singular_value', float('nan')))}.", "",
            *table(["model", "push, direct [N]", "push, momentum [N]", "no contact, direct [N]",
                    "no contact, momentum [N]"], rows)]


def _ur5(d: dict) -> Lines:
    h = d["headline"]
    out = [f"UR5 (CB2) real data, motor currents as effort. Split: train on {len(d['split']['train'])} contact-free "
           f"runs, validate on {d['split']['val']}, score the wrench on {d['split']['score']} against the F/T "
           f"sensor; false alarms on the contact-free runs not trained on. Headline model: {h['model']}.", ""]
    rows = []
    for kind, m in d["models"].items():
        v = m["val"]
        rows.append([kind, fmt(v["nmse_mean"] * 100), joints(v["nmse_per_joint"], 100), joints(v["rmse_current_a"]),
                     joints(v["rmse_nm"])])
    out += table(["model", "val nMSE [%]", "per joint [%] (A = Nm)", "RMSE [A]", "RMSE [Nm]"], rows)
    m = d["models"][h["model"]]
    out += [f"Gains [Nm/A]: {joints(m['gains_nm_per_a'].values())} (identified: "
            f"{', '.join(j for j, f in m['gains_identified'].items() if f)}; scale from the nominal gravity "
            f"x{fmt(m['gain_scale_from_nominal_gravity'])}).", ""]
    rows = []
    for kind, m in d["models"].items():
        for cm in ("wrench", "point"):
            s = m["wrench"][f"no10_{cm}"]
            o, u = s["ours"]["rmse_n"], s["ur_controller"]["rmse_n"]
            hidden = s.get("hidden_by_friction")  # results before it was recorded have none
            floor = "" if hidden is None else (f"{joints(hidden['floor_rmse_n'].values())} "
                                               f"({fmt(hidden['floor_ratio_to_vendor'])}x UR)")
            rows.append([kind, cm, joints([o["x"], o["y"], o["z"]]), joints([u["x"], u["y"], u["z"]]),
                         fmt(s["rmse_ratio_ours_to_ur"]), floor])
    out += table(["model", "contact model", "ours RMSE x y z [N]", "UR RMSE x y z [N]", "ours / UR",
                  "floor: force hidden by static friction [N]"], rows)
    out += ["Floor: the sensor's RMSE on the samples where zero force explains every joint's current within its "
            "static-friction band; an estimate that stays quiet there (as it must for the position loop's stick-slip) "
            "cannot do better (`idyn wrench` prints it).", ""]
    rows = [[n, fmt(v["ours"]), fmt(v["ur_controller"])] for n, v in h["false_alarm_force_rms_n"].items()]
    out += table(["contact-free run (not trained on)", "ours force RMS [N]", "UR force RMS [N]"], rows)
    rows = []
    for kind, m in d["models"].items():
        for name in d["split"]["pushed_without_ground_truth"]:
            tw = m["wrench"][f"pushed_{name}"].get("twin")  # results before it was measured have none
            if tw:
                rows.append([kind, name, fmt(tw["ours_rmse_mean_nm"]), fmt(tw["vendor_rmse_mean_nm"]),
                             fmt(tw["zero_rmse_mean_nm"]), fmt(tw["q_rms_rad"] * 1e3)])
    if rows:
        out += ["Pushes in motion, no sensor (`idyn wrench --twin`): each pushed run against its contact-free twin, "
                "the same program without pushes (No5_w: No5_no; No7_w: No7_short). The twin's torque minus the "
                "pushed run's is the external joint torque, scored per joint while it slides; mean over joints. Both "
                "motions replay training runs (No5_no, No6), and the twins' own run-to-run variation is in every "
                "column.", ""]
        out += table(["model", "pushed run", "ours RMSE [Nm]", "UR (J^T of its wrench) [Nm]", "zero [Nm]",
                      "twin q apart [mrad RMS]"], rows)
    user = d.get("user_path")  # results before it was measured have none
    if user:
        w, runs = user["wrench"], d["split"]["false_alarm"]
        out += [f"As a user runs it (`{user['command']}`: auto without --val, {fmt(user['train_seconds'])} s; it chose "
                f"{user['selected']}): No10 ours / UR {fmt(w['no10_wrench']['rmse_ratio_ours_to_ur'])} (point contact "
                f"{fmt(w['no10_point']['rmse_ratio_ours_to_ur'])}); false alarms "
                + ", ".join(f"{fmt(w[f'false_alarm_{n}']['ours_force_rms_n'])} N on {n}" for n in runs)
                + "".join(f"; against the twin on {n}: ours {fmt(t['ours_rmse_mean_nm'])}, UR "
                          f"{fmt(t['vendor_rmse_mean_nm'])}, zero {fmt(t['zero_rmse_mean_nm'])} Nm"
                          for n in d["split"]["pushed_without_ground_truth"]
                          if (t := w[f"pushed_{n}"].get("twin")))
                + ".", ""]
    p = d["plant_trust"]["pushes"]
    out += [f"Plant (ur5, true profile): bias {fmt(p['bias_before_rezero_n'])} N before and "
            f"{fmt(p['bias_after_auto_rezero_n'])} N after the automatic re-zero; false alarms "
            f"{fmt(100 * p['false_alarm_rate'])} %; detection "
            + ", ".join(f"{fmt(x['force_n'])} N {fmt(100 * x['detection_rate'])} %" for x in p["pushes"])
            + f" (nominal model, sigma calibrated on the plant). Singular pose: rank "
            f"{d['plant_trust']['singular_pose']['rank']}, flagged "
            f"{d['plant_trust']['singular_pose']['singular_flag']}.", ""]
    learned = d.get("plant_trust_identified_model")
    if learned:
        p = learned["pushes"]
        out += [f"Plant, with {learned['model']} (sigma from its validation residuals; {p['stiction_band']}): "
                f"false alarms {fmt(100 * p['false_alarm_rate'])} %; detection "
                + ", ".join(f"{fmt(x['force_n'])} N {fmt(100 * x['detection_rate'])} % (RMSE {fmt(x['rmse_n'])} N)"
                            for x in p["pushes"]) + ".", ""]
    return out


def _payload(d: dict) -> Lines:
    goal = d.get("goal", {})
    out = [f"Payload identification (goal: mass within {fmt(goal.get('mass_pct'))} %, CoM within "
           f"{fmt(goal.get('com_mm'))} mm); errors per robot and payload.", ""]
    rows = [[robot, name, r["mass_error_pct"], r["com_error_mm"], r["inertia_error_kgm2"],
             r["estimate"]["consistency"]["solve"]]
            for robot, v in d.get("plant", {}).items() for name, r in v["payloads"].items()]
    if rows:
        out += ["On the plant (true profile), reference run + payload run of the payload excitation:", "",
                *table(["robot", "payload", "mass error [%]", "CoM error [mm]", "inertia error [kg m^2]", "solve"],
                       rows)]
    rows = [[robot, name, mode, r[mode]["mass_error_pct"], r[mode]["com_error_mm"], r[mode]["inertia_error_kgm2"]]
            for robot, v in d.get("offline", {}).items() for name, r in v["payloads"].items()
            for mode in ("reference", "model")]
    if rows:
        out += ["Offline: the CLI on generated .npz files (1 % torque noise, friction; `--reference` or `--model` "
                "of a trained bare-arm model):", "",
                *table(["robot", "payload", "mode", "mass error [%]", "CoM error [mm]", "inertia error [kg m^2]"],
                       rows)]
    cl = {k: v for k, v in d.get("closed_loop", {}).items() if not k.startswith("_")}
    if cl:
        keys = ("without_compensation", "identified", "doomed", "identified_and_doomed", "true_payload_known")
        dm = d["closed_loop"].get("_setup", {}).get("doomed", {})
        setting = (f" DOOMED at eta {dm['eta']:g}, alpha {dm['alpha']:g}, gamma {dm['gamma']:g}, offset limit "
                   f"{100 * dm.get('offset_limit_fraction', 0.2):g} % of the effort limit (the node's defaults: eta "
                   "0.05, 15 %).") if dm else ""
        out += [f"Closed loop, medium gains, 2 kg payload: joint RMSE [deg].{setting}", "",
                *table(["robot", *keys], [[robot, *(v["rmse_deg"].get(k) for k in keys)] for robot, v in cl.items()])]
    g = d.get("gripper")
    if g:
        out += [f"Gripper compensation ({g.get('robot')}): F/T wrench RMS while moving without contact.", "",
                *table(["compensation", "force RMS [N]", "torque RMS [Nm]", "force p99 [N]"],
                       [[k, v["force_rms_n"], v["torque_rms_nm"], v["force_p99_n"]] for k, v in g["rms"].items()])]
    return out


def _generic(d: dict) -> Lines:
    """Any other result file: its numeric leaves (a new file shows up before it has a renderer)."""
    rows: list[list[Any]] = []

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if not str(k).startswith("_"):
                    walk(f"{prefix}.{k}" if prefix else str(k), x)
        elif isinstance(v, int | float) and not isinstance(v, bool):
            rows.append([prefix, v])

    walk("", d)
    return table(["key", "value"], rows[:40]) if rows else ["(no numbers)", ""]


# (file pattern, topic, title, renderer); the first matching pattern wins.
RENDERERS: list[tuple[str, str, str, Callable[[dict], Lines]]] = [
    ("dynamics.json", "dynamics", "Rigid-body dynamics: pinocchio vs torch vs ONNX", _dynamics),
    ("models.json", "models", "Torque prediction accuracy and training speed", _models),
    ("model_step.json", "models", "Runtime model step", _model_step),
    ("gp_synthetic_6dof.json", "gp", "LIP-kernel GP vs baselines, synthetic 6 DoF", _gp_synthetic),
    ("gp_latency.json", "gp", "LIP GP training time and query latency", _gp_latency),
    ("recorder.json", "recorder", "Recorder loss at 1 kHz", _recorder),
    ("sim.json", "sim", "Embedded plant: step cost, lockstep speed, real-time jitter", _sim),
    ("latency.json", "latency", "Joint state -> command latency", _latency),
    ("tracking_*.json", "experiments", "Tracking", _tracking),
    ("doomed_sweep.json", "experiments", "DOOMED: unmodelled payload", _doomed),
    ("wrench_observer_*.json", "wrench", "Wrench observer", _wrench),
    ("ur5_wrench.json", "ur5", "UR5 on real data: currents, torque model, wrench vs F/T sensor", _ur5),
    ("payload.json", "payload", "Payload identification and gripper compensation", _payload),
]


def _renderer(name: str) -> tuple[int, str, str, Callable[[dict], Lines]]:
    """(order, topic, title, renderer) of a result file; order = its place in RENDERERS."""
    for order, (pattern, topic, title, fn) in enumerate(RENDERERS):
        if fnmatch(name, pattern):
            robot = name[len(pattern) - len("*.json"):-len(".json")] if "*" in pattern else ""
            return order, topic, f"{title}: {robot}" if robot else title, fn
    return len(RENDERERS), "other", name, _generic


def _provenance_line(p: dict) -> str:
    machine = p.get("machine", {})
    return (f"Command: {code(str(p.get('command', '?')))}  \nRevision `{p.get('git_revision', '?')}`, "
            f"{p.get('date_utc', '?')}, {machine.get('cpus', '?')} CPUs, Python {machine.get('python', '?')}.")


def _studies(studies: Path, doc_dir: Path) -> Lines:
    readmes = sorted(studies.glob("*/README.md")) if studies.is_dir() else []
    if not readmes:
        return []
    out = ["## Studies", "",
           "Research that explains a number (why ours is, or is not, a paper's; why a design choice) lives outside "
           "the package, one folder per study with its question, command, results and conclusion:", ""]
    for readme in readmes:
        title = next((line[2:].strip() for line in readme.read_text().splitlines() if line.startswith("# ")),
                     readme.parent.name)
        title = title.removeprefix("Study: ")
        results = sorted((readme.parent / "results").glob("*.json"))
        link = Path(os.path.relpath(readme, doc_dir)).as_posix()
        out.append(f"- [{readme.parent.name}]({link}): {title}; {len(results)} result files.")
    return [*out, ""]


def render(results: Path, studies: Path, doc_dir: Path) -> str:
    """The markdown of docs/benchmarks.md for the result files in ``results`` (links relative to ``doc_dir``)."""
    files = sorted(results.glob("*.json"), key=lambda path: (_renderer(path.name)[0], path.name))
    if not files:
        raise ParameterError(f"no result files in {results}; run `idyn bench` first or pass --results DIR")
    by_topic: dict[str, list[tuple[str, Path, Callable[[dict], Lines]]]] = {}
    for path in files:
        _, topic, title, fn = _renderer(path.name)
        by_topic.setdefault(topic, []).append((title, path, fn))
    rel = Path(os.path.relpath(results, doc_dir)).as_posix()
    out = ["# Benchmark results", "",
           "<!-- generated by `python -m idyn_ros.bench.report` from bench/results/*.json; do not edit -->", "",
           f"Every number below is read from a file in [`{rel}/`]({rel}/), written by the command named under its "
           "table with the git revision and date it ran at (`_provenance`). `make bench` / `idyn bench` reruns "
           "them (hours on the project's 2-core machine); `idyn bench --only TOPIC` one topic. Times are wall "
           "times on that machine: p50 / p99 are the median and 99th percentile; nMSE is the per-joint "
           "mean squared error over the variance of the target torque, in %.", ""]
    topics = [t for t in (*TOPICS, "other") if t in by_topic]
    out += [f"- [{t}](#{t}): {TOPICS.get(t, 'other result files')}" for t in topics] + [""]
    for topic in topics:
        out += [f"## {topic}", ""]
        for title, path, fn in by_topic[topic]:
            data = json.loads(path.read_text())
            try:
                body = fn(data)
            except (KeyError, TypeError, ValueError) as e:
                raise ParameterError(f"{path}: layout not understood by idyn_ros/bench/report.py ({e!r}); "
                                     "update its renderer for this file") from e
            plot = path.with_suffix(".png")
            plot_line = [f"Plot: [`{plot.name}`]({rel}/{plot.name})", ""] if plot.is_file() else []
            out += [f"### {title}", "", f"[`{path.name}`]({rel}/{path.name})", "", *body, *plot_line,
                    _provenance_line(data.get("_provenance", {})), ""]
    out += _studies(studies, doc_dir)
    return "\n".join(out).rstrip() + "\n"


def source_root() -> Path:
    """The repository root (docs/, bench/results/, studies/); only a source checkout has them."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "bench" / "results").is_dir():
        raise ParameterError(f"{root} is not a source checkout (no bench/results/); pass --results and --out")
    return root


def main(argv: list[str] | None = None) -> int:
    """``python -m idyn_ros.bench.report [--check] [--results DIR] [--studies DIR] [--out FILE]``."""
    ap = argparse.ArgumentParser(prog="python -m idyn_ros.bench.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=None, help="result folder (default: bench/results)")
    ap.add_argument("--studies", type=Path, default=None, help="studies folder (default: studies)")
    ap.add_argument("--out", type=Path, default=None, help="document (default: docs/benchmarks.md)")
    ap.add_argument("--check", action="store_true", help="only compare: exit 1 if the document is out of date")
    a = ap.parse_args(argv)
    return write_report(a.results, a.studies, a.out, check=a.check)


def write_report(results: Path | None = None, studies: Path | None = None, out: Path | None = None,
                 check: bool = False) -> int:
    """Regenerate (or with ``check`` compare) the document; 0 when it is up to date afterwards."""
    if results is None or studies is None or out is None:
        root = source_root()
        results = results or root / "bench" / "results"
        studies = studies or root / "studies"
        out = out or root / "docs" / "benchmarks.md"
    text = render(results, studies, out.parent)
    current = out.read_text() if out.is_file() else None
    if check:
        if current != text:
            print(f"{out} is out of date: run python -m idyn_ros.bench.report", file=sys.stderr)
            return 1
        return 0
    if current != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, text)
    print(f"[bench] wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
