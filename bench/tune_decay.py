"""How memory/decay.py's per-type floors and hybrid.CONFIDENCE_FLOOR were chosen (issue 39): nDCG@10
per search mode on one search set (the tuning set `tune` by default: never tune on G–L) for each
variant of the floors, set on the DecayProfile rows that search reads.

    python -m bench.tune_decay [--data tune]

Loads the set as `make eval` does (ENGRAM_DB_NAME=engram_eval_decay, wiped), then prints one line
per variant. The conversations (CA, CB) were read with `bench.eval_conversations --set ca cb`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_eval_decay")

from bench import eval as ev
from memory import decay
from memory.embeddings import embed_text
from memory.models import DecayProfile
from memory.search import hybrid

TYPES = tuple(decay.DEFAULT_PARAMETERS)
# (name, floors by type, confidence floor: 0 applies confidence fully, 0.8 as before issue 39)
VARIANTS = [
    ("the old global floor 0.8 (commitment too)", dict.fromkeys(TYPES, 0.8), 0.8),
    ("no floor at all", dict.fromkeys(TYPES, 0.0), 0.0),
    ("observation and event 0.8", {**dict.fromkeys(TYPES, 0.0), "observation": 0.8, "event": 0.8}, 0.0),
    ("all but commitment 0.8", {**dict.fromkeys(TYPES, 0.8), "commitment": 0.0}, 0.0),
    ("all but commitment 0.8, confidence 0.5", {**dict.fromkeys(TYPES, 0.8), "commitment": 0.0}, 0.5),
    ("all but commitment 0.8, confidence 0.8 (chosen)", {**dict.fromkeys(TYPES, 0.8), "commitment": 0.0}, 0.8),
]


def main() -> None:
    parser = argparse.ArgumentParser(description="nDCG@10 per mode for each variant of the decay floors")
    parser.add_argument("--data", default="tune")
    args = parser.parse_args()
    ev.use(args.data)
    agent, ids = ev.load()
    queries = [(q, {ids[k]: g for k, g in q["relevant"].items()}) for q in ev.data.queries]
    vectors = {q["id"]: embed_text(q["query"]) for q, _ in queries}
    for name, floors, confidence_floor in VARIANTS:
        for memory_type, floor in floors.items():
            scale, shape = decay.DEFAULT_PARAMETERS[memory_type]
            DecayProfile.objects.update_or_create(
                memory_type=memory_type, defaults={"scale_days": scale, "shape": shape, "floor": floor}
            )
        decay.clear_cache()
        hybrid.CONFIDENCE_FLOOR = confidence_floor
        rankers = ev.rankers(agent)
        scores = []
        for mode in ("keyword", "semantic", "hybrid"):
            rank = rankers[f"mode: {mode}"]
            total = sum(ev.ndcg(rank(q["query"], vectors[q["id"]], q.get("repo")), g) for q, g in queries)
            scores.append(f"{mode} {total / len(queries):.3f}")
        print(f"{name:<50}" + "  ".join(scores), flush=True)


if __name__ == "__main__":
    main()
