"""The SFT "base model" for token-task RL: a tiny GPT trained on demonstrations until it solves part of val.

Like verl's SFT trainer (`verl/trainer/fsdp_sft_trainer.py`): cross-entropy on the response tokens only.
Unlike it, training by default stops as soon as greedy validation accuracy first reaches a target, so RL starts
from a partial solver, and the weights are cached on disk keyed by every setting that shaped them. A task whose base
needs long training (countdown) instead runs verl's warm-up + cosine schedule to its end (`stop_at_target=false`).

The bases the tasks' scenarios start from ship with the checkout (`bases/`, `make bases` rebuilds them), so no task
waits for its base the first time. Any other base builds once, saying its progress, and an interrupted build resumes
from its last checkpoint (`<key>.partial.pt`, every minute and at every eval) to the same weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from playground.config import ConfigError
from playground.models.tiny_gpt import GPTConfig, TinyGPT, compute_log_prob, position_ids_from_mask
from playground.rollout.decode import generate
from playground.rundir.runs import write_atomic
from playground.tasks.agent_loop import run_episodes
from playground.tasks.token_data import Example, PromptSet

# Bump when a change here or in the model alters the weights a config produces: old cache entries then miss.
SFT_CODE_VERSION = 1
SHIPPED = Path(__file__).resolve().parents[2] / "bases"  # the versioned bases, looked up before the cache
CHECKPOINT_EVERY_S = 60.0  # an interrupted build loses at most about this much work
ESTIMATE_AFTER = 20  # steps before a time estimate (the first step alone costs ~2 s more: torch's optimizer set-up)


class SFTProgress(NamedTuple):
    """Where a base's build stands, as its progress callback hears it after every optimizer step."""

    step: int
    total: int  # sft.max_steps: the build's length when it runs to the end, its cap when it stops at the target
    seconds: float  # wall time so far, the time before a resume included
    val_accuracy: float | None  # the last eval's, None before the first
    target: float | None = None  # the accuracy a build that stops at its target stops at; None: it runs to the end

    def eta_s(self) -> float | None:
        """Seconds left at this build's pace (at most that for a build that stops at its target); None over the first
        `ESTIMATE_AFTER` steps, whose pace the first optimizer step's one-off set-up still distorts."""
        if self.step < ESTIMATE_AFTER:
            return None
        return self.seconds / self.step * (self.total - self.step)


