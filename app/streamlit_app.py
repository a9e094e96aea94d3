"""PPO Playground's explorer (`streamlit run app`): page config, the shared sidebar, and routing.

Each page lives in `views/`; add one by adding a line to PAGES.
"""

from __future__ import annotations

import streamlit as st

import sidebar
import widgets

# (script, title key, url path, icon); the first is the default page.
PAGES = [
    ("views/lab.py", "nav_lab", "lab", ":material/science:"),
    ("views/runs.py", "nav_runs", "runs", ":material/table_rows:"),
    ("views/panels.py", "nav_panels", "panels", ":material/monitoring:"),
    ("views/diagnosis.py", "nav_diagnosis", "diagnosis", ":material/troubleshoot:"),
    ("views/sweeps.py", "nav_sweeps", "sweeps", ":material/grid_on:"),
    ("views/samples.py", "nav_samples", "samples", ":material/chat:"),
    ("views/inspector.py", "nav_inspector", "inspector", ":material/frame_inspect:"),
    ("views/external.py", "nav_external", "external", ":material/upload_file:"),
    ("views/glossary.py", "nav_glossary", "glossary", ":material/menu_book:"),
    ("views/workshop.py", "nav_workshop", "workshop", ":material/school:"),
    ("views/learn.py", "nav_learn", "learn", ":material/route:"),
]


def main() -> None:
    st.set_page_config(page_title="PPO Playground", page_icon=":material/monitoring:", layout="wide")
    sidebar.show()
    pages = [st.Page(script, title=widgets.t(title), url_path=url, icon=icon, default=i == 0)
             for i, (script, title, url, icon) in enumerate(PAGES)]
    st.navigation(pages).run()


if __name__ == "__main__":
    main()
