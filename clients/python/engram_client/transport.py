"""The one HTTP caller of the package: JSON over urllib, bearer auth, retries with backoff.

EngramClient, its review helper and the memory agent's OpenAI-compatible decider all send
through a Transport. A non-2xx answer raises EngramError with the body's `code`, `detail` and
`fields`. 429 and 503 are retried with exponential backoff, waiting at least what `Retry-After`
asks; connection failures are retried only for GET, PUT, DELETE and HEAD (a POST that may have
arrived is not sent twice).
"""

from __future__ import annotations

import email.utils
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from engram_client.errors import EngramError

__all__ = ["IDEMPOTENT", "RETRY_STATUSES", "Transport", "parse_retry_after"]

RETRY_STATUSES = frozenset({429, 503})
IDEMPOTENT = frozenset({"GET", "PUT", "DELETE", "HEAD"})


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _clean(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def http_root(base_url: str) -> str:
    """`base_url` without a trailing slash; ValueError unless it is an http(s) URL."""
    root = base_url.rstrip("/")
    if not root.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}")
    return root


class Transport:
    """JSON calls to one HTTP root.

    `base_url` is the root every path is relative to; `key` (if any) is sent as a bearer token;
    `timeout` bounds each call unless the call gives its own; `retries` is how many times a
    429/503 (or a lost connection on an idempotent call) is retried, waiting
    `backoff · 2^attempt` seconds (at most `max_backoff`), or longer when `Retry-After` says so.
    `sleep` is how every wait is taken (tests pass a recorder).
    """

    def __init__(
        self,
        base_url: str,
        key: str = "",
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base = http_root(base_url) + "/"
        self.key = key
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.sleep = sleep

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.max_backoff, self.backoff * (2**attempt)) * (1 + random.random() * 0.1)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff))
        return delay

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One call with retries; the decoded JSON answer (an empty dict for an empty body)."""
        return self.send(method, path, body, query=query, timeout=timeout)[0]

    def send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> tuple[dict[str, Any], float | None]:
        """`request`, also answering the 2xx answer's Retry-After (seconds), if it had one.
        Query values left at None are dropped; booleans are sent as true/false."""
        url = self.base + path.lstrip("/")
        params = _clean(query or {})
        if params:
            url += "?" + urllib.parse.urlencode(
                {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()}
            )
        data = json.dumps(body).encode("utf-8") if body is not None else None
        attempt = 0
        while True:
            request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 — scheme checked in __init__
            if self.key:
                request.add_header("Authorization", f"Bearer {self.key}")
            request.add_header("Accept", "application/json")
            if data is not None:
                request.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:  # noqa: S310
                    raw = response.read().decode("utf-8")
                    payload = dict(json.loads(raw)) if raw.strip() else {}
                    return payload, parse_retry_after(response.headers.get("Retry-After"))
            except urllib.error.HTTPError as exc:
                if exc.code in RETRY_STATUSES and attempt < self.retries:
                    retry_after = parse_retry_after(exc.headers.get("Retry-After") if exc.headers else None)
                    exc.close()
                    self.sleep(self._delay(attempt, retry_after))
                    attempt += 1
                    continue
                raise _error(exc) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                if method in IDEMPOTENT and attempt < self.retries:
                    self.sleep(self._delay(attempt, None))
                    attempt += 1
                    continue
                reason = getattr(exc, "reason", exc)
                raise EngramError(0, "connection_error", f"No answer from {self.base}: {reason}") from exc


def _error(exc: urllib.error.HTTPError) -> EngramError:
    """The EngramError for an HTTP error answer: Engram's `{"code", "detail", "fields"}` body, or
    (from another server, e.g. an OpenAI-compatible one) `{"error": {"code", "message"}}`."""
    raw = exc.read().decode("utf-8", errors="replace")
    exc.close()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        return EngramError(exc.code, "http_error", raw[:500] or str(exc.reason))
    nested = payload.get("error")
    if isinstance(nested, dict) and "code" not in payload:
        payload = {"code": nested.get("code") or nested.get("type"), "detail": nested.get("message")}
    fields = payload.get("fields")
    return EngramError(
        exc.code,
        str(payload.get("code") or "error"),
        str(payload.get("detail") or ""),
        fields if isinstance(fields, dict) else {},
    )
