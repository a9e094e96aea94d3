"""The knob table the Lab and the replay share: one row per knob, every key a key of the composed config, and a clip
bound's value resolved as the trainer resolves it."""

import pytest
from omegaconf import OmegaConf

from playground.config import compose
from playground.config.knobs import (
    BY_NAME,
    CLIP_RATIO,
    CLIP_RATIO_HIGH,
    CLIP_RATIO_LOW,
    KNOBS,
    LAB_KNOBS,
    REPLAY_KNOBS,
    knob_value,
)

MISSING = object()


def test_the_lab_and_the_replay_read_rows_of_one_table():
    assert len(BY_NAME) == len(KNOBS) and len({k.key for k in KNOBS}) == len(KNOBS)
    assert set(LAB_KNOBS) | set(REPLAY_KNOBS) == set(KNOBS)
    assert len(set(LAB_KNOBS)) == len(LAB_KNOBS) and len(set(REPLAY_KNOBS)) == len(REPLAY_KNOBS)


@pytest.mark.parametrize("task", ["cartpole", "reverse"])
def test_every_knob_is_a_key_of_the_config(task):
    cfg = compose([f"task={task}"])
    assert [k.key for k in KNOBS if OmegaConf.select(cfg, k.key, default=MISSING) is MISSING] == []
    assert OmegaConf.select(cfg, CLIP_RATIO, default=MISSING) is not MISSING


def test_a_clip_bound_left_null_reads_clip_ratio_and_no_other_knob_falls_back():
    config = {CLIP_RATIO: 0.2, CLIP_RATIO_LOW: None, CLIP_RATIO_HIGH: 0.28, "trainer.seed": None}
    assert knob_value(BY_NAME["clip_low"], config.get) == 0.2
    assert knob_value(BY_NAME["clip_high"], config.get) == 0.28
    assert knob_value(BY_NAME["seed"], config.get) is None
    assert [k.name for k in KNOBS if k.fallback] == ["clip_low", "clip_high"]
