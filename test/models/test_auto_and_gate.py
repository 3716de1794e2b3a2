"""`idyn train --model auto`, the residual gate, the held-out tail, the per-joint residual, the regularisers."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from idyn_ros.errors import DatasetError, ParameterError
from idyn_ros.models.auto import AVERAGED, LEARNED_MARGIN, fit_auto, scores
from idyn_ros.models.sources import hold_out_tail
from idyn_ros.models.training import _optimizer, fit, fit_residual_gate, prepare
from idyn_ros.models.zoo import JointMLPResidual, ModelConfig, TorqueModel

TINY = {"linear_dim": 16, "hidden": 8, "joint_dim": 8, "window": 50, "stride": 50, "batch": 8}


def test_held_out_tail_is_the_contiguous_end_of_the_training_data(synth):
    a, b, _ = synth
    train, held, note = hold_out_tail([a])
    assert len(held) == 1 and held[0].n_samples == int(np.ceil(0.2 * a.n_samples))
    assert train[0].n_samples + held[0].n_samples == a.n_samples
    assert np.array_equal(held[0].t, a.t[-held[0].n_samples:]) and "20 %" in note and "tail" in note
    # several recordings: whole trailing recordings first (b is 1/3 of the samples: all of it, then a's tail)
    train, held, note = hold_out_tail([a, b], fraction=0.4)
    assert [h.n_samples for h in held] == [round(0.4 * 3600) - b.n_samples, b.n_samples]
    assert sum(r.n_samples for r in train + held) == a.n_samples + b.n_samples
    with pytest.raises(DatasetError, match="too few"):
        hold_out_tail([dataclasses.replace(a, t=a.t[:3], q=a.q[:3], dq=a.dq[:3], ddq=a.ddq[:3], tau=a.tau[:3])])
    # a cut that would leave a sliver of a recording for training holds that recording out whole: a 1-sample head
    # made every training batch it joined one sample long
    short = dataclasses.replace(b, t=b.t[:1002], q=b.q[:1002], dq=b.dq[:1002], ddq=b.ddq[:1002], tau=b.tau[:1002])
    train, held, _ = hold_out_tail([a, short], fraction=1000.5 / (a.n_samples + 1002))  # a 1001-sample tail
    assert [r.n_samples for r in train] == [a.n_samples] and [r.n_samples for r in held] == [1002]


def test_gate_drops_a_residual_that_does_not_help_and_keeps_one_that_does(iiwa, synth):
    """A residual of pure noise gets gate 0 (the model is its physics); an exact one keeps gate 1."""
    train, val, _ = synth
    res = fit(ModelConfig(kind="hybrid", mode="2s", epochs=1, gate=False, **TINY), iiwa, [train], [val],
              progress=False)
    model = res.model
    # gated on the training trajectory: inside its velocity range the physics part is exact up to the noise here
    # (beyond it, friction held at the range's edge leaves a smooth error a random network may correlate with)
    d = prepare(iiwa.pin_model, train, True, False)
    with torch.no_grad():  # a residual that predicts noise
        for p in model.residual.parameters():
            p.normal_(0.0, 1.0)
    g = fit_residual_gate(model, [d])
    _, phys = scores(res, iiwa, [train])
    full, _ = scores(res, iiwa, [train])
    assert np.all(g < 0.2)
    assert full["nmse_mean"] <= phys["nmse_mean"] * (1 + 1e-6)  # never worse than its own physics on validation
    # a residual exactly equal to tau - physics: gate 1
    model.norm.y_scale.fill_(1.0)
    with torch.no_grad():
        d.tau = model(d.q[None], d.dq[None], d.ddq[None], d.Y[None])[0]["tau"][0]
    assert np.allclose(fit_residual_gate(model, [d]), 1.0, atol=1e-4)


def test_gated_hybrid_is_never_worse_than_its_physics_on_validation(iiwa, synth):
    train, val, _ = synth
    res = fit(ModelConfig(kind="hybrid-j", mode="2s", epochs=3, **TINY), iiwa, [train], [val], progress=False)
    full, phys = scores(res, iiwa, [val])
    assert res.gate is not None and res.gate.shape == (7,)
    assert np.all(np.asarray(full["nmse"]) <= np.asarray(phys["nmse"]) * (1 + 1e-6) + 1e-12)


def test_joint_residual_sees_only_its_own_joint():
    torch.manual_seed(0)
    net = JointMLPResidual(n=4, n_features=5, dim=8)
    with torch.no_grad():
        net.w3.normal_()
    x = torch.randn(3, 20, 5 * 4)
    y0, _ = net(x)
    x2 = x.clone()
    x2[..., [k * 4 + 2 for k in range(5)]] += 1.0  # every feature of joint 2 (feature-major layout)
    y1, _ = net(x2)
    changed = (y1 - y0).abs().amax((0, 1))
    assert changed[2] > 1e-3 and torch.all(changed[[0, 1, 3]] == 0)


def test_weight_decay_never_touches_the_physics_parameters(iiwa):
    cfg = ModelConfig(kind="hybrid", mode="e2e", weight_decay=1e-2, **TINY)
    model = TorqueModel(cfg, 7, np.zeros((7, 10)) + 0.1)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = _optimizer(cfg, model, params)
    physics = {id(p) for p in (model.friction, model.ia, *model.inertial.parameters())}
    for group in opt.param_groups:
        if any(id(p) in physics for p in group["params"]):
            assert group["weight_decay"] == 0.0 and all(id(p) in physics for p in group["params"])
        else:
            assert group["weight_decay"] == 1e-2


def test_physics_weight_keeps_the_e2e_physics_part_explaining_the_data(iiwa, synth):
    """E2E from the nominal URDF: with the physics loss its RBD + friction part alone fits validation better."""
    train, val, _ = synth
    phys = {}
    for w in (0.0, 1.0):
        cfg = ModelConfig(kind="hybrid", mode="e2e", epochs=6, physics_weight=w, gate=False,
                          **{**TINY, "stride": 10, "lr": 1e-2})
        res = fit(cfg, iiwa, [train], [val], progress=False)
        phys[w] = scores(res, iiwa, [val])[1]["nmse_mean"]
    assert phys[1.0] < phys[0.0], phys


def test_auto_exports_physics_unless_a_learned_candidate_wins_by_the_margin(iiwa, synth):
    train, val, _ = synth
    base = ModelConfig(kind="auto", epochs=2, **TINY)
    cands = (("rbd-friction", {"kind": "rbd-friction"}), ("hybrid-j 2S", {"kind": "hybrid-j", "mode": "2s"}))
    res, done = fit_auto(base, iiwa, [train], [val], progress=False, candidates=cands)
    rows = [c.row() for c in done]
    assert [r["name"] for r in rows] == ["rbd-friction", "hybrid-j 2S"]
    phys, learned = rows[0]["val_nmse_mean"], rows[1]["val_nmse_mean"]
    expect = "hybrid-j 2S" if learned < (1 - LEARNED_MARGIN) * phys else "rbd-friction"
    assert res.cfg.extra["candidate"] == expect


@pytest.mark.parametrize("prior", ["geometric", "ridge"])
def test_auto_takes_a_users_prior_without_refusing_the_urdf_candidate_or_fitting_one_physics_twice(iiwa, synth,
                                                                                                   prior):
    """`idyn train --prior geometric` (the SDP's default, spelled out) crashed auto in its URDF candidate, which
    inherited the prior and refused it; `--prior ridge` fitted the ridge candidate twice, weighting it 2/3 in the
    average over the bases."""
    from idyn_ros.models.auto import CANDIDATES

    train, val, _ = synth
    base = ModelConfig(kind="auto", epochs=1, id_prior=prior, reg=1e-4, **TINY)
    physics = tuple(c for c in CANDIDATES if c[1]["kind"] == "rbd-friction")
    _, done = fit_auto(base, iiwa, [train], [val], progress=False, candidates=physics)
    rows = {c.name: c for c in done}
    assert rows["rbd-friction nominal"].result is not None and rows["rbd-friction nominal"].result.cfg.id_method == \
        "nominal"
    twin = rows["rbd-friction ridge 1e-4"]
    if prior == "ridge":
        assert twin.result is None and twin.skipped == "the same physics as rbd-friction"
    else:
        assert twin.result is not None


def test_a_fully_gated_off_hybrid_is_exported_as_its_physics(iiwa, synth):
    from idyn_ros.models.auto import physics_only

    train, val, test = synth
    res = fit(ModelConfig(kind="hybrid-j", mode="e2e", epochs=2, **TINY), iiwa, [train], [val], progress=False)
    before = scores(res, iiwa, [test])[1]
    phys = physics_only(res)
    assert phys.cfg.kind == "rbd-friction" and phys.model.residual is None
    assert np.allclose(scores(phys, iiwa, [test])[0]["nmse"], before["nmse"])


def test_cli_auto_without_val_holds_out_a_tail_and_lists_candidates(iiwa, synth, tmp_path, capsys):
    from idyn_ros.cli import main

    f = tmp_path / "train.npz"
    rec = synth[0]
    np.savez(f, t=rec.t, q=rec.q, dq=rec.dq, ddq=rec.ddq, tau=rec.tau, joint_names=np.array(iiwa.joint_names))
    out = tmp_path / "run"
    rc = main(["train", "--robot", "iiwa14", "--data", str(f), "--out", str(out), "--epochs", "2",
               "--hidden", "8", "--no-progress"])
    assert rc == 0
    captured = capsys.readouterr()
    assert "held out the last 20 %" in captured.out and "candidate" in captured.out
    m = json.loads((out / "metrics.json").read_text())
    assert "tail" in m["validation_data"] and m["val"]["n_samples"] == int(np.ceil(0.2 * rec.n_samples))
    names = [c["name"] for c in m["candidates"]]
    assert names[0] == "rbd-friction" and len(names) >= 3 and m["selected"] in names
    assert all("val_nmse_mean" in c or "skipped" in c for c in m["candidates"])
    assert (out / "model.onnx").is_file()
    assert "refits the model it chose" in captured.out and "refitted" in m["stopped"]
    assert main(["train", "--robot", "iiwa14", "--data", str(f), "--val", str(f), "--out", str(out),
                 "--no-refit"]) != 0
    assert "--no-refit applies to auto without --val" in capsys.readouterr().err


def test_validation_that_repeats_the_training_trajectory_is_said(iiwa, synth, tmp_path):
    """A re-run of the training trajectory cannot show generalisation: the overlap is measured and warned about."""
    from idyn_ros.models.metrics import state_overlap
    from idyn_ros.models.pipeline import train_run

    a, b, _ = synth
    rerun = dataclasses.replace(a, q=a.q + 1e-4, tau=a.tau + 0.01)  # the same trajectory, recorded again
    assert state_overlap([a], [rerun]) == 1.0
    assert state_overlap([a], [b]) < 0.5  # another excitation trajectory
    cfg = ModelConfig(kind="rbd-friction")
    with pytest.warns(UserWarning, match="validation repeats the training trajectory"):
        _, metrics = train_run(cfg, iiwa, [a], [rerun], out_dir=tmp_path, progress=False)
    assert metrics["validation_overlap"]["share"] == 1.0
    from idyn_ros.runtime import read_metadata

    unc = read_metadata(tmp_path / "model.onnx")["uncertainty"]  # the wrench observer's sigma says it is optimistic
    assert unc["split"] == "val" and unc["val_repeats_training"] is True
    other = dataclasses.replace(b, source="/data/other_trajectory.npz")
    with pytest.warns(UserWarning, match=r"could validate instead \(--val\): .*other_trajectory.npz \(\d+% covered\)"):
        _, metrics = train_run(cfg, iiwa, [a, other], [rerun], out_dir=tmp_path, progress=False)
    assert "other_trajectory.npz" in [r["recording"] for r in metrics["validation_overlap"]["could_validate"]]


def test_auto_chooses_on_the_uncovered_training_recording_when_validation_repeats_training(iiwa, synth):
    """A rerun as validation: auto holds out the training recording the others miss, lets every candidate compete on
    it, refits the winner on all the training recordings and scores the given validation apart."""
    from idyn_ros.models.pipeline import train_run

    a, b, test = synth
    rerun = dataclasses.replace(a, q=a.q + 1e-4, tau=a.tau + 0.01)
    other = dataclasses.replace(b, source="/data/other_trajectory.npz")
    cfg = ModelConfig(kind="auto", epochs=2, **TINY)
    with pytest.warns(UserWarning, match="auto chooses its model on other_trajectory.npz instead"):
        res, m = train_run(cfg, iiwa, [a, other], [rerun], [test], progress=False, choose_on_uncovered=True)
    assert m["validation_overlap"]["share"] == 1.0
    assert m["validation_overlap"]["chose_on"]["recording"] == "other_trajectory.npz"
    assert "other_trajectory.npz" in m["validation_data"]
    assert m["val"]["n_samples"] == b.n_samples and m["val_given"]["n_samples"] == a.n_samples
    assert m["train"]["n_samples"] == a.n_samples + b.n_samples
    assert not any("repeats the training states" in c.get("skipped", "") for c in m["candidates"])
    assert "refitted on all the training data" in res.stopped
    _, m = train_run(cfg, iiwa, [a, other], [rerun], [test], progress=False)  # off: the rule for repeats applies
    assert "chose_on" not in m["validation_overlap"] and "val_given" not in m
    assert any("repeats the training states" in c.get("skipped", "") for c in m["candidates"])


def test_the_recording_auto_chooses_on_holds_a_fair_share_of_the_samples(synth):
    """The least covered recording, unless it holds under 5 % of the samples (chance) or over half (training)."""
    from idyn_ros.models.pipeline import _uncovered_recording

    a, b, _ = synth  # 2400 and 1200 samples
    tiny = dataclasses.replace(b, t=b.t[:50])
    assert _uncovered_recording([a, b], [(0, 0.0), (1, 0.1)]) == 1  # a holds 2/3: skipped
    assert _uncovered_recording([a, b, tiny], [(2, 0.0), (1, 0.2)]) == 1  # tiny holds 1.4 %: skipped
    assert _uncovered_recording([a, b], [(0, 0.0)]) is None
    assert _uncovered_recording([a, b], []) is None


def test_auto_lets_only_the_per_joint_residual_compete_when_validation_repeats_training(iiwa, synth):
    train, val, _ = synth
    base = ModelConfig(kind="auto", epochs=2, **TINY)
    cands = (("rbd-friction", {"kind": "rbd-friction"}), ("hybrid 2S", {"kind": "hybrid", "mode": "2s"}),
             ("hybrid-j 2S", {"kind": "hybrid-j", "mode": "2s"}))
    rerun = dataclasses.replace(train, q=train.q + 1e-4, tau=train.tau + 0.01)
    _, done = fit_auto(base, iiwa, [train], [rerun], progress=False, candidates=cands)
    rows = {c.name: c.row() for c in done}
    assert "validation repeats the training states" in rows["hybrid 2S"]["skipped"]
    assert not rows["hybrid-j 2S"].get("skipped") and not rows["rbd-friction"].get("skipped")
    _, done = fit_auto(base, iiwa, [train], [val], progress=False, candidates=cands)  # another trajectory: all
    assert not any(c.skipped for c in done)


def test_the_per_joint_residual_is_fitted_on_every_physics_candidate(iiwa, synth):
    """The best physics alone need not be the best base for a residual: validation scores each sum."""
    train, val, _ = synth
    base = ModelConfig(kind="auto", epochs=2, **TINY)
    cands = (("rbd-friction", {"kind": "rbd-friction"}), ("rbd-friction nominal", {"kind": "rbd-friction",
                                                                                   "id_method": "nominal"}),
             ("hybrid-j 2S", {"kind": "hybrid-j", "mode": "2s"}), ("hybrid 2S", {"kind": "hybrid", "mode": "2s"}))
    res, done = fit_auto(base, iiwa, [train], [val], progress=False, candidates=cands)
    rows = {c.name: c.row() for c in done}
    best_phys, other = sorted(["rbd-friction", "rbd-friction nominal"], key=lambda n: rows[n]["val_nmse_mean"])
    assert set(rows) == {"rbd-friction", "rbd-friction nominal", "hybrid-j 2S", f"hybrid-j 2S on {other}",
                         "hybrid 2S", AVERAGED}  # the LSTM residual only on the best physics
    assert rows[f"hybrid-j 2S on {other}"]["id_method"] == rows[other]["id_method"]
    assert rows["hybrid-j 2S"]["id_method"] == rows["hybrid 2S"]["id_method"] == rows[best_phys]["id_method"]
    # the per-joint fits compete only through their average
    assert rows["hybrid-j 2S"]["member_of"] == rows[f"hybrid-j 2S on {other}"]["member_of"] == AVERAGED
    assert rows[AVERAGED]["members"] == ["hybrid-j 2S", f"hybrid-j 2S on {other}"]
    learned = min((r for r in rows.values() if r["kind"] != "rbd-friction" and not r.get("member_of")),
                  key=lambda r: r["val_nmse_mean"])
    phys = rows[best_phys]["val_nmse_mean"]
    expect = learned["name"] if learned["val_nmse_mean"] < (1 - LEARNED_MARGIN) * phys else best_phys
    assert res.cfg.extra["candidate"] == expect


def test_auto_identifies_each_physics_base_once_and_its_fits_start_where_they_would_alone(iiwa, synth,
                                                                                         monkeypatch):
    """The learned candidates reuse their physics candidate's SDP identification (~10 s each on a demo's data): the
    same start as a fit of their own, whatever was fitted on it before (here an E2E fit, which trains physics)."""
    from idyn_ros.models import identification

    train, val, _ = synth
    calls = []
    real = identification.identify

    def counted(*args, **kwargs):
        calls.append((args[2], kwargs.get("reg"), kwargs.get("prior")))
        return real(*args, **kwargs)

    monkeypatch.setattr(identification, "identify", counted)
    base = ModelConfig(kind="auto", epochs=2, **TINY)
    cands = (("rbd-friction", {"kind": "rbd-friction"}),
             ("rbd-friction ridge 1e-4", {"kind": "rbd-friction", "id_method": "sdp", "id_prior": "ridge",
                                         "reg": 1e-4}),
             ("hybrid-j E2E", {"kind": "hybrid-j", "mode": "e2e"}), ("hybrid-j 2S", {"kind": "hybrid-j", "mode": "2s"}))
    _, done = fit_auto(base, iiwa, [train], [val], progress=False, candidates=cands)
    fitted = {c.name: c for c in done if c.result is not None}
    assert {"hybrid-j E2E", "hybrid-j 2S", "hybrid-j 2S on rbd-friction ridge 1e-4"} <= set(fitted)
    assert len(calls) == len(set(calls)) == 2, calls  # the two SDP bases, once each
    for name in ("hybrid-j 2S", "hybrid-j 2S on rbd-friction ridge 1e-4"):  # 2S: the physics stays where it started
        model = fitted[name].result
        alone = fit(dataclasses.replace(model.cfg, epochs=0), iiwa, [train], [val], progress=False)
        np.testing.assert_array_equal(model.model.pi().detach().numpy(), alone.model.pi().detach().numpy())
        np.testing.assert_array_equal(model.model.friction.detach().numpy(), alone.model.friction.detach().numpy())
    assert len(calls) == 4  # outside auto nothing is reused
    np.testing.assert_array_equal(fitted["hybrid-j 2S"].result.model.pi().detach().numpy(),
                                  fitted["rbd-friction"].result.model.pi().detach().numpy())


def test_validation_that_repeats_training_does_not_choose_the_physics(iiwa, synth):
    """On the training states the weaker prior always fits better: the default's base, the others only averaged."""
    train, _, _ = synth
    base = ModelConfig(kind="auto", epochs=2, **TINY)
    cands = (("rbd-friction", {"kind": "rbd-friction", "id_method": "nominal"}),  # the default: first
             ("rbd-friction ols", {"kind": "rbd-friction", "id_method": "ols"}),  # fits the training run best
             ("hybrid-j 2S", {"kind": "hybrid-j", "mode": "2s"}), ("hybrid-j E2E", {"kind": "hybrid-j", "mode": "e2e"}))
    rerun = dataclasses.replace(train, q=train.q + 1e-4, tau=train.tau + 0.01)
    res, done = fit_auto(base, iiwa, [train], [rerun], progress=False, candidates=cands)
    rows = {c.name: c.row() for c in done}
    assert rows["rbd-friction ols"]["val_nmse_mean"] < rows["rbd-friction"]["val_nmse_mean"]  # ranked, it would lead
    assert "validation repeats the training states" in rows["rbd-friction ols"]["unranked"]
    assert rows["hybrid-j 2S"]["id_method"] == rows["hybrid-j E2E"]["id_method"] == "nominal"
    assert rows["hybrid-j 2S on rbd-friction ols"]["member_of"] == AVERAGED
    assert "default prior" in rows["hybrid-j E2E on rbd-friction ols"]["skipped"]
    assert res.cfg.extra["candidate"] in ("rbd-friction", "hybrid-j E2E", AVERAGED)


