"""Causal joint-state cleaning for the 1 kHz path: name mapping, trust checks, dq/ddq estimation.

Why here and not in ``data.filters``: the controller, the buffer node, DOOMED and the wrench
observer must all see exactly the same estimate, and it must be computable per tick without
allocation. Everything in this module is pure numpy with preallocated buffers; no ROS types.

Decisions (one line each, tested in test/control/test_control_math.py):
- velocity: the measured velocity is used when it is present and finite; otherwise backward
  difference of q. Acceleration: backward difference of dq over the *stamp* dt (robust to jitter),
  then a 2nd-order Butterworth low-pass designed for the nominal rate (causal, ~1/(2 pi fc) lag):
  ``data.filters.ButterworthLowPass``. Not ``data.filters.BackwardDifference``: that one divides by the
  nominal period and low-passes first-order; here dt is the stamp difference and gaps restart it.
- a gap longer than ``max_gap_periods`` restarts the differentiators (no huge ddq spike); after any restart
  without a measured velocity, dq is differenced again at the next sample and ddq restarts once more there.

Stamp contract of ``JointStateFilter.update`` (what every user of the filter builds on):
- ``OK``: accepted.
- ``DUPLICATE``: not accepted, not an error, counted in ``dropped``: the same stamp with the same positions (a
  re-sent sample), or a stamp at most ``max_gap_ns`` behind the last accepted one (a late, reordered sample: ROS
  filters drop these), or the same stamp with other positions fewer than ``STALLED_SAMPLES`` times in a row.
- ``RESTART_BACKWARDS``: a stamp more than ``max_gap_ns`` behind the last accepted one (bag loop, simulator reset,
  driver restart, clock step). ``RESTART_STALLED``: the same stamp as the last accepted one with other positions,
  ``STALLED_SAMPLES`` times in a row (stamps stopped advancing while the arm moves: a driver without a time source,
  a frozen clock). On both, and on ``RESTART_SOURCE`` (below)
  (``RESTARTS``) the filter restarts on that sample, as ``reset()`` then accept (q live, dq measured or 0, ddq 0;
  the counters are kept), ``reason`` says why, and the next samples continue from it. Users: ``q``/``dq`` hold the
  live sample; the controller treats a restart as a data fault (its safe torque from the live state); every other
  node resets its own time-dependent state and carries on.
- ``REJECT_*``: not accepted, estimate untouched, ``reason`` says why (names, lengths, NaN/Inf, a negative stamp).
  ``REJECT_BACKWARDS`` is no longer returned (kept for its number).

Publishers (``source``: who published the sample, e.g. the DDS publisher's id; None when unknown): the filter takes the
robot's state from one publisher, the first it heard. Another publisher of the robot's joints (a joint_state_publisher
started by a display launch file, a republisher) is ``SECOND_SOURCE``: ignored and counted in ``second_source``, so
its states never interleave with the driver's. It takes over (``RESTART_SOURCE``, estimators restarted) only after
``SOURCE_SWITCH_SAMPLES`` of its samples in a row, each within ``max_gap_ns`` of the last, with none from the first
publisher in between: a restarted driver is back within a few periods, a slow publisher never takes over.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from idyn_ros.data.filters import ButterworthLowPass
from idyn_ros.data.hints import prefix_pair

_ADD = np.add.reduce  # one reduction per finiteness check: a NaN/Inf makes the sum non-finite

# Status codes returned by JointStateFilter.update (ints: cheap to compare on the hot path).
OK = 0
DUPLICATE = 1
REJECT_NAMES = 2
REJECT_NONFINITE = 3
REJECT_BACKWARDS = 4
REJECT_LENGTH = 5
RESTART_BACKWARDS = 6
RESTART_STALLED = 7
REJECT_STAMP = 8
FOREIGN = 9  # names none of the robot's joints: another publisher's on the topic (a gripper, another arm), ignored
SECOND_SOURCE = 10  # the robot's joints from a publisher other than the one the state comes from, ignored
RESTART_SOURCE = 11  # that other publisher took over (the first went silent): estimators restarted on its sample
RESTARTS = (RESTART_BACKWARDS, RESTART_STALLED, RESTART_SOURCE)  # the sample was taken, the estimators started over
INTERVAL_SMOOTHING = 1.0 / 256  # weight of each new interval in the mean interval
RATE_SAMPLES = 500  # accepted samples before the mean interval is judged
RATE_TOLERANCE = 1.25  # a mean interval this far from the period, either way, is another rate
# samples in a row stamped like the last accepted one, with other positions, that make a stalled clock: fewer are a
# driver publishing twice per cycle or stamping at 1 ms resolution, dropped like a late sample
STALLED_SAMPLES = 3
# samples in a row, at the input's rate, with which another publisher of the robot's joints takes over (module doc)
SOURCE_SWITCH_SAMPLES = 5
# nothing taken and nothing wrong: the caller returns as for a re-sent state
SKIPPED = (DUPLICATE, FOREIGN, SECOND_SOURCE)

STATUS_TEXT = {
    OK: "ok",
    DUPLICATE: "duplicate or late stamp (dropped)",
    REJECT_NAMES: "missing or duplicated joint",
    REJECT_NONFINITE: "non-finite value",
    REJECT_BACKWARDS: "stamp went backwards",
    REJECT_LENGTH: "array length does not match the joint names",
    RESTART_BACKWARDS: "stamp jumped back: estimators restarted",
    RESTART_STALLED: "stamp stopped advancing while the joints moved: estimators restarted",
    REJECT_STAMP: "negative stamp",
    FOREIGN: "names none of the robot's joints (another publisher's, ignored)",
    SECOND_SOURCE: "the robot's joints from a second publisher (ignored)",
    RESTART_SOURCE: "another publisher took over the robot's joints: estimators restarted",
}


class RotationalDisplacement:
    """Callar 2021 feature r, per tick in numpy: definition and constants in ``idyn_ros.models.features``.

    r_j = q_j - q_j(last reversal), clipped to +-10 deg; a reversal counts after ``deadband`` rad of
    travel back from the furthest point. The torch twin that models are trained with and that runs in
    the exported graph is ``idyn_ros.models.zoo.rotational_displacement_step`` (a test checks they agree).
    Units: rad. ``update`` allocates nothing.
    """

    def __init__(self, n: int, limit: float | None = None, deadband: float | None = None) -> None:
        from idyn_ros.models.features import R_DEADBAND, R_LIMIT  # torch-free

        self.limit = R_LIMIT if limit is None else limit
        self.deadband = R_DEADBAND if deadband is None else deadband
        self.r = np.zeros(n)
        self.anchor = np.full(n, np.nan)  # q at the last reversal
        self.extreme = np.zeros(n)  # furthest q in the current direction
        self.direction = np.zeros(n)  # +1, -1 or 0 (not yet moving)

    def reset(self) -> None:
        self.r[:] = 0.0
        self.anchor[:] = np.nan
        self.direction[:] = 0.0

    def update(self, q: np.ndarray) -> np.ndarray:
        if np.isnan(self.anchor[0]):
            self.anchor[:] = q
            self.extreme[:] = q
        for j in range(q.shape[0]):  # n <= 7: a loop is cheaper than masked numpy here
            d = self.direction[j]
            qj = q[j]
            if d == 0.0:
                if abs(qj - self.anchor[j]) > self.deadband:
                    self.direction[j] = 1.0 if qj > self.anchor[j] else -1.0
                    self.extreme[j] = qj
            elif (qj - self.extreme[j]) * d >= 0.0:
                self.extreme[j] = qj
            elif (self.extreme[j] - qj) * d > self.deadband:  # reversal
                self.anchor[j] = self.extreme[j]
                self.extreme[j] = qj
                self.direction[j] = -d
            if self.direction[j] != 0.0:
                self.r[j] = min(max(qj - self.anchor[j], -self.limit), self.limit)
        return self.r


def _prefix_hint(ours: Sequence[str], theirs: Sequence[str]) -> str:
    """"; they are this robot's joints with prefix 'fer_' ..." when ``theirs`` are ``ours`` under another prefix
    (franka_ros2 names a Panda's joints fer_joint1..7), else ""."""
    for other, mine in sorted({pair for a in theirs for b in ours if (pair := prefix_pair(a, b)) is not None}):
        if other != mine and all(name.startswith(mine) and other + name[len(mine):] in theirs for name in ours):
            return (f"; they are this robot's joints with prefix {other!r}: set the nodes' prefix parameter to it "
                    f"(launch: prefix:={other})")
    return ""


class NameMap:
    """A message's joint-name list resolved to the robot's joint order, once per distinct list (joint states,
    references, feedforward and offsets all go through one). Names the robot does not have are ignored; one of its
    joints missing or named twice refuses the list (which of two values would be the joint's?)."""

    def __init__(self, joint_names: Sequence[str]) -> None:
        self.joint_names = tuple(joint_names)
        self._key: tuple[str, ...] | None = None
        self.index = np.arange(len(self.joint_names))
        self.identity = False  # the sender's order is ours: copies without indexing
        self.missing: list[str] = []  # of the last refused list: the robot's joints it lacks
        self.twice: list[str] = []  # ... and those it names more than once

    def resolve(self, names: Sequence[str]) -> bool:
        key = tuple(names)
        if key == self._key:
            return True
        lookup = {name: i for i, name in enumerate(key)}
        self.twice = [j for j in self.joint_names if key.count(j) > 1] if len(lookup) != len(key) else []
        self.missing = [j for j in self.joint_names if j not in lookup]
        if self.missing or self.twice:
            return False
        self.index = np.array([lookup[j] for j in self.joint_names], dtype=np.intp)
        self.identity = key == self.joint_names
        self._key = key
        return True

    @property
    def problem(self) -> str:
        """Why the last list was refused: "missing joint(s) [...]", "joint(s) [...] named twice" or both."""
        parts = [f"missing joint(s) {self.missing}"] if self.missing else []
        return "; ".join(parts + ([f"joint(s) {self.twice} named twice"] if self.twice else []))

    def take(self, values: Sequence[float], out: np.ndarray) -> bool:
        """out[:] = values in the robot's order; False if their length is not the resolved list's."""
        if len(values) != len(self._key or ()):
            return False
        self.gather(values, out)
        return True

    def gather(self, values: Sequence[float], out: np.ndarray) -> np.ndarray:
        """out[:] = values (as long as the resolved list, checked by the caller) in the robot's order; rclpy's
        array.array is read in place, no copy."""
        if self.identity:  # the usual case (URDF order): a plain copy, 0.7 us against 2.1 us for asarray + take
            out[:] = values
        else:
            np.take(np.asarray(values, dtype=float), self.index, out=out)
        return out


@dataclass
class JointStateEstimate:
    """The clean state after one accepted sample (views into preallocated buffers)."""

    stamp_ns: int
    q: np.ndarray  # rad
    dq: np.ndarray  # rad/s
    ddq: np.ndarray  # rad/s^2 (filtered, causal; stays 0 in a filter built with estimate_acceleration=False)
    effort: np.ndarray  # Nm (NaN where the source gives none)
    r: np.ndarray  # rad, rotational displacement feature


class JointStateFilter:
    """Maps a JointState-like sample to the configured joint order, checks it, estimates dq/ddq.

    ``update`` returns a status code (module doc: ``OK``, ``DUPLICATE``, a ``RESTART_*`` or a ``REJECT_*``); a
    rejected or dropped sample leaves the estimate untouched. ``reason`` holds a human-readable message for the last
    rejection or restart (built only then, so the accepted path allocates nothing but a tuple compare).
    ``estimate_acceleration=False``: ``ddq`` is not estimated and stays 0, for users that never read it (its difference
    and low-pass are 8 of the 16.5 us an accepted sample costs). ``ddq_restarted`` is kept up to date either way.
    """

    def __init__(
        self,
        joint_names: Sequence[str],
        rate_hz: float,
        accel_cutoff_hz: float = 50.0,
        max_gap_periods: float = 3.0,
        use_measured_velocity: bool = True,
        track_rotational_displacement: bool = False,
        estimate_acceleration: bool = True,
    ) -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be > 0, got {rate_hz}")
        self.joint_names = tuple(joint_names)
        self.n = len(self.joint_names)
        self.rate_hz = float(rate_hz)
        self.period_ns = round(1e9 / rate_hz)
        self.max_gap_ns = int(max_gap_periods * self.period_ns)
        self.use_measured_velocity = use_measured_velocity
        # only a filter that estimates ddq has the low-pass: the others run at any rate (its 50 Hz default is the
        # Nyquist frequency of lbr_fri_ros2_stack's 100 Hz, and every node refused to start there)
        self._accel_lp = ButterworthLowPass(self.n, rate_hz, accel_cutoff_hz) if estimate_acceleration else None
        self._rd = RotationalDisplacement(self.n)
        # r costs a Python loop over the joints per sample: only the filter that publishes it pays for it
        self.track_r = track_rotational_displacement
        self.estimate_acceleration = estimate_acceleration
        self._names = NameMap(self.joint_names)
        self.q = np.zeros(self.n)
        self.dq = np.zeros(self.n)
        self.ddq = np.zeros(self.n)
        self.effort = np.full(self.n, np.nan)
        self._q_prev = np.zeros(self.n)
        self._dq_prev = np.zeros(self.n)
        self._scratch = np.zeros(self.n)
        self._dq_in = np.zeros(self.n)
        self._eff_in = np.zeros(self.n)
        self._have_vel = self._have_eff = False  # whether the admitted sample carried velocities / efforts
        self._q_change = np.zeros(self.n)  # |q - q_last| of a sample stamped like the last one (stalled or re-sent)
        self._same_stamp_moved = 0  # samples in a row stamped like the last accepted one, with other positions
        self._dq_valid = False  # dq is a velocity (measured or differenced), not the 0 a restart put there
        self.ddq_restarted = True  # the last accepted sample restarted the acceleration estimate (ddq = 0 there)
        self.stamp_ns = -1  # the last accepted stamp; -1: none yet (negative stamps are rejected, so never a real one)
        self.samples = 0  # accepted samples since reset (restarts included)
        self.gaps = 0  # of them, those more than max_gap after the previous one (the differentiators restarted)
        self.dropped = 0  # DUPLICATE samples since reset: re-sent, or late (reordered)
        self.foreign = 0  # FOREIGN samples since reset (foreign_note says what they were)
        self.mean_interval_s = 0.0  # of the accepted samples that were not restarts (0: none yet)
        self.one_period_share = 0.0  # of those intervals, the share about one period long (same smoothing)
        self.foreign_names: tuple[str, ...] = ()  # the first one's names
        self.source: object = None  # the publisher the state comes from (module doc); None: none heard yet
        self.second_source = 0  # SECOND_SOURCE samples since reset
        self._candidate: object = None  # another publisher, its samples in a row at the input's rate, its last stamp
        self._candidate_run = 0
        self._candidate_ns = 0
        self.reason = ""
        self.estimate = JointStateEstimate(-1, self.q, self.dq, self.ddq, self.effort, self._rd.r)

    def reset(self) -> None:
        """Forget the past (e.g. on activation): next sample restarts the differentiators."""
        self._forget()
        self.samples = 0
        self.gaps = 0
        self.dropped = 0
        self.second_source = 0  # the publisher stays: activating a controller must not let another one in first

    def _forget(self) -> None:
        """The estimators' past only (a restart on a jumped or stalled stamp keeps the counters)."""
        self.stamp_ns = -1
        self._rd.reset()
        self.ddq[:] = 0.0

    def update(
        self,
        names: Sequence[str],
        position: Sequence[float],
        velocity: Sequence[float],
        effort: Sequence[float],
        stamp_ns: int,
        source: object = None,
    ) -> int:
        """Take one sample (stamp in ns) from publisher ``source`` (None: unknown). Returns OK, one of ``SKIPPED``,
        a ``RESTART_*`` or a ``REJECT_*`` code (module doc)."""
        status = self._admit(names, position, velocity, effort, stamp_ns, source)
        if status != OK and status not in RESTARTS:
            return status
        if status != OK:
            self._forget()
        if self._have_eff:
            self.effort[:] = self._eff_in
        else:  # as documented: none from this sample (a driver that stopped sending them), not the last one's
            self.effort.fill(np.nan)
        self._estimate(stamp_ns)
        return status

    def _admit(self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float],
               effort: Sequence[float], stamp_ns: int, source: object) -> int:
        """Check one sample and gather it in robot order (q in ``_scratch``, ``_dq_in``, ``_eff_in``): OK, a
        RESTART_* code (accepted, with ``reason``), or why it is not taken (FOREIGN, SECOND_SOURCE, DUPLICATE,
        REJECT_*)."""
        if not self._names.resolve(names):
            if len(self._names.missing) == self.n and not self._names.twice:  # not the robot's state at all
                self.foreign += 1
                self.foreign_names = self.foreign_names or tuple(names)
                return FOREIGN
            self.reason = f"{self._names.problem} in /joint_states (got {list(names)})"
            return REJECT_NAMES
        switched = False
        if source is not None and source != self.source:
            if self.source is not None and self._second_source(source, stamp_ns):
                return SECOND_SOURCE
            switched = self.source is not None
            self.source = source
            self._candidate_run = 0
            if switched:
                self.stamp_ns = -1  # another publisher's stamps: nothing to compare them with
        elif source is not None:
            self._candidate_run = 0
        m = len(names)
        if len(position) != m or (len(velocity) not in (0, m)) or (len(effort) not in (0, m)):
            self.reason = (
                f"/joint_states arrays have lengths position={len(position)} velocity={len(velocity)} "
                f"effort={len(effort)} for {m} names"
            )
            return REJECT_LENGTH
        if stamp_ns < 0:  # builtin_interfaces/Time.sec is signed; before 1970 is an unset or broken clock
            self.reason = f"negative stamp {stamp_ns * 1e-9:.9f} s in /joint_states: the source's clock is not set"
            return REJECT_STAMP
        behind = self.stamp_ns - stamp_ns if self.stamp_ns >= 0 else -1
        if 0 < behind <= self.max_gap_ns:  # late (reordered): dropped like ROS filters do, not an error
            self.dropped += 1
            return DUPLICATE
        q = self._names.gather(position, self._scratch)
        if not math.isfinite(_ADD(q)):
            self.reason = self._nonfinite_reason("position", q)
            return REJECT_NONFINITE
        if behind == 0:
            change = np.subtract(q, self.q, out=self._q_change)
            np.abs(change, out=change)
            if not _ADD(change) > 0.0:  # the same sample again (re-sent)
                self.dropped += 1
                return DUPLICATE
            self._same_stamp_moved += 1
            if self._same_stamp_moved < STALLED_SAMPLES:  # not yet a stalled clock: dropped like a late sample
                self.dropped += 1
                return DUPLICATE
        self._same_stamp_moved = 0
        self._have_vel = self.use_measured_velocity and len(velocity) == m
        if self._have_vel:
            dq_meas = self._names.gather(velocity, self._dq_in)
            if not math.isfinite(_ADD(dq_meas)):
                self.reason = self._nonfinite_reason("velocity", dq_meas)
                return REJECT_NONFINITE
        self._have_eff = len(effort) == m
        if self._have_eff:
            eff = self._names.gather(effort, self._eff_in)
            if not math.isfinite(_ADD(eff)):
                self.reason = self._nonfinite_reason("effort", eff)
                return REJECT_NONFINITE
        if behind == 0:
            self.reason = (f"stamp {stamp_ns * 1e-9:.9f} s did not advance over {STALLED_SAMPLES} samples while "
                           f"the joints moved by up to {self._q_change.max():.3g} rad (a driver without a time source, "
                           "a frozen clock); estimators restarted")
            return RESTART_STALLED
        if behind > 0:
            self.reason = (f"stamp jumped back by {behind * 1e-6:.3f} ms: the source restarted (bag loop, simulator "
                           "reset, clock step); estimators restarted")
            return RESTART_BACKWARDS
        if switched:
            self.reason = (f"the robot's joint states now come from another publisher (the first sent none during "
                           f"{SOURCE_SWITCH_SAMPLES} of its samples: a restarted driver?); estimators restarted")
            return RESTART_SOURCE
        return OK

    def _second_source(self, source: object, stamp_ns: int) -> bool:
        """True while a publisher other than ``self.source`` is to be ignored; False once it takes over (module
        doc)."""
        in_time = source == self._candidate and 0 < stamp_ns - self._candidate_ns <= self.max_gap_ns
        self._candidate_run = self._candidate_run + 1 if in_time else 1
        self._candidate, self._candidate_ns = source, stamp_ns
        if self._candidate_run >= SOURCE_SWITCH_SAMPLES:
            return False
        self.second_source += 1
        return True

    def _estimate(self, stamp_ns: int) -> None:
        """Take the admitted sample (q in ``_scratch``): dq (measured or differenced), ddq (differenced, low-passed)
        and r; a gap longer than ``max_gap`` restarts the differentiators."""
        restart = self.stamp_ns < 0 or stamp_ns - self.stamp_ns > self.max_gap_ns
        if restart and self.stamp_ns >= 0:
            self.gaps += 1
        dt = (stamp_ns - self.stamp_ns) * 1e-9 if not restart else 1.0 / self.rate_hz
        if not restart:  # the rate states really come at (rate_problem): a mean over the last few hundred intervals
            mean = self.mean_interval_s
            self.mean_interval_s = mean + (dt - mean) * INTERVAL_SMOOTHING if mean else dt
            one = 1.0 if 1 / RATE_TOLERANCE < dt * self.rate_hz < RATE_TOLERANCE else 0.0  # lost states: 2, 3.. periods
            share = self.one_period_share
            self.one_period_share = share + (one - share) * INTERVAL_SMOOTHING if mean else one
        self._q_prev[:] = self.q
        if self.estimate_acceleration:
            self._dq_prev[:] = self.dq
        self.q[:] = self._scratch
        # decision: after a restart without a measured velocity the dq of 0 is not a velocity, so the next sample
        # restarts ddq again rather than differencing against it (no threshold on how long a gap may be differenced)
        restart_ddq = restart or not self._dq_valid
        if self._have_vel:
            self.dq[:] = self._dq_in
            self._dq_valid = True
        elif restart:
            self.dq[:] = 0.0
            self._dq_valid = False
        else:
            np.subtract(self.q, self._q_prev, out=self.dq)
            self.dq /= dt
            self._dq_valid = True
        self.ddq_restarted = restart_ddq
        if self.estimate_acceleration:  # else ddq stays 0: no difference and no low-pass (8 ufuncs) per sample
            if restart_ddq:
                self._accel_lp.reset(0.0)
                self.ddq[:] = 0.0
            else:
                np.subtract(self.dq, self._dq_prev, out=self._scratch)
                self._scratch /= dt
                self.ddq[:] = self._accel_lp.update(self._scratch)
        if self.track_r:
            self._rd.update(self.q)
        self.stamp_ns = stamp_ns
        self.estimate.stamp_ns = stamp_ns
        self.samples += 1

    def foreign_note(self) -> str:
        """What the FOREIGN samples were ("" if none): said once by each node, counted on /diagnostics."""
        if not self.foreign:
            return ""
        hint = _prefix_hint(self.joint_names, self.foreign_names)
        return (f"ignoring /joint_states messages that name none of this robot's joints {list(self.joint_names)} "
                f"(another publisher's on the same topic: a gripper, another arm; the first named "
                f"{list(self.foreign_names)}); {self.foreign} so far{hint}")

    def second_source_note(self) -> str:
        """What the SECOND_SOURCE samples were ("" if none): said once by each node, counted on /diagnostics."""
        if not self.second_source:
            return ""
        return (f"ignoring /joint_states from a second publisher of this robot's joints (another node publishes them "
                f"on the same topic, e.g. a joint_state_publisher started by a display launch file): the state comes "
                f"from the publisher heard first while it keeps sending; {self.second_source} so far")

    def rate_problem(self) -> str:
        """Why the input does not come at rate_hz ("" if it does): most states restart the differentiators (they
        come slower than ``max_gap``: dq and ddq are zero, the watchdogs see stale input), or their mean interval is
        off by more than ``RATE_TOLERANCE`` (a UR e-Series at 500 Hz under 1 kHz settings: DOOMED pairs only states
        one period apart, a recurrent model steps once per state)."""
        hint = "set rate_hz to the rate it is published at (UR drivers: 500 Hz e-Series, 125 Hz CB3)"
        if self.samples >= 20 and 2 * self.gaps >= self.samples:
            return (f"{self.gaps} of {self.samples} joint states came more than {self.max_gap_ns * 1e-6:g} ms after "
                    f"the previous one: /joint_states arrives slower than rate_hz={self.rate_hz:g}; {hint}")
        ratio = self.mean_interval_s * self.rate_hz
        if self.samples >= RATE_SAMPLES and ratio and not 1 / RATE_TOLERANCE < ratio < RATE_TOLERANCE:
            if ratio > 1 and self.one_period_share >= 0.5:  # most intervals are one period: the source runs at rate_hz
                return (f"/joint_states arrives at about {1 / self.mean_interval_s:.0f} Hz on average, but most states "
                        f"come one period of rate_hz={self.rate_hz:g} apart: states are lost before this node takes "
                        "them (a loaded machine or network), not published at another rate; keep rate_hz, and give "
                        "the nodes CPU (composed, fewer processes) or a better link")
            return (f"/joint_states arrives at about {1 / self.mean_interval_s:.0f} Hz, not rate_hz="
                    f"{self.rate_hz:g}; {hint}")
        return ""

    def _nonfinite_reason(self, field: str, values: np.ndarray) -> str:
        bad = [self.joint_names[i] for i in np.flatnonzero(~np.isfinite(values))]
        return f"non-finite {field} for joint(s) {bad}"
