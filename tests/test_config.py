import subprocess
import sys

import pytest

from playground.config import ConfigError, check_group_overrides, check_scenario_applies, compose, validate

A = "actor_rollout_ref.actor"


@pytest.mark.parametrize("override, key, allowed", [
    (f"{A}.optim.lr=-1", f"{A}.optim.lr", "> 0"),
    ("critic.optim.lr=0", "critic.optim.lr", "> 0"),
    (f"{A}.clip_ratio=1.5", f"{A}.clip_ratio", "in (0, 1)"),
    (f"{A}.clip_ratio_high=0", f"{A}.clip_ratio_high", "null (clip_ratio) or > 0"),
    (f"{A}.clip_ratio_c=1.0", f"{A}.clip_ratio_c", "> 1"),
    ("algorithm.gamma=1.2", "algorithm.gamma", "in [0, 1]"),
    ("algorithm.lam=-0.1", "algorithm.lam", "in [0, 1]"),
    (f"{A}.ppo_mini_batch_size=300", f"{A}.ppo_mini_batch_size", "must divide the batch of 512 transitions"),
    (f"{A}.loss_agg_mode=mean", f"{A}.loss_agg_mode", "one of"),
    ("algorithm.adv_estimator=grpo", "algorithm.adv_estimator", "allowed 'gae'"),
    (f"{A}.grad_clip=-1", f"{A}.grad_clip", "null (off) or > 0"),
    ("trainer.device=tpu", "trainer.device", "'auto', 'cpu'"),
    ("trainer.logger=[clearml]", "trainer.logger", "allowed"),  # verl has it; the playground not
    ("trainer.stop_on_finding=nope", "trainer.stop_on_finding", "one of"),
])
def test_bad_gym_values_fail_with_one_line(override, key, allowed):
    with pytest.raises(ConfigError) as error:
        validate(compose(["task=cartpole", override]))
    message = str(error.value)
    assert key in message and allowed in message and "\n" not in message


@pytest.mark.parametrize("override, key", [
    ("actor_rollout_ref.rollout.n=1", "actor_rollout_ref.rollout.n"),  # GRPO needs a group
    ("data.max_response_length=0", "data.max_response_length"),
    ("data.max_prompt_length=20", "data.max_prompt_length"),  # does not fit the model's context
    ("reward.name=bleu", "reward.name"),
])
def test_bad_token_values_fail_with_one_line(override, key):
    with pytest.raises(ConfigError) as error:
        validate(compose(["task=reverse", override]))
    assert key in str(error.value) and "\n" not in str(error.value)


def test_unknown_task_and_inapplicable_scenario():
    with pytest.raises(ConfigError, match=r"task='pong' is unknown: allowed one of \[.*'cartpole'"):
        check_group_overrides(["task=pong"])
    with pytest.raises(ConfigError, match="does not apply to task='mountaincar'"):
        check_scenario_applies(compose(["task=mountaincar", "scenario=healthy"]))


def test_defaults_are_valid_for_every_task():
    from playground.config import known_options

    for task in known_options("task"):
        cfg = compose([f"task={task}"])
        check_scenario_applies(cfg)
        validate(cfg)
    assert compose(["task=mountaincar"]).scenario == "no_learning_signal"  # its default: it has no healthy run


def test_importing_the_config_loads_nothing_that_trains_or_diagnoses():
    """`python -c "import playground.config"`: the explorer checks knobs with it, so it must stay light."""
    code = ("import sys, playground.config; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or "
            "m.startswith(('playground.tasks', 'playground.diagnose', 'playground.trainer', 'playground.models'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
