"""Webhooks: which audit events become which webhook events, their payloads, signing, and the
HTTP POST itself (issue 21). The writes (subscriptions, attempts, redeliveries) are services in
memory.services.webhooks.

Emission rides on the audit trail: `memory.audit.record_event(s)` calls `emit` right after
writing the AuditEvent, in the same transaction. For each active subscription of the event's
workspace that listens to it, a WebhookDelivery row is written there too, and the delivery task
is queued on commit — a rolled-back write sends nothing.

Payloads carry ids, states and paths, never fact or policy text:

    {"id": "<event uuid>", "event": "fact.superseded", "workspace": "acme",
     "occurred_at": "2026-12-01T11:00:00+00:00", "audit_event": 812,
     "target": {"type": "fact", "id": 41}, "detail": {"successor": 57}}

Each POST is signed: X-Engram-Signature is `sha256=` + hex HMAC-SHA256(secret,
"<X-Engram-Timestamp>." + body).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction

from memory.models import WEBHOOK_EVENTS, Conflict, WebhookDelivery, WebhookSubscription

if TYPE_CHECKING:
    from memory.models import AuditEvent

log = logging.getLogger(__name__)

__all__ = [
    "EVENT_OF_VERB",
    "WEBHOOK_EVENTS",
    "UnsafeURL",
    "emit",
    "post",
    "sign",
    "validate_url",
]

# Audit verb → webhook event. Every verb listed here has a payload builder below.
EVENT_OF_VERB: dict[str, str] = {
    "remember_review.approved": "review.resolved",
    "remember_review.rejected": "review.resolved",
    "candidate.promoted": "candidate.decided",
    "candidate.denied": "candidate.decided",
    "candidate.promotion_refused": "candidate.decided",
    "conflict.opened": "conflict.opened",
    "fact.superseded": "fact.superseded",
    "fact.conflict": "fact.superseded",  # a decided conflict: the loser is superseded by the winner
    "conflict.decided": "fact.superseded",  # a person's decision on a possible conflict, when it supersedes
    "fact.challenged": "fact.challenged",
    "subject.erased": "fact.erased",
    "policy.proposed": "policy.changed",
    "policy.superseded": "policy.changed",
    "policy.activated": "policy.changed",
    "policy.deactivated": "policy.changed",
    "policy.deprecated": "policy.changed",
}

CHALLENGE_REASONS = frozenset({"failed_replay", "conflict", "stale", "review", "erasure"})
SIGNATURE_HEADER = "X-Engram-Signature"
USER_AGENT = "Engram-Webhooks/1"


# --- Payloads: ids, states and paths only ---------------------------------------------------
# (target, detail), or None when this audit event is no webhook event after all.
Built = tuple[dict[str, Any], dict[str, Any]] | None


def _id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ids(value: Any) -> list[int]:
    return [v for v in value if _id(v) is not None] if isinstance(value, (list, tuple)) else []


def _target(event: AuditEvent) -> dict[str, Any]:
    return {"type": event.target_type, "id": event.target_id}


def _review(event: AuditEvent) -> Built:
    review_id = event.target_id
    detail = {
        "status": "approved" if event.verb.endswith("approved") else "rejected",
        "stored_ids": _ids(event.detail.get("stored_ids")),
        "api_path": f"/api/v1/reviews/{review_id}/",
        "review_path": f"/review/remember/{review_id}/",
    }
    return {"type": "remember_review", "id": review_id}, detail


def _candidate(event: AuditEvent) -> Built:
    decision = {"candidate.promoted": "promoted", "candidate.denied": "denied"}.get(event.verb, "refused")
    detail: dict[str, Any] = {"decision": decision, "decision_id": _id(event.detail.get("decision"))}
    if decision == "promoted":
        detail["fact"] = _id(event.detail.get("fact"))
    if isinstance(event.detail.get("auto"), bool):
        detail["auto"] = event.detail["auto"]
    return _target(event), detail


def _conflict_opened(event: AuditEvent) -> Built:
    similarity = event.detail.get("similarity")
    return _target(event), {
        "existing": _id(event.detail.get("existing")),
        "proposed": _id(event.detail.get("proposed")),
        "similarity": similarity if isinstance(similarity, (int, float)) else None,
    }


def _superseded(event: AuditEvent) -> Built:
    detail = event.detail
    if event.verb == "fact.conflict":
        rule = detail.get("rule")
        return {"type": "fact", "id": _id(detail.get("loser"))}, {
            "successor": _id(detail.get("winner")),
            "conflict": event.target_id,
            "rule": rule if rule in Conflict.MACHINE_RULES else None,
        }
    if event.verb == "conflict.decided":
        loser, winner = _id(detail.get("loser")) or _id(detail.get("merged")), _id(detail.get("winner"))
        if loser is None:
            return None  # "both true": nothing was superseded
        return {"type": "fact", "id": loser}, {
            "successor": winner or _id(detail.get("kept")),
            "conflict": event.target_id,
            "rule": Conflict.Rule.HUMAN.value,
        }
    return _target(event), {"successor": _id(detail.get("successor"))}


def _challenged(event: AuditEvent) -> Built:
    reason = event.detail.get("reason")
    return _target(event), {"reason": reason if reason in CHALLENGE_REASONS else None}


def _erased(event: AuditEvent) -> Built:
    # The erasure's tombstone (memory.services.erasure): only the ids of what went and the
    # counts; the reason, the selection and the content hash stay out.
    erased = event.detail.get("erased")
    erased = erased if isinstance(erased, dict) else {}
    counts = event.detail.get("counts")
    counts = counts if isinstance(counts, dict) else {}
    return {"type": "erasure", "id": event.pk}, {
        "facts": _ids(erased.get("memory.fact")),
        "erased": {str(label): _ids(ids) for label, ids in erased.items()},
        "counts": {str(label): n for label, n in counts.items() if _id(n) is not None},
    }


def _policy(event: AuditEvent) -> Built:
    detail: dict[str, Any] = {"change": event.verb.split(".", 1)[1]}
    if _id(event.detail.get("successor")) is not None:
        detail["successor"] = event.detail["successor"]
    return _target(event), detail


BUILDERS: dict[str, Callable[[AuditEvent], Built]] = {
    "review.resolved": _review,
    "candidate.decided": _candidate,
    "conflict.opened": _conflict_opened,
    "fact.superseded": _superseded,
    "fact.challenged": _challenged,
    "fact.erased": _erased,
    "policy.changed": _policy,
}
assert set(BUILDERS) == set(WEBHOOK_EVENTS) == set(EVENT_OF_VERB.values())


def payload_for(event: AuditEvent, *, name: str, event_id: uuid.UUID, workspace_slug: str) -> dict[str, Any] | None:
    """The JSON body of `event` as webhook event `name` (ids, states and paths only), or None
    when this particular audit event is not one (a possible conflict found "both true")."""
    built = BUILDERS[name](event)
    if built is None:
        return None
    target, detail = built
    return {
        "id": str(event_id),
        "event": name,
        "workspace": workspace_slug,
        "occurred_at": event.created_at.isoformat(),
        "audit_event": event.pk,
        "target": target,
        "detail": detail,
    }


# --- Emission (called by memory.audit inside the writing transaction) -----------------------
def emit(events: Sequence[AuditEvent]) -> None:
    """Write a pending WebhookDelivery per (event, listening subscription) and queue them on
    commit. No query at all unless an event's verb maps to a webhook event."""
    named = [
        (e, e.workspace_id, EVENT_OF_VERB[e.verb])
        for e in events
        if e.verb in EVENT_OF_VERB and e.workspace_id is not None
    ]
    if not named:
        return
    names = {name for _, _, name in named}
    workspaces = {ws_id for _, ws_id, _ in named if ws_id is not None}
    subscriptions: dict[tuple[int, str], list[WebhookSubscription]] = {}
    query = WebhookSubscription.objects.filter(workspace_id__in=workspaces, active=True).select_related("workspace")
    for subscription in query:
        for name in names.intersection(subscription.events):
            subscriptions.setdefault((subscription.workspace_id, name), []).append(subscription)
    if not subscriptions:
        return
    rows: list[WebhookDelivery] = []
    for event, ws_id, name in named:
        listening = subscriptions.get((ws_id, name), []) if ws_id is not None else []
        if not listening:
            continue
        event_id = uuid.uuid4()
        payload = payload_for(event, name=name, event_id=event_id, workspace_slug=listening[0].workspace.slug)
        if payload is None:
            continue
        rows += [
            WebhookDelivery(
                uuid=uuid.uuid4(),
                workspace_id=ws_id,
                subscription=subscription,
                event=name,
                event_id=event_id,
                payload=payload,
                next_attempt_at=event.created_at,
            )
            for subscription in listening
        ]
    if rows:
        created = WebhookDelivery.objects.bulk_create(rows)
        enqueue_on_commit([row.pk for row in created])


