"""Torch files of a run (checkpoint.pt, model.pt, gp.pt): written atomically, read with a clear error.

A SIGKILL while ``torch.save`` wrote in place left 0-byte checkpoints and ``--resume`` died with
EOFError; now the old file stays until the new one is complete (``data.atomic.atomic_write_bytes``).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from idyn_ros.data.atomic import atomic_write_bytes
from idyn_ros.errors import ModelArtifactError


def save(obj: dict[str, Any], path: str | Path) -> None:
    """``torch.save`` to a temp file in the same folder, then rename over ``path``."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def load(path: str | Path, what: str, fix: str) -> dict[str, Any]:
    """The dict stored in ``path``; ModelArtifactError naming the file, what is wrong and ``fix``."""
    path = Path(path)
    if not path.is_file():
        raise ModelArtifactError(f"{path}: no such {what}; {fix}")
    size = path.stat().st_size
    if size == 0:
        raise ModelArtifactError(f"{path}: empty {what} (0 bytes, an interrupted write); {fix}")
    try:
        obj = torch.load(path, weights_only=False)
    except Exception as exc:  # EOFError, zip "failed finding central directory", UnpicklingError, ...
        raise ModelArtifactError(
            f"{path}: damaged or truncated {what} ({size} bytes; {type(exc).__name__}: {_first_line(exc)}); {fix}"
        ) from None
    if not isinstance(obj, dict):
        raise ModelArtifactError(f"{path}: not an idyn {what} (holds a {type(obj).__name__}); {fix}")
    return obj


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no detail"
