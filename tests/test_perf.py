import math

import pytest

from playground.step.perf import peak_flops


@pytest.mark.parametrize("name,expected", [
    ("NVIDIA H200", 989e12), ("NVIDIA H20", 148e12), ("NVIDIA H100 80GB HBM3", 989e12),
    ("NVIDIA A100-SXM4-80GB", 312e12), ("NVIDIA L40S", 362.05e12), ("NVIDIA L40", 181.05e12),
    ("cpu", 448e9), ("CPU", 448e9), ("Some Unknown GPU", math.inf),
])
def test_peak_flops_table(name, expected):
    assert peak_flops(name) == expected


def test_peak_flops_override():
    assert peak_flops("Some Unknown GPU", override=1e12) == 1e12
