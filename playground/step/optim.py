"""AdamW for K agents at once, verl's gradient handling, and verl's learning-rate schedules.

One optimizer serves a single model (parameters without an agent dim, K = 1) and K batched agents
(every parameter shaped `(K, ...)`): learning rates, clip norms and step counts are `(K,)` tensors, the
pre-clip gradient norm is measured per agent, and an agent whose norm is not finite skips its step
(verl's `_optimizer_step` in `dp_actor.py`: log the NaN, zero the grads, no `optimizer.step()`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor


class AgentAdamW:
    """Decoupled-weight-decay Adam (Loshchilov & Hutter 2019) with per-agent lr and gradient clipping.

    Args:
        params: tensors with `requires_grad`; with `agent_dim=True` each has the agent dim first.
        lr: `(K,)` initial learning rates (the schedule rescales them each step).
        weight_decay: decoupled weight decay, a float or `(K,)`.
        agent_dim: whether parameters carry a leading agent dim; False means one model (K = 1).
    """

    def __init__(self, params: Sequence[Tensor], lr: Tensor, betas: Sequence[float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float | Tensor = 0.0, agent_dim: bool = True):
        self.params = list(params)
        self.agent_dim = agent_dim
        device = self.params[0].device
        self.base_lr = torch.as_tensor(lr, dtype=torch.float32, device=device).reshape(-1)
        self.lr = self.base_lr.clone()
        self.num_agents = self.base_lr.numel()
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = eps
        self.weight_decay = torch.as_tensor(weight_decay, dtype=torch.float32, device=device).reshape(-1)
        self.decays = bool((self.weight_decay != 0).any())
        self.step_count = torch.zeros(self.num_agents, device=device)
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def load_state(self, other: AgentAdamW) -> None:
        """Take `other`'s state (its moments and step counts) for the same parameters, as a resume loads an
        optimizer's checkpoint; the learning rates and settings stay this optimizer's."""
        self.step_count = other.step_count.clone()
        self.exp_avg = [m.clone() for m in other.exp_avg]
        self.exp_avg_sq = [v.clone() for v in other.exp_avg_sq]

    def _per_agent(self, x: Tensor, like: Tensor) -> Tensor:
        """A `(K,)` tensor shaped to broadcast against one parameter."""
        if not self.agent_dim:
            return x.reshape([1] * like.dim()) if like.dim() else x.reshape(())
        return x.reshape(-1, *([1] * (like.dim() - 1)))

    def zero_grad(self) -> None:
        """Zero the gradients in place: a model may share one gradient buffer between its parameters."""
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    def grad_norm(self) -> Tensor:
        """The global L2 norm of each agent's gradient, `(K,)` (missing grads count as zero)."""
        grads = [p.grad for p in self.params if p.grad is not None]
        if not grads:
            return torch.zeros(self.num_agents, device=self.step_count.device)
        if self.agent_dim:
            norms = [torch.linalg.vector_norm(g.reshape(self.num_agents, -1), dim=-1) for g in grads]
        else:
            norms = [n.reshape(1) for n in torch._foreach_norm(grads)]
        return norms[0] if len(norms) == 1 else torch.linalg.vector_norm(torch.stack(norms), dim=0)

    @torch.inference_mode()  # as no_grad, and the step's ~30 small ops also skip autograd's bookkeeping
    def step(self, grad_clip: Tensor | None = None, active: Tensor | None = None) -> Tensor:
        """Clip each agent's gradient to `grad_clip` (inf = off) and take one AdamW step.

        Args:
            grad_clip: `(K,)` max norm, as `torch.nn.utils.clip_grad_norm_` (coef = clip / (norm + 1e-6)).
            active: `(K,)` bool; agents that are False (stopped) do not move.

        Returns:
            `(K,)` the gradient norm before clipping (verl's `grad_norm`), NaN/Inf kept as measured.
        """
        norm = self.grad_norm()
        moves = norm < math.inf  # a norm is >= 0 or NaN: one op where isfinite takes four
        if active is not None:
            moves = moves & active
        coef = None if grad_clip is None else torch.clamp(grad_clip / (norm + 1e-6), max=1.0)
        # On the CPU one cheap look tells whether every agent moves; then no masking is needed. On a GPU that
        # look would be a host sync per mini-batch, so the masked path always runs there.
        masked = self.step_count.device.type != "cpu" or not bool(moves.all())
        self.step_count += moves.to(self.step_count.dtype)
        steps = self.step_count.clamp(min=1)
        step_size = self.lr / (1 - self.beta1**steps)
        bias2_sqrt = torch.sqrt(1 - self.beta2**steps)
        decay = 1 - self.lr * self.weight_decay if self.decays else None
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq):
            if p.grad is None:
                continue
            grad = p.grad if coef is None else p.grad * self._per_agent(coef, p)
            if masked:
                # The same arithmetic on copies, then each agent keeps its old state or takes the new one: an agent
                # that moves gets bit-for-bit what it would get if no agent beside it had stopped.
                keep = self._per_agent(moves, p)
                grad = torch.where(keep, grad, 0.0)  # also keeps a stopped agent's NaN out of the arithmetic
                new_m, new_v, new_p = m.clone(), v.clone(), p.detach().clone()
            else:
                new_m, new_v, new_p = m, v, p
            new_m.mul_(self.beta1).add_(grad, alpha=1 - self.beta1)
            new_v.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
            denom = (new_v.sqrt() / self._per_agent(bias2_sqrt, p)).add_(self.eps)
            if decay is not None:  # self.decays
                new_p.mul_(self._per_agent(decay, p))
            new_p.sub_(self._per_agent(step_size, p) * new_m / denom)
            if masked:
                m.copy_(torch.where(keep, new_m, m))
                v.copy_(torch.where(keep, new_v, v))
                p.copy_(torch.where(keep, new_p, p))
        return norm


def lr_factor(update: int, total_steps: int, warmup_steps: int, scheduler_type: str = "constant",
              min_lr_ratio: float = 0.0, num_cycles: float = 0.5) -> float:
    """verl's schedule factor at the `update`-th scheduler step (0-based; read before the scheduler steps).

    `constant`: `update / warmup` during warm-up (so the first update has lr 0 when warm-up > 0), then 1.
    `cosine`: the same warm-up, then `max(min_lr_ratio, ½(1 + min) + ½(1 − min)·cos(2π·cycles·progress))`.
    """
    if update < warmup_steps:
        return update / max(1, warmup_steps)
    if scheduler_type == "constant":
        return 1.0
    if scheduler_type == "cosine":
        progress = (update - warmup_steps) / max(1, total_steps - warmup_steps)
        x = math.cos(math.pi * num_cycles * 2.0 * progress)
        return max(min_lr_ratio, x * (1 - min_lr_ratio) * 0.5 + (1 + min_lr_ratio) * 0.5)
    raise ValueError(f"optim.lr_scheduler_type={scheduler_type!r} is unknown; known: ['constant', 'cosine']")


def warmup_steps(lr_warmup_steps: int | None, lr_warmup_steps_ratio: float, total_steps: int) -> int:
    """verl: a negative `lr_warmup_steps` means `int(lr_warmup_steps_ratio · total_steps)`."""
    if lr_warmup_steps is None or lr_warmup_steps < 0:
        return int(lr_warmup_steps_ratio * total_steps)
    return int(lr_warmup_steps)
