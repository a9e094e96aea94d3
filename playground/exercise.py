"""Workshop exercises: `python -m playground.exercise list | ids | start N | hint N | check N --diagnosis ID --fix ..`
(`check N --last-good STEP` where an exercise asks for the step its run turned).

The command line and the checker, which train runs (the exercises themselves and a participant's progress are
`playground.teach.workshop`). Each folder `exercises/NN_slug/` hands participants a misbehaving run to read in the
explorer, name (a catalogue id) and fix. A fix is accepted when the diagnosis engine finds the fixed run healthy
(nothing of severity warning or worse) and the task's score reaches the exercise's bar. `prepare` precomputes every
mystery run for slow laptops; `verify` (instructors) checks that every exercise still reproduces and that its
reference fix passes.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from playground import PYTHON, failures
from playground.config.overrides import OverrideError, parse_strict
from playground.diagnose import injected, report
from playground.diagnose.root_causes import is_problem
from playground.interrupts import exit_code, handle_stops
from playground.metrics import fmt
from playground.rundir.runs import read_findings, read_run_info
from playground.rundir.score import run_score
from playground.teach.workshop import (
    WORKSHOP_ENV,
    Exercise,
    ExerciseError,
    default_lang,
    find,
    load_all,
    mark_solved,
    mystery_dir,
    next_hint,
    read_progress,
    save_progress,
    say,
    state,
    workshop_root,
)

if TYPE_CHECKING:
    from omegaconf import DictConfig

# Keys a fix may not touch: they define the exercise (task, seed, budget, memory cap, base model) or the check itself.
LOCKED = ("task", "scenario", "sft", "actor_rollout_ref.model", "hydra", "preset", "debug", "sweep", "trainer.seed",
          "trainer.mystery", "trainer.total_training_steps", "trainer.stop_on_finding", "trainer.stop_on_score",
          "trainer.memory_limit_gb", "onset_step")
QUIET = ["trainer.logger=[]"]


# ---- training --------------------------------------------------------------------------------------------------
def composed(overrides: list[str], progress_bar: bool = True) -> tuple[DictConfig, list[str]]:
    """The config `python -m playground.train <overrides>` would run, checked; returns (config, full overrides).

    Raises:
        ExerciseError: the overrides do not compose or a value is out of range (one line).
    """
    from playground.config import ConfigError, compose
    from playground.train import prepare

    overrides = [*QUIET, f"trainer.progress_bar={str(progress_bar).lower()}", *overrides]
    try:
        cfg = compose(overrides)
        prepare(cfg)
    except ConfigError as error:
        raise ExerciseError(f"the fix does not apply: {error}") from None
    except Exception as error:  # noqa: BLE001 - Hydra's own refusals (a value it cannot parse), over many lines
        raise ExerciseError(f"the fix does not apply: {str(error).strip().splitlines()[0]}") from None
    return cfg, overrides


def train(overrides: list[str], run_dir: Path, progress_bar: bool = True, isolated: bool | None = None,
          checked: tuple | None = None) -> tuple[str, float]:
    """Train `python -m playground.train <overrides>` into a fresh `run_dir`; returns (status, seconds).

    Args:
        isolated: train in a fresh process (default: `train.needs_own_process`, i.e. when a memory cap is set).
        checked: what `composed(overrides, progress_bar)` returned, when the caller has already checked them.
    """
    from playground.train import needs_own_process, run, run_in_own_process

    cfg, overrides = checked or composed(overrides, progress_bar)
    shutil.rmtree(run_dir, ignore_errors=True)
    start = time.perf_counter()
    if isolated if isolated is not None else needs_own_process(cfg):
        status = run_in_own_process(overrides, run_dir, show_stderr=progress_bar)
    else:
        status = run(cfg, run_dir, overrides)
    return status, time.perf_counter() - start


def start(ex: Exercise, root: Path | None = None, steps: int | None = None, stop_on_finding: bool = False,
          progress_bar: bool = True, isolated: bool | None = None) -> tuple[Path, str, float]:
    """Run the mystery config into the exercise's known run dir; returns (run dir, status, seconds).

    Args:
        steps: training steps (default the exercise's `steps.start`). stop_on_finding: end at the expected
            finding (the tests' shortened run; it names the answer in run.json, so never for participants).
    """
    run_dir = mystery_dir(ex, root)
    extra = [f"trainer.total_training_steps={steps or ex.steps['start']}"]
    if stop_on_finding:
        extra.append(f"trainer.stop_on_finding={ex.diagnosis}")
    status, seconds = train([*ex.mystery(), *extra], run_dir, progress_bar, isolated)
    if read_progress(ex, root).get("diagnosed"):
        mark_solved(run_dir)  # a restarted run of a diagnosed exercise stays unhidden
    return run_dir, status, seconds


# ---- checking --------------------------------------------------------------------------------------------------
def parse_fix(text: str) -> list[str]:
    """The participant's `--fix` as Hydra overrides; raises ExerciseError on anything that does not parse or
    touches a key the exercise fixes (`LOCKED`)."""
    try:
        tokens = shlex.split(text)
    except ValueError as error:
        raise ExerciseError(f"the fix does not parse ({error}): write it as key=value pairs") from None
    for token in tokens:
        try:
            override = parse_strict(token)
        except OverrideError:
            raise ExerciseError(f"the fix does not parse at {token!r}: write key=value, e.g. "
                                "actor_rollout_ref.actor.optim.lr=1e-3") from None
        key = override.key
        if not key or override.is_delete:
            raise ExerciseError(f"the fix does not parse at {token!r}: write key=value")
        if override.sweep:
            raise ExerciseError(f"{token!r} is a sweep: give one value per key")
        if any(key == k or key.startswith(k + ".") or key.startswith(k + "/") for k in LOCKED):
            raise ExerciseError(f"{key} is fixed by the exercise: change the training knobs, not the task, seed, "
                                "budget, memory cap or model")
    return tokens


@dataclass
class Verdict:
    """A fix run's outcome: how it ended, what the engine still finds, and its score against the bar."""

    status: str
    error: str | None
    bad: list[dict]  # findings of severity warning or worse
    score: float | None
    bar: float

    @property
    def reached(self) -> bool:
        return self.score is not None and self.score >= self.bar

    @property
    def passed(self) -> bool:
        return self.status == "finished" and not self.bad and self.reached


def judge(ex: Exercise, run_dir: Path) -> Verdict:
    info = read_run_info(run_dir) or {}
    findings = (read_findings(run_dir) or {}).get("findings", [])
    return Verdict(status=info.get("status", "unknown"), error=info.get("error"),
                   bad=[f for f in findings if is_problem(f)],
                   score=run_score(run_dir), bar=float(ex.bar["value"]))


def root_above(run_dir: Path, finding_id: str, roots: list[str]) -> dict | None:
    """The root finding (one of `roots`) that the run's diagnosis puts `finding_id` under as a consequence, if any:
    a participant who named a consequence is pointed up the chain, not told the answer."""
    for diagnosis in (read_findings(run_dir) or {}).get("diagnoses", []):
        ids = [f["id"] for f in diagnosis.get("consequences", [])]
        if finding_id in ids and diagnosis["root"]["id"] in roots:
            return diagnosis["root"]
    return None


def injected_causes(run_dir: Path, finding_id: str) -> list[dict]:
    """The playground knobs that broke the mystery run into this finding (its `injected`, diagnose/injected.py)."""
    found: dict = next((f for f in (read_findings(run_dir) or {}).get("findings", []) if f.get("id") == finding_id), {})
    return [c for c in found.get("injected") or [] if isinstance(c, dict) and "key" in c and "verl" in c]


def fix_overrides(ex: Exercise, fix: list[str], steps: int | None = None) -> list[str]:
    """The check's run: the mystery config, then the participant's fix (later overrides win), then the check's own."""
    out = [*ex.mystery(), *fix, "trainer.mystery=false", f"trainer.total_training_steps={steps or ex.steps['check']}",
           f"trainer.stop_on_finding={ex.diagnosis}"]  # the failure coming back ends the run early
    if ex.stop_at_bar:
        out.append(f"trainer.stop_on_score={ex.bar['value']}")
    return out


def run_fix(ex: Exercise, fix: list[str], run_dir: Path, steps: int | None = None, progress_bar: bool = True,
            isolated: bool | None = None, checked: tuple | None = None) -> Verdict:
    """Train the mystery config with `fix` applied and judge it; `checked` as in `train`."""
    train(fix_overrides(ex, fix, steps), run_dir, progress_bar, isolated, checked)
    return judge(ex, run_dir)


def check(ex: Exercise, diagnosis: str, fix_text: str | None, root: Path | None = None, lang: str = "en",
          steps: int | None = None, progress_bar: bool = True) -> tuple[bool, list[str]]:
    """Check a diagnosis and, when it is right, a fix; returns (everything asked was right, lines to print).

    Raises:
        ExerciseError: an unknown id, a fix that does not parse or apply, the mystery run still running.
    """
    if diagnosis not in failures.FAILURE_IDS:
        raise ExerciseError(f"unknown diagnosis id {diagnosis!r}: one of {', '.join(failures.FAILURE_IDS)}")
    fix = parse_fix(fix_text) if fix_text is not None else None
    # a fix that does not apply fails here, before anything is recorded
    checked = composed(fix_overrides(ex, fix, steps), progress_bar) if fix is not None else None
    run_dir = mystery_dir(ex, root)
    if (read_run_info(run_dir) or {}).get("status") == "running":
        raise ExerciseError(say("running", lang, n=ex.number))
    progress = read_progress(ex, root)
    lines = []
    if diagnosis not in ex.right_ids:
        lines.append(say("diag_wrong", lang, id=diagnosis))
        if diagnosis in ex.near_misses:
            lines.append(ex.near_misses[diagnosis][lang])
        elif (cause := root_above(run_dir, diagnosis, ex.right_ids)) is not None:
            lines.append(say("diag_consequence", lang, id=diagnosis, step=cause["first_step"]))
        lines.append(next_hint(ex, progress, "hints", lang))
        save_progress(ex, {**progress, "attempts": int(progress.get("attempts", 0)) + 1}, root)
        return False, lines
    lines.append(say("diag_right", lang, id=diagnosis, title=failures.TITLES[diagnosis][lang]))
    causes = injected_causes(run_dir, diagnosis)
    lines += [f"  {line}" for line in report.cause_lines(causes, lang)]  # the knob that broke it, in verl's terms
    progress["diagnosed"] = True
    if mark_solved(run_dir):
        lines.append(say("unhidden", lang))
    if fix is None:
        save_progress(ex, progress, root)
        return True, [*lines, say("need_fix", lang)]
    attempt = int(progress.get("fixes", 0)) + 1
    fix_dir = (root or workshop_root()) / ex.id / f"fix-{attempt}"
    print(say("fix_running", lang, run=fix_dir), flush=True)
    verdict = run_fix(ex, fix, fix_dir, steps, progress_bar, checked=checked)
    progress["fixes"] = attempt
    if verdict.status != "finished":
        lines.append(say("status_bad", lang, status=verdict.status, error=verdict.error))
    ids = ", ".join(f"{f['id']} ({f['severity']}, step {f['first_step']})" for f in verdict.bad)
    lines.append(say("healthy_bad", lang, ids=ids) if verdict.bad else say("healthy_ok", lang))
    bar = dict(metric=ex.bar["metric"], value=fmt(verdict.score, none="—"), bar=fmt(verdict.bar))
    lines.append(say("bar_ok" if verdict.reached else "bar_bad", lang, **bar))
    # the fix as a verl user pulls it: its playground keys in verl; what to change in the code where it removes a cause
    keys = set(injected.fix_keys(fix_text or ""))
    lines += [f"  {line}" for line in report.lever_lines(
        injected.levers(fix_text or ""), [{**c, "remedy": injected.remedy(c["key"]) if c["key"] in keys else {}}
                                           for c in causes], lang)]
    if verdict.passed:
        progress["solved"] = True
        lines.append(say("solved", lang, run=fix_dir))
    else:
        lines.append(next_hint(ex, progress, "fix_hints", lang))
    save_progress(ex, progress, root)
    return verdict.passed, lines


def check_last_good(ex: Exercise, step: int, root: Path | None = None, lang: str = "en") -> tuple[bool, list[str]]:
    """Check a participant's last good step of a mystery run whose cause arrived mid-run; returns (right, lines).

    Right within the exercise's tolerance of the doctor's last good step (findings.json `last_good`, which the
    explorer hides until the run is solved); once right, the lines say where the cause really arrived (run.json's
    `onset_step`), so the participant compares the two. Wrong: only which side of the turn the answer lies on.

    Raises:
        ExerciseError: the exercise asks for no last good step, its run is not there or still running.
    """
    if ex.last_good is None:
        raise ExerciseError(say("last_good_not_asked", lang, n=ex.number))
    run_dir = mystery_dir(ex, root)
    info = read_run_info(run_dir) or {}
    if info.get("status") == "running":
        raise ExerciseError(say("running", lang, n=ex.number))
    report = read_findings(run_dir)
    if not info or report is None:
        raise ExerciseError(say("last_good_no_run", lang, n=ex.number))
    good = report.get("last_good")
    if not isinstance(good, dict) or good.get("step") is None:  # no problem found, or one from the first step
        raise ExerciseError(say("last_good_none", lang, n=ex.number))
    doctor, tolerance = int(good["step"]), int(ex.last_good["tolerance"])
    progress = read_progress(ex, root)
    if abs(step - doctor) > tolerance:
        save_progress(ex, {**progress, "step_attempts": int(progress.get("step_attempts", 0)) + 1}, root)
        return False, [say("last_good_late" if step > doctor else "last_good_early", lang, step=step)]
    save_progress(ex, {**progress, "last_good": True}, root)
    return True, [say("last_good_right", lang, step=step, doctor=doctor, tolerance=tolerance),
                  say("last_good_truth", lang, onset=info.get("onset_step"), finding=good.get("finding"),
                      first=good.get("onset_step"))]


# ---- instructor ------------------------------------------------------------------------------------------------
def verify(exercises: list[Exercise], root: Path, quick: bool = False) -> list[dict[str, Any]]:
    """Per exercise: does its mystery run show the expected finding, and does its reference fix pass?

    Args:
        quick: a shortened mystery run (`steps.test`, ending at the expected finding) instead of the full start.
    """
    rows = []
    for ex in exercises:
        run_dir, _, seconds = start(ex, root, steps=ex.steps["test"] if quick else None, stop_on_finding=quick,
                                    progress_bar=False, isolated=True)
        found = [f["id"] for f in (read_findings(run_dir) or {}).get("findings", [])]
        verdict = run_fix(ex, ex.reference_fix, root / ex.id / "reference-fix", progress_bar=False, isolated=True)
        rows.append({"exercise": ex.id, "task": ex.task, "diagnosis": ex.diagnosis, "start_s": round(seconds, 1),
                     "reproduces": ex.diagnosis in found, "found": found, "fix_passes": verdict.passed,
                     "fix_bad": [f["id"] for f in verdict.bad], "fix_score": verdict.score, "bar": verdict.bar})
    return rows


# ---- command line ----------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"{PYTHON} -m playground.exercise", description=__doc__.splitlines()[0])
    parser.add_argument("--lang", choices=["en", "zh"], default=default_lang())
    parser.add_argument("--runs", type=Path, default=None, help=f"workshop runs folder (default ${WORKSHOP_ENV} or "
                        "outputs/workshop)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the exercises and how far you got")
    sub.add_parser("ids", help="the failure ids a diagnosis may name")
    for name, text in (("start", "run an exercise's mystery config"), ("hint", "show the next hint")):
        sub.add_parser(name, help=text).add_argument("n")
    chk = sub.add_parser("check", help="check a diagnosis and prove a fix")
    chk.add_argument("n")
    chk.add_argument("--diagnosis", default=None, help="a catalogue id, e.g. critic_undertrained")
    chk.add_argument("--last-good", type=int, default=None, dest="last_good",
                     help="the run's last good step, where an exercise asks for it")
    chk.add_argument("--fix", default=None, help='Hydra overrides, e.g. "critic.optim.lr=1e-3"')
    prep = sub.add_parser("prepare", help="precompute every mystery run (make workshop)")
    prep.add_argument("--force", action="store_true", help="rerun runs that already finished")
    ver = sub.add_parser("verify", help="instructors: every exercise reproduces and its reference fix passes")
    ver.add_argument("--quick", action="store_true", help="shortened mystery runs")
    ver.add_argument("--only", nargs="*", default=None, help="exercise numbers")
    args = parser.parse_args(argv)
    root, lang = args.runs or workshop_root(), args.lang
    try:
        if args.command == "list":
            for ex in load_all():
                print(f"{ex.number:2d}  {ex.title[lang]:<42} {ex.task:<12} {state(ex, root)}")
        elif args.command == "ids":
            for fid in failures.FAILURE_IDS:
                print(f"{fid:<26} {failures.severity(fid):<9} {failures.TITLES[fid][lang]}")
        elif args.command == "start":
            ex = find(args.n)
            run_dir, status, seconds = start(ex, root)
            print(say("started", lang, run=run_dir, seconds=seconds, status=status, n=ex.number))
        elif args.command == "hint":
            ex = find(args.n)
            progress = read_progress(ex, root)
            print(next_hint(ex, progress, "hints", lang))
            save_progress(ex, progress, root)
        elif args.command == "check":
            if args.fix is not None and args.diagnosis is None:
                raise ExerciseError("--fix needs --diagnosis <id>: name the failure it fixes")
            if args.diagnosis is None and args.last_good is None:
                raise ExerciseError("check needs --diagnosis <id> (and --fix), or --last-good <step>")
            ex, ok, lines = find(args.n), True, list[str]()
            if args.last_good is not None:
                ok, lines = check_last_good(ex, args.last_good, root, lang)
            if args.diagnosis is not None:
                right, more = check(ex, args.diagnosis, args.fix, root, lang)
                ok, lines = ok and right, [*lines, *more]
            print("\n".join(lines))
            return 0 if ok else 1
        elif args.command == "prepare":
            for ex in load_all():
                done = (read_run_info(mystery_dir(ex, root)) or {}).get("status") not in (None, "running")
                if done and not args.force:
                    print(f"{ex.id}: already there (--force reruns it)")
                    continue
                run_dir, status, seconds = start(ex, root)
                print(f"{ex.id}: {status} in {seconds:.0f} s -> {run_dir}")
        else:
            exercises = [find(n) for n in args.only] if args.only else load_all()
            rows = verify(exercises, root.parent / f"{root.name}-verify", args.quick)
            for r in rows:
                mark = "ok " if r["reproduces"] and r["fix_passes"] else "BAD"
                print(f"{mark} {r['exercise']:<28} start {r['start_s']:5.1f} s  found {r['found']}  fix: "
                      f"{'passes' if r['fix_passes'] else 'FAILS'} ({r['fix_bad'] or 'healthy'}, score "
                      f"{fmt(r['fix_score'], none='—')} vs bar {fmt(r['bar'])})")
            return 0 if all(r["reproduces"] and r["fix_passes"] for r in rows) else 1
    except ExerciseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        print("interrupted: run.json says so; metrics so far are kept", file=sys.stderr)
        return exit_code(stop)
    return 0


if __name__ == "__main__":
    handle_stops()  # the explorer's Stop (SIGINT) and a SIGTERM end a run as Ctrl-C does
    raise SystemExit(main())
