"""Tests for `playground/exercise.py` and `exercises/`: every exercise's mystery run (shortened) shows its failure, the
checker accepts the reference answer and rejects wrong ones with a useful message, and nothing gives the answer away."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from playground.config.overrides import value_of
from playground.exercise import check, check_last_good, main, parse_fix, run_fix, start
from playground.failures import FAILURE_IDS, TITLES
from playground.rundir.runs import read_findings, read_run_info
from playground.teach.workshop import EXERCISES_DIR, ExerciseError, find, load_all, mystery_dir

EXERCISES = load_all()
BY_ID = {ex.id: ex for ex in EXERCISES}
SCORE_METRIC = {"gym": "critic/score/mean", "token": "val/accuracy"}
REQUIRED = {"lr_too_high", "lr_too_low", "critic_undertrained", "entropy_collapse", "response_truncation",
            "advantage_not_normalized", "no_learning_signal", "kl_drift"}


def _ids(exercises):
    return [ex.id for ex in exercises]


def _family(ex) -> str:
    with open(EXERCISES_DIR.parent / "conf" / "task" / f"{ex.task}.yaml", encoding="utf-8") as f:
        return yaml.safe_load(f)["task"]["family"]


def test_the_exercises_cover_the_workshop():
    assert len(EXERCISES) >= 10
    assert [ex.number for ex in EXERCISES] == list(range(1, len(EXERCISES) + 1))
    named = {ex.diagnosis for ex in EXERCISES}
    assert REQUIRED <= named
    assert named & {"out_of_memory", "generation_bottleneck", "update_bottleneck"}  # one system exercise
    assert {_family(ex) for ex in EXERCISES} == {"gym", "token"}


@pytest.mark.parametrize("ex", EXERCISES, ids=_ids(EXERCISES))
def test_an_exercise_has_its_files_and_sound_metadata(ex):
    for name in ("worksheet.en.md", "worksheet.zh.md", "mystery.yaml", "instructor.md", "exercise.yaml"):
        assert (ex.folder / name).is_file(), name
    assert ex.id == ex.folder.name
    assert ex.diagnosis in FAILURE_IDS and set(ex.accepted) <= set(FAILURE_IDS)
    mystery = ex.mystery()
    assert f"task={ex.task}" in mystery and "scenario=mystery" in mystery and "trainer.mystery=true" in mystery
    assert parse_fix(" ".join(ex.reference_fix)) == ex.reference_fix
    assert ex.bar["metric"] == SCORE_METRIC[_family(ex)]
    assert set(ex.steps) == {"start", "check", "test"}
    for hints in (ex.hints, ex.fix_hints, *([h] for h in ex.near_misses.values())):
        assert hints and all(h.get("en") and h.get("zh") for h in hints)
    assert set(ex.near_misses) <= set(FAILURE_IDS) - set(ex.right_ids)
    assert ex.title["en"] and ex.title["zh"]


@pytest.mark.parametrize("ex", EXERCISES, ids=_ids(EXERCISES))
def test_what_participants_see_does_not_name_the_answer(ex):
    seen = [ex.id, ex.title["en"], ex.title["zh"], (ex.folder / "mystery.yaml").read_text(encoding="utf-8"),
            ex.worksheet("en"), ex.worksheet("zh"), *(h[lang] for h in ex.hints for lang in ("en", "zh"))]
    text = "\n".join(seen).lower()
    for fid in ex.right_ids:
        for giveaway in (fid, fid.replace("_", " "), TITLES[fid]["en"].lower(), TITLES[fid]["zh"]):
            assert giveaway not in text, giveaway
    assert re.findall(r"scenario=(\w+)", text) == ["mystery"]


def _answer(ex) -> list[str]:
    """The mystery config's overrides that the reference fix undoes: the change that broke the run, the answer."""
    fixed = {item.split("=", 1)[0] for item in ex.reference_fix}
    return [item for item in ex.mystery() if item.split("=", 1)[0] in fixed]


def _files_the_worksheet_names(ex) -> list:
    """Every file of the checkout a worksheet names (`exercises/NN/mystery.yaml`, docs/training.md ...)."""
    root = EXERCISES_DIR.parent
    names = {m for lang in ("en", "zh") for m in re.findall(r"[\w./-]+\.(?:ya?ml|md|py|json)", ex.worksheet(lang))}
    return sorted({root / n for n in names if (root / n).is_file()})