@pytest.mark.parametrize("linear", [False, True], ids=["mlp", "mlp+linear"])
def test_a_model_averaged_over_physics_bases_is_the_mean_of_its_members_everywhere(iiwa, synth, tmp_path, linear):
    """Torch, the checkpoint, the exported graph and both runtime backends give the members' mean prediction."""
    from idyn_ros.errors import ParameterError
    from idyn_ros.models import export as ex
    from idyn_ros.models.pipeline import load_model, save_model
    from idyn_ros.models.training import predict
    from idyn_ros.runtime import ModelRuntime

    train, val, test = synth
    members = [fit(ModelConfig(kind="hybrid-j", mode="2s", id_method=m, epochs=2, joint_linear=linear, **TINY), iiwa,
                   [train], [val], progress=False) for m in ("sdp", "nominal")]
    if linear:  # the linear term is trained, so the graph must carry it
        assert all(float(m.model.residual.w_linear.abs().max()) > 0 for m in members)
    model = TorqueModel.average_over_bases([m.model for m in members])
    parts = [predict(m.model, iiwa.pin_model, test) for m in members]
    mean = {k: (parts[0][k] + parts[1][k]) / 2 for k in ("tau", "tau_residual")}
    got = predict(model, iiwa.pin_model, test)
    scale = np.abs(mean["tau"]).max()
    np.testing.assert_allclose(got["tau"], mean["tau"], atol=1e-6 * scale)  # float32 regressor products
    np.testing.assert_allclose(got["tau_residual"], mean["tau_residual"], atol=1e-7)
    assert not np.allclose(parts[0]["tau_residual"], parts[1]["tau_residual"])  # the members do differ
    result = dataclasses.replace(members[0], model=model, cfg=model.cfg)
    save_model(tmp_path / "model.pt", result, model.pi().detach().numpy(), {})
    loaded, _ = load_model(tmp_path / "model.pt")
    np.testing.assert_allclose(predict(loaded, iiwa.pin_model, test)["tau"], got["tau"], atol=1e-9)
    path = tmp_path / "model.onnx"
    ex.export_onnx(loaded, iiwa, path, ex.build_metadata(loaded, iiwa, dq_abs_max=members[0].dq_abs_max))
    for backend in ("pinocchio", "onnx"):
        rt = ModelRuntime(path, iiwa, rbd_backend=backend)
        tau = np.array([rt.step(test.q[t], test.dq[t], test.ddq[t]).total.copy() for t in range(test.n_samples)])
        np.testing.assert_allclose(tau, got["tau"], atol=1e-5 * scale, err_msg=backend)
    with pytest.raises(ParameterError, match="assembled from fitted members"):
        fit(model.cfg, iiwa, [train], [val], progress=False)


