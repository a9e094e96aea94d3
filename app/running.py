"""What the explorer has running, as page sections: the queue (Stop, Cancel) and the live-refresh of a section.

A live section is a fragment that redraws itself every `widgets.LIVE_S` seconds while what it shows is active; once
that ends it reruns the whole page once, so the page's static parts (final findings, buttons) catch up.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

import data
import launcher
import widgets

PAGE_RERUN = "page_rerun"  # set by a callback inside a fragment: the page must redraw (a job just started)


def request_page_rerun() -> None:
    st.session_state[PAGE_RERUN] = True


def _live_body(body: Callable[..., bool], flag: str, *args: object) -> None:
    if st.session_state.pop(PAGE_RERUN, False):
        st.rerun()
    active = body(*args)
    if st.session_state.get(flag) and not active:
        st.session_state[flag] = False
        st.rerun()


def live_section(body: Callable[..., bool], active: bool, key: str, *args: object) -> None:
    """Draw `body(*args)` (which returns whether it is still active) in a fragment that refreshes while active."""
    st.session_state[f"live_{key}"] = active
    st.fragment(_live_body, run_every=widgets.LIVE_S if active else None)(body, f"live_{key}", *args)


def run_active(run: str | Path, kinds: tuple[str, ...] | None = None) -> bool:
    """Whether a run is waiting or training: a job of the explorer's, or a live process recorded in run.json."""
    job = launcher.shared().job_for(run, kinds)
    if job is not None and job.active:
        return True
    return data.run_status(data.run_info(str(run))) == "running" if Path(run, "run.json").is_file() else False


def job_state(job: launcher.Job) -> str:
    """A job's state in words: waiting (its place), training (pid), finished, stopped, cancelled."""
    if job.state == "queued":
        return widgets.t("job_queued", n=launcher.shared().position(job))
    if job.state == "running":
        return widgets.t("job_running", pid=job.pid)
    return widgets.t(f"job_{job.state}", rc=job.returncode)


def _stop(job_id: str) -> None:
    launcher.shared().stop(job_id)
    request_page_rerun()


def stop_button(job: launcher.Job | None, key: str) -> None:
    """Stop (or cancel, while it waits) a job of the explorer's."""
    if job is not None and job.active:
        label = widgets.t("stop") if job.state == "running" else widgets.t("cancel")
        st.button(label, key=key, on_click=_stop, args=(job.id,), icon=":material/stop_circle:")


def queue_section() -> None:
    """What trains now and what waits, with the limit that decides it."""
    shared = launcher.shared()
    jobs = [j for j in shared.jobs() if j.active]
    st.caption(widgets.t("queue_limit", n=shared.limit, env=launcher.ENV_MAX))
    if not jobs:
        st.caption(widgets.t("queue_empty"))
        return
    for job in jobs:
        left, right = st.columns([3, 2], vertical_alignment="center")
        left.markdown(f"**{job.label}** · {job_state(job)}")
        with right:
            stop_button(job, key=f"queue_stop_{job.id}")
