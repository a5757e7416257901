"""The conflict-detection thresholds, justified on labelled pairs with the real model."""

from memory.classifier import normalise
from memory.embeddings import cosine, embed_texts
from tests.data.labelled_pairs import CONTRADICTION, SAME


def test_cosine_alone_cannot_separate_paraphrase_from_contradiction():
    # Why salient tokens exist: with cosine only, the best threshold still misclassifies.
    pairs = SAME + CONTRADICTION
    vectors = embed_texts([t for p in pairs for t in p])
    sims = [cosine(vectors[2 * i], vectors[2 * i + 1]) for i in range(len(pairs))]
    same, contra = sims[: len(SAME)], sims[len(SAME) :]
    best = max(sum(s >= t for s in same) + sum(s < t for s in contra) for t in sims)
    assert best < len(pairs)


def test_normalise_ignores_case_spacing_and_trailing_punctuation():
    assert normalise("  Hello   World. ") == "hello world"
