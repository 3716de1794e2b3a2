"""Locate a bag's storage files and read what its ``metadata.yaml`` says was written."""

from __future__ import annotations

import re
from pathlib import Path

from idyn_ros.data.bag.base import MCAP_MAGIC, SQLITE_MAGIC
from idyn_ros.errors import BagReadError


def is_bag(path: str | Path) -> bool:
    """True for a bag folder, a ``.db3`` or a ``.mcap`` file (by suffix or magic bytes)."""
    path = Path(path)
    if path.is_dir():
        return (path / "metadata.yaml").is_file() or any(path.glob("*.db3")) or any(path.glob("*.mcap")) \
            or any(path.glob("*.db3.zstd")) or any(path.glob("*.mcap.zstd"))
    if path.suffix in (".db3", ".mcap") or path.name.endswith((".db3.zstd", ".mcap.zstd")):
        return True
    if path.is_file():
        with path.open("rb") as f:
            head = f.read(16)
        return head.startswith(MCAP_MAGIC) or head == SQLITE_MAGIC
    return False


def read_bag_metadata(folder: Path) -> dict:
    """``rosbag2_bagfile_information`` of ``folder/metadata.yaml`` ({} when absent).

    Raises:
        Exception: whatever the YAML parser raises for an unreadable file (callers decide how loud).
    """
    meta = folder / "metadata.yaml"
    if not meta.is_file():
        return {}
    from ruamel.yaml import YAML

    return YAML(typ="safe").load(meta.read_text())["rosbag2_bagfile_information"]


def message_compression(path: Path) -> str:
    """The format rosbag2 compressed each message with (``--compression-mode message``), per metadata.yaml;
    "" when messages are stored as they are (no metadata.yaml, other modes, or an unreadable one)."""
    folder = path if path.is_dir() else path.parent
    try:
        info = read_bag_metadata(folder)
    except Exception:  # a broken metadata.yaml is reported by find_storage_files
        return ""
    if not isinstance(info, dict) or str(info.get("compression_mode") or "").lower() != "message":
        return ""
    return str(info.get("compression_format") or "").lower()


def messages_written(file: Path) -> int | None:
    """How many messages the recorder wrote into storage ``file``, per the metadata.yaml next to it.

    None when there is no metadata.yaml, it is unreadable, or it does not count this file.
    """
    try:
        info = read_bag_metadata(file.parent)
    except Exception:  # a broken metadata.yaml is reported by find_storage_files; here it only means "unknown"
        return None
    if not isinstance(info, dict):
        return None
    for entry in info.get("files") or []:
        if not isinstance(entry, dict):
            continue
        if str(entry.get("path")) == file.name and entry.get("message_count") is not None:
            return int(entry["message_count"])
    named = [str(x) for x in (info.get("relative_file_paths") or [])]
    if named == [file.name] and info.get("message_count") is not None:
        return int(info["message_count"])
    return None


def no_recording_in(folder: Path) -> str:
    """The one message for a folder that holds no recording, whichever command was given it."""
    return (f"no recording in folder {folder} (no metadata.yaml, .db3 or .mcap of a rosbag2 bag); pass the bag's "
            f"folder, or a .csv / .npz file itself")


def split_order(file: Path) -> list:
    """Sort key that reads the numbers in a name as numbers: rosbag2's split files bag_2 before bag_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", file.name)]


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
    present = sorted([*path.glob("*.db3"), *path.glob("*.mcap"), *path.glob("*.db3.zstd"), *path.glob("*.mcap.zstd")],
                     key=split_order)
    meta = path / "metadata.yaml"
    if not meta.is_file():
        if not present:
            raise BagReadError(no_recording_in(path))
        if len(present) > 1:
            notes.append(
                f"{path} has no metadata.yaml; reading its {len(present)} storage files in name order: "
                + ", ".join(p.name for p in present)
            )
        return present, notes
    try:
        named = [str(x) for x in (read_bag_metadata(path).get("relative_file_paths") or [])]
    except Exception as exc:
        named = []
        notes.append(f"{meta} is unreadable ({exc}); using the storage files present")
    found = [path / n for n in named if (path / n).is_file()]
    missing = [n for n in named if not (path / n).is_file()]
    if missing:
        if not present:
            raise BagReadError(f"{meta} names {missing} but the folder holds no .db3 or .mcap file at all")
        extra = [p for p in present if p not in found]
        what = f"{meta} names {missing}, which {'is' if len(missing) == 1 else 'are'} not in the folder; "
        if extra:
            notes.append(what + f"using {[p.name for p in extra]} found there instead")
        else:
            notes.append(what + f"reading the {len(found)} file(s) that are there: the time the missing ones "
                         "recorded is a gap")
        found = found + extra
    if not found:
        found = present
    if not found:
        raise BagReadError(f"{path}: metadata.yaml lists no storage file and none is present")
    return found, notes
