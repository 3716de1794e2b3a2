"""Differentiable, ONNX-exportable recursive Newton-Euler for serial chains, vectorised over joints.

Why: the hybrid model (Reuss et al. 2022 Eq. 11) trains the inertial parameters end to end, so the
RBD term must be a torch function of them, and the exported artifact must evaluate it inside one
ONNX graph within the 1 kHz budget. A per-joint Python loop exports to ~3,400 ONNX nodes (~360 us in
ONNX Runtime at batch 1, notes/ros2-wheels.md), so this module writes RNEA without a joint loop,
with 6x6 spatial matrices (Featherstone) so that every step is a batched matmul:

1. joint transforms of all joints at once as 6x6 motion transforms (adjoints),
   ``X_{i-1,i}(q) = C0_i + sin(q_i) C1_i - cos(q_i) C2_i + q_i C3_i``: Rodrigues' formula for revolute
   joints, a translation for prismatic ones, the fixed parent->joint placement (including merged
   fixed joints) folded into the constants;
2. world transforms ``X_0i = X_01 ... X_{i-1,i}`` by a log-depth (Hillis-Steele) scan: ceil(log2 n) matmuls;
3. everything else with spatial vectors in the world frame (at the world origin), where the
   recursions become cumulative sums over joints (no joint loop, no pair masks needed):
   ``v_i = sum_{j<=i} S_j dq_j``,  ``a_i = a_g + sum_{j<=i} (S_j ddq_j + v_j x S_j dq_j)``
   (``dS_j/dt = v_j x S_j`` for an axis fixed in body j), body force ``f_i = I_i a_i + v_i x* I_i v_i``
   evaluated in body i's frame where I_i is constant, ``tau_i = S_i . sum_{k>=i} f_k``.
   Cross-product matrices ``crm(v)`` are built as ``v^T G`` with a constant (6, 36) tensor G.

Spatial vectors are 6-columns ``[linear; angular]`` (pinocchio order). Inertial parameters are an
(n, 10) tensor in pinocchio order ``[m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` (first moment and
inertia about the joint-frame origin), so ``TorchRNEA`` and ``RobotModel.regressor`` share parameters.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
import torch
from torch import nn

from idyn_ros.dynamics.inertia import skew
from idyn_ros.dynamics.model import RobotModel
from idyn_ros.errors import RobotDescriptionError

__all__ = ["TorchRNEA", "constant_inertia", "export_onnx", "onnx_node_count"]


def _crm(v: np.ndarray) -> np.ndarray:
    """6x6 motion cross-product matrix: crm(v) m = v x m = [w x m_lin + v_lin x m_ang; w x m_ang]."""
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = skew(v[3:])
    out[:3, 3:] = skew(v[:3])
    return out


def _adjoint(T: np.ndarray) -> np.ndarray:
    """6x6 motion transform [[R, [p] R], [0, R]] of a 4x4 pose (local -> parent, linear first)."""
    R, p = T[:3, :3], T[:3, 3]
    X = np.zeros((6, 6))
    X[:3, :3] = X[3:, 3:] = R
    X[:3, 3:] = skew(p) @ R
    return X


def _spatial_inertia_map() -> np.ndarray:
    """(10, 36) linear map from a pinocchio 10-vector to the flattened 6x6 spatial inertia about the origin.

    I6 = [[m 1, -[h]], [[h], L]] so that I6 [v; w] = [m v - h x w; h x v + L w].
    """
    B = np.zeros((10, 36))
    for k in range(10):
        e = np.zeros(10)
        e[k] = 1.0
        m, h = e[0], e[1:4]
        L = e[[4, 5, 7, 5, 6, 8, 7, 8, 9]].reshape(3, 3)
        I6 = np.zeros((6, 6))
        I6[:3, :3] = m * np.eye(3)
        I6[:3, 3:] = -skew(h)
        I6[3:, :3] = skew(h)
        I6[3:, 3:] = L
        B[k] = I6.ravel()
    return B


# crm(v) = sum_j v_j CRM_BASIS[j]; crf(v) = -crm(v)^T (force cross product v x* f)
CRM_BASIS = np.stack([_crm(np.eye(6)[j]) for j in range(6)])  # (6, 6, 6)
CRF_BASIS = -np.swapaxes(CRM_BASIS, 1, 2)
_SWAP = [3, 4, 5, 0, 1, 2]  # Ad(T)^-1 = P Ad(T)^T P with P swapping the linear and angular blocks


def _serial_chain(robot: RobotModel) -> tuple[np.ndarray, np.ndarray]:
    """Constants of the chain: C (4, n, 6, 6) of the joint transforms and S (n, 6, 1) local axes."""
    pm = robot.pin_model
    n = robot.n
    parents = list(pm.parents)[1:]
    if parents != list(range(n)):
        raise RobotDescriptionError(
            f"TorchRNEA needs a serial chain (joint k's parent is joint k-1); '{robot.name}' has parents "
            f"{parents}. Lock the branch joints with RobotModel.from_urdf(..., joints=[...])"
        )
    data = pm.createData()
    pin.computeJointJacobians(pm, data, pin.neutral(pm))
    C = np.zeros((4, n, 6, 6))
    S = np.zeros((n, 6, 1))
    for k in range(n):
        jid = k + 1
        s6 = pin.getJointJacobian(pm, data, jid, pin.ReferenceFrame.LOCAL)[:, k]  # joint motion subspace
        lin, ang = s6[:3], s6[3:]
        XM = _adjoint(pm.jointPlacements[jid].homogeneous)
        K6, P6 = np.zeros((6, 6)), np.zeros((6, 6))
        if np.linalg.norm(ang) > 0.5:  # revolute about unit axis `ang` through the joint origin
            if np.linalg.norm(lin) > 1e-12:
                raise RobotDescriptionError(f"joint {pm.names[jid]}: revolute axis off the joint origin")
            K6[:3, :3] = K6[3:, 3:] = skew(ang)
        else:  # prismatic along unit axis `lin`: Ad(translation a q) = [[1, q [a]], [0, 1]]
            P6[:3, 3:] = skew(lin)
        # Ad(E(q)) = 1 + sin q K + (1 - cos q) K^2 + q P  (Rodrigues per 3x3 block; 1 + K^2 merged into C0)
        K2 = K6 @ K6
        C[0, k] = XM @ (np.eye(6) + K2)
        C[1, k] = XM @ K6
        C[2, k] = XM @ K2
        C[3, k] = XM @ P6
        S[k, :, 0] = s6
    return C, S


class TorchRNEA(nn.Module):
    """Batched inverse dynamics tau(q, dq, ddq) for a serial chain, differentiable in the parameters.

    Args:
        robot: the RobotModel (serial chain; its gravity and joint placements are copied).
        dtype: torch.float64 (training, parity tests) or torch.float32 (export).
        pi: initial (n, 10) inertial parameters (default: the robot's URDF values).
        learn_parameters: hold ``pi`` as an ``nn.Parameter`` (True) or a buffer (False, constants in ONNX).
    """

    def __init__(
        self,
        robot: RobotModel,
        dtype: torch.dtype = torch.float64,
        pi: Any = None,
        learn_parameters: bool = False,
    ) -> None:
        super().__init__()
        C, S = _serial_chain(robot)
        self.n = robot.n
        self.joint_names = robot.joint_names
        self.has_prismatic = bool(np.any(C[3]))

        def buf(name: str, x: Any) -> None:
            self.register_buffer(name, torch.as_tensor(np.asarray(x), dtype=dtype), persistent=False)

        buf("C0", C[0])
        buf("C1", C[1])
        buf("C2", C[2])
        buf("C3", C[3])
        buf("S_local", S)  # (n, 6, 1)
        # crm(v).ravel() = v^T G_crm (a row-vector GEMM: much faster in eager than a broadcast matmul)
        buf("G_crm", CRM_BASIS.reshape(6, 36))
        buf("G_crf", CRF_BASIS.reshape(6, 36))
        buf("I_map", _spatial_inertia_map())  # (10, 36)
        # world-origin spatial acceleration of the base: a_0 = -g (gravity as a fictitious acceleration)
        buf("a_grav", np.concatenate([-np.asarray(robot.pin_model.gravity.linear), np.zeros(3)])[:, None])
        pi0 = robot.inertial_parameters() if pi is None else np.asarray(pi, dtype=np.float64).reshape(self.n, 10)
        pi_t = torch.as_tensor(pi0, dtype=dtype)
        if learn_parameters:
            self.pi = nn.Parameter(pi_t)
        else:
            self.register_buffer("pi", pi_t)
        self._export_inertia: torch.Tensor | None = None  # set by export_onnx: I6 as a graph constant

    def transforms(self, q: torch.Tensor) -> torch.Tensor:
        """World motion transforms X_0i (B, n, 6, 6) of all joint frames (log-depth scan)."""
        qq = q.reshape(-1, self.n, 1, 1)  # (B, n, 1, 1); one Reshape node instead of two Unsqueeze
        X = self.C0 + torch.sin(qq) * self.C1 - torch.cos(qq) * self.C2
        if self.has_prismatic:
            X = X + qq * self.C3
        n, shift = self.n, 1
        while shift < n:  # Hillis-Steele inclusive scan: X[i] <- X[i - shift] @ X[i]
            X = torch.cat([X[:, :shift], torch.matmul(X[:, : n - shift], X[:, shift:])], dim=1)
            shift *= 2
        return X

    def spatial_inertia(self, pi: torch.Tensor | None = None) -> torch.Tensor:
        """(n, 6, 6) spatial inertias about the joint-frame origins from ``pi`` (default ``self.pi``)."""
        pi = self.pi if pi is None else pi
        return torch.matmul(pi, self.I_map).reshape(self.n, 6, 6)

    def _kinematics(
        self, q: torch.Tensor, dq: torch.Tensor, ddq: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """World joint axes S (B, n, 6, 1), world->body transforms X^-1 (B, n, 6, 6), body (v, a) (B, n, 6, 2)."""
        n = self.n
        X = self.transforms(q)  # (B, n, 6, 6) local -> world motion transforms
        S = torch.matmul(X, self.S_local)  # (B, n, 6, 1) world joint axes
        Sd = S * dq.reshape(-1, n, 1, 1)
        V = torch.cumsum(Sd, dim=1)  # body spatial velocities (world)
        crm_V = torch.matmul(V.transpose(-1, -2), self.G_crm).reshape(-1, n, 6, 6)
        A = torch.cumsum(S * ddq.reshape(-1, n, 1, 1) + torch.matmul(crm_V, Sd), dim=1) + self.a_grav
        # to body frames: Ad^-1 = P Ad^T P (swap the linear/angular blocks of the transpose)
        X_inv = X.transpose(-1, -2)[..., _SWAP, :][..., _SWAP]
        loc = torch.matmul(X_inv, torch.cat([V, A], dim=-1))  # (B, n, 6, 2): body v, a
        return S, X_inv, loc

    def forward(
        self, q: torch.Tensor, dq: torch.Tensor, ddq: torch.Tensor, pi: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Joint torques (B, n) in Nm for q (B, n) rad, dq (B, n) rad/s, ddq (B, n) rad/s².

        ``pi`` (n, 10) overrides the held parameters, e.g. computed from a Cholesky parameterisation.
        """
        n = self.n
        S, X_inv, loc = self._kinematics(q, dq, ddq)
        I6 = self._export_inertia if pi is None and self._export_inertia is not None else self.spatial_inertia(pi)
        IVA = torch.matmul(I6, loc)  # (B, n, 6, 2): I v, I a
        crf_v = torch.matmul(loc[..., 0:1].transpose(-1, -2), self.G_crf).reshape(-1, n, 6, 6)
        f = IVA[..., 1:2] + torch.matmul(crf_v, IVA[..., 0:1])  # f = I a + v x* I v (body frame)
        fw = torch.matmul(X_inv.transpose(-1, -2), f)  # force to world: X^-T f
        cs = torch.cumsum(fw, dim=1)
        F = cs[:, -1:] - cs + fw  # sum_{k >= i} f_k
        return (S * F).sum(dim=(-1, -2))

    def regressor(self, q: torch.Tensor, dq: torch.Tensor, ddq: torch.Tensor) -> torch.Tensor:
        """Joint-torque regressor Y (B, n, 10 n) with ``forward(q, dq, ddq) == Y @ pi.ravel()`` (Reuss Eq. 4).

        Same layout as pinocchio's ``computeJointTorqueRegressor``; eager use (training), not for export.
        """
        n = self.n
        S, X_inv, loc = self._kinematics(q, dq, ddq)
        I3 = self.I_map.reshape(10, 6, 6)
        Av = torch.einsum("krc,bnc->bnrk", I3, loc[..., 0])  # I(pi) v = Av pi   (B, n, 6, 10)
        Aa = torch.einsum("krc,bnc->bnrk", I3, loc[..., 1])
        crf_v = torch.matmul(loc[..., 0:1].transpose(-1, -2), self.G_crf).reshape(-1, n, 6, 6)
        W = torch.matmul(X_inv.transpose(-1, -2), Aa + torch.matmul(crf_v, Av))  # world f_i = W_i pi_i
        upper = torch.triu(torch.ones(n, n, dtype=W.dtype, device=W.device))  # body i acts on joints j <= i
        Y = torch.einsum("bjr,birk,ji->bjik", S[..., 0], W, upper)
        return Y.reshape(-1, n, n * 10)


@contextlib.contextmanager
def constant_inertia(module: nn.Module) -> Iterator[None]:
    """While exporting: every TorchRNEA inside ``module`` uses its current 6x6 inertias as a constant.

    Folds ``pi -> I6`` (a MatMul + Reshape per call) out of the ONNX graph; use it around your own
    ``torch.onnx.export`` of a model that contains a TorchRNEA.
    """
    rnea_modules = [m for m in module.modules() if isinstance(m, TorchRNEA)]
    for m in rnea_modules:
        m._export_inertia = m.spatial_inertia().detach().clone()
    try:
        yield
    finally:
        for m in rnea_modules:
            m._export_inertia = None


def export_onnx(
    module: nn.Module, path: str | Path | None = None, opset: int = 17, dynamic_batch: bool = True
) -> bytes:
    """Export ``module(q, dq, ddq) -> tau`` to ONNX with the TorchScript exporter (``dynamo=False``).

    Decision: the TorchScript exporter. In torch 2.13 it still works (deprecated, warning silenced
    here) and folds the constant parameter arithmetic; the dynamo exporter (``dynamo=True``) needs the
    ``onnxscript`` package, which is not in the venv (ModuleNotFoundError when tried).
    Returns the serialized model (and writes it to ``path`` if given).
    """
    n = module.n
    dtype = next(iter(module.buffers())).dtype
    args = tuple(torch.zeros(1, n, dtype=dtype) for _ in range(3))
    buf = io.BytesIO()
    axes = {k: {0: "batch"} for k in ("q", "dq", "ddq", "tau")} if dynamic_batch else None
    with warnings.catch_warnings(), constant_inertia(module):
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module,
            args,
            buf,
            input_names=["q", "dq", "ddq"],
            output_names=["tau"],
            opset_version=opset,
            dynamic_axes=axes,
            do_constant_folding=True,
            dynamo=False,
        )
    blob = buf.getvalue()
    if path is not None:
        Path(path).write_bytes(blob)
    return blob


def onnx_node_count(model: bytes | str | Path | Any) -> int:
    """Number of nodes in an ONNX graph (serialized bytes, file path or ``onnx.ModelProto``)."""
    import onnx

    if isinstance(model, bytes):
        model = onnx.load_from_string(model)
    elif isinstance(model, str | Path):
        model = onnx.load(str(model))
    return len(model.graph.node)