def test_a_short_budget_goes_to_the_first_candidates_and_skips_from_the_back(iiwa, synth, monkeypatch):
    """The per-joint residuals come first so that a tight --max-minutes spends itself on them."""
    from idyn_ros.models import auto

    train, val, _ = synth
    clock = {"now": 0.0}  # minutes; only the fake learned fits below advance it
    monkeypatch.setattr(auto.time, "perf_counter", lambda: clock["now"] * 60.0)
    real_fit = auto._fit_candidate
    budgets: dict[str, float] = {}

    def fake_fit(name, settings, robot, train_, val_, budget, progress, whole_budget=None):
        if budget is None:  # a physics candidate: the real fit
            return real_fit(name, settings, robot, train_, val_, budget, progress)
        assert whole_budget == 0.25  # a share's stop text names auto's whole budget
        budgets[name] = budget
        clock["now"] += budget  # uses all of its share
        return auto.Candidate(name, None, {}, {}, 0.0, skipped="not fitted in this test")

    monkeypatch.setattr(auto, "_fit_candidate", fake_fit)
    learned = [(f"learned {i}", {"kind": "hybrid", "mode": "2s"}) for i in range(4)]
    cands = (("rbd-friction", {"kind": "rbd-friction"}), *learned)
    _, done = fit_auto(ModelConfig(kind="auto", epochs=1, **TINY), iiwa, [train], [val], max_minutes=0.25,
                       progress=False, candidates=cands)
    assert list(budgets) == ["learned 0", "learned 1"]  # 0.25 min: two of 0.1 min, then less than 0.1 is left
    assert all(b == pytest.approx(auto.MIN_CANDIDATE_MINUTES) for b in budgets.values())
    skipped = {c.name: c.skipped for c in done}
    assert "time budget used up" in skipped["learned 2"] and "time budget used up" in skipped["learned 3"]


