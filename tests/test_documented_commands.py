"""The README's and the worksheets' commands, run as their text says, in a fresh shell (`env -i`: no venv activated,
no PYTHONPATH, an empty home and so an empty model cache) on a copy of the checkout.

A command that ends by itself must exit 0. One that is still running after `BUDGET_S` (a training, the explorer's
server) must have said something by then and stop cleanly on Ctrl-C. Neither may print a traceback. The worksheets'
placeholders (`<id>`, `<key=value ...>`) are filled with the exercise's own answer. Every worksheet's quick commands
run here; `start N` and `check N`, which train, run for one gym and one token exercise (every exercise under
`-m slow`; `make workshop-verify` trains them all to the end). docs/ shows the commands behind its measurements, most
too long to run here: each `playground.train` command there composes and validates, and each other module exists.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from playground.teach.workshop import load_all

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 20.0  # a training has printed its run dir and started its steps by then, even on a loaded 2-core CI
TRAINING = re.compile(r"-m playground\.exercise (start|check) ")
CI_EXERCISES = (3, 8)  # one gym task, one token task: their start and check train here
FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)  # a list item's block is indented
INLINE = re.compile(r"`(\.venv/bin/[^`]+)`")


def commands(markdown: str) -> list[str]:
    """Each `.venv/bin/...` command the text shows, in order, once: fenced lines (a trailing `# comment` dropped)
    and inline code."""
    found = []
    for block in FENCE.findall(markdown):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            if line.startswith(".venv/bin/"):
                found.append(line)
    found += INLINE.findall(markdown)
    return list(dict.fromkeys(found))


def filled(command: str, number: int | None) -> str:
    """The worksheet's placeholders with the exercise's answer (README's example is exercise 3)."""
    ex = next(e for e in load_all() if e.number == (number or 3))
    # a turning run's last good step: the step before its cause arrived (the doctor's, within the exercise's tolerance)
    onset = next((int(o.split("=", 1)[1]) for o in ex.cause if o.startswith("onset_step=")), None)
    if onset is not None:
        command = command.replace("<step>", str(onset - 1))
    return (command.replace("<id>", ex.diagnosis)
            .replace('"<key=value ...>"', shlex.quote(" ".join(ex.reference_fix)))
            .replace('"<overrides>"', shlex.quote(" ".join(ex.reference_fix))))


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A copy of the checkout's files (tracked, and new ones git does not ignore), its `.venv` linked in: what a run
    writes stays in the copy."""
    copy = tmp_path_factory.mktemp("checkout")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=False)
    paths = [p for p in listed.stdout.decode().split("\0") if p] if listed.returncode == 0 else None
    if paths is None:  # not a git checkout (an unpacked archive): everything but what runs write
        shutil.copytree(ROOT, copy, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".venv", "outputs", "multirun", ".git", "__pycache__"))
    for path in paths or ():
        if (ROOT / path).is_file():
            (copy / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / path, copy / path)
    (copy / ".venv").symlink_to(ROOT / ".venv")
    return copy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_as_written(command: str, cwd: Path, home: Path) -> tuple[bool, str]:
    """Run `command` in a fresh shell; returns (whether it ended by itself, its output)."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "STREAMLIT_SERVER_PORT": str(free_port())}  # the explorer's own port may be taken on this machine
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BUDGET_S)
        ended = True
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a user stops a training or the explorer
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return False, out.decode(errors="replace") + "\n[did not stop within 60 s of Ctrl-C]"
        ended = False
    text = out.decode(errors="replace")
    assert proc.returncode == 0 or not ended, f"{command}\nexit {proc.returncode}:\n{text[-3000:]}"
    return ended, text


def check(command: str, cwd: Path, home: Path) -> None:
    ended, text = run_as_written(command, cwd, home)
    assert "Traceback" not in text and "did not stop" not in text, f"{command}:\n{text[-3000:]}"
    assert ended or text.strip(), f"{command}: silent for {BUDGET_S} s"


