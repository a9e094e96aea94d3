"""The training device (`trainer.device`) and its model FLOPs utilisation: verl's peak-FLOPs table
(`verl/utils/flops_counter.py`, v0.7) and the lookup.

MFU = achieved FLOP/s of an update (6·N·T for the matmul parameters, as verl counts) ÷ the device's promised
dense BF16 peak. A tiny model on a CPU sits far below the guide's 20 % (the catalogue's `low_mfu` is info).
"""

from __future__ import annotations

import torch

# verl's promised dense BF16 peaks (FLOP/s), matched by substring of the device name
PEAK_FLOPS: dict[str, float] = {
    "CPU": 448e9, "GB200": 2.5e15, "B200": 2.25e15, "MI300X": 1336e12,
    "H100": 989e12, "H800": 989e12, "H200": 989e12, "A100": 312e12, "A800": 312e12,
    "L40S": 362.05e12, "L40": 181.05e12, "A40": 149.7e12, "L20": 119.5e12, "H20": 148e12,
    "910B": 354e12, "Ascend910": 354e12, "RTX 3070 Ti": 21.75e12,
}


def resolve_device(name: str) -> torch.device:
    """The device `trainer.device` names: `auto` is CUDA when present, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


def peak_flops(device_name: str, override: float | None = None) -> float:
    """Peak FLOP/s for MFU: `override` if given, else the first table key found in the name.

    Keys are tried in reverse sorted order, as verl does, so "H200" wins over "H20" and "L40S"
    over "L40". Matching ignores case. Unknown devices give inf, so MFU reads 0.
    """
    if override is not None:
        return float(override)
    for key, value in sorted(PEAK_FLOPS.items(), reverse=True):
        if key.upper() in device_name.upper():
            return value
    return float("inf")
