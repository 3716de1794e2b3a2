"""Command gate rules, friction shape, stiction, and the true-robot profiles."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.errors import ParameterError
from idyn_ros.sim import CommandGate, Plant, load_profile
from idyn_ros.sim.friction import FrictionParameters, smooth_friction, total_friction
from idyn_ros.sim.profile import GAZ_PANDA_PHI1, GAZ_PANDA_PHI2, GAZ_PANDA_PHI3, profiles_dir
from idyn_ros.sim.urdf import read_inertials, rigid_bodies

from .conftest import ripple_torque

LIMIT = np.array([87.0, 87.0, 12.0])


def test_gate_rejects_length_nonfinite_and_limits():
    gate = CommandGate(LIMIT, "reject", timeout=0.1)
    assert gate.submit([1.0, 2.0, 3.0], now=0.0)
    assert not gate.submit([1.0, 2.0], now=0.001)
    assert not gate.submit([1.0, np.nan, 3.0], now=0.002)
    assert not gate.submit([1.0, np.inf, 3.0], now=0.003)
    assert not gate.submit([1.0, 2.0, 13.0], now=0.004)
    c = gate.counters
    assert (c.received, c.accepted, c.rejected_length, c.rejected_nonfinite, c.rejected_limit) == (5, 1, 1, 2, 1)
    assert c.rejected == 4
    # the previous accepted command stays in force
    assert np.array_equal(gate.command(0.005), [1.0, 2.0, 3.0])
    assert "limits" in gate.last_error


def test_gate_clamps_when_configured():
    gate = CommandGate(LIMIT, "clamp", timeout=0.1)
    assert gate.submit([100.0, -100.0, 5.0], now=0.0)
    assert np.array_equal(gate.command(0.0), [87.0, -87.0, 5.0])
    assert gate.counters.clamped == 1
    assert not gate.submit([np.nan, 0.0, 0.0], now=0.0)  # NaN is never clamped


def test_gate_watchdog_zeroes_torque_and_counts_once():
    gate = CommandGate(LIMIT, "reject", timeout=0.01)
    assert not gate.started and not np.any(gate.command(0.0))
    gate.submit([1.0, 1.0, 1.0], now=0.0)
    assert np.any(gate.command(0.009))
    assert not np.any(gate.command(0.011)) and gate.watchdog_active
    assert not np.any(gate.command(0.5))
    assert gate.counters.watchdog_trips == 1
    gate.submit([1.0, 1.0, 1.0], now=0.6)
    assert not gate.watchdog_active and np.any(gate.command(0.6))


def test_gate_validates_its_configuration():
    with pytest.raises(ParameterError, match="on_bad_command"):
        CommandGate(LIMIT, "ignore")
    with pytest.raises(ParameterError, match="timeout"):
        CommandGate(LIMIT, "reject", timeout=0.0)


def test_gaz_sigmoid_is_zero_at_rest_and_asymmetric():
    n = 7
    p = FrictionParameters(
        np.zeros(n), np.array(GAZ_PANDA_PHI1), np.array(GAZ_PANDA_PHI2), np.array(GAZ_PANDA_PHI3),
        np.zeros(n), np.zeros(n), np.ones(n),
    )
    assert np.allclose(smooth_friction(np.zeros(n), p), 0.0)
    fast = smooth_friction(np.full(n, 5.0), p)
    slow = smooth_friction(np.full(n, -5.0), p)
    # Gaz eq. (9) saturates at phi1 - phi1/(1+exp(-phi2 phi3)) for dq -> +inf
    sat = p.phi1 - p.phi1 / (1 + np.exp(-p.phi2 * p.phi3))
    assert np.allclose(fast, sat, atol=1e-6)
    assert np.all(fast > 0) and np.all(slow < 0)
    assert not np.allclose(fast, -slow)  # phi3 != 0 -> asymmetric


def test_stribeck_drop_lowers_sliding_friction_below_breakaway():
    one = np.ones(1)
    p = FrictionParameters(one * 1.0, 0 * one, one, 0 * one, 0 * one, one * 0.4, one * 0.05)
    assert total_friction(np.array([1e-4]), p)[0] == pytest.approx(1.0, abs=1e-3)
    assert total_friction(np.array([0.5]), p)[0] == pytest.approx(0.6, abs=1e-3)


def test_stiction_holds_a_small_command_and_breaks_away():
    import pinocchio as pin

    plant = Plant("panda", profile="true")

    pm = pin.buildModelFromXML(plant.true_urdf())
    pdata = pm.createData()
    q = np.array([0.0, 0.3, 0.0, -1.8, 0.0, 1.8, 0.5])
    static = plant.profile.friction.frictionloss
    for fraction, moves in ((0.7, False), (1.5, True)):
        s = plant.reset(q)
        push = fraction * static * (np.arange(7) == 0)  # on joint 1 only (Nm)
        for _ in range(500):  # 0.5 s, true gravity and the gears' torque ripple compensated exactly
            lost = ripple_torque(s.q_true, np.ones(7), plant.profile.effects)  # the fraction the link misses
            s = plant.step((pin.computeGeneralizedGravity(pm, pdata, s.q_true) + push) / (1.0 - lost))
        moved = abs(s.q_true[0] - q[0])
        assert (moved > 1e-3) if moves else (moved < 1e-4), (fraction, moved)


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_true_profiles_are_physically_consistent_and_different(robot):
    plant = Plant(robot, profile="true")
    nominal = read_inertials(plant.description.urdf_xml)
    true = read_inertials(plant.true_urdf())
    moved = {link for links in rigid_bodies(plant.description.urdf_xml).values() for link in links}
    changed = 0
    for link in moved:
        if link not in nominal or nominal[link].mass <= 0:
            continue
        assert np.linalg.eigvalsh(true[link].pseudo_inertia()).min() > -1e-12, link
        ratio = true[link].mass / nominal[link].mass
        assert 0.79 < ratio < 1.21
        changed += abs(ratio - 1) >= 0.099
    assert changed >= plant.n - 1
    p = plant.profile
    assert np.all(p.armature > 0) and np.all(p.friction.frictionloss > 0)
    assert np.all(p.friction.stribeck_drop < p.friction.frictionloss)
    assert p.latency_ticks >= 1 and p.encoder_resolution > 0


def test_panda_profile_uses_gaz_values():
    joints = tuple(f"panda_joint{i}" for i in range(1, 8))
    p = load_profile("true", "panda", joints)
    assert np.allclose(p.friction.phi1, GAZ_PANDA_PHI1)
    assert np.allclose(p.friction.phi2, GAZ_PANDA_PHI2)
    assert np.allclose(p.friction.phi3, GAZ_PANDA_PHI3)


def test_profile_errors_name_the_problem(tmp_path):
    with pytest.raises(ParameterError, match="unknown plant profile"):
        load_profile("realistic", "panda", ("a",))
    with pytest.raises(ParameterError, match="no entry for joints"):
        load_profile(profiles_dir() / "ur5_true.yaml", "ur5", ("not_a_joint",))
    bad = tmp_path / "bad.yaml"
    bad.write_text((profiles_dir() / "ur5_true.yaml").read_text().replace("stribeck_drop: ", "stribeck_drop: 9"))
    with pytest.raises(ParameterError, match="stribeck_drop"):
        Plant("ur5", profile=bad)


@pytest.mark.parametrize(("key", "value", "match"), [
    ("viscous", ".nan", "viscous must be a finite number >= 0"),
    ("armature", "-5", "armature must be a finite number >= 0"),
    ("torque_offset", ".nan", "torque_offset must be a finite number"),
])
def test_a_profile_value_the_physics_cannot_use_is_refused(tmp_path, key, value, match):
    """NaN friction or offsets and a negative armature ran (q or effort went NaN); 1.7 latency ticks ran as 1."""
    import re

    text = (profiles_dir() / "ur5_true.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(re.sub(rf"({key}: )-?[0-9][0-9.e-]*", rf"\g<1>{value}", text, count=1))
    with pytest.raises(ParameterError, match=match):
        load_profile(bad, "ur5", _ur5_joints())


def test_a_profile_that_is_not_a_mapping_or_counts_fractional_ticks_is_refused(tmp_path):
    not_a_mapping = tmp_path / "hostname.yaml"
    not_a_mapping.write_text("vm-123\n")
    with pytest.raises(ParameterError, match="not a mapping"):
        load_profile(not_a_mapping, "ur5", _ur5_joints())
    ticks = tmp_path / "ticks.yaml"
    ticks.write_text((profiles_dir() / "ur5_true.yaml").read_text() + "command: {latency_ticks: 1.7}\n")
    with pytest.raises(ParameterError, match="latency_ticks must be a whole number"):
        load_profile(ticks, "ur5", _ur5_joints())


def _ur5_joints() -> tuple[str, ...]:
    from idyn_ros.robots import get_robot

    return tuple(get_robot("ur5").joint_names)


def test_nominal_profile_reads_urdf_dynamics_and_ideal_has_none():
    nominal = Plant("panda", profile="nominal")
    ideal = Plant("panda", profile="ideal")
    assert ideal._friction.is_zero and not np.any(ideal.model.dof_damping) and not np.any(ideal.model.dof_armature)
    assert not np.any(nominal.profile.torque_noise_std) and nominal.profile.latency_ticks == 0
    assert nominal.true_urdf() == ideal.true_urdf()


def test_elastic_joints_report_the_spring_torque(tmp_path):
    import yaml

    data = yaml.safe_load((profiles_dir() / "ur5_true.yaml").read_text())
    for entry in data["joints"].values():
        entry["elasticity"] = {"stiffness": 5000.0, "damping": 20.0}
        entry["sensor"] = {"torque_noise_std": 0.0, "torque_offset": 0.0}
        entry["friction"] = {"static": 0.0}
    data["command"]["latency_ticks"] = 0
    path = tmp_path / "elastic.yaml"
    path.write_text(yaml.safe_dump(data))
    plant = Plant("ur5", profile=path)
    import pinocchio as pin

    pm = pin.buildModelFromXML(plant.true_urdf())
    q = np.array([0.0, -1.2, 1.0, -1.0, 0.5, 0.0])
    plant.reset(q)
    g = pin.computeGeneralizedGravity(pm, pm.createData(), q)
    for _ in range(3000):
        s = plant.step(g + 200.0 * (q - plant.state().q_true) - 30.0 * plant.state().dq_true)
    # at rest the spring carries gravity: the link-side reading equals g(q)
    assert np.abs(s.tau - pin.computeGeneralizedGravity(pm, pm.createData(), s.q_true)).max() < 0.05
    assert np.abs(s.q_true - q).max() < 0.01


def test_sim_and_plant_node_do_not_import_torch():
    import subprocess
    import sys

    code = "import sys, idyn_ros.sim, idyn_ros.nodes.plant; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_plant_node_help_lists_every_parameter(capsys):
    from idyn_ros.nodes.plant import main
    from idyn_ros.parameters import PlantParams

    main(["idyn-plant", "--help"])
    text = capsys.readouterr().out
    for p in PlantParams.table():
        assert p.name in text
    assert "lockstep" in text and "Examples" in text


@pytest.mark.parametrize("robot", ["panda", "iiwa14", "ur5"])
def test_fast_smooth_friction_equals_the_reference_formula(robot):
    from idyn_ros.sim.friction import SmoothFriction

    for profile in ("true", "nominal"):
        p = Plant(robot, profile=profile)._friction
        fast = SmoothFriction(p)
        rng = np.random.default_rng(0)
        for dq in (np.zeros(p.viscous.size), np.full(p.viscous.size, 1e-4), rng.normal(0, 0.05, p.viscous.size),
                   rng.uniform(-3, 3, p.viscous.size), np.full(p.viscous.size, -8.0)):
            np.testing.assert_allclose(fast(dq.tolist()), smooth_friction(dq, p), rtol=0, atol=1e-12)
        assert fast.active or profile == "nominal"  # a URDF may state no damping (iiwa14)
    assert not SmoothFriction(Plant(robot, profile="ideal")._friction).active


def test_gate_views_array_array_commands_without_keeping_them():
    import array

    gate = CommandGate(LIMIT, "reject", timeout=0.1)
    values = array.array("d", [1.0, 2.0, 3.0])  # what rclpy hands over for float64[]
    assert gate.submit(values, now=0.0)
    values[0] = 50.0  # the message buffer is reused: the accepted command must not change
    np.testing.assert_array_equal(gate.command(0.0), [1.0, 2.0, 3.0])
    assert not gate.submit(array.array("d", [1.0, 2.0, 12.5]), now=0.0)
    assert gate.counters.rejected_limit == 1
    assert not gate.submit(array.array("d", [1.0, float("-inf"), 0.0]), now=0.0)
    assert gate.counters.rejected_nonfinite == 1
