"""Send the weekly report where the team reads it: an incoming webhook (Slack, Mattermost, Teams'
workflow webhooks) or a small proxy that comments on a GitHub issue.

The body is one JSON object carrying the Markdown report under both names such receivers read:
``text`` (Slack, Mattermost) and ``body`` (GitHub's issue-comment API, which a proxy forwards).
Connection failures, timeouts, 429 and 5xx are retried with exponential backoff (a webhook behind a
load balancer that is restarting answers 502 for a few seconds); any other answer is final.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from compilewatch.core.errors import PostError

RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class Posted:
    status: int
    attempts: int


def post_markdown(url: str, markdown: str, *, attempts: int = 4, backoff: float = 1.0,
                  timeout: float = 15.0, sleep=time.sleep) -> Posted:
    """POST the report to `url`; returns the final HTTP status and how many tries it took. Raises
    PostError with what the server (or the network) said after the last try."""
    if not url.startswith(("http://", "https://")):
        raise PostError(f"--post {url!r} is not an http(s) URL", "give the webhook's full URL, e.g. https://hooks.slack.com/...")
    body = json.dumps({"text": markdown, "body": markdown}).encode("utf-8")
    last = ""
    for attempt in range(1, attempts + 1):
        req = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "compilewatch"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return Posted(resp.status, attempt)
        except urllib.error.HTTPError as e:
            detail = e.read(300).decode("utf-8", "replace").strip()
            last = f"HTTP {e.code} {e.reason}" + (f": {detail}" if detail else "")
            if e.code not in RETRY_STATUSES:
                raise PostError(f"the webhook refused the report: {last}",
                                "check the URL and that the webhook accepts a JSON body with 'text'") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            reason = getattr(e, "reason", e)
            last = f"{type(reason).__name__}: {reason}"
        if attempt < attempts:
            sleep(backoff * 2 ** (attempt - 1))
    raise PostError(f"could not deliver the report to {url} after {attempts} tries: {last}",
                    "check that the webhook's server is up and reachable from here; the report file, if any, was written")
