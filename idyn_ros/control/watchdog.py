"""Controller watchdog: decides each tick whether the command may come from the control law.

Two kinds of fault (decision: the stale-input policy):
- a *data* fault latches until the controller is re-activated (lifecycle deactivate + activate): a NaN/Inf
  in anything the law consumes, a joint missing or named twice, arrays that do not match their names, stamps
  going backwards. A source that sends such data is broken; resuming on its next good sample could flap.
- an *input* fault recovers by itself: the joint state (or the topic feedforward) is late. The command is the
  safe torque while it lasts; after ``recovery_ticks`` fresh samples in a row the law comes back, ramped in by
  the controller. A loaded machine or a DDS hiccup delays samples now and then, and a controller that
  latched on the first 20 ms gap would never control a real-time plant. (A silence longer than
  ``max_recovery_silence`` is latched by the controller: the arm may have moved under the hold torque.)
- a stamp further from this machine's clock than ``max_stamp_age``, either way, is late input; ahead, or about
  equally old ``STEADY_AGE_STATES`` times in a row, the reason says the clocks are not synchronised (a slow
  transport does not deliver every state equally late).
All times in ns on one clock per instance (the caller's: monotonic, or sim time under use_sim_time).
"""

from __future__ import annotations

import math

import numpy as np

_ADD = np.add.reduce  # the ufunc method itself: np.sum's Python-level dispatch costs ~3 us a call at 1 kHz
STEADY_AGE_STATES = 100  # over-age states in a row within half of max_stamp_age of each other: a clock offset
NOT_SYNCHRONISED = "clocks not synchronised"  # the fault kind (text before the colon) of both clock messages


