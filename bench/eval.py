"""`make eval`: recall quality on a labelled search set (default `tune`, the tuning set).

    python -m bench.eval [--data SET]

SET names a search set, bench/data/recall/search_SET.jsonl (tune, g … l; bench.datasets describes
the rows; a query's optional "repo" is passed to search). Loads the set into its own database
(ENGRAM_DB_NAME=engram_eval, wiped each run), then reports recall@10 and nDCG@10 for each search
mode (keyword, semantic, hybrid) and each voice alone (lexical, semantic, recency, graph), overall
and per query category.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_eval")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ENGRAM_RECALL_MODE", "sync")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from agents.services import create_agent  # noqa: E402
from bench.common import recreate_database  # noqa: E402
from bench.datasets import SearchSet, search_set, search_sets  # noqa: E402
from memory import decay  # noqa: E402
from memory.actors import Actor  # noqa: E402
from memory.embeddings import embed_text, embed_texts, fact_text  # noqa: E402
from memory.models import (  # noqa: E402
    VERACITY_WEIGHT,
    Agent,
    Episode,
    EpisodeFact,
    Fact,
)
from memory.search import hybrid, voices  # noqa: E402
from memory.services.tenancy import create_domain, get_or_create_repo, get_or_create_role, get_or_create_workspace  # noqa: E402

K = 10
SLUG = "eval"
data: SearchSet  # the labelled set, chosen by main (or a caller) through use() before load()


def use(name: str) -> None:
    global data
    data = search_set(name)


def load() -> tuple[Agent, dict[str, int]]:
    recreate_database()
    by = Actor.system("eval")
    now = timezone.now()
    with transaction.atomic():
        ws = get_or_create_workspace(slug=SLUG, name="Evaluation", by=by)
        role = get_or_create_role(workspace=ws, name="evaluator", by=by)
        domains = {}
        for fact in data.facts:
            key = (fact["domain"], fact["repo"])
            if key not in domains:
                repo = get_or_create_repo(workspace=ws, slug=fact["repo"], by=by) if fact["repo"] else None
                domains[key] = create_domain(workspace=ws, name=fact["domain"], repo=repo, by=by)
    print(f"embedding {len(data.facts)} facts…", flush=True)
    vectors = embed_texts([fact_text(f["topic"], f["content"]) for f in data.facts])
    ids: dict[str, int] = {}
    with transaction.atomic():
        for fact, vector in zip(data.facts, vectors, strict=True):
            when = now - timedelta(days=fact["age_days"])
            ids[fact["key"]] = Fact.objects.create(
                workspace=ws,
                domain=domains[(fact["domain"], fact["repo"])],
                topic=fact["topic"],
                content=fact["content"],
                memory_type=fact["memory_type"],
                veracity=fact["veracity"],
                confidence=VERACITY_WEIGHT[fact["veracity"]],
                created_at=when,
                observed_at=when,
                last_mentioned_at=when,
                embedding=vector,
                embedded_at=now,
                origin="eval",
            ).pk
        for old, new, reason in data.supersessions:
            Fact.objects.filter(pk=ids[old]).update(
                superseded_by_id=ids[new], superseded_at=now, supersede_reason=reason
            )
        for episode in data.episodes:
            row = Episode.objects.create(workspace=ws, kind=episode["kind"], title=episode["title"])
            EpisodeFact.objects.bulk_create(
                [EpisodeFact(episode=row, fact_id=ids[key], relation="written") for key in episode["facts"]]
            )
        agent, _ = create_agent(workspace=ws, name="evaluator", role=role, by=by)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_fact")
    voices._stats = None  # read the fresh statistics
    return agent, ids


def ndcg(ranked: list[int], grades: dict[int, int]) -> float:
    dcg = sum((2 ** grades.get(pk, 0) - 1) / math.log2(i + 2) for i, pk in enumerate(ranked[:K]))
    ideal = sorted(grades.values(), reverse=True)[:K]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall(ranked: list[int], grades: dict[int, int]) -> float:
    return len(set(ranked[:K]) & set(grades)) / len(grades)


def rankers(agent: Agent):
    scope = voices.Scope(agent=agent)

    def mode(name):
        return lambda q, v, repo=None: [
            h.fact.pk
            for h in hybrid.search_memory(agent=agent, query=q, mode=name, repo=repo, limit=K, record=False).hits
        ]

    def semantic_only(q, v, repo=None):
        return [pk for pk, _ in voices.semantic(scope, v, limit=K)]

    def lexical_only(q, v, repo=None):
        return [pk for pk, _ in voices.lexical(scope, q, limit=K)]

    def recency_only(q, v, repo=None):
        pool = [pk for pk, s in voices.semantic(scope, v, limit=hybrid.CANDIDATES) if s >= hybrid.RELEVANCE_FLOOR]
        pool += [pk for pk, _ in voices.lexical(scope, q, limit=hybrid.CANDIDATES)]
        return [pk for pk, _ in voices.temporal(scope, list(dict.fromkeys(pool)), limit=K)]

    def graph_only(q, v, repo=None):
        seeds = [pk for pk, _ in voices.lexical(scope, q, limit=hybrid.SEEDS // 2 + 1)]
        seeds += [pk for pk, _ in voices.semantic(scope, v, limit=hybrid.SEEDS // 2 + 1)]
        return [pk for pk, _ in voices.graph(scope, list(dict.fromkeys(seeds)), limit=K)]

    return {
        "mode: keyword": mode("keyword"),
        "mode: semantic": mode("semantic"),
        "mode: hybrid": mode("hybrid"),
        "voice: lexical": lexical_only,
        "voice: semantic": semantic_only,
        "voice: recency": recency_only,
        "voice: graph": graph_only,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="recall@10 and nDCG@10 per mode and voice on a labelled set")
    parser.add_argument(
        "--data", default="tune", choices=search_sets(), help="the search set (bench/data/recall/search_SET.jsonl)"
    )
    args = parser.parse_args()
    use(args.data)
    started = time.monotonic()
    print(f"== {args.data}", flush=True)
    agent, ids = load()
    decay.clear_cache()
    floors = {name: c.floor for name, c in decay.parameters().items() if c.floor}
    print(f"decay floors: {floors or 'none'}", flush=True)
    queries = [(q, {ids[k]: g for k, g in q["relevant"].items()}) for q in data.queries]
    print(
        f"{len(data.facts)} facts ({len(data.supersessions)} superseded), "
        f"{len(data.episodes)} episodes, {len(queries)} queries",
        flush=True,
    )
    vectors = {q["id"]: embed_text(q["query"]) for q, _ in queries}
    categories = sorted({q["category"] for q, _ in queries})
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for name, rank in rankers(agent).items():
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])  # type: ignore[arg-type, return-value]
        for q, grades in queries:
            ranked = rank(q["query"], vectors[q["id"]], q.get("repo"))
            for bucket in ("all", q["category"]):
                sums[bucket][0] += recall(ranked, grades)
                sums[bucket][1] += ndcg(ranked, grades)
                sums[bucket][2] += 1
        table[name] = {b: (s[0] / s[2], s[1] / s[2]) for b, s in sums.items()}
    header = f"{'ranker':<17}" + "".join(f"{b:>22}" for b in ["all", *categories])
    print(f"\nrecall@10 / nDCG@10 — {args.data}")
    print(header)
    print("-" * len(header))
    for name, row in table.items():
        print(f"{name:<17}" + "".join(f"{row[b][0]:>10.3f} / {row[b][1]:<9.3f}" for b in ["all", *categories]))
    best_voice = max((n for n in table if n.startswith("voice")), key=lambda n: table[n]["all"][1])
    hybrid_ndcg, voice_ndcg = table["mode: hybrid"]["all"][1], table[best_voice]["all"][1]
    verdict = "beats" if hybrid_ndcg > voice_ndcg else "does NOT beat"
    print(f"\nhybrid nDCG@10 {hybrid_ndcg:.3f} {verdict} the best single voice ({best_voice}, {voice_ndcg:.3f}).")
    print(f"done in {time.monotonic() - started:.0f} s")
    if hybrid_ndcg <= voice_ndcg:
        sys.exit(1)


if __name__ == "__main__":
    main()
