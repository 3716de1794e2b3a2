"""The embedded plant: a torque-controlled arm simulated by MuJoCo, compiled from the project's URDF.

Why MuJoCo behind our own class: the controllers must meet a robot that is *not* their model (the
"true" profile: perturbed inertials, friction with stiction, latency, sensor noise), while tests
need a plant that *is* the model (the "ideal" profile agrees with pinocchio RNEA to round-off).

Physics: MuJoCo's implicitfast integrator (semi-implicit Euler: dq' = dq + h ddq(q, dq), q' = q + h dq')
with timestep = 1 / physics_rate_hz; contacts off; the torque command is held over the
``physics_rate_hz / control_rate_hz`` substeps of one control period (zero-order hold, like a drive).
Per physics step the generalised force is

    qfrc = tau - s_T smooth_friction(dq) - tau ripple(q) - s_T F_h z + J(q)^T F_ext

with tau = sat(tau_cmd delayed by latency_ticks), the drive torque, ripple(q) the fraction of it the transmission
does not pass on, and dry friction (stiction) added by MuJoCo's frictionloss constraint (idyn_ros/sim/friction.py),
its level s_T (static + load_friction |tau|) set once per control period, and the joint effects (load-dependent
friction, ripple, Dahl hysteresis z, temperature scale s_T) of idyn_ros/sim/joint_effects.py.

Decision - integrator: implicitfast at 1 kHz, one substep: every acceptance check holds and RK4 costs
3.5-4x more per mj_step (numbers and command: studies/plant_integrator/README.md). Where the profile's effects
run: armature and dry friction stay in C (dof_armature, frictionloss: stiction needs the constraint). The
Gaz sigmoid and Stribeck drop have no MuJoCo counterpart (a Python mjcb_passive callback would run the same
math, called from C), so they run once per physics step as SmoothFriction (2-5 us); viscous stays with them:
as dof_damping it saved nothing measurable and would be integrated implicitly, i.e. differ from the friction
the plant reports. Latency (ring buffer) and sensor noise (drawn in blocks) are numpy.

Decision - what the plant reports as "effort" (like a Panda's tau_J / a ros2_control effort state):
the torque the joint drive applies, i.e. the command after latency and saturation (or, with elastic
joints, the spring torque a link-side sensor reads), plus the profile's sensor offset and noise. It
does NOT subtract friction or rotor inertia: that is the signal a learned model of
tau = f(q, dq, ddq) is trained on, so friction is something the models must learn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from idyn_ros.errors import ParameterError, RobotDescriptionError
from idyn_ros.robots.spec import Payload
from idyn_ros.sim.friction import SmoothFriction, smooth_friction
from idyn_ros.sim.joint_effects import JointEffectState
from idyn_ros.sim.profile import BodyInertial, PlantProfile, load_profile
from idyn_ros.sim.urdf import (
    EMPTY_LINK,
    LinkInertial,
    add_fixed_link,
    effort_limits,
    leaf_link,
    moving_joints,
    read_inertials,
    rigid_bodies,
    strip_for_mujoco,
    urdf_joint_dynamics,
    write_inertials,
)

PAYLOAD_LINK = "idyn_payload"
# a payload given as a point mass (zero inertia, as the other nodes take it) is simulated as a solid sphere of this
# radius: MuJoCo refuses a body whose inertia has a zero eigenvalue. 0.1 mm adds 4e-9 kg m^2 per kg, 1e-5 of the
# smallest wrist inertia (iiwa14 A7, 3.1e-4 kg m^2) per kg, so the plant moves like the models' point mass
POINT_MASS_RADIUS = 1e-4  # m


@dataclass(frozen=True)
class RobotDescription:
    """What the plant needs to know about a robot: its URDF, joint order, flange and controller name."""

    name: str | None
    urdf_xml: str
    joint_names: tuple[str, ...]
    flange_link: str
    effort_controller: str = "effort_controller"


def resolve_robot(robot: str, urdf_xml: str | None = None, prefix: str = "") -> RobotDescription:
    """Robot name (``idyn_ros.robots``) or URDF path -> RobotDescription.

    ``urdf_xml`` overrides the URDF (e.g. a test URDF) while keeping the robot's joint names when known;
    ``prefix`` renames a preset's joints and links (``fr3_`` -> ``fr3_joint1``), as its driver would.
    """
    spec = None
    if not (str(robot).endswith(".urdf") or str(robot).endswith(".xml")):
        from idyn_ros.robots import get_robot, render_urdf

        spec = get_robot(robot).with_prefix(prefix) if prefix else get_robot(robot)
        if urdf_xml is None:
            urdf_xml = render_urdf(spec, mode="mujoco")
    elif urdf_xml is None:
        path = Path(robot)
        if not path.is_file():
            raise RobotDescriptionError(f"URDF file {path} does not exist")
        urdf_xml = path.read_text()
    joints = moving_joints(urdf_xml)
    if spec is not None and all(j in joints for j in spec.joint_names):
        return RobotDescription(spec.name, urdf_xml, tuple(spec.joint_names), spec.flange_link, spec.effort_controller)
    return RobotDescription(spec.name if spec else None, urdf_xml, tuple(joints), leaf_link(urdf_xml))


@dataclass
class PlantState:
    """One sample of the plant, joint arrays (n,) in ``Plant.joint_names`` order.

    Measured (what a driver publishes): ``q`` (rad, quantised), ``dq`` (rad/s, + noise), ``tau`` (Nm,
    drive torque + sensor offset + noise). Ground truth for tests: ``q_true``, ``dq_true``, ``ddq``
    (rad/s^2, mean acceleration over the last control period, (dq_end - dq_start) / T), ``tau_drive``
    (Nm actually applied by the drives), ``tau_friction`` (Nm, smooth friction + dry-friction
    constraint force + the joint effects' ripple and hysteresis, the torque the drive must add), ``tau_ext``
    (Nm, J^T F of the applied wrench).
    """

    t: float
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    q_true: np.ndarray
    dq_true: np.ndarray
    ddq: np.ndarray
    tau_drive: np.ndarray
    tau_friction: np.ndarray
    tau_ext: np.ndarray


class Plant:
    """MuJoCo arm with a plant profile. Not thread-safe: one owner steps it.

    Args:
        robot: preset name (``panda``, ``iiwa14``, ``ur5``) or a URDF path.
        profile: ``"ideal" | "nominal" | "true"``, a profile YAML path, or a PlantProfile.
        physics_rate_hz: MuJoCo steps per second (timestep = 1 / rate).
        control_rate_hz: command updates per second; must divide physics_rate_hz.
        seed: seeds sensor noise.
        urdf_xml: URDF text overriding the robot's own (tests).
        initial_positions: q at rest (rad); default 0 clipped into each joint's range.
        prefix: joint/link name prefix of a preset ('' = the vendor default); the profile, written for the
            default names, applies joint by joint.
    """

    def __init__(
        self,
        robot: str = "panda",
        profile: str | Path | PlantProfile = "true",
        physics_rate_hz: float = 1000.0,
        control_rate_hz: float = 1000.0,
        seed: int = 0,
        urdf_xml: str | None = None,
        initial_positions: np.ndarray | list[float] | None = None,
        prefix: str = "",
    ) -> None:
        import mujoco

        self._mj = mujoco
        if physics_rate_hz <= 0 or control_rate_hz <= 0:
            raise ParameterError("physics_rate_hz and control_rate_hz must be > 0")
        ratio = physics_rate_hz / control_rate_hz
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise ParameterError(
                f"physics_rate_hz ({physics_rate_hz}) must be an integer multiple of control_rate_hz "
                f"({control_rate_hz}), e.g. 1000/1000 or 2000/1000"
            )
        self.description = resolve_robot(robot, urdf_xml, prefix)
        self.robot_name = self.description.name
        self.joint_names: tuple[str, ...] = self.description.joint_names
        self.n = len(self.joint_names)
        self.flange_link = self.description.flange_link
        self.profile = self._profile(profile, prefix)
        self.physics_dt = 1.0 / physics_rate_hz
        self.substeps = round(ratio)
        self.control_dt = self.substeps * self.physics_dt
        self.effort_limit = effort_limits(self.description.urdf_xml, self.joint_names)
        self._rng = np.random.default_rng(seed)
        self._payload: Payload | None = None
        self._friction = self.profile.friction
        if self.profile.use_urdf_dynamics:  # nominal: the URDF's own <dynamics>
            viscous, dry = urdf_joint_dynamics(self.description.urdf_xml, self.joint_names)
            f = self._friction
            self._friction = type(f)(dry, f.phi1, f.phi2, f.phi3, viscous, f.stribeck_drop, f.stribeck_velocity)
        self._smooth = SmoothFriction(self._friction)
        self._effects = JointEffectState(self.profile.effects)
        self._torque_noise = bool(np.any(self.profile.torque_noise_std))
        self._sensor_noise = bool(self._torque_noise or np.any(self.profile.torque_offset)
                                  or self.profile.velocity_noise_std > 0)
        self._noise_rows = 0  # rows left in the pre-drawn noise block (see _noise)
        self._nominal_inertials = read_inertials(self.description.urdf_xml)
        self._build_model()
        self._zero = np.zeros(self.n)
        self._latency = [np.zeros(self.n) for _ in range(self.profile.latency_ticks)]  # ring buffer of commands
        self._neg_effort_limit = -self.effort_limit
        self._latency_head = 0
        self._wrench = np.zeros(6)
        self._wrench_link = ""
        self._wrench_until = -1.0
        self._tau_ext = np.zeros(self.n)
        self._physics_steps = 0
        self.time = 0.0
        q0 = self._default_q() if initial_positions is None else np.asarray(initial_positions, float)
        self.reset(q0)

    # --- model construction ---------------------------------------------------------------------------

    def _profile(self, profile: str | Path | PlantProfile, prefix: str) -> PlantProfile:
        """The profile for these joints; a preset's profile names the vendor's joints, renamed here by position."""
        if not prefix or self.robot_name is None or isinstance(profile, PlantProfile):
            return load_profile(profile, self.robot_name, self.joint_names)
        import dataclasses

        from idyn_ros.robots import get_robot

        vendor = tuple(get_robot(self.robot_name).joint_names)
        loaded = load_profile(profile, self.robot_name, vendor)
        rename = dict(zip(vendor, self.joint_names, strict=True))
        return dataclasses.replace(loaded, joint_names=self.joint_names,
                                   inertial={rename[j]: p for j, p in loaded.inertial.items()})

    def true_urdf(self) -> str:
        """The URDF of the simulated robot (perturbed inertials + payloads), for parity tests."""
        xml = self.description.urdf_xml
        if self.profile.inertial:
            bodies = rigid_bodies(xml)
            unknown = sorted(set(self.profile.inertial) - set(bodies))
            if unknown:
                raise ParameterError(
                    f"plant profile {self.profile.source}: inertial entries for unknown joints {unknown}"
                )
            changed: dict[str, LinkInertial] = {}
            for joint, entry in self.profile.inertial.items():
                links = bodies[joint]
                if isinstance(entry, BodyInertial):  # identified as one body: all on the child link, the rest empty
                    changed[links[0]] = entry.link()
                    changed.update({link: EMPTY_LINK for link in links[1:]})
                    continue
                for link in links:
                    if link in self._nominal_inertials:
                        changed[link] = entry.apply(self._nominal_inertials[link])
            xml = write_inertials(xml, changed)
        total = self._attached_payload()
        if total is not None:
            xml = add_fixed_link(xml, self.flange_link, PAYLOAD_LINK, total)
        return xml

    def _attached_payload(self) -> LinkInertial | None:
        """Profile payload and service payload combined into one body (parallel-axis theorem)."""
        parts = [LinkInertial(p.mass, np.asarray(p.com), p.inertia_matrix())
                 for p in (self.profile.payload, self._payload) if p is not None and p.mass > 0]
        if not parts:
            return None
        mass = sum(p.mass for p in parts)
        com = sum(p.mass * p.com for p in parts) / mass
        inertia = np.zeros((3, 3))
        for p in parts:
            r = p.com - com
            inertia += p.inertia + p.mass * (r @ r * np.eye(3) - np.outer(r, r))
        floor = 0.4 * mass * POINT_MASS_RADIUS**2  # a solid sphere's: a point mass compiles too
        inertia += max(0.0, floor - float(np.linalg.eigvalsh(inertia).min())) * np.eye(3)
        return LinkInertial(mass, com, inertia)

    def _build_model(self) -> None:
        mj = self._mj
        xml = strip_for_mujoco(self.true_urdf())
        try:
            model = mj.MjModel.from_xml_string(xml)
        except ValueError as exc:
            raise RobotDescriptionError(f"MuJoCo cannot compile the URDF of {self.robot_name}: {exc}") from None
        model.opt.timestep = self.physics_dt
        model.opt.integrator = mj.mjtIntegrator.mjINT_IMPLICITFAST  # decision + numbers: module docstring
        model.opt.disableflags |= int(mj.mjtDisableBit.mjDSBL_CONTACT)
        missing = [j for j in self.joint_names if mj.mj_name2id(model, mj.mjtObj.mjOBJ_JOINT, j) < 0]
        if missing:
            raise RobotDescriptionError(f"joints {missing} are not in the compiled MuJoCo model")
        if model.nv != self.n:
            raise RobotDescriptionError(
                f"MuJoCo model has {model.nv} DoF but the robot has {self.n} joints {self.joint_names}: "
                "fix (type='fixed') any extra joint such as gripper fingers"
            )
        self._qidx = np.array([model.joint(j).qposadr[0] for j in self.joint_names])
        self._vidx = np.array([model.joint(j).dofadr[0] for j in self.joint_names])
        p = self.profile
        elastic = p.elasticity is not None
        model.dof_armature[self._vidx] = 0.0 if elastic else p.armature
        model.dof_damping[:] = 0.0  # viscous friction is applied explicitly (smooth_friction)
        model.dof_frictionloss[self._vidx] = self._friction.frictionloss
        # Firm stiction: a stiff (timeconst = 2 dt, the stable minimum) and hard (impedance 0.999)
        # dry-friction constraint creeps < 1e-4 rad/s at 75 % of the breakaway torque (tested).
        model.dof_solref[:] = (2.0 * self.physics_dt, 1.0)
        model.dof_solimp[:] = (0.999, 0.9999, 0.001, 0.5, 2.0)
        # Hard joint stops the same way: MuJoCo's default limit (timeconst 0.02 s) let a joint driven at its effort
        # limit 4.5-6.2 deg past its stop and rest 0.8-1.3 deg inside it; now < 0.35 deg and 0 (tested)
        model.jnt_solref[:] = (2.0 * self.physics_dt, 1.0)
        model.jnt_solimp[:] = (0.999, 0.9999, 0.001, 0.5, 2.0)
        old = getattr(self, "data", None)
        self.model = model
        self.data = mj.MjData(model)
        self._scratch = mj.MjData(model)
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))
        # nv == n and one DoF per joint, so the joint order is a permutation of MuJoCo's: the identity
        # for the built-in arms, where a slice makes every per-step read a view instead of a copy.
        ordered = np.array_equal(self._vidx, np.arange(self.n)) and np.array_equal(self._qidx, np.arange(self.n))
        self._vsel = slice(None) if ordered else self._vidx
        self._qsel = slice(None) if ordered else self._qidx
        if old is not None:
            self.data.qpos[:] = old.qpos
            self.data.qvel[:] = old.qvel
            self.data.time = old.time
            mj.mj_forward(model, self.data)

    def _joint_ranges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lower, upper, limited) per joint in our order (rad; MuJoCo marks an unlimited joint with hi <= lo)."""
        ids = [self.model.joint(j).id for j in self.joint_names]
        lo, hi = self.model.jnt_range[ids, 0], self.model.jnt_range[ids, 1]
        return lo, hi, hi > lo

    def _default_q(self) -> np.ndarray:
        lo, hi, limited = self._joint_ranges()
        return np.where(limited, np.clip(0.0, lo, hi), 0.0)

    # --- public API ---------------------------------------------------------------------------------

    def reset(self, q: np.ndarray | list[float] | None = None, dq: np.ndarray | None = None) -> PlantState:
        """Put the arm at rest (or at ``dq``) at ``q`` (rad); clears latency buffer and motor state.

        Sim time keeps running (a /clock never goes backwards).
        """
        q = self._default_q() if q is None else np.asarray(q, dtype=float)
        if q.shape != (self.n,) or not np.all(np.isfinite(q)):
            raise ParameterError(f"reset needs {self.n} finite joint positions for {self.joint_names}, got {q}")
        lo, hi, limited = self._joint_ranges()
        outside = [f"{j} {x:.4g} not in [{a:.4g}, {b:.4g}]" for j, x, a, b, lim in
                   zip(self.joint_names, q, lo, hi, limited, strict=True) if lim and not a <= x <= b]
        if outside:  # the joint limit would fling it back at tens of rad/s
            raise ParameterError(f"reset positions outside the joint limits (rad): {'; '.join(outside)}")
        d = self.data
        d.qpos[self._qidx] = q
        d.qvel[:] = 0.0
        if dq is not None:
            d.qvel[self._vidx] = dq
        d.qacc_warmstart[:] = 0.0
        self._mj.mj_forward(self.model, d)
        self._latency = [np.zeros(self.n) for _ in range(self.profile.latency_ticks)]
        self._tau_drive = np.zeros(self.n)
        self._dry_force = np.zeros(self.model.nv)  # _dry_friction_force's buffer
        self._ddq = np.zeros(self.n)
        self._tau_friction = np.zeros(self.n)
        self._effects.reset()
        self.model.dof_frictionloss[self._vidx] = self._friction.frictionloss
        if self.profile.elasticity is not None:
            self._theta = q.copy()  # motor angle (link side units)
            self._dtheta = d.qvel[self._vidx].copy()
            self._tau_spring = np.zeros(self.n)
        self._update_ext()
        return self.state()

    def step(self, tau_cmd: np.ndarray) -> PlantState:
        """Advance one control period with torque command ``tau_cmd`` (Nm, joint_names order), held.

        The drive saturates at the URDF effort limit (a real drive cannot exceed its peak torque);
        validation of malformed commands is the caller's job (see idyn_ros.sim.drive.CommandGate).
        Hint for controllers: the command is held for a whole period and the plant integrates it with
        semi-implicit Euler, so inverse dynamics at t or at the period's midpoint t + T/2 track alike
        (ideal Panda, Kp 10, 10 s of sinusoids: max error 1.2e-2 deg at t + T/2, 1.2e-2 at t; it was
        1e-4 vs 8e-3 deg with RK4, where the midpoint mattered).
        """
        self.advance(tau_cmd)
        return self.state()

    def advance(self, tau_cmd: np.ndarray) -> None:
        """``step`` without building the returned state: the hot path of a node that reads ``state()``
        only when it publishes. Same physics, same ground truth."""
        tau_cmd = np.asarray(tau_cmd, dtype=float)
        if tau_cmd.shape != (self.n,):
            raise ParameterError(f"step needs {self.n} torques for {self.joint_names}, got shape {tau_cmd.shape}")
        if self.profile.latency_ticks:  # ring buffer: apply the command of latency_ticks ticks ago
            head = self._latency_head
            delayed = self._latency[head]
            self._latency[head] = tau_cmd.copy()  # the caller may reuse its array (CommandGate does)
            self._latency_head = (head + 1) % len(self._latency)
            tau_cmd = delayed
        tau = np.minimum(np.maximum(tau_cmd, self._neg_effort_limit), self.effort_limit)
        self._tau_drive = tau
        mj, m, d = self._mj, self.model, self.data
        qvel, qfrc, qcon = d.qvel, d.qfrc_applied, d.qfrc_constraint  # views into MuJoCo's arrays
        vsel = self._vsel
        dq_start = qvel[vsel].copy()
        el = self.profile.elasticity
        smooth = self._smooth if self._smooth.active else None
        effects = self._effects if self._effects.active else None
        if effects is not None:  # dry friction of this period: load-dependent, temperature-scaled (joint_effects.py)
            m.dof_frictionloss[self._vidx] = effects.dry_friction(self._friction.frictionloss, tau)
        friction_sum = None
        tau_list = tau.tolist() if effects is not None and effects.position_dependent else None
        for _ in range(self.substeps):
            if self._wrench_until >= 0.0 and self.time >= self._wrench_until - 1e-12:
                self.clear_wrench()
            elif self._wrench_link:
                self._update_ext()
            if el is None:
                # one list of floats through SmoothFriction (why not numpy: friction.py)
                f_smooth = np.array(smooth(qvel[vsel].tolist())) if smooth else self._zero
                if effects is not None:
                    f_smooth = f_smooth * effects.scale
                    if effects.position_dependent:
                        f_smooth = f_smooth + effects.torque(d.qpos[self._qsel].tolist(), qvel[vsel].tolist(),
                                                             tau_list, self.physics_dt)
                drive = tau - f_smooth
                if self._wrench_link:
                    drive += self._tau_ext
                qfrc[vsel] = drive
            else:
                # Series elastic joint: B ddtheta = tau - K(theta-q) - D(dtheta-dq) - f(dtheta)
                # (semi-implicit Euler; stable for sqrt(K/B) dt < 2). Smooth friction acts on the motor;
                # the dry frictionloss stays a link-side MuJoCo constraint (approximation, kept simple; of the
                # joint effects only its load/temperature level applies here, no ripple or hysteresis).
                dq = qvel[vsel]
                q = d.qpos[self._qsel]
                spring = el.stiffness * (self._theta - q) + el.damping * (self._dtheta - dq)
                f_smooth = smooth_friction(self._dtheta, self._friction) if smooth else self._zero
                self._dtheta += self.physics_dt * (tau - spring - f_smooth) / el.motor_inertia
                self._theta += self.physics_dt * self._dtheta
                self._tau_spring = spring
                qfrc[vsel] = spring + self._tau_ext
            mj.mj_step(m, d)
            # frictionloss constraint force: qfrc_constraint, unless a joint is on its limit (d.nl rows), whose stop
            # force is no friction; then the dry-friction rows alone
            f = f_smooth - (qcon[vsel] if not d.nl else self._dry_friction_force())
            friction_sum = f if friction_sum is None else friction_sum + f
            self._physics_steps += 1
            self.time = self._physics_steps * self.physics_dt  # no accumulated round-off in stamps
        self._tau_friction = friction_sum if self.substeps == 1 else friction_sum / self.substeps
        if effects is not None:
            effects.heat(self._tau_friction, qvel[vsel], tau, self.control_dt)
        ddq = qvel[vsel] - dq_start
        ddq /= self.control_dt
        self._ddq = ddq

    def _dry_friction_force(self) -> np.ndarray:
        """The frictionloss constraint's generalised force (n,) of the last mj_step, without the joint-limit rows.

        MuJoCo orders the constraint rows equality, friction, limit, contact, so the friction rows are
        ``[ne, ne + nf)``; a dof-friction row's Jacobian is the unit vector of its dof (efc_id), so its force is that
        dof's alone (slices, not a type mask and np.add.at: 20 us a step on a stop).
        """
        d = self.data
        lo, hi = d.ne, d.ne + d.nf
        out = self._dry_force
        out.fill(0.0)
        out[d.efc_id[lo:hi]] = d.efc_force[lo:hi]
        return out[self._vidx]

    def _noise(self) -> tuple[np.ndarray, np.ndarray]:
        """(velocity noise, torque noise + offset) for one sample, rows of blocks drawn 256 samples at a
        time (one RNG call instead of two per tick; same distribution, seeded, deterministic)."""
        if self._noise_rows == 0:
            p = self.profile
            block = self._rng.standard_normal((256, 2, self.n))
            block[:, 0] *= p.velocity_noise_std
            block[:, 1] *= p.torque_noise_std
            block[:, 1] += p.torque_offset
            self._noise_block = block
            self._noise_rows = block.shape[0]
        self._noise_rows -= 1
        row = self._noise_block[self._noise_rows]
        return row[0], row[1]

    def state(self) -> PlantState:
        """Current measured and true state. Arrays are never mutated by the plant afterwards
        (each step makes new ones), so a PlantState stays valid; do not write into them.
        Each call draws fresh sensor noise."""
        d = self.data
        q, dq, tau = np.empty(self.n), np.empty(self.n), np.empty(self.n)
        self.measure(q, dq, tau)
        return PlantState(self.time, q, dq, tau, d.qpos[self._qsel].copy(), d.qvel[self._vsel].copy(), self._ddq,
                          self._tau_drive, self._tau_friction, self._tau_ext)

    def measure(self, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> None:
        """Write what the sensors read now into ``q`` (rad, quantised), ``dq`` (rad/s, + noise) and ``tau``
        (Nm, drive torque + offset + noise), each a writable float64 (n,) array, e.g. numpy views of a
        JointState's fields (the plant node: no per-tick message arrays). Draws fresh sensor noise."""
        d = self.data
        p = self.profile
        res = p.encoder_resolution
        if res > 0:
            np.divide(d.qpos[self._qsel], res, out=q)
            np.round(q, out=q)
            q *= res
        else:
            q[:] = d.qpos[self._qsel]
        dq[:] = d.qvel[self._vsel]
        tau[:] = self._tau_drive if p.elasticity is None else self._tau_spring
        if self._sensor_noise:
            dq_noise, tau_noise = self._noise()
            if p.velocity_noise_std > 0:
                dq += dq_noise
            tau += tau_noise

    def forward_acceleration(self, q: np.ndarray, dq: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """Forward dynamics ddq (rad/s^2) of the simulated robot at (q, dq) under drive torque ``tau``.

        Includes smooth friction, dry-friction constraint and armature; excludes latency and wrenches.
        Does not touch the plant's state.
        """
        mj, m, s = self._mj, self.model, self._scratch
        s.qpos[self._qidx] = q
        s.qvel[:] = 0.0
        s.qvel[self._vidx] = dq
        s.qfrc_applied[:] = 0.0
        f = smooth_friction(np.asarray(dq, float), self._friction) if not self._friction.is_zero else 0.0
        s.qfrc_applied[self._vidx] = np.asarray(tau, float) - f
        mj.mj_forward(m, s)
        return s.qacc[self._vidx].copy()

    # --- external wrench ------------------------------------------------------------------------------

    def apply_wrench(self, link: str | None, wrench: np.ndarray, duration: float) -> None:
        """Apply ``wrench`` = (fx, fy, fz, mx, my, mz) (N, Nm; world axes, at the link frame origin) on
        ``link`` ("" / None = flange) for ``duration`` s of sim time (inf = until cleared; <= 0 clears).
        """
        wrench = np.asarray(wrench, dtype=float)
        if wrench.shape != (6,) or not np.all(np.isfinite(wrench)):
            raise ParameterError(f"wrench must be 6 finite numbers (fx fy fz mx my mz), got {wrench}")
        if math.isnan(duration):
            raise ParameterError("the wrench duration is NaN: give seconds (inf: until cleared, <= 0: clear)")
        if duration <= 0:
            self.clear_wrench()
            return
        link = link or self.flange_link
        if self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_BODY, link) < 0:
            bodies = [self.model.body(i).name for i in range(1, self.model.nbody)]
            raise ParameterError(f"unknown link {link!r} for a wrench; links: {bodies}")
        self._wrench = wrench.copy()
        self._wrench_link = link
        self._wrench_until = self.time + duration if np.isfinite(duration) else -1.0
        self._update_ext()

    def clear_wrench(self) -> None:
        self._wrench[:] = 0.0
        self._wrench_link = ""
        self._wrench_until = -1.0
        self._tau_ext = np.zeros(self.n)

    @property
    def wrench_link(self) -> str:
        """Link the current wrench acts on ("" when none); cheap, for per-tick checks."""
        return self._wrench_link

    @property
    def external_torque(self) -> np.ndarray:
        """J^T F (Nm, joint order) of the wrench acting now (zeros when none); a copy. Draws no sensor noise."""
        return self._tau_ext.copy()

    @property
    def wrench(self) -> tuple[str, np.ndarray]:
        """(link, wrench) currently applied ("" and zeros when none)."""
        return self._wrench_link, self._wrench.copy()

    def _update_ext(self) -> None:
        """tau_ext = J(q)^T F with J the world-aligned Jacobian of the link frame origin."""
        if not self._wrench_link:
            self._tau_ext = np.zeros(self.n)
            return
        mj, m, d = self._mj, self.model, self.data
        body = mj.mj_name2id(m, mj.mjtObj.mjOBJ_BODY, self._wrench_link)
        mj.mj_kinematics(m, d)
        mj.mj_comPos(m, d)
        mj.mj_jac(m, d, self._jacp, self._jacr, d.xpos[body], body)
        self._tau_ext = (self._jacp.T @ self._wrench[:3] + self._jacr.T @ self._wrench[3:])[self._vidx]

    # --- payload --------------------------------------------------------------------------------------

    def set_payload(self, payload: Payload | None) -> None:
        """Attach (mass > 0) or detach (None or mass 0) a payload at the flange; keeps q, dq.

        RobotDescriptionError for a non-physical payload (checked by ``Payload`` itself).
        """
        payload = None if payload is None else Payload.coerce(payload)
        previous = self._payload
        self._payload = None if payload is None or payload.mass == 0.0 else payload
        try:
            self._build_model()
        except RobotDescriptionError:
            self._payload = previous  # MuJoCo refused it: the plant keeps the payload it runs with
            raise
        self._update_ext()

    @property
    def payload_mass(self) -> float:
        """kg attached at the flange (profile payload + set_payload)."""
        total = self._attached_payload()
        return 0.0 if total is None else total.mass
