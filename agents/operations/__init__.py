"""The agent tools as plain functions, one per use case: raw input → input serializer →
service → output serializer.

Every agent API endpoint (agents.api.views*) and its MCP tool (agents.mcp_server) call the
same function here, so an MCP client and an HTTP client get the same JSON for the same
input; lists page through `pages.page_of` and link `next`/`previous` alike. Errors are raised
as usual (EngramError, DRF ValidationError); `error_result` turns any of them into the API's
`{"code", "detail", "fields"}` body and status. Nothing here imports agents.api: the API
depends on the operations, not the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rest_framework import status as http
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from agents import runs as run_services
from agents.operations import serializers as s
from agents.operations import serializers_as_of as sa
from agents.operations import serializers_candidates as sc
from agents.operations import serializers_runs as sr
from agents.operations.errors import exception_handler
from agents.operations.inputs import Validator, refuse_unknown, validated
from agents.operations.pages import api_url, page_bounds, page_of
from memory import selectors
from memory.actors import Actor
from memory.errors import EngramError, InvalidInput, NotFound, StateConflict
from memory.models import Agent, Candidate, Fact, Job, MemoryDomain, PromotionDecision
from memory.search.hybrid import search_memory
from memory.search.preamble import build_preamble
from memory.selectors_candidates import candidate_for_agent, candidates_for_agent
from memory.selectors_notes import notes_for
from memory.selectors_policies import policy_for_agent, policy_list_for_agent
from memory.selectors_runs import bank_of, run_for_agent
from memory.services import batch as batch_services
from memory.services import facts as fact_services
from memory.services import hot as hot_services
from memory.services import jobs as job_services
from memory.services import notes as note_services
from memory.services import policies as policy_services
from memory.services import promotion
from memory.services.tenancy import parse_domain_label

# The page arguments of every list, read by `pages.page_bounds` beside the list's own filters.
PAGE_ARGUMENTS = ("limit", "offset")


@dataclass(frozen=True)
class Result:
    """An operation's answer: the HTTP status and JSON body, and the headers the API sets
    (`Retry-After` on a long-poll refused a wait; the MCP server passes them on in `_meta`)."""

    status: int
    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


def error_result(exc: Exception) -> Result | None:
    """The API's answer to `exc` (same code, detail, fields and status), or None for a real bug."""
    response = exception_handler(exc, {})
    if response is None:
        return None
    return Result(response.status_code, dict(response.data or {}))


def _ctx(request: Request | None) -> dict[str, Any]:
    """Serializer context: with the API's request, links (run_url, review_url) are absolute."""
    return {"request": request} if request is not None else {}


def _optional_domain(agent: Agent, data: Mapping[str, Any]) -> MemoryDomain | None:
    if not data.get("domain"):
        return None
    return selectors.domain_for_agent(agent, domain=data["domain"], repo=data.get("repo"))


def _list_url(route: str, query: type[Any], raw: Any, *, url: str | None, site_url: str) -> str:
    """The address a list page links from: `url` when the API was asked (the request's own
    address), else the API's address of `route` with the filters the caller gave, so that the
    MCP tool links the very `next`/`previous` the endpoint would."""
    if url is not None:
        return url
    raw = raw if isinstance(raw, Mapping) else {}
    given = {name: raw[name] for name in raw if name in query().fields}
    return api_url(route, given, site_url=site_url)


def _page_request(
    query: type[Any], route: str, raw: Any, limit: Any, offset: Any, url: str | None, site_url: str
) -> tuple[dict[str, Any], int, int, str]:
    """What every list operation reads first: its filters (`query`, the page arguments allowed
    beside them), the page bounds (400 when out of range: agents.operations.pages) and the
    address its `next`/`previous` link from (_list_url)."""
    filters = validated(query, raw, also=PAGE_ARGUMENTS)
    limit, offset = page_bounds({"limit": limit, "offset": offset})
    return filters, limit, offset, _list_url(route, query, raw, url=url, site_url=site_url)


# --- Identity ----------------------------------------------------------------------------------
def me(agent: Agent, raw: Any = None) -> Result:
    """GET me/: the calling agent's name, role and workspace."""
    refuse_unknown(raw)
    return Result(http.HTTP_200_OK, dict(s.MeSerializer(agent).data))


# --- Recall ------------------------------------------------------------------------------------
def get_preamble(agent: Agent, raw: Any) -> Result:
    data = validated(s.PreambleIn, raw)
    preamble = build_preamble(
        agent=agent, task=data["task"], repo=data.get("repo"), as_of=data.get("as_of"), valid_at=data.get("valid_at")
    )
    return Result(http.HTTP_200_OK, dict(s.PreambleOut(preamble).data))


