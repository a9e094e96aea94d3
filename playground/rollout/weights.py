"""The rollout's own copy of the policy: the weights an inference engine (vLLM, SGLang) generates with, in its own
precision, synced from the actor before each step as verl's weight sync does, and the ways real stacks get it wrong.

A real rollout engine holds a second copy of the weights, loaded in its own dtype (`rollout.dtype`, verl's default
bfloat16), and receives the trainer's weights after each update (verl: `update_weights` before the next `gen`).
An async trainer generates with weights some updates behind (`rollout.staleness`; verl logs
`training/off_policy/trajectory_staleness/*`), and a broken sync leaves the rollout with the weights it was loaded
with (`rollout.weight_sync=none`) or without some of them (`partial`: a LoRA adapter or resharding bug that drops
parameters; with `rollout.load_format=dummy`, verl's default, what never arrives stays random). When none of this
differs from the trainer the rollout shares the actor's weights: no copy, no cost, the same bits as before.

Simplifications: the playground's weights versions count training steps (verl's `global_steps`), whether or not the
actor updated in that step (`trainer.critic_warmup`), as verl's version counter does; the sync copies every parameter
at once (no bucketing).
"""

from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass

import torch
from torch import nn

# verl's PrecisionType spellings
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


@dataclass(frozen=True)
class RolloutSpec:
    """How the rollout differs from the trainer (`actor_rollout_ref.rollout.*`)."""

    dtype: torch.dtype
    staleness: int  # updates the weights lag
    weight_sync: str  # full | none | partial
    weight_sync_skip: tuple[str, ...]  # partial: parameter-name prefixes that never arrive
    calculate_log_probs: bool
    load_format: str = "hf"  # hf: loaded from the checkpoint (the base); dummy: vLLM's dummy weights

    @property
    def owns_weights(self) -> bool:
        """Whether the rollout needs weights of its own (else it shares the actor's)."""
        return self.dtype != torch.float32 or self.staleness > 0 or self.weight_sync != "full"


class RolloutWeights:
    """The rollout's own copy of the policy, kept in its dtype and synced as `spec` says: built only where the rollout
    differs from the trainer (`RolloutSpec.owns_weights`; else the rollout worker generates with the actor's model).

    Args:
        actor: the trainer's model (stacked over agents for K > 1); the copy has its structure.
    """

    def __init__(self, actor: nn.Module, spec: RolloutSpec):
        if not spec.owns_weights:
            raise ValueError("a rollout like the trainer's (float32, no staleness, full sync) shares the actor's "
                             "weights: it has no copy to keep")
        self.actor, self.spec, self.steps = actor, spec, 0
        self.versions_behind = 0  # of this step's rollout: (global_steps - 1) - the weights' version
        # loaded from the same checkpoint as the actor (the base), then kept in the engine's dtype
        self.model = copy.deepcopy(actor).to(spec.dtype).eval().requires_grad_(False)
        if spec.load_format == "dummy":  # vLLM's initialize_dummy_weights: the sync is to deliver the real ones
            draws = torch.Generator(device="cpu").manual_seed(0)
            with torch.no_grad():
                for p in self.model.parameters():
                    p.copy_(torch.rand(p.shape, generator=draws).mul_(2e-3).sub_(1e-3))
        names = [name for name, _ in actor.named_parameters()]
        unknown = [p for p in spec.weight_sync_skip if not any(n.startswith(p) for n in names)]
        if unknown:
            raise ValueError(f"actor_rollout_ref.rollout.weight_sync_skip={list(spec.weight_sync_skip)!r} names no "
                             f"parameter with {unknown!r}: the model's parameters are {names}")
        self.synced = [name for name in names if spec.weight_sync == "full" or (
            spec.weight_sync == "partial" and not any(name.startswith(p) for p in spec.weight_sync_skip))]
        self.history: deque[tuple[int, dict[str, torch.Tensor]]] = deque()  # (version, fp32 weights), oldest first

    @torch.no_grad()
    def sync(self) -> None:
        """Before a step's generation (verl's `update_weights`): the weights `staleness` versions back, as far as the
        sync delivers them."""
        version = self.steps  # the actor's version: updates so far (global_steps - 1)
        self.steps += 1
        actor: dict[str, torch.Tensor] = dict(self.actor.named_parameters())
        if self.spec.staleness > 0:
            self.history.append((version, {name: actor[name].detach().clone() for name in self.synced}))
            while len(self.history) > self.spec.staleness + 1:
                self.history.popleft()
            loaded, source = self.history[0]
        else:
            loaded, source = version, actor
        self.versions_behind = version - loaded
        params = dict(self.model.named_parameters())
        for name in self.synced:
            params[name].copy_(source[name])  # rounds to the rollout's dtype
