"""Samples: a token run's rollouts beside the step they came from (a multi-turn task's episodes turn by turn, the
environment's replies marked); a gym run's episode returns and lengths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from playground.metric_names import (
    ENTROPY_LOSS,
    EPISODE_LENGTH,
    EPISODE_REWARD,
    PG_LOSS,
    RESPONSE_CLIP_RATIO,
    RESPONSE_LENGTH_MEAN,
    SCORE_MEAN,
    VAL_ACCURACY,
)
from playground.metrics import STEP

import charts
import data
import series
import widgets

# a multi-turn task's samples add their verl turn count and tool calls (and `turns`, drawn below the table)
EPISODE_COLUMNS = ["num_turns", "tool_calls"]
TOKEN_METRICS = [SCORE_MEAN, VAL_ACCURACY, RESPONSE_LENGTH_MEAN, ENTROPY_LOSS,
                 RESPONSE_CLIP_RATIO, PG_LOSS]


def _nearest(steps: list[int], step: float) -> int:
    """The sampled step nearest to `step`."""
    return min(steps, key=lambda s: abs(s - step))


def _token(run: str, label: str, frame: pd.DataFrame) -> None:
    samples, problems = data.samples_frame(run)
    widgets.show_problems(label, problems)
    if samples.empty:
        st.info(widgets.t("no_samples"))
        return
    steps = sorted(int(s) for s in pd.to_numeric(samples["step"], errors="coerce").dropna().unique())
    metrics = [m for m in TOKEN_METRICS if m in frame] or [c for c in frame.columns if c != STEP][:1]
    c1, c2 = st.columns([1, 2])
    metric = widgets.picked(c1.selectbox(widgets.t("samples_metric"), metrics, key="samples_metric"))
    step = c2.select_slider(widgets.t("samples_step"), steps, value=steps[-1], key="samples_step")
    _, weight, _ = widgets.settings()
    long = series.metric_long({label: frame}, metric, weight=weight).rename(columns={"run": "series"})
    jumps = series.largest_jumps(long)  # on the line the chart draws, ringed there
    if not jumps.empty:
        c1.caption(widgets.t("samples_jumps", jumps=", ".join(f"{widgets.integer(s)} ({c:+.3g})" for s, c in zip(
            jumps["step"], jumps["change"], strict=True)), steps=", ".join(str(s) for s in dict.fromkeys(
            _nearest(steps, j) for j in jumps["step"]))))
    else:  # a flat line (a token task's score of 0 on every step): say so, rather than list no steps
        finite = pd.to_numeric(long["value"], errors="coerce").astype(float)
        finite = finite[np.isfinite(finite)]
        if not finite.empty:
            c1.caption(widgets.t("samples_no_jumps", metric=metric, value=f"{finite.iloc[0]:.4g}", n=len(finite)))
    if not long.empty:
        chart = charts.step_rule_chart(long, metric, step, sample_steps=steps, jumps=jumps,
                                       x_title=widgets.t("x_step"))
        st.vega_lite_chart(spec=charts.to_spec(chart), width="stretch")
    at_step = samples[pd.to_numeric(samples["step"], errors="coerce") == step]
    st.subheader(widgets.t("samples_at", step=step, n=len(at_step)))
    episodes = "turns" in at_step and at_step["turns"].notna().any()  # a multi-turn task's rows
    columns = ["prompt", "response", "reward", "truncated", "answer", *(EPISODE_COLUMNS if episodes else [])]
    st.dataframe(at_step[columns], hide_index=True, width="stretch", key="samples_table",
                 column_config={"truncated": st.column_config.CheckboxColumn(),
                                "reward": st.column_config.NumberColumn(format="%.3f")})
    if episodes:
        _episodes(at_step)


def _episodes(at_step: pd.DataFrame) -> None:
    """Each multi-turn sample turn by turn: the assistant's turns as the policy wrote them, the environment's replies
    marked (they are read by the model but never trained on)."""
    st.subheader(widgets.t("samples_episodes"))
    for number, (_, row) in enumerate(at_step.iterrows(), start=1):
        title = widgets.t("samples_episode", i=number, prompt=row["prompt"], turns=int(row["num_turns"]),
                          calls=int(row["tool_calls"]), reward=float(row["reward"]))
        with st.expander(title, expanded=number == 1):
            for turn in row["turns"]:
                env = turn["role"] == "env"
                label = widgets.t("samples_env_turn" if env else "samples_assistant_turn")
                text = turn["text"].replace("`", "'")
                st.markdown(f"> **{label}** `{text}`" if env else f"**{label}** `{text}`")


def _gym(label: str, frame: pd.DataFrame) -> None:
    x_mode, _, _ = widgets.settings()
    x = series.wall_time(frame) if x_mode == "wall" else None
    x = frame[STEP] if x is None else x
    drawn = 0
    for prefix, title in ((EPISODE_REWARD, "episode_returns"), (EPISODE_LENGTH, "episode_lengths")):
        mean, lo, hi = (f"{prefix}/{s}" for s in ("mean", "min", "max"))
        if mean not in frame:
            continue
        ranged = pd.DataFrame({"series": label, "step": frame[STEP], "x": x, "mean": frame[mean],
                               "lo": frame.get(lo, frame[mean]), "hi": frame.get(hi, frame[mean])})
        chart = charts.range_chart(ranged, widgets.t(title), x_title=widgets.t(f"x_{x_mode}"))
        st.vega_lite_chart(spec=charts.to_spec(chart), width="stretch")
        drawn += 1
    if not drawn:
        st.info(widgets.t("no_episodes"))


def render() -> None:
    picked = widgets.page_with_selection("samples_title")
    if picked is None:
        return
    table, rows = picked
    run, row = widgets.pick_run(table, rows, key="samples_run")
    frame = data.metrics_frame(run)
    if row["family"] == "token":
        st.caption(widgets.t("samples_token_note"))
        _token(run, row["label"], frame)
    else:
        st.caption(widgets.t("samples_gym_note"))
        _gym(row["label"], frame)


if __name__ == "__main__":
    render()
