"""The Step inspector's account of a response's advantage (`app/tokens.py`: `advantage_settings`, `advantage_note`,
`advantage_caption`) against the estimators the trainer runs (`playground.algos.advantages`): for every estimator a
token task can use and both normalisations, the inspector's value is the registry's, or it shows the registry's
(the recorded) advantages and says why; then on real tiny runs (Dr. GRPO, GAE) whose records hold what the trainer
computed. Outside the app's torch ban: a test may import torch and playground.algos."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
import tokens
import torch
import yaml

from playground.algos import names
from playground.algos.advantages import ADV_ESTIMATORS
from playground.teach import i18n

# Three groups of four: distinct rewards, a tie for the best (GRPO pass@k credits nobody), all alike (no signal).
REWARDS = [0.9, 0.1, 0.5, 0.25, 1.0, 1.0, 0.0, 0.3, 0.4, 0.4, 0.4, 0.4]
LENGTHS = [3, 5, 2, 4, 6, 1, 3, 3, 2, 5, 4, 6]
UID = [0] * 4 + [1] * 4 + [2] * 4
T = max(LENGTHS) + 2  # padding past every response, as a batch has
GAMMA, LAM = 0.9, 0.8  # not 1: GAE's and REINFORCE++'s discounting shows
ALWAYS = {"grpo", "grpo_passk", "rloo", "opo"}  # recomputed from any step's records (OPO: its whole group recorded)


def _config(estimator: str, norm_by_std: bool = True, norm_adv: bool = True, kl_in_reward: bool = False,
            multi_turn: bool = False) -> dict:
    """A run's config as `.hydra/config.yaml` holds it, the keys the inspector reads."""
    return {"algorithm": {"adv_estimator": estimator, "norm_adv_by_std_in_grpo": norm_by_std, "norm_adv": norm_adv,
                          "gamma": GAMMA, "lam": LAM, "use_kl_in_reward": kl_in_reward},
            "actor_rollout_ref": {"rollout": {"multi_turn": {"enable": multi_turn}}}}