@pytest.mark.parametrize("ex", EXERCISES, ids=_ids(EXERCISES))
def test_no_file_the_worksheet_sends_participants_to_holds_the_answer(ex):
    """Exercise 03's worksheet sent participants to its mystery.yaml, which held `critic.optim.lr=2.5e-6`: the broken
    knob, in plain sight. The change that broke a run lives in exercise.yaml's `cause` (closed to participants), and no
    file a worksheet names, nor the worksheets and hints themselves, holds it."""
    answer = _answer(ex)
    assert answer == [item for item in ex.cause if item in answer]  # each is the cause's, none mystery.yaml's
    files = _files_the_worksheet_names(ex)
    assert ex.folder / "mystery.yaml" in files  # the worksheet still says how the run was launched
    texts = {str(f): f.read_text(encoding="utf-8") for f in files if f.name != "exercise.yaml"}
    texts.update({f"worksheet.{lang}": ex.worksheet(lang) for lang in ("en", "zh")})
    texts["hints"] = "\n".join(h[lang] for h in ex.hints for lang in ("en", "zh"))
    for item in answer:
        key, value = item.split("=", 1)
        said = re.compile(rf"{re.escape(key)}\s*=\s*{re.escape(value)}(?![\w.])")
        assert not [name for name, text in texts.items() if said.search(text)], item


@pytest.mark.parametrize("ex", EXERCISES, ids=_ids(EXERCISES))
def test_worksheets_ask_the_same_questions_in_both_languages(ex):
    def outline(md):
        return [len(re.findall(r"^## ", md, re.M)), len(re.findall(r"^\d+\. ", md, re.M)),
                sorted(set(re.findall(r"`([a-z_]+/[a-z_/@0-9]+)`", md)))]  # section count, questions, metrics

    assert outline(ex.worksheet("en")) == outline(ex.worksheet("zh"))
    assert f"playground.exercise start {ex.number}" in ex.worksheet("zh")


# calc's mystery needs its 200-step SFT base (~21 s on one core, then cached) and ~12 multi-turn steps: slow; CI
# checks its collapse by the reward arithmetic (tests/scenarios/test_calc_scenarios.py). frozenlake's builds its base
# too; CI trains its trap once (tests/scenarios/test_frozenlake_scenarios.py). countdown's SFT base takes ~890 s of CPU
# to build (conf/task/countdown.yaml), too long for CI; exercise 13's mystery needs ~35 steps for its finding, 14's
# ~90-125 (CI checks both scenarios' configs and rules: tests/scenarios/test_countdown_scenarios.py)
SLOW_MYSTERIES = {"11_calc_toolshy", "12_frozenlake_echo", "13_countdown_format", "14_countdown_narrow"}
MYSTERY_RUNS = [pytest.param(ex, marks=pytest.mark.slow) if ex.id in SLOW_MYSTERIES else ex for ex in EXERCISES]


@pytest.mark.parametrize("ex", MYSTERY_RUNS, ids=_ids(EXERCISES))
def test_the_shortened_mystery_run_shows_the_expected_failure(ex, tmp_path):
    run_dir, status, _ = start(ex, tmp_path, steps=ex.steps["test"], stop_on_finding=True, progress_bar=False)
    assert run_dir == mystery_dir(ex, tmp_path)
    info = read_run_info(run_dir)
    # a cause that arrives mid-run is a scenario's (its onset form): run.json names it, the explorer hides it
    assert info["mystery"] is True and info["scenario"] == (value_of(ex.cause, "scenario") or "mystery")
    assert not info.get("solved") and info["onset_step"] == (None if ex.last_good is None else
                                                             int(value_of(ex.cause, "onset_step")))
    report = read_findings(run_dir)
    roots = [d["root"]["id"] for d in report["diagnoses"]]
    assert ex.diagnosis in roots, (status, roots, [f["id"] for f in report["findings"]])


