"""A stand-in for `subprocess.Popen` behind the explorer's launcher: it records each command and writes what the
playground's entry would have written (a fake run, a sweep, a checker's lines) without training anything."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from playground.config.overrides import parse, value_of

from fake_runs import LR_TOO_HIGH, finding, write_run

# Above Linux's largest pid (2**22): a signal sent to one of these finds no process.
_PIDS = itertools.count(2**22 + 1000)


class FakeProcess:
    def __init__(self, argv: list[str], kwargs: dict):
        self.argv, self.kwargs = argv, kwargs
        self.pid = next(_PIDS)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode

    def finish(self, returncode: int = 0) -> None:
        self.returncode = returncode


def _value(argv: list[str], key: str) -> str | None:
    value = value_of(argv, key)
    return None if value is None else value.strip("'")


def _overrides(argv: list[str]) -> list[str]:
    return [a for a in argv[3:] if parse(a).value is not None and not a.startswith("hydra")]


def write_train(argv: list[str]) -> None:
    """A run as `python -m playground.train <overrides>` leaves it: unstable (lr_too_high, fix lr/10) at lr >= 0.01."""
    lr = float(_value(argv, "actor_rollout_ref.actor.optim.lr") or (0.05 if "scenario=lr_too_high" in argv else 0.0025))
    unstable = lr >= 0.01
    fix = {**LR_TOO_HIGH, "fix": f"actor_rollout_ref.actor.optim.lr={lr / 10:g}"}
    onset = _value(argv, "onset_step")  # run.json records it, as the trainer's does
    write_run(_value(argv, "hydra.run.dir"), scenario=_value(argv, "scenario") or "healthy", unstable=unstable,
              overrides=_overrides(argv), findings=[fix] if unstable else [finding("healthy", "info", 1, 60)],
              extra_info={"onset_step": None if onset is None else int(onset)})


def write_sweep(argv: list[str]) -> None:
    """A multirun dir: one job per combination of the swept values, the same unstable rule as `write_train`."""
    sweep = Path(_value(argv, "hydra.sweep.dir"))
    sweep.mkdir(parents=True, exist_ok=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    parsed = [parse(o) for o in _overrides(argv)]
    fixed = [o.text for o in parsed if not o.sweep]
    swept = [o for o in parsed if o.sweep]
    for job, combo in enumerate(itertools.product(*(o.value.split(",") for o in swept))):
        overrides = [*fixed, *(f"{o.key}={v}" for o, v in zip(swept, combo))]
        write_train([*argv[:3], *overrides, f"hydra.run.dir={sweep / str(job)}"])


class FakeSpawn:
    """Call it as Popen; `started` holds every process. With `finish`, each ends at once having written its files;
    `check_output` is what an exercise check prints."""

    def __init__(self, finish: bool = True, check_output: str = "✓ Healthy: the engine finds no warning.\n"):
        self.finish = finish
        self.check_output = check_output
        self.started: list[FakeProcess] = []

    def __call__(self, argv: list[str], **kwargs) -> FakeProcess:
        proc = FakeProcess(list(argv), kwargs)
        self.started.append(proc)
        if self.finish:
            if argv[1:3] == ["-m", "playground.train"]:
                (write_sweep if "-m" in argv[3:] else write_train)(argv)
            elif "check" in argv:
                kwargs["stdout"].write(self.check_output.encode())
            proc.finish(0)
        return proc

    @property
    def argvs(self) -> list[list[str]]:
        return [p.argv for p in self.started]


def run_dir_of(argv: list[str]) -> Path:
    return Path(re.sub(r"^'|'$", "", _value(argv, "hydra.run.dir") or ""))
