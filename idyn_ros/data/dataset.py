"""The dataset contract: one recording of one trajectory on a uniform time grid.

Everything downstream (identification, training, evaluation) reads a :class:`Dataset`; everything
upstream (bags, CSV, foreign NPZ files) is converted into one by :mod:`idyn_ros.data.importers`.
Keeping one in-memory form with a strict ``validate()`` means the rest of the code never has to
guess units, joint order or which optional signals are present.

File form (the contract between layers; docs/interfaces.md): an ``.npz`` with ``t`` (N,) s, ``q`` rad, ``dq`` rad/s,
``tau`` Nm (or current-based driver units for ``effort_kind == "current"``) (N, n); optional
``ddq``, ``tau_cmd``, ``q_d``, ``dq_d``, ``ddq_d`` (N, n), ``wrench`` (N, 6) [f; n] in N and Nm;
``joint_names`` (n,), ``robot``, ``effort_kind``, ``source``. This module adds two optional keys:
``segment_starts`` (K,) sample indices where a new contiguous segment begins after a gap, and
``notes`` (M,) strings describing what the import did (estimated velocities, dropped duplicates).
"""

from __future__ import annotations

import itertools
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from idyn_ros.data.atomic import atomic_writer
from idyn_ros.data.hints import option_hint, rename_hint
from idyn_ros.errors import DatasetError

__all__ = ["EFFORT_KINDS", "JOINT_SIGNALS", "Dataset", "load_dataset", "read_npz"]

EFFORT_KINDS = ("torque", "current")
#: Optional per-joint signals, each (N, n).
JOINT_SIGNALS = ("ddq", "tau_cmd", "q_d", "dq_d", "ddq_d")


