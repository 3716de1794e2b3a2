"""Replay a recording through the wrench_observer node's classes, and score the estimate against an F/T sensor.

``replay`` feeds each joint state (its header stamp, as the node receives it) to ``control.wrench.WrenchObserver``
(direct residual and momentum observer) and ``control.wrench_trust.TrustedWrench`` (bias, uncertainty, contact,
rank), exactly as ``nodes/wrench_observer.py`` does with ``torque_source: effort``; ``score`` compares the result
with a sensor and with the vendor's own estimate. ``idyn wrench`` is the command around both.

Decisions (one line each, stated in the output too):
- rate: the model's; a recording at another rate or with irregular stamps is resampled onto its grid first
  (linear, as ``idyn evaluate`` does); ``rate_hz`` chooses another grid (a recurrent model refuses it);
- effort: what the recording says it is, else what the model was trained on (``control.effort``);
- conventions: every wrench is made "environment on robot" at the flange, in flange axes; a sensor's axes are taken
  parallel to the flange (its frame_id says where it sits), a vendor estimate in a base frame is rotated;
- bias at rest: each signal (sensor, vendor, ours) minus its own mean over the same initial rest window, then
  scored after that window; torques are not scored (the sensor and the flange are different points);
- time: the sensor is linearly interpolated onto the joint-state stamps (its stamps on the robot clock, as
  recorded); the lag of best correlation within +-0.2 s is reported, not applied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.errors import DatasetError, ModelArtifactError, ParameterError

VENDOR_TOPIC = "/force_torque_sensor_broadcaster/wrench"  # ur_robot_driver's TCP force (the UR's own estimate)
BIAS_WINDOW_S = 1.0
MAX_LAG_S = 0.2
CONTACT_FORCE_N = 2.0  # sensor |f| above which a sample counts as "in contact" for the per-contact scores
MOVING_RAD_S = 0.1  # a joint faster than this in the bias window: the arm moves from the start
SETTLED_S = (0.1, 0.2)  # s after the first estimate: the momentum observer (1/K_O = 20 ms) has settled
NYQUIST_SHARE = 0.4  # a default low-pass cutoff above this share of a slow recording's rate is lowered to it
TWIN_MAX_Q_RMS_RAD = 0.01  # a twin whose aligned positions differ more is not the same motion (UR5 twins: 0.002)
TWIN_MIN_OVERLAP = 0.5  # share of the replayed run the aligned twin must cover


def _columns_at(x_new: np.ndarray, x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Each column of ``a`` (samples at ``x``) linearly interpolated at ``x_new``."""
    return np.stack([np.interp(x_new, x, a[:, j]) for j in range(a.shape[1])], axis=1)


@dataclass
class Replay:
    """What the observer estimated at each joint state (arrays (N, ...), NaN before the first estimate)."""

    t_ns: np.ndarray
    wrench: np.ndarray  # flange axes, env on robot [f N; m Nm] (primary, after the trust stage)
    wrench_base: np.ndarray
    sigma: np.ndarray  # 1-sigma per flange axis
    contact: np.ndarray
    contact_score: np.ndarray
    rank: np.ndarray
    at_rest: np.ndarray
    rezeroed: np.ndarray
    tau_ext: np.ndarray
    direct: np.ndarray  # flange axes, the direct residual through the same trust stage settings, no bias
    q: np.ndarray
    speed: np.ndarray  # max |dq| per state, rad/s
    frame: str
    rate_hz: float
    notes: list[str] = field(default_factory=list)
    stiction_band: bool = False  # tau_ext went through the static-friction band (exactly 0 inside it)
    hidden: np.ndarray | None = None  # (N, 6) flange axes: the most the band can hide (WrenchEstimate.hidden_tool)
    dq: np.ndarray | None = None  # (N, n) joint velocities on the replay's grid
    tau_measured: np.ndarray | None = None  # (N, n) the recorded effort as joint torque (Nm, the model's gains)
    effort_to_torque: Any = None  # that conversion (control.effort.EffortToTorque), for a twin recording
    log_to_header_ns: int = 0  # add to a bag log time to place it on t_ns's clock (JointStateSeries')

    def save(self, path: str | Path, extra: dict[str, Any] | None = None) -> Path:
        """OUT.npz: t [s] (header stamps; t_ns the same exactly), wrench, wrench_base, frame and the rest (atomic)."""
        from idyn_ros.data.atomic import atomic_writer

        path = Path(path)
        arrays = {"t": self.t_ns * 1e-9, "t_ns": self.t_ns, "wrench": self.wrench, "wrench_base": self.wrench_base,
                  "frame": np.array(self.frame), "sigma": self.sigma, "contact": self.contact,
                  "contact_score": self.contact_score, "rank": self.rank, "at_rest": self.at_rest,
                  "rezeroed": self.rezeroed, "tau_ext": self.tau_ext, "wrench_direct": self.direct,
                  "hidden": self.hidden if self.hidden is not None else np.zeros_like(self.wrench),
                  "rate_hz": np.array(self.rate_hz), "notes": np.array(self.notes, dtype=str)}
        arrays.update(extra or {})
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(path) as f:
            np.savez(f, **arrays)
        return path


