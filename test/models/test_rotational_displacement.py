"""Callar's r: the numpy per-tick form (joint-state filter, buffer node) and the torch form (training,
exported graph) give the same r on the same trajectories; the definition's behaviour at reversals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from idyn_ros.control.state_estimation import JointStateFilter, RotationalDisplacement
from idyn_ros.models.features import R_DEADBAND, R_LIMIT
from idyn_ros.models.zoo import rotational_displacement, rotational_displacement_step


def numpy_r(q: np.ndarray) -> np.ndarray:
    rd = RotationalDisplacement(q.shape[1])
    return np.array([rd.update(row).copy() for row in q])


def torch_r(q: np.ndarray) -> np.ndarray:
    r, _ = rotational_displacement(torch.as_tensor(q, dtype=torch.float64)[None])
    return r[0].numpy()


def triangle(t: np.ndarray, amplitude: float, period: float) -> np.ndarray:
    return amplitude * (2 / np.pi) * np.arcsin(np.sin(2 * np.pi * t / period))


@pytest.fixture(scope="module")
def trajectories(synth) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    t = np.arange(0.0, 6.0, 1e-3)
    tri = np.stack([triangle(t, math.radians(a), p) for a, p in ((15, 2.0), (4, 1.3), (0.5, 0.7))], 1)
    noisy = tri.copy()
    noisy[:, 0] += rng.normal(0.0, 0.3 * R_DEADBAND, t.size)  # encoder noise: must not reset r
    noisy[:, 1] += rng.normal(0.0, 3.0 * R_DEADBAND, t.size)  # noise above the deadband: chatter at reversals
    noisy[:, 2] = np.round(noisy[:, 2] / 2e-5) * 2e-5  # quantised encoder
    hold = np.concatenate([np.zeros((500, 3)), tri[:3000], np.repeat(tri[2999:3000], 500, 0), tri[3000:]])
    return {"triangles (saturating and not)": tri, "noise near reversals": noisy, "start and stop": hold,
            "recorded-like Fourier excitation (7 joints)": synth[0].q}


def test_numpy_and_torch_r_agree_exactly(trajectories):
    for name, q in trajectories.items():
        a, b = numpy_r(q), torch_r(q)
        np.testing.assert_array_equal(a, b, err_msg=name)
        assert np.abs(a).max() <= R_LIMIT


def test_buffer_node_filter_publishes_the_training_r(iiwa, synth):
    """The joint-state filter (what idyn_ros/nodes/joint_state_buffer publishes) vs training's prepare()."""
    from idyn_ros.models.training import prepare

    rec = synth[0]
    trained_r = prepare(iiwa.pin_model, rec, need_y=False, need_r=True).r.numpy()
    f = JointStateFilter(iiwa.joint_names, rate_hz=rec.rate_hz, track_rotational_displacement=True)
    published = np.empty_like(rec.q)
    for k in range(rec.n_samples):
        assert f.update(iiwa.joint_names, rec.q[k], rec.dq[k], rec.tau[k], round(float(rec.t[k]) * 1e9)) == 0
        published[k] = f.estimate.r
    np.testing.assert_allclose(published, trained_r, rtol=0, atol=1e-6)  # float32 training tensors


def test_r_follows_the_definition():
    """Grows with travel, restarts at a reversal, ignores travel back within the deadband, saturates."""
    step = 0.002  # rad per tick
    q = np.concatenate([np.arange(0, 60) * step,  # forward 0.118 rad
                        0.118 - np.array([0.5, 0.8]) * R_DEADBAND,  # jitter back inside the deadband
                        0.118 - np.arange(1, 150) * step])  # reversal, then beyond 10 deg
    r = torch_r(q[:, None])[:, 0]
    np.testing.assert_allclose(r[:60], q[:60] - 0.0, atol=1e-15)
    assert r[61] == pytest.approx(0.118 - 0.8 * R_DEADBAND)  # still the forward travel: no reset
    k = 62  # first sample back by more than the deadband from the furthest point 0.118
    assert r[k] == pytest.approx(-step)
    assert r[-1] == pytest.approx(-R_LIMIT) and np.isclose(R_LIMIT, np.deg2rad(10.0))
    assert (r[:1] == 0).all()  # not moving yet


def test_step_state_starts_fresh_from_zeros():
    """All-zero state = no sample yet: what the runtime's reset() gives the exported graph."""
    q = torch.tensor([[0.7, -1.2]], dtype=torch.float64)
    r, state = rotational_displacement_step(q, torch.zeros(1, 4, 2, dtype=torch.float64))
    assert (r == 0).all() and (state[0, 0] == q[0]).all() and (state[0, 3] == 1).all()
    r, _ = rotational_displacement_step(q + 0.01, state)
    np.testing.assert_allclose(r.numpy(), [[0.01, 0.01]])


def test_the_sequence_form_is_the_step_form_stepped(trajectories):
    """Training computes r over whole recordings on floats (fast); the exported graph steps the tensor form: the same
    r and state to the bit, from a fresh start and from a state carried across a split."""
    for name, q in trajectories.items():
        q_t = torch.as_tensor(q, dtype=torch.float64)[None].repeat(2, 1, 1)
        q_t[1] = -q_t[1]  # two sequences in a batch, each its own state
        state = q_t.new_zeros(2, 4, q.shape[1])
        stepped = []
        for t in range(q_t.shape[1]):
            r_t, state = rotational_displacement_step(q_t[:, t], state)
            stepped.append(r_t)
        half = q_t.shape[1] // 2
        r1, carried = rotational_displacement(q_t[:, :half])
        r2, final = rotational_displacement(q_t[:, half:], carried)
        np.testing.assert_array_equal(torch.cat([r1, r2], 1).numpy(), torch.stack(stepped, 1).numpy(), err_msg=name)
        np.testing.assert_array_equal(final.numpy(), state.numpy(), err_msg=name)
