"""`idyn wrench`: a recording replayed through the wrench observer's classes, scored against a sensor.

The synthetic bag comes from the ideal plant (the nominal model is exact there) with a push at the flange and two
WrenchStamped topics written with the conventions of the UR5 recordings: a sensor reporting the environment's
wrench on the robot in flange axes, and a vendor estimate reporting the robot's on the environment, 50 % too big.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

PUSH = np.array([6.0, -4.0, -12.0])  # N, base axes, environment on robot
RATE = 250.0


def _header(T, stamp_ns: int, frame: str):
    sec, nsec = divmod(int(stamp_ns), 1_000_000_000)
    return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec), frame_id=frame)


def _wrench_cdr(stamp_ns: int, frame: str, w: np.ndarray) -> bytes:
    from idyn_ros.data.bag import idyn_typestore

    store = idyn_typestore()
    T = store.types
    msg = T["geometry_msgs/msg/WrenchStamped"](
        header=_header(T, stamp_ns, frame),
        wrench=T["geometry_msgs/msg/Wrench"](force=T["geometry_msgs/msg/Vector3"](x=w[0], y=w[1], z=w[2]),
                                             torque=T["geometry_msgs/msg/Vector3"](x=w[3], y=w[4], z=w[5])))
    return bytes(store.serialize_cdr(msg, "geometry_msgs/msg/WrenchStamped"))


def joint_state_cdr(stamp_ns: int, names: list[str], q, dq, tau) -> bytes:
    from idyn_ros.data.bag import idyn_typestore

    store = idyn_typestore()
    msg = store.types["sensor_msgs/msg/JointState"](header=_header(store.types, stamp_ns, ""), name=list(names),
                                                   position=np.asarray(q, float), velocity=np.asarray(dq, float),
                                                   effort=np.asarray(tau, float))
    return bytes(store.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(bag, model, header stamps) of a push on the ideal UR5 plant, and a nominal-RBD artifact at that rate."""
    from idyn_ros.cli import main
    from idyn_ros.data.bag import BagWriter
    from idyn_ros.data.dataset import Dataset
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.experiments.tracking import make_feedforward
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot
    from idyn_ros.sim import Plant
    from idyn_ros.sim.loop import Hold, controller_for, run_episode

    tmp = tmp_path_factory.mktemp("replay")
    robot = RobotModel.from_robot("ur5")
    rec = fourier_recording(robot.pin_model, make_true_robot(robot.pin_model, spread=0.0), duration=2.0,
                            rate_hz=RATE)
    data = Dataset(rec.t, rec.q, rec.dq, rec.tau, tuple(robot.joint_names), "ur5", "torque", "synthetic")
    assert main(["train", "--robot", "ur5", "--data", str(data.save(tmp / "d.npz")), "--model", "rbd",
                 "--id-method", "nominal", "--out", str(tmp / "m"), "--no-progress"]) == 0
    plant = Plant("ur5", "ideal")
    q0 = np.array([0.0, -1.571, 1.571, -1.571, -1.571, 0.0])
    rows = []
    decim = round(1.0 / (plant.control_dt * RATE))

    def on_tick(k, state, _cmd):
        if k % decim == 0:
            R = robot.frame_placement(state.q)[:3, :3]
            rows.append((round(state.t * 1e9) + 1_700_000_000_000_000_000, state.q.copy(), state.dq.copy(),
                         state.tau.copy(), R.T @ plant.wrench[1][:3]))

    w = np.concatenate([PUSH, np.zeros(3)])
    ep = run_episode(plant, controller_for("ur5", robot, "stiff", make_feedforward(robot, "rbd", None)),
                     Hold(q0, duration=3.5), hold=0.5, q_start=q0, on_tick=on_tick,
                     events=[(2.0, lambda p: p.apply_wrench(None, w, 1.0))])
    assert not ep.failed
    with BagWriter(tmp / "bag") as bag:
        bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        bag.add_topic("/ft_sensor/wrench", "geometry_msgs/msg/WrenchStamped")
        bag.add_topic("/force_torque_sensor_broadcaster/wrench", "geometry_msgs/msg/WrenchStamped")
        for stamp, q, dq, tau, f_tool in rows:
            bag.write("/joint_states", stamp, joint_state_cdr(stamp, list(robot.joint_names), q, dq, tau))
            sensor = np.concatenate([f_tool + 3.0, np.zeros(3)])  # a raw sensor: 3 N of bias on every axis
            bag.write("/ft_sensor/wrench", stamp, _wrench_cdr(stamp, "ft_sensor_link", sensor))
            vendor = np.concatenate([-1.5 * f_tool, np.zeros(3)])
            bag.write("/force_torque_sensor_broadcaster/wrench", stamp, _wrench_cdr(stamp, "tool0", vendor))
    return tmp / "bag", tmp / "m" / "model.onnx", np.array([r[0] for r in rows])


