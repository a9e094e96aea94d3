"""Tests for benchmarks.heldout_split (fitting a threshold on some tasks' runs, scoring it on another's) and the
engine's threshold overrides it diagnoses with, on hand-built records and judgement grids."""

from __future__ import annotations

import pytest

from benchmarks.heldout_split import (
    GRID,
    SHIPPED,
    Run,
    Unit,
    fit,
    judge_grid,
    main,
    overall,
    reading,
    right,
    split_unit,
    verdict,
)
from playground.diagnose.engine import diagnose, diagnose_log, run_log
from playground.metrics import STEP

TARGET = {"score_target": 1.0, "family": "gym"}


def stalled(grad_norm: float, n: int = 12) -> list[dict[str, float]]:
    """A gym run whose score is stuck below its target with the actor's gradient at `grad_norm` throughout."""
    return [{STEP: float(s), "actor/grad_norm": grad_norm, "critic/score/mean": 0.1, "actor/pg_clipfrac": 0.15,
             "actor/ppo_kl": 0.003, "actor/entropy_loss": 0.5} for s in range(1, n + 1)]


def test_an_override_replaces_one_threshold_and_no_override_changes_nothing():
    records = stalled(0.005)  # under vanishing_gradient's grad_low 0.01
    shipped = diagnose(records, info=TARGET)
    assert "vanishing_gradient" in shipped.ids()
    assert diagnose(records, info=TARGET, overrides=()).to_dict()["findings"] == shipped.to_dict()["findings"]
    lowered = diagnose(records, info=TARGET, overrides=(("vanishing_gradient", "grad_low", 0.001),))
    assert "vanishing_gradient" not in lowered.ids()
    same = diagnose(records, info=TARGET, overrides=(("vanishing_gradient", "grad_low", 0.01),))
    assert "override" in same.findings[0].evidence[0]["range"]  # the evidence says the value was not rules.yaml's


@pytest.mark.parametrize("overrides, says", [
    ((("no_such_rule", "x", 1.0),), "no rule of that name applies to gym"),
    ((("vanishing_gradient", "no_such", 1.0),), "has no threshold no_such"),
    ((("entropy_explosion", "nats_high", 1.0),), "no rule of that name applies to gym"),  # an llm-only rule
])
def test_a_bad_override_is_an_error_before_anything_is_judged(overrides, says):
    with pytest.raises(ValueError, match=says):
        diagnose(stalled(0.005), info=TARGET, overrides=overrides)


def test_right_reads_the_root_on_its_own_scenario_and_stray_warnings_elsewhere():
    report = diagnose(stalled(0.005), info=TARGET)
    assert right(verdict(report, "vanishing_gradient"), "vanishing_gradient", "vanishing_gradient")
    assert not right(verdict(report, "healthy"), "vanishing_gradient", "healthy")  # a false alarm there
    assert right(verdict(report, "healthy"), "entropy_collapse", "healthy")  # it says nothing of other ids
    assert not right(verdict(report, "entropy_collapse"), "entropy_collapse", "entropy_collapse")  # missed


def synthetic_run(path: str, task: str, scenario: str, grad_norm: float, seed: int = 1) -> Run:
    log, config, notes = run_log(stalled(grad_norm), info=TARGET)
    run = Run(task, "gym", scenario, seed, path, log, config, notes)
    run.shipped = verdict(diagnose_log(log, "gym", config, notes=notes), scenario)
    return run


def test_judge_grid_rediagnoses_each_factor():
    unit = Unit("vanishing_gradient", "grad_low", "vanishing_gradient", ("gym",))
    runs = [synthetic_run("a", "cartpole", "vanishing_gradient", 0.005),
            synthetic_run("b", "cartpole", "healthy", 0.005)]
    grid = judge_grid(unit, runs)
    # grad_low 0.01 x factor fires where it exceeds the gradient's 0.005: from x0.7 on
    assert grid["a"] == {f: f >= 0.7 for f in GRID}
    assert grid["b"] == {f: f < 0.7 for f in GRID}


def test_fit_takes_the_most_right_factor_and_breaks_ties_toward_the_shipped_value():
    grid = {"a": {f: f >= 1 for f in GRID}, "b": {f: f <= 2 for f in GRID}, "c": {f: f >= 2 for f in GRID}}
    assert fit(grid, ["a", "b"]) == SHIPPED  # x1, x1.4 and x2 all right on both: the shipped value
    assert fit(grid, ["a", "b", "c"]) == 2.0  # only x2 is right on all three
    assert fit(grid, ["c"]) == 2.0  # x2 and x4 tie: the nearer to 1
    assert fit({"d": {f: f < 0.5 for f in GRID}}, ["d"]) == 0.25


