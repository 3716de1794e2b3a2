"""The true robot's joint effects beyond rigid body + viscous/Coulomb: load friction, ripple, hysteresis, heat."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from idyn_ros.errors import ParameterError
from idyn_ros.sim import Plant, load_profile
from idyn_ros.sim.joint_effects import JointEffectState
from idyn_ros.sim.profile import profiles_dir

from .conftest import ripple_torque

PANDA_Q = np.array([0.0, 0.6, 0.0, -1.8, 0.0, 1.8, 0.5])


def _only(tmp_path, robot: str, keep: str, **override) -> Plant:
    """The robot's true profile with every joint effect but ``keep`` off (and no noise, offset, latency)."""
    data = yaml.safe_load((profiles_dir() / f"{robot}_true.yaml").read_text())
    for entry in data["joints"].values():
        eff = entry["effects"]
        entry["effects"] = {keep: override.get(keep, eff[keep])} if keep else {}
        entry["sensor"] = {"torque_noise_std": 0.0, "torque_offset": 0.0}
    data["command"]["latency_ticks"] = 0
    path = tmp_path / f"{robot}_{keep or 'none'}.yaml"
    path.write_text(yaml.safe_dump(data))
    return Plant(robot, profile=path)


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_true_profiles_have_every_effect_and_ideal_none(robot):
    true = Plant(robot, "true").profile.effects
    assert np.all(true.load_friction > 0) and np.all(true.hysteresis_torque > 0)
    assert np.all(true.ripple_ratio > 0) and np.all(true.thermal_coefficient > 0)
    assert Plant(robot, "ideal").profile.effects.is_zero and Plant(robot, "nominal").profile.effects.is_zero


def test_load_dependent_friction_holds_a_loaded_joint_that_breaks_away_without_it(tmp_path):
    """Joint 2 carries gravity: 1.5 x its breakaway pushes it away, unless the load raised the breakaway."""
    import pinocchio as pin

    results = {}
    for keep in ("", "load_friction"):
        plant = _only(tmp_path, "panda", keep)
        pm = pin.buildModelFromXML(plant.true_urdf())
        data = pm.createData()
        push = 1.5 * plant.profile.friction.frictionloss * (np.arange(7) == 1)
        s = plant.reset(PANDA_Q)
        assert abs(pin.computeGeneralizedGravity(pm, data, PANDA_Q)[1]) > 10.0  # a loaded joint
        for _ in range(400):
            s = plant.step(pin.computeGeneralizedGravity(pm, data, s.q_true) + push)
        results[keep] = abs(s.q_true[1] - PANDA_Q[1])
    assert results[""] > 1e-3 and results["load_friction"] < 1e-4, results


def test_ripple_is_a_position_dependent_part_of_the_drive_torque_the_link_misses(tmp_path):
    """The link gets tau (1 - ratio(q)): from rest, gravity / (1 - ratio) holds, gravity alone accelerates by
    -M^-1 (gravity ratio), and no drive torque means no ripple."""
    import pinocchio as pin

    plant = _only(tmp_path, "ur5", "ripple")
    pm = pin.buildModelFromXML(plant.true_urdf())
    data = pm.createData()
    q = np.array([0.3, -1.2, 1.0, -1.0, 0.5, 0.2])
    ratio = ripple_torque(q, np.ones(6), plant.profile.effects)
    assert np.abs(ratio).max() > 0.005
    g = pin.computeGeneralizedGravity(pm, data, q)
    np.testing.assert_allclose(ripple_torque(q, g, plant.profile.effects), g * ratio)
    assert not np.any(ripple_torque(q, np.zeros(6), plant.profile.effects))
    # no dry friction either, so the joint moves at once (frictionloss would hold torques below it)
    plant.model.dof_frictionloss[:] = 0.0
    plant._friction = type(plant._friction).zeros(plant.n)
    plant.reset(q)
    held = plant.step(g / (1.0 - ratio))
    assert np.abs(held.ddq).max() < 1e-2
    plant.reset(q)
    s = plant.step(g)
    M = pin.crba(pm, data, q)
    M = np.triu(M) + np.triu(M, 1).T + np.diag(plant.profile.armature)
    assert np.allclose(s.ddq, np.linalg.solve(M, -g * ratio), rtol=0.02, atol=1e-3)


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_an_arm_given_exactly_its_gravity_torque_does_not_wander(robot):
    """A load-free ripple of 2.4-2.75x the breakaway friction swung a Panda's joint 1 by 18 deg in 2 s."""
    import pinocchio as pin

    plant = Plant(robot, "true")
    effects = plant.profile.effects
    assert np.all(effects.ripple_ratio.sum(axis=1) < effects.load_friction)  # the dry friction holds the ripple
    pm = pin.buildModelFromXML(plant.true_urdf())
    data = pm.createData()
    q0 = {"panda": PANDA_Q, "iiwa14": np.array([0.3, 0.6, -0.2, -1.2, 0.4, 0.8, 0.1]),
          "ur5": np.array([0.3, -1.2, 1.0, -1.0, 0.5, 0.2])}[robot]
    s = plant.reset(q0)
    for _ in range(2000):
        s = plant.step(pin.computeGeneralizedGravity(pm, data, s.q_true))
    assert np.abs(s.q_true - q0).max() < 1e-3, np.degrees(s.q_true - q0)


