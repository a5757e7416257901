"""Webhooks (issue 21): signed deliveries of each event kind to a local receiver, nothing sent
for a rolled-back write, retries with backoff, failure after the last attempt, the SSRF guard,
workspace isolation, no memory content in payloads, the admin, and the client waiting on a
review through its receiver. Celery is inline here; tests/test_webhooks_redis.py runs one
delivery through a real broker and worker."""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from engram_client import EngramClient
from engram_client.webhooks import InvalidSignature, WebhookReceiver, verify
from memory import webhooks
from memory.actors import Actor
from memory.audit import record_event
from memory.errors import InsufficientPermission, InvalidInput
from memory.models import WEBHOOK_EVENTS, AuditEvent, WebhookDelivery, WebhookSubscription
from memory.services.conflicts import open_possible_conflict
from memory.services.facts import supersede_fact
from memory.services.lifecycle import challenge_fact
from memory.services.policies import propose_policy, supersede_policy
from memory.services.promotion import deny
from memory.services.webhooks import (
    BACKOFF_SECONDS,
    attempt_delivery,
    create_subscription,
    deliver_due,
    redeliver,
    update_subscription,
)
from review.models import RememberReview
from review.services import reject_review, submit_review
from tests.factories import CandidateFactory, FactFactory
from tests.procs import free_port, wait_for
from tests.review.samples import FILES, OUTPUT

SECRET_TEXT = "The staging database password is rotated every Friday by Mallory."
SYSTEM = Actor.system("tests")


