"""Gaussian-process inverse dynamics with the Lagrangian-inspired polynomial (LIP) kernel
(Giacomuzzo et al.; studies/gp_lip/README.md holds the evidence behind its settings).

Giacomuzzo et al., T-RO: GP priors on kinetic and potential energy, pushed through the Euler-Lagrange
operator to a multi-output torque kernel; baselines SE, GIP, LSE; physical read-outs; an ONNX export
for the 1 kHz runtime. Training needs torch (float64); nothing here is imported by the runtime.
"""

from __future__ import annotations

GP_KINDS = ("lip-gp", "se-gp", "gip-gp", "lse-gp")

__all__ = ["GP_KINDS", "train_gp"]


def train_gp(*args, **kwargs):
    """See :func:`idyn_ros.models.gp.train.train_gp`."""
    from idyn_ros.models.gp.train import train_gp as _train_gp

    return _train_gp(*args, **kwargs)
