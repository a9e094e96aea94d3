"""The diagnosis engine: reads a run's metrics, applies the rules in `rules.yaml`, reports catalogue findings.

Rules are data: this module only interprets their small vocabulary (documented at the top of `rules.yaml`).
Thresholds are the metrics guide's; a task family's own values come only from `calibration.CALIBRATION`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from playground import failures
from playground.diagnose import catalogue
from playground.diagnose.calibration import FAMILIES, calibrated, family_band_status, has_band, ok_range
from playground.diagnose.conditions import Log, Node, Series, compile_condition, compile_series
from playground.metrics import canonicalize, fmt

RULES_PATH = Path(__file__).with_name("rules.yaml")
VERL_GRAD_CLIP = 1.0  # verl's default actor grad_clip, assumed for logs that do not say
SHORT_RUN = 5  # fewer score values than this: too short to tell whether the score rose
KINDS = ("point", "window", "trend", "run")
SHORTCUT_KEYS = ("actor/ppo_kl", "actor/pg_clipfrac", "actor/pg_clipfrac_lower")


@dataclass
class Finding:
    id: str
    severity: str  # info | warning | critical (failures.severity)
    first_step: int  # the first and last steps at which the rule held (a window's last step)
    last_step: int
    evidence: list[dict] = field(default_factory=list)  # {"metric", "step", "value", "range", "status"}
    explanation: dict = field(default_factory=dict)  # {"en", "zh"}
    fix: str = ""  # Hydra overrides, ready to paste ("" where the guide names no key)
    rule: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Diagnosis:
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)  # e.g. "entropy_collapse: too little data (3 steps, needs 5)"
    problems: list[str] = field(default_factory=list)  # reader problems, passed through
    family: str = "llm"
    source: str = ""
    steps: int = 0  # how many records were read

    def worst_severity(self) -> str | None:
        ranks = [failures.SEVERITY_ORDER.index(f.severity) for f in self.findings]
        return failures.SEVERITY_ORDER[max(ranks)] if ranks else None

    def ids(self) -> list[str]:
        return [f.id for f in self.findings]

    def to_dict(self) -> dict:
        return {"findings": [f.to_dict() for f in self.findings], "notes": list(self.notes),
                "problems": list(self.problems), "family": self.family, "source": self.source,
                "steps": self.steps, "worst_severity": self.worst_severity()}


# ---- rules --------------------------------------------------------------------------------------------------
@dataclass
class Rule:
    name: str
    id: str
    kind: str  # point | window | trend | run
    needs: list[Series]
    window: int
    min_steps: int
    after_step: int
    when: Node
    evidence: list[Series]


@functools.lru_cache(maxsize=1)
def _rules_file() -> dict:
    with open(RULES_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _thresholds(rule: Mapping[str, Any], family: str) -> dict[str, tuple[float, str]]:
    """name -> (value, how evidence writes it): the guide's value, or the family's calibrated one."""
    out = {}
    for name, guide in (rule.get("thresholds") or {}).items():
        entry = calibrated(family, rule["name"], name)
        if entry is None:
            out[name] = (float(guide), fmt(float(guide)))
        else:
            out[name] = (entry.value, f"{fmt(entry.value)} ({family} calibration; guide {fmt(float(guide))})")
    return out


@functools.lru_cache(maxsize=len(FAMILIES))
def rules(family: str) -> tuple[Rule, ...]:
    """The rules of `rules.yaml`, compiled with the family's thresholds."""
    data = _rules_file()
    defs = data.get("series", {})
    out = []
    for spec in data["rules"]:
        if spec["id"] not in failures.FAILURE_IDS:
            raise ValueError(f"rules.yaml: rule {spec['name']!r} reports unknown id {spec['id']!r}")
        kind = spec["kind"]
        if kind not in KINDS:
            raise ValueError(f"rules.yaml: rule {spec['name']!r} has kind {kind!r}: one of {KINDS}")
        window = int(spec.get("window", 1))
        thresholds = _thresholds(spec, family)
        when = compile_condition(spec["when"], defs, thresholds)
        out.append(Rule(
            name=spec["name"], id=spec["id"], kind=kind,
            needs=[compile_series(m, defs) for m in spec.get("metrics", [])], window=window,
            min_steps=int(spec.get("min_steps", window if kind == "trend" else 1)),
            after_step=int(spec.get("after_step", -1)), when=when,
            evidence=[compile_series(m, defs) for m in spec.get("evidence", [])]))
    return tuple(out)


