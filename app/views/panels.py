"""Panels: the guide's four recommended panels (§11.3) and every metric group, for the runs shown.

A running run's charts refresh every `widgets.LIVE_S` seconds inside a fragment, without rerunning the page.
"""

from __future__ import annotations

import streamlit as st

import sections
import widgets


def panels_body(choice: str) -> int:
    """Read the shown runs now and draw their panels (the fragment's body); returns the charts drawn."""
    table, _ = widgets.runs_table()
    rows = widgets.selected_runs(table)
    _, _, grouped = widgets.settings()
    return sections.draw_run_panels(rows, grouped, choice)


def render() -> None:
    picked = widgets.page_with_selection("panels_title")
    if picked is None:
        return
    table, rows = picked
    choice = sections.panel_choice("panel_choice")
    live = bool((rows["status"] == "running").any())
    if live:
        st.caption(widgets.t("live_note", s=widgets.LIVE_S))
    st.fragment(panels_body, run_every=widgets.LIVE_S if live else None)(choice)
    with st.expander(widgets.t("bands_legend_title")):
        st.markdown(widgets.t("bands_legend"))


if __name__ == "__main__":
    render()
