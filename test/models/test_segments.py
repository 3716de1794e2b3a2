"""Recordings with gaps (segments): what the models layer derives from them stays inside each segment."""

from __future__ import annotations

import dataclasses

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


# 0.5 s and 1 s gaps in a 12 s recording at 200 Hz; and with a segment of one sample and one of two
GAPPED = ((0, 700), (800, 1500), (1700, 2400))
WITH_SHORT = ((0, 500), (600, 601), (700, 1200), (1400, 1402), (1500, 2000))


def _save_gapped(rec, iiwa, path, pieces):
    """``rec`` with the samples between ``pieces`` (index ranges) cut out, saved as a dataset with those gaps."""
    keep = np.concatenate([np.arange(a, b) for a, b in pieces])
    starts = np.cumsum([0, *(b - a for a, b in pieces[:-1])])
    Dataset(t=rec.t[keep], q=rec.q[keep], dq=rec.dq[keep], tau=rec.tau[keep], joint_names=iiwa.joint_names,
            segment_starts=starts).save(path)
    return path


def test_a_file_with_gaps_loads_as_one_recording_per_segment(iiwa, synth, tmp_path):
    """Everything downstream takes a Recording as one trajectory: a gapped file loaded as one ran training windows,
    recurrent state and Callar's r across its gaps. Each segment is now a recording naming its file and stretch, said
    once; a one-sample segment is dropped; an ungapped file is the one recording it was."""
    from idyn_ros.models.sources import load_recordings

    rec = synth[0]
    path = _save_gapped(rec, iiwa, tmp_path / "gapped.npz", WITH_SHORT)
    lines = []
    recs = load_recordings([path], iiwa, say=lines.append)
    kept = [(a, b) for a, b in WITH_SHORT if b - a > 1]
    assert [r.n_samples for r in recs] == [b - a for a, b in kept]
    for r, (a, b) in zip(recs, kept, strict=True):
        for field in ("t", "q", "dq", "tau"):
            np.testing.assert_array_equal(getattr(r, field), getattr(rec, field)[a:b])
    assert recs[1].source == f"{path} (segment 3 of 5, {rec.t[700]:.1f}-{rec.t[1199]:.1f} s)"
    assert recs[1].duration == rec.t[1199] - rec.t[700]  # not the file's span, gaps included
    assert len(lines) == 1 and "5 contiguous segments (gaps of up to 1 s)" in lines[0]
    assert "1 of a single sample dropped, the other 4 taken as separate recordings" in lines[0]
    whole = _save_gapped(rec, iiwa, tmp_path / "whole.npz", ((0, rec.n_samples),))
    lines.clear()
    (one,) = load_recordings([whole], iiwa, say=lines.append)
    assert one.source == str(whole) and one.n_samples == rec.n_samples and not lines


def test_a_file_whose_segments_are_all_single_samples_is_refused(iiwa, synth, tmp_path):
    import pytest

    from idyn_ros.errors import DatasetError
    from idyn_ros.models.sources import load_recordings

    path = _save_gapped(synth[0], iiwa, tmp_path / "strays.npz", ((0, 1), (100, 101), (200, 201)))
    with pytest.raises(DatasetError, match="all 3 segments between its gaps are single samples"):
        load_recordings([path], iiwa)


def test_training_windows_and_r_never_span_a_gap(iiwa, synth, tmp_path):
    """Training cuts windows out of each recording, and r (travel since the last reversal) runs over each: a window
    of a gapped file fed the samples on both sides of a gap as consecutive steps, and r after a gap carried on from
    the reversal before it."""
    import torch

    from idyn_ros.models.sources import load_recordings
    from idyn_ros.models.training import _windows, prepare
    from idyn_ros.models.zoo import rotational_displacement

    rec = synth[0]
    recs = load_recordings([_save_gapped(rec, iiwa, tmp_path / "gapped.npz", GAPPED)], iiwa)
    data = [prepare(iiwa.pin_model, r, False, need_r=True) for r in recs]
    windows = _windows(data, 100, 50)
    for i, s in windows:
        assert np.diff(recs[i].t[s:s + 100]).max() < 1.5 / 200.0
    assert len(windows) == 3 * 13
    alone = [rotational_displacement(torch.as_tensor(rec.q[a:b])[None])[0][0].float() for a, b in GAPPED]
    torch.testing.assert_close(torch.cat([d.r for d in data]), torch.cat(alone), rtol=0, atol=0)