def _registry(estimator: str, norm_by_std: bool, norm_adv: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The trainer's call (`step.advantage.AdvantageEstimator`) on the batch, in float64: the reward on each
    response's last token; returns the advantages, the mask and the critic's values."""
    mask = torch.tensor([[1.0] * n + [0.0] * (T - n) for n in LENGTHS], dtype=torch.float64)
    rewards = torch.zeros_like(mask)
    rewards[torch.arange(len(LENGTHS)), torch.tensor(LENGTHS) - 1] = torch.tensor(REWARDS, dtype=torch.float64)
    values = torch.linspace(-0.5, 0.7, len(LENGTHS) * T, dtype=torch.float64).reshape(len(LENGTHS), T).sin()
    inputs = {"token_level_rewards": rewards, "values": values, "response_mask": mask, "index": torch.tensor(UID),
              "reward_baselines": torch.linspace(0.1, 0.6, len(LENGTHS), dtype=torch.float64), "gamma": GAMMA,
              "lam": LAM, "norm_adv": norm_adv, "norm_adv_by_std_in_grpo": norm_by_std}
    adv, _ = ADV_ESTIMATORS.get(estimator)(**ADV_ESTIMATORS.select(estimator, inputs))
    return adv, mask, values


def _records(adv: torch.Tensor, values: torch.Tensor) -> list[dict]:
    """The step's records as `step.token_records` writes them (every response recorded)."""
    out = []
    for i, n in enumerate(LENGTHS):
        group = [j for j, u in enumerate(UID) if u == UID[i]]
        out.append({"step": 1, "row": i, "uid": UID[i], "tokens": ["x"] * n, "mask": [1] * n, "reward": REWARDS[i],
                    "group": {"rows": group, "rewards": [REWARDS[j] for j in group]},
                    "advantages": adv[i, :n].tolist(), "values": values[i, :n].tolist()})
    return out


def _en(key: str, **fields: object) -> str:
    assert set(i18n.table()[key]) == {"en", "zh"}, f"{key} lacks a language"  # every string the notes name
    return i18n.text(key, "en", **fields)


CASES = [(e, by_std, norm_adv) for e in names.ADV_ESTIMATORS for by_std in (True, False) for norm_adv in (True, False)]


@pytest.mark.parametrize(("estimator", "norm_by_std", "norm_adv"), CASES)
def test_the_inspector_gives_each_response_the_registrys_advantage(estimator, norm_by_std, norm_adv):
    adv, mask, values = _registry(estimator, norm_by_std, norm_adv)
    records = _records(adv, values)
    settings = tokens.advantage_settings(_config(estimator, norm_by_std, norm_adv))
    for i, record in enumerate(records):
        note = tokens.advantage_note(record, settings, records)
        theirs = adv[i][mask[i] > 0].tolist()
        caption = tokens.advantage_caption(note, _en)
        assert note.about != "other" and "{" not in caption
        if estimator in ALWAYS or (estimator == "gae" and not norm_adv):
            assert not note.why and note.computed
            if note.per_token is None:  # one advantage on every token of the response
                assert all(math.isclose(note.value, a, rel_tol=1e-9, abs_tol=1e-12) for a in theirs), (i, note)
                assert caption.endswith(f"= {tokens.fmt(note.value)}.") or caption.endswith(f": {note.value:.4g}.")
            else:  # GAE: each token its own
                assert note.per_token == pytest.approx(adv[i, :LENGTHS[i]].tolist(), rel=1e-9, abs=1e-12)
        else:  # what the records lack: the recorded advantages, and why
            assert note.why and not note.computed and note.value is None
            assert note.recorded == (min(theirs), max(theirs))
            assert "cannot recompute" in caption and tokens.fmt(min(theirs)) in caption


def test_dr_grpo_is_r_minus_mean_and_grpo_divides_by_the_std():
    adv, _, values = _registry("grpo", False, True)
    record = _records(adv, values)[0]  # reward 0.9 in a group of mean 0.4375
    dr = tokens.advantage_note(record, tokens.advantage_settings(_config("grpo", norm_by_std=False)))
    assert dr.about == "grpo_no_std" and math.isclose(dr.value, 0.9 - 0.4375)
    caption = tokens.advantage_caption(dr, _en)
    assert "Dr. GRPO" in caption and "r − mean, no std" in caption and "/ (std" not in caption
    assert "0.9 − 0.4375 = 0.4625." in caption
    grpo = tokens.advantage_note(record, tokens.advantage_settings(_config("grpo")))
    std = math.sqrt(sum((r - 0.4375) ** 2 for r in REWARDS[:4]) / 3)
    assert grpo.about == "grpo_std" and math.isclose(grpo.value, 0.4625 / (std + 1e-6))
    assert "(r − mean) / (std + ε), ε = 1e-06" in tokens.advantage_caption(grpo, _en)


def test_grpo_passk_credits_the_first_best_only():
    adv, _, values = _registry("grpo_passk", True, True)
    records = _records(adv, values)
    settings = tokens.advantage_settings(_config("grpo_passk"))
    notes = [tokens.advantage_note(r, settings) for r in records]
    assert [n.computed for n in notes[:4]] == ["passk_best_std", "passk_other", "passk_other", "passk_other"]
    assert notes[4].computed == "passk_best_std" and notes[4].value == 0  # a tie for the best: margin 0
    assert "not its group's best (response 4 is): 0." in tokens.advantage_caption(notes[5], _en)


def test_opo_needs_its_whole_group_recorded():
    adv, _, values = _registry("opo", True, True)
    records = _records(adv, values)
    settings = tokens.advantage_settings(_config("opo"))
    assert tokens.advantage_note(records[0], settings, records).computed == "opo"
    partial = tokens.advantage_note(records[0], settings, records[:3])  # row 3's length not recorded
    assert partial.why == "lengths" and partial.recorded == (adv[0, 0].item(), adv[0, 0].item())


def test_what_the_records_lack_is_said():
    adv, _, values = _registry("grpo", True, True)
    record = _records(adv, values)[0]
    kl = tokens.advantage_note(record, tokens.advantage_settings(_config("grpo", kl_in_reward=True)))
    assert kl.why == "kl_in_reward" and "use_kl_in_reward" in tokens.advantage_caption(kl, _en)
    turns = tokens.advantage_note(record, tokens.advantage_settings(_config("gae", norm_adv=False, multi_turn=True)))
    assert turns.why == "turns"
    no_values = tokens.advantage_note({**record, "values": None},
                                      tokens.advantage_settings(_config("gae", norm_adv=False)))
    assert no_values.why == "values"
    assert tokens.advantage_settings({}) is None  # no .hydra/config.yaml
    unknown = tokens.advantage_note(record, None)
    assert unknown.about == "unknown" and "config" in tokens.advantage_caption(unknown, _en)
    empty = {**record, "tokens": [], "mask": [], "advantages": [], "values": []}
    assert tokens.advantage_note(empty, tokens.advantage_settings(_config("gae", norm_adv=False))).why == "empty"


def test_the_epsilon_is_the_registrys_and_the_trainer_passes_no_other():
    from types import SimpleNamespace

    from playground.step.advantage import AdvantageEstimator
    from playground.tasks.token_task import TokenTask

    for name in ("grpo", "grpo_passk"):
        assert inspect.signature(ADV_ESTIMATORS.get(name)).parameters["epsilon"].default == tokens.GRPO_EPSILON
    hp = SimpleNamespace(adv_estimator="grpo", gamma=1.0, lam=1.0, norm_adv=True, norm_adv_by_std_in_grpo=True)
    batch = {"token_level_rewards": None, "response_mask": None, "uid": [None]}
    passed = {*AdvantageEstimator(hp).settings, *TokenTask.advantage_inputs(None, batch)}  # type: ignore[arg-type]
    assert "epsilon" not in passed  # ε stays at the registry's default


@pytest.mark.parametrize("overrides", [["+preset=dr_grpo"], ["scenario=vanishing_gradient"]])
def test_the_shipped_dr_grpo_configs_read_as_dr_grpo(overrides):
    from omegaconf import OmegaConf

    from playground.config import compose

    config = OmegaConf.to_container(compose(["task=reverse", *overrides]), resolve=True)
    settings = tokens.advantage_settings(config)
    assert settings is not None and settings.estimator == "grpo" and not settings.norm_by_std


# ---- real tiny runs: the records hold the advantages the trainer computed through the registry ----

TINY = ["task=reverse", "+debug=tiny", "trainer.total_training_steps=1", "trainer.token_records.enable=true",
        "trainer.token_records.responses_per_step=-1", "reward.partial_credit=true"]  # rewards that differ


def _train(root: Path, name: str, overrides: list[str]) -> Path:
    from playground.config import compose
    from playground.train import fit

    run_dir = root / name
    fit([compose([*TINY, *overrides])], [run_dir], [overrides])
    return run_dir


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return {"dr_grpo": _train(root, "dr_grpo", ["+preset=dr_grpo"]),
            "gae": _train(root, "gae", ["algorithm.adv_estimator=gae"]),
            "gae_raw": _train(root, "gae_raw", ["algorithm.adv_estimator=gae", "algorithm.norm_adv=false",
                                                 "algorithm.lam=0.9"])}


def _read(run_dir: Path) -> tuple[list[dict], tokens.AdvantageSettings | None]:
    """The run's records and settings as the inspector reads them (`data.token_records`, `data.run_config`)."""
    from playground.rundir.runs import read_token_records

    records, problems = read_token_records(run_dir)
    assert records and not problems
    config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text(encoding="utf-8"))
    return records, tokens.advantage_settings(config)


