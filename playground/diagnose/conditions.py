"""The interpreter of the rule vocabulary in `rules.yaml`: step predicates and window conditions over series.

`FORMS` is the vocabulary: each condition form, how a rule writes it, what it means (rules.yaml's header says it,
grammar.py) and how it is built; the trend operators are trends.py's, the whole-series shapes shapes.py's.
`compile_condition` turns a rule's YAML into objects evaluated on a run's `Log` (log.py), rejecting a form or key it
does not know; the series they read are `series.py`'s (`compile_series`, `Series`, re-exported here). Unknown values
stay unknown (None) through three-valued logic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from playground.diagnose.log import Log
from playground.diagnose.node import Form, Node, form_of
from playground.diagnose.series import Series, compile_series
from playground.diagnose.shapes import FallsFromPeak, Logged, Plateau, SourceFalls, Spikes
from playground.diagnose.trends import TRENDS, Trend, TrendOp
from playground.diagnose.tunables import TUNABLES
from playground.metrics import fmt

__all__ = ["Node", "Series", "compile_condition", "compile_series"]

_OPS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "lt": ("<", lambda a, b: a < b), "le": ("<=", lambda a, b: a <= b), "gt": (">", lambda a, b: a > b),
    "ge": (">=", lambda a, b: a >= b), "eq": ("==", lambda a, b: a == b),
}


# ---- conditions ------------------------------------------------------------------------------------------
def _all(values: Iterable[bool | None]) -> bool | None:
    """Three-valued AND: False wins, then unknown (None), then True."""
    seen_unknown = False
    for v in values:
        if v is False:
            return False
        seen_unknown |= v is None
    return None if seen_unknown else True


def _negate(value: bool | None) -> bool | None:
    return None if value is None else not value


def _any(values: Iterable[bool | None]) -> bool | None:
    """Three-valued OR, by De Morgan: True wins, then unknown, then False."""
    return _negate(_all(_negate(v) for v in values))


class Leaf(Node):
    def __init__(self, series: Series, op: str, value: float, text: str, missing: bool | None):
        self.series, self.op, self.value, self.text, self.missing = series, op, value, text, missing

    def at(self, log: Log, i: int) -> bool | None:
        key = (self, i)
        if key not in log.memo:
            v = self.series.value(log, i)
            log.memo[key] = self.missing if v is None else _OPS[self.op][1](v, self.value)
        return log.memo[key]

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        i = idx[-1]
        v = self.series.value(log, i)
        if v is None:
            return []
        holds = self.at(log, i)
        metric = self.series.metric_name(log)
        raw = log.get(metric, i)
        text = f"{self.series.label_for(log)} {_OPS[self.op][0]} {self.text}"
        if raw is None or abs(v - raw) > 1e-12 * max(1.0, abs(raw)):  # derived: show the value judged too
            text += f" (here {fmt(v)})"
        return [{"metric": metric, "step": log.steps[i], "value": v if raw is None else raw, "range": text,
                 "status": None if holds is None else ("bad" if holds else "ok")}]


class MetricSet(Node):
    """{nonfinite: [...]}: one is NaN/Inf; {finite: [...]}: every one logged is finite; {zero: [...]}: all exactly 0.
    None where none is logged, unless `missing` says what to assume."""

    def __init__(self, kind: str, metrics: list[str], missing: bool | None = None):
        self.kind, self.metrics, self.missing = kind, metrics, missing

    def at(self, log: Log, i: int) -> bool | None:
        values = [v for m in self.metrics if (v := log.get(m, i)) is not None]
        if not values:
            return self.missing
        if self.kind == "nonfinite":
            return any(not math.isfinite(v) for v in values)
        if self.kind == "finite":
            return all(math.isfinite(v) for v in values)
        return len(values) == len(self.metrics) and all(v == 0 for v in values)

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        if self.kind != "nonfinite":
            return []
        i = idx[-1]
        return [{"metric": m, "step": log.steps[i], "value": v, "range": "finite", "status": "bad"}
                for m in self.metrics if (v := log.get(m, i)) is not None and not math.isfinite(v)]


class Combine(Node):
    def __init__(self, kind: str, children: list[Node]):
        self.kind, self.children = kind, children

    def _join(self, values: Iterable[bool | None]) -> bool | None:
        if self.kind == "not":
            return _negate(next(iter(values)))
        return _all(values) if self.kind == "all" else _any(values)

    def at(self, log: Log, i: int) -> bool | None:
        return self._join(c.at(log, i) for c in self.children)

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        return self._join(c.over(log, idx) for c in self.children)

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        return [] if self.kind == "not" else [e for c in self.children for e in c.evidence(log, idx)]


class Frac(Node):
    def __init__(self, pred: Node, ge: float):
        self.pred, self.ge = pred, ge

    def _counts(self, log: Log, idx: Sequence[int]) -> tuple[int, int]:
        values = [self.pred.at(log, i) for i in idx]
        return sum(v is True for v in values), sum(v is not None for v in values)

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        hits, known = self._counts(log, idx)
        return None if known == 0 else hits / known >= self.ge

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        hits, known = self._counts(log, idx)
        held = [i for i in idx if self.pred.at(log, i) is True]
        items = self.pred.evidence(log, [held[-1] if held else idx[-1]])
        for item in items:
            item["range"] += f" at {hits}/{known} steps (needs {self.ge:.0%})"
        return items


class Status(Node):
    def __init__(self, statuses: list[str]):
        self.statuses = statuses

    def over(self, log: Log, idx: Sequence[int]) -> bool | None:
        status = log.facts.get("status")
        return None if status is None else status in self.statuses

    def at(self, log: Log, i: int) -> bool | None:
        return self.over(log, [i])

    def evidence(self, log: Log, idx: Sequence[int]) -> list[dict]:
        step = log.steps[idx[-1]] if idx else 0
        rows = [{"metric": "run.json status", "step": step, "value": log.facts.get("status"),
                 "range": f"not {' / '.join(self.statuses)}", "status": "bad"}]
        if log.facts.get("error"):  # how it ended: the exception's own line, or a console log's last words (endings)
            how = log.facts.get("error_how")
            rows.append({"metric": "how it ended" if how else "exception", "step": step, "value": log.facts["error"],
                         "range": how or "the run ended on this exception", "status": "bad"})
        return rows


class Compiler:
    """What a rule's condition is compiled with: the named series (`series:`), the rule's thresholds (name -> value
    and how evidence writes it) and the named conditions (`guards:`)."""

    def __init__(self, defs: Mapping[str, Any], thresholds: Mapping[str, tuple[float, str]],
                 guards: Mapping[str, Any]):
        self.defs, self.thresholds, self.guards = defs, thresholds, guards

    def condition(self, spec: Any) -> Node:
        return form_of(spec, FORMS, "condition").build(spec, self)

    def series(self, spec: Any) -> Series:
        return compile_series(spec, self.defs)

    def number(self, value: Any) -> tuple[float, str]:
        """A literal, `$name` or `-$name` (the rule's threshold), with how evidence writes it."""
        if isinstance(value, str) and value.lstrip("-").startswith("$"):
            sign, name = -1.0 if value.startswith("-") else 1.0, value.lstrip("-")[1:]
            if name not in self.thresholds:
                raise ValueError(f"rules.yaml: unknown threshold {value!r}: one of {sorted(self.thresholds)}")
            number, text = self.thresholds[name]
            return sign * number, ("-" if sign < 0 else "") + text
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"rules.yaml: {value!r} is no number, $threshold or -$threshold")
        return float(value), fmt(float(value))