def test_train_and_evaluate_on_a_file_with_gaps(iiwa, synth, tmp_path, capsys):
    """`idyn train` and `idyn evaluate` end to end: a model scored on a gapped file scores what it scores on its
    segments saved as separate files (the runtime's state reset at each gap); the lines read per file."""
    import json

    from idyn_ros.cli import main

    rec = synth[0]
    gapped = _save_gapped(rec, iiwa, tmp_path / "gapped.npz", GAPPED)
    pieces = [_save_gapped(rec, iiwa, tmp_path / f"piece{i}.npz", [p]) for i, p in enumerate(GAPPED)]
    out = tmp_path / "run"
    assert main(["train", "--robot", "iiwa14", "--data", str(gapped), "--model", "hybrid-r", "--mode", "2s",
                 "--id-method", "ols", "--allow-inconsistent", "--epochs", "2", "--hidden", "8", "--window", "50",
                 "--out", str(out), "--no-progress"]) == 0
    said = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert max(metrics["residual_gate"]) > 0  # else the residual, whose state the gaps reset, would not count

    def scores(paths):
        assert main(["evaluate", "--model", str(out), "--json", "--data", *map(str, paths)]) == 0
        return json.loads(capsys.readouterr().out)

    whole, apart = scores([gapped]), scores(pieces)
    np.testing.assert_allclose(whole["all"]["nmse"], apart["all"]["nmse"], rtol=1e-12)
    assert f"{gapped}: 3 contiguous segments (gaps of up to 1 s)" in said
    assert f"tail of {gapped} (segment 3 of 3, " in said  # the hold-out tail: 20 % of 2100 samples, in segment 3
    assert whole["files"][str(gapped)]["segments"] == 3 and whole["all"]["n_samples"] == 2100
    assert main(["evaluate", "--model", str(out), "--data", str(gapped)]) == 0
    assert "on 1 recording(s) (3 contiguous segments), 2100 samples" in capsys.readouterr().out


def test_identify_says_on_stderr_how_it_split_a_file_with_gaps(iiwa, synth, tmp_path, capsys):
    """`idyn identify` split a gapped file without a word (`idyn train` and `idyn evaluate` say it)."""
    from idyn_ros.cli import main

    gapped = _save_gapped(synth[0], iiwa, tmp_path / "gapped.npz", GAPPED)
    assert main(["identify", "--robot", "iiwa14", "--data", str(gapped), "--method", "sdp",
                 "--urdf-out", str(tmp_path / "id.urdf")]) == 0
    assert f"idyn identify: {gapped}: 3 contiguous segments" in capsys.readouterr().err


def test_a_segment_of_a_gapped_file_is_not_suggested_as_a_validation_file(synth):
    """The repeated-validation warning named "file.npz (segment 2 of 3, ...)" as something to pass to --val."""
    from idyn_ros.models.pipeline import _repeated_validation_warning, _validation_overlap

    a, b, _ = synth
    rerun = dataclasses.replace(a, q=a.q + 1e-4)
    seg = dataclasses.replace(b, source="/data/gapped.npz (segment 2 of 3, 4.0-9.0 s)", segment="2 of 3")
    overlap, spare = _validation_overlap([a, seg], [rerun])
    listed = {r["recording"]: r["whole_file"] for r in overlap["could_validate"]}
    assert listed[seg.source.rsplit("/", 1)[1]] is False and spare
    msg = _repeated_validation_warning(overlap["share"], overlap["could_validate"])
    assert "gapped.npz" not in msg, msg
    whole = dataclasses.replace(b, source="/data/other.npz")
    overlap, _ = _validation_overlap([a, whole], [rerun])
    assert "other.npz (0% covered)" in _repeated_validation_warning(overlap["share"], overlap["could_validate"])
