"""All idyn nodes in one process (``idyn bringup --composed``): one executor for parameters, services and timers,
one hot loop for the 1 kHz callbacks (``nodes/hot_loop.py``).

Why: rclpy has no intra-process shortcut, but one process saves a DDS process hop's scheduling
wake-ups on a busy machine and halves the interpreter count. Parameters: the one file
``nodes.graph.parameter_file`` writes for the active nodes (robot file, user files, launch arguments; a ``/<node>``
section each), given with ``--ros-args --params-file``. Which nodes: ``--nodes a,b,c`` before ``--ros-args`` (default:
all of ours).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from idyn_ros.nodes.graph import OUR_NODES as NODE_NAMES


def factories(names: list[str]) -> list[Callable[[], Any]]:
    from idyn_ros.nodes.controller import ControllerNode
    from idyn_ros.nodes.doomed import DoomedNode
    from idyn_ros.nodes.feedforward import FeedforwardNode
    from idyn_ros.nodes.gripper_compensation import GripperCompensationNode
    from idyn_ros.nodes.joint_state_buffer import JointStateBufferNode
    from idyn_ros.nodes.payload_identifier import PayloadIdentifierNode
    from idyn_ros.nodes.reference import ReferenceNode
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode

    table = {"joint_state_buffer": JointStateBufferNode, "feedforward": FeedforwardNode,
             "controller": ControllerNode, "doomed": DoomedNode, "wrench_observer": WrenchObserverNode,
             "reference": ReferenceNode, "payload_identifier": PayloadIdentifierNode,
             "gripper_compensation": GripperCompensationNode}
    unknown = [n for n in names if n not in table]
    if unknown:
        from idyn_ros.errors import ParameterError

        raise ParameterError(f"unknown nodes {unknown}; known: {list(table)}")
    # the controller first: its callbacks are registered first, so the hot loop serves it first (nodes/hot_loop.py)
    order = sorted(names, key=lambda n: 0 if n == "controller" else 1)
    return [table[n] for n in order]


def main(argv: list[str] | None = None) -> int:
    from idyn_ros.nodes.common import run

    argv = list(sys.argv if argv is None else argv)
    names = list(NODE_NAMES)
    executor = "single"
    for flag in ("--nodes", "--executor"):
        if flag in argv:
            i = argv.index(flag)
            value = argv[i + 1]
            del argv[i : i + 2]
            if flag == "--nodes":
                names = [n for n in value.split(",") if n]
            else:
                executor = value
    return run(factories(names), argv, executor=executor)


if __name__ == "__main__":
    raise SystemExit(main())
