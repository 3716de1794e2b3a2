"""rosbag2 files without ROS: find the storage file, read raw CDR messages, write with recovery points.

There is no rosbag2 here (see DESIGN.md "The environment"), so bags are written with the
``rosbags`` library and read by this module. Reading is done here rather than by
``rosbags.rosbag2.Reader`` because real bags are messy and the reader must say exactly what is
wrong, or recover what it can:

- a bare ``.db3`` without ``metadata.yaml`` (rosbag2 >= Iron keeps metadata inside the db3);
- a bag folder whose ``metadata.yaml`` names a file that is not there (use what is there, warn);
- a bag cut in the middle (copy interrupted, disk full) or a recorder that was SIGKILLed: the
  error names the file and the last good byte offset / message index, and ``recover=True``
  returns the readable part.

Durability of our own recordings (:class:`BagWriter`): sqlite3 runs in WAL mode with a commit per
flush, so a killed recorder leaves ``X.db3`` + ``X.db3-wal`` holding every committed message; MCAP
chunks are closed and flushed to the OS every flush period, so a killed recorder leaves a file
without footer/summary whose complete chunks are readable with ``recover=True``.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from idyn_ros.errors import BagReadError, DatasetError

__all__ = [
    "BagReader",
    "BagTopic",
    "BagWarning",
    "BagWriter",
    "find_storage_files",
    "idyn_typestore",
    "is_bag",
]

MCAP_MAGIC = b"\x89MCAP0\r\n"
SQLITE_MAGIC = b"SQLite format 3\x00"


class BagWarning(UserWarning):
    """Something odd about a bag that the reader worked around (the message says what)."""


# ---------------------------------------------------------------------------------------- types
def _msg_dir() -> Path | None:
    """The package's ``msg/`` folder (source checkout or installed share dir)."""
    candidate = Path(__file__).resolve().parents[2] / "msg"
    if candidate.is_dir():
        return candidate
    try:
        from idyn_ros.paths import share_dir

        candidate = share_dir() / "msg"
        return candidate if candidate.is_dir() else None
    except FileNotFoundError:
        return None


