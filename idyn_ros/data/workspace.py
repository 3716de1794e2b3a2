"""Where a designed excitation may take the arm: above the surface it is mounted on, out of its own base column.

An optimal excitation uses the joints' whole ranges, and joint limits alone let a table-mounted arm reach below its
mounting plane (the UR5's default design went 0.84 m below it) or fold its wrist into its own base. This is a guard
for the two crashes every cell has, not a collision check: no link geometry, no fixtures, no other links.

Checked points (base frame, z up from the mounting plane): the origins of the joints after the second (the first two
sit on the base column by construction), the flange, and a tool tip ``tool_length`` ahead of the flange along its z.
- floor: every checked point at least ``floor`` above the mounting plane (z >= floor);
- base column: the distal points (the last three joints' origins, the flange, the tool tip) outside a vertical cylinder
  of radius ``base_radius`` about the base z axis, below ``base_height`` (default: the second joint's height at the
  zero pose + ``base_radius``); above it a wrist near the axis is an arm reaching up, not a crash.
Margins are in metres, >= 0 where the pose is allowed; the constraint Jacobians are analytic (frame Jacobians through
the trajectory's linear dependence on its coefficients), so the optimiser can use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.data.trajectories import joint_line
from idyn_ros.errors import ParameterError

#: The defaults of ``idyn excite``: links' radii are 0.05-0.1 m on these arms, so a joint origin 0.1 m up keeps its
#: housing off the surface; a hand or gripper reaches about 0.1 m beyond the flange.
DEFAULT_FLOOR = 0.10
DEFAULT_TOOL_LENGTH = 0.10
DEFAULT_BASE_RADIUS = 0.15
DISTAL_JOINTS = 3


@dataclass(frozen=True)
class Workspace:
    """The two limits of the module doc; ``base_height`` None = the second joint's height + ``base_radius``."""

    floor: float = DEFAULT_FLOOR
    tool_length: float = DEFAULT_TOOL_LENGTH
    base_radius: float = DEFAULT_BASE_RADIUS
    base_height: float | None = None

    def __post_init__(self) -> None:
        for name in ("floor", "tool_length", "base_radius"):
            value = getattr(self, name)
            if not np.isfinite(value):
                raise ParameterError(f"workspace {name} must be a finite number of metres, got {value}")
        if self.tool_length < 0 or self.base_radius < 0:
            raise ParameterError("workspace tool_length and base_radius must be >= 0 m")

    def describe(self) -> str:
        return (f"workspace: every joint origin after the second, the flange and a tool tip {self.tool_length:g} m "
                f"beyond it stay {self.floor:g} m above the mounting plane; the wrist, flange and tool tip stay "
                f"{self.base_radius:g} m from the base axis below the shoulder")


