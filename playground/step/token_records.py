"""Per-token records of a token task's step (`trainer.token_records`): the tokens behind the step's averages.

Every metric of the actor is a mean over tokens: `actor/pg_clipfrac` is the share of tokens whose clipped term binds,
`actor/ppo_kl` the mean of their log-ratios, `actor/entropy` their entropy aggregated as the loss is. With
`trainer.token_records.enable`, each step writes a bounded sample of its responses to `tokens.jsonl`
(`rundir.runs.TOKENS`), every response token with its advantage, its log-probs (old, reference, the rollout's), its
entropy, and, for each micro-batch of the update that held it, its log-ratio π_θ/π_old and whether the clip (and the
dual clip) bound. `responses_per_step: -1` records every response, and the step's metrics can then be recomputed from
the file (tests/test_token_records.py does).

The sample: per agent, the rows at both ends of the advantage range, the most clipped, the highest and lowest entropy,
the most mismatched between the rollout and the trainer, then the whole group of the highest advantage and a group
whose rewards are all alike (GRPO's zero-advantage group), until `responses_per_step`. The step pays for the
records only when they are on: the update's probe (`TokenProbe`) and the extra batch fields exist only then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from playground.algos.losses import ppo_clip_terms
from playground.rundir.sinks import RunLogger
from playground.tasks.base import Batch

TokenTexts = Callable[[Sequence[int]], list[str]]  # `Task.token_texts`: each token id's text


@dataclass(frozen=True)
class TokenRecordSpec:
    """`trainer.token_records` (token tasks)."""

    responses_per_step: int  # per agent; -1: every response
    max_mb: float  # each run's tokens.jsonl stops growing past this size


class TokenProbe:
    """What one step's actor update saw, token by token: per micro-batch (in the update's order, epochs and
    mini-batches flattened) the rows it held and each token's log-ratio, clip masks and entropy.

    `clip`: the clip ratios `(low, high, c)` of the vanilla PPO loss (None: another loss, whose clip masks are not
    PPO's: only the log-ratio is kept)."""

    def __init__(self, clip: tuple[Tensor, Tensor, Tensor] | None):
        self.clip = clip
        self.micro: list[dict[str, Tensor]] = []

    def add(self, rows: Tensor, old_log_prob: Tensor, log_prob: Tensor, advantages: Tensor,
            entropy: Tensor | None) -> None:
        """One micro-batch: `rows` `(K, rows_mb)` (its rows' indices in the batch), the rest `(K, rows_mb, T)`."""
        log_prob = log_prob.detach()
        if self.clip is not None:
            terms = ppo_clip_terms(old_log_prob, log_prob, advantages, *self.clip)
            entry = {key: terms[key] for key in ("log_ratio", "clipped", "clipped_lower")}
        else:
            entry = {"log_ratio": torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)}
        if entropy is not None:
            entry["entropy"] = entropy.detach()
        self.micro.append({"rows": rows, **entry})


def _values(x: Tensor, length: int) -> list[float]:
    return [float(v) for v in x[:length].tolist()]


def _update_values(entry: dict[str, Tensor], k: int, j: int, n: int) -> dict[str, list]:
    """Agent k's row at position j of one micro-batch: its first n tokens' values (clip masks as 0/1)."""
    out: dict[str, list] = {}
    for key, x in entry.items():
        if key != "rows":
            out[key] = [int(v) for v in x[k, j, :n].tolist()] if x.dtype == torch.bool else _values(x[k, j], n)
    return out


def _pick(count: int, uid: list[int], rewards: list[float], signals: dict[str, list[float]]) -> list[int]:
    """The rows to record: each signal's extremes, then whole groups, then the rest in order, `count` at most
    (-1: all)."""
    rows = len(uid)
    if count < 0 or count >= rows:
        return list(range(rows))
    order: list[int] = []
    for name, values in signals.items():
        ranked = sorted(range(rows), key=values.__getitem__)
        if name in ("advantage", "entropy"):  # both ends
            order += [ranked[-1], ranked[0]]
        elif values[ranked[-1]] > 0:  # the most clipped, the most mismatched: where there is one
            order.append(ranked[-1])
    groups: dict[int, list[int]] = {}
    for i, u in enumerate(uid):
        groups.setdefault(u, []).append(i)
    if order:
        order += groups[uid[order[0]]]  # the group of the highest advantage: how its advantage came
    alike = [g for g in groups.values() if len(g) > 1 and len({rewards[i] for i in g}) == 1]
    if alike:
        order += alike[0]  # nothing to learn from: every advantage 0 under GRPO
    picked = list(dict.fromkeys([*order, *range(rows)]))
    return sorted(picked[:count])