@dataclass
class Dataset:
    """One recording on a uniform time grid (possibly split into segments by gaps).

    Attributes:
        t: sample times (N,) in s, strictly increasing; uniform spacing 1/rate inside a segment.
        q, dq, tau: joint positions (rad), velocities (rad/s), efforts (Nm, or current-based driver units when
            ``effort_kind == "current"``), each (N, n) in ``joint_names`` order.
        joint_names: the n joint names, in the robot model's order.
        robot: robot preset name or URDF stem ("" when unknown).
        effort_kind: ``"torque"`` or ``"current"`` (UR drivers report motor-current-based effort).
        source: where the data came from (file path and topic).
        ddq, tau_cmd, q_d, dq_d, ddq_d: optional (N, n) signals; ``wrench`` optional (N, 6).
        segment_starts: sample indices where contiguous segments begin (first is always 0).
        notes: human-readable lines about what the import did.
    """

    t: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    joint_names: tuple[str, ...]
    robot: str = ""
    effort_kind: str = "torque"
    source: str = ""
    ddq: np.ndarray | None = None
    tau_cmd: np.ndarray | None = None
    q_d: np.ndarray | None = None
    dq_d: np.ndarray | None = None
    ddq_d: np.ndarray | None = None
    wrench: np.ndarray | None = None
    segment_starts: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.t = np.asarray(self.t, dtype=np.float64)
        for name in ("q", "dq", "tau", *JOINT_SIGNALS, "wrench"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, np.asarray(value, dtype=np.float64))
        self.joint_names = tuple(str(j) for j in self.joint_names)
        self.segment_starts = np.asarray(self.segment_starts, dtype=np.int64).reshape(-1)
        if self.segment_starts.size == 0:
            self.segment_starts = np.zeros(1, dtype=np.int64)
        self.notes = tuple(str(x) for x in self.notes)
        self.validate()

    # ------------------------------------------------------------------ shape and sanity
    @property
    def n(self) -> int:
        """Degrees of freedom."""
        return len(self.joint_names)

    @property
    def num_samples(self) -> int:
        return int(self.t.shape[0])

    def __len__(self) -> int:
        return self.num_samples

    @property
    def rate_hz(self) -> float:
        """Sample rate (Hz) from the median sample period (robust to segment jumps)."""
        if self.num_samples < 2:
            return float("nan")
        return float(1.0 / np.median(np.diff(self.t)))

    @property
    def duration(self) -> float:
        """Sum of segment durations (s), gaps excluded."""
        return float(sum(self.t[s][-1] - self.t[s][0] for s in self.segments() if s.stop - s.start > 0))

    def segments(self) -> list[slice]:
        """Contiguous segments as slices into the sample axis."""
        bounds = [*self.segment_starts.tolist(), self.num_samples]
        return [slice(a, b) for a, b in itertools.pairwise(bounds) if b > a]

    def validate(self) -> None:
        """Raise :class:`DatasetError` if shapes, names, finiteness or ordering are wrong."""
        n_samples = self.t.shape[0] if self.t.ndim == 1 else -1
        if n_samples < 0:
            raise DatasetError(f"dataset {self.source!r}: t must be 1-D, got shape {self.t.shape}")
        n = len(self.joint_names)
        if len(set(self.joint_names)) != n:
            repeated = sorted({j for j in self.joint_names if self.joint_names.count(j) > 1})
            raise DatasetError(f"dataset {self.source!r}: joint name(s) {repeated} appear twice in {self.joint_names}")
        for name in ("q", "dq", "tau", *JOINT_SIGNALS):
            value = getattr(self, name)
            if value is not None and value.shape != (n_samples, n):
                raise DatasetError(
                    f"dataset {self.source!r}: {name} has shape {value.shape}, expected ({n_samples}, {n}) "
                    f"(N samples x joints {list(self.joint_names)})"
                )
        if self.wrench is not None and self.wrench.shape != (n_samples, 6):
            raise DatasetError(f"dataset {self.source!r}: wrench has shape {self.wrench.shape}, expected (N, 6)")
        if self.effort_kind not in EFFORT_KINDS:
            raise DatasetError(f"dataset {self.source!r}: effort_kind {self.effort_kind!r} not in {EFFORT_KINDS}")
        if n_samples > 1 and not np.all(np.diff(self.t) > 0):
            bad = int(np.argmin(np.diff(self.t) > 0))
            raise DatasetError(
                f"dataset {self.source!r}: t is not strictly increasing at sample {bad} "
                f"({float(self.t[bad]):g} -> {float(self.t[bad + 1]):g} s); re-import the source to sort and "
                f"de-duplicate"
            )
        starts = self.segment_starts
        if starts[0] != 0 or np.any(np.diff(starts) <= 0) or (n_samples and starts[-1] >= max(n_samples, 1)):
            raise DatasetError(f"dataset {self.source!r}: bad segment_starts {starts.tolist()} for N={n_samples}")
        for name in ("t", "q", "dq", "tau", *JOINT_SIGNALS, "wrench"):
            value = getattr(self, name)
            if value is None:
                continue
            finite = np.isfinite(value)
            if not finite.all():
                idx = np.argwhere(~finite)
                first = idx[0]
                where = f"sample {first[0]}" + (
                    f", joint {self.joint_names[first[1]]!r}" if value.ndim == 2 and name != "wrench" else ""
                )
                raise DatasetError(
                    f"dataset {self.source!r}: {len(idx)} non-finite value(s) in {name}, first at {where} "
                    f"(t = {self.t[first[0]] if np.isfinite(self.t[first[0]]) else 'nan'} s); "
                    "clean or cut the recording"
                )

    # ------------------------------------------------------------------ views
    def select(self, index: slice | np.ndarray) -> Dataset:
        """A new Dataset holding the samples ``index`` (a slice keeps segment boundaries)."""
        if isinstance(index, slice):
            start, stop, step = index.indices(self.num_samples)
            if step != 1:
                raise DatasetError("Dataset.select: only contiguous slices keep segment boundaries")
            starts = self.segment_starts[(self.segment_starts > start) & (self.segment_starts < stop)] - start
            starts = np.concatenate([[0], starts])
        else:
            starts = np.zeros(1, dtype=np.int64)
        kwargs = {
            name: (None if getattr(self, name) is None else getattr(self, name)[index])
            for name in ("t", "q", "dq", "tau", *JOINT_SIGNALS, "wrench")
        }
        return replace(self, segment_starts=starts, **kwargs)

    def summary(self) -> dict[str, object]:
        """Numbers for ``idyn dataset info`` (JSON-serialisable)."""
        segs = self.segments()
        gaps = [
            {"at_s": float(self.t[s.start]), "length_s": float(self.t[s.start] - self.t[s.start - 1])} for s in segs[1:]
        ]
        return {
            "source": self.source,
            "robot": self.robot,
            "samples": self.num_samples,
            "joints": list(self.joint_names),
            "rate_hz": self.rate_hz,
            "duration_s": self.duration,
            "segments": len(segs),
            "gaps": gaps,
            "effort_kind": self.effort_kind,
            "q_min": self.q.min(axis=0).tolist() if self.num_samples else [],
            "q_max": self.q.max(axis=0).tolist() if self.num_samples else [],
            "dq_absmax": np.abs(self.dq).max(axis=0).tolist() if self.num_samples else [],
            "tau_std": self.tau.std(axis=0).tolist() if self.num_samples else [],
            "optional": [k for k in (*JOINT_SIGNALS, "wrench") if getattr(self, k) is not None],
            "notes": list(self.notes),
        }

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write the ``.npz`` contract (uncompressed, so loading is fast) atomically. Returns the path.

        A dataset with fewer than 2 samples (no rate) is refused: every reader needs a sample rate.
        """
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(".npz")
        rate = self.rate_hz
        if self.num_samples < 2 or not (np.isfinite(rate) and rate > 0):
            raise DatasetError(
                f"refusing to write {path}: dataset {self.source!r} has {self.num_samples} sample(s) at {rate} Hz; "
                "a dataset needs at least 2 samples on a finite, positive rate"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {
            "t": self.t,
            "q": self.q,
            "dq": self.dq,
            "tau": self.tau,
            "joint_names": np.array(self.joint_names, dtype=str),
            "robot": np.array(self.robot),
            "effort_kind": np.array(self.effort_kind),
            "source": np.array(self.source),
            "segment_starts": self.segment_starts,
            "notes": np.array(self.notes, dtype=str),
        }
        for name in (*JOINT_SIGNALS, "wrench"):
            value = getattr(self, name)
            if value is not None:
                arrays[name] = value
        with atomic_writer(path) as f:
            np.savez(f, **arrays)
        return path

    @classmethod
    def from_npz_arrays(cls, data: dict[str, np.ndarray], source: str) -> Dataset:
        """Build from the arrays of a contract ``.npz`` (keys as written by :meth:`save`)."""

        def text(key: str, default: str) -> str:
            return str(data[key].item()) if key in data else default

        kwargs = {k: data[k] for k in (*JOINT_SIGNALS, "wrench") if k in data}
        return cls(
            t=data["t"],
            q=data["q"],
            dq=data["dq"],
            tau=data["tau"],
            joint_names=tuple(str(x) for x in data["joint_names"]),
            robot=text("robot", ""),
            effort_kind=text("effort_kind", "torque"),
            source=text("source", source),
            segment_starts=data.get("segment_starts", np.zeros(1, dtype=np.int64)),
            notes=tuple(str(x) for x in data.get("notes", ())),
            **kwargs,
        )

    def reorder(self, joint_names: tuple[str, ...] | list[str]) -> Dataset:
        """The same data with joints in ``joint_names`` order (names must all be present)."""
        missing = [j for j in joint_names if j not in self.joint_names]
        if len(missing) == len(joint_names) > 1:  # not one joint in common: another arm, not a naming issue
            label = f" (labelled for robot {self.robot!r})" if self.robot else ""
            raise DatasetError(
                f"dataset {self.source!r}{label} has none of the joints {list(joint_names)} (it has "
                f"{list(self.joint_names)}): it looks like another robot's recording; pick that robot, or if it "
                "really is this arm under other names, rename them: "
                + option_hint("--joint-map", "old=new", keyword="joint_map=...")
            )
        if missing:
            raise DatasetError(f"dataset {self.source!r} lacks joints {missing} (it has {list(self.joint_names)}); "
                               + rename_hint(list(self.joint_names), list(joint_names)))
        idx = [self.joint_names.index(j) for j in joint_names]
        kwargs = {
            name: (None if getattr(self, name) is None else getattr(self, name)[:, idx])
            for name in ("q", "dq", "tau", *JOINT_SIGNALS)
        }
        return replace(self, joint_names=tuple(joint_names), **kwargs)


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """All arrays of an ``.npz``; a :class:`DatasetError` naming the file if it is empty, truncated or not an npz."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        raise DatasetError(f"{path}: empty file (0 bytes), not a readable .npz: the write that made it never finished")
    with path.open("rb") as f:
        head = f.read(4)
    if head[:2] != b"PK":  # an .npz is a zip archive
        raise DatasetError(f"{path}: not an npz (zip) file (first bytes {head!r}); expected a dataset .npz")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (EOFError, OSError, ValueError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        raise DatasetError(
            f"{path}: truncated or damaged .npz ({type(exc).__name__}: {exc}); the write that made it was "
            f"interrupted or the file is not an npz written by numpy: re-create it"
        ) from None


def load_dataset(
    path: str | Path,
    robot: str | None = None,
    joint_map: dict[str, str] | list[str] | str | None = None,
    **import_options: object,
) -> Dataset:
    """Load a dataset from anything: contract ``.npz``, foreign NPZ/CSV, rosbag2 folder, ``.db3``, ``.mcap``.

    Args:
        path: file or bag folder.
        robot: preset name (``panda``, ``iiwa14``, ``ur5``) or URDF path; joints are reordered to
            its order (None keeps the source's order).
        joint_map: renames applied before matching, ``{"fer_joint1": "panda_joint1"}`` or strings
            ``"old=new"`` / prefix form ``"fer_=panda_"``.
        import_options: passed to :func:`idyn_ros.data.importers.import_source` (``rate``,
            ``effort_kind``, ``recover``, ``topic``, ...).
    """
    from idyn_ros.data.importers import import_source

    dataset, _report = import_source(path, robot=robot, joint_map=joint_map, **import_options)
    return dataset
