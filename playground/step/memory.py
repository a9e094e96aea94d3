"""Memory metrics and the memory cap (`trainer.memory_limit_gb`).

On CUDA the cap is a real allocator limit (`set_per_process_memory_fraction`), so an allocation past it
raises CUDA's out-of-memory error. On CPU there is no allocator limit to set inside one process, so a guard
measures the process's resident memory at the points where memory grows (after generation, after each
micro-batch) and stops the run once its growth passes the cap, before the machine is exhausted.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import resource
import sys

import psutil
import torch

from playground.metric_names import CPU_MEMORY_USED, MAX_MEMORY_ALLOCATED, MAX_MEMORY_RESERVED

GIB = 1024**3


class OutOfMemory(RuntimeError):
    """The run used more memory than `trainer.memory_limit_gb` allows."""


# glibc mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_GLIBC_DEFAULT_THRESHOLD = 128 * 1024  # glibc's default for both thresholds
_GLIBC_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def _measure_live_memory() -> None:
    """Make resident memory track live tensors (glibc): large blocks always come from, and go back to, the OS.

    glibc raises its mmap threshold as blocks are freed, after which large tensors reuse heap memory freed by
    earlier work and no longer show as growth; a fixed threshold and a trim at the start keep the guard's
    measurement independent of what the process did before (e.g. other runs in the same process).
    """
    _mallopt(_M_MMAP_THRESHOLD, _GLIBC_DEFAULT_THRESHOLD)
    _mallopt(_M_TRIM_THRESHOLD, _GLIBC_DEFAULT_THRESHOLD)  # free memory at the heap top goes back to the OS
    try:
        _libc().malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the guard still measures, less exactly
        pass


def reuse_freed_memory() -> None:
    """Keep freed memory in the process for the next tensor of its size (glibc), when no cap is measured.

    Left to itself glibc hands a freed multi-MB block back to the OS (munmap, or a heap trim) and the next
    allocation of that size page-faults its way back in: for K = 64 agents, whose activations are ~8 MB each,
    that was ~20 % of a training step in this VM. Blocks up to glibc's 32 MiB ceiling come from the heap, and
    the heap is trimmed only past 1 GiB of free space at its top.
    """
    _mallopt(_M_MMAP_THRESHOLD, _GLIBC_MMAP_THRESHOLD_MAX)
    _mallopt(_M_TRIM_THRESHOLD, 1024**3)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:  # find_library runs `ldconfig -p`: once per process
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def _mallopt(param: int, value: int) -> None:
    """glibc's `mallopt` (setting either threshold also stops glibc's dynamic adjustment of both)."""
    try:
        _libc().mallopt(param, value)
    except (OSError, AttributeError):  # not glibc
        pass


def _rss() -> int:
    return psutil.Process().memory_info().rss


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


def is_oom_error(error: BaseException) -> bool:
    return isinstance(error, (OutOfMemory, torch.cuda.OutOfMemoryError, MemoryError)) or (
        isinstance(error, RuntimeError) and "out of memory" in str(error).lower())


class MemoryGuard:
    """Reports memory per step and enforces the cap.

    Args:
        limits_gb: the cap of each agent (None = no cap). Agents of a batch share one process and have
            identical shapes, so each one's share is the measured growth divided by the number of agents.
        device: the training device.
    """

    def __init__(self, limits_gb: list[float | None], device: torch.device):
        self.device = device
        self.limits = limits_gb
        self.num_agents = len(limits_gb)
        # the cap is enforced here on CPU only (CUDA's allocator enforces its own); `measuring` is reset by close()
        self.capped = self.measuring = device.type == "cpu" and any(limit is not None for limit in limits_gb)
        if self.measuring:
            _measure_live_memory()
        elif device.type == "cpu":
            reuse_freed_memory()
        self.baseline = _rss()
        self.peak_growth = 0
        self.cuda = device.type == "cuda"
        capped = [x for x in limits_gb if x is not None]
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
            if capped:
                total = torch.cuda.get_device_properties(device).total_memory
                fraction = min(1.0, min(capped) * len(limits_gb) / (total / GIB))
                torch.cuda.set_per_process_memory_fraction(fraction, device)

    def close(self) -> None:
        if self.measuring:  # the rest of the process (other runs, tests, benchmarks) reuses freed memory again
            reuse_freed_memory()
            self.measuring = False

    def over_limit(self) -> list[bool]:
        """Which agents' share of the memory growth is past their cap (CPU guard)."""
        share = self.peak_growth / max(1, self.num_agents) / GIB
        return [self.capped and limit is not None and share > limit for limit in self.limits]

    def check(self, where: str) -> None:
        """Measure, and raise `OutOfMemory` when every agent is past its cap (CPU only)."""
        if not self.capped:
            return
        self.peak_growth = max(self.peak_growth, _rss() - self.baseline)
        if all(self.over_limit()):  # a solo run stops at once; in a batch, the trainer stops agents one by one
            share = self.peak_growth / self.num_agents / GIB
            raise OutOfMemory(f"memory grew by {share:.3f} GiB per agent during {where}, past "
                              f"trainer.memory_limit_gb={min(x for x in self.limits if x is not None)}")

    def metrics(self) -> dict[str, float]:
        """verl's memory keys: CUDA allocator peaks on GPU; on CPU the run's peak growth, the process's peak (GiB)."""
        rss = _rss()
        self.peak_growth = max(self.peak_growth, rss - self.baseline)
        if self.cuda:
            return {
                MAX_MEMORY_ALLOCATED: torch.cuda.max_memory_allocated(self.device) / GIB,
                MAX_MEMORY_RESERVED: torch.cuda.max_memory_reserved(self.device) / GIB,
                CPU_MEMORY_USED: rss / GIB,
            }
        # On CPU, "allocated" is what the run itself allocated: the peak growth of resident memory since it
        # started (what trainer.memory_limit_gb caps); "reserved" is the whole process's peak.
        return {
            MAX_MEMORY_ALLOCATED: self.peak_growth / GIB,
            MAX_MEMORY_RESERVED: _peak_rss() / GIB,
            CPU_MEMORY_USED: rss / GIB,
        }
