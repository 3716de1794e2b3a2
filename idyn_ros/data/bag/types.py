"""The rosbags typestore: ROS 2 Kilted message types plus the package's own ``msg/*.msg``."""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path

from idyn_ros.data.bag.base import BagTopic, BagWarning


def _msg_dir() -> Path | None:
    """The package's ``msg/`` folder (source checkout or installed share dir)."""
    candidate = Path(__file__).resolve().parents[3] / "msg"
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
