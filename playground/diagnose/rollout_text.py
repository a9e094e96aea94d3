"""What a rollout dump's text shows that the logged scalars cannot (`rollout_dump` reads the dump): a group whose
samples are one text, garbage that loops to the end of a response, a format with no answer in it, empty responses.

Each check is judged per step on the share of the step's samples (or groups) it flags; a step at or above the
check's share is a finding under the catalogue id whose mechanism it is, with the step's flagged sample indices in
its evidence (`samples`: their places in the step's file, `rollout_dump`), so that a reader can open them.

The thresholds (the `CHECKS` table) are stated with their reasoning: no public rollout dump was found to measure them
on (outside the sources kept out of the doctor's calibration), so none is tuned to a log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from playground import failures
from playground.diagnose import catalogue, causes
from playground.diagnose.engine import Report
from playground.diagnose.finding import Finding
from playground.diagnose.rollout_dump import RolloutDump, score_of

# A degenerate tail: the response (trailing whitespace dropped) ends in one unit of at most MAX_UNIT characters
# repeated back to back, over at least MIN_LOOP_CHARS characters and MIN_LOOP_REPEATS repeats ("!!!!…", "the the
# the …", "\\n\\n1. 1. 1. …"). The end, because a generation caught in a loop runs to the length cap and verl's dump
# keeps the truncated text: a separator line ("=====") or a number inside an answer is not at its end. 32 characters
# of one character is past any separator of a Markdown or code answer that ends a response; 16 repeats of a longer unit
# is a loop, not a list. Loops whose unit is longer than MAX_UNIT (a whole paragraph) are not caught.
MAX_UNIT = 64
MIN_LOOP_CHARS = 32
MIN_LOOP_REPEATS = 16
# The tags that hold reasoning, not the answer (DeepSeek-R1's <think>, and its common spellings)
REASONING_TAGS = ("think", "thinking", "reasoning", "reason", "thought")
_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)>")
_BOXED = re.compile(r"\\boxed\{(.*?)\}", re.S)
_HASHES = re.compile(r"####[ \t]*(\S+)")  # GSM8K's final answer


def looping_tail(text: str) -> tuple[str, int] | None:
    """The unit a response ends by repeating and how many times (None: no degenerate tail), smallest unit first."""
    s = text.rstrip()
    window = s[-(MAX_UNIT + 1):]  # a unit of `size` characters repeats the last one `size` characters before it
    for size in sorted({len(window) - 1 - i for i, c in enumerate(window[:-1]) if c == window[-1]}):
        count = max(-(-MIN_LOOP_CHARS // size), MIN_LOOP_REPEATS if size > 1 else 1)
        if len(s) < count * size:
            break
        unit = s[-size:]
        if s[-2 * size:-size] != unit or not unit.strip() or s[-count * size:] != unit * count:
            continue
        start = len(s) - count * size
        while start >= size and s[start - size:start] == unit:
            start, count = start - size, count + 1
        return unit, count
    return None


def format_without_answer(text: str) -> bool:
    """A response that carries a format (a closed reasoning tag, or a tag pair) and no answer in it: every answer
    part empty: the text of each tag pair that is not reasoning, `\\boxed{…}`, GSM8K's `#### …`, and what follows the
    last closed reasoning tag once tags and those markers are taken out (R1's format answers there in prose, and a
    code answer's own tags are not its format). A response cut off inside a tag (the length cap) is not one: its
    answer was never reached."""
    tags = _TAG.findall(text)
    if not tags:
        return False
    opened = [name.lower() for slash, name in tags if not slash]
    closed = [name.lower() for slash, name in tags if slash]
    if any(opened.count(name) > closed.count(name) for name in set(opened)):
        return False  # cut off inside a tag
    answer_tags = {name for name in closed if name not in REASONING_TAGS}
    parts = [m.group(2) for name in answer_tags
             for m in re.finditer(rf"<({re.escape(name)})>(.*?)</{re.escape(name)}>", text, re.S | re.I)]
    parts += _BOXED.findall(text) + _HASHES.findall(text)
    ends = [m.end() for m in _TAG.finditer(text) if m.group(1) and m.group(2).lower() in REASONING_TAGS]
    if ends:
        parts.append(_TAG.sub("", _HASHES.sub("", _BOXED.sub("", text[max(ends):]))))
    elif not closed:
        return False  # opening tags only: no format it knows
    return not any(part.strip() for part in parts)


@dataclass(frozen=True)
class TextCheck:
    """One check: which samples it flags at a step, the share of them that makes a finding, and its words."""

    name: str  # the finding's rule
    finding_id: str
    min_share: float
    unit: str  # what the share counts: "samples" or "groups"
    flagged: Callable[[list[dict], float | None], list[int]]  # (the step's samples, the dump's best score) -> indices
    signature: dict[str, str]  # {en, zh}, formatted with share, flagged, total, step


def _each(test: Callable[[str], object]) -> Callable[[list[dict], float | None], list[int]]:
    return lambda samples, _best: [i for i, s in enumerate(samples) if test(s["output"])]


def groups(samples: list[dict]) -> list[list[int]]:
    """The step's groups of two samples or more: the samples that share an `input` (one prompt's rollout.n)."""
    by_input: dict[str, list[int]] = {}
    for i, sample in enumerate(samples):
        by_input.setdefault(str(sample.get("input", "")), []).append(i)
    return [members for members in by_input.values() if len(members) > 1]


def repeated_groups(samples: list[dict], best: float | None) -> list[list[int]]:
    """The groups whose samples are one text (whitespace at the ends aside) that scored below the dump's best: a
    prompt the policy answers one way, and not with the best answer it has (a solved prompt answered alike is
    health)."""
    out = []
    for members in groups(samples):
        texts = {samples[i]["output"].strip() for i in members}
        scores = [s for i in members if (s := score_of(samples[i])) is not None]
        unsolved = best is None or not scores or sum(scores) / len(scores) < best
        if len(texts) == 1 and unsolved:
            out.append(members)
    return out


def _paid_format_only(samples: list[dict], _best: float | None) -> list[int]:
    """Format without an answer, where the reward pays for it (its mean score above 0): reward hacking's mechanism."""
    hits = [i for i, s in enumerate(samples) if format_without_answer(s["output"])]
    scores = [s for i in hits if (s := score_of(samples[i])) is not None]
    return hits if scores and sum(scores) / len(scores) > 0 else []