class Receiver:
    """A local HTTP endpoint that records every request and answers from a script of statuses
    (the last one repeats)."""

    def __init__(self, statuses: tuple[int, ...] = (200,)) -> None:
        self.statuses = list(statuses)
        self.requests: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/engram?token=abc"

    def payloads(self) -> list[dict]:
        return [json.loads(r["body"]) for r in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def private_addresses_allowed(settings):
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = True  # the receivers listen on 127.0.0.1


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


def subscribe(world, receiver, events=WEBHOOK_EVENTS, workspace=None) -> WebhookSubscription:
    by = SYSTEM if workspace is not None else Actor.of_user(world.admin_user)
    return create_subscription(workspace=workspace or world.workspace, url=receiver.url, events=list(events), by=by)


def the_delivery() -> WebhookDelivery:
    return WebhookDelivery.objects.get()


# --- One signed delivery per event kind ----------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.usefixtures("reviewer_is_workspace_admin")
def test_each_event_kind_is_delivered_signed_with_ids_only(world, receiver, django_capture_on_commit_callbacks):
    subscription = subscribe(world, receiver)
    fact = FactFactory(domain=world.architecture, content=SECRET_TEXT, topic="staging")
    # unrelated to the supersession's text, which is read against the domain as a proposal is
    other = FactFactory(domain=world.architecture, content="Invoices are numbered per calendar year.", topic="staging")
    person = Actor.of_user(world.reviewer)
    with django_capture_on_commit_callbacks(execute=True):
        successor = supersede_fact(fact=fact, by=person, content=SECRET_TEXT + " Now on Mondays.", reason="moved")
        challenge_fact(fact=other, by=person, reason="review", detail=SECRET_TEXT)
        open_possible_conflict(existing=successor, proposed=other, by=SYSTEM, similarity=0.7, reason=SECRET_TEXT)
        policy = propose_policy(domain=world.architecture, rule=SECRET_TEXT, by=person)
        supersede_policy(policy=policy, rule=SECRET_TEXT + " v2", reason=SECRET_TEXT, by=person)
        deny(candidate=CandidateFactory(domain=world.architecture, proposed_memory=SECRET_TEXT), by=person)
        review = submit_review(agent=world.coder, session_id="s", output=OUTPUT, files=FILES, repo="web")
        reject_review(review=review, by=person, reviewer_note=SECRET_TEXT)
        record_event(
            actor=person,
            verb="subject.erased",
            workspace_id=world.workspace.pk,
            detail={
                "reason": SECRET_TEXT,
                "selection": {"kind": "text", "text": SECRET_TEXT},
                "erased": {"memory.fact": [fact.pk, successor.pk], "memory.conflict": [3]},
                "sha256": "ab" * 32,
                "counts": {"memory.fact": 2, "memory.conflict": 1},
            },
        )

    payloads = receiver.payloads()
    assert {p["event"] for p in payloads} == set(WEBHOOK_EVENTS)
    assert WebhookDelivery.objects.filter(status="delivered").count() == len(payloads) == 8  # policy twice
    for request in receiver.requests:
        headers = request["headers"]
        expected = webhooks.sign(subscription.secret, headers["X-Engram-Timestamp"], request["body"])
        assert headers["X-Engram-Signature"] == expected
        verify(
            subscription.secret,
            timestamp=headers["X-Engram-Timestamp"],
            signature=headers["X-Engram-Signature"],
            body=request["body"],
        )
        payload = json.loads(request["body"])
        assert headers["X-Engram-Event"] == payload["event"]
        assert WebhookDelivery.objects.get(uuid=headers["X-Engram-Delivery"]).event_id.hex == payload["id"].replace(
            "-", ""
        )
        assert request["path"] == "/hooks/engram?token=abc"
        assert payload["workspace"] == "acme"
        # No content: the texts above are in the audit trail, never in what leaves the site.
        assert b"Mallory" not in request["body"] and b"staging" not in request["body"]
    assert "Mallory" not in json.dumps(list(WebhookDelivery.objects.values_list("payload", flat=True)))

    by_event = {p["event"]: p for p in payloads}
    assert by_event["fact.superseded"]["target"] == {"type": "fact", "id": fact.pk}
    assert by_event["fact.superseded"]["detail"] == {"successor": successor.pk}
    assert by_event["fact.challenged"]["detail"] == {"reason": "review"}
    assert by_event["conflict.opened"]["detail"]["proposed"] == other.pk
    assert by_event["candidate.decided"]["detail"]["decision"] == "denied"
    assert by_event["review.resolved"]["target"] == {"type": "remember_review", "id": review.pk}
    assert by_event["review.resolved"]["detail"]["status"] == "rejected"
    assert by_event["review.resolved"]["detail"]["api_path"] == f"/api/v1/reviews/{review.pk}/"
    assert by_event["fact.erased"]["detail"]["facts"] == [fact.pk, successor.pk]
    assert "sha256" not in by_event["fact.erased"]["detail"]
    changes = [p["detail"]["change"] for p in payloads if p["event"] == "policy.changed"]
    assert changes == ["proposed", "superseded"]


@pytest.mark.django_db
def test_an_erasure_is_announced_by_ids_and_leaves_no_content_in_the_delivery_log(
    world, receiver, django_capture_on_commit_callbacks
):
    from memory.services.erasure import erase, parse_selection, select_subject

    subscribe(world, receiver, events=["fact.superseded", "fact.erased"])
    fact = FactFactory(domain=world.architecture, content=SECRET_TEXT, topic="staging")
    with django_capture_on_commit_callbacks(execute=True):
        successor = supersede_fact(fact=fact, by=SYSTEM, content=SECRET_TEXT + " Now on Mondays.")
        plan = select_subject(world.workspace, parse_selection({"kind": "ids", "ids": [fact.pk, successor.pk]}))
        erase(plan=plan, reason="GDPR request about Mallory", by=Actor.of_user(world.admin_user))
    erased = receiver.payloads()[-1]
    assert erased["event"] == "fact.erased" and sorted(erased["detail"]["facts"]) == sorted([fact.pk, successor.pk])
    logged = json.dumps(list(WebhookDelivery.objects.values_list("payload", flat=True)))
    assert "Mallory" not in logged and "Mallory" not in b"".join(r["body"] for r in receiver.requests).decode()
    assert WebhookDelivery.objects.filter(event="fact.superseded").exists()  # ids only: nothing to chase


@pytest.mark.django_db
def test_a_subscription_gets_only_its_events_and_an_inactive_one_nothing(
    world, receiver, django_capture_on_commit_callbacks
):
    subscribe(world, receiver, events=["fact.challenged"])
    paused = subscribe(world, receiver, events=["fact.superseded"])
    update_subscription(subscription=paused, by=Actor.of_user(world.admin_user), active=False)
    fact = FactFactory(domain=world.architecture)
    with django_capture_on_commit_callbacks(execute=True):
        supersede_fact(fact=fact, by=SYSTEM, content="A replacement.")
    assert receiver.requests == [] and not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_an_audit_event_that_is_no_webhook_event_costs_no_query(world, django_assert_num_queries):
    fact = FactFactory(domain=world.architecture)
    event = AuditEvent(workspace=world.workspace, verb="fact.created", target_type="fact", target_id=fact.pk)
    with django_assert_num_queries(0):
        webhooks.emit([event])  # not a webhook verb: not even the subscription lookup


@pytest.mark.django_db
def test_a_rolled_back_write_sends_nothing(world, receiver, django_capture_on_commit_callbacks):
    subscribe(world, receiver)
    fact = FactFactory(domain=world.architecture)
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        supersede_fact(fact=fact, by=SYSTEM, content="A replacement that never lands.")
        raise RuntimeError("the request failed after the write")
    assert callbacks == []
    assert receiver.requests == [] and not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_another_workspaces_events_never_reach_a_subscription(world, receiver, django_capture_on_commit_callbacks):
    subscribe(world, receiver, workspace=world.other_workspace)
    fact = FactFactory(domain=world.architecture)
    with django_capture_on_commit_callbacks(execute=True):
        supersede_fact(fact=fact, by=SYSTEM, content="A replacement.")
        challenge_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, reason="stale")
    assert receiver.requests == [] and not WebhookDelivery.objects.exists()


