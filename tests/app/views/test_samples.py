"""Tests for `app/views/samples.py`: a token run's samples beside their step; a gym run's episodes."""

from __future__ import annotations

import json

import pandas as pd

import series
from app_helpers import chart_data, chart_titles, charts_of, mark_types, show, texts, units


def test_token_samples_at_a_step(app, tree):
    at = show(app.run(), tree["token"]).switch_page("views/samples.py").run()
    assert not at.exception
    assert chart_titles(at) == ["critic/score/mean"]
    assert "Step 50: 4 samples" in texts(at)
    at.select_slider(key="samples_step").set_value(20).run()
    table = at.dataframe[0].value
    assert list(table["prompt"]) == ["20 + 0 =", "20 + 1 =", "20 + 2 =", "20 + 3 ="]
    assert list(table["truncated"]) == [False, False, False, True]
    at.selectbox(key="samples_metric").set_value("response_length/mean").run()
    assert chart_titles(at) == ["response_length/mean"]


def test_gym_run_shows_episode_returns_and_lengths(app, tree):
    at = show(app.run(), tree["healthy"]).switch_page("views/samples.py").run()
    assert not at.exception
    assert chart_titles(at) == ["Episode returns", "Episode lengths"]


def test_run_without_samples(app, tree):
    at = show(app.run(), tree["no_info"]).switch_page("views/samples.py").run()
    assert not at.exception and "no episode metrics" in texts(at)


def test_largest_jumps_are_ringed_on_the_chart_they_are_read_from(app, tree):
    """The caption's steps are the chart's own biggest steps (the ringed points), not every sample step."""
    at = show(app.run(), tree["token"]).switch_page("views/samples.py").run()
    (chart,) = charts_of(at)
    assert mark_types(json.loads(chart.proto.spec))[-1] == "point"
    frames = chart_data(chart)
    line = next(f for f in frames if "value" in f and "series" in f)
    rings = next(f for f in frames if "change" in f)
    expected = series.largest_jumps(line)
    assert list(rings["step"]) == list(expected["step"]) and len(rings) == 3
    caption = next(c.value for c in at.caption if c.value.startswith("Largest jumps"))
    steps = ", ".join(f"{int(s)} ({c:+.3g})" for s, c in zip(expected["step"], expected["change"], strict=True))
    assert f"at steps {steps};" in caption
    assert pd.Series(rings["step"]).is_monotonic_increasing


def test_a_flat_score_says_so_instead_of_listing_jumps_at_no_step(app, tree):
    """A token run whose score is 0 on every step (a reverse run that never answers right): no "steps — (+nan)", no
    rings, and a y axis around the value rather than a degenerate one of 0.000000 ticks."""
    path = tree["token"] / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row["critic/score/mean"] = 0.0
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    at = show(app.run(), tree["token"]).switch_page("views/samples.py").run()
    assert not at.exception
    shown = texts(at)
    assert "Largest jumps" not in shown and "nan" not in shown and "—" not in shown
    assert f"critic/score/mean is 0 on every drawn step ({len(rows)} of them): no jump to ring" in shown
    (chart,) = charts_of(at)
    spec = json.loads(chart.proto.spec)
    assert "point" not in mark_types(spec)  # no ring
    (line,) = [u for u in units(spec) if u["mark"] == "line" or u["mark"].get("type") == "line"]
    assert line["encoding"]["y"]["scale"]["domain"] == [-1.0, 1.0]


def test_a_multi_turn_run_shows_its_episodes_turn_by_turn(app, tree):
    path = tree["token"] / "samples.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:  # as task=calc logs them: one tool call, the calculator's reply, the answer
        turns = [{"role": "assistant", "text": "<tool>2*3</tool>"}, {"role": "env", "text": "<result>6</result>"},
                 {"role": "assistant", "text": "<answer>6</answer>"}]
        row.update(turns=turns, num_turns=4, tool_calls=1, response="".join(t["text"] for t in turns))
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    at = show(app.run(), tree["token"]).switch_page("views/samples.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["num_turns"]) == [4] * 4 and list(table["tool_calls"]) == [1] * 4
    assert [e.label for e in at.expander][:1] == ["Episode 1 · 50 + 0 = · 4 turns · 1 tool calls · reward 1.000"]
    shown = [m.value for m in at.expander[0].markdown]
    assert shown == ["**assistant** `<tool>2*3</tool>`", "> **environment** `<result>6</result>`",
                     "**assistant** `<answer>6</answer>`"]  # the environment's reply quoted: marked, not trained on