def token_records(step: int, batch: Batch, probe: TokenProbe, count: int, token_texts: TokenTexts,
                  agents: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """The records of this step of each of `agents` (`count` responses each, -1: all). `token_texts(ids)`: each id's
    text."""
    mask, adv = batch["response_mask"], batch["advantages"]
    num_agents, num_rows = mask.shape[0], mask.shape[1]
    lengths = batch["response_length"].tolist()
    seq_rewards = batch["token_level_scores"].sum(-1).tolist()
    uid = batch["uid"][0].tolist()
    # per row, the update's passes over it: (micro index, agent-local row position) for every agent
    passes: list[list[list[tuple[int, int]]]] = [[[] for _ in range(num_rows)] for _ in range(num_agents)]
    for m, entry in enumerate(probe.micro):
        for k, rows in enumerate(entry["rows"].tolist()):
            for j, row in enumerate(rows):
                passes[k][row].append((m, j))
    clipped = torch.zeros(num_agents, num_rows)
    for entry in probe.micro:
        if "clipped" in entry:
            counts = (entry["clipped"] | entry["clipped_lower"]).float().sum(-1).cpu()
            clipped.scatter_add_(1, entry["rows"].cpu(), counts)
    tokens = mask.sum(-1).clamp(min=1)
    seq_adv = ((adv * mask).sum(-1) / tokens).tolist()
    entropy = batch.get("token_entropy")
    seq_entropy = None if entropy is None else ((entropy * mask).sum(-1) / tokens).tolist()
    rollout = batch.get("rollout_log_probs")
    mismatch = None if rollout is None else \
        ((rollout.exp() - batch["old_log_probs"].exp()).abs() * mask).amax(-1).tolist()
    out = {}
    for k in agents:
        signals = {"advantage": seq_adv[k], "clipped": clipped[k].tolist()}
        if seq_entropy is not None:
            signals["entropy"] = seq_entropy[k]
        if mismatch is not None:
            signals["mismatch"] = mismatch[k]
        records = []
        for i in _pick(count, uid, seq_rewards[k], signals):
            n = int(lengths[k][i])
            group = [j for j, u in enumerate(uid) if u == uid[i]]
            record: dict[str, Any] = {
                "step": step, "row": i, "uid": uid[i], "prompt": batch["prompt_text"][k][i],
                "answer": batch["ground_truth"][k][i], "response": batch["response_text"][k][i],
                "tokens": token_texts(batch["responses"][k, i, :n].tolist()),
                "mask": [int(v) for v in mask[k, i, :n].tolist()], "reward": seq_rewards[k][i],
                "group": {"rows": group, "rewards": [seq_rewards[k][j] for j in group]},
                "advantages": _values(adv[k, i], n), "old_log_prob": _values(batch["old_log_probs"][k, i], n)}
            for field, key in (("ref_log_prob", "ref_log_prob"), ("rollout_log_probs", "rollout_log_prob"),
                               ("token_entropy", "entropy"), ("values", "values")):
                if field in batch:
                    record[key] = _values(batch[field][k, i], n)  # type: ignore[literal-required]
            record["updates"] = [{"micro": m, **_update_values(probe.micro[m], k, j, n)} for m, j in passes[k][i]]
            records.append(record)
        out[k] = records
    return out


class TokenRecordWriter:
    """Writes each agent's records to its run's `tokens.jsonl` (through its `RunLogger`, one per agent) until the
    file passes `max_mb`."""

    def __init__(self, spec: TokenRecordSpec, loggers: Sequence[RunLogger], token_texts: TokenTexts) -> None:
        self.spec, self.loggers, self.token_texts = spec, loggers, token_texts
        self.written = [0] * len(loggers)  # bytes
        self.full = [False] * len(loggers)

    def write(self, step: int, batch: Batch, probe: TokenProbe, active: Sequence[bool]) -> None:
        """This step's records of the agents still training; an agent whose file passed `max_mb` writes no more
        and says so in its run.json (`token_records_full_at`: the first step left out)."""
        agents = [k for k, on in enumerate(active) if on and not self.full[k]]
        if not agents:
            return
        records = token_records(step, batch, probe, self.spec.responses_per_step, self.token_texts, agents)
        for k in agents:
            self.written[k] += self.loggers[k].log_tokens(records[k])
            if self.written[k] >= self.spec.max_mb * 1e6:
                self.full[k] = True
                self.loggers[k].update(token_records_full_at=step + 1)