def robot_for(meta: dict[str, Any], robot: Any) -> Any:
    """The RobotModel: ``robot`` (a preset, a URDF path, a RobotModel) when given, else the artifact's (``meta``);
    a ``robot`` other than the one the model was trained for is refused (its torques would be another arm's)."""
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.robots.spec import ROBOT_NAMES

    name = str(meta.get("robot", ""))
    if robot is not None:
        given = robot if hasattr(robot, "pin_model") else RobotModel.from_robot(str(robot))
        trained_joints = tuple(meta.get("joint_names") or given.joint_names)
        if (name and given.name != name) or tuple(given.joint_names) != trained_joints:
            raise ModelArtifactError(
                f"--robot {robot} is robot {given.name!r} (joints {list(given.joint_names)}), but the model was "
                f"trained for {name!r} (joints {list(trained_joints)}); drop --robot to use the model's robot, or "
                f"pass a model trained for {given.name!r}")
        return given
    if name in ROBOT_NAMES:
        return RobotModel.from_robot(name)
    return RobotModel.from_urdf(meta["urdf"], name=name)


def replay(model_path: str | Path, source: str | Path, robot: Any = None, rate_hz: float | None = None,
           effort_unit: str = "auto", settings: Any = None, observer_gain: float | None = None,
           accel_cutoff_hz: float | None = None, primary: str = "momentum", topic: str | None = None,
           recover: bool = False) -> Replay:
    """Run the observer over ``source`` (bag or dataset .npz) with the artifact ``model_path`` (module doc);
    ``recover``: what a damaged or unfinished bag holds (``score`` and ``score_twin`` take it too).

    Unset tunables take the wrench_observer node's defaults (``WrenchObserverParams``, ``TrustSettings``)."""
    from idyn_ros.control.effort import EffortToTorque
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.control.wrench import WrenchObserver, publish_every
    from idyn_ros.control.wrench_trust import TrustedWrench, TrustSettings
    from idyn_ros.data import importers as imp
    from idyn_ros.data.wrenches import read_joint_states
    from idyn_ros.models.artifact import read_metadata, same_rate
    from idyn_ros.parameters import WrenchObserverParams
    from idyn_ros.robots.drives import torque_constants

    meta = read_metadata(model_path)
    robot_model = robot_for(meta, robot)
    series = read_joint_states(source, robot_model.joint_names, topic, recover=recover)
    notes = [f"joint states: {series.source}, {len(series.t_ns)} messages, header stamps"]
    if series.note:
        notes.append(series.note)
    if series.log_to_header_ns:
        notes.append(f"joint-state header stamps are {series.log_to_header_ns / 1e9:+.4g} s from the bag's log times "
                     "(another clock: a simulator's time, or another machine's): a wrench message without a stamp is "
                     "moved onto them by that much")
    t_ns, q, dq, effort = series.t_ns, series.q, series.dq, series.effort
    model_rate = float(meta.get("rate_hz") or 0.0) or None  # artifacts without a rate run at the recording's
    own_rate, irregular = series.rate_hz, series.irregular  # each measures the stamps: once
    own = f"{own_rate:.4g} Hz" + (f", irregular stamps ({irregular})" if irregular else "")
    if rate_hz is not None:
        if not (math.isfinite(rate_hz) and rate_hz > 0):
            raise ParameterError(f"--rate must be a positive number of Hz, got {rate_hz}")
        rate, why = float(rate_hz), "--rate"
    elif model_rate is not None and (irregular or not same_rate(own_rate, model_rate)):
        rate, why = model_rate, "the model's rate; --rate chooses another"  # as idyn evaluate and idyn train do
    else:
        rate, why = own_rate, ""
    # as the importer: one message alone between gaps is a stray stamp, dropped; a gap is not interpolated through
    gap_ns = imp.GAP_PERIODS * max(round(1e9 / rate), imp.median_period(t_ns))
    stray = imp.stray_stamps(t_ns, gap_ns)
    if stray.any():
        notes.append(imp.stray_note(t_ns[stray], t_ns[~stray]))
        t_ns, q, dq, effort = t_ns[~stray], q[~stray], dq[~stray], effort[~stray]
    if len(t_ns) < 3:
        raise DatasetError(f"{source}: {len(t_ns)} joint states; a replay needs at least 3")
    starts = imp.segment_starts(t_ns, gap_ns)
    if starts.size:
        notes.append(f"{starts.size} gap(s) longer than {gap_ns / 1e9:.3g} s (at t = "
                     + ", ".join(f"{(t_ns[i] - t_ns[0]) / 1e9:.4g} s" for i in starts[:5])
                     + "): nothing interpolated through them, the observer starts over after each")
    if why:
        grid, grid_starts = imp.segment_grid(t_ns, starts, round(1e9 / rate))
        q, dq, effort = (imp.resample_segments(t_ns, starts, a, grid, grid_starts) for a in (q, dq, effort))
        t_ns, starts = grid, np.array(grid_starts[1:], dtype=np.int64)
        notes.append(f"rate {rate:g} Hz ({why}): joint states resampled linearly from {own}; t is that grid")
    else:
        notes.append(f"rate {rate:.4g} Hz = the recording's stamps" + (
            f" (the model's: {model_rate:g} Hz)" if model_rate is not None else ""))
    model = FeedforwardComputer(robot_model, model_path, "none", rate,
                                advice=f"give --model an artifact exported for {robot_model.name}")
    unit = series.effort_kind if effort_unit == "auto" and series.effort_kind else effort_unit
    data = torque_constants(robot_model.name)
    conv = EffortToTorque(unit, robot_model.n, model.effort_metadata, (), None if data is None else data.as_array())
    notes.append(conv.describe() + (f" (the recording says: {series.effort_kind})" if series.effort_kind else ""))
    if conv.warning:
        notes.append("warning: " + conv.warning)
    node = WrenchObserverParams()
    observer_gain = node.observer_gain if observer_gain is None else observer_gain
    if accel_cutoff_hz is None:
        accel_cutoff_hz = node.accel_cutoff_hz
        if accel_cutoff_hz > NYQUIST_SHARE * rate:  # decision: the node's default sits below Nyquist at slow rates
            accel_cutoff_hz = NYQUIST_SHARE * rate
            notes.append(f"direct residual's low-pass at {accel_cutoff_hz:.3g} Hz ({NYQUIST_SHARE:.0%} of the "
                         f"{rate:g} Hz rate; the node's {node.accel_cutoff_hz:g} Hz is above its Nyquist frequency)")
    observer = WrenchObserver(robot_model, rate, model, observer_gain, accel_cutoff_hz)
    settings = settings or TrustSettings()
    # the node's raw-estimate tunables (no deadband or low-pass there by default; they never reach the trust stage)
    observer.set_tunables(observer_gain, settings.damping, node.deadband_force, node.deadband_torque, 1.0)
    trust = TrustedWrench.from_model(observer.rbd, model, settings)
    # the direct residual through its own trust stage; with --primary direct that is the primary itself
    direct_trust = None if primary == "direct" else TrustedWrench.from_model(observer.rbd, model, settings)
    notes.append(trust.describe())
    N, n = len(t_ns), robot_model.n
    out = Replay(t_ns, *(np.full((N, 6), np.nan) for _ in range(3)), np.zeros(N, bool), np.zeros(N),
                 np.zeros(N, int), np.zeros(N, bool), np.zeros(N, bool), np.full((N, n), np.nan),
                 np.full((N, 6), np.nan), q, np.abs(dq).max(1), robot_model.flange_frame, rate, notes)
    out.stiction_band = trust.stiction is not None and settings.stiction_band
    out.hidden = np.full((N, 6), np.nan)
    out.dq, out.tau_measured, out.effort_to_torque = dq, np.zeros((N, n)), conv
    out.log_to_header_ns = series.log_to_header_ns
    observer.warm_up(q[0])
    restart = set(starts.tolist())
    every = publish_every(node.publish_divider, rate)  # the node's cadence: the trust stage runs on published states
    if every > 1:
        notes.append(f"the estimate is updated once every {every} states ({rate / every:.4g} Hz), as the node "
                     "publishes it; in between it holds, as a subscriber sees it")
    published = -1
    for k in range(N):
        if k in restart:
            observer.reset()
        tau = conv.torque(effort[k], out=out.tau_measured[k])
        if not observer.update(int(t_ns[k]), q[k], dq[k], tau):  # (re)starting: the trust stages too, as in the node
            trust.restart()
            if direct_trust is not None:
                direct_trust.restart()
            published = -1
            continue
        if observer.updates % every:
            if published >= 0:
                _hold(out, published, k)
            continue
        published = k
        tau_ext = observer.tau_momentum if primary == "momentum" else observer.tau_direct
        est = trust.update(int(t_ns[k]), q[k], dq[k], tau_ext)
        out.wrench[k], out.wrench_base[k], out.sigma[k] = est.tool, est.base, est.sigma_tool
        out.contact[k], out.contact_score[k], out.rank[k] = est.contact, est.contact_score, est.rank
        out.at_rest[k], out.rezeroed[k], out.tau_ext[k] = est.at_rest, est.rezeroed, est.tau_ext
        out.hidden[k] = est.hidden_tool
        out.direct[k] = est.tool if direct_trust is None else direct_trust.update(int(t_ns[k]), q[k], dq[k],
                                                                                    observer.tau_direct).tool
    return out


