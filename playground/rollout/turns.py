"""Multi-turn episodes in one pass of the KV cache, as verl's tool agent loop (`verl/experimental/agent_loop/
tool_agent_loop.py`) builds them: the policy writes an assistant turn, the environment answers, and so on.

`EpisodeTurns` is the decode loop's per-turn environment hook (`decode.generate(..., turns=...)`). Every row is
decoded token by token, all rows (prompts and K stacked agents) in one batch. A row's assistant turn ends at one of
the task's turn-end tokens; its `Episode` then replies, and the reply's tokens are fed through the model one a step as
forced tokens (their keys and values enter the same cache, the context is never re-encoded). The row's `responses`
hold the assistant's and the environment's tokens in order; `response_mask` is 1 only on the assistant's (verl's
multi-turn `response_mask`), `attention_mask` on both; the environment's tokens get log-prob 0.

An episode ends as verl's does: at EOS (verl: an assistant turn without a tool call), when a reply says `done`, at
`max_assistant_turns` (checked when an assistant turn ends: that turn is kept, no reply follows), at `max_user_turns`
(the same check on the replies so far), or at the length cap: a reply that would leave no room (verl:
`len(response_mask) >= response_length` after merging it) is dropped and the episode ends. verl counts
`num_turns = user_turns + assistant_turns + 1` (the prompt is a turn): a single-turn answer is 2.

The interface an environment meets (`Episode`, `EnvReply`) sits here too: a multi-turn prompt set (`multi_turn =
True`, its `turn_end_tokens` and `new_episode`: `tasks.token_data.PromptSet`'s contract) makes one fresh `Episode` per
response (`tasks.agent_loop.run_episodes`). Two implementations meet it: the calculator tool task
(`tasks/calc_data.py`) and the FrozenLake text game (`tasks/frozenlake_data.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch


@dataclass(frozen=True)
class EnvReply:
    text: str  # the environment's answer, encoded with the task's tokenizer and appended, out of the loss
    reward: float  # this turn's reward (0 where the task rewards only the episode's end)
    done: bool  # the episode ends after this reply: no further assistant turn


class Episode(Protocol):
    """One prompt's environment across its turns; a fresh one per response (rows of a GRPO group never share one)."""

    def step(self, assistant_turn: str) -> EnvReply:
        """The environment's reply to one assistant turn (its decoded text, the turn-end token included)."""
        ...

    def outcome(self, last_turn: str) -> dict[str, float]:
        """At the episode's end: at least `score` (the reward trained on) and `acc` (1.0 on success, else 0.0);
        a tool task adds `tool_calls`.

        `last_turn`: the assistant's text after the environment's last reply that `step` never saw (decoded, EOS
        dropped): the turn EOS ended, the one the length cap cut, or the one that reached `max_assistant_turns` (its
        turn-end token included); "" when a reply with `done` ended the episode."""
        ...


@dataclass
class EpisodeTrace:
    """One row's episode: its turns as response spans and what its environment made of them."""

    spans: list[tuple[str, int, int]] = field(default_factory=list)  # (role "assistant" | "env", start, end) in order
    assistant_turns: int = 0
    user_turns: int = 0  # the environment's replies that entered the context (verl's user_turns)
    # each reply's `EnvReply.reward`, with the position of the turn-end token it answers (where it is rewarded)
    turn_rewards: list[tuple[int, float]] = field(default_factory=list)
    outcome: dict[str, float] = field(default_factory=dict)  # `Episode.outcome`

    @property
    def num_turns(self) -> int:
        """verl's count: user turns + assistant turns + 1 (the prompt)."""
        return self.user_turns + self.assistant_turns + 1


