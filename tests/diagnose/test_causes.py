"""The causal grouping (`playground.diagnose.causes`): root causes and their consequences from the catalogue's links,
on hand-made findings."""

from __future__ import annotations

from dataclasses import dataclass

from playground.diagnose import causes
from playground.diagnose.finding import Finding


@dataclass
class F:  # the fields of an engine Finding that grouping reads
    id: str
    first_step: int
    last_step: int
    severity: str = "warning"
    since_step: int | None = None
    under_way_from = Finding.under_way_from  # the engine's own definition, read the same way


def _shape(diagnoses) -> list[tuple[str, list[str]]]:
    return [(d.root.id, [c.id for c in d.consequences]) for d in diagnoses]


def test_a_too_high_lr_explains_what_it_drives():
    found = [F("grad_clip_saturation", 3, 30), F("lr_too_high", 5, 30), F("kl_drift", 12, 30)]
    assert _shape(causes.group(found)) == [("lr_too_high", ["grad_clip_saturation", "kl_drift"])]


def test_independent_problems_stay_separate_diagnoses():
    found = [F("prompt_truncation", 1, 30), F("reward_variance_too_large", 4, 30)]
    assert _shape(causes.group(found)) == [("prompt_truncation", []), ("reward_variance_too_large", [])]


def test_an_effect_gone_before_its_cause_appears_is_not_explained_by_it():
    found = [F("grad_clip_saturation", 1, 4), F("lr_too_high", 10, 30)]
    assert _shape(causes.group(found)) == [("grad_clip_saturation", []), ("lr_too_high", [])]


def test_a_cycle_is_rooted_at_its_earliest_member_not_at_an_earlier_bystander():
    # critic_undertrained and unstable_policy_loss explain each other; grad_clip_saturation, earlier, explains neither
    found = [F("grad_clip_saturation", 10, 40), F("critic_undertrained", 19, 40), F("unstable_policy_loss", 23, 40)]
    assert _shape(causes.group(found)) == [("critic_undertrained", ["grad_clip_saturation", "unstable_policy_loss"])]


def test_the_checklist_order_breaks_a_tie_at_the_same_step():
    # neither explains the other; at the same step the learning rate is checked first (§11.2), a truncation never
    found = [F("prompt_truncation", 5, 30), F("lr_too_high", 5, 30)]
    assert [d.root.id for d in causes.group(found)] == ["lr_too_high", "prompt_truncation"]


def test_the_gravest_diagnosis_comes_first_and_info_findings_last():
    found = [F("low_mfu", 1, 30, "info"), F("prompt_truncation", 2, 30), F("training_crash", 20, 20, "critical")]
    assert [d.root.id for d in causes.group(found)] == ["training_crash", "prompt_truncation", "low_mfu"]