def _hold(out: Replay, last: int, k: int) -> None:
    """Row ``k`` of the estimates = row ``last``: a state the node does not publish on."""
    for series in (out.wrench, out.wrench_base, out.sigma, out.contact, out.contact_score, out.rank, out.at_rest,
                   out.rezeroed, out.tau_ext, out.hidden, out.direct):
        series[k] = series[last]


def _in_flange_axes(w: np.ndarray, frame_id: str, rep: Replay, robot_model: Any) -> tuple[np.ndarray, str]:
    """A wrench series (N, 6) in flange axes: base-frame ones rotated with the recorded q (see module doc)."""
    base_like = frame_id in ("base", "base_link", "world") or frame_id.endswith(("/base", "/base_link"))
    if not base_like:
        return w, f"frame_id '{frame_id}': axes taken parallel to the flange ({rep.frame})"
    out = np.empty_like(w)
    for k in range(len(w)):
        R = robot_model.frame_placement(rep.q[k], rep.frame)[:3, :3]
        if frame_id.endswith("base"):  # UR 'base' is base_link turned by pi about z (urdf/ur5.urdf.xacro)
            R = np.diag([-1.0, -1.0, 1.0]) @ R
        out[k, :3], out[k, 3:] = R.T @ w[k, :3], R.T @ w[k, 3:]
    return out, f"frame_id '{frame_id}': rotated into the flange axes with the recorded joint positions"