def test_the_reference_answer_passes_and_unhides_the_run(tmp_path):
    ex = find("4")
    run_dir = mystery_dir(ex, tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "mystery": True}))
    ok, lines = check(ex, ex.diagnosis, " ".join(ex.reference_fix), root=tmp_path, progress_bar=False)
    assert ok, lines
    assert lines[0].startswith("✓ Diagnosis: entropy_collapse")
    assert "✓ Healthy: the engine finds no warning in the fixed run." in lines
    assert any(line.startswith("✓ Score: critic/score/mean reached") for line in lines)
    assert lines[-1].startswith("Solved.")
    assert read_run_info(run_dir)["solved"] is True
    assert json.loads((tmp_path / ex.id / "progress.json").read_text())["solved"] is True
    ok, lines = check(ex, "overly_deterministic", None, root=tmp_path)  # an accepted alternative, no fix yet
    assert ok and lines[-1].startswith("Next: prove a fix")


def test_a_wrong_diagnosis_gets_the_next_hint_and_not_the_answer(tmp_path):
    ex = find("1")
    run_dir = mystery_dir(ex, tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "mystery": True}))
    ok, lines = check(ex, "critic_undertrained", "actor_rollout_ref.actor.optim.lr=0.005", root=tmp_path)
    assert not ok
    assert lines == ["✗ Diagnosis: critic_undertrained is not what went wrong in this run.",
                     f"Hint 1/3: {ex.hints[0]['en']}"]
    ok, lines = check(ex, "entropy_collapse", None, root=tmp_path, lang="zh")  # a near miss says why not
    assert lines == ["✗ 诊断不对：这次运行的问题不是 entropy_collapse。", ex.near_misses["entropy_collapse"]["zh"],
                     f"提示 2/3：{ex.hints[1]['zh']}"]
    for _ in range(2):
        ok, lines = check(ex, "kl_drift", None, root=tmp_path)
    assert lines[-1].startswith("No hints left")
    assert not (tmp_path / ex.id / "fix-1").exists()  # a wrong diagnosis trains nothing
    assert read_run_info(run_dir).get("solved") is None
    assert "lr_too_high" not in "\n".join(lines) and "0.005" not in "\n".join(lines[1:])


def test_a_consequence_named_instead_of_the_root_points_up_the_chain(tmp_path):
    ex = find("1")  # lr_too_high
    run_dir = mystery_dir(ex, tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "mystery": True}))
    finding = {"id": "lr_too_high", "severity": "warning", "first_step": 4, "last_step": 9}
    consequence = {"id": "grad_clip_saturation", "severity": "warning", "first_step": 6, "last_step": 9}
    (run_dir / "findings.json").write_text(json.dumps({"diagnoses": [{"root": finding, "consequences": [consequence]}],
                                                       "findings": [finding, consequence]}))
    ok, lines = check(ex, "grad_clip_saturation", None, root=tmp_path)
    assert not ok
    assert lines[1] == ("grad_clip_saturation is really in this run, but as a consequence: something earlier explains "
                        "it. Look at what went wrong first, by step 4.")
    assert "lr_too_high" not in "\n".join(lines)


def test_a_fix_that_does_not_fix_is_rejected_with_what_is_still_wrong(tmp_path):
    ex = find("4")
    ok, lines = check(ex, ex.diagnosis, "actor_rollout_ref.actor.optim.lr=1e-3", root=tmp_path,  # slower, same sign
                      progress_bar=False)
    assert not ok
    assert lines[0].startswith("✓ Diagnosis")
    assert any(line.startswith("✗ Not healthy yet: the engine still finds entropy_collapse") for line in lines)
    assert any(line.startswith("✗ Score: critic/score/mean reached only") for line in lines)
    assert lines[-1] == f"Hint 1/2: {ex.fix_hints[0]['en']}"
    assert "entropy_coeff=0.01" not in "\n".join(lines)
    assert (tmp_path / ex.id / "fix-1" / "findings.json").is_file()


