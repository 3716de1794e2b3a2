"""Friction models: numpy and torch agree, Eq. 13 linear zone, regressor layout, kind parsing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from idyn_ros.dynamics import friction as fr
from idyn_ros.errors import ParameterError

ALL = ("coulomb", "viscous", "asymmetric", "stribeck", "sigmoid", "offset")


def test_numpy_and_torch_agree():
    rng = np.random.default_rng(0)
    dq = rng.normal(0, 0.3, (200, 7))
    dq[:20] *= 0.01  # inside the linear zone
    coeffs = rng.normal(size=(7, fr.n_columns(ALL)))
    a = fr.friction_torque(dq, coeffs, ALL)
    b = fr.torch_friction_torque(torch.as_tensor(dq), torch.as_tensor(coeffs), ALL).numpy()
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_coulomb_linear_zone_eq13():
    # Reuss Eq. 13: sigma * dq / dq_lim inside |dq| <= 0.02, sigma * sign(dq) outside
    dq = np.array([[-1.0, -0.02, -0.01, 0.0, 0.005, 0.02, 0.3]]).T  # one joint
    tau = fr.friction_torque(dq, np.array([[2.0]]), ("coulomb",))[:, 0]
    np.testing.assert_allclose(tau, [-2.0, -2.0, -1.0, 0.0, 0.5, 2.0, 2.0])


def test_regressor_matches_torque():
    rng = np.random.default_rng(1)
    dq = rng.normal(size=(50, 3))
    kinds = ("coulomb", "viscous", "asymmetric", "offset")
    c = rng.normal(size=(3, fr.n_columns(kinds)))
    F = fr.friction_regressor(dq, kinds)  # (N, n, n B)
    np.testing.assert_allclose(F @ c.ravel(), fr.friction_torque(dq, c, kinds), atol=1e-12)


def test_asymmetric_levels_differ_by_direction():
    tau = fr.friction_torque(np.array([[0.5], [-0.5]]), np.array([[1.0, 3.0]]), ("asymmetric",))
    np.testing.assert_allclose(tau[:, 0], [1.0, -3.0])


def test_parse_kinds():
    assert fr.parse_kinds("coulomb, viscous") == ("coulomb", "viscous")
    assert fr.parse_kinds("none") == ()
    with pytest.raises(ParameterError, match="unknown friction kind"):
        fr.parse_kinds("coulomb,dahl")


def test_static_friction_level_is_the_break_away_torque_of_each_kind():
    from idyn_ros.dynamics.friction import static_friction_level

    kinds = ("coulomb", "viscous", "asymmetric", "stribeck", "offset")
    coeffs = np.array([[2.0, 5.0, 1.0, 3.0, 0.5, -4.0],  # 2 + max(1, 3) + 0.5; viscous and offset do not count
                       [-1.0, 5.0, 0.0, 0.0, 0.0, 9.0]])  # a negative Coulomb fit is unphysical: no band
    np.testing.assert_allclose(static_friction_level(coeffs, kinds), [5.5, 0.0])


def test_the_allocation_free_default_friction_equals_the_general_form():
    """The runtime's in-place path for the default kinds (coulomb, viscous, offset) is the same formula."""
    import numpy as np

    from idyn_ros.dynamics.friction import DEFAULT_KINDS, default_friction_into, friction_torque

    rng = np.random.default_rng(3)
    coeffs = rng.normal(size=(7, 3))
    columns = tuple(coeffs[:, i].copy() for i in range(3))
    out, scratch = np.zeros(7), np.zeros(7)
    for dq in (rng.normal(scale=0.01, size=7), rng.normal(scale=2.0, size=7), np.zeros(7)):
        np.testing.assert_allclose(default_friction_into(dq, columns, out, scratch),
                                   friction_torque(dq, coeffs, DEFAULT_KINDS), rtol=1e-13, atol=1e-15)
