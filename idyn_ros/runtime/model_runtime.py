"""Run an exported inverse-dynamics model at the control rate (ONNX Runtime, no torch).

Why a split evaluation: the artifact's full graph contains the torch RNEA (~hundreds of ONNX
nodes, ~0.1 us each at batch 1), while pinocchio's RNEA costs ~1.5 us. So by default
(``rbd_backend="pinocchio"``) the runtime evaluates RBD with pinocchio from the identified
inertial parameters in the metadata, and runs in ONNX Runtime only the residual and friction subgraph, cut out of
the artifact once at load time with ``onnx.utils.Extractor`` (a model without a residual gets its friction from the
numpy formulas, the same basis as training, and no ONNX call). ``rbd_backend="onnx"`` runs the whole graph; a test
checks both paths agree. Per tick nothing is logged and only small fixed-size arrays are touched.

Velocity range: for kinds with an RBD part, friction and residual are evaluated at dq held to ``fit_dq_abs_max``
(the training data's largest |dq| per joint, in the metadata) and RBD at the measured dq
(``TorqueModel.set_velocity_hold``): training's scores, the exported graph (both backends) and this split path all
hold it the same way; the split path clips here too, for artifacts exported before the graph held it. Kinds
without inertial parameters (lstm, delan, GP) run unheld: their physics-like parts need the measured velocity.
Every kind whose metadata records ``fit_dq_abs_max`` counts the ticks beyond it (``ticks_beyond_hold``,
``peak_speed_ratio``), held or not: the unheld kinds extrapolate worst.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pinocchio

from idyn_ros.dynamics.friction import (
    DEFAULT_KINDS,
    default_friction_into,
    friction_torque,
    n_columns,
    static_friction_level,
)
from idyn_ros.errors import ModelArtifactError
from idyn_ros.models.artifact import load_artifact, read_metadata, require_keys, same_rate  # torch-free
from idyn_ros.parameters import PAPER_WARMUP_TICKS
from idyn_ros.robots.drives import valid_torque_constants

__all__ = ["ModelRuntime", "TorquePrediction", "read_metadata"]


class TorquePrediction(NamedTuple):
    """One tick's torques (n,) in Nm. The arrays are reused by the next ``step`` call."""

    total: np.ndarray
    rbd: np.ndarray
    friction: np.ndarray
    residual: np.ndarray


