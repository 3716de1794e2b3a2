"""`idyn identify --profile-out`: the embedded plant runs the robot as identified."""

from __future__ import annotations

import numpy as np
import pytest

from idyn_ros.cli import main
from idyn_ros.errors import ParameterError
from idyn_ros.sim.profile import identified_profile, profile_from_dict, profile_yaml

ROBOTS = ("panda", "iiwa14", "ur5")


def _perturbed(robot: str, seed: int = 0) -> tuple[object, np.ndarray, np.ndarray]:
    from idyn_ros.dynamics import RobotModel

    model = RobotModel.from_robot(robot)
    rng = np.random.default_rng(seed)
    pi = model.inertial_parameters() * rng.uniform(0.85, 1.15, (model.n, 1))  # scaling a body keeps it physical
    return model, pi, rng.uniform(0.01, 0.5, model.n)


@pytest.mark.parametrize("robot", ROBOTS)
def test_the_plant_of_an_identified_profile_has_the_identified_bodies_and_friction(robot, tmp_path):
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.sim import Plant

    model, pi, armature = _perturbed(robot)
    friction = np.column_stack([np.linspace(0.2, 1.0, model.n), np.linspace(0.05, 0.3, model.n),
                                np.linspace(-0.3, 0.3, model.n)])
    data, notes = identified_profile(robot, tuple(model.joint_names), pi, armature,
                                     ("coulomb", "viscous", "offset"), friction)
    assert notes == []
    path = tmp_path / "identified.yaml"
    path.write_text(profile_yaml(data, "# test\n"))
    plant = Plant(robot=robot, profile=str(path))
    simulated = RobotModel.from_urdf(plant.true_urdf(), name=robot, joints=model.joint_names, check_inertia=False)
    np.testing.assert_allclose(simulated.inertial_parameters(), pi, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(plant.profile.armature, armature, rtol=1e-8)
    np.testing.assert_allclose(plant.profile.friction.frictionloss, friction[:, 0], rtol=1e-8)
    np.testing.assert_allclose(plant.profile.friction.viscous, friction[:, 1], rtol=1e-8)
    np.testing.assert_allclose(plant.profile.torque_offset, friction[:, 2], rtol=1e-8)
    assert not plant.profile.effects.ripple_ratio.any() and not plant.profile.torque_noise_std.any()


def test_each_friction_kind_becomes_the_same_curve_or_says_what_it_could_not_keep():
    from idyn_ros.dynamics.friction import friction_torque
    from idyn_ros.sim.friction import smooth_friction

    kinds = ("coulomb", "stribeck", "sigmoid", "viscous")
    coeffs = np.array([[0.5, 0.3, 0.2, 0.1], [0.4, 0.0, -0.2, 0.05]])  # joint 2: a negative sigmoid level
    pi = np.tile([1.0, 0, 0, 0, 0.01, 0, 0.01, 0, 0, 0.01], (2, 1))  # pinocchio order: Ixx Ixy Iyy Ixz Iyz Izz
    data, notes = identified_profile("two", ("a", "b"), pi, np.zeros(2), kinds, coeffs)
    profile = profile_from_dict(data, ("a", "b"))
    assert notes == ["b: identified sigmoid -0.2 is negative, simulated as 0"]
    assert profile.friction.frictionloss.tolist() == [0.8, 0.4]  # breakaway: coulomb + stribeck
    fast = np.array([[2.0, 2.0]])  # rad/s: the Stribeck bump has decayed, the dry part is the sliding level
    simulated = profile.friction.frictionloss + smooth_friction(fast, profile.friction)
    identified = friction_torque(fast, np.array([coeffs[0], [0.4, 0.0, 0.0, 0.05]]), kinds)
    np.testing.assert_allclose(simulated, identified, atol=1e-6)

    asym, notes = identified_profile("two", ("a", "b"), pi, np.zeros(2), ("asymmetric",),
                                     np.array([[0.6, 0.2], [0.3, 0.3]]))
    assert profile_from_dict(asym, ("a", "b")).friction.frictionloss.tolist() == [0.4, 0.3]
    assert notes == ["a: asymmetric dry friction 0.6 / 0.2 Nm simulated as 0.4 Nm both ways",
                     "b: asymmetric dry friction 0.3 / 0.3 Nm simulated as 0.3 Nm both ways"]


@pytest.mark.parametrize("entry, said", [
    ({"mass": -1.0, "com": [0, 0, 0], "inertia": [0.1, 0, 0, 0.1, 0, 0.1]}, "not a physical body"),
    ({"mass": 1.0, "com": [0, 0, 0], "inertia": [1.0, 0, 0, 0.1, 0, 0.1]}, "not a physical body"),  # 1 > 0.1 + 0.1
    ({"mass": 1.0, "com": [0, 0], "inertia": [0.1, 0, 0, 0.1, 0, 0.1]}, "com takes 3 numbers"),
    ({"mass": 1.0, "mass_scale": 1.1}, "not both"),
    ({"mass": "heavy"}, "inertial of joint a"),
    ({"weight": 3}, "unknown keys"),
])
def test_a_body_the_plant_cannot_move_is_refused_naming_its_joint(entry, said):
    data = {"joints": {"a": {}}, "inertial": {"a": entry}}
    with pytest.raises(ParameterError, match=said):
        profile_from_dict(data, ("a",), source="mine.yaml")


def test_identify_writes_a_profile_whose_plant_moves_like_the_recording(iiwa, truth, tmp_path, capsys):
    from idyn_ros.models.synthetic import fourier_recording
    from idyn_ros.sim import Plant

    rec = fourier_recording(iiwa.pin_model, truth, seed=3, duration=20.0, noise=0.0)
    data = tmp_path / "data.npz"
    np.savez(data, t=rec.t, q=rec.q, dq=rec.dq, ddq=rec.ddq, tau=rec.tau, joint_names=np.array(iiwa.joint_names))
    out = tmp_path / "my_iiwa.yaml"
    assert main(["identify", "--robot", "iiwa14", "--data", str(data), "--profile-out", str(out)]) == 0
    assert f"simulate it with idyn bringup --robot iiwa14 --set profile={out}" in capsys.readouterr().out

    moving = np.all(np.abs(rec.dq) > 0.05, axis=1)  # every joint sliding: no dry-friction constraint holding one
    idx = np.flatnonzero(moving)[::10]
    assert idx.size > 20

    def torque_error(profile: str) -> float:
        """RMS of M (ddq_plant - ddq_recorded): the recorded torques against the plant's physics, in Nm (in
        accelerations the light wrist, M's smallest eigenvalue 3e-4 kg m^2, would outweigh every other joint)."""
        from idyn_ros.dynamics import RobotModel

        plant = Plant(robot="iiwa14", profile=profile)
        rigid = RobotModel.from_urdf(plant.true_urdf(), name="iiwa14", joints=iiwa.joint_names, check_inertia=False)
        err = [(rigid.mass_matrix(rec.q[i]) + np.diag(plant.profile.armature))
               @ (plant.forward_acceleration(rec.q[i], rec.dq[i], rec.tau[i]) - rec.ddq[i]) for i in idx]
        return float(np.sqrt(np.mean(np.square(err))))

    identified, urdf = torque_error(str(out)), torque_error("ideal")
    assert identified < 0.2 * urdf, (identified, urdf)  # measured: 0.41 vs 4.20 Nm


def test_identify_refuses_a_profile_for_a_robot_the_plant_cannot_simulate(tmp_path, capsys):
    from idyn_ros.robots import render_urdf

    urdf = tmp_path / "arm.urdf"
    urdf.write_text(render_urdf("iiwa14"))
    data = tmp_path / "missing.npz"
    assert main(["identify", "--robot", str(urdf), "--data", str(data), "--profile-out", str(tmp_path / "p.yaml")]) == 2
    assert "the embedded plant simulates the presets" in capsys.readouterr().err
    same = str(tmp_path / "x.out")
    assert main(["identify", "--robot", "iiwa14", "--data", str(data), "--urdf-out", same, "--profile-out", same]) == 2
    assert "--urdf-out and --profile-out are the same file" in capsys.readouterr().err
    assert not (tmp_path / "p.yaml").exists() and not (tmp_path / "x.out").exists()
