"""The comparison block of two runs (the Runs page's two shown runs, the Lab's before and after the fix): where they
first diverge and on which metrics, how their configs differ, the artefacts that make a difference unreal, and the
top diverging metric of both with a rule at that step. What `python -m playground.diagnose compare A B` prints, from
the same functions (`playground.diagnose.compare`), shaped by `comparison.py`."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from playground.diagnose.compare import Comparison, compare_records
from playground.diagnose.sources import read_config
from playground.metrics import STEP

import comparison
import data
import widgets


def _config_stamp(run: str) -> tuple[int, int] | None:
    try:
        s = os.stat(Path(run) / ".hydra" / "config.yaml")
    except OSError:
        return None
    return s.st_mtime_ns, s.st_size


@st.cache_data(max_entries=64, show_spinner=False)
def _compared(keys: tuple, hide_config: bool, _records: tuple[list, list]) -> Comparison:
    """`compare_records` on two runs' records (read by `data.run_log`), with their configs unless hidden; cached by
    each run's (dir, records, last step, config stamp): a running run is compared again when it logs a step."""
    (a, *_), (b, *_) = keys
    configs = (None, None) if hide_config else (read_config(Path(a)), read_config(Path(b)))
    return compare_records(*_records, config_a=configs[0], config_b=configs[1], names=(a, b))


def compare_runs(a: str, b: str, hide_config: bool = False) -> Comparison:
    """Run dir `a` against run dir `b`, as read now. `hide_config`: compare their metrics only (a mystery's config is
    its answer)."""
    logs = data.run_log(a), data.run_log(b)
    keys = tuple((run, len(log.records), log.records[-1].get(STEP) if log.records else None, _config_stamp(run))
                 for run, log in zip((a, b), logs, strict=True))
    return _compared(keys, hide_config, (logs[0].records, logs[1].records))


def draw(a: str, b: str, labels: tuple[str, str], key: str, hide_config: bool = False) -> None:
    """The comparison of run dirs `a` and `b` (named `labels`), in a container keyed `key`, its elements keyed
    `<key>-...` (`<key>-at`, `<key>-metric`, `<key>-chart`, `<key>-later`, `<key>-config`)."""
    lang = widgets.lang()
    c = compare_runs(a, b, hide_config)
    with st.container(key=key):
        st.markdown(widgets.t("compare_runs", a=labels[0], b=labels[1]))
        headline = comparison.headline(c, lang)
        (st.success if c.shared_steps and c.divergence_step is None else st.markdown)(headline)
        if c.at_divergence:
            st.dataframe(comparison.divergence_table(c.at_divergence, lang), hide_index=True, key=f"{key}-at")
        metrics, metric = comparison.diverging_metrics(c), None
        if len(metrics) > 1:  # the top one first; any other diverging metric on the same chart
            metric = st.selectbox(widgets.t("compare_chart_metric"), metrics, key=f"{key}-metric")
        spec = comparison.chart_spec({labels[0]: data.metrics_frame(a), labels[1]: data.metrics_frame(b)}, c, lang,
                                     metric, x_title=widgets.t("x_step"))
        if spec is not None:
            with st.container(key=f"{key}-chart"):
                st.vega_lite_chart(spec=spec, width="stretch")
        if c.later:
            with st.expander(widgets.t("compare_later", n=len(c.later))):
                st.dataframe(comparison.divergence_table(c.later, lang), hide_index=True, key=f"{key}-later")
        _config(c, (a, b), labels, key, hide_config)
        notes = comparison.artefact_notes(c, lang)
        if notes:
            st.markdown(widgets.t("compare_artefacts") + "\n" + "\n".join(f"- {n}" for n in notes))


def _config(c: Comparison, runs: tuple[str, str], labels: tuple[str, str], key: str, hidden: bool) -> None:
    """The config difference as dotted keys, or why there is none to show."""
    table = comparison.config_table(c, widgets.lang())
    if hidden:
        st.caption(widgets.t("compare_config_hidden"))
    elif table is None:
        missing = [label for run, label in zip(runs, labels, strict=True) if _config_stamp(run) is None]
        st.caption(widgets.t("compare_config_missing", runs=", ".join(missing or labels)))
    elif table.empty:
        st.caption(widgets.t("compare_config_same"))
    else:
        st.markdown(widgets.t("compare_config", n=len(table)))
        st.dataframe(table, hide_index=True, key=f"{key}-config")
