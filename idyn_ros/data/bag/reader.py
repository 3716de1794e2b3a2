"""BagReader: pick the storage backend of each file by its magic bytes, stream messages, report damage."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from idyn_ros.data.bag.base import (
    MCAP_MAGIC,
    SQLITE_MAGIC,
    ZSTD_MAGIC,
    BagTopic,
    BagWarning,
    StorageReader,
    TruncationInfo,
    zstd,
)
from idyn_ros.data.bag.metadata import find_storage_files, message_compression, messages_written
from idyn_ros.data.bag.storage_mcap import McapStorage
from idyn_ros.data.bag.storage_sqlite3 import Sqlite3Storage
from idyn_ros.data.hints import recover_hint
from idyn_ros.errors import BagReadError

#: Storage backends by rosbag2 storage identifier (as rosbags' ``STORAGE_PLUGINS``).
STORAGE_PLUGINS: Mapping[str, type[StorageReader]] = {"sqlite3": Sqlite3Storage, "mcap": McapStorage}


def storage_id(file: Path) -> str:
    """``"mcap"`` or ``"sqlite3"`` from the file's first bytes (suffixes lie; magic does not)."""
    with file.open("rb") as f:
        head = f.read(16)
    if head.startswith(MCAP_MAGIC):
        return "mcap"
    if head == SQLITE_MAGIC:
        return "sqlite3"
    if not head:
        raise BagReadError(f"{file} is empty (0 bytes): the recording never wrote data")
    if head.startswith(ZSTD_MAGIC):  # BagReader decompresses such a file before it asks
        raise BagReadError(f"{file} is zstd-compressed as a whole (rosbag2 --compression-mode file): read it with "
                           "BagReader, which decompresses it")
    raise BagReadError(f"{file} is neither a rosbag2 sqlite3 (.db3) nor an MCAP file (first bytes {head[:8]!r})")


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
        self._plain: dict[Path, Path] = {}  # file compressed as a whole -> its decompressed copy
        self._scratch: tempfile.TemporaryDirectory | None = None  # holds the copies; removed with the reader

    def _storage(self, file: Path) -> StorageReader:
        file = self._decompressed_file(file)
        return STORAGE_PLUGINS[storage_id(file)](file, self.recover)

    def _decompressed_file(self, file: Path) -> Path:
        """``file``, or for one rosbag2 zstd-compressed as a whole (``--compression-mode file``) a decompressed copy
        in a temporary folder (decision: a copy, since a reader must not change the user's recording in place)."""
        if file in self._plain:
            return self._plain[file]
        with file.open("rb") as f:
            if not f.read(4).startswith(ZSTD_MAGIC):
                return file
        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="idyn_bag_")
        plain = Path(self._scratch.name) / f"{len(self._plain)}_{file.name.removesuffix('.zstd')}"
        try:
            with zstd().open(file, "rb") as src, plain.open("wb") as dst:
                while block := src.read(1 << 16):  # small reads: a cut file keeps all but its last 64 kB
                    dst.write(block)
        except (zstd().ZstdError, EOFError) as exc:
            done = plain.stat().st_size if plain.exists() else 0
            what = f"{file} (zstd-compressed as a whole) does not decompress past byte {done} of its content ({exc})"
            if not self.recover:
                raise BagReadError(f"{what}; {recover_hint('read the part that decompressed')}") from None
            warnings.warn(f"{what}; reading the part that decompressed", BagWarning, stacklevel=4)
        except OSError as exc:
            raise BagReadError(f"{file}: cannot decompress it into {plain.parent} ({exc}); free space there or set "
                               "TMPDIR to a folder with room for the uncompressed bag") from None
        self._plain[file] = plain
        return plain

    def topics(self) -> dict[str, BagTopic]:
        """Topics of all storage files (name -> :class:`BagTopic`)."""
        if self._topics is None:
            topics: dict[str, BagTopic] = {}
            for file in self.files:
                for t in self._storage(file).topics().values():
                    old = topics.get(t.name)
                    count = t.count + (old.count if old and old.count >= 0 and t.count >= 0 else 0)
                    topics[t.name] = BagTopic(t.name, t.msgtype, t.msgdef or (old.msgdef if old else ""), count)
            self._topics = topics
        return self._topics

    def messages(self, topics: list[str] | None = None) -> Iterator[tuple[str, int, bytes]]:
        """Yield ``(topic, log_time_ns, cdr_bytes)`` in file order (not necessarily time order)."""
        wanted = None if topics is None else set(topics)
        compression = message_compression(self.path)
        if compression not in ("", "zstd"):
            raise BagReadError(f"{self.path}: its messages are compressed with {compression!r} (metadata.yaml); "
                               "this reader knows zstd, the format rosbag2 writes")
        for file in self.files:
            damage: list[TruncationInfo] = []
            stream = self._storage(file).messages(wanted, damage)
            yield from self._decompressed(file, stream) if compression else stream
            if damage:
                if not self.recover:
                    raise BagReadError(f"{damage[0].describe()}; {recover_hint('use the readable part')}")
                for info in damage:
                    info.messages_written = messages_written(file)
                self.truncations.extend(damage)
                warnings.warn(
                    f"{damage[0].describe()}; recovered the readable part: {damage[0].kept()}", BagWarning, stacklevel=2
                )

    def _decompressed(self, file: Path, stream: Iterator[tuple[str, int, bytes]]) -> Iterator[tuple[str, int, bytes]]:
        """The messages of ``stream``, which rosbag2 compressed one by one with zstd (--compression-mode message)."""
        for topic, log_ns, data in stream:
            try:
                plain = zstd().decompress(data)
            except Exception as exc:  # zstd raises its own error type
                what = f"{file}: a message on {topic} (log time {log_ns} ns) does not decompress ({exc})"
                if not self.recover:
                    raise BagReadError(f"{what}; the bag is damaged there; {recover_hint('skip it')}") from None
                warnings.warn(f"{what}; skipped", BagWarning, stacklevel=3)
                continue
            yield topic, log_ns, plain
