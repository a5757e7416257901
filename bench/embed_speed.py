"""What embedding a batch write costs (issue 19): the bulk encoder on the bench's generated facts.

    .venv/bin/python -m bench.embed_speed [--variants]

Prints wall and CPU milliseconds per 100 texts for the bulk encoder (memory.embeddings, ONNX,
batches side by side on ENGRAM_BULK_EMBED_THREADS). With --variants, the same texts through two
rewritten graphs, and how far their vectors move: onnxruntime's transformer fusions (fp32) and
dynamic int8 quantisation. Measured on the project's 2-core machine (2026-12-02, quiet, three
runs): shipped 744–826 ms wall / 1.5–1.6 s CPU per 100 texts (38 tokens on average); the fused
graph 787–889 ms (the same vectors: no gain); int8 576–782 ms, but its vectors sit at a cosine of
0.91 (min) / 0.96 (mean) from the shipped ones, so every stored vector and the recall evaluations
would have to be redone with it. With the HNSW insert (~240 ms per 100 facts) the shipped encoder
leaves no room for 100 facts/s on this machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import django

django.setup()

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402

from bench import corpus  # noqa: E402
from memory import embeddings  # noqa: E402

TEXTS = 300


def measure(encoder: embeddings.OnnxEncoder, texts: list[str], label: str) -> np.ndarray:
    encoder.encode(texts[:32], 32)  # warm
    wall, cpu, vectors = [], [], np.empty(0)
    for _ in range(3):
        started, started_cpu = time.perf_counter(), time.process_time()
        vectors = encoder.encode(texts, 32)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    per = 100 / len(texts) * 1000
    print(f"{label:<28} {min(wall) * per:6.0f} ms wall, {min(cpu) * per:6.0f} ms CPU per 100 texts", flush=True)
    return vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", action="store_true", help="also the fused fp32 and the int8 graphs")
    args = parser.parse_args()
    texts = [embeddings.fact_text(f.topic, f.content) for f in corpus.facts(TEXTS)]
    threads = int(settings.ENGRAM_BULK_EMBED_THREADS)
    encoder = embeddings.OnnxEncoder(threads, side_by_side=True)
    tokens = np.mean([len(e.ids) for e in encoder.tokenizer.encode_batch(texts)])
    print(f"{TEXTS} bench facts, {tokens:.1f} tokens on average, {threads} threads side by side")
    base = measure(encoder, texts, "bulk encoder (shipped)")
    if not args.variants:
        return
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    source = str(embeddings.onnx_file())
    fused = settings.ENGRAM_HOME / "models" / "bench-fused.onnx"
    optimizer.optimize_model(source, model_type="bert", num_heads=12, hidden_size=384).save_model_to_file(str(fused))
    int8 = settings.ENGRAM_HOME / "models" / "bench-int8.onnx"
    quantize_dynamic(source, str(int8), weight_type=QuantType.QInt8)
    for label, path in (("fused fp32 graph", fused), ("dynamic int8", int8)):
        encoder.session = embeddings.onnx_session(path, 1)
        vectors = measure(encoder, texts, label)
        cosines = (vectors * base).sum(axis=1)
        print(f"{'':<28} cosine to the shipped vectors: min {cosines.min():.4f}, mean {cosines.mean():.4f}")
        path.unlink()


if __name__ == "__main__":
    main()
