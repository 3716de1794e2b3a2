"""What ros2_control's controller manager says of the controllers our commands go to.

A forward command controller subscribes to its topic as soon as it is configured, active or not, so the ROS graph
cannot tell an inactive one (a spawner started with ``--inactive``, a controller switched off to jog the arm) from an
active one: the torques reach the topic and no joint. The controller manager's ``list_controllers`` can. Asked only
where ros2_control's interfaces are installed (a robot's ROS install), off the 1 kHz path, every ``POLL_S``.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Any

POLL_S = 2.0  # s between questions to a controller manager: a switch is seen within this
ANSWER_TIMEOUT_S = 5.0  # a question unanswered this long is dropped (the manager went away) and asked again


def controller_for_topic(topic: str) -> tuple[str, str] | None:
    """``/<ns>/<name>/commands`` -> (``/<ns>/controller_manager``, ``<name>``): how ros2_control names a forward
    controller's topic and its manager; None for a topic of another shape (nothing to ask)."""
    parts = [p for p in topic.split("/") if p]
    if len(parts) < 2 or parts[-1] != "commands":
        return None
    namespace = "/".join(parts[:-2])
    return (f"/{namespace}/controller_manager" if namespace else "/controller_manager"), parts[-2]


@dataclass(frozen=True)
class NotActive:
    """A controller our commands go to that its manager lists in another state than active."""

    topic: str
    manager: str
    controller: str
    state: str

    def message(self) -> str:
        return (f"{self.controller} is {self.state} in {self.manager}: it subscribes to {self.topic} but executes "
                "nothing until it is active, so the commands reach no joint (`ros2 control switch_controllers -c "
                f"{self.manager} --activate {self.controller}`; a spawner started with --inactive leaves it so)")


class ControllerManagerWatch:
    """Asks each controller manager of ``topics`` for its controllers' states; the node calls ``poll`` from a slow
    timer and reads ``not_active`` (the answers arrive through the node's executor)."""

    def __init__(self, node: Any, topics: list[str]) -> None:
        self._node = node
        self._watched = {t: c for t in topics if (c := controller_for_topic(t)) is not None}
        self._clients: dict[str, Any] = {}
        self._pending: dict[str, tuple[Any, float]] = {}  # manager -> (future, asked at)
        self._asked: dict[str, float] = {}
        self._states: dict[str, dict[str, str]] = {}  # manager -> {controller: state} from its last answer
        self.unusable = ""  # why installed interfaces could not be used (built for another ROS or Python)
        self._srv = None
        try:
            self._srv = importlib.import_module("controller_manager_msgs.srv").ListControllers
            for manager in sorted({m for m, _ in self._watched.values()}):
                self._clients[manager] = node.create_client(self._srv, f"{manager}/list_controllers")
        except Exception as exc:  # e.g. UnsupportedTypeSupport: the check is lost, never the node's configure
            if isinstance(exc, ModuleNotFoundError) and (exc.name or "").startswith("controller_manager_msgs"):
                return  # no ros2_control here (the simulators): nothing to ask
            self.destroy()
            self._srv = None
            self.unusable = (f"controller_manager_msgs is installed but cannot be used here ({type(exc).__name__}: "
                             f"{exc}): an inactive forward controller is not seen")

    def poll(self) -> None:
        """Collect the answers that came; ask the managers that are up and were not asked for ``POLL_S``."""
        now = time.monotonic()
        for manager, client in self._clients.items():
            pending = self._pending.get(manager)
            if pending is not None:
                future, asked = pending
                if future.done():
                    del self._pending[manager]
                    answer = future.result()
                    if answer is not None:
                        self._states[manager] = {c.name: c.state for c in answer.controller}
                elif now - asked > ANSWER_TIMEOUT_S:
                    del self._pending[manager]
                    self._states.pop(manager, None)
                continue
            if not client.service_is_ready():
                self._states.pop(manager, None)  # no manager (the simulators, a vendor's own driver): nothing known
                continue
            if now - self._asked.get(manager, -POLL_S) >= POLL_S:
                self._pending[manager] = (client.call_async(self._srv.Request()), now)
                self._asked[manager] = now

    def not_active(self) -> list[NotActive]:
        """The watched controllers a manager lists but not as active (one it does not list is not ros2_control's:
        the graph check covers it)."""
        found = []
        for topic, (manager, controller) in self._watched.items():
            state = self._states.get(manager, {}).get(controller)
            if state is not None and state != "active":
                found.append(NotActive(topic, manager, controller, state))
        return found

    def summary(self) -> str:
        """One line for /diagnostics: what is known of each watched controller."""
        if self.unusable:
            return f"not asked ({self.unusable})"
        if self._srv is None:
            return "not asked (controller_manager_msgs is not installed: an inactive forward controller is not seen)"
        if not self._watched:
            return "not asked (the command topics are not <controller>/commands)"
        parts = []
        for manager, controller in self._watched.values():
            states = self._states.get(manager)
            parts.append(f"{controller}: " + ("no answer from " + manager if states is None
                                              else states.get(controller, f"not listed by {manager}")))
        return "; ".join(parts)

    def destroy(self) -> None:
        for client in self._clients.values():
            self._node.destroy_client(client)
        self._clients.clear()
        self._pending.clear()
