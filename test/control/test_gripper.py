"""Gripper compensation: the F/T reading minus the gripper's predicted wrench leaves the contact."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control.gripper import GripperCompensation
from idyn_ros.dynamics import RobotModel
from idyn_ros.errors import ParameterError
from idyn_ros.robots.spec import Payload

GRIPPER = Payload(0.9, (0.004, -0.003, 0.07), (0.003, 0.0001, 0.0, 0.002, 0.0, 0.0015))


class ExactModel:
    """Stands in for a trained robot+gripper (or bare-arm) artifact: its RNEA, stateless."""

    fallback = False

    def __init__(self, model: RobotModel) -> None:
        self.model = model

    def warm_up(self, q: np.ndarray) -> None:
        pass

    def compute(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        return self.model.rnea(q, dq, ddq)


def _run(comp: GripperCompensation, push: np.ndarray | None = None) -> np.ndarray:
    """The ideal UR5 plant carrying GRIPPER, moving; noise-free sensor; returns the compensated wrenches."""
    from idyn_ros.control.reference import MinJerkMove
    from idyn_ros.sim import Plant
    from idyn_ros.sim.ft_sensor import FlangeForceTorqueSensor
    from idyn_ros.sim.loop import controller_for, run_episode

    model = comp.robot
    plant = Plant("ur5", "ideal")
    plant.set_payload(GRIPPER)
    sensor = FlangeForceTorqueSensor(plant, noise_std=(0.0, 0.0))
    controller = controller_for("ur5", model, "medium")
    controller.set_payload(GRIPPER)
    out = []
    events = [] if push is None else [(0.5, lambda p: p.apply_wrench("", push, 10.0))]

    def on_tick(k: int, state: object, _cmd: np.ndarray) -> None:
        if comp.update(round(state.t * 1e9), state.q, state.dq, sensor.read()) and state.t > 0.7:
            out.append(comp.compensated.copy())

    start = np.array([0.3, -1.2, 1.4, -1.0, -1.5, 0.2])  # away from the singular poses (J^T has no inverse there)
    run_episode(plant, controller, MinJerkMove(start, [start + 0.5], [1.0]), hold=0.3, on_tick=on_tick, events=events)
    return np.asarray(out)


@pytest.fixture(scope="module")
def ur5() -> RobotModel:
    return RobotModel.from_robot("ur5")


def test_rbd_only_with_the_right_gripper_leaves_nothing_but_filter_lag(ur5: RobotModel) -> None:
    raw_weight = GRIPPER.mass * 9.81
    left = _run(GripperCompensation(ur5, 1000.0, gripper=GRIPPER))
    assert np.linalg.norm(left[:, :3], axis=1).max() < 0.05 * raw_weight


def test_learned_form_is_consistent_and_contact_comes_through(ur5: RobotModel) -> None:
    """tau_RG - tau_R mapped through (J^T)^+ is the gripper's wrench (eq. 23 made consistent): with exact models the
    compensated reading is the contact alone."""
    # (damping 1e-4: the exactness of the form; the default 0.01 biases it near a singularity)
    comp = GripperCompensation(ur5, 1000.0, ExactModel(ur5.with_payload(GRIPPER)), ExactModel(ur5), damping=1e-4)
    assert comp.source == "learned"
    assert np.abs(_run(comp)[:, :3]).max() < 0.05 * GRIPPER.mass * 9.81
    push = np.array([0.0, 0.0, -15.0, 0.0, 0.0, 0.0])
    contact = _run(GripperCompensation(ur5, 1000.0, ExactModel(ur5.with_payload(GRIPPER)), ExactModel(ur5),
                                       damping=1e-4), push)
    assert np.median(np.linalg.norm(contact[:, :3], axis=1)) == pytest.approx(15.0, rel=0.05)
    # the thesis' eq. 23 as written (the whole robot+gripper torque through J^-T) is not the gripper at all
    whole = GripperCompensation(ur5, 1000.0, ExactModel(ur5.with_payload(GRIPPER)), ExactModel(_zero_arm(ur5)))
    assert np.abs(_run(whole)[:, :3]).max() > 10 * GRIPPER.mass * 9.81


def _zero_arm(model: RobotModel) -> RobotModel:
    return model.with_inertial_parameters(np.zeros((model.n, 10)) + np.array([1e-9] + [0.0] * 9))


def test_needs_a_model_or_the_gripper(ur5: RobotModel) -> None:
    with pytest.raises(ParameterError, match="gripper"):
        GripperCompensation(ur5, 1000.0)
