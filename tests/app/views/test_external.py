"""Tests for `app/views/external.py`: a verl console log by path, upload or paste: panels and diagnosis."""

from __future__ import annotations

from app_helpers import ROOT, chart_titles, texts

EXAMPLE_2 = "tests/diagnose/fixtures/guide_11_4_example2.log"


def _external(app):
    return app.run().switch_page("views/external.py").run()


def test_log_by_path_gets_panels_and_diagnosis(app, monkeypatch):
    monkeypatch.chdir(ROOT)
    at = _external(app)
    at.text_input(key="log_path").input(EXAMPLE_2).run()
    assert not at.exception
    assert "Read 1 steps (5–5) from a verl_console log." in texts(at)
    assert "actor/pg_clipfrac" in chart_titles(at)
    assert ":orange-badge[lr_too_high]" in texts(at)  # the guide's example 2
    assert any("actor_rollout_ref.actor.optim.lr" in c.value for c in at.code)


def test_path_outside_is_refused(app):
    at = _external(app)
    at.text_input(key="log_path").input("/etc/passwd").run()
    assert "outside the folders" in at.error[0].value
    assert not at.exception


def test_pasted_and_uploaded_logs(app):
    at = _external(app)
    lines = "".join(f"step:{s} - actor/pg_loss:{0.1 * s:.2f} - critic/score/mean:{s / 10} - junk\n" for s in (1, 2, 3))
    at.text_area(key="log_paste").input(lines).run()
    assert "Read 3 steps (1–3)" in texts(at)
    assert "`junk` has no value" in texts(at)  # the reader's problems are shown
    at.text_area(key="log_paste").input("").run()
    at.file_uploader(key="log_upload").set_value(("run.log", b"step:7 - actor/ppo_kl:0.2\n", "text/plain")).run()
    assert "Read 1 steps (7–7)" in texts(at)