def compile_condition(spec: Any, defs: Mapping[str, Any], thresholds: Mapping[str, tuple[float, str]],
                      guards: Mapping[str, Any] | None = None) -> Node:
    """A step predicate or window condition from its YAML spec, in one of `FORMS` (rules.yaml's header lists them);
    `guards`: the named conditions a spec may use as `{guard: name}`."""
    return Compiler(defs, thresholds, guards or {}).condition(spec)


# ---- the vocabulary: each form, how it is written, what it means, how it is built ---------------------------------
def _guard(spec: Mapping[str, Any], c: Compiler) -> Node:
    if spec["guard"] not in c.guards:
        raise ValueError(f"rules.yaml: unknown guard {spec['guard']!r}: one of {sorted(c.guards)}")
    return c.condition(c.guards[spec["guard"]])


def _compare(spec: Mapping[str, Any], c: Compiler) -> Node:
    op = next(o for o in _OPS if o in spec)
    return Leaf(c.series(spec["x"]), op, *c.number(spec[op]), spec.get("missing"))


def _metric_set(kind: str) -> Callable[[Mapping[str, Any], Compiler], Node]:
    return lambda spec, c: MetricSet(kind, list(spec[kind]), spec.get("missing"))


def _combine(kind: str) -> Callable[[Mapping[str, Any], Compiler], Node]:
    def build(spec: Mapping[str, Any], c: Compiler) -> Node:
        if not isinstance(spec[kind], list):
            raise ValueError(f"rules.yaml: {kind} takes a list of conditions, not {spec[kind]!r}")
        return Combine(kind, [c.condition(s) for s in spec[kind]])

    return build