@cache
def idyn_typestore():  # -> rosbags.typesys.store.Typestore
    """A rosbags typestore with ROS 2 Kilted types plus ``idyn_ros/msg/*`` from ``msg/*.msg``."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    folder = _msg_dir()
    if folder is not None:
        types: dict = {}
        for msg_file in sorted(folder.glob("*.msg")):
            types.update(get_types_from_msg(msg_file.read_text(), f"idyn_ros/msg/{msg_file.stem}"))
        store.register(types)
    return store


def register_bag_types(store, topics: dict[str, BagTopic]) -> None:
    """Register message definitions embedded in a bag for types the store does not know."""
    from rosbags.typesys import get_types_from_msg

    for topic in topics.values():
        if topic.msgtype in store.fielddefs or not topic.msgdef:
            continue
        try:
            store.register(get_types_from_msg(topic.msgdef, topic.msgtype))
        except Exception as exc:  # an unparsable definition only matters if that topic is read
            warnings.warn(f"cannot parse the definition of {topic.msgtype} in the bag: {exc}", BagWarning, 2)


# ---------------------------------------------------------------------------------------- locate
def is_bag(path: str | Path) -> bool:
    """True for a bag folder, a ``.db3`` or a ``.mcap`` file (by suffix or magic bytes)."""
    path = Path(path)
    if path.is_dir():
        return (path / "metadata.yaml").is_file() or any(path.glob("*.db3")) or any(path.glob("*.mcap"))
    if path.suffix in (".db3", ".mcap"):
        return True
    if path.is_file():
        with path.open("rb") as f:
            head = f.read(16)
        return head.startswith(MCAP_MAGIC) or head == SQLITE_MAGIC
    return False


def find_storage_files(path: str | Path) -> tuple[list[Path], list[str]]:
    """Storage files of a bag (folder or file) and warnings about what did not match.

    Returns:
        (files in playback order, warning strings).
    """
    path = Path(path)
    notes: list[str] = []
    if not path.exists():
        raise BagReadError(f"{path}: no such file or folder")
    if path.is_file():
        return [path], notes
    present = sorted([*path.glob("*.db3"), *path.glob("*.mcap")])
    meta = path / "metadata.yaml"
    if not meta.is_file():
        if not present:
            raise BagReadError(f"{path}: not a rosbag2 folder (no metadata.yaml, no .db3, no .mcap)")
        if len(present) > 1:
            notes.append(
                f"{path} has no metadata.yaml; reading its {len(present)} storage files in name order: "
                + ", ".join(p.name for p in present)
            )
        return present, notes
    try:
        from ruamel.yaml import YAML

        info = YAML(typ="safe").load(meta.read_text())["rosbag2_bagfile_information"]
        named = [str(x) for x in (info.get("relative_file_paths") or [])]
    except Exception as exc:
        named = []
        notes.append(f"{meta} is unreadable ({exc}); using the storage files present")
    found = [path / n for n in named if (path / n).is_file()]
    missing = [n for n in named if not (path / n).is_file()]
    if missing:
        if not present:
            raise BagReadError(f"{meta} names {missing} but the folder holds no .db3 or .mcap file at all")
        extra = [p for p in present if p not in found]
        notes.append(
            f"{meta} names {missing}, which {'is' if len(missing) == 1 else 'are'} not in the folder; "
            f"using {[p.name for p in extra]} found there instead"
        )
        found = found + extra
    if not found:
        found = present
    if not found:
        raise BagReadError(f"{path}: metadata.yaml lists no storage file and none is present")
    return found, notes


# ---------------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class BagTopic:
    """A topic in a bag: name, ROS type (``pkg/msg/Type``), embedded definition, message count."""

    name: str
    msgtype: str
    msgdef: str = ""
    count: int = -1


@dataclass
class TruncationInfo:
    """Where a damaged storage file stops being readable."""

    file: Path
    good_bytes: int  # bytes up to the end of the last complete record/page read
    file_size: int
    messages_read: int  # messages read from this file before the damage
    last_good_time_ns: int | None
    reason: str

    def describe(self) -> str:
        last = "" if self.last_good_time_ns is None else f", last good message log time {self.last_good_time_ns} ns"
        return (
            f"{self.file} is damaged: {self.reason}; readable up to byte offset {self.good_bytes} of "
            f"{self.file_size} ({self.messages_read} messages, message index {self.messages_read - 1}{last})"
        )


@dataclass
class BagReader:
    """Raw message access to a rosbag2 bag (folder, ``.db3`` or ``.mcap``).

    Use :meth:`topics` to see what is inside and :meth:`messages` to stream
    ``(topic, log_time_ns, cdr_bytes)``. With ``recover=False`` a damaged file raises
    :class:`BagReadError` naming the file and the last good offset; with ``recover=True`` the
    readable part is returned and :attr:`truncations` says what was lost.
    """

    path: Path
    recover: bool = False
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    truncations: list[TruncationInfo] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        self.files, self.notes = find_storage_files(self.path)
        for note in self.notes:
            warnings.warn(note, BagWarning, stacklevel=3)
        self._topics: dict[str, BagTopic] | None = None

    # -- per-format dispatch
    @staticmethod
    def _kind(file: Path) -> str:
        with file.open("rb") as f:
            head = f.read(16)
        if head.startswith(MCAP_MAGIC):
            return "mcap"
        if head == SQLITE_MAGIC:
            return "sqlite3"
        if not head:
            raise BagReadError(f"{file} is empty (0 bytes): the recording never wrote data")
        raise BagReadError(f"{file} is neither a rosbag2 sqlite3 (.db3) nor an MCAP file (first bytes {head[:8]!r})")

    def topics(self) -> dict[str, BagTopic]:
        """Topics of all storage files (name -> :class:`BagTopic`)."""
        if self._topics is None:
            topics: dict[str, BagTopic] = {}
            for file in self.files:
                found = _sqlite_topics(file) if self._kind(file) == "sqlite3" else _mcap_topics(file)
                for t in found.values():
                    old = topics.get(t.name)
                    count = t.count + (old.count if old and old.count >= 0 and t.count >= 0 else 0)
                    topics[t.name] = BagTopic(t.name, t.msgtype, t.msgdef or (old.msgdef if old else ""), count)
            self._topics = topics
        return self._topics

    def messages(self, topics: list[str] | None = None) -> Iterator[tuple[str, int, bytes]]:
        """Yield ``(topic, log_time_ns, cdr_bytes)`` in file order (not necessarily time order)."""
        wanted = None if topics is None else set(topics)
        for file in self.files:
            info: list[TruncationInfo] = []
            if self._kind(file) == "sqlite3":
                yield from _sqlite_messages(file, wanted, info, self.recover)
            else:
                yield from _mcap_messages(file, wanted, info)
            if info:
                if not self.recover:
                    raise BagReadError(info[0].describe() + "; pass --recover (recover=True) to use the readable part")
                self.truncations.extend(info)
                warnings.warn(info[0].describe() + "; recovered the readable part", BagWarning, stacklevel=2)


# ---------------------------------------------------------------------------------------- sqlite3
def _sqlite_header(file: Path) -> tuple[int, int | None]:
    """(page size, page count from the header if valid) of a sqlite database file."""
    with file.open("rb") as f:
        head = f.read(100)
    (page_size,) = struct.unpack(">H", head[16:18])
    page_size = 65536 if page_size == 1 else page_size
    (change_counter,) = struct.unpack(">I", head[24:28])
    (pages,) = struct.unpack(">I", head[28:32])
    (valid_for,) = struct.unpack(">I", head[92:96])
    return page_size, (pages if pages and change_counter == valid_for else None)


class _SqliteOpen:
    """Open a bag database read-only, working on a private copy when the file needs repair first.

    - a WAL / hot journal left by a killed writer: sqlite applies (or rolls back) it only on a
      writable connection, so the copy is opened read-write;
    - a file cut inside a page: the partial last page has its cell pointers but not its cell
      contents (cells fill pages from the end), so the copy is cut to whole pages.
    """

    def __init__(self, file: Path, recover: bool) -> None:
        self.file = file
        self.tmp: tempfile.TemporaryDirectory | None = None
        sidecars = [p for p in (Path(f"{file}-wal"), Path(f"{file}-journal")) if p.is_file() and p.stat().st_size]
        if sidecars and not recover:
            raise BagReadError(
                f"{file} was not closed cleanly (found {sidecars[0].name}: the recorder was killed or is "
                "still running); pass --recover (recover=True) to read everything it committed"
            )
        page_size, _pages = _sqlite_header(file)
        size = file.stat().st_size
        if sidecars or size % page_size:
            self.tmp = tempfile.TemporaryDirectory(prefix="idyn_bag_")
            copy = Path(self.tmp.name) / file.name
            with file.open("rb") as src, copy.open("wb") as dst:
                dst.write(src.read(size - size % page_size))
            for side in sidecars:
                shutil.copy2(side, Path(f"{copy}{side.name[len(file.name) :]}"))
            if sidecars:
                self.conn = sqlite3.connect(str(copy))
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)" if Path(f"{copy}-wal").exists() else "SELECT 1")
            else:
                self.conn = sqlite3.connect(f"file:{copy}?mode=ro&immutable=1", uri=True)
        else:
            self.conn = sqlite3.connect(f"file:{file}?mode=ro&immutable=1", uri=True)
        # A header page count larger than the file is "corrupt" unless writable_schema is on; then
        # sqlite reads the pages that exist, which is what a truncated bag needs (connection is read-only).
        self.conn.execute("PRAGMA writable_schema=ON")

    def close(self) -> None:
        self.conn.close()
        if self.tmp is not None:
            self.tmp.cleanup()


def _sqlite_topics(file: Path) -> dict[str, BagTopic]:
    db = _SqliteOpen(file, recover=True)  # topics of a killed recording are always readable
    try:
        conn = db.conn
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"topics", "messages"} <= tables:
            raise BagReadError(f"{file} is a sqlite database but not a rosbag2 bag (tables: {sorted(tables)})")
        defs: dict[str, str] = {}
        if "message_definitions" in tables:
            defs = dict(conn.execute("SELECT topic_type, encoded_message_definition FROM message_definitions"))
        out = {}
        for _tid, name, msgtype in conn.execute("SELECT id, name, type FROM topics ORDER BY id"):
            out[name] = BagTopic(name, msgtype, defs.get(msgtype, ""), -1)
        return out
    except sqlite3.DatabaseError as exc:
        raise BagReadError(f"{file}: cannot read the topic table ({exc}); the file is damaged near its start") from None
    finally:
        db.close()


def _sqlite_messages(
    file: Path, wanted: set[str] | None, info: list[TruncationInfo], recover: bool
) -> Iterator[tuple[str, int, bytes]]:
    db = _SqliteOpen(file, recover=recover)  # raises for a killed recording unless recovering
    try:
        conn = db.conn
        names = dict(conn.execute("SELECT id, name FROM topics"))
        ids = [i for i, n in names.items() if wanted is None or n in wanted]
        page_size, pages = _sqlite_header(file)
        size = file.stat().st_size
        count = 0
        last_t = None
        last_id = 0
        query = (
            f"SELECT id, topic_id, timestamp, data FROM messages WHERE topic_id IN ({','.join('?' * len(ids))}) "
            "ORDER BY id"
        )
        # ORDER BY id walks the table b-tree (insertion order), never the timestamp index, so a
        # truncated file yields everything before the first missing page.
        try:
            for row_id, topic_id, stamp, data in conn.execute(query, ids):
                last_id, last_t = row_id, stamp
                count += 1
                yield names[topic_id], int(stamp), bytes(data)
        except sqlite3.DatabaseError as exc:
            info.append(
                TruncationInfo(
                    file,
                    (size // page_size) * page_size,
                    size,
                    count,
                    last_t,
                    f"sqlite error after message id {last_id}: {exc}"
                    + (f" (header says {pages} pages x {page_size} B = {pages * page_size} B)" if pages else ""),
                )
            )
            return
        if pages is not None and pages * page_size > size:
            info.append(
                TruncationInfo(
                    file,
                    size,
                    size,
                    count,
                    last_t,
                    f"file is {size} B but its header says {pages} pages x {page_size} B = {pages * page_size} B",
                )
            )
        elif db.tmp is not None and any(Path(f"{file}-{x}").is_file() for x in ("wal", "journal")):
            info.append(
                TruncationInfo(
                    file, size, size, count, last_t, "not closed cleanly (recorder killed); read its committed messages"
                )
            )
    finally:
        db.close()


# ---------------------------------------------------------------------------------------- mcap
def _read_str(buf: memoryview, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<I", buf, pos)
    return bytes(buf[pos + 4 : pos + 4 + length]).decode(), pos + 4 + length


def _mcap_records(file: Path) -> Iterator[tuple[int, int, memoryview, int]]:
    """Yield ``(opcode, offset, body, end_offset)`` of top-level records.

    Raises:
        _TruncatedError(offset, reason): the file ends inside a record or has no footer.
    """
    data = memoryview(file.read_bytes())
    size = len(data)
    if bytes(data[:8]) != MCAP_MAGIC:
        raise BagReadError(f"{file}: bad MCAP magic")
    pos = 8
    while True:
        if pos == size:
            raise _TruncatedError(pos, "file ends without MCAP footer (recording was interrupted)")
        if pos + 9 > size:
            raise _TruncatedError(pos, f"file ends inside a record header at byte {pos}")
        op = data[pos]
        (length,) = struct.unpack_from("<Q", data, pos + 1)
        end = pos + 9 + length
        if end > size:
            raise _TruncatedError(pos, f"record 0x{op:02x} at byte {pos} needs {length} B but the file ends at {size}")
        yield op, pos, data[pos + 9 : end], end
        pos = end
        if op == 0x02:  # footer; magic follows
            if bytes(data[pos : pos + 8]) != MCAP_MAGIC:
                raise _TruncatedError(pos, "footer not followed by the closing magic")
            return


class _TruncatedError(Exception):
    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


def _mcap_inner(body: memoryview) -> Iterator[tuple[int, memoryview]]:
    """Records inside a chunk body (already decompressed)."""
    pos, size = 0, len(body)
    while pos + 9 <= size:
        op = body[pos]
        (length,) = struct.unpack_from("<Q", body, pos + 1)
        yield op, body[pos + 9 : pos + 9 + length]
        pos += 9 + length


def _chunk_records(body: memoryview) -> memoryview:
    # Chunk: start(8) end(8) uncompressed_size(8) crc(4) compression(str) compressed_size(8) records
    (usize,) = struct.unpack_from("<Q", body, 16)
    compression, pos = _read_str(body, 28)
    (csize,) = struct.unpack_from("<Q", body, pos)
    raw = body[pos + 8 : pos + 8 + csize]
    if compression:
        from rosbags.rosbag2.storage_mcap import DECOMPRESSORS

        if compression not in DECOMPRESSORS:
            raise BagReadError(f"unsupported MCAP chunk compression {compression!r}")
        return memoryview(DECOMPRESSORS[compression](bytes(raw), usize))
    return raw


def _mcap_walk(file: Path) -> Iterator[tuple[str, object]]:
    """Yield ('schema', (id, name, encoding, data)), ('channel', (id, schema_id, topic)),
    ('message', (channel_id, log_time, data, end_offset)) and finally ('end', TruncationInfo | None)."""
    good = 8
    try:
        for op, _pos, body, end in _mcap_records(file):
            inner = _mcap_inner(_chunk_records(body)) if op == 0x06 else iter([(op, body)])
            for iop, rec in inner:
                if iop == 0x03:
                    (sid,) = struct.unpack_from("<H", rec, 0)
                    name, p = _read_str(rec, 2)
                    enc, p = _read_str(rec, p)
                    sdata, _ = _read_str(rec, p)
                    yield "schema", (sid, name, enc, sdata)
                elif iop == 0x04:
                    cid, sid = struct.unpack_from("<HH", rec, 0)
                    topic, _ = _read_str(rec, 4)
                    yield "channel", (cid, sid, topic)
                elif iop == 0x05:
                    cid, _seq, log_time, _pub = struct.unpack_from("<HIQQ", rec, 0)
                    yield "message", (cid, log_time, bytes(rec[22:]), end)
            good = end
        yield "end", None
    except _TruncatedError as exc:
        yield "end", (good, exc.reason)


def _mcap_topics(file: Path) -> dict[str, BagTopic]:
    schemas: dict[int, tuple[str, str]] = {}
    channels: dict[int, tuple[int, str]] = {}
    counts: dict[int, int] = {}
    for kind, value in _mcap_walk(file):
        if kind == "schema":
            schemas[value[0]] = (value[1], value[3])
        elif kind == "channel":
            channels[value[0]] = (value[1], value[2])
        elif kind == "message":
            counts[value[0]] = counts.get(value[0], 0) + 1
    out = {}
    for cid, (sid, topic) in channels.items():
        msgtype, msgdef = schemas.get(sid, ("", ""))
        out[topic] = BagTopic(topic, msgtype, msgdef, counts.get(cid, 0))
    return out


def _mcap_messages(file: Path, wanted: set[str] | None, info: list[TruncationInfo]) -> Iterator[tuple[str, int, bytes]]:
    channels: dict[int, str] = {}
    count = 0
    last_t = None
    size = file.stat().st_size
    for kind, value in _mcap_walk(file):
        if kind == "channel":
            channels[value[0]] = value[2]
        elif kind == "message":
            cid, log_time, data, _end = value
            topic = channels.get(cid)
            if topic is None:
                raise BagReadError(f"{file}: message on unknown MCAP channel {cid}")
            count += 1
            last_t = log_time
            if wanted is None or topic in wanted:
                yield topic, log_time, data
        elif kind == "end" and value is not None:
            good, reason = value
            info.append(TruncationInfo(file, good, size, count, last_t, reason))


# ---------------------------------------------------------------------------------------- writing
class BagWriter:
    """Write a rosbag2 bag (MCAP or sqlite3) from raw CDR bytes, with periodic recovery points.

    Args:
        path: bag folder to create (must not exist).
        storage: ``"mcap"`` (default) or ``"sqlite3"``.
        flush_period_s: how often :meth:`maybe_flush` makes written data survive a SIGKILL (s).

    ``write`` does no serialisation: it stores the bytes a ``raw=True`` rclpy subscription
    delivers. Call :meth:`close` to get a complete bag (footer, metadata.yaml).
    """

    def __init__(self, path: str | Path, storage: str = "mcap", flush_period_s: float = 0.5) -> None:
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
        """Finish the bag: MCAP summary + footer or sqlite metadata, and ``metadata.yaml``."""
        if self._writer.storage is None:
            return
        if self.storage == "sqlite3":
            conn = self._writer.storage.conn
            conn.commit()
            conn.execute("PRAGMA journal_mode=DELETE")  # a plain single-file db3 like rosbag2 writes
        self._writer.close()

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
