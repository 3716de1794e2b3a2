"""Model-zoo pieces: Callar's rotational displacement r, config round trip, kinds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from idyn_ros.models.zoo import KINDS, R_CLIP, ModelConfig, rotational_displacement


def test_r_accumulates_resets_at_reversal_and_saturates():
    dt = 0.01
    dq = torch.tensor([0.5] * 10 + [-0.5] * 5 + [0.0] * 3 + [-0.5] * 100, dtype=torch.float64)
    r, _ = rotational_displacement(dq[None, :, None], dt)
    r = r[0, :, 0].numpy()
    np.testing.assert_allclose(r[9], 10 * 0.005)  # 10 steps forward
    np.testing.assert_allclose(r[10], -0.005)  # reversal: restart from the new step
    np.testing.assert_allclose(r[14], r[15])  # standing still (deadband) keeps r
    assert r[-1] == pytest.approx(-R_CLIP)  # saturates at -10 deg
    assert np.isclose(R_CLIP, np.deg2rad(10.0))


def test_config_round_trip():
    cfg = ModelConfig(kind="hybrid-r", friction_kinds=("coulomb", "offset"), hidden=7)
    again = ModelConfig.from_dict(cfg.to_dict())
    assert again == cfg
    assert set(KINDS) == {"rbd", "rbd-friction", "hybrid", "hybrid-r", "mlp-hybrid", "lstm", "delan"}


def test_unknown_kind_is_a_user_error(iiwa, synth):
    from idyn_ros.errors import ParameterError
    from idyn_ros.models.training import fit

    with pytest.raises(ParameterError, match="unknown model kind"):
        fit(ModelConfig(kind="transformer"), iiwa, [synth[1]], progress=False)
