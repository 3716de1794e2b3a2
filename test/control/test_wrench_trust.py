"""The trust stage of the wrench observer (control/wrench_trust.py) and effort -> torque (control/effort.py)."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control.wrench_trust import ContactWrenchMapper, TrustedWrench, TrustSettings
from idyn_ros.errors import ParameterError


@pytest.fixture(scope="module")
def ur5():
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot("ur5")


Q0 = np.array([0.0, -1.571, 1.571, -1.571, -1.571, 0.0])
WRIST_SINGULAR = np.array([0.0, -1.571, 1.571, -1.571, 0.0, 0.0])  # wrist_2 at 0: joints 4 and 6 aligned


def test_effort_to_torque_says_where_its_gains_come_from():
    from idyn_ros.control.effort import EffortToTorque

    model = {"kind": "current", "torque_constants": [2.0, 3.0]}
    conv = EffortToTorque("auto", 2, model)
    np.testing.assert_allclose(conv.torque(np.array([1.0, 2.0])), [2.0, 6.0])
    out = np.zeros(2)
    conv.torque(np.array([1.0, 1.0]), out=out)
    np.testing.assert_allclose(out, [2.0, 3.0])
    assert "model's metadata" in conv.describe() and not conv.warning
    assert EffortToTorque("auto", 2, {"kind": "torque"}).unit == "torque"
    assert "torque_constants parameter" in EffortToTorque("current", 2, model, (5.0, 5.0)).describe()
    fallback = EffortToTorque("current", 2, None, (), np.array([1.0, 1.0]))
    assert "robot data" in fallback.describe() and fallback.warning
    assert EffortToTorque("torque", 2, model).warning  # a current model fed torques: said, not hidden
    # torque_constants set with effort_unit auto and a model without gains: the efforts are currents (they were read
    # as Nm, the gains ignored without a word)
    given = EffortToTorque("auto", 2, None, (5.0, 5.0))
    assert given.unit == "current" and "torque_constants parameter" in given.describe()
    np.testing.assert_allclose(given.torque(np.array([1.0, 2.0])), [5.0, 10.0])
    with pytest.raises(ParameterError, match="no gains"):
        EffortToTorque("current", 2, None)
    with pytest.raises(ParameterError, match="2 finite gains"):
        EffortToTorque("current", 2, None, (1.0, -1.0))


def test_mahalanobis_is_the_pseudo_inverse_distance_also_where_the_covariance_is_singular():
    from idyn_ros.control.wrench_trust import mahalanobis

    rng = np.random.default_rng(3)
    for rank in (3, 2, 1, 0):
        a = rng.normal(size=(3, rank))
        cov = a @ a.T
        x = rng.normal(size=3)
        expected = np.sqrt(max(x @ np.linalg.pinv(cov, rcond=1e-9, hermitian=True) @ x, 0.0))
        assert mahalanobis(x, cov) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def _mahalanobis_by_eigh(x: np.ndarray, cov: np.ndarray, rcond: float = 1e-9) -> float:
    """The eigen-decomposition version of ``mahalanobis`` (the one it had before its 3x3 Cholesky shortcut)."""
    w, v = np.linalg.eigh(cov)
    keep = np.abs(w) > rcond * np.abs(w).max()
    proj = v.T @ x
    return float(np.sqrt(max(float(np.sum(proj[keep] ** 2 / w[keep])), 0.0)))


def test_the_3x3_mahalanobis_distance_equals_the_eigen_decomposition_version(ur5):
    """The contact detector's force covariances (at random poses, both contact models) and random SPD matrices with
    condition numbers up to ~1e12: within 1e-12 relative where the Cholesky shortcut answers, identical where the
    covariance is too badly conditioned for it (near a singularity) and eigh answers as before."""
    from idyn_ros.control.wrench_trust import _mahalanobis_3x3, mahalanobis

    rng = np.random.default_rng(5)
    cases = []
    for contact_model in ("wrench", "point"):
        mapper = ContactWrenchMapper(ur5, TrustSettings(contact_model=contact_model))
        for _ in range(300):
            q = ur5.lower + (ur5.upper - ur5.lower) * rng.uniform(size=6)
            mapper.map(q, rng.normal(size=6) * 5, np.abs(rng.normal(size=6)) + 0.05)
            cases.append((mapper._f[:3] * 10 ** rng.uniform(-3, 3), mapper.cov[:3, :3].copy()))
    for _ in range(3000):
        a = rng.normal(size=(3, 3)) * 10 ** rng.uniform(-3, 3, size=3)
        cases.append((rng.normal(size=3), a @ a.T))
    shortcut = 0
    for x, cov in cases:
        expected = _mahalanobis_by_eigh(x, cov)
        if _mahalanobis_3x3(x, cov) is None:
            assert mahalanobis(x, cov) == expected
        else:
            shortcut += 1
            assert mahalanobis(x, cov) == pytest.approx(expected, rel=1e-12, abs=0.0)
    assert 100 < shortcut < len(cases) - 100  # both paths taken


def test_mapper_recovers_a_wrench_and_says_where_it_is_blind(ur5):
    F = np.array([3.0, -2.0, 5.0, 0.4, -0.3, 0.2])
    sigma = np.array([2.0, 2.0, 1.5, 0.5, 0.5, 0.5])
    m = ContactWrenchMapper(ur5, TrustSettings(damping=0.0))  # exact without the prior (the default shrinks ~1 %)
    J, _ = ur5.flange_jacobian(Q0)
    np.testing.assert_allclose(m.map(Q0, J.T @ F, sigma), F, atol=1e-9)
    assert m.rank == 6 and m.unobservable.shape == (0, 6)
    J, _ = ur5.flange_jacobian(WRIST_SINGULAR)
    est = m.map(WRIST_SINGULAR, J.T @ F, sigma)
    assert m.rank == 5
    u = m.unobservable[0]
    assert np.abs(J.T @ u).max() < 1e-9  # a wrench the joints do not feel
    np.testing.assert_allclose(est, F - (F @ u) * u, atol=1e-9)  # the rest estimated, not shrunk


def test_mapper_full_rank_shortcut_is_the_projected_solution(ur5):
    """With every direction kept the mapper inverts H itself; U (U^T H U)^-1 U^T is the same matrix."""
    sigma = np.array([2.0, 2.0, 1.5, 0.5, 0.5, 0.5])
    for model in ("wrench", "point"):
        m = ContactWrenchMapper(ur5, TrustSettings(contact_model=model))
        m.map(Q0, np.ones(6), sigma)
        J, _ = ur5.flange_jacobian(Q0)
        U = np.linalg.svd(J)[0]
        w = 1.0 / sigma**2
        H = (J * (w / w.mean())) @ J.T + 0.01**2 * np.eye(6)
        if model == "point":
            H[3:, 3:] += np.eye(3) / w.mean()
        h_inv = U @ np.linalg.inv(U.T @ H @ U) @ U.T
        np.testing.assert_allclose(m.P, h_inv @ (J * (w / w.mean())), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(m.cov, h_inv / w.mean(), rtol=1e-9, atol=1e-15)


def test_point_contact_model_uses_the_redundancy_against_model_errors(ur5):
    f = np.array([0.0, 0.0, -20.0])
    J, _ = ur5.flange_jacobian(Q0)
    tau = J.T @ np.concatenate([f, np.zeros(3)])
    sigma = np.full(6, 1.0)
    wrench = ContactWrenchMapper(ur5, TrustSettings(contact_model="wrench", damping=0.0))
    point = ContactWrenchMapper(ur5, TrustSettings(contact_model="point", point_moment_nm=0.1, damping=0.0))
    errors = np.random.default_rng(0).normal(0.0, 1.0, (200, 6))  # joint torque errors of 1 Nm (= sigma)
    rms = [np.sqrt(np.mean([np.sum((m.map(Q0, tau + e, sigma)[:3] - f) ** 2) for e in errors]))
           for m in (wrench, point)]
    assert rms[1] < 0.8 * rms[0], rms  # 6 torques for 3 forces instead of 6 wrench components
    np.testing.assert_allclose(point.map(Q0, tau, sigma)[:3], f, atol=1e-6)  # exact without error


def _feed(trust, ur5, seconds, tau, q=Q0, dq=None, t0=0.0, rate=500.0):
    """Run the trust stage on a constant external torque ``tau`` (Nm) at pose ``q``; returns the last estimate."""
    dq = np.zeros(6) if dq is None else dq
    est = None
    for k in range(int(seconds * rate)):
        est = trust.update(round((t0 + k / rate) * 1e9), q, dq, tau)
    return est


def _push(ur5, force_n, q=Q0):
    J, _ = ur5.flange_jacobian(q)
    return J.T @ np.array([0.0, 0.0, force_n, 0.0, 0.0, 0.0])


def test_auto_rezero_at_rest_removes_the_bias_and_keeps_a_contact(ur5):
    bias = np.array([1.0, -2.0, 0.5, 0.2, -0.1, 0.05])  # the model's error at this pose
    trust = TrustedWrench(ur5, tau_sigma=np.full(6, 1.0), tau_sigma_rest=np.full(6, 0.05))
    est = _feed(trust, ur5, 0.4, bias)
    assert not est.zeroed  # not yet at rest long enough
    est = _feed(trust, ur5, 1.0, bias, t0=0.4)
    assert est.zeroed and np.abs(est.tau_ext).max() < 1e-12 and not est.contact
    est = _feed(trust, ur5, 1.5, bias + _push(ur5, -10.0), t0=1.4)  # a push at the same pose, < settle_time
    assert est.contact and est.zeroed  # detected, and not re-zeroed away
    np.testing.assert_allclose(est.base[2], -10.0, rtol=0.01)  # the default damping (a prior) shrinks it 0.1 %


def test_the_bias_applies_at_the_pose_it_was_taken_at_only(ur5):
    stuck = np.array([2.0, -3.0, 1.0, 0.3, -0.2, 0.1])  # at rest: the model's error here + the joints' friction state
    trust = TrustedWrench(ur5, tau_sigma=np.full(6, 1.0), tau_sigma_rest=np.full(6, 0.05))
    assert _feed(trust, ur5, 1.4, stuck).zeroed
    moving = np.array([0.1, -0.4, 0.2, 0.0, 0.1, 0.0])  # in motion the friction state is gone
    est = _feed(trust, ur5, 0.2, moving, q=Q0 + 0.2, dq=np.full(6, 0.3), t0=1.4)
    np.testing.assert_allclose(est.tau_ext, moving)  # not moving - stuck: that would read as a push
    assert not est.zeroed  # and the estimate says it is not re-zeroed here
    est = _feed(trust, ur5, 0.1, stuck, q=Q0 + 0.01, t0=1.6)  # back within pose_tolerance: the bias holds again
    assert np.abs(est.tau_ext).max() < 1e-12 and not est.contact


def test_settled_friction_request_and_expected_contact(ur5):
    sigma, rest = np.full(6, 1.0), np.full(6, 0.05)
    trust = TrustedWrench(ur5, TrustSettings(settle_time=1.0), sigma, rest)
    _feed(trust, ur5, 1.2, np.zeros(6))
    est = _feed(trust, ur5, 3.0, _push(ur5, -3.0), t0=1.2)  # a small steady offset that stays: settled friction
    assert est.zeroed and not est.contact and abs(est.base[2]) < 1e-6
    est = trust.update(round(5e9), Q0, np.zeros(6), _push(ur5, -8.0))
    assert est.contact
    trust.rezero()  # the node's ~/rezero service
    est = trust.update(round(5.002e9), Q0, np.zeros(6), _push(ur5, -8.0))
    assert est.rezeroed and abs(est.base[2]) < 1e-9
    expecting = TrustedWrench(ur5, TrustSettings(), sigma, rest)
    expecting.bias.contact_expected = True
    assert not _feed(expecting, ur5, 2.0, _push(ur5, -8.0)).zeroed


def test_a_new_pose_reached_without_contact_is_rezeroed_with_contact_it_is_not(ur5):
    sigma, rest = np.full(6, 1.0), np.full(6, 0.05)
    q1 = Q0 + 0.2
    for contact_on_the_way, expect_zeroed in ((False, True), (True, False)):
        trust = TrustedWrench(ur5, TrustSettings(), sigma, rest)
        _feed(trust, ur5, 1.2, np.zeros(6))
        on_the_way = _push(ur5, -15.0) if contact_on_the_way else np.zeros(6)
        _feed(trust, ur5, 0.2, on_the_way, t0=1.2)  # the push detected at rest ...
        _feed(trust, ur5, 0.5, on_the_way, q=(Q0 + q1) / 2, dq=np.full(6, 0.4), t0=1.4)  # ... then moving
        bias_there = np.full(6, 0.7) + on_the_way  # another pose, another bias (+ the push, if it holds)
        est = _feed(trust, ur5, 1.2, bias_there, q=q1, t0=1.9)
        assert est.zeroed == expect_zeroed and (np.abs(est.tau_ext).max() < 1e-9) == expect_zeroed


def test_sigma_is_inf_along_a_dropped_direction_and_the_estimate_is_flagged(ur5):
    trust = TrustedWrench(ur5, tau_sigma=np.full(6, 1.0))
    J, _ = ur5.flange_jacobian(WRIST_SINGULAR)
    est = _feed(trust, ur5, 0.1, J.T @ np.array([0.0, 0.0, -5.0, 0.0, 0.0, 0.0]), q=WRIST_SINGULAR)
    assert est.singular and est.rank == 5 and est.unobservable_tool.shape == (1, 6)
    assert np.isinf(est.sigma_tool).any() and np.isfinite(est.sigma_tool).any()


def test_settings_refuse_a_release_above_the_contact_threshold():
    with pytest.raises(ValueError, match="release"):
        TrustSettings(contact_on_sigma=2.0, contact_off_sigma=3.0)
    with pytest.raises(ValueError, match="contact_model"):
        TrustSettings(contact_model="surface")


@pytest.fixture(scope="module")
def plant_pushes():
    from idyn_ros.experiments import wrench_trust_eval

    return wrench_trust_eval.evaluate("ur5")


@pytest.mark.slow
def test_plant_bias_after_a_rezero(plant_pushes):
    p = plant_pushes
    assert p["first_auto_rezero_s"] <= 1.5  # at rest from the start: zeroed after 2 x rest_time
    # the nominal model's error on the true plant, seen as a force: 1.8 N since the plant's torque ripple became a
    # share of the drive torque (2026-11-28; > 2 N before, and this precondition was not rerun then)
    assert p["bias_before_rezero_n"] > 1.0
    assert p["bias_after_auto_rezero_n"] < 0.15 * p["bias_before_rezero_n"]
    assert p["bias_after_requested_rezero_n"] < 0.5


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="not met with the NOMINAL model on the true plant with joint effects: the "
                   "calibrated sigma is 1.3-2.8 Nm on joints 1-4, no push is detected at 6 sigma and the automatic "
                   "re-zero takes a push on the arm at rest for bias; with an identified model (its own sigma and "
                   "stiction band) 20 N is detected, 10 N in some runs: the test below (bench/results/ur5_wrench.json)")
def test_plant_detection_rate_against_false_alarms(plant_pushes):
    rates = {p["force_n"]: p["detection_rate"] for p in plant_pushes["pushes"]}
    assert rates[5.0] >= 0.9 and rates[10.0] >= 0.95 and rates[20.0] >= 0.95
    assert plant_pushes["false_alarm_rate"] <= 0.05
    sweep = plant_pushes["thresholds"]  # the trade-off: false alarms fall as the threshold rises, 5 N goes last
    assert [s["false_alarm_rate"] for s in sweep] == sorted((s["false_alarm_rate"] for s in sweep), reverse=True)
    assert sweep[0]["false_alarm_rate"] > 0.05 and sweep[-1]["detection_rate"]["5_n"] < 0.5


@pytest.mark.slow
def test_plant_singular_pose_is_flagged_and_the_rest_estimated():
    from idyn_ros.experiments import wrench_trust_eval

    s = wrench_trust_eval.singular("ur5")
    assert s["rank"] == 5 and s["singular_flag"] and s["sigma_inf_axes"] >= 1
    assert s["observable_force_rmse_n"] < 0.5 * s["applied_force_n"]


def test_stiction_band_reports_the_external_torque_closest_to_zero_that_static_friction_allows(ur5):
    from idyn_ros.control.wrench_trust import StictionBand
    from idyn_ros.dynamics.friction import DQ_LIM

    band = StictionBand(np.array([2.0, 2.0, 2.0, 1.0, 1.0, 1.0]))
    tau = np.array([1.5, -3.0, 5.0, 0.5, -1.5, 3.0])
    dq = np.array([0.0, 0.0, 0.0, 0.0, DQ_LIM / 2, 2 * DQ_LIM])  # still, still, still, still, slipping, sliding
    np.testing.assert_allclose(band.apply(tau, dq), [0.0, -1.0, 3.0, 0.0, -1.0, 3.0])


def test_trust_stage_holds_a_joint_torque_inside_the_friction_band_as_no_contact(ur5):
    sigma, rest = np.full(6, 1.0), np.full(6, 0.05)
    level = np.full(6, 3.0)
    banded = TrustedWrench(ur5, TrustSettings(auto_rezero=False), sigma, rest, static_friction=level)
    raw = TrustedWrench(ur5, TrustSettings(auto_rezero=False, stiction_band=False), sigma, rest,
                        static_friction=level)
    hunting = np.array([0.0, 2.5, 0.0, 0.0, 0.0, 0.0])  # a PI loop winding joint 2 up against static friction
    assert not _feed(banded, ur5, 0.2, hunting).contact and np.abs(banded.out.base).max() == 0.0
    assert np.linalg.norm(_feed(raw, ur5, 0.2, hunting).base[:3]) > 1.0  # without the band: a phantom force
    push = _push(ur5, -60.0)  # far beyond the band: seen, shrunk by at most the band on each joint
    est = _feed(banded, ur5, 0.2, push)
    assert est.contact and np.all(np.abs(est.tau_ext - push) <= level + 1e-9)
    moving = _feed(banded, ur5, 0.2, hunting, dq=np.full(6, 0.5))  # sliding: the band is gone
    np.testing.assert_allclose(moving.tau_ext, hunting)
    assert "stiction band on" in banded.describe()
    assert "no stiction band" in TrustedWrench(ur5, tau_sigma=sigma).describe()


def test_hidden_force_is_the_largest_wrench_static_friction_can_hold_with_the_estimate_at_zero(ur5):
    level = np.array([8.0, 9.0, 8.0, 2.0, 2.0, 2.0])
    trust = TrustedWrench(ur5, TrustSettings(auto_rezero=False, damping=0.0), np.full(6, 1.0), np.full(6, 0.05),
                          static_friction=level)  # undamped: P J^T = 1 exactly
    J, R = ur5.flange_jacobian(Q0)
    T = np.zeros((6, 6))
    T[:3, :3] = T[3:, 3:] = R.T
    to_tool = T @ np.linalg.inv(J.T)  # joint torque -> wrench in flange axes (wrench model, full rank)
    est = _feed(trust, ur5, 0.2, np.zeros(6))
    np.testing.assert_allclose(est.hidden_tool, np.abs(to_tool) @ level, rtol=1e-9)
    # attained: the joint torques of the extreme wrench along tool z sit on the bands' edges, the estimate reads 0
    tau = level * np.sign(to_tool[2])
    est = _feed(trust, ur5, 0.2, tau)
    assert np.abs(est.tool).max() == 0.0 and (to_tool @ tau)[2] == pytest.approx(est.hidden_tool[2])
    assert np.all(_feed(trust, ur5, 0.2, tau, dq=np.full(6, 0.5)).hidden_tool == 0.0)  # sliding: nothing hides
    plain = TrustedWrench(ur5, TrustSettings(auto_rezero=False, stiction_band=False), static_friction=level)
    assert np.all(_feed(plain, ur5, 0.2, tau).hidden_tool == 0.0)


@pytest.mark.slow
def test_plant_detection_with_an_identified_model_and_its_own_sigma(tmp_path, monkeypatch):
    """The node's path: an identified RBD + friction model of the plant gives sigma (validation residuals) and the
    stiction band; a 20 N push on the arm held at rest is detected, smaller ones less often, nothing else is
    (10 N: 19-98 % over runs: the time-budgeted excitation design gives other data; bench/results/ur5_wrench.json)."""
    from idyn_ros.bench.ur5 import plant_trust_with_model

    monkeypatch.setenv("IDYN_WORK_DIR", str(tmp_path))
    p = plant_trust_with_model(tmp_path / "model", quick=True)["pushes"]
    assert p["sigma_source"].startswith("the model's validation residuals") and "band on" in p["stiction_band"]
    rates = {x["force_n"]: x["detection_rate"] for x in p["pushes"]}
    assert rates[20.0] >= 0.95 and rates[5.0] <= rates[10.0] + 0.05 <= rates[20.0] + 0.05, rates
    assert p["false_alarm_rate"] <= 0.02 and p["bias_after_auto_rezero_n"] < 0.5


def test_a_rezero_at_the_same_pose_follows_drift_but_not_a_force_below_the_contact_threshold(ur5):
    trust = TrustedWrench(ur5, tau_sigma=np.full(6, 1.0), tau_sigma_rest=np.full(6, 0.05))
    est = _feed(trust, ur5, 1.2, np.zeros(6))
    assert est.zeroed
    sigma_z = float(np.sqrt(trust.mapper.cov[2, 2]))  # base z, at rest after the re-zero
    drift = _feed(trust, ur5, 1.2, _push(ur5, 1.0 * sigma_z), t0=1.2)  # 1 sigma: drift, followed
    assert drift.rezeroed or abs(drift.base[2]) < 1e-9
    tau = _push(ur5, 1.0 * sigma_z) + _push(ur5, 4.5 * sigma_z)
    small = _feed(trust, ur5, 1.0, tau, t0=2.4)
    # below contact_on_sigma: not flagged, and not absorbed (a window that straddles the step takes its share)
    assert not small.contact and small.base[2] > 0.7 * 4.5 * sigma_z
    later = _feed(trust, ur5, 2.0, tau, t0=3.4)
    assert not trust.bias.zeroed_at_ns > round(3.4e9) and later.base[2] == small.base[2]


def test_trust_defaults_are_the_nodes_so_the_replay_scores_what_the_node_publishes():
    """The node maps its parameters with from_params; the benches' TrustSettings() must be what it runs."""
    from idyn_ros.parameters import WrenchObserverParams

    assert TrustSettings.from_params(WrenchObserverParams()) == TrustSettings()


