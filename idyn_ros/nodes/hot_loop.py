"""The 1 kHz subscriptions of every idyn node in a process, served by one lean wait loop instead of an executor.

Why: rclpy's executors rebuild their wait set in Python from every entity of every node (parameter and
lifecycle services, timers, guard conditions) before each callback. Measured here against the real-time
plant (quiet machine, ``/tmp``-free repro in ``idyn_ros.bench.latency``): a node that only echoes each
/joint_states as a command costs ~450 us of CPU per message on a SingleThreadedExecutor and ~200 us on this
loop; six nodes on one executor saturate a core and answer ~30 % of the ticks.

How: the hot-path subscriptions are created on a hidden per-process node (``_idyn_hot_<pid>``) that no
executor spins, and one thread waits on exactly those subscriptions (plus a wake-up guard condition). Nodes of
one process that listen to the same topic share one subscription: the message is taken and converted to
Python once (~30 us for a JointState) and handed to every callback, in registration order, so in a composed
process the controller (created first) answers before any monitoring node runs. An urgent callback (the
controller's state) is also polled for between the monitoring callbacks; a message it takes there reaches
the monitoring callbacks of its topic after the current one (if two arrive meanwhile, the newer one only, as
with their depth-1 queue). A topic subscribed ``per_publisher`` (joint states) keeps the newest queued message of
each publisher instead, and hands its callbacks the publisher's id too: another publisher on /joint_states (a
gripper) then cannot displace the arm's state, a late reader still gets no stale arm state, and the joint-state
filter can tell the driver from a second publisher of the same joints. Under sim time /clock (1 kHz from the lockstep
plant) is served here too, one subscription for the process (``serve_clock``). Everything else of a node (parameters,
lifecycle services, diagnostics timers) stays on its executor, which now wakes only for that slow traffic.

Callbacks must not modify the message they get (others read it too).
Threading: callbacks run in the loop thread while parameter/lifecycle callbacks run in the executor thread.
Where a change touches more than one array a tick reads (the controller's gains, limits and payload; DOOMED's
learner), the node holds a lock in both; elsewhere the nodes swap whole arrays or write in place with single numpy
calls (atomic under the GIL).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, ClassVar

from idyn_ros.nodes.common import JOINT_STATES_IN, drop_unconvertible

NODE_PREFIX = "_idyn_hot_"  # the hidden node's name, + the process id
IDLE_WAIT_NS = 100_000_000  # wait bound without idle hooks: the stop flag is seen within 0.1 s
# a poll for the controller's state costs ~20 us: poll between monitoring callbacks once this long has passed
URGENT_POLL_NS = 100_000


def _tight_timer_slack() -> None:
    """1 ns timer slack for the calling thread (Linux): a zero-timeout rmw wait otherwise sleeps the default 50 us
    slack, measured here as 77 us instead of 19 us per poll."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    except OSError:
        pass

class _Topic:
    """One shared subscription and the callbacks on it: (callback, urgent) in registration order."""

    __slots__ = ("callbacks", "key", "pending", "per_publisher", "subscription", "urgent")

    def __init__(self, key: tuple, subscription: Any) -> None:
        self.key = key
        self.subscription = subscription
        self.callbacks: tuple[tuple[Callable[[Any], None], bool], ...] = ()
        self.urgent = False
        self.pending: list[tuple[Any, Any]] = []  # (message, publisher) its urgent callbacks had, for the others
        self.per_publisher = False  # the newest queued message per publisher; callbacks get (msg, publisher id)


class Subscription:
    """What ``HotLoop.subscribe`` returns: pass it to ``unsubscribe``."""

    __slots__ = ("callback", "topic")

    def __init__(self, topic: _Topic, callback: Callable[[Any], None]) -> None:
        self.topic = topic
        self.callback = callback


