"""What every storage backend shares: the records it yields and the small protocol it implements."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

MCAP_MAGIC = b"\x89MCAP0\r\n"
SQLITE_MAGIC = b"SQLite format 3\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # a zstd frame: how a file rosbag2 compressed as a whole begins


class BagWarning(UserWarning):
    """Something odd about a bag that the reader worked around (the message says what)."""


@dataclass(frozen=True)
class BagTopic:
    """A topic in a bag: name, ROS type (``pkg/msg/Type``), embedded definition, message count."""

    name: str
    msgtype: str
    msgdef: str = ""
    count: int = -1


@dataclass
class TruncationInfo:
    """Where a damaged storage file stops being readable, and how much of it was recovered."""

    file: Path
    good_bytes: int  # bytes up to the end of the last complete record/page read
    file_size: int
    messages_read: int  # messages (all topics) read from this file before the damage
    last_good_time_ns: int | None
    reason: str
    messages_written: int | None = None  # from metadata.yaml, when the bag folder has one with counts
    detail: str = ""  # what recovery did beyond whole records (e.g. a partial compressed chunk)

    def describe(self) -> str:
        last = "" if self.last_good_time_ns is None else f", last good message log time {self.last_good_time_ns} ns"
        return (
            f"{self.file} is damaged: {self.reason}; readable up to byte offset {self.good_bytes} of "
            f"{self.file_size} ({self.messages_read} messages, message index {self.messages_read - 1}{last})"
        )

    def kept(self) -> str:
        """How much was recovered, against what the recorder says it wrote."""
        if self.messages_written is None:
            text = f"kept {self.messages_read} messages (how many were written is unknown: no metadata.yaml counts)"
        else:
            text = f"kept {self.messages_read} of {self.messages_written} messages written (metadata.yaml)"
        return text + (f"; {self.detail}" if self.detail else "")


def zstd() -> ModuleType:
    """The zstd module: the standard library's from Python 3.14, its backport (a dependency) before."""
    if sys.version_info >= (3, 14):
        from compression import zstd as module
    else:
        from backports import zstd as module
    return module


class StorageReader(Protocol):
    """One storage format (sqlite3, MCAP): all :class:`~idyn_ros.data.bag.BagReader` needs from a backend."""

    def __init__(self, file: Path, recover: bool) -> None: ...

    def topics(self) -> dict[str, BagTopic]:
        """Topics stored in the file (counts -1 when the format does not say)."""
        ...

    def messages(self, wanted: set[str] | None, damage: list[TruncationInfo]) -> Iterator[tuple[str, int, bytes]]:
        """Yield ``(topic, log_time_ns, cdr)`` in file order; append to ``damage`` where the file stops."""
        ...