def test_the_checker_says_what_broke_the_run_apart_from_the_fix_a_verl_user_applies(tmp_path, monkeypatch):
    """Exercise 13 (a format score above a right answer's): once the diagnosis is right, the knob that broke the run
    and what it stands for in verl; after the fix, the fix as a verl user makes it (here: in their reward function)."""
    from playground import exercise
    from playground.diagnose import injected

    ex = find("13")
    run_dir = mystery_dir(ex, tmp_path)
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "mystery": True}))
    causes = injected.causes("reward_hacking", {"reward": {"format_score": 1.5}}, "reward.format_score=0.1")
    found = {"id": "reward_hacking", "severity": "warning", "first_step": 20, "last_step": 50, "injected": causes}
    (run_dir / "findings.json").write_text(json.dumps({"findings": [found], "diagnoses": [{"root": found}]}))
    monkeypatch.setattr(exercise, "run_fix", lambda *a, **k: exercise.Verdict("finished", None, [], 0.5, 0.45))
    ok, lines = check(ex, ex.diagnosis, "reward.format_score=0.1", root=tmp_path, progress_bar=False)
    assert ok, lines
    assert lines[1] == ("  what broke this run: `reward.format_score=1.5` (in a verl run: a format reward at the wrong "
                        "scale, paying a well-formed wrong answer as much as a right one (TinyZero's countdown "
                        "compute_score takes format_score=0.1))")
    assert any(line.startswith("  in verl: `reward.format_score`: the format score of your reward function")
               for line in lines)
    assert any(line.startswith("  in your code: put the format score in your reward function") for line in lines)
    ok, lines = check(ex, ex.diagnosis, "reward.format_score=0.1", root=tmp_path, progress_bar=False, lang="zh")
    assert lines[1].startswith("  本次运行的故障来源: `reward.format_score=1.5` (在 verl 运行中: 尺度错误的格式奖励")
    assert any(line.startswith("  在你的代码中: 把奖励函数里的格式分") for line in lines)
    # a fix that is a verl key of its own says nothing more; no injected knob, no cause line
    (run_dir / "findings.json").write_text(json.dumps({"findings": [{**found, "injected": []}]}))
    ok, lines = check(ex, ex.diagnosis, "actor_rollout_ref.actor.kl_loss_coef=0.5", root=tmp_path, progress_bar=False)
    assert not any("what broke" in line or "in verl" in line or "in your code" in line for line in lines)


