"""Progress bars: live on a terminal, whole lines in a log."""

from __future__ import annotations

import io

import pytest

from idyn_ros import progress
from idyn_ros.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_log_a_bar_is_a_few_whole_lines_not_thousands_of_redraws() -> None:
    log = io.StringIO()
    for _ in progress_bar(range(5000), desc="train", file=log, mininterval=0):
        pass
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert len(lines) == 2, lines  # the start and the end; the interval (30 s) is not reached in between
    assert lines[0].startswith("train:   0%") and lines[-1].startswith("train: 100%")
    assert "5000/5000" in lines[-1]


def test_in_a_log_a_long_bar_prints_a_line_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 10_000, 10))  # each call of time.monotonic: 10 s later
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(clock)))
    log = io.StringIO()
    with progress_bar(total=12, desc="cells", file=log, mininterval=0) as bar:
        for _ in range(12):
            bar.update()
    lines = log.getvalue().splitlines()
    assert 3 <= len(lines) < 12, lines  # one per 30 s of (fake) time, not one per update
    assert lines[-1].startswith("cells: 100%")


def test_a_disabled_bar_writes_nothing() -> None:
    log = io.StringIO()
    for _ in progress_bar(range(10), file=log, enabled=False):
        pass
    assert log.getvalue() == ""


def test_on_a_terminal_the_bar_redraws_in_place() -> None:
    screen = _Terminal()
    for _ in progress_bar(range(3), desc="import", file=screen, mininterval=0):
        pass
    assert "\r" in screen.getvalue()
