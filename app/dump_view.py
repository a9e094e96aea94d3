"""verl's rollout dumps in the explorer (`trainer.rollout_data_dir`: one `{step}.jsonl` per step): a dump dir's
text findings on the External log page (`playground.diagnose.rollout_text`), each with a link to the samples behind it,
and a dumped step in the Step inspector: every sample's fields (input, output, score, gts, the reward's extras), the
linked ones highlighted. Reading and judging are the library's; this module draws."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from playground.diagnose.rollout_dump import CORE_FIELDS, RolloutDump, is_dump_dir, read_dump
from playground.diagnose.rollout_text import dump_report

import data
import widgets

ASKED = "inspect"  # what another page asks the inspector to open: {dump, step, samples, finding}
MARKED = "inspector_dump_marked"  # the samples a finding linked: {dir, step, samples, finding}
PER_PAGE = 8  # samples drawn in full at once
MAX_SAMPLES = 4  # sample indices named on a link's label


def _stamp(path: Path) -> tuple:
    """The dump's files and their times and sizes: a dump still being written is read again."""
    return tuple(sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in path.glob("*.jsonl")))


@st.cache_data(max_entries=8, show_spinner=False)
def _read(path: str, _stamp: tuple) -> tuple[RolloutDump, dict]:
    dump = read_dump(path)
    return dump, dump_report(dump).to_dict()


def read(text: str) -> tuple[RolloutDump | None, dict | None, str | None]:
    """The dump at `text` (under the allowed bases only) and its report, or a message key for `widgets.t`."""
    path = data.inside(text.strip(), data.allowed_bases())
    if path is None:
        return None, None, "err_outside"
    if not path.exists():
        return None, None, "err_missing"
    if not is_dump_dir(path):
        return None, None, "err_not_dump"
    dump, report = _read(str(path), _stamp(path))
    return dump, report, None


def is_dump_path(text: str) -> bool:
    """Whether `text` names a dump dir the app may read."""
    path = data.inside(text.strip(), data.allowed_bases()) if text.strip() else None
    return path is not None and is_dump_dir(path)


def draw_findings(text: str, *, key: str) -> None:
    """The dump's findings (the Diagnosis view's boxes), each step of their evidence with a link to its samples."""
    import sections

    st.subheader(widgets.t("dump_title"))
    dump, report, error = read(text)
    if error:
        st.error(widgets.t(error, path=text.strip()))
        return
    assert dump is not None and report is not None
    widgets.show_problems(Path(dump.source).name, dump.problems)
    st.success(widgets.t("dump_read", steps=len(dump.steps), samples=dump.sample_count(), dir=dump.source))
    sections.draw_findings(report, None, key=key, dump_dir=dump.source)


def sample_links(dump_dir: str, finding: dict, *, key: str) -> None:
    """One button per step of a finding's evidence that names samples: the inspector at that step, those samples
    highlighted."""
    for i, item in enumerate(finding.get("evidence", []) or []):
        samples = item.get("samples")
        if not samples:
            continue
        shown = ", ".join(map(str, samples[:MAX_SAMPLES])) + (", …" if len(samples) > MAX_SAMPLES else "")
        if st.button(widgets.t("dump_open", step=item["step"], samples=shown, n=len(samples)), key=f"{key}_{i}",
                     icon=":material/frame_inspect:"):
            st.session_state[ASKED] = {"dump": dump_dir, "step": item["step"], "samples": list(samples),
                                       "finding": finding.get("id", "?")}
            st.switch_page("views/inspector.py")


def take_asked() -> None:
    """Take a dump another page asked the inspector to open: its dir into the inspector's field, its step and
    samples marked (a run's request is left for the token view)."""
    asked = st.session_state.get(ASKED)
    if not asked or "dump" not in asked:
        return
    st.session_state.pop(ASKED)
    st.session_state["inspector_dump_dir"] = asked["dump"]
    st.session_state["inspector_dump_step"] = int(asked["step"])
    st.session_state[MARKED] = {"dir": asked["dump"], "step": int(asked["step"]), "samples": list(asked["samples"]),
                                "finding": asked["finding"]}


def _table(samples: list[dict], marked: set[int], extras: list[str]) -> pd.DataFrame:
    """The step's samples, one row each: the linked ones first, text cut to a line (the full text is below)."""
    def cut(value: object) -> str:
        text = value if isinstance(value, str) else "" if value is None else str(value)
        one_line = " ".join(text.split())
        return one_line if len(one_line) <= 120 else one_line[:119] + "…"

    rows = [{"sample": i, "linked": "●" if i in marked else "", "score": s.get("score"), "input": cut(s.get("input")),
             "output": cut(s.get("output")), "gts": cut(s.get("gts")), **{k: cut(s.get(k)) for k in extras}}
            for i, s in enumerate(samples)]
    rows.sort(key=lambda r: (r["linked"] == "", r["sample"]))
    return pd.DataFrame(rows)


def _sample(index: int, sample: dict, extras: list[str], marked: bool) -> None:
    with st.container(border=True):
        flag = " · :red-badge[" + widgets.t("dump_linked") + "]" if marked else ""
        st.markdown(widgets.t("dump_sample", index=index, score=sample.get("score"), gts=sample.get("gts")) + flag)
        st.caption(widgets.t("dump_input"))
        st.code(str(sample.get("input", "")), language=None, wrap_lines=True)
        st.caption(widgets.t("dump_output"))
        st.code(sample["output"] or " ", language=None, wrap_lines=True)
        if extras:
            st.caption(" · ".join(f"`{k}` {sample.get(k)}" for k in extras))


def draw_step(text: str) -> None:
    """The Step inspector on a dump: pick a dumped step; its samples as a table, the linked ones (or the first) in
    full."""
    dump, _, error = read(text)
    if error:
        st.error(widgets.t(error, path=text.strip()))
        return
    assert dump is not None
    widgets.show_problems(Path(dump.source).name, dump.problems)
    steps = dump.step_numbers()
    if st.session_state.get("inspector_dump_step") not in steps:
        st.session_state["inspector_dump_step"] = steps[-1]
    step = st.select_slider(widgets.t("inspector_step"), steps, key="inspector_dump_step")
    samples, extras = dump.steps[step], dump.extra_keys(step)
    opened = st.session_state.get(MARKED) or {}
    here = opened.get("dir") == dump.source and opened.get("step") == step
    marked = set(opened["samples"]) if here else set()
    if here:
        st.info(widgets.t("dump_marked", finding=opened["finding"], n=len(marked), step=step), icon=":material/flag:")
    fields = [f for f in CORE_FIELDS if any(f in s for s in samples)] + extras
    st.caption(widgets.t("dump_fields", n=len(samples), fields=", ".join(f"`{f}`" for f in fields)))
    st.dataframe(_table(samples, marked, extras), hide_index=True, key="inspector_dump_table")
    order = sorted(range(len(samples)), key=lambda i: (i not in marked, i))
    for i in order[:PER_PAGE]:
        _sample(i, samples[i], extras, i in marked)
