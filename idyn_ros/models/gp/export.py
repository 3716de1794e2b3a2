"""ONNX export of a trained GP's posterior mean (one .onnx, the model-artifact contract of docs/interfaces.md).

Inputs q, dq, ddq (1, n) float32; outputs tau, tau_rbd, tau_friction, tau_residual (1, n) float32.
The graph computes in float64 (the posterior mean sums N*n terms of either sign; float32 would lose
~1e-4 relative) and casts the result. Training inputs X and weights alpha are graph constants.

Output split (the mean is linear in the kernel, so it splits exactly):
- LIP: tau_rbd = energy (Lagrangian) part, tau_friction = linear friction-feature part, tau_residual =
  the SE part of the friction kernel (eq 34-35);
- SE, GIP (black-box, per joint): everything in tau_residual, tau_rbd = tau_friction = 0.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import torch

from idyn_ros.errors import ModelArtifactError
from idyn_ros.models.artifact import FORMAT_VERSION, write_artifact
from idyn_ros.models.gp.baselines import COULOMB_EPS, FrictionKernel, LSEKernel
from idyn_ros.models.gp.fast_mean import LIPFastMean
from idyn_ros.models.gp.gp import GPInverseDynamics
from idyn_ros.models.gp.lip import LIPKernel

OUTPUTS = ["tau", "tau_rbd", "tau_friction", "tau_residual"]
INPUTS = ["q", "dq", "ddq"]


class PosteriorMean(torch.nn.Module):
    """tau^(x*) = K(x*, X) alpha for one query, split into parts; exportable with the TorchScript exporter."""

    def __init__(self, gp: GPInverseDynamics, form: str = "fast"):
        super().__init__()
        if form not in ("fast", "direct"):
            raise ModelArtifactError(f"unknown GP export form '{form}'; use 'fast' or 'direct'")
        self.form = form
        if isinstance(gp.kernel, LSEKernel):
            raise ModelArtifactError("the LSE baseline uses autodiff kernels that do not export to ONNX; "
                                     "export a lip-gp, se-gp or gip-gp model instead")
        if gp.X is None:
            raise ModelArtifactError("the GP has not been conditioned on data; train it before export")
        self.gp = gp
        self.n = gp.n
        self.register_buffer("X", gp.X.detach().clone())
        self.register_buffer("alpha", gp.alpha.detach().clone())
        # fast form: every training-only quantity precomputed as graph constants (fast_mean.py)
        self.fast = None
        if gp.multi_output and form == "fast" and isinstance(gp.kernel, LIPKernel):
            self.fast = LIPFastMean(gp.kernel, self.X, self.alpha)

    def forward(self, q: torch.Tensor, dq: torch.Tensor, ddq: torch.Tensor):
        x = torch.cat([q, dq, ddq], dim=-1).to(torch.float64)  # (1, 3n)
        gp, zero = self.gp, torch.zeros_like(x[:, : self.n])
        if self.fast is not None:
            rbd = self.fast(x)  # exact, O(N n^2) (fast_mean.py)
            resid = zero
        elif gp.multi_output:
            K = gp.kernel.blocks(x[:, None, :], self.X[None, :, :])  # (1, N, n, n)
            rbd = torch.einsum("snij,nj->si", K, self.alpha)
            resid = zero
        else:
            rbd = zero
            resid = torch.einsum("isn,ni->si", gp.kernel(x, self.X), self.alpha)
        fric = zero
        fk = gp.friction
        if isinstance(fk, FrictionKernel):
            v1, c1 = x[:, self.n : 2 * self.n], torch.tanh(x[:, self.n : 2 * self.n] / COULOMB_EPS)
            v2, c2 = self.X[:, self.n : 2 * self.n], torch.tanh(self.X[:, self.n : 2 * self.n] / COULOMB_EPS)
            fric = fk.log_fv.exp() * v1 * (v2 * self.alpha).sum(0) + fk.log_fc.exp() * c1 * (c2 * self.alpha).sum(0)
            if fk.se is not None:
                resid = resid + torch.einsum("isn,ni->si", fk.se(x, self.X), self.alpha)
        tau = rbd + fric + resid
        f32 = torch.float32
        return tau.to(f32), rbd.to(f32), fric.to(f32), resid.to(f32)


def export_onnx(gp: GPInverseDynamics, path: str | Path, metadata: dict[str, Any], form: str = "fast") -> Path:
    """Write the posterior mean as ONNX with ``metadata_props["idyn"]`` = JSON(metadata + contract keys).

    Args:
        metadata: must hold at least ``model_kind``, ``robot``, ``joint_names``, ``sample_rate_hz``.
        form: "fast" (LIP: alpha-contracted mean, O(N n^2)) or "direct" (K(x*, X) alpha, O(N n^3)).
    """
    import onnx

    missing = [k for k in ("model_kind", "robot", "joint_names", "sample_rate_hz") if k not in metadata]
    if missing:
        raise ModelArtifactError(f"ONNX metadata lacks {missing}; pass them to export_onnx")
    path = Path(path)
    module = PosteriorMean(gp, form).eval()
    z = torch.zeros(1, gp.n, dtype=torch.float32)
    import warnings

    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (z, z, z), buf, input_names=INPUTS, output_names=OUTPUTS,
                          dynamo=False, opset_version=17, do_constant_folding=True)
    model = onnx.load_from_string(buf.getvalue())
    meta = {"format_version": FORMAT_VERSION, "inputs": INPUTS, "outputs": OUTPUTS, "mode": "gp",
            "state": [], "parameters": {"inertial": None, "friction_kinds": [], "friction": None},
            "rate_hz": metadata.get("sample_rate_hz"), "gp_form": form, "n_train": int(gp.X.shape[0]),
            **metadata}
    write_artifact(model, meta, path)
    return path
