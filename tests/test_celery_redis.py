"""Background work through a real Redis broker and a real Celery worker process."""

import contextlib

import pytest
from django.db import connection

from memory.models import Fact
from memory.tasks import embed_fact
from tests.factories import FactFactory
from tests.procs import CeleryWorker, Redis, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _reset_pool(app) -> None:
    if app._pool is not None:  # connections of the previous broker must not be reused
        app._pool.force_close_all()
        app._pool = None


@contextlib.contextmanager
def broker(url: str):
    from config.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager)
    app.conf.update(broker_url=url, task_always_eager=False)
    _reset_pool(app)
    try:
        yield app
    finally:
        app.conf.update(broker_url=saved[0], task_always_eager=saved[1])
        _reset_pool(app)


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
        with broker(redis.url):
            embed_fact.delay(fact.pk)
        wait_for(lambda: Fact.objects.get(pk=fact.pk).embedding is not None, timeout=60, what="the embedding")
    finally:
        worker.stop()
    assert "embed_fact" in (tmp_path / "worker.log").read_text()
