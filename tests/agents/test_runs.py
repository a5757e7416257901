"""Memory-agent runs through the API (SPEC §9, API.md "Memory agent runs"): the bank tools, each
decision logged, isolation between agents, and finishing into candidates — never facts."""

import pytest

from memory.actors import Actor
from memory.models import AuditEvent, BankItem, Candidate, Episode, Fact, Intervention, MemoryRun
from memory.services.tenancy import set_grant
from tests.conftest import client_for

RUNS = "/api/v1/runs/"
# Every write of a run's agent: a finished run refuses each with 409 run_finished.
FINISHED_RUN_WRITES = [
    ("bank/status/", {"content": "more"}),
    ("bank/knowledge/", {"id": "k2", "content": "c"}),
    ("bank/procedural/", {"id": "p", "content": "c", "outcome": "failed"}),
    ("interventions/", {"step": 9}),
    ("finish/", {"offer_candidates": True}),
]


def _run(client, task="Make the test suite pass on the payments service."):
    response = client.post(RUNS, {"task": task}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def _counts():
    return (
        MemoryRun.objects.count(),
        BankItem.objects.count(),
        Intervention.objects.count(),
        Candidate.objects.count(),
        Fact.objects.count(),
        AuditEvent.objects.count(),
    )


def test_create_run_is_201_with_an_empty_bank_and_a_run_episode(world, api):
    response = api.post(RUNS, {"task": "Upgrade Django in the web repo."}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "running"
    assert body["run_url"].endswith(f"/review/runs/{body['id']}/")
    assert Episode.objects.get(pk=body["episode_id"]).kind == "run"
    bank = api.get(f"{RUNS}{body['id']}/bank/").json()
    assert bank == {
        "run": body["id"],
        "run_status": "running",
        "run_end_reason": "",
        "status": "",
        "status_updated_at": bank["status_updated_at"],
        "knowledge": [],
        "procedural": [],
    }
    assert AuditEvent.objects.filter(verb="run.started", target_id=body["id"]).exists()


def test_bank_tools_save_replace_and_delete_items(world, api, django_assert_max_num_queries):
    run = _run(api)
    base = f"{RUNS}{run}/bank/"

    status = api.post(f"{base}status/", {"content": "3/10 tests pass; fixing the DB fixture"}, format="json")
    assert status.status_code == 200
    assert status.json()["status"] == "3/10 tests pass; fixing the DB fixture"

    created = api.post(
        f"{base}knowledge/",
        {"id": "py-version", "content": "The service needs Python 3.11.", "tags": ["constraint", "python"]},
        format="json",
    )
    assert created.status_code == 201
    assert created.json()["created"] is True
    replaced = api.post(
        f"{base}knowledge/",
        {"id": "py-version", "content": "The service needs Python 3.11 exactly.", "tags": ["constraint"]},
        format="json",
    )
    assert replaced.status_code == 200
    assert replaced.json()["created"] is False

    proc = api.post(
        f"{base}procedural/",
        {"id": "pip-install", "content": "`pip install -e .` failed: no network", "outcome": "failed"},
        format="json",
    )
    assert proc.status_code == 201
    # the same id in another kind is another item
    api.post(
        f"{base}procedural/", {"id": "py-version", "content": "pyenv local 3.11", "outcome": "worked"}, format="json"
    )

    with django_assert_max_num_queries(6):
        bank = api.get(base).json()
    assert bank["status"] == "3/10 tests pass; fixing the DB fixture"
    assert [(k["id"], k["content"], k["tags"]) for k in bank["knowledge"]] == [
        ("py-version", "The service needs Python 3.11 exactly.", ["constraint"])
    ]
    assert [(p["id"], p["outcome"]) for p in bank["procedural"]] == [
        ("pip-install", "failed"),
        ("py-version", "worked"),
    ]

    only_knowledge = api.delete(f"{base}items/py-version/?kind=knowledge")
    assert only_knowledge.status_code == 200
    assert only_knowledge.json() == {"deleted": [{"kind": "knowledge", "id": "py-version"}]}
    both = api.delete(f"{base}items/pip-install/")
    assert both.json() == {"deleted": [{"kind": "procedural", "id": "pip-install"}]}
    missing = api.delete(f"{base}items/pip-install/")
    assert missing.status_code == 404
    assert missing.json()["code"] == "bank_item_not_found"
    assert api.delete(f"{base}items/status/").status_code == 404  # the status note is updated, never deleted

    bank = api.get(base).json()
    assert bank["knowledge"] == []
    assert [p["id"] for p in bank["procedural"]] == ["py-version"]
    verbs = set(AuditEvent.objects.filter(target_type="memoryrun", target_id=run).values_list("verb", flat=True))
    assert {
        "run.started",
        "run.status_updated",
        "run.knowledge_saved",
        "run.procedural_saved",
        "run.item_deleted",
    } <= verbs


def test_interventions_log_reminders_and_selective_silence(world, api):
    run = _run(api)
    window = [
        {"step": 3, "command": "pytest -x", "ok": False, "output": "ImportError: psycopg"},
        {"step": 4, "command": "pip install psycopg", "ok": True, "output": "Successfully installed"},
    ]
    spoke = api.post(
        f"{RUNS}{run}/interventions/",
        {
            "step": 5,
            "reminder": "`pytest -x` failed at step 3 on a missing psycopg; it is installed now.",
            "window": window,
        },
        format="json",
    )
    assert spoke.status_code == 201
    assert spoke.json()["intervened"] is True
    assert spoke.json()["window"][0]["command"] == "pytest -x"
    silent = api.post(f"{RUNS}{run}/interventions/", {"step": 10, "reminder": None}, format="json")
    assert silent.status_code == 201
    assert silent.json()["reminder"] is None
    assert silent.json()["intervened"] is False
    omitted = api.post(f"{RUNS}{run}/interventions/", {"step": 15}, format="json")
    assert omitted.json()["intervened"] is False
    assert list(Intervention.objects.filter(run_id=run).values_list("step", "reminder")) == [
        (5, "`pytest -x` failed at step 3 on a missing psycopg; it is installed now."),
        (10, None),
        (15, None),
    ]
    assert AuditEvent.objects.filter(verb="run.stayed_silent", target_id=run).count() == 2


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("", {}),
        ("", {"task": ""}),
        ("", {"task": 5}),
        ("", {"task": "x" * 20_001}),
        ("{run}/bank/status/", {}),
        ("{run}/bank/status/", {"content": "x" * 8001}),
        ("{run}/bank/knowledge/", {"id": "a", "content": ""}),
        ("{run}/bank/knowledge/", {"id": "has space", "content": "c"}),
        ("{run}/bank/knowledge/", {"id": "a/b", "content": "c"}),
        ("{run}/bank/knowledge/", {"id": "", "content": "c"}),
        ("{run}/bank/knowledge/", {"id": "a", "content": "c", "tags": "constraint"}),
        ("{run}/bank/knowledge/", {"id": "a", "content": "c", "tags": ["t"] * 21}),
        ("{run}/bank/knowledge/", {"id": "a", "content": "x" * 4001}),
        ("{run}/bank/procedural/", {"id": "a", "content": "c"}),
        ("{run}/bank/procedural/", {"id": "a", "content": "c", "outcome": ""}),
        ("{run}/interventions/", {"reminder": "x"}),
        ("{run}/interventions/", {"step": -1}),
        ("{run}/interventions/", {"step": 1, "reminder": ""}),
        ("{run}/interventions/", {"step": 1, "reminder": "x" * 2001}),
        ("{run}/interventions/", {"step": 1, "window": [{"step": i} for i in range(9)]}),
        ("{run}/interventions/", {"step": 1, "window": [{"command": "ls"}]}),
        ("{run}/finish/", {"offer_candidates": "maybe"}),
        ("{run}/finish/", {"offer_candidates": True, "domain": "nope"}),
        ("{run}/finish/", {"offer_candidates": True, "failure_class": "oops"}),
        ("{run}/finish/", {"offer_candidates": True, "items": ["not-in-bank"]}),
    ],
)
def test_bad_input_is_400_with_fields_and_writes_nothing(world, api, path, body):
    run = _run(api)
    api.post(f"{RUNS}{run}/bank/knowledge/", {"id": "k1", "content": "kept"}, format="json")
    before = _counts()
    response = api.post(RUNS + path.format(run=run), body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] in {"invalid_input", "unknown_domain"}
    assert response.json()["fields"]
    assert _counts() == before
    assert MemoryRun.objects.get(pk=run).status == "running"


