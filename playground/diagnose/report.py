"""The diagnosis as text for people (English or Chinese) and as one JSON document for tools."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from playground import failures
from playground.diagnose import injected, onset
from playground.diagnose.engine import Finding, Report, findings_document
from playground.diagnose.skipped import skipped_line
from playground.metrics import fmt
from playground.rundir.runs import jsonable

LABELS: dict[str, dict[str, str]] = {
    "en": {"header": "== {source} (family {family}, {steps})", "n_steps": "{n} steps", "one_step": "1 step",
           "none": "no findings", "worst": "worst",
           "status": "status", "steps": "steps {range}", "step": "step {range}", "at": "at step {step}",
           "rule": "rule", "why": "why", "fix": "fix", "no_fix": "(no config key: see why)", "notes": "notes",
           "problems": "could not read", "root": "root cause", "because": "a consequence of {root}",
           "ruled_out": "checked and ruled out", "or": "or try",
           "none_ruled_out": "nothing: the checks' metrics are not in the log",
           "low_confidence": "low confidence: read from wandb's sparklines, not from the logged numbers",
           "inconclusive": "inconclusive: too few steps for a verdict (see below)", "severity": "severity",
           "when": "steps", "broke": "what broke this run", "in_verl": "in a verl run",
           "lever": "in verl", "in_code": "in your code", "onset": "since step", "artifact": "read with care",
           "samples": "samples", "dump": "rollout dump: {dir} ({steps}, {samples} samples)"},
    "zh": {"header": "== {source}（任务类型 {family}，{steps}）", "n_steps": "{n} 步", "one_step": "1 步",
           "none": "没有发现问题", "worst": "最严重",
           "status": "状态", "steps": "第 {range} 步", "step": "第 {range} 步", "at": "第 {step} 步",
           "rule": "规则", "why": "原因", "fix": "修复", "no_fix": "（没有对应的配置项，见原因）", "notes": "说明",
           "problems": "无法读取", "root": "根因", "because": "由 {root} 引起",
           "ruled_out": "已检查并排除", "or": "也可以试", "none_ruled_out": "无：日志中没有这些检查所需的指标",
           "low_confidence": "置信度低：依据 wandb 的 sparkline 形状，而不是记录的数值",
           "inconclusive": "无法判断：步数太少，不足以下结论（见下）", "severity": "严重程度", "when": "步",
           "broke": "本次运行的故障来源", "in_verl": "在 verl 运行中", "lever": "在 verl 中",
           "in_code": "在你的代码中", "onset": "起始步", "artifact": "解读提示", "samples": "样本",
           "dump": "rollout 转储：{dir}（{steps}，{samples} 个样本）"},
}
# the `--json` document's schema (report.schema.json, shipped beside this module) and its MAJOR.MINOR version
SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
SCHEMA_VERSION = "1.0"
SEVERITY_WORDS = {"en": {"info": "info", "warning": "warning", "critical": "critical"},
                  "zh": {"info": "信息", "warning": "警告", "critical": "严重"}}


def _steps(n: int, lang: str) -> str:
    """"1 step", "2 steps" (Chinese has one form)."""
    return LABELS[lang]["one_step"] if n == 1 else LABELS[lang]["n_steps"].format(n=n)


def _status_line(report: Report, lang: str) -> str:
    words, label = SEVERITY_WORDS[lang], LABELS[lang]
    counts = {s: sum(f.severity == s for f in report.findings) for s in failures.SEVERITY_ORDER}
    parts = [f"{counts[s]} {words[s]}" for s in reversed(failures.SEVERITY_ORDER) if counts[s]]
    worst = report.worst_severity()
    if worst == "info" and "inconclusive" in report.ids():  # no verdict: say so first, not "1 info"
        return f"{label['status']}: {label['inconclusive']}"
    found = ", ".join(parts) if parts else label["none"]
    tail = f" ({label['worst']}: {words[worst]})" if worst else ""
    return f"{label['status']}: {found}{tail}"


def cause_lines(causes: Sequence[Mapping[str, Any]], lang: str, quote: str = "`") -> list[str]:
    """What broke the run, apart from the fix: one line per injected knob (a finding's `injected`: the knob's
    override, `reward.noise_std=3.0`, and what it stands for in a verl run)."""
    label = LABELS[lang]
    return [f"{label['broke']}: {quote}{injected.knob(c)}{quote} ({label['in_verl']}: {c['verl'][lang]})"
            for c in causes]


def lever_lines(levers: Sequence[Mapping[str, Any]], causes: Sequence[Mapping[str, Any]], lang: str,
                quote: str = "`") -> list[str]:
    """The fix as a verl user pulls it: its playground keys in verl (a finding's `levers`), then what to change in
    the user's code where the only cure is removing the cause (an injected knob's `remedy`)."""
    label = LABELS[lang]
    return ([f"{label['lever']}: {quote}{lever['key']}{quote}: {lever['verl'][lang]}" for lever in levers]
            + [f"{label['in_code']}: {c['remedy'][lang]}" for c in causes if c.get("remedy")])


def artifact_lines(f: Finding, lang: str) -> list[str]:
    """What the finding's evidence leans on (its `artifacts`), one line each: the note and its reference."""
    return [f"{LABELS[lang]['artifact']}: {note[lang]} ({note['reference']})" for note in f.artifacts]


