"""What every reader of a recording returns, before the one cleaning path of :mod:`idyn_ros.data.importers`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class RawRecording:
    """Samples as found in a source, before cleaning.

    ``stamps_ns`` (M,) int64 (any order, duplicates allowed); ``signals[name]`` (M, n) float with
    columns in ``joint_names`` order (NaN = not present in that sample); ``wrench`` (M, 6) or None.
    Numbered columns without names use placeholders ``#1..#n`` resolved by position.
    """

    stamps_ns: np.ndarray
    joint_names: list[str]
    signals: dict[str, np.ndarray]
    source: str
    wrench: np.ndarray | None = None
    extra: dict[str, tuple[np.ndarray, list[str], np.ndarray]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    effort_hint: str | None = None
    time_column: tuple[str, str] | None = None  # (column, unit it was read in) for CSV / foreign NPZ
    named: np.ndarray | None = None  # (M, n) bool: the joints each message named (bags; None: every sample names all)
    header_stamps: bool = False  # stamps are a bag's header stamps (its log times are the other choice)
    log_to_header_ns: int = 0  # add to a bag log time to place it on the joint states' header clock




def duplicated(names: list[str] | tuple[str, ...]) -> list[str]:
    """Names that occur more than once, in first-occurrence order."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        if name in seen and name not in out:
            out.append(name)
        seen.add(name)
    return out


