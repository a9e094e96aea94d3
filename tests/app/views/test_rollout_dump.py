"""A verl rollout dump (`trainer.rollout_data_dir`) in the explorer (`app/dump_view.py`): its text findings on the
External log page, each linked to its samples, and a dumped step in the Step inspector (the hand-written fixture of
tests/diagnose/fixtures/rollout_dump)."""

from __future__ import annotations

from app_helpers import ROOT, texts

DUMP = "tests/diagnose/fixtures/rollout_dump"
EXAMPLE_2 = "tests/diagnose/fixtures/guide_11_4_example2.log"


def _page(app, page: str):
    return app.run().switch_page(page).run()


def test_a_dump_dir_on_the_external_page_links_each_finding_to_its_samples(app, monkeypatch):
    monkeypatch.chdir(ROOT)
    at = _page(app, "views/external.py")
    at.text_input(key="log_path").input(DUMP).run()
    assert not at.exception
    shown = texts(at)
    assert "Rollout dump: what the text shows" in shown and "Read 3 dumped steps (48 samples)" in shown
    assert ":red-badge[degenerate_rollout]" in shown and ":orange-badge[reward_hacking]" in shown
    evidence = [frame.value for frame in at.dataframe if "samples" in frame.value]
    assert any(frame["samples"].tolist() == ["0, 1, 2, 3, 4, 5, 6, 7"] for frame in evidence)
    (button,) = [b for b in at.button if b.label.startswith("Step 3: open its 8 samples behind this (8, 9, 10, 11, …)")]
    at = button.click().run()
    assert not at.exception
    assert at.text_input(key="inspector_dump_dir").value == str(ROOT / DUMP)
    assert at.select_slider(key="inspector_dump_step").value == 3
    assert "Opened from **reward_hacking**: the 8 samples behind it at step **3**" in texts(at)
    (table,) = [frame.value for frame in at.dataframe]
    assert table["sample"].tolist()[:8] == list(range(8, 16)) and set(table["linked"][:8]) == {"●"}
    assert list(table.columns) == ["sample", "linked", "score", "input", "output", "gts", "acc"]
    assert "<answer></answer>" in at.code[1].value  # the first marked sample's output, in full
    assert texts(at).count("behind the finding") == 8


def test_the_inspector_shows_any_dumped_step_with_its_fields(app, monkeypatch):
    monkeypatch.chdir(ROOT)
    at = _page(app, "views/inspector.py")
    at.text_input(key="inspector_dump_dir").input(DUMP).run()
    assert not at.exception
    assert at.select_slider(key="inspector_dump_step").value == 3  # the last dumped step
    assert "16 samples at this step; fields: `input`, `output`, `gts`, `score`, `step`, `acc`" in texts(at)
    at.select_slider(key="inspector_dump_step").set_value(1).run()
    assert not at.exception and "Opened from" not in texts(at)
    assert "**Sample 0** · score 0.1" in texts(at) and "Using the numbers [3, 5, 7]" in at.code[0].value
    at.radio(key="lang").set_value("zh").run()
    assert not at.exception and "**样本 0** · 分数 0.1" in texts(at)


def test_a_folder_that_is_no_dump_and_a_dump_beside_a_log(app, monkeypatch):
    monkeypatch.chdir(ROOT)
    at = _page(app, "views/inspector.py")
    at.text_input(key="inspector_dump_dir").input("tests/diagnose").run()
    assert not at.exception and "not a verl rollout dump" in at.error[0].value
    at = _page(app, "views/external.py")
    at.text_input(key="log_path").input(EXAMPLE_2).run()
    at.text_input(key="log_rollout_dir").input(DUMP).run()
    assert not at.exception
    shown = texts(at)
    assert ":orange-badge[lr_too_high]" in shown and ":red-badge[degenerate_rollout]" in shown
