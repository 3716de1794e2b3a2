"""The wrench observer and its trust stage across gaps and stamp jumps in the joint states (no ROS)."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control.wrench import WrenchObserver
from idyn_ros.control.wrench_trust import TrustedWrench
from idyn_ros.dynamics import RobotModel

Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
DRIFT = np.array([0.0, 0.4, 0.0, 0.3, 0.0, 0.0, 0.0])  # rad/s: the arm drifting under a held torque
MS = 1_000_000
T0 = 1_700_000_000 * 1_000_000_000
ZERO = np.zeros(7)


@pytest.fixture(scope="module")
def panda() -> RobotModel:
    return RobotModel.from_robot("panda")


def _force_after_a_silence(rbd: RobotModel, silence_ms: int, stamp_jump_ms: int = 0) -> tuple[float, float]:
    """(|F| at the first state after the silence, max |F| over the next 100 ms), no external force anywhere: the arm
    held by gravity compensation at Q0, then states stop; when they come back it has drifted and moves at DRIFT (the
    first state after the silence comes with the torque held over it, later ones with the consistent torque)."""
    obs = WrenchObserver(rbd, 1000.0)
    for k in range(500):
        obs.update(T0 + k * MS, Q0, ZERO, rbd.gravity(Q0))
    q_resume = Q0 + DRIFT * silence_ms * 1e-3 / 2
    forces = []
    for i in range(100):
        q = q_resume + DRIFT * i * 1e-3
        tau = rbd.gravity(Q0) if i == 0 else rbd.rnea(q, DRIFT, ZERO)
        obs.update(T0 + (499 + silence_ms + stamp_jump_ms + i) * MS, q, DRIFT, tau)
        forces.append(float(np.linalg.norm(obs.wrenches(q)[1][:3])))
    return forces[0], max(forces)


@pytest.mark.parametrize(("silence_ms", "jump_ms"), [(500, 0), (5000, 0), (1, 5000)])
def test_the_momentum_observer_restarts_after_a_gap_instead_of_integrating_over_it(panda, silence_ms, jump_ms):
    """Integrated over the gap with the last torque it read 166 N after 0.5 s and 26759 N after 5 s (here; 19-1298 N
    on the closed-loop recording of the review), and as much after a +5 s stamp jump with nothing missing."""
    at_resume, peak = _force_after_a_silence(panda, silence_ms, jump_ms)
    assert at_resume == 0.0
    assert peak < 0.01


def test_a_short_period_jitter_is_not_a_gap(panda):
    obs = WrenchObserver(panda, 1000.0)
    assert obs.max_gap_ns == 3 * MS
    stamps = [T0, T0 + MS, T0 + 3 * MS, T0 + 6 * MS]  # steps of 1, 2, 3 ms: all within the gap
    assert [obs.update(s, Q0, ZERO, panda.gravity(Q0)) for s in stamps] == [False, True, True, True]
    assert not obs.update(T0 + 10 * MS, Q0, ZERO, panda.gravity(Q0))  # 4 ms: restarts


def _rest(trust: TrustedWrench, k_from: int, k_to: int) -> None:
    for k in range(k_from, k_to):
        trust.update(T0 + k * MS, Q0, ZERO, ZERO)


def test_the_trust_stage_restarts_its_rest_and_bias_windows(panda):
    """Its rest detector and bias window measured rest_time across a gap: at rest (and a re-zero) at the first state."""
    trust = TrustedWrench(panda)
    rest_ms = round(trust.settings.rest_time * 1000)
    _rest(trust, 0, 100)
    trust.restart()
    trust.update(T0 + (100 + rest_ms + 100) * MS, Q0, ZERO, ZERO)  # the first state after a gap longer than rest_time
    assert not trust.out.at_rest and not trust.out.rezeroed
    _rest(trust, 100 + rest_ms + 101, 100 + 2 * rest_ms + 101)
    assert trust.out.at_rest  # at rest again after rest_time of watched stillness


def test_a_stamp_going_back_restarts_the_trust_windows_by_itself(panda):
    trust = TrustedWrench(panda)
    _rest(trust, 1000, 1700)
    assert trust.out.at_rest
    trust.update(T0, Q0, ZERO, ZERO)  # 1.7 s back
    assert not trust.out.at_rest and trust.rest.still_since_ns == T0