def test_refit_identifies_a_physics_winner_on_training_and_validation(iiwa, synth):
    train, val, _ = synth
    cands = (("rbd-friction", {"kind": "rbd-friction"}),)
    res, _ = fit_auto(ModelConfig(kind="auto", **TINY), iiwa, [train], [val], progress=False, candidates=cands,
                      refit_on=[train, val])
    both = fit(ModelConfig(kind="rbd-friction", **TINY), iiwa, [train, val], progress=False)
    assert np.allclose(res.model.pi().detach().numpy(), both.model.pi().detach().numpy())
    assert np.allclose(res.model.friction.detach().numpy(), both.model.friction.detach().numpy())
    assert "refitted" in res.stopped and res.cfg.extra["candidate"] == "rbd-friction"


def test_refit_trains_a_learned_winner_for_its_epochs_with_its_gate_on_all_the_data(iiwa, synth):
    from idyn_ros.models.training import velocity_range

    train, val, _ = synth
    fast_val = dataclasses.replace(val, dq=val.dq * 1.5)  # a tail faster than training: the hold must widen
    cands = (("hybrid-j E2E", {"kind": "hybrid-j", "mode": "e2e"}),)
    res, done = fit_auto(ModelConfig(kind="auto", epochs=4, **TINY), iiwa, [train], [fast_val], progress=False,
                         candidates=cands, refit_on=[train, fast_val])
    chosen = done[0].result
    assert len(res.history) == 1 + int(np.argmin([h["val"] for h in chosen.history]))
    assert np.allclose(res.model.dq_hold.numpy(), velocity_range([train, fast_val]))
    assert not np.allclose(res.model.dq_hold.numpy(), chosen.model.dq_hold.numpy())
    assert res.gate is not None and np.array_equal(res.gate, chosen.gate)
    assert res.cfg.epochs == chosen.cfg.epochs == 4  # the artifact keeps the command's settings