def test_idyn_wrench_writes_the_estimate_and_scores_it_with_the_conventions(recorded, tmp_path, capsys):
    from idyn_ros.cli import main

    bag, model, stamps = recorded
    out, plot = tmp_path / "out.npz", tmp_path / "p.png"
    assert main(["wrench", "--model", str(model), "--data", str(bag), "-o", str(out), "--ft-topic",
                 "/ft_sensor/wrench", "--plot", str(plot), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    with np.load(out) as d:
        assert str(d["frame"]) == "tool0" and d["wrench"].shape == d["wrench_base"].shape == (len(stamps), 6)
        np.testing.assert_array_equal(d["t_ns"], stamps)  # the header stamps, as the node gets them
        np.testing.assert_allclose(d["t"], stamps * 1e-9, rtol=0, atol=1e-6)
        assert d["sensor"].shape == (len(stamps), 6) and d["vendor"].shape == (len(stamps), 6)
        push = (d["t"] - d["t"][0] > 2.15) & (d["t"] - d["t"][0] < 2.95)  # during the push (2.0-3.0 s)
        np.testing.assert_allclose(np.nanmean(d["wrench_base"][push, :3], axis=0), PUSH, atol=0.6)
        assert d["contact"][push].mean() > 0.75  # while the arm yields, its sigma is the moving one: a delay
    ours, vendor = summary["ours"]["vs_sensor"], summary["vendor"]["vs_sensor"]
    assert ours["rmse_mean_n"] < 1.0 and min(ours["corr"].values()) > 0.95  # the observer's 20 ms lag at the steps
    assert vendor["rmse_mean_n"] > 1.5 * ours["rmse_mean_n"]  # its 50 % scale error, after its sign is undone
    assert min(vendor["corr"].values()) > 0.95  # the sign convention is undone: it correlates positively
    assert summary["rmse_ratio_ours_to_vendor"] < 0.7 and plot.stat().st_size > 10_000


def test_a_truncated_bag_is_scored_with_recover(recorded, tmp_path, capsys):
    """A damaged bag with a sensor topic was a dead end: the error sent the user to `idyn dataset import --recover`,
    and --ft-topic refuses the .npz that makes (it keeps no topics)."""
    import shutil

    from idyn_ros.cli import main

    bag, model, stamps = recorded
    cut = tmp_path / "cut"
    shutil.copytree(bag, cut)
    data = next(p for p in cut.iterdir() if p.suffix in (".mcap", ".db3"))
    data.write_bytes(data.read_bytes()[: int(data.stat().st_size * 0.8)])
    args = ["wrench", "--model", str(model), "--data", str(cut), "-o", str(tmp_path / "o.npz"), "--ft-topic",
            "/ft_sensor/wrench", "--json"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "pass --recover" in err and "dataset import" not in err  # this command's own option
    assert main([*args, "--recover"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("is damaged") == 1  # said once, though the bag is read twice
    assert json.loads(captured.out)["ours"]["vs_sensor"]["rmse_mean_n"] < 1.5
    with np.load(tmp_path / "o.npz") as d:
        assert 0.5 * len(stamps) < len(d["t_ns"]) < len(stamps)  # the readable part


def test_a_wrong_sign_or_a_missing_topic_shows(recorded, tmp_path, capsys):
    from idyn_ros.cli import main

    bag, model, _ = recorded
    assert main(["wrench", "--model", str(model), "--data", str(bag), "-o", str(tmp_path / "o.npz"), "--ft-topic",
                 "/ft_sensor/wrench", "--ft-sign", "-1", "--json"]) == 0
    flipped = json.loads(capsys.readouterr().out)["ours"]["vs_sensor"]
    assert max(flipped["corr"].values()) < -0.95
    assert main(["wrench", "--model", str(model), "--data", str(bag), "-o", str(tmp_path / "o.npz"), "--ft-topic",
                 "/nope"]) == 2
    assert "/ft_sensor/wrench" in capsys.readouterr().err  # the error lists the topics there are


def test_an_irregular_recording_is_resampled_onto_the_models_rate(recorded, tmp_path, capsys):
    """Logged at receive time (every other pair of samples, as the UR5's 63 Hz runs): the model's grid, no error."""
    from rosbags.highlevel import AnyReader

    from idyn_ros.cli import main
    from idyn_ros.data.bag import BagWriter

    bag, model, stamps = recorded
    thinned = tmp_path / "thinned"
    with AnyReader([bag]) as reader, BagWriter(thinned) as out:
        for c in reader.connections:
            out.add_topic(c.topic, c.msgtype)
        keep = {int(t) for i, t in enumerate(stamps) if i % 4 in (0, 1)}  # spacings 4 / 12 ms alternating
        for c, t, raw in reader.messages():
            if t in keep:
                out.write(c.topic, t, bytes(raw))
    out_npz = tmp_path / "o.npz"
    assert main(["wrench", "--model", str(model), "--data", str(thinned), "-o", str(out_npz), "--ft-topic",
                 "/ft_sensor/wrench", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert any("the model's rate" in n and "irregular stamps" in n for n in summary["notes"])
    with np.load(out_npz) as d:
        assert np.allclose(np.diff(d["t_ns"]), 1e9 / RATE) and float(d["rate_hz"]) == RATE
        push = (d["t"] - d["t"][0] > 2.15) & (d["t"] - d["t"][0] < 2.95)
        np.testing.assert_allclose(np.nanmean(d["wrench_base"][push, :3], axis=0), PUSH, atol=1.0)


def test_rate_resamples_for_a_model_without_recurrent_state(recorded, tmp_path, capsys):
    """--rate 125 on a 250 Hz rbd model (no recurrent state: any rate serves it; a recurrent model refuses another
    rate, test/runtime/test_runtime.py) runs at 125 Hz; a bad option is refused with its name."""
    from idyn_ros.cli import main

    bag, model, _ = recorded
    assert main(["wrench", "--model", str(model), "--data", str(bag), "-o", str(tmp_path / "o.npz"), "--rate",
                 "125"]) == 0
    assert np.median(np.diff(np.load(tmp_path / "o.npz")["t"])) == pytest.approx(1 / 125, rel=1e-3)
    capsys.readouterr()
    assert main(["wrench", "--model", str(model), "--data", str(bag), "-o", str(tmp_path / "o.npz"),
                 "--observer-gain", "-5"]) == 2
    assert "--observer-gain=-5.0 is below its minimum" in capsys.readouterr().err  # the node's bound, the option's name


def test_the_replay_updates_its_estimate_as_often_as_the_node_publishes_it(recorded):
    """The node maps and runs the trust stage every publish_every-th state (4 at 1 kHz); the replay ran it on every
    state, so `idyn wrench` scored a faster estimate than the node gives. At 500 Hz (every 2nd) it now holds."""
    from idyn_ros.control.wrench import publish_every
    from idyn_ros.experiments import wrench_replay as wr

    assert [publish_every(0, r) for r in (1000.0, 500.0, 250.0, 125.0)] == [4, 2, 1, 1]
    assert publish_every(3, 1000.0) == 3  # a divider the user sets wins
    bag, model, _ = recorded
    rep = wr.replay(model, bag, rate_hz=500.0)
    assert any("updated once every 2 states (250 Hz)" in note for note in rep.notes)
    estimated = np.flatnonzero(np.isfinite(rep.wrench[:, 0]))
    w = rep.wrench[estimated[0]:]
    changed = np.flatnonzero(np.any(w[1:] != w[:-1], axis=1)) + 1  # rows where the estimate moved
    assert changed.size > 10 and np.all(np.diff(changed) % 2 == 0)  # only on every 2nd state
    assert len(wr.replay(model, bag).notes) < len(rep.notes)  # at the recording's 250 Hz: every state, no note


def test_a_twin_run_of_the_same_motion_is_a_reference_without_a_sensor(recorded, tmp_path, capsys):
    """The same motion twice, pushed in the second, the twin logged 0.3 s later and with its clock elsewhere: the
    twin is aligned by its positions, its torque minus the pushed one is the push's joint torque where the joints
    slide, ours scores far below zero there; a run of another motion is refused."""
    from idyn_ros.cli import main
    from idyn_ros.data.dataset import Dataset
    from idyn_ros.dynamics import RobotModel
    from idyn_ros.models.synthetic import fourier_recording, make_true_robot

    _, model, _ = recorded
    robot = RobotModel.from_robot("ur5")
    truth = make_true_robot(robot.pin_model, spread=0.0)
    rec = fourier_recording(robot.pin_model, truth, duration=4.0, rate_hz=RATE, speed=0.5, noise=0.0)
    rec.tau[:] = [robot.rnea(q, dq, ddq) for q, dq, ddq in zip(rec.q, rec.dq, rec.ddq, strict=True)]  # the model's
    names = tuple(robot.joint_names)
    push = (rec.t > 1.5) & (rec.t < 2.5)
    tau_ext = np.zeros_like(rec.tau)  # environment on robot: the motors supply that much less
    for k in np.flatnonzero(push):
        J, _ = robot.flange_jacobian(rec.q[k])
        tau_ext[k] = J.T @ np.concatenate([PUSH, np.zeros(3)])
    pushed = Dataset(rec.t, rec.q, rec.dq, rec.tau - tau_ext, names, "ur5", "torque", "synthetic").save(
        tmp_path / "pushed.npz")
    late = rec.t >= 0.3  # the twin starts 0.3 s into the motion, and its clock is 100 s off
    twin = Dataset(rec.t[late] + 100.0, rec.q[late], rec.dq[late], rec.tau[late], names, "ur5", "torque",
                   "synthetic").save(tmp_path / "twin.npz")
    out = tmp_path / "o.npz"
    assert main(["wrench", "--model", str(model), "--data", str(pushed), "-o", str(out), "--twin", str(twin),
                 "--plot", str(tmp_path / "p.png"), "--json"]) == 0
    tw = json.loads(capsys.readouterr().out)["twin"]
    assert tw["shift_s"] == pytest.approx(-0.3, abs=1e-3) and tw["q_rms_rad"] < 1e-4
    assert tw["ours_rmse_mean_nm"] < 0.25 * tw["zero_rmse_mean_nm"]
    assert (tmp_path / "p_twin.png").stat().st_size > 10_000
    with np.load(out) as d:
        ref = d["tau_ext_twin_reference"]
        assert np.isnan(ref[rec.t < 0.29]).all()  # before the twin starts
        inside = (rec.t > 0.31) & (rec.t < rec.t[-1] - 0.01)
        np.testing.assert_allclose(ref[inside], tau_ext[inside], atol=1e-6)
    other = fourier_recording(robot.pin_model, truth, seed=3, duration=4.0, rate_hz=RATE, speed=0.5, noise=0.0)
    Dataset(other.t, other.q, other.dq, other.tau, names, "ur5", "torque", "synthetic").save(tmp_path / "other.npz")
    assert main(["wrench", "--model", str(model), "--data", str(pushed), "-o", str(out), "--twin",
                 str(tmp_path / "other.npz")]) == 2
    assert "no time shift makes its joint positions match" in capsys.readouterr().err
    short = rec.t < 1.0
    Dataset(rec.t[short], rec.q[short], rec.dq[short], rec.tau[short], names, "ur5", "torque", "synthetic").save(
        tmp_path / "short.npz")
    assert main(["wrench", "--model", str(model), "--data", str(pushed), "-o", str(out), "--twin",
                 str(tmp_path / "short.npz")]) == 2
    assert "a twin must cover at least 50%" in capsys.readouterr().err


@pytest.mark.realdata
def test_a_franka_ros2_bag_at_30_hz_replays_with_the_pandas_model(shared_data, tmp_path, capsys):
    """fer_joint* names (franka_ros2) are the Panda's; at 30 Hz the direct residual's default low-pass (20 Hz, above
    Nyquist) is lowered, and said, instead of refused."""
    from idyn_ros.cli import main

    bag = shared_data / "panda_bag_30hz" / "panda_exciting_trajectory.db3"
    assert main(["train", "--robot", "panda", "--data", str(bag), "--model", "rbd", "--id-method", "nominal",
                 "--out", str(tmp_path / "m"), "--no-progress"]) == 0
    assert "joints fer_* read as panda_*" in capsys.readouterr().out  # idyn train says it too
    assert main(["wrench", "--model", str(tmp_path / "m" / "model.onnx"), "--data", str(bag), "-o",
                 str(tmp_path / "o.npz"), "--json"]) == 0
    notes = " ".join(json.loads(capsys.readouterr().out)["notes"])
    assert "low-pass at 12 Hz" in notes and "above its Nyquist frequency" in notes
    assert "joints fer_* read as panda_*" in notes  # the renaming is said, as idyn dataset import says it


@pytest.mark.realdata
@pytest.mark.slow
def test_no10_against_the_sensor_and_the_urs_estimate(shared_data, tmp_path, capsys):
    """Real data: the UR's own estimate scores as the README describes it (several newtons RMS per axis, positive
    correlation once its sign is undone), and ours runs through the same scoring; and against a contact-free twin."""
    from idyn_ros.bench.ur5 import PUSHED_NO_TRUTH, SCORE, TRAIN, TWINS, VAL
    from idyn_ros.cli import main

    d = shared_data / "ur5_ft"
    assert main(["train", "--robot", "ur5", "--data", *(str(d / r) for r in TRAIN[2:6]), "--val", str(d / VAL),
                 "--model", "rbd-friction", "--out", str(tmp_path / "m"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["wrench", "--model", str(tmp_path / "m" / "model.onnx"), "--data", str(d / SCORE), "-o",
                 str(tmp_path / "o.npz"), "--ft-topic", "/ft_sensor/wrench", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    vendor = s["vendor"]["vs_sensor"]
    assert 2.0 < vendor["rmse_mean_n"] < 8.0 and vendor["corr"]["z"] > 0.8
    assert s["ours"]["vs_sensor"]["corr"]["z"] > 0.8 and s["samples_scored"] > 2000
    assert "motor current" in " ".join(s["notes"])
    # the force static friction hides: a floor below our own error on every axis (ours is ~0 there too)
    hidden, ours = s["hidden_by_friction"], s["ours"]["vs_sensor"]["rmse_n"]
    assert 0.3 < hidden["share_of_samples"] < 0.95
    assert all(hidden["floor_rmse_n"][a] <= 1.05 * ours[a] + 0.1 for a in "xyz")
    assert 0.1 < hidden["floor_ratio_to_vendor"] < s["rmse_ratio_ours_to_vendor"]
    # pushes in motion, no sensor: No7_short is the same program without the pushes
    assert main(["wrench", "--model", str(tmp_path / "m" / "model.onnx"), "--data", str(d / PUSHED_NO_TRUTH[1]),
                 "-o", str(tmp_path / "o.npz"), "--twin", str(d / VAL), "--json"]) == 0
    tw = json.loads(capsys.readouterr().out)["twin"]
    assert abs(tw["shift_s"]) < 0.05 and tw["q_rms_rad"] < 0.005 and tw["overlap"] > 0.95
    assert tw["ours_rmse_mean_nm"] < min(tw["zero_rmse_mean_nm"], tw["vendor_rmse_mean_nm"])
    # No5_w re-zeroes at rest first, then moves: the bias carried into motion gave 4.5 Nm here (zero 2.3)
    assert main(["wrench", "--model", str(tmp_path / "m" / "model.onnx"), "--data", str(d / PUSHED_NO_TRUTH[0]),
                 "-o", str(tmp_path / "o.npz"), "--twin", str(d / TWINS[PUSHED_NO_TRUTH[0]]), "--json"]) == 0
    tw = json.loads(capsys.readouterr().out)["twin"]
    assert tw["ours_rmse_mean_nm"] < min(1.25 * tw["zero_rmse_mean_nm"], 0.6 * tw["vendor_rmse_mean_nm"])


def test_the_force_hidden_by_friction_is_the_sensor_where_every_joint_is_inside_its_band():
    """Samples where the banded residual is exactly zero on every joint count with their whole sensor force, the
    others with none; the mean is over all scored samples."""
    from idyn_ros.experiments.wrench_replay import Replay, _hidden_by_friction

    n_samples = 4
    tau_ext = np.array([[0.0, -0.0], [0.0, 0.5], [0.0, 0.0], [np.nan, np.nan]])
    rep = Replay(np.arange(n_samples), *(np.zeros((n_samples, 6)) for _ in range(3)), np.zeros(n_samples, bool),
                 np.zeros(n_samples), np.zeros(n_samples, int), np.zeros(n_samples, bool),
                 np.zeros(n_samples, bool), tau_ext, np.zeros((n_samples, 6)), np.zeros((n_samples, 2)),
                 np.zeros(n_samples), "tool0", 100.0)
    sensor = np.array([[3.0, 0.0, 4.0], [10.0, 10.0, 10.0], [0.0, 6.0, 0.0], [9.0, 9.0, 9.0]])
    scored = np.array([True, True, True, False])
    vendor = {"vendor": {"vs_sensor": {"rmse_mean_n": 2.0}}}
    h = _hidden_by_friction(rep, sensor, scored, vendor)
    assert h["share_of_samples"] == pytest.approx(2 / 3)
    expected = np.sqrt(np.array([9.0, 36.0, 16.0]) / 3)
    assert np.allclose([h["floor_rmse_n"][a] for a in "xyz"], expected)
    assert h["floor_ratio_to_vendor"] == pytest.approx(expected.mean() / 2.0)


def test_a_robot_other_than_the_models_is_refused(recorded, tmp_path, capsys):
    from idyn_ros.cli import main

    _, model, _ = recorded
    assert main(["wrench", "--model", str(model), "--data", "unused", "-o", str(tmp_path / "o.npz"), "--robot",
                 "panda"]) == 2
    assert "but the model was trained for 'ur5'" in capsys.readouterr().err


def _with_gap_and_stray(bag, out, stamps, gap_after: int):
    """``bag`` thinned to irregular stamps (resampled, like the UR5's), 2 s added after message ``gap_after``, and
    one joint state stamped 0 (a zero clock) in the middle."""
    from rosbags.highlevel import AnyReader

    from idyn_ros.data.bag import BagWriter, idyn_typestore

    store = idyn_typestore()
    keep = {int(t) for i, t in enumerate(stamps) if i % 4 in (0, 1)}
    cut = int(stamps[gap_after])
    with AnyReader([bag]) as reader, BagWriter(out) as writer:
        for c in reader.connections:
            writer.add_topic(c.topic, c.msgtype)
        for c, t, raw in reader.messages():
            if t not in keep:
                continue
            shifted = t + (2 * 10**9 if t > cut else 0)
            data = bytes(raw)
            if c.topic == "/joint_states":
                msg = store.deserialize_cdr(data, c.msgtype)
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(shifted, 10**9)
                data = bytes(store.serialize_cdr(msg, c.msgtype))
                if t == cut:
                    msg.header.stamp.sec = msg.header.stamp.nanosec = 0
                    writer.write(c.topic, shifted, bytes(store.serialize_cdr(msg, c.msgtype)))
            writer.write(c.topic, shifted, data)
    return cut


def test_a_pause_is_not_interpolated_through_and_a_stray_stamp_is_dropped(recorded, tmp_path):
    """One grid from the first to the last stamp interpolated through a 2 s pause and, from a zero stamp, tried to
    allocate 1.5 TiB; now each segment has its own grid, the observer starts over after the pause, both are said."""
    from idyn_ros.experiments import wrench_replay as wr

    bag, model, stamps = recorded
    cut = _with_gap_and_stray(bag, tmp_path / "paused", stamps, gap_after=400)
    rep = wr.replay(model, tmp_path / "paused")
    notes = " ".join(rep.notes)
    assert "1 sample(s) alone between gaps dropped" in notes and "0 ns, 1.7e+09 s before the recording" in notes
    assert "1 gap(s) longer than" in notes and "the observer starts over" in notes
    assert rep.t_ns[0] == stamps[0] and np.allclose(np.diff(rep.t_ns)[np.diff(rep.t_ns) < 10**9], 1e9 / RATE)
    assert not np.any((rep.t_ns > cut + 10**7) & (rep.t_ns < cut + 2 * 10**9))  # nothing invented in the pause
    after = int(np.argmax(rep.t_ns > cut + 2 * 10**9 - 10**7))
    assert np.isnan(rep.wrench[after, 0]) and np.isfinite(rep.wrench[after + 5, 0])  # started over, then estimates


def test_the_trust_stages_start_over_with_the_observer_after_a_pause(recorded, tmp_path, monkeypatch):
    """The node restarts its rest and bias windows when the observer restarts; the replay restarted the observer
    only, so its rest detector counted the 2 s nobody watched as time at rest."""
    from idyn_ros.control.wrench_trust import TrustedWrench
    from idyn_ros.experiments import wrench_replay as wr

    restarts = []
    original = TrustedWrench.restart
    monkeypatch.setattr(TrustedWrench, "restart", lambda self: (restarts.append(id(self)), original(self)))
    bag, model, stamps = recorded
    _with_gap_and_stray(bag, tmp_path / "paused", stamps, gap_after=400)
    wr.replay(model, tmp_path / "paused")
    assert len(set(restarts)) == 2  # the primary's and the direct residual's trust stage
    assert len(restarts) >= 4  # each at the start and again after the pause


def test_a_bias_window_longer_than_the_rest_is_refused():
    from idyn_ros.errors import ParameterError
    from idyn_ros.experiments.wrench_replay import Replay, _bias_window

    n = 300  # 3 s at 100 Hz, at rest throughout
    rep = Replay(np.arange(n) * 10**7, *(np.zeros((n, 6)) for _ in range(3)), np.zeros(n, bool), np.zeros(n),
                 np.zeros(n, int), np.zeros(n, bool), np.zeros(n, bool), np.zeros((n, 2)), np.zeros((n, 6)),
                 np.zeros((n, 2)), np.zeros(n), "tool0", 100.0)
    assert _bias_window(rep, 1.0).sum() == 100
    with pytest.raises(ParameterError, match=r"--bias-window 5 s reaches the end of the recording: it has 2\.99 s"):
        _bias_window(rep, 5.0)


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_a_bias_window_that_is_not_positive_is_refused_by_the_parser(tmp_path, capsys, value):
    from idyn_ros.cli import main

    with pytest.raises(SystemExit):
        main(["wrench", "--model", "m.onnx", "--data", "d", "-o", str(tmp_path / "o.npz"), f"--bias-window={value}"])
    assert f"argument --bias-window: must be > 0, got {value}" in capsys.readouterr().err


def test_sensor_topics_need_the_bag_and_a_named_vendor_topic_must_exist(recorded, tmp_path, capsys):
    from idyn_ros.cli import main
    from idyn_ros.data.importers import import_source

    bag, model, _ = recorded
    npz = import_source(bag, robot="ur5")[0].save(tmp_path / "d.npz")
    assert main(["wrench", "--model", str(model), "--data", str(npz), "-o", str(tmp_path / "o.npz"), "--ft-topic",
                 "/ft_sensor/wrench"]) == 2
    assert "--ft-topic /ft_sensor/wrench reads a WrenchStamped topic from the bag" in capsys.readouterr().err
    assert main(["wrench", "--model", str(model), "--data", str(bag), "-o", str(tmp_path / "o.npz"),
                 "--vendor-topic", "/typo"]) == 2
    err = capsys.readouterr().err
    assert "no WrenchStamped messages on --vendor-topic /typo" in err and "/ft_sensor/wrench" in err


def test_outputs_and_options_that_cannot_apply_are_refused_before_the_replay(recorded, tmp_path, capsys, monkeypatch):
    """-o / --plot where nothing can be written ended in a traceback after the replay; --point-moment without a
    point contact and --ft-sign without a sensor were ignored without a word."""
    from idyn_ros.cli import main
    from idyn_ros.experiments import wrench_replay

    def never(*args, **kwargs):
        raise AssertionError("replayed before checking the command line")

    monkeypatch.setattr(wrench_replay, "replay", never)
    bag, model, _ = recorded
    base = ["wrench", "--model", str(model), "--data", str(bag)]
    cases = [(["-o", "/proc/w.npz"], "-o /proc/w.npz: cannot write"),
             (["-o", str(tmp_path / "w.npz"), "--plot", "/proc/w.png"], "--plot /proc/w.png: cannot write"),
             (["-o", str(tmp_path / "w.npz"), "--twin", str(bag), "--plot", str(tmp_path)], "is a folder"),
             (["-o", str(model)], "also an input"),
             (["-o", str(tmp_path / "w.npz"), "--point-moment", "1"], "--point-moment applies to a point contact"),
             (["-o", str(tmp_path / "w.npz"), "--ft-sign", "-1"], "--ft-sign is the sign of the F/T sensor")]
    for extra, said in cases:
        assert main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and said in err, err
    with pytest.raises(AssertionError, match="replayed"):  # applicable: through to the replay
        main([*base, "-o", str(tmp_path / "w.npz"), "--contact-model", "point", "--point-moment", "1"])


def test_help_states_the_default_contact_model(capsys):
    """--contact-model did not say which model runs when it is not given."""
    from idyn_ros.cli import main

    with pytest.raises(SystemExit):
        main(["wrench", "--help"])
    assert "forces estimated with redundancy (default wrench, the node's)" in " ".join(capsys.readouterr().out.split())


def test_refusing_a_model_names_its_option_not_the_nodes_parameters(tmp_path, capsys):
    """The refusal of a model the runtime cannot run ended in the node's advice: "Set model_path to an artifact
    exported for ur5 or set fallback to rbd|gravity", parameters `idyn wrench` does not have."""
    from onnx import TensorProto, helper

    from idyn_ros.cli import main
    from idyn_ros.data.bag import BagWriter
    from idyn_ros.models.artifact import FORMAT_VERSION, write_artifact
    from idyn_ros.robots import get_robot

    names = list(get_robot("ur5").joint_names)
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 6]) for n in ("q", "tau")]
    graph = helper.make_graph([helper.make_node("Identity", ["q"], ["tau"])], "g", io[:1], io[1:])
    model = tmp_path / "ur5.onnx"  # an artifact whose metadata lacks what the runtime needs
    write_artifact(helper.make_model(graph), {"format_version": FORMAT_VERSION, "robot": "ur5", "joint_names": names,
                                              "rate_hz": RATE}, model)
    q = np.array([0.0, -1.571, 1.571, -1.571, -1.571, 0.0])
    with BagWriter(tmp_path / "bag") as bag:
        bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        for k in range(100):
            stamp = 1_700_000_000_000_000_000 + k * round(1e9 / RATE)
            bag.write("/joint_states", stamp, joint_state_cdr(stamp, names, q, np.zeros(6), np.zeros(6)))
    assert main(["wrench", "--model", str(model), "--data", str(tmp_path / "bag"), "-o", str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("; give --model an artifact exported for ur5") and "model_path" not in err, err


def test_the_node_publishes_what_idyn_wrench_replays(recorded, rclpy_context):
    """`idyn wrench` runs the node's classes in a loop of its own (no DDS): state by state, the wrench_observer node
    fed the same joint states must publish the same estimate, or the replay's scores describe another observer."""
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from idyn_ros.data.wrenches import read_joint_states
    from idyn_ros.experiments import wrench_replay as wr
    from idyn_ros.nodes.common import stamp_to_ns
    from idyn_ros.nodes.wrench_observer import WrenchObserverNode
    from idyn_ros.robots import get_robot

    bag, model, _ = recorded
    names = list(get_robot("ur5").joint_names)
    rep = wr.replay(model, bag, "ur5")
    assert any("= the recording's stamps" in note for note in rep.notes)  # no resampling: the node's input as is
    series = read_joint_states(bag, names)
    node = WrenchObserverNode(context=rclpy_context, parameter_overrides=[
        Parameter("robot", value="ur5"), Parameter("rate_hz", value=RATE), Parameter("model_path", value=str(model)),
        Parameter("torque_source", value="effort"), Parameter("effort_unit", value="torque")])
    published: dict[int, list[float]] = {}

    def keep(m):
        f, t = m.wrench.force, m.wrench.torque
        published[stamp_to_ns(m.header.stamp)] = [f.x, f.y, f.z, t.x, t.y, t.z]

    node.pub.publish = keep  # the trusted estimate in base axes, as on /wrench
    try:
        for k in range(len(series.t_ns)):
            msg = JointState(name=names, position=series.q[k].tolist(), velocity=series.dq[k].tolist(),
                             effort=series.effort[k].tolist())
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(series.t_ns[k]), 1_000_000_000)
            node._on_joint_state(msg)
    finally:
        node.destroy_node()
    index = {int(t): k for k, t in enumerate(rep.t_ns)}
    stamps = sorted(published)
    assert len(stamps) > 0.2 * len(series.t_ns)  # every 4th state at 1 kHz-equivalent cadence, from the start
    node_w = np.array([published[t] for t in stamps])
    replay_w = rep.wrench_base[[index[t] for t in stamps]]
    assert np.isfinite(replay_w).all() and np.abs(node_w).max() > 5.0  # the push is in there
    np.testing.assert_allclose(node_w, replay_w, rtol=0, atol=1e-9)
