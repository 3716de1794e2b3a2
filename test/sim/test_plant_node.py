"""The plant node over real DDS on loopback: topics, lockstep stepping, services, bad commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros


class Harness:
    """A controller-side node in its own rclpy context (its own DDS participant)."""

    def __init__(self, robot: str) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from idyn_ros.msg import PlantGroundTruth
        from idyn_ros.nodes.common import HOT_IN, MONITOR
        from idyn_ros.robots import get_robot
        from idyn_ros.srv import ApplyWrench, ResetJoints, SetPayload

        self.spec = get_robot(robot)
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("test_controller", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.states: list = []
        self.truth: list = []
        self.diag: dict[str, str] = {}
        self.clock: list = []
        self.answer = None  # callable(state msg) -> list of torques, or None = do not answer
        self.pub = self.node.create_publisher(
            Float64MultiArray, f"/{self.spec.effort_controller}/commands", MONITOR
        )
        self._Cmd = Float64MultiArray

        def on_state(msg):
            self.states.append(msg)
            if self.answer is not None:
                values = self.answer(msg)
                if values is not None:  # None: this state gets no answer
                    self.send(values)

        def on_diag(msg):
            for status in msg.status:
                if status.name.startswith("idyn plant"):
                    self.diag = {kv.key: kv.value for kv in status.values}
                    self.diag["_message"] = status.message

        self.node.create_subscription(JointState, "/joint_states", on_state, HOT_IN)
        self.node.create_subscription(PlantGroundTruth, "/plant/ground_truth", self.truth.append, MONITOR)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, MONITOR)
        self.node.create_subscription(Clock, "/clock", self.clock.append, HOT_IN)
        self.wrench = self.node.create_client(ApplyWrench, "/plant/apply_wrench")
        self.payload = self.node.create_client(SetPayload, "/plant/set_payload")
        self.reset = self.node.create_client(ResetJoints, "/plant/reset_joints")

    def send(self, values) -> None:
        if not self.pub.get_subscription_count():  # volatile QoS: unmatched = lost
            assert self.spin_until(lambda: self.pub.get_subscription_count() > 0), "plant not subscribed"
        self.pub.publish(self._Cmd(data=[float(v) for v in values]))

    def spin_until(self, predicate, timeout: float = 20.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.02)
            if predicate():
                return True
        return False

    def call(self, client, request, timeout: float = 20.0):
        assert client.wait_for_service(timeout_sec=timeout), client.srv_name
        future = client.call_async(request)
        assert self.spin_until(future.done, timeout)
        return future.result()

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


def _hold(kp: float = 80.0, kd: float = 8.0):
    target: list = []

    def answer(msg):
        q = np.asarray(msg.position)
        if not target:
            target.append(q.copy())
        return kp * (target[0] - q) - kd * np.asarray(msg.velocity)

    return answer


@pytest.fixture()
def harness_factory():
    made = []

    def make(robot: str) -> Harness:
        h = Harness(robot)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_lockstep_loop_over_dds(robot, harness_factory):
    from idyn_ros.nodes.plant import PlantRunner

    with PlantRunner(robot=robot, profile="true", lockstep_wait=0.5) as runner:
        h = harness_factory(robot)
        assert h.spin_until(lambda: len(h.states) > 0), "no /joint_states from the plant"
        first = h.states[-1]
        assert list(first.name) == list(h.spec.joint_names)
        assert len(first.position) == len(first.velocity) == len(first.effort) == len(h.spec.joint_names)
        h.answer = _hold()
        h.send(h.answer(first))
        assert h.spin_until(lambda: runner.node.ticks >= 200, timeout=60.0), runner.node.ticks
        h.answer = None
        h.spin_until(lambda: False, timeout=0.2)
        d = runner.node.diagnostics()
    stamps = [s.header.stamp.sec + 1e-9 * s.header.stamp.nanosec for s in h.states]
    steps = np.diff(stamps)
    assert np.all(steps >= 0) and np.isclose(np.median(steps), 1e-3)  # sim-time stamps, 1 kHz
    assert h.clock and h.clock[-1].clock.sec + 1e-9 * h.clock[-1].clock.nanosec >= 0.2 - 1e-9
    assert d["rejected_wrong_length"] == d["rejected_nan_inf"] == d["rejected_over_limit"] == 0
    assert d["commands_accepted"] >= 200
    assert np.all(np.isfinite(h.states[-1].effort))
    assert 0.0 < d["tick_p50_us"] <= d["tick_p99_us"] and d["answer_wait_p50_us"] > 0.0  # the period's split


def _stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def _controller_like(lose_first: bool):
    """Answers like the controller node: a state whose stamp equals the last one seen is a duplicate
    (no answer); with ``lose_first`` the answer to the first state is lost (sent before discovery)."""
    hold = _hold()
    last: list[int] = []
    lost: list[int] = []

    def answer(msg):
        stamp = _stamp_ns(msg)
        if last and stamp == last[-1]:
            return None
        last.append(stamp)
        tau = hold(msg)
        if lose_first and not lost:
            lost.append(stamp)
            return None
        return tau

    return answer


@pytest.mark.parametrize("how", ["override", "ros-args"])
def test_initial_positions_parameter_is_a_double_list(how, harness_factory):
    """initial_positions:=[...] (doubles) is accepted (it was typed BYTE_ARRAY from its [] default)."""
    from idyn_ros.nodes.plant import PlantRunner

    q0 = [0.1, -0.3, 0.0, -2.0, 0.0, 1.7, 0.3]
    if how == "override":
        with PlantRunner(robot="panda", profile="ideal", initial_positions=q0):
            h = harness_factory("panda")
            assert h.spin_until(lambda: len(h.states) > 0), "no /joint_states from the plant"
        np.testing.assert_array_equal(h.states[0].position, q0)
        return
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.Popen(
        [sys.executable, "-m", "idyn_ros.nodes.plant", "--ros-args", "-p", "robot:=panda", "-p", "profile:=ideal",
         "-p", f"initial_positions:=[{', '.join(repr(v) for v in q0)}]"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        h = harness_factory("panda")
        ok = h.spin_until(lambda: len(h.states) > 0, timeout=60.0)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert ok, out
    np.testing.assert_array_equal(h.states[0].position, q0)  # braked: every state until a command holds q0


def test_lockstep_start_survives_lost_first_answer_and_late_controller(harness_factory):
    """The plant keeps its clock running while braked: a late controller whose first answer is lost and
    which drops duplicate stamps still gets the loop going (it deadlocked when the braked plant
    repeated the same stamp)."""
    from idyn_ros.nodes.plant import PlantRunner

    q0 = [0.0, -1.2, 1.5, -0.3, 0.0, 0.0]
    with PlantRunner(robot="ur5", profile="true", lockstep_wait=0.1, initial_positions=q0) as runner:
        time.sleep(0.5)  # the plant has published (and re-published) before the controller exists
        h = harness_factory("ur5")
        h.answer = _controller_like(lose_first=True)
        assert h.spin_until(lambda: runner.node.ticks >= 100, timeout=60.0), (runner.node.ticks, len(h.states))
        h.answer = None
        h.spin_until(lambda: False, timeout=0.2)
        d = runner.node.diagnostics()
    assert d["brake_ticks"] >= 1 and d["commands_accepted"] >= 100
    stamps = np.array([_stamp_ns(s) for s in h.states])
    assert np.all(np.diff(stamps) > 0), "lockstep stamps must strictly increase"
    braked = [s for s in h.states if _stamp_ns(s) <= stamps[0] + 1_000_000]  # before the first command
    np.testing.assert_allclose(braked[0].position, q0, atol=1e-3)  # held by the brakes (encoder quantised)


def test_lockstep_waits_for_the_expected_listeners_before_it_starts(harness_factory):
    """lockstep_subscribers=2: one answering controller is not enough to start; a second listener (a recorder)
    starts the loop, which it then hears from its first stepped state on."""
    from idyn_ros.nodes.plant import PlantRunner

    with PlantRunner(robot="ur5", profile="ideal", lockstep_wait=0.1, lockstep_subscribers=2) as runner:
        h = harness_factory("ur5")
        h.answer = _controller_like(lose_first=False)
        h.spin_until(lambda: False, timeout=1.5)
        assert runner.node.ticks == 0 and len(h.states) >= 2  # braked republishes answered, none accepted
        harness_factory("ur5")  # the second /joint_states subscription
        assert h.spin_until(lambda: runner.node.ticks >= 50, timeout=30.0), runner.node.ticks
        h.answer = None


def test_reset_joints_gets_a_fresh_stamp(harness_factory):
    from idyn_ros.nodes.plant import PlantRunner
    from idyn_ros.srv import ResetJoints

    with PlantRunner(robot="ur5", profile="ideal", lockstep_wait=5.0):
        h = harness_factory("ur5")
        assert h.spin_until(lambda: len(h.states) > 0)
        before = _stamp_ns(h.states[-1])
        q = [0.2, -1.0, 1.0, 0.0, 0.5, 0.0]
        r = h.call(h.reset, ResetJoints.Request(joint_names=list(h.spec.joint_names), positions=q))
        assert r.success, r.message
        assert h.spin_until(lambda: np.allclose(h.states[-1].position, q), timeout=4.0)  # < lockstep_wait
        assert _stamp_ns(h.states[-1]) > before


def test_services_and_ground_truth(harness_factory):
    from geometry_msgs.msg import Wrench

    from idyn_ros.nodes.plant import PlantRunner
    from idyn_ros.srv import ApplyWrench, ResetJoints, SetPayload

    with PlantRunner(robot="panda", profile="ideal", lockstep_wait=0.5):
        h = harness_factory("panda")
        q = [0.1, -0.3, 0.0, -2.0, 0.0, 1.7, 0.3]
        r = h.call(h.reset, ResetJoints.Request(joint_names=list(h.spec.joint_names), positions=q))
        assert r.success, r.message
        assert h.spin_until(lambda: h.states and np.allclose(h.states[-1].position, q))
        bad = h.call(h.reset, ResetJoints.Request(joint_names=["nope"], positions=[0.0]))
        assert not bad.success and "unknown joints" in bad.message

        w = Wrench()
        w.force.z = -20.0
        r = h.call(h.wrench, ApplyWrench.Request(link="", wrench=w, duration=5.0))
        assert r.success, r.message
        assert h.spin_until(lambda: h.truth and h.truth[-1].link == "panda_link8")
        gt = h.truth[-1]
        assert gt.wrench.force.z == -20.0
        jt_f = np.asarray(gt.external_torque)
        assert np.abs(jt_f).max() > 1.0
        bad = h.call(h.wrench, ApplyWrench.Request(link="no_link", wrench=w, duration=1.0))
        assert not bad.success and "unknown link" in bad.message

        r = h.call(h.payload, SetPayload.Request(mass=1.5, inertia=[0.01, 0, 0, 0.01, 0, 0.01]))
        assert r.success, r.message
        r = h.call(h.payload, SetPayload.Request(mass=1.0, inertia=[1.0, 0, 0, 0.01, 0, 0.01]))
        assert not r.success and "physically consistent" in r.message
        h.send([0.0] * 7)  # one tick: ground truth now carries the payload
        assert h.spin_until(lambda: h.truth and h.truth[-1].payload_mass == 1.5)
        r = h.call(h.payload, SetPayload.Request(mass=3.0))  # a point mass (zero inertia) as the other nodes take it
        assert r.success and r.message.startswith("payload 3.000 kg"), r.message
        r = h.call(h.payload, SetPayload.Request(mass=0.0))
        assert r.success and r.message == "payload removed", r.message  # it said 'payload 0.000 kg at panda_link8'


def test_bad_commands_are_counted_and_watchdog_trips(harness_factory):
    from idyn_ros.nodes.plant import PlantRunner

    with PlantRunner(robot="ur5", profile="ideal", lockstep_wait=0.05, diagnostics_period=0.1) as runner:
        h = harness_factory("ur5")
        assert h.spin_until(lambda: len(h.states) > 0)
        h.send([0.0] * 6)  # start
        h.send([0.0] * 5)  # wrong length
        h.send([float("nan")] * 6)
        h.send([1e4] * 6)  # beyond effort limits (reject by default)
        assert h.spin_until(lambda: h.diag.get("commands_received") == "4", timeout=20.0), h.diag
        assert h.diag["rejected_wrong_length"] == "1"
        assert h.diag["rejected_nan_inf"] == "1"
        assert h.diag["rejected_over_limit"] == "1"
        # no more commands: the lockstep plant waits lockstep_wait, then steps at zero torque
        assert h.spin_until(lambda: int(h.diag.get("lockstep_timeouts", "0")) >= 2, timeout=20.0), h.diag
        assert h.diag["watchdog_active"] == "True"
        assert "watchdog" in h.diag["_message"]
        assert runner.node.gate.counters.watchdog_trips == 1


def test_realtime_node_process_runs_and_stops_on_sigint(harness_factory):
    """`python -m idyn_ros.nodes.plant` (main) in its own process, real-time clock, Ctrl-C exits 0."""
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    proc = subprocess.Popen(
        [sys.executable, "-m", "idyn_ros.nodes.plant", "--ros-args", "-p", "robot:=iiwa14",
         "-p", "clock_mode:=realtime", "-p", "profile:=true", "-p", "diagnostics_period:=0.2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        h = harness_factory("iiwa14")
        h.answer = _hold()
        assert h.spin_until(lambda: len(h.states) > 300, timeout=60.0), len(h.states)
        assert h.spin_until(lambda: int(h.diag.get("ticks", "0")) > 100, timeout=20.0), h.diag
        assert "period_p50_us" in h.diag
        stamps = np.array([s.header.stamp.sec + 1e-9 * s.header.stamp.nanosec for s in h.states])
        assert stamps[-1] > 1e9  # wall-clock stamps in real-time mode
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert proc.returncode == 0, out


def test_bad_parameter_exits_with_one_line_error():
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    out = subprocess.run(
        [sys.executable, "-m", "idyn_ros.nodes.plant", "--ros-args", "-p", "robot:=ur5", "-p", "clock_mode:=fast"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 2
    assert "clock_mode='fast' is not one of" in out.stderr and "Traceback" not in out.stderr


def test_node_tick_fills_the_preallocated_joint_state():
    """The hot path writes the plant's readings into the message's own buffers (no per-tick conversion
    or reassignment) and publishes exactly what the plant measures."""
    import rclpy
    from rclpy.context import Context
    from std_msgs.msg import Float64MultiArray

    from idyn_ros.nodes.common import stamp_to_ns
    from idyn_ros.nodes.plant import PlantNode

    context = Context()
    rclpy.init(context=context)
    try:
        node = PlantNode(context=context, robot="panda", profile="ideal")
        js = node._js
        buffers = (js.position, js.velocity, js.effort)
        command = [1.0, -2.0, 0.5, 3.0, 0.0, 0.2, -0.1]
        msg = Float64MultiArray(data=command)
        for _ in range(5):
            node._on_command(msg)
        s = node.plant.state()
        assert node.ticks == 5
        assert all(a is b for a, b in zip(buffers, (js.position, js.velocity, js.effort), strict=True))
        np.testing.assert_array_equal(js.position, s.q)
        np.testing.assert_array_equal(js.velocity, s.dq)
        np.testing.assert_array_equal(js.effort, command)  # ideal: the reading is the drive torque
        assert stamp_to_ns(js.header.stamp) == round(node.plant.time * 1e9) == 5_000_000
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def test_inprocess_lockstep_benchmark_runs():
    from idyn_ros.bench.sim import inprocess_lockstep

    r = inprocess_lockstep("ur5", seconds=0.3, profile="ideal")
    assert r["matched_readers"] == 1 and r["ticks"] > 50 and r["commands_rejected"] == 0
    assert r["sim_seconds_per_wall_second"] == pytest.approx(1000.0 / r["loop_mean_us"])  # one 1 ms period per tick
    assert 0.0 < r["node_callback_share_of_wall"] <= 1.0
