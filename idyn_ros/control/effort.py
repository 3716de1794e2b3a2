"""Joint effort as reported -> joint torque [Nm]: the one place that knows what a /joint_states effort means.

A UR arm's driver reports motor currents [A] by default (``use_currents_as_efforts``), every other arm here
joint torques. A model trained on currents (``idyn train`` on a UR bag) carries the gains it identified
(artifact metadata ``effort``); the nodes and ``idyn wrench`` turn efforts into torques with exactly those
gains, so the model and the observer see the same Nm as in training.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from idyn_ros.errors import ParameterError
from idyn_ros.parameters import EFFORT_UNITS
from idyn_ros.robots.drives import valid_torque_constants


class EffortToTorque:
    """``torque(effort)`` in Nm; ``describe()`` is the start-up line a node logs.

    Args:
        unit: ``torque`` (effort is Nm), ``current`` (effort is A: tau = k * i), ``auto`` (what the model was
            trained on: current when its metadata carries gains or ``gains`` are given, else torque).
        n: joints.
        model_effort: the artifact's ``effort`` metadata entry (None: no model, or one from before gains).
        gains: k [Nm/A] (n,) overriding the model's; empty: the model's, else the robot data's.
        robot_gains: the robot data's gains (``idyn_ros.robots.drives``) as a last resort, with a warning line.
    """

    def __init__(self, unit: str, n: int, model_effort: dict[str, Any] | None = None,
                 gains: Sequence[float] = (), robot_gains: np.ndarray | None = None) -> None:
        if unit not in EFFORT_UNITS:
            raise ParameterError(f"effort unit {unit!r} is not one of {list(EFFORT_UNITS)}")
        model_gains = None
        if model_effort and model_effort.get("kind") == "current":
            model_gains = np.asarray(model_effort["torque_constants"], dtype=np.float64)
        if unit == "auto":  # decision: gains given by the user mean the efforts are currents (else they mean nothing)
            unit = "current" if model_gains is not None or len(gains) else "torque"
        self.unit = unit
        self.gains = np.ones(n)
        self.source = "effort is joint torque [Nm]"
        self.warning = ""
        if self.unit == "torque":
            if model_gains is not None:
                self.warning = ("the model was trained on motor currents but effort is read as torque [Nm] "
                                "(effort_unit torque): its torques and the efforts disagree in scale")
            return
        if len(gains):
            k, where = np.asarray(gains, dtype=np.float64), "the torque_constants parameter"
        elif model_gains is not None:
            k, where = model_gains, "the model's metadata (identified with it)"
        elif robot_gains is not None:
            k, where = np.asarray(robot_gains, dtype=np.float64), "the robot data (not identified with the model)"
            self.warning = ("effort is motor current but the model carries no gains: using the robot data's "
                            "nominal gains; train on current data (`idyn train`) for identified ones")
        else:
            raise ParameterError("effort is motor current [A] but there are no gains: no model trained on currents, "
                                 "no robot data and no torque_constants parameter; set torque_constants (Nm/A)")
        if not valid_torque_constants(k, n):
            raise ParameterError(f"torque constants {k.tolist()} from {where}: need {n} finite gains > 0 Nm/A")
        self.gains = k
        self.source = (f"effort is motor current [A]: tau = k * i with k = [{', '.join(f'{v:.3g}' for v in k)}] "
                       f"Nm/A from {where}")

    def torque(self, effort: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Effort (n,) -> torque (n,) Nm, into ``out`` when given (no allocation)."""
        if out is None:
            return effort * self.gains if self.unit == "current" else np.array(effort, dtype=np.float64)
        if self.unit == "current":
            np.multiply(effort, self.gains, out=out)
        else:
            out[:] = effort
        return out

    def describe(self) -> str:
        return self.source
