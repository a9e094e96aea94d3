"""FrozenLake, the grid game RAGEN trains LLM agents on, ported to pure Python: maps, moves, a solver, a scripted
player.

The moves are gymnasium's `FrozenLakeEnv` (gymnasium/envs/toy_text/frozen_lake.py): actions 0 Left, 1 Down, 2 Right,
3 Up; a move into the border stays put; stepping on a hole ends the episode with reward 0, on the goal with reward 1;
on slippery ice the player moves in the intended direction with probability 1/3 and in each perpendicular one with
1/3, the draw being gymnasium's `categorical_sample` (the first outcome whose cumulative probability exceeds a
uniform u), so the same uniforms give the same moves (tests/tasks/test_frozenlake.py steps both side by side).

The maps are gymnasium's `generate_random_map` (each tile frozen with probability p, the start top left and the goal
bottom right, redrawn until the goal is reachable), or RAGEN's variant of it (ragen/env/frozen_lake/utils.py: start
and goal on random distinct tiles, so the way to go depends on the board alone). Drawn with Python's `random` rather
than numpy: the same logic, not the same maps for a seed.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

LEFT, DOWN, RIGHT, UP = range(4)  # gymnasium's action ids
ACTION_NAMES = ("Left", "Down", "Right", "Up")  # RAGEN's action_lookup, in gymnasium's order
SLIP_SUCCESS_RATE = 1.0 / 3.0  # gymnasium's default success_rate on slippery ice
_DELTAS = ((0, -1), (1, 0), (0, 1), (-1, 0))  # (drow, dcol) of each action


@dataclass(frozen=True)
class LakeMap:
    """A board as gymnasium's `desc`: rows of 'S' start, 'F' frozen, 'H' hole, 'G' goal."""

    rows: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.rows)

    def tile(self, cell: tuple[int, int]) -> str:
        return self.rows[cell[0]][cell[1]]

    def find(self, letter: str) -> tuple[int, int]:
        return next((r, c) for r, row in enumerate(self.rows) for c, x in enumerate(row) if x == letter)

    @property
    def text(self) -> str:
        """The map in one line, "SFFF/FHFH/FFFH/HFFG": an example's ground truth."""
        return "/".join(self.rows)

    @classmethod
    def from_text(cls, text: str) -> LakeMap:
        return cls(tuple(text.split("/")))


def move(cell: tuple[int, int], action: int, size: int) -> tuple[int, int]:
    """gymnasium's `inc`: one tile in the action's direction, clipped at the border."""
    dr, dc = _DELTAS[action]
    return min(max(cell[0] + dr, 0), size - 1), min(max(cell[1] + dc, 0), size - 1)


def goal_distances(lake: LakeMap) -> dict[tuple[int, int], int]:
    """Fewest moves from each tile that can reach the goal without stepping on a hole (BFS back from the goal; moves
    between neighbours are symmetric, so reaching the goal from a tile and the tile from the goal take as many)."""
    goal = lake.find("G")
    dist, frontier = {goal: 0}, deque([goal])
    while frontier:
        cell = frontier.popleft()
        for action in range(4):
            nxt = move(cell, action, lake.size)
            if nxt not in dist and lake.tile(nxt) != "H":
                dist[nxt] = dist[cell] + 1
                frontier.append(nxt)
    return dist


def generate_map(size: int, p: float, rng: random.Random, random_start_goal: bool = False) -> LakeMap:
    """A random solvable map, each tile frozen with probability p, redrawn until the goal is reachable from the start:
    gymnasium's `generate_random_map` (start top left, goal bottom right), or with `random_start_goal` RAGEN's (start
    and goal on distinct random tiles)."""
    while True:
        board = [["F" if rng.random() < p else "H" for _ in range(size)] for _ in range(size)]
        start, goal = (0, 0), (size - 1, size - 1)
        if random_start_goal:
            start = (rng.randrange(size), rng.randrange(size))
            goal = (rng.randrange(size), rng.randrange(size))
            if start == goal:
                continue
        board[start[0]][start[1]], board[goal[0]][goal[1]] = "S", "G"
        lake = LakeMap(tuple("".join(row) for row in board))
        if start in goal_distances(lake):
            return lake


