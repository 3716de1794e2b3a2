"""Joint effects of real geared arms that rigid-body dynamics plus viscous/Coulomb friction cannot express.

Why a module of its own: the plant applies them, the profile reads them, tests check each in isolation, and a
reader must see exactly what the simulated robot does (pure numpy/math, no MuJoCo). All are zero in the
``ideal`` and ``nominal`` profiles; the ``true`` profiles set them per joint (config/profiles/README.md gives
each effect's source and the magnitude chosen). Per joint i:

- load-dependent friction of strain-wave gears: the dry friction grows with the transmitted torque,
  ``F_dry,i = static_i + load_friction_i |tau_drive,i|`` (applied through MuJoCo's frictionloss constraint,
  so it also raises the breakaway torque of a loaded joint);
- position-dependent torque ripple of the transmission: ``tau_rip,i = tau_drive,i sum_k r_ik sin(c_ik q_i + phi_ik)``
  (once/twice per output revolution from eccentricities, and 2 N per output revolution from the gear mesh, N the
  gear ratio): a fraction of the transmitted torque, so an arm that transmits none (hanging free, or its gravity
  held by the drives) is not pushed around by it;
- hysteresis / pre-sliding (Dahl model): ``tau_h,i = F_h,i z_i`` with ``dz/dq = (1 - z sgn(dq)) / x_h``:
  after a reversal the friction changes sign over a travel ~ x_h instead of at dq = 0;
- temperature drift: the joint temperature T_i follows ``dT/dt = (T_amb + R_i P_i - T_i) / tau_th,i`` with
  ``P_i = |tau_loss,i dq_i| + c_i tau_drive,i^2`` (friction and copper losses), and every friction term is
  scaled by ``max(0.2, 1 - k_i (T_i - T_ref))``: friction falls as the gear warms, over minutes.

Sign convention as in friction.py: each torque is what the drive must add (the plant applies ``tau - effect``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

MIN_THERMAL_SCALE = 0.2  # decision: friction never falls below 20 % of its reference value (grease never vanishes)
# Decision: the temperature is stepped every 10th control period (one sample of the losses, exact first-order step
# over 10 periods): minutes-long time constants do not see it, and it saves ~8 us per tick of the 1 kHz plant.
THERMAL_DECIMATION = 10


@dataclass(frozen=True)
class JointEffects:
    """Per-joint effect parameters, arrays (n,) (ripple: (n, K), zero-padded), SI units, temperatures in deg C."""

    load_friction: np.ndarray  # dry friction per Nm of drive torque (-)
    ripple_ratio: np.ndarray  # fraction of the drive torque (n, K)
    ripple_order: np.ndarray  # rad/rad: sin(order q + phase) (n, K)
    ripple_phase: np.ndarray  # rad (n, K)
    hysteresis_torque: np.ndarray  # Nm, F_h
    hysteresis_travel: np.ndarray  # rad, x_h (> 0)
    thermal_coefficient: np.ndarray  # 1/K, k
    thermal_time_constant: np.ndarray  # s, tau_th (> 0)
    thermal_rise_per_watt: np.ndarray  # K/W, R
    copper_loss: np.ndarray  # W/Nm^2, c
    ambient: float = 25.0  # deg C, T_amb (also the start temperature: a cold robot)
    reference: float = 25.0  # deg C, T_ref: the friction parameters hold at this temperature

    @classmethod
    def zeros(cls, n: int) -> JointEffects:
        """No effect at all (the ``ideal`` and ``nominal`` profiles)."""
        z, o, r = np.zeros(n), np.ones(n), np.zeros((n, 0))
        return cls(z, r, r, r, z, o, z, o * 600.0, z, z)

    def __post_init__(self) -> None:
        from idyn_ros.errors import ParameterError

        if np.any(self.hysteresis_travel <= 0) or np.any(self.thermal_time_constant <= 0):
            raise ParameterError("joint effects: hysteresis travel and thermal time constant must be > 0")
        if np.any(self.load_friction < 0) or np.any(self.hysteresis_torque < 0) or np.any(self.copper_loss < 0):
            raise ParameterError("joint effects: load_friction, hysteresis torque and copper_loss must be >= 0")

    @property
    def is_zero(self) -> bool:
        return not (np.any(self.load_friction) or np.any(self.ripple_ratio) or np.any(self.hysteresis_torque)
                    or np.any(self.thermal_coefficient))


def thermal_scale(temperature: np.ndarray, e: JointEffects) -> np.ndarray:
    """Friction scale factor at joint temperatures (deg C): 1 at the reference temperature."""
    return np.maximum(MIN_THERMAL_SCALE, 1.0 - e.thermal_coefficient * (np.asarray(temperature) - e.reference))


@dataclass
class JointEffectState:
    """The effects' state in a running plant: Dahl z (n,), temperatures (n,); per-step math in plain floats.

    Why floats and not numpy in ``torque``: it runs once per physics step for n = 6-7 joints, where every
    numpy call costs ~0.5 us whatever the size (as ``friction.SmoothFriction``).
    """

    effects: JointEffects
    z: list[float] = field(default_factory=list)
    temperature: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        e = self.effects
        self._ripple = [[(float(a), float(c), float(p)) for a, c, p in zip(ra, rc, rp, strict=True) if a]
                        for ra, rc, rp in zip(e.ripple_ratio, e.ripple_order, e.ripple_phase, strict=True)]
        self._hyst = [(float(f), 1.0 / float(x)) for f, x in zip(e.hysteresis_torque, e.hysteresis_travel, strict=True)]
        self.active = not e.is_zero
        self.position_dependent = bool(np.any(e.ripple_ratio) or np.any(e.hysteresis_torque))
        self.reset()

    def reset(self) -> None:
        """Fresh start: z = 0 (no pre-sliding deflection), joints at ambient temperature (decision: a plant reset
        starts a new experiment, so rows of a table never depend on the order they ran in)."""
        n = len(self.effects.load_friction)
        self.z = [0.0] * n
        self.temperature = np.full(n, float(self.effects.ambient))
        self.scale = thermal_scale(self.temperature, self.effects)
        self._scale_list = self.scale.tolist()
        self._ticks = 0

    def dry_friction(self, static: np.ndarray, tau_drive: np.ndarray) -> np.ndarray:
        """Dry (frictionloss) level (Nm) for this control period: load-dependent, temperature-scaled."""
        return self.scale * (static + self.effects.load_friction * np.abs(tau_drive))

    def torque(self, q: list[float], dq: list[float], tau_drive: list[float], dt: float) -> list[float]:
        """Ripple + hysteresis torque (Nm) the drive must add now, while it applies ``tau_drive``; then advances z
        by ``dt`` at ``dq``."""
        out = []
        exp = math.exp
        sin = math.sin
        for i, (qi, vi) in enumerate(zip(q, dq, strict=True)):
            ratio = 0.0
            for a, c, p in self._ripple[i]:
                ratio += a * sin(c * qi + p)
            t = ratio * tau_drive[i]
            f, inv_x = self._hyst[i]
            if f:
                z = self.z[i]
                t += self._scale_list[i] * f * z
                s = 1.0 if vi > 0 else (-1.0 if vi < 0 else 0.0)
                self.z[i] = s + (z - s) * exp(-abs(vi) * dt * inv_x)
            out.append(t)
        return out

    def heat(self, loss_torque: np.ndarray, dq: np.ndarray, tau_drive: np.ndarray, dt: float) -> None:
        """Advance the temperatures by one control period ``dt`` and rescale friction (every THERMAL_DECIMATION-th
        call: an exact first-order step over that many periods with this period's losses)."""
        e = self.effects
        self._ticks += 1
        if self._ticks % THERMAL_DECIMATION or not np.any(e.thermal_coefficient):
            return
        power = np.abs(loss_torque * dq) + e.copper_loss * tau_drive * tau_drive
        steady = e.ambient + e.thermal_rise_per_watt * power
        decay = np.exp(-THERMAL_DECIMATION * dt / e.thermal_time_constant)
        self.temperature = steady + (self.temperature - steady) * decay
        self.scale = thermal_scale(self.temperature, e)
        self._scale_list = self.scale.tolist()
