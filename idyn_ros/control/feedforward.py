"""Feedforward torque tau_ff(q, dq, ddq_d): the exported model, or a loud, explicit fallback.

One class used in two places (decision, see docs/interfaces.md "control/"): the controller embeds
it so that /joint_states -> command is a single hop; the feedforward node runs the same class to
publish ``FeedforwardTorque`` for monitoring/recording (or as the source when the controller is
configured with ``feedforward_source: topic``).

Fallback policy (``fallback`` parameter): when no model path is configured, the file is missing,
or the runtime refuses the artifact (other robot, other rate, bad format), we use
"rbd" = RNEA of the nominal URDF at (q, dq, ddq_d), "gravity" = g(q), or "none" (refuse: raise).
The reason is kept in ``fallback_reason`` for the node to log once at ERROR and put on /diagnostics.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.errors import IdynError, ModelArtifactError
from idyn_ros.parameters import FALLBACKS, PAPER_WARMUP_TICKS


class FeedforwardComputer:
    """tau_ff = f(q, dq, ddq_d) with parts (rbd, friction, residual), all Nm, preallocated outputs."""

    def __init__(
        self,
        robot: Any,
        model_path: str | Path | None = None,
        fallback: str = "rbd",
        rate_hz: float | None = None,
        warmup_ticks: int = PAPER_WARMUP_TICKS,
        advice: str | None = None,
    ) -> None:
        """``robot``: the ``idyn_ros.dynamics.RobotModel`` of the configured robot (nominal URDF); ``advice``: what a
        refused model (fallback 'none') tells the user to do, None = the node's parameters (a command names its own
        options)."""
        if fallback not in FALLBACKS:
            raise ModelArtifactError(f"feedforward fallback must be one of {FALLBACKS}, got {fallback!r}")
        self.robot = robot
        self.n = len(robot.joint_names)
        self.fallback_kind = fallback
        self.warmup_ticks = int(warmup_ticks)
        self.total = np.zeros(self.n)
        self.rbd_part = np.zeros(self.n)
        self.friction = np.zeros(self.n)
        self.residual = np.zeros(self.n)
        self.runtime = None
        self._payload: Any = None  # PayloadTorque of the payload on the flange, or None (set_payload)
        self.fallback = True
        self.fallback_reason = ""
        self.model_id = f"fallback:{fallback}"
        if model_path:
            try:
                self.runtime = self._load(Path(model_path), rate_hz)
                self.fallback = False
                self.model_id = self._fingerprint(Path(model_path), self.runtime.model_id)
            except IdynError as exc:
                self.fallback_reason = f"model {model_path} rejected: {exc}"
            except Exception as exc:
                self.fallback_reason = f"model {model_path} could not be loaded: {type(exc).__name__}: {exc}"
        else:
            self.fallback_reason = "no model configured (parameter model_path is empty)"
        if self.fallback:
            if fallback == "none":
                if advice is None:
                    advice = (f"fallback is 'none'. Set model_path to an artifact exported for "
                              f"{robot.name if hasattr(robot, 'name') else 'this robot'} or set fallback to "
                              "rbd|gravity")
                raise ModelArtifactError(f"{self.fallback_reason}; {advice}")
            self.fallback_reason += f"; using fallback '{fallback}' (nominal URDF)"

    def _load(self, path: Path, rate_hz: float | None) -> Any:
        if not path.is_file():
            raise ModelArtifactError(f"file not found: {path}")
        from idyn_ros.runtime import ModelRuntime  # runtime layer: onnxruntime, never torch

        return ModelRuntime(path, robot=self.robot, rate_hz=rate_hz)

    @staticmethod
    def _fingerprint(path: Path, model_id: str) -> str:
        """file:id with the id `idyn train` and `idyn evaluate` print (a file hash only for an artifact without one)."""
        return f"{path.name}:{model_id or hashlib.sha256(path.read_bytes()).hexdigest()[:12]}"

    @property
    def inertial_parameters(self) -> np.ndarray | None:
        """The loaded model's identified inertial parameters (n, 10) (pinocchio order), None without them
        (fallback, or a model kind without an RBD part)."""
        return None if self.runtime is None else self.runtime.inertial

    @property
    def armature(self) -> np.ndarray | None:
        """The loaded model's identified armature (n,) kg m^2, None without an RBD part (or in fallback)."""
        return None if self.runtime is None else self.runtime.armature

    @property
    def effort_metadata(self) -> dict[str, Any] | None:
        """What the model's training efforts were (``{"kind": "current", "torque_constants": ...}`` for a model
        trained on motor currents), None in fallback."""
        return None if self.runtime is None else self.runtime.effort

    @property
    def uncertainty(self) -> dict[str, Any] | None:
        """The model's torque uncertainty from its validation residuals (``tau_sigma_nm``...), None if unknown."""
        return None if self.runtime is None else self.runtime.uncertainty

    @property
    def static_friction(self) -> np.ndarray | None:
        """The model's per-joint break-away friction [Nm] (``dynamics.friction.static_friction_level``), None
        without a friction model (or in fallback)."""
        return None if self.runtime is None else self.runtime.static_friction

    @property
    def ticks_beyond_training_speed(self) -> int:
        """Ticks on which some joint ran faster than the model's training data (0 in fallback)."""
        return 0 if self.runtime is None else self.runtime.ticks_beyond_hold

    def training_speed_note(self) -> str:
        """'' or the warning ``idyn train`` / ``idyn evaluate`` give (``models.metrics.speed_warning``), for the ticks
        on which the robot ran faster than the model's training data (friction and residual are held there)."""
        from idyn_ros.models.metrics import speed_warning  # numpy only

        rt = self.runtime
        if rt is None or rt.ticks_beyond_hold == 0:
            return ""
        coverage = {"ratio": rt.peak_speed_ratio, "share_beyond": rt.ticks_beyond_hold / max(rt.ticks, 1)}
        return speed_warning("the robot", coverage, rt.joint_names, held=rt.velocity_hold is not None) or ""

    def feedback_model(self) -> Any:
        """The ``RobotModel`` whose M(q) the controller's feedback and the observers use: this artifact's identified
        inertials + armature when it has them, else the nominal URDF (``RobotModel.with_identified``)."""
        return self.robot.with_identified(self.inertial_parameters, self.armature)

    def set_payload(self, payload: Any) -> None:
        """Add a payload fixed to the flange (``Payload``; None or mass 0: remove it) to every following ``compute``:
        its torque J^T Y phi (``dynamics.payload.PayloadTorque``) goes into the total and the RBD part. The learned
        model stays the bare arm's. Safe to call from another thread than ``compute`` (one assignment)."""
        from idyn_ros.dynamics.payload import PayloadTorque
        from idyn_ros.robots.spec import Payload

        p = None if payload is None else Payload.coerce(payload)
        self._payload = None if p is None or p.mass == 0.0 else PayloadTorque(self.robot, p)

    @property
    def payload(self) -> Any:
        """The payload ``compute`` includes (a ``Payload``), or None."""
        pt = self._payload
        return None if pt is None else pt.payload

    def reset(self) -> None:
        """Zero the recurrent state (the runtime's), e.g. before a warm-up."""
        if self.runtime is not None:
            self.runtime.reset()

    def warm_up(self, q: np.ndarray, dq: np.ndarray | None = None, ddq: np.ndarray | None = None) -> int:
        """Settle the model's recurrent state at (q, dq, ddq) held, from zero, in at most ``warmup_ticks`` steps
        (Reuss sec. VI); returns the steps run.

        Decision: warm up on the current state held constant (the robot is at rest when the controller activates),
        synchronously at the first trusted state after activation, rather than over the first 0.5 s of live ticks:
        the first live command then already uses the model. It stops once the state no longer changes (the
        per-joint residual's: after 1 step; an LSTM's: all 500, 12-17 ms), and the controller restarts its silence
        clock after it (``Controller._start_hold``).
        """
        if self.runtime is None:
            return 0
        self.runtime.reset()
        return self.runtime.warm_up(q, dq, ddq, steps=self.warmup_ticks)

    def compute(self, q: np.ndarray, dq: np.ndarray, ddq_d: np.ndarray) -> np.ndarray:
        """Evaluate at (q rad, dq rad/s, ddq_d rad/s^2); returns ``self.total`` (Nm), parts in attributes."""
        if self.runtime is not None:
            pred = self.runtime.step(q, dq, ddq_d)  # parts (n,): plain copies (np.reshape cost ~1 us each)
            self.total[:] = pred.total
            self.rbd_part[:] = pred.rbd
            self.friction[:] = pred.friction
            self.residual[:] = pred.residual
        else:
            if self.fallback_kind == "rbd":
                self.rbd_part[:] = self.robot.rnea(q, dq, ddq_d)
            else:
                self.rbd_part[:] = self.robot.gravity(q)
            self.total[:] = self.rbd_part
        pt = self._payload
        if pt is not None:  # the payload's torque; with the "gravity" fallback its gravity only, like the rest
            extra = pt(q, dq, ddq_d) if self.runtime is not None or self.fallback_kind == "rbd" else pt.gravity(q)
            self.total += extra
            self.rbd_part += extra
        return self.total
