"""rosbag2 sqlite3 storage (``.db3``): read a bag database, also one cut short or left by a killed recorder."""

from __future__ import annotations

import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

from idyn_ros.data.bag.base import BagTopic, TruncationInfo
from idyn_ros.data.hints import recover_hint
from idyn_ros.errors import BagReadError


def _sqlite_header(file: Path) -> tuple[int, int | None]:
    """(page size, page count from the header if valid) of a sqlite database file."""
    with file.open("rb") as f:
        head = f.read(100)
    if len(head) < 100:
        raise BagReadError(f"{file}: {len(head)} bytes, shorter than the 100-byte header of a sqlite database: the "
                           f"file is truncated (a copy or a recording cut short), there is nothing in it to read")
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
        self.opened = file  # the file sqlite reads: the repaired copy when there is one
        self.tmp: tempfile.TemporaryDirectory | None = None
        sidecars = [p for p in (Path(f"{file}-wal"), Path(f"{file}-journal")) if p.is_file() and p.stat().st_size]
        if sidecars and not recover:
            raise BagReadError(
                f"{file} was not closed cleanly (found {sidecars[0].name}: the recorder was killed or is "
                f"still running); {recover_hint('read everything it committed')}"
            )
        page_size, _pages = _sqlite_header(file)
        size = file.stat().st_size
        if sidecars or size % page_size:
            self.tmp = tempfile.TemporaryDirectory(prefix="idyn_bag_")
            copy = self.opened = Path(self.tmp.name) / file.name
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


class Sqlite3Storage:
    """A ``.db3`` file (see :class:`~idyn_ros.data.bag.base.StorageReader`)."""

    def __init__(self, file: Path, recover: bool) -> None:
        self.file = file
        self.recover = recover

    def topics(self) -> dict[str, BagTopic]:
        file = self.file
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
            raise BagReadError(
                f"{file}: cannot read the topic table ({exc}); the file is damaged near its start"
            ) from None
        finally:
            db.close()

    def messages(self, wanted: set[str] | None, damage: list[TruncationInfo]) -> Iterator[tuple[str, int, bytes]]:
        file = self.file
        db = _SqliteOpen(file, recover=self.recover)  # raises for a killed recording unless recovering
        try:
            conn = db.conn
            names = dict(conn.execute("SELECT id, name FROM topics"))
            ids = [i for i, n in names.items() if wanted is None or n in wanted]
            page_size, pages = _sqlite_header(file)
            size = file.stat().st_size
            count = 0
            last_t = None
            last_id = 0
            # Every row is walked (data only for wanted topics) so the count is of all messages in the file,
            # comparable with metadata.yaml; ORDER BY id walks the table b-tree (insertion order), never
            # the timestamp index, so a truncated file yields everything before the first missing page.
            query = (
                f"SELECT id, topic_id, timestamp, CASE WHEN topic_id IN ({','.join('?' * len(ids))}) THEN data END "
                "FROM messages ORDER BY id"
            )
            try:
                for row_id, topic_id, stamp, data in conn.execute(query, ids):
                    last_id, last_t = row_id, stamp
                    count += 1
                    if data is not None:
                        yield names[topic_id], int(stamp), bytes(data)
            except sqlite3.DatabaseError as exc:
                # The walk stops at the first missing interior page. Once the table has grown a level, its root's
                # entries live on a page near the end of the file, so a cut before it hides rows that are present.
                found = 0
                for row_id, topic_id, stamp, data in leaf_rows(db.opened.read_bytes(), page_size):
                    if row_id > last_id and topic_id in names:
                        found += 1
                        count += 1
                        last_t = stamp
                        if wanted is None or names[topic_id] in wanted:
                            yield names[topic_id], stamp, data
                damage.append(
                    TruncationInfo(
                        file,
                        (size // page_size) * page_size,
                        size,
                        count,
                        last_t,
                        f"sqlite error after message id {last_id}: {exc}"
                        + (f" (header says {pages} pages x {page_size} B = {pages * page_size} B)" if pages else ""),
                        detail=f"{found} of them read from the data pages past the damaged index" if found else "",
                    )
                )
                return
            if pages is not None and pages * page_size > size:
                damage.append(
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
                reason = "not closed cleanly (recorder killed); read its committed messages"
                damage.append(TruncationInfo(file, size, size, count, last_t, reason))
        finally:
            db.close()


# Raw reading of the messages table's leaf pages (sqlite file format, https://sqlite.org/fileformat2.html), for rows
# that sqlite cannot reach through a damaged b-tree.
_LEAF_TABLE_PAGE = 0x0D
_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 8: 0, 9: 0}  # serial type -> bytes of a big-endian integer
_INT_CONSTANTS = {8: 0, 9: 1}  # serial types that stand for these values and take no bytes


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of a sqlite varint (1-9 bytes, big-endian, 7 bits a byte, 8 in the ninth)."""
    value = 0
    for i in range(8):
        byte = buf[pos + i]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, pos + i + 1
    return (value << 8) | buf[pos + 8], pos + 9


def _message_row(record: bytes) -> tuple[int, int, bytes] | None:
    """(topic_id, timestamp, data) of a record of rosbag2's ``messages`` table (id, topic_id, timestamp, data);
    None for a record of another table."""
    header_size, pos = _varint(record, 0)
    types = []
    while pos < header_size:
        serial_type, pos = _varint(record, pos)
        types.append(serial_type)
    # id is the rowid (stored as NULL), topic_id and timestamp integers, data a blob (even serial type >= 12)
    if len(types) != 4 or types[0] != 0 or types[1] not in _INT_SIZES or types[2] not in _INT_SIZES:
        return None
    if types[3] < 12 or types[3] % 2:
        return None
    pos = header_size
    values = []
    for serial_type in types[1:3]:
        size = _INT_SIZES[serial_type]
        values.append(_INT_CONSTANTS.get(serial_type, int.from_bytes(record[pos : pos + size], "big", signed=True)))
        pos += size
    return values[0], values[1], record[pos : pos + (types[3] - 12) // 2]


def leaf_rows(data: bytes, page_size: int) -> list[tuple[int, int, int, bytes]]:
    """``(rowid, topic_id, timestamp, data)`` of the rosbag2 message rows on the table-leaf pages of a sqlite file
    ``data``, in rowid order. Rows that spill into overflow pages (a message larger than a page) are not read."""
    usable = page_size - data[20]  # bytes reserved at the end of each page
    rows: dict[int, tuple[int, int, int, bytes]] = {}
    for start in range(0, len(data) - page_size + 1, page_size):
        header = start + (100 if start == 0 else 0)  # page 1 starts with the 100-byte file header
        if data[header] != _LEAF_TABLE_PAGE:
            continue
        (cells,) = struct.unpack_from(">H", data, header + 3)
        for c in range(cells):
            (pointer,) = struct.unpack_from(">H", data, header + 8 + 2 * c)
            try:
                size, pos = _varint(data, start + pointer)
                row_id, pos = _varint(data, pos)
                if size > usable - 35:  # the rest of the payload is on overflow pages
                    continue
                row = _message_row(data[pos : pos + size])
            except (IndexError, struct.error):  # a cell of a damaged page
                continue
            if row is not None:
                rows[row_id] = (row_id, *row)
    return [rows[k] for k in sorted(rows)]
