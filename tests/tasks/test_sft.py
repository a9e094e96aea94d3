"""Tests for the SFT base model: response-only loss, stopping window, determinism and the disk cache."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import pytest
import torch

from playground.config import ConfigError
from playground.models.tiny_gpt import GPTConfig, TinyGPT
from playground.tasks.prompt_sets import make_prompts
from playground.tasks.sft import (
    SFT_CODE_VERSION,
    SFTConfig,
    build_base_model,
    cache_key,
    greedy_accuracy,
    sft_loss,
)
from playground.tasks.token_data import Example

# reverse-3 with a 1-layer d32 model at lr 3e-3 reaches 0.3 in about 45 steps (under a second; the first
# AdamW step in a process costs ~2 s more, importing torch._dynamo)
TASK_KNOBS = dict(min_digits=3, max_digits=3, num_val=64)
MODEL = GPTConfig(vocab_size=17, block_size=16, n_layer=1, n_embd=32)
SFT = SFTConfig(lr=3e-3, eval_every=2, target_acc_hi=1.0, max_steps=200)


@pytest.fixture(scope="module")
def task():
    return make_prompts("reverse", **TASK_KNOBS)


def test_sft_loss_is_cross_entropy_on_answer_and_eos_only(task):
    torch.manual_seed(0)
    model = TinyGPT(MODEL)
    examples = [Example("7>", "7"), Example("123>", "321")]
    # by hand: the prompt and padding are not scored; each target token is predicted one position earlier
    nll = []
    for ex in examples:
        ids = torch.tensor([task.prompt_ids(ex) + task.target_ids(ex)])
        logits = model(ids, torch.ones_like(ids), torch.arange(ids.size(1))[None])
        targets = torch.tensor(task.target_ids(ex))
        start = len(task.prompt_ids(ex)) - 1
        nll += torch.nn.functional.cross_entropy(logits[0, start:start + len(targets)], targets, reduction="none")
    expected = torch.stack(nll).mean()  # token mean over the 2 + 4 target tokens
    torch.testing.assert_close(sft_loss(model, task, examples), expected, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def built(task, cache):
    return build_base_model(task, MODEL, SFT, cache_dir=cache)


def test_build_is_deterministic_and_in_window(task, built, tmp_path):
    again = build_base_model(task, MODEL, SFT, cache_dir=tmp_path)  # a different cache dir: trains again
    assert not built.cached and not again.cached
    assert again.steps == built.steps and again.val_accuracy == built.val_accuracy
    for (name, x), (_, y) in zip(built.model.state_dict().items(), again.model.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    assert SFT.target_acc_lo <= built.val_accuracy <= SFT.target_acc_hi
    assert built.history[-1] == (built.steps, built.val_accuracy)
    assert all(acc < SFT.target_acc_lo for _, acc in built.history[:-1])
    assert greedy_accuracy(built.model, task, task.val) == built.val_accuracy


def test_second_build_loads_from_cache(task, built, cache):
    second = build_base_model(task, MODEL, SFT, cache_dir=cache)
    assert second.cached and second.path == built.path and second.path.parent == cache / "sft"
    assert (second.steps, second.val_accuracy, second.seconds) == (built.steps, built.val_accuracy, built.seconds)
    assert second.history == built.history
    for (name, x), (_, y) in zip(built.model.state_dict().items(), second.model.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    assert not second.model.training
    files = sorted(p.name for p in (cache / "sft").iterdir())  # no temporary files left behind
    assert files == sorted([built.path.name, built.path.with_suffix(".json").name])


def test_cache_dir_from_environment(task, built, cache, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_CACHE", str(cache))
    assert build_base_model(task, MODEL, SFT).cached


def test_cache_key_covers_every_config(task):
    key = cache_key(task, MODEL, SFT)
    assert key == cache_key(make_prompts("reverse", **TASK_KNOBS), MODEL, SFT)
    assert key != cache_key(make_prompts("reverse", **TASK_KNOBS, seed=1), MODEL, SFT)
    assert key != cache_key(task, dataclasses.replace(MODEL, n_embd=64), SFT)
    assert key != cache_key(task, MODEL, dataclasses.replace(SFT, seed=1))


def test_never_reaching_the_target_raises(task, tmp_path):
    with pytest.raises(RuntimeError, match="max_steps=4"):
        build_base_model(task, MODEL, dataclasses.replace(SFT, max_steps=4), cache_dir=tmp_path)
    assert not (tmp_path / "sft").exists() or not any((tmp_path / "sft").iterdir())


def test_overshooting_the_window_raises(task, tmp_path):
    overshoot = dataclasses.replace(SFT, target_acc_lo=0.0, target_acc_hi=-1.0)  # the first eval overshoots
    with pytest.raises(RuntimeError, match="overshot"):
        build_base_model(task, MODEL, overshoot, cache_dir=tmp_path)


def test_model_must_fit_the_task(task, tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        build_base_model(task, dataclasses.replace(MODEL, vocab_size=20), SFT, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="block_size"):
        build_base_model(task, dataclasses.replace(MODEL, block_size=8), SFT, cache_dir=tmp_path)


def test_default_reverse_base_is_partial(tmp_path):
    """The documented default: reverse-5, d64 x 2 layers, lr 3e-4 -> a 0.3-0.7 base in ~100 steps (~3 s)."""
    task = make_prompts("reverse")
    base = build_base_model(task, GPTConfig(vocab_size=17, block_size=16), SFTConfig(), cache_dir=tmp_path)
    assert 0.3 <= base.val_accuracy <= 0.7 and base.steps <= 300


@pytest.mark.slow
def test_default_addition_base_is_partial(tmp_path):
    """3-digit addition, sum written reversed, lr 1e-3, eval every 10 -> a partial base in ~500 steps (10-20 s)."""
    task = make_prompts("addition")
    base = build_base_model(task, GPTConfig(vocab_size=17, block_size=24), SFTConfig(lr=1e-3, eval_every=10),
                            cache_dir=tmp_path)
    assert 0.3 <= base.val_accuracy <= 0.7 and not math.isnan(base.seconds)


def test_cosine_schedule_by_hand():
    """verl's warm-up + cosine: linear to lr over 10 % of the steps, then half a cosine down to min_lr_ratio * lr."""
    cfg = SFTConfig(lr=1.0, lr_scheduler="cosine", warmup_steps_ratio=0.1, min_lr_ratio=0.1, max_steps=100)
    assert [cfg.lr_at(s) for s in (1, 5, 10)] == pytest.approx([0.1, 0.5, 1.0])
    assert cfg.lr_at(55) == pytest.approx(0.1 + 0.9 * 0.5)  # half-way through the decay: cos(pi / 2) = 0
    assert cfg.lr_at(100) == pytest.approx(0.1)
    assert SFTConfig(lr=0.5).lr_at(1) == SFTConfig(lr=0.5).lr_at(3000) == 0.5


