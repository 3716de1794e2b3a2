"""End to end over DDS against the MuJoCo plant (lockstep, 'true' profile): slow, run with -m slow."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_feedforward_improves_tracking_of_a_min_jerk_move():
    from idyn_ros.bench.latency import measure_tracking

    with_ff = measure_tracking("ur5", "medium", True)
    without = measure_tracking("ur5", "medium", False)
    assert with_ff["completed"] and without["completed"] and not with_ff["safe_mode_seen"]
    assert with_ff["move_rmse_deg"] < 0.7 * without["move_rmse_deg"]


def test_doomed_compensates_a_payload_and_catches_oscillation():
    from idyn_ros.bench.latency import measure_doomed

    off, on, wild = measure_doomed("panda", learning_rates=(0.0, 0.05, 1.0))  # 1.0: the parameter's bound
    assert on["move_rmse_deg"] < 0.5 * off["move_rmse_deg"]
    # over DDS the ratio varies run to run with message timing (0.28-0.50 in five runs): 0.6 still fails without DOOMED
    assert on["mean_abs_acc_error"] < 0.6 * off["mean_abs_acc_error"] and not on["oscillation_caught"]
    assert wild["oscillation_caught"]
