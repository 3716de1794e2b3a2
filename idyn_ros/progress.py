"""Progress bars for long work: live on a terminal, plain lines in a log.

A tqdm bar redraws itself with carriage returns; written to a file (CI, ``make demo > log``, a launch file's
output) that is one line thousands of refreshes long. Off a terminal the same bar prints one plain line every
:data:`LOG_INTERVAL_S` and its last state, so a log still shows that long work is moving.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import IO, Any

#: Seconds between a bar's lines when its stream is not a terminal.
LOG_INTERVAL_S = 30.0


class _LogLines:
    """File-like object that turns a tqdm bar's redraws into whole lines, at most one per ``interval`` s."""

    def __init__(self, stream: IO[str], interval: float) -> None:
        self._stream = stream
        self._interval = interval
        self._last = -float("inf")
        self._pending = ""

    def write(self, text: str) -> int:
        line = text.replace("\r", "").strip()
        if line:
            self._pending = line
        now = time.monotonic()
        closing = text.endswith("\n")  # tqdm ends a bar it leaves on screen with a newline: print its last state
        if self._pending and (closing or now - self._last >= self._interval):
            self._stream.write(self._pending + "\n")
            self._stream.flush()
            self._last, self._pending = now, ""
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or stream-like object without a tty behind it
        return False


def progress_bar(iterable: Iterable[Any] | None = None, *, enabled: bool = True, **kwargs: Any) -> Any:
    """A ``tqdm`` bar on stderr (``kwargs`` as tqdm's); off a terminal it logs plain lines instead of redrawing."""
    from tqdm import tqdm

    stream = kwargs.pop("file", None) or sys.stderr
    if enabled and not _is_terminal(stream):
        stream = _LogLines(stream, LOG_INTERVAL_S)
        kwargs.setdefault("mininterval", LOG_INTERVAL_S)
    return tqdm(iterable, file=stream, disable=not enabled, **kwargs)
