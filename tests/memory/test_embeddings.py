"""The embedding service uses the real all-MiniLM-L6-v2 model, offline."""

import io

import pytest
from django.core.management import call_command

from memory.embeddings import DIMENSIONS, cosine, embed_text, embed_texts
from memory.models import Fact
from memory.services.embedding import schedule_embedding
from tests.factories import FactFactory


def test_similar_sentences_are_closer_than_unrelated_ones():
    deploy_a, deploy_b, unrelated = embed_texts(
        [
            "Production deploys happen on Tuesdays and Thursdays.",
            "We ship to production every Tuesday and Thursday.",
            "Maria prefers green tea in the afternoon.",
        ]
    )
    assert len(deploy_a) == DIMENSIONS
    assert cosine(deploy_a, deploy_b) > 0.7
    assert cosine(deploy_a, deploy_b) > cosine(deploy_a, unrelated) + 0.4


def test_vectors_are_normalised():
    vector = embed_text("The cache is invalidated on every deploy.")
    assert abs(sum(x * x for x in vector) - 1.0) < 1e-4


@pytest.mark.django_db(transaction=True)
def test_fact_is_embedded_after_its_transaction_commits():
    from django.db import transaction

    with transaction.atomic():
        fact = FactFactory(topic="deploys", content="Production deploys happen on Tuesdays.")
        schedule_embedding(fact.pk)
        assert Fact.objects.get(pk=fact.pk).embedding is None  # nothing inside the transaction
    fact.refresh_from_db()
    assert fact.embedding is not None
    assert fact.embedded_at is not None
    expected = embed_text("deploys: Production deploys happen on Tuesdays.")
    assert cosine(list(fact.embedding), expected) > 0.999


@pytest.mark.django_db
def test_reindex_embeddings_backfills_missing_vectors_with_progress():
    facts = [FactFactory() for _ in range(5)]
    out, err = io.StringIO(), io.StringIO()
    call_command("reindex_embeddings", "--batch-size", "2", stdout=out, stderr=err)
    assert "Embedded 5 facts" in out.getvalue()
    assert "5/5" in err.getvalue()  # the progress bar reached the end
    assert Fact.objects.filter(pk__in=[f.pk for f in facts], embedding__isnull=True).count() == 0
    out = io.StringIO()
    call_command("reindex_embeddings", stdout=out)
    assert "already" in out.getvalue()


def test_onnx_and_torch_backends_compute_the_same_vectors(settings):
    """The default onnxruntime backend runs the package's own weights: same tokenizer,
    truncation, mean pooling and normalisation as sentence-transformers on torch."""
    from memory.embeddings import OnnxEncoder, TorchEncoder

    texts = [
        "deploys: Production deploys happen on Tuesdays.",
        "x",
        "The payments-service uses idempotency keys (PAY-4471) and retries 3 times. " * 40,  # > 256 tokens
        "Überprüfung der Caches — 東京 cache invalidation",
    ]
    onnx = OnnxEncoder(threads=1).encode(texts, batch_size=2)  # batches pad differently than one by one
    reference = TorchEncoder(threads=1).encode(texts, batch_size=4)
    assert onnx.shape == (4, DIMENSIONS)
    assert (onnx * reference).sum(axis=1).min() > 0.99999
    assert abs(float((onnx[0] ** 2).sum()) - 1.0) < 1e-5


def test_onnx_export_is_made_once_and_reused(settings, tmp_path):
    from memory import embeddings

    settings.ENGRAM_HOME = tmp_path
    first = embeddings.onnx_file()
    made = first.stat().st_mtime_ns
    assert first.parent == tmp_path / "models"
    assert embeddings.onnx_file() == first and first.stat().st_mtime_ns == made
    assert not list(first.parent.glob("*.tmp"))


def test_a_query_embedded_ahead_is_the_same_vector_and_is_refused_inside_a_transaction(db):
    """Search embeds its query on a worker thread while its lexical SQL runs (issue 38): the vector
    is embed_text's, and inside a transaction it is refused on the calling thread as embed_text is."""
    from django.db import transaction

    from memory.embeddings import embed_ahead
    from memory.inference import InferenceInTransaction

    text = "Which queue does the billing worker read from?"
    assert embed_ahead(text).result() == embed_text(text)
    with transaction.atomic(), pytest.raises(InferenceInTransaction):
        embed_ahead(text)