class WorkspaceGuard:
    """Margins and their Jacobians for one robot (``RobotModel``) and ``Workspace``; reuses one pinocchio Data."""

    def __init__(self, model: Any, workspace: Workspace) -> None:
        import pinocchio as pin

        self.pin = pin
        self.model = model.pin_model
        self.data = self.model.createData()
        self.ws = workspace
        self.flange = self.model.getFrameId(model.flange_frame)
        self.joints = list(range(3, self.model.njoints))  # pinocchio joint ids; 1 and 2 are the first two joints
        self.distal = self.joints[-DISTAL_JOINTS:]
        pin.forwardKinematics(self.model, self.data, pin.neutral(self.model))
        shoulder = float(self.data.oMi[min(2, self.model.njoints - 1)].translation[2])
        self.base_height = workspace.base_height if workspace.base_height is not None else (
            shoulder + workspace.base_radius)
        # rows: floor margins of every point, then base margins of the distal points
        self.n_points = len(self.joints) + 2
        self.n_distal = len(self.distal) + 2

    def _positions(self, q: np.ndarray) -> np.ndarray:
        """World positions (T, n_points, 3) of the checked points (the joints from the third, the flange, the tool tip)
        for poses ``q`` (T, n): the joints' placements and the one flange frame, 9 us a pose here."""
        pin, m, d = self.pin, self.model, self.data
        pos = np.empty((len(q), self.n_points, 3))
        tool = np.array([0.0, 0.0, self.ws.tool_length])
        for t, qt in enumerate(q):
            pin.forwardKinematics(m, d, qt)
            for i, j in enumerate(self.joints):
                pos[t, i] = d.oMi[j].translation
            placement = pin.updateFramePlacement(m, d, self.flange)  # the one frame needed, not all of them
            pos[t, -2] = placement.translation
            pos[t, -1] = placement.translation + placement.rotation @ tool
        return pos

    def _positions_and_jacobians(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``_positions`` and their translational Jacobians (T, n_points, 3, n)."""
        pin, m, d = self.pin, self.model, self.data
        frame = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        pos = np.empty((len(q), self.n_points, 3))
        jac = np.empty((len(q), self.n_points, 3, m.nv))
        for t, qt in enumerate(q):
            pin.computeJointJacobians(m, d, qt)
            pin.updateFramePlacements(m, d)
            for i, j in enumerate(self.joints):
                pos[t, i] = d.oMi[j].translation
                jac[t, i] = pin.getJointJacobian(m, d, j, frame)[:3]
            placement = d.oMf[self.flange]
            offset = placement.rotation @ np.array([0.0, 0.0, self.ws.tool_length])
            J = pin.getFrameJacobian(m, d, self.flange, frame)
            skew = np.array([[0.0, -offset[2], offset[1]], [offset[2], 0.0, -offset[0]],
                             [-offset[1], offset[0], 0.0]])
            pos[t, -2], jac[t, -2] = placement.translation, J[:3]
            pos[t, -1], jac[t, -1] = placement.translation + offset, J[:3] - skew @ J[3:]  # v_tip = v + w x offset
        return pos, jac

    def _base_parts(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Of the distal points (the last ``n_distal``: the wrist joints, the flange, the tool tip): their distance
        from the base axis, how far that is outside the column, and how far they are above it."""
        far = pos[:, self.n_points - self.n_distal:]
        r = np.hypot(far[..., 0], far[..., 1])
        return r, r - self.ws.base_radius, far[..., 2] - self.base_height

    def margins(self, q: np.ndarray, dq_dz: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Margins (T * rows,) for poses ``q`` (T, n) [m, >= 0 allowed]; with ``dq_dz`` (T, n, p), the pose's
        derivative with respect to p trajectory coefficients, also their Jacobian (T * rows, p). Rows: the floor
        margin of every point, then the base margin of each distal point (outside the column, or above it)."""
        q = np.atleast_2d(q)
        if dq_dz is None:
            pos, jac = self._positions(q), None
        else:
            pos, jac = self._positions_and_jacobians(q)
        r, radial, above = self._base_parts(pos)
        values = np.hstack([pos[..., 2] - self.ws.floor, np.maximum(radial, above)])
        if jac is None:
            return values.ravel(), None
        dpos = np.einsum("tixn,tnp->tixp", jac, dq_dz)  # d position / dz: (T, n_points, 3, p)
        dfar = dpos[:, self.n_points - self.n_distal:]
        unit = pos[:, self.n_points - self.n_distal:, :2] / np.maximum(r, 1e-9)[..., None]
        dradial = np.einsum("tix,tixp->tip", unit, dfar[..., :2, :])
        dbase = np.where((radial >= above)[..., None], dradial, dfar[..., 2, :])
        grad = np.concatenate([dpos[..., 2, :], dbase], axis=1)
        return values.ravel(), grad.reshape(-1, grad.shape[2])

    def check(self, q: np.ndarray) -> dict[str, Any]:
        """The margins of a whole trajectory (T, n): ``ok``, the smallest floor and base margins [m] and where."""
        return self._summary(self.margins(q)[0].reshape(len(np.atleast_2d(q)), -1))

    def move_check(self, q: np.ndarray) -> dict[str, Any]:
        """``check`` for a move from the arm's pose ``q[0]``: a checked point already outside there may not go further
        out (margins relative to where it starts), so an arm found outside can still be moved back in."""
        values = self.margins(q)[0].reshape(len(np.atleast_2d(q)), -1)
        summary = self._summary(values - np.minimum(values[0], 0.0))
        summary["starts_outside"] = bool(values[0].min() < -1e-6)
        return summary

    def _summary(self, values: np.ndarray) -> dict[str, Any]:
        floor, base = values[:, : self.n_points], values[:, self.n_points :]
        t_floor, t_base = np.unravel_index(np.argmin(floor), floor.shape), np.unravel_index(np.argmin(base), base.shape)
        return {"ok": bool(values.min() >= -1e-6), "floor_margin": float(floor.min()),
                "base_margin": float(base.min()), "floor_sample": int(t_floor[0]), "base_sample": int(t_base[0])}


def workspace_arrays(ws: Workspace) -> dict[str, np.ndarray]:
    """What an excitation file records of the workspace it was designed in (``read_workspace`` reads it back)."""
    return {"workspace": np.array(ws.describe()), "workspace_floor": np.array(ws.floor),
            "workspace_tool_length": np.array(ws.tool_length), "workspace_base_clearance": np.array(ws.base_radius)}


def read_workspace(path: str | Path) -> Workspace | None:
    """The workspace a trajectory file (``idyn excite``) was designed in, or None when it records none."""
    with np.load(path, allow_pickle=False) as data:
        if "workspace_floor" not in data.files:
            return None
        return Workspace(float(data["workspace_floor"]), float(data["workspace_tool_length"]),
                         float(data["workspace_base_clearance"]))


def line_problem(guard: WorkspaceGuard, q_from: np.ndarray, q_to: np.ndarray, samples: int = 50) -> str:
    """Why the joint-space straight line from the arm's pose ``q_from`` to ``q_to`` (a min-jerk move follows it)
    leaves the workspace ("" if it does not; ``move_problem``'s rule)."""
    return move_problem(guard, joint_line(q_from, q_to, samples))


def move_problem(guard: WorkspaceGuard, q: np.ndarray) -> str:
    """Why a move through poses ``q`` (T, n) from the arm's pose ``q[0]`` leaves the workspace ("" if it does not);
    from a pose already outside it may not go further out (``WorkspaceGuard.move_check``)."""
    check = guard.move_check(q)
    said = problem(check, guard.ws)
    if said and check["starts_outside"]:  # the distances are then beyond where the arm already is
        said = f"the arm is outside the workspace already and the move takes it further out: {said}"
    return said


def workspace_of(params: Any) -> Workspace | None:
    """The workspace a node's ``workspace_*`` parameters give, None when ``workspace_check`` is false."""
    if not params.workspace_check:
        return None
    return Workspace(params.workspace_floor, params.workspace_tool_length, params.workspace_base_clearance)


def problem(check: dict[str, Any], ws: Workspace) -> str:
    """Why a trajectory fails the workspace check ("" if it does not)."""
    if check["ok"]:
        return ""
    said = []
    if check["floor_margin"] < -1e-6:
        said.append(f"a checked point comes {-check['floor_margin']:.3f} m too low (below {ws.floor:g} m above the "
                    "mounting plane)")
    if check["base_margin"] < -1e-6:
        said.append(f"the wrist or tool comes {-check['base_margin']:.3f} m into the base column "
                    f"(radius {ws.base_radius:g} m)")
    return "; ".join(said)