# --- Retries ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_failing_receiver_is_retried_with_backoff_then_delivered(world, django_capture_on_commit_callbacks):
    receiver = Receiver(statuses=(500, 502, 200))
    try:
        subscribe(world, receiver, events=["fact.superseded"])
        with django_capture_on_commit_callbacks(execute=True):
            supersede_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, content="A replacement.")
        delivery = the_delivery()
        assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, 500)
        assert delivery.last_error == "HTTP 500"
        first_wait = (delivery.next_attempt_at - delivery.last_attempt_at).total_seconds()
        assert BACKOFF_SECONDS[0] <= first_wait <= BACKOFF_SECONDS[0] * 1.2

        assert deliver_due() == {}  # not due yet: the inline mode never sleeps in a request
        assert deliver_due(now=delivery.next_attempt_at) == {"retry": 1}
        delivery.refresh_from_db()
        second_wait = (delivery.next_attempt_at - delivery.last_attempt_at).total_seconds()
        assert BACKOFF_SECONDS[1] <= second_wait <= BACKOFF_SECONDS[1] * 1.2

        assert deliver_due(now=delivery.next_attempt_at) == {"delivered": 1}
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 3, 200)
        assert delivery.last_error == "" and delivery.delivered_at is not None and delivery.next_attempt_at is None
        ids = {r["headers"]["X-Engram-Delivery"] for r in receiver.requests}
        assert len(receiver.requests) == 3 and ids == {str(delivery.uuid)}  # one id across retries
        assert attempt_delivery(delivery_id=delivery.pk).state == "skipped"  # delivered: never again
    finally:
        receiver.stop()


@pytest.mark.django_db
def test_the_last_failed_attempt_marks_the_delivery_failed_with_its_error(
    world, settings, django_capture_on_commit_callbacks
):
    settings.ENGRAM_WEBHOOK_MAX_ATTEMPTS = 3
    receiver = Receiver(statuses=(503,))
    try:
        subscribe(world, receiver, events=["fact.challenged"])
        with django_capture_on_commit_callbacks(execute=True):
            challenge_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, reason="stale")
        for _ in range(5):
            delivery = the_delivery()
            if delivery.next_attempt_at is None:
                break
            deliver_due(now=delivery.next_attempt_at)
        delivery = the_delivery()
        assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("failed", 3, 503)
        assert delivery.last_error == "HTTP 503" and delivery.next_attempt_at is None
        assert len(receiver.requests) == 3
        assert deliver_due(now=timezone.now() + timedelta(days=1)) == {}
    finally:
        receiver.stop()


@pytest.mark.django_db
def test_the_scheduler_sweep_sends_a_due_retry(world, django_capture_on_commit_callbacks):
    from memory.scheduler import run_frequent_jobs

    receiver = Receiver(statuses=(500, 200))
    try:
        subscribe(world, receiver, events=["fact.challenged"])
        with django_capture_on_commit_callbacks(execute=True):
            challenge_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, reason="stale")
        run_frequent_jobs()
        assert the_delivery().status == "pending"  # its retry is not due yet
        WebhookDelivery.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
        run_frequent_jobs()
        assert the_delivery().status == "delivered" and len(receiver.requests) == 2
    finally:
        receiver.stop()


