"""Regressors (inertial + friction) and base parameters by pivoted QR."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.dynamics import RobotModel
from idyn_ros.dynamics.base_parameters import base_parameters, base_parameters_from_regressor
from idyn_ros.errors import IdentificationError, ParameterError

from .conftest import erd_model, presets_available


def test_regressor_reproduces_rnea(arm: RobotModel) -> None:
    q, dq, ddq = arm.random_states(30, rng=10)
    Y = arm.regressor(q, dq, ddq)
    assert Y.shape == (30, arm.n, 10 * arm.n)
    pi = arm.inertial_parameters().ravel()
    np.testing.assert_allclose(Y @ pi, arm.rnea(q, dq, ddq), atol=1e-10)
    Ys = arm.stacked_regressor(q, dq, ddq)
    np.testing.assert_allclose(Ys @ pi, arm.rnea(q, dq, ddq).reshape(-1), atol=1e-10)


def test_friction_regressor_columns(panda: RobotModel) -> None:
    dq = np.array([0.5, -0.5, 0.01, -0.01, 0.0, 0.02, 3.0])
    F = panda.friction_regressor(dq, ("viscous", "coulomb", "offset"))
    assert F.shape == (7, 21)
    c = np.zeros((7, 3))
    c[:, 0], c[:, 1], c[:, 2] = 0.1, 2.0, 0.3  # viscous Nm s/rad, coulomb Nm, offset Nm
    tau = F @ c.ravel()
    # Coulomb with a linear zone of width 0.02 rad/s (Reuss et al. 2022 Eq. 13)
    sigma = np.clip(dq / 0.02, -1, 1)
    np.testing.assert_allclose(tau, 0.1 * dq + 2.0 * sigma + 0.3, atol=1e-15)
    assert sigma[2] == pytest.approx(0.5) and sigma[4] == 0.0
    with pytest.raises(ParameterError, match="unknown friction kind"):
        panda.friction_regressor(dq, ("viscus",))
    Ys = panda.stacked_regressor(np.zeros((2, 7)), np.stack([dq, dq]), np.zeros((2, 7)), friction_kinds="coulomb")
    assert Ys.shape == (14, 77)


@pytest.mark.parametrize("name,expected", [("panda", 43), ("ur5", 36)])
def test_base_parameter_count(name: str, expected: int) -> None:
    """Panda: 43, as Reuss et al. 2022 Table V (7 links, no friction). UR5: 36.

    Both counts only involve the moving links: pinocchio merges the fixed base link into the
    universe (it never moves, so it has no parameters) and fixed children (hand, flange) into link n.
    """
    bp = erd_model(name).base_parameters(n_samples=150, seed=0)
    assert bp.n_base == expected
    # a clear gap between kept and dropped |R_ii| (see RANK_RTOL)
    rel = bp.r_diag / bp.r_diag[0]
    assert rel[bp.n_base - 1] > 1e-4 and rel[bp.n_base] < 1e-12


def test_base_parameter_count_presets() -> None:
    if not presets_available():
        pytest.skip("idyn_ros.robots presets not available yet")
    counts = {n: RobotModel.from_robot(n).base_parameters(n_samples=150).n_base for n in ("panda", "iiwa14", "ur5")}
    assert counts == {"panda": 43, "iiwa14": 43, "ur5": 36}


def test_base_identity_on_fresh_states(arm: RobotModel) -> None:
    bp = base_parameters(arm, n_samples=150, seed=0, friction_kinds="viscous,coulomb")
    assert bp.K.shape == (bp.n_base, 12 * arm.n)
    q, dq, ddq = arm.random_states(40, rng=123)  # not the states the base was found on
    Y = arm.stacked_regressor(q, dq, ddq, friction_kinds="viscous,coulomb")
    rng = np.random.default_rng(5)
    for _ in range(3):  # any parameter vector, not only the physical one
        pi = rng.normal(size=Y.shape[1])
        lhs, rhs = Y @ pi, bp.select(Y) @ bp.project(pi)
        np.testing.assert_allclose(lhs, rhs, atol=1e-9 * np.abs(lhs).max())
    # the base regressor has full column rank
    assert np.linalg.matrix_rank(bp.select(Y)) == bp.n_base


def test_base_parameter_names(panda: RobotModel) -> None:
    bp = panda.base_parameters(n_samples=150)
    assert len(bp.names) == bp.n_base
    # classic regroupings visible by name (Panda modified-DH lengths 0.316, 0.0825, 0.384, 0.088)
    joined = "\n".join(bp.names)
    assert "0.316*m_7" in joined and "0.0825*m_7" in joined and "0.384*m_7" in joined and "0.088*m_7" in joined
    # every row of K has a 1 at its independent column
    np.testing.assert_array_equal(bp.K[np.arange(bp.n_base), bp.independent], 1.0)
    # link-1 parameters other than the joint-axis inertia never act: not in any base parameter
    names = panda.parameter_names()
    for unused in ("m_1", "mx_1", "my_1", "mz_1", "Ixx_1"):
        assert np.all(bp.K[:, names.index(unused)] == 0.0), unused


def test_too_few_rows() -> None:
    with pytest.raises(IdentificationError, match="more samples"):
        base_parameters_from_regressor(np.ones((5, 10)))


def test_the_friction_regressor_uses_the_zone_width_and_kinds_the_models_use(panda: RobotModel) -> None:
    from idyn_ros.dynamics import friction

    dq = np.array([0.05, -0.05, 0.01, -0.01, 0.0, 0.1, -0.2])
    F = panda.friction_regressor(dq, "viscous,coulomb")  # columns per joint: viscous, coulomb
    np.testing.assert_allclose(F[np.arange(7), np.arange(7) * 2 + 1], np.clip(dq / 0.02, -1, 1))
    np.testing.assert_allclose(F[np.arange(7), np.arange(7) * 2], dq)
    Fb = panda.friction_regressor(np.stack([dq, 2 * dq]), "coulomb")
    np.testing.assert_allclose(Fb[1, np.arange(7), np.arange(7)], np.clip(2 * dq / 0.02, -1, 1))
    np.testing.assert_array_equal(panda.friction_regressor(dq), friction.friction_regressor(dq, friction.DEFAULT_KINDS))
