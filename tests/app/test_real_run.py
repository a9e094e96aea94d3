"""The explorer on a real tiny run of the trainer (`python -m playground.train`, in a subprocess: `tiny_run`)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import data
import sections
from app_helpers import ENTRY, charts_of, show, texts


@pytest.fixture
def real_run(tiny_run, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tiny_run.parents[1]))  # its outputs/ folder
    return tiny_run


def test_a_real_run_is_listed_drawn_and_diagnosed(real_run):
    at = show(AppTest.from_file(ENTRY, default_timeout=60).run().switch_page("views/runs.py").run(), real_run)
    assert "12-00-00** · cartpole · healthy" in texts(at)
    columns = list(data.metrics_frame(str(real_run)).columns)
    groups = sections.metrics_by_group(columns)
    assert sum(len(m) for m in groups.values()) == len(columns) - 1  # every metric but the step has a panel
    assert "other" not in groups  # and the trainer writes only metrics the guide declares
    at.switch_page("views/panels.py").run()
    assert not at.exception and len(charts_of(at)) >= 9
    at.button_group(key="panel_choice").set_value("timing").run()
    assert len(charts_of(at)) == len(groups["timing"])
    at.switch_page("views/diagnosis.py").run()
    ids = [f["id"] for f in data.run_diagnosis(str(real_run))[0]["findings"]]
    assert ids and all(f"-badge[{i}]" in texts(at) for i in ids)  # findings.json, as the trainer wrote it