def _samples(item: Mapping[str, Any], lang: str) -> str:
    """A rollout dump's evidence: the step's samples behind it (their places in the step's file), else ""."""
    samples = item.get("samples")
    return f"; {LABELS[lang]['samples']} {', '.join(map(str, samples))}" if samples else ""


def _dump_line(report: Report, lang: str) -> str | None:
    dump = report.rollout_dump
    if not dump:
        return None
    return LABELS[lang]["dump"].format(dir=dump["dir"], steps=_steps(len(dump["steps"]), lang), samples=dump["samples"])


def _finding_lines(f: Finding, lang: str, indent: str, cause: str | None) -> list[str]:
    label, words = LABELS[lang], SEVERITY_WORDS[lang]
    title = failures.TITLES.get(f.id, {}).get(lang, f.id)
    one = f.first_step == f.last_step
    steps = label["step" if one else "steps"].format(range=f.first_step if one else f"{f.first_step}-{f.last_step}")
    head = f"{label['root']}: " if cause is None and f.severity != "info" else ""
    tail = f"; {label['because'].format(root=cause)}" if cause else ""
    since = onset.since_text(f, lang)
    lines = [f"{indent}[{words[f.severity]}] {head}{f.id}: {title}, {steps}, {since} ({label['rule']} {f.rule}{tail})"]
    if f.confidence == "low":
        lines.append(f"{indent}    ({label['low_confidence']})")
    for item in f.evidence:
        status = f" [{item['status']}]" if item.get("status") else ""
        rng = f": {item['range']}" if item.get("range") else ""
        at = label["at"].format(step=item["step"])
        lines.append(f"{indent}    {item['metric']} = {fmt(item['value'])} ({at}){rng}{status}{_samples(item, lang)}")
    lines += [f"{indent}    {line}" for line in artifact_lines(f, lang)]
    lines.append(f"{indent}    {label['why']}: {f.explanation.get(lang) or f.explanation.get('en', '')}")
    lines += [f"{indent}    {line}" for line in cause_lines(f.injected, lang, "")]
    if f.severity != "info" or f.fix:
        lines.append(f"{indent}    {label['fix']}: {f.fix or label['no_fix']}")
    lines += [f"{indent}    {line}" for line in lever_lines(f.levers, f.injected, lang, "")]
    for alt in f.alternatives:
        lines.append(f"{indent}    {label['or']}: {alt['fix']}  ({alt['reference']})")
    return lines


def format_diagnosis(source: str, report: Report, lang: str = "en") -> str:
    """One source's report: a status line, then each diagnosis, its root cause first and the consequences it explains
    indented under it, each with its evidence, cause and fix; the §11.2 checks ruled out; notes."""
    label = LABELS[lang]
    lines = [label["header"].format(source=source, family=report.family, steps=_steps(report.steps, lang)),
             _status_line(report, lang)]
    if dump := _dump_line(report, lang):
        lines.append(dump)
    if good := onset.last_good_line(report.last_good, lang):
        lines.append(good)
    for diagnosis in report.diagnoses:
        lines += _finding_lines(diagnosis.root, lang, "", None)
        for consequence in diagnosis.consequences:
            lines += _finding_lines(consequence, lang, "    ", diagnosis.root.id)
    if report.steps:
        checks = ", ".join(check["title"][lang] for check in report.ruled_out) or label["none_ruled_out"]
        lines.append(f"{label['ruled_out']}: {checks}")
    for title, items in ((label["notes"], _notes(report)), (label["problems"], report.problems)):
        if items:
            lines.append(f"{title}:")
            lines += [f"  - {item}" for item in items]
    return "\n".join(lines)


