"""ONNX export: one self-contained file per model (RBD + friction + residual + metadata).

Graph: inputs ``q, dq, ddq`` (1, n) float32 (+ ``h_in, c_in`` (1, 1, H) for LSTM models, + ``rd_in``
(1, 4, n), the state of the r feature (``zoo.rotational_displacement_step``), for hybrid-r / hybrid-j), outputs
``tau, tau_rbd, tau_friction, tau_residual`` (1, n) (+ ``tau_rbd_base_<b>`` for a model averaged over physics bases,
+ ``h_out, c_out`` [, ``rd_out``]). The RBD
part is ``idyn_ros.dynamics.torch_rnea.TorchRNEA`` with the identified parameters as constants
(DeLaN: its closed-form Euler-Lagrange torque, ``zoo.DeLaN.forward``); friction and the residual
network (with its input/output normalisation folded in) follow. The runtime may instead evaluate RBD
and friction from the metadata with pinocchio/numpy and run only the residual subgraph (see
idyn_ros.runtime).

Metadata: JSON in ``metadata_props["idyn"]`` (schema in :func:`build_metadata`) plus a checksum of the
whole file (``models.artifact``, format 2); the model id is the first 12 hex digits of the sha256 of
the serialized graph without metadata.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from idyn_ros.dynamics.friction import torch_friction_torque
from idyn_ros.models.artifact import FORMAT_VERSION, write_artifact
from idyn_ros.models.features import R_FEATURE_VERSION
from idyn_ros.models.zoo import TorqueModel, hold_velocity, rotational_displacement_step


class StepModule(nn.Module):
    """One control tick of a trained model, with explicit recurrent state (for ONNX)."""

    def __init__(self, model: TorqueModel, robot: Any) -> None:
        super().__init__()
        from idyn_ros.dynamics.torch_rnea import TorchRNEA

        cfg = model.cfg
        self.cfg, self.n = cfg, model.n
        self.rnea = None
        if model.inertial is not None:
            with torch.no_grad():
                pi = model.pi().double().numpy()
            self.rnea = TorchRNEA(robot, torch.float32, pi=pi, learn_parameters=False)
        # a model averaged over physics bases (TorqueModel.average_over_bases): each base's tau_RBD feeds its member
        self.base_rneas = nn.ModuleList()
        if cfg.bases > 1:
            with torch.no_grad():
                for b in range(cfg.bases):
                    self.base_rneas.append(TorchRNEA(robot, torch.float32, pi=model.base_pi[b].reshape(model.n, 10)
                                                     .numpy(), learn_parameters=False))
                self.register_buffer("base_ia", model.base_ia.detach().float().clone())
        with torch.no_grad():
            self.register_buffer("ia", model.armature().float().clone())  # (n,) kg m^2, tau_rbd += Ia ddq
        self.register_buffer("fric", model.friction.detach().float().clone())
        self.register_buffer("dq_hold", model.dq_hold.detach().float().clone())  # TorqueModel.set_velocity_hold
        self.delan = model.delan  # DeLaN: closed-form Euler-Lagrange torque (zoo.DeLaN.forward), no autograd
        self.residual = model.residual
        self.norm = model.norm
        self.with_r = cfg.uses_r
        self.with_tau_rbd = cfg.residual_sees_tau_rbd and not self.with_r  # delan-lstm: tau_DeLaN is an input

    def forward(self, q: torch.Tensor, dq: torch.Tensor, ddq: torch.Tensor, *state: torch.Tensor) -> Any:
        tau_rbd = self.rnea(q, dq, ddq) + self.ia * ddq if self.rnea is not None else torch.zeros_like(q)
        if self.delan is not None:
            tau_rbd = self.delan(q, dq, ddq)
        dq_fit = hold_velocity(dq, self.dq_hold)
        if self.fric.numel():
            tau_f = torch_friction_torque(dq_fit, self.fric, self.cfg.friction_kinds)
        else:
            tau_f = torch.zeros_like(q)
        if self.residual is None:
            tau_res = torch.zeros_like(q)
            return tau_rbd + tau_f + tau_res, tau_rbd, tau_f, tau_res
        feats = [q, dq_fit, ddq]
        r_out = None
        bases = [rnea(q, dq, ddq) + self.base_ia[b] * ddq for b, rnea in enumerate(self.base_rneas)]
        if self.with_r:
            r, r_out = rotational_displacement_step(q, state[-1])  # rd_in is the last state input
            feats += [*(bases or [tau_rbd]), r]
        elif self.with_tau_rbd:
            feats.append(tau_rbd)
        x = (torch.cat(feats, -1) - self.norm.x_mean) / self.norm.x_std  # (1, F)
        if self.residual.hidden:
            y, (h, c) = self.residual(x[:, None, :], (state[0], state[1]))  # LSTM, one step
            tau_res = y[:, 0] * self.norm.y_scale
            outs = (tau_rbd + tau_f + tau_res, tau_rbd, tau_f, tau_res, h, c)
            return (*outs, r_out) if r_out is not None else outs
        y, _ = self.residual(x)
        tau_res = y * self.norm.y_scale
        outs = (tau_rbd + tau_f + tau_res, tau_rbd, tau_f, tau_res, *bases)
        return (*outs, r_out) if r_out is not None else outs


def io_names(model: TorqueModel) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """Input names, output names and recurrent-state descriptions for a model."""
    inputs, outputs = ["q", "dq", "ddq"], ["tau", "tau_rbd", "tau_friction", "tau_residual"]
    outputs += [f"tau_rbd_base_{b}" for b in range(model.cfg.bases if model.cfg.bases > 1 else 0)]
    state: list[dict[str, Any]] = []
    if model.residual is not None and model.state_size:
        H = model.state_size
        state = [{"input": "h_in", "output": "h_out", "shape": [1, 1, H]},
                 {"input": "c_in", "output": "c_out", "shape": [1, 1, H]}]
    if model.residual is not None and model.cfg.uses_r:
        state.append({"input": "rd_in", "output": "rd_out", "shape": [1, 4, model.n]})
    inputs += [s["input"] for s in state]
    outputs += [s["output"] for s in state]
    return inputs, outputs, state


def build_metadata(
    model: TorqueModel,
    robot: Any,
    fingerprint: str = "",
    test_metrics: dict[str, Any] | None = None,
    tau_range: tuple[np.ndarray, np.ndarray] | None = None,
    dq_abs_max: np.ndarray | None = None,
) -> dict[str, Any]:
    """The JSON metadata stored in the artifact (see module docstring). ``fit_dq_abs_max`` is the model's own velocity
    hold when it has one; ``dq_abs_max`` (``training.velocity_range``) is recorded only for models without one."""
    inputs, outputs, state = io_names(model)
    hold = model.dq_hold.detach().double().numpy()
    if np.all(np.isfinite(hold)):  # the model's own hold (TorqueModel.set_velocity_hold) is what its graph does
        dq_abs_max = hold
    with torch.no_grad():
        pi = model.pi().double().numpy().tolist() if model.inertial is not None else None
        armature = model.armature().double().numpy().tolist() if model.inertial is not None else None
    return {
        "format_version": FORMAT_VERSION,
        "model_kind": model.cfg.kind,
        "mode": model.cfg.mode,
        "robot": robot.name,
        "joint_names": list(robot.joint_names),
        "rate_hz": model.cfg.rate_hz,
        "inputs": inputs,
        "outputs": outputs,
        "state": state,
        "normalisation": model.norm.to_dict(),
        "tau_min": None if tau_range is None else np.asarray(tau_range[0]).tolist(),
        "tau_max": None if tau_range is None else np.asarray(tau_range[1]).tolist(),
        "fit_dq_abs_max": None if dq_abs_max is None else np.asarray(dq_abs_max, dtype=np.float64).tolist(),
        "parameters": {
            "inertial": pi,  # (n, 10) pinocchio order [m, mc, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] about joint origin
            "armature": armature,  # (n,) kg m^2 reflected rotor inertia (tau_j += Ia_j ddq_j, M_jj += Ia_j) or None
            "friction_kinds": list(model.cfg.friction_kinds) if model.friction.numel() else [],
            "friction": model.friction.detach().double().numpy().tolist(),
            # averaged over physics bases: each base's inertial (n, 10) and armature (n,); the graph's residual takes
            # their RBD torques as inputs tau_rbd_base_<b> (the runtime's split path computes them with pinocchio)
            "bases": None if model.cfg.bases == 1 else [
                {"inertial": model.base_pi[b].reshape(model.n, 10).tolist(), "armature": model.base_ia[b].tolist()}
                for b in range(model.cfg.bases)],
        },
        "urdf": robot.urdf_xml,
        "training_data_sha256": fingerprint,
        "r_feature_version": R_FEATURE_VERSION if model.cfg.uses_r else None,
        "metrics": test_metrics or {},
        "config": model.cfg.to_dict(),
    }


def export_onnx(model: TorqueModel, robot: Any, path: str | Path, metadata: dict[str, Any],
                opset: int = 17) -> str:
    """Write ``path`` (.onnx) with the step graph and metadata; returns the model id."""
    import onnx

    step = StepModule(model, robot).eval()
    n = model.n
    inputs, outputs, state = io_names(model)
    args = [torch.zeros(1, n) for _ in range(3)] + [torch.zeros(*s["shape"]) for s in state]
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about python ifs on fixed shapes: expected here
        torch.onnx.export(step, tuple(args), buf, input_names=inputs, output_names=outputs,
                          opset_version=opset, do_constant_folding=True, dynamo=False)
    proto = onnx.load_from_string(buf.getvalue())
    model_id = hashlib.sha256(proto.SerializeToString()).hexdigest()[:12]
    proto.producer_name = "idyn_ros"
    write_artifact(proto, dict(metadata, model_id=model_id), path)
    return model_id
