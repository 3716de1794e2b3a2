"""The dynamics layer against a real robot: KUKA LWR4+ recordings (../shared/data/kuka_lwr4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from idyn_ros.dynamics import RobotModel


@pytest.fixture(scope="module")
def lwr4(shared_data: Path) -> tuple[RobotModel, dict[str, np.ndarray]]:
    model = RobotModel.from_urdf(shared_data / "kuka_lwr4" / "kuka_lwr4.urdf")
    with np.load(shared_data / "kuka_lwr4" / "measurements_1.npz") as f:
        data = {k: f[k] for k in ("positions", "velocities", "accelerations", "torques")}
    return model, data


@pytest.mark.realdata
def test_nominal_rnea_follows_measured_torque(lwr4) -> None:
    """Joints 2-4 carry the gravity load: the nominal URDF model must track them (sign, order, scale)."""
    model, d = lwr4
    tau = model.rnea(d["positions"], d["velocities"], d["accelerations"])
    for j in (1, 2, 3):
        assert np.corrcoef(tau[:, j], d["torques"][:, j])[0, 1] > 0.99, j
    rms = np.sqrt(np.mean((tau[:, 1] - d["torques"][:, 1]) ** 2))
    assert rms < 0.5 * d["torques"][:, 1].std()  # measured: 6.97 Nm vs std 25.2 Nm


@pytest.mark.realdata
def test_real_excitation_identifies_all_base_parameters(lwr4) -> None:
    model, d = lwr4
    bp = model.base_parameters(n_samples=150)
    assert bp.n_base == 43
    Y = model.stacked_regressor(d["positions"][::5], d["velocities"][::5], d["accelerations"][::5])
    Yb = bp.select(Y)
    assert np.linalg.matrix_rank(Yb) == 43  # the recorded trajectory excites every base parameter
    pi = model.inertial_parameters().ravel()
    np.testing.assert_allclose(Y @ pi, Yb @ bp.project(pi), atol=1e-9)
