"""The sidebar every page shares: the language, the shown runs, the chart settings and the runs folders.

It writes the choices into Streamlit's session state; pages read them through `widgets` (`lang`, `selected_runs`,
`settings`), so one switch applies app-wide.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

import data
import widgets

LANGS = {"en": "English", "zh": "中文"}
# Widgets whose option labels are translated. The browser keeps a choice as its label, so after a language
# switch these are set again (same value), which makes Streamlit send the new label.
TRANSLATED_KEYS = ("x_mode", "sort_by", "panel_choice", "external_choice", "color_by", "g_group", "workshop_exercise",
                   "workshop_diagnosis", "sweep_knob_1", "sweep_knob_2")


def _initial_runs(table: pd.DataFrame) -> list[str]:
    """Runs named in the URL (`?run=<name>`, only under the roots), else the newest run. A URL whose runs are not
    there selects none (and says so): the newest run would be an unrelated one."""
    wanted = st.query_params.get_all("run")
    bases = [Path(r) for r in widgets.roots()]
    by_name = dict(zip(table["name"], table["run"], strict=True))
    chosen = []
    for item in wanted:
        run = by_name.get(item) or str(data.inside(item, bases) or "")
        if run in set(table["run"]):
            chosen.append(run)
        else:
            st.session_state.setdefault("unknown_runs", []).append(item)
    if not wanted and not table.empty:
        newest = table.sort_values("start_time", na_position="first").iloc[-1]
        chosen = [newest["run"]]
    return chosen


def _runs_chosen() -> None:
    st.session_state[widgets.SHOWN] = list(st.session_state["runs"])


def _add_root() -> None:
    text = st.session_state.get("new_root", "").strip()
    if not text:
        return
    path = data.inside(text, data.allowed_bases())
    if path is None:
        st.session_state["root_message"] = ("err_outside", text)
    elif not path.is_dir():
        st.session_state["root_message"] = ("err_missing", text)
    else:
        st.session_state["extra_roots"] = [*st.session_state.get("extra_roots", []), str(path)]
        st.session_state["root_message"] = ("root_added", str(path))
    st.session_state["new_root"] = ""


def _language_from_url() -> None:
    """A page opened or reloaded with `?lang=zh` starts in that language (the radio's own state is per session: a
    reload would reset it to English). An unknown code is said, not silently replaced."""
    if "lang" in st.session_state:
        return
    wanted = st.query_params.get("lang")
    if wanted in LANGS:
        st.session_state["lang"] = wanted
    elif wanted is not None:
        st.session_state["unknown_lang"] = wanted


def _language_to_url() -> None:
    """The chosen language into the URL, so that a reload or a shared link keeps it; English, the default, as none."""
    if st.session_state["lang"] != "en":
        st.query_params["lang"] = st.session_state["lang"]
    elif "lang" in st.query_params:
        del st.query_params["lang"]


def _relabel_on_language_change() -> None:
    current = widgets.lang()
    if st.session_state.get("lang_shown", current) != current:
        for key in TRANSLATED_KEYS:
            if key in st.session_state:
                st.session_state[key] = st.session_state[key]
    st.session_state["lang_shown"] = current


def show() -> None:
    """Language, the shown runs, chart settings and the runs folders; shared by every page."""
    _language_from_url()
    _relabel_on_language_change()
    with st.sidebar:
        st.radio("Language / 语言", list(LANGS), format_func=widgets.label_of(LANGS), key="lang", horizontal=True)
        _language_to_url()
        if "unknown_lang" in st.session_state:
            st.warning(widgets.t("unknown_lang", lang=st.session_state.pop("unknown_lang"), langs=", ".join(LANGS)))
        table, _ = widgets.runs_table()
        options = list(table["run"])
        if widgets.SHOWN not in st.session_state:
            st.session_state[widgets.SHOWN] = _initial_runs(table)
        chosen = st.session_state[widgets.SHOWN]
        if gone := [r for r in chosen if r not in options]:
            chosen = st.session_state[widgets.SHOWN] = [r for r in chosen if r in options]
            st.session_state["gone_runs"] = gone
        # set on each run, and its default too, so the browser shows the choice whatever it held (see `widgets.SHOWN`)
        st.session_state["runs"] = list(chosen)
        labels = widgets.run_options(table)  # a run deleted since the browser last sent its choice keeps its path
        st.multiselect(widgets.t("runs_shown"), options, list(chosen), key="runs", on_change=_runs_chosen,
                       format_func=lambda run: labels.get(run, str(run)), placeholder=widgets.t("runs_placeholder"))
        shown = set(st.session_state["runs"])
        st.query_params["run"] = [n for r, n in zip(table["run"], table["name"], strict=True) if r in shown]
        st.slider(widgets.t("smoothing"), 0.0, 0.99, widgets.DEFAULT_SMOOTHING, 0.01, key="smoothing",
                  help=widgets.t("smoothing_help"))
        x_names = {v: widgets.t(f"x_{v}") for v in ("step", "wall")}
        st.radio(widgets.t("x_axis"), list(x_names), format_func=widgets.label_of(x_names), key="x_mode",
                 horizontal=True)
        st.toggle(widgets.t("group_seeds"), value=True, key="group_seeds", help=widgets.t("group_seeds_help"))
        with st.expander(widgets.t("roots")):
            for root in widgets.root_texts():
                st.caption(root)
            st.text_input(widgets.t("add_root"), key="new_root", on_change=_add_root, placeholder="outputs/…")
            message = st.session_state.pop("root_message", None)
            if message:
                (st.success if message[0] == "root_added" else st.warning)(widgets.t(message[0], path=message[1]))