class Watchdog:
    """Trip state with a reason; see the module docstring for latched vs recoverable faults."""

    def __init__(self, period_s: float, stale_periods: float = 3.0, ff_timeout_s: float = 0.01,
                 recovery_ticks: int = 10) -> None:
        self.period_ns = round(period_s * 1e9)
        self.stale_ns = round(stale_periods * period_s * 1e9)
        self.max_stamp_age_ns = self.stale_ns
        self.ff_timeout_ns = round(ff_timeout_s * 1e9)
        self.recovery_ticks = int(recovery_ticks)
        self.tripped = False  # the command must be the safe torque now
        self.latched = False  # ... and stays so until clear()
        self.reason = ""
        self.trips = 0  # faults seen since construction
        self.recoveries = 0
        self.fresh = 0  # consecutive fresh ticks during an input fault
        self._old_in_a_row = 0  # consecutive states stamped too long ago, with ages within the band below
        self._old_age_lo = self._old_age_hi = 0

    def clear(self) -> None:
        """Forget every fault (on activation)."""
        self.tripped = self.latched = False
        self.reason = ""
        self.fresh = 0
        self._old_in_a_row = 0

    def trip(self, reason: str) -> None:
        """A data fault: latches; the first reason is kept until ``clear``."""
        if not self.latched:
            self.trips += 1
            self.reason = reason
        self.tripped = self.latched = True

    def late(self, reason: str) -> None:
        """An input fault: safe until ``recovery_ticks`` fresh ticks in a row (see ``fresh_tick``)."""
        if not self.tripped:
            self.trips += 1
            self.reason = reason
        self.tripped = True
        self.fresh = 0

    def fresh_tick(self) -> bool:
        """Count a tick with fresh input; True on the tick an input fault ends (the law may come back)."""
        if not self.tripped or self.latched:
            return False
        self.fresh += 1
        if self.fresh < self.recovery_ticks:
            return False
        self.tripped = False
        self.reason = ""
        self.recoveries += 1
        return True

    def check_state_age(self, now_ns: int, last_state_ns: int) -> bool:
        """True when fine; an input fault when no state arrived for more than ``stale_periods`` periods."""
        if last_state_ns < 0:
            return True  # nothing received yet: nothing to protect
        age = now_ns - last_state_ns
        if age > self.stale_ns:
            self.late(f"stale joint state: none for {age * 1e-6:.2f} ms (> {self.stale_ns * 1e-6:.2f} ms)")
            return False
        return True

    def check_stamp_age(self, now_ns: int, stamp_ns: int) -> bool:
        """True when fine; an input fault when the sample was stamped more than ``max_stamp_age_ns`` before or
        after ``now_ns`` (a stamp from the future is a clock out of sync, not a fresh state)."""
        age = now_ns - stamp_ns
        limit = self.max_stamp_age_ns
        if -limit <= age <= limit:
            self._old_in_a_row = 0
            return True
        if age < 0:
            self._old_in_a_row = 0
            self.late(f"{NOT_SYNCHRONISED}: joint state stamped {-age * 1e-6:.2f} ms ahead of this machine's clock "
                      f"(> {limit * 1e-6:.2f} ms); synchronise them (chrony/PTP) or set max_stamp_age: 0")
            return False
        self.late(f"stale joint state: stamp {age * 1e-6:.2f} ms old (> {limit * 1e-6:.2f} ms)")
        self._count_steady_age(age)
        return False

    def _count_steady_age(self, age_ns: int) -> None:
        """After ``STEADY_AGE_STATES`` over-age states of about one age, say that the robot's clock is behind."""
        if self._old_in_a_row == 0:
            self._old_age_lo = self._old_age_hi = age_ns
        else:
            self._old_age_lo = min(self._old_age_lo, age_ns)
            self._old_age_hi = max(self._old_age_hi, age_ns)
        if 2 * (self._old_age_hi - self._old_age_lo) > self.max_stamp_age_ns:  # not steady: count from this one
            self._old_in_a_row = 0
            self._old_age_lo = self._old_age_hi = age_ns
        self._old_in_a_row += 1
        if self._old_in_a_row == STEADY_AGE_STATES and self.tripped and not self.latched:
            mid = (self._old_age_lo + self._old_age_hi) * 0.5e-6
            self.reason = (f"{NOT_SYNCHRONISED}: the robot's clock is ~{mid:.0f} ms behind this machine's (the last "
                           f"{STEADY_AGE_STATES} joint states were all {mid:.0f} +- "
                           f"{(self._old_age_hi - self._old_age_lo) * 0.5e-6:.0f} ms old, over max_stamp_age "
                           f"{self.max_stamp_age_ns * 1e-6:.0f} ms; a slow transport is not that steady); "
                           "synchronise them (chrony/PTP) or set max_stamp_age: 0")

    def check_ff_age(self, now_ns: int, last_ff_ns: int) -> bool:
        if last_ff_ns < 0 or now_ns - last_ff_ns > self.ff_timeout_ns:
            age = "never received" if last_ff_ns < 0 else f"{(now_ns - last_ff_ns) * 1e-6:.1f} ms old"
            self.late(f"feedforward missing: {age} (timeout {self.ff_timeout_ns * 1e-6:.1f} ms)")
            return False
        return True

    def check_ff_lag(self, state_stamp_ns: int, ff_stamp_ns: int) -> bool:
        """True when fine; an input fault when the feedforward answers a joint state older than ``ff_timeout``.

        Both stamps come from the joint-state source (the feedforward node copies the stamp of the state it
        computed from), so no clock is compared across machines; a message queued behind a late executor
        arrives "now" but is old.
        """
        lag = state_stamp_ns - ff_stamp_ns
        if lag > self.ff_timeout_ns:
            self.late(f"feedforward lags the joint state by {lag * 1e-6:.1f} ms (computed from an older state; "
                      f"timeout {self.ff_timeout_ns * 1e-6:.1f} ms)")
            return False
        return True

    def check_finite(self, name: str, values: np.ndarray) -> bool:
        if math.isfinite(_ADD(values)):  # one reduction, no temporary array: a NaN/Inf makes the sum non-finite
            return True
        bad = np.flatnonzero(~np.isfinite(values)).tolist()
        if not bad:  # finite values whose sum overflowed (|x| ~ 1e308): not this check's to refuse
            return True
        self.trip(f"non-finite {name}: indices {bad}")
        return False
