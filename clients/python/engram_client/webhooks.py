"""Receive Engram's webhooks: a small standard-library HTTP receiver that checks each delivery's
signature and timestamp, drops duplicates, and lets a caller wait for an event.

    with WebhookReceiver(secret, port=8765) as receiver:     # register receiver.url in the admin
        review = engram.reviews.submit(session_id="turn-42", output=text)
        resolved = engram.reviews.wait(review["id"], receiver=receiver)

A delivery is a POST of JSON with the headers X-Engram-Event, X-Engram-Delivery (uuid, the same
on every retry), X-Engram-Timestamp (unix seconds) and X-Engram-Signature:
`sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>`. Payloads carry ids, states and paths,
never memory content: read what you need through the API (the review helper does one GET).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from engram_client.errors import EngramError

__all__ = ["InvalidSignature", "WebhookReceiver", "sign", "verify"]

MAX_BODY_BYTES = 1_000_000
DEFAULT_TOLERANCE = 300.0


class InvalidSignature(EngramError):
    """A delivery whose signature or timestamp does not check out."""

    def __init__(self, detail: str) -> None:
        super().__init__(401, "invalid_webhook_signature", detail)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Engram-Signature value Engram sends for `body` at `timestamp`."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def verify(
    secret: str,
    *,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> None:
    """Raise InvalidSignature unless `signature` signs `body` at `timestamp` with `secret` and the
    timestamp is within `tolerance` seconds of now (a replayed old delivery is refused)."""
    if not timestamp or not signature:
        raise InvalidSignature("Missing X-Engram-Timestamp or X-Engram-Signature.")
    try:
        sent = int(timestamp)
    except ValueError:
        raise InvalidSignature("X-Engram-Timestamp is not a unix time.") from None
    if abs((time.time() if now is None else now) - sent) > tolerance:
        raise InvalidSignature("X-Engram-Timestamp is outside the accepted window.")
    try:
        expected = sign(secret, timestamp, body)
    except UnicodeEncodeError:
        raise InvalidSignature("X-Engram-Timestamp is not a unix time.") from None
    if not hmac.compare_digest(expected, signature.strip()):
        raise InvalidSignature("The signature does not match.")


class WebhookReceiver:
    """An HTTP server on a daemon thread that accepts Engram's signed deliveries.

    `secret` is the subscription's signing secret; `host`/`port` where it listens (port 0: any
    free port — read `url`); `path` the only path it answers; `tolerance` the timestamp window in
    seconds. Verified events are kept (the last `history`), each delivery id once, and handed to
    `on_event` if given. `wait_for` blocks until a matching event has arrived — also one that
    arrived before the call, so there is no race between starting an action and waiting on it."""

    def __init__(
        self,
        secret: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/engram/webhooks",
        tolerance: float = DEFAULT_TOLERANCE,
        history: int = 1000,
        on_event: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        self.secret = secret
        self.path = "/" + path.lstrip("/")
        self.tolerance = tolerance
        self.on_event = on_event
        self.events: deque[dict[str, Any]] = deque(maxlen=max(1, history))
        self.rejected = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._max_seen = max(1, history) * 10
        self._changed = threading.Condition()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # --- lifecycle ---
    @property
    def url(self) -> str:
        address = self._server.server_address
        raw_host, port = address[0], address[1]
        host = raw_host.decode() if isinstance(raw_host, bytes) else str(raw_host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}{self.path}"

    def start(self) -> WebhookReceiver:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, name="engram-webhooks", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- waiting ---
    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], *, timeout: float | None = None
    ) -> dict[str, Any] | None:
        """The first received event (oldest first) for which `predicate` is true, waiting up to
        `timeout` seconds (None: no limit) for it; None on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def wait_for_event(
        self, event: str, *, target_id: int | None = None, timeout: float | None = None
    ) -> dict[str, Any] | None:
        """`wait_for` an event by name (and its target's id)."""

        def matches(payload: dict[str, Any]) -> bool:
            target = payload.get("target") or {}
            return payload.get("event") == event and (target_id is None or target.get("id") == target_id)

        return self.wait_for(matches, timeout=timeout)

    # --- receiving ---
    def _accept(self, delivery_id: str, payload: dict[str, Any]) -> bool:
        """Keep a verified delivery; False if this delivery id was already received."""
        with self._changed:
            if delivery_id in self._seen:
                return False
            self._seen[delivery_id] = None
            while len(self._seen) > self._max_seen:
                self._seen.popitem(last=False)
            self.events.append(payload)
            self._changed.notify_all()
        if self.on_event is not None:
            self.on_event(payload)
        return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet: the caller logs
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                raw = json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:
                if self.path.split("?", 1)[0] != receiver.path:
                    self._answer(404, {"error": "not found"})
                    return
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    length = -1
                if length < 0 or length > MAX_BODY_BYTES:
                    self._answer(413, {"error": "body too large"})
                    return
                body = self.rfile.read(length)
                try:
                    verify(
                        receiver.secret,
                        timestamp=self.headers.get("X-Engram-Timestamp"),
                        signature=self.headers.get("X-Engram-Signature"),
                        body=body,
                        tolerance=receiver.tolerance,
                    )
                    payload = json.loads(body)
                    if not isinstance(payload, dict):
                        raise ValueError("not an object")
                except InvalidSignature as exc:
                    receiver.rejected += 1
                    self._answer(401, {"error": exc.detail})
                    return
                except ValueError:
                    receiver.rejected += 1
                    self._answer(400, {"error": "the body is not a JSON object"})
                    return
                delivery_id = self.headers.get("X-Engram-Delivery") or str(payload.get("id") or "")
                fresh = receiver._accept(delivery_id, payload)
                self._answer(200, {"received": True, "duplicate": not fresh})

        return Handler