def _bias_window(rep: Replay, seconds: float) -> np.ndarray:
    """Mask of the initial rest window, ``seconds`` long: from our first automatic re-zero when it comes within
    3 ``seconds`` of the first estimate (so our own start-up re-zero does not fall inside it), else from the first
    estimate. The arm should be still and free there (``score`` reports the speed and the sensor's level); when it
    moves from the start (faster than ``MOVING_RAD_S``), the window is ``SETTLED_S`` right after the observer has
    settled: each signal zeroed at the start, as the UR's own estimate is in the recordings."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise ParameterError(f"--bias-window must be a positive number of seconds, got {seconds}")
    valid = np.isfinite(rep.wrench[:, 0])
    if not valid.any():
        raise DatasetError("the observer produced no estimate (fewer than 2 joint states?)")
    t0 = rep.t_ns[np.argmax(valid)]
    if rep.rezeroed.any() and rep.t_ns[np.argmax(rep.rezeroed)] - t0 <= 3 * seconds * 1e9:
        t0 = rep.t_ns[np.argmax(rep.rezeroed)]
    window = valid & (rep.t_ns >= t0) & (rep.t_ns < t0 + int(seconds * 1e9))
    if rep.speed[window].max() > MOVING_RAD_S:
        start = t0 + int(SETTLED_S[0] * 1e9)
        return valid & (rep.t_ns >= start) & (rep.t_ns < t0 + int(SETTLED_S[1] * 1e9))
    if t0 + seconds * 1e9 >= rep.t_ns[valid][-1]:
        raise ParameterError(
            f"--bias-window {seconds:g} s reaches the end of the recording: it has "
            f"{(rep.t_ns[valid][-1] - t0) / 1e9:.3g} s of estimates from t = {(t0 - rep.t_ns[0]) / 1e9:.3g} s, and "
            f"only what comes after the window is scored; pass a shorter window, as long as the arm rests free at the "
            f"start")
    return window


def axis_scores(est: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    """Per-axis force RMSE [N] and correlation of ``est`` vs ``ref`` (N, 3), plus their means."""
    err = est - ref
    rmse = np.sqrt(np.mean(err**2, axis=0))
    corr = [float(np.corrcoef(est[:, c], ref[:, c])[0, 1]) if est[:, c].std() > 0 and ref[:, c].std() > 0
            else float("nan") for c in range(3)]
    return {"rmse_n": dict(zip("xyz", rmse.tolist(), strict=True)), "rmse_mean_n": float(rmse.mean()),
            "rmse_norm_n": float(np.sqrt(np.mean((err**2).sum(1)))),
            "corr": dict(zip("xyz", corr, strict=True))}


def _lag(est: np.ndarray, ref: np.ndarray, rate: float) -> float:
    """Lag (s) of the best correlation of |f| within +-MAX_LAG_S; > 0: the estimate comes later."""
    a, b = np.linalg.norm(est, axis=1), np.linalg.norm(ref, axis=1)
    a, b = a - a.mean(), b - b.mean()
    m = int(MAX_LAG_S * rate)
    best, lag = -np.inf, 0
    for s in range(-m, m + 1):
        x, y = (a[s:], b[: len(b) - s]) if s >= 0 else (a[: len(a) + s], b[-s:])
        c = float(x @ y)
        if c > best:
            best, lag = c, s
    return lag / rate


def score(rep: Replay, source: str | Path, ft_topic: str | None, vendor_topic: str | None = VENDOR_TOPIC,
          ft_sign: float = 1.0, vendor_sign: float = -1.0, bias_window_s: float = BIAS_WINDOW_S,
          robot: Any = None, vendor_required: bool = False,
          recover: bool = False) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Scores of the replay against the sensor (and the vendor's estimate): (summary, arrays for OUT.npz).

    ``ft_sign``/``vendor_sign``: +1 if the topic reports the wrench the environment applies to the robot, -1 if
    the robot's on the environment (ur_robot_driver's TCP force). Without ``ft_topic`` only the vendor estimate and
    the false-alarm level (force magnitude RMS after the bias window) are reported. ``vendor_required``: the vendor
    topic was asked for by name, so its absence is an error (the default one is used only when present).
    """
    from idyn_ros.data.wrenches import read_wrenches
    from idyn_ros.dynamics import RobotModel

    robot_model = robot if hasattr(robot, "pin_model") else (RobotModel.from_robot(robot) if robot else None)
    named = [(option, t) for option, t in (("--ft-topic", ft_topic), ("--vendor-topic", vendor_topic)) if t]
    if Path(source).suffix == ".npz" and (ft_topic or (vendor_topic and vendor_required)):
        option, topic = named[0]
        raise DatasetError(
            f"{source}: {option} {topic} reads a WrenchStamped topic from the bag, and a dataset .npz keeps no "
            f"topics (its 'wrench' array, from `idyn dataset import --wrench-topic`, is not scored against); pass "
            f"the bag the .npz was imported from as --data")
    topics = [t for _, t in named]
    found = read_wrenches(source, topics, rep.log_to_header_ns, recover) \
        if topics and Path(source).suffix != ".npz" else {}
    for option, topic in named:
        if topic not in found and (option == "--ft-topic" or vendor_required):
            from idyn_ros.data.wrenches import available_topics

            raise DatasetError(f"{source}: no WrenchStamped messages on {option} {topic}; topics: "
                               + ", ".join(f"{k} ({v})" for k, v in available_topics(source, recover).items()))
    window = _bias_window(rep, bias_window_s)
    scored = np.isfinite(rep.wrench[:, 0]) & (rep.t_ns >= rep.t_ns[window][-1])
    ours = rep.wrench[:, :3] - np.nanmean(rep.wrench[window, :3], axis=0)
    summary: dict[str, Any] = {
        "conventions": {
            "wrench": f"applied by the environment to the robot at the flange origin, {rep.frame} axes",
            "sensor_sign": "+1: sensor reports environment on robot" if ft_sign > 0 else "-1: robot on environment",
            "vendor_sign": "+1: environment on robot" if vendor_sign > 0 else "-1: vendor reports robot on "
                                                                              "environment (negated)",
            "bias": f"each signal minus its mean over an initial rest window of {bias_window_s:g} s (from our "
                    f"first automatic re-zero if that comes first; if the arm moves from the start, "
                    f"{SETTLED_S[0]:g}-{SETTLED_S[1]:g} s: zeroed at the start); scored after that window",
            "time": "sensor interpolated linearly onto the joint-state stamps (recorded clock alignment)",
            "compared": "forces only (sensor origin and flange origin differ: torques are not comparable)"},
        "samples_scored": int(scored.sum()), "rate_hz": rep.rate_hz,
        "bias_window_max_speed_rad_s": float(rep.speed[window].max()),
        "bias_window_s": [float((rep.t_ns[window][0] - rep.t_ns[0]) * 1e-9),
                          float((rep.t_ns[window][-1] - rep.t_ns[0]) * 1e-9)],
        "ours": {"force_rms_n": float(np.sqrt(np.mean((ours[scored] ** 2).sum(1)))),
                 "contact_fraction": float(rep.contact[scored].mean()),
                 "min_rank": int(rep.rank[np.isfinite(rep.wrench[:, 0])].min()),
                 "rezeros": int(rep.rezeroed.sum())},
    }
    arrays: dict[str, np.ndarray] = {}
    refs: dict[str, np.ndarray] = {}
    for name, topic, sign in (("sensor", ft_topic, ft_sign), ("vendor", vendor_topic, vendor_sign)):
        if not topic or topic not in found:
            continue
        series = found[topic]
        w = sign * series.at(rep.t_ns)
        if robot_model is not None:
            w, frame_note = _in_flange_axes(w, series.frame_id, rep, robot_model)
        else:
            frame_note = f"frame_id '{series.frame_id}': axes taken parallel to the flange"
        arrays[name] = w
        f = w[:, :3] - w[window, :3].mean(0)
        refs[name] = f
        summary[name] = {"topic": topic, "frame": frame_note, "messages": len(series.t_ns),
                         "force_rms_n": float(np.sqrt(np.mean((f[scored] ** 2).sum(1))))}
    if "sensor" in refs:
        sensor = refs["sensor"]
        quiet = float(np.linalg.norm(sensor[window], axis=1).max())
        summary["sensor"]["max_force_in_bias_window_n"] = quiet
        if quiet > CONTACT_FORCE_N:
            summary["warning"] = (f"the sensor reads up to {quiet:.1f} N in the bias window: the arm may not be free "
                                  f"there; pass --bias-window")
        in_contact = scored & (np.linalg.norm(sensor, axis=1) > CONTACT_FORCE_N)
        summary["ours"]["vs_sensor"] = axis_scores(ours[scored], sensor[scored])
        summary["ours"]["vs_sensor_in_contact"] = axis_scores(ours[in_contact], sensor[in_contact])
        summary["ours"]["lag_s"] = _lag(ours[scored], sensor[scored], rep.rate_hz)
        direct = rep.direct[:, :3] - np.nanmean(rep.direct[window, :3], axis=0)
        summary["direct_residual"] = {"vs_sensor": axis_scores(direct[scored], sensor[scored])}
        if "vendor" in refs:
            vendor = refs["vendor"]
            summary["vendor"]["vs_sensor"] = axis_scores(vendor[scored], sensor[scored])
            summary["vendor"]["vs_sensor_in_contact"] = axis_scores(vendor[in_contact], sensor[in_contact])
            summary["vendor"]["lag_s"] = _lag(vendor[scored], sensor[scored], rep.rate_hz)
            summary["rmse_ratio_ours_to_vendor"] = (summary["ours"]["vs_sensor"]["rmse_mean_n"]
                                                    / summary["vendor"]["vs_sensor"]["rmse_mean_n"])
        summary["samples_in_contact"] = int(in_contact.sum())
        if rep.stiction_band:
            summary["hidden_by_friction"] = _hidden_by_friction(rep, sensor, scored, summary)
    return summary, arrays


