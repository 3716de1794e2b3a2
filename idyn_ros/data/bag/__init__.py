"""rosbag2 files without ROS: find the storage files, read raw CDR messages, write with recovery points.

The ROS 2 wheels carry no rosbag2 (Python or C++), so bags are written with the
``rosbags`` library and read by this package. Reading is done here rather than by
``rosbags.rosbag2.Reader`` because real bags are messy and the reader must say exactly what is
wrong, or recover what it can:

- a bare ``.db3`` without ``metadata.yaml`` (rosbag2 >= Iron keeps metadata inside the db3);
- a bag folder whose ``metadata.yaml`` names a file that is not there (use what is there, warn);
- a bag cut in the middle (copy interrupted, disk full) or a recorder that was SIGKILLed: the
  error names the file and the last good byte offset / message index, and ``recover=True``
  returns the readable part and says how much of what metadata.yaml counts was kept.

Layout, as in rosbags: :mod:`.reader` picks a backend per storage file from ``STORAGE_PLUGINS``
(by magic bytes); each backend (:mod:`.storage_sqlite3`, :mod:`.storage_mcap`) implements the small
:class:`~idyn_ros.data.bag.base.StorageReader` protocol; :mod:`.writer` writes; :mod:`.metadata`
locates files and reads ``metadata.yaml``; :mod:`.types` holds the typestore.

Durability of our own recordings (:class:`BagWriter`): sqlite3 runs in WAL mode with a commit per
flush, so a killed recorder leaves ``X.db3`` + ``X.db3-wal`` holding every committed message; MCAP
chunks are closed and flushed to the OS every flush period, so a killed recorder leaves a file
without footer/summary whose complete chunks (and the complete messages of a cut last chunk) are
readable with ``recover=True``.
"""

from idyn_ros.data.bag.base import BagTopic, BagWarning, TruncationInfo
from idyn_ros.data.bag.metadata import find_storage_files, is_bag
from idyn_ros.data.bag.reader import BagReader
from idyn_ros.data.bag.types import idyn_typestore, register_bag_types
from idyn_ros.data.bag.writer import BagWriter

__all__ = [
    "BagReader",
    "BagTopic",
    "BagWarning",
    "BagWriter",
    "TruncationInfo",
    "find_storage_files",
    "idyn_typestore",
    "is_bag",
    "register_bag_types",
]
