"""Where the package's share files (urdf/, config/, launch/) live.

In a source checkout (editable install) they sit next to the package; after `colcon build` or a
regular pip install they are under ``share/idyn_ros``.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

PACKAGE_NAME = "idyn_ros"


@cache
def share_dir() -> Path:
    """Directory holding ``urdf/``, ``config/`` and ``launch/``."""
    source_root = Path(__file__).resolve().parent.parent
    if (source_root / "package.xml").is_file() and (source_root / "urdf").is_dir():
        return source_root
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE_NAME))
    except Exception:  # ament_index missing or package not indexed: fall back to the prefix
        candidate = Path(sys.prefix) / "share" / PACKAGE_NAME
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"cannot find the {PACKAGE_NAME} share directory (looked next to the sources, in the ament "
        f"index and in {sys.prefix}/share/{PACKAGE_NAME})"
    )


def urdf_dir() -> Path:
    return share_dir() / "urdf"


def config_dir() -> Path:
    return share_dir() / "config"


def shared_data_dir() -> Path | None:
    """The team's real-robot recordings (``../shared/data``) if present, else None."""
    import os

    env = os.environ.get("IDYN_SHARED_DATA")
    candidates = [Path(env)] if env else []
    root = Path(__file__).resolve().parent.parent
    candidates += [root.parent / "shared" / "data", root.parent.parent / "shared" / "data"]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None