@dataclass
class SFTConfig:
    lr: float = 3e-4  # 1e-3 jumps from 0 to 0.99 within 15 steps on reverse-5: no partial base to catch
    weight_decay: float = 0.01  # AdamW, verl's default
    batch_size: int = 64
    grad_clip: float = 1.0  # max grad norm, as verl's actor
    eval_every: int = 5  # greedy val accuracy every this many steps; rises ~0.2 per 5 steps near the target
    target_acc_lo: float = 0.3  # stop at the first eval at or above this...
    target_acc_hi: float = 0.7  # ...and fail if that eval overshot past this: RL needs room to improve
    max_steps: int = 3000  # fail if the target is not reached by then
    seed: int = 0  # model init and batch order
    # verl's SFT optimizer (`optim.lr_scheduler`, `optim.warmup_steps_ratio`, `optim.min_lr_ratio`): "constant" is
    # lr from step 1; "cosine" warms up linearly over warmup_steps_ratio * max_steps, then decays to
    # min_lr_ratio * lr at max_steps
    lr_scheduler: str = "constant"
    warmup_steps_ratio: float = 0.0
    min_lr_ratio: float = 0.0
    # False: train all max_steps (a decaying schedule's whole length), then require the last eval in the window
    stop_at_target: bool = True

    def __post_init__(self) -> None:
        if self.lr_scheduler not in LR_SCHEDULERS:
            raise ConfigError(f"sft.lr_scheduler={self.lr_scheduler!r} is out of range: allowed one of {LR_SCHEDULERS}")
        for key in ("warmup_steps_ratio", "min_lr_ratio"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ConfigError(f"sft.{key}={getattr(self, key)} is out of range: allowed [0, 1)")
        if self.lr_scheduler == "constant" and (self.warmup_steps_ratio or self.min_lr_ratio):
            raise ConfigError("sft.warmup_steps_ratio and sft.min_lr_ratio need sft.lr_scheduler=cosine, got "
                              f"constant with {self.warmup_steps_ratio}, {self.min_lr_ratio}")
        if not self.stop_at_target and self.max_steps % self.eval_every:
            raise ConfigError(f"sft.stop_at_target=false judges the eval at sft.max_steps={self.max_steps}: it must "
                              f"be a multiple of sft.eval_every={self.eval_every}")

    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step `step` (1-based), as verl's `get_cosine_schedule_with_warmup`."""
        if self.lr_scheduler == "constant":
            return self.lr
        warmup = int(self.warmup_steps_ratio * self.max_steps)
        if step <= warmup:
            return self.lr * step / warmup
        progress = (step - warmup) / max(1, self.max_steps - warmup)
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


LR_SCHEDULERS = ("constant", "cosine")
# the keys added after the first cached bases: left out of the cache key at these values, so those bases keep theirs
_LATER_KEYS = {"lr_scheduler": "constant", "warmup_steps_ratio": 0.0, "min_lr_ratio": 0.0, "stop_at_target": True}


@dataclass
class BaseModel:
    model: TinyGPT
    val_accuracy: float  # greedy exact-match accuracy on task.val when training stopped
    steps: int  # optimizer steps taken
    seconds: float  # training wall time (of the original run, when loaded from cache)
    path: Path  # the cached weights file
    cached: bool  # True when loaded from disk
    history: list[tuple[int, float]] = dataclasses.field(default_factory=list)  # (step, val accuracy) per eval


def cache_root(cache_dir: Path | str | None = None) -> Path:
    """`cache_dir`, else env `PLAYGROUND_CACHE`, else `~/.cache/ppo-playground`."""
    if cache_dir is not None:
        return Path(cache_dir)
    return Path(os.environ.get("PLAYGROUND_CACHE", Path.home() / ".cache" / "ppo-playground"))


def cache_key(task: PromptSet, model_cfg: GPTConfig, sft_cfg: SFTConfig) -> str:
    """Hash of everything that determines the base model's weights."""
    sft = {k: v for k, v in dataclasses.asdict(sft_cfg).items() if k not in _LATER_KEYS or v != _LATER_KEYS[k]}
    blob = json.dumps({"task": task.config, "model": dataclasses.asdict(model_cfg), "sft": sft,
                       "version": SFT_CODE_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@torch.no_grad()
def greedy_accuracy(model: TinyGPT, task: PromptSet, examples: list[Example], batch_size: int = 512) -> float:
    """Exact-match accuracy of greedy responses (verl's val_kwargs: temperature 0, n 1); a multi-turn task's episodes
    run with its environment, scored by their outcome's `acc`."""
    was_training = model.training
    model.eval()
    correct = 0.0
    for start in range(0, len(examples), batch_size):
        chunk = examples[start:start + batch_size]
        prompt_ids, prompt_mask = task.collate_prompts(chunk)
        if task.multi_turn:
            _, traces = run_episodes(model, task, chunk, prompt_ids, prompt_mask, max_new_tokens=task.max_answer_tokens,
                                     do_sample=False)
            correct += sum(trace.outcome["acc"] for trace in traces)
            continue
        out = generate(model, prompt_ids, prompt_mask, max_new_tokens=task.max_answer_tokens,
                       eos_id=task.tokenizer.eos_id, pad_id=task.tokenizer.pad_id, do_sample=False)
        for text, ex in zip(task.decode_responses(out.responses), chunk, strict=True):
            correct += task.score(text, ex)["acc"]
    model.train(was_training)
    return correct / len(examples)


def sft_loss(model: TinyGPT, task: PromptSet, examples: list[Example]) -> torch.Tensor:
    """Token-mean cross-entropy on the demonstration's trained tokens (answer + EOS; a multi-turn trace's assistant
    turns, not its environment's replies) given the left-padded prompt (the RL batch layout)."""
    prompt_ids, prompt_mask = task.collate_prompts(examples)  # (bs, P)
    target_ids, target_mask, loss_mask = task.collate_sft_targets(examples)  # (bs, A)
    input_ids = torch.cat([prompt_ids, target_ids], dim=1)  # (bs, P + A), as build_sequences lays out a rollout
    attention_mask = torch.cat([prompt_mask, target_mask], dim=1)
    log_probs, _ = compute_log_prob(model, input_ids, attention_mask, position_ids_from_mask(attention_mask),
                                    target_ids)
    return -(log_probs * loss_mask).sum() / loss_mask.sum()


def train_sft(task: PromptSet, model_cfg: GPTConfig, sft_cfg: SFTConfig, checkpoint: Path | None = None,
              progress: Callable[[SFTProgress], None] | None = None) -> tuple[TinyGPT, dict[str, Any]]:
    """Trains from scratch until the first eval with accuracy >= target_acc_lo (or, with `stop_at_target` off,
    for max_steps, judging the last eval). Deterministic on CPU, also across a resume.

    Args:
        checkpoint: where the build's state (weights, optimizer, sampling generator, evals) is kept every
            `CHECKPOINT_EVERY_S` and at every eval; a build that finds one there resumes from it.
        progress: called after every optimizer step.
    """
    if model_cfg.vocab_size != task.tokenizer.vocab_size:
        raise ValueError(f"model vocab_size {model_cfg.vocab_size} != tokenizer vocab_size {task.tokenizer.vocab_size}")
    if model_cfg.block_size < task.max_prompt_tokens + task.max_answer_tokens:
        raise ValueError(f"model block_size {model_cfg.block_size} < prompt + answer tokens "
                         f"{task.max_prompt_tokens + task.max_answer_tokens}")
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):  # seed the init without disturbing the caller's global RNG
        torch.manual_seed(sft_cfg.seed)
        model = TinyGPT(model_cfg)
    generator = torch.Generator().manual_seed(sft_cfg.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=sft_cfg.lr, weight_decay=sft_cfg.weight_decay)
    history: list[tuple[int, float]] = []
    done, before = 0, 0.0  # steps and seconds of the build before this process (a resume)
    if checkpoint is not None and checkpoint.exists():
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])
        history = [tuple(h) for h in state["history"]]
        done, before = int(state["step"]), float(state["seconds"])
    saved = time.monotonic()

    def keep(step: int) -> None:
        assert checkpoint is not None  # kept only with a checkpoint file
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                 "history": history, "step": step, "seconds": before + time.perf_counter() - t0}
        write_atomic(checkpoint, lambda f: torch.save(state, f))

    model.train()
    for step in range(done + 1, sft_cfg.max_steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = sft_cfg.lr_at(step)
        loss = sft_loss(model, task, task.sample(sft_cfg.batch_size, generator))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), sft_cfg.grad_clip)
        optimizer.step()
        evaluated = step % sft_cfg.eval_every == 0
        if evaluated:
            history.append((step, greedy_accuracy(model, task, task.val)))
        if progress is not None:
            progress(SFTProgress(step, sft_cfg.max_steps, before + time.perf_counter() - t0,
                                 history[-1][1] if history else None,
                                 sft_cfg.target_acc_lo if sft_cfg.stop_at_target else None))
        if checkpoint is not None and step < sft_cfg.max_steps and (
                evaluated or time.monotonic() - saved >= CHECKPOINT_EVERY_S):
            keep(step)
            saved = time.monotonic()
        if not evaluated:
            continue
        acc = history[-1][1]
        if acc < sft_cfg.target_acc_lo or (not sft_cfg.stop_at_target and step < sft_cfg.max_steps):
            continue
        if acc > sft_cfg.target_acc_hi:
            raise RuntimeError(f"SFT overshot the target window: val accuracy {acc:.3f} at step {step} is above "
                               f"sft.target_acc_hi={sft_cfg.target_acc_hi} (previous evals {history[-3:-1]}); "
                               "lower sft.lr or sft.eval_every")
        model.eval()
        return model, {"val_accuracy": acc, "steps": step, "seconds": before + time.perf_counter() - t0,
                       "history": history}
    best = max(history, key=lambda h: h[1], default=(0, 0.0))
    if not sft_cfg.stop_at_target:
        raise RuntimeError(f"SFT ended below the target: val accuracy {history[-1][1]:.3f} at sft.max_steps="
                           f"{sft_cfg.max_steps} < sft.target_acc_lo={sft_cfg.target_acc_lo} (best {best[1]:.3f} at "
                           f"step {best[0]}); raise max_steps or lr")
    raise RuntimeError(f"SFT never reached val accuracy {sft_cfg.target_acc_lo} within sft.max_steps="
                       f"{sft_cfg.max_steps} (best {best[1]:.3f} at step {best[0]}); raise max_steps or lr, "
                       "or make the task easier")


