"""EngramClient against a live server (real HTTP), and its retry rules against a tiny fake server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engram_client import EngramClient, EngramError
from engram_client.transport import parse_retry_after
from memory.actors import Actor
from memory.models import Fact
from review.models import RememberReview
from review.services import approve_review
from tests.review.samples import FILES, OUTPUT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reviewer_is_workspace_admin")]


@pytest.fixture
def engram(world, live_server):
    return EngramClient(live_server.url, world.coder.plain_key, timeout=30)


def test_calls_return_the_api_json(world, engram):
    me = engram.me()
    assert (me["name"], me["role"], me["workspace"]) == ("coder-a", "coder", "acme")

    proposal = engram.propose_fact(
        domain="architecture", topic="deploys", content="Production deploys happen on Tuesdays.", memory_type="decision"
    )
    assert proposal["outcome"] == "created"
    fact_id = proposal["fact"]["id"]
    assert engram.get_fact(fact_id)["content"] == "Production deploys happen on Tuesdays."
    assert engram.list_facts(domain="architecture")["results"][0]["id"] == fact_id

    hits = engram.search("when do we deploy to production?", mode="keyword", limit=5)
    assert hits["mode"] == "keyword"
    assert [h["id"] for h in hits["results"]] == [fact_id]
    preamble = engram.preamble("Plan the production deploys for this Tuesday")
    assert "Production deploys happen on Tuesdays." in preamble["text"]

    new = engram.supersede_fact(fact_id, "Production deploys happen on Wednesdays.", reason="moved")
    assert new["content"] == "Production deploys happen on Wednesdays."
    assert engram.update_notes("remember the deploy day")["notes"] == "remember the deploy day"
    assert engram.get_notes()["notes"] == "remember the deploy day"
    assert engram.record_observation("CI took 14 minutes.")["id"]
    assert engram.create_episode("session", title="deploy planning")["kind"] == "session"
    assert engram.remember("s-1", "deploy checklist lives in docs/deploy.md")["session_id"] == "s-1"
    assert engram.list_conflicts()["count"] == 0
    assert engram.list_policies()["count"] == 0


def test_run_calls(world, engram):
    run = engram.create_run("Fix the flaky checkout test")
    assert engram.update_status(run["id"], "reading the test")["status"] == "reading the test"
    assert engram.save_knowledge(run["id"], "db", "Tests need `make testdb`.", ["checkout"])["created"] is True
    assert engram.save_procedural(run["id"], "p-1", "`pytest` failed", "failed")["created"] is True
    assert engram.intervene(run["id"], 3, None)["intervened"] is False
    assert engram.intervene(run["id"], 4, "`pytest` failed at step 2.", window=[{"step": 2, "command": "pytest"}])[
        "intervened"
    ]
    assert engram.delete_item(run["id"], "p-1", kind="procedural") == {"deleted": [{"kind": "procedural", "id": "p-1"}]}
    bank = engram.get_bank(run["id"])
    assert [k["id"] for k in bank["knowledge"]] == ["db"]
    facts = Fact.objects.count()
    finished = engram.finish_run(run["id"], offer_candidates=True)
    assert finished["status"] == "finished"
    assert [c["origin"] for c in finished["candidates"]] == ["memory_agent"]
    assert Fact.objects.count() == facts


def test_errors_raise_with_the_api_code_and_fields(world, engram, live_server):
    with pytest.raises(EngramError) as missing:
        engram.get_fact(999_999)
    assert (missing.value.status, missing.value.code) == (404, "fact_not_found")

    with pytest.raises(EngramError) as bad:
        engram.search("x", mode="fuzzy")  # type: ignore[arg-type]
    assert (bad.value.status, bad.value.code) == (400, "invalid_input")
    assert "mode" in bad.value.fields

    with pytest.raises(EngramError) as unknown:
        engram.propose_fact(domain="nope", topic="t", content="c", memory_type="decision")
    assert unknown.value.code == "unknown_domain"

    with pytest.raises(EngramError) as denied:
        EngramClient(live_server.url, "engram_not-a-key").me()
    assert (denied.value.status, denied.value.code) == (401, "invalid_key")

    from memory.services.tenancy import set_grant

    set_grant(role=world.coder_role, domain=world.architecture, level="read", by=Actor.system("test"))
    with pytest.raises(EngramError) as forbidden:
        engram.propose_policy(domain="architecture", rule="Never deploy on Fridays.")
    assert (forbidden.value.status, forbidden.value.code) == (403, "insufficient_memory_permission")

    run = engram.create_run("t")
    with pytest.raises(EngramError) as other:
        EngramClient(live_server.url, world.coder2.plain_key).get_bank(run["id"])
    assert (other.value.status, other.value.code) == (404, "run_not_found")


def test_remember_with_review_submits_waits_for_the_person_and_consumes(world, engram):
    def a_person_approves(review):
        approve_review(review=RememberReview.objects.get(pk=review["id"]), by=Actor.of_user(world.reviewer))

    outcome = engram.reviews.remember_with_review(
        session_id="turn-7", output=OUTPUT, files=FILES, repo="web", timeout=60, on_submitted=a_person_approves
    )
    assert outcome.status == "consumed"
    assert outcome.approved is True
    assert outcome.stored_ids


def test_a_busy_server_answers_the_long_poll_at_once_and_the_client_waits_itsparse_retry_after(
    world, live_server, settings
):
    settings.ENGRAM_MAX_WAITERS = 0  # the server holds no long-poll: every wait answers at once
    pauses = []

    def sleep(seconds):
        pauses.append(seconds)
        approve_review(review=RememberReview.objects.get(), by=Actor.of_user(world.reviewer))

    engram = EngramClient(live_server.url, world.coder.plain_key, timeout=30, sleep=sleep)
    outcome = engram.reviews.remember_with_review(
        session_id="turn-7", output=OUTPUT, files=FILES, repo="web", timeout=60
    )
    assert outcome.status == "consumed" and outcome.approved is True
    assert pauses == [pytest.approx(2, abs=0.1)]  # one poll turned away, one pause of Retry-After


# --- retries, against a fake server --------------------------------------------------------------
class FakeAPI:
    """Answers from a script of (status, headers, body); records each request."""

    def __init__(self, script):
        self.script, self.requests = list(script), []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                fake.requests.append((self.command, self.path, self.rfile.read(length) if length else b""))
                status, headers, body = fake.script.pop(0) if fake.script else (500, {}, {"code": "script_over"})
                payload = json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_api():
    servers = []

    def make(script):
        servers.append(FakeAPI(script))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


UNAVAILABLE = (503, {"Retry-After": "2"}, {"code": "database_unavailable", "detail": "retry shortly", "fields": {}})


def test_503_is_retried_with_backoff_honouringparse_retry_after(fake_api):
    api = fake_api([UNAVAILABLE, UNAVAILABLE, (201, {}, {"id": 7, "status": "running"})])
    sleeps = []
    client = EngramClient(api.url, "k", retries=3, backoff=0.1, sleep=sleeps.append)
    assert client.create_run("task") == {"id": 7, "status": "running"}
    assert [r[0] for r in api.requests] == ["POST"] * 3  # a 503 wrote nothing: resending a POST is safe
    assert all(r[1] == "/api/v1/runs/" for r in api.requests)
    assert len(sleeps) == 2
    assert all(s >= 2 for s in sleeps)  # Retry-After: 2 wins over the shorter backoff


def test_429_backoff_grows_exponentially_and_gives_up_after_the_retries(fake_api):
    throttled = (429, {}, {"code": "throttled", "detail": "slow down", "fields": {}})
    api = fake_api([throttled] * 4)
    sleeps = []
    client = EngramClient(api.url + "/api/v1/", "k", retries=3, backoff=0.5, sleep=sleeps.append)
    with pytest.raises(EngramError) as exc:
        client.me()
    assert (exc.value.status, exc.value.code, exc.value.detail) == (429, "throttled", "slow down")
    assert len(api.requests) == 4
    assert [round(s / b, 1) >= 1 for s, b in zip(sleeps, [0.5, 1.0, 2.0], strict=True)] == [True] * 3
    assert sleeps[0] < sleeps[1] < sleeps[2]


def test_other_errors_are_not_retried(fake_api):
    api = fake_api([(409, {}, {"code": "run_finished", "detail": "finished", "fields": {}})])
    client = EngramClient(api.url, "k", sleep=lambda s: pytest.fail("no retry on 409"))
    with pytest.raises(EngramError) as exc:
        client.update_status(1, "x")
    assert exc.value.code == "run_finished"
    assert len(api.requests) == 1


def test_a_lost_connection_is_retried_for_get_but_not_for_post():
    sleeps = []
    client = EngramClient("http://127.0.0.1:9", "k", retries=2, timeout=2, sleep=sleeps.append)
    with pytest.raises(EngramError) as get:
        client.me()
    assert (get.value.status, get.value.code) == (0, "connection_error")
    assert len(sleeps) == 2
    sleeps.clear()
    with pytest.raises(EngramError):
        client.create_run("t")
    assert sleeps == []


def test_retry_after_accepts_seconds_and_http_dates():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: no extra wait
