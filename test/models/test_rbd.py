"""Inertial parameterisations: DiffBary (typos fixed), log-Cholesky, pseudo-inertia round trips."""

from __future__ import annotations

import numpy as np
import torch

from idyn_ros.models import rbd


def test_regressor_times_parameters_is_rnea(iiwa):
    rng = np.random.default_rng(0)
    q, dq, ddq = (rng.normal(size=(5, 7)) for _ in range(3))
    Y = rbd.regressor_batch(iiwa.pin_model, q, dq, ddq)
    np.testing.assert_allclose(Y @ rbd.inertial_parameters(iiwa.pin_model).ravel(), iiwa.rnea(q, dq, ddq),
                               atol=1e-9)


def test_pseudo_inertia_round_trip_on_the_models_parameters(iiwa):
    from idyn_ros.dynamics.inertia import pi_to_pseudo_inertia, pseudo_inertia_to_pi

    for p in rbd.inertial_parameters(iiwa.pin_model):
        J = pi_to_pseudo_inertia(p)
        assert np.linalg.eigvalsh(J)[0] > 0  # the iiwa's CAD inertials are physically consistent
        np.testing.assert_allclose(pseudo_inertia_to_pi(J), p, atol=1e-12)


def test_diffbary_matches_fixed_paper_formulas():
    """Reuss Eq. 20-21 with the typo fixed: l_y = e h + b i (the paper prints c h + i b)."""
    torch.manual_seed(0)
    mod = rbd.inertial_module("diffbary", np.zeros((1, 10)), random_init=True)
    with torch.no_grad():
        mod.a.copy_(torch.randn(1, 10, dtype=torch.float64))
        a, e, b, f, g, c, h, i, j, d = mod.a[0].tolist()  # row-major lower triangle (Eq. 18)
        p = mod()[0].numpy()
    r = rbd.R_DIFFBARY
    expected = {
        "m": h * h + i * i + j * j + d * d + r,
        "lx": a * h, "ly": e * h + b * i, "lz": f * h + g * i + c * j,
        "Lxx": e * e + b * b + f * f + g * g + c * c + 2 * r, "Lxy": -a * e,
        "Lyy": a * a + f * f + g * g + c * c + 2 * r, "Lxz": -a * f, "Lyz": -(e * f + g * b),
        "Lzz": a * a + e * e + b * b + 2 * r,
    }
    order = ["m", "lx", "ly", "lz", "Lxx", "Lxy", "Lyy", "Lxz", "Lyz", "Lzz"]  # pinocchio order
    np.testing.assert_allclose(p, [expected[k] for k in order], atol=1e-12)
    assert abs(p[2] - (c * h + i * b)) > 1e-3  # the printed formula would differ


def test_consistent_parameterisations_start_at_nominal(iiwa):
    pi = rbd.inertial_parameters(iiwa.pin_model)
    for kind in ("diffbary", "logchol"):
        with torch.no_grad():
            out = rbd.inertial_module(kind, pi)().numpy()
        np.testing.assert_allclose(out, pi, atol=1e-7)
        assert (rbd.min_pseudo_inertia_eig(out) > 0).all()


def test_random_virtual_parameters_are_always_consistent():
    torch.manual_seed(3)
    for kind in ("diffbary", "logchol"):
        mod = rbd.inertial_module(kind, np.tile([1.0, 0, 0, 0.1, 0.1, 0, 0.1, 0, 0, 0.05], (4, 1)))
        with torch.no_grad():
            for prm in mod.parameters():
                prm.add_(torch.randn_like(prm) * 2)
            assert (rbd.min_pseudo_inertia_eig(mod().numpy()) > -1e-12).all()
