"""`make bench`, after bench.run and bench.batch_writes: the review pages at N facts and 500+ open
items, measured over HTTP as a signed-in reviewer (issue 38, point 3).

In its own database (ENGRAM_DB_NAME=engram_bench_pages, recreated unless BENCH_REUSE=1):
  1. N facts from bench.corpus (BENCH_PAGES_FACTS, default 100000), bulk-loaded: bulk_create with
     the fields the write path stores (_new_fact: confidence by veracity, both vectors — topic and
     content, content alone — embedded in bulk from the corpus texts, the creating agent) and
     their `fact.created` audit rows (record_events, as the batch write path writes them), the
     full-text (GIN) and vector (HNSW) indexes dropped for the load and built after it, then
     ANALYZE. Not through the write path: conflict detection over 100k facts takes hours on two
     cores, and bench.run measures that path;
  2. 500+ open items through the services: candidates waiting on a person (submit_candidate),
     conflicts lost by a human-stated fact (a person's statement, then the agent relaying a
     later word on the same topic: propose_fact), possible conflicts
     (open_possible_conflict between two live facts), challenged facts (challenge_fact) and
     remember reviews, one for every ten of the other kinds (submit_review);
  3. gunicorn (bench.run.start_server, DEBUG=0), a reviewer — staff, with the fact model's admin
     permissions, administering the workspace — signed in through the login form (session and CSRF
     cookies), and each page at BENCH_PAGES_CLIENTS (2) clients for BENCH_SECONDS: p50 / p95 beside
     the floor measured in the same run (the signed-in logout confirmation page), against the
     issue's p95 targets.

Options (environment): BENCH_PAGES_FACTS=100000  BENCH_PAGES_ITEMS=125 (of each kind)
  BENCH_SECONDS=12  BENCH_PAGES_CLIENTS=2  BENCH_PORT  BENCH_REUSE=1 (measure the database as it is).
"""

from __future__ import annotations

import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ENGRAM_DB_NAME", "engram_bench_pages")
os.environ.setdefault("BENCH_PORT", "8766")  # beside bench.run's server, should both run at once
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from tqdm import tqdm  # noqa: E402

from bench import corpus  # noqa: E402
from bench.run import CLIENT_STRIDE, PORT, load, start_server, stop_server  # noqa: E402

FACTS = int(os.environ.get("BENCH_PAGES_FACTS", "100000"))
ITEMS = int(os.environ.get("BENCH_PAGES_ITEMS", "125"))  # of each kind: 500+ waiting (remember reviews: one in ten)
CLIENTS = int(os.environ.get("BENCH_PAGES_CLIENTS", "2"))
REUSE = os.environ.get("BENCH_REUSE") == "1"
WORKSPACE, PASSWORD = "bench", "bench-reviewer-password"
LOAD_BATCH = 2000
TARGETS = {  # p95 ms (issue 38)
    "dashboard": 100.0,
    "queue page": 100.0,
    "item: candidate": 100.0,
    "item: conflict": 100.0,
    "item: possible": 100.0,
    "item: possible, asked with its question": 100.0,
    "item: challenged": 100.0,
    "item: remember": 100.0,
    **{f"item: {kind}, first page": 100.0 for kind in ("candidate", "conflict", "possible", "challenged")},
    "memory browser": 80.0,
    "memory browser q=deploy": 80.0,
    "graph": 150.0,
    "graph.json": 150.0,
    "admin fact list": 150.0,
}