@pytest.mark.django_db
def test_an_unreachable_receiver_is_logged_as_a_connection_error(world, django_capture_on_commit_callbacks):
    url = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    create_subscription(
        workspace=world.workspace, url=url, events=["fact.challenged"], by=Actor.of_user(world.admin_user)
    )
    with django_capture_on_commit_callbacks(execute=True):
        challenge_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, reason="stale")
    delivery = the_delivery()
    assert delivery.status == "pending" and delivery.attempts == 1 and delivery.last_status_code is None
    assert "Connection" in delivery.last_error


@pytest.mark.django_db
def test_redelivery_sends_the_same_event_under_a_new_delivery_id(world, receiver, django_capture_on_commit_callbacks):
    subscribe(world, receiver, events=["fact.challenged"])
    with django_capture_on_commit_callbacks(execute=True):
        challenge_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, reason="stale")
    first = the_delivery()
    with django_capture_on_commit_callbacks(execute=True):
        again = redeliver(delivery=first, by=Actor.of_user(world.admin_user))
    again.refresh_from_db()
    assert again.status == "delivered" and again.event_id == first.event_id and again.uuid != first.uuid
    bodies = [r["body"] for r in receiver.requests]
    assert len(bodies) == 2 and json.loads(bodies[0]) == json.loads(bodies[1])
    with pytest.raises(InsufficientPermission):
        redeliver(delivery=first, by=Actor.of_user(world.reviewer))


# --- SSRF guard, permissions --------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/hook",
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "http://user:pw@93.184.215.14/hook",
        "not a url",
    ],
)
def test_unsafe_urls_are_refused_at_subscription_time(world, settings, url):
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = False
    with pytest.raises(InvalidInput) as err:
        create_subscription(
            workspace=world.workspace, url=url, events=["fact.erased"], by=Actor.of_user(world.admin_user)
        )
    assert err.value.code == "invalid_webhook" and "url" in err.value.fields
    assert not WebhookSubscription.objects.exists()


def test_a_public_address_is_accepted():
    target = webhooks.validate_url("https://93.184.215.14:8443/in?x=1", allow_private=False)
    assert (target.scheme, target.port, target.path, target.address) == ("https", 8443, "/in?x=1", "93.184.215.14")


# Every IPv6 form that carries an IPv4 address, each carrying the cloud metadata address
# 169.254.169.254 (a9fe:a9fe), and the IPv6 blocks that are never a receiver on the internet.
HOSTILE_IPV6 = {
    "IPv4-mapped": "::ffff:169.254.169.254",
    "IPv4-compatible": "::169.254.169.254",
    "NAT64 well-known prefix": "64:ff9b::a9fe:a9fe",
    "NAT64 local-use prefix": "64:ff9b:1::a9fe:a9fe",
    "6to4": "2002:a9fe:a9fe::1",
    "Teredo client": "2001:0:4136:e378:8000:63bf:5601:5601",  # 0x5601_5601 = ~169.254.169.254
    "Teredo server": "2001:0:a9fe:a9fe:8000:63bf:3fff:fdd2",
    "unique local": "fd12:3456::1",
    "link-local": "fe80::1",
    "site-local": "fec0::1",
    "loopback": "::1",
    "unspecified": "::",
    "multicast": "ff02::1",
}
PUBLIC = "93.184.215.14"


def test_the_forms_carry_the_address_they_are_meant_to():
    metadata = ipaddress.IPv4Address("169.254.169.254")
    for form in ("IPv4-mapped", "IPv4-compatible", "NAT64 well-known prefix", "6to4", "Teredo client", "Teredo server"):
        assert metadata in webhooks.embedded_ipv4(ipaddress.IPv6Address(HOSTILE_IPV6[form])), form


@pytest.mark.parametrize(
    "address",
    ["64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8", "2606:4700:4700::1111"],
    ids=["NAT64 of a public IPv4", "6to4 of a public IPv4", "IPv4-mapped public", "public IPv6"],
)
def test_ipv6_forms_of_public_addresses_are_accepted(address):
    assert webhooks.validate_url(f"https://[{address}]/in", allow_private=False).address == address


