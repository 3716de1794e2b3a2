"""`idyn train --model lip-gp` and `idyn evaluate` go through the same CLI contract as the other models."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from idyn_ros.commands.train import GP_KINDS as CLI_GP_KINDS
from idyn_ros.models.gp import GP_KINDS


def test_cli_offers_every_gp_kind() -> None:
    assert CLI_GP_KINDS == GP_KINDS


@pytest.mark.realdata
def test_train_and_evaluate_lip_gp_on_kuka(shared_data: Path, tmp_path: Path) -> None:
    kuka = shared_data / "kuka_lwr4"
    idyn = [sys.executable, "-m", "idyn_ros.cli"]
    subprocess.run([*idyn, "train", "--robot", str(kuka / "kuka_lwr4.urdf"), "--data", str(kuka / "measurements_1.npz"),
                    "--model", "lip-gp", "--max-samples", "60", "--max-minutes", "0.1", "--out", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=600)
    out = subprocess.run([*idyn, "evaluate", "--model", str(tmp_path / "model.onnx"),
                          "--data", str(kuka / "measurements_2.npz"), "--json"],
                         check=True, capture_output=True, text=True, timeout=600)
    result = json.loads(out.stdout)
    assert result["model_kind"] == "lip-gp"
    nmse = result["all"]["nmse"]
    assert len(nmse) == 7 and all(math.isfinite(v) and v >= 0 for v in nmse)
    # joint 2 carries most of the signal (gravity): even 60 samples must beat predicting the mean
    assert nmse[1] < 1.0


def test_gp_noise_option_parses_and_defaults_to_per_joint() -> None:
    from idyn_ros.cli import build_parser
    from idyn_ros.commands.train import _refuse_options_of_other_kinds

    base = ["train", "--robot", "panda", "--data", "x.npz", "--model", "lip-gp", "--out", "o"]
    args = build_parser().parse_args(base)
    assert args.gp_noise is None  # unset: only then may another kind be trained without it being refused
    _refuse_options_of_other_kinds(args)
    assert args.gp_noise == "per-joint"
    assert build_parser().parse_args([*base, "--gp-noise", "shared"]).gp_noise == "shared"
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--gp-noise", "both"])
