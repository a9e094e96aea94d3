"""Two runs compared, as the Runs page and the Lab show it: `playground.diagnose.compare`'s result (what
`python -m playground.diagnose compare A B` prints) shaped into a headline, tables, notes and a chart.

No Streamlit here: `compare_section.py` reads the runs and draws what these functions return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from playground.diagnose.compare import Comparison, MetricDivergence, value_text
from playground.teach import i18n

import charts
import series


def headline(c: Comparison, lang: str) -> str:
    """Where the runs first diverge (or that they do not), over how many shared steps."""
    steps = c.shared_steps
    if not steps:
        return i18n.text("compare_no_steps", lang)
    fields = {"shared": len(steps), "first": steps[0], "last": steps[-1]}
    if c.divergence_step is None:
        return i18n.text("compare_none", lang, **fields)
    return i18n.text("compare_first", lang, step=c.divergence_step, n=len(c.at_divergence), **fields)


def divergence_table(divergences: Sequence[MetricDivergence], lang: str) -> pd.DataFrame:
    """One row per diverging metric, in the comparison's order (at the first divergence: most divergent first):
    its step, both values, |A - B| in tolerances, and the artefact that may explain it (a column only where one
    does)."""
    table = pd.DataFrame({
        i18n.text("compare_col_metric", lang): [d.metric for d in divergences],
        i18n.text("col_step", lang): [d.step for d in divergences],
        "A": [value_text(d.a) for d in divergences],
        "B": [value_text(d.b) for d in divergences],
        i18n.text("compare_col_ratio", lang): [_ratio(d.ratio) for d in divergences],
    })
    if any(d.artefact for d in divergences):
        table[i18n.text("compare_col_artefact", lang)] = [d.artefact for d in divergences]
    return table


def _ratio(ratio: float) -> str:
    return "NaN" if ratio == float("inf") else f"{ratio:.3g}×"  # inf: one of the values is NaN


def config_table(c: Comparison, lang: str) -> pd.DataFrame | None:
    """The keys whose values differ (dotted, A's value, B's); None where a run's config is not known."""
    if c.config_diff is None:
        return None
    return pd.DataFrame({i18n.text("compare_col_key", lang): [k for k, _, _ in c.config_diff],
                         "A": [value_text(a) for _, a, _ in c.config_diff],
                         "B": [value_text(b) for _, _, b in c.config_diff]})


def artefact_notes(c: Comparison, lang: str) -> list[str]:
    """Each artefact that makes a difference unreal, named, in `lang` (its English note where it has no other)."""
    return [f"**{x.name}**: " + i18n.pick({"en": x.note, "zh": x.note_zh}, lang) for x in c.artefacts]


def top_metric(c: Comparison) -> str | None:
    """The most divergent metric at the first divergence step (None: no divergence)."""
    return c.at_divergence[0].metric if c.at_divergence else None


def diverging_metrics(c: Comparison) -> list[str]:
    """Every diverging metric, the top one first: those at the first divergence step, then the later ones."""
    return [d.metric for d in c.at_divergence + c.later]


def chart_spec(frames: Mapping[str, pd.DataFrame], c: Comparison, lang: str, metric: str | None = None,
               x_title: str = "step") -> dict | None:
    """A diverging metric (the top one unless `metric` names another) of both runs (`frames`: label -> records
    frame, A first), raw values over steps, with a labelled rule at the step where it diverges; None where nothing
    diverges, `metric` does not, or neither run logs it."""
    metric = metric or top_metric(c)
    diverged = next((d for d in c.at_divergence + c.later if d.metric == metric), None)
    if diverged is None:
        return None
    long = series.metric_long(frames, diverged.metric).rename(columns={"run": "series"})
    if long.empty:
        return None
    mark = pd.DataFrame({"x": [float(diverged.step)], "text": [i18n.text("compare_mark", lang, step=diverged.step)]})
    title = (i18n.text("compare_chart_title", lang, metric=metric, step=diverged.step) if metric == top_metric(c)
             else metric)
    chart = charts.metric_chart(long, diverged.metric, x_title=x_title, smoothed=False, title=title,
                                order=list(frames), onsets=mark)
    return charts.to_spec(chart)