def search(agent: Agent, raw: Any) -> Result:
    data = validated(s.SearchIn, raw)
    domain = _optional_domain(agent, data)
    result = search_memory(
        agent=agent,
        query=data["query"],
        mode=data["mode"],
        repo=data.get("repo"),
        domain_id=domain.pk if domain else None,
        limit=data["limit"],
        session_key=data.get("session_key") or None,
        as_of=data.get("as_of"),
        valid_at=data.get("valid_at"),
    )
    return Result(http.HTTP_200_OK, dict(s.SearchOut(result).data))


def list_facts(
    agent: Agent, raw: Any, *, limit: Any = None, offset: Any = None, url: str | None = None, site_url: str = ""
) -> Result:
    """GET facts/: one page of the facts visible to the agent (never another workspace's, never a
    `none` domain's), in the API's page shape; `limit`/`offset` follow the page rule."""
    filters, limit, offset, url = _page_request(s.FactListQuery, "api-facts", raw, limit, offset, url, site_url)
    page = page_of(selectors.facts_for_agent(agent, filters), limit=limit, offset=offset, url=url)
    return Result(http.HTTP_200_OK, page.body(s.FactOut(page.items, many=True).data))


def get_fact(agent: Agent, fact_id: int, raw: Any = None) -> Result:
    """GET facts/{id}/: one fact with its supersession chain, conflicts and mentions; 404 when the
    agent may not see it. With `as_of`, all of it as it was then (404 if recorded later)."""
    as_of = validated(sa.FactDetailQuery, raw if raw is not None else {}).get("as_of")
    if as_of is None:
        fact = selectors.fact_for_agent(agent, fact_id)
        history = selectors.fact_history(fact)
        conflicts = list(selectors.conflicts_of([f.pk for f in history]))
    else:
        fact = selectors.fact_as_of(agent, fact_id, as_of)
        history = selectors.facts_as_they_were(selectors.fact_history(fact), as_of)
        conflicts = selectors.conflicts_as_of(list(selectors.conflicts_of([f.pk for f in history])), as_of)
    mentions, mentions_total = selectors.mentions_of(fact, as_of=as_of)
    context: dict[str, Any] = {
        "history": history,
        "conflicts": conflicts,
        "mentions": mentions,
        "mentions_total": mentions_total,
    }
    if as_of is not None:
        context.update(as_of=as_of, challenge=selectors.challenge_as_of(fact, as_of))
    return Result(http.HTTP_200_OK, dict(s.FactDetailOut(fact, context=context).data))


# --- Writes ------------------------------------------------------------------------------------
def _fact_input(data: Mapping[str, Any]) -> fact_services.FactInput:
    return fact_services.FactInput(
        topic=data["topic"],
        content=data["content"],
        memory_type=data["memory_type"],
        veracity=data["veracity"],
        observed_at=data.get("observed_at"),
        valid_until=data.get("valid_until"),
        source_observation_ids=data.get("source_observation_ids") or [],
        episode_id=data.get("episode_id"),
        session_key=data.get("session_key") or "",
    )


