"""AppTest helpers shared by the explorer's tests."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = str(ROOT / "app" / "streamlit_app.py")
PAGES = ["views/lab.py", "views/runs.py", "views/panels.py", "views/diagnosis.py", "views/sweeps.py",
         "views/samples.py", "views/inspector.py", "views/external.py", "views/glossary.py", "views/workshop.py",
         "views/learn.py"]


def charts_of(at) -> list:
    """The Vega-Lite charts on the page."""
    return list(at.get("vega_lite_chart"))


def spec_title(spec: dict) -> str | None:
    title = spec.get("title")
    return title.get("text") if isinstance(title, dict) else title


def mark_types(spec: dict) -> list[str]:
    """The mark of every unit in a (possibly nested) layer spec, back to front."""
    if "layer" in spec:
        return [m for layer in spec["layer"] for m in mark_types(layer)]
    mark = spec.get("mark")
    return [mark["type"] if isinstance(mark, dict) else mark]


def units(spec: dict) -> list[dict]:
    """Every unit spec in a (possibly nested) layer spec, back to front."""
    return [u for layer in spec["layer"] for u in units(layer)] if "layer" in spec else [spec]


def chart_titles(at) -> list[str]:
    return [spec_title(json.loads(chart.proto.spec)) for chart in charts_of(at)]


def chart_data(chart) -> list:
    """A drawn chart's datasets as frames (Streamlit sends them as Arrow, apart from the spec)."""
    import pyarrow as pa

    return [pa.ipc.open_stream(d.data.data).read_all().to_pandas() for d in chart.proto.datasets]


def show(at, *runs: Path):
    """Set the runs shown in the sidebar and rerun."""
    return at.multiselect(key="runs").set_value([str(r) for r in runs]).run()


def texts(at) -> str:
    """Every markdown, caption, info, warning, error and success text on the page, joined."""
    parts = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success", "title", "subheader"):
        parts += [str(e.value) for e in getattr(at, kind)]
    return "\n".join(parts)


def fixes(at) -> list[str]:
    """The fixes the Lab's cards show (`lab_run.show_fix`), as the text a reader sees."""
    return [html.unescape(re.sub(r"<[^>]+>", "", m.value)) for m in at.markdown if m.value.startswith("<code")]
