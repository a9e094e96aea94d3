"""The scenario tests import their shared helpers (`reports`) from this folder."""

import sys
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
