"""Tests for `app/charts.py`: every chart builds a valid Vega-Lite spec with the layers it promises."""

from __future__ import annotations

import math
import re

import pandas as pd

import charts
import sweep_map
from app_helpers import ROOT, mark_types, units


def _long(values, series="a"):
    n = len(values)
    return pd.DataFrame({"series": series, "step": range(1, n + 1), "x": range(1, n + 1), "value": values,
                         "smoothed": values, "index": range(n)})


def test_metric_chart_layers_band_lines_marks_and_non_finite_rule():
    long = _long([0.1, 0.2, math.nan, math.inf, 0.3]).assign(status=[None, "warn", None, None, "bad"])
    bands = pd.DataFrame({"lo": [0.05, None], "hi": [0.3, None], "where": ["in", "above"], "text": ["", "ok ≥ 9 ↑"]})
    chart = charts.metric_chart(long, "actor/pg_clipfrac", bands=bands)
    chart.to_dict()  # valid Vega-Lite (the app skips this check for speed)
    spec = charts.to_spec(chart)
    assert mark_types(spec) == ["rect", "text", "line", "line", "point", "point", "rule"]
    assert len(spec["datasets"]) == 3  # the band, the note, and one frame shared by the run layers
    assert spec["autosize"] == {"type": "fit-x", "contains": "padding"}  # height is the plot's, not the legend's
    title = spec["title"]["text"] if isinstance(spec["title"], dict) else spec["title"]
    assert title == "actor/pg_clipfrac"
    legend = units(spec)[3]["encoding"]["color"]
    assert legend.get("legend", "shown") is None  # one series: no legend


def test_metric_chart_seed_group_band_and_mean():
    long = _long([1.0, 2.0], "solo")
    groups = pd.DataFrame({"series": "g", "step": [1, 2], "x": [1, 2], "mean": [1.0, 2.0], "lo": [0.5, 1.5],
                           "hi": [1.5, 2.5], "n": [3, 3]})
    chart = charts.metric_chart(long, "critic/score/mean", groups=groups, smoothed=False)
    chart.to_dict()
    spec = charts.to_spec(chart)
    assert mark_types(spec) == ["area", "line", "line"]
    assert "legend" in units(spec)[1]["encoding"]["color"]  # two series: a legend


def test_metric_chart_colours_follow_the_given_order_not_the_labels_sort():
    long = pd.concat([_long([1.0, 2.0], "Before · 1"), _long([2.0, 3.0], "After · 2")], ignore_index=True)
    spec = charts.to_spec(charts.metric_chart(long, "critic/score/mean", order=["Before · 1", "gone", "After · 2"]))
    scales = [u["encoding"]["color"]["scale"] for u in units(spec) if "color" in u.get("encoding", {})]
    assert scales and all(s["domain"] == ["Before · 1", "After · 2"] for s in scales)  # only what is drawn
    default = charts.to_spec(charts.metric_chart(long, "critic/score/mean"))
    assert all("domain" not in u["encoding"]["color"]["scale"] for u in units(default) if "color" in u["encoding"])


def test_an_onset_is_a_labelled_rule_on_the_run_charts_x_axis():
    onsets = pd.DataFrame({"x": [3.0], "text": ["since step 3: lr_too_high"]})
    for chart in (charts.metric_chart(_long([0.1, 0.2, 0.3, 0.4]), "actor/pg_clipfrac", onsets=onsets),
                  charts.pair_chart(_long([1.0, 2.0, 3.0]).assign(metric="critic/vpred_mean"), "pair", onsets=onsets)):
        chart.to_dict()  # valid Vega-Lite
        spec = charts.to_spec(chart)
        assert mark_types(spec)[-2:] == ["rule", "text"]  # in front of the lines
        rule, label = units(spec)[-2:]
        assert rule["encoding"]["x"]["field"] == label["encoding"]["x"]["field"] == "x"  # the lines' own x scale
        assert spec["datasets"][rule["data"]["name"]] == [{"x": 3.0, "text": "since step 3: lr_too_high"}]
    assert "rule" not in mark_types(charts.to_spec(charts.metric_chart(_long([0.1, 0.2]), "m",
                                                                      onsets=onsets.iloc[:0])))