# A batch write (stale detection may challenge thousands of facts) queues this many attempts at
# commit; the sweep sends the rest, so an inline run never makes thousands of POSTs in a row.
ENQUEUE_AT_COMMIT_MAX = 100


def enqueue_on_commit(delivery_ids: Iterable[int]) -> None:
    """Queue each delivery's first attempt once the transaction commits. A broker that is down
    loses nothing: the rows stay pending and the sweep (deliver_due_webhooks) sends them."""
    ids = list(delivery_ids)[:ENQUEUE_AT_COMMIT_MAX]
    if ids:
        transaction.on_commit(lambda: _enqueue(ids), robust=True)


def _enqueue(ids: list[int]) -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER and not settings.ENGRAM_WEBHOOKS_INLINE:
        # Embedded mode (no broker): the attempts would run inside the request that wrote, and a
        # slow receiver would hold it for seconds; send them from a thread instead.
        threading.Thread(target=_send_in_thread, args=(ids,), name="engram-webhooks", daemon=True).start()
        return
    _send(ids)


def _send(ids: list[int]) -> None:
    from celery import current_app

    # By name: memory.tasks wraps the services that record events, so importing it would close a
    # cycle (as memory.services.embedding.schedule_embedding does).
    task = current_app.tasks["memory.tasks.deliver_webhook"]
    for pk in ids:
        task.delay(pk)


