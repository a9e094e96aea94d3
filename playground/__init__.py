"""PPO Playground: small PPO agents whose metrics read like verl's, and a diagnosis of what goes wrong."""

__version__ = "0.1.0"

# How every command the project shows a user begins: the interpreter of the virtual environment that `make play` and
# `make test` build, from the checkout's root, so that a command works as written in a fresh shell (no activation).
PYTHON = ".venv/bin/python"
STREAMLIT = ".venv/bin/streamlit"
RUNS_ENV = "PLAYGROUND_RUNS"  # the explorer's runs folders (`:`-separated), read by app/data.py
