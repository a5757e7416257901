"""A webhook delivered by a real Celery worker through a real Redis broker: the first answer is
a 500, the worker queues the retry with its backoff as countdown, the second attempt lands."""

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection

from memory import webhooks
from memory.actors import Actor
from memory.models import WebhookDelivery
from memory.services.webhooks import BACKOFF_SECONDS, create_subscription
from memory.tasks import deliver_webhook
from tests.procs import CeleryWorker, Redis, send_task, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis(tmp_path):
    server = Redis(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def receiver():
    received: list[dict] = []
    statuses = [500, 200]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append({"headers": dict(self.headers), "body": body})
            self.send_response(statuses.pop(0) if len(statuses) > 1 else statuses[0])
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.received = received  # type: ignore[attr-defined]
    server.url = f"http://127.0.0.1:{server.server_address[1]}/hook"  # type: ignore[attr-defined]
    yield server
    server.shutdown()
    server.server_close()


def test_a_webhook_is_retried_and_delivered_by_a_worker_through_redis(
    world, redis, receiver, tmp_path, settings, monkeypatch
):
    settings.ENGRAM_WEBHOOKS_ALLOW_PRIVATE = True
    monkeypatch.setenv("ENGRAM_WEBHOOKS_ALLOW_PRIVATE", "1")  # the worker's settings: it posts to 127.0.0.1
    subscription = create_subscription(
        workspace=world.workspace, url=receiver.url, events=["fact.erased"], by=Actor.of_user(world.admin_user)
    )
    # The row emission would write; queued here by hand, since this process's Celery is inline.
    delivery = WebhookDelivery.objects.create(
        uuid=uuid.uuid4(),
        workspace=world.workspace,
        subscription=subscription,
        event="fact.erased",
        event_id=uuid.uuid4(),
        payload={"id": "e", "event": "fact.erased", "target": {"type": "erasure", "id": 1}, "detail": {"facts": [7]}},
    )
    worker = CeleryWorker(redis.url, connection.settings_dict["NAME"], tmp_path / "worker.log")
    try:
        send_task(redis.url, deliver_webhook.name, delivery.pk)
        timeout = BACKOFF_SECONDS[0] * 1.2 + 60
        wait_for(
            lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == "delivered", timeout=timeout, what="delivery"
        )
    finally:
        worker.stop()
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.last_status_code) == (2, 200)
    assert len(receiver.received) == 2
    request = receiver.received[-1]
    headers = request["headers"]
    assert headers["X-Engram-Delivery"] == str(delivery.uuid)
    assert headers["X-Engram-Signature"] == webhooks.sign(
        subscription.secret, headers["X-Engram-Timestamp"], request["body"]
    )
    assert json.loads(request["body"])["detail"] == {"facts": [7]}
    log = (tmp_path / "worker.log").read_text()
    assert "deliver_webhook" in log