@pytest.mark.django_db
@pytest.mark.parametrize("address", list(HOSTILE_IPV6.values()), ids=list(HOSTILE_IPV6))
def test_ipv6_forms_of_private_addresses_are_refused_at_subscription_time(world, settings, address):
    from memory.admin.webhooks import WebhookSubscriptionForm

    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = False
    url = f"http://[{address}]/hook"
    with pytest.raises(InvalidInput) as err:
        create_subscription(
            workspace=world.workspace, url=url, events=["fact.erased"], by=Actor.of_user(world.admin_user)
        )
    assert (err.value.status, err.value.code, list(err.value.fields)) == (400, "invalid_webhook", ["url"])
    form = WebhookSubscriptionForm(data={"workspace": world.workspace.pk, "url": url, "events": ["fact.erased"]})
    assert not form.is_valid()
    assert [e.code for e in form.errors.as_data()["url"]] == ["unsafe_url"]
    assert not WebhookSubscription.objects.exists()


class FakeNetwork:
    """DNS answers from a table; a connection attempt is recorded and refused, so no test here
    ever sends a packet."""

    def __init__(self, monkeypatch, answers: dict[str, str]) -> None:
        self.answers, self.resolved, self.connections = answers, [], []
        monkeypatch.setattr(webhooks.socket, "getaddrinfo", self.getaddrinfo)
        monkeypatch.setattr(webhooks.socket, "create_connection", self.create_connection)

    def getaddrinfo(self, host, port, *args, **kwargs):
        self.resolved.append(host)
        address = self.answers[host]
        family = webhooks.socket.AF_INET6 if ":" in address else webhooks.socket.AF_INET
        return [(family, webhooks.socket.SOCK_STREAM, 6, "", (address, port))]

    def create_connection(self, address, *args, **kwargs):
        self.connections.append(address)
        raise ConnectionRefusedError("no network in tests")


@pytest.mark.django_db
@pytest.mark.parametrize("address", list(HOSTILE_IPV6.values()), ids=list(HOSTILE_IPV6))
def test_a_name_that_now_resolves_to_a_private_ipv6_form_is_refused_at_send_time(
    world, settings, monkeypatch, django_capture_on_commit_callbacks, address
):
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = False
    network = FakeNetwork(monkeypatch, {"hooks.example.com": PUBLIC})
    create_subscription(
        workspace=world.workspace,
        url="https://hooks.example.com/in",
        events=["fact.challenged"],
        by=Actor.of_user(world.admin_user),
    )
    network.answers["hooks.example.com"] = address  # DNS rebinding after the subscription was checked
    with django_capture_on_commit_callbacks(execute=True):
        challenge_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, reason="stale")
    delivery = the_delivery()
    assert network.connections == []
    assert delivery.status == "pending" and delivery.last_error.startswith("refused:")
    assert str(ipaddress.ip_address(address)) in delivery.last_error


def test_the_post_connects_to_the_address_it_checked_and_resolves_once(monkeypatch, settings):
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = False
    network = FakeNetwork(monkeypatch, {"hooks.example.com": PUBLIC})
    outcome = webhooks.post(
        url="https://hooks.example.com/in", secret="s", event="fact.erased", delivery_id="d", payload={}
    )
    # The connection went to the checked address; nothing resolved the name a second time, so a
    # DNS answer changing between the check and the connect cannot redirect it.
    assert network.resolved == ["hooks.example.com"]
    assert network.connections == [(PUBLIC, 443)]
    assert outcome.status_code is None and "ConnectionRefusedError" in outcome.error


@pytest.mark.django_db
def test_the_url_is_checked_again_at_delivery_time(world, receiver, settings, django_capture_on_commit_callbacks):
    subscribe(world, receiver, events=["fact.challenged"])
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = False  # e.g. the name now resolves to a private address
    with django_capture_on_commit_callbacks(execute=True):
        challenge_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, reason="stale")
    delivery = the_delivery()
    assert receiver.requests == []
    assert delivery.status == "pending" and delivery.last_error.startswith("refused:")


@pytest.mark.django_db
def test_a_subscription_whose_url_no_longer_passes_can_still_be_paused(world, receiver, settings):
    subscription = subscribe(world, receiver, events=["fact.erased"])
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = False
    by = Actor.of_user(world.admin_user)
    assert update_subscription(subscription=subscription, by=by, active=False).active is False
    with pytest.raises(InvalidInput):
        update_subscription(subscription=subscription, by=by, url="http://10.0.0.8/hook")


