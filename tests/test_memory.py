"""`playground/step/memory.py`: memory metrics under verl's names, and the CPU guard behind
`trainer.memory_limit_gb`."""

from __future__ import annotations

import pytest
import torch

from playground.step import memory
from playground.step.memory import GIB, MemoryGuard, OutOfMemory, is_oom_error

CPU = torch.device("cpu")


@pytest.fixture
def rss(monkeypatch):
    """A fake resident-set size, in GiB, that the test moves."""
    state = {"gib": 1.0}
    monkeypatch.setattr(memory, "_rss", lambda: int(state["gib"] * GIB))
    return state


def test_metrics_are_verls_memory_keys_with_growth_as_allocated(rss):
    guard = MemoryGuard([None], CPU)
    rss["gib"] = 1.25
    metrics = guard.metrics()
    guard.close()
    assert set(metrics) == {"perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb"}
    assert metrics["perf/max_memory_allocated_gb"] == pytest.approx(0.25)  # growth since the run started
    assert metrics["perf/cpu_memory_used_gb"] == pytest.approx(1.25)


def test_a_solo_run_past_its_cap_raises_out_of_memory(rss):
    guard = MemoryGuard([0.5], CPU)
    rss["gib"] = 1.4
    guard.check("gen")  # 0.4 GiB of growth: under the cap
    rss["gib"] = 1.6
    with pytest.raises(OutOfMemory, match="during update_actor, past trainer.memory_limit_gb=0.5"):
        guard.check("update_actor")
    guard.close()


def test_in_a_batch_each_agent_owns_its_share_and_only_capped_agents_stop(rss):
    guard = MemoryGuard([0.5, None], CPU)
    rss["gib"] = 2.2  # 1.2 GiB for two agents: 0.6 each
    guard.check("gen")  # not every agent is past a cap: no raise, the trainer stops agents one by one
    assert guard.over_limit() == [True, False]
    guard.close()


def test_no_cap_measures_nothing_and_never_stops(rss):
    guard = MemoryGuard([None], CPU)
    rss["gib"] = 100.0
    guard.check("gen")
    assert guard.over_limit() == [False] and not guard.capped


def test_out_of_memory_errors_are_recognised():
    assert is_oom_error(OutOfMemory("x")) and is_oom_error(MemoryError())
    assert is_oom_error(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_oom_error(RuntimeError("shape mismatch"))
