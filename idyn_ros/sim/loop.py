"""The in-process simulator loop: the controller node's ``Controller`` stepping ``sim.Plant`` in lockstep.

Why in-process: the tracking table needs hundreds of seconds of closed-loop motion per robot; over DDS that
costs real time and its numbers depend on the machine's load. The lockstep plant node does per tick exactly
what this loop does (publish the state, wait for the command computed from it, step one control period), and
the loop calls the same objects the nodes call: ``Controller.update`` (the whole tick: hold, release,
watchdog, limits, safe torque), ``DoomedAdapter`` (the doomed node's pairing and learner) and the plant. The
reference is sampled at the state's time, which is what the controller sees in the node graph (the
reference node samples one period ahead, one hop earlier). DOOMED's offset reaches the command one tick after
the state it was computed from, as over DDS. Clocks: the stamps are sim time and so is the controller's clock,
as under ``use_sim_time`` with the lockstep plant.

A run fails (``Episode.failed``, stopped at the tick) when the controller leaves ACTIVE (a non-finite value, a
sustained effort saturation: its own watchdog) or a joint comes within ``limit_margin`` of its position limit
(the experiment's safety layer; Reuss et al. 2022 Table III count such runs as failed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from idyn_ros.control.controller import MODE_ACTIVE, Controller
from idyn_ros.control.doomed import DoomedAdapter

LIMIT_MARGIN = math.radians(0.2)  # rad: closer to a position limit fails the run


class Reference(Protocol):
    """What the loop samples each tick: ``sample(t) -> (q_d, dq_d, ddq_d)`` (rad, rad/s, rad/s^2)."""

    duration: float

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


class Hold:
    """Hold ``q`` at rest for ``duration`` s (rad)."""

    def __init__(self, q: np.ndarray, duration: float = 0.0) -> None:
        self.q = np.asarray(q, dtype=float).copy()
        self.zero = np.zeros_like(self.q)
        self.duration = float(duration)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.q, self.zero, self.zero


class FourierReference:
    """``idyn_ros.data.trajectories.FourierTrajectory`` (vectorised ``evaluate``) as a ``Reference``."""

    def __init__(self, traj: Any, periods: float = 1.0) -> None:
        self.traj = traj
        self.duration = float(traj.period * periods)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q, dq, ddq = self.traj.evaluate(np.array([min(t, self.duration)]))
        if t >= self.duration:
            return q[0], np.zeros_like(q[0]), np.zeros_like(q[0])
        return q[0], dq[0], ddq[0]


@dataclass
class Episode:
    """One closed-loop run, arrays (N, n) in plant joint order; SI units (s, rad, rad/s, Nm).

    ``tau`` is the plant's measured joint torque (the /joint_states effort), ``tau_cmd`` the command the
    controller sent, ``offset`` the DOOMED offset it applied. ``failed``/``reason``/``t_fail`` (s) as above.
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    q_d: np.ndarray
    dq_d: np.ndarray
    ddq_d: np.ndarray
    tau: np.ndarray
    tau_cmd: np.ndarray
    tau_ff: np.ndarray
    offset: np.ndarray
    tau_ext: np.ndarray
    ddq_true: np.ndarray
    failed: bool = False
    reason: str = ""
    t_fail: float = math.nan
    move_start: float = 0.0
    move_end: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def move_slice(self) -> slice:
        """Samples with move_start <= t <= move_end (the part the metrics use)."""
        i0 = int(np.searchsorted(self.t, self.move_start - 1e-9))
        i1 = int(np.searchsorted(self.t, self.move_end + 1e-9))
        return slice(i0, i1)


def position_limits(plant: Any) -> tuple[np.ndarray, np.ndarray]:
    """The plant's joint ranges (rad; +-inf for unlimited joints)."""
    jids = [plant.model.joint(j).id for j in plant.joint_names]
    rng = plant.model.jnt_range[jids]
    limited = rng[:, 1] > rng[:, 0]
    return np.where(limited, rng[:, 0], -np.inf), np.where(limited, rng[:, 1], np.inf)


