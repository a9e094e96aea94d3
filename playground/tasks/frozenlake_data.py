"""FrozenLake as a multi-turn token task (RAGEN's text game): the board in text, one action a turn, the new board as
the environment's reply.

The text is RAGEN's (ragen/env/frozen_lake/config.py, `render`): 'P' the player, '_' frozen ice (the start tile
too), 'O' a hole, 'G' the goal, 'X' the player in a hole, '√' the player on the goal; each row ends with '\n'. The
prompt is the first board after BOS:

    _P__\n_O__\n____\nO__G\n      then the policy writes "Down", the environment answers with the next board:
    ____\n_O__\n_P__\nO__G\n      and so on until the goal, a hole, or `max_steps` turns.

The four actions are single tokens ("Left", "Down", "Right", "Up"), and each is also the turn's end
(`turn_end_tokens`): one action a turn, so a separate end-of-turn token would be one more token the policy must emit
with nothing to decide, and every assistant token here is a decision (the loss trains on decisions only). A turn
that holds anything before its action (board characters) is invalid: the player stays put, the turn counts towards
`max_steps`, and it costs `format_penalty` (RAGEN's `es_manager.format_penalty`, -0.1 per turn with an invalid
action). The reward is gymnasium's, 1 on reaching the goal; an episode's score is that plus its penalties, its
`acc` 1.0 on success, all of it at the episode's end (`outcome`; each reply's own reward is 0), as RAGEN's default
(`use_turn_scores: False`).

Maps: gymnasium's generator (start top left, goal bottom right), or RAGEN's with `random_start_goal`
(`frozenlake.generate_map`), drawn from `seed` and deduplicated; the first `num_val` are validation, the rest
training, so no map is on both sides. gymnasium's is the default because the tiny model does not learn RAGEN's in a
few minutes: its SFT loss stayed at ln 4 (uniform over the actions) for 200 steps at lr 3e-3 and at 1e-2 (2 layers,
64 wide, batches of 32-64), where on gymnasium's maps it fell to 0.7 within 100 steps.

SFT traces (a fresh one each time an example is drawn): with probability `fail_rate` a failed game (into a hole, or
wandering until `max_steps`), else with probability `detour_rate` one detour on the way, else a shortest route
(uniform among the shortest ones); `frozenlake.scripted_moves` plays them. The environment's boards are in the trace
for the model to read but out of its loss (`collate_sft_targets`'s loss mask, as verl's multi-turn SFT masks all but the
assistant's turns).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from playground.rollout.turns import EnvReply
from playground.tasks.frozenlake import ACTION_NAMES, FrozenLake, LakeMap, generate_map, scripted_moves
from playground.tasks.token_data import Example, PromptSet
from playground.tasks.tokenizer import Tokenizer

BOARD_CHARS = "P_OGX√"  # RAGEN's grid_lookup: player, frozen, hole, goal, player in hole, player on goal
ROW_END = "\n"


def render(lake: LakeMap, cell: tuple[int, int]) -> str:
    """RAGEN's text board: the player's tile drawn 'P' (or 'X' in a hole, '√' on the goal), the start as ice."""
    lines = []
    for r, row in enumerate(lake.rows):
        tiles = ["_" if x in "SF" else "O" if x == "H" else "G" for x in row]
        if r == cell[0]:
            tiles[cell[1]] = {"H": "X", "G": "√"}.get(row[cell[1]], "P")
        lines.append("".join(tiles) + ROW_END)
    return "".join(lines)


class FrozenLakeEpisode:
    """One game behind the `episodes.Episode` interface: a turn's text in, the next board out."""

    def __init__(self, lake: LakeMap, *, is_slippery: bool, max_steps: int, format_penalty: float,
                 rng: random.Random):
        self.game = FrozenLake(lake, is_slippery)
        self.max_steps, self.format_penalty, self.rng = max_steps, format_penalty, rng
        self.turns = self.invalid_turns = 0
        self.done = False

    def step(self, assistant_turn: str) -> EnvReply:
        if self.done:
            raise RuntimeError("the FrozenLake episode is over (its last reply said done); no further turn")
        self.turns += 1
        if assistant_turn in ACTION_NAMES:
            self.game.step(ACTION_NAMES.index(assistant_turn), self.rng.random())
        else:  # anything but one action: the player stays put
            self.invalid_turns += 1
        self.done = self.game.terminated or self.turns >= self.max_steps
        # the turn's reward is 0: the goal's 1 and the penalties all count in `outcome` (RAGEN's default,
        # agent_proxy.use_turn_scores=False: "the sum of scores as the reward for the last turn")
        return EnvReply(render(self.game.lake, self.game.cell), 0.0, self.done)

    @property
    def success(self) -> bool:
        return self.game.lake.tile(self.game.cell) == "G"

    def outcome(self, last_turn: str = "") -> dict[str, float]:
        """`last_turn`: the turn no step saw (`max_assistant_turns` ended the episode after it, or EOS or the length
        cap cut it): the game still plays it, as a move or an invalid turn, unless it is empty or the game is over."""
        if last_turn and not self.done:
            self.step(last_turn)
        return {"score": float(self.success) + self.format_penalty * self.invalid_turns, "acc": float(self.success)}


