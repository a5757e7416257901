"""Choose hybrid's fusion (issue 19, round 3) on the spent search sets, never on a held-out one.

    python -m bench.tune_fusion [--sets tune,g,...]

Loads each labelled set once (bench.eval.load: its own database), ranks its queries with every
single mode and voice once, then with hybrid under each variant of the grid below, and prints per
variant: mean recall@10 / nDCG@10 over the sets, and the cells (set × all/query type × metric) in
which hybrid is below the best single mode or voice of that cell, with the summed shortfall. The
sets are the tuning set and G–J, whose held-out scores were already reported (spent): a new
held-out set is written after the choice is frozen.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import eval as ev
from memory import decay
from memory.embeddings import embed_text
from memory.search import hybrid, intent

SETS = ("tune", "g", "h", "i", "j")
BASE_WEIGHTS = {k: dict(v) for k, v in intent.WEIGHTS.items()}


# Round 1 (2026-12-02): lexical scale × graph gate × recency gate × graph weight of general queries.
# Its winner (minmax, graph gate 0, recency gate 1, general graph 0.3) is round 2's base.
ROUND_1 = {
    "scale": ("minmax", "coverage"),
    "graph_gate": (0.0, 0.5, 1.0),
    "recency_gate": (0.0, 1.0),
    "general_graph": (0.6, 0.3),
}
ROUND_2 = {
    "scale": ("minmax",),
    "graph_gate": (0.0,),
    "recency_gate": (1.0,),
    "general_graph": (0.3,),
    "general_lexical": (0.35, 0.2, 0.5),
    "mmr_lambda": (0.5, 1.0),
    "lookup_graph": (0.3, 0.1),
}
# Round 2's winner (general lexical 0.5, MMR off, lookup graph 0.3) is round 3's base.
ROUND_3 = {
    **ROUND_2,
    "general_lexical": (0.5,),
    "mmr_lambda": (1.0,),
    "lookup_graph": (0.3,),
    "decay_floor": (0.8, 0.9, 1.0),
    "general_graph": (0.3, 0.15),
    "general_recency": (0.05, 0.0),
}
ROUNDS = {1: ROUND_1, 2: ROUND_2, 3: ROUND_3}


def variants(grid: dict[str, tuple]) -> list[dict]:
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def apply(v: dict) -> None:
    hybrid.LEXICAL_SCALE = v["scale"]
    hybrid.GATES = {"recency": v["recency_gate"], "graph": v["graph_gate"]}
    hybrid.MMR_LAMBDA = v.get("mmr_lambda", 0.5)
    weights = {k: dict(w) for k, w in BASE_WEIGHTS.items()}
    weights[intent.Intent.GENERAL]["graph"] = v["general_graph"]
    weights[intent.Intent.RELATIONAL]["graph"] = max(v["general_graph"], weights[intent.Intent.RELATIONAL]["graph"])
    if "general_lexical" in v:
        weights[intent.Intent.GENERAL]["lexical"] = v["general_lexical"]
        weights[intent.Intent.RELATIONAL]["lexical"] = v["general_lexical"]
    if "general_recency" in v:
        weights[intent.Intent.GENERAL]["recency"] = v["general_recency"]
    if "decay_floor" in v:  # one floor for every type (the DecayProfile rows, which search reads)
        from memory.models import DecayProfile

        DecayProfile.objects.update(floor=v["decay_floor"])
        decay.clear_cache()
    if "lookup_graph" in v:
        weights[intent.Intent.LOOKUP]["graph"] = v["lookup_graph"]
    intent.WEIGHTS.clear()
    intent.WEIGHTS.update(weights)


def metrics(rank, queries, vectors) -> dict[str, tuple[float, float]]:
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])  # type: ignore[arg-type, return-value]
    for q, grades in queries:
        ranked = rank(q["query"], vectors[q["id"]], q.get("repo"))
        for bucket in ("all", q["category"]):
            sums[bucket][0] += ev.recall(ranked, grades)
            sums[bucket][1] += ev.ndcg(ranked, grades)
            sums[bucket][2] += 1
    return {b: (s[0] / s[2], s[1] / s[2]) for b, s in sums.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--round", type=int, choices=sorted(ROUNDS), default=max(ROUNDS))
    args = parser.parse_args()
    grid = variants(ROUNDS[args.round])
    results: dict[int, dict[str, dict[str, tuple[float, float]]]] = defaultdict(dict)
    best_single: dict[str, dict[str, tuple[float, float]]] = {}
    started = time.monotonic()
    for name in args.sets.split(","):
        ev.use(name)
        agent, ids = ev.load()
        queries = [(q, {ids[k]: g for k, g in q["relevant"].items()}) for q in ev.data.queries]
        vectors = {q["id"]: embed_text(q["query"]) for q, _ in queries}
        rankers = ev.rankers(agent)
        singles = {n: metrics(r, queries, vectors) for n, r in rankers.items() if n != "mode: hybrid"}
        best_single[name] = {
            b: (max(s[b][0] for s in singles.values()), max(s[b][1] for s in singles.values()))
            for b in next(iter(singles.values()))
        }
        for i, v in enumerate(grid):
            apply(v)
            results[i][name] = metrics(rankers["mode: hybrid"], queries, vectors)
        print(f"{name}: {len(queries)} queries, {len(grid)} variants ({time.monotonic() - started:.0f} s)", flush=True)
    print(f"\n{'variant':<62} {'R@10':>6} {'nDCG':>6} {'cells<':>6} {'short':>6} {'worst':>7}")
    rows = []
    for i in range(len(grid)):
        per = results[i]
        r = sum(per[s]["all"][0] for s in per) / len(per)
        n = sum(per[s]["all"][1] for s in per) / len(per)
        losing, short, worst = 0, 0.0, 0.0
        for s, table in per.items():
            for bucket, (rec, nd) in table.items():
                for got, best in ((rec, best_single[s][bucket][0]), (nd, best_single[s][bucket][1])):
                    if got < best - 0.005:
                        losing += 1
                        short += best - got
                        worst = max(worst, best - got)
        rows.append((losing, short, -n, i, r, n, worst))
    for losing, short, _, i, r, n, worst in sorted(rows):
        label = ", ".join(f"{k}={val}" for k, val in grid[i].items())
        print(f"{label:<62} {r:6.3f} {n:6.3f} {losing:6d} {short:6.3f} {worst:7.3f}")
    best = sorted(rows)[0][3]
    print("\nthe first variant's cells below the best single mode or voice:")
    for s, table in results[best].items():
        for bucket, (rec, nd) in table.items():
            for metric, got, ref in (("R@10", rec, best_single[s][bucket][0]), ("nDCG", nd, best_single[s][bucket][1])):
                if got < ref - 0.005:
                    print(f"  {s:<16} {bucket:<11} {metric}: {got:.3f} < {ref:.3f}")


if __name__ == "__main__":
    main()
