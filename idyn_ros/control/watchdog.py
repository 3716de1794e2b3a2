"""Controller watchdog: decides each tick whether the command may come from the control law.

Trips (controller goes to its safe mode within the same tick, reason kept for /diagnostics):
- the joint state is older than ``stale_periods`` control periods (receive-time gap, checked by a
  timer in the node because a dead publisher produces no callback; and the message stamp's age);
- a NaN/Inf anywhere in what the law consumes (state, reference, feedforward, offset, output);
- the feedforward (when it comes from another node) arrived more than ``ff_timeout`` ago, or was computed from
  a joint state stamped more than ``ff_timeout`` before the current one (a message queued behind a late
  executor arrives "now" but is old: the stamp check catches it, the receive-time check a dead publisher);
- the joint-state filter rejected the sample (missing joint, stamps going backwards, ...).
Recovery is explicit: the node must call ``clear()`` (on re-activation) - a tripped controller does
not silently resume (decision: latching is safer than flapping between law and safe torque).
"""

from __future__ import annotations

import numpy as np


class Watchdog:
    """Latching trip with a reason; all times in ns (one clock per instance)."""

    def __init__(self, period_s: float, stale_periods: float = 3.0, ff_timeout_s: float = 0.01) -> None:
        self.period_ns = round(period_s * 1e9)
        self.stale_ns = round(stale_periods * period_s * 1e9)
        self.ff_timeout_ns = round(ff_timeout_s * 1e9)
        self.tripped = False
        self.reason = ""
        self.trips = 0

    def clear(self) -> None:
        self.tripped = False
        self.reason = ""

    def trip(self, reason: str) -> None:
        """Latch the trip (the first reason is kept until ``clear``)."""
        if not self.tripped:
            self.tripped = True
            self.reason = reason
            self.trips += 1

    def check_state_age(self, now_ns: int, last_state_ns: int) -> bool:
        """True when fine; trips when no state arrived for more than ``stale_periods`` periods."""
        if last_state_ns < 0:
            return True  # nothing received yet: the node stays inactive, nothing to protect
        age = now_ns - last_state_ns
        if age > self.stale_ns:
            self.trip(f"stale joint state: {age * 1e-6:.2f} ms old (> {self.stale_ns * 1e-6:.2f} ms)")
            return False
        return True

    def check_ff_age(self, now_ns: int, last_ff_ns: int) -> bool:
        if last_ff_ns < 0 or now_ns - last_ff_ns > self.ff_timeout_ns:
            age = "never received" if last_ff_ns < 0 else f"{(now_ns - last_ff_ns) * 1e-6:.1f} ms old"
            self.trip(f"feedforward missing: {age} (timeout {self.ff_timeout_ns * 1e-6:.1f} ms)")
            return False
        return True

    def check_ff_lag(self, state_stamp_ns: int, ff_stamp_ns: int) -> bool:
        """True when fine; trips when the feedforward answers a joint state older than ``ff_timeout``.

        Both stamps come from the joint-state source (the feedforward node copies the stamp of the state it
        computed from), so no clock is compared across machines.
        """
        lag = state_stamp_ns - ff_stamp_ns
        if lag > self.ff_timeout_ns:
            self.trip(f"feedforward lags the joint state by {lag * 1e-6:.1f} ms (computed from an older state; "
                      f"timeout {self.ff_timeout_ns * 1e-6:.1f} ms)")
            return False
        return True

    def check_finite(self, name: str, values: np.ndarray) -> bool:
        # One reduction, no temporary array: any NaN/Inf makes the sum non-finite (so does a sum beyond
        # 1e308, which is no value a joint reports either).
        if np.isfinite(np.sum(values)):
            return True
        self.trip(f"non-finite {name}: indices {np.flatnonzero(~np.isfinite(values)).tolist()}")
        return False
