"""The shapes' tunables: `tunables.yaml`, read and checked (`schema.Tunables`) once, when the diagnosis is imported.

`TUNABLES` is what the trend operators (trends.py), the whole-series shapes (shapes.py) and the robust statistics
(robust.py) read their sizes from; a bad value is an error naming its key before anything is diagnosed.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from playground.diagnose import schema

TUNABLES_PATH = Path(__file__).with_name("tunables.yaml")


def load(path: Path = TUNABLES_PATH) -> schema.Tunables:
    with open(path, encoding="utf-8") as f:
        return schema.tunables(yaml.safe_load(f), source=path.name)


TUNABLES = load()