def run_episode(
    plant: Any,
    controller: Controller,
    reference: Reference,
    hold: float = 0.5,
    after: float = 0.0,
    q_start: np.ndarray | None = None,
    doomed: DoomedAdapter | None = None,
    on_tick: Callable[[int, Any, np.ndarray], None] | None = None,
    events: Sequence[tuple[float, Callable[[Any], None]]] = (),
    limits: tuple[np.ndarray, np.ndarray] | None = None,
    limit_margin: float = LIMIT_MARGIN,
) -> Episode:
    """Hold ``hold`` s at the reference's start, run the reference (``reference.duration`` s), then ``after`` s.

    Args:
        plant: ``idyn_ros.sim.Plant`` (reset here to ``q_start``, default the reference's start, at rest).
        controller: the ``Controller`` (activated here: it holds the first state, as on activation of the node).
        doomed: DOOMED in the loop, as the doomed node runs it.
        on_tick: called after each plant step with (tick, plant state, command sent): observers.
        events: (time s, callable(plant)) applied once when the loop time passes them (pushes, payloads).
        limits: (lower, upper) position limits for the safety check (default: the plant's ranges).
    Returns:
        the Episode (stopped early with ``failed`` when the safety layer or the controller trips).
    """
    n, dt = plant.n, plant.control_dt
    names = plant.joint_names
    if q_start is None:
        q_start = reference.sample(0.0)[0]
    state = plant.reset(np.asarray(q_start, dtype=float))
    lower, upper = limits if limits is not None else position_limits(plant)
    lo, hi = lower + limit_margin, upper - limit_margin
    controller.activate()
    total = hold + reference.duration + after
    N = round(total / dt) + 1
    rec = {k: np.zeros((N, n)) for k in ("q", "dq", "q_d", "dq_d", "ddq_d", "tau", "tau_cmd", "tau_ff",
                                         "offset", "tau_ext", "ddq_true")}
    start = Hold(q_start)
    pending = sorted(events, key=lambda e: e[0])
    ev_i = 0
    failed, reason, t_fail, k_end = False, "", math.nan, N
    for k in range(N):
        t = k * dt
        while ev_i < len(pending) and pending[ev_i][0] <= t + 1e-12:
            pending[ev_i][1](plant)
            ev_i += 1
        q, dq = state.q, state.dq
        bad = np.flatnonzero((q < lo) | (q > hi))
        if bad.size:
            j = int(bad[0])
            failed, reason, t_fail, k_end = True, (
                f"joint limit: {names[j]} at {math.degrees(q[j]):.1f} deg "
                f"(range {math.degrees(lower[j]):.1f}..{math.degrees(upper[j]):.1f} deg)"), t, k
            break
        q_d, dq_d, ddq_d = start.sample(0.0) if t < hold else reference.sample(t - hold)
        controller.set_reference(names, q_d, dq_d, ddq_d)
        stamp_ns = round(plant.time * 1e9)
        tau = controller.update(names, q, dq, state.tau, stamp_ns, stamp_ns)
        if tau is None or controller.mode != MODE_ACTIVE:
            failed, reason, t_fail, k_end = True, f"controller: {controller.reason or 'no command'}", t, k
            break
        if doomed is not None:
            doomed.on_command(stamp_ns, controller.acceleration_command)
            offset = doomed.on_state(stamp_ns, q, dq)  # reaches the command at the next tick, as over DDS
            if offset is not None:
                controller.set_offset(names, offset, stamp_ns)
        r = rec
        r["q"][k], r["dq"][k], r["q_d"][k], r["dq_d"][k], r["ddq_d"][k] = q, dq, q_d, dq_d, ddq_d
        r["tau_cmd"][k], r["tau_ff"][k], r["offset"][k] = tau, controller.tau_ff, controller.offset_applied
        r["tau"][k], r["tau_ext"][k], r["ddq_true"][k] = state.tau, state.tau_ext, state.ddq
        sent = tau.copy()
        state = plant.step(sent)
        if on_tick is not None:
            on_tick(k, state, sent)
    sl = slice(0, k_end)
    return Episode(t=np.arange(N)[sl] * dt, failed=failed, reason=reason, t_fail=t_fail, move_start=hold,
                   move_end=hold + reference.duration, **{k: v[sl] for k, v in rec.items()})


def tracking_metrics(ep: Episode) -> dict[str, Any]:
    """Joint RMSE over the move and final offset |q_d - q| at its end, in degrees (Reuss et al. 2022 Table III);
    per joint and averaged over joints."""
    if ep.failed:
        return {"failed": True, "reason": ep.reason}
    sl = ep.move_slice()
    e = np.degrees(ep.q_d[sl] - ep.q[sl])
    rmse = np.sqrt((e**2).mean(0))
    final = np.abs(e[-1])
    return {"rmse_deg": float(rmse.mean()), "final_deg": float(final.mean()),
            "rmse_joint_deg": rmse.tolist(), "final_joint_deg": final.tolist()}


def controller_for(robot: str, robot_model: Any, gain: str, feedforward: Any = None, feedback_model: Any = None,
                   **overrides: Any) -> Controller:
    """The controller node's ``Controller`` for an in-process run: its parameters from config/<robot>.yaml (the
    loader the nodes' files go through) with ``gain_preset=gain`` and ``overrides`` (ROS names) on top.

    ``feedforward``: a ``FeedforwardComputer``, or None for no feedforward (the feedback then scales with the
    nominal URDF's M(q), as the node's fallback does); ``feedback_model``: whose M(q) scales the feedback
    (default: the feedforward's).
    """
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.parameters import load
    from idyn_ros.robots import get_robot

    params = load("controller", robot, overrides={"gain_preset": gain, "use_feedforward": feedforward is not None,
                                                  **overrides}, n=robot_model.n)
    ff = feedforward if feedforward is not None else FeedforwardComputer(robot_model, None, "rbd", params.rate_hz)
    return Controller(robot_model, params, get_robot(robot).safe_mode, feedforward=ff, feedback_model=feedback_model)
