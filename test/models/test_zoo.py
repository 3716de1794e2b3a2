"""Model-zoo pieces: config round trip, kinds (Callar's r: test_rotational_displacement.py)."""

from __future__ import annotations

import pytest

from idyn_ros.models.zoo import KINDS, ModelConfig


def test_config_round_trip():
    cfg = ModelConfig(kind="hybrid-r", friction_kinds=("coulomb", "offset"), hidden=7)
    again = ModelConfig.from_dict(cfg.to_dict())
    assert again == cfg
    assert set(KINDS) == {"rbd", "rbd-friction", "hybrid", "hybrid-r", "hybrid-j", "mlp-hybrid", "lstm", "delan",
                          "delan-lstm"}


def test_unknown_kind_is_a_user_error(iiwa, synth):
    from idyn_ros.errors import ParameterError
    from idyn_ros.models.training import fit

    with pytest.raises(ParameterError, match="unknown model kind"):
        fit(ModelConfig(kind="transformer"), iiwa, [synth[1]], progress=False)
