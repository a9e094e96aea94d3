"""The FrozenLake port against gymnasium's own FrozenLakeEnv, the map generator, the solver and the scripted player."""

import random

import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import MAPS, FrozenLakeEnv
from gymnasium.utils import seeding

from playground.tasks.frozenlake import (
    FrozenLake,
    LakeMap,
    generate_map,
    goal_distances,
    move,
    scripted_moves,
)


@pytest.mark.parametrize("is_slippery", [False, True])
def test_step_matches_gymnasium(is_slippery):
    """Same map, same actions, same uniforms -> same tiles, rewards and terminations, for 40 games of 25 moves (moves
    after the end too: both keep the player on an absorbing goal or hole). On slippery ice the port is fed the
    uniforms gymnasium's generator draws: `reset(seed)` takes one (the start tile), each `step` one more."""
    rng = random.Random(1)
    for game_seed in range(40):
        lake = generate_map(4, 0.7, rng, random_start_goal=True) if game_seed else LakeMap(tuple(MAPS["4x4"]))
        env = FrozenLakeEnv(desc=list(lake.rows), is_slippery=is_slippery)
        state, _ = env.reset(seed=game_seed)
        uniforms, _ = seeding.np_random(game_seed)
        uniforms.random()  # the reset's draw
        ours = FrozenLake(lake, is_slippery)
        assert state == ours.cell[0] * 4 + ours.cell[1]
        for _ in range(25):
            action = rng.randrange(4)
            state, reward, terminated, truncated, _ = env.step(action)
            result = ours.step(action, float(uniforms.random()))
            assert (result.cell[0] * 4 + result.cell[1], result.reward, result.terminated) == (state, reward,
                                                                                                terminated)
            assert not truncated


def test_slippery_transition_distribution():
    """From the 4x4 map's start, Right slips Up (the border: stays), Right or Down with 1/3 each."""
    lake = LakeMap(tuple(MAPS["4x4"]))
    rng = random.Random(0)
    counts = {}
    for _ in range(3000):
        game = FrozenLake(lake, is_slippery=True)
        cell = game.step(2, rng.random()).cell
        counts[cell] = counts.get(cell, 0) + 1
    assert set(counts) == {(0, 0), (0, 1), (1, 0)}
    assert all(abs(c / 3000 - 1 / 3) < 0.03 for c in counts.values())


def test_move_clips_at_the_border():
    assert move((0, 0), 0, 4) == (0, 0) and move((0, 0), 3, 4) == (0, 0)
    assert move((0, 0), 1, 4) == (1, 0) and move((0, 0), 2, 4) == (0, 1)
    assert move((3, 3), 1, 4) == (3, 3) and move((3, 3), 2, 4) == (3, 3)


def test_goal_distances_on_gymnasium_map():
    lake = LakeMap(tuple(MAPS["4x4"]))  # SFFF / FHFH / FFFH / HFFG
    dist = goal_distances(lake)
    assert dist[(0, 0)] == 6 and dist[(3, 3)] == 0 and dist[(3, 2)] == 1
    assert (1, 1) not in dist and (3, 0) not in dist  # holes are never on a route


@pytest.mark.parametrize("random_start_goal", [False, True])
def test_generated_maps_are_solvable_and_seeded(random_start_goal):
    maps = [generate_map(4, 0.8, random.Random(s), random_start_goal) for s in range(200)]
    for lake in maps:
        assert sorted("".join(lake.rows).replace("H", "").replace("F", "")) == ["G", "S"]
        assert lake.find("S") in goal_distances(lake)
    assert maps == [generate_map(4, 0.8, random.Random(s), random_start_goal) for s in range(200)]
    starts, goals = {lake.find("S") for lake in maps}, {lake.find("G") for lake in maps}
    if random_start_goal:  # RAGEN's
        assert len(starts) > 8 and len(goals) > 8
    else:  # gymnasium's
        assert starts == {(0, 0)} and goals == {(3, 3)}
    holes = np.mean(["".join(m.rows).count("H") / 14 for m in maps])
    assert 0.1 < holes < 0.25  # about 1 - p, a little fewer: maps with many holes are more often redrawn


def _play(lake, moves, is_slippery=False):
    game = FrozenLake(lake, is_slippery)
    for action, u in moves:
        game.step(action, u)
    return game


def test_scripted_player():
    rng = random.Random(3)
    for _ in range(200):
        lake = generate_map(4, 0.8, rng)
        shortest = goal_distances(lake)[lake.find("S")]
        moves = scripted_moves(lake, "shortest", 10, rng)
        end = _play(lake, moves)
        assert len(moves) == shortest and end.lake.tile(end.cell) == "G"
        moves = scripted_moves(lake, "detour", 10, rng)
        end = _play(lake, moves)
        assert shortest + 1 <= len(moves) <= shortest + 2 and end.lake.tile(end.cell) == "G"
        moves = scripted_moves(lake, "fail", 10, rng)
        end = _play(lake, moves)
        assert end.lake.tile(end.cell) != "G"
        assert end.lake.tile(end.cell) == "H" or len(moves) == 10
    with pytest.raises(ValueError, match="mode"):
        scripted_moves(lake, "best", 10, rng)


def test_scripted_player_replays_on_slippery_ice():
    """The uniforms it returns replay its game: a slippery shortest-route player still often reaches the goal."""
    rng, wins = random.Random(4), 0
    for _ in range(200):
        lake = generate_map(4, 0.8, rng, random_start_goal=True)  # routes of 1-10 moves; corner to corner takes 6
        moves = scripted_moves(lake, "shortest", 10, rng, is_slippery=True)
        end = _play(lake, moves, is_slippery=True)
        assert end.terminated or len(moves) == 10
        wins += end.lake.tile(end.cell) == "G"
    assert 0.2 < wins / 200 < 0.9
