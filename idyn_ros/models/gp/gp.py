"""Gaussian-process inverse dynamics: exact posterior, marginal-likelihood training, physical read-outs.

Measurement model y = tau(x) + e, e ~ N(0, diag(sigma_1^2..sigma_n^2)) (per-joint noise, Sec. II-B).
Multi-output kernels (LIP, LSE) give one GP over all n torques with the (nN x nN) Gram matrix of the
n x n blocks (sample-major: row = sample * n + joint); independent kernels (SE, GIP) give n GPs.

Posterior (eq 5): alpha = (K + Sigma)^-1 y, mean = K(x*, X) alpha,
var = diag K(x*, x*) - rowsum((K(x*, X) K^-1) o K(x*, X)). Cholesky with jitter.

Training: negative log marginal likelihood 0.5 (y' K^-1 y + log|K|) in float64, either minibatch Adam
(lr 0.01, as the authors' code) or full-batch L-BFGS on at most ``max_hyper_points`` samples. Decision:
L-BFGS on a random subset by default, because full-batch kernel gradients for N = 500, n = 7 need
several GB; the posterior then conditions on all N samples (as in the paper).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import torch

from idyn_ros.errors import IdynError, ParameterError

Tensor = torch.Tensor

# Numerical jitter on the noise std (authors' code: 2e-4 in simulation, 1e-4 on real data) [Nm].
JITTER_STD = 2e-4


class GPTrainingError(IdynError):
    """GP training impossible (non-finite data, Gram matrix not positive definite)."""


def stack_inputs(q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> Tensor:
    """(N, n) x 3 -> x = [q, dq, ddq] (N, 3n) float64 tensor."""
    return torch.as_tensor(np.concatenate([q, dq, ddq], axis=-1), dtype=torch.float64)


@dataclass
class FitReport:
    """What training did: final NLL per sample, iterations, seconds, method."""

    nll: float
    iterations: int
    seconds: float
    method: str
    hyper_points: int


class GPInverseDynamics(torch.nn.Module):
    """GP inverse-dynamics model over x = [q, dq, ddq] with a multi-output or per-joint kernel.

    Args:
        kernel: LIPKernel / LSEKernel (``multi_output``) or SEKernel / GIPKernel (per joint).
        n: DoF.
        friction: optional FrictionKernel added to the diagonal blocks (real robots, eq 35).
        noise_std: initial per-joint noise std (n,) [Nm].
        shared_noise: one noise std for all joints (the authors' simulation setting, Sec. V-A: the torque
            noise is i.i.d. with equal std on every joint), started at the largest of ``noise_std``.
            Per-joint noise lets a joint whose torque is mostly noise (7-DoF Panda J7: std 0.03 Nm vs
            0.01 Nm noise) fit its noise to ~0 and interpolate it.
        shared_noise_start: start the shared std at the "max" (default) or "min" of ``noise_std``. Neither
            start is right everywhere; train.fit_gp fits both for the LIP (train.SHARED_NOISE_STARTS).
        noise_floor_std: (n,) [Nm] added in quadrature to the fitted noise (default 0). On real recordings
            the marginal likelihood of smooth torques drives the noise to 0 (see train.NOISE_FLOOR_RATIO).
    """

    def __init__(self, kernel: torch.nn.Module, n: int, friction: torch.nn.Module | None = None,
                 noise_std: np.ndarray | None = None, jitter_std: float = JITTER_STD,
                 shared_noise: bool = False, noise_floor_std: np.ndarray | None = None,
                 shared_noise_start: str = "max"):
        super().__init__()
        self.kernel = kernel
        self.friction = friction
        self.n = n
        ns = np.ones(n) if noise_std is None else np.maximum(np.asarray(noise_std, float), 1e-4)
        if shared_noise:
            if shared_noise_start not in ("max", "min"):
                raise ParameterError(f"shared_noise_start must be 'max' or 'min', not {shared_noise_start!r}")
            ns = np.array([ns.max() if shared_noise_start == "max" else ns.min()])
        self.log_noise = torch.nn.Parameter(torch.log(torch.as_tensor(ns, dtype=torch.float64)))
        self.jitter_std = jitter_std
        floor = np.zeros(n) if noise_floor_std is None else np.asarray(noise_floor_std, float)
        self.register_buffer("noise_floor_var", torch.as_tensor(floor**2, dtype=torch.float64))
        self.X: Tensor | None = None
        self.alpha: Tensor | None = None  # (N, n)
        self._chol: Tensor | list[Tensor] | None = None

    @property
    def multi_output(self) -> bool:
        return bool(getattr(self.kernel, "multi_output", False))

    # ------------------------------------------------------------------ Gram matrices
    def cross(self, X1: Tensor, X2: Tensor) -> Tensor:
        """Multi-output: (N1, N2, n, n) torque covariances; per-joint: (n, N1, N2)."""
        K = self.kernel(X1, X2)
        if self.friction is not None:
            F = self.friction(X1, X2)  # (n, N1, N2)
            K = K + torch.diag_embed(F.permute(1, 2, 0)) if self.multi_output else K + F
        return K

    def _symmetric_blocks(self, X: Tensor) -> Tensor:
        """K(X, X) (N, N, n, n) from the N(N+1)/2 pairs i <= j only (K(x', x) = K(x, x')^T)."""
        if not hasattr(self.kernel, "blocks"):
            K = self.cross(X, X)
            return 0.5 * (K + K.permute(1, 0, 3, 2))
        N, n = X.shape[0], self.n
        iu = torch.triu_indices(N, N)
        B = self.kernel.blocks(X[iu[0]], X[iu[1]])  # (P, n, n)
        if self.friction is not None:
            F = self.friction(X, X)[:, iu[0], iu[1]].T  # (P, n)
            B = B + torch.diag_embed(F)
        K = torch.zeros(N, N, n, n, dtype=B.dtype)
        K = K.index_put((iu[1], iu[0]), B.transpose(1, 2))
        K = K.index_put((iu[0], iu[1]), B)  # diagonal blocks end up symmetrised below
        d = torch.arange(N)
        Kd = 0.5 * (K[d, d] + K[d, d].transpose(1, 2))
        return K.index_put((d, d), Kd)

    def _noise_var(self) -> Tensor:
        """(n,) noise variance incl. jitter [Nm^2] (a shared noise parameter is broadcast)."""
        return torch.exp(2 * self.log_noise).expand(self.n) + self.noise_floor_var + self.jitter_std**2

    def noise_std(self) -> np.ndarray:
        """Fitted noise std per joint (n,) [Nm], without the jitter."""
        return self.log_noise.detach().exp().expand(self.n).numpy().copy()

    def _gram(self, X: Tensor) -> Tensor:
        """Training covariance incl. noise: (nN, nN) (multi) or (n, N, N) (per joint)."""
        N, n = X.shape[0], self.n
        if self.multi_output:
            K = self._symmetric_blocks(X)
            K = K.permute(0, 2, 1, 3).reshape(N * n, N * n)
            return K + torch.diag(self._noise_var().repeat(N))
        K = self.cross(X, X)
        K = 0.5 * (K + K.transpose(1, 2))
        return K + torch.diag_embed(self._noise_var()[:, None].expand(n, N))

    @staticmethod
    def _cholesky(K: Tensor) -> Tensor:
        L, info = torch.linalg.cholesky_ex(K)
        jitter = 1e-10 * K.diagonal(dim1=-2, dim2=-1).mean()
        tries = 0
        while bool((info > 0).any()):
            tries += 1
            if tries > 8:
                raise GPTrainingError("GP Gram matrix is not positive definite even with jitter; "
                                      "check the data for duplicates/NaN or raise the noise floor")
            eye = torch.eye(K.shape[-1], dtype=K.dtype)
            L, info = torch.linalg.cholesky_ex(K + jitter * eye)
            jitter = jitter * 100
        return L

    def nll(self, X: Tensor, Y: Tensor) -> Tensor:
        """Negative log marginal likelihood per scalar observation (Y (N, n) Nm)."""
        K = self._gram(X)
        y = Y.reshape(-1) if self.multi_output else Y.T[:, :, None]  # (nN,) or (n, N, 1)
        L = self._cholesky(K)
        if self.multi_output:
            a = torch.cholesky_solve(y[:, None], L)[:, 0]
            val = 0.5 * (y @ a) + torch.log(torch.diagonal(L)).sum()
        else:
            a = torch.cholesky_solve(y, L)
            val = 0.5 * (y * a).sum() + torch.log(torch.diagonal(L, dim1=1, dim2=2)).sum()
        return val / y.numel() + 0.5 * math.log(2 * math.pi)

    # ------------------------------------------------------------------ training
    def fit(self, X: Tensor, Y: Tensor, method: str = "lbfgs", iterations: int = 100,
            max_hyper_points: int = 200, batch_size: int = 100, lr: float = 0.01,
            seed: int = 0, max_seconds: float | None = None) -> FitReport:
        """Optimise hyperparameters by marginal likelihood, then condition on all (X, Y).

        Args:
            X: (N, 3n) inputs [q rad, dq rad/s, ddq rad/s^2]; Y: (N, n) torques [Nm].
            method: "lbfgs" (full batch on <= max_hyper_points random samples), "adam" (minibatch
                epochs of ``batch_size``, lr 0.01 as the authors' code), or "none" (keep hyperparameters).
            iterations: L-BFGS iterations or Adam epochs.
            max_seconds: stop hyperparameter optimisation after this wall time.
        """
        import time

        if not (torch.isfinite(X).all() and torch.isfinite(Y).all()):
            raise GPTrainingError("training data contain NaN/inf; clean the dataset before fitting a GP")
        gen = torch.Generator().manual_seed(seed)
        t0 = time.perf_counter()
        N = X.shape[0]
        its, last = 0, float("nan")
        if method == "lbfgs":
            idx = torch.randperm(N, generator=gen)[: min(N, max_hyper_points)]
            Xh, Yh = X[idx], Y[idx]
            opt = torch.optim.LBFGS(self.parameters(), lr=1.0, max_iter=iterations, history_size=20,
                                    line_search_fn="strong_wolfe", tolerance_grad=1e-7, tolerance_change=1e-10)
            count = [0]

            def closure() -> Tensor:
                opt.zero_grad()
                loss = self.nll(Xh, Yh)
                if not torch.isfinite(loss):
                    raise GPTrainingError("marginal likelihood became non-finite during L-BFGS")
                loss.backward()
                count[0] += 1
                if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                    for p in self.parameters():  # zero gradient -> L-BFGS stops at this point
                        if p.grad is not None:
                            p.grad.zero_()
                return loss

            with contextlib.suppress(GPTrainingError):  # keep the last finite parameters L-BFGS accepted
                opt.step(closure)
            its = count[0]
            with torch.no_grad():
                last = float(self.nll(Xh, Yh))
            hp = Xh.shape[0]
        elif method == "adam":
            opt = torch.optim.Adam(self.parameters(), lr=lr)
            hp = min(batch_size, N)
            for _ in range(iterations):
                perm = torch.randperm(N, generator=gen)
                for s in range(0, N - hp + 1, hp):  # drop_last as the authors' code
                    b = perm[s : s + hp]
                    opt.zero_grad()
                    loss = self.nll(X[b], Y[b])
                    loss.backward()
                    opt.step()
                    last = float(loss)
                its += 1
                if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                    break
        elif method == "none":
            hp = 0
        else:
            raise GPTrainingError(f"unknown GP training method '{method}'; use lbfgs, adam or none")
        self.condition(X, Y)
        return FitReport(nll=last, iterations=its, seconds=time.perf_counter() - t0, method=method,
                         hyper_points=hp)

    @torch.no_grad()
    def condition(self, X: Tensor, Y: Tensor) -> None:
        """Posterior on all training data: stores X, alpha (N, n) and the Cholesky factor."""
        K = self._gram(X)
        L = self._cholesky(K)
        if self.multi_output:
            a = torch.cholesky_solve(Y.reshape(-1, 1), L)[:, 0].reshape(X.shape[0], self.n)
        else:
            a = torch.cholesky_solve(Y.T[:, :, None], L)[:, :, 0].T
        self.X, self.alpha, self._chol = X.clone(), a.contiguous(), L

    # ------------------------------------------------------------------ prediction
    def _require(self) -> None:
        if self.X is None:
            raise GPTrainingError("the GP has no training data yet: call fit() or condition() first")

    @torch.no_grad()
    def predict(self, Xs: Tensor, return_var: bool = False, chunk: int = 64) -> tuple[Tensor, Tensor | None]:
        """Posterior torque mean (Ns, n) [Nm] and, optionally, variance (Ns, n) [Nm^2] (eq 5)."""
        self._require()
        means, vars_ = [], []
        for s in range(0, Xs.shape[0], chunk):
            xs = Xs[s : s + chunk]
            Ks = self.cross(xs, self.X)
            if self.multi_output:
                means.append(torch.einsum("snij,nj->si", Ks, self.alpha))
                if return_var:
                    Km = Ks.permute(0, 2, 1, 3).reshape(xs.shape[0] * self.n, -1)  # (s*n, N*n)
                    V = torch.linalg.solve_triangular(self._chol, Km.T, upper=False)
                    prior = torch.diagonal(self._prior_blocks(xs), dim1=-2, dim2=-1).reshape(-1)
                    vars_.append((prior - (V * V).sum(0)).reshape(xs.shape[0], self.n))
            else:
                means.append(torch.einsum("isn,ni->si", Ks, self.alpha))
                if return_var:
                    V = torch.linalg.solve_triangular(self._chol, Ks.transpose(1, 2), upper=False)  # (n,N,s)
                    prior = self._prior_diag(xs)  # (n, s)
                    vars_.append((prior - (V * V).sum(1)).T)
        mean = torch.cat(means)
        return mean, (torch.cat(vars_).clamp_min(0.0) if return_var else None)

    def _prior_blocks(self, xs: Tensor) -> Tensor:
        if hasattr(self.kernel, "diag_blocks"):
            K = self.kernel.diag_blocks(xs)
        else:
            K = torch.stack([self.kernel(x[None], x[None])[0, 0] for x in xs])
        if self.friction is not None:
            F = torch.stack([torch.diagonal(f) for f in self.friction(xs, xs)], -1)  # (s, n)
            K = K + torch.diag_embed(F)
        return K

    def _prior_diag(self, xs: Tensor) -> Tensor:
        d = self.kernel.diag(xs)
        if self.friction is not None:
            d = d + torch.stack([torch.diagonal(f) for f in self.friction(xs, xs)])
        return d

    def predict_numpy(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> np.ndarray:
        """Posterior mean torques (N, n) [Nm] from numpy (N, n) inputs."""
        return self.predict(stack_inputs(q, dq, ddq))[0].numpy()
