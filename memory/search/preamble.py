"""The dispatch preamble (SPEC §5), the hot path: keyword only, no embedding.

It is exactly: every active policy as `- [domain] rule`; the agent's working memory verbatim;
at most 5 keyword-matched facts within about 1,200 characters, only for tasks of at least 20
characters, the given repo's facts first; a closing line pointing to search_memory.

A fact enters only when it is about the task (issue 39; design note 002: memory holds only what
helps the task): it must match at least MIN_COVERAGE of the task's term weight (each term weighs
its IDF, so a fact sharing only common words with the task — "deploy", "check", "update" — stays
below it). No fact at all is better than five that merely share a word.

A fact that restates one of the policies shown is left out (issue 20, issue 39; design note 002:
"remove memory that duplicates rules"), read as the write path reads a re-mention: the write
classifier with its second reading (`memory.classifier.classify_many` with the pair model) is asked
whether the fact, proposed on its own topic, would be the SAME as the policy; and since a policy is
a rule and a fact that says it again usually adds a word of circumstance the rules read as "a
different case", a pair the pair model reads as the same with p ≥ RESTATES_P_SAME whose texts are
close (plain cosine ≥ RESTATES_COSINE) restates it too. The task is never embedded; the policies'
vectors are computed once per process and rule (they are few and rarely change) and compared with
the facts' stored vectors; only a pair whose cosine clears PREFILTER_COSINE is read at all, and
the pair model's answers are cached (memory.pair_model).

The thresholds were chosen on the tuning set PA of `bench.eval_preamble` (F1 of precision and
recall of helpful facts) and are reported on the held-out sets PB and PC (README).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from memory import embeddings, pair_model
from memory.caches import register_cache
from memory.classifier import Relation, classify_many, normalise
from memory.models import Fact, MemoryDomain, Policy, Repo, Role
from memory.recalls import EPISODE_ID_SQL, open_episode, record_recall
from memory.routing import recall_write
from memory.search import as_of as as_of_recall
from memory.search import voices
from memory.search.loaded import loaded
from memory.selectors_notes import notes_for
from memory.services.policies import policy_line

if TYPE_CHECKING:
    from memory.models import Agent

MIN_TASK_CHARS = 20
MAX_FACTS = 5
FACT_BUDGET_CHARS = 1200
CANDIDATES = 20
# Relevance (issue 39, tuned on bench.eval_preamble's PA): the share of the task's term weight a
# fact must match. On PA, 0.25 kept 0.71 precision at 0.47 recall (F1 0.56; none: 0.18 / 0.73);
# 0.2 with a second bar at 0.7 of the best fact's weight scored F1 0.59 there, but a relative bar
# drops the caller's repo's facts, which come first whatever their weight (SPEC §5).
MIN_COVERAGE = 0.25
CLOSING_LINE = "Before relying on any of this for an important step, verify it with search_memory."


@dataclass
class Preamble:
    text: str
    policies: list[str]
    working_memory: str
    facts: list[Fact]
    fact_lines: list[str]
    episode_id: int
    restating: dict[int, str] = field(default_factory=dict)  # fact id → the policy rule it restates
    as_of: datetime | None = None
    valid_at: datetime | None = None


def scope_note(fact: Fact) -> str:
    """The compact scope of a promoted fact (SPEC §7): where it applies, where not, how verified."""
    parts = []
    if fact.valid_for:
        parts.append("applies to: " + ", ".join(map(str, fact.valid_for)))
    if fact.not_valid_for:
        parts.append("not for: " + ", ".join(map(str, fact.not_valid_for)))
    if fact.verification:
        parts.append("verify: " + " ".join(fact.verification.split()))
    return f" ({'; '.join(parts)})" if parts else ""


def fact_line(fact: Fact) -> str:
    return f"- [{fact.domain.label}] {' '.join(fact.content.split())}{scope_note(fact)}"


def working_memory_text(agent: Agent) -> str:
    """The scratchpad verbatim, followed by the observations appended to it."""
    view = notes_for(agent)
    return _working_memory(view["notes"], [o["text"] for o in view["observations"][-RECENT_OBSERVATIONS:]])


def _working_memory(notes: str, observations: list[str]) -> str:
    """The scratchpad, then its latest observations (oldest first), one `- observed:` line each."""
    text = notes
    if observations:
        observed = "\n".join(f"- observed: {' '.join(o.split())}" for o in observations)
        text = f"{text.rstrip()}\n{observed}" if text.strip() else observed
    return text


RECENT_OBSERVATIONS = 5


@dataclass
class DispatchContext:
    """What a dispatch carries besides its facts, read in one query: the active policies the
    agent may see (in preamble order, with domain, repo and required role), its working memory,
    and the id reserved for the dispatch episode (None when they were read from a replica)."""

    policies: list[Policy]
    working_memory: str
    episode_id: int | None


_policies_sql: dict[tuple[int, int], tuple[str, tuple[Any, ...]]] = {}
_POLICY_COLUMNS = (
    "pk",
    "rule",
    "created_at",
    "domain_id",
    "domain__name",
    "domain__repo_id",
    "domain__repo__slug",
    "required_role_id",
    "required_role__name",
)


def _active_policies_sql(agent: Agent) -> tuple[str, tuple[Any, ...]]:
    """The SQL of `Policy.objects.visible_to(agent).active()` with what a policy line shows
    (_POLICY_COLUMNS), compiled once per workspace and role: grants are looked up by the SQL
    itself, as in voices._scope_where."""
    key = (agent.workspace_id, agent.role_id)
    if key not in _policies_sql:
        qs = Policy.objects.visible_to(agent).active().order_by().values_list(*_POLICY_COLUMNS)
        if len(_policies_sql) > 10_000:
            _policies_sql.clear()
        _policies_sql[key] = qs.query.sql_with_params()
    return _policies_sql[key]


def dispatch_context(agent: Agent) -> DispatchContext:
    """Policies, working memory and a reserved episode id in one query (the preamble's reads
    around its facts); on the primary, the same query reserves the episode id (recalls.EPISODE_ID_SQL)."""
    policies_sql, policies_params = _active_policies_sql(agent)
    database = voices.reader()
    # The episode id comes with the reads when they run on the primary (a standby refuses nextval).
    reserve = EPISODE_ID_SQL if voices.reserves_here(database) else "NULL"
    with recall_write(), database.cursor() as cursor:
        cursor.execute(
            "SELECT context.*, policy.* FROM (SELECT"  # noqa: S608 -- the compiled queryset; values are bound params
            " (SELECT notes FROM memory_workingmemory WHERE agent_id = %s),"
            " (SELECT coalesce(json_agg(o.text ORDER BY o.created_at, o.id), '[]') FROM"
            "  (SELECT text, created_at, id FROM memory_observation WHERE agent_id = %s"
            "   ORDER BY created_at DESC, id DESC LIMIT %s) AS o),"
            f" {reserve}) AS context"
            f" LEFT JOIN ({policies_sql}) AS policy ON true"
            # The preamble's order: domain name, then oldest first (columns 8, 6, 4: _POLICY_COLUMNS).
            " ORDER BY 8, 6, 4",
            [agent.pk, agent.pk, RECENT_OBSERVATIONS, *policies_params],
        )
        rows = cursor.fetchall()
    notes, observations, episode_id = rows[0][:3]
    return DispatchContext(
        policies=[_policy_of(row[3:], database.alias) for row in rows if row[3] is not None],
        working_memory=_working_memory(notes or "", observations),
        episode_id=episode_id,
    )


def _policy_of(row: Sequence[Any], alias: str) -> Policy:
    """A Policy with its domain, repo and required role, from _POLICY_COLUMNS' values read on
    the database `alias`."""
    pk, rule, created_at, domain_id, domain_name, repo_id, repo_slug, role_id, role_name = row
    policy = loaded(
        Policy,
        alias,
        {"id": pk, "rule": rule, "created_at": created_at, "domain_id": domain_id, "required_role_id": role_id},
    )
    domain = loaded(MemoryDomain, alias, {"id": domain_id, "name": domain_name, "repo_id": repo_id})
    domain.repo = loaded(Repo, alias, {"id": repo_id, "slug": repo_slug}) if repo_id is not None else None
    policy.domain = domain
    policy.required_role = loaded(Role, alias, {"id": role_id, "name": role_name}) if role_id is not None else None
    return policy


# Below this cosine between a policy's own vector and a fact's, the classifier is not asked: it
# answers SAME only from cosine 0.50 (SAME_FLOOR) with the topic-aware vector, which lies close to
# (and mostly below) this one.
PREFILTER_COSINE = 0.45
# A restatement the rules call a different case: the pair model's p(same) and the plain cosine of
# the policy's and the fact's vectors (issue 39, tuned on PA: 0.96 / 0.50 caught 11 of its 15
# restatements alone and hid none of its helpful facts; 0.9 hid one that adds a detail to a rule).
RESTATES_P_SAME = 0.96
RESTATES_COSINE = 0.50
# At most this many relevant facts are checked against the policies per preamble (in rank order).
CHECKED = 2 * MAX_FACTS
VECTOR_CACHE_SIZE = 4096
_vectors_cache: OrderedDict[str, np.ndarray] = OrderedDict()
_vectors_lock = threading.Lock()


def cached_vectors(texts: list[str]) -> list[np.ndarray]:
    """The vectors of `texts`, embedded once per process (policies and policy-on-topic texts:
    few, and they change only when a policy does); least recently used evicted past the size."""
    found: dict[str, np.ndarray] = {}
    with _vectors_lock:
        for text in texts:
            if text in _vectors_cache:
                _vectors_cache.move_to_end(text)
                found[text] = _vectors_cache[text]
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        encoded = [np.asarray(v, dtype=np.float32) for v in embeddings.embed_texts(missing)]
        found.update(zip(missing, encoded, strict=True))
        with _vectors_lock:
            _vectors_cache.update(zip(missing, encoded, strict=True))
            while len(_vectors_cache) > VECTOR_CACHE_SIZE:
                _vectors_cache.popitem(last=False)
    return [found[t] for t in texts]


@register_cache
def forget_vectors() -> None:
    """Drop every cached vector (they are keyed by policy texts)."""
    with _vectors_lock:
        _vectors_cache.clear()


class PolicyRestatements:
    """Tells which facts restate one of the preamble's policies, as the write path would read a
    re-mention (module docstring): the policy embedded on the fact's topic (as a proposal on that
    topic would be) against the fact's stored vector (read from `embedding_text`, annotated by
    select_facts), through classify_many with the pair model. A fact without a vector yet restates
    a policy only if their normalised texts are equal."""

    def __init__(self, rules: list[str]) -> None:
        self.rules = rules
        self.normalised = {normalise(rule): rule for rule in rules}
        self.skipped: dict[int, str] = {}  # fact id → the rule it restates (left out)
        self._plain: np.ndarray | None = None

    def restating(self, facts: Sequence[Fact]) -> dict[int, str]:
        """fact id → the policy rule it restates, for those of `facts` that restate one (one
        batch through the classifier and the pair model)."""
        if not self.rules:
            return {}
        found: dict[int, str] = {}
        pairs: list[tuple[Fact, str, float, np.ndarray]] = []  # fact, rule, plain cosine, fact vector
        for fact in facts:
            if (rule := self.normalised.get(normalise(fact.content))) is not None:
                found[fact.pk] = rule
                continue
            text = getattr(fact, "embedding_text", None)
            if not text:
                continue
            if self._plain is None:
                self._plain = np.stack(cached_vectors(self.rules))
            vector = np.array(text.strip("[]").split(","), dtype=np.float32)
            cosines = self._plain @ vector
            pairs += [
                (fact, self.rules[int(i)], float(cosines[i]), vector)
                for i in np.flatnonzero(cosines >= PREFILTER_COSINE)
            ]
        if not pairs:
            return found
        on_topic = cached_vectors([embeddings.fact_text(fact.topic, rule) for fact, rule, _, _ in pairs])
        items = [
            (rule, fact.content, float(v @ vector)) for (fact, rule, _, vector), v in zip(pairs, on_topic, strict=True)
        ]
        model = pair_model.active()
        verdicts = classify_many(items, model=model)
        close = [i for i, (_, _, plain, _) in enumerate(pairs) if plain >= RESTATES_COSINE]
        p_same = dict(zip(close, model([items[i][:2] for i in close])[:, 0], strict=True)) if model and close else {}
        for i, ((fact, rule, _, _), verdict) in enumerate(zip(pairs, verdicts, strict=True)):
            if fact.pk not in found and (verdict.kind == Relation.SAME or p_same.get(i, 0.0) >= RESTATES_P_SAME):
                found[fact.pk] = rule
        return found


def select_facts(
    agent: Agent,
    task: str,
    repo: str | None,
    policies: PolicyRestatements | None = None,
    *,
    as_of: datetime | None = None,
    valid_at: datetime | None = None,
) -> list[tuple[Fact, str]]:
    """Keyword-matched facts about the task (MIN_COVERAGE), the repo's first, at most
    MAX_FACTS within FACT_BUDGET_CHARS; a fact restating one of `policies` is skipped (recorded in
    `policies.skipped`). With `as_of` / `valid_at`, among the facts believed then and true then
    (memory.search.as_of). The facts are ranked and loaded by one query (voices.lexical_hits)."""
    if len(task.strip()) < MIN_TASK_CHARS:
        return []
    scope = voices.Scope(agent=agent, as_of=as_of, valid_at=valid_at)
    # The vectors as text, parsed only for the facts examined (pgvector's own field parses every
    # row, which cost more than the rest of the check).
    vectors = policies is not None and bool(policies.rules)
    found = voices.lexical_hits(scope, task, limit=CANDIDATES, prefer_repo=repo, vectors=vectors, matched=True)
    bar = MIN_COVERAGE * sum(idf for _, idf, _ in voices.weighted_terms(task))
    relevant = [found.fact(pk) for pk, _ in found.ranked if found.matched.get(pk, 0.0) >= bar][:CHECKED]
    restating = policies.restating(relevant) if policies is not None else {}
    chosen: list[tuple[Fact, str]] = []
    used = 0
    for fact in relevant:
        if policies is not None and (rule := restating.get(fact.pk)) is not None:
            policies.skipped[fact.pk] = rule
            continue
        line = fact_line(fact)
        if used + len(line) > FACT_BUDGET_CHARS:
            if chosen:
                continue  # a shorter fact further down may still fit
            line = line[: FACT_BUDGET_CHARS - 1] + "…"
        chosen.append((fact, line))
        used += len(line) + 1
        if len(chosen) == MAX_FACTS:
            break
    return chosen


def build_preamble(
    *,
    agent: Agent,
    task: str,
    repo: str | None = None,
    as_of: datetime | None = None,
    valid_at: datetime | None = None,
) -> Preamble:
    """Assemble the preamble, open its dispatch episode and count the facts as recalled (the
    episode's row and the counts are written by the recall buffer, memory.recalls).
    With `as_of`, the policies active then and the facts believed then (and with `valid_at`, true
    then) — memory.search.as_of; the working memory is today's, the recall is counted today."""
    if as_of is None:
        context = dispatch_context(agent)
        active, memory, episode_id = context.policies, context.working_memory, context.episode_id
    else:
        active, memory, episode_id = as_of_recall.policies_then(agent, as_of), working_memory_text(agent), None
    policies = [policy_line(p) for p in active]
    restatements = PolicyRestatements([p.rule for p in active])
    chosen = select_facts(agent, task, repo, restatements, as_of=as_of, valid_at=valid_at)
    sections = []
    if header := as_of_recall.header(as_of, valid_at):
        sections.append(header)
    if policies:
        sections.append("Policies (always apply):\n" + "\n".join(policies))
    if memory.strip():
        sections.append("Your working memory:\n" + memory)
    if chosen:
        sections.append("Possibly relevant facts:\n" + "\n".join(line for _, line in chosen))
    sections.append(CLOSING_LINE)
    episode_id = open_episode(agent=agent, kind="dispatch", title=task, episode_id=episode_id)
    record_recall(
        episode_id, [f.pk for f, _ in chosen], agent=agent, served_as="preamble", policy_ids=[p.pk for p in active]
    )
    return Preamble(
        text="\n\n".join(sections),
        policies=policies,
        working_memory=memory,
        facts=[f for f, _ in chosen],
        fact_lines=[line for _, line in chosen],
        episode_id=episode_id,
        restating=restatements.skipped,
        as_of=as_of,
        valid_at=valid_at,
    )
