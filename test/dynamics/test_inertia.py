"""Inertia conversions (10-vector / barycentric / pseudo-inertia) and physical-consistency checks."""

from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest

from idyn_ros.dynamics import RobotModel
from idyn_ros.dynamics.inertia import (
    assert_physically_consistent,
    barycentric_to_pi,
    check_physical_consistency,
    pi_to_barycentric,
    pi_to_pseudo_inertia,
    pseudo_inertia_to_pi,
)
from idyn_ros.errors import RobotDescriptionError

from .conftest import PANDA_JOINTS, PANDA_URDF


def _random_body(rng: np.random.Generator) -> tuple[float, np.ndarray, np.ndarray]:
    m = rng.uniform(0.5, 5.0)
    c = rng.normal(0, 0.1, 3)
    Rm = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    d = rng.uniform(0.05, 0.1, 3)  # principal moments in [0.05, 0.1] always satisfy the triangle inequality
    return m, c, Rm @ np.diag(d) @ Rm.T


def test_conversions_match_pinocchio() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        m, c, Ic = _random_body(rng)
        pi = barycentric_to_pi(m, c, Ic)
        np.testing.assert_allclose(pi, pin.Inertia(m, c, Ic).toDynamicParameters(), atol=1e-14)
        m2, c2, Ic2 = pi_to_barycentric(pi)
        np.testing.assert_allclose([m2, *c2], [m, *c], atol=1e-14)
        np.testing.assert_allclose(Ic2, Ic, atol=1e-14)
        J = pi_to_pseudo_inertia(pi)
        np.testing.assert_allclose(pseudo_inertia_to_pi(J), pi, atol=1e-14)
        # J = sum over mass points of m [r; 1][r; 1]^T (Wensing 2017): check the m and h blocks
        assert J[3, 3] == pytest.approx(m)
        np.testing.assert_allclose(J[:3, 3], m * c, atol=1e-14)
        assert np.linalg.eigvalsh(J)[0] > 0


def test_pseudo_inertia_of_point_masses() -> None:
    """J of a set of point masses is sum m_k [p_k;1][p_k;1]^T: the defining property of the LMI."""
    rng = np.random.default_rng(1)
    pts, ms = rng.normal(size=(5, 3)), rng.uniform(0.1, 1, 5)
    J_true = sum(m * np.outer([*p, 1.0], [*p, 1.0]) for m, p in zip(ms, pts, strict=True))
    L = sum(m * (p @ p * np.eye(3) - np.outer(p, p)) for m, p in zip(ms, pts, strict=True))
    h = (ms[:, None] * pts).sum(0)
    pi = np.array([ms.sum(), *h, L[0, 0], L[0, 1], L[1, 1], L[0, 2], L[1, 2], L[2, 2]])
    np.testing.assert_allclose(pi_to_pseudo_inertia(pi), J_true, atol=1e-12)


def test_detects_each_problem() -> None:
    good = barycentric_to_pi(1.0, [0.0, 0.0, 0.1], np.diag([0.02, 0.02, 0.01]))
    assert check_physical_consistency(good) == []
    neg_mass = good.copy()
    neg_mass[0] = -1.0
    tri = barycentric_to_pi(1.0, [0.0, 0.0, 0.0], np.diag([0.05, 0.01, 0.01]))  # 0.05 > 0.01 + 0.01
    problems = check_physical_consistency(np.stack([good, neg_mass, tri]), names=["a", "b", "c"])
    assert any(p.startswith("b: mass") for p in problems)
    assert any(p.startswith("c: triangle inequality") for p in problems)
    assert any(p.startswith("c: pseudo-inertia not positive definite") for p in problems)
    assert not any(p.startswith("a:") for p in problems)
    with pytest.raises(RobotDescriptionError, match="c: triangle"):
        assert_physically_consistent(np.stack([good, tri]), names=["a", "c"])
    # massless virtual links: rejected by default, allowed on request
    assert check_physical_consistency(np.zeros(10))
    assert check_physical_consistency(np.zeros(10), allow_massless=True) == []


def test_real_urdfs_are_consistent(arm: RobotModel) -> None:
    assert check_physical_consistency(arm.inertial_parameters(), names=arm.body_names()) == []


def _edit_inertial(xml: str, link: str, **attrs: str) -> str:
    """Set attributes of <mass>/<inertia> inside link ``link`` of a URDF string."""
    start = xml.index(f'<link name="{link}"')
    end = xml.index("</link>", start)
    block = xml[start:end]
    for key, val in attrs.items():
        tag = "mass" if key == "value" else "inertia"
        block = re.sub(rf'(<{tag}[^>]*\b{key}=")[^"]*(")', rf"\g<1>{val}\g<2>", block, count=1)
    return xml[:start] + block + xml[end:]


def test_urdf_with_bad_inertia_names_the_link() -> None:
    xml = PANDA_URDF.read_text()
    bad = _edit_inertial(xml, "panda_link3", ixx="1.0", iyy="0.01", izz="0.01")
    with pytest.raises(RobotDescriptionError, match="panda_link3: triangle inequality"):
        RobotModel.from_urdf(bad, joints=PANDA_JOINTS)
    negative = _edit_inertial(xml, "panda_link5", value="-2.0")
    with pytest.raises(RobotDescriptionError, match="panda_link5: mass"):
        RobotModel.from_urdf(negative, joints=PANDA_JOINTS)
    # opting out keeps the (bad) numbers, e.g. to inspect them
    m = RobotModel.from_urdf(negative, joints=PANDA_JOINTS, check_inertia=False)
    assert m.inertial_parameters()[4, 0] < 0