# A quarter of a step's samples for the sample checks: the catalogue's degenerate_rollout is a collapse of the whole
# batch (verl #721: every response "!!!!"), while a healthy small model loops at its length cap on a few responses
# (what DAPO's overlong filtering is for): a quarter is far above the latter, and the former passes it within a step
# or two. Half of the groups for a group's one text: verl samples at temperature 1, where a group of n alike
# responses means a policy deterministic on that prompt; overly_deterministic is the policy so on most prompts.
CHECKS = (
    TextCheck("dump_degenerate_text", "degenerate_rollout", 0.25, "samples", _each(looping_tail), {
        "en": "{flagged} of the {total} responses at step {step} ({share}) end in one character or phrase repeated "
              "to the end (a loop to the length cap): garbage that the scalars show only as long responses.",
        "zh": "第 {step} 步的 {total} 个响应中有 {flagged} 个（{share}）以同一个字符或短语反复重复结尾"
              "（一直循环到长度上限）：这种乱码在标量指标里只表现为响应变长。"}),
    TextCheck("dump_empty_output", "degenerate_rollout", 0.25, "samples", _each(lambda text: not text.strip()), {
        "en": "{flagged} of the {total} responses at step {step} ({share}) are empty: the policy ends at once (its "
              "end token first), or the decoding drops all it wrote (special tokens only).",
        "zh": "第 {step} 步的 {total} 个响应中有 {flagged} 个（{share}）为空：策略一开始就结束（先输出结束符），"
              "或解码丢掉了它写的全部内容（只有特殊 token）。"}),
    TextCheck("dump_format_without_answer", "reward_hacking", 0.25, "samples", _paid_format_only, {
        "en": "{flagged} of the {total} responses at step {step} ({share}) carry the format (a closed <think>, an "
              "answer tag) with no answer in it, and the reward pays them (mean score above 0): the policy is paid for "
              "the format, not the task.",
        "zh": "第 {step} 步的 {total} 个响应中有 {flagged} 个（{share}）具备格式（闭合的 <think>、答案标签）"
              "却没有答案，而奖励仍给它们分（平均分大于 0）：策略得分靠的是格式，而不是任务。"}),
    TextCheck("dump_group_one_text", "overly_deterministic", 0.5, "groups",
              lambda samples, best: [i for g in repeated_groups(samples, best) for i in g], {
        "en": "{flagged} of the {total} groups at step {step} ({share}) answer their prompt with one text in every "
              "sample, below the run's best score: the policy samples one response where it should explore.",
        "zh": "第 {step} 步的 {total} 个组中有 {flagged} 个（{share}）的每个样本都是同一段文本，"
              "且分数低于本次运行的最好分数：策略只会采样出一种回答，不再探索。"}),
)
MAX_EVIDENCE_STEPS = 10  # the first and last five steps at which a check held: a finding's evidence stays readable
MAX_SAMPLES = 32  # flagged sample indices kept per step


