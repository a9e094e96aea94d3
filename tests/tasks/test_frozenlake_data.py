"""FrozenLake's text: the tokenizer, RAGEN's board, the episode behind the Episode interface, the prompt set, traces."""

import random

import pytest
import torch

from playground.tasks.frozenlake import ACTION_NAMES, LakeMap, goal_distances
from playground.tasks.frozenlake_data import FrozenLakeEpisode, FrozenLakePrompts, render

GYM_4X4 = LakeMap(("SFFF", "FHFH", "FFFH", "HFFG"))


@pytest.fixture(scope="module")
def prompts():
    return FrozenLakePrompts(num_train=300, num_val=40, seed=0)


def test_tokenizer_round_trip():
    tok = FrozenLakePrompts.tokenizer
    assert tok.vocab_size == 14 and tok.itos[:3] == ["<pad>", "<bos>", "<eos>"]
    text = "P_O\n_G_\nRight√X\nLeftDownUp"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert [tok.itos[i] for i in tok.encode("DownUp")] == ["Down", "Up"]  # each action is one token
    with pytest.raises(ValueError, match="cannot encode"):
        tok.encode("right")


def test_render_is_ragens_board():
    assert render(GYM_4X4, (0, 0)) == "P___\n_O_O\n___O\nO__G\n"
    assert render(GYM_4X4, (1, 1)) == "____\n_X_O\n___O\nO__G\n"
    assert render(GYM_4X4, (3, 3)) == "____\n_O_O\n___O\nO__√\n"


def _episode(max_steps=10, format_penalty=-0.1):
    return FrozenLakeEpisode(GYM_4X4, is_slippery=False, max_steps=max_steps, format_penalty=format_penalty,
                             rng=random.Random(0))


def test_episode_reaches_the_goal():
    ep = _episode()
    replies = [ep.step(a) for a in ["Down", "Down", "Right", "Right", "Down", "Right"]]
    assert replies[0].text == "____\nPO_O\n___O\nO__G\n" and not replies[0].done
    assert [r.reward for r in replies] == [0.0] * 6  # the goal's reward is the outcome's: one place, not two
    assert replies[-1].done and replies[-1].text.endswith("O__√\n")
    assert ep.outcome("") == {"score": 1.0, "acc": 1.0}
    with pytest.raises(RuntimeError, match="over"):
        ep.step("Up")


def test_episode_hole_invalid_turns_and_step_limit():
    ep = _episode()
    assert not ep.step("Right").done and ep.step("Down").done  # (0,1) -> (1,1), a hole
    assert ep.outcome("") == {"score": 0.0, "acc": 0.0}
    ep = _episode(max_steps=3, format_penalty=-0.25)
    reply = ep.step("_Down")  # a board character before the action: invalid, the player stays put
    assert reply.reward == 0.0 and reply.text == render(GYM_4X4, (0, 0)) and not reply.done
    assert not ep.step("Left").done  # a bump into the border: valid, stays put
    assert ep.step("Down").done  # the third turn ends it
    assert ep.outcome("") == {"score": -0.25, "acc": 0.0}


def test_outcome_plays_the_unseen_last_turn():
    """The loop hands outcome() the turn it never stepped (max_assistant_turns reached after it): it still moves."""
    ep = _episode()
    for action in ["Down", "Down", "Right", "Right", "Down"]:
        ep.step(action)
    assert ep.outcome("Right") == {"score": 1.0, "acc": 1.0}
    ep = _episode()
    assert ep.outcome("_O") == {"score": -0.1, "acc": 0.0}  # cut by the length cap: an invalid turn
    ep = _episode()
    ep.step("Right")
    ep.step("Down")  # into the hole: done
    assert ep.outcome("") == {"score": 0.0, "acc": 0.0}


def test_prompt_set_splits_and_examples(prompts):
    assert len(prompts.train) == 300 and len(prompts.val) == 40
    assert not {e.answer for e in prompts.train} & {e.answer for e in prompts.val}
    assert len({e.answer for e in prompts.train}) == 300
    again = FrozenLakePrompts(num_train=300, num_val=40, seed=0)
    assert again.val == prompts.val and again.train == prompts.train
    assert FrozenLakePrompts(num_train=300, num_val=40, seed=1).val != prompts.val
    ex = prompts.val[0]
    lake = LakeMap.from_text(ex.answer)
    assert ex.prompt == render(lake, lake.find("S"))
    assert prompts.turn_end_tokens == ACTION_NAMES
    assert prompts.max_prompt_tokens == 21 and prompts.max_answer_tokens == 10 * 21
    ids = prompts.prompt_ids(ex)
    assert ids[0] == prompts.tokenizer.bos_id and prompts.tokenizer.decode(ids) == ex.prompt


def test_trace_masks_all_but_the_actions(prompts):
    rng = random.Random(0)
    action_ids = {prompts.tokenizer.stoi[a] for a in ACTION_NAMES}
    for ex in prompts.train[:50]:
        ids, mask = prompts.trace(ex, rng)
        assert len(ids) == len(mask) and len(ids) % 21 == 0 and len(ids) <= prompts.max_answer_tokens
        assert [i in action_ids for i in ids] == [m == 1 for m in mask]
        # replaying the trace's actions through an episode gives back the trace's boards
        ep = prompts.new_episode(ex)
        for turn in range(len(ids) // 21):
            reply = ep.step(prompts.tokenizer.itos[ids[21 * turn]])
            assert prompts.tokenizer.encode(reply.text) == ids[21 * turn + 1:21 * turn + 21]
        assert reply.done


def test_trace_shares(prompts):
    """detour_rate and fail_rate set the shares: no failures without fail_rate, about 0.3 at 0.3."""
    def success_and_extra(fail_rate, detour_rate):
        p = FrozenLakePrompts(num_train=300, num_val=40, fail_rate=fail_rate, detour_rate=detour_rate,
                              random_start_goal=True)
        rng, wins, extra = random.Random(0), 0, 0
        for ex in p.train:
            ids, _ = p.trace(ex, rng)
            wins += "√" in p.tokenizer.decode(ids)
            lake = LakeMap.from_text(ex.answer)
            extra += len(ids) // 21 > goal_distances(lake)[lake.find("S")]
        return wins / 300, extra / 300
    assert success_and_extra(0.0, 0.0) == (1.0, 0.0)
    wins, _ = success_and_extra(0.3, 0.0)
    assert 0.6 < wins < 0.8
    wins, extra = success_and_extra(0.0, 0.5)
    assert wins > 0.99 and 0.4 < extra < 0.6  # one map's route is 10 moves: its detour runs out of turns


def test_collate_sft_targets(prompts):
    ids, attention, loss_mask = prompts.collate_sft_targets(prompts.train[:8])
    assert ids.shape == attention.shape == loss_mask.shape and ids.shape[1] % 21 == 0
    assert torch.equal(loss_mask.bool(), torch.isin(ids, torch.tensor([prompts.tokenizer.stoi[a]
                                                                       for a in ACTION_NAMES])))
    assert torch.equal(attention.bool(), ids != prompts.tokenizer.pad_id)


@pytest.mark.parametrize("knobs, message", [
    ({"size": 1}, "size"), ({"p": 0.0}, "p in"), ({"max_steps": 0}, "max_steps"),
    ({"format_penalty": 0.5}, "format_penalty"), ({"detour_rate": 0.7, "fail_rate": 0.5}, "sum"),
])
def test_bad_knobs(knobs, message):
    with pytest.raises(ValueError, match=message):
        FrozenLakePrompts(num_train=10, num_val=5, **knobs)
