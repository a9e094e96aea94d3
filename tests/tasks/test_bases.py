"""Tests for the shipped SFT bases (`bases/`, playground/bases.py): every token config finds its base there,
each file is the base its settings name, and rebuilding one gives its weights again."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from playground import bases
from playground.models.tiny_gpt import GPTConfig, TinyGPT
from playground.tasks.sft import SHIPPED, SFTConfig, build_base_model, cache_key

SHIPPED_KEYS = sorted(p.stem for p in SHIPPED.glob("*.pt"))
FASTEST = min(SHIPPED_KEYS, key=lambda k: json.loads((SHIPPED / f"{k}.json").read_text())["seconds"])


def meta(key: str) -> dict:
    return json.loads((SHIPPED / f"{key}.json").read_text())


def test_every_token_config_finds_its_base_shipped():
    """A first run of any token task's scenario or workshop exercise loads its base instead of training it."""
    missing = {key: labels for key, (labels, _) in bases.needed().items() if key not in SHIPPED_KEYS}
    assert not missing, f"bases not shipped (run `make bases`): {missing}"
    assert bases.main(["--check"]) == 0  # the command says so too


@pytest.mark.parametrize("key", SHIPPED_KEYS)
def test_a_shipped_base_is_the_base_its_settings_name(key):
    info = meta(key)
    model_cfg, sft_cfg = GPTConfig(**info["model"]), SFTConfig(**info["sft"])
    assert cache_key(SimpleNamespace(config=info["task"]), model_cfg, sft_cfg) == key
    blob = torch.load(SHIPPED / f"{key}.pt", map_location="cpu", weights_only=True)
    TinyGPT(model_cfg).load_state_dict(blob["state_dict"])  # every weight, the right shapes
    assert sft_cfg.target_acc_lo <= info["val_accuracy"] <= sft_cfg.target_acc_hi
    assert info["serves"] and info["cpu"]


def _rebuilt_matches(key: str, tmp_path: Path) -> None:
    """Bit for bit on the CPU that built it; elsewhere float reductions may differ over a long build, so there the
    rebuild must reach the same steps and a validation accuracy within 0.05."""
    info = meta(key)
    labels, overrides = bases.needed()[key]
    base = build_base_model(*bases.base_settings(overrides), cache_dir=tmp_path)
    shipped = torch.load(SHIPPED / f"{key}.pt", map_location="cpu", weights_only=True)["state_dict"]
    if info["cpu"] == bases.cpu_name():
        for name, weights in base.model.state_dict().items():
            assert torch.equal(weights, shipped[name]), f"{labels[0]}: {name} differs from bases/{key}.pt"
    assert base.steps == info["steps"] and abs(base.val_accuracy - info["val_accuracy"]) <= 0.05


def test_rebuilding_the_fastest_base_gives_its_weights(tmp_path):
    _rebuilt_matches(FASTEST, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("key", [k for k in SHIPPED_KEYS if k != FASTEST])
def test_rebuilding_a_shipped_base_gives_its_weights(key, tmp_path):
    """`make bases` says the same for every base (countdown's takes about a quarter of an hour)."""
    _rebuilt_matches(key, tmp_path)