class EpisodeTurns:
    """The decode loop's environment hook: one `Episode` per row (`episodes[i]` is row i's, fresh), and each row's
    trace (`traces`, filled as the rows decode).

    Args:
        turn_end_ids: the tokens that end an assistant turn.
        encode, decode: the task's tokenizer (text to ids without specials; ids to text, specials dropped, stopping at
            EOS).
        max_new_tokens, pad_id, device: the decode call's.
        max_assistant_turns, max_user_turns: None or 0 for no limit (verl's null).
    """

    def __init__(self, episodes: Sequence[Episode], *, turn_end_ids: Sequence[int], encode: Callable[[str], list[int]],
                 decode: Callable[[list[int]], str], max_new_tokens: int, pad_id: int, device: torch.device,
                 max_assistant_turns: int | None = None, max_user_turns: int | None = None):
        self.episodes, self.rows = list(episodes), len(episodes)
        self.encode, self.decode, self.max_new_tokens = encode, decode, max_new_tokens
        self.max_assistant_turns, self.max_user_turns = max_assistant_turns, max_user_turns
        B = self.rows
        # the environment's tokens waiting to be fed: forced[i, t] is row i's token at step t while t < forced_until[i]
        self.forced = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=device)
        self.forced_until = torch.zeros(B, dtype=torch.long, device=device)
        # the step after which a row is over (a `done` reply's last token; max_new_tokens: not yet known)
        self.finish_after = torch.full((B,), max_new_tokens, dtype=torch.long, device=device)
        self.turn_end = torch.tensor(list(turn_end_ids), dtype=torch.long, device=device)
        self.traces = [EpisodeTrace() for _ in range(B)]
        self.turn_start = [0] * B  # where each row's current turn began
        self.unseen = [""] * B  # each row's last assistant turn that no step saw

    def replying(self, t: int) -> torch.Tensor:
        """`(B,)` bool: the rows whose step-t token is the environment's."""
        return t < self.forced_until

    def reply_tokens(self, t: int) -> torch.Tensor:
        """`(B,)` the environment's step-t tokens (pad where none)."""
        return self.forced[:, t]

    def after_token(self, t: int, tokens: torch.Tensor, policy: torch.Tensor, responses: torch.Tensor) -> torch.Tensor:
        """After step t's tokens are written: the rows whose assistant turn ended get their reply (queued as forced
        tokens) or end; returns `(B,)` bool, the rows whose episode is over after this step."""
        ended = policy & torch.isin(tokens, self.turn_end)
        # one host sync: the rows whose turn ended here, and their tokens so far
        ended_rows = ended.nonzero().flatten().tolist()
        so_far = responses[ended_rows, :t + 1].tolist() if ended_rows else []
        fed_rows: list[int] = []  # the replies' tokens, written into `forced` at once
        fed_cols: list[int] = []
        fed_ids: list[int] = []
        for i, row in zip(ended_rows, so_far, strict=True):
            trace, start = self.traces[i], self.turn_start[i]
            trace.spans.append(("assistant", start, t + 1))
            trace.assistant_turns += 1
            self.turn_start[i] = t + 1
            text = self.decode(row[start:])
            if (t + 1 >= self.max_new_tokens
                    or (self.max_assistant_turns and trace.assistant_turns >= self.max_assistant_turns)
                    or (self.max_user_turns and trace.user_turns >= self.max_user_turns)):
                self.finish_after[i] = t  # verl: TERMINATED before any tool runs; the turn goes to outcome()
                self.unseen[i] = text
                continue
            reply = self.episodes[i].step(text)
            reply_ids = self.encode(reply.text)
            end = t + 1 + len(reply_ids)
            if end >= self.max_new_tokens:  # no room left after it: verl drops the reply and stops
                self.finish_after[i] = t
                continue
            trace.user_turns += 1
            trace.turn_rewards.append((t, float(reply.reward)))
            fed_rows += [i] * len(reply_ids)
            fed_cols += range(t + 1, end)
            fed_ids += reply_ids
            self.forced_until[i] = end
            if end > t + 1:
                trace.spans.append(("env", t + 1, end))
            self.turn_start[i] = end
            if reply.done:
                self.finish_after[i] = end - 1
        if fed_ids:
            self.forced[fed_rows, fed_cols] = torch.tensor(fed_ids, dtype=torch.long, device=self.forced.device)
        return t >= self.finish_after

    def finish(self, responses: torch.Tensor, lengths: torch.Tensor) -> None:
        """At the end of decoding: the turn EOS or the length cap ended was never stepped; `outcome()` gets it."""
        for i, (trace, length) in enumerate(zip(self.traces, lengths.tolist(), strict=True)):
            if self.turn_start[i] < length:
                trace.spans.append(("assistant", self.turn_start[i], length))
                trace.assistant_turns += 1
                self.unseen[i] = self.decode(responses[i, self.turn_start[i]:length].tolist())
            trace.outcome = dict(self.episodes[i].outcome(self.unseen[i]))