class HotLoop:
    """One thread per process (per rclpy context) serving registered subscriptions; see the module docstring."""

    _by_context: ClassVar[dict[int, HotLoop]] = {}
    _enabled = False  # set by nodes.common.run(); nodes built elsewhere (tests, in-process loops) use plain subs
    _started = False  # start_all ran (and stop_all did not yet): a loop made afterwards starts at once
    # what a loop does when a callback raises: run() stops the process, its shutdown hooks first (the controller's
    # hold torque needs a live context to be published); unset, the loop shuts its context down
    on_error: ClassVar[Callable[[BaseException], None] | None] = None

    @classmethod
    def enable(cls, on: bool = True) -> None:
        cls._enabled = on

    @classmethod
    def enabled(cls) -> bool:
        return cls._enabled

    @classmethod
    def for_context(cls, context: Any) -> HotLoop:
        loop = cls._by_context.get(id(context))
        if loop is None:
            loop = cls._by_context[id(context)] = HotLoop(context)
            if cls._started:  # a first 1 kHz input after start_all (a node configured later): serve it too
                loop.start()
        return loop

    @classmethod
    def start_all(cls) -> None:
        cls._started = True
        for loop in cls._by_context.values():
            loop.start()

    @classmethod
    def stop_all(cls, timeout: float = 2.0) -> list[BaseException]:
        """Stop every loop (waiting ``timeout`` s for each); returns the exceptions that ended a loop (empty when all
        ended cleanly)."""
        errors = []
        cls._started = False
        for loop in list(cls._by_context.values()):
            loop.stop(timeout)
            if loop.error is not None:
                errors.append(loop.error)
        cls._by_context.clear()
        return errors

    def __init__(self, context: Any) -> None:
        import rclpy
        from rclpy.guard_condition import GuardCondition

        self.context = context
        # use_global_arguments=False: a `-r __node:=controller` remap must not rename this hidden node too (it would
        # list every node twice); topic remaps reach it through the owning node's name resolution (``subscribe``).
        self.node = rclpy.create_node(f"{NODE_PREFIX}{os.getpid()}", context=context, start_parameter_services=False,
                                      enable_rosout=False, use_global_arguments=False)
        self._wake = GuardCondition(None, None, context=context)
        self._topics: tuple[_Topic, ...] = ()
        self._urgent: tuple[_Topic, ...] = ()  # the loop thread's: topics with an urgent callback
        self._poll_set: Any = None
        self._checked = 0  # when urgent messages were last looked for (ns)
        self._idle: list[list[Any]] = []  # [period_ns, callback, last_ns]
        self._timeout_ns = IDLE_WAIT_NS  # the shortest idle period (recomputed when hooks change, not per tick)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.dropped = 0

    # ------------------------------------------------------------------ registration (any thread)
    def subscribe(self, msg_type: Any, topic: str, callback: Callable[[Any], None], qos: Any,
                  urgent: bool = False, per_publisher: bool = False) -> Subscription:
        """Call ``callback`` with each message on ``topic`` from the loop thread (see the module docstring).

        ``urgent`` (the controller's /joint_states): also polled between the other callbacks of a wake-up,
        so a burst of monitoring work delays the command by at most one callback, not the whole burst.
        ``per_publisher``: every queued message is taken, the newest of each publisher served, and ``callback``
        called as ``callback(msg, publisher_id)`` (bytes; the module docstring says why). A topic's subscribers all
        take it or all do not (the key includes the QoS, so use a queue deeper than 1 for it).
        """
        key = (topic, msg_type, qos.reliability, qos.history, qos.depth, qos.durability)
        with self._lock:
            shared = next((t for t in self._topics if t.key == key), None)
            if shared is None:
                shared = _Topic(key, self.node.create_subscription(msg_type, topic, lambda _msg: None, qos))
            shared.callbacks = (*shared.callbacks, (callback, urgent))
            shared.per_publisher = per_publisher or shared.per_publisher
            shared.urgent = any(u for _, u in shared.callbacks)
            # always a new tuple object: the loop rebuilds its wait sets (the urgent ones may have changed)
            self._topics = tuple([t for t in self._topics if t is not shared] + [shared]) \
                if shared not in self._topics else tuple(list(self._topics))
        self._wake.trigger()
        return Subscription(shared, callback)

    def unsubscribe(self, handle: Subscription) -> None:
        t = handle.topic
        with self._lock:
            t.callbacks = tuple(c for c in t.callbacks if c[0] is not handle.callback)
            t.urgent = any(u for _, u in t.callbacks)
            self._topics = tuple(x for x in self._topics if x is not t or t.callbacks)
        self._wake.trigger()
        if not t.callbacks:
            self.node.destroy_subscription(t.subscription)  # deferred by rclpy while the loop holds the handle

    def every(self, period_s: float, callback: Callable[[], None]) -> None:
        """Call ``callback`` from the loop thread at least every ``period_s`` (checked after each wake-up)."""
        with self._lock:
            self._idle = [*self._idle, [int(period_s * 1e9), callback, time.monotonic_ns()]]
            self._timeout_ns = min(e[0] for e in self._idle)
        self._wake.trigger()

    def cancel(self, callback: Callable[[], None]) -> None:
        with self._lock:
            self._idle = [e for e in self._idle if e[1] is not callback]
            self._timeout_ns = min((e[0] for e in self._idle), default=IDLE_WAIT_NS)

    # ------------------------------------------------------------------ the loop
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="idyn-hot-loop", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        with contextlib.suppress(Exception):
            self._wake.trigger()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

        _tight_timer_slack()
        wait_set = None
        built_for: tuple[_Topic, ...] | None = None
        try:
            while not self._stop.is_set() and self.context.ok():
                topics, idle = self._topics, self._idle
                if topics is not built_for:  # (re)build when a subscription was added or removed
                    wait_set = _rclpy.WaitSet(len(topics), 1, 0, 0, 0, 0, self.context.handle)
                    urgent = tuple(t for t in topics if t.urgent)
                    self._poll_set = _rclpy.WaitSet(len(urgent), 0, 0, 0, 0, 0, self.context.handle) \
                        if urgent else None
                    self._urgent = urgent
                    built_for = topics
                with contextlib.ExitStack() as held:
                    wait_set.clear_entities()
                    for t in topics:
                        held.enter_context(t.subscription.handle)
                        wait_set.add_subscription(t.subscription.handle)
                    held.enter_context(self._wake.handle)
                    wait_set.add_guard_condition(self._wake.handle)
                    wait_set.wait(self._timeout_ns)
                    ready = wait_set.get_ready_entities("subscription")
                    self._checked = time.monotonic_ns()
                    for t in topics:  # registration order: the controller first
                        if t.subscription.handle.pointer in ready:
                            for msg, source in self._take_queued(t):
                                self._dispatch(t, msg, source, with_urgent=True)
                    for t in topics:  # messages the urgent polls took, for the other callbacks of their topic
                        while t.pending:
                            msgs, t.pending = t.pending, []
                            for msg, source in msgs:
                                self._dispatch(t, msg, source, with_urgent=False)
                if idle:
                    now = time.monotonic_ns()
                    for item in idle:
                        if now - item[2] >= item[0]:
                            item[2] = now
                            item[1]()
        except BaseException as exc:
            if self.context.ok():
                self.error = exc
                traceback.print_exc()
                if HotLoop.on_error is not None:
                    HotLoop.on_error(exc)
                else:
                    with contextlib.suppress(Exception):
                        self.context.try_shutdown()

    def _dispatch(self, t: _Topic, msg: Any, source: Any, with_urgent: bool) -> None:
        args = (msg, source) if t.per_publisher else (msg,)
        for callback, urgent in t.callbacks:
            if urgent:
                if with_urgent:
                    callback(*args)
                continue
            if self._poll_set is not None and time.monotonic_ns() - self._checked >= URGENT_POLL_NS:
                self._poll_urgent()
            callback(*args)

    def _poll_urgent(self) -> None:
        """Serve urgent callbacks whose message arrived meanwhile (zero-timeout wait; handles already held)."""
        poll_set = self._poll_set
        poll_set.clear_entities()
        for t in self._urgent:
            poll_set.add_subscription(t.subscription.handle)
        poll_set.wait(0)
        ready = poll_set.get_ready_entities("subscription")
        self._checked = time.monotonic_ns()
        for t in self._urgent if ready else ():
            if t.subscription.handle.pointer in ready:
                msgs = self._take_queued(t)
                for msg, source in msgs:
                    args = (msg, source) if t.per_publisher else (msg,)
                    for callback, urgent in t.callbacks:
                        if urgent:
                            callback(*args)
                if msgs:  # for the others: the newest wins, as with a depth-1 queue (per publisher: of each)
                    t.pending = _newest_per_publisher([*t.pending, *msgs]) if t.per_publisher else [msgs[-1]]

    def _take_queued(self, t: _Topic) -> list[tuple[Any, Any]]:
        """(message, publisher id) to serve now: one (publisher None), or ``per_publisher`` every queued one (at most
        the queue's depth), the newest of each publisher."""
        taken = self._take(t)
        if taken is None:
            return []
        if not t.per_publisher:
            return [(taken[0], None)]
        msgs = [(taken[0], _publisher(taken[1]))]
        for _ in range(t.key[4] - 1):  # key[4]: the queue depth
            taken = self._take(t)
            if taken is None:
                break
            msgs.append((taken[0], _publisher(taken[1])))
        return msgs if len(msgs) == 1 else _newest_per_publisher(msgs)

    def _take(self, t: _Topic) -> tuple[Any, dict] | None:
        """(message, rmw message info) or None."""
        sub = t.subscription
        try:
            return sub.handle.take_message(sub.msg_type, sub.raw)
        except RuntimeError as exc:
            self.dropped = drop_unconvertible(exc, self.dropped)
            return None


