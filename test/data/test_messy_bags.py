"""Messy but real-world bags: clocks that step or stall, compressed or damaged storage, odd joint-state messages.

Each bag is small and written here with the project's BagWriter or rosbags' Writer (as rosbag2 would write it).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from idyn_ros.data.importers import import_source
from idyn_ros.errors import BagReadError

from .helpers import write_joint_state_bag


def import_quietly(path: Path, **options):
    """import_source with the reader's BagWarnings silenced (the report keeps them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return import_source(path, robot="panda", **options)


# ---------------------------------------------------------------- sqlite recovery
@pytest.fixture(scope="module")
def deep_db3(tmp_path_factory) -> tuple[Path, np.ndarray]:
    """A 6000-message .db3 (2.6 MB): big enough that sqlite's messages table has an interior level whose root
    entries sit near the end of the file. Returns (bag folder, q)."""
    folder = tmp_path_factory.mktemp("deep") / "bag"
    _stamps, q, _dq, _tau = write_joint_state_bag(folder, storage="sqlite3", n_samples=6000)
    return folder, q


@pytest.mark.parametrize("fraction", [0.1, 0.5])
def test_a_cut_db3_recovers_the_rows_before_the_cut(deep_db3, tmp_path: Path, fraction: float) -> None:
    folder, q = deep_db3
    db3 = next(folder.glob("*.db3"))
    data = db3.read_bytes()
    (tmp_path / "metadata.yaml").write_bytes((folder / "metadata.yaml").read_bytes())
    (tmp_path / db3.name).write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(BagReadError, match="recover"):
        import_source(tmp_path, robot="panda")
    ds, report = import_quietly(tmp_path, recover=True)
    assert len(ds) > 0.8 * fraction * 6000  # a 10 % cut holds about 530 whole rows
    np.testing.assert_array_equal(ds.q, q[: len(ds)])
    assert any("read from the data pages past the damaged index" in w for w in report.warnings)
