"""A small client for agent runtimes: hand the remember sub-agent's output to a person and wait.

    from agents.review_helper import ReviewClient
    client = ReviewClient("https://engram.example.com", key)
    outcome = client.remember_with_review(session_id="turn-42", output=text, files={"README.md": "…"},
                                          on_submitted=lambda r: print("Review at", r["review_url"]))
    final_answer += "\\n\\n" + outcome.note

Standard library only (urllib), so any runtime can vendor it. The HTTP contract is API.md's
"Remember reviews" table: POST reviews/, GET reviews/{id}/?wait=N (long-poll), POST
reviews/{id}/consume/.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

LONG_POLL_SECONDS = 30


class ReviewAPIError(Exception):
    """A non-2xx answer: `status`, and the API's stable `code` and `detail`."""

    def __init__(self, status: int, code: str, detail: str, fields: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.fields = status, code, detail, fields or {}


class ReviewTimeout(Exception):
    """Nobody resolved the review within the caller's timeout; it stays pending on the site."""


@dataclass
class ReviewOutcome:
    id: int
    status: str
    approved: bool
    selected_paths: list[str] = field(default_factory=list)
    stored_ids: list[int] = field(default_factory=list)
    edits: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    review_url: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_review(cls, review: Mapping[str, Any]) -> ReviewOutcome:
        resolution = review.get("resolution") or {}
        return cls(
            id=int(review["id"]),
            status=str(review["status"]),
            approved=bool(resolution.get("approved")),
            selected_paths=list(resolution.get("selected_paths") or []),
            stored_ids=[int(i) for i in resolution.get("stored_ids") or []],
            edits=dict(resolution.get("edits") or {}),
            note=str(resolution.get("note") or ""),
            review_url=str(review.get("review_url") or ""),
            raw=dict(review),
        )


class ReviewClient:
    def __init__(
        self, base_url: str, key: str, *, timeout: float = 10.0, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        """`base_url` is the site root (e.g. http://localhost:8000); `timeout` bounds each plain
        call (long-polls get their wait time on top); `sleep` waits out a Retry-After."""
        self.api = base_url.rstrip("/") + "/api/v1/"
        self.key = key
        self.timeout = timeout
        self._sleep = sleep

    def _call(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> dict[str, Any]:
        return self._send(method, path, body, timeout=timeout)[0]

    def _send(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> tuple[dict[str, Any], float | None]:
        """The decoded answer and its Retry-After in seconds (None without one)."""
        url = self.api + path
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"Not an http(s) URL: {url!r}")
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 — scheme checked above
        request.add_header("Authorization", f"Bearer {self.key}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:  # noqa: S310
                payload = dict(json.loads(response.read().decode("utf-8") or "{}"))
                return payload, _seconds(response.headers.get("Retry-After"))
        except urllib.error.HTTPError as exc:
            raw = exc.read().decode("utf-8", errors="replace")
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = {"code": "http_error", "detail": raw[:500]}
            raise ReviewAPIError(
                exc.code, str(payload.get("code", "error")), str(payload.get("detail", "")), payload.get("fields")
            ) from None

    def submit(
        self, *, session_id: str, output: str, files: Mapping[str, str] | None = None, repo: str | None = None
    ) -> dict[str, Any]:
        """POST reviews/: the created review (id, status, items, review_url)."""
        body: dict[str, Any] = {"session_id": session_id, "output": output, "files": dict(files or {})}
        if repo:
            body["repo"] = repo
        return self._call("POST", "reviews/", body)

    def get(self, review_id: int, *, wait: float = 0) -> dict[str, Any]:
        """GET reviews/{id}/, holding up to `wait` seconds (max 30) while pending."""
        return self._poll(review_id, wait)[0]

    def _poll(self, review_id: int, wait: float) -> tuple[dict[str, Any], float | None]:
        wait = max(0.0, min(float(wait), LONG_POLL_SECONDS))
        return self._send("GET", f"reviews/{int(review_id)}/?wait={wait:g}", timeout=self.timeout + wait)

    def wait(self, review_id: int, *, timeout: float | None = None) -> dict[str, Any]:
        """Long-poll until the review is resolved. Raises ReviewTimeout after `timeout` seconds
        (None: wait as long as it takes — the agent's answer is meant to wait for a person).
        A server holding too many long-polls answers at once with Retry-After: the next poll
        waits that long."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = LONG_POLL_SECONDS if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise ReviewTimeout(f"Remember review {review_id} is still pending.")
            review, retry_after = self._poll(review_id, min(LONG_POLL_SECONDS, remaining))
            if review["status"] != "pending":
                return review
            if retry_after is not None:
                pause = min(retry_after, LONG_POLL_SECONDS)
                self._sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))

    def consume(self, review_id: int) -> dict[str, Any]:
        """POST reviews/{id}/consume/. Consuming twice is not an error for a runtime that
        retries: the review is then fetched and returned as it is."""
        try:
            return self._call("POST", f"reviews/{int(review_id)}/consume/")
        except ReviewAPIError as exc:
            if exc.code == "review_already_consumed":
                return self.get(review_id)
            raise

    def remember_with_review(
        self,
        *,
        session_id: str,
        output: str,
        files: Mapping[str, str] | None = None,
        repo: str | None = None,
        timeout: float | None = None,
        on_submitted: Callable[[dict[str, Any]], object] | None = None,
    ) -> ReviewOutcome:
        """Submit, wait for a person's decision, consume; the outcome to fold into the answer.

        `on_submitted` gets the created review (e.g. to show its `review_url` to the user)."""
        review = self.submit(session_id=session_id, output=output, files=files, repo=repo)
        if on_submitted is not None:
            on_submitted(review)
        resolved = self.wait(int(review["id"]), timeout=timeout)
        consumed = self.consume(int(review["id"]))
        outcome = ReviewOutcome.from_review({**resolved, "status": consumed.get("status", resolved["status"])})
        outcome.review_url = str(review.get("review_url") or "")
        return outcome


def _seconds(retry_after: str | None) -> float | None:
    """A Retry-After in delta-seconds (what Engram sends), or None."""
    try:
        return max(0.0, float(retry_after)) if retry_after else None
    except ValueError:
        return None


def final_answer_note(outcome: ReviewOutcome) -> str:
    """The lines a runtime appends to its final answer (SPEC §8: fold the resolution in)."""
    lines = ["Human review of long-term memory:", f"- approved={outcome.approved}"]
    lines.append(f"- selected_paths={outcome.selected_paths}")
    lines.append(f"- stored_ids={outcome.stored_ids}")
    if outcome.note:
        lines.append(f"- {outcome.note}")
    return "\n".join(lines)
