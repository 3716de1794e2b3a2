"""Torques far beyond the robot's effort limits (another unit) are said before a model is fitted on them."""

from __future__ import annotations

import warnings

import pytest

from idyn_ros.data.dataset import Dataset
from idyn_ros.models.sources import TrainingWarning, to_recording


def _dataset(rec, names, scale: float, effort_kind: str = "torque") -> Dataset:
    return Dataset(t=rec.t, q=rec.q, dq=rec.dq, tau=scale * rec.tau, joint_names=names, effort_kind=effort_kind)


def test_torques_in_mnm_warn_with_the_unit(iiwa, synth):
    with pytest.warns(TrainingWarning, match=r"effort limit of robot 'iiwa14'.*mNm"):
        to_recording(_dataset(synth[0], iiwa.joint_names, 1000.0), iiwa, "mnm.npz")


def test_torques_in_nm_and_currents_do_not_warn(iiwa, synth):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_recording(_dataset(synth[0], iiwa.joint_names, 1.0), iiwa, "nm.npz")
        to_recording(_dataset(synth[0], iiwa.joint_names, 1000.0, "current"), iiwa, "amps.npz")  # not Nm: no limit
