"""One finding of the diagnosis: a catalogue id, where it held, the evidence, and what to do about it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


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
    alternatives: list[dict] = field(default_factory=list)  # other fixes to try: {"fix", "reference"}
    # "low" where the log gave shapes, not sizes (wandb's run-history sparklines: 8 levels, at most 40 points):
    # a finding read from a drawing is said with less confidence than one read from the logged numbers
    confidence: str = "high"
    # the first step of the first window that showed it (= first_step for a single step or a whole-run shape): the
    # cause was under way from there
    since_step: int | None = None
    # what broke the run, where a playground knob did (a scenario's cause, which no verl run has): {key, value, verl,
    # remedy} each (diagnose/injected.py); `levers`: what the fix's playground keys are in a verl run, {key, verl}
    injected: list[dict] = field(default_factory=list)
    levers: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)
