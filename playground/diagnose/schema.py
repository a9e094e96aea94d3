"""The shape of `rules.yaml`, checked when it is loaded: a misspelt key, a rule reporting an unknown id or a
calibration of a threshold the rule lacks is an error naming the rule and the key, not a silent default.

The conditions themselves (`when`) are checked by `conditions.compile_condition`, which knows their vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator, model_validator

from playground import failures

Family = Literal["gym", "token", "llm"]
FAMILIES: tuple[Family, ...] = ("gym", "token", "llm")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Words(_Strict):
    en: str
    zh: str


class Calibrated(_Strict):
    """A family's own value of a threshold and the measurement of its healthy runs that it rests on."""

    value: float
    seeds: int = Field(ge=1)  # seeds (playground families) or real logs (llm) the healthy runs covered
    measured: str = Field(min_length=1)


class FixStep(_Strict):
    key: str
    op: str
    fallback: str | None = None


Fix = dict[str, list[FixStep]]  # family (or "*") -> overrides


class RuleSpec(_Strict):
    name: str
    id: str
    section: str
    signature: Words
    families: list[Family] = list(FAMILIES)
    kind: Literal["point", "window", "trend", "whole", "run"]
    metrics: list[Any] = []
    window: int = Field(1, ge=1)
    min_steps: int | None = Field(None, ge=1)
    after_step: int = -1
    thresholds: dict[str, float] = {}
    calibrated: dict[str, dict[Family, Calibrated]] = {}
    when: dict[str, Any]
    evidence: list[Any] = []
    fix: Fix | None = None

    @field_validator("id")
    @classmethod
    def _known_id(cls, value: str) -> str:
        if value not in failures.FAILURE_IDS:
            raise ValueError(f"unknown catalogue id {value!r}")
        return value

    @model_validator(mode="after")
    def _calibrates_own_thresholds(self) -> RuleSpec:
        unknown = set(self.calibrated) - set(self.thresholds)
        if unknown:
            raise ValueError(f"calibrated names thresholds the rule does not have: {sorted(unknown)}")
        return self


class VerdictSpec(_Strict):
    name: str
    id: str
    section: str
    signature: Words
    unless: list[str]
    unless_status: list[str] = []
    min_steps: int
    short_run: int
    when: dict[str, Any]
    otherwise: str


class ArtifactSpec(_Strict):
    """What a log shows that is no failure, or hides one: a note with its verl reference, never a finding."""

    name: str
    reference: str = Field(min_length=1)
    signature: Words
    note: Words
    families: list[Family] = list(FAMILIES)
    metrics: list[Any] = []
    thresholds: dict[str, float] = {}
    when: dict[str, Any]


class Link(_Strict):
    cause: str
    effects: list[str]
    rests_on: str


class Check(_Strict):
    name: str
    title: Words
    ids: list[str]
    metrics: list[str]


class Alternative(_Strict):
    reference: str
    families: list[Family]
    fix: list[FixStep]


class Entry(_Strict):
    """A catalogue id: the guide's cause and remedy, its fix, and the modern alternatives."""

    en: str
    zh: str
    fix: Fix | None = None
    alternatives: list[Alternative] = []


class Band(_Strict):
    lo: float | None
    hi: float | None
    status: Literal["ok", "warn", "bad"]


class Bands(_Strict):
    """A metric's per-step bands (the glossary's schema)."""

    band_on_abs: bool = False
    bands: list[Band] = Field(min_length=1)


class Document(_Strict):
    verdicts: list[VerdictSpec]
    links: list[Link]
    checklist: list[Check]
    severities: dict[str, dict[str, bool]]
    series: dict[str, Any]
    guards: dict[str, dict[str, Any]] = {}
    measured_on: dict[Family, str]
    family_bands: dict[Family, dict[str, Bands]] = {}
    rules: list[dict[str, Any]]  # each checked as a `RuleSpec` by `check`, so that an error names its rule
    artifacts: list[ArtifactSpec] = []
    catalogue: dict[str, Entry]


def _message(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    return error["msg"].removeprefix("Value error, ")


def _errors(e: ValidationError) -> str:
    return "; ".join(": ".join(filter(None, [".".join(map(str, err["loc"])), _message(err)])) for err in e.errors())


def check(data: Any, source: str = "rules.yaml") -> None:
    """Raise ValueError, naming the rule (or the section) and the key, where `data` does not have rules.yaml's
    shape."""
    try:
        document = Document.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"{source}: {_errors(e)}") from None
    names: set[str] = set()
    for index, rule in enumerate(document.rules):
        name = rule.get("name", f"#{index + 1}") if isinstance(rule, dict) else f"#{index + 1}"
        try:
            RuleSpec.model_validate(rule)
        except ValidationError as e:
            raise ValueError(f"{source}: rule {name!r}: {_errors(e)}") from None
        if name in names:
            raise ValueError(f"{source}: rule {name!r}: a second rule of that name")
        names.add(name)
    missing, unknown = set(failures.FAILURE_IDS) - set(document.catalogue), set(document.catalogue) - set(
        failures.FAILURE_IDS)
    if missing or unknown:
        raise ValueError(f"{source}: catalogue: no entry for {sorted(missing)}, unknown ids {sorted(unknown)}")


# ---- the shapes' tunables (tunables.yaml) --------------------------------------------------------------------------
class RobustTunables(_Strict):
    z_significant: float = Field(gt=0)
    max_points: StrictInt = Field(ge=3)
    level_lookback: StrictInt = Field(ge=1)
    level_min_values: StrictInt = Field(ge=1)


class TrendTunables(_Strict):
    default_size: float = Field(ge=0)
    target_floor: float = Field(gt=0)
    min_values: dict[str, Annotated[StrictInt, Field(ge=1)]]  # per operator; trends.py checks they are its names


class SpikesTunables(_Strict):
    min_values: StrictInt = Field(ge=1)


class PlateauTunables(_Strict):
    min_values: StrictInt = Field(ge=3)
    heldout_rise: float = Field(ge=0)
    heldout_floor: float = Field(gt=0)
    trend_over_noise: float = Field(gt=0)
    noise_floor: float = Field(ge=0)


class FallsFromPeakTunables(_Strict):
    min_evaluations: StrictInt = Field(ge=3)
    peak_floor: float = Field(gt=0)


class Tunables(_Strict):
    """`tunables.yaml`: the sizes the whole-series shapes, the trend operators and their robust statistics judge by."""

    robust: RobustTunables
    trend: TrendTunables
    spikes: SpikesTunables
    plateau: PlateauTunables
    falls_from_peak: FallsFromPeakTunables


def tunables(data: Any, source: str = "tunables.yaml") -> Tunables:
    """`data` as `Tunables`; a ValueError naming the section and key where a value is missing, unknown or out of
    range."""
    try:
        return Tunables.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"{source}: {_errors(e)}") from None
