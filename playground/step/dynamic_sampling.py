"""DAPO's dynamic sampling for K agents, as verl's DAPO trainer runs it (verl-recipe `dapo/dapo_ray_trainer.py`,
`algorithm.filter_groups.{enable,metric,max_num_gen_batches}` with `data.gen_batch_size`).

A generation batch is `gen_batch_size` prompts × `rollout.n` responses, scored. The groups (one prompt's responses)
whose `metric` is the same for every response are dropped (`algos.dapo.filter_groups`): their GRPO advantages would
all be 0. An agent with fewer than `train_batch_size` kept groups generates again, from its own streams
(`Rollout.generate(agents)`), until it has enough, and its rows are then cut to exactly `train_batch_size · n`. An agent
that has drawn `max_num_gen_batches` batches (0, verl's default: no limit) and is still short fails as verl's trainer
does ("Generated too many");
the others go on. Each agent needs its own number of batches (`train/num_gen_batches`, as verl logs it), and gets the
rows it would get alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from playground.algos.dapo import filter_groups, filter_metric_values
from playground.step.advantage import KLInReward
from playground.step.hparams import DynamicSamplingSpec
from playground.step.memory import MemoryGuard
from playground.step.workers import Actor, Reference, Rollout
from playground.tasks.base import Batch, Task, as_batch

Timed = Callable[[str], AbstractContextManager]  # `timed("gen")`: a context timing a phase of the step


@dataclass
class Sampled:
    """One step's batch `(K, train_batch_size · n, ...)`, how many generation batches each agent drew `(K,)`, and
    per agent the error that ended its sampling (None: it has its batch)."""

    batch: Batch
    num_gen_batches: Tensor
    errors: list[str | None]


class DynamicSampler:
    """Generation with DAPO's group filter for a token task's K agents: the rollout generates, the task scores.

    `kl_in_reward`: with `algorithm.use_kl_in_reward`, each generation batch's `token_level_rewards` carry the
    in-reward KL penalty, from its old (`actor`) and reference (`reference`) log-probs (verl applies it before
    filtering, so that `metric=seq_final_reward` filters on the reward trained on); None when it is off (then the
    final reward is the score).
    """

    def __init__(self, task: Task, rollout: Rollout, spec: DynamicSamplingSpec, actor: Actor | None = None,
                 reference: Reference | None = None, kl_in_reward: KLInReward | None = None):
        self.task, self.rollout = task, rollout
        self.metric, self.max_batches = spec.metric, spec.max_num_gen_batches
        self.train_groups, self.n = spec.train_batch_size, spec.rollout_n
        self.actor, self.reference, self.kl_in_reward = actor, reference, kl_in_reward

    def _kl_rewards(self, batch: Batch, timed: Timed) -> None:
        """verl's DAPO trainer with `use_kl_in_reward`: each generation batch's old and reference log-probs and its
        KL-penalised reward before filtering (the step's batch recomputes them; the controller updates once)."""
        assert self.actor is not None and self.reference is not None and self.kl_in_reward is not None, \
            "the in-reward KL needs the actor's and the reference's log-probs"
        with timed("old_log_prob"):
            batch["old_log_probs"] = self.actor.compute_log_prob(batch).log_probs
        with timed("ref"):
            batch["ref_log_prob"] = self.reference.compute_ref_log_prob(batch)
        batch["token_level_rewards"], _ = self.kl_in_reward.penalised(batch, batch["agents"])

    def sample(self, active: Sequence[bool], timed: Timed, memory: MemoryGuard) -> Sampled:
        """Generate until every active agent has `train_batch_size` kept groups or has reached the cap. An agent that
        no longer trains takes its first batch as it is (its rows only fill the batch's shape)."""
        num_agents = self.task.num_agents
        batches: list[Batch] = []
        rows: list[list[tuple[int, int, Tensor]]] = [[] for _ in range(num_agents)]  # (batch, position, row ids)
        kept, drawn = [0] * num_agents, [0] * num_agents
        errors: list[str | None] = [None] * num_agents
        agents: list[int] | None = None  # the step's first batch: every agent
        while agents is None or agents:
            with timed("gen"):
                batch = self.rollout.generate(agents)
            memory.check("gen")
            with timed("reward"):
                self.task.compute_scores(batch)
            if self.kl_in_reward is not None:
                self._kl_rewards(batch, timed)
            values = filter_metric_values(self.metric, {**batch, **batch["reward_extra_info"]})
            for position, agent in enumerate(batch["agents"]):
                drawn[agent] += 1
                every_row = torch.arange(values.shape[1], device=values.device)
                keep = filter_groups(values[position], batch["uid"][position]) if active[agent] else None
                rows[agent].append((len(batches), position, every_row if keep is None else every_row[keep.rows]))
                kept[agent] += 0 if keep is None else len(keep.groups)
            batches.append(batch)
            agents = []
            for agent in batch["agents"]:
                if not active[agent] or kept[agent] >= self.train_groups:
                    continue
                if 0 < self.max_batches <= drawn[agent]:  # verl: a non-positive cap is no limit
                    errors[agent] = (f"ValueError: num_gen_batches={drawn[agent]} >= max_num_gen_batches="
                                     f"{self.max_batches}. Generated too many. Please check if your data are too "
                                     f"difficult. (verl's DAPO trainer; {kept[agent]} of data.train_batch_size="
                                     f"{self.train_groups} groups kept)")
                    continue
                agents.append(agent)
        for agent in range(num_agents):
            if errors[agent] is not None:  # its rows only fill the shape: all it drew
                rows[agent] = [(b, p, torch.arange(batches[b]["response_mask"].shape[1], device=r.device))
                               for b, p, r in rows[agent]]
        batch = self._assemble(batches, rows)
        return Sampled(batch, torch.tensor(drawn, dtype=torch.float32), errors)

    def _assemble(self, batches: list[Batch], rows: list[list[tuple[int, int, Tensor]]]) -> Batch:
        """Each agent's rows, in the order drawn, cut to `train_batch_size · n` (kept groups are whole groups of n,
        so the first train_batch_size of them); a filler (an agent that stopped or failed) repeats its rows if
        they are fewer. The groups' ids are renumbered 0..train_batch_size-1, as one generation numbers them."""
        need = self.train_groups * self.n

        def gather(pick: Callable[..., Any]) -> Any:  # `...`: the picks below bind their keys as default arguments
            per_agent: list[Any] = []
            for parts in rows:
                pieces = [(pick(batches[b]), p, r) for b, p, r in parts]
                if isinstance(pieces[0][0], Tensor):
                    values = torch.cat([x[p][r] for x, p, r in pieces])
                    per_agent.append(values[torch.arange(need, device=values.device) % len(values)])
                else:  # per-agent lists (texts)
                    items = [x[p][i] for x, p, r in pieces for i in r.tolist()]
                    per_agent.append([items[i % len(items)] for i in range(need)])
            return torch.stack(per_agent) if isinstance(per_agent[0], Tensor) else per_agent

        first = batches[0]
        out: dict[str, Any] = {}
        for key, value in first.items():
            if key in ("uid", "agents"):
                continue
            if isinstance(value, dict):
                out[key] = {name: gather(lambda b, key=key, name=name: b[key][name]) for name in value}
            else:
                out[key] = gather(lambda b, key=key: b[key])
        uid = first["uid"]
        out["uid"] = torch.arange(self.train_groups, device=uid.device).repeat_interleave(self.n).expand(len(rows), -1)
        out["agents"] = list(range(len(rows)))
        return as_batch(out)
