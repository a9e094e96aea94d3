"""Tests for `playground/teach/learning_path.py` and its yaml: the shipped path walks the guide's chapters on the
demo's runs, every question's run is a config the trainer takes, and the loader refuses a file that breaks a rule."""

from __future__ import annotations

import copy

import pytest
import yaml
from omegaconf import OmegaConf

from playground.config import check_scenario_applies, compose, validate
from playground.config.overrides import with_replaced
from playground.demo import DEMO_RUNS
from playground.metrics import is_known
from playground.teach.i18n import LANGS
from playground.teach.learning_path import LEARNING_PATH, SECTIONS, LearningPathError, load

DEMO = {name: overrides for name, overrides in DEMO_RUNS}
CHAPTERS = load(list(DEMO))


def _ids(chapters):
    return [chapter.section for chapter in chapters]


def test_the_path_walks_the_guides_chapters_in_order():
    assert _ids(CHAPTERS) == ["§1", "§2", "§3", "§4", "§5", "§7", "§11", "§11.3"] == list(SECTIONS)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_ids(CHAPTERS))
def test_each_chapter_is_told_in_both_languages_on_demo_runs_and_known_metrics(chapter):
    texts = [chapter.title, chapter.paragraph, chapter.question.text, chapter.question.answer,
             *(option.text for option in chapter.question.options)]
    assert all(set(text) == set(LANGS) and all(text.values()) for text in texts)
    assert set(chapter.runs) <= set(DEMO) and chapter.question.base in chapter.runs
    assert chapter.metrics and all(is_known(metric) for metric in chapter.metrics)
    assert sum(option.right for option in chapter.question.options) == 1


def test_the_right_answer_is_not_always_in_the_same_place():
    assert len({chapter.question.right for chapter in CHAPTERS}) > 1


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c.broken], ids=_ids([c for c in CHAPTERS if c.broken]))
def test_the_broken_run_is_the_scenario_of_its_finding_and_the_inspector_reads_only_token_runs(chapter):
    cfg = compose(DEMO[chapter.broken])
    assert cfg.scenario == chapter.finding
    assert (chapter.inspect is not None) == (cfg.task.family == "token")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=_ids(CHAPTERS))
def test_each_questions_run_is_a_config_the_trainer_takes_and_each_knob_changes_it(chapter):
    base = compose(DEMO[chapter.question.base])
    cfg = compose(with_replaced(DEMO[chapter.question.base], chapter.question.knob))
    check_scenario_applies(cfg)
    validate(cfg)
    for knob in chapter.question.knob:  # a knob the base run already has would leave the question nothing to answer
        key, value = knob.split("=", 1)
        assert OmegaConf.select(cfg, key) == yaml.safe_load(value) != OmegaConf.select(base, key), knob


# ---- the loader's rules, each broken once ----

def _shipped() -> dict:
    with open(LEARNING_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _load_changed(tmp_path, change) -> None:
    document = copy.deepcopy(_shipped())
    change(document["chapters"])
    path = tmp_path / "learning_path.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    load(list(DEMO), path)


def _drop_zh(chapters):
    del chapters[0]["paragraph"]["zh"]


def _unknown_metric(chapters):
    chapters[1]["metrics"].append("critic/vf_explained_variance_typo")


def _unknown_run(chapters):
    chapters[2]["broken"] = "mountaincar-healthy"


def _base_elsewhere(chapters):
    chapters[0]["question"]["base"] = "countdown-healthy"


def _swapped_sections(chapters):
    chapters[0], chapters[1] = chapters[1], chapters[0]


def _two_right(chapters):
    for option in chapters[3]["question"]["options"]:
        option["right"] = True


def _sweep_knob(chapters):
    chapters[0]["question"]["knob"] = ["actor_rollout_ref.actor.optim.lr=0.005,0.01"]


def _delete_knob(chapters):
    chapters[0]["question"]["knob"] = ["~actor_rollout_ref.actor.optim.lr"]


def _ignored_key(chapters):
    chapters[4]["difficulty"] = "hard"


def _inspect_a_gym_chapter_without_broken(chapters):
    chapters[5]["inspect"] = "advantage"


def _unknown_focus(chapters):
    chapters[0]["inspect"] = "everything"


def _finding_without_broken(chapters):
    chapters[5]["finding"] = "low_mfu"


def _no_finding(chapters):
    del chapters[1]["finding"]


def _unknown_finding(chapters):
    chapters[1]["finding"] = "critic_too_slow"


@pytest.mark.parametrize(("change", "message"), [
    (_drop_zh, r"§1\.paragraph: needs exactly the languages"),
    (_unknown_metric, r"§2\.metrics: \['critic/vf_explained_variance_typo'\] are no metrics"),
    (_unknown_run, r"§3\.broken: 'mountaincar-healthy' is no demo run"),
    (_base_elsewhere, r"§1\.question\.base: 'countdown-healthy' is neither"),
    (_swapped_sections, r"the sections are \['§2', '§1'"),
    (_two_right, r"§4\.question\.options: exactly one option is right"),
    (_sweep_knob, r"§1\.question\.knob: .* is not one key=value"),
    (_delete_knob, r"§1\.question\.knob: .* is not one key=value"),
    (_ignored_key, r"§5: keys .*'difficulty'"),
    (_inspect_a_gym_chapter_without_broken, r"§7\.inspect: needs a broken run"),
    (_unknown_focus, r"§1\.inspect: needs a broken run and one of"),
    (_finding_without_broken, r"§7: a broken run needs the finding"),
    (_no_finding, r"§2: a broken run needs the finding"),
    (_unknown_finding, r"§2\.finding: 'critic_too_slow' is no catalogue id"),
])
def test_the_loader_refuses_a_chapter_that_breaks_a_rule(tmp_path, change, message):
    with pytest.raises(LearningPathError, match=message):
        _load_changed(tmp_path, change)


def test_the_shipped_file_passes_through_the_same_path(tmp_path):
    _load_changed(tmp_path, lambda chapters: None)  # the dump-and-load round trip itself changes nothing