def test_a_run_is_not_found_for_every_other_agent(world, api):
    run = _run(api)
    api.post(f"{RUNS}{run}/bank/knowledge/", {"id": "k1", "content": "secret path /srv/app"}, format="json")
    before = _counts()
    calls = [
        ("get", f"{RUNS}{run}/bank/", None),
        ("post", f"{RUNS}{run}/bank/status/", {"content": "hijacked"}),
        ("post", f"{RUNS}{run}/bank/knowledge/", {"id": "k1", "content": "overwritten"}),
        ("post", f"{RUNS}{run}/bank/procedural/", {"id": "p1", "content": "x", "outcome": "failed"}),
        ("delete", f"{RUNS}{run}/bank/items/k1/", None),
        ("post", f"{RUNS}{run}/interventions/", {"step": 1, "reminder": "psst"}),
        ("post", f"{RUNS}{run}/finish/", {"offer_candidates": True}),
    ]
    # coder2 has the same role in the same workspace: still not its run.
    for other in (world.coder2, world.planner, world.foreign_agent):
        client = client_for(other)
        for method, url, body in calls:
            response = getattr(client, method)(url, body, format="json") if body else getattr(client, method)(url)
            assert response.status_code == 404, (other.name, method, url)
            assert response.json()["code"] == "run_not_found"
    assert _counts() == before
    assert api.get(f"{RUNS}{run}/bank/").json()["knowledge"][0]["content"] == "secret path /srv/app"
    assert client_for(None).get(f"{RUNS}{run}/bank/").status_code == 401


