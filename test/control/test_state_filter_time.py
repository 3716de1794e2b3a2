"""JointStateFilter when time goes wrong on the input: late, re-sent, stalled, jumped-back and negative stamps."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control import state_estimation as se

NAMES = ["a", "b", "c"]
MS = 1_000_000
T0 = 1_700_000_000 * 1_000_000_000  # a wall-clock stamp


def _feed(f: se.JointStateFilter, q, stamp_ns: int, dq=()) -> int:
    return f.update(NAMES, list(q), list(dq), [], stamp_ns)


def _moving(f: se.JointStateFilter, k_from: int, k_to: int, speed: float = 0.5, stamp_offset_ns: int = 0) -> None:
    for k in range(k_from, k_to):
        assert _feed(f, [speed * k * 1e-3] * 3, T0 + k * MS + stamp_offset_ns) == se.OK


def test_status_codes_keep_their_numbers_and_restarts_are_not_ok():
    assert (se.OK, se.DUPLICATE, se.REJECT_NAMES, se.REJECT_NONFINITE, se.REJECT_BACKWARDS, se.REJECT_LENGTH) == (
        0, 1, 2, 3, 4, 5)
    assert set(se.RESTARTS) == {se.RESTART_BACKWARDS, se.RESTART_STALLED, se.RESTART_SOURCE}
    codes = [se.OK, se.DUPLICATE, se.REJECT_NAMES, se.REJECT_NONFINITE, se.REJECT_BACKWARDS, se.REJECT_LENGTH,
             se.RESTART_BACKWARDS, se.RESTART_STALLED, se.REJECT_STAMP, se.FOREIGN, se.SECOND_SOURCE, se.RESTART_SOURCE]
    assert len(set(codes)) == len(codes) and all(c in se.STATUS_TEXT for c in codes)


def test_a_late_sample_is_dropped_and_counted_not_an_error():
    """A sample 1 ms out of order was REJECT_BACKWARDS, which latched the controller's safe mode for good."""
    f = se.JointStateFilter(NAMES, 1000.0)
    _moving(f, 0, 10)
    q_before = f.q.copy()
    assert _feed(f, [9.0] * 3, T0 + 8 * MS) == se.DUPLICATE
    assert f.dropped == 1
    np.testing.assert_array_equal(f.q, q_before)
    _moving(f, 10, 12)  # carries on
    assert f.gaps == 0


def test_a_resent_sample_is_a_counted_duplicate_but_a_stalled_stamp_restarts_on_the_live_sample():
    """Stamps frozen while positions kept coming were all DUPLICATE: the controller's watchdog stayed fed."""
    f = se.JointStateFilter(NAMES, 1000.0)
    _moving(f, 0, 10)
    stamp = f.stamp_ns
    assert _feed(f, f.q.copy(), stamp) == se.DUPLICATE  # re-sent
    assert f.dropped == 1
    # re-stamped with other positions: a driver publishing twice per cycle, or stamping at 1 ms, latched the
    # controller on one such state; only STALLED_SAMPLES in a row are a stalled clock
    for k in range(se.STALLED_SAMPLES - 1):
        assert _feed(f, [0.1 + 0.01 * k] * 3, stamp, dq=[0.5] * 3) == se.DUPLICATE
    assert f.dropped == se.STALLED_SAMPLES
    assert _feed(f, [0.2] * 3, stamp, dq=[0.5] * 3) == se.RESTART_STALLED
    assert "did not advance" in f.reason and "estimators restarted" in f.reason
    np.testing.assert_allclose(f.q, [0.2] * 3)  # live
    np.testing.assert_allclose(f.dq, [0.5] * 3)  # measured
    np.testing.assert_array_equal(f.ddq, 0.0)
    assert _feed(f, [0.2005] * 3, stamp + MS, dq=[0.5] * 3) == se.OK  # continues from it


