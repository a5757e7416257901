"""search_memory: each voice's contribution, decay, MMR, repo boost and exclusions (real model)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memory.actors import Actor
from memory.models import EpisodeFact, Fact
from memory.search import voices
from memory.search.hybrid import search_memory
from memory.search.intent import Intent, classify
from memory.services.embedding import embed_missing
from memory.services.facts import create_episode
from tests.factories import FactFactory


def make(world, content, *, topic="t", days=0, domain=None, **kw):
    when = timezone.now() - timedelta(days=days)
    fact = FactFactory(
        domain=domain or world.architecture, topic=topic, content=content, created_at=when, last_mentioned_at=when, **kw
    )
    return fact


def ready():
    """Vectors for the test's facts, and the lexical voice's term statistics read from them: its
    weights come from pg_stats, which autovacuum refreshes whenever it runs (another test's committed
    rows one time, this test's another), so a test ranking by them reads them from its own facts."""
    embed_missing()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_fact")
    voices.forget_statistics()


def ids(result):
    return [h.fact.pk for h in result.hits]


@pytest.mark.parametrize(
    "query,intent",
    [
        ("ERR_LEDGER_409", Intent.LOOKUP),
        ("where is src/billing/ledger.py", Intent.LOOKUP),
        ("what changed recently about deploys", Intent.RECENT),
        ("why did the queue stall", Intent.RELATIONAL),
        ("how do we deploy", Intent.GENERAL),
    ],
)
def test_intent_classifier(query, intent):
    assert classify(query) == intent


def _incident(world, linked: bool):
    stall = make(world, "On 2026-10-24 the invoice queue stalled for three hours.", topic="incident")
    cause = make(world, "Broker host must keep maxmemory-policy at noeviction.", topic="broker")
    for i, text in enumerate(
        [
            "Invoice PDFs are rendered with WeasyPrint.",
            "The invoice queue has four workers.",
            "Queue depth metrics live in Grafana.",
            "Invoices are numbered per calendar year.",
            "The invoice queue retries failed jobs three times.",
            "Invoice emails are sent at 06:00 UTC.",
        ]
    ):
        make(world, text, topic=f"invoice-{i}")
    if linked:
        episode = create_episode(workspace_id=world.workspace.pk, by=Actor.of_agent(world.coder), kind="incident")
        EpisodeFact.objects.create(episode=episode, fact=stall, relation="written")
        EpisodeFact.objects.create(episode=episode, fact=cause, relation="written")
    ready()
    return stall, cause


def test_a_fact_only_the_graph_voice_can_find_is_found_in_hybrid(world):
    _stall, cause = _incident(world, linked=True)
    result = search_memory(agent=world.coder, query="what caused the invoice queue stall", limit=5)
    hit = next(h for h in result.hits if h.fact.pk == cause.pk)
    assert hit.voices["graph"] == 1 and hit.voices["lexical"] is None


def test_a_neighbour_through_a_crowded_episode_inherits_less(world):
    # the fan effect: a seed's strength spreads over an episode's facts beyond GRAPH_FANOUT of them
    from memory.search import voices

    seed = make(world, "The invoice queue stalled on Monday.", topic="incident")
    small, crowded = (
        create_episode(workspace_id=world.workspace.pk, by=Actor.of_agent(world.coder), kind=kind)
        for kind in ("incident", "session")
    )
    near = make(world, "Broker host must keep maxmemory-policy at noeviction.", topic="broker")
    far = make(world, "The coffee machine on floor 3 is broken.", topic="chat")
    EpisodeFact.objects.create(episode=small, fact=seed, relation="written")
    EpisodeFact.objects.create(episode=small, fact=near, relation="written")
    EpisodeFact.objects.create(episode=crowded, fact=seed, relation="written")
    EpisodeFact.objects.create(episode=crowded, fact=far, relation="written")
    for i in range(14):  # 16 facts in the session: twice GRAPH_FANOUT
        EpisodeFact.objects.create(
            episode=crowded, fact=make(world, f"Small talk number {i}.", topic="chat"), relation="written"
        )
    scores = dict(voices.graph(voices.Scope(agent=world.coder), [seed.pk], limit=50, strengths={seed.pk: 1.0}))
    assert scores[near.pk] == pytest.approx(1.0)
    assert scores[far.pk] == pytest.approx(voices.GRAPH_FANOUT / 16)


def test_without_the_episode_edge_the_same_fact_is_not_found(world):
    stall, cause = _incident(world, linked=False)
    result = search_memory(agent=world.coder, query="what caused the invoice queue stall", limit=5)
    assert cause.pk not in ids(result)
    assert stall.pk in ids(result)


def test_recency_intent_lifts_the_newer_fact(world):
    old = make(world, "The payments timeout is 3000 ms for the checkout service.", topic="timeout-a", days=300)
    new = make(world, "The payments timeout is 5000 ms for the checkout service now.", topic="timeout-b", days=1)
    ready()
    recent = search_memory(agent=world.coder, query="what changed recently about the payments timeout", limit=2)
    assert ids(recent) == [new.pk, old.pk]
    assert recent.intent == "recent"
    assert recent.hits[0].voices["recency"] == 1


def test_decay_lowers_stale_facts(world):
    fresh = make(
        world, "The staging database is reset every Sunday night.", topic="a", memory_type="observation", days=1
    )
    stale = make(
        world, "The staging database is reset every Sunday night!", topic="b", memory_type="observation", days=400
    )
    ready()
    for mode in ("keyword", "semantic", "hybrid"):
        result = search_memory(agent=world.coder, query="staging database reset", mode=mode, limit=2)
        scores = {h.fact.pk: h.score for h in result.hits}
        assert scores[fresh.pk] > scores[stale.pk], mode


def test_mmr_removes_restatements(world):
    restatements = [
        "Production deploys happen on Tuesdays.",
        "Deploys to production happen on Tuesdays.",
        "We deploy to production every Tuesday.",
        "Production deployments take place on Tuesdays.",
    ]
    for i, text in enumerate(restatements):
        make(world, text, topic=f"r{i}")
    others = [
        make(world, text, topic=f"o{i}")
        for i, text in enumerate(
            [
                "Production deploys need a green CI run.",
                "Production deploys are announced in #releases.",
                "Deploy rollbacks use the previous container image.",
            ]
        )
    ]
    ready()
    semantic = search_memory(agent=world.coder, query="production deploys", mode="semantic", limit=4)
    hybrid = search_memory(agent=world.coder, query="production deploys", mode="hybrid", limit=4)
    is_restatement = lambda h: "Tuesday" in h.fact.content  # noqa: E731
    assert sum(map(is_restatement, semantic.hits)) >= 3
    assert sum(map(is_restatement, hybrid.hits)) <= 2
    assert any(h.fact.pk in {o.pk for o in others} for h in hybrid.hits)


def test_mmr_picks_as_the_textbook_definition_over_every_pair(world):
    """_mmr reads only the pairs above MMR_SIMILAR and keeps each candidate's redundancy up to
    date pick by pick; it must choose exactly what MMR over the full similarity matrix chooses
    (computed here in numpy from the stored vectors), in the same order."""
    import numpy as np

    from memory.search import hybrid

    texts = [
        "Production deploys happen on Tuesdays.",
        "Deploys to production happen on Tuesdays.",
        "We deploy to production every Tuesday.",
        "Production deploys need a green CI run.",
        "Production deploys are announced in #releases.",
        "Deploy rollbacks use the previous container image.",
        "Rollbacks reuse the previous container image.",
        "The staging database is reset every night.",
        "Staging's database gets reset nightly.",
        "Invoices are generated on the first of the month.",
    ]
    facts = [make(world, text, topic=f"m{i}") for i, text in enumerate(texts)]
    ready()
    vectors = {f.pk: np.asarray(Fact.objects.get(pk=f.pk).embedding, dtype=np.float64) for f in facts}
    rng = np.random.default_rng(7)
    for _ in range(5):
        scores = rng.uniform(0.1, 1.0, len(facts))
        ranked = [
            hybrid.Candidate(f.pk, f.memory_type, f.last_mentioned_at, f.confidence, None, float(score))
            for f, score in sorted(zip(facts, scores, strict=True), key=lambda pair: -pair[1])
        ]
        expected = textbook_mmr(ranked, vectors, limit=5)
        assert [c.pk for c in hybrid._mmr(ranked, 5)] == expected
    # and the pairs it reads are exactly those above the threshold, with pgvector's similarity
    pairs = hybrid._similarities([f.pk for f in facts])
    above = {
        (min(a, b), max(a, b))
        for a in vectors
        for b in vectors
        if a != b and float(vectors[a] @ vectors[b]) > hybrid.MMR_SIMILAR + 1e-6
    }
    assert above and above <= set(pairs)
    assert all(similarity > hybrid.MMR_SIMILAR for similarity in pairs.values())


def textbook_mmr(ranked, vectors, *, limit):
    from memory.search import hybrid

    top = max(c.score for c in ranked)
    chosen: list = []
    remaining = list(ranked)
    while remaining and len(chosen) < limit:

        def value(c):
            similarity = max((float(vectors[c.pk] @ vectors[p.pk]) for p in chosen), default=0.0)
            redundancy = max(0.0, (similarity - hybrid.MMR_SIMILAR) / (1.0 - hybrid.MMR_SIMILAR))
            return hybrid.MMR_LAMBDA * c.score / top - (1 - hybrid.MMR_LAMBDA) * redundancy

        best = max(remaining, key=value)  # the first of equals, as _mmr
        chosen.append(best)
        remaining.remove(best)
    return [c.pk for c in chosen]


def test_repo_boost_ranks_the_repos_fact_first_without_filtering(world):
    general = make(world, "Run the test suite with make test before merging.", topic="tests")
    scoped = make(world, "Run the test suite with npm test before merging.", topic="tests", domain=world.repo_context)
    ready()
    boosted = search_memory(agent=world.coder, query="how do I run the test suite", repo="web", limit=2)
    assert ids(boosted)[0] == scoped.pk and general.pk in ids(boosted)


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_superseded_expired_and_inactive_facts_are_excluded(world, mode):
    live = make(world, "The deploy freeze starts on December 20.", topic="freeze")
    make(
        world,
        "The deploy freeze starts on December 15.",
        topic="freeze",
        superseded_by=live,
        superseded_at=timezone.now(),
    )
    make(
        world,
        "The deploy freeze starts on December 18.",
        topic="freeze2",
        valid_until=timezone.now() - timedelta(hours=1),
    )
    make(world, "The deploy freeze starts on December 19.", topic="freeze3", status="challenged")
    make(world, "The deploy freeze starts on December 21.", topic="freeze4", status="deprecated")
    ready()
    result = search_memory(agent=world.coder, query="deploy freeze starts December", mode=mode, limit=10)
    assert ids(result) == [live.pk]


def test_search_counts_recalls_in_a_search_episode(world):
    fact = make(world, "The deploy freeze starts on December 20.", topic="freeze")
    ready()
    result = search_memory(agent=world.coder, query="deploy freeze", limit=3)
    assert Fact.objects.get(pk=fact.pk).recall_count == 1
    assert EpisodeFact.objects.filter(episode_id=result.episode_id, fact=fact, relation="recalled").exists()


def test_keyword_mode_matches_any_term(world):
    a = make(world, "Ledger errors raise ERR_LEDGER_409 on duplicate postings.", topic="a")
    b = make(world, "Checkout timeouts are logged as ERR_CHECKOUT_TIMEOUT.", topic="b")
    ready()
    found = ids(search_memory(agent=world.coder, query="ERR_LEDGER_409 duplicate", mode="keyword"))
    assert found == [a.pk]
    both = ids(search_memory(agent=world.coder, query="ledger checkout", mode="keyword"))
    assert set(both) == {a.pk, b.pk}


def _frequencies(monkeypatch, table_rows, **share):
    """Pretend statistics: `share` of the table contains each lexeme."""
    from memory.search import voices

    monkeypatch.setattr(voices, "lexeme_frequencies", lambda: (share, 1e-6, float(table_rows)))


def test_a_common_rarest_term_is_narrowed_by_the_next_rarest(world, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.search import voices

    both = [make(world, f"The pdf-renderer times out when fonts are missing ({i}).", topic=f"b{i}") for i in range(3)]
    only = [make(world, f"The pdf-renderer runs in the reports cluster ({i}).", topic=f"o{i}") for i in range(3)]
    # The rarest term, pdf-renderer, looks like 4% of a 100k table: over the candidate budget, so
    # narrowed by the next rarest (`times`, 20%).
    _frequencies(monkeypatch, 100_000, **{"pdf-render": 0.04, "pdf": 0.04, "render": 0.04, "time": 0.2})
    weighted = voices.weighted_terms("pdf-renderer times out")
    assert voices.selecting_terms(weighted) == ["pdf-renderer"]
    assert voices.narrowing_terms(weighted, ["pdf-renderer"]) == ["times"]

    with CaptureQueriesContext(connection) as queries:
        narrowed = [pk for pk, _ in voices.lexical(voices.Scope(agent=world.coder), "pdf-renderer times out", limit=3)]
    assert set(narrowed) == {f.pk for f in both}
    assert sum("memory_fact.search_vector @@" in q["sql"] for q in queries.captured_queries) == 1

    # Fewer narrowed matches than asked for: asked again without narrowing, nothing lost.
    with CaptureQueriesContext(connection) as queries:
        wider = [pk for pk, _ in voices.lexical(voices.Scope(agent=world.coder), "pdf-renderer times out", limit=6)]
    assert set(wider) == {f.pk for f in both + only}
    assert wider[:3] == narrowed  # matching both terms still ranks first
    assert sum("memory_fact.search_vector @@" in q["sql"] for q in queries.captured_queries) == 2


def test_no_narrowing_while_the_rarest_terms_fit_the_budget(world, monkeypatch):
    from memory.search import voices

    _frequencies(monkeypatch, 1_000, **{"pdf-render": 0.4, "pdf": 0.4, "render": 0.4, "time": 0.05})
    weighted = voices.weighted_terms("pdf-renderer times out")
    assert voices.selecting_terms(weighted) == ["times", "pdf-renderer"]  # 50 + 400 rows ≤ 1,500
    assert voices.narrowing_terms(weighted, voices.selecting_terms(weighted)) == []


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_a_very_old_commitment_does_not_break_search(world, mode):
    # exp(-(700/14)^2) underflows float8: PostgreSQL raised "value out of range: underflow" and
    # every search over a workspace holding such a fact failed (found by a held-out eval set)
    old = make(world, "I will rotate the ledger signing key before the audit.", memory_type="commitment", days=700)
    fresh = make(world, "The ledger signing key lives in Vault.", memory_type="convention")
    embed_missing()
    result = search_memory(agent=world.coder, query="ledger signing key", mode=mode, limit=5)
    assert set(ids(result)) == {old.pk, fresh.pk}
    assert ids(result)[0] == fresh.pk


def test_recency_lifts_only_what_the_query_is_about_and_the_graph_is_not_gated():
    # recency is gated by direct evidence: a fact found only for being recent gains nothing; the
    # graph voice is not: a neighbour the query does not name keeps its contribution
    from memory.search.hybrid import GATES, _hybrid_fusion

    assert GATES == {"recency": 1.0, "graph": 0.0}
    direct = {1: 1.0, 2: 0.5}
    lists = {"recency": [(3, 0.0), (2, 0.0), (1, 0.0)], "graph": [(4, 0.8)]}
    weights = {"recency": 1.0, "graph": 0.5}
    fused = _hybrid_fusion(lists, direct, weights)
    assert fused[3] == 0.0  # the most recent fact, with no lexical or semantic evidence
    assert fused[2] == pytest.approx(0.5 + 1.0 / (1.0 + 1 / 5.0) * 0.5)  # its recency × its agreement 0.5
    assert fused[1] == pytest.approx(1.0 + 1.0 / (1.0 + 2 / 5.0))
    assert fused[4] == pytest.approx(0.5 * 0.8)
