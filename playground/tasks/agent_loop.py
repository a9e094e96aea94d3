"""A prompt set's episodes, generated: the bridge between a multi-turn prompt set and the rollout's agent loop
(`rollout.turns.EpisodeTurns`, the decode loop's per-turn hook), used by the RL rollout and the SFT base's evaluation;
and what a batch of episodes adds to the step (its fields, verl's turn metrics, the Samples page's turns)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from playground.metric_names import EPISODE_LENGTH, EPISODE_REWARD, NUM_TURNS, SUCCESS_RATE, TOOL_CALL_COUNTS
from playground.models.agents import ModelOrView
from playground.rollout.decode import GenerationOutput, generate
from playground.rollout.turns import EpisodeTrace, EpisodeTurns
from playground.tasks.token_data import Example, PromptSet


def run_episodes(model: ModelOrView, prompts: PromptSet, examples: Sequence[Example], prompt_ids: torch.Tensor,
                 prompt_mask: torch.Tensor, *, max_assistant_turns: int | None = None,
                 max_user_turns: int | None = None, **generation: Any) -> tuple[GenerationOutput, list[EpisodeTrace]]:
    """One fresh episode per example (rows of a group never share one), generated with the prompt set's tokenizer and
    turn-end tokens; `generation`: `decode.generate`'s sampling keywords and `max_new_tokens`."""
    tok = prompts.tokenizer
    turns = EpisodeTurns([prompts.new_episode(e) for e in examples],
                         turn_end_ids=[tok.stoi[t] for t in prompts.turn_end_tokens], encode=tok.encode,
                         decode=tok.decode, max_new_tokens=generation["max_new_tokens"], pad_id=tok.pad_id,
                         device=prompt_ids.device, max_assistant_turns=max_assistant_turns,
                         max_user_turns=max_user_turns)
    out = generate(model, prompt_ids, prompt_mask, eos_id=tok.eos_id, pad_id=tok.pad_id, turns=turns, **generation)
    return out, turns.traces


def episode_fields(traces: list[EpisodeTrace], num_agents: int, width: int, device: torch.device) -> dict[str, Any]:
    """A multi-turn batch's per-row facts, `(K, rows)`: the outcome's `episode_score` (the rule's score, which the
    reward manager scores instead of a text rule) and `episode_acc`, verl's `num_turns`, `tool_calls`; `turn_rewards`
    `(K, rows, width)`, each reply's reward on the turn-end token it answers (0 elsewhere: a task that rewards only the
    episode's end); and the traces themselves (per agent, for the metrics and the samples)."""
    def values(get: Callable[[EpisodeTrace], float]) -> torch.Tensor:
        return torch.tensor([float(get(t)) for t in traces], device=device).view(num_agents, -1)
    per_agent = len(traces) // num_agents
    # every reply's reward in one write (this runs each step): (row, turn-end position, reward) over all traces
    placed = [(row, position, reward) for row, trace in enumerate(traces) for position, reward in trace.turn_rewards]
    turn_rewards = torch.zeros(len(traces), width, device=device)
    if placed:
        rows, positions, rewards = zip(*placed)
        turn_rewards.index_put_((torch.tensor(rows, device=device), torch.tensor(positions, device=device)),
                                torch.tensor(rewards, dtype=turn_rewards.dtype, device=device), accumulate=True)
    return {"episode_score": values(lambda t: t.outcome["score"]), "episode_acc": values(lambda t: t.outcome["acc"]),
            "turn_rewards": turn_rewards.view(num_agents, per_agent, width),
            "num_turns": values(lambda t: t.num_turns), "tool_calls": values(lambda t: t.outcome.get("tool_calls", 0)),
            "episodes": [traces[i:i + per_agent] for i in range(0, len(traces), per_agent)]}


def episode_metrics(batch: dict[str, Any], task_name: str) -> dict[str, torch.Tensor]:
    """A multi-turn batch's episodes, per agent `(K,)`: verl's `training/num_turns/*` and `tool_call_counts/*`
    (`metric_utils.compute_data_metrics`), and the guide's §5 `episode/reward/*` (the reward manager's score of a whole
    episode, `critic/score`'s), `episode/length/*` (its assistant turns: the agent's actions, as a gym episode's steps)
    and `episode/success_rate_<task>` (the outcome's `acc`)."""
    turns = batch["num_turns"]
    assistant = torch.tensor([[t.assistant_turns for t in agent] for agent in batch["episodes"]],
                             dtype=turns.dtype, device=turns.device)
    out = {}
    for prefix, values in ((NUM_TURNS, turns), (TOOL_CALL_COUNTS, batch["tool_calls"]),
                           (EPISODE_REWARD, batch["scores"].sum(-1)), (EPISODE_LENGTH, assistant)):
        out.update({f"{prefix}/mean": values.mean(-1), f"{prefix}/max": values.amax(-1),
                    f"{prefix}/min": values.amin(-1)})
    out[f"{SUCCESS_RATE}_{task_name}"] = batch["episode_acc"].mean(-1)
    return out


def episode_sample(batch: dict[str, Any], k: int, i: int, decode: Callable[[list[int]], str]) -> dict[str, Any]:
    """Agent k's row i for the Samples page: its turns in order, `{"role": "assistant" | "env", "text": ...}` (the
    environment's replies marked), its verl turn count and tool calls."""
    trace: EpisodeTrace = batch["episodes"][k][i]
    ids = batch["responses"][k][i].tolist()
    turns = [{"role": role, "text": decode(ids[start:end])} for role, start, end in trace.spans]
    return {"turns": turns, "num_turns": trace.num_turns, "tool_calls": int(trace.outcome.get("tool_calls", 0))}