def test_finish_offers_items_as_candidates_for_human_review_and_writes_no_fact(world, api):
    run = _run(api, task="Fix the flaky checkout test in the web repo.")
    api.post(
        f"{RUNS}{run}/bank/knowledge/",
        {
            "id": "fixture-db",
            "content": "Checkout tests need the `payments_test` database, created by `make testdb`.",
            "tags": ["checkout-tests", "applies_to:repo web", "not_for:production deploys"],
        },
        format="json",
    )
    api.post(
        f"{RUNS}{run}/bank/procedural/",
        {"id": "pytest-k", "content": "`pytest -k checkout` fails without `make testdb` first.", "outcome": "failed"},
        format="json",
    )
    api.post(f"{RUNS}{run}/bank/status/", {"content": "done"}, format="json")
    facts_before = Fact.objects.count()

    response = api.post(f"{RUNS}{run}/finish/", {"offer_candidates": True}, format="json")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "finished"
    assert body["finished_at"]
    assert Fact.objects.count() == facts_before  # never straight to long-term memory
    assert len(body["candidates"]) == 2
    by_id = {c["candidate_id"]: c for c in body["candidates"]}
    knowledge = by_id[f"run-{run}-knowledge-fixture-db"]
    procedural = by_id[f"run-{run}-procedural-pytest-k"]
    for candidate in (knowledge, procedural):
        assert candidate["origin"] == "memory_agent"
        assert candidate["requires_human_review"] is True
        assert candidate["fact_id"] is None
        assert candidate["domain"] == "knowledge"
        assert f"/review/runs/{run}/" in candidate["evidence_refs"]
        assert candidate["gates"]["human_review"]["status"] == "pending"
    assert knowledge["topic"] == "checkout-tests"
    assert knowledge["scope"] == {"applies_to": ["repo web"], "does_not_apply_to": ["production deploys"]}
    assert knowledge["promotion_status"] == "candidate"
    assert procedural["topic"] == "pytest-k"
    assert procedural["memory_type"] == "procedure"
    assert procedural["promotion_status"] == "held"  # no scope nor anti-scope: a person has to give them
    bank = api.get(f"{RUNS}{run}/bank/").json()
    assert bank["run_status"] == "finished"
    assert {k["candidate_id"] for k in bank["knowledge"] + bank["procedural"]} == {knowledge["id"], procedural["id"]}
    assert AuditEvent.objects.filter(verb="run.finished", target_id=run).exists()

    # The candidates are ordinary ones: the candidate API shows them to the agent.
    assert api.get(f"/api/v1/candidates/{knowledge['id']}/").json()["origin"] == "memory_agent"


def test_finish_with_chosen_items_domain_topic_and_scope(world, api):
    run = _run(api)
    api.post(f"{RUNS}{run}/bank/knowledge/", {"id": "k1", "content": "Use the staging DSN."}, format="json")
    api.post(f"{RUNS}{run}/bank/knowledge/", {"id": "k2", "content": "Not worth keeping."}, format="json")
    body = api.post(
        f"{RUNS}{run}/finish/",
        {
            "offer_candidates": True,
            "items": ["k1"],
            "domain": "conventions",
            "topic": "databases",
            "scope": {"applies_to": ["staging"], "does_not_apply_to": ["production"]},
        },
        format="json",
    ).json()
    assert [(c["candidate_id"], c["domain"], c["topic"]) for c in body["candidates"]] == [
        (f"run-{run}-knowledge-k1", "conventions", "databases")
    ]
    assert body["candidates"][0]["scope"] == {"applies_to": ["staging"], "does_not_apply_to": ["production"]}


def test_finish_without_offer_creates_nothing_and_a_finished_run_is_read_only(world, api):
    run = _run(api)
    api.post(f"{RUNS}{run}/bank/knowledge/", {"id": "k1", "content": "c"}, format="json")
    candidates_before = Candidate.objects.count()
    body = api.post(f"{RUNS}{run}/finish/", {}, format="json").json()
    assert body["candidates"] == []
    assert Candidate.objects.count() == candidates_before
    before = _counts()
    for path, payload in FINISHED_RUN_WRITES:
        response = api.post(f"{RUNS}{run}/{path}", payload, format="json")
        assert response.status_code == 409, path
        assert response.json()["code"] == "run_finished"
    assert api.delete(f"{RUNS}{run}/bank/items/k1/").status_code == 409
    assert _counts() == before
    assert api.get(f"{RUNS}{run}/bank/").status_code == 200


def test_finish_refuses_a_domain_the_role_holds_none_on(world, api):
    set_grant(role=world.coder_role, domain=world.conventions, level="none", by=Actor.system("test"))
    run = _run(api)
    api.post(f"{RUNS}{run}/bank/knowledge/", {"id": "k1", "content": "c"}, format="json")
    before = _counts()
    response = api.post(f"{RUNS}{run}/finish/", {"offer_candidates": True, "domain": "conventions"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "unknown_domain"
    assert _counts() == before


def test_finish_with_an_empty_bank_offers_nothing(world, api):
    run = _run(api)
    body = api.post(f"{RUNS}{run}/finish/", {"offer_candidates": True}, format="json").json()
    assert body["status"] == "finished"
    assert body["candidates"] == []
