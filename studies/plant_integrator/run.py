"""Study: which MuJoCo integrator and physics rate the embedded plant should run (see README.md here).

Run from the repository root with idyn_ros importable:
``python studies/plant_integrator/run.py integrators`` (cost and accuracy per integrator and physics rate)
and ``python studies/plant_integrator/run.py drift`` (which effect of the "true" profile the nominal model
misses most). Each writes results/<what>.json with ``_provenance``; ``--out DIR`` writes elsewhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from idyn_ros.bench import run_provenance, times_us, write_result

RESULTS = Path(__file__).resolve().parent / "results"


def drift_breakdown(seconds: float = 4.0, variants: tuple[str, ...] | None = None, integrator: str | None = None,
                    physics_rate_hz: float = 1000.0) -> dict[str, list[float]]:
    """Joint RMSE (deg) of nominal-RNEA feedforward + weak PD (Kp 10, Kd 2 sqrt(10)) on a 3 s
    minimum-jerk move (+1 s hold) on the Panda, for the true profile and for each of its effects
    alone: which part of the "true robot" the nominal model misses most. ``variants``: only these rows;
    ``integrator`` (MuJoCo name, e.g. "rk4") and ``physics_rate_hz`` override the plant's (integrator_comparison)."""
    import dataclasses

    import pinocchio as pin

    from idyn_ros.sim import Plant, load_profile

    base = Plant("panda", profile="ideal")
    model = pin.buildModelFromXML(base.true_urdf())
    data = model.createData()
    idx = np.array([model.joints[model.getJointId(j)].idx_v for j in base.joint_names])

    def full(x: np.ndarray) -> np.ndarray:
        out = np.zeros(model.nv)
        out[idx] = x
        return out

    centre = np.array([1.0, 1.3, 0.0, -2.65, 0.15, 1.15, 0.0])  # gravity-stable for Kp 10 (test_plant.py)
    q0, q1, T = centre - 0.25, centre + 0.25, 3.0

    def ref(t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = min(max(t / T, 0.0), 1.0)
        v = (30 * s**2 - 60 * s**3 + 30 * s**4) / T if t < T else 0.0
        a = (60 * s - 180 * s**2 + 120 * s**3) / T**2 if t < T else 0.0
        return q0 + (10 * s**3 - 15 * s**4 + 6 * s**5) * (q1 - q0), v * (q1 - q0), a * (q1 - q0)

    def run(profile: Any) -> list[float]:
        plant = Plant("panda", profile=profile, seed=3, physics_rate_hz=physics_rate_hz)
        if integrator is not None:  # integrator_comparison: override the plant's choice
            import mujoco

            plant.model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
        state = plant.reset(*ref(0.0)[:2])
        ticks = round(seconds / plant.control_dt)
        err = np.empty((ticks, plant.n))
        for k in range(ticks):
            q_d, dq_d, _ = ref(k * plant.control_dt)
            ff = pin.rnea(model, data, *(full(x) for x in ref((k + 0.5) * plant.control_dt)))[idx]
            state = plant.step(ff + 10.0 * (q_d - state.q) + 2 * np.sqrt(10.0) * (dq_d - state.dq))
            err[k] = ref((k + 1) * plant.control_dt)[0] - state.q_true
        return [round(float(v), 4) for v in np.degrees(np.sqrt((err**2).mean(axis=0)))]

    true = load_profile("true", "panda", base.joint_names)
    ideal = load_profile("ideal", "panda", base.joint_names)
    profiles = {
        "ideal": ideal,
        "true": true,
        "inertials_only": dataclasses.replace(ideal, inertial=true.inertial),
        "armature_only": dataclasses.replace(ideal, armature=true.armature),
        "friction_only": dataclasses.replace(ideal, friction=true.friction),
        "latency_only": dataclasses.replace(ideal, latency_ticks=true.latency_ticks),
        "sensors_only": dataclasses.replace(
            ideal, torque_noise_std=true.torque_noise_std, torque_offset=true.torque_offset,
            encoder_resolution=true.encoder_resolution, velocity_noise_std=true.velocity_noise_std,
        ),
    }
    return {name: run(profile) for name, profile in profiles.items() if variants is None or name in variants}


INTEGRATORS = ("rk4", "euler", "implicitfast")


def integrator_comparison(physics_rates: tuple[float, ...] = (1000.0, 2000.0)) -> dict[str, dict[str, float]]:
    """The numbers behind the plant's integrator decision (idyn_ros/sim/plant.py), per MuJoCo
    integrator and physics rate (Panda, 1 kHz control): cost of one mj_step and of one Plant.step (true
    profile, us p50), max error of the 10 s ideal-plant tracking test (RNEA at t + T/2 + Kp 10; limit
    0.1 deg), max joint RMSE of nominal RNEA + Kp 10 on the true plant (the drift test), and how far
    joint 1 moves in 0.5 s pushed with 0.7 / 1.5 x its breakaway torque (stiction: < 1e-4 / > 1e-3 rad)."""
    import mujoco
    import pinocchio as pin

    from idyn_ros.sim import Plant

    def timed(fn: Any, n: int = 2000) -> float:
        return float(np.percentile(times_us(fn, n, warmup=200), 50))

    def plant(profile: str, integrator: str, rate: float, **kw: Any) -> Plant:
        p = Plant("panda", profile=profile, physics_rate_hz=rate, **kw)
        p.model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
        return p

    base = Plant("panda", profile="ideal")
    model = pin.buildModelFromXML(base.true_urdf())
    data = model.createData()
    centre = np.array([1.0, 1.3, 0.0, -2.65, 0.15, 1.15, 0.0])  # test/sim/test_plant.py Q_CENTRE, W, AMPLITUDE
    w = np.array([0.9, 1.1, 1.3, 0.7, 1.5, 1.2, 1.7])

    def sinusoids(t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return centre + 0.3 * np.sin(w * t), 0.3 * w * np.cos(w * t), -0.3 * w**2 * np.sin(w * t)

    def track(p: Plant, seconds: float) -> float:
        kp, kd = 10.0, 2.0 * np.sqrt(10.0)
        q0, dq0, _ = sinusoids(0.0)
        s = p.reset(q0, dq0)
        worst = 0.0
        for k in range(round(seconds / p.control_dt)):
            q_d, dq_d, _ = sinusoids(k * p.control_dt)
            ff = pin.rnea(model, data, *sinusoids((k + 0.5) * p.control_dt))
            s = p.step(ff + kp * (q_d - s.q) + kd * (dq_d - s.dq))
            worst = max(worst, float(np.abs(sinusoids((k + 1) * p.control_dt)[0] - s.q_true).max()))
        return float(np.degrees(worst))

    def stiction(p: Plant) -> list[float]:
        true_model = pin.buildModelFromXML(p.true_urdf())
        true_data = true_model.createData()
        q = np.array([0.0, 0.3, 0.0, -1.8, 0.0, 1.8, 0.5])
        moved = []
        for fraction in (0.7, 1.5):
            s = p.reset(q)
            push = fraction * p.profile.friction.frictionloss * (np.arange(7) == 0)
            for _ in range(500):
                s = p.step(pin.computeGeneralizedGravity(true_model, true_data, s.q_true) + push)
            moved.append(float(abs(s.q_true[0] - q[0])))
        return moved

    out: dict[str, dict[str, float]] = {}
    for rate in physics_rates:
        for integrator in INTEGRATORS:
            true = plant("true", integrator, rate)
            tau = np.zeros(true.n)
            step_us = timed(lambda p=true, tau=tau: p.step(tau))
            mj_us = timed(lambda p=true: mujoco.mj_step(p.model, p.data))
            moved = stiction(true)
            drift = drift_breakdown(4.0, variants=("true",), integrator=integrator, physics_rate_hz=rate)["true"]
            out[f"{integrator}_{rate:.0f}hz"] = {
                "mj_step_p50_us": mj_us,
                "plant_step_p50_us": step_us,
                "ideal_tracking_max_deg": track(plant("ideal", integrator, rate), 10.0),
                "true_drift_rmse_max_deg": max(drift),
                "stiction_moved_0p7_rad": moved[0],
                "stiction_moved_1p5_rad": moved[1],
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python studies/plant_integrator/run.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("integrators", "drift"),
                        help="integrators: cost and accuracy per MuJoCo integrator and physics rate; "
                             "drift: joint RMSE of nominal RNEA + weak PD per true-profile effect (Panda)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"result folder (default {RESULTS})")
    args = parser.parse_args(argv)
    command = f"python studies/plant_integrator/run.py {args.what}"
    provenance = run_provenance(command)
    if args.what == "integrators":
        value: dict[str, Any] = integrator_comparison()
        for name, row in value.items():
            print(f"{name:18s} " + ", ".join(f"{k} {v:.3g}" for k, v in row.items()))
    else:
        value = {name: {"joint_rmse_deg": rmse, "mean_deg": round(float(np.mean(rmse)), 4),
                        "max_deg": max(rmse)} for name, rmse in drift_breakdown().items()}
        for name, row in value.items():
            print(f"{name:15s} joint RMSE (deg) {row['joint_rmse_deg']}  mean {row['mean_deg']:.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"wrote {write_result(args.what, value, command, provenance, directory=args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
