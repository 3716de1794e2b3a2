"""set_payload on the feedforward, the controller core and the wrench observer: the payload is included at once."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.control.feedforward import FeedforwardComputer
from idyn_ros.control.wrench import WrenchObserver
from idyn_ros.dynamics import RobotModel
from idyn_ros.robots.spec import Payload

PAYLOAD = Payload(2.0, (0.04, -0.06, 0.08), (0.01, 0.001, 0.0, 0.008, -0.001, 0.006))


@pytest.fixture(scope="module")
def panda() -> RobotModel:
    return RobotModel.from_robot("panda")


def test_feedforward_includes_and_drops_the_payload(panda: RobotModel) -> None:
    q, dq, ddq = (x[0] for x in panda.random_states(1, 2))
    loaded = panda.with_payload(PAYLOAD)
    ff = FeedforwardComputer(panda, None, "rbd")
    bare = ff.compute(q, dq, ddq).copy()
    ff.set_payload(PAYLOAD)
    assert ff.payload == PAYLOAD
    np.testing.assert_allclose(ff.compute(q, dq, ddq), loaded.rnea(q, dq, ddq), atol=1e-10)
    np.testing.assert_allclose(ff.rbd_part, ff.total)
    ff.set_payload(Payload(0.0))
    assert ff.payload is None
    np.testing.assert_allclose(ff.compute(q, dq, ddq), bare)
    grav = FeedforwardComputer(panda, None, "gravity")
    grav.set_payload(PAYLOAD)
    np.testing.assert_allclose(grav.compute(q, dq, ddq), loaded.gravity(q), atol=1e-10)


def _hold_error(robot: str, payload_known: bool) -> float:
    """Hold a pose on the ideal plant carrying PAYLOAD (medium gains, nominal RBD feedforward); final error, deg."""
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import Hold, controller_for, run_episode

    model = RobotModel.from_robot(robot)
    plant = Plant(robot, "ideal")
    plant.set_payload(PAYLOAD)
    controller = controller_for(robot, model, "medium", FeedforwardComputer(model, None, "rbd"))
    if payload_known:
        controller.set_payload(PAYLOAD)
    q0 = 0.5 * (np.clip(model.lower, -2, 2) + np.clip(model.upper, -2, 2)) + 0.3
    ep = run_episode(plant, controller, Hold(q0, 1.0), hold=0.2)
    assert not ep.failed
    return float(np.degrees(np.abs(ep.q[-1] - q0)).max())


def test_controller_with_the_payload_holds_the_pose() -> None:
    unknown, known = _hold_error("ur5", False), _hold_error("ur5", True)
    assert unknown > 1.0  # the 2 kg payload sags the arm at medium gains ...
    assert known < 0.01  # ... unless the controller includes it


def test_controller_payload_enters_feedback_inertia_and_safe_hold(panda: RobotModel) -> None:
    from idyn_ros.sim.loop import controller_for

    controller = controller_for("panda", panda, "medium")
    q = panda.random_states(1, 3)[0][0]
    M0 = controller.feedback_model.mass_matrix(q)
    controller.set_payload(PAYLOAD)
    assert controller.payload == PAYLOAD
    np.testing.assert_allclose(controller.feedback_model.mass_matrix(q), panda.with_payload(PAYLOAD).mass_matrix(q))
    assert np.abs(controller.feedback_model.mass_matrix(q) - M0).max() > 0.01
    out = np.zeros(panda.n)
    controller._safe_torque(q, np.zeros(panda.n), out)
    np.testing.assert_allclose(out, panda.with_payload(PAYLOAD).gravity(q), atol=1e-10)
    controller.set_payload(None)
    np.testing.assert_allclose(controller.feedback_model.mass_matrix(q), M0)


def test_wrench_observer_does_not_report_a_known_payload_as_contact() -> None:
    """Holding still with the payload: without set_payload both observers report its weight as an external
    force; with it, nothing."""
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import Hold, controller_for, run_episode

    model = RobotModel.from_robot("ur5")
    plant = Plant("ur5", "ideal")
    plant.set_payload(PAYLOAD)
    controller = controller_for("ur5", model, "medium")
    controller.set_payload(PAYLOAD)
    observers = {False: WrenchObserver(model, 1000.0), True: WrenchObserver(model, 1000.0)}
    observers[True].set_payload(PAYLOAD)
    final: dict[bool, np.ndarray] = {}

    def on_tick(k: int, state: object, _cmd: np.ndarray) -> None:
        for known, obs in observers.items():
            if obs.update(round(state.t * 1e9), state.q, state.dq, state.tau):
                final[known] = np.array(obs.wrenches(state.q))

    q0 = np.array([0.3, -1.2, 1.4, -1.0, -1.5, 0.2])
    run_episode(plant, controller, Hold(q0, 0.5), hold=0.2, on_tick=on_tick)
    weight = PAYLOAD.mass * 9.81
    for estimate in final[False]:  # direct, momentum: the payload's weight, straight down
        assert estimate[2] == pytest.approx(-weight, rel=0.05)
    assert np.abs(final[True][:, :3]).max() < 0.02 * weight
