"""The 1 kHz subscriptions of every idyn node in a process, served by one lean wait loop instead of an executor.

Why: rclpy's executors rebuild their wait set in Python from every entity of every node (parameter and
lifecycle services, timers, guard conditions) before each callback. Measured here against the real-time
plant (quiet machine, ``/tmp``-free repro in ``idyn_ros.bench.latency``): a node that only echoes each
/joint_states as a command costs ~450 us of CPU per message on a SingleThreadedExecutor and ~200 us on this
loop; six nodes on one executor saturate a core and answer ~30 % of the ticks.

How: the hot-path subscriptions are created on a hidden per-process node (``_idyn_hot_<pid>``) that no
executor spins, and one thread waits on exactly those subscriptions (plus a wake-up guard condition). Ready
messages are taken and dispatched in registration order, so in a composed process the controller (created
first) answers before any monitoring node runs. Everything else of a node (parameters, lifecycle services,
diagnostics timers) stays on its executor, which now wakes only for that slow traffic.

Threading: callbacks run in the loop thread while parameter/lifecycle callbacks run in the executor thread.
The nodes swap whole arrays or write in place with single numpy calls (atomic under the GIL); a tick may
pair a new desired position with the previous desired velocity, which is harmless at 1 kHz.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, ClassVar

from idyn_ros.nodes.common import drop_unconvertible

IDLE_WAIT_NS = 100_000_000  # wait bound without idle hooks: the stop flag is seen within 0.1 s

class _Entry:
    __slots__ = ("callback", "subscription", "urgent")

    def __init__(self, subscription: Any, callback: Callable[[Any], None], urgent: bool) -> None:
        self.subscription = subscription
        self.callback = callback
        self.urgent = urgent


class HotLoop:
    """One thread per process (per rclpy context) serving registered subscriptions; see the module docstring."""

    _by_context: ClassVar[dict[int, HotLoop]] = {}
    _enabled = False  # set by nodes.common.run(); nodes built elsewhere (tests, in-process loops) use plain subs

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
        return loop

    @classmethod
    def start_all(cls) -> None:
        for loop in cls._by_context.values():
            loop.start()

    @classmethod
    def stop_all(cls) -> list[BaseException]:
        """Stop every loop; returns the exceptions that ended a loop (empty when all ended cleanly)."""
        errors = []
        for loop in list(cls._by_context.values()):
            loop.stop()
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
        self.node = rclpy.create_node(f"_idyn_hot_{os.getpid()}", context=context, start_parameter_services=False,
                                      enable_rosout=False, use_global_arguments=False)
        self._wake = GuardCondition(None, None, context=context)
        self._entries: tuple[_Entry, ...] = ()
        self._idle: list[list[Any]] = []  # [period_ns, callback, last_ns]
        self._timeout_ns = IDLE_WAIT_NS  # the shortest idle period (recomputed when hooks change, not per tick)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.dropped = 0

    # ------------------------------------------------------------------ registration (any thread)
    def subscribe(self, msg_type: Any, topic: str, callback: Callable[[Any], None], qos: Any,
                  urgent: bool = False) -> Any:
        """Create a subscription served by this loop (the callback runs in the loop thread).

        ``urgent`` (the controller's /joint_states): also polled between the other callbacks of a wake-up,
        so a burst of monitoring work delays the command by at most one callback, not the whole burst.
        """
        sub = self.node.create_subscription(msg_type, topic, lambda _msg: None, qos)
        with self._lock:
            self._entries = (*self._entries, _Entry(sub, callback, urgent))
        self._wake.trigger()
        return sub

    def unsubscribe(self, subscription: Any) -> None:
        with self._lock:
            self._entries = tuple(e for e in self._entries if e.subscription is not subscription)
        self._wake.trigger()
        self.node.destroy_subscription(subscription)  # rclpy defers the destruction while the loop holds the handle

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

        wait_set = poll_set = None
        built_for: tuple[_Entry, ...] | None = None
        urgent: tuple[_Entry, ...] = ()
        try:
            while not self._stop.is_set() and self.context.ok():
                entries, idle = self._entries, self._idle
                if entries is not built_for:  # (re)build when a subscription was added or removed
                    wait_set = _rclpy.WaitSet(len(entries), 1, 0, 0, 0, 0, self.context.handle)
                    urgent = tuple(e for e in entries if e.urgent)
                    poll_set = _rclpy.WaitSet(len(urgent), 0, 0, 0, 0, 0, self.context.handle) if urgent else None
                    built_for = entries
                timeout_ns = self._timeout_ns
                with contextlib.ExitStack() as held:
                    wait_set.clear_entities()
                    for e in entries:
                        held.enter_context(e.subscription.handle)
                        wait_set.add_subscription(e.subscription.handle)
                    held.enter_context(self._wake.handle)
                    wait_set.add_guard_condition(self._wake.handle)
                    wait_set.wait(timeout_ns)
                    ready = wait_set.get_ready_entities("subscription")
                    for e in entries:  # registration order: the controller first
                        if e.subscription.handle.pointer in ready:
                            if not e.urgent and poll_set is not None:
                                self._poll_urgent(poll_set, urgent)
                            self._dispatch(e)
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
                with contextlib.suppress(Exception):
                    self.context.try_shutdown()

    def _poll_urgent(self, poll_set: Any, urgent: tuple[_Entry, ...]) -> None:
        """Serve urgent subscriptions that became ready meanwhile (zero-timeout wait; handles already held)."""
        poll_set.clear_entities()
        for e in urgent:
            poll_set.add_subscription(e.subscription.handle)
        poll_set.wait(0)
        ready = poll_set.get_ready_entities("subscription")
        if ready:
            for e in urgent:
                if e.subscription.handle.pointer in ready:
                    self._dispatch(e)

    def _dispatch(self, entry: _Entry) -> None:
        sub = entry.subscription
        try:
            info = sub.handle.take_message(sub.msg_type, sub.raw)
        except RuntimeError as exc:
            self.dropped = drop_unconvertible(exc, self.dropped)
            return
        if info is not None:
            entry.callback(info[0])


def subscribe(node: Any, msg_type: Any, topic: str, callback: Callable[[Any], None], qos: Any,
              urgent: bool = False) -> Any:
    """A 1 kHz input of ``node``: on the process's hot loop when enabled, else a plain subscription.

    The topic is resolved by ``node`` (its namespace and remaps, e.g. ``-r /joint_states:=/robot/joint_states``)
    before the hot loop's hidden node subscribes to it.
    """
    if HotLoop.enabled():
        resolved = node.resolve_topic_name(topic)
        return HotLoop.for_context(node.context).subscribe(msg_type, resolved, callback, qos, urgent)
    return node.create_subscription(msg_type, topic, callback, qos)


def unsubscribe(node: Any, subscription: Any) -> None:
    loop = HotLoop._by_context.get(id(node.context))
    if loop is not None and subscription in (e.subscription for e in loop._entries):
        loop.unsubscribe(subscription)
    else:
        node.destroy_subscription(subscription)
