"""What `--follow` says besides each finding's line: a one-line headline each interval (the run's state, its last good
step, what changed since the last interval) and each new or graver finding posted as JSON to a webhook.

The state is the worst severity found so far: healthy (nothing of warning or worse), degraded (a warning), failing
(a critical finding). A webhook post is `{...the finding (Finding.to_dict), "run", "step", "text"}`: `run` the log
followed, `step` the last step read when it was said, `text` its line as the watcher prints it (what a chat's
incoming webhook, Slack's or Mattermost's, shows). A post that fails says so on one line and the watch goes on.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from playground.diagnose import onset
from playground.diagnose.engine import Report
from playground.diagnose.finding import Finding
from playground.diagnose.report import SEVERITY_WORDS
from playground.rundir.runs import jsonable

WEBHOOK_TIMEOUT_S = 5.0  # a post that hangs longer is given up: the watch must not fall behind the run it follows
STATES = {"info": "healthy", "warning": "degraded", "critical": "failing"}  # by the worst severity found
LABELS = {
    "en": {"healthy": "healthy", "degraded": "degraded", "failing": "failing", "waiting": "== no step read yet",
           "line": "== step {step}: {state} | {good} | {changed}", "no_problem": "no warning so far",
           "no_change": "no change", "new": "new: {ids}", "graver": "graver: {ids}",
           "moved": "the last good step moved", "post_failed": "warning: the webhook post of {id} failed ({why})"},
    "zh": {"healthy": "健康", "degraded": "退化", "failing": "失败", "waiting": "== 尚未读到任何一步",
           "line": "== 第 {step} 步：{state} | {good} | {changed}", "no_problem": "至今没有警告",
           "no_change": "无变化", "new": "新发现：{ids}", "graver": "加重：{ids}",
           "moved": "最后正常的一步变了", "post_failed": "警告：{id} 的 webhook 推送失败（{why}）"},
}


def state(report: Report) -> str:
    """healthy, degraded or failing: the worst severity among the report's findings."""
    return STATES[report.worst_severity() or "info"]


@dataclass
class Interval:
    """What one interval of the watch changed: the findings said for the first time, those said again graver, and
    whether the last good step moved."""

    new: list[Finding]
    graver: list[Finding]
    good_moved: bool = False


def headline(report: Report | None, step: int | None, changed: Interval, lang: str = "en") -> str:
    """"== step 57: degraded | last good step: 41 | new: kl_drift (warning)"; "no change" where nothing did."""
    label = LABELS[lang]
    if report is None or step is None:
        return label["waiting"]
    words = SEVERITY_WORDS[lang]
    parts = [label[kind].format(ids=", ".join(f"{f.id} ({words[f.severity]})" for f in found))
             for kind, found in (("new", changed.new), ("graver", changed.graver)) if found]
    if changed.good_moved:
        parts.append(label["moved"])
    good = onset.last_good_line(report.last_good, lang) or label["no_problem"]
    return label["line"].format(step=step, state=label[state(report)], good=good,
                                changed="; ".join(parts) or label["no_change"])


def check_webhook(url: str) -> str:
    """The URL, where it is one a finding can be posted to (http or https, with a host); a ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--webhook {url!r} is not an http(s) URL with a host (e.g. https://hooks.example.com/x)")
    return url


@dataclass
class Webhook:
    """Posts each new finding to `url` as JSON."""

    url: str
    run: str  # the log followed
    lang: str = "en"
    timeout: float = WEBHOOK_TIMEOUT_S

    def __post_init__(self) -> None:
        check_webhook(self.url)

    def post(self, finding: Finding, step: int | None, text: str) -> str | None:
        """Post one finding; None where it was received (a 2xx answer), else the warning line to print. `step` is
        None before a step was read (a crash before the first)."""
        body = {**finding.to_dict(), "run": self.run, "step": step, "text": text}
        data = json.dumps(jsonable(body), ensure_ascii=False, allow_nan=False).encode("utf-8")
        request = urllib.request.Request(self.url, data=data, method="POST",
                                         headers={"Content-Type": "application/json; charset=utf-8"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310 - http(s), checked
                answer.read()
            return None
        except (urllib.error.URLError, OSError, ValueError) as e:  # HTTPError, refused, timed out, a bad host
            why = f"HTTP {e.code}" if isinstance(e, urllib.error.HTTPError) else str(getattr(e, "reason", e))
            return LABELS[self.lang]["post_failed"].format(id=finding.id, why=why)
