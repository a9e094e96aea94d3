"""The multi-turn agent loop: masks, forced environment tokens, the KV cache across turns, verl's turn counting and
its termination rules, checked by hand on a scripted model and against recomputation on a tiny random one."""

from __future__ import annotations

import pytest
import torch

from playground.models.tiny_gpt import GPTConfig, TinyGPT, compute_log_prob
from playground.rollout.decode import build_sequences, generate
from playground.rollout.turns import EnvReply, EpisodeTurns
from playground.tasks.token_data import ARITHMETIC_CHARS
from playground.tasks.tokenizer import Tokenizer
from tests.models.test_tiny_gpt import EOS, PAD, ScriptedModel, mixed_prompts

TOK = Tokenizer(ARITHMETIC_CHARS)  # digits are ids 3..12; '=' (15) ends an assistant turn here, '>' (16) too
END, END2 = TOK.stoi["="], TOK.stoi[">"]
D = {c: TOK.stoi[c] for c in "0123456789"}


class FakeEpisode:
    """Replies with `replies[k]` to the k-th turn (text, done); records what it saw."""

    def __init__(self, replies: list[tuple[str, bool]]):
        self.replies, self.seen, self.last = list(replies), [], None

    def step(self, assistant_turn: str) -> EnvReply:
        self.seen.append(assistant_turn)
        text, done = self.replies[len(self.seen) - 1]
        return EnvReply(text, 0.5, done)

    def outcome(self, last_turn: str) -> dict[str, float]:
        self.last = last_turn
        return {"score": float(len(self.seen)), "acc": 0.0}


def generate_episodes(model, prompt_ids, prompt_mask, episodes, *, turn_end_ids, encode, decode, max_new_tokens,
                      pad_id, max_assistant_turns=None, max_user_turns=None, **sampling):
    """The decode loop with its per-turn hook: the rows and their traces."""
    turns = EpisodeTurns(episodes, turn_end_ids=turn_end_ids, encode=encode, decode=decode,
                         max_new_tokens=max_new_tokens, pad_id=pad_id, device=prompt_ids.device,
                         max_assistant_turns=max_assistant_turns, max_user_turns=max_user_turns)
    out = generate(model, prompt_ids, prompt_mask, max_new_tokens=max_new_tokens, pad_id=pad_id, turns=turns,
                   **sampling)
    return out, turns.traces


def run(script, episodes, width=3, max_new_tokens=10, **kwargs):
    prompt_ids, prompt_mask = mixed_prompts(batch=len(script), width=width)
    return generate_episodes(ScriptedModel(script, width), prompt_ids, prompt_mask, episodes,
                             turn_end_ids=[END, END2], encode=TOK.encode, decode=TOK.decode,
                             max_new_tokens=max_new_tokens, eos_id=EOS, pad_id=PAD, do_sample=False, **kwargs)


@pytest.mark.parametrize("use_kv_cache", [True, False])
def test_turns_masks_and_forced_tokens_by_hand(use_kv_cache):
    # row 0: "5=" -> env "77" -> "6" EOS. row 1: "8>" -> env "" (done). row 2: plain answer "9" EOS (single turn)
    x = 4  # what the script says at an environment position: never used, the forced token wins
    script = [[D["5"], END, x, x, D["6"], EOS, 3, 3, 3, 3],
              [D["8"], END2, 3, 3, 3, 3, 3, 3, 3, 3],
              [D["9"], EOS, 3, 3, 3, 3, 3, 3, 3, 3]]
    episodes = [FakeEpisode([("77", False)]), FakeEpisode([("", True)]), FakeEpisode([])]
    out, traces = run(script, episodes, use_kv_cache=use_kv_cache)
    P = PAD
    assert out.responses.tolist() == [[D["5"], END, D["7"], D["7"], D["6"], EOS, P, P, P, P],
                                      [D["8"], END2, P, P, P, P, P, P, P, P],
                                      [D["9"], EOS, P, P, P, P, P, P, P, P]]
    assert out.response_mask.tolist() == [[1, 1, 0, 0, 1, 1, 0, 0, 0, 0], [1, 1] + [0] * 8, [1, 1] + [0] * 8]
    assert out.attention_mask.tolist() == [[1] * 6 + [0] * 4, [1, 1] + [0] * 8, [1, 1] + [0] * 8]
    assert out.response_length.tolist() == [6, 2, 2]  # verl's response_length counts the environment's tokens
    assert out.log_probs[out.response_mask == 0].eq(0).all()
    assert episodes[0].seen == ["5="] and episodes[0].last == "6"
    assert episodes[1].seen == ["8>"] and episodes[1].last == ""
    assert episodes[2].seen == [] and episodes[2].last == "9"
    assert [t.spans for t in traces] == [[("assistant", 0, 2), ("env", 2, 4), ("assistant", 4, 6)],
                                         [("assistant", 0, 2)], [("assistant", 0, 2)]]
    # verl: user turns + assistant turns + 1; a single-turn answer counts 2
    assert [t.num_turns for t in traces] == [4, 3, 2]
    assert [(t.assistant_turns, t.user_turns) for t in traces] == [(2, 1), (1, 1), (1, 0)]
    assert traces[0].turn_rewards == [(1, 0.5)] and traces[0].outcome == {"score": 1.0, "acc": 0.0}
    _, attention, _ = build_sequences(*mixed_prompts(batch=3, width=3), out)
    assert attention[:, 3:].tolist() == out.attention_mask.tolist()


