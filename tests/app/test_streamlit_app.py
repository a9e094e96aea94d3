"""Tests for `app/streamlit_app.py`: every page renders, the language switch is app-wide, roots stay closed."""

from __future__ import annotations

import subprocess
import sys

from streamlit.testing.v1 import AppTest

from app_helpers import ENTRY, PAGES, ROOT, texts

TITLES = {"en": ["Lab", "Runs", "Panels", "Diagnosis", "Sweeps", "Samples", "Step inspector", "External log",
                 "Glossary", "Workshop", "Learning path"],
          "zh": ["实验台", "运行列表", "指标面板", "诊断", "参数扫描", "样本", "单步检查器", "外部日志", "术语表",
                 "工作坊", "学习路径"]}


def test_every_page_renders(app):
    at = app.run()
    for page, title in zip(PAGES, TITLES["en"], strict=True):
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
        assert at.title[0].value == title


def test_language_switch_applies_app_wide_and_keeps_settings(app):
    at = app.run()
    at.slider(key="smoothing").set_value(0.3).run()
    at.radio(key="lang").set_value("zh").run()
    assert at.title[0].value == "实验台"  # the Lab is the first page
    assert at.slider(key="smoothing").label == "平滑" and at.slider(key="smoothing").value == 0.3
    for page, title in zip(PAGES, TITLES["zh"], strict=True):
        at.switch_page(page).run()
        assert not at.exception and at.title[0].value == title


def test_language_switch_relabels_kept_choices(app):
    at = app.run().switch_page("views/runs.py").run()
    at.selectbox(key="sort_by").set_value("name").run()
    at.radio(key="lang").set_value("zh").run()
    sort_by = at.selectbox(key="sort_by")
    assert sort_by.value == "name"
    assert sort_by.proto.set_value and sort_by.proto.raw_value == "名称"  # the browser shows the new label


def test_empty_root_warns_and_pages_still_work(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "empty"))
    at = AppTest.from_file(ENTRY, default_timeout=60).run().switch_page("views/runs.py").run()
    assert "No runs in" in texts(at) and "No runs yet" in texts(at)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, page


def test_url_and_sidebar_cannot_reach_outside_the_roots(app, tree):
    app.query_params["run"] = ["/etc", "outputs/2026-11-30/09-10-00", str(tree["token"])]
    at = app.run()
    assert at.multiselect(key="runs").value == [str(tree["unstable"]), str(tree["token"])]
    at.sidebar.text_input(key="new_root").input("/etc").run()
    assert "outside the folders" in texts(at)
    at.sidebar.text_input(key="new_root").input(str(ROOT / "tests")).run()  # under the working directory: fine
    assert f"Added {ROOT / 'tests'}" in texts(at)


def test_app_does_not_import_the_trainer(tree):
    script = f"""
import sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({ENTRY!r}, default_timeout=60).run()
for page in {PAGES!r}:
    at.switch_page(page).run()
    assert not at.exception, page
print(sorted(m for m in sys.modules if m in ("playground.step.trainer", "playground.train")))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_link_to_a_run_that_is_not_there_shows_none(app, tree):
    """Opened for a run it cannot find, no page falls back to the newest run (an unrelated one): none, and why."""
    app.query_params["run"] = ["outputs/2026-11-30/23-59-59"]
    at = app.run().switch_page("views/panels.py").run()
    assert at.multiselect(key="runs").value == []
    assert "outputs/2026-11-30/23-59-59, which is not under the runs folders" in texts(at)


def test_the_language_is_kept_in_the_url_and_read_on_load(app):
    """A reload starts a new session: only the URL remembers the language (`?lang=zh`); English leaves none."""
    at = app.run()
    assert "lang" not in at.query_params
    at.radio(key="lang").set_value("zh").run()
    assert at.query_params["lang"] == "zh"
    reloaded = AppTest.from_file(ENTRY, default_timeout=60)
    reloaded.query_params.update(at.query_params)
    reloaded.run()
    assert reloaded.radio(key="lang").value == "zh" and reloaded.title[0].value == "实验台"
    reloaded.radio(key="lang").set_value("en").run()
    assert "lang" not in reloaded.query_params and reloaded.title[0].value == "Lab"


def test_an_unknown_language_in_the_url_is_said(app):
    app.query_params["lang"] = "fr"
    at = app.run()
    assert at.radio(key="lang").value == "en" and "lang" not in at.query_params
    assert "The link asks for language fr" in texts(at)