def _windows(rule: Rule, log: Log, last_only: bool) -> tuple[list[list[int]], str | None]:
    """The index windows a rule is judged on, and a note when the log is too short for it."""
    def usable(i: int) -> bool:
        return log.steps[i] >= rule.after_step and all(s.value(log, i) is not None for s in rule.needs)

    if last_only and (log.n == 0 or not usable(log.n - 1)):
        return [], None
    if last_only:  # the watcher: only the newest window matters, so scan back just far enough
        relevant, want = [], max(rule.window, rule.min_steps)
        for i in range(log.n - 1, -1, -1):
            if usable(i):
                relevant.append(i)
                if len(relevant) == want:
                    break
        relevant.reverse()
    else:
        relevant = [i for i in range(log.n) if usable(i)]
    n = len(relevant)
    if n == 0:
        return [], None
    if n < rule.min_steps:
        return [], f"{rule.name}: too little data ({n} step{'s' * (n != 1)}, needs {rule.min_steps})"
    if n < rule.window:
        return [relevant], None
    starts = [n - rule.window] if last_only else range(n - rule.window + 1)
    return [relevant[s:s + rule.window] for s in starts], None


def evaluate(rule: Rule, log: Log, last_only: bool = False) -> tuple[list[list[int]], list[str]]:
    """The windows where the rule holds (each a list of record indices), and notes."""
    if rule.kind == "run":
        idx = [log.n - 1] if log.n else []
        return ([idx] if rule.when.over(log, idx) is True else []), []
    windows, note = _windows(rule, log, last_only)
    fired = [w for w in windows if rule.when.over(log, w) is True]
    notes = [note] if note else []
    if fired and len(fired[-1]) < rule.window and rule.kind != "point":
        n = len(fired[-1])
        notes.append(f"{rule.name}: judged on {n} step{'s' * (n != 1)} (its window is {rule.window})")
    return fired, notes


def _step_of(log: Log, idx: list[int]) -> int:
    return log.steps[idx[-1]] if idx else 0


def _extra_evidence(rule: Rule, log: Log, i: int, family: str, seen: set[str]) -> list[dict]:
    out = []
    for series in rule.evidence:
        metric = series.metric_name(log)
        value = series.value(log, i)
        if metric in seen or value is None:
            continue
        seen.add(metric)
        plain = metric == series.label
        out.append({"metric": metric, "step": log.steps[i], "value": value,
                    "range": ok_range(metric, family) if plain else series.describe(log),
                    "status": family_band_status(metric, value, family) if plain else None})
    return out


def _finding(finding_id: str, fired: list[tuple[Rule, list[list[int]]]], log: Log, family: str,
             config: Mapping[str, Any] | None) -> Finding:
    firsts = [_step_of(log, w[0]) for _, w in fired]
    lasts = [_step_of(log, w[-1]) for _, w in fired]
    evidence, seen = [], set()
    for rule, windows in fired:
        if windows[-1] or rule.kind == "run":
            for item in rule.when.evidence(log, windows[-1]):
                if item not in evidence:
                    seen.add(item["metric"])
                    evidence.append(item)
            if windows[-1]:
                evidence += _extra_evidence(rule, log, windows[-1][-1], family, seen)
    if failures.severity(finding_id) == "info":  # a state, not a failure: its thresholds are not "bad"
        for item in evidence:
            item["status"] = "ok" if item["status"] == "bad" else item["status"]
    names = [rule.name for rule, _ in fired]
    steps = catalogue.KL_IN_REWARD_FIX if names == ["kl_drift_reward"] else None
    return Finding(id=finding_id, severity=failures.severity(finding_id), first_step=min(firsts),
                   last_step=max(lasts), evidence=evidence, explanation=dict(catalogue.EXPLANATIONS[finding_id]),
                   fix=catalogue.render_fix(finding_id, family, config, steps), rule=", ".join(names))


# ---- the run's facts ---------------------------------------------------------------------------------------
def plain_config(config: Any) -> dict | None:
    """A resolved config as a plain dict (a DictConfig is converted)."""
    if config is None or isinstance(config, dict):
        return config
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(config, resolve=True)
    except Exception:  # noqa: BLE001 - e.g. ${hydra:...} outside a Hydra run: the plain values still serve
        return OmegaConf.to_container(config, resolve=False)


def resolve_family(family: str | None, info: Mapping | None, config: Mapping | None) -> str:
    for candidate in (family, (info or {}).get("family"), catalogue.config_value(config, "task.family")):
        if candidate in FAMILIES:
            return candidate
    return "llm"