def _hidden_by_friction(rep: Replay, sensor: np.ndarray, scored: np.ndarray, summary: dict) -> dict[str, Any]:
    """The sensor force on the samples where zero force explains every joint's current within its static-friction
    band (our banded tau_ext is exactly 0 there): an estimate that stays quiet there, as it must for a position loop's
    stick-slip and for contact-free stillness, errs by that force, so its RMSE is a floor for such estimators."""
    hidden = np.all(rep.tau_ext == 0.0, axis=1) & scored
    floor = np.sqrt(np.sum(sensor[hidden] ** 2, axis=0) / max(int(scored.sum()), 1))
    out: dict[str, Any] = {"share_of_samples": float(hidden.sum() / max(int(scored.sum()), 1)),
                           "floor_rmse_n": dict(zip("xyz", floor.tolist(), strict=True)),
                           "floor_rmse_mean_n": float(floor.mean())}
    if rep.hidden is not None and hidden.any():  # does the reported bound cover the force the estimate missed there
        covered = np.all(np.abs(sensor[hidden]) <= rep.hidden[hidden, :3], axis=1)
        out["sensor_within_hidden_bound"] = float(covered.mean())
        out["hidden_bound_median_n"] = dict(zip("xyz", np.median(rep.hidden[hidden, :3], axis=0).tolist(),
                                                strict=True))
    if "vs_sensor" in summary.get("vendor", {}):
        out["floor_ratio_to_vendor"] = float(floor.mean() / summary["vendor"]["vs_sensor"]["rmse_mean_n"])
    return out