@pytest.mark.parametrize("argv, message", [
    (["check", "99", "--diagnosis", "lr_too_high"], "error: no exercise '99'"),
    (["check", "1", "--diagnosis", "lr_too_hi"], "error: unknown diagnosis id 'lr_too_hi'"),
    (["check", "1", "--diagnosis", "lr_too_high", "--fix", "lr 0.1"], "error: the fix does not parse at 'lr'"),
    (["check", "1", "--diagnosis", "lr_too_high", "--fix", "a='b"], "error: the fix does not parse (No closing"),
    (["check", "1", "--diagnosis", "lr_too_high", "--fix", "task=probe1"], "error: task is fixed by the exercise"),
    (["check", "1", "--diagnosis", "lr_too_high", "--fix", "trainer.seed=3"], "error: trainer.seed is fixed"),
    (["check", "1", "--diagnosis", "lr_too_high", "--fix", "critic.optim.lr=1,2"],
     "error: 'critic.optim.lr=1,2' is a sweep"),
    (["check", "1", "--diagnosis", "lr_too_high", "--fix", "critic.optim.lrr=1"],
     "error: the fix does not apply: critic.optim.lrr=1: the config has no key 'critic.optim.lrr' (nothing would "
     "read it); nearest: critic.optim.lr, "),
    (["check", "1", "--diagnosis", "lr_too_high", "--fix", "critic.optim.lr=-1"],
     "error: the fix does not apply: critic.optim.lr=-1 is out of range: allowed > 0"),
    (["start", "eleven"], "error: no exercise 'eleven'"),
    (["check", "15"], "error: check needs --diagnosis <id> (and --fix), or --last-good <step>"),
    (["check", "15", "--fix", "actor_rollout_ref.actor.optim.lr=0.005"], "error: --fix needs --diagnosis <id>"),
    (["check", "1", "--last-good", "19"], "error: exercise 1 does not ask for a last good step"),
    (["check", "15", "--last-good", "19"], "error: exercise 15's run is not there yet"),
])
def test_bad_input_fails_with_one_clear_line(argv, message, tmp_path, capsys):
    assert main(["--runs", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not any(tmp_path.iterdir())  # nothing recorded


def test_list_ids_and_hint_commands(tmp_path, capsys):
    assert main(["--runs", str(tmp_path), "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(EXERCISES) and out[0].split()[:2] == ["1", "The"] and out[0].endswith("not started")
    assert main(["--lang", "zh", "ids"]) == 0
    assert "lr_too_high" in capsys.readouterr().out
    assert main(["--runs", str(tmp_path), "--lang", "zh", "hint", "03"]) == 0
    assert capsys.readouterr().out.strip() == f"提示 1/3：{find('3').hints[0]['zh']}"
    main(["--runs", str(tmp_path), "check", "3", "--diagnosis", "critic_undertrained"])
    capsys.readouterr()
    main(["--runs", str(tmp_path), "list"])
    assert capsys.readouterr().out.splitlines()[2].endswith("diagnosed")


@pytest.mark.slow
@pytest.mark.parametrize("ex", EXERCISES, ids=_ids(EXERCISES))
def test_every_reference_fix_passes(ex, tmp_path):
    verdict = run_fix(ex, ex.reference_fix, tmp_path / "fix", progress_bar=False, isolated=True)
    assert verdict.passed, (verdict.status, [f["id"] for f in verdict.bad], verdict.score, verdict.bar)


def _turned_run(ex, root, cause: int = 20, good: int | None = 19) -> None:
    """The mystery run as `start` leaves it: run.json with its onset, findings.json with the doctor's last good step
    (the measured run: lr_too_high from step 20, last good 19; instructor.md)."""
    run_dir = mystery_dir(ex, root)
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "finished", "mystery": True, "onset_step": cause}))
    last_good = None if good is None else {"onset_step": good + 1, "finding": "lr_too_high", "step": good}
    (run_dir / "findings.json").write_text(json.dumps({"findings": [], "diagnoses": [], "last_good": last_good}))


def test_the_last_good_step_is_right_within_the_tolerance_and_then_meets_the_true_onset(tmp_path):
    ex = find("15")
    assert ex.last_good == {"tolerance": 2} and ex.mystery()[-1] == "onset_step=20"
    _turned_run(ex, tmp_path)
    ok, lines = check_last_good(ex, 12, root=tmp_path)
    assert not ok and lines == [
        "✗ Last good step 12: too early, the run is still healthy for a while after it. Look for where the update's "
        "own metrics (ppo_kl, pg_clipfrac, entropy) leave their band, not where the score has already fallen."]
    ok, lines = check_last_good(ex, 25, root=tmp_path, lang="zh")
    assert not ok and lines[0].startswith("✗ 最后正常的一步是第 25 步？太晚了")
    assert "20" not in " ".join(lines)  # a wrong answer never says where the cause arrived
    for step in (17, 19, 21):  # the doctor's 19, give or take the score's two steps of lag
        ok, lines = check_last_good(ex, step, root=tmp_path)
        assert ok and lines[0].startswith(f"✓ Last good step {step}: right (the doctor says 19;"), lines
        assert lines[1].startswith("The cause really arrived at step 20 (run.json's onset_step); the doctor's first "
                                   "problem, lr_too_high, holds from step 20.")
    ok, _ = check_last_good(ex, 22, root=tmp_path)
    assert not ok
    progress = json.loads((tmp_path / ex.id / "progress.json").read_text())
    assert progress["last_good"] is True and progress["step_attempts"] == 3
    assert not read_run_info(mystery_dir(ex, tmp_path)).get("solved")  # the step unhides nothing


def test_the_command_line_checks_the_step_and_the_diagnosis_together(tmp_path, capsys):
    ex = find("15")
    _turned_run(ex, tmp_path)
    assert main(["--runs", str(tmp_path), "check", "15", "--last-good", "19"]) == 0
    assert capsys.readouterr().out.startswith("✓ Last good step 19: right")
    assert main(["--runs", str(tmp_path), "check", "15", "--last-good", "30", "--diagnosis", "lr_too_high"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✗ Last good step 30: too late") and out[1].startswith("✓ Diagnosis: lr_too_high")


def test_a_run_without_a_last_good_step_cannot_be_checked_for_one(tmp_path):
    ex = find("15")
    _turned_run(ex, tmp_path, good=None)  # a run the doctor finds healthy: the exercise's run is broken
    with pytest.raises(ExerciseError, match="run never turned"):
        check_last_good(ex, 19, root=tmp_path)


def test_a_locked_key_cannot_be_smuggled_in():
    for fix in ("+task.score_target=0", "++trainer.stop_on_score=0", "hydra.run.dir=x", "sft.lr=1",
                "actor_rollout_ref.model.block_size=32", "trainer.memory_limit_gb=null", "onset_step=60"):
        with pytest.raises(ExerciseError, match="fixed by the exercise"):
            parse_fix(fix)