def test_where_the_cause_arrived_is_its_own_dotted_blue_rule_beside_the_onsets():
    onsets = pd.DataFrame({"x": [3.0, 2.0], "text": ["since step 3: lr_too_high", "the cause arrived: step 2"],
                           "kind": ["onset", "cause"]})
    spec = charts.to_spec(charts.metric_chart(_long([0.1, 0.2, 0.3, 0.4]), "actor/pg_clipfrac", onsets=onsets))
    assert mark_types(spec)[-4:] == ["rule", "text", "rule", "text"]
    onset_rule, _, cause_rule, cause_label = units(spec)[-4:]
    assert onset_rule["mark"]["color"] == charts.ONSET_COLOR and cause_rule["mark"]["color"] == charts.CAUSE_COLOR
    assert onset_rule["mark"]["strokeDash"] != cause_rule["mark"]["strokeDash"]
    assert spec["datasets"][cause_label["data"]["name"]] == [
        {"x": 2.0, "text": "the cause arrived: step 2", "kind": "cause"}]


def test_pair_range_rule_timeline_heatmap_parallel_build():
    pair = _long([1.0, 2.0]).assign(metric="critic/vpred_mean")
    assert charts.to_spec(charts.pair_chart(pair, "vpred vs returns"))["mark"]["type"] == "line"
    ranged = pd.DataFrame({"series": "a", "step": [1, 2], "x": [1, 2], "mean": [1.0, 2.0], "lo": [0.0, 1.0],
                           "hi": [2.0, 3.0]})
    assert mark_types(charts.to_spec(charts.range_chart(ranged, "Episode returns"))) == ["area", "line"]
    rule = charts.to_spec(charts.step_rule_chart(_long([1.0, 2.0]), "val/accuracy", 2, sample_steps=[1, 2]))
    assert mark_types(rule) == ["line", "tick", "rule"]
    findings = pd.DataFrame({"id": ["lr_too_high"], "severity": ["warning"], "first_step": [5], "last_step": [None],
                             "label": ["1. lr_too_high"]})
    timeline = charts.to_spec(charts.timeline_chart(findings, 60))
    assert timeline["layer"][0]["encoding"]["x"]["scale"]["domain"] == [0, 60.0]
    sweep = pd.DataFrame({"run": list("abcd"), "lr": ["1", "1", "2", "2"], "clip": ["a"] * 4, "seed": list("1212"),
                          "score": [1.0, 2.0, 9.0, 9.0], "root": ["healthy", "healthy", "x", "x"],
                          "healthy": [True, True, False, False]})
    cells = sweep_map.sweep_cells(sweep, "lr", "clip")
    built = {"score": charts.heatmap(cells, by="score", x_title="lr", y_title="clip", x_order=["1", "2"],
                                     y_order=["a"]),
             "root": charts.heatmap(cells, by="root", x_title="lr", y_title="clip", x_order=["1", "2"], y_order=["a"]),
             "one_row": charts.heatmap(sweep_map.sweep_cells(sweep, "lr", None), by="score", x_title="lr", y_title=None,
                                       x_order=["1", "2"], y_order=["—"]),
             "seeds": charts.heatmap(sweep_map.seed_cells(sweep, "lr", "clip", "seed"), by="root", x_title="lr",
                                     y_title="clip", x_order=["1", "2"], y_order=["a"], seeds=True)}
    for chart in built.values():
        chart.to_dict()  # valid Vega-Lite: the multi-line text and the seed offsets too
    heat, by_id, one_row, seeds = (charts.to_spec(c) for c in built.values())
    assert heat["layer"][1]["encoding"]["color"]["condition"]["test"] == "datum.score > 5.25"  # readable text
    assert heat["layer"][1]["mark"]["lineBreak"] == "\n" and heat["layer"][1]["encoding"]["text"]["field"] == "text"
    assert by_id["layer"][0]["encoding"]["color"]["field"] == "root"
    assert one_row["layer"][0]["encoding"]["y"]["axis"] is None  # a one-knob sweep: one row, no y axis
    assert seeds["layer"][0]["encoding"]["yOffset"] == {"field": "seed", "type": "ordinal", "sort": ["1", "2"]}
    long = pd.DataFrame({"run": ["a", "a"], "dim": ["lr", "score"], "pos": [0.0, 1.0], "value": ["1", "9"],
                         "score": [9.0, 9.0], "root": ["healthy", "healthy"]})
    assert mark_types(charts.to_spec(charts.parallel_chart(long, ["lr", "score"], by="score"))) == [
        "rule", "line", "point", "text"]