@pytest.mark.django_db
def test_only_workspace_admins_manage_webhooks(world, receiver):
    for actor in (Actor.of_agent(world.coder), Actor.of_user(world.reviewer)):
        with pytest.raises(InsufficientPermission):
            create_subscription(workspace=world.workspace, url=receiver.url, events=["fact.erased"], by=actor)
    with pytest.raises(InvalidInput) as err:
        create_subscription(
            workspace=world.workspace, url=receiver.url, events=["fact.edited"], by=Actor.of_user(world.admin_user)
        )
    assert "events" in err.value.fields
    subscribe(world, receiver, events=["fact.erased"])
    created = AuditEvent.objects.get(verb="webhook.created")
    assert created.detail == {"host": "127.0.0.1", "events": ["fact.erased"], "active": True}  # no path, no token


# --- Admin ----------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_admin_shows_the_secret_once_then_masks_it(world, receiver):
    world.admin_user.is_staff = True
    world.admin_user.save()
    client = Client()
    client.force_login(world.admin_user)
    from django.contrib.auth.models import Permission

    world.admin_user.user_permissions.add(
        *Permission.objects.filter(
            codename__in=[
                "add_webhooksubscription",
                "change_webhooksubscription",
                "view_webhooksubscription",
                "view_webhookdelivery",
            ]
        )
    )
    response = client.post(
        reverse("admin:memory_webhooksubscription_add"),
        {"workspace": world.workspace.pk, "url": receiver.url, "events": ["review.resolved"], "active": "on"},
        follow=True,
    )
    assert response.status_code == 200
    subscription = WebhookSubscription.objects.get()
    assert subscription.secret in response.content.decode()  # shown once, in the success message
    page = client.get(reverse("admin:memory_webhooksubscription_change", args=[subscription.pk])).content.decode()
    assert subscription.secret not in page and subscription.masked_secret in page

    refused = client.post(
        reverse("admin:memory_webhooksubscription_add"),
        {"workspace": world.workspace.pk, "url": "ftp://example.com/", "events": ["review.resolved"]},
    )
    assert refused.status_code == 200 and WebhookSubscription.objects.count() == 1
    assert "Only http:// and https:// URLs" in refused.content.decode()


@pytest.mark.django_db
def test_the_delivery_log_redeliver_action_needs_a_workspace_admin(world, receiver, django_capture_on_commit_callbacks):
    from django.contrib.auth.models import Permission

    subscribe(world, receiver, events=["fact.challenged"])
    with django_capture_on_commit_callbacks(execute=True):
        challenge_fact(fact=FactFactory(domain=world.architecture), by=SYSTEM, reason="stale")
    delivery = the_delivery()
    url = reverse("admin:memory_webhookdelivery_changelist")
    for user in (world.reviewer, world.admin_user):
        user.is_staff = True
        user.save()
        user.user_permissions.add(*Permission.objects.filter(codename="view_webhookdelivery"))
    member = Client()
    member.force_login(world.reviewer)
    assert member.get(url).status_code == 200  # members read the log (ids and states only)
    member.post(url, {"action": "redeliver_selected", "_selected_action": [delivery.pk]})
    assert WebhookDelivery.objects.count() == 1
    admin = Client()
    admin.force_login(world.admin_user)
    with django_capture_on_commit_callbacks(execute=True):
        admin.post(url, {"action": "redeliver_selected", "_selected_action": [delivery.pk]})
    assert WebhookDelivery.objects.count() == 2 and len(receiver.requests) == 2


