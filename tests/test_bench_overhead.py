"""`make bench`'s overhead report (issue 38): an endpoint's overhead is its p50 minus the p50s of
the parts it cannot avoid, measured in the same run; its tail is p95 / p50."""

from bench.overhead import (
    EMBEDDING,
    FULLTEXT,
    LEXICAL_RANKING,
    ME,
    PGVECTOR,
    SEMANTIC_RANKING,
    overheads,
    ranking_overheads,
)


def row(name: str, p50: float, p95: float, clients: int = 2, server: str = "primary") -> dict:
    return {"name": name, "p50": p50, "p95": p95, "clients": clients, "server": server}


def test_each_endpoint_is_measured_against_the_sum_of_its_own_unavoidable_parts():
    result = {
        "rows": [
            row(ME, 5.0, 6.0),
            row(FULLTEXT, 0.5, 1.0),
            row(PGVECTOR, 2.5, 3.0),
            row(EMBEDDING, 10.0, 12.0),
            row("keyword", 7.0, 8.0),
            row("semantic", 25.0, 50.0),
            row("hybrid", 24.0, 30.0),
        ]
    }
    lines = {line["name"]: line for line in overheads(result)}
    assert lines["keyword"]["floor"] == 5.5 and lines["keyword"]["overhead"] == 1.5
    assert lines["keyword"]["overhead_met"] and lines["keyword"]["tail_met"]
    assert lines["semantic"]["floor"] == 17.5 and lines["semantic"]["overhead"] == 7.5
    assert not lines["semantic"]["overhead_met"]  # 7.5 > 4 ms
    assert not lines["semantic"]["tail_met"]  # p95 2× p50
    assert lines["hybrid"]["floor"] == 18.0 and lines["hybrid"]["overhead_met"]  # 6 ≤ 8 ms
    assert lines["hybrid"]["vs_pgvector"] == 24.0 / 2.5
    assert "preamble" not in lines  # not measured in this run


def test_parts_are_read_at_the_same_client_count_and_server():
    result = {
        "rows": [
            row(ME, 5.0, 6.0, clients=1),
            row(FULLTEXT, 0.5, 1.0, clients=1),
            row("keyword", 7.0, 8.0, clients=2),
            row(ME, 50.0, 60.0, clients=2, server="+ replica"),
            row(FULLTEXT, 0.5, 1.0, clients=2),
        ]
    }
    assert overheads(result) == []  # GET me/ at 2 clients on the primary was not measured


def test_the_restated_floor_is_the_endpoints_own_ranking_sql():
    """Keyword and preamble: GET me/ + the lexical ranking statement. Semantic and hybrid also wait
    for the embedding, which runs beside the lexical statement (the longer counts), then the
    semantic statement."""
    result = {
        "rows": [
            row(ME, 2.0, 3.0),
            row(EMBEDDING, 6.0, 8.0),
            row(LEXICAL_RANKING, 4.0, 6.0),
            row(SEMANTIC_RANKING, 3.0, 4.0),
            row("keyword", 7.0, 9.0),
            row("semantic", 20.0, 30.0),
        ]
    }
    lines = {line["name"]: line for line in ranking_overheads(result)}
    assert lines["keyword"]["floor"] == 6.0 and lines["keyword"]["overhead"] == 1.0 and lines["keyword"]["overhead_met"]
    assert lines["semantic"]["floor"] == 11.0 and lines["semantic"]["overhead"] == 9.0
    assert not lines["semantic"]["overhead_met"]
    assert set(lines) == {"keyword", "semantic"}
    slower_lexical = {"rows": [*result["rows"][:2], row(LEXICAL_RANKING, 9.0, 10.0), *result["rows"][3:]]}
    assert {x["name"]: x["floor"] for x in ranking_overheads(slower_lexical)}["semantic"] == 14.0
    assert ranking_overheads({"rows": result["rows"][1:]}) == []  # GET me/ not measured
