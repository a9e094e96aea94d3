"""Tests for `app/views/panels.py`: the recommended panels, every group, settings, live reads, deleted runs."""

from __future__ import annotations

import functools
import json
import shutil

from streamlit.testing.v1 import AppTest

from app_helpers import chart_data, chart_titles, charts_of, mark_types, show, spec_title, texts, units
from fake_runs import write_last_good


def _panels(app, *runs, choice="recommended"):
    at = show(app.run(), *runs)
    at.session_state["panel_choice"] = choice  # a small group keeps the test fast (each chart costs ~0.1 s)
    return at.switch_page("views/panels.py").run()


def _element(at, title):
    for chart in charts_of(at):
        if spec_title(json.loads(chart.proto.spec)) == title:
            return chart
    raise AssertionError(f"no chart {title}: {chart_titles(at)}")


def _chart(at, title):
    return json.loads(_element(at, title).proto.spec)


def test_recommended_panels(app, tree):
    at = _panels(app, tree["healthy"], tree["unstable"])
    assert not at.exception
    assert [s.value for s in at.subheader] == ["1 · Training progress", "2 · Policy update", "3 · Critic quality",
                                               "4 · Performance"]
    titles = chart_titles(at)  # two columns: the tree lists the left one first
    assert sorted(titles) == sorted(["critic/score/mean", "episode/reward/mean", "actor/pg_loss", "actor/pg_clipfrac",
                      "actor/ppo_kl", "actor/entropy_loss", "critic/vf_loss", "critic/vf_explained_var",
                      "critic/vpred_mean vs critic/returns/mean", "perf/throughput", "timing_s/step"])
    spec = _chart(at, "actor/pg_clipfrac")
    marks = mark_types(spec)
    assert marks[0] == "rect"  # the normal band
    assert "point" in marks  # the engine flagged the unstable run's clipfrac


def test_every_group_and_seed_grouping(app, tree):
    at = _panels(app, tree["healthy"], tree["seed1"], choice="episode")
    assert "episode/success_rate_cartpole" in chart_titles(at)  # a per-task key, in its family's group
    spec = _chart(at, "episode/reward/mean")
    assert mark_types(spec)[:2] == ["area", "line"]  # one mean line with a min-max band
    at.toggle(key="group_seeds").set_value(False).run()
    assert "area" not in mark_types(_chart(at, "episode/reward/mean"))
    at.button_group(key="panel_choice").set_value("critic").run()
    assert sorted(chart_titles(at)) == ["critic/grad_norm", "critic/lr", "critic/vf_explained_var", "critic/vf_loss",
                                        "critic/vpred_mean"]


def _onset_rows(chart) -> list[dict]:
    """The onset rules' rows (x, text) among a drawn chart's datasets."""
    return [row for frame in chart_data(chart) if "text" in frame and "x" in frame
            for row in frame[["x", "text"]].to_dict("records")]


def test_every_chart_of_a_run_marks_where_its_first_problem_began(app, tree):
    write_last_good(tree["unstable"], 7, "lr_too_high", 6)  # its window from step 7 first held
    at = _panels(app, tree["healthy"], tree["unstable"])
    assert not at.exception
    charts = charts_of(at)
    assert len(charts) == 11  # the pair chart (vpred_mean vs returns/mean) among them
    for chart in charts:
        title = spec_title(json.loads(chart.proto.spec))
        assert "rule" in mark_types(json.loads(chart.proto.spec)), title
        assert _onset_rows(chart) == [{"x": 7.0, "text": "09-10-00 · since step 7: lr_too_high"}], title
    at.radio(key="lang").set_value("zh").run()
    assert _onset_rows(_element(at, "actor/pg_clipfrac"))[0]["text"] == "09-10-00 · 自第 7 步起：lr_too_high"
    alone = _panels(app, tree["unstable"])  # one run: its rule needs no name (the page is still in Chinese)
    assert _onset_rows(_element(alone, "actor/pg_clipfrac"))[0]["text"] == "自第 7 步起：lr_too_high"
    healthy = _panels(app, tree["healthy"])  # a run with no problem: no rule
    assert not any(_onset_rows(c) for c in charts_of(healthy))


def test_smoothing_and_wall_time(app, tree):
    at = _panels(app, tree["healthy"], choice="timing")
    assert mark_types(_chart(at, "timing_s/step")).count("line") == 2  # a faint raw line under the smoothed one
    at.slider(key="smoothing").set_value(0.0).run()
    assert mark_types(_chart(at, "timing_s/step")).count("line") == 1
    at.radio(key="x_mode").set_value("wall").run()
    spec = _chart(at, "timing_s/step")
    assert units(spec)[0]["encoding"]["x"]["title"] == "wall time (s)"


def test_live_run_reads_new_lines_on_rerun(app, tree):
    at = _panels(app, tree["running"], choice="episode")
    assert "refresh every 2 s" in texts(at)

    def last_step():
        frames = chart_data(_element(at, "episode/reward/mean"))
        return max(f["step"].max() for f in frames if "step" in f)

    assert last_step() == 60
    with open(tree["running"] / "metrics.jsonl", "a") as f:  # the writer finishes its line, then one more
        f.write('_loss": 0.1}\n{"training/global_step": 62, "episode/reward/mean": 400}\n')
    at.run()
    assert last_step() == 62


def test_fragment_body_draws_on_its_own(tree):
    def body(run):
        import streamlit as st

        from views.panels import panels_body

        st.session_state["runs"] = [run]
        st.session_state["drawn"] = panels_body("recommended")

    at = AppTest.from_function(body, args=(str(tree["healthy"]),), default_timeout=60).run()
    assert not at.exception and at.session_state["drawn"] == 11 == len(charts_of(at))


def test_deleted_run_while_the_list_is_cached(app, tree, monkeypatch):
    """Deleted within the run list's 2 s cache: the list still names it, its metrics read finds nothing."""
    import data

    at = _panels(app, tree["healthy"], tree["seed1"], choice="timing")
    # the list as it was before the delete, whatever the cache's clock says
    monkeypatch.setattr(data, "list_runs", functools.cache(data.list_runs))
    at.run()  # fills the frozen list while seed1 still exists
    shutil.rmtree(tree["seed1"])
    at.run()
    assert not at.exception
    assert "no such file" in texts(at)


def test_deleted_run_after_the_list_refreshed(app, tree):
    """Deleted and listed afresh: the run leaves the shown runs, and the page says so."""
    import data

    at = _panels(app, tree["healthy"], tree["seed1"], choice="timing")
    shutil.rmtree(tree["seed1"])
    data.list_runs.clear()  # as if the cache's 2 s had passed
    at.run()
    assert not at.exception
    assert f"{tree['seed1']} no longer exists" in texts(at)
    assert str(tree["seed1"]) not in at.session_state["runs"]
