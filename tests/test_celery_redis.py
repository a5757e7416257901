"""Background work through a real Redis broker and a real Celery worker process."""

import pytest
from django.db import connection

from memory.models import Fact
from memory.tasks import embed_fact
from tests.factories import FactFactory
from tests.procs import CeleryWorker, Redis, send_task, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def redis(tmp_path):
    server = Redis(tmp_path)
    yield server
    server.stop()


def test_a_fact_is_embedded_by_a_worker_through_redis(redis, tmp_path):
    fact = FactFactory(topic="deploys", content="Production deploys happen on Tuesdays.")
    assert fact.embedding is None
    worker = CeleryWorker(redis.url, connection.settings_dict["NAME"], tmp_path / "worker.log")
    try:
        send_task(redis.url, embed_fact.name, fact.pk)
        wait_for(lambda: Fact.objects.get(pk=fact.pk).embedding is not None, timeout=60, what="the embedding")
    finally:
        worker.stop()
    assert "embed_fact" in (tmp_path / "worker.log").read_text()