def facts(info: Mapping | None, config: Mapping | None, family: str) -> dict:
    """What the rules may know about a run besides its metrics (run.json, then the config)."""
    info = dict(info or {})
    missing = catalogue.MISSING
    target = info.get("score_target", catalogue.config_value(config, "task.score_target"))
    clip = catalogue.config_value(config, "actor_rollout_ref.actor.grad_clip")
    if clip is missing:
        clip = info.get("grad_clip_actor", missing)
    assumed = clip is missing and family == "llm"  # verl logs do not print grad_clip
    if clip is missing:
        clip = VERL_GRAD_CLIP if assumed else None
    return {
        "score_target": None if target in (None, missing) else float(target),
        "max_entropy": info.get("max_entropy"),
        "action_space": info.get("action_space", "discrete"),
        "grad_clip": None if clip is None else float(clip),
        "grad_clip_assumed": assumed,
        "memory_limit_gb": info.get("memory_limit_gb"),
        "status": info.get("status"),
        "family": family,
        "score_metric": info.get("score_metric"),
    }


# ---- diagnosis ---------------------------------------------------------------------------------------------
def _healthy(log: Log, findings: list[Finding], notes: list[str]) -> Finding | None:
    """`healthy` when no warning or worse, and the score rose, is at its target, or the run is too short."""
    if log.n == 0 or any(f.severity != "info" for f in findings):
        return None
    score = compile_series("score", {})
    known = [i for i in range(log.n) if score.value(log, i) is not None]
    gap = compile_series("score_gap", {})
    evidence = [{"metric": score.metric_name(log), "step": log.steps[i], "value": score.value(log, i),
                 "range": "rises towards score_target", "status": "ok"} for i in dict.fromkeys(known[:1] + known[-1:])]
    if len(known) < SHORT_RUN:
        notes.append(f"healthy: too little data to tell whether the score rose ({len(known)} score value"
                     f"{'s' * (len(known) != 1)}, needs {SHORT_RUN})")
    else:
        rising = compile_condition({"rising": "score"}, {}, {}).over(log, known)
        last_gap = gap.value(log, known[-1])
        at_target = last_gap is not None and last_gap <= 0
        if not (rising or at_target):
            notes.append("no warning, but the score did not rise: not called healthy")
            return None
    first, last = log.steps[0], log.steps[-1]
    return Finding(id="healthy", severity="info", first_step=first, last_step=last, evidence=evidence,
                   explanation=dict(catalogue.EXPLANATIONS["healthy"]), fix="", rule="healthy")


def diagnose_log(log: Log, family: str, config: Mapping | None = None, notes: Sequence[str] = (),
                 problems: Sequence[str] = (), source: str = "") -> Diagnosis:
    """Apply every rule to a log already built (see `diagnose`)."""
    notes = list(notes)
    if log.facts.get("grad_clip_assumed") and "actor/grad_norm" in log.cols:
        notes.append(f"grad_clip is not in the log: verl's default {VERL_GRAD_CLIP} assumed")
    by_id: dict[str, list[tuple[Rule, list[list[int]]]]] = {}
    for rule in rules(family):
        fired, rule_notes = evaluate(rule, log)
        notes += rule_notes
        if fired:
            by_id.setdefault(rule.id, []).append((rule, fired))
    findings = [_finding(fid, fired, log, family, config) for fid, fired in by_id.items()]
    healthy = _healthy(log, findings, notes)
    if healthy is not None:
        findings.append(healthy)
    findings.sort(key=lambda f: (-failures.SEVERITY_ORDER.index(f.severity), f.first_step, f.id))
    return Diagnosis(findings=findings, notes=list(dict.fromkeys(notes)), problems=list(problems), family=family,
                     source=source, steps=log.n)


def diagnose(records: list[dict[str, float]], *, info: dict | None = None, family: str | None = None,
             config: Any = None) -> Diagnosis:
    """Diagnose one run's metrics.

    Args:
        records: one dict per step, the guide's names, each with `training/global_step`.
        info: the run's `run.json` (family, score_target, max_entropy, action_space, status, ...).
        family: gym | token | llm; default from `info`, then `config`, else "llm" (the guide's thresholds).
        config: the run's resolved config (dict or DictConfig), so that fixes name its current values.

    Returns:
        The findings (most severe first), notes on rules that had too little data, and the family used.
    """
    cfg = plain_config(config)
    fam = resolve_family(family, info, cfg)
    log = Log(facts(info, cfg, fam))
    for record in records:
        log.append(record)
    return diagnose_log(log, fam, cfg)


