"""The plant's flange force/torque sensor: MuJoCo's own interaction force, contact through the tool, the node."""

from __future__ import annotations

import time

import mujoco
import numpy as np
import pytest

from idyn_ros.robots.spec import Payload
from idyn_ros.sim import Plant
from idyn_ros.sim.ft_sensor import FlangeForceTorqueSensor
from idyn_ros.sim.plant import PAYLOAD_LINK

GRIPPER = Payload(1.5, (0.03, -0.05, 0.07), (0.004, 0.0005, -0.0003, 0.003, 0.0002, 0.002))


def _moving_plant(robot: str) -> Plant:
    plant = Plant(robot, "ideal")
    plant.set_payload(GRIPPER)
    rng = np.random.default_rng(0)
    for _ in range(150):
        plant.step(rng.normal(scale=5.0, size=plant.n))
    return plant


@pytest.mark.parametrize("robot", ["ur5", "panda", "iiwa14"])
def test_reading_is_mujocos_interaction_force_of_the_attached_body(robot: str) -> None:
    """Y phi (dynamics/payload.py) against MuJoCo's RNE of the attached body at the same state and acceleration."""
    plant = _moving_plant(robot)
    sensor = FlangeForceTorqueSensor(plant, noise_std=(0.0, 0.0))
    sensor.read()
    m, d = plant.model, plant.data
    for fn in (mujoco.mj_kinematics, mujoco.mj_comPos, mujoco.mj_comVel, mujoco.mj_rnePostConstraint):
        fn(m, d)  # kinematics of the end-of-step state, with the step's acceleration (as the sensor reads it)
    body = m.body(PAYLOAD_LINK).id
    torque_c, force = d.cfrc_int[body][:3], d.cfrc_int[body][3:]  # what the flange applies to the body, about c
    flange = m.body(plant.flange_link).id
    R = d.xmat[flange].reshape(3, 3)
    torque = torque_c + np.cross(d.subtree_com[m.body_rootid[body]] - d.xpos[flange], force)
    expected = -np.concatenate([R.T @ force, R.T @ torque])  # and what the body applies to the flange
    np.testing.assert_allclose(sensor.truth, expected, atol=1e-9 * max(1.0, np.abs(expected).max()))
    assert np.abs(sensor.truth[:3]).max() > 5.0  # it carries the gripper's weight


def test_contact_on_the_tool_passes_through_the_sensor_and_noise_is_as_configured() -> None:
    plant = _moving_plant("ur5")
    sensor = FlangeForceTorqueSensor(plant, noise_std=(0.0, 0.0))
    before = sensor.read().copy()
    push = np.array([10.0, -4.0, 2.0, 0.5, 0.0, -0.3])
    plant.apply_wrench("", push, 1.0)
    with_push = sensor.read()
    R = sensor.model.frame_placement(plant.data.qpos[plant._qidx])[:3, :3]
    np.testing.assert_allclose(with_push - before, np.concatenate([R.T @ push[:3], R.T @ push[3:]]), atol=1e-9)
    noisy = FlangeForceTorqueSensor(plant, noise_std=(0.1, 0.01), bias=np.arange(6.0), seed=3)
    reads = np.array([noisy.read() for _ in range(2000)])
    np.testing.assert_allclose(reads.mean(0), noisy.truth + np.arange(6.0), atol=0.01)
    np.testing.assert_allclose(reads.std(0), [0.1] * 3 + [0.01] * 3, rtol=0.1)
    bare = FlangeForceTorqueSensor(Plant("ur5", "ideal"), noise_std=(0.0, 0.0))
    np.testing.assert_allclose(bare.read(), 0.0, atol=1e-12)  # nothing attached, no contact: nothing to read


@pytest.mark.ros
def test_plant_node_publishes_the_sensor(rclpy_context) -> None:
    from geometry_msgs.msg import WrenchStamped
    from rclpy.executors import SingleThreadedExecutor

    from idyn_ros.nodes.common import MONITOR
    from idyn_ros.nodes.plant import PlantNode

    node = PlantNode(context=rclpy_context, robot="ur5", profile="ideal", ft_sensor_topic="/ft_sensor/wrench")
    node.plant.set_payload(GRIPPER)
    got: list = []
    node.create_subscription(WrenchStamped, "/ft_sensor/wrench", got.append, MONITOR)
    exe = SingleThreadedExecutor(context=rclpy_context)
    exe.add_node(node)
    deadline = time.monotonic() + 5.0
    while len(got) < 3 and time.monotonic() < deadline:  # braked republishes (no controller): one reading each
        exe.spin_once(timeout_sec=0.05)
    assert len(got) >= 3
    msg = got[-1]
    assert msg.header.frame_id == node.plant.flange_link
    force = np.array([msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z])
    assert np.linalg.norm(force) == pytest.approx(GRIPPER.mass * 9.81, rel=0.02)  # at rest: the gripper's weight
    node.destroy_node()
