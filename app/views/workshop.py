"""Workshop: an exercise's worksheet beside the panels of its mystery run, with hints revealed one at a time.

The exercises come through `data.exercises()`, which leaves the answers out. The run's findings stay hidden (run.json
`mystery`) until `python -m playground.exercise check` has accepted a diagnosis and set `solved`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

import data
import sections
import widgets


def _demoted(markdown: str) -> str:
    """The worksheet's headings two levels down, under the page's own title."""
    return "\n".join("##" + line if line.startswith("#") else line for line in markdown.splitlines())


def _more_hints(exercise_id: str) -> None:
    shown = st.session_state.setdefault("workshop_hints", {})
    shown[exercise_id] = shown.get(exercise_id, 0) + 1


def _hints(ex: dict) -> None:
    st.subheader(widgets.t("workshop_hints"))
    shown = st.session_state.get("workshop_hints", {}).get(ex["id"], 0)
    for k, hint in enumerate(ex["hints"][:shown], start=1):
        st.info(widgets.t("workshop_hint", k=k, n=len(ex["hints"]), text=widgets.pick(hint)))
    if shown < len(ex["hints"]):
        st.button(widgets.t("workshop_next_hint"), on_click=_more_hints, args=(ex["id"],), key="workshop_hint")
    else:
        st.caption(widgets.t("workshop_no_hints"))


def _run_rows(ex: dict, table: pd.DataFrame) -> pd.DataFrame | None:
    """The mystery run as a one-row runs table: from the run list, or read directly when outside the roots."""
    rows = table[table["run"] == ex["run"]]
    if rows.empty and Path(ex["run"]).is_dir():
        rows = data.run_row(ex["run"])
        rows = rows.assign(label=rows["name"])
    return None if rows.empty else rows.reset_index(drop=True)


def _run(ex: dict) -> None:
    table, _ = widgets.runs_table()
    rows = _run_rows(ex, table)
    if rows is None:
        st.info(widgets.t("workshop_not_started"))
        st.code(ex["start"], language="bash")
        return
    row = rows.iloc[0]
    st.markdown(f"**{row['name']}** · {widgets.status_text(row['status'])} · "
                f"{widgets.t('col_step')} {widgets.integer(row['last_step'])}")
    if row["mystery"]:
        st.caption(widgets.t("workshop_hidden"))
        st.code(ex["check"], language="bash", wrap_lines=True)
    else:
        st.success(widgets.t("workshop_solved"))
        st.markdown(widgets.badges(row["findings"]))
    listed = row["run"] in set(table["run"])
    st.button(widgets.t("workshop_show_run"), on_click=widgets.set_runs, args=([row["run"]],), key="workshop_show",
              disabled=not listed)
    if not listed:
        st.caption(widgets.t("workshop_outside", path=str(Path(row["run"]).parent.parent)))
    sections.draw_run_panels(rows, grouped=False, choice="recommended")


def render() -> None:
    st.title(widgets.t("workshop_title"))
    exercises = {ex["number"]: ex for ex in data.exercises()}
    if not exercises:
        st.info(widgets.t("no_exercises"))
        return
    names = {n: f"{n:02d} · {widgets.pick(ex['title'])}" for n, ex in exercises.items()}
    number = st.selectbox(widgets.t("workshop_pick"), list(names), format_func=names.get, key="workshop_exercise")
    ex = exercises[number]
    left, right = st.columns([2, 3])
    with left:
        st.markdown(_demoted(ex["worksheet"][widgets.lang()]))
        _hints(ex)
    with right:
        _run(ex)


if __name__ == "__main__":
    render()