def align_twin(t: np.ndarray, q: np.ndarray, t_twin: np.ndarray, q_twin: np.ndarray) -> tuple[float, float]:
    """(shift s, q RMS rad): the time shift of the twin (t_twin ~ t + shift) that best matches the positions, found on
    a 10 ms grid over every shift that overlaps ``TWIN_MIN_OVERLAP`` of the run, then refined to 0.5 ms."""
    def q_rms(shift: float, stride: int) -> float:
        tt = t[::stride] + shift
        inside = (tt >= t_twin[0]) & (tt <= t_twin[-1])
        if inside.mean() < TWIN_MIN_OVERLAP:
            return math.inf
        return float(np.sqrt(np.mean((q[::stride][inside] - _columns_at(tt[inside], t_twin, q_twin)) ** 2)))

    coarse = np.arange(t_twin[0] - t[-1], t_twin[-1] - t[0], 0.01)
    best = min(coarse, key=lambda x: q_rms(x, 4)) if len(coarse) else 0.0
    fine = min(np.arange(best - 0.01, best + 0.01, 0.0005), key=lambda x: q_rms(x, 1))
    return float(fine), q_rms(float(fine), 1)


def score_twin(rep: Replay, twin: str | Path, robot_model: Any, vendor: np.ndarray | None = None,
               topic: str | None = None, bias_window_s: float = BIAS_WINDOW_S,
               recover: bool = False) -> tuple[dict[str, Any], np.ndarray]:
    """Scores against a contact-free run of the same motion (a "twin": the same program replayed without pushes).

    With the same q, dq, ddq the arm needs the same torque, so the twin's measured torque minus this run's is the
    external joint torque, without any model: a reference where no F/T sensor was mounted, and for pushes anywhere
    on the arm. It holds while a joint slides (|dq_j| > DQ_LIM): at standstill each run's joints stick anywhere in
    their static-friction band. Scored per joint on those samples, in joint space (no Jacobian amplifies anything):
    ours (the trust stage's tau_ext, as the node publishes it), the vendor's wrench mapped by J^T (zeroed over the
    bias window, as in ``score``), and zero. The twin's own run-to-run variation adds to every error alike: compare
    the estimators, not the absolute values. It assumes the push does not change the motion, as with a stiff position
    loop (the real UR5's twins: 2 mrad RMS apart); an arm that yields moves differently, and that difference needs
    torque too (the UR5 plant under stiff impedance gains, 10 mrad apart: the reference errs by a fifth of the push,
    ``studies/wrench_stiction/motion.py``). Returns (summary, the reference (N, n), NaN where the twin is absent).
    """
    from idyn_ros.data.wrenches import read_joint_states
    from idyn_ros.dynamics.friction import DQ_LIM

    if rep.tau_measured is None or rep.dq is None:
        raise ValueError("score_twin needs a replay with tau_measured and dq (replay() keeps them)")
    series = read_joint_states(twin, robot_model.joint_names, topic, recover=recover)
    conv = rep.effort_to_torque
    if series.effort_kind and series.effort_kind != conv.unit:
        raise DatasetError(f"{twin}: its efforts are {series.effort_kind}, the replayed run's were read as "
                           f"{conv.unit}; a twin must be recorded the same way")
    t = (rep.t_ns - rep.t_ns[0]) * 1e-9
    t_twin = (series.t_ns - rep.t_ns[0]) * 1e-9
    if len(t_twin) < 3 or t_twin[-1] - t_twin[0] < TWIN_MIN_OVERLAP * t[-1]:
        raise DatasetError(f"{twin}: {t_twin[-1] - t_twin[0] if len(t_twin) else 0:.1f} s of joint states; a twin must "
                           f"cover at least {TWIN_MIN_OVERLAP:.0%} of this recording's {t[-1]:.1f} s")
    shift, q_rms = align_twin(t, rep.q, t_twin, series.q)
    if not q_rms <= TWIN_MAX_Q_RMS_RAD:
        raise DatasetError(f"{twin}: no time shift makes its joint positions match this recording's (best: "
                           f"{q_rms:.3g} rad RMS, limit {TWIN_MAX_Q_RMS_RAD:g}); a twin is a contact-free run "
                           f"of the same motion")
    tt = t + shift
    inside = (tt >= t_twin[0]) & (tt <= t_twin[-1])
    n = robot_model.n
    tau_twin = _columns_at(tt, t_twin, conv.torque(series.effort))
    dq_twin = _columns_at(tt, t_twin, series.dq)
    reference = np.where(inside[:, None], tau_twin - rep.tau_measured, np.nan)  # env on robot: twin minus pushed
    estimates = {"ours": rep.tau_ext, "zero": np.zeros_like(rep.tau_ext)}
    if vendor is not None:
        window = _bias_window(rep, bias_window_s)
        w_tool = vendor - vendor[window].mean(0)
        mapped = np.full((len(t), n), np.nan)
        for k in np.flatnonzero(inside & np.isfinite(w_tool).all(1)):
            J, R = robot_model.flange_jacobian(rep.q[k])
            mapped[k] = J.T @ np.concatenate([R @ w_tool[k, :3], R @ w_tool[k, 3:]])
        estimates["vendor"] = mapped
    sliding = inside[:, None] & (np.abs(rep.dq) > DQ_LIM) & (np.abs(dq_twin) > DQ_LIM)
    sliding &= np.all([np.isfinite(e) for e in estimates.values()], axis=0)
    per_joint: dict[str, Any] = {}
    for j, name in enumerate(robot_model.joint_names):
        m = sliding[:, j]
        if m.sum() < 10:
            continue
        ref = reference[m, j]
        per_joint[name] = {"samples": int(m.sum()), "reference_rms_nm": float(np.sqrt(np.mean(ref**2)))}
        for who, est in estimates.items():
            per_joint[name][f"{who}_rmse_nm"] = float(np.sqrt(np.mean((est[m, j] - ref) ** 2)))
        o = rep.tau_ext[m, j]
        per_joint[name]["ours_corr"] = float(np.corrcoef(o, ref)[0, 1]) if o.std() > 0 and ref.std() > 0 else math.nan
    summary: dict[str, Any] = {
        "twin": str(twin), "shift_s": shift - float(t_twin[0]), "q_rms_rad": q_rms, "overlap": float(inside.mean()),
        "shift": "the twin's time from its first message = this run's + shift_s",
        "scored": f"per joint while it slides (|dq| > {DQ_LIM:g} rad/s in both runs), in joint space [Nm]",
        "per_joint": per_joint}
    for who in estimates:
        vals = [v[f"{who}_rmse_nm"] for v in per_joint.values()]
        summary[f"{who}_rmse_mean_nm"] = float(np.mean(vals)) if vals else math.nan
    return summary, reference