@pytest.mark.parametrize("jump_ms", [2000.0, 3.5])
def test_a_stamp_far_behind_restarts_the_filter_on_the_live_sample(jump_ms):
    """A bag loop / simulator reset was REJECT_BACKWARDS forever after (the estimate frozen at the old state)."""
    f = se.JointStateFilter(NAMES, 1000.0)
    _moving(f, 0, 100)
    back = round(jump_ms * MS)
    status = _feed(f, [1.0, 2.0, 3.0], f.stamp_ns - back, dq=[0.1, 0.2, 0.3])
    assert status == se.RESTART_BACKWARDS and status in se.RESTARTS
    assert f"jumped back by {jump_ms:.3f} ms" in f.reason and "source restarted" in f.reason
    np.testing.assert_allclose(f.q, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(f.dq, [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(f.ddq, 0.0)
    restart_stamp = f.stamp_ns
    for k in range(1, 5):
        assert _feed(f, [1.0 + 1e-4 * k, 2.0, 3.0], restart_stamp + k * MS, dq=[0.1, 0.2, 0.3]) == se.OK
    assert f.samples == 105  # counters survive a restart


def test_one_future_stamp_does_not_lock_out_every_correct_state():
    """One state stamped 1 h ahead made every correct state REJECT_BACKWARDS for an hour."""
    f = se.JointStateFilter(NAMES, 1000.0)
    _moving(f, 0, 10)
    assert _feed(f, [0.0] * 3, T0 + 3600 * 1000 * MS) == se.OK  # a gap: accepted, differentiators restarted
    assert _feed(f, [0.0051] * 3, T0 + 11 * MS) == se.RESTART_BACKWARDS
    _moving(f, 12, 20)


def test_negative_stamps_are_rejected_and_never_look_like_the_first_sample():
    """Negative stamps were each taken as a first sample: -5 s, -5 s, -6 s were all ok."""
    f = se.JointStateFilter(NAMES, 1000.0)
    for stamp in (-5_000 * MS, -5_000 * MS, -6_000 * MS, -1):
        assert _feed(f, [0.0] * 3, stamp) == se.REJECT_STAMP
        assert "negative stamp" in f.reason
    assert f.samples == 0
    assert _feed(f, [0.0] * 3, 0) == se.OK  # a zero stamp is a real one (a driver without a time source)
    assert _feed(f, [0.0] * 3, 0) == se.DUPLICATE
    for k in range(se.STALLED_SAMPLES - 1):
        assert _feed(f, [0.05 + 0.01 * k] * 3, 0) == se.DUPLICATE
    assert _feed(f, [0.1] * 3, 0) == se.RESTART_STALLED


def test_no_acceleration_spike_after_a_restart_without_measured_velocity():
    """Joints at 0.5 rad/s, no velocity in the message, a 4 ms gap: dq read 0 once, then ddq peaked at 70.9 rad/s^2."""
    f = se.JointStateFilter([f"panda_joint{i}" for i in range(1, 8)], 1000.0)
    names = list(f.joint_names)
    peak = 0.0
    for k in [*range(0, 20), *range(24, 80)]:
        assert f.update(names, [0.5 * k * 1e-3] * 7, [], [], T0 + k * MS) == se.OK
        if k >= 20:
            peak = max(peak, float(np.max(np.abs(f.ddq))))
    assert peak < 1.0
    assert f.dq[0] == pytest.approx(0.5)
    assert f.gaps == 1


def test_no_acceleration_spike_after_the_first_sample_without_measured_velocity():
    f = se.JointStateFilter(NAMES, 1000.0)
    for k in range(30):
        assert _feed(f, [0.5 * k * 1e-3] * 3, T0 + k * MS) == se.OK
        assert np.max(np.abs(f.ddq)) < 1.0


def test_a_filter_without_acceleration_runs_at_the_rate_of_lbr_fri_ros2_stack():
    """100 Hz (FRI send period 10 ms): the 50 Hz acceleration low-pass sat at Nyquist, and every node refused to
    start there, even those that never estimate ddq."""
    from idyn_ros.errors import ParameterError

    names = [f"j{i}" for i in range(3)]
    f = se.JointStateFilter(names, 100.0, estimate_acceleration=False)
    assert f.update(names, [0.1, 0.2, 0.3], [0.0] * 3, [0.0] * 3, T0) == se.OK
    with pytest.raises(ParameterError, match="Nyquist"):  # one that does keeps its check
        se.JointStateFilter(names, 100.0)
