"""BagWriter: rosbag2 (MCAP or sqlite3) from raw CDR bytes, with periodic recovery points."""

from __future__ import annotations

import os
import time
from pathlib import Path

from idyn_ros.data.atomic import replace_durably
from idyn_ros.data.bag.types import idyn_typestore
from idyn_ros.errors import DatasetError


class BagWriter:
    """Write a rosbag2 bag (MCAP or sqlite3) from raw CDR bytes, with periodic recovery points.

    Args:
        path: bag folder to create (must not exist).
        storage: ``"mcap"`` (default) or ``"sqlite3"``.
        flush_period_s: how often :meth:`maybe_flush` makes written data survive a SIGKILL (s).
        custom_data: string entries for metadata.yaml's ``custom_data`` (what the importer reads, e.g.
            ``effort_kind``).

    ``write`` does no serialisation: it stores the bytes a ``raw=True`` rclpy subscription
    delivers. Call :meth:`close` to get a complete bag (footer, metadata.yaml).
    """

    def __init__(self, path: str | Path, storage: str = "mcap", flush_period_s: float = 0.5,
                 custom_data: dict[str, str] | None = None) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        if storage not in ("mcap", "sqlite3"):
            raise DatasetError(f"unknown bag storage {storage!r}: use 'mcap' or 'sqlite3'")
        self.path = Path(path)
        if self.path.exists():
            raise DatasetError(f"{self.path} exists already; choose a new output folder (bags are never overwritten)")
        self.storage = storage
        self.flush_period_s = flush_period_s
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=9, storage_plugin=plugin)
        self._writer.open()
        for key, value in (custom_data or {}).items():  # metadata.yaml custom_data (e.g. effort_kind: current)
            self._writer.set_custom_data(key, value)
        if storage == "sqlite3":
            conn = self._writer.storage.conn
            conn.commit()
            conn.execute("PRAGMA journal_mode=WAL")  # appends + a commit per flush survive SIGKILL
            conn.execute("PRAGMA synchronous=NORMAL")
        self._connections: dict[str, object] = {}
        self.counts: dict[str, int] = {}
        self._last_flush = time.monotonic()

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Register a topic (``msgtype`` like ``sensor_msgs/msg/JointState``) before writing to it."""
        if topic in self._connections:
            return
        store = idyn_typestore()
        if msgtype not in store.fielddefs:
            raise DatasetError(f"unknown message type {msgtype!r} for {topic}: not a ROS 2 Kilted or idyn_ros type")
        self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=store)
        self.counts[topic] = 0
        self.flush()

    def write(self, topic: str, log_time_ns: int, data: bytes) -> None:
        """Store one serialised message (CDR bytes) received at ``log_time_ns``."""
        self._writer.write(self._connections[topic], log_time_ns, data)
        self.counts[topic] += 1

    def maybe_flush(self) -> None:
        """Flush if the flush period has elapsed (cheap to call often)."""
        now = time.monotonic()
        if now - self._last_flush >= self.flush_period_s:
            self.flush()

    def flush(self) -> None:
        """Make everything written so far survive a SIGKILL of this process."""
        storage = self._writer.storage
        if storage is None:
            return
        if self.storage == "sqlite3":
            storage.conn.commit()
        else:
            if storage.chunk.bio.tell():
                storage.close_chunk()
            storage.bio.flush()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Finish the bag: MCAP summary + footer or sqlite metadata, and ``metadata.yaml``.

        metadata.yaml appears last and whole: rosbags writes it under a staging name, then the storage
        file and it are fsynced and it is renamed into place, so its counts never exceed what is on disk.
        """
        if self._writer.storage is None:
            return
        if self.storage == "sqlite3":
            conn = self._writer.storage.conn
            conn.commit()
            conn.execute("PRAGMA journal_mode=DELETE")  # a plain single-file db3 like rosbag2 writes
        storage_file = Path(self._writer.storage.path)
        final = Path(self._writer.metapath)
        staged = final.with_name(".metadata.yaml.partial")
        self._writer.metapath = staged
        self._writer.close()
        fd = os.open(storage_file, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        replace_durably(staged, final)

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
