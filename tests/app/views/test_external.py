"""Tests for `app/views/external.py`: a verl console log by path, upload or paste: panels and diagnosis."""

from __future__ import annotations

from app_helpers import ROOT, chart_titles, texts

EXAMPLE_2 = "tests/diagnose/fixtures/guide_11_4_example2.log"
EXAMPLE_1 = "tests/diagnose/fixtures/guide_11_4_example1.log"


def _external(app):
    return app.run().switch_page("views/external.py").run()


def test_log_by_path_gets_panels_and_diagnosis(app, monkeypatch):
    monkeypatch.chdir(ROOT)
    at = _external(app)
    at.text_input(key="log_path").input(EXAMPLE_2).run()
    assert not at.exception
    assert "Read one step (step 5) from a verl_console log: each metric is one point" in texts(at)
    assert "actor/pg_clipfrac" in chart_titles(at)
    assert ":orange-badge[lr_too_high]" in texts(at)  # the guide's example 2
    fixes = [c for c in at.code if c.value.startswith("actor_rollout_ref.actor.optim.lr")]
    assert fixes and not any(c.proto.wrap_lines for c in fixes)  # the fix alone: never broken inside a value


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
    assert "Read one step (step 7)" in texts(at)


def test_the_guides_first_example_draws_dots_and_its_phase_timings(app, monkeypatch):
    """One step of a fresh PPO run (§11.4 example 1): every chart shows its point, the Performance panel its phases."""
    import json

    from app_helpers import charts_of, mark_types, spec_title

    monkeypatch.chdir(ROOT)
    at = _external(app)
    at.text_input(key="log_path").input(EXAMPLE_1).run()
    assert not at.exception
    specs = {spec_title(s): s for s in (json.loads(c.proto.spec) for c in charts_of(at))}
    assert "timing_s/* (gen, ref, values, adv, update_critic, update_actor)" in specs
    assert "None of these metrics was logged." not in texts(at)
    for title, spec in specs.items():
        assert "point" in mark_types(spec), title  # a one-step series is a dot, not an invisible line


def test_a_followed_log_is_read_again_as_it_grows(app, monkeypatch, tmp_path):
    """Issue 38: the External log page follows a file a run is writing, as `diagnose LOG --follow` does."""
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "train.log"
    line = "step:{s} - actor/pg_loss:0.01 - critic/score/mean:{v} - response_length/clip_ratio:{c}\n"
    log.write_text("".join(line.format(s=s, v=0.1 * s, c=0.01) for s in (1, 2, 3)))
    at = _external(app)
    at.text_input(key="log_path").input("train.log").run()
    at.toggle(key="log_follow").set_value(True).run()
    assert not at.exception
    assert "Following" in texts(at) and "3 steps so far" in texts(at)
    with open(log, "a") as f:
        f.write("".join(line.format(s=s, v=0.3, c=0.9) for s in range(4, 16)))
    at.run()
    assert "15 steps so far" in texts(at)
    assert ":orange-badge[response_truncation]" in texts(at)


def test_a_pasted_log_s_charts_mark_where_its_first_problem_began(app):
    from playground.metrics import STEP
    from playground.rundir.sinks import format_console_line
    from tests.diagnose.test_engine import FLAT, run

    from app_helpers import chart_data, charts_of

    # policy steps grow large from step 20 on a stalled score: lr_too_high, its onset where pg_clipfrac turned
    records = run(40, **FLAT, **{"actor/pg_clipfrac": lambda s: 0.15 if s < 20 else 0.6,
                                 "actor/ppo_kl": lambda s: 0.003 if s < 20 else 0.08})
    at = _external(app)
    at.text_area(key="log_paste").input("\n".join(format_console_line(r, int(r[STEP])) for r in records)).run()
    assert not at.exception
    rows = [row for chart in charts_of(at) for frame in chart_data(chart) if "text" in frame and "x" in frame
            for row in frame[["x", "text"]].to_dict("records")]
    assert rows and {row["x"] for row in rows} == {20.0}, rows
    assert all("since step 20" in row["text"] for row in rows)