def _notes(report: Report) -> list[str]:
    """The report's notes, and one line for the rules that lacked an input (where any step was read)."""
    line = skipped_line(report.skipped_rules) if report.steps else None
    return [*report.notes, line] if line else list(report.notes)


def format_report(results: Sequence[tuple[str, Report]], lang: str = "en") -> str:
    return "\n\n".join(format_diagnosis(source, d, lang) for source, d in results)


def json_document(results: Sequence[tuple[str, Report]]) -> dict:
    """Every source's `findings.json` content, with its source and step count, in one document (its schema:
    report.schema.json)."""
    return {"schema_version": SCHEMA_VERSION, "version": 1, "results": [
        {"source": source, "steps": d.steps, **findings_document(d)} for source, d in results]}


def dumps(results: Sequence[tuple[str, Report]]) -> str:
    return json.dumps(jsonable(json_document(results)), ensure_ascii=False, indent=1, allow_nan=False)


def _md(text: str) -> str:
    """A table cell: pipes escaped, lines joined."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_markdown(source: str, report: Report, lang: str = "en") -> str:
    """One source's report as Markdown, to paste into an issue or a PR: the status, a table of the diagnoses (root,
    severity, steps, fix), then each root's evidence, cause and consequences, the checks ruled out and the notes."""
    label, words = LABELS[lang], SEVERITY_WORDS[lang]
    status = _status_line(report, lang)
    lines = [f"## {_md(source)}", "", f"{report.family} · {_steps(report.steps, lang)} · {status}", ""]
    if dump := _dump_line(report, lang):
        lines += [_md(dump), ""]
    if good := onset.last_good_line(report.last_good, lang):
        lines += [f"**{good}**", ""]
    if report.diagnoses:
        lines += [f"| {label['root']} | {label['severity']} | {label['when']} | {label['onset']} | {label['fix']} |",
                  "|---|---|---|---|---|"]
        for d in report.diagnoses:
            f = d.root
            title = failures.TITLES.get(f.id, {}).get(lang, f.id)
            fix = f"`{f.fix}`" if f.fix else "–"
            lines.append(f"| **{f.id}**: {_md(title)} | {words[f.severity]} | {f.first_step}-{f.last_step} | "
                         f"{f.onset_step} | {_md(fix)} |")
        lines.append("")
    for d in report.diagnoses:
        f = d.root
        lines += [f"### {f.id}", "", f.explanation.get(lang) or f.explanation.get("en", ""), ""]
        for item in f.evidence:
            rng = f": {item['range']}" if item.get("range") else ""
            lines.append(f"- `{item['metric']}` = {fmt(item['value'])} ({label['at'].format(step=item['step'])})"
                         f"{_md(rng)}{_samples(item, lang)}")
        lines += [f"- {_md(line)}" for line in artifact_lines(f, lang)]
        lines += [f"- {_md(line)}" for line in cause_lines(f.injected, lang)]
        lines += [f"- {_md(line)}" for line in lever_lines(f.levers, f.injected, lang)]
        for alt in f.alternatives:
            lines.append(f"- {label['or']}: `{alt['fix']}` ({alt['reference']})")
        if d.consequences:  # "`a`, `b`: a consequence of <root>"
            lines.append("- " + ", ".join(f"`{c.id}`" for c in d.consequences) + ": "
                         + label["because"].format(root=f.id))
        lines.append("")
    if report.steps:
        checks = ", ".join(check["title"][lang] for check in report.ruled_out) or label["none_ruled_out"]
        lines += [f"**{label['ruled_out']}**: {checks}", ""]
    for title, items in ((label["notes"], _notes(report)), (label["problems"], report.problems)):
        if items:
            lines += [f"**{title}**", "", *[f"- {item}" for item in items], ""]
    return "\n".join(lines).rstrip() + "\n"