def test_the_commands_are_found():
    readme = commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert ".venv/bin/python -m playground.exercise start 3" in readme and ".venv/bin/streamlit run app" in readme
    sheet = commands((ROOT / "exercises/03_cartpole_halfway/worksheet.en.md").read_text(encoding="utf-8"))
    assert sheet[0] == ".venv/bin/python -m playground.exercise start 3" and len(sheet) == 5
    assert filled(sheet[1], 3).startswith(".venv/bin/python -m playground.exercise check 3 --diagnosis ")


def test_the_readmes_commands_work_as_written(checkout, tmp_path):
    """In order, each as its line says: the second diagnoses the run the first trained."""
    for command in commands((ROOT / "README.md").read_text(encoding="utf-8")):
        check(filled(command, None), checkout, tmp_path)


def worksheet_commands(training: bool, numbers: tuple[int, ...] | None = None) -> list[str]:
    """The worksheets' commands (both languages), filled, once each; the README's own are checked with the README."""
    readme = set(commands((ROOT / "README.md").read_text(encoding="utf-8")))
    found = [filled(command, ex.number) for ex in load_all() for lang in ("en", "zh")
             for command in commands(ex.worksheet(lang))
             if bool(TRAINING.search(command)) == training and (numbers is None or ex.number in numbers)
             and command not in readme]
    return list(dict.fromkeys(found))


def test_the_worksheets_quick_commands_work_as_written(checkout, tmp_path):
    runs = worksheet_commands(training=False)
    assert len(runs) >= len(load_all())  # each worksheet's hint, at least
    for command in runs:
        check(command, checkout, tmp_path)


@pytest.mark.parametrize("number", CI_EXERCISES)
def test_a_worksheets_training_commands_work_as_written(number, checkout, tmp_path):
    runs = worksheet_commands(training=True, numbers=(number,))
    assert runs and all(TRAINING.search(c) for c in runs)  # start (unless the README shows it) and check
    for command in runs:
        check(command, checkout, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("number", [ex.number for ex in load_all() if ex.number not in CI_EXERCISES])
def test_every_worksheets_training_commands_work_as_written(number, checkout, tmp_path):
    for command in worksheet_commands(training=True, numbers=(number,)):
        check(command, checkout, tmp_path)


PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…")


def _docs_train_overrides() -> list[tuple[str, list[str]]]:
    """docs/'s `playground.train` commands as overrides: a placeholder seed (`S`, `N`, `<101..110>`) becomes 1, and
    other placeholders (`<fix>`, `<overrides>`, `...`) and Hydra's sweep flag are left out."""
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for command in commands(page.read_text(encoding="utf-8")):
            words = shlex.split(command)
            if words[:3] != [".venv/bin/python", "-m", "playground.train"]:
                continue
            overrides = []
            for word in words[3:]:
                key, _, value = word.partition("=")
                if word == "-m" or key.startswith("hydra"):
                    continue
                if key.endswith(".seed") and (PLACEHOLDER.search(value) or re.fullmatch(r"[A-Z]", value)):
                    word = f"{key}=1"
                elif PLACEHOLDER.search(word):
                    continue
                overrides.append(word)
            found.append((f"{page.name}: {command}", overrides))
    return found


def test_docs_train_commands_name_configs_that_compose_and_validate():
    """docs/ shows the commands behind its measurements, most of them too long to run here: each composes and passes
    the checks a run makes before any compute, as its text names it (with its placeholders left out)."""
    from playground.config import check_group_overrides, compose, validate, with_default_scenario

    checked = _docs_train_overrides()
    assert len(checked) >= 30
    for where, overrides in checked:
        try:
            check_group_overrides(overrides)
            validate(compose(with_default_scenario(overrides)))
        except Exception as error:  # noqa: BLE001 - the command and the line a user would get
            pytest.fail(f"{where}\n{type(error).__name__}: {error}")


def test_docs_other_commands_name_modules_that_exist():
    import importlib.util

    for page in sorted((ROOT / "docs").glob("*.md")):
        for command in commands(page.read_text(encoding="utf-8")):
            words = shlex.split(command)
            if words[0] == ".venv/bin/python" and len(words) > 2 and words[1] == "-m":
                assert importlib.util.find_spec(words[2]) is not None, f"{page.name}: {command}"
