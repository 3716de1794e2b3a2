"""The drive front-end of the plant: command validation and the watchdog, as a real joint drive has.

Why separate from the node: the rules (what is rejected, what is clamped, when the watchdog trips)
are the behaviour a controller meets, so they are unit-tested without ROS; the node only counts and
reports them on /diagnostics.

Rules (decisions):
- wrong length or any NaN/Inf -> always rejected (nothing sensible to clamp to);
- |tau_i| > effort limit -> rejected (``reject``) or clamped to the limit (``clamp``);
- a rejected command leaves the previous accepted command in force (the drive holds its setpoint)
  until the watchdog trips;
- no accepted command for longer than ``timeout`` -> zero torque until the next accepted command
  (like a drive's communication watchdog); each trip is counted once.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from idyn_ros.errors import ParameterError

BAD_COMMAND_POLICIES = ("reject", "clamp")


@dataclass
class GateCounters:
    """What the gate saw since start (all counts)."""

    received: int = 0
    accepted: int = 0
    clamped: int = 0
    rejected_length: int = 0
    rejected_nonfinite: int = 0
    rejected_limit: int = 0
    watchdog_trips: int = 0

    @property
    def rejected(self) -> int:
        return self.rejected_length + self.rejected_nonfinite + self.rejected_limit


class CommandGate:
    """Validates effort commands (Nm) and applies the watchdog.

    Args:
        effort_limit: (n,) per-joint limits (Nm).
        on_bad_command: ``"reject"`` or ``"clamp"`` for values beyond the limits.
        timeout: seconds without an accepted command before the watchdog zeroes the torque.
    """

    def __init__(self, effort_limit: np.ndarray, on_bad_command: str = "reject", timeout: float = 0.1) -> None:
        if on_bad_command not in BAD_COMMAND_POLICIES:
            raise ParameterError(f"on_bad_command must be one of {BAD_COMMAND_POLICIES}, got {on_bad_command!r}")
        if not timeout > 0:
            raise ParameterError(f"command_timeout must be > 0 s, got {timeout}")
        self.limit = np.asarray(effort_limit, dtype=float)
        self.n = self.limit.size
        self.policy = on_bad_command
        self.timeout = float(timeout)
        self.counters = GateCounters()
        self.last_error = ""
        self._command = np.zeros(self.n)
        self._zero = np.zeros(self.n)
        self._excess = np.zeros(self.n)  # |tau| - limit, scratch of the fast path
        self._last_accept: float | None = None
        self._tripped = False

    @property
    def started(self) -> bool:
        """True once a command has been accepted (before that the plant holds, brakes engaged)."""
        return self._last_accept is not None

    @property
    def watchdog_active(self) -> bool:
        return self._tripped

    def submit(self, values: Sequence[float] | np.ndarray, now: float) -> bool:
        """Offer a command received at time ``now`` (s); returns True when accepted (possibly clamped)."""
        c = self.counters
        c.received += 1
        if len(values) != self.n:
            c.rejected_length += 1
            self.last_error = f"command has {len(values)} values, expected {self.n}"
            return False
        # rclpy hands float64[] fields over as array.array('d'): view it, no copy
        tau = np.frombuffer(values, dtype=np.float64) if isinstance(values, array.array) and values.typecode == "d" \
            else np.asarray(values, dtype=float)
        # Fast path, one reduction: max(|tau| - limit) <= 0 is False for NaN too (and Inf exceeds any limit)
        excess = np.subtract(np.abs(tau, out=self._excess), self.limit, out=self._excess)
        if excess.max() <= 0.0:
            self._command[:] = tau
            c.accepted += 1
            self._last_accept = now
            self._tripped = False
            return True
        if not np.all(np.isfinite(tau)):
            c.rejected_nonfinite += 1
            self.last_error = "command contains NaN or Inf"
            return False
        over = np.abs(tau) > self.limit
        if over.any():
            if self.policy == "reject":
                c.rejected_limit += 1
                self.last_error = f"command beyond effort limits at joints {np.flatnonzero(over).tolist()}"
                return False
            c.clamped += 1
            tau = np.clip(tau, -self.limit, self.limit)
        self._command[:] = tau
        c.accepted += 1
        self._last_accept = now
        self._tripped = False
        return True

    def command(self, now: float) -> np.ndarray:
        """Torque (Nm) the drive applies at time ``now``: last accepted command, or zeros after a timeout."""
        if self._last_accept is None or self._tripped:
            return self._zero
        if now - self._last_accept > self.timeout:
            self.expire()
            return self._zero
        return self._command

    def expire(self) -> None:
        """Trip the watchdog now (e.g. a lockstep plant that waited ``timeout`` s of wall time)."""
        if self._last_accept is not None and not self._tripped:
            self._tripped = True
            self.counters.watchdog_trips += 1

    def reset(self) -> None:
        """Forget the last command (after a plant reset): zero torque, watchdog re-armed."""
        self._command[:] = 0.0
        self._last_accept = None
        self._tripped = False
