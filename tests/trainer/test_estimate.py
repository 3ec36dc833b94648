"""`runcast estimate` against the ZeRO paper's worked numbers (Ψ = 7.5B, N = 64, K = 12)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from runcast.cli.estimate import GB, activations, estimate, model_shape, model_states
from runcast.cli.main import app


@pytest.mark.parametrize("stage, expected_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_paper_figure_1_numbers(stage, expected_gb):
    total = model_states(7.5e9, 64, stage)["total"] / GB
    assert round(total, 1) == expected_gb


def test_paper_table_1_exact_values():
    # Table 1, Ψ = 7.5B, N_d = 64: 120, 31.4, 16.6, 1.88 GB
    assert model_states(7.5e9, 64, 0)["total"] == 120e9
    assert model_states(7.5e9, 64, 1)["total"] == pytest.approx(31.40625e9)
    assert model_states(7.5e9, 64, 2)["total"] == pytest.approx(16.640625e9)
    assert model_states(7.5e9, 64, 3)["total"] == pytest.approx(1.875e9)
    # Ψ = 128B on 64 devices at stage 3: 32 GB per device (the paper's "fits in 32 GB V100")
    assert model_states(128e9, 64, 3)["total"] == pytest.approx(32e9)


def test_offload_moves_optimizer_states_to_cpu():
    s = model_states(7e9, 8, 2, offload_optimizer=True)
    assert s["optimizer"] == 0 and s["cpu_optimizer"] == pytest.approx(12 * 7e9 / 8)
    assert s["total"] == pytest.approx(2 * 7e9 + 2 * 7e9 / 8)
    with pytest.raises(ValueError):
        model_states(7e9, 8, 0, offload_optimizer=True)


def test_activation_formula():
    # L·s·b·h·(34 + 5·a·s/h) for a LLaMA-7B-like shape
    assert activations(32, 4096, 32, 2048, 1) == 32 * 2048 * 4096 * (34 + 5 * 32 * 2048 / 4096)
    assert activations(32, 4096, 32, 2048, 1, checkpointing=True) == 2 * 2048 * 4096 * 32
    layers, hidden = model_shape(7e9)
    assert hidden == 128 * layers and 12 * layers * hidden**2 == pytest.approx(7e9, rel=0.15)


def test_cli_table_and_json():
    runner = CliRunner()
    res = runner.invoke(app, ["estimate", "--params", "7.5e9", "--gpus", "64", "--zero", "2"])
    assert res.exit_code == 0, res.output
    assert "model states per GPU        16.6 GB" in res.output
    res = runner.invoke(app, ["estimate", "--params", "7e9", "--gpus", "8", "--zero", "2", "--offload-optimizer",
                              "--layers", "32", "--hidden", "4096", "--json"])
    doc = json.loads(res.output)
    assert doc["bytes"]["cpu_optimizer"] == pytest.approx(10.5e9) and doc["shape"]["assumed"] is False
    assert doc == estimate(7e9, 8, 2, True, layers=32, hidden=4096)
