"""Activation (gradient) checkpointing of one module call, as verl's `enable_gradient_checkpointing` turns it on for
the transformer's blocks (Hugging Face's `gradient_checkpointing_enable`, torch's non-reentrant checkpoint).

The forward keeps only the module's inputs; backward runs the module's forward again to rebuild the activations it
needs, then frees them block by block: the same numbers, less peak memory, one more forward's compute.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint


@contextlib.contextmanager
def _then(callback: Callable[[], None]) -> Iterator[None]:
    try:
        yield
    finally:  # torch ends a recomputation early, by an exception, once it has rebuilt every tensor backward needs
        callback()


def checkpointed(module: torch.nn.Module, *args: Any, after_recompute: Callable[[], None] | None = None) -> Any:
    """`module(*args)`, its activations recomputed in backward instead of kept.

    The module's parameters are explicit inputs of the checkpointed function, so the recomputation runs on the
    tensors the forward ran on. That matters for an `AgentView` (`torch.func.functional_call`): it swaps some agents'
    weights in only for the duration of its call, which has ended when backward runs; reading the module's
    attributes again then would recompute with the whole stack's weights.

    `after_recompute`: called right after each recomputation, when the rebuilt activations are alive (the peak of a
    checkpointed backward): the CPU memory guard measures there.
    """
    named = list(module.named_parameters())
    names, params = [name for name, _ in named], [param for _, param in named]

    def forward(*inputs: Any) -> Any:
        weights = dict(zip(names, inputs[:len(names)]))
        return torch.func.functional_call(module, weights, inputs[len(names):])

    extra: dict[str, Any] = {} if after_recompute is None else {
        "context_fn": lambda: (contextlib.nullcontext(), _then(after_recompute))}
    return checkpoint(forward, *params, *args, use_reentrant=False, **extra)


def warm_up() -> None:
    """Run one tiny checkpointed backward: torch's checkpoint imports `torch._dynamo` on its first call (~90 MiB of
    modules, ~2 s), which would otherwise count as the first update's memory growth under `trainer.memory_limit_gb`."""
    layer = torch.nn.Linear(1, 1)
    checkpointed(layer, torch.zeros(1, 1, requires_grad=True), after_recompute=lambda: None).sum().backward()