class ModelRuntime:
    """Step an exported model: ``step(q, dq, ddq) -> TorquePrediction`` with internal LSTM state.

    Args:
        path: the ``.onnx`` artifact.
        robot: ``RobotModel`` of the configured robot; its joint names must equal the artifact's.
            When None, the URDF stored in the artifact is used.
        rate_hz: control rate; must match the artifact's sample rate within 2 % when the model carries state from
            tick to tick (an LSTM, the r feature; physics-only kinds run at any rate) (None: no check).
        rbd_backend: "pinocchio" (default, fast) or "onnx" (run the whole graph).
    """

    def __init__(self, path: str | Path, robot: Any = None, rate_hz: float | None = None,
                 rbd_backend: str = "pinocchio") -> None:
        self.path = Path(path)
        model, meta = load_artifact(self.path)  # refuses damaged, foreign, old-format or modified files
        self.meta = meta
        self._check_compatible(robot, rate_hz)
        if rbd_backend not in ("pinocchio", "onnx"):
            raise ModelArtifactError(f"rbd_backend must be 'pinocchio' or 'onnx', not '{rbd_backend}'")
        require_keys(meta, ("model_kind", "state", "parameters"), self.path)
        self.joint_names = list(meta["joint_names"])
        self.n = n = len(self.joint_names)
        self.rate_hz = float(meta.get("rate_hz") or 0.0)  # the model's sample rate (0: not recorded)
        self.model_id = meta.get("model_id", "")
        self.backend = rbd_backend
        self._state = [(s["input"], s["output"], np.zeros(s["shape"], np.float32)) for s in meta["state"]]
        self._read_physics()
        self._read_effort()
        # per-joint 1-sigma of the model's torque [Nm] from its validation residuals (None: not recorded)
        self.uncertainty = meta.get("uncertainty")
        self._sess = self._build_session(model, robot)
        self._out = TorquePrediction(*(np.zeros(n) for _ in range(4)))
        # friction in numpy (no ORT session) of the default kinds: their coefficient columns, evaluated in place
        self._default_friction_columns = None
        if self._sess is None and self._kinds == DEFAULT_KINDS:
            self._default_friction_columns = tuple(self._fric[:, i].copy() for i in range(3))
        self._friction_tmp = np.zeros(n)
        self._init_velocity_hold()
        self._bind_tick_buffers()

    # ---- construction helpers ----
    def _check_compatible(self, robot: Any, rate_hz: float | None) -> None:
        """Refuse a model trained for other joints, or with recurrent state at another rate than the controller's."""
        meta = self.meta
        names = list(meta["joint_names"])
        if robot is not None and list(robot.joint_names) != names:
            extra = [j for j in robot.joint_names if j not in names]
            missing = [j for j in names if j not in robot.joint_names]
            what = (f"robot joints {extra} are not in the model; model joints {missing} are not on the robot"
                    if extra or missing else "same joints in a different order")
            raise ModelArtifactError(
                f"{self.path.name} was trained for robot '{meta['robot']}' with joints {names}, but the "
                f"configured robot '{robot.name}' has {list(robot.joint_names)} ({what}); train a model "
                f"for this robot or pick the matching artifact"
            )
        model_rate = float(meta.get("rate_hz") or 0.0)
        recurrent = bool(meta.get("state"))  # physics-only kinds (rbd-friction) have none: any rate serves them
        if rate_hz is not None and model_rate > 0 and recurrent and not same_rate(rate_hz, model_rate):
            raise ModelArtifactError(
                f"{self.path.name} was trained on data at {model_rate:g} Hz but runs here at {rate_hz:g} Hz "
                f"(rate_hz): its recurrent state depends on the sample rate; set rate_hz {model_rate:g} if the "
                f"joint states come at that rate, else retrain on data at {rate_hz:g} Hz"
            )

    def _read_physics(self) -> None:
        """The metadata's friction coefficients, identified inertial parameters and armature."""
        n = self.n
        params = self.meta["parameters"]
        self._kinds = tuple(params.get("friction_kinds") or ())
        self._fric = np.asarray(params.get("friction") or np.zeros((n, 0)), dtype=np.float64)
        if self._kinds and self._fric.shape != (n, n_columns(self._kinds)):
            raise ModelArtifactError(f"{self.path.name}: friction {self._kinds} needs ({n}, {n_columns(self._kinds)}) "
                                     f"coefficients, the metadata has shape {self._fric.shape}; re-export it")
        # identified inertial parameters (n, 10), pinocchio order, or None (kinds without RBD: lstm, delan)
        self.inertial = None if params.get("inertial") is None else np.asarray(params["inertial"], dtype=np.float64)
        # identified armature (n,) kg m^2 (reflected rotor inertia; pinocchio adds it to RNEA and M), or None
        # (model kinds without RBD; artifacts exported before armature was identified: zeros)
        self.armature = None if self.inertial is None else np.asarray(params.get("armature") or np.zeros(n),
                                                                        dtype=np.float64)
        # per-joint break-away friction [Nm] of the identified friction model (None: the model has none)
        self.static_friction = static_friction_level(self._fric, self._kinds) if self._kinds else None

    def _read_effort(self) -> None:
        """What the training data's effort was: {"kind": "torque"} or {"kind": "current", "torque_constants": k Nm/A,
        ...} (models.current_gains); artifacts from before this entry were trained on torques."""
        self.effort = self.meta.get("effort") or {"kind": "torque", "unit": "Nm"}
        if self.effort.get("kind") not in ("torque", "current"):  # anything else would be taken as torque
            raise ModelArtifactError(f"{self.path.name}: its effort kind {self.effort.get('kind')!r} is neither "
                                     f"'torque' nor 'current'; re-export it")
        self.torque_constants = None
        if self.effort.get("kind") == "current":
            k = np.asarray(self.effort.get("torque_constants") or (), dtype=np.float64)
            if not valid_torque_constants(k, self.n):
                raise ModelArtifactError(f"{self.path.name}: trained on motor currents but its torque constants "
                                         f"{k.tolist()} are not {self.n} gains > 0 Nm/A; re-export it")
            self.torque_constants = k

    def _build_session(self, model: Any, robot: Any) -> Any:
        """The pinocchio models of the physics and the ORT session of what is left (None: numpy friction only).

        The split path needs inertial parameters to rebuild the RBD part in pinocchio; artifacts without them (lstm,
        delan, GP models whose energy part is in tau_rbd) run the whole graph.
        """
        import onnx
        import onnxruntime as ort

        self._feeds_rbd = False  # the residual takes the RBD torque as an input
        has_residual = self.meta["model_kind"] not in ("rbd", "rbd-friction")
        residual_inputs = self._residual_inputs(model) if has_residual else set()
        needs_rbd_input = "tau_rbd" in residual_inputs
        # a model averaged over physics bases: its residual takes each base's RBD torque (export.build_metadata)
        bases = self.meta["parameters"].get("bases") or []
        base_inputs = [f"tau_rbd_base_{b}" for b in range(len(bases))]
        if any(name not in residual_inputs for name in base_inputs):
            raise ModelArtifactError(f"{self.path.name}: the metadata lists {len(bases)} physics bases but the graph's "
                                     f"residual does not take their torques; re-export it")
        self._pin = None
        self._base_pins: list[Any] = []
        if self.backend == "pinocchio" and self.inertial is not None:
            self._pin = self._pinocchio_model(robot, self.inertial)
            self._base_pins = [self._pinocchio_model(robot, np.asarray(b["inertial"], dtype=np.float64),
                                                     np.asarray(b["armature"], dtype=np.float64)) for b in bases]
        if self.backend == "onnx" or self._pin is None:
            self.backend = "onnx"
            graph = model
        elif has_residual:
            ins = ["q", "dq", "ddq"] + (["tau_rbd"] if needs_rbd_input else []) + base_inputs + [s[0] for s in
                                                                                                self._state]
            # friction is a handful of nodes: cheaper in the same ORT call than in numpy
            outs = ["tau_residual", "tau_friction"] + [s[1] for s in self._state]
            graph = onnx.utils.Extractor(model).extract_model(ins, outs)
            self._feeds_rbd = needs_rbd_input
        else:
            return None  # physics only: pinocchio and the numpy friction
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(graph.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self._setup_binding(sess)
        return sess

    def _init_velocity_hold(self) -> None:
        """The training speed friction and residual are held to, and the counters of ticks beyond it."""
        n = self.n
        # Decision: friction and residual see |dq| held to the training data's largest (RBD the measured dq): fits do
        # not extrapolate (unheld, a residual fitted on slow data ran a joint into its limit: studies/velocity_hold).
        lim = self.meta.get("fit_dq_abs_max")
        # (n,) rad/s, the training data's largest |dq| per joint (None: not recorded); the speed diagnostics use it
        self.training_speed = None if lim is None else np.asarray(lim, dtype=np.float64)
        # (n,) rad/s the model holds friction and residual to (both backends), or None (kinds without RBD: unheld)
        self.velocity_hold = None if self.inertial is None else self.training_speed
        self.dq_fit_limit = None if self._pin is None else self.velocity_hold  # the split path clips here as well
        self._dq_fit_low = None if self.dq_fit_limit is None else -self.dq_fit_limit  # no negation per tick
        self._dq_fit = np.zeros(n)
        # diagnostics: ticks stepped, ticks with some joint beyond the training speed, each joint's largest
        # |dq| / training speed (``peak_speed_ratio``)
        self.ticks = 0
        self.ticks_beyond_hold = 0
        self._peak_ratio = np.zeros(n)
        speed = self.training_speed
        self._inv_hold = None if speed is None else 1.0 / np.maximum(speed, 1e-9)
        self._never_moved = np.zeros(n, dtype=bool) if speed is None else speed <= 0.0  # no ratio to a range of 0
        self._abs_dq = np.zeros(n)
        self._beyond = np.zeros(n, dtype=bool)

    def _bind_tick_buffers(self) -> None:
        """Direct references to the session's bound buffers: no dict lookups per tick."""
        self._fric_in_graph = self._sess is not None and "tau_friction" in self._outb
        if self._sess is None:
            return
        self._q_in, self._dq_in = self._in["q"][0], self._in["dq"][0]
        self._ddq_in = self._in["ddq"][0] if "ddq" in self._in else None
        self._rbd_in = self._in["tau_rbd"][0] if self._feeds_rbd else None
        # (pinocchio model, input buffer) per physics base; empty on the whole-graph backend
        self._base_in = [(pin, self._in[f"tau_rbd_base_{b}"][0]) for b, pin in enumerate(self._base_pins)]
        self._res_out = self._outb["tau_residual"][0]
        self._fric_out = self._outb["tau_friction"][0] if self._fric_in_graph else None
        self._rbd_out = self._outb["tau_rbd"][0] if "tau_rbd" in self._outb else None
        self._copies = [(buf, self._outb[name_out]) for _, name_out, buf in self._state]

    @staticmethod
    def _residual_inputs(model: Any) -> set[str]:
        """Names of tensors the residual output depends on (backward walk over the graph)."""
        producers = {o: node for node in model.graph.node for o in node.output}
        seen, stack, leaves = set(), ["tau_residual"], set()
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            if t == "tau_rbd" or t.startswith("tau_rbd_base_"):
                leaves.add(t)
                continue
            node = producers.get(t)
            if node is None:
                leaves.add(t)
            else:
                stack.extend(i for i in node.input if i)
        return leaves

    def _pinocchio_model(self, robot: Any, pi: np.ndarray, armature: np.ndarray | None = None) -> Any:
        """The configured robot with the artifact's identified inertials and armature (``RobotModel``)."""
        if robot is None:
            from idyn_ros.dynamics import RobotModel

            require_keys(self.meta, ("urdf",), self.path)
            robot = RobotModel.from_urdf(self.meta["urdf"], name=self.meta["robot"])
        if robot.n != self.n:
            raise ModelArtifactError(f"robot has {robot.n} DoF, model has {self.n}")
        return robot.with_identified(pi, self.armature if armature is None else armature)

    def _setup_binding(self, sess: Any) -> None:
        """Preallocated input/output buffers bound once (IOBinding): no per-tick allocation."""
        n = self.n
        self._in: dict[str, np.ndarray] = {}
        for i in sess.get_inputs():
            shape = [d if isinstance(d, int) else 1 for d in i.shape]
            self._in[i.name] = np.zeros(shape, np.float32)
        for name, _, buf in self._state:
            self._in[name] = buf
        self._outb: dict[str, np.ndarray] = {}
        for o in sess.get_outputs():
            shape = [d if isinstance(d, int) else 1 for d in o.shape] if o.shape else [1, n]
            self._outb[o.name] = np.zeros(shape, np.float32)
        self._bind = sess.io_binding()
        for name, arr in self._in.items():
            self._bind.bind_input(name, "cpu", 0, np.float32, list(arr.shape), arr.ctypes.data)
        for name, arr in self._outb.items():
            self._bind.bind_output(name, "cpu", 0, np.float32, list(arr.shape), arr.ctypes.data)

    # ---- per tick ----
    def step(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> TorquePrediction:
        """Torques for one tick (q rad, dq rad/s, ddq rad/s^2, each an (n,) array), advancing the state."""
        out = self._out
        if self._pin is not None:  # pinocchio itself: RobotModel.rnea's input checks cost ~1.3 us per call
            out.rbd[:] = pinocchio.rnea(self._pin.pin_model, self._pin.data, q, dq, ddq)  # (this thread's Data)
        dq_fit = dq
        if self._inv_hold is not None:  # ~1 us: two ufuncs into buffers; the peak only on ticks beyond
            self.ticks += 1
            np.greater(np.abs(dq, out=self._abs_dq), self.training_speed, out=self._beyond)
            if self._beyond.any():
                self.ticks_beyond_hold += 1
                np.multiply(self._abs_dq, self._inv_hold, out=self._abs_dq)
                np.maximum(self._peak_ratio, self._abs_dq, out=self._peak_ratio)
        if self.dq_fit_limit is not None:  # np.clip's dispatch costs ~1 us more than the two ufuncs it runs
            dq_fit = np.maximum(dq, self._dq_fit_low, out=self._dq_fit)
            np.minimum(dq_fit, self.dq_fit_limit, out=dq_fit)
        if self._sess is not None:
            self._q_in[:] = q
            self._dq_in[:] = dq_fit
            if self._ddq_in is not None:
                self._ddq_in[:] = ddq
            if self._rbd_in is not None:
                self._rbd_in[:] = out.rbd
            for base, buf in self._base_in:  # pinocchio itself, as for the main RBD above
                buf[:] = pinocchio.rnea(base.pin_model, base.data, q, dq, ddq)
            self._sess.run_with_iobinding(self._bind)
            for buf, new in self._copies:
                np.copyto(buf, new)
            out.residual[:] = self._res_out
            if self._fric_out is not None:
                out.friction[:] = self._fric_out
            if self.backend == "onnx":
                out.rbd[:] = self._rbd_out
        elif self._default_friction_columns is not None:
            default_friction_into(dq_fit, self._default_friction_columns, out.friction, self._friction_tmp)
        elif self._kinds:
            out.friction[:] = friction_torque(dq_fit, self._fric, self._kinds)
        np.add(out.rbd, out.friction, out=out.total)
        np.add(out.total, out.residual, out=out.total)
        return out

    @property
    def peak_speed_ratio(self) -> np.ndarray:
        """(n,) each joint's largest |dq| over its training speed so far; inf for a joint that moved although it
        never moved in the training data (a range of 0 rad/s has no ratio)."""
        ratio = self._peak_ratio.copy()
        ratio[self._never_moved & (ratio > 0.0)] = np.inf
        return ratio

    def reset(self) -> None:
        """Zero the recurrent state (start of a new, unrelated motion)."""
        for _, _, buf in self._state:
            buf[...] = 0.0

    def replay(self, q: np.ndarray, dq: np.ndarray, ddq: np.ndarray) -> TorquePrediction:
        """One recording (T, n) stepped tick by tick from a fresh state, as the controller steps it: every tick's
        torques, each part (T, n) in Nm. Offline scoring (evaluate, benchmarks), not the 1 kHz path."""
        self.reset()
        out = TorquePrediction(*(np.empty((len(q), self.n)) for _ in TorquePrediction._fields))
        for t in range(len(q)):
            for whole, tick in zip(out, self.step(q[t], dq[t], ddq[t]), strict=True):
                whole[t] = tick
        return out

    def warm_up(self, q: np.ndarray, dq: np.ndarray | None = None, ddq: np.ndarray | None = None,
                steps: int = PAPER_WARMUP_TICKS) -> int:
        """Settle the recurrent state before control starts (Reuss Sec. VI: 500 iterations); returns the steps run.

        ``q, dq, ddq`` either (n,) (held for at most ``steps`` ticks; dq, ddq default 0) or a recorded
        history (T, n) that is replayed once. Held input stops early once a step leaves the state bit for bit
        unchanged: every further step would repeat it, so the result equals all ``steps`` (a model without state:
        0 steps; the rotational displacement's state: settled by the first, 2 run; an LSTM usually runs them all).
        """
        q = np.asarray(q, dtype=np.float64)
        dq = np.zeros_like(q) if dq is None else np.asarray(dq, dtype=np.float64)
        ddq = np.zeros_like(q) if ddq is None else np.asarray(ddq, dtype=np.float64)
        if q.ndim == 2:
            for t in range(len(q)):
                self.step(q[t], dq[t], ddq[t])
            return len(q)
        if not self._state:
            return 0
        before = [buf.copy() for _, _, buf in self._state]
        for k in range(1, steps + 1):
            check = k <= 4 or k % 16 == 0  # not every step: an LSTM rarely settles, and checking costs 30 %
            if check:
                for old, (_, _, buf) in zip(before, self._state, strict=True):
                    np.copyto(old, buf)
            self.step(q, dq, ddq)
            if check and all(np.array_equal(old, buf) for old, (_, _, buf) in zip(before, self._state, strict=True)):
                return k
        return steps

    @property
    def state(self) -> list[np.ndarray]:
        """Current recurrent state arrays (copies)."""
        return [buf.copy() for _, _, buf in self._state]