def _proposal_body(result: fact_services.ProposalResult, fact: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """POST facts/'s answer for one proposal; `fact` is its fact already rendered by FactOut (a batch
    renders all of its facts at once)."""
    return {
        "fact": s.FactOut(result.fact).data if fact is None else fact,
        "outcome": result.outcome,
        "conflict_id": result.conflict.pk if result.conflict else None,
        "similarity": round(result.similarity, 4) if result.similarity is not None else None,
        "compared_with": result.compared_with,
        "reason": result.reason,
    }


def propose_fact(agent: Agent, raw: Any) -> Result:
    data = validated(s.FactProposeIn, raw)
    domain = selectors.domain_for_agent(agent, domain=data["domain"], repo=data.get("repo"))
    result = fact_services.propose_fact(domain=domain, data=_fact_input(data), by=Actor.of_agent(agent))
    return Result(http.HTTP_201_CREATED, _proposal_body(result))


def batch_items(raw: Any) -> list[Any]:
    """The `items` of a batch body. Raises InvalidInput: `unknown_argument` for any name beside
    `items`, `invalid_input` when there is no list, `batch_empty` for none, `batch_too_large`
    beyond ENGRAM_BATCH_MAX_ITEMS."""
    from django.conf import settings

    refuse_unknown(raw, allowed=["items"])
    items = raw.get("items") if isinstance(raw, Mapping) else None
    if not isinstance(items, list):
        raise InvalidInput('The body must be {"items": [...]}.', fields={"items": ["A list of facts is required."]})
    if not items:
        raise InvalidInput("The batch is empty.", code="batch_empty", fields={"items": ["At least one fact."]})
    limit = settings.ENGRAM_BATCH_MAX_ITEMS
    if len(items) > limit:
        raise InvalidInput(
            f"At most {limit} facts per batch (ENGRAM_BATCH_MAX_ITEMS).",
            code="batch_too_large",
            fields={"items": [f"At most {limit} items; got {len(items)}."]},
        )
    return items


def _refused(index: int, exc: Exception) -> dict[str, Any]:
    answer = error_result(exc)
    if answer is None:
        raise exc  # a real bug: a 500, as for POST facts/
    return {"index": index, "status": answer.status, "error": answer.body}


DomainKey = tuple[str, str | None]


def _batch_domains(agent: Agent, keys: set[DomainKey]) -> dict[DomainKey, MemoryDomain | EngramError]:
    """selectors.domain_for_agent for each (domain label, repo) of a batch, in one query for all
    instead of one per key: the visible domains named by the batch, matched as domain_for_agent
    matches (name, and the repo's slug or no repo). A key that is not a plain label, names two
    repos, or matches no domain or several goes through domain_for_agent itself, which answers
    it (or raises its error) as for POST facts/."""
    wanted: dict[DomainKey, tuple[str, str | None]] = {}
    for key in keys:
        label, repo = key
        try:
            repo_slug, name = parse_domain_label(label)
        except EngramError:
            continue
        if repo_slug and repo and repo_slug != repo:
            continue
        wanted[key] = (name, repo_slug or repo)
    candidates: dict[tuple[str, str | None], list[MemoryDomain]] = {}
    if wanted:
        names = {name for name, _ in wanted.values()}
        for domain in MemoryDomain.objects.visible_to(agent).select_related("repo").filter(name__in=names):
            slug = domain.repo.slug if domain.repo_id is not None else None
            candidates.setdefault((domain.name, slug), []).append(domain)
    found: dict[DomainKey, MemoryDomain | EngramError] = {}
    for key in keys:
        match = candidates.get(wanted[key], []) if key in wanted else []
        if len(match) == 1:
            found[key] = match[0]
            continue
        try:
            found[key] = selectors.domain_for_agent(agent, domain=key[0], repo=key[1])
        except EngramError as exc:
            found[key] = exc
    return found


def propose_facts_batch(agent: Agent, raw: Any) -> Result:
    """propose_facts (POST facts/batch/): each item parsed and written as propose_fact would, in
    order — later items see the earlier ones (re-mentions, conflicts) — and committed together, a
    refused item undone alone (memory.services.batch.propose_facts). 200 with one result per item:
    201 and the proposal, or the item's error status and body (nothing written for it). The batch itself is refused whole (400) only when `items`
    is missing, empty (`batch_empty`) or too long (`batch_too_large`).

    Per item, the cost is the write's own: the input serializer is built once for the batch
    (inputs.Validator), the domains are resolved in one query, and the facts are rendered by one
    FactOut (one query for their origin reviews) — the same answers as POST facts/ item by item."""
    items = batch_items(raw)
    results: dict[int, dict[str, Any]] = {}
    valid: list[tuple[int, dict[str, Any]]] = []
    validate = Validator(s.FactProposeIn)
    for index, item in enumerate(items):
        try:
            valid.append((index, validate(item)))
        except (ValidationError, EngramError) as exc:  # a field's error, or an unknown_argument
            results[index] = _refused(index, exc)
    domains = _batch_domains(agent, {(data["domain"], data.get("repo")) for _, data in valid})
    parsed: list[tuple[int, batch_services.IngestItem]] = []
    for index, data in valid:
        domain = domains[(data["domain"], data.get("repo"))]
        if isinstance(domain, EngramError):
            results[index] = _refused(index, domain)
            continue
        parsed.append((index, batch_services.IngestItem(domain=domain, data=_fact_input(data))))
    answers = batch_services.propose_facts(items=[item for _, item in parsed], by=Actor.of_agent(agent))
    written: list[tuple[int, fact_services.ProposalResult]] = []
    for (index, _), answer in zip(parsed, answers, strict=True):
        if isinstance(answer, EngramError):
            results[index] = _refused(index, answer)
        else:
            written.append((index, answer))
    # One FactOut for every written fact (its fields built once, the origin reviews read in one
    # query), after the whole batch was written: as before, each answer shows its fact as it stands then.
    facts = s.FactOut([answer.fact for _, answer in written], many=True).data
    for (index, answer), fact in zip(written, facts, strict=True):
        results[index] = {"index": index, "status": http.HTTP_201_CREATED, **_proposal_body(answer, fact)}
    ordered = [results[index] for index in range(len(items))]
    created = sum(1 for r in ordered if r["status"] == http.HTTP_201_CREATED)
    return Result(http.HTTP_200_OK, {"results": ordered, "created": created, "failed": len(ordered) - created})


def supersede_fact(agent: Agent, fact_id: int, raw: Any) -> Result:
    data = validated(s.FactSupersedeIn, raw)
    fact = selectors.fact_for_agent(agent, fact_id)
    new = fact_services.supersede_fact(
        fact=fact, by=Actor.of_agent(agent), content=data["content"], reason=data["reason"]
    )
    return Result(http.HTTP_201_CREATED, dict(s.FactOut(selectors.fact_for_agent(agent, new.pk)).data))


def propose_policy(agent: Agent, raw: Any) -> Result:
    data = validated(s.PolicyProposeIn, raw)
    domain = selectors.domain_for_agent(agent, domain=data["domain"], repo=data.get("repo"))
    policy = policy_services.propose_policy(
        domain=domain,
        rule=data["rule"],
        required_role=data.get("required_role"),
        derived_from_ids=data.get("derived_from") or [],
        by=Actor.of_agent(agent),
    )
    policy = policy_list_for_agent(agent).get(pk=policy.pk)
    return Result(http.HTTP_201_CREATED, dict(s.PolicyOut(policy).data))


def list_policies(
    agent: Agent, raw: Any, *, limit: Any = None, offset: Any = None, url: str | None = None, site_url: str = ""
) -> Result:
    """GET policies/: one page of the policies visible to the agent, newest first."""
    filters, limit, offset, url = _page_request(s.PolicyListQuery, "api-policies", raw, limit, offset, url, site_url)
    rows = policy_list_for_agent(agent, active=filters.get("active"))
    page = page_of(rows, limit=limit, offset=offset, url=url)
    return Result(http.HTTP_200_OK, page.body(s.PolicyOut(page.items, many=True).data))


def supersede_policy(agent: Agent, policy_id: int, raw: Any) -> Result:
    """supersede_policy: a new version of a live policy. 403 without `write` on its domain, 404 when
    the agent may not see it, 409 when already replaced or past the policy budget."""
    data = validated(s.PolicySupersedeIn, raw)
    policy = policy_for_agent(agent, policy_id)
    new = policy_services.supersede_policy(
        policy=policy, rule=data["rule"], reason=data["reason"], by=Actor.of_agent(agent)
    )
    new = policy_list_for_agent(agent).get(pk=new.pk)
    return Result(http.HTTP_201_CREATED, dict(s.PolicyOut(new).data))


def list_conflicts(
    agent: Agent,
    raw: Any,
    *,
    limit: Any = None,
    offset: Any = None,
    url: str | None = None,
    site_url: str = "",
) -> Result:
    """list_memory_conflicts: one page in the API's shape ({count, next, previous, results}).
    `limit` and `offset` follow the page rule (agents.operations.pages): 400 when out of range.
    `next`/`previous` link from `url`, the address the page was asked at; without it, from the
    API's address for the same filters under `site_url`."""
    filters, limit, offset, url = _page_request(s.ConflictListQuery, "api-conflicts", raw, limit, offset, url, site_url)
    page = page_of(selectors.conflicts_for_agent(agent, filters), limit=limit, offset=offset, url=url)
    return Result(http.HTTP_200_OK, page.body(s.ConflictOut(page.items, many=True).data))


def get_notes(agent: Agent, raw: Any = None) -> Result:
    """get_my_notes: the agent's private scratchpad and latest observations (no other agent's)."""
    refuse_unknown(raw)
    return Result(http.HTTP_200_OK, dict(s.NotesOut(notes_for(agent)).data))


def update_notes(agent: Agent, raw: Any) -> Result:
    data = validated(s.NotesIn, raw)
    note_services.update_notes(agent=agent, notes=data["notes"], by=Actor.of_agent(agent))
    return Result(http.HTTP_200_OK, dict(s.NotesOut(notes_for(agent)).data))


def record_observation(agent: Agent, raw: Any) -> Result:
    data = validated(s.ObservationIn, raw)
    observation = note_services.record_observation(agent=agent, text=data["text"], by=Actor.of_agent(agent))
    return Result(http.HTTP_201_CREATED, dict(s.ObservationOut(observation).data))


def create_episode(agent: Agent, raw: Any) -> Result:
    """POST episodes/: start an episode; facts proposed with its id are linked to it."""
    data = validated(s.EpisodeIn, raw)
    episode = fact_services.create_episode(
        workspace_id=agent.workspace_id,
        by=Actor.of_agent(agent),
        kind=data["kind"],
        title=data["title"],
        started_at=data.get("started_at"),
    )
    return Result(http.HTTP_201_CREATED, dict(s.EpisodeOut(episode).data))


def remember(agent: Agent, raw: Any) -> Result:
    data = validated(s.RememberIn, raw)
    domain = _optional_domain(agent, data)
    entry = hot_services.remember(
        agent=agent, session_id=data["session_id"], content=data["content"], domain=domain, topic=data["topic"]
    )
    return Result(http.HTTP_201_CREATED, dict(s.HotEntryOut(entry).data))


def run_job(task: Any, *args: Any, agent: Agent, kind: str, scope: str) -> Result:
    """Run `task` as the one job of `scope` (memory.services.jobs). While that job is queued or
    running, a request joins it: 202 {"status": "queued"|"running", "task_id", "joined": true}.
    Otherwise inline mode runs it and answers its report (200 "done"); with a broker it is
    queued (202 "queued"). `task_id` names the job either way."""
    from django.conf import settings

    claim = job_services.claim_job(
        workspace_id=agent.workspace_id, kind=kind, scope=scope, arguments={"args": list(args)}, requested_by=agent
    )
    job = claim.job
    if not claim.created:
        return Result(http.HTTP_202_ACCEPTED, {"status": job.state, "task_id": job.task_id, "joined": True})
    if settings.CELERY_TASK_ALWAYS_EAGER:
        report = task.apply(args=args, kwargs={"job_id": job.pk}, task_id=job.task_id).get()
        return Result(http.HTTP_200_OK, {"status": "done", "task_id": job.task_id, "joined": False, **report})
    try:
        task.apply_async(args=args, kwargs={"job_id": job.pk}, task_id=job.task_id)
    except Exception as exc:  # broker unreachable: free the scope at once rather than at expiry
        job_services.finish_job(job.pk, error=f"not queued: {type(exc).__name__}")
        raise
    return Result(http.HTTP_202_ACCEPTED, {"status": "queued", "task_id": job.task_id, "joined": False})


def consolidate(agent: Agent, raw: Any) -> Result:
    """consolidate_memory: one job at a time per agent and session."""
    from memory.tasks import consolidate_memory

    data = validated(s.ConsolidateIn, raw)
    session_id = data.get("session_id") or None
    return run_job(
        consolidate_memory,
        agent.pk,
        session_id,
        agent=agent,
        kind=Job.Kind.CONSOLIDATE,
        scope=job_services.consolidate_scope(agent.pk, session_id),
    )


def harmonize(agent: Agent, raw: Any) -> Result:
    """harmonize_memory: one job at a time per workspace, whichever agent or domain asked."""
    from memory.tasks import harmonize_memory

    data = validated(s.HarmonizeIn, raw)
    domain = _optional_domain(agent, data)
    return run_job(
        harmonize_memory,
        agent.pk,
        domain.pk if domain else None,
        agent=agent,
        kind=Job.Kind.HARMONIZE,
        scope=job_services.harmonize_scope(agent.workspace_id),
    )


def record_meeting_decisions(agent: Agent, raw: Any) -> Result:
    """POST decisions/: what a meeting decided, each decision a human_stated `decision` fact in the
    workspace's `decisions` domain, linked to one `meeting` episode (memory.services.decisions).
    Only an agent relaying people's words may call it (403 `veracity_not_allowed`); it needs
    `write` on the domain (403 `insufficient_memory_permission`). All decisions or none are written."""
    from agents.operations import serializers_decisions as sd
    from memory.models import Workspace
    from memory.services import decisions as decision_services

    data = validated(sd.MeetingDecisionsIn, raw)
    record = decision_services.record_meeting_decisions(
        workspace=Workspace.objects.get(pk=agent.workspace_id),
        by=Actor.of_agent(agent),
        title=data["title"],
        day=data["date"],
        decisions=data["decisions"],
        topic=data["topic"],
    )
    body = {
        "episode": s.EpisodeOut(record.episode).data,
        "domain": record.domain.label,
        "results": [{"index": i, **_proposal_body(result)} for i, result in enumerate(record.results)],
    }
    return Result(http.HTTP_201_CREATED, body)


def submit_review(agent: Agent, raw: Any, *, request: Request | None = None, site_url: str = "") -> Result:
    """submit_remember_review: the remember sub-agent's output for a person's review (SPEC §8): 201
    with the new review, or 200 with the session's live one (nothing written; issue 39).
    `review_url` is absolute under `request`'s host, else under `site_url` (relative without)."""
    from agents.operations import serializers_reviews as rs
    from review import selectors as review_selectors
    from review import services as review_services

    data = validated(rs.ReviewSubmitIn, raw)
    submission = review_services.join_or_submit_review(
        agent=agent, session_id=data["session_id"], output=data["output"], files=data["files"], repo=data.get("repo")
    )
    review = review_selectors.review_for_agent(agent, submission.review.pk)
    status = http.HTTP_201_CREATED if submission.created else http.HTTP_200_OK
    return Result(status, _review_body(review, request=request, site_url=site_url))


def list_reviews(
    agent: Agent,
    raw: Any,
    *,
    limit: Any = None,
    offset: Any = None,
    url: str | None = None,
    site_url: str = "",
    request: Request | None = None,
) -> Result:
    """list_remember_reviews: one page of the agent's own reviews of one session, newest first."""
    from agents.operations import serializers_reviews as rs
    from review import selectors as review_selectors

    filters, limit, offset, url = _page_request(rs.ReviewListQuery, "api-reviews", raw, limit, offset, url, site_url)
    reviews = review_selectors.session_reviews_for_agent(
        agent, session_id=filters["session"], status=filters.get("status")
    )
    page = page_of(reviews, limit=limit, offset=offset, url=url)
    readable = review_selectors.readable_by(agent, page.items)
    return Result(http.HTTP_200_OK, page.body([_review_body(r, request=request, site_url=site_url) for r in readable]))


def _review_body(review: Any, *, request: Request | None, site_url: str) -> dict[str, Any]:
    """ReviewOut of `review`; `review_url` absolute under the request's host, else `site_url`."""
    from agents.operations import serializers_reviews as rs

    body = dict(rs.ReviewOut(review, context=_ctx(request)).data)
    if site_url and str(body.get("review_url", "")).startswith("/"):
        body["review_url"] = site_url.rstrip("/") + body["review_url"]
    return body


def get_review(
    agent: Agent, review_id: int, raw: Any = None, *, request: Request | None = None, site_url: str = ""
) -> Result:
    """get_remember_review: the review's status and, once resolved, its resolution. `wait` (0–30 s,
    400 beyond) long-polls while it is pending (review.waiting); when this process already holds
    ENGRAM_MAX_WAITERS polls it answers at once with a `Retry-After` header. 404 for a review of
    another agent or workspace."""
    from agents.operations import serializers_reviews as rs
    from review import waiting

    query = validated(rs.ReviewWaitQuery, raw or {})
    result = waiting.wait_for_resolution(agent, review_id, wait=query["wait"])
    headers = {"Retry-After": str(result.retry_after)} if result.retry_after is not None else {}
    return Result(http.HTTP_200_OK, _review_body(result.review, request=request, site_url=site_url), headers)


def consume_review(
    agent: Agent, review_id: int, raw: Any = None, *, request: Request | None = None, site_url: str = ""
) -> Result:
    """consume_remember_review: approved|rejected → consumed, once the resolution is folded into
    the final answer. 409 `review_pending` while pending, `review_already_consumed` the second time."""
    refuse_unknown(raw)
    from review import selectors as review_selectors
    from review import services as review_services

    review = review_selectors.review_for_agent(agent, review_id)
    review_services.consume_review(review=review, by=Actor.of_agent(agent))
    review = review_selectors.review_for_agent(agent, review_id)
    return Result(http.HTTP_200_OK, _review_body(review, request=request, site_url=site_url))


# --- Promotion candidates (SPEC §7) ------------------------------------------------------------
def _candidate_body(agent: Agent, candidate_pk: int) -> dict[str, Any]:
    return dict(sc.CandidateOut(candidate_for_agent(agent, candidate_pk)).data)


def list_candidates(
    agent: Agent, raw: Any, *, limit: Any = None, offset: Any = None, url: str | None = None, site_url: str = ""
) -> Result:
    """list_candidates: one page of the candidates visible to the agent, newest first, each with
    its gates, replays and decisions."""
    filters, limit, offset, url = _page_request(
        sc.CandidateListQuery, "api-candidates", raw, limit, offset, url, site_url
    )
    page = page_of(candidates_for_agent(agent, filters), limit=limit, offset=offset, url=url)
    return Result(http.HTTP_200_OK, page.body(sc.CandidateOut(page.items, many=True).data))


def submit_candidate(agent: Agent, raw: Any) -> Result:
    """submit_candidate: an `awtl.memory_candidate.v2` document; 201 with its gates, 200 with the
    stored candidate when its candidate_id was submitted before, 409 `candidate_id_taken` when
    the id belongs to a candidate this agent may not see."""
    data = validated(sc.CandidateIn, raw)
    domain = selectors.domain_for_agent(agent, domain=data["domain"], repo=data.get("repo"))
    document = promotion.parse_candidate_document(sc.document_of(data))
    candidate, created = promotion.submit_candidate(
        domain=domain, topic=data["topic"], document=document, by=Actor.of_agent(agent)
    )
    try:
        body = _candidate_body(agent, candidate.pk)
    except NotFound:
        # The id is taken by a candidate this agent may not see: say so without showing it.
        raise StateConflict(
            "This candidate_id is already used in the workspace.",
            code="candidate_id_taken",
            fields={"candidate_id": ["Already used."]},
        ) from None
    return Result(http.HTTP_201_CREATED if created else http.HTTP_200_OK, body)


def get_candidate(agent: Agent, candidate_pk: int, raw: Any = None) -> Result:
    """get_candidate: its gates now, its replays, every decision with its scorecard; 404 if unseen."""
    refuse_unknown(raw)
    return Result(http.HTTP_200_OK, _candidate_body(agent, candidate_pk))


def record_replay(agent: Agent, candidate_pk: int, raw: Any) -> Result:
    """record_replay: a replay of the probe; gates recomputed. On a promoted candidate a failed
    replay challenges its fact and a passing one revalidates it."""
    data = validated(sc.ReplayIn, raw)
    candidate = candidate_for_agent(agent, candidate_pk)
    replay = promotion.record_replay(
        candidate=candidate,
        by=Actor.of_agent(agent),
        probe=data["probe"],
        passed=data["passed"],
        details=data["details"],
    )
    candidate = candidate_for_agent(agent, candidate_pk)
    fact_status = (
        Fact.objects.filter(pk=candidate.fact_id).values_list("status", flat=True).first()
        if candidate.fact_id is not None
        else None
    )
    body = {
        **sc.ReplayOut(replay).data,
        "candidate": candidate.pk,
        "promotion_status": candidate.promotion_status,
        "gates": promotion.compute_gates(candidate),
        "fact_status": fact_status,
    }
    return Result(http.HTTP_201_CREATED, body)


def _decision_body(decision: PromotionDecision, candidate: Candidate) -> dict[str, Any]:
    fact = (
        Fact.objects.select_related("domain__repo").filter(pk=decision.fact_id).first()
        if decision.fact_id is not None
        else None
    )
    return {
        **sc.DecisionOut(decision).data,
        "candidate": candidate.pk,
        "promotion_status": candidate.promotion_status,
        "gates": promotion.compute_gates(candidate),
        "fact": s.FactOut(fact).data if fact is not None else None,
    }


def promote_candidate(agent: Agent, candidate_pk: int, raw: Any) -> Result:
    """promote_candidate: without `write` a dry run (200, the decision it would make, nothing
    written); with it 201 and the recorded decision, a fact only when every gate passed. 409 once decided."""
    data = validated(sc.PromoteIn, raw)
    candidate = candidate_for_agent(agent, candidate_pk)
    decision = promotion.promote(candidate=candidate, by=Actor.of_agent(agent), write=data["write"], auto=data["auto"])
    body = _decision_body(decision, candidate_for_agent(agent, candidate_pk))
    return Result(http.HTTP_201_CREATED if decision.pk is not None else http.HTTP_200_OK, body)


def deny_candidate(agent: Agent, candidate_pk: int, raw: Any) -> Result:
    """deny_candidate: deny for good, recorded with its gates at that moment; 409 once decided."""
    data = validated(sc.DenyIn, raw)
    candidate = candidate_for_agent(agent, candidate_pk)
    decision = promotion.deny(candidate=candidate, by=Actor.of_agent(agent), reason=data["reason"])
    return Result(http.HTTP_201_CREATED, _decision_body(decision, candidate_for_agent(agent, candidate_pk)))


# --- Memory agent runs (SPEC §9) ---------------------------------------------------------------
def create_run(agent: Agent, raw: Any, *, request: Request | None = None) -> Result:
    data = validated(sr.RunIn, raw)
    run = run_services.start_run(agent=agent, task=data["task"], by=Actor.of_agent(agent))
    return Result(http.HTTP_201_CREATED, dict(sr.RunOut(run, context=_ctx(request)).data))


def get_bank(agent: Agent, run_id: int, raw: Any = None) -> Result:
    refuse_unknown(raw)
    run = run_for_agent(agent, run_id)
    return Result(http.HTTP_200_OK, dict(sr.BankOut(bank_of(run)).data))


def update_status(agent: Agent, run_id: int, raw: Any) -> Result:
    data = validated(sr.StatusIn, raw)
    run = run_for_agent(agent, run_id)
    item = run_services.update_status(run=run, content=data["content"], by=Actor.of_agent(agent))
    return Result(http.HTTP_200_OK, dict(sr.StatusOut(item).data))


def save_knowledge(agent: Agent, run_id: int, raw: Any) -> Result:
    data = validated(sr.KnowledgeIn, raw)
    run = run_for_agent(agent, run_id)
    item, created = run_services.save_knowledge(
        run=run, item_id=data["id"], content=data["content"], tags=data["tags"], by=Actor.of_agent(agent)
    )
    body = dict(sr.SavedItemOut(item, context={"created": created}).data)
    return Result(http.HTTP_201_CREATED if created else http.HTTP_200_OK, body)


def save_procedural(agent: Agent, run_id: int, raw: Any) -> Result:
    data = validated(sr.ProceduralIn, raw)
    run = run_for_agent(agent, run_id)
    item, created = run_services.save_procedural(
        run=run, item_id=data["id"], content=data["content"], outcome=data["outcome"], by=Actor.of_agent(agent)
    )
    body = dict(sr.SavedItemOut(item, context={"created": created}).data)
    return Result(http.HTTP_201_CREATED if created else http.HTTP_200_OK, body)


def delete_item(agent: Agent, run_id: int, item_id: str, raw: Any = None) -> Result:
    query = validated(sr.DeleteQuery, raw or {})
    run = run_for_agent(agent, run_id)
    deleted = run_services.delete_item(run=run, item_id=item_id, kind=query.get("kind"), by=Actor.of_agent(agent))
    return Result(http.HTTP_200_OK, dict(sr.DeletedOut({"deleted": deleted}).data))


def intervene(agent: Agent, run_id: int, raw: Any) -> Result:
    data = validated(sr.InterventionIn, raw)
    run = run_for_agent(agent, run_id)
    intervention = run_services.log_intervention(
        run=run,
        step=data["step"],
        reminder=data["reminder"],
        rationale=data["rationale"],
        window=[dict(step) for step in data["window"]],
        by=Actor.of_agent(agent),
    )
    return Result(http.HTTP_201_CREATED, dict(sr.InterventionOut(intervention).data))


def finish_run(agent: Agent, run_id: int, raw: Any, *, request: Request | None = None) -> Result:
    data = validated(sr.FinishIn, raw)
    run = run_for_agent(agent, run_id)
    if not run.is_running:
        raise run_services.RunFinished(run)
    scope = data.get("scope") or {}
    # Without a domain the service picks (and if need be creates) `knowledge`, in its transaction.
    domain = _optional_domain(agent, data) if data["offer_candidates"] else None
    result = run_services.finish_run(
        run=run,
        by=Actor.of_agent(agent),
        offer_candidates=data["offer_candidates"],
        domain=domain,
        topic=data.get("topic"),
        item_ids=data.get("items"),
        failure_class=data["failure_class"],
        applies_to=scope.get("applies_to") or [],
        does_not_apply_to=scope.get("does_not_apply_to") or [],
    )
    by_pk = {c.pk: c for c in candidates_for_agent(agent).filter(pk__in=[c.pk for c in result.candidates])}
    candidates = [by_pk[c.pk] for c in result.candidates if c.pk in by_pk]
    body = {
        **sr.RunOut(result.run, context=_ctx(request)).data,
        "candidates": sc.CandidateOut(candidates, many=True).data,
    }
    return Result(http.HTTP_200_OK, body)