def test_dahl_hysteresis_switches_over_its_travel_and_shows_in_the_friction():
    plant = Plant("panda", "true")
    travel = plant.profile.effects.hysteresis_travel[0]
    # from -1 to 0 takes x_h ln 2 of travel, at any speed and step (the plant's own per-step update)
    for v, dt in ((0.1, 1e-3), (2.0, 1e-2)):
        state = JointEffectState(plant.profile.effects)
        state.z = [-1.0] * 7
        for _ in range(round(travel * math.log(2) / (v * dt))):
            state.torque(PANDA_Q.tolist(), [v] * 7, [0.0] * 7, dt)
        assert abs(state.z[0]) < 0.02 * max(1.0, v * dt / (travel * 0.01)), (v, dt, state.z[0])
    state.z = [-1.0] * 7
    state.torque(PANDA_Q.tolist(), [0.0] * 7, [0.0] * 7, 1.0)
    assert state.z[0] == -1.0  # at rest the deflection stays
    state = JointEffectState(plant.profile.effects)
    f_h = plant.profile.effects.hysteresis_torque
    for _ in range(2000):  # 2 rad of travel forward: saturated at +F_h (temperature still at reference)
        state.torque(PANDA_Q.tolist(), [1.0] * 7, [0.0] * 7, 1e-3)
    t_fwd = np.array(state.torque(PANDA_Q.tolist(), [0.0] * 7, [0.0] * 7, 1e-3))  # no drive torque: no ripple
    assert np.allclose(t_fwd, f_h, rtol=1e-6)


def test_the_joint_warms_over_minutes_lowers_friction_and_a_reset_cools_it():
    effects = Plant("iiwa14", "true").profile.effects
    state = JointEffectState(effects)
    n = len(effects.load_friction)
    tau = np.full(n, 20.0)
    power = effects.copper_loss * tau**2
    for _ in range(int(effects.thermal_time_constant[0] * 1000)):  # one time constant at 1 kHz
        state.heat(np.zeros(n), np.zeros(n), tau, 1e-3)
    rise = state.temperature - effects.ambient
    assert np.allclose(rise, (1 - math.exp(-1)) * effects.thermal_rise_per_watt * power, rtol=0.01)
    assert np.all(state.scale < 1.0)
    assert np.allclose(state.scale, 1.0 - effects.thermal_coefficient * rise)
    static = np.ones(n)
    assert np.all(state.dry_friction(static, np.zeros(n)) < 1.0)
    state.reset()
    assert np.all(state.temperature == effects.ambient) and np.all(state.scale == 1.0)


def test_bad_effects_entries_are_named(tmp_path):
    data = yaml.safe_load((profiles_dir() / "ur5_true.yaml").read_text())
    joints = tuple(data["joints"])
    first = next(iter(data["joints"].values()))
    first["effects"]["hysteresis"]["travel"] = 0.0
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ParameterError, match=r"bad\.yaml.*travel"):
        load_profile(path, "ur5", joints)
    first["effects"]["hysteresis"]["travel"] = 0.035
    first["effects"]["ripple"] = "large"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ParameterError, match=r"bad\.yaml.*effects"):
        load_profile(path, "ur5", joints)
    first["effects"]["ripple"] = [{"amplitude": 0.48, "order": 1, "phase": 0.7}]  # a profile from before the ratio
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ParameterError, match=r"bad\.yaml.*'ratio'.*regenerate"):
        load_profile(path, "ur5", joints)
