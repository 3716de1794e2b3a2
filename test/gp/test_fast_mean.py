"""The precomputed fast posterior mean (fast_mean.py) and its ONNX export equal the direct posterior mean
K(x*, X) alpha, for revolute and prismatic joints and hyperparameters away from 1."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from idyn_ros.models.gp.fast_mean import LIPFastMean
from idyn_ros.models.gp.lip import LIPKernel


def _random_kernel(n: int, prismatic: list[bool], seed: int) -> LIPKernel:
    k = LIPKernel(n, prismatic)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in k.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return k


@pytest.mark.parametrize(("n", "prismatic"), [(1, [False]), (1, [True]), (2, [False, True]), (3, [False] * 3),
                                              (4, [False, True, False, False])])
def test_fast_mean_equals_block_contraction(n: int, prismatic: list[bool]) -> None:
    k = _random_kernel(n, prismatic, seed=n)
    g = torch.Generator().manual_seed(10 + n)
    X, xs = torch.randn(30, 3 * n, generator=g, dtype=torch.float64), torch.randn(5, 3 * n, generator=g,
                                                                                   dtype=torch.float64)
    alpha = torch.randn(30, n, generator=g, dtype=torch.float64)
    with torch.no_grad():
        direct = torch.einsum("snij,nj->si", k(xs, X), alpha)
        fast = LIPFastMean(k, X, alpha)(xs)
        ref = k.contracted_mean_reference(xs, X, alpha)
    scale = float(direct.abs().max())
    assert torch.allclose(fast, direct, rtol=0, atol=1e-10 * scale)
    assert torch.allclose(ref, direct, rtol=0, atol=1e-10 * scale)
    assert torch.allclose(k.contracted_mean(xs, X, alpha, chunk=2), fast, rtol=0, atol=1e-12 * scale)


def test_exported_fast_graph_matches_posterior_7dof(tmp_path) -> None:
    """7 DoF, N = 60 conditioned on synthetic Panda data, hyperparameters perturbed (log +- ~1)."""
    ort = pytest.importorskip("onnxruntime")
    from idyn_ros.models.gp.export import export_onnx
    from idyn_ros.models.gp.gp import stack_inputs
    from idyn_ros.models.gp.synthetic import make_set
    from idyn_ros.models.gp.train import make_gp

    tr = make_set(7, 7, n_samples=60)
    X, Y = stack_inputs(tr.q, tr.dq, tr.ddq), torch.as_tensor(tr.tau_noisy)
    gp = make_gp("lip-gp", 7, X, Y, noise_init_ratio=1e-2, shared_noise=True)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in gp.kernel.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    gp.fit(X, Y, method="none")
    te = make_set(8, 7, n_samples=4)
    xs = stack_inputs(te.q, te.dq, te.ddq)
    with torch.no_grad():
        direct = gp.predict(xs)[0]
        fast = gp.kernel.contracted_mean(xs, gp.X, gp.alpha)
    assert float((fast - direct).abs().max() / direct.abs().max()) < 1e-6
    meta = {"model_kind": "lip-gp", "robot": "panda", "joint_names": [f"j{i}" for i in range(7)],
            "sample_rate_hz": 10.0}
    path = export_onnx(gp, tmp_path / "fast.onnx", meta, form="fast")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for k in range(4):
        feeds = {"q": te.q[k : k + 1].astype(np.float32), "dq": te.dq[k : k + 1].astype(np.float32),
                 "ddq": te.ddq[k : k + 1].astype(np.float32)}
        tau, rbd = sess.run(["tau", "tau_rbd"], feeds)
        ref = gp.predict(stack_inputs(*(feeds[n].astype(np.float64) for n in ("q", "dq", "ddq"))))[0].numpy()
        assert np.allclose(tau, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
        assert np.array_equal(tau, rbd)