class FrozenLakePrompts(PromptSet):
    """Solvable maps split into disjoint train and val; episodes and SFT traces over them (see the module doc).

    An example's prompt is the first board; its answer is the map ("_P__/..." in gymnasium's letters, "SFFF/FHFH/..."),
    the ground truth an episode is built from.
    """

    name = "frozenlake"
    knobs = ("size", "p", "random_start_goal", "is_slippery", "max_steps", "format_penalty", "detour_rate",
             "fail_rate")
    # board characters and the row end, one token each, then the four actions as tokens: 3 + 7 + 4 = 14 ids
    tokenizer = Tokenizer(BOARD_CHARS + ROW_END, words=ACTION_NAMES)
    multi_turn = True
    turn_end_tokens = ACTION_NAMES

    def __init__(self, size: int = 4, p: float = 0.8, random_start_goal: bool = False, is_slippery: bool = False,
                 max_steps: int = 10,
                 format_penalty: float = -0.1, detour_rate: float = 0.2, fail_rate: float = 0.2,
                 num_train: int | None = None, num_val: int = 128, seed: int = 0):
        """Draws the maps.

        Args:
            size: the board is size x size (RAGEN's default 4).
            p: the chance a tile is frozen rather than a hole (RAGEN's default 0.8).
            random_start_goal: RAGEN's maps (start and goal anywhere) rather than gymnasium's (in the corners).
            is_slippery: gymnasium's slippery ice (the intended move with probability 1/3).
            max_steps: turns an episode lasts at most (RAGEN's max_actions_per_traj for FrozenLake: 10).
            format_penalty: reward of a turn without a valid action (RAGEN's -0.1); <= 0.
            detour_rate, fail_rate: shares of SFT traces with a detour and of failed ones.
            num_train: training maps; None means 1000 (4x4 has about 3400 distinct solvable maps at p = 0.8;
                drawing 1000 distinct ones takes 0.4 s, 2000 take 5 s).
            num_val: validation maps, none of them in training.
            seed: the maps, the SFT traces and the slips.
        """
        if not 2 <= size <= 8:
            raise ValueError(f"need size in [2, 8], got {size}")
        if not 0 < p <= 1:
            raise ValueError(f"need p in (0, 1], got {p}")
        if max_steps < 1 or format_penalty > 0:
            raise ValueError(f"need max_steps >= 1 and format_penalty <= 0, got {max_steps}, {format_penalty}")
        if not (0 <= detour_rate <= 1 and 0 <= fail_rate <= 1 and detour_rate + fail_rate <= 1):
            raise ValueError(f"need detour_rate, fail_rate in [0, 1] with a sum <= 1, got {detour_rate}, {fail_rate}")
        num_train = 1000 if num_train is None else num_train
        if num_train < 1 or num_val < 1:
            raise ValueError(f"need num_train >= 1 and num_val >= 1, got {num_train}, {num_val}")
        self.size, self.p, self.is_slippery, self.max_steps = size, p, bool(is_slippery), max_steps
        self.random_start_goal = bool(random_start_goal)
        self.format_penalty, self.detour_rate, self.fail_rate = format_penalty, detour_rate, fail_rate
        self.num_train, self.num_val, self.seed = num_train, num_val, seed
        rng, seen = random.Random(seed), set()
        maps: list[LakeMap] = []
        for _ in range(50 * (num_train + num_val)):  # 2x2 boards have few maps: stop rather than loop forever
            if len(maps) == num_train + num_val:
                break
            lake = generate_map(size, p, rng, self.random_start_goal)
            if lake not in seen:
                seen.add(lake)
                maps.append(lake)
        else:
            raise ValueError(f"frozenlake size {size}, p {p} gave only {len(maps)} distinct maps; "
                             f"num_train + num_val = {num_train + num_val}")
        self.val: list[Example] = [self.example(lake) for lake in maps[:num_val]]
        self.train: list[Example] = [self.example(lake) for lake in maps[num_val:]]
        self._trace_rng = random.Random(seed + 1)
        self._episode_rng = random.Random(seed + 2)

    @staticmethod
    def example(lake: LakeMap) -> Example:
        return Example(prompt=render(lake, lake.find("S")), answer=lake.text)

    # ---- the multi-turn interface
    def new_episode(self, example: Example) -> FrozenLakeEpisode:
        """A fresh game on the example's map; its slips come from its own generator, drawn from the set's."""
        return FrozenLakeEpisode(LakeMap.from_text(example.answer), is_slippery=self.is_slippery,
                                 max_steps=self.max_steps, format_penalty=self.format_penalty,
                                 rng=random.Random(self._episode_rng.getrandbits(64)))

    # ---- the PromptSet interface
    @property
    def config(self) -> dict[str, Any]:
        return {"name": self.name, **{k: getattr(self, k) for k in self.knobs},
                "num_train": self.num_train, "num_val": self.num_val, "seed": self.seed}

    @property
    def board_chars(self) -> int:
        return self.size * (self.size + 1)  # each row and its row end

    @property
    def max_prompt_chars(self) -> int:
        return self.board_chars

    @property
    def max_answer_chars(self) -> int:  # every turn: its action and the board that answers it
        return self.max_steps * (1 + self.board_chars)

    @property
    def max_answer_tokens(self) -> int:
        return self.max_answer_chars  # no EOS: the environment ends the episode

    def trace(self, example: Example, rng: random.Random) -> tuple[list[int], list[int]]:
        """One SFT demonstration (the module doc says how it is drawn): its token ids and loss mask (1 on actions)."""
        draw = rng.random()
        mode = "fail" if draw < self.fail_rate else "detour" if draw < self.fail_rate + self.detour_rate else "shortest"
        lake = LakeMap.from_text(example.answer)
        game = FrozenLake(lake, self.is_slippery)
        ids, loss_mask = [], []
        for action, u in scripted_moves(lake, mode, self.max_steps, rng, self.is_slippery):
            board = self.tokenizer.encode(render(lake, game.step(action, u).cell))
            ids += [self.tokenizer.stoi[ACTION_NAMES[action]]] + board
            loss_mask += [1] + [0] * len(board)
        return ids, loss_mask

    def target_ids(self, example: Example) -> list[int]:
        return self.trace(example, self._trace_rng)[0]

    def collate_sft_targets(self, examples: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Fresh traces right-padded to the batch's longest: ids, attention mask and loss mask `(bs, A)` each."""
        traces = [self.trace(e, self._trace_rng) for e in examples]
        ids, attention = self._pad([t[0] for t in traces], max(len(t[0]) for t in traces), left=False)
        loss_mask, _ = self._pad([t[1] for t in traces], ids.shape[1], left=False)
        return ids, attention, loss_mask  # _pad fills with pad id 0: the loss mask's padding is 0 too

    def collate_targets(self, examples: Sequence[Example]) -> tuple[torch.Tensor, torch.Tensor]:
        ids, attention, _ = self.collate_sft_targets(examples)
        return ids, attention