def _trend(op: TrendOp) -> Callable[[Mapping[str, Any], Compiler], Node]:
    return lambda spec, c: Trend(op, c.series(spec[op.name]),
                                 *c.number(spec.get(op.size_key, TUNABLES.trend.default_size)))


def _falls_from_peak(spec: Mapping[str, Any], c: Compiler) -> Node:
    rising = c.series(spec["while"]) if "while" in spec else None
    return FallsFromPeak(c.series(spec["falls_from_peak"]), *c.number(spec["by"]), rising, spec.get("of", "peak"),
                         spec.get("missing"))


def _spikes(spec: Mapping[str, Any], c: Compiler) -> Node:
    ratio, text = c.number(spec["gt"])
    return Spikes(c.series(spec["spikes"]), ratio, text, int(c.number(spec.get("count", 1))[0]))


def _plateau(spec: Mapping[str, Any], c: Compiler) -> Node:
    share, text = c.number(spec["share"])
    return Plateau(c.series(spec["plateau"]), share, text, c.series(spec["heldout"]) if "heldout" in spec else None)


def _doc(cls: type) -> str:
    """A class's doc as one line, without its closing full stop (as the other forms' docs)."""
    return " ".join((cls.__doc__ or "").split()).removesuffix(".")


_FORMS = [
    # step predicates
    Form("x", f"{{x: s, {'|'.join(_OPS)}: v, missing: m}}",
         "s compared with v: a number, $threshold or -$threshold (the rule's `thresholds`); unknown where s is, "
         "unless `missing` (true or false) says what to assume", _compare, one_of=tuple(_OPS), optional=("missing",),
         group="step"),
    Form("nonfinite", "{nonfinite: [metrics], missing: m}", "one of the metrics logged is NaN or Inf",
         _metric_set("nonfinite"), optional=("missing",), group="step"),
    Form("finite", "{finite: [metrics], missing: m}", "every one of the metrics logged is finite",
         _metric_set("finite"), optional=("missing",), group="step"),
    Form("zero", "{zero: [metrics], missing: m}", "every one of the metrics is logged and exactly 0",
         _metric_set("zero"), optional=("missing",), group="step"),
    Form("status", "{status: [statuses]}", "run.json's status is one of these (unknown without a status)",
         lambda spec, c: Status(list(spec["status"])), group="step"),
    # combined
    Form("all", "{all: [c, ...]}", "every one holds (three-valued: false wins, then unknown)", _combine("all"),
         group="logic"),
    Form("any", "{any: [c, ...]}", "one holds (true wins, then unknown)", _combine("any"), group="logic"),
    Form("not", "{not: c}", "c does not hold (unknown stays unknown)",
         lambda spec, c: Combine("not", [c.condition(spec["not"])]), group="logic"),
    Form("guard", "{guard: name}", "the condition `guards` names (a step predicate or a window condition)", _guard,
         group="logic"),
    # window conditions
    Form("last", "{last: p}", "p at the window's last step", lambda spec, c: c.condition(spec["last"]),
         group="window"),
    Form("frac", "{frac: p, ge: f}", "p holds at >= f of the window's steps where p is known",
         lambda spec, c: Frac(c.condition(spec["frac"]), c.number(spec["ge"])[0]), required=("ge",),
         group="window"),
    *(Form(op.name, f"{{{op.name}: s, {op.size_key}: {'r' if op.size_key == 'by' else 'v'}}}", _doc(type(op)),
           _trend(op), optional=(op.size_key,), group="window") for op in TRENDS.values()),
    Form("spikes", "{spikes: s, gt: ratio, count: n}", _doc(Spikes),
         _spikes, required=("gt",), optional=("count",), group="window"),
    Form("plateau", "{plateau: s, share: f, heldout: h}", _doc(Plateau),
         _plateau, required=("share",), optional=("heldout",), group="window"),
    Form("falls_from_peak", "{falls_from_peak: s, by: r, of: peak|range, while: t, missing: m}", _doc(FallsFromPeak),
         _falls_from_peak, required=("by",), optional=("of", "while", "missing"), group="window"),
    Form("source_falls", "{source_falls: r}", _doc(SourceFalls),
         lambda spec, c: SourceFalls(*c.number(spec["source_falls"])), group="window"),
    Form("logged", "{logged: s, ge: n}", _doc(Logged),
         lambda spec, c: Logged(c.series(spec["logged"]), *c.number(spec["ge"])), required=("ge",), group="window"),
]
FORMS: dict[str, Form] = {form.head: form for form in _FORMS}