def findings_document(diagnosis: Diagnosis) -> dict:
    """What `findings.json` holds: the diagnosis, versioned and dated, less what it was read from (the run dir
    is where the file lies)."""
    document = {"version": 1, **diagnosis.to_dict()}
    del document["source"], document["steps"]
    document["diagnosed_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return document


def step_status(records: list[dict[str, float]], *, family: str | None = None,
                info: dict | None = None) -> dict[str, list[str | None]]:
    """Per metric with a range (the glossary's bands, or the family's calibrated ones): "ok"/"warn"/"bad"/None
    for each record; None where the metric is absent or not measurable (the on-policy shortcut)."""
    fam = resolve_family(family, info, None)
    keys = [k for k in dict.fromkeys(k for r in records for k in r) if has_band(k, fam)]
    out: dict[str, list[str | None]] = {k: [] for k in keys}
    for record in records:
        shortcut = record.get("actor/ppo_kl") == 0 and record.get("actor/pg_clipfrac") == 0
        for key in keys:
            value = record.get(key)
            skip = value is None or (shortcut and key in SHORTCUT_KEYS)
            out[key].append(None if skip else family_band_status(key, value, fam))
    return out


class FindingWatcher:
    """Tells the trainer when one finding appears (`trainer.stop_on_finding=<id>`).

    Each `update` judges only the windows ending at the new step, so it stays cheap on long runs;
    `healthy` (a verdict on the whole run) is re-diagnosed every `HEALTHY_EVERY` steps.
    """

    HEALTHY_EVERY = 10

    def __init__(self, finding_id: str, config: Any, info: dict | None = None):
        if finding_id not in failures.FAILURE_IDS:
            raise ValueError(f"unknown finding id {finding_id!r}: one of {failures.FAILURE_IDS}")
        self.finding_id = finding_id
        self.config = plain_config(config)
        self.family = resolve_family(None, info, self.config)
        self.log = Log(facts(info, self.config, self.family))
        self.rules = [r for r in rules(self.family) if r.id == finding_id and r.kind != "run"]
        self.found = False

    def update(self, record: Mapping[str, float]) -> bool:
        """Add one step's record; True once the finding has appeared."""
        if self.found:
            return True
        self.log.append(canonicalize(record))
        if self.finding_id == "healthy":
            if self.log.n % self.HEALTHY_EVERY == 0:
                self.found = "healthy" in diagnose_log(self.log, self.family, self.config).ids()
        else:
            self.found = any(evaluate(rule, self.log, last_only=True)[0] for rule in self.rules)
        return self.found


# ---- paths -------------------------------------------------------------------------------------------------
def _read_config(run_dir: Path) -> dict | None:
    """The run's `.hydra/config.yaml`, interpolations resolved where they can be."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    try:
        return plain_config(OmegaConf.load(path))
    except Exception:  # noqa: BLE001 - an unreadable config only costs the fixes their current values
        return None


def diagnose_run_dir(run_dir: str | Path, *, family: str | None = None, config: Any = None,
                     write: bool = True) -> Diagnosis:
    """Diagnose a run dir (`metrics.jsonl`, `run.json`, `.hydra/config.yaml`) and write its `findings.json`.

    Args:
        config: the run's config when the caller has it (the trainer); default: `.hydra/config.yaml`.
    """
    from playground.runs import METRICS, read_metrics_jsonl, read_run_info, write_findings

    run_dir = Path(run_dir)
    metrics = run_dir / METRICS
    read = read_metrics_jsonl(metrics) if metrics.is_file() else None
    info = read_run_info(run_dir)
    records, problems = (read.records, read.problems) if read else ([], [f"{run_dir}: no {METRICS} yet"])
    config = plain_config(config) if config is not None else _read_config(run_dir)
    diagnosis = diagnose(records, info=info, family=family, config=config)
    diagnosis.problems, diagnosis.source = problems, str(run_dir)
    if write:
        write_findings(run_dir, findings_document(diagnosis))
    return diagnosis


def diagnose_read(read, *, family: str | None = None) -> Diagnosis:
    """Diagnose a `LogRead` from any reader; a console log that reports an out-of-memory error counts as `oom`."""
    info = {"status": "oom"} if read.out_of_memory else None
    diagnosis = diagnose(read.records, info=info, family=family)
    diagnosis.problems, diagnosis.source = list(read.problems), read.source
    if info:
        diagnosis.notes.append("the log reports an out-of-memory error")
    return diagnosis


def diagnose_path(path: str | Path, *, family: str | None = None) -> list[tuple[str, Diagnosis]]:
    """Diagnose whatever `path` is (`readers.path_kind`): a run dir (also writes its `findings.json`), a multirun dir
    (every run under it), a `metrics.jsonl`, a TensorBoard dir or event file, or a verl console log.

    Raises:
        FileNotFoundError: nothing at `path`.
    """
    from playground.diagnose.readers import path_kind, read_any
    from playground.runs import find_runs

    path = Path(path)
    if path_kind(path) in ("run", "runs"):  # a run's metrics.jsonl means its run dir
        runs = find_runs([path.parent if path.is_file() else path])
        return [(str(run), diagnose_run_dir(run, family=family)) for run in runs]
    read = read_any(path)
    return [(read.source or str(path), diagnose_read(read, family=family))]