def setup() -> dict:
    """An empty database with the corpus's workspace, domains, an agent that relays people's words
    (the corpus holds human-stated facts) and the reviewer."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    from agents.services import create_agent
    from bench.common import recreate_database
    from memory.actors import Actor
    from memory.models import WorkspaceMembership
    from memory.services.tenancy import create_domain, get_or_create_repo, get_or_create_role, get_or_create_workspace

    recreate_database()
    by = Actor.system("bench")
    with transaction.atomic():
        ws = get_or_create_workspace(slug=WORKSPACE, name="Benchmark", by=by)
        role = get_or_create_role(workspace=ws, name="coder", by=by)
        domains = {(name, None): create_domain(workspace=ws, name=name, by=by) for name in corpus.DOMAINS}
        for slug in corpus.REPOS:
            repo = get_or_create_repo(workspace=ws, slug=slug, by=by)
            domains[("context", slug)] = create_domain(workspace=ws, name="context", repo=repo, by=by)
        agent, _ = create_agent(workspace=ws, name="bench-agent", role=role, by=by, relays_human_words=True)
        reviewer = get_user_model().objects.create_user("reviewer", password=PASSWORD, is_staff=True)
        reviewer.user_permissions.set(
            Permission.objects.filter(content_type__app_label="memory", codename__endswith="_fact")
        )
        WorkspaceMembership.objects.create(user=reviewer, workspace=ws, is_admin=True)
    return {"workspace": ws, "domains": domains, "agent": agent, "reviewer": reviewer}


def _bulk_indexes() -> list:
    """The Fact indexes that a row-by-row load would keep rebuilding: full-text and vector."""
    from django.contrib.postgres.indexes import GinIndex
    from pgvector.django import HnswIndex

    from memory.models import Fact

    return [index for index in Fact._meta.indexes if isinstance(index, (GinIndex, HnswIndex))]


def load_facts(ctx: dict, n: int) -> float:
    """Bulk-load `n` corpus facts as the write path would store them (see the module docstring);
    returns seconds spent."""
    from django.utils import timezone

    from memory.actors import Actor
    from memory.audit import record_events
    from memory.embeddings import embed_meanings
    from memory.models import Fact
    from memory.models.facts import VERACITY_WEIGHT

    began = time.monotonic()
    by = Actor.of_agent(ctx["agent"])
    indexes = _bulk_indexes()
    with connection.schema_editor() as editor:
        for index in indexes:
            editor.remove_index(Fact, index)
    generated = list(corpus.facts(n))
    with tqdm(total=n, unit="fact", desc=f"load {n:,} facts", file=sys.stderr) as bar:
        for start in range(0, n, LOAD_BATCH):
            part = generated[start : start + LOAD_BATCH]
            meanings = embed_meanings([(f.topic, f.content) for f in part], bulk=True)
            now = timezone.now()
            created = Fact.objects.bulk_create(
                [
                    Fact(
                        workspace=ctx["workspace"],
                        domain=ctx["domains"][(f.domain, f.repo)],
                        topic=f.topic,
                        content=f.content,
                        memory_type=f.memory_type,
                        veracity=f.veracity,
                        confidence=VERACITY_WEIGHT[f.veracity],
                        observed_at=now,
                        created_at=now,
                        last_mentioned_at=now,
                        status_changed_at=now,
                        embedding=meaning.stored,
                        content_embedding=meaning.content,
                        embedded_at=now,
                        created_by_agent=ctx["agent"],
                    )
                    for f, meaning in zip(part, meanings, strict=True)
                ],
                batch_size=500,
            )
            record_events(  # the audit rows the write path writes with them (the dashboard reads them)
                actor=by,
                verb="fact.created",
                target_type="fact",
                events=[
                    (fact.workspace_id, fact.pk, {"domain": fact.domain.label, "topic": fact.topic}) for fact in created
                ],
            )
            bar.update(len(part))
    with connection.schema_editor() as editor:
        for index in indexes:
            editor.add_index(Fact, index)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.monotonic() - began


def open_items(ctx: dict, per_kind: int) -> dict[str, int]:
    """`per_kind` open items of each kind, made through the services; returns one pk per kind
    (the item page measured)."""
    from memory.actors import Actor
    from memory.models import Conflict
    from memory.services.conflicts import open_possible_conflict
    from memory.services.facts import FactInput, propose_fact
    from memory.services.lifecycle import challenge_fact
    from memory.services.promotion import parse_candidate_document, submit_candidate
    from review.demo import DEMO_CANDIDATE, DEMO_FILES, DEMO_OUTPUT
    from review.services import submit_review

    agent, reviewer = ctx["agent"], ctx["reviewer"]
    by_agent, by_person = Actor.of_agent(agent), Actor.of_user(reviewer)
    domain = ctx["domains"][("architecture", None)]
    first: dict[str, int] = {}

    def propose(topic: str, content: str, by: Actor, veracity: str = "agent_inferred"):
        data = FactInput(topic=topic, content=content, memory_type="convention", veracity=veracity)
        return propose_fact(domain=domain, by=by, data=data)

    for i in tqdm(range(per_kind), desc="open items", file=sys.stderr):
        document = parse_candidate_document(
            {
                **DEMO_CANDIDATE,
                "candidate_id": f"bench-{i}",
                "topic": f"bench-candidate-{i}",
                "domain": domain.name,
                "proposed_memory": f"Run `make build-{i}` before deploying service {i}.",
            }
        )
        candidate, _ = submit_candidate(domain=domain, topic=f"bench-candidate-{i}", document=document, by=by_agent)
        first.setdefault("candidate", candidate.pk)
        # a person's statement replaced by the agent relaying someone's later word: a conflict a person lost
        propose(f"bench-release-{i}", f"Release train {i} leaves on Tuesdays.", by_person, "human_stated")
        rival = propose(f"bench-release-{i}", f"Release train {i} leaves on Fridays.", by_agent, "human_stated")
        if rival.conflict is not None:
            first.setdefault("conflict", rival.conflict.pk)
        old = propose(f"bench-cache-{i}-old", f"Cache {i} keeps entries for 60 seconds.", by_agent).fact
        new = propose(f"bench-cache-{i}-new", f"Worker pool {i} retries failed jobs three times.", by_agent).fact
        if not Conflict.objects.filter(existing=old, proposed=new, status=Conflict.Status.OPEN).exists():
            with transaction.atomic():
                open_possible_conflict(existing=old, proposed=new, by=by_agent, similarity=0.8, reason="unsure")
        first.setdefault(
            "possible", Conflict.objects.filter(existing=old, proposed=new).values_list("pk", flat=True)[0]
        )
        stale = propose(f"bench-stale-{i}", f"Feature flag {i} is read from the config service.", by_agent).fact
        challenge_fact(fact=stale, by=Actor.system("bench"), reason="stale")
        first.setdefault("challenged", stale.pk)
        if i < max(1, per_kind // 10):
            review = submit_review(
                agent=agent, session_id=f"bench-{i}", output=DEMO_OUTPUT, files=DEMO_FILES, repo="web-app"
            )
            first.setdefault("remember", review.pk)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return first


def newest_items() -> dict[str, int]:
    """The newest waiting item of each kind but remember reviews, as the reviewer's list shows it
    first: an item on the list's first page, beside first_items' items, which may lie further on
    (review.views_queue reads the list once as keys to find the page that holds an item)."""
    from django.contrib.auth import get_user_model

    from review.selectors_queue import queue

    reviewer = get_user_model().objects.get(username="reviewer")
    kinds = ("candidate", "conflict", "possible", "challenged")
    return {kind: queue(reviewer, {"kind": kind}, limit=1)[0][0].obj.pk for kind in kinds}


def first_items() -> dict[str, int]:
    """One open item of each kind, for a reused database; for possible conflicts the oldest that
    waits (past its kind's first 200 listed when more wait), and a pair that waits with the question
    it is joined to (not an item of its own: its page says where it is decided)."""
    from memory.models import Conflict, Fact, Workspace
    from review.models import RememberReview
    from review.selectors_held import waiting_candidates
    from review.selectors_queue import possible_conflicts

    workspaces = Workspace.objects.filter(slug=WORKSPACE)
    waiting = possible_conflicts(workspaces, None)
    joined = Conflict.objects.filter(status=Conflict.Status.OPEN, question__isnull=False).exclude(pk__in=waiting)
    found = {
        "candidate": waiting_candidates(workspaces, None, limit=1)[0].pk,
        "conflict": Conflict.objects.filter(reviewed_at__isnull=True, loser__veracity="human_stated").first().pk,
        "possible": waiting.order_by("detected_at", "id").first().pk,
        "challenged": Fact.objects.filter(status="challenged").first().pk,
        "remember": RememberReview.objects.filter(status="pending").first().pk,
    }
    if (pair := joined.order_by("detected_at", "id").first()) is not None:
        found["possible, asked with its question"] = pair.pk
    return found


class Session:
    """A browser's session with the server as nginx would forward it (X-Forwarded-Proto: https, so
    the production settings' secure cookies and CSRF Referer check apply): its cookies kept by
    name, redirects not followed (a redirect to the login is a failed page)."""

    def __init__(self) -> None:
        self.cookies: dict[str, str] = {}
        self.opener = urllib.request.build_opener(_NoRedirects)

    def send(self, path: str, data: dict[str, str] | None = None) -> tuple[int, str]:
        """(status, body) of a GET, or a form POST with `data`; keeps the cookies it sets."""
        headers = {"X-Forwarded-Proto": "https", "Referer": f"https://127.0.0.1:{PORT}{path}"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", data=body, headers=headers)
        try:
            with self.opener.open(request, timeout=30) as response:
                status, text, set_cookies = response.status, response.read(), response.headers.get_all("Set-Cookie")
        except urllib.error.HTTPError as error:
            status, text, set_cookies = error.code, error.read(), error.headers.get_all("Set-Cookie")
        for cookie in set_cookies or []:
            name, _, value = cookie.split(";", 1)[0].partition("=")
            self.cookies[name.strip()] = value
        return status, text.decode(errors="replace")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def signed_in() -> Session:
    """A reviewer's session: the login form's CSRF cookie and token, then the POST that signs in."""
    session = Session()
    _, page = session.send("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if token is None:
        raise SystemExit("the login page has no CSRF token")
    status, _ = session.send("/login/", {"username": "reviewer", "password": PASSWORD, "csrfmiddlewaretoken": token[1]})
    if status != 302 or "sessionid" not in session.cookies:
        raise SystemExit(f"signing in as the reviewer failed ({status})")
    return session


def pages(items: dict[str, int], newest: dict[str, int]) -> dict[str, str]:
    ws = WORKSPACE
    return {
        "floor: GET logout/ (signed in)": "/logout/",
        "dashboard": "/",
        "queue page": "/review/",
        **{f"item: {kind}": f"/review/{kind.split(',')[0]}/{pk}/" for kind, pk in items.items() if kind != "remember"},
        "item: remember": f"/review/remember/{items['remember']}/",
        **{f"item: {kind}, first page": f"/review/{kind}/{pk}/" for kind, pk in newest.items()},
        "memory browser": f"/memory/{ws}/",
        "memory browser q=deploy": f"/memory/{ws}/?q=deploy",
        "graph": f"/memory/{ws}/graph/",
        "graph.json": f"/memory/{ws}/graph.json",
        "admin fact list": "/admin/memory/fact/",
    }


def measure(path: str, name: str, sessions: list[Session]) -> dict:
    """`CLIENTS` signed-in sessions getting `path` for SECONDS; every answer must be a 200."""

    def get(session: Session) -> float:
        began = time.perf_counter()
        status, _ = session.send(path)
        if status != 200:
            raise RuntimeError(f"{path} answered {status}")
        return (time.perf_counter() - began) * 1000

    # Each client its own session: client c of load() sends requests c × CLIENT_STRIDE onward.
    return load(name, lambda i: get(sessions[i // CLIENT_STRIDE]), clients=len(sessions))


def report(rows: list[dict], facts: int, waiting: dict[str, int]) -> None:
    """The table: each page beside the floor (the first row) and its target."""
    floor = rows[0]
    print(
        f"\nPages at {facts:,} facts and {sum(waiting.values())} open items ({waiting}), {CLIENTS} clients, "
        f"p50 / p95 ms (load average {os.getloadavg()[0]:.1f}):"
    )
    width = max(len(row["name"]) for row in rows)
    print(f"  {'page':<{width}} {'p50':>7} {'p95':>7} {'- floor p50':>12} {'target p95':>11}  n / errors")
    for row in rows:
        target = TARGETS.get(row["name"])
        ok = target is not None and row["p95"] <= target and not row["errors"]
        verdict = "" if target is None else ("met" if ok else "NOT met")
        print(
            f"  {row['name']:<{width}} {row['p50']:7.1f} {row['p95']:7.1f} {row['p50'] - floor['p50']:12.1f} "
            f"{'' if target is None else f'≤ {target:.0f}':>11}  {row['n']} / {row['errors']}  {verdict}"
        )


def waiting_items() -> dict[str, int]:
    """How many items of each kind wait for a person (the metrics' count)."""
    from review.selectors_queue import queue_sizes

    return queue_sizes()


def main() -> None:
    from memory.models import Fact

    if REUSE:
        items = first_items()
    else:
        ctx = setup()
        print(f"loaded {FACTS:,} facts in {load_facts(ctx, FACTS):.0f} s", file=sys.stderr)
        items = open_items(ctx, ITEMS)
    facts, waiting, newest = Fact.objects.count(), waiting_items(), newest_items()
    connection.close()
    proc = start_server()
    try:
        sessions = [signed_in() for _ in range(CLIENTS)]
        rows = [measure(path, name, sessions) for name, path in pages(items, newest).items()]
    finally:
        stop_server(proc)
    report(rows, facts, waiting)


if __name__ == "__main__":
    main()