def test_a_dr_grpo_run_shows_the_advantages_its_trainer_computed(tiny_runs):
    records, settings = _read(tiny_runs["dr_grpo"])
    assert settings is not None and not settings.norm_by_std
    assert any(len(set(r["group"]["rewards"])) > 1 for r in records)  # a group with a signal
    for record in records:
        note = tokens.advantage_note(record, settings, records)
        assert note.about == "grpo_no_std" and note.computed == "grpo_no_std"
        trained = [a for a, m in zip(record["advantages"], record["mask"]) if m]
        assert all(math.isclose(note.value, a, rel_tol=1e-5, abs_tol=1e-6) for a in trained), record["row"]


def test_a_gae_run_shows_the_advantages_its_trainer_computed(tiny_runs):
    records, settings = _read(tiny_runs["gae"])  # whitened over the batch: shown as recorded
    for record in records:
        note = tokens.advantage_note(record, settings, records)
        trained = [a for a, m in zip(record["advantages"], record["mask"]) if m]
        assert note.about == "gae_whitened" and note.why == "batch" and note.recorded == (min(trained), max(trained))
    records, settings = _read(tiny_runs["gae_raw"])  # not whitened: recomputed from the reward and the values
    for record in records:
        note = tokens.advantage_note(record, settings, records)
        assert note.computed == "gae" and note.per_token is not None
        assert note.per_token == pytest.approx(record["advantages"], rel=1e-4, abs=1e-5)


def test_the_inspector_page_prints_dr_grpos_formula(app, tiny_runs, tree):
    import shutil

    from app_helpers import texts

    run = Path(tree["healthy"]).parents[1] / "2026-12-06" / "11-00-00"
    shutil.copytree(tiny_runs["dr_grpo"], run)
    at = app.run().switch_page("views/inspector.py").run()
    at.selectbox(key="inspector_run").set_value(str(run)).run()
    assert not at.exception
    shown = texts(at)
    assert "Dr. GRPO (algorithm.norm_adv_by_std_in_grpo=false)" in shown and "(r − mean) / (std" not in shown
    at.radio(key="lang").set_value("zh").run()
    assert not at.exception and "不除以标准差" in texts(at)
