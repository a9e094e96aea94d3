"""The diagnosis as text for people (English or Chinese) and as one JSON document for tools."""

from __future__ import annotations

import json
from collections.abc import Sequence

from playground import failures
from playground.diagnose.engine import Diagnosis, findings_document
from playground.metrics import fmt
from playground.runs import jsonable

LABELS: dict[str, dict[str, str]] = {
    "en": {"header": "== {source} (family {family}, {steps} steps)", "none": "no findings", "worst": "worst",
           "status": "status", "steps": "steps {range}", "step": "step {range}", "at": "at step {step}",
           "rule": "rule", "why": "why", "fix": "fix", "no_fix": "(no config key: see why)", "notes": "notes",
           "problems": "could not read"},
    "zh": {"header": "== {source}（任务类型 {family}，{steps} 步）", "none": "没有发现问题", "worst": "最严重",
           "status": "状态", "steps": "第 {range} 步", "step": "第 {range} 步", "at": "第 {step} 步",
           "rule": "规则", "why": "原因", "fix": "修复", "no_fix": "（没有对应的配置项，见原因）", "notes": "说明",
           "problems": "无法读取"},
}
SEVERITY_WORDS = {"en": {"info": "info", "warning": "warning", "critical": "critical"},
                  "zh": {"info": "信息", "warning": "警告", "critical": "严重"}}


def _status_line(diagnosis: Diagnosis, lang: str) -> str:
    words, label = SEVERITY_WORDS[lang], LABELS[lang]
    counts = {s: sum(f.severity == s for f in diagnosis.findings) for s in failures.SEVERITY_ORDER}
    parts = [f"{counts[s]} {words[s]}" for s in reversed(failures.SEVERITY_ORDER) if counts[s]]
    worst = diagnosis.worst_severity()
    found = ", ".join(parts) if parts else label["none"]
    tail = f" ({label['worst']}: {words[worst]})" if worst else ""
    return f"{label['status']}: {found}{tail}"


def format_diagnosis(source: str, diagnosis: Diagnosis, lang: str = "en") -> str:
    """One source's report: a status line, then each finding with its evidence, cause and fix."""
    label, words = LABELS[lang], SEVERITY_WORDS[lang]
    lines = [label["header"].format(source=source, family=diagnosis.family, steps=diagnosis.steps),
             _status_line(diagnosis, lang)]
    for f in diagnosis.findings:
        title = failures.TITLES.get(f.id, {}).get(lang, f.id)
        one = f.first_step == f.last_step
        steps = label["step" if one else "steps"].format(range=f.first_step if one else f"{f.first_step}-{f.last_step}")
        lines.append(f"[{words[f.severity]}] {f.id}: {title}, {steps} ({label['rule']} {f.rule})")
        for item in f.evidence:
            status = f" [{item['status']}]" if item.get("status") else ""
            rng = f": {item['range']}" if item.get("range") else ""
            at = label["at"].format(step=item["step"])
            lines.append(f"    {item['metric']} = {fmt(item['value'])} ({at}){rng}{status}")
        lines.append(f"    {label['why']}: {f.explanation.get(lang) or f.explanation.get('en', '')}")
        if f.severity != "info" or f.fix:
            lines.append(f"    {label['fix']}: {f.fix or label['no_fix']}")
    for title, items in ((label["notes"], diagnosis.notes), (label["problems"], diagnosis.problems)):
        if items:
            lines.append(f"{title}:")
            lines += [f"  - {item}" for item in items]
    return "\n".join(lines)


def format_report(results: Sequence[tuple[str, Diagnosis]], lang: str = "en") -> str:
    return "\n\n".join(format_diagnosis(source, d, lang) for source, d in results)


def json_document(results: Sequence[tuple[str, Diagnosis]]) -> dict:
    """Every source's `findings.json` content, with its source and step count, in one document."""
    return {"version": 1, "results": [
        {"source": source, "steps": d.steps, **findings_document(d)} for source, d in results]}


def dumps(results: Sequence[tuple[str, Diagnosis]]) -> str:
    return json.dumps(jsonable(json_document(results)), ensure_ascii=False, indent=1, allow_nan=False)
