"""The process's hot loop (idyn_ros/nodes/hot_loop.py) over real DDS inside one process."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.ros


@pytest.fixture()
def loop(rclpy_context):
    from idyn_ros.nodes.hot_loop import HotLoop

    HotLoop.enable(True)
    try:
        yield HotLoop.for_context(rclpy_context)
    finally:
        HotLoop.stop_all()
        HotLoop.enable(False)


def _wait(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


def test_messages_reach_callbacks_in_registration_order_and_unsubscribe_stops_them(rclpy_context, loop):
    import rclpy
    from std_msgs.msg import Float64

    from idyn_ros.nodes import hot_loop
    from idyn_ros.nodes.common import HOT_IN

    node = rclpy.create_node("hot_loop_test", context=rclpy_context)
    order: list[str] = []

    def block(_msg) -> None:  # keeps the loop busy until both readers hold the sample: one wake-up serves both
        order.append("block")
        pub.publish(Float64(data=1.0))
        time.sleep(0.2)

    blocker = hot_loop.subscribe(node, Float64, "/hot_loop_test/block", block, HOT_IN)
    first = hot_loop.subscribe(node, Float64, "/hot_loop_test/x", lambda m: order.append("first"), HOT_IN)
    hot_loop.subscribe(node, Float64, "/hot_loop_test/x", lambda m: order.append("second"), HOT_IN)
    pub = node.create_publisher(Float64, "/hot_loop_test/x", HOT_IN)
    block_pub = node.create_publisher(Float64, "/hot_loop_test/block", HOT_IN)
    loop.start()
    # one shared subscription per topic: the message is taken once and handed to both callbacks
    assert _wait(lambda: pub.get_subscription_count() == 1 and block_pub.get_subscription_count() == 1)
    block_pub.publish(Float64(data=1.0))
    assert _wait(lambda: len(order) >= 3)
    assert order[:3] == ["block", "first", "second"], "ready together: served in registration order"
    hot_loop.unsubscribe(node, blocker)
    hot_loop.unsubscribe(node, first)
    assert _wait(lambda: block_pub.get_subscription_count() == 0)  # its last callback gone: destroyed
    assert pub.get_subscription_count() == 1  # "second" still listens
    n_first = order.count("first")
    for _ in range(5):
        pub.publish(Float64(data=2.0))
        time.sleep(0.02)
    assert order.count("first") == n_first and order.count("second") > 1
    node.destroy_node()


def test_every_runs_in_silence(rclpy_context, loop):
    ticks: list[float] = []
    loop.every(0.01, lambda: ticks.append(time.monotonic()))
    loop.start()
    assert _wait(lambda: len(ticks) >= 10, 5.0), "the watchdog hook must run without any message"


def test_a_raising_callback_stops_the_process_context(rclpy_context, loop):
    import rclpy
    from std_msgs.msg import Float64

    from idyn_ros.nodes import hot_loop
    from idyn_ros.nodes.common import HOT_IN

    node = rclpy.create_node("hot_loop_raise", context=rclpy_context)
    hot_loop.subscribe(node, Float64, "/hot_loop_test/boom", lambda m: 1 / 0, HOT_IN)
    pub = node.create_publisher(Float64, "/hot_loop_test/boom", HOT_IN)
    loop.start()
    assert _wait(lambda: pub.get_subscription_count() == 1)
    pub.publish(Float64(data=1.0))
    assert _wait(lambda: not rclpy_context.ok()), \
        "an exception must end the process like a crashed executor (the plant's drive watchdog then holds)"
    assert isinstance(loop.error, ZeroDivisionError)


def test_urgent_subscription_is_served_between_slow_callbacks(rclpy_context, loop):
    """A burst of slow monitoring callbacks delays an urgent message by one callback, not the whole burst."""
    import rclpy
    from std_msgs.msg import Float64

    from idyn_ros.nodes import hot_loop
    from idyn_ros.nodes.common import HOT_IN

    node = rclpy.create_node("hot_loop_urgent", context=rclpy_context)
    order: list[str] = []

    def block(_msg) -> None:  # keeps the loop busy while the burst arrives, so all three are ready at once
        order.append("block")
        slow_pub.publish(Float64(data=1.0))
        time.sleep(0.2)

    def slow(name: str):
        def callback(_msg) -> None:
            order.append(name)
            if name == "slow0":  # while the first slow callback runs, the urgent message arrives
                urgent_pub.publish(Float64(data=1.0))
                time.sleep(0.05)
        return callback

    hot_loop.subscribe(node, Float64, "/hot_loop_test/urgent", lambda m: order.append("urgent"), HOT_IN,
                       urgent=True)
    hot_loop.subscribe(node, Float64, "/hot_loop_test/block", block, HOT_IN)
    for i in range(3):
        hot_loop.subscribe(node, Float64, "/hot_loop_test/slow", slow(f"slow{i}"), HOT_IN)
    urgent_pub = node.create_publisher(Float64, "/hot_loop_test/urgent", HOT_IN)
    block_pub = node.create_publisher(Float64, "/hot_loop_test/block", HOT_IN)
    slow_pub = node.create_publisher(Float64, "/hot_loop_test/slow", HOT_IN)
    loop.start()
    assert _wait(lambda: slow_pub.get_subscription_count() == 1 and urgent_pub.get_subscription_count() == 1
                 and block_pub.get_subscription_count() == 1)
    block_pub.publish(Float64(data=1.0))
    assert _wait(lambda: len(order) >= 5)
    assert order[:5] == ["block", "slow0", "urgent", "slow1", "slow2"], order
    node.destroy_node()


def test_a_shared_topic_keeps_order_for_the_monitoring_callbacks(rclpy_context, loop):
    """The controller and monitoring nodes on one /joint_states subscription: a message arriving during the
    monitoring callbacks goes to the urgent callback at once, and to the others after the current message."""
    import rclpy
    from std_msgs.msg import Float64

    from idyn_ros.nodes import hot_loop
    from idyn_ros.nodes.common import HOT_IN

    node = rclpy.create_node("hot_loop_shared", context=rclpy_context)
    order: list[str] = []

    def slow(msg) -> None:
        order.append(f"S1({msg.data:g})")
        if msg.data == 1.0:
            pub.publish(Float64(data=2.0))
            time.sleep(0.05)

    hot_loop.subscribe(node, Float64, "/hot_loop_test/js", lambda m: order.append(f"U({m.data:g})"), HOT_IN,
                       urgent=True)
    hot_loop.subscribe(node, Float64, "/hot_loop_test/js", slow, HOT_IN)
    hot_loop.subscribe(node, Float64, "/hot_loop_test/js", lambda m: order.append(f"S2({m.data:g})"), HOT_IN)
    pub = node.create_publisher(Float64, "/hot_loop_test/js", HOT_IN)
    loop.start()
    assert _wait(lambda: pub.get_subscription_count() == 1)
    pub.publish(Float64(data=1.0))
    assert _wait(lambda: len(order) >= 6)
    assert order[:6] == ["U(1)", "S1(1)", "U(2)", "S2(1)", "S1(2)", "S2(2)"], order
    node.destroy_node()


def test_joint_states_keep_the_newest_of_each_publisher_so_a_gripper_cannot_displace_the_arm(rclpy_context, loop):
    """Arm, gripper, arm, gripper queued while the loop is busy: the newest arm state and the newest gripper state
    are served, in arrival order, each with its publisher's id (with a depth-1 queue the gripper's last message was
    all that was left: a lockstep Panda launch with a 30 Hz gripper timed out 21 times in 30 s)."""
    import rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64

    from idyn_ros.nodes import hot_loop
    from idyn_ros.nodes.common import HOT_IN, JOINT_STATES_IN

    node = rclpy.create_node("hot_loop_js", context=rclpy_context)
    seen: list[tuple[str, float, bytes]] = []
    arm, gripper = ["j1", "j2"], ["finger"]

    def block(_msg) -> None:  # keeps the loop busy while the four states arrive
        for pub, names, x in ((arm_pub, arm, 1.0), (gripper_pub, gripper, 2.0), (arm_pub, arm, 3.0),
                              (gripper_pub, gripper, 4.0)):
            pub.publish(JointState(name=names, position=[x] * len(names)))
        time.sleep(0.2)

    hot_loop.subscribe(node, Float64, "/hot_loop_test/block_js", block, HOT_IN)
    for urgent in (True, False):  # the controller's (urgent) and a monitoring node's callback share the topic
        hot_loop.subscribe_joint_states(node, "/hot_loop_test/joint_states",
                                        lambda m, source, u=urgent: seen.append((f"{m.name[0]}{'!' if u else ''}",
                                                                                 m.position[0], source)), urgent=urgent)
    arm_pub = node.create_publisher(JointState, "/hot_loop_test/joint_states", JOINT_STATES_IN)
    gripper_pub = node.create_publisher(JointState, "/hot_loop_test/joint_states", JOINT_STATES_IN)
    block_pub = node.create_publisher(Float64, "/hot_loop_test/block_js", HOT_IN)
    loop.start()
    assert _wait(lambda: arm_pub.get_subscription_count() == 1 and block_pub.get_subscription_count() == 1)
    block_pub.publish(Float64(data=1.0))
    assert _wait(lambda: len(seen) >= 4)
    time.sleep(0.1)
    assert [s[:2] for s in seen] == [("j1!", 3.0), ("j1", 3.0), ("finger!", 4.0), ("finger", 4.0)], seen
    arm_id, gripper_id = seen[0][2], seen[2][2]
    assert isinstance(arm_id, bytes) and arm_id != gripper_id and seen[1][2] == arm_id and seen[3][2] == gripper_id
    node.destroy_node()


def test_the_nodes_of_a_process_share_one_clock_subscription_on_the_loop(rclpy_context, loop):
    """Under sim time each node's own /clock subscription woke the executor at the lockstep plant's 1 kHz: the
    composed graph's executor thread spent ~45 % of a core on it, and the lockstep loop ran at half the speed."""
    import rclpy
    from rclpy.parameter import Parameter
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock

    from idyn_ros.nodes import hot_loop

    nodes = [rclpy.create_node(f"clock_test_{i}", context=rclpy_context,
                               parameter_overrides=[Parameter("use_sim_time", value=True)]) for i in range(3)]
    plain = rclpy.create_node("clock_test_wall", context=rclpy_context)  # no sim time: left alone
    for node in (*nodes, plain):
        hot_loop.serve_clock(node)
    pub = plain.create_publisher(Clock, "/clock", QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
    loop.start()
    assert _wait(lambda: pub.get_subscription_count() == 1)  # one, the loop's: none of the nodes' own
    assert all(n._time_source._clock_sub is None for n in nodes)
    msg = Clock()
    msg.clock.sec = 42
    assert _wait(lambda: (pub.publish(msg), all(n.get_clock().now().nanoseconds == 42_000_000_000 for n in nodes))[1])
    assert plain.get_clock().now().nanoseconds > 1_000_000_000_000_000_000  # wall time, not /clock
    for node in (*nodes, plain):
        node.destroy_node()
