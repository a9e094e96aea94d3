"""`--follow`'s headline each interval and its webhook (playground/diagnose/live.py), on logs written for the test;
the webhook's posts are received by a local http.server in a thread."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from playground.diagnose.__main__ import main
from playground.diagnose.follow import follow
from playground.diagnose.live import Webhook, check_webhook

STEADY = "step:{s} - actor/pg_loss:0.01 - actor/grad_norm:0.5 - critic/score/mean:{score:.2f}\n"  # a score that rises
BROKEN = "step:{s} - actor/pg_loss:0.01 - actor/grad_norm:nan - critic/score/mean:{score:.2f}\n"  # a crash from 26
CRASH_LOG = "".join((BROKEN if s >= 26 else STEADY).format(s=s, score=0.1 + 0.02 * s) for s in range(1, 31))


class _Receiver(BaseHTTPRequestHandler):
    """Keeps each POST's JSON body; answers with the server's `status`."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers["Content-Length"])
        self.server.bodies.append(json.loads(self.rfile.read(length)))  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.end_headers()

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def receiver():
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    server.bodies, server.status = [], 200  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server: HTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/hook"


def _log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.log"
    path.write_text(text)
    return path


def test_a_headline_each_interval_says_the_state_the_last_good_step_and_what_changed(tmp_path):
    said: list[str] = []
    follow(_log(tmp_path, CRASH_LOG), interval=0.01, idle_exit=0.1, echo=said.append)
    heads = [line for line in said if line.startswith("== ")]
    assert len(heads) >= 3  # one each interval, not only when something happened
    assert heads[0] == "== step 29: failing | last good step: 25 | new: training_crash (critical)"
    assert set(heads[1:]) == {"== step 30: failing | last good step: 25 | no change"}
    # the finding's own line comes before its headline, as before
    assert said.index(heads[0]) > next(i for i, line in enumerate(said) if "training_crash" in line)


def test_a_healthy_run_heads_healthy_with_no_warning_so_far_and_zh_has_its_words(tmp_path):
    said: list[str] = []
    steady = "".join(STEADY.format(s=s, score=0.1 + 0.02 * s) for s in range(1, 6))
    follow(_log(tmp_path, steady), interval=0.01, idle_exit=0.05, echo=said.append, lang="zh")
    assert said[0] == "== 第 4 步：健康 | 至今没有警告 | 无变化"


def test_a_file_not_there_yet_heads_no_step_read_yet(tmp_path):
    said: list[str] = []
    assert follow(tmp_path / "later.log", interval=0.01, idle_exit=0.03, echo=said.append) is None
    assert said[0].startswith("waiting for ") and said[1] == "== no step read yet"


def test_each_new_finding_is_posted_once_with_its_run_and_step(tmp_path, receiver):
    log = _log(tmp_path, CRASH_LOG)
    said: list[str] = []
    follow(log, interval=0.01, idle_exit=0.1, echo=said.append, webhook=_url(receiver))
    (body,) = receiver.bodies  # said once, posted once
    assert body["id"] == "training_crash" and body["severity"] == "critical" and body["onset_step"] == 26
    assert body["run"] == str(log) and body["step"] == 29  # the last step read when it was said
    assert body["text"] == next(line for line in said if "training_crash" in line)
    assert body["evidence"] and body["explanation"]["zh"]  # the finding's fields, all of them
    assert not any(line.startswith("warning: the webhook") for line in said)


def test_a_failed_post_prints_one_warning_line_and_the_watch_goes_on(tmp_path, receiver):
    receiver.status = 500
    said: list[str] = []
    report = follow(_log(tmp_path, CRASH_LOG), interval=0.01, idle_exit=0.1, echo=said.append,
                    webhook=_url(receiver))
    assert [line for line in said if line.startswith("warning:")] == [
        "warning: the webhook post of training_crash failed (HTTP 500)"]
    assert report is not None and report.steps == 30 and said[-1].endswith("no change")  # followed to its end


def test_a_webhook_nobody_listens_on_fails_quickly_and_is_said_once(tmp_path):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    said: list[str] = []
    follow(_log(tmp_path, CRASH_LOG), interval=0.01, idle_exit=0.1, echo=said.append,
           webhook=f"http://127.0.0.1:{port}/hook")
    (warning,) = [line for line in said if line.startswith("warning:")]
    assert warning.startswith("warning: the webhook post of training_crash failed (")


def test_a_webhook_that_is_no_http_url_is_refused_before_the_watch(tmp_path, capsys):
    for url in ("hooks.example.com/x", "ftp://hooks.example.com/x", "http://"):
        with pytest.raises(ValueError, match="not an http"):
            check_webhook(url)
        with pytest.raises(ValueError):
            Webhook(url, run="train.log")
    log = _log(tmp_path, CRASH_LOG)
    with pytest.raises(SystemExit) as exit_:
        main([str(log), "--follow", "--webhook", "hooks.example.com/x"])
    assert exit_.value.code == 2 and "is not an http(s) URL" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(log), "--webhook", "http://127.0.0.1:9/x"])  # without --follow there is nothing to post live
    assert "give --follow too" in capsys.readouterr().err


def test_the_command_line_follows_a_finished_log_to_its_end_posting_its_findings(tmp_path, receiver, capsys):
    log = _log(tmp_path, CRASH_LOG)
    code = main([str(log), "--follow", "--interval", "0.05", "--idle-exit", "0.2", "--webhook", _url(receiver),
                 "--fail-on", "critical"])
    out = capsys.readouterr().out
    assert code == 1 and "== step 29: failing | last good step: 25 | new: training_crash (critical)" in out
    assert [b["id"] for b in receiver.bodies] == ["training_crash"]
