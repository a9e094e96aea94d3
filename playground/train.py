"""The Hydra entry point: `python -m playground.train task=cartpole scenario=lr_too_high [key=value ...]`.

Composes the config, checks it before any compute (one clear line and exit code 2 on a bad value), trains
into Hydra's output dir, and records how the run ended in `run.json` whatever happens. `-m` sweeps work with
any Hydra launcher (basic, joblib, submitit, and `hydra/launcher=batched` for many agents in one process).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from playground.config import ConfigError, resolve_device, validate

CONF_DIR = os.environ.get("PLAYGROUND_CONF_DIR", str(Path(__file__).resolve().parents[1] / "conf"))
EXIT_BAD_CONFIG = 2


class Terminated(KeyboardInterrupt):
    """A SIGTERM (`kill`, a job scheduler, the demo stopping), raised where the run is: it ends as Ctrl-C does,
    with status `interrupted` and every metric so far kept."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated(f"terminated by signal {signal.Signals(signum).name}")


def known_options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))


def check_group_overrides(argv: Sequence[str]) -> None:
    """Unknown `task=` / `scenario=` values fail with one line (Hydra's own message spans many)."""
    for arg in argv:
        for group in ("task", "scenario"):
            if arg.startswith(f"{group}="):
                for value in arg.split("=", 1)[1].split(","):
                    if value and value not in known_options(group):
                        raise ConfigError(f"{group}={value!r} is unknown: allowed one of {known_options(group)}")


def with_default_scenario(overrides: Sequence[str]) -> list[str]:
    """`task=X` without `scenario=` runs the task's `default_scenario`, if any (MountainCar has no healthy run)."""
    overrides = list(overrides)
    tasks = [o.split("=", 1)[1] for o in overrides if o.startswith("task=")]
    if len(tasks) != 1 or "," in tasks[0] or any(o.startswith(("scenario=", "+scenario=")) for o in overrides):
        return overrides
    path = Path(CONF_DIR) / "task" / f"{tasks[0]}.yaml"
    default = OmegaConf.select(OmegaConf.load(path), "task.default_scenario") if path.is_file() else None
    return [*overrides, f"scenario={default}"] if default else overrides


# Applies to every task: a workshop exercise (`playground.exercise`) brings its own overrides.
ANY_TASK_SCENARIOS = ("mystery",)


def check_scenario_applies(cfg: DictConfig) -> None:
    applicable = list(cfg.task.get("scenarios", []))
    if cfg.scenario not in applicable and cfg.scenario not in ANY_TASK_SCENARIOS:
        raise ConfigError(f"scenario={cfg.scenario!r} does not apply to task={cfg.task.name!r}: allowed {applicable}")


def prepare(cfg: DictConfig) -> torch.device:
    """Validate, pick the device and pin the torch threads; raises ConfigError before any compute."""
    check_scenario_applies(cfg)
    validate(cfg)
    device = resolve_device(cfg.trainer.device)
    if device.type == "cpu":
        torch.set_num_threads(int(cfg.trainer.num_threads))
    return device


def rerun_command(overrides: Sequence[str]) -> str:
    return " ".join(["python -m playground.train", *(shlex.quote(o) for o in overrides)])


def run_facts(overrides: Sequence[str], device: torch.device) -> dict:
    """What `run.json` says about how a run was launched: its overrides, the command that reruns it, where it ran."""
    return {"overrides": list(overrides), "command": rerun_command(overrides), "device": str(device),
            "num_threads": torch.get_num_threads() if device.type == "cpu" else None}


def run(cfg: DictConfig, run_dir: str | Path, overrides: Sequence[str] = ()) -> str:
    """Train one config into `run_dir`; returns the run's status."""
    from playground.trainer import Trainer

    device = prepare(cfg)
    trainer = Trainer([cfg], [run_dir], device, extra_infos=[run_facts(overrides, device)])
    status = trainer.fit()[0]
    write_findings(run_dir, cfg)
    return status


def needs_own_process(cfg: DictConfig) -> bool:
    """A memory-capped run is judged on its process's memory growth (on CPU), which earlier runs in the same
    process move (an exercise session, a long test session): such a run trains in a process of its own."""
    return cfg.trainer.memory_limit_gb is not None


def run_in_own_process(overrides: Sequence[str], run_dir: str | Path, show_stderr: bool = False) -> str:
    """`python -m playground.train <overrides>` into `run_dir` in a child process; returns the status run.json
    records ("failed" when the child wrote none)."""
    from playground.runs import read_run_info

    subprocess.run([sys.executable, "-m", "playground.train", *overrides, f"hydra.run.dir='{run_dir}'"],
                   cwd=Path(__file__).resolve().parents[1], env={**os.environ, "OMP_NUM_THREADS": "1"},
                   stdout=subprocess.DEVNULL, stderr=None if show_stderr else subprocess.DEVNULL, check=False)
    return (read_run_info(Path(run_dir)) or {}).get("status", "failed")


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """The config `python -m playground.train <overrides>` would run, composed in-process (tests, benchmarks)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    check_group_overrides(overrides)
    overrides = with_default_scenario(overrides)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
    OmegaConf.resolve(cfg)
    return cfg


def write_findings(run_dir: str | Path, cfg: DictConfig | None = None) -> None:
    """Diagnose the finished run into `findings.json` (the explorer lists runs without re-diagnosing); `cfg`, the
    run's config, spares reading back the `.hydra/config.yaml` written from it."""
    from playground.diagnose.engine import diagnose_run_dir

    diagnose_run_dir(Path(run_dir), config=cfg)


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    try:
        status = run(cfg, hc.runtime.output_dir, list(hc.overrides.task))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_BAD_CONFIG)
    except KeyboardInterrupt as stop:
        print("interrupted: run.json says so; metrics so far are kept", file=sys.stderr)
        sys.exit(128 + signal.SIGTERM if isinstance(stop, Terminated) else 130)  # the shell's codes
    return 0.0 if status == "finished" else None


def main() -> None:
    try:
        check_group_overrides(sys.argv[1:])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_BAD_CONFIG)
    sys.argv = [sys.argv[0], *with_default_scenario(sys.argv[1:])]
    signal.signal(signal.SIGTERM, _raise_terminated)
    hydra_main()


if __name__ == "__main__":
    main()
