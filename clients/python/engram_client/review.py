"""Remember reviews: hand the remember sub-agent's output to a person and wait for the decision.

    engram = EngramClient("https://engram.example.com", key)
    outcome = engram.reviews.remember_with_review(
        session_id="turn-42", output=text, files={"README.md": "…"},
        on_submitted=lambda r: print("Review at", r["review_url"]),
    )
    final_answer += "\\n\\n" + final_answer_note(outcome)

The HTTP contract is the API's "Remember reviews" endpoints: POST reviews/, GET
reviews/{id}/?wait=N (long-poll), POST reviews/{id}/consume/, GET reviews/?session=ID (`list`).
Instead of long-polling, a runtime can wait for the `review.resolved` webhook: `wait(review_id,
receiver=WebhookReceiver(secret))`.

The server holds one live review per agent and session — pending, or decided but not yet
consumed: submitting again for that session answers the live review (same id) instead of opening
another. `live(session_id)` finds it, e.g. after the runtime restarted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engram_client.errors import EngramError, ReviewTimeout
from engram_client.transport import Transport
from engram_client.webhooks import WebhookReceiver

__all__ = ["LONG_POLL_SECONDS", "ReviewClient", "ReviewOutcome", "final_answer_note"]

LONG_POLL_SECONDS = 30.0
LIST_PAGE = 50


@dataclass
class ReviewOutcome:
    """A resolved review as a runtime folds it into its answer; `raw` is the API's JSON."""

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
    """The remember-review calls, over an EngramClient's transport (`EngramClient(...).reviews`)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def submit(
        self, *, session_id: str, output: str, files: Mapping[str, str] | None = None, repo: str | None = None
    ) -> dict[str, Any]:
        """POST reviews/: the pending review with its parsed items and `review_url` — or, when the
        session already has a live review (not yet consumed), that one as it stands."""
        body: dict[str, Any] = {"session_id": session_id, "output": output, "files": dict(files or {})}
        if repo:
            body["repo"] = repo
        return self.transport.request("POST", "reviews/", body)

    def list(
        self, *, session_id: str, status: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> dict[str, Any]:
        """GET reviews/?session=: one page `{count, next, previous, results}` of this agent's
        reviews of the session, newest first, each as `get` answers it; `status` (pending,
        approved, rejected, consumed) narrows them. Another agent's reviews are never listed."""
        query = {"session": session_id, "status": status, "limit": limit, "offset": offset}
        return self.transport.request("GET", "reviews/", query=query)

    def live(self, session_id: str) -> dict[str, Any] | None:
        """The session's review not yet consumed (pending, approved or rejected), or None. The
        server holds at most one; it is normally the session's newest, but every page is read."""
        offset = 0
        while True:
            page = self.list(session_id=session_id, limit=LIST_PAGE, offset=offset)
            results = list(page.get("results") or [])
            for review in results:
                if review.get("status") != "consumed":
                    return dict(review)
            offset += len(results)
            if not results or not page.get("next"):
                return None

    def get(self, review_id: int, *, wait: float = 0) -> dict[str, Any]:
        """GET reviews/{id}/, holding up to `wait` seconds (max 30) while pending."""
        return self._poll(review_id, wait)[0]

    def _poll(self, review_id: int, wait: float) -> tuple[dict[str, Any], float | None]:
        """The review and, when the server was too busy to hold the poll, its Retry-After."""
        path = f"reviews/{int(review_id)}/"
        wait = max(0.0, min(float(wait), LONG_POLL_SECONDS))
        if not wait:
            return self.transport.send("GET", path)
        return self.transport.send("GET", path, query={"wait": f"{wait:g}"}, timeout=self.transport.timeout + wait)

    def wait(
        self,
        review_id: int,
        *,
        timeout: float | None = None,
        receiver: WebhookReceiver | None = None,
        check_every: float = 300.0,
    ) -> dict[str, Any]:
        """Long-poll until a person resolves the review; the resolved review. Raises
        ReviewTimeout after `timeout` seconds (None: wait as long as it takes — the agent's
        answer is meant to wait for a person). A server holding too many long-polls answers at
        once with Retry-After: the next poll waits that long (never a tight loop).

        With a `receiver` (engram_client.webhooks.WebhookReceiver, subscribed to
        `review.resolved`), no long-poll is held: it waits for the webhook, then reads the
        resolution with one GET (the event carries no content). One GET is also made at the
        start (it may be resolved already) and every `check_every` seconds (a lost delivery
        does not hang the agent)."""
        if receiver is not None:
            return self._wait_for_webhook(review_id, receiver=receiver, timeout=timeout, check_every=check_every)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = LONG_POLL_SECONDS if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise ReviewTimeout(int(review_id))
            review, retry_after = self._poll(review_id, max(0.1, min(LONG_POLL_SECONDS, remaining)))
            if review["status"] != "pending":
                return review
            if retry_after is not None:
                pause = min(retry_after, self.transport.max_backoff)
                self.transport.sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))

    def _wait_for_webhook(
        self, review_id: int, *, receiver: WebhookReceiver, timeout: float | None, check_every: float
    ) -> dict[str, Any]:
        review_id = int(review_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        review = self.get(review_id)
        while review["status"] == "pending":
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise ReviewTimeout(review_id, str(review.get("review_url") or ""))
            pause = max(0.1, check_every if remaining is None else min(check_every, remaining))
            receiver.wait_for_event("review.resolved", target_id=review_id, timeout=pause)
            review = self.get(review_id)
        return review

    def consume(self, review_id: int) -> dict[str, Any]:
        """POST reviews/{id}/consume/: approved|rejected → consumed (409 review_pending before).
        Consuming twice is not an error for a runtime that retries: the review is then fetched
        and returned as it is."""
        try:
            return self.transport.request("POST", f"reviews/{int(review_id)}/consume/")
        except EngramError as exc:
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
        receiver: WebhookReceiver | None = None,
    ) -> ReviewOutcome:
        """Submit, wait for a person's decision, consume; the outcome to fold into the answer.
        While the session has a live review the server answers that one, and it is the one waited
        on. `on_submitted` gets the review (e.g. to show its `review_url` to the user);
        `receiver` waits through webhooks instead of long-polling (see `wait`).
        Raises ReviewTimeout after `timeout` seconds; the review then stays pending."""
        review = self.submit(session_id=session_id, output=output, files=files, repo=repo)
        if on_submitted is not None:
            on_submitted(review)
        review_id = int(review["id"])
        try:
            resolved = self.wait(review_id, timeout=timeout, receiver=receiver)
        except ReviewTimeout:
            raise ReviewTimeout(review_id, str(review.get("review_url") or "")) from None
        consumed = self.consume(review_id)
        outcome = ReviewOutcome.from_review({**resolved, "status": consumed.get("status", resolved["status"])})
        outcome.review_url = str(review.get("review_url") or "")
        return outcome


def final_answer_note(outcome: ReviewOutcome) -> str:
    """The lines a runtime appends to its final answer (SPEC §8: fold the resolution in)."""
    lines = ["Human review of long-term memory:", f"- approved={outcome.approved}"]
    lines.append(f"- selected_paths={outcome.selected_paths}")
    lines.append(f"- stored_ids={outcome.stored_ids}")
    if outcome.note:
        lines.append(f"- {outcome.note}")
    return "\n".join(lines)