def test_the_sigma_says_which_residuals_it_comes_from(ur5):
    """A model trained without held-out data carries its training residuals: said, as optimistic."""
    from types import SimpleNamespace

    n = ur5.n
    for split, said in (("val", "validation residuals"), ("train", "training residuals (no held-out data: "
                                                                     "optimistic")):
        model = SimpleNamespace(uncertainty={"tau_sigma_nm": [1.0] * n, "split": split}, static_friction=None)
        assert said in TrustedWrench.from_model(ur5, model).describe()
    assert "of the effort limits" in TrustedWrench.from_model(ur5, None).describe()
    repeated = SimpleNamespace(uncertainty={"tau_sigma_nm": [1.0] * n, "split": "val", "val_repeats_training": True},
                               static_friction=None)
    assert "repeats the training states (optimistic" in TrustedWrench.from_model(ur5, repeated).describe()
    mine = TrustedWrench.from_model(ur5, repeated, tau_sigma=[2.0] * n, tau_sigma_rest=[])  # the node's parameters
    assert "the tau_sigma parameter" in mine.describe() and np.all(mine.tau_sigma == 2.0)
    # a validation without rest periods: the rest spread came from another split, and the line says which
    mixed = SimpleNamespace(uncertainty={"tau_sigma_nm": [1.0] * n, "split": "val", "tau_sigma_rest_nm": [0.1] * n,
                                         "rest_split": "test"}, static_friction=None)
    assert "validation residuals; at rest from the model's test residuals" in \
        TrustedWrench.from_model(ur5, mixed).describe()
