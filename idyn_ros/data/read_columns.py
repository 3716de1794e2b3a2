"""Read column files (CSV, foreign NPZ) into a :class:`~idyn_ros.data.raw.RawRecording`; times in integer ns."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from idyn_ros.data.hints import option_hint
from idyn_ros.data.raw import RawRecording
from idyn_ros.errors import DatasetError

#: Time units of CSV / foreign-NPZ time columns, as nanoseconds per unit.
TIME_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
#: Auto-detected time unit = the one putting the median step's rate in this window: real arms log joint
#: states at ~30 Hz..1 kHz, and the window spans exactly the factor 1000 between units, so one unit fits.
PLAUSIBLE_RATE_HZ = (5.0, 5000.0)


def read_npz_columns(path: Path, data: dict[str, np.ndarray], time_unit: str | None = None) -> RawRecording:
    """A foreign NPZ with named columns (e.g. FloBaRoID ``times/positions/torques/target_*``)."""
    aliases = {
        "t": ("t", "time", "times", "timestamps", "stamp"),
        "q": ("q", "positions", "position", "pos"),
        "dq": ("dq", "velocities", "velocity", "qd", "vel"),
        "ddq": ("ddq", "accelerations", "acceleration", "qdd", "acc"),
        "tau": ("tau", "torques", "torque", "efforts", "effort"),
        "q_d": ("q_d", "target_positions", "positions_desired"),
        "dq_d": ("dq_d", "target_velocities", "velocities_desired"),
        "ddq_d": ("ddq_d", "target_accelerations", "accelerations_desired"),
        "tau_cmd": ("tau_cmd", "target_torques", "commanded_torques"),
    }
    found = {k: next((data[a] for a in names if a in data), None) for k, names in aliases.items()}
    if found["t"] is None or found["q"] is None:
        raise DatasetError(
            f"{path}: unknown NPZ layout (keys {sorted(data)}); need a time key (t/times) and positions (q/positions)"
        )
    t_key = next(a for a in aliases["t"] if a in data)
    t = np.asarray(found["t"], dtype=np.float64).reshape(-1)
    stamps, unit, notes = stamps_ns(t, str(path), t_key, time_unit)
    q = np.atleast_2d(np.asarray(found["q"], dtype=np.float64))
    n = q.shape[1]
    names_arr = next((data[k] for k in ("joint_names", "names", "joints") if k in data), None)
    names = [str(x) for x in names_arr] if names_arr is not None else [f"#{i + 1}" for i in range(n)]
    signals = {k: np.asarray(v, dtype=np.float64) for k, v in found.items() if k != "t" and v is not None}
    for k, v in signals.items():
        if v.shape != (t.size, n):
            raise DatasetError(f"{path}: {k} has shape {v.shape}, expected ({t.size}, {n})")
    return RawRecording(stamps, names, signals, str(path), notes=notes, time_column=(t_key, unit))


_TIME_NAMES = ("t", "time", "times", "timestamp", "stamp", "sec")
#: A time column: one of _TIME_NAMES, optionally with its unit as suffix (``t_ns``, ``time_ms``, ``stamp_s``).
_TIME_COL = re.compile(rf"({'|'.join(_TIME_NAMES)})(?:_({'|'.join(TIME_UNITS)}))?")
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_SUFFIX = {
    "q": ("pos", "position", "q"),
    "dq": ("vel", "velocity", "dq"),
    "ddq": ("acc", "acceleration", "ddq"),
    "tau": ("eff", "effort", "torque", "tau"),
    "q_d": ("pos_d", "position_desired", "q_d"),
    "dq_d": ("vel_d", "velocity_desired", "dq_d"),
    "ddq_d": ("acc_d", "acceleration_desired", "ddq_d"),
    "tau_cmd": ("eff_cmd", "effort_command", "tau_cmd"),
}
_NUMBERED = {
    "q": ("q", "pos", "position"),
    "dq": ("dq", "qd", "vel", "velocity"),
    "ddq": ("ddq", "qdd", "acc", "acceleration"),
    "tau": ("tau", "eff", "effort", "torque"),
    "q_d": ("q_d", "qdes", "q_des"),
    "dq_d": ("dq_d", "dqdes", "dq_des"),
    "ddq_d": ("ddq_d", "ddq_des"),
    "tau_cmd": ("tau_cmd", "tau_c"),
}


def read_csv(path: Path, time_unit: str | None = None) -> RawRecording:
    """CSV, wide (``t, q1..qn`` / ``<joint>_pos, <joint>_vel, <joint>_eff``) or long (``t,joint,position,...``).

    Time column ``t``/``time``/``timestamp``/...; its unit from ``time_unit``, else a header suffix
    (``t_ns``, ``time_ms``), else the median step (:func:`stamps_ns`).
    """
    try:
        return _read_csv(path, time_unit)
    except ValueError as exc:
        raise DatasetError(f"{path}: a cell is not a number ({exc}); fix or remove that row") from None


def _read_csv(path: Path, time_unit: str | None) -> RawRecording:
    rows: list[list[str]] = []
    lines: list[int] = []  # file line number of each kept row, for error messages
    with path.open(newline="", encoding="utf-8-sig") as f:  # utf-8-sig: a spreadsheet's byte-order mark is no header
        reader = csv.reader(f)
        for r in reader:
            if r and not r[0].startswith("#"):
                rows.append(r)
                lines.append(reader.line_num)
    if len(rows) < 2:
        raise DatasetError(f"{path}: CSV has no data rows")
    header = [h.strip() for h in rows[0]]
    lower = [h.lower() for h in header]
    tcol = next((i for i, h in enumerate(lower) if _TIME_COL.fullmatch(h)), None)
    if tcol is None:
        raise DatasetError(
            f"{path}: no time column (one of {', '.join(_TIME_NAMES)}, optionally with a unit suffix such as "
            f"t_ns or time_ms) in header {header}"
        )
    header_unit = _TIME_COL.fullmatch(lower[tcol]).group(2)
    body, body_lines = rows[1:], lines[1:]
    ragged = [(n, len(r)) for r, n in zip(body, body_lines, strict=True) if len(r) != len(header)]
    if ragged:
        listed = ", ".join(f"line {n} ({k} cells)" for n, k in ragged[:5]) + (", ..." if len(ragged) > 5 else "")
        raise DatasetError(
            f"{path}: {len(ragged)} row(s) do not have the header's {len(header)} cells: {listed}; "
            "a cut last line is typical of an interrupted log: delete the incomplete row(s)"
        )

    def to_ns(texts: list[str], where: list[int]) -> tuple[np.ndarray, str, list[str]]:
        values = np.array([_num(x) for x in texts], dtype=np.float64)
        return stamps_ns(
            values, str(path), header[tcol], time_unit, texts=texts, rows=[f"line {n}" for n in where],
            header_unit=header_unit,
        )

    if "joint" in lower and "position" in lower:  # long layout: one row per joint and sample
        jcol = lower.index("joint")
        cols = {k: lower.index(c) for k, c in (("q", "position"), ("dq", "velocity"), ("tau", "effort")) if c in lower}
        if "tau" not in cols and "torque" in lower:
            cols["tau"] = lower.index("torque")
        if "ddq" not in cols and "acceleration" in lower:
            cols["ddq"] = lower.index("acceleration")
        names: list[str] = []
        first_line = {}
        for r, n in zip(body, body_lines, strict=True):
            first_line.setdefault(r[tcol], n)
        uniq = list(first_line)  # distinct stamp texts in order of appearance
        index = {s: i for i, s in enumerate(uniq)}
        for r in body:
            if r[jcol] not in names:
                names.append(r[jcol])
        signals = {k: np.full((len(uniq), len(names)), np.nan) for k in cols}
        for r in body:
            i, j = index[r[tcol]], names.index(r[jcol])
            for k, c in cols.items():
                signals[k][i, j] = _num(r[c])
        stamps, unit, notes = to_ns(uniq, list(first_line.values()))
        return RawRecording(stamps, names, signals, str(path), notes=notes, time_column=(header[tcol], unit))

    values = np.array([[_num(x) for x in r] for r in body], dtype=np.float64)
    stamps, unit, notes = to_ns([r[tcol] for r in body], body_lines)
    per: dict[str, dict[str, int]] = {k: {} for k in _SUFFIX}
    repeated: list[str] = []
    for i, h in enumerate(header):
        if i == tcol:
            continue
        sig, joint = _classify_column(h)
        if sig is None:
            continue
        if joint in per[sig]:
            first = per[sig][joint]
            label = joint if not joint.startswith("#") else f"joint {joint[1:]}"
            repeated.append(f"{label} ({sig}: columns {first + 1} {header[first]!r} and {i + 1} {h!r})")
            continue
        per[sig][joint] = i
    if repeated:
        raise DatasetError(
            f"{path}: the header gives the same joint twice: {'; '.join(repeated)}; which column is the joint "
            "is ambiguous: rename or remove the duplicate column(s)"
        )
    if not per["q"]:
        raise DatasetError(
            f"{path}: no position columns recognised in {header}; name them q1..qn, <joint>_pos or use the long "
            "layout t,joint,position,velocity,effort"
        )
    names = list(per["q"])
    signals = {}
    for sig, mapping in per.items():
        if mapping:
            arr = np.full((values.shape[0], len(names)), np.nan)
            for j, name in enumerate(names):
                if name in mapping:
                    arr[:, j] = values[:, mapping[name]]
            signals[sig] = arr
    return RawRecording(stamps, names, signals, str(path), notes=notes, time_column=(header[tcol], unit))


def stamps_ns(
    values: np.ndarray,
    source: str,
    column: str,
    unit: str | None,
    texts: list[str] | None = None,
    rows: list[str] | None = None,
    header_unit: str | None = None,
) -> tuple[np.ndarray, str, list[str]]:
    """Integer-ns stamps of a time column, the unit it was read in, and a note when that unit was detected.

    Args:
        values: the column as floats; texts: the same cells as written (integer cells convert exactly).
        unit: ``s``/``ms``/``us``/``ns`` given by the user, else ``header_unit`` (a ``_ns``-style
            suffix), else detected: the unit putting 1 / median step in :data:`PLAUSIBLE_RATE_HZ`.
        rows: a label per value for error messages (default ``index i``).
    """
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:  # refused, not dropped: a row without a time cannot be placed, and dropping hides a corrupt log
        label = (lambda i: rows[i]) if rows is not None else (lambda i: f"index {i}")
        listed = ", ".join(label(i) for i in bad[:10]) + (", ..." if bad.size > 10 else "")
        raise DatasetError(
            f"{source}: time column {column!r} is empty or not a finite number in {bad.size} row(s): {listed}; "
            "fix or delete those rows"
        )
    notes: list[str] = []
    chosen = unit or header_unit
    if chosen is None:
        steps = np.diff(np.unique(values))
        if steps.size == 0:
            chosen = "s"  # one distinct stamp: no step to judge by; to_dataset refuses fewer than 2 samples
        else:
            step = float(np.median(steps))
            rates = {u: 1e9 / (step * scale) for u, scale in TIME_UNITS.items()}
            lo, hi = PLAUSIBLE_RATE_HZ
            chosen = next((u for u, r in rates.items() if lo <= r < hi), None)
            if chosen is None:
                raise DatasetError(
                    f"{source}: cannot tell the unit of time column {column!r}: its median step {step:.6g} "
                    f"means {', '.join(f'{r:.3g} Hz in {u}' for u, r in rates.items())}, none within "
                    f"{lo:g}..{hi:g} Hz; " + option_hint("--time-unit", "s|ms|us|ns", keyword="time_unit='s'")
                )
            if chosen != "s":
                notes.append(
                    f"time column {column!r} read in {chosen} (median step {step:.4g} -> {rates[chosen]:.4g} Hz; "
                    f"seconds would give {rates['s']:.3g} Hz); to override, "
                    + option_hint("--time-unit", "s|ms|us|ns", keyword="time_unit='s'")
                )
    scale = TIME_UNITS[chosen]
    exact = texts is not None and all(_INTEGER.fullmatch(x) for x in texts)
    ns = [int(x) * scale for x in texts] if exact else values * scale  # Python ints: exact even for epoch ns
    if values.size and max(abs(max(ns)), abs(min(ns))) >= 2**63:
        raise DatasetError(
            f"{source}: time column {column!r} read in {chosen} overflows int64 nanoseconds (largest value "
            f"{np.abs(values).max():.6g}); " + option_hint("--time-unit", "s|ms|us|ns", keyword="time_unit='ns'")
        )
    return (np.array(ns, dtype=np.int64) if exact else np.round(ns).astype(np.int64)), chosen, notes


def _num(text: str) -> float:
    text = text.strip()
    return float(text) if text else float("nan")


def _classify_column(header: str) -> tuple[str | None, str]:
    """(signal, joint) for a wide-CSV column; numbered columns give joint ``#i``."""
    h = header.strip()
    low = h.lower()
    # longest prefixes first so "ddq1" is not read as "dq" of joint "d..."
    for sig, prefixes in sorted(_NUMBERED.items(), key=lambda kv: -max(len(p) for p in kv[1])):
        for p in sorted(prefixes, key=len, reverse=True):
            m = re.fullmatch(rf"{re.escape(p)}_?(\d+)", low)
            if m:
                return sig, f"#{int(m.group(1))}"
    for sig, suffixes in sorted(_SUFFIX.items(), key=lambda kv: -max(len(s) for s in kv[1])):
        for s in sorted(suffixes, key=len, reverse=True):
            for sep in ("_", ".", "/"):
                if low.endswith(sep + s) and len(h) > len(s) + 1:
                    return sig, h[: -(len(s) + 1)]
    return None, ""