def grid_run(path: str, task: str, seed: int) -> Run:
    family = "token" if task == "addition" else "gym"
    return Run(task, family, "healthy", seed, path)


def test_split_unit_fits_on_the_other_tasks_and_scores_the_held_out_one():
    # cartpole's runs are right only with x0.25, acrobot's and addition's only from x1 on: the fold without cartpole
    # fits x1 (right on all its 4 runs), and is wrong on both of cartpole's
    runs = [grid_run(f"{task}{seed}", task, seed) for task in ("cartpole", "acrobot", "addition") for seed in (1, 2)]
    grid = {r.path: {f: (f == 0.25) if r.task == "cartpole" else f >= 1 for f in GRID} for r in runs}
    unit = Unit("vanishing_gradient", "grad_low", "vanishing_gradient", ("gym", "token"))
    result = split_unit(unit, runs, grid)
    by = {(f["kind"], f["fold"]): f for f in result["folds"]}
    assert by["task", "cartpole"]["factor"] == SHIPPED
    assert (by["task", "cartpole"]["right_fitted"], by["task", "cartpole"]["right_shipped"]) == (0, 0)
    assert by["task", "cartpole"]["in_fold"] == 1.0 and by["task", "cartpole"]["drop"] == 1.0
    assert by["task", "acrobot"]["factor"] == SHIPPED  # 2 of 4 right with x0.25 or x1 alike: the tie goes to x1
    assert by["task", "addition"]["factor"] == SHIPPED
    assert by["task", "cartpole"]["value"] == {"gym": 0.01}
    assert by["family", "token"]["factor"] == SHIPPED  # fitted on gym: cartpole's 2 with x0.25 tie acrobot's 2
    assert (by["family", "token"]["held_out"], by["family", "token"]["right_fitted"]) == (2, 2)
    assert by["seed", "1"]["held_out"] == 3 and by["seed", "1"]["factor"] == SHIPPED
    assert result["totals"]["task"] == {"held_out": 6, "right_fitted": 4, "right_shipped": 4}
    assert not result["flat"] and not result["task_dependent"]
    pooled = overall([result])
    assert pooled["task"]["fitted"] == round(4 / 6, 4) and pooled["task"]["shipped"] == round(4 / 6, 4)


def test_a_threshold_whose_fit_moves_with_the_held_out_task_is_called_task_dependent():
    runs = [grid_run(f"{task}{seed}", task, seed) for task in ("cartpole", "acrobot", "pendulum") for seed in (1, 2)]
    best = {"cartpole": 0.25, "acrobot": 4.0, "pendulum": 4.0}  # each task's runs are right with one factor only
    grid = {r.path: {f: f == best[r.task] for f in GRID} for r in runs}
    grid["cartpole1"][4.0] = True  # so that the fold without acrobot still prefers x4 (3 of 4 against 2)
    result = split_unit(Unit("vanishing_gradient", "grad_low", "vanishing_gradient", ("gym",)), runs, grid)
    factors = {f["fold"]: f["factor"] for f in result["folds"] if f["kind"] == "task"}
    assert factors == {"cartpole": 4.0, "acrobot": 4.0, "pendulum": 4.0}
    assert not result["task_dependent"]
    grid["cartpole1"][4.0] = False  # without pendulum: cartpole's x0.25 ties acrobot's x4 (equally far from 1: the
    # smaller is taken), and so without acrobot
    result = split_unit(Unit("vanishing_gradient", "grad_low", "vanishing_gradient", ("gym",)), runs, grid)
    factors = {f["fold"]: f["factor"] for f in result["folds"] if f["kind"] == "task"}
    assert factors == {"cartpole": 4.0, "acrobot": 0.25, "pendulum": 0.25}
    assert result["task_dependent"] and reading(result).startswith("task-dependent")


def test_a_threshold_no_factor_moves_is_flat_and_said_to_say_nothing():
    runs = [grid_run(f"{task}{seed}", task, seed) for task in ("cartpole", "acrobot") for seed in (1, 2)]
    grid = {r.path: dict.fromkeys(GRID, True) for r in runs}
    result = split_unit(Unit("vanishing_gradient", "grad_low", "vanishing_gradient", ("gym",)), runs, grid)
    assert result["flat"] and "says nothing" in reading(result)


def test_runs_that_are_not_there_are_an_error_before_anything_is_judged(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--runs", str(tmp_path / "absent")])
    assert "no such dir" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no run dirs under"):
        main(["--runs", str(tmp_path)])
