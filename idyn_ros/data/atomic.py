"""Atomic file writes: a reader (or a crash) never sees a half-written file under the final name.

Write to a temp file in the same folder (same filesystem, so the rename is atomic), fsync it,
``os.replace`` it onto the final name, fsync the folder (so the rename itself survives a power cut).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_writer", "replace_durably", "write_together"]


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: Path, final: Path) -> None:
    """fsync the finished ``tmp``, rename it onto ``final`` and fsync the folder."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    _fsync_dir(final.parent)


def _temp_sibling(path: Path) -> Path:
    """A hidden sibling of ``path`` (``.NAME.<8 random hex digits>.tmp``): same folder, so the final rename is
    atomic."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


@contextmanager
def atomic_writer(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; it replaces ``path`` only if the block succeeds.

    The temp file is a hidden sibling (``_temp_sibling``) created with the usual permissions (umask);
    an exception removes it; a SIGKILL may leave it behind, never a half ``path``.
    """
    path = Path(path)
    tmp = _temp_sibling(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """``path`` holds either its old content or all of ``data``, never part of it (creates missing folders)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_writer(path) as f:
        f.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    """``atomic_write_bytes`` for UTF-8 text (metrics.json, result files, parameter files, URDFs)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_together(texts: dict[str | Path | None, str | None]) -> None:
    """Write each path's UTF-8 text (a None path or text is skipped): every file is complete and synced on disk
    before the first one replaces its old content, so a failed write (a full disk) changes none of them."""
    done: list[tuple[Path, Path]] = []
    try:
        for path, text in texts.items():
            if path is None or text is None:
                continue
            final = Path(path)
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = _temp_sibling(final)
            done.append((tmp, final))
            with open(tmp, "xb") as f:
                f.write(text.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        for tmp, _ in done:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, final in done:
        os.replace(tmp, final)
        _fsync_dir(final.parent)
