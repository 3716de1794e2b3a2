"""One node process: ``python -m idyn_ros.nodes.start NAME [ARGS]``; the node executables call ``run_node`` too.

Why: a launch or ``idyn bringup`` that ends the graph early (another node failed at start-up) sends SIGINT to
processes whose modules may still be importing (numpy, rclpy, pinocchio, mujoco: seconds on a loaded machine), and
Python's default answer is a KeyboardInterrupt traceback that reads as a second failure. A stop before the node
takes its signals (``nodes.common.run``; the recorder: its own handlers) ends the process quietly with exit code 0.
"""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Sequence


def _stopped_while_starting(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def run_node(name: str, args: Sequence[str] | None = None) -> int:
    """Run node module ``name``'s ``main`` with ``args`` (default: sys.argv[1:]), a stop before it takes the signals
    being a quiet exit 0."""
    signal.signal(signal.SIGINT, _stopped_while_starting)
    signal.signal(signal.SIGTERM, _stopped_while_starting)
    module = importlib.import_module(f"idyn_ros.nodes.{name}")  # (main imports more before it takes the signals)
    sys.argv = [name, *(sys.argv[1:] if args is None else args)]
    return int(module.main() or 0)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: python -m idyn_ros.nodes.start NAME [ARGS]", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(run_node(sys.argv[1], sys.argv[2:]))