def test_refit_of_the_average_refits_every_member(iiwa, synth):
    from idyn_ros.models.auto import refit

    train, val, _ = synth
    cands = (("rbd-friction", {"kind": "rbd-friction"}),
             ("rbd-friction nominal", {"kind": "rbd-friction", "id_method": "nominal"}),
             ("hybrid-j 2S", {"kind": "hybrid-j", "mode": "2s"}))
    _, done = fit_auto(ModelConfig(kind="auto", epochs=2, **TINY), iiwa, [train], [val], progress=False,
                       candidates=cands)
    averaged = next(c for c in done if c.name == AVERAGED)
    out = refit(averaged, done, iiwa, [train, val], progress=False)
    assert out.cfg.bases == 2 and out.model.cfg.extra["bases"] == averaged.result.cfg.extra["bases"]
    identified = fit(ModelConfig(kind="rbd-friction", **TINY), iiwa, [train, val], progress=False)
    assert np.allclose(out.model.base_pi[0].numpy().reshape(-1, 10), identified.model.pi().detach().numpy())
    assert np.array_equal(out.gate, averaged.result.gate)


def test_a_refitted_model_reports_the_validation_it_was_chosen_on(iiwa, synth, monkeypatch):
    import functools

    from idyn_ros.models import auto
    from idyn_ros.models.pipeline import train_run

    train, val, _ = synth
    cands = (("hybrid-j E2E", {"kind": "hybrid-j", "mode": "e2e"}),)
    monkeypatch.setattr(auto, "fit_auto", functools.partial(auto.fit_auto, candidates=cands))
    _, m = train_run(ModelConfig(kind="auto", epochs=2, **TINY), iiwa, [train], [val], progress=False, refit=True)
    assert m["val"]["nmse_mean"] == pytest.approx(m["candidates"][0]["val_nmse_mean"])  # held out, not refitted on
    assert "refitted" in m["stopped"]
    with pytest.raises(ParameterError, match="refit applies to auto"):
        train_run(ModelConfig(kind="rbd-friction"), iiwa, [train], [val], progress=False, refit=True)


