"""rosbag2 MCAP storage (``.mcap``): a record walker that keeps going as far as the bytes allow.

A complete file is ``magic, records..., footer, magic``; a recorder that was killed or a copy that
was cut leaves a file without footer, possibly ending inside a chunk. Every complete top-level record
is read; from a cut chunk, the complete message records up to the cut are read too (its CRC covers
the whole chunk, so it cannot be checked): directly when the chunk is uncompressed, through a
streaming decompressor (what the readable part decompresses to) when it is zstd or lz4.

A complete chunk that does not decompress, or whose records do not match its CRC (when the writer stored one;
rosbags writes 0), is damage in the middle of the file: its messages are lost, the chunks after it are read.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from idyn_ros.data.bag.base import MCAP_MAGIC, BagTopic, TruncationInfo, zstd
from idyn_ros.errors import BagReadError

_OP_FOOTER, _OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE, _OP_CHUNK = 0x02, 0x03, 0x04, 0x05, 0x06
# Chunk body: message_start_time u64, message_end_time u64, uncompressed_size u64, uncompressed_crc u32,
# compression string (u32 length + bytes), records byte array (u64 length + bytes).
_CHUNK_FIXED = 28


class _TruncatedError(Exception):
    """The file ends inside the record at ``offset`` (``partial`` = its body bytes present, if the header is)."""

    def __init__(self, offset: int, reason: str, op: int | None = None, partial: memoryview | None = None) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.op = op
        self.partial = partial


class _DamagedChunkError(Exception):
    """A complete chunk whose records cannot be had: its compressed bytes or its CRC are wrong."""


def _read_str(buf: memoryview, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<I", buf, pos)
    return bytes(buf[pos + 4 : pos + 4 + length]).decode(), pos + 4 + length


def _top_records(file: Path, data: memoryview) -> Iterator[tuple[int, int, memoryview, int]]:
    """Yield ``(opcode, offset, body, end_offset)`` of complete top-level records.

    Raises:
        _TruncatedError: the file ends inside a record or has no footer.
    """
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
            raise _TruncatedError(
                pos,
                f"record 0x{op:02x} at byte {pos} needs {length} B but the file ends at {size}",
                op,
                data[pos + 9 : size],
            )
        yield op, pos, data[pos + 9 : end], end
        pos = end
        if op == _OP_FOOTER:  # magic follows
            if bytes(data[pos : pos + 8]) != MCAP_MAGIC:
                raise _TruncatedError(pos, "footer not followed by the closing magic")
            return


def _complete_records(body: memoryview) -> tuple[list[tuple[int, memoryview]], int]:
    """Records inside (decompressed) chunk bytes that are complete, and the offset where they end."""
    out = []
    pos, size = 0, len(body)
    while pos + 9 <= size:
        op = body[pos]
        (length,) = struct.unpack_from("<Q", body, pos + 1)
        if pos + 9 + length > size:
            break
        out.append((op, body[pos + 9 : pos + 9 + length]))
        pos += 9 + length
    return out, pos


def _chunk_header(body: memoryview) -> tuple[int, str, int] | None:
    """(uncompressed size, compression, offset of the records) of a chunk body; None if the header is cut."""
    if len(body) < _CHUNK_FIXED + 4:
        return None
    (usize,) = struct.unpack_from("<Q", body, 16)
    (clen,) = struct.unpack_from("<I", body, _CHUNK_FIXED)
    start = _CHUNK_FIXED + 4 + clen + 8
    if start > len(body):
        return None
    return usize, bytes(body[_CHUNK_FIXED + 4 : _CHUNK_FIXED + 4 + clen]).decode(), start


def _chunk_records(body: memoryview) -> memoryview:
    """The (decompressed) records of a complete chunk, checked against its CRC when it has one.

    Raises:
        _DamagedChunkError: the chunk's bytes changed after it was written.
    """
    header = _chunk_header(body)
    if header is None:
        raise BagReadError("MCAP chunk record too short for its header")
    usize, compression, start = header
    (crc,) = struct.unpack_from("<I", body, 24)
    (csize,) = struct.unpack_from("<Q", body, start - 8)
    records = body[start : start + csize]
    if compression:
        from rosbags.rosbag2.storage_mcap import DECOMPRESSORS

        if compression not in DECOMPRESSORS:
            raise BagReadError(f"unsupported MCAP chunk compression {compression!r}")
        try:
            records = memoryview(DECOMPRESSORS[compression](bytes(records), usize))
        except Exception as exc:  # the decompressors raise their own error types
            raise _DamagedChunkError(f"its {compression} data does not decompress ({exc})") from None
    if crc and zlib.crc32(records) != crc:
        raise _DamagedChunkError("its records do not match the chunk's CRC")
    return records


def _decompress_prefix(compression: str, raw: bytes) -> bytes:
    """What the first bytes of a compressed chunk decompress to (a streaming decoder stops at the cut)."""
    if compression == "zstd":
        return zstd().ZstdDecompressor().decompress(raw)
    if compression == "lz4":
        from lz4.frame import LZ4FrameDecompressor

        return LZ4FrameDecompressor().decompress(raw)
    raise BagReadError(f"unsupported MCAP chunk compression {compression!r}")


def _cut_chunk(body: memoryview) -> tuple[list[tuple[int, memoryview]], int | None, str]:
    """Complete records of a chunk the file ends inside.

    Returns:
        (records, end of the last complete record inside ``body`` or None when compressed, what was done).
    """
    header = _chunk_header(body)
    if header is None:
        return [], None, "the last chunk is cut inside its header: nothing in it is readable"
    _usize, compression, start = header
    if not compression:
        records, used = _complete_records(body[start:])
        n = sum(op == _OP_MESSAGE for op, _ in records)
        return records, start + used, f"{n} messages recovered from the cut chunk (uncompressed)"
    try:
        plain = _decompress_prefix(compression, bytes(body[start:]))
    except Exception as exc:  # corrupt compressed bytes: nothing of this chunk can be trusted
        detail = f"the cut chunk is {compression}-compressed and does not decompress ({exc}); its messages are lost"
        return [], None, detail
    records, _used = _complete_records(memoryview(plain))
    n = sum(op == _OP_MESSAGE for op, _ in records)
    return (
        records,
        None,
        f"the cut chunk is {compression}-compressed: {n} messages recovered from the part that decompresses "
        "(later messages of that chunk are lost)",
    )


class McapStorage:
    """An ``.mcap`` file (see :class:`~idyn_ros.data.bag.base.StorageReader`)."""

    def __init__(self, file: Path, recover: bool) -> None:
        self.file = file
        self.recover = recover  # every readable record is yielded either way; BagReader decides on damage

    def _walk(self) -> Iterator[tuple[str, object]]:
        """Yield ('schema', (id, name, encoding, data)), ('channel', (id, schema_id, topic)),
        ('message', (channel_id, log_time, data)), ('damaged', (chunk offset, why)) for a chunk whose records are
        lost, and finally ('end', None | (good_bytes, reason, detail))."""

        def decode(op: int, rec: memoryview) -> Iterator[tuple[str, object]]:
            if op == _OP_SCHEMA:
                (sid,) = struct.unpack_from("<H", rec, 0)
                name, p = _read_str(rec, 2)
                enc, p = _read_str(rec, p)
                sdata, _ = _read_str(rec, p)
                yield "schema", (sid, name, enc, sdata)
            elif op == _OP_CHANNEL:
                cid, sid = struct.unpack_from("<HH", rec, 0)
                topic, _ = _read_str(rec, 4)
                yield "channel", (cid, sid, topic)
            elif op == _OP_MESSAGE:
                cid, _seq, log_time, _pub = struct.unpack_from("<HIQQ", rec, 0)
                yield "message", (cid, log_time, bytes(rec[22:]))

        good = 8
        try:
            for op, pos, body, end in _top_records(self.file, memoryview(self.file.read_bytes())):
                try:
                    inner = _complete_records(_chunk_records(body))[0] if op == _OP_CHUNK else [(op, body)]
                except _DamagedChunkError as exc:
                    yield "damaged", (pos, str(exc))
                    inner = []
                for iop, rec in inner:
                    yield from decode(iop, rec)
                good = end
        except _TruncatedError as exc:
            detail = ""
            if exc.op == _OP_CHUNK and exc.partial is not None:
                records, used, detail = _cut_chunk(exc.partial)
                for iop, rec in records:
                    yield from decode(iop, rec)
                if used is not None:
                    good = exc.offset + 9 + used
            yield "end", (good, exc.reason, detail)
            return
        yield "end", None

    def topics(self) -> dict[str, BagTopic]:
        schemas: dict[int, tuple[str, str]] = {}
        channels: dict[int, tuple[int, str]] = {}
        counts: dict[int, int] = {}
        for kind, value in self._walk():
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

    def messages(self, wanted: set[str] | None, damage: list[TruncationInfo]) -> Iterator[tuple[str, int, bytes]]:
        file = self.file
        channels: dict[int, str] = {}
        count = 0
        last_t = None
        size = file.stat().st_size
        damaged: list[tuple[int, str]] = []  # (offset, why) of chunks whose messages are lost
        unplaced = 0  # later messages on a channel whose record was in a damaged chunk
        for kind, value in self._walk():
            if kind == "channel":
                channels[value[0]] = value[2]
            elif kind == "damaged":
                damaged.append(value)
            elif kind == "message":
                cid, log_time, data = value
                topic = channels.get(cid)
                if topic is None and damaged:
                    unplaced += 1
                    continue
                if topic is None:
                    raise BagReadError(f"{file}: message on unknown MCAP channel {cid}")
                count += 1
                last_t = log_time
                if wanted is None or topic in wanted:
                    yield topic, log_time, data
            elif kind == "end" and value is not None:
                good, reason, detail = value
                damage.append(TruncationInfo(file, good, size, count, last_t, reason, detail=detail))
        if damaged:
            offset, why = damaged[0]
            reason = f"{len(damaged)} chunk(s) cannot be read, the first at byte {offset}: {why}; their messages lost"
            if unplaced:
                reason += f", and {unplaced} later ones on channels that only those chunks declared"
            damage.insert(0, TruncationInfo(file, size, size, count, last_t, reason))
