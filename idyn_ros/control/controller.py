"""The controller's whole tick, without ROS: what the controller node, the in-process simulator loop and the
benchmarks all run, so no copy of the tick exists anywhere else (the shape of ros2_controllers'
AdmittanceController around AdmittanceRule: the node reads, calls ``update``, publishes).

One tick (``update``): clean and check the joint state (``JointStateFilter``), hold the first trusted pose
until a reference arrives, evaluate the feedforward (embedded model, or the feedforward node's message),
add the DOOMED offset, the impedance / computed-torque law (``law.impedance_torque``), gravity subtraction
where the robot adds g(q) itself, the effort and rate limits, and the watchdog's answer to anything it does
not trust: the robot's safe torque in the same tick. Faults and recovery: ``control/watchdog.py``.

Decisions (one line each; tested in test/control/test_controller.py):
- activation releases the held arm with the full law torque: the rate limiter starts from the first command
  (starting it from zero sagged the Panda 4.6 deg in 150 ms while the limiter ramped up);
- torque-space damping uses M_jj of the feedback model at the neutral pose clipped into the joint limits;
- gains whose damping makes Kd * T > 0.5 (T the control period) are refused: a discrete PD with one period of
  delay loses stability near Kd * T = 1, and such gains only chatter between the effort limits;
- after late input the law is blended back in over ``recovery_ramp`` s from the safe torque (no torque step);
- but not after a silence longer than ``max_recovery_silence``: the arm moved under the hold torque (gravity of the
  nominal model, no feedback) and the reference ran on, so the law would come back far from it (a 5 s pause
  returned with 148 deg of error and commands at the effort limit); that latches, and activation holds the new pose;
- after activation the reference is blended in from the held pose: the first one's offset from it decays over a
  min-jerk move at half the joints' velocity and acceleration limits (the reference node's move-in), so a reference
  that ran on while the arm moved (a latched silence, a deactivation) comes back as a move, not a step (one within
  ``CAPTURE_MIN_RAD`` of the pose is taken as it is);
- a joint measured ``position_limit_margin`` past its URDF range latches safe mode, like saturation: no reference
  goes there (references are clipped to the range), so the arm is at an end stop or the law lost it;
- a state whose stamp does not advance is not fresh input (a driver re-sending its cached state must reach the
  stale-input hold); a stamp that jumps back or stalls while the joints move (the filter's ``RESTARTS``) is a data
  fault, with the safe torque from that live state; a rejected state's safe torque uses dq = 0 (its damping on the
  last trusted dq would be a constant push).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from idyn_ros.control import law
from idyn_ros.control import state_estimation as se
from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.control.reference import move_in_duration
from idyn_ros.control.watchdog import Watchdog
from idyn_ros.data.limits import planning_acceleration_limits
from idyn_ros.data.trajectories import min_jerk_profile
from idyn_ros.errors import ParameterError
from idyn_ros.parameters import PRESET_NAMES, ControllerParams
from idyn_ros.robots.spec import Payload

# = msg/ControllerState.msg
MODE_INACTIVE, MODE_ACTIVE, MODE_SAFE_DAMPING, MODE_SAFE_ZERO = 0, 1, 2, 3
MAX_KD_T = 0.5  # refuse gains above this damping x period (see the module docstring)
_ADD = np.add.reduce  # the ufunc method itself (see control/watchdog.py): a NaN/Inf makes the sum non-finite
RECOVERING = "recovering: the law's torque is being blended back in from the safe torque"  # ACTIVE, not yet steady
CAPTURE_MIN_RAD = 1e-3  # a first reference this close to the pose held at activation is taken as it is


def with_feedback_armature(model: Any, armature: Sequence[float]) -> Any:
    """``model`` with ``armature`` (n,) kg m^2 added to its own (the ``feedback_armature`` parameter; () = as is)."""
    if not armature:
        return model
    return model.with_armature(model.armature + np.asarray(armature, dtype=float))


class Controller:
    """Joint impedance / computed-torque control of one arm; see the module docstring.

    Args:
        robot: the nominal ``RobotModel`` (gravity for the safe hold and for subtraction on hardware).
        params: the controller's parameters (``ControllerParams``).
        safe_mode: the robot's safe mode (``RobotSpec.safe_mode``), unless ``params.safe_mode`` overrides it.
        feedforward: a built ``FeedforwardComputer`` (default: from ``params.model_path`` / ``fallback``).
        feedback_model: whose M(q) scales the feedback (default: the feedforward's, ``feedback_model()``).
    """

    def __init__(self, robot: Any, params: ControllerParams, safe_mode: str = "damping",
                 feedforward: FeedforwardComputer | None = None, feedback_model: Any = None) -> None:
        self.robot = robot
        self.n = n = robot.n
        self.joint_names = tuple(robot.joint_names)
        self.period = 1.0 / params.rate_hz
        self.embedded = params.feedforward_source == "embedded"
        self.subtract_gravity = params.subtract_gravity
        self.ff = feedforward if feedforward is not None else FeedforwardComputer(
            robot, params.model_path or None, params.fallback, params.rate_hz, params.warmup_ticks)
        feedback = feedback_model if feedback_model is not None else self.ff.feedback_model()
        self.feedback_model = with_feedback_armature(feedback, params.replace(n=n).feedback_armature)
        self._feedback_bare, self._hold_model = self.feedback_model, robot  # without a payload (set_payload)
        self.filter = se.JointStateFilter(self.joint_names, params.rate_hz, max_gap_periods=params.stale_periods,
                                          estimate_acceleration=False)  # the law reads q and dq only
        self.watchdog = Watchdog(self.period)
        self.limiter = law.TorqueLimiter(robot.effort_limit, -1.0, self.period)
        z = np.zeros
        self.q_d, self.dq_d, self.ddq_d = z(n), z(n), z(n)
        self.tau, self.tau_ff, self.tau_fb, self.acc_fb = z(n), z(n), z(n), z(n)
        self.offset, self.offset_applied, self.ff_topic = z(n), z(n), z(n)
        self.acceleration_command = z(n)
        self._safe, self._M, self._zero = z(n), z((n, n)), z(n)
        self._at_limit_ticks = np.zeros(n, dtype=np.int64)
        self._abs, self._at_limit = z(n), np.zeros(n, dtype=bool)
        self._ref_map, self._ff_map, self._off_map = (se.NameMap(self.joint_names) for _ in range(3))
        self._ref_in = z((3, n))  # a reference message (q, dq, ddq), checked here before it replaces q_d, dq_d, ddq_d
        self._ref_clipped = np.zeros(n, dtype=bool)
        self.reference_clipped = 0  # references with a position beyond a joint limit (held at the limit)
        self.active = False
        self.ticks = 0
        self.last_rx_ns = -1
        self._last_check_ns = -1  # check_input's previous clock reading (a clock that steps back)
        self.longest_silence_ns = 0  # the longest wait for a joint state since activation (max_recovery_silence)
        self._ff_rx_ns = self._ff_stamp_ns = self._off_rx_ns = -1
        self._have_ref = self._holding = self._first_command = self._restart_silence_clock = False
        # the first reference after activation, blended in from the held pose (see the module docstring)
        self._hold_pose, self._capture_offset, self._capture_step = z(n), z(n), z(n)
        self._ref_raw = z((3, n))  # while blending: the last reference as it came (q_d, dq_d, ddq_d)
        self._capture_pending = False
        self._capture_ticks = self._capture_total = 0
        self._capture_limits = (robot.velocity_limit.copy(), planning_acceleration_limits(robot.name, n))
        self._holding_silent = False  # silence: the command reached the hold torque (check_input sends no more)
        self._ramp_ticks = 0
        self.set_params(params, safe_mode)

    @classmethod
    def for_robot(cls, params: ControllerParams, **kwargs: Any) -> Controller:
        """Build the robot model named by ``params`` (robot, prefix) and the controller for it."""
        from idyn_ros.dynamics import RobotModel
        from idyn_ros.robots import get_robot

        spec = get_robot(params.robot)
        robot = RobotModel.from_robot(params.robot, prefix=params.prefix)
        return cls(robot, params, spec.safe_mode, **kwargs)

    # ------------------------------------------------------------------ parameters
    def gains(self, params: ControllerParams, preset: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(Kp, Kd) of a preset (default: the active one) for these parameters and this robot."""
        kp = np.asarray(params.preset_kp(preset or params.gain_preset, self.n), dtype=float)
        if params.feedback_space == "torque":
            neutral = np.clip(np.zeros(self.n), self.robot.lower, self.robot.upper)
            inertia = np.diag(self.feedback_model.mass_matrix(neutral))
            return kp, law.critical_damping(kp, params.damping_ratio, "torque", inertia)
        return kp, law.critical_damping(kp, params.damping_ratio)

    def check_params(self, params: ControllerParams) -> str | None:
        """None, or why these parameters cannot run on this robot (cross-field checks the table cannot do)."""
        try:  # per-joint arrays against this robot's joints (a node configures before it knows n)
            params.replace(n=self.n)
        except ParameterError as exc:
            return str(exc)
        if hasattr(self, "params") and params.feedback_armature != self.params.feedback_armature:
            return "feedback_armature is fixed when the controller is built (it changes the feedback's M(q))"
        for preset in PRESET_NAMES:
            kp, kd = self.gains(params, preset)
            rate = kd * self.period  # torque space: relative to the joint inertia
            if params.feedback_space == "torque":
                neutral = np.clip(np.zeros(self.n), self.robot.lower, self.robot.upper)
                rate = rate / np.diag(self.feedback_model.mass_matrix(neutral))
            if np.any(rate > MAX_KD_T):
                j = int(np.argmax(rate))
                return (f"presets.{preset}.kp={kp[j]:g} on {self.joint_names[j]} gives Kd*T = {rate[j]:.2f} > "
                        f"{MAX_KD_T} at {params.rate_hz:g} Hz: the loop would chatter at the effort limits; "
                        "lower Kp or damping_ratio")
        return None

    def set_params(self, params: ControllerParams, safe_mode: str | None = None) -> None:
        """Take new run-time parameters (gains, limits, timeouts). Raises ParameterError if they cannot run."""
        problem = self.check_params(params)
        if problem:
            raise ParameterError(problem)
        if safe_mode is not None:
            self._robot_safe_mode = safe_mode
        self.safe_mode = params.safe_mode or self._robot_safe_mode
        damping = params.safe_damping or tuple(0.1 * self.robot.effort_limit)
        self.safe_damping = np.asarray(damping, dtype=float)
        kp, kd = self.gains(params)
        self.kp, self.kd = kp, kd  # whole arrays: a tick in another thread never sees half an update
        self.limiter.set_limits(self.robot.effort_limit, params.torque_rate_limit, self.period, params.effort_scale)
        wd = self.watchdog
        wd.stale_ns = round(params.stale_periods * self.period * 1e9)
        self.filter.max_gap_ns = int(params.stale_periods * self.filter.period_ns)  # the filter restarts past it too
        wd.max_stamp_age_ns = round(params.max_stamp_age * 1e9)
        wd.ff_timeout_ns = round(params.feedforward_timeout * 1e9)
        wd.recovery_ticks = params.recovery_ticks
        # a silence latches only if it was late input at all (longer than stale_periods too); 0: never
        self._latch_silence_ns = max(wd.stale_ns, round(params.max_recovery_silence * 1e9)) \
            if params.max_recovery_silence > 0 else 0
        self._ramp_total = max(1, round(params.recovery_ramp / self.period))
        self._ramp_ticks = min(self._ramp_ticks, self._ramp_total)  # a shorter ramp set mid-ramp: alpha stays >= 0
        self._saturation_ticks = round(params.saturation_timeout / self.period) if params.saturation_timeout else 0
        margin = params.position_limit_margin
        # plain floats: a Python loop over 7 joints costs 0.8 us a tick, four numpy calls 2.7 us (measured)
        lower, upper = (self.robot.lower - margin).tolist(), (self.robot.upper + margin).tolist()
        self._trip_bounds = list(zip(lower, upper, strict=True))
        self._check_position_limits = margin > 0
        self._adaptation_timeout_ns = round(params.adaptation_timeout * 1e9)
        self.params = params

    def set_payload(self, payload: Any) -> None:
        """A payload fixed to the flange (``Payload``; None or mass 0: none) enters the feedforward, the feedback's
        M(q) and the safe hold's g(q) at once. Decision: the g(q) subtracted where the robot adds its own stays the
        bare arm's, since the vendor compensates only the load configured there (leave that at the tool without this
        payload). Safe from another thread than ``update`` (whole-object swaps). ParameterError for a payload no arm
        here can carry (``Payload.implausible``), with nothing changed."""
        p = None if payload is None else Payload.coerce(payload)
        p = None if p is None or p.mass == 0.0 else p
        problem = None if p is None else p.implausible()
        if problem:
            raise ParameterError(problem)
        feedback = self._feedback_bare if p is None else self._feedback_bare.with_payload(p)  # before any swap
        hold = self.robot if p is None else self.robot.with_payload(p)
        self.ff.set_payload(p)
        self.feedback_model, self._hold_model = feedback, hold

    @property
    def payload(self) -> Any:
        """The payload the controller includes (``Payload``) or None."""
        return self.ff.payload

    # ------------------------------------------------------------------ lifecycle
    def activate(self) -> None:
        """Start commanding: the next trusted state becomes the hold pose (no jump), faults are cleared."""
        self.watchdog.clear()
        self.filter.reset()
        self._holding = self._have_ref = False
        self._capture_pending, self._capture_ticks = True, 0
        self._ramp_ticks = 0
        self._at_limit_ticks[:] = 0
        self.last_rx_ns = -1
        self.longest_silence_ns = 0
        self._restart_silence_clock = False
        self.active = True

    def deactivate(self) -> None:
        self.active = False

    def stop(self) -> np.ndarray | None:
        """Deactivate and return the command to leave applied: the safe torque at the last trusted state, not
        rate-limited (decision: on a stop the forward controller holds this value, so it must be the safe torque
        itself, not a step towards it). None when the controller never commanded."""
        commanded = self.active and self.filter.samples > 0
        self.active = False
        if not commanded:
            return None
        return self.hold_torque(self.tau)

    def hold_torque(self, out: np.ndarray) -> np.ndarray:
        """The safe torque to leave applied when no further state will come: at the last trusted pose with dq = 0
        (decision: a damping term -D dq from the last state, held, is a constant push once the arm has stopped),
        within the effort limits."""
        if self.subtract_gravity or self.safe_mode == "zero":
            out[:] = 0.0
        else:
            out[:] = self._hold_model.gravity(self.filter.q)
        np.clip(out, -self.limiter.limit, self.limiter.limit, out=out)
        self.tau_fb[:] = 0.0
        self.acc_fb[:] = 0.0
        self.acceleration_command[:] = 0.0
        return out

    def fail(self, reason: str) -> np.ndarray | None:
        """An internal error in a tick: latch safe mode and return the hold torque to send now (not rate-limited,
        as ``stop``); None when nothing was commanded yet. Needs nothing the error may have broken (gains, damping,
        the model): gravity at the last trusted pose, or zero torque if even that fails."""
        self.watchdog.trip(reason)
        if not self.active or self.filter.samples == 0:
            return None
        try:
            self.hold_torque(self.tau)
        except Exception:  # the last resort must not raise
            self.tau[:] = 0.0
        if not np.all(np.isfinite(self.tau)):
            self.tau[:] = 0.0
        return self.tau

    # ------------------------------------------------------------------ inputs
    def set_reference(self, names: Sequence[str], q_d: Sequence[float], dq_d: Sequence[float],
                      ddq_d: Sequence[float]) -> bool:
        """Desired motion (rad, rad/s, rad/s^2) for the named joints; False for an untrusted one.

        Decision: an untrusted reference (a joint missing or named twice, arrays that do not match the names, a
        NaN/Inf) is a data fault (the latched safe hold of the watchdog policy) and changes nothing: q_d, dq_d, ddq_d
        keep the last trusted reference; a position beyond a joint limit is held at that limit, at rest there (past
        the end stop the law would push into it at full effort until the saturation timeout), and counted. Names the
        robot does not have are ignored when all of its joints are there (a reference for two arms serves each).
        """
        m, wd = self._ref_map, self.watchdog
        if not m.resolve(names):
            wd.trip(f"reference: {m.problem}")
            return False
        ref = self._ref_in
        q, dq, ddq = ref
        if not (m.take(q_d, q) and m.take(dq_d, dq) and m.take(ddq_d, ddq)):
            wd.trip("reference arrays do not match its joint names")
            return False
        if not math.isfinite(_ADD(ref, None)) and not (  # one reduction over the three; a NaN/Inf: which one
                wd.check_finite("reference q_d", q) and wd.check_finite("reference dq_d", dq)
                and wd.check_finite("reference ddq_d", ddq)):
            return False
        clipped = self._ref_clipped
        np.minimum(q, self.robot.upper, out=self.q_d)
        np.maximum(self.q_d, self.robot.lower, out=self.q_d)
        np.not_equal(self.q_d, q, out=clipped)
        self.dq_d[:] = dq
        self.ddq_d[:] = ddq
        if np.count_nonzero(clipped):
            np.copyto(self.dq_d, 0.0, where=clipped)
            np.copyto(self.ddq_d, 0.0, where=clipped)
            self.reference_clipped += 1
        self._have_ref = True
        if self._capture_ticks:
            self._keep_raw_reference()
        elif self._capture_pending and self._holding:  # the first reference since activation meets the held pose
            self._start_capture()
        return True

    def set_feedforward(self, names: Sequence[str], total: Sequence[float], state_stamp_ns: int,
                        now_ns: int) -> None:
        """The feedforward node's torque (feedforward_source=topic), computed from the state stamped so."""
        if self._ff_map.resolve(names) and self._ff_map.take(total, self.ff_topic):
            self._ff_rx_ns = now_ns
            self._ff_stamp_ns = state_stamp_ns

    def set_offset(self, names: Sequence[str], offset: Sequence[float], now_ns: int) -> None:
        """DOOMED's offset (Nm); used while younger than adaptation_timeout."""
        if self._off_map.resolve(names) and self._off_map.take(offset, self.offset):
            self._off_rx_ns = now_ns

    # ------------------------------------------------------------------ the tick
    def update(self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float],
               effort: Sequence[float], stamp_ns: int, now_ns: int, clock_ns: int | None = None,
               source: object = None) -> np.ndarray | None:
        """One joint state in (from publisher ``source``, ``JointStateFilter.update``), the command out (a view of
        ``self.tau``, Nm, robot joint order).

        ``now_ns``: receive time on the caller's clock (ages of inputs); ``clock_ns``: the clock the stamp is
        compared with (``max_stamp_age``; None: no stamp check). Returns None when nothing is to be sent: inactive, a
        duplicate or late stamp (not fresh input either), or no trusted state yet to hold.
        """
        if not self.active:
            return None
        f, wd, p = self.filter, self.watchdog, self.params
        status = f.update(names, position, velocity, effort, stamp_ns, source)
        if status in se.SKIPPED:
            return None  # re-sent, late or another publisher's: the silence watchdog keeps counting
        if self.last_rx_ns >= 0 and not self._restart_silence_clock:  # (a hold start's warm-up is not silence)
            self._note_silence(now_ns - self.last_rx_ns)
        self.last_rx_ns = now_ns
        self._restart_silence_clock = False  # a state after the hold start: silence counts from here as usual
        self._holding_silent = False
        if status != se.OK and not wd.latched:
            wd.trip(f"/joint_states: {f.reason}" if status in se.RESTARTS else f"/joint_states rejected: {f.reason}")
        if f.samples == 0:
            return None
        q, dq = f.q, f.dq
        if status != se.OK and status not in se.RESTARTS:
            dq = self._zero  # the filter did not take this state: hold at the last pose, no damping on an old dq
        if not self._holding:
            self._start_hold(q)
        fresh = status == se.OK
        if fresh and self._check_position_limits and not wd.latched:
            self._past_position_limit(q)
        if fresh and p.max_stamp_age > 0 and clock_ns is not None:
            fresh = wd.check_stamp_age(clock_ns, stamp_ns)
        topic_ff = not self.embedded and p.use_feedforward
        waiting = topic_ff and self._ff_rx_ns < 0  # no feedforward yet: hold safely, no fault
        if fresh and topic_ff and not waiting:
            fresh = wd.check_ff_age(now_ns, self._ff_rx_ns) and wd.check_ff_lag(stamp_ns, self._ff_stamp_ns)
        if fresh and wd.tripped and wd.fresh_tick():
            self._ramp_ticks = self._ramp_total
        if self._capture_ticks and fresh and not wd.tripped:
            self._blend_reference()
        if p.use_feedforward and self.embedded and fresh:
            # every trusted tick: the LSTM state stays current. After a short gap it resumes, ms stale, rather than
            # zeroed (further off); a gap past max_recovery_silence latches, and activation warms it up again
            # decision: at the measured velocity, also where the reference rests: at the reference's, an arm that hunted
            # after a released push held still, but every arm's observer read pushes worse (studies/doomed_contact)
            self.tau_ff[:] = self.ff.compute(q, dq, self.ddq_d)
        tau = self.tau
        if not (wd.tripped or waiting) and self._law(q, dq, now_ns):
            if self.subtract_gravity:  # the robot adds g(q) itself
                tau -= self.robot.gravity(q)
            if self._ramp_ticks:
                self._blend_from_safe(q, dq)
        else:
            self._safe_torque(q, dq, tau)
        if self._first_command:
            self.limiter.reset(tau)
            self._first_command = False
        self.limiter.apply(tau)
        if self._saturated(tau):
            self._safe_torque(q, dq, tau)
            self.limiter.apply(tau)
        self.ticks += 1
        return tau

    def check_input(self, now_ns: int) -> np.ndarray | None:
        """The watchdog timer (every period): while the joint state is silent, the command one rate-limited step
        closer to the hold torque (``hold_torque``) each period until it is there; else None (``update`` commands)."""
        # the clock went back (simulator reset, clock step): silence counts from the jump. Judged against the clock's
        # previous reading, not the last receive time: under sim time that can be a state's stamp ahead of a lagging
        # /clock, and clamping it to the lagging reading tripped "stale joint state" once /clock caught up
        stepped_back = now_ns < self._last_check_ns
        self._last_check_ns = now_ns
        if not self.active or self.last_rx_ns < 0 or self.filter.samples == 0:
            return None
        if stepped_back:
            self.last_rx_ns = min(self.last_rx_ns, now_ns)
        if self._restart_silence_clock:
            self._restart_silence_clock = False
            self.last_rx_ns = max(self.last_rx_ns, now_ns)
            return None
        if self.watchdog.check_state_age(now_ns, self.last_rx_ns) or self._holding_silent:
            return None
        target = self.hold_torque(self._safe)
        self.tau[:] = target
        self.limiter.apply(self.tau)
        self._holding_silent = bool(np.array_equal(self.tau, target))  # there: the forward controller holds it
        return self.tau

    def restart_silence_clock(self) -> None:
        """The wait for the next state is not measured from the last one: its receive time was read on a clock that
        was not running yet (sim time before the first /clock)."""
        self._restart_silence_clock = True

    # ------------------------------------------------------------------ parts of the tick
    def _note_silence(self, silence_ns: int) -> None:
        """Keep the longest wait for a state; input faulted by one past ``max_recovery_silence`` latches (see the
        module docstring; a step of the receive clock that no watchdog tick saw as silence is not one)."""
        self.longest_silence_ns = max(self.longest_silence_ns, silence_ns)
        wd = self.watchdog
        if self._latch_silence_ns and silence_ns > self._latch_silence_ns and wd.tripped and not wd.latched:
            wd.trip(
                f"joint states silent for {silence_ns * 1e-9:.3f} s, longer than max_recovery_silence "
                f"({self.params.max_recovery_silence:g} s): the arm may have moved; deactivate and activate to resume")

    def _start_hold(self, q: np.ndarray) -> None:
        self._hold_pose[:] = q
        if not self._have_ref:
            self.q_d[:] = q
            self.dq_d[:] = 0.0
            self.ddq_d[:] = 0.0
        elif self._capture_pending:  # a reference came before this first state: blend it in from here
            self._start_capture()
        self._first_command = True
        if self.embedded and self.params.use_feedforward:
            self.ff.warm_up(q)
        # the warm-up (tens of ms) is not input silence: a braked lockstep plant advances sim time meanwhile, which
        # tripped "stale joint state" at every start over DDS; until the next state, the silence clock restarts at
        # the next watchdog tick
        self._restart_silence_clock = True
        self._holding = True

    def _start_capture(self) -> None:
        """The reference now in q_d is the first since activation: its offset from the held pose decays over a
        min-jerk move (module docstring), or it is taken as it is when that offset is within CAPTURE_MIN_RAD."""
        self._capture_pending = False
        np.subtract(self._hold_pose, self.q_d, out=self._capture_offset)
        if not np.abs(self._capture_offset).max() > CAPTURE_MIN_RAD:
            return
        duration = move_in_duration(self.q_d, self._hold_pose, *self._capture_limits)
        self._capture_total = self._capture_ticks = max(1, math.ceil(duration / self.period))
        self._keep_raw_reference()
        self.q_d[:] = self._hold_pose  # from this tick until the first blended one

    def _keep_raw_reference(self) -> None:
        r = self._ref_raw
        r[0], r[1], r[2] = self.q_d, self.dq_d, self.ddq_d

    def _blend_reference(self) -> None:
        """One tick of the capture: the last reference plus the part of its offset from the held pose not yet decayed
        (by time: a reference sent once is reached too)."""
        T = self._capture_total * self.period
        s = (self._capture_total - self._capture_ticks) / self._capture_total
        done, rate, curvature = min_jerk_profile(s)  # the share of the offset decayed so far, and its derivatives
        off, step, (q, dq, ddq) = self._capture_offset, self._capture_step, self._ref_raw
        np.add(q, np.multiply(off, 1.0 - done, out=step), out=self.q_d)
        np.subtract(dq, np.multiply(off, rate / T, out=step), out=self.dq_d)
        np.subtract(ddq, np.multiply(off, curvature / T**2, out=step), out=self.ddq_d)
        self._capture_ticks -= 1
        if not self._capture_ticks:  # the reference itself from now on
            np.copyto(self.q_d, q)
            np.copyto(self.dq_d, dq)
            np.copyto(self.ddq_d, ddq)

    def _law(self, q: np.ndarray, dq: np.ndarray, now_ns: int) -> bool:
        """tau = tau_ff + offset + feedback into self.tau; False (and a latched fault) on a non-finite value."""
        p, wd = self.params, self.watchdog
        if not p.use_feedforward:
            self.tau_ff[:] = 0.0
        elif not self.embedded:
            self.tau_ff[:] = self.ff_topic
        age = now_ns - self._off_rx_ns
        if p.use_adaptation and self._off_rx_ns >= 0 and age < self._adaptation_timeout_ns:
            self.offset_applied[:] = self.offset
        else:
            self.offset_applied[:] = 0.0
        # q_d, dq_d, ddq_d need no check here (3 us a tick): set_reference refuses a non-finite reference, and
        # _start_hold writes them from the filter's q, which is finite
        if not (wd.check_finite("feedforward", self.tau_ff)
                and wd.check_finite("adaptation offset", self.offset_applied)):
            return False
        M = self.feedback_model.mass_matrix(q, out=self._M) if p.feedback_space == "acceleration" else None
        law.impedance_torque(q, dq, self.q_d, self.dq_d, self.tau_ff, self.offset_applied, M, self.kp, self.kd,
                             p.feedback_space, out_tau=self.tau, out_fb=self.tau_fb, out_acc=self.acc_fb)
        np.add(self.ddq_d, self.acc_fb, out=self.acceleration_command)
        return wd.check_finite("command", self.tau)

    def _safe_torque(self, q: np.ndarray, dq: np.ndarray, out: np.ndarray, commanded: bool = True) -> np.ndarray:
        """The robot's safe torque at the last trusted state (damping hold, + g(q) unless the robot adds it).
        ``commanded``: it is the command (no feedback, no commanded acceleration); False: only blended in."""
        gravity = None if self.subtract_gravity or self.safe_mode == "zero" else self._hold_model.gravity(q)
        law.safe_torque(self.safe_mode, dq, self.safe_damping, gravity, out)
        if commanded:
            self.tau_fb[:] = 0.0
            self.acc_fb[:] = 0.0
            self.acceleration_command[:] = 0.0
        return out

    def _blend_from_safe(self, q: np.ndarray, dq: np.ndarray) -> None:
        """tau = safe + alpha (tau_law - safe), alpha rising to 1 over the recovery ramp."""
        safe = self._safe_torque(q, dq, self._safe, commanded=False)  # the law's feedback stays on the state
        self._ramp_ticks -= 1  # first: the tick that reaches alpha = 1 is the law's alone (and reports steady)
        alpha = 1.0 - self._ramp_ticks / self._ramp_total
        self.tau -= safe
        self.tau *= alpha
        self.tau += safe

    def _past_position_limit(self, q: np.ndarray) -> None:
        """Latch safe mode when a joint is ``position_limit_margin`` past its range: no reference takes it there, so
        the arm is against an end stop or lost by the law (a lagging preset drove a plant joint into its stop)."""
        for j, (x, (lower, upper)) in enumerate(zip(q.tolist(), self._trip_bounds, strict=True)):
            if not lower <= x <= upper:
                lo, hi = np.degrees(self.robot.lower[j]), np.degrees(self.robot.upper[j])
                self.watchdog.trip(f"position limit: {self.joint_names[j]} at {np.degrees(x):.1f} deg, more than "
                                   f"{self.params.position_limit_margin:g} rad outside its range {lo:.1f}..{hi:.1f} "
                                   "deg")
                return

    def _saturated(self, tau: np.ndarray) -> bool:
        """Count ticks at the effort limit per joint; True on the tick one has sat there too long (latched)."""
        at_limit = np.greater_equal(np.abs(tau, out=self._abs), self.limiter.limit_near, out=self._at_limit)
        self._at_limit_ticks += at_limit
        self._at_limit_ticks *= at_limit
        if not self._saturation_ticks or self.watchdog.latched or not at_limit.any():  # (no argmax on most ticks)
            return False
        j = int(np.argmax(self._at_limit_ticks))
        if self._at_limit_ticks[j] <= self._saturation_ticks:
            return False
        self.watchdog.trip(f"torque saturation: {self.joint_names[j]} at its {self.limiter.limit[j]:.1f} Nm limit "
                           f"for > {self.params.saturation_timeout:g} s")
        return True

    # ------------------------------------------------------------------ state for monitoring
    @property
    def saturation_s(self) -> float:
        """Longest current stay of a joint's command at its effort limit, s."""
        return float(self._at_limit_ticks.max()) * self.period

    @property
    def waiting_for_feedforward(self) -> bool:
        return not self.embedded and self.params.use_feedforward and self._ff_rx_ns < 0

    @property
    def mode(self) -> int:
        """MODE_* of idyn_ros/ControllerState."""
        if not self.active:
            return MODE_INACTIVE
        if self.watchdog.tripped or self.waiting_for_feedforward:
            return MODE_SAFE_ZERO if self.safe_mode == "zero" else MODE_SAFE_DAMPING
        return MODE_ACTIVE

    @property
    def reason(self) -> str:
        """Why the mode is not ACTIVE, or that the law is still being blended back in after a fault ('' otherwise:
        online adaptation learns only then, since a blended command does not produce acceleration_command)."""
        if not self.active:
            return "inactive"
        if self.watchdog.tripped:
            return self.watchdog.reason
        if self.waiting_for_feedforward:
            return "waiting for the first feedforward on feedforward_topic"
        return RECOVERING if self._ramp_ticks else ""
