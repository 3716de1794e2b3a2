"""Identification on synthetic data from a known robot, URDF round trip, and user errors."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.errors import DatasetError, IdentificationError
from idyn_ros.models import identification as ident
from idyn_ros.models import rbd
from idyn_ros.models.metrics import torque_metrics
from idyn_ros.models.sources import Recording, load_recordings

KINDS = ("coulomb", "viscous", "offset")


@pytest.fixture(scope="module")
def sdp_result(iiwa, synth):
    return ident.identify(iiwa.pin_model, [synth[0]], "sdp", KINDS)  # the default prior: geometric


@pytest.fixture(scope="module")
def sdp_ridge(iiwa, synth):
    return ident.identify(iiwa.pin_model, [synth[0]], "sdp", KINDS, prior="ridge")


def test_ols_fits_noise_free_rigid_body_data_exactly(iiwa, truth, synth):
    rec = synth[0]
    clean = Recording(rec.t, rec.q, rec.dq, rec.ddq,
                      rbd.regressor_batch(iiwa.pin_model, rec.q, rec.dq, rec.ddq) @ truth.pi.ravel())
    res = ident.identify(iiwa.pin_model, [clean], "ols", ())
    assert max(res.info["train_nmse"]) < 1e-12
    assert res.n_base < 70  # base parameters, not all 70 standard ones


def test_sdp_is_consistent_and_generalises(iiwa, synth, sdp_result):
    assert (np.asarray(sdp_result.info["min_pseudo_inertia_eig"]) > 0).all()
    test = synth[2]
    m = torque_metrics(sdp_result.predict(iiwa.pin_model, test), test.tau)
    # the true friction (tanh, Stribeck) is outside the model class: small but non-zero error
    assert m["nmse_mean"] < 0.05, m["nmse"]


@pytest.mark.parametrize("method", ["diffbary", "logchol"])
def test_gradient_methods_reach_the_sdp_solution(iiwa, synth, sdp_ridge, method):
    res = ident.identify(iiwa.pin_model, [synth[0]], method, KINDS, steps=200)
    assert (np.asarray(res.info["min_pseudo_inertia_eig"]) > 0).all()
    test = synth[2]
    p_sdp = sdp_ridge.predict(iiwa.pin_model, test)  # the same objective: the ridge
    p = res.predict(iiwa.pin_model, test)
    # same objective: predictions agree to a small fraction of the torque scale
    assert np.abs(p - p_sdp).max() < 0.02 * np.abs(test.tau).max()


def test_identified_parameters_approach_truth(iiwa, truth, synth, sdp_result):
    # the identifiable combination: predicted rigid-body torque of identified vs true parameters
    rec = synth[1]
    Y = rbd.regressor_batch(iiwa.pin_model, rec.q, rec.dq, rec.ddq)
    err_id = Y @ sdp_result.pi.ravel() - Y @ truth.pi.ravel()
    err_nom = Y @ rbd.inertial_parameters(iiwa.pin_model).ravel() - Y @ truth.pi.ravel()
    # friction outside the model class leaks a little into the inertials: ask for a 2x improvement
    assert np.sqrt((err_id**2).mean()) < 0.5 * np.sqrt((err_nom**2).mean())


def test_urdf_round_trip_is_consistent(iiwa, sdp_result):
    import pinocchio as pin

    from idyn_ros.dynamics.inertia import check_physical_consistency

    xml = ident.write_urdf(iiwa.urdf_xml, iiwa.pin_model, sdp_result.pi)
    model = pin.buildModelFromXML(xml)
    back = rbd.inertial_parameters(model)
    np.testing.assert_allclose(back, sdp_result.pi, atol=1e-8)
    assert check_physical_consistency(back) == []


def test_too_few_samples_says_what_to_do(iiwa, synth):
    rec = synth[0]
    short = Recording(rec.t[:5], rec.q[:5], rec.dq[:5], rec.ddq[:5], rec.tau[:5])
    with pytest.raises(IdentificationError, match=r"need at least \d+ samples.*idyn excite"):
        ident.identify(iiwa.pin_model, [short], "ols")


def test_unexciting_data_says_what_to_do(iiwa, synth):
    rec = synth[0]
    n = len(rec.t)
    still = Recording(rec.t, np.tile(rec.q[0], (n, 1)), np.zeros_like(rec.dq), np.zeros_like(rec.ddq), rec.tau)
    with pytest.raises(IdentificationError, match="do not excite"):
        ident.identify(iiwa.pin_model, [still], "ols")


def _save(path, rec, names):
    np.savez(path, t=rec.t, q=rec.q, dq=rec.dq, ddq=rec.ddq, tau=rec.tau, joint_names=np.array(names))


def test_dataset_with_other_joints_is_refused(iiwa, synth, tmp_path):
    f = tmp_path / "panda.npz"
    _save(f, synth[1], [f"panda_joint{i}" for i in range(1, 8)])
    with pytest.raises(DatasetError, match="lbr_A1") as info:
        load_recordings([f], iiwa)
    assert "joint-map" in str(info.value) or "rename" in str(info.value)


def test_nan_in_data_is_refused(iiwa, synth, tmp_path):
    from idyn_ros.models.sources import to_recording

    rec = synth[1]
    tau = rec.tau.copy()
    tau[100, 3] = np.nan
    from types import SimpleNamespace

    ds = SimpleNamespace(t=rec.t, q=rec.q, dq=rec.dq, ddq=rec.ddq, tau=tau, joint_names=iiwa.joint_names)
    with pytest.raises(DatasetError, match=r"NaN.*'tau'.*sample 100"):
        to_recording(ds, iiwa, "x.npz")
    f = tmp_path / "nan.npz"
    _save(f, Recording(rec.t, rec.q, rec.dq, rec.ddq, tau), list(iiwa.joint_names))
    with pytest.raises(DatasetError, match=r"NaN|nan|finite"):
        load_recordings([f], iiwa)


def test_structural_base_is_the_dynamics_base(iiwa):
    """identification's base structure comes from dynamics.base_parameters (one implementation): same
    number of base parameters as RobotModel.base_parameters, and Y pi == Y_ind (pi_ind + beta pi_dep)
    on states it was not computed from."""
    from idyn_ros.models import identification, rbd

    base = identification.structural_base(iiwa.pin_model, 0)
    assert base["rank"] == iiwa.base_parameters().n_base == 43
    rng = np.random.default_rng(7)
    q, dq, ddq = iiwa.random_states(20, rng=rng)
    Y = rbd.regressor_batch(iiwa.pin_model, q, dq, ddq).reshape(20 * 7, -1)
    pi = rng.normal(size=Y.shape[1])
    ind, dep = base["ind_raw"], base["dependent"]
    assert np.allclose(Y @ pi, Y[:, ind] @ (pi[ind] + base["beta"] @ pi[dep]), atol=1e-9 * np.abs(Y @ pi).max())


def _relative_deviation(pi: np.ndarray, pi_nom: np.ndarray) -> np.ndarray:
    """Per link, the largest |eigenvalue| of J0^-1/2 (J - J0) J0^-1/2: the change relative to the link's own size."""
    from idyn_ros.dynamics.inertia import pi_to_pseudo_inertia

    out = []
    for p, p0 in zip(pi, pi_nom, strict=True):
        J, J0 = pi_to_pseudo_inertia(p), pi_to_pseudo_inertia(p0)
        w, v = np.linalg.eigh(J0)
        s = v @ np.diag(w**-0.5) @ v.T
        out.append(np.abs(np.linalg.eigvalsh(s @ (J - J0) @ s)).max())
    return np.array(out)


