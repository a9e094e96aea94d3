"""The interface a multi-turn token task's environment meets (verl's agent loop: a tool or an interaction).

A multi-turn response is one row, as in verl: the assistant's turns and the environment's replies in order, after the
prompt. The environment's tokens are in the row's `attention_mask` (the model reads them) but not in its
`response_mask` (the loss never trains on them; verl's `response_mask` for multi-turn rollouts). An assistant turn
ends when the policy emits one of the prompt set's `turn_end_tokens`; the environment then answers with `Episode.step`,
whose reply is appended to the context (through the generation's KV cache) before the next assistant turn. The
episode ends at EOS, when a reply says `done`, at `actor_rollout_ref.rollout.multi_turn.max_assistant_turns`, or at the
response length cap.

A multi-turn prompt set (`token_data.PromptSet` subclass, registered in `prompt_sets.PROMPT_SETS`) declares
`multi_turn = True`, its `turn_end_tokens` (tokens of its tokenizer) and the method
`new_episode(self, example: Example) -> Episode`; the class is refused when it is defined without them.

Two implementations meet it: the calculator tool task and the FrozenLake text game.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