# --- The client's receiver ------------------------------------------------------------------------
def test_the_client_receiver_verifies_signatures_timestamps_and_dedupes():
    import urllib.error
    import urllib.request

    with WebhookReceiver("whsec_test", tolerance=60) as hooks:
        body = json.dumps({"id": "e1", "event": "fact.erased", "target": {"type": "erasure", "id": 4}}).encode()

        def send(timestamp: str, signature: str, delivery: str = "d1") -> int:
            request = urllib.request.Request(hooks.url, data=body, method="POST")  # noqa: S310 — http://127.0.0.1
            for name, value in (
                ("X-Engram-Timestamp", timestamp),
                ("X-Engram-Signature", signature),
                ("X-Engram-Delivery", delivery),
                ("Content-Type", "application/json"),
            ):
                request.add_header(name, value)
            try:
                with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
                    return response.status
            except urllib.error.HTTPError as exc:
                return exc.code

        now = str(int(time.time()))
        old = str(int(time.time()) - 3600)
        assert send(now, "sha256=" + "0" * 64) == 401
        assert send(old, webhooks.sign("whsec_test", old, body)) == 401  # a replay of an old delivery
        assert send(now, webhooks.sign("whsec_test", now, body)) == 200
        assert send(now, webhooks.sign("whsec_test", now, body)) == 200  # the retry of the same delivery
        assert len(hooks.events) == 1 and hooks.rejected == 2
        assert hooks.wait_for_event("fact.erased", target_id=4, timeout=0)["id"] == "e1"
        assert hooks.wait_for_event("fact.erased", target_id=5, timeout=0.1) is None
    with pytest.raises(InvalidSignature):
        verify("whsec_test", timestamp=None, signature=None, body=b"{}")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reviewer_is_workspace_admin")
def test_the_client_waits_on_a_review_through_its_webhook_receiver(world, live_server, settings):
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = True
    engram = EngramClient(live_server.url, world.coder.plain_key)
    gets = []  # the status each GET of the review answered
    real_get = engram.reviews.get

    def get(review_id, **kw):
        answer = real_get(review_id, **kw)
        gets.append(answer["status"])
        return answer

    engram.reviews.get = get  # type: ignore[method-assign]

    subscription = create_subscription(
        workspace=world.workspace,
        url="http://127.0.0.1:1/placeholder",
        events=["review.resolved"],
        by=Actor.of_user(world.admin_user),
    )
    with WebhookReceiver(subscription.secret) as hooks:
        update_subscription(subscription=subscription, by=Actor.of_user(world.admin_user), url=hooks.url)
        result = {}

        def runtime():
            result["outcome"] = engram.reviews.remember_with_review(
                session_id="t", output=OUTPUT, files=FILES, repo="web", timeout=60, receiver=hooks
            )

        thread = threading.Thread(target=runtime)
        thread.start()
        # Once its first GET answered pending, the runtime waits on its receiver: an event that
        # arrives before it starts waiting is kept and found, so the decision may come at once.
        wait_for(lambda: gets, timeout=30, what="the runtime's first GET of its review")
        decided_at = time.monotonic()
        reject_review(review=RememberReview.objects.get(), by=Actor.of_user(world.reviewer), reviewer_note="Not now.")
        thread.join(timeout=30)

    assert time.monotonic() - decided_at < 5
    outcome = result["outcome"]
    assert outcome.status == "consumed" and outcome.approved is False
    assert gets == ["pending", "rejected"]  # one at the start, one to read the resolution the event announced
    assert [e["event"] for e in hooks.events] == ["review.resolved"]
    assert WebhookDelivery.objects.get().status == "delivered"


def test_without_a_broker_the_first_attempt_does_not_hold_the_request(settings, monkeypatch):
    """Embedded mode (eager Celery, ENGRAM_WEBHOOKS_INLINE off): the attempts leave the request's thread."""
    import threading

    from memory import webhooks

    settings.ENGRAM_WEBHOOKS_INLINE = False
    settings.CELERY_TASK_ALWAYS_EAGER = True
    release, sent = threading.Event(), []

    def slow_send(ids):
        release.wait(5)
        sent.append((ids, threading.current_thread().name))

    monkeypatch.setattr(webhooks, "_send", slow_send)
    webhooks._enqueue([7, 8])
    assert sent == []  # returned while the receiver is still "slow"
    release.set()
    for thread in threading.enumerate():
        if thread.name == "engram-webhooks":
            thread.join(5)
    assert sent == [([7, 8], "engram-webhooks")]


def test_every_challenge_reason_reaches_the_webhook_the_erasure_relink_included():
    """Issue 39: a fact challenged because the fact that replaced it was erased said "reason": null."""
    from memory.models import AuditEvent
    from memory.services.lifecycle import ChallengeReason
    from memory.webhooks import _challenged

    for reason in ChallengeReason.ALL:
        event = AuditEvent(verb="fact.challenged", target_type="fact", target_id=7, detail={"reason": reason})
        assert _challenged(event)[1] == {"reason": reason}
    assert _challenged(AuditEvent(verb="fact.challenged", target_type="fact", target_id=7, detail={"reason": "x"}))[
        1
    ] == {"reason": None}