@pytest.mark.parametrize("overrides, message", [
    ({"lr_scheduler": "linear"}, "sft.lr_scheduler='linear' is out of range"),
    ({"lr_scheduler": "cosine", "warmup_steps_ratio": 1.0}, "sft.warmup_steps_ratio=1.0 is out of range"),
    ({"warmup_steps_ratio": 0.1}, "need sft.lr_scheduler=cosine"),
    ({"stop_at_target": False, "max_steps": 25, "eval_every": 10}, "multiple of sft.eval_every=10"),
])
def test_bad_schedule_is_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        SFTConfig(**overrides)


def test_cache_keys_of_bases_made_before_the_schedule_keys_are_unchanged(task):
    """The schedule keys at their defaults are left out of the hash: the bases cached before them keep their key."""
    fields = ("lr", "weight_decay", "batch_size", "grad_clip", "eval_every", "target_acc_lo", "target_acc_hi",
              "max_steps", "seed")
    blob = json.dumps({"task": task.config, "model": dataclasses.asdict(MODEL),
                       "sft": {k: getattr(SFT, k) for k in fields}, "version": SFT_CODE_VERSION}, sort_keys=True)
    assert cache_key(task, MODEL, SFT) == hashlib.sha256(blob.encode()).hexdigest()[:16]
    assert cache_key(task, MODEL, SFT) != cache_key(task, MODEL, dataclasses.replace(SFT, stop_at_target=False))


def test_training_to_the_end_judges_the_last_eval(task, tmp_path):
    """stop_at_target=false runs every step of the schedule (past the first eval in the window) and keeps the end."""
    to_end = dataclasses.replace(SFT, lr_scheduler="cosine", warmup_steps_ratio=0.1, stop_at_target=False,
                                 max_steps=20, eval_every=10, target_acc_lo=0.0)
    base = build_base_model(task, MODEL, to_end, cache_dir=tmp_path)
    assert base.steps == 20 and [s for s, _ in base.history] == [10, 20]
    assert base.val_accuracy == base.history[-1][1] == greedy_accuracy(base.model, task, task.val)
    with pytest.raises(RuntimeError, match="ended below the target"):
        build_base_model(task, MODEL, dataclasses.replace(to_end, max_steps=10, target_acc_lo=1.0),
                         cache_dir=tmp_path)


def test_an_interrupted_build_resumes_to_the_same_weights(task, built, tmp_path):
    """A build stopped mid-way (Ctrl-C) keeps its checkpoint (taken at every eval); the next build resumes from it
    and ends with the weights, steps and evals of a build that never stopped."""
    heard = []

    def stop_at_step_7(progress):
        heard.append(progress)
        if progress.step == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_base_model(task, MODEL, SFT, cache_dir=tmp_path, progress=stop_at_step_7)
    partial = next((tmp_path / "sft").glob("*.partial.pt"))
    assert torch.load(partial, weights_only=True)["step"] == 6  # the last eval before the stop
    assert [p.step for p in heard] == list(range(1, 8)) and heard[0].total == SFT.max_steps
    assert heard[-1].val_accuracy == heard[-2].val_accuracy is not None and heard[-1].target == SFT.target_acc_lo
    assert heard[-1].eta_s() is None  # too few steps for a pace
    resumed_from = []
    again = build_base_model(task, MODEL, SFT, cache_dir=tmp_path, progress=resumed_from.append)
    assert resumed_from[0].step == 7 and not partial.exists()
    assert (again.steps, again.val_accuracy, again.history) == (built.steps, built.val_accuracy, built.history)
    for (name, x), (_, y) in zip(built.model.state_dict().items(), again.model.state_dict().items(), strict=True):
        assert torch.equal(x, y), name


def test_a_shipped_base_is_loaded_before_the_cache(task, built, tmp_path, monkeypatch):
    shipped = tmp_path / "bases"
    shipped.mkdir()
    (shipped / built.path.name).write_bytes(built.path.read_bytes())
    monkeypatch.setattr("playground.tasks.sft.SHIPPED", shipped)
    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path / "empty"))
    base = build_base_model(task, MODEL, SFT)
    assert base.cached and base.path == shipped / built.path.name and not (tmp_path / "empty").exists()
    assert not build_base_model(task, MODEL, SFT, cache_dir=tmp_path / "own").cached  # a cache dir of its own