def _publisher(info: dict) -> bytes | None:
    """The id of the publisher of a message (rmw message info; None when the middleware does not say)."""
    gid = info.get("publisher_gid")
    return gid["data"] if gid else None


def _newest_per_publisher(msgs: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """(message, publisher) pairs, oldest first, without those a newer message of the same publisher replaces."""
    return [m for i, m in enumerate(msgs) if all(m[1] != later[1] for later in msgs[i + 1:])]


def subscribe(node: Any, msg_type: Any, topic: str, callback: Callable[..., None], qos: Any,
              urgent: bool = False, per_publisher: bool = False) -> Any:
    """A 1 kHz input of ``node``: on the process's hot loop when enabled, else a plain subscription (which serves
    every queued message; ``per_publisher`` there passes the publisher id, nothing more).

    The topic is resolved by ``node`` (its namespace and remaps, e.g. ``-r /joint_states:=/robot/joint_states``)
    before the hot loop's hidden node subscribes to it.
    """
    if HotLoop.enabled():
        resolved = node.resolve_topic_name(topic)
        return HotLoop.for_context(node.context).subscribe(msg_type, resolved, callback, qos, urgent, per_publisher)
    if per_publisher:  # rclpy hands (msg, message info) to a callback of two parameters
        return node.create_subscription(msg_type, topic, lambda msg, info: callback(msg, _publisher(info)), qos)
    return node.create_subscription(msg_type, topic, callback, qos)


def serve_clock(node: Any) -> None:
    """Serve ``node``'s /clock (sim time) from the process's hot loop, one subscription shared by its nodes, instead of
    its executor: the lockstep plant publishes /clock at 1 kHz, and each node's own subscription woke the executor,
    which rebuilds its wait set from every entity of every node (a composed graph's executor thread: ~45 % of a core).
    rclpy's TimeSource keeps driving the node's clock (its ``clock_callback``); only the subscription moves."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock

    source = node._time_source  # rclpy's; it subscribes on its own only while use_sim_time is true
    if not HotLoop.enabled() or not source.ros_time_is_active or source._clock_sub is None:
        return
    node.destroy_subscription(source._clock_sub)
    source._clock_sub = None  # use_sim_time set false then true at run time: it subscribes on its own again
    best_effort = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)  # as TimeSource's own
    subscribe(node, Clock, "/clock", source.clock_callback, best_effort)


def subscribe_joint_states(node: Any, topic: str, callback: Callable[[Any, Any], None], urgent: bool = False) -> Any:
    """A node's sensor_msgs/JointState input: ``JOINT_STATES_IN``, the newest message of each publisher, and
    ``callback(msg, publisher_id)`` (``JointStateFilter.update``'s ``source``)."""
    from sensor_msgs.msg import JointState

    return subscribe(node, JointState, topic, callback, JOINT_STATES_IN, urgent, per_publisher=True)


def unsubscribe(node: Any, subscription: Any) -> None:
    if isinstance(subscription, Subscription):
        loop = HotLoop._by_context.get(id(node.context))
        if loop is not None:
            loop.unsubscribe(subscription)
    else:
        node.destroy_subscription(subscription)
