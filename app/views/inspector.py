"""Step inspector: one step of a token run, token by token. Each recorded response's tokens coloured by the quantity
chosen (advantage, the ratio π_θ/π_old, where the clip bound, entropy, the KL term, rollout − trainer), its reward,
its group, and how its advantage came (the run's estimator with its settings: recomputed from the records where they
hold what it read, else the recorded advantages and why); the step's distributions beside them. A finding on the
Diagnosis page opens it at the finding's onset (a chapter of the learning path: at its step), on the tokens that
fired it (`st.session_state["inspect"]`: run, step, focus, and the finding's id where a finding asked). Given a
rollout dump dir (verl's `trainer.rollout_data_dir`) instead, it shows a dumped step's samples with all their fields,
those a finding linked marked (`dump_view`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st
import tokens

from playground import PYTHON
from playground.metric_names import ENTROPY, PG_CLIPFRAC, PPO_KL, SCORE_MEAN
from playground.metrics import STEP

import charts
import data
import dump_view
import widgets

PER_PAGE = 8  # responses drawn at once (a step recording every response has hundreds)


def _asked(runs: list[str]) -> dict | None:
    """Take what another page asked to inspect: select its run and quantity; returns what it asked (None:
    nothing)."""
    asked = st.session_state.pop("inspect", None)
    if not asked or asked.get("run") not in runs:
        return None
    st.session_state["inspector_run"] = asked["run"]
    focus = asked.get("focus") or "advantage"
    st.session_state["inspector_quantity"] = "advantage" if focus == "zero_adv" else focus
    st.session_state["inspector_alike"] = focus == "zero_adv"
    return asked if asked.get("step") is not None else None


def _open_at(asked: dict, steps: list[int]) -> None:
    """Put the slider on the asked step, or the nearest recorded one after it (a capped file: before); a finding's
    onset is remembered for the header (`_onset_header`)."""
    wanted = int(asked["step"])
    step = min(steps, key=lambda s: (s < wanted, abs(s - wanted)))
    st.session_state["inspector_step"] = step
    st.session_state["inspector_onset"] = ({"run": asked["run"], "onset": wanted, "step": step,
                                            "finding": asked["finding"]} if asked.get("finding") else None)


def _onset_header(run: str, step: int) -> None:
    """Say which finding's onset the inspector opened at, while its run and step are the ones shown."""
    opened = st.session_state.get("inspector_onset")
    if not opened or opened["run"] != run or opened["step"] != step:
        return
    same = opened["step"] == opened["onset"]
    st.info(widgets.t("inspector_at_onset" if same else "inspector_near_onset", finding=opened["finding"],
                      onset=opened["onset"], step=opened["step"]), icon=":material/flag:")


def _distributions(every: pd.DataFrame, band: tuple[float, float] | None) -> None:
    c1, c2, c3 = st.columns(3)
    for column, quantity, rules in ((c1, "ratio", band or ()), (c2, "entropy", ()), (c3, "advantage", ())):
        values = every[quantity].dropna() if quantity in every else []
        if len(values):
            chart = charts.histogram_chart(values, widgets.t(f"inspector_q_{quantity}"), rules=rules)
            column.vega_lite_chart(spec=charts.to_spec(chart), width="stretch")
    clipped = every["clipped"] != ""
    if len(every):
        st.caption(widgets.t("inspector_clipped_share", clipped=int(clipped.sum()), tokens=len(every),
                             share=f"{clipped.mean():.3g}"))


def _response(response: tokens.Response, quantity: str, scale: float, settings: tokens.AdvantageSettings | None,
              step_records: list[dict]) -> None:
    record = response.record
    group = tokens.group_summary(record)
    how = tokens.advantage_caption(tokens.advantage_note(record, settings, step_records), widgets.t)
    with st.container(border=True):
        st.markdown(widgets.t("inspector_response", row=record["row"], reward=f"{record['reward']:.3g}",
                              answer=record.get("answer", ""), prompt=record.get("prompt", "")))
        st.caption(widgets.t("inspector_group", rewards=", ".join(f"{r:.3g}" for r in record["group"]["rewards"]),
                             mean=f"{group['mean']:.3g}", std=f"{group['std']:.3g}") + " " + how)
        st.html(tokens.response_html(response, quantity, scale))


def render() -> None:
    st.title(widgets.t("inspector_title"))
    st.caption(widgets.t("inspector_note"))
    dump_view.take_asked()
    dump_dir = st.text_input(widgets.t("inspector_dump_dir"), key="inspector_dump_dir", placeholder="rollout_data")
    if dump_dir.strip():
        dump_view.draw_step(dump_dir)
        return
    table, _ = widgets.runs_table()
    token_runs = table[table["family"] == "token"] if "family" in table else table.iloc[0:0]
    runs = list(token_runs["run"])
    if not runs:
        st.info(widgets.t("inspector_no_runs"))
        return
    asked = _asked(runs)
    run = st.selectbox(widgets.t("pick_run"), runs, format_func=widgets.label_of(widgets.run_options(table)),
                       key="inspector_run")
    records, problems = data.token_records(run)
    widgets.show_problems(run, problems)
    if not records:
        st.info(widgets.t("inspector_no_records"))
        st.code(f"{PYTHON} -m playground.train <task and overrides> trainer.token_records.enable=true", language="bash")
        return
    steps = sorted({int(r["step"]) for r in records})
    if asked is not None:
        _open_at(asked, steps)
    elif st.session_state.get("inspector_step") not in steps:
        st.session_state["inspector_step"] = steps[-1]
    c1, c2, c3 = st.columns([3, 2, 2])
    step = c1.select_slider(widgets.t("inspector_step"), steps, key="inspector_step")
    quantity = widgets.picked(c2.selectbox(widgets.t("inspector_quantity"), tokens.QUANTITIES, key="inspector_quantity",
                                           format_func=lambda q: widgets.t(f"inspector_q_{q}")))
    alike = c3.toggle(widgets.t("inspector_alike"), key="inspector_alike")
    _onset_header(run, step)
    at_step = tokens.responses([r for r in records if int(r["step"]) == step])
    frame = data.metrics_frame(run)
    row = frame[frame[STEP] == step] if STEP in frame else frame.iloc[0:0]
    if not row.empty:
        shown = [m for m in (PG_CLIPFRAC, PPO_KL, ENTROPY, SCORE_MEAN) if m in row]
        st.caption(" · ".join(f"`{m}` {float(row[m].iloc[0]):.4g}" for m in shown))
    config = data.run_config(run)
    every = tokens.step_tokens(at_step)
    _distributions(every, data.clip_band(config))
    responses = tokens.ordered(at_step, "zero_adv" if alike else quantity)
    if alike:
        responses = [r for r in responses if tokens.group_alike(r.record)]
        if not responses:
            st.info(widgets.t("inspector_no_alike"))
    st.caption(widgets.t(f"inspector_legend_{'clipped' if quantity == 'clipped' else 'scale'}",
                         quantity=widgets.t(f"inspector_q_{quantity}"),
                         shown=min(len(responses), PER_PAGE), total=len(at_step)))
    scale = tokens.scale_of(every, quantity)
    settings = tokens.advantage_settings(config)
    step_records = [r.record for r in at_step]
    for response in responses[:PER_PAGE]:
        _response(response, quantity, scale, settings, step_records)


if __name__ == "__main__":
    render()