def test_only_charts_imports_altair_and_charts_has_no_streamlit():
    for path in (ROOT / "app").rglob("*.py"):
        source = path.read_text()
        imports_altair = re.search(r"^\s*(import altair|from altair)", source, re.M) is not None
        assert imports_altair == (path.name == "charts.py"), path
    assert "streamlit" not in (ROOT / "app" / "charts.py").read_text()


def test_a_one_step_series_is_a_dot_on_readable_axes():
    """A line needs two points: a one-step log (the guide's §11.4 examples) is drawn as dots, with an x domain
    around its step (integer ticks) and a y domain around its value, not as empty charts."""
    one = _long([14.947]).assign(step=[0], x=[0])
    spec = charts.to_spec(charts.metric_chart(one, "critic/vf_loss", smoothed=False))
    assert mark_types(spec) == ["line", "point"]
    x = units(spec)[0]["encoding"]["x"]
    assert x["scale"]["domain"] == [-1.0, 1.0] and x["axis"]["format"] == "d"
    assert units(spec)[0]["encoding"]["y"]["scale"]["domain"] == [14.947 / 2, 14.947 * 1.5]
    assert units(spec)[1]["transform"] == [{"filter": "datum.lone && datum.status == null"}]
    warned = charts.to_spec(charts.metric_chart(one.assign(status=["warn"]), "critic/vf_loss", smoothed=False))
    assert mark_types(warned) == ["line", "point", "point"]  # the dot gives way to the warn mark
    many = charts.to_spec(charts.metric_chart(_long([1.0, 2.0]), "critic/vf_loss", smoothed=False))
    assert mark_types(many) == ["line"] and "domain" not in units(many)[0]["encoding"]["x"]["scale"]
    phases = pd.concat([_long([v]).assign(metric=m, step=[0], x=[0]) for m, v in (("timing_s/gen", 21.47),
                                                                                    ("timing_s/adv", 0.109))])
    pair = charts.pair_chart(phases, "timing_s/* (gen, adv)")
    pair.to_dict()
    assert mark_types(charts.to_spec(pair)) == ["line", "point"]


def test_a_legend_shows_every_label_in_full_in_the_columns_that_fit():
    """A run's folder name or a seed group's label was cut at the legend's labelLimit (and a row of them at the
    chart's edge): no label is cut, and long labels take a line each."""
    spec = charts.to_spec(charts.metric_chart(pd.concat([
        _long([1.0, 2.0], "18-42-59-cartpole-lr_too_high-fix"), _long([2.0, 3.0], "healthy ×3 seeds (09-00-00…)")]),
        "critic/score/mean"))
    legends = [u["encoding"]["color"]["legend"] for u in units(spec) if u["encoding"]["color"].get("legend")]
    assert legends and all(lg["columns"] == 1 for lg in legends)
    assert spec["config"]["legend"]["labelLimit"] == 0  # Vega: no limit
    short = charts.to_spec(charts.metric_chart(pd.concat([_long([1.0], "a"), _long([2.0], "b")]), "x"))
    assert [u["encoding"]["color"]["legend"]["columns"] for u in units(short) if "color" in u["encoding"]][0] == 2
    phases = pd.concat([_long([1.0, 2.0]).assign(metric=m) for m in ("timing_s/gen", "timing_s/update_actor")])
    assert charts.to_spec(charts.pair_chart(phases, "phases"))["encoding"]["color"]["legend"]["columns"] == 2
