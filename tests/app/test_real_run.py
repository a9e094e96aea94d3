"""The explorer on a real tiny run of the trainer (`python -m playground.train`, in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

import data
import sections
from app_helpers import ENTRY, ROOT, charts_of, show, texts

TINY = ["task=cartpole", "env.num_envs=4", "env.rollout_length=16", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
        "env.eval_episodes=4", "trainer.total_training_steps=8", "trainer.logger=[]", "trainer.progress_bar=false"]


@pytest.fixture
def real_run(tmp_path, monkeypatch):
    run_dir = tmp_path / "outputs" / "2026-11-30" / "12-00-00"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "playground.train", *TINY, f"hydra.run.dir={run_dir}"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    monkeypatch.setenv("PLAYGROUND_RUNS", str(tmp_path / "outputs"))
    return run_dir


def test_a_real_run_is_listed_drawn_and_diagnosed(real_run):
    at = show(AppTest.from_file(ENTRY, default_timeout=60).run(), real_run)
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