def test_auto_skips_a_physics_candidate_the_data_cannot_identify_and_fails_only_when_none_fits(iiwa, synth):
    """A joint that never moved (a locked wrist) made the SDP candidates' identification refuse the data, and auto
    stopped with that error although its URDF candidate needs no identification."""
    from dataclasses import replace

    from idyn_ros.errors import IdentificationError
    from idyn_ros.models.auto import CANDIDATES

    train, val, _ = synth
    q, dq, ddq = train.q.copy(), train.dq.copy(), train.ddq.copy()
    q[:, 6], dq[:, 6], ddq[:, 6] = 0.3, 0.0, 0.0
    locked = replace(train, q=q, dq=dq, ddq=ddq)
    base = ModelConfig(kind="auto", epochs=1, **TINY)
    physics = tuple(c for c in CANDIDATES if c[1]["kind"] == "rbd-friction")
    res, done = fit_auto(base, iiwa, [locked], [val], progress=False, candidates=physics)
    rows = {c.name: c for c in done}
    assert "cannot be identified on this data" in rows["rbd-friction"].skipped
    assert res.cfg.extra["candidate"] == "rbd-friction nominal"
    with pytest.raises(IdentificationError, match="rbd-friction: cannot be identified"):
        fit_auto(base, iiwa, [locked], [val], progress=False, candidates=physics[:1])
