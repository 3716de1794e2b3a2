"""Fixtures for the models tests: a real robot model (iiwa14 preset) and synthetic recordings."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def iiwa():
    from idyn_ros.dynamics import RobotModel

    return RobotModel.from_robot("iiwa14")


@pytest.fixture(scope="session")
def truth(iiwa):
    from idyn_ros.models.synthetic import make_true_robot

    return make_true_robot(iiwa.pin_model, seed=1)


@pytest.fixture(scope="session")
def synth(iiwa, truth):
    """(train, val, test) recordings at 200 Hz; test is another trajectory, twice as fast."""
    from idyn_ros.models.synthetic import fourier_recording

    return (fourier_recording(iiwa.pin_model, truth, seed=10, duration=12.0),
            fourier_recording(iiwa.pin_model, truth, seed=11, duration=6.0),
            fourier_recording(iiwa.pin_model, truth, seed=12, duration=6.0, speed=2.0))
