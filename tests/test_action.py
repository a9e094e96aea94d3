"""action.yml, the run doctor as a GitHub Action, tested by running its steps here: each `run:` script with bash as
Actions runs a composite step (`bash --noprofile --norc -eo pipefail`), its `env:` filled from the inputs, with
GITHUB_STEP_SUMMARY, GITHUB_OUTPUT, RUNNER_TEMP and GITHUB_ACTION_PATH set, in a temporary workspace.

Two steps are not run: actions/setup-python (a `uses:` step) and the pip install (network; its lines are checked
instead). In their place `python` is this test's interpreter (the project's .venv) with the checkout on PYTHONPATH,
which is what installing the checkout gives."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.diagnose.test_issue25_rules import console, steps

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
WARNING_LOG = ROOT / "tests" / "diagnose" / "fixtures" / "two_sources_one_falls.log"  # worst finding: a warning
CRASH = ("Traceback (most recent call last):\n  File \"verl/trainer/ppo/ray_trainer.py\", line 1040, in fit\n"
         "    metrics.update(reduce_metrics(m))\nValueError: zero-size array to reduction operation maximum\n")
INPUT = re.compile(r"^\$\{\{\s*inputs\.([\w-]+)\s*\}\}$")


def _steps() -> list[dict]:
    return ACTION["runs"]["steps"]


def _inputs(given: dict[str, str]) -> dict[str, str]:
    """The inputs as Actions resolves them: what `with:` gives, else each input's default."""
    declared = ACTION["inputs"]
    assert set(given) <= set(declared)
    missing = [name for name, spec in declared.items() if spec.get("required") and name not in given]
    assert not missing, f"required inputs not given: {missing}"
    return {name: str(given.get(name, spec.get("default", ""))) for name, spec in declared.items()}


def _run_action(workspace: Path, **given: str) -> tuple[int, str, dict[str, str], str]:
    """Run the action's `run:` steps after the install, in order, as Actions would; stop at the first that fails.

    Returns:
        The last step's exit code, the job summary, the step outputs, and the steps' stdout and stderr.
    """
    inputs = _inputs({k.replace("_", "-"): v for k, v in given.items()})
    bin_dir, temp = workspace / ".bin", workspace / ".runner_temp"
    bin_dir.mkdir(exist_ok=True)
    temp.mkdir(exist_ok=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    summary, output = workspace / ".summary.md", workspace / ".output"
    summary.write_text("")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
    base.update(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}", PYTHONPATH=str(ROOT),
                GITHUB_STEP_SUMMARY=str(summary), GITHUB_ACTION_PATH=str(ROOT), GITHUB_WORKSPACE=str(workspace),
                RUNNER_TEMP=str(temp), OMP_NUM_THREADS="1")
    code, said = 0, ""
    for step in _steps()[2:]:  # after setup-python and the install (test_the_install_step_...)
        assert "${{" not in step["run"], f"step {step.get('name')!r} pastes an expression into its script"
        env = dict(base)
        for key, value in (step.get("env") or {}).items():
            match = INPUT.match(str(value))
            assert match, f"{key}: only ${{{{ inputs.<name> }}}} is evaluated here, not {value!r}"
            env[key] = inputs[match[1]]
        output.write_text("")
        env["GITHUB_OUTPUT"] = str(output)
        script = workspace / ".step.sh"
        script.write_text(step["run"])
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                              env=env, capture_output=True, text=True, timeout=300)
        code, said = done.returncode, said + done.stdout + done.stderr
        if code:
            break
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return code, summary.read_text(), outputs, said


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "train.log").write_text(WARNING_LOG.read_text(encoding="utf-8"))
    (tmp_path / "logs" / "crash.log").write_text(console(steps(12), CRASH))
    return tmp_path


def test_the_action_is_composite_with_its_inputs_and_the_doctors_exit_code_as_output():
    assert ACTION["runs"]["using"] == "composite"
    assert ACTION["inputs"]["log"]["required"] is True
    assert ACTION["inputs"]["fail-on"]["default"] == "critical"
    assert "python-version" in ACTION["inputs"]
    assert ACTION["outputs"]["exit-code"]["value"] == "${{ steps.doctor.outputs.exit-code }}"
    assert [s.get("id") for s in _steps()].count("doctor") == 1


def test_the_install_step_sets_up_python_and_installs_the_checkout_with_torchs_cpu_wheel():
    setup, install = _steps()[:2]
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["with"]["python-version"] == "${{ inputs.python-version }}"
    lines = [line.strip() for line in install["run"].splitlines() if line.strip()]
    assert lines == ["python -m pip install --quiet torch --index-url https://download.pytorch.org/whl/cpu",
                     'python -m pip install --quiet "$GITHUB_ACTION_PATH"']


def test_default_fail_on_critical_passes_a_warning_and_puts_the_markdown_report_in_the_summary(workspace):
    code, summary, outputs, said = _run_action(workspace, log="logs/train.log")
    assert code == 0, said
    assert summary.startswith("## logs/train.log\n") and "**source_regression**" in summary
    assert "`val-core/lighteval/MATH/acc/mean@4` = 0.39" in summary  # the report, not a line about it
    assert outputs == {"exit-code": "0"}
    assert "## logs/train.log" in said  # the step's log shows it too


def test_fail_on_follows_the_severity(workspace):
    assert _run_action(workspace, log="logs/train.log", fail_on="warning")[0] == 1
    assert _run_action(workspace, log="logs/crash.log")[0] == 1  # a crash is critical: the default fails it
    code, summary, outputs, _ = _run_action(workspace, log="logs/crash.log", fail_on="none")
    assert code == 0 and "training_crash" in summary and outputs == {"exit-code": "0"}


def test_a_log_it_cannot_read_fails_the_step_and_says_so_in_the_summary(workspace):
    code, summary, outputs, said = _run_action(workspace, log="logs/missing.log", fail_on="none")
    assert code == 2 and outputs == {"exit-code": "2"}
    assert "could not judge `logs/missing.log`" in summary and "missing.log" in said


def test_an_unknown_fail_on_is_refused_before_the_diagnosis(workspace):
    code, summary, outputs, said = _run_action(workspace, log="logs/train.log", fail_on="error")
    assert code == 2 and summary == "" and outputs == {}
    assert "::error::fail-on is warning, critical or none, not 'error'" in said
