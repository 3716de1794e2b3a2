"""The controller core's decisions (idyn_ros/control/controller.py); its faults are in test/faults/."""

from __future__ import annotations

import numpy as np

from idyn_ros.control.controller import MODE_ACTIVE, Controller
from idyn_ros.parameters import load

PANDA = [f"panda_joint{i}" for i in range(1, 8)]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def test_activation_releases_the_held_arm_without_sagging():
    """The first command is the full law torque (the rate limiter starts from it): on the ideal Panda with exact
    RBD feedforward the arm does not move. Starting the limiter from zero sagged it 4.2 deg in 150 ms."""
    from idyn_ros.control.feedforward import FeedforwardComputer
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import Hold, controller_for, run_episode

    model = RobotModel.from_robot("panda")
    controller = controller_for("panda", model, "medium", FeedforwardComputer(model, None, "rbd"))
    ep = run_episode(Plant("panda", "ideal"), controller, Hold(Q0, 0.15), hold=0.0)
    np.testing.assert_allclose(ep.tau_cmd[0], model.gravity(Q0), atol=1e-9)
    assert np.degrees(np.abs(ep.q - Q0).max()) < 1e-6


def test_torque_space_damping_uses_the_feedback_models_inertia_at_the_clipped_neutral_pose():
    c = Controller.for_robot(load("controller", "panda", overrides={"feedback_space": "torque"}, n=7))
    neutral = np.clip(np.zeros(7), c.robot.lower, c.robot.upper)  # Panda joint 4 cannot reach 0
    inertia = np.diag(c.feedback_model.mass_matrix(neutral))
    np.testing.assert_allclose(c.kd, 2.0 * np.sqrt(c.kp * inertia))


def test_feedback_armature_adds_rotor_inertia_to_the_feedbacks_mass_matrix_only():
    """The rotor inertia a URDF leaves out scales the feedback (torque-space Kd here), not the feedforward or the
    safe hold; the wrong length or a change after construction is refused."""
    import pytest

    from idyn_ros.errors import ParameterError

    rotor = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    params = load("controller", "panda", overrides={"feedback_space": "torque", "feedback_armature": rotor}, n=7)
    c, bare = Controller.for_robot(params), Controller.for_robot(params.replace(7, feedback_armature=()))
    neutral = np.clip(np.zeros(7), c.robot.lower, c.robot.upper)
    np.testing.assert_allclose(c.feedback_model.mass_matrix(neutral),
                               bare.feedback_model.mass_matrix(neutral) + np.diag(rotor), atol=1e-12)
    np.testing.assert_allclose(c.kd, 2.0 * np.sqrt(c.kp * (np.diag(bare.feedback_model.mass_matrix(neutral)) + rotor)))
    np.testing.assert_allclose(c.robot.mass_matrix(neutral), bare.robot.mass_matrix(neutral))  # the nominal model
    with pytest.raises(ParameterError, match="feedback_armature"):
        Controller.for_robot(params.replace(feedback_armature=(0.1,) * 6))
    with pytest.raises(ParameterError, match="feedback_armature is fixed"):
        c.set_params(params.replace(7, feedback_armature=()))


def test_a_joint_past_its_position_limit_latches_safe_mode():
    """A lagging preset drove a plant joint into its end stop (-175.8 deg against -176): the controller pushed at the
    effort limit until the saturation timeout. Past the range by the margin it now holds at once, and says where."""
    from idyn_ros.control.controller import MODE_SAFE_DAMPING

    params = load("controller", "panda", overrides={"torque_rate_limit": -1.0}, n=7)
    upper = Controller.for_robot(params).robot.upper[3]
    for margin, past, tripped in ((0.05, 0.04, False), (0.05, 0.06, True), (0.0, 0.5, False)):
        c = Controller.for_robot(params.replace(7, position_limit_margin=margin))
        c.activate()
        q = Q0.copy()
        c.update(PANDA, list(q), [0.0] * 7, [], 1_000_000, 1_000_000)
        q[3] = upper + past
        c.update(PANDA, list(q), [0.0] * 7, [], 2_000_000, 2_000_000)
        assert (c.mode == MODE_SAFE_DAMPING) == tripped, (margin, past, c.reason)
        if tripped:
            assert c.reason.startswith("position limit: panda_joint4 at ") and "outside its range" in c.reason
            q[3] = upper  # back inside: latched until deactivate + activate
            c.update(PANDA, list(q), [0.0] * 7, [], 3_000_000, 3_000_000)
            assert c.mode == MODE_SAFE_DAMPING


def test_where_the_robot_adds_gravity_the_command_and_the_safe_hold_leave_it_out():
    params = load("controller", "panda", overrides={"subtract_gravity": True, "torque_rate_limit": -1.0}, n=7)
    c = Controller.for_robot(params)
    plain = Controller.for_robot(params.replace(7, subtract_gravity=False))
    for core in (c, plain):
        core.activate()
        tau = core.update(PANDA, list(Q0), [0.0] * 7, [], 1_000_000, 1_000_000).copy()
        core.last = tau
    np.testing.assert_allclose(c.last, plain.last - c.robot.gravity(Q0), atol=1e-9)
    assert c.mode == MODE_ACTIVE
    np.testing.assert_allclose(c.stop(), np.zeros(7), atol=1e-12)  # at rest: no damping, and no g(q)
    np.testing.assert_allclose(plain.stop(), c.robot.gravity(Q0), atol=1e-9)
    assert c.stop() is None  # stopped already: nothing more to leave applied