def test_geometric_prior_fits_like_the_ridge_and_holds_each_link_relative_to_its_size(iiwa, synth, sdp_result,
                                                                                      sdp_ridge):
    train, _, test = synth
    nominal = rbd.inertial_parameters(iiwa.pin_model)
    res = ident.identify(iiwa.pin_model, [train], "sdp", KINDS, reg=ident.GEOMETRIC_REG, prior="geometric")
    assert (np.asarray(res.info["min_pseudo_inertia_eig"]) > 0).all() and res.info["prior"] == "geometric 0.01"
    np.testing.assert_allclose(sdp_result.pi, res.pi, rtol=1e-6, atol=1e-9)  # it is the SDP's default
    m = torque_metrics(res.predict(iiwa.pin_model, test), test.tau)
    ridge = torque_metrics(sdp_ridge.predict(iiwa.pin_model, test), test.tau)
    assert m["nmse_mean"] < max(0.05, 1.5 * ridge["nmse_mean"]), (m["nmse"], ridge["nmse"])
    geometric = _relative_deviation(res.pi, nominal)
    assert 0.05 < geometric.max() < 1.0  # the data move the links, each by less than its own size
    assert _relative_deviation(sdp_ridge.pi, nominal).max() > 10.0  # the ridge: small links by many times theirs
    held = ident.identify(iiwa.pin_model, [train], "sdp", KINDS, reg=1e3, prior="geometric")
    assert _relative_deviation(held.pi, nominal).max() < 0.05  # a strong prior holds every link, wrist included


def test_prior_choices_are_checked():
    from idyn_ros.errors import ParameterError

    with pytest.raises(ParameterError, match="needs the SDP"):
        ident.check_prior("geometric", "wls")
    with pytest.raises(ParameterError, match="unknown identification prior"):
        ident.check_prior("lasso", "sdp")
    ident.check_prior("ridge", "wls")


def test_default_prior_is_geometric_for_the_sdp_and_falls_back_to_the_ridge_on_an_inconsistent_urdf(iiwa, synth):
    import pinocchio as pin

    assert ident.resolve_prior("sdp", None, None, iiwa.pin_model) == ("geometric", ident.GEOMETRIC_REG)
    assert ident.resolve_prior("wls", None, None, iiwa.pin_model) == ("ridge", ident.DEFAULT_REG)
    assert ident.resolve_prior("sdp", "ridge", 1e-3, iiwa.pin_model) == ("ridge", 1e-3)
    bad = iiwa.pin_model.copy()
    bad.inertias[3] = pin.Inertia(0.0, np.zeros(3), np.zeros((3, 3)))  # a massless link: J = 0
    assert ident.inconsistent_links(bad) == [3]
    with pytest.warns(UserWarning, match=r"link\(s\) \[3\].*ridge prior instead"):
        assert ident.resolve_prior("sdp", None, None, bad) == ("ridge", ident.DEFAULT_REG)
    with pytest.raises(IdentificationError, match=r"link\(s\) \[3\] is not positive definite"):
        ident.identify(bad, [synth[0]], "sdp", KINDS, prior="geometric")  # asked for explicitly: refused


def test_a_negative_prior_strength_is_refused(iiwa, synth):
    from idyn_ros.errors import ParameterError

    with pytest.raises(ParameterError, match="--reg"):
        ident.identify(iiwa.pin_model, [synth[0]], "sdp", KINDS, reg=-1.0)