def plot_twin(rep: Replay, twin: dict[str, Any], reference: np.ndarray, joint_names: tuple[str, ...] | list[str],
              path: str | Path) -> Path:
    """External joint torque per joint over time: the twin reference, ours, and where each joint slides."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from idyn_ros.dynamics.friction import DQ_LIM

    t = (rep.t_ns - rep.t_ns[0]) * 1e-9
    n = len(joint_names)
    fig, axes = plt.subplots(n, 1, sharex=True, figsize=(12, 1.9 * n + 1), constrained_layout=True)
    for j, (ax, name) in enumerate(zip(np.atleast_1d(axes), joint_names, strict=True)):
        ax.plot(t, reference[:, j], color="k", lw=1.0, label="twin reference (twin minus this run)")
        ax.plot(t, rep.tau_ext[:, j], color="C0", lw=0.9, label="ours (tau_ext)")
        still = np.abs(rep.dq[:, j]) <= DQ_LIM
        ax.fill_between(t, 0, 1, where=still, transform=ax.get_xaxis_transform(), color="0.85", lw=0, zorder=0,
                        label="not scored: joint still")
        pj = twin["per_joint"].get(name)
        if pj:
            text = f"RMSE while sliding: ours {pj['ours_rmse_nm']:.2f}, zero {pj['zero_rmse_nm']:.2f}"
            text += f", vendor {pj['vendor_rmse_nm']:.2f} Nm" if "vendor_rmse_nm" in pj else " Nm"
            ax.text(0.99, 0.95, text, transform=ax.transAxes, ha="right", va="top", fontsize=8,
                    bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})
        ax.set_ylabel(f"{name}\n[Nm]", fontsize=8)
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].legend(loc="upper left", fontsize=8, ncol=3)
    np.atleast_1d(axes)[0].set_title(f"external joint torque (environment on robot) against the contact-free twin "
                                     f"{Path(twin['twin']).name}\n(shifted {twin['shift_s']:+.3f} s, positions "
                                     f"{twin['q_rms_rad']:.4f} rad RMS apart)", fontsize=10)
    np.atleast_1d(axes)[-1].set_xlabel("t [s]")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot(rep: Replay, summary: dict[str, Any], arrays: dict[str, np.ndarray], path: str | Path,
         title: str = "", bias_window_s: float = BIAS_WINDOW_S) -> Path:
    """Forces in flange axes over time: sensor, vendor, ours with its 2-sigma band and contact flags."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    window = _bias_window(rep, bias_window_s)
    t = (rep.t_ns - rep.t_ns[0]) * 1e-9
    ours = rep.wrench[:, :3] - np.nanmean(rep.wrench[window, :3], axis=0)
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(12, 10), constrained_layout=True,
                             gridspec_kw={"height_ratios": [3, 3, 3, 1]})
    for c, ax in enumerate(axes[:3]):
        if "sensor" in arrays:
            s = arrays["sensor"][:, c] - arrays["sensor"][window, c].mean()
            ax.plot(t, s, color="k", lw=1.4, label="F/T sensor")
        if "vendor" in arrays:
            v = arrays["vendor"][:, c] - arrays["vendor"][window, c].mean()
            ax.plot(t, v, color="C3", lw=0.9, label="UR controller's estimate")
        ax.plot(t, ours[:, c], color="C0", lw=0.9, label="ours (momentum observer)")
        band = 2 * np.where(np.isfinite(rep.sigma[:, c]), rep.sigma[:, c], np.nan)
        ax.fill_between(t, ours[:, c] - band, ours[:, c] + band, color="C0", alpha=0.15, lw=0, label="ours +-2 sigma")
        if rep.hidden is not None and rep.stiction_band:
            h = rep.hidden[:, c]
            ax.plot(t, ours[:, c] + h, color="C2", lw=0.7, ls=":", label="ours +- what static friction can hide")
            ax.plot(t, ours[:, c] - h, color="C2", lw=0.7, ls=":")
        label = f"f{'xyz'[c]} [N]"
        if "vs_sensor" in summary.get("ours", {}):
            o = summary["ours"]["vs_sensor"]["rmse_n"]["xyz"[c]]
            v = summary.get("vendor", {}).get("vs_sensor", {}).get("rmse_n", {}).get("xyz"[c])
            label += f"\nRMSE ours {o:.1f}" + (f", UR {v:.1f}" if v is not None else "")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.axvspan(t[window][0], t[window][-1], color="0.85", zorder=0)
    axes[0].legend(loc="upper left", fontsize=8, ncol=4)
    axes[3].fill_between(t, 0, rep.contact.astype(float), step="post", color="C1", alpha=0.6, label="contact")
    axes[3].plot(t, rep.at_rest.astype(float) * 0.5, color="C2", lw=1, label="at rest")
    axes[3].plot(t[rep.rezeroed], np.full(rep.rezeroed.sum(), 0.75), "v", color="k", ms=4, label="re-zero")
    axes[3].set_yticks([])
    axes[3].legend(loc="upper left", fontsize=8, ncol=3)
    axes[3].set_xlabel("t [s] (grey: bias window)")
    axes[0].set_title(title or f"external force at the flange, {rep.frame} axes (environment on robot)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