@dataclass(frozen=True)
class StepResult:
    cell: tuple[int, int]  # the player's tile after the move
    reward: float  # gymnasium's reward schedule (1, 0, 0): 1 on reaching the goal
    terminated: bool  # on the goal or in a hole


class FrozenLake:
    """One game: the player's tile on a map, moved by `step` as gymnasium's `FrozenLakeEnv.step`."""

    def __init__(self, lake: LakeMap, is_slippery: bool = False):
        self.lake, self.is_slippery = lake, is_slippery
        self.cell = lake.find("S")

    @property
    def terminated(self) -> bool:
        return self.lake.tile(self.cell) in "GH"

    def outcomes(self, action: int) -> list[tuple[float, int]]:
        """gymnasium's transition list for this action: (probability, direction actually moved)."""
        if not self.is_slippery:
            return [(1.0, action)]
        fail = (1.0 - SLIP_SUCCESS_RATE) / 2.0
        return [(SLIP_SUCCESS_RATE if b == action else fail, b) for b in ((action - 1) % 4, action, (action + 1) % 4)]

    def step(self, action: int, u: float = 0.0) -> StepResult:
        """Moves by `action` (0-3); `u` in [0, 1) picks the slip as gymnasium's `categorical_sample` does (unused on
        dry ice). A terminated game stays where it is with reward 0, as gymnasium's absorbing G and H tiles."""
        if not 0 <= action < 4:
            raise ValueError(f"action must be 0-3 (Left, Down, Right, Up), got {action}")
        if self.terminated:
            return StepResult(self.cell, 0.0, True)
        cumulative, direction = 0.0, None
        for prob, b in self.outcomes(action):
            cumulative += prob
            if cumulative > u:
                direction = b
                break
        if direction is None:  # u past the rounding of the cumulative sum: numpy's argmax of an all-False row is 0
            direction = self.outcomes(action)[0][1]
        self.cell = move(self.cell, direction, self.lake.size)
        return StepResult(self.cell, 1.0 if self.lake.tile(self.cell) == "G" else 0.0, self.terminated)


def scripted_moves(lake: LakeMap, mode: str, max_steps: int, rng: random.Random,
                   is_slippery: bool = False) -> list[tuple[int, float]]:
    """One demonstration game, played out until it ends or max_steps: each move's action and the uniform that drew
    its slip (replaying them through `FrozenLake.step` gives the same game). The player's choices:

    - "shortest": each move one that brings the goal a step nearer (uniform among ties: the routes differ);
    - "detour": the same, but at one random move a safe tile that does not bring the goal nearer (a sideways or
      backward step, or a bump into the border), then on again;
    - "fail": the same as shortest, but at a random move next to a hole it steps into the hole; when the route passes
      no hole it wanders instead (random safe moves that do not near the goal, until max_steps).
    On slippery ice the next move is chosen from where the slip left the player.
    """
    if mode not in ("shortest", "detour", "fail"):
        raise ValueError(f"mode must be 'shortest', 'detour' or 'fail', got {mode!r}")
    dist = goal_distances(lake)
    game = FrozenLake(lake, is_slippery)
    size = lake.size
    turn_at = rng.randrange(dist[game.cell])  # the move that detours or fails, among the shortest route's
    wander = False
    moves: list[tuple[int, float]] = []
    while not game.terminated and len(moves) < max_steps:
        here = game.cell
        safe = [a for a in range(4) if lake.tile(move(here, a, size)) != "H"]
        nearer = [a for a in safe if dist.get(move(here, a, size), 1 << 30) < dist.get(here, 1 << 30)]
        holes = [a for a in range(4) if lake.tile(move(here, a, size)) == "H"]
        aside = [a for a in safe if a not in nearer] or safe or list(range(4))  # moves that do not near the goal
        if wander or not nearer:  # a slip can leave the player where the goal is out of reach
            choice = rng.choice(aside)
        elif mode == "detour" and len(moves) == turn_at:
            choice = rng.choice(aside)
        elif mode == "fail" and len(moves) >= turn_at and holes:
            choice = rng.choice(holes)
        elif mode == "fail" and dist[here] == 1:  # the route is over without a hole beside it: wander instead
            wander = True
            choice = rng.choice(aside)
        else:
            choice = rng.choice(nearer)
        u = rng.random()
        moves.append((choice, u))
        game.step(choice, u)
    return moves