def _share(check: TextCheck, samples: list[dict], best: float | None) -> tuple[int, int, list[int]]:
    """(flagged, total, flagged sample indices) at one step, counted in the check's unit."""
    hits = check.flagged(samples, best)
    if check.unit == "groups":
        flagged_groups = sum(1 for g in groups(samples) if set(g) <= set(hits))
        return flagged_groups, len(groups(samples)), hits
    return len(hits), len(samples), hits


def dump_findings(dump: RolloutDump, family: str = "llm") -> tuple[list[Finding], list[str]]:
    """The dump's findings, one per check that held at a step, and notes (what a check saw below its share)."""
    scores = [s for samples in dump.steps.values() for sample in samples if (s := score_of(sample)) is not None]
    best = max(scores) if scores else None
    findings, notes = [], []
    for check in CHECKS:
        held = []
        for step in dump.step_numbers():
            flagged, total, hits = _share(check, dump.steps[step], best)
            if total and flagged and flagged / total >= check.min_share:
                held.append((step, flagged, total, hits))
        if not held:
            continue
        shown = held if len(held) <= MAX_EVIDENCE_STEPS else held[:5] + held[-5:]
        evidence = [{"metric": f"rollout_dump/{check.name.removeprefix('dump_')}", "step": step,
                     "value": flagged / total, "range": f">= {check.min_share:g} of {check.unit}",
                     "status": "bad", "samples": hits[:MAX_SAMPLES]} for step, flagged, total, hits in shown]
        step, flagged, total, _ = held[0]
        words = {lang: text.format(flagged=flagged, total=total, step=step, share=f"{flagged / total:.0%}")
                 for lang, text in check.signature.items()}
        reason = catalogue.explanation(check.finding_id)
        findings.append(Finding(
            id=check.finding_id, severity=failures.severity(check.finding_id), first_step=held[0][0],
            last_step=held[-1][0], evidence=evidence, explanation={k: f"{words[k]} {reason[k]}" for k in words},
            fix=catalogue.render_fix(check.finding_id, family), rule=check.name,
            alternatives=catalogue.alternatives(check.finding_id, family)))
        if len(held) > len(shown):
            notes.append(f"{check.name}: held at {len(held)} steps; the evidence shows the first and last five")
    return findings, notes


def add_to_report(report: Report, dump: RolloutDump) -> None:
    """Add the dump's findings to a log's report (`engine.Report`): regrouped, a `healthy` verdict withdrawn where
    the text shows a problem (the scalars alone looked healthy), and the dump's read named in `rollout_dump`."""
    found, notes = dump_findings(dump, report.family)
    if any(f.severity != "info" for f in found) and "healthy" in report.ids():
        report.findings = [f for f in report.findings if f.id != "healthy"]
        notes.append("healthy withdrawn: the metrics looked healthy, the rollout dump's text does not")
    report.findings = sorted([*report.findings, *found],
                             key=lambda f: (-failures.SEVERITY_ORDER.index(f.severity), f.first_step, f.id))
    report.diagnoses = causes.group(report.findings)
    report.notes += notes
    report.problems += [f"{dump.source}: {p}" for p in dump.problems]
    report.rollout_dump = {"dir": dump.source, "steps": dump.step_numbers(), "samples": dump.sample_count()}


def dump_report(dump: RolloutDump, family: str = "llm") -> Report:
    """A report of the dump alone (no metrics log beside it): its steps are the dumped ones."""
    report = Report(findings=[], family=family, source=dump.source, steps=len(dump.steps))
    add_to_report(report, dump)
    report.notes.append("the rollout dump's text alone was judged: diagnose the run's log with --rollout-dir DIR "
                        "for its metrics too")
    return report
