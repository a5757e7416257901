"""The conflict-detection thresholds, justified on labelled pairs with the real model."""

from django.conf import settings

from memory.embeddings import cosine, embed_texts
from memory.similarity import PairKind, classify_pair, contrasting, normalise, salient_tokens
from tests.data.labelled_pairs import CONTRADICTION, SAME, UNRELATED


def _accuracy(pairs, expected):
    vectors = embed_texts([text for pair in pairs for text in pair])
    hits = 0
    for i, (a, b) in enumerate(pairs):
        similarity = cosine(vectors[2 * i], vectors[2 * i + 1])
        hits += classify_pair(similarity, a, b) == expected
    return hits / len(pairs)


def test_default_thresholds_classify_the_labelled_pairs():
    assert settings.ENGRAM_CONTRADICTION_THRESHOLD < settings.ENGRAM_DUPLICATE_THRESHOLD
    assert _accuracy(SAME, PairKind.SAME) >= 0.95
    assert _accuracy(CONTRADICTION, PairKind.CONFLICT) >= 0.95
    assert _accuracy(UNRELATED, PairKind.UNRELATED) >= 0.95


def test_cosine_alone_cannot_separate_paraphrase_from_contradiction():
    # Why salient tokens exist: with cosine only, the best threshold still misclassifies.
    pairs = SAME + CONTRADICTION
    vectors = embed_texts([t for p in pairs for t in p])
    sims = [cosine(vectors[2 * i], vectors[2 * i + 1]) for i in range(len(pairs))]
    same, contra = sims[: len(SAME)], sims[len(SAME) :]
    best = max(sum(s >= t for s in same) + sum(s < t for s in contra) for t in sims)
    assert best < len(pairs)


def test_salient_tokens_catch_numbers_names_and_negation():
    assert contrasting("Logs are retained for 30 days.", "Logs are retained for 90 days.")
    assert contrasting("The API uses PostgreSQL.", "The API uses MySQL.")
    assert contrasting("Invoices can be edited.", "Invoices cannot be edited.")
    assert not contrasting("Logs are retained for 30 days.", "We keep logs for 30 days.")
    assert "9:00" in salient_tokens("On-call rotates every Monday at 9:00 UTC.")
    assert normalise("  Hello   World. ") == "hello world"
