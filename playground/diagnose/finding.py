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
    # the latest step from which that first window, cut short at its start, still shows it: where the change began
    # (None: as since_step)
    onset: int | None = None
    # what broke the run, where a playground knob did (a scenario's cause, which no verl run has): {key, value, verl,
    # remedy} each (diagnose/injected.py); `levers`: what the fix's playground keys are in a verl run, {key, verl}
    injected: list[dict] = field(default_factory=list)
    levers: list[dict] = field(default_factory=list)
    # what the evidence leans on: a verl metric read otherwise than it seems (a token mean, a version's or a backend's
    # scale), {name, en, zh, reference} each (diagnose/artifacts.py, leans.yaml)
    artifacts: list[dict] = field(default_factory=list)

    @property
    def under_way_from(self) -> int:
        """The first step of the first window that showed it: what appeared from there is its consequence."""
        return self.first_step if self.since_step is None else self.since_step

    @property
    def onset_step(self) -> int:
        """The step where what the rule first saw began (docs/diagnose.md, `diagnose.onset`)."""
        return self.under_way_from if self.onset is None else self.onset

    def to_dict(self) -> dict:
        return {**asdict(self), "onset_step": self.onset_step}

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        """A finding read back from its `to_dict` (the onset, derived from its steps, is not a field)."""
        return cls(**{key: value for key, value in data.items() if key != "onset_step"})