def base_path(task: PromptSet, model_cfg: GPTConfig, sft_cfg: SFTConfig,
              cache_dir: Path | str | None = None) -> tuple[Path, bool]:
    """Where the base of these settings is or will be: the shipped file (`bases/<key>.pt`) where there is one, else
    `<cache>/sft/<key>.pt`; and whether it exists."""
    key = cache_key(task, model_cfg, sft_cfg)
    shipped = SHIPPED / f"{key}.pt"
    if cache_dir is None and shipped.exists():  # a test's own cache dir asks for a build of its own
        return shipped, True
    path = cache_root(cache_dir) / "sft" / f"{key}.pt"
    return path, path.exists()


def build_base_model(
    task: PromptSet, model_cfg: GPTConfig, sft_cfg: SFTConfig, cache_dir: Path | str | None = None,
    progress: Callable[[SFTProgress], None] | None = None,
) -> BaseModel:
    """Loads the base model from `bases/` or `<cache>/sft/<key>.pt`, or trains and caches it.

    The file is written to a temporary name and renamed into place, so parallel sweep jobs that
    miss together both train and both write whole, identical files; a reader never sees half a file.
    A build keeps its state in `<key>.partial.pt` as it goes and resumes from it (`train_sft`).
    """
    path, exists = base_path(task, model_cfg, sft_cfg, cache_dir)
    if exists:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        model = TinyGPT(model_cfg)
        model.load_state_dict(blob["state_dict"])
        model.eval()
        info = blob["info"]
        return BaseModel(model, info["val_accuracy"], info["steps"], info["seconds"], path, cached=True,
                         history=[tuple(h) for h in info["history"]])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.pt")
    try:
        model, info = train_sft(task, model_cfg, sft_cfg, checkpoint=partial, progress=progress)
    except RuntimeError:  # the recipe misses its window: a resume would miss it again (an interrupt keeps it)
        partial.unlink(missing_ok=True)
        raise
    meta = {"task": task.config, "model": dataclasses.asdict(model_cfg), "sft": dataclasses.asdict(sft_cfg),
            "version": SFT_CODE_VERSION}
    write_atomic(path, lambda f: torch.save({"state_dict": model.state_dict(), "info": {**info, **meta}}, f))
    write_atomic(path.with_suffix(".json"), lambda f: f.write(json.dumps({**info, **meta}, indent=1).encode()))
    partial.unlink(missing_ok=True)
    return BaseModel(model, info["val_accuracy"], info["steps"], info["seconds"], path, cached=False,
                     history=info["history"])