def test_max_assistant_turns_ends_before_the_tool_runs():
    script = [[D["1"], END, 3, D["2"], END, 3, 3, 3, 3, 3]]
    ep = FakeEpisode([("4", False), ("5", False)])
    out, (trace,) = run(script, [ep], max_assistant_turns=2)
    assert ep.seen == ["1="] and ep.last == "2="  # the second turn is kept, no reply follows; outcome() gets it
    assert out.responses[0, :5].tolist() == [D["1"], END, D["4"], D["2"], END]
    assert out.response_mask[0].tolist() == [1, 1, 0, 1, 1, 0, 0, 0, 0, 0]
    assert trace.num_turns == 4  # 2 assistant + 1 user + 1
    ep = FakeEpisode([("4", False)])
    _, (trace,) = run(script, [ep], max_assistant_turns=1)
    assert ep.seen == [] and ep.last == "1=" and trace.num_turns == 2
    ep = FakeEpisode([("4", False), ("5", False)])
    _, (trace,) = run(script, [ep], max_user_turns=1)  # verl's max_user_turns: the same check on the replies
    assert ep.seen == ["1="] and ep.last == "2=" and trace.num_turns == 4


def test_a_reply_that_leaves_no_room_is_dropped():
    script = [[D["1"], END, 3, 3, 3, 3]]
    ep = FakeEpisode([("2345", False)])  # 2 + 4 = 6 = the cap: verl drops it (len >= response_length) and stops
    out, (trace,) = run(script, [ep], max_new_tokens=6)
    assert ep.seen == ["1="] and out.attention_mask[0].tolist() == [1, 1, 0, 0, 0, 0]
    assert trace.user_turns == 0 and trace.num_turns == 2
    ep = FakeEpisode([("234", False)])  # 5 < 6: kept, one assistant token fits after it, cut by the cap
    out, (trace,) = run(script, [ep], max_new_tokens=6)
    assert out.response_mask[0].tolist() == [1, 1, 0, 0, 0, 1] and trace.num_turns == 4
    assert ep.last == TOK.decode([3])


@pytest.fixture(scope="module")
def model() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(GPTConfig(vocab_size=17, block_size=40)).eval()


def _random_run(model, use_kv_cache, turn_end_ids=(END, END2), generator=None, **kwargs):
    prompt_ids, prompt_mask = mixed_prompts(batch=24, width=5)
    episodes = [FakeEpisode([("12", False), ("345", False), ("6", True)] * 3) for _ in range(24)]
    out, traces = generate_episodes(model, prompt_ids, prompt_mask, episodes, turn_end_ids=list(turn_end_ids),
                                    encode=TOK.encode, decode=TOK.decode, max_new_tokens=30, eos_id=EOS, pad_id=PAD,
                                    generator=generator or torch.Generator().manual_seed(3),
                                    use_kv_cache=use_kv_cache, **kwargs)
    return prompt_ids, prompt_mask, out, traces


def test_kv_cache_across_turns_equals_recompute(model):
    *_, cached, cached_traces = _random_run(model, True)
    *_, plain, plain_traces = _random_run(model, False)
    assert torch.equal(cached.responses, plain.responses)
    assert torch.equal(cached.response_mask, plain.response_mask)
    assert torch.equal(cached.attention_mask, plain.attention_mask)
    torch.testing.assert_close(cached.log_probs, plain.log_probs, atol=1e-5, rtol=0)
    assert [t.spans for t in cached_traces] == [t.spans for t in plain_traces]
    assert max(t.user_turns for t in cached_traces) >= 2  # the untrained model ends turns often: real episodes


def test_log_probs_equal_a_teacher_forced_pass_over_the_whole_episode(model):
    prompt_ids, prompt_mask, out, _ = _random_run(model, True, temperature=1.0)
    ids, attention, positions = build_sequences(prompt_ids, prompt_mask, out)
    log_probs, _ = compute_log_prob(model, ids, attention, positions, out.responses)
    policy = out.response_mask.bool()
    torch.testing.assert_close(log_probs[policy], out.log_probs[policy], atol=1e-5, rtol=0)


def test_without_turn_ends_it_samples_what_generate_samples(model):
    prompt_ids, prompt_mask, out, traces = _random_run(model, True, turn_end_ids=())
    single = generate(model, prompt_ids, prompt_mask, max_new_tokens=30, eos_id=EOS, pad_id=PAD,
                      generator=torch.Generator().manual_seed(3))
    assert torch.equal(out.responses, single.responses) and torch.equal(out.response_mask, single.response_mask)
    assert torch.equal(out.log_probs, single.log_probs)
    assert all(t.num_turns == 2 for t in traces)


def test_agents_draw_from_their_own_generators(model):
    prompt_ids, prompt_mask = mixed_prompts(batch=8, width=5)
    def rows(gens, batch_ids, batch_mask):
        eps = [FakeEpisode([("12", False)] * 20) for _ in range(len(batch_ids))]
        out, _ = generate_episodes(model, batch_ids, batch_mask, eps, turn_end_ids=[END], encode=TOK.encode,
                                   decode=TOK.decode, max_new_tokens=20, eos_id=EOS, pad_id=PAD, generator=gens)
        return out.responses
    both = rows([torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)], prompt_ids, prompt_mask)
    alone = rows([torch.Generator().manual_seed(2)], prompt_ids[4:], prompt_mask[4:])
    assert torch.equal(both[4:], alone)
