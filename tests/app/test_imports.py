"""The explorer never imports a module that can train: every app module, and every page rendered over a real runs
tree, leave torch and the trainer unloaded (checked in a fresh process: the test process itself trains)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from app_helpers import ENTRY, PAGES, ROOT

TRAINING = ("torch", "playground.step.trainer", "playground.train", "playground.tasks", "playground.exercise",
            "playground.step.hparams", "playground.step.update", "playground.step.workers", "playground.step.advantage",
            "playground.step.records", "playground.step.stopping", "playground.step.dynamic_sampling")

SCRIPT = textwrap.dedent("""
    import importlib, json, pathlib, sys
    sys.path.insert(0, {app!r})
    from streamlit.testing.v1 import AppTest
    for path in sorted(pathlib.Path({app!r}).rglob("*.py")):
        name = ".".join(path.relative_to({app!r}).with_suffix("").parts)
        if name != "streamlit_app":
            importlib.import_module(name)
    at = AppTest.from_file({entry!r}, default_timeout=60).run()
    errors = [str(e.value) for e in at.exception]
    for page in {pages!r}:
        at.switch_page(page).run()
        errors += [str(e.value) for e in at.exception]
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "torch" or m.startswith({training!r}))
    print(json.dumps({{"loaded": loaded, "errors": errors}}))
""")


def test_no_app_module_or_page_loads_torch_or_the_trainer(tree):
    script = SCRIPT.format(app=str(ROOT / "app"), entry=ENTRY, pages=PAGES, training=TRAINING[1:])
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ}, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["errors"] == []
    assert report["loaded"] == [], f"the explorer loaded {report['loaded']}"
