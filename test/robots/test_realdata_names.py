"""Our joint naming meets real recordings: the Panda bag (newer franka_ros2, arm_id ``fer``) and the
UR10 bag (ur_robot_driver names, shared by every UR arm)."""

from __future__ import annotations

import sqlite3

import pytest

from idyn_ros.robots import get_robot, render_urdf

pytestmark = pytest.mark.realdata


def _first_joint_state_names(db3) -> list[str]:
    from rosbags.typesys import Stores, get_typestore

    with sqlite3.connect(f"file:{db3}?mode=ro", uri=True) as connection:
        (topic_id,) = connection.execute("select id from topics where name = '/joint_states'").fetchone()
        (data,) = connection.execute(
            "select data from messages where topic_id = ? order by timestamp limit 1", (topic_id,)
        ).fetchone()
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    return list(typestore.deserialize_cdr(data, "sensor_msgs/msg/JointState").name)


def test_panda_bag_names_are_our_names_with_prefix_fer(shared_data):
    import pinocchio as pin

    names = _first_joint_state_names(shared_data / "panda_bag_30hz" / "panda_exciting_trajectory.db3")
    assert names == [f"fer_joint{i}" for i in range(1, 8)]
    spec = get_robot("panda").with_prefix("fer_")
    assert list(spec.joint_names) == names
    assert list(pin.buildModelFromXML(render_urdf("panda", prefix="fer_")).names[1:]) == names


def test_ur10_bag_names_are_ur5_names(shared_data):
    names = _first_joint_state_names(shared_data / "ur10_bags" / "exciting" / "ur10_exciting_trajectory.db3")
    assert names == list(get_robot("ur5").joint_names)
