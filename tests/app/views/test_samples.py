"""Tests for `app/views/samples.py`: a token run's samples beside their step; a gym run's episodes."""

from __future__ import annotations

from app_helpers import chart_titles, show, texts


def test_token_samples_at_a_step(app, tree):
    at = show(app.run(), tree["token"]).switch_page("views/samples.py").run()
    assert not at.exception
    assert chart_titles(at) == ["critic/score/mean"]
    assert "Step 50: 4 samples" in texts(at)
    at.select_slider(key="samples_step").set_value(20).run()
    table = at.dataframe[0].value
    assert list(table["prompt"]) == ["20 + 0 =", "20 + 1 =", "20 + 2 =", "20 + 3 ="]
    assert list(table["truncated"]) == [False, False, False, True]
    at.selectbox(key="samples_metric").set_value("response_length/mean").run()
    assert chart_titles(at) == ["response_length/mean"]


def test_gym_run_shows_episode_returns_and_lengths(app, tree):
    at = show(app.run(), tree["healthy"]).switch_page("views/samples.py").run()
    assert not at.exception
    assert chart_titles(at) == ["Episode returns", "Episode lengths"]


def test_run_without_samples(app, tree):
    at = show(app.run(), tree["no_info"]).switch_page("views/samples.py").run()
    assert not at.exception and "no episode metrics" in texts(at)
