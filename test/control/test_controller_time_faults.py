"""Time going wrong on the controller's input: re-sent, frozen, jumped-back and future stamps, long silences and a
clock that steps back. Observable outcome: the command of the tick (or of the watchdog check), the mode and its
reason; two cases run closed loop against the MuJoCo true plant with a forward controller that holds the last
command it received, as ros2_control's does."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control.controller import MODE_ACTIVE, MODE_SAFE_DAMPING, Controller
from idyn_ros.control.state_estimation import STALLED_SAMPLES
from idyn_ros.parameters import load

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
MS = 1_000_000
NOW = 1_700_000_000 * 1_000_000_000  # a wall-clock-like time, ns


def _core(**overrides) -> Controller:
    c = Controller.for_robot(load("controller", "panda", overrides={"torque_rate_limit": -1.0, **overrides}, n=7))
    c.activate()
    return c


def _tick(c: Controller, k: int, q=Q0, dq=None, stamp_k: int | None = None, clock_k: int | None = None):
    """State k received at NOW + k ms, stamped at ``stamp_k`` ms (default k), stamp age checked at ``clock_k``."""
    now = NOW + k * MS
    stamp = NOW + (k if stamp_k is None else stamp_k) * MS
    clock = NOW + (k if clock_k is None else clock_k) * MS
    tau = c.update(PANDA, list(q), list(np.zeros(7) if dq is None else dq), [], stamp, now, clock)
    return None if tau is None else tau.copy()


def _moving(c: Controller, ticks: int = 20, speed: float = 1.0) -> np.ndarray:
    """Joint 1 turning at ``speed`` rad/s (a damping hold on this velocity pushes -D dq); returns the last q."""
    q = Q0.copy()
    for k in range(ticks):
        q[0] = speed * k * 1e-3
        _tick(c, k, q, [speed, *[0.0] * 6])
    return q


def _first_command_of_the_check(c: Controller, k_from: int, k_to: int) -> int | None:
    """The first tick (ms) in [k_from, k_to) at which the watchdog check sends a command."""
    for k in range(k_from, k_to):
        if c.check_input(NOW + k * MS) is not None:
            return k
    return None


def test_a_resent_state_is_not_fresh_input_and_reaches_the_stale_hold():
    """A driver re-sending its cached last state (same stamp, same positions) kept the silence watchdog fed: no
    command for 1 s, ACTIVE, the last law torque left applied."""
    c = _core()
    for k in range(10):
        _tick(c, k)
    for k in range(10, 40):  # the same state again every period, received now
        assert _tick(c, k, stamp_k=9) is None
        if c.check_input(NOW + k * MS) is not None:
            break
    assert k <= 9 + 3 + 1, f"the stale hold came only at {k} ms"  # stale_periods 3 after the last fresh state
    assert c.mode == MODE_SAFE_DAMPING and "stale joint state" in c.reason
    np.testing.assert_allclose(c.tau, c.robot.gravity(Q0))


def test_stamps_frozen_while_the_arm_moves_latch_safe_from_the_live_state():
    """Stamps stuck at one value while positions kept coming: every state was a duplicate, nothing was sent."""
    c = _core()
    _moving(c, 10)
    q = Q0.copy()
    q[0] = 0.2
    dq = np.array([0.5, 0, 0, 0, 0, 0, 0])
    for k in range(10, 10 + STALLED_SAMPLES - 1):  # one or two re-stamped states: dropped, nothing sent
        q[0] = 0.2 - 0.01 * (k - 9)
        assert _tick(c, k, q, dq, stamp_k=9) is None and not c.watchdog.tripped
    q[0] = 0.2
    tau = _tick(c, 12, q, dq, stamp_k=9)
    assert tau is not None and c.watchdog.latched and "did not advance" in c.reason
    np.testing.assert_allclose(tau, c.robot.gravity(q) - c.safe_damping * dq)  # live q and dq
    q[0] = 0.3
    for k in range(13, 13 + STALLED_SAMPLES):
        tau = _tick(c, k, q, dq, stamp_k=9)
    np.testing.assert_allclose(tau, c.robot.gravity(q) - c.safe_damping * dq)


@pytest.mark.parametrize("back_ms", [2000, 3600 * 1000])
def test_a_stamp_jump_back_latches_safe_from_the_live_state(back_ms):
    """A bag loop / simulator reset was answered for good with g(q) - D dq of the last state before the jump (the arm
    fell 202 deg at 632 deg/s on the true plant)."""
    c = _core()
    _moving(c, 20)
    q = Q0 + 0.1
    dq = np.full(7, 0.2)
    tau = _tick(c, 20, q, dq, stamp_k=19 - back_ms)
    assert c.mode == MODE_SAFE_DAMPING and c.watchdog.latched and "jumped back" in c.reason
    np.testing.assert_allclose(tau, c.robot.gravity(q) - c.safe_damping * dq)
    q2 = q + 0.01
    np.testing.assert_allclose(_tick(c, 21, q2, dq, stamp_k=20 - back_ms), c.robot.gravity(q2) - c.safe_damping * dq)


def test_a_late_reordered_state_is_dropped_without_a_fault():
    """One state 2 ms out of order latched safe mode for the rest of the run."""
    c = _core()
    _moving(c, 20)
    assert _tick(c, 20, stamp_k=17) is None and c.mode == MODE_ACTIVE
    assert _tick(c, 21, Q0 + np.array([0.021, 0, 0, 0, 0, 0, 0]), [1.0, *[0.0] * 6]) is not None
    assert c.mode == MODE_ACTIVE and c.filter.dropped == 1


@pytest.mark.parametrize("case", ["nan_position", "inf_velocity", "missing_joint"])
def test_a_rejected_state_holds_without_damping_on_the_last_velocity(case):
    """The safe torque for a state it cannot use was g(q) - D dq with the last trusted dq: held, a constant push
    (-10 Nm on joint 1 at 1 rad/s) on an arm that may have stopped long ago."""
    c = _core()
    q_last = _moving(c, 20, speed=1.0)
    q, dq, names = list(q_last), [0.0] * 7, PANDA
    if case == "nan_position":
        q[2] = float("nan")
    elif case == "inf_velocity":
        dq[4] = float("inf")
    else:
        names, q, dq = PANDA[:6], q[:6], dq[:6]
    tau = c.update(names, q, dq, [], NOW + 20 * MS, NOW + 20 * MS, NOW + 20 * MS)
    assert c.watchdog.latched and "rejected" in c.reason
    np.testing.assert_allclose(tau, c.robot.gravity(q_last))


def _silence_then_states(c: Controller, last_k: int, silence_ms: int, q_after=Q0):
    """No state after tick ``last_k`` for ``silence_ms`` (the watchdog check runs every period), then 50 states at
    ``q_after``; the modes of those 50 ticks."""
    assert _first_command_of_the_check(c, last_k + 1, last_k + silence_ms) is not None  # stale: the hold
    for k in range(last_k + 1, last_k + silence_ms):
        c.check_input(NOW + k * MS)
    return [(_tick(c, k, q_after), c.mode)[1] for k in range(last_k + silence_ms, last_k + silence_ms + 50)]


def test_a_silence_longer_than_max_recovery_silence_latches_until_reactivated():
    """After a 5 s pause the law came back by itself against a reference the arm was 148 deg from: commands at the
    87 Nm effort limit, 378 deg/s."""
    c = _core()
    c.set_reference(PANDA, Q0, np.zeros(7), np.zeros(7))
    for k in range(10):
        _tick(c, k)
    moved = Q0 + 0.3  # where the arm drifted under the hold torque meanwhile
    modes = _silence_then_states(c, 9, 600, moved)
    assert all(m == MODE_SAFE_DAMPING for m in modes) and c.watchdog.latched
    assert "joint states silent for 0.600 s, longer than max_recovery_silence (0.5 s)" in c.reason
    assert "deactivate and activate" in c.reason
    np.testing.assert_allclose(c.tau, c.robot.gravity(moved))  # the safe hold at the live pose, not the law
    c.deactivate()
    c.activate()  # holds the pose it finds: no jump towards the old reference
    taus = [_tick(c, k, moved) for k in range(700, 720)]
    assert c.mode == MODE_ACTIVE and np.all(np.isfinite(taus))
    assert np.abs(c.q_d - moved).max() == 0.0


@pytest.mark.parametrize("reference_first", [False, True])
def test_after_reactivation_the_reference_that_ran_on_comes_back_as_a_move_not_a_step(reference_first):
    """Activation held the new pose only until the next reference: the reference node, paused with its input, still
    sent the pose from before the silence, and the law pulled the arm 0.3 rad back at once. Whether that reference
    reaches the controller before or after its first state, it is now blended in from the held pose."""
    from idyn_ros.control.reference import move_in_duration
    from idyn_ros.data.limits import planning_acceleration_limits

    c = _core()
    c.set_reference(PANDA, Q0, np.zeros(7), np.zeros(7))
    for k in range(10):
        _tick(c, k)
    moved = Q0 + 0.3
    _silence_then_states(c, 9, 600, moved)
    assert c.watchdog.latched
    c.deactivate()
    c.activate()
    if reference_first:
        c.set_reference(PANDA, Q0, np.zeros(7), np.zeros(7))
    q_d = []
    for k in range(700, 3700):  # the reference node sends the old pose again with every state
        _tick(c, k, moved)
        q_d.append(c.q_d.copy())
        c.set_reference(PANDA, Q0, np.zeros(7), np.zeros(7))
    q_d = np.array(q_d)
    np.testing.assert_allclose(q_d[0], moved)  # no step at activation
    duration = move_in_duration(moved, Q0, c.robot.velocity_limit, planning_acceleration_limits("panda", 7))
    k_end = int(np.ceil(duration / 1e-3))
    speed = np.abs(np.diff(q_d, axis=0)).max(axis=0) / 1e-3
    assert np.all(speed <= 0.5 * c.robot.velocity_limit * 1.01)  # the reference node's move-in speed, at most
    np.testing.assert_allclose(q_d[k_end + 2], Q0, atol=1e-12)  # then the reference itself
    assert 0.5 < duration < 3.0 and np.abs(q_d[k_end // 2] - Q0).max() > 0.1  # a move, not a step


def test_a_first_reference_at_the_held_pose_is_taken_as_it_is():
    """At start-up the reference holds the pose the controller holds: no move to blend (the benchmarks' start)."""
    c = _core()
    c.set_reference(PANDA, Q0 + 5e-4, np.zeros(7), np.zeros(7))
    _tick(c, 0)
    np.testing.assert_allclose(c.q_d, Q0 + 5e-4)
    assert c._capture_ticks == 0


def test_a_shorter_recovery_ramp_set_mid_ramp_blends_between_safe_and_law_torque():
    """recovery_ramp lowered at run time while the law was being blended back in: alpha = 1 - ticks / total went to
    -18.5 and the command to the effort limit on the far side of the safe torque, away from the law."""
    c = _core(recovery_ramp=0.2)
    c.set_reference(PANDA, Q0 + 0.05, np.zeros(7), np.zeros(7))  # the law pushes: it differs from the safe torque
    for k in range(10):
        _tick(c, k)
    modes = _silence_then_states(c, 9, 30)
    assert modes[-1] == MODE_ACTIVE and c._ramp_ticks > 100  # recovering, early in the 200-tick ramp
    c.set_params(c.params.replace(recovery_ramp=0.01))
    k = 9 + 30 + len(modes)
    c._law(Q0, np.zeros(7), NOW + k * MS)
    law_tau = c.tau.copy()
    tau = _tick(c, k)
    safe = c._safe.copy()
    low, high = np.minimum(safe, law_tau), np.maximum(safe, law_tau)
    assert np.all(tau >= low - 1e-9) and np.all(tau <= high + 1e-9), (tau, safe, law_tau)
    for j in range(k + 1, k + 12):
        tau = _tick(c, j)
    assert c.reason == "" and c._ramp_ticks == 0  # the shorter ramp has ended


@pytest.mark.parametrize(("silence_ms", "overrides"), [(300, {}), (600, {"max_recovery_silence": 0.0})])
def test_a_shorter_silence_or_max_recovery_silence_0_still_recovers_with_the_ramp(silence_ms, overrides):
    c = _core(**overrides)
    for k in range(10):
        _tick(c, k)
    modes = _silence_then_states(c, 9, silence_ms)
    assert modes[-1] == MODE_ACTIVE and c.watchdog.recoveries == 1 and not c.watchdog.latched
    assert c.longest_silence_ns == silence_ms * MS


def test_a_clock_that_went_back_does_not_blind_the_silence_check():
    """/clock back 9 s (a simulator reset), then no state: the check saw a negative age and never answered."""
    c = _core()
    for k in range(10_000):
        _tick(c, k)
        assert c.check_input(NOW + k * MS) is None  # the node's watchdog check runs every period
    back = 10_000 - 9_000  # the clock now reads 1 s, the last state was received at 10 s
    first = _first_command_of_the_check(c, back, back + 100)
    assert first is not None and first - back <= 3 + 1, first
    assert "stale joint state" in c.reason


def test_a_clock_lagging_behind_the_stamps_is_not_silence():
    """Under sim time the node takes a state stamped ahead of a lagging /clock as received at its stamp; the check
    then read the lagging clock as a clock that went back, and tripped "stale joint state: none for 4 ms" in a
    lockstep launch once /clock caught up, though every state had been answered."""
    c = _core()
    for k in range(100):
        _tick(c, k)
        assert c.check_input(NOW + (k - 3) * MS) is None  # /clock read 3 periods behind the state just answered
    for k in range(96, 101):  # /clock catches up, and reads the plant's next period before its state is read
        assert c.check_input(NOW + k * MS) is None, k
    assert c.mode == MODE_ACTIVE


def test_a_stamp_ahead_of_the_clock_is_late_input_that_says_the_clocks_are_not_synchronised():
    """With the robot's clock 2 s ahead the stamp-age check accepted every state, even one 1.5 s late."""
    c = _core()
    for k in range(5):
        _tick(c, k)
    tau = _tick(c, 5, stamp_k=5 + 2000)
    np.testing.assert_allclose(tau, c.robot.gravity(Q0))
    assert c.mode == MODE_SAFE_DAMPING and not c.watchdog.latched
    assert "clocks not synchronised" in c.reason and "2000.00 ms ahead of this machine's clock" in c.reason
    assert "chrony/PTP" in c.reason and "max_stamp_age: 0" in c.reason


def test_states_all_about_equally_old_say_the_robots_clock_is_behind_and_still_recover():
    """A robot clock 60 ms behind read "stale joint state: stamp 60.00 ms old" for good: it sounds like transport."""
    c = _core()
    for k in range(5):
        _tick(c, k)
    jitter = [0, 1, 0, 2, 1]
    for k in range(5, 5 + 99):
        _tick(c, k, stamp_k=k, clock_k=k + 60 + jitter[k % 5])
    assert c.reason.startswith("stale joint state: stamp")  # not yet: 99 in a row
    _tick(c, 104, stamp_k=104, clock_k=104 + 60)
    assert c.reason.startswith("clocks not synchronised: the robot's clock is ~61 ms behind this machine's"), c.reason
    assert "chrony/PTP" in c.reason and not c.watchdog.latched
    for k in range(105, 105 + c.params.recovery_ticks):
        _tick(c, k)  # synchronised again: the law comes back as for any late input
    assert c.mode == MODE_ACTIVE


def test_states_late_by_varying_amounts_stay_a_stale_joint_state():
    c = _core()
    for k in range(5):
        _tick(c, k)
    for k in range(5, 305):
        _tick(c, k, stamp_k=k, clock_k=k + 60 + (k % 40))  # a transport backlog: ages 60-99 ms
    assert c.reason.startswith("stale joint state: stamp"), c.reason


# ---------------------------------------------------------------------------------------- closed loop
def _closed_loop(c: Controller, seconds: float, stamp_of=None, silent=None) -> dict[str, np.ndarray]:
    """The core against the true Panda plant; the forward controller holds the last command it received."""
    from idyn_ros.control.reference import MinJerkMove
    from idyn_ros.sim import Plant

    plant = Plant("panda", profile="true", seed=0)
    state = plant.reset(Q0)
    move = MinJerkMove(Q0, [Q0, Q0 + np.array([0.6, 0.4, 0.0, 0.5, 0.0, -0.4, 0.0])], [0.3, 2.0])
    names, dt = list(plant.joint_names), plant.control_dt
    steps = round(seconds / dt)
    held = np.zeros(7)
    out = {"q": np.zeros((steps, 7)), "q_d": np.zeros((steps, 7)), "cmd": np.zeros((steps, 7))}
    for k in range(steps):
        t_ns = NOW + k * MS
        q_d, dq_d, ddq_d = move.sample(k * dt)
        c.set_reference(names, q_d, dq_d, ddq_d)
        if not (silent and silent(k)):
            stamp = stamp_of(k, t_ns) if stamp_of else t_ns
            tau = c.update(names, state.q, state.dq, state.tau, stamp, t_ns, t_ns)
            if tau is not None:
                held[:] = tau
        check = c.check_input(t_ns)
        if check is not None:
            held[:] = check
        out["q"][k], out["q_d"][k], out["cmd"][k] = state.q, q_d, held
        state = plant.step(held.copy())
    return out


def _peak_speed_deg_s(q: np.ndarray) -> float:
    return float(np.degrees(np.abs(np.diff(q, axis=0)).max() * 1000))


def test_closed_loop_frozen_stamps_mid_move_no_longer_leave_the_law_torque_applied():
    """Stamps frozen at 1.0 s mid-move, positions still coming: the held law torque drove the true plant 125 deg
    from the reference at up to 474 deg/s."""
    c = _core(torque_rate_limit=1000.0, model_path="")
    freeze = NOW + 1000 * MS
    run = _closed_loop(c, 1.6, stamp_of=lambda k, t: min(t, freeze))
    after = slice(1000, None)
    assert c.watchdog.latched and "did not advance" in c.reason
    assert _peak_speed_deg_s(run["q"][after]) < 60.0  # the safe torque follows the live state (was 474 deg/s)


def test_closed_loop_a_long_pause_does_not_bring_back_a_stiff_law_far_from_the_reference():
    """/joint_states silent for 1 s mid-move, the reference running on: the law came back by itself against the arm's
    drift, at the effort limits."""
    c = _core(torque_rate_limit=1000.0, model_path="")
    run = _closed_loop(c, 2.5, silent=lambda k: 1000 <= k < 2000)
    after = slice(2000, None)
    assert c.watchdog.latched and "joint states silent for" in c.reason
    near_limit = np.abs(run["cmd"][after]) >= 0.95 * c.limiter.limit
    assert not near_limit.any()