def _send_in_thread(ids: list[int]) -> None:
    from django.db import connection

    try:
        _send(ids)
    except Exception:  # the rows stay pending: the sweep sends them at its next tick
        log.exception("Webhook deliveries %s failed to send; the sweep will retry them", ids)
    finally:
        connection.close()


# --- Signing ---------------------------------------------------------------------------------
def sign(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>`, the X-Engram-Signature value."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def body_of(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")


# --- SSRF guard --------------------------------------------------------------------------------
class UnsafeURL(ValueError):
    """A webhook URL Engram refuses to call; the message says why."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str
    address: str  # the checked IP the connection goes to (pinned: DNS cannot change it after)


# IPv6 forms that carry an IPv4 address a translator or tunnel would deliver to. The IPv4-mapped
# form and the NAT64 well-known prefix *denote* that IPv4 address (RFC 6052 forbids the prefix for
# non-global ones), so only it decides; every other carrier must pass as IPv6 too.
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # ::a.b.c.d, deprecated (RFC 4291), in reserved ::/8
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052: the last 32 bits
# RFC 8215 local-use NAT64: where the IPv4 sits depends on the prefix length its operator chose
# (/48 to /96), so it cannot be read back; the block is never globally routed and is refused whole.
_NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses `ip` carries: IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96),
    6to4 (2002::/16, bits 16-47) and Teredo (2001::/32: the server, and the client un-XORed)."""
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip in _IPV4_COMPATIBLE or ip in _NAT64_WELL_KNOWN:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return tuple(found)


def _routable(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_private: bool) -> bool:
    if ip.is_unspecified or ip.is_multicast:
        return False
    if allow_private:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        # Python 3.11's is_global lets the reserved ::/8, site-local fec0::/10 and RFC 8215 pass.
        return ip.is_global and not (ip.is_reserved or ip.is_site_local or ip in _NAT64_LOCAL_USE)
    return ip.is_global


def address_allowed(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, *, allow_private: bool) -> bool:
    """May Engram connect to `ip`? An IPv6 address carrying an IPv4 one (embedded_ipv4) passes only
    when that IPv4 address passes too, unless it denotes nothing but it (IPv4-mapped, NAT64)."""
    if isinstance(ip, ipaddress.IPv4Address):
        return _routable(ip, allow_private)
    carried = embedded_ipv4(ip)
    if not all(_routable(v4, allow_private) for v4 in carried):
        return False
    if ip.ipv4_mapped is not None or ip in _NAT64_WELL_KNOWN:
        return True
    return _routable(ip, allow_private)


def validate_url(url: str, *, allow_private: bool | None = None) -> Target:
    """Where a POST to `url` would go. Raises UnsafeURL for anything but http(s), credentials in
    the URL, a name that does not resolve, or (unless ENGRAM_WEBHOOKS_ALLOW_PRIVATE) any resolved
    address that is private, loopback, link-local, reserved or otherwise not globally routable, or
    an IPv6 form carrying such an IPv4 address (address_allowed)."""
    if allow_private is None:
        allow_private = bool(settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE)
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"Not a valid URL: {exc}.") from None
    if parts.scheme not in {"http", "https"}:
        raise UnsafeURL("Only http:// and https:// URLs are called.")
    if not parts.hostname:
        raise UnsafeURL("The URL has no host.")
    if parts.username is not None or parts.password is not None:
        raise UnsafeURL("Credentials in the URL are refused; the signature authenticates Engram.")
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnsafeURL(f"The host {parts.hostname!r} does not resolve ({exc}).") from None
    addresses = []
    for info in infos:
        raw = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone
        ip = ipaddress.ip_address(raw)
        if not address_allowed(ip, allow_private=allow_private):
            carried = embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else ()
            what = f"{ip} (carrying {', '.join(map(str, carried))})" if carried else str(ip)
            raise UnsafeURL(f"The host {parts.hostname!r} resolves to {what}, a private, loopback or reserved address.")
        addresses.append(raw)
    if not addresses:
        raise UnsafeURL(f"The host {parts.hostname!r} does not resolve.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, path, addresses[0])


# --- The POST ---------------------------------------------------------------------------------
class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=ssl.create_default_context())
        self._address = target.address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post(
    *, url: str, secret: str, event: str, delivery_id: str, payload: Mapping[str, Any], timeout: float | None = None
) -> Outcome:
    """One signed POST; never raises. The URL is checked again here (DNS may have changed since
    the subscription was saved) and the connection goes to the checked address. Redirects are
    not followed (a 3xx is a failed attempt)."""
    timeout = float(timeout or settings.ENGRAM_WEBHOOK_TIMEOUT_SECONDS)
    try:
        target = validate_url(url)
    except UnsafeURL as exc:
        return Outcome(None, f"refused: {exc}")
    body = body_of(payload)
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Engram-Event": event,
        "X-Engram-Delivery": delivery_id,
        "X-Engram-Timestamp": timestamp,
        SIGNATURE_HEADER: sign(secret, timestamp, body),
    }
    connection = (_PinnedHTTPS if target.scheme == "https" else _PinnedHTTP)(target, timeout)
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        response.read(4096)
        status = response.status
    except (OSError, http.client.HTTPException) as exc:
        return Outcome(None, f"{type(exc).__name__}: {exc}"[:500])
    finally:
        connection.close()
    if 200 <= status < 300:
        return Outcome(status, "")
    return Outcome(status, f"HTTP {status}")
