"""Recordings with gaps (segments): what the models layer derives from them stays inside each segment."""

from __future__ import annotations

import numpy as np

from idyn_ros.data.dataset import Dataset
from idyn_ros.models.sources import to_recording


def test_ddq_of_a_recording_with_gaps_is_derived_per_segment(iiwa, synth):
    """A recorder paused for 0.5 s while the arm moved: dq jumps across the gap. Filtered across it, ddq got spikes of
    4x the largest true acceleration next to every gap (rbd-friction on such data: val nMSE 6 % instead of 0.08 %)."""
    rec = synth[0]
    keep = np.concatenate([np.arange(a, a + 300) for a in range(0, rec.n_samples - 300, 400)])  # 1.5 s on, 0.5 off
    starts = np.concatenate([[0], np.flatnonzero(np.diff(keep) > 1) + 1])
    ds = Dataset(t=rec.t[keep], q=rec.q[keep], dq=rec.dq[keep], tau=rec.tau[keep], joint_names=iiwa.joint_names,
                 segment_starts=starts)
    gapped = to_recording(ds, iiwa).ddq
    pieces = [to_recording(ds.select(slice(a, b)), iiwa).ddq for a, b in zip(starts, [*starts[1:], len(keep)],
                                                                             strict=True)]
    np.testing.assert_allclose(gapped, np.concatenate(pieces), atol=1e-9)
    assert np.abs(gapped - rec.ddq[keep]).max() < 0.5 * np.abs(rec.ddq).max()


def test_a_recording_shorter_than_the_window_does_not_shorten_the_other_windows():
    """A batch takes its shortest window's length: one 0.2 s recording among 20 s of data cut every training window
    of its batch (here all of them) from 100 steps to 40."""
    from types import SimpleNamespace

    import torch

    from idyn_ros.models.training import _batch, _batches, _windows

    def rec(n):
        z = torch.zeros(n, 2)
        return SimpleNamespace(q=z, dq=z, ddq=z, tau=z, Y=None, r=None)

    data = [rec(4000), rec(40)]
    windows = _windows(data, 100, 100)
    order = np.random.default_rng(0).permutation(len(windows))
    batches = _batches(data, windows, order, 100, 64)
    assert sorted(w for b in batches for w in b) == sorted(windows)
    assert [_batch(data, b, 100)[0].shape[1] for b in batches] == [100, 40]
    alone = _windows(data[:1], 100, 100)  # no short recording: the batches of before, in the permutation's order
    order = np.random.default_rng(0).permutation(len(alone))
    assert _batches(data[:1], alone, order, 100, 16) == [[alone[i] for i in order[b:b + 16]]
                                                        for b in range(0, len(alone), 16)]
