"""The dispatch preamble (SPEC §5), the hot path: keyword only, no embedding.

It is exactly: every active policy as `- [domain] rule`; the agent's working memory verbatim;
at most 5 keyword-matched facts within about 1,200 characters, only for tasks of at least 20
characters, the given repo's facts first; a closing line pointing to search_memory.

A fact that restates one of the policies shown is left out (issue 20; design note 002: "remove
memory that duplicates rules"): the write classifier (`memory.similarity.classify`, the very
function that makes a write a re-mention) is asked whether the fact, proposed on its own topic,
would be the SAME as the policy. The task is never embedded; the policies' vectors are computed
once per process and rule (they are few and rarely change) and compared with the facts' stored
vectors; only a pair whose cosine clears PREFILTER_COSINE is read by the classifier.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
from django.db.models import TextField
from django.db.models.functions import Cast

from memory import embeddings
from memory.models import Fact, Policy
from memory.recalls import open_episode, record_recall
from memory.search import as_of as as_of_recall
from memory.search import voices
from memory.selectors_notes import notes_for
from memory.services.policies import policy_line
from memory.similarity import Relation, classify, normalise

if TYPE_CHECKING:
    from memory.models import Agent

MIN_TASK_CHARS = 20
MAX_FACTS = 5
FACT_BUDGET_CHARS = 1200
CANDIDATES = 20
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
    text = view["notes"]
    if view["observations"]:
        observed = "\n".join(f"- observed: {' '.join(o['text'].split())}" for o in view["observations"][-5:])
        text = f"{text.rstrip()}\n{observed}" if text.strip() else observed
    return text


# Below this cosine between a policy's own vector and a fact's, the classifier is not asked: it
# answers SAME only from cosine 0.50 (SAME_FLOOR) with the topic-aware vector, which lies close to
# (and mostly below) this one.
PREFILTER_COSINE = 0.45
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


class PolicyRestatements:
    """Tells whether a fact restates one of the preamble's policies, as the write path would
    decide it: `classify(policy, fact)` is SAME, with the cosine of the policy embedded on the
    fact's topic (as a proposal on that topic would be) to the fact's stored vector (read from
    `embedding_text`, annotated by select_facts). A fact without a vector yet restates a policy
    only if their normalised texts are equal."""

    def __init__(self, rules: list[str]) -> None:
        self.rules = rules
        self.normalised = {normalise(rule): rule for rule in rules}
        self.skipped: dict[int, str] = {}  # fact id → the rule it restates (left out)
        self._plain: np.ndarray | None = None

    def restated_by(self, fact: Fact) -> str | None:
        """The policy rule `fact` restates, or None."""
        if not self.rules:
            return None
        if (rule := self.normalised.get(normalise(fact.content))) is not None:
            return rule
        text = getattr(fact, "embedding_text", None)
        if not text:
            return None
        if self._plain is None:
            self._plain = np.stack(cached_vectors(self.rules))
        vector = np.array(text.strip("[]").split(","), dtype=np.float32)
        cosines = self._plain @ vector
        for index in np.argsort(-cosines):
            if cosines[index] < PREFILTER_COSINE:
                break
            rule = self.rules[int(index)]
            [on_topic] = cached_vectors([embeddings.fact_text(fact.topic, rule)])
            if classify(rule, fact.content, float(on_topic @ vector)).kind == Relation.SAME:
                return rule
        return None


def select_facts(
    agent: Agent,
    task: str,
    repo: str | None,
    policies: PolicyRestatements | None = None,
    *,
    as_of: datetime | None = None,
    valid_at: datetime | None = None,
) -> list[tuple[Fact, str]]:
    """Keyword-matched facts, the repo's first, at most MAX_FACTS within FACT_BUDGET_CHARS; a fact
    restating one of `policies` is skipped (recorded in `policies.skipped`). With `as_of` /
    `valid_at`, among the facts believed then and true then (memory.search.as_of)."""
    if len(task.strip()) < MIN_TASK_CHARS:
        return []
    scope = voices.Scope(agent=agent, as_of=as_of, valid_at=valid_at)
    ranked = voices.lexical(scope, task, limit=CANDIDATES, prefer_repo=repo)
    if not ranked:
        return []
    facts = Fact.objects.select_related("domain__repo").defer("embedding", "search_vector")
    if policies is not None and policies.rules:
        # The vector as text, parsed only for the facts examined (pgvector's own field parses
        # every row, which cost more than the rest of the check).
        facts = facts.annotate(embedding_text=Cast("embedding", TextField()))
    loaded = {f.pk: f for f in facts.filter(pk__in=[pk for pk, _ in ranked])}
    chosen: list[tuple[Fact, str]] = []
    used = 0
    for pk, _ in ranked:
        fact = loaded.get(pk)
        if fact is None:
            continue
        if policies is not None and (rule := policies.restated_by(fact)) is not None:
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
    """Assemble the preamble, record its dispatch episode and count the facts as recalled.
    With `as_of`, the policies active then and the facts believed then (and with `valid_at`, true
    then) — memory.search.as_of; the working memory is today's, the recall is counted today."""
    if as_of is None:
        active = list(
            Policy.objects.visible_to(agent)
            .active()
            .select_related("domain__repo", "required_role")
            .order_by("domain__name", "created_at", "pk")
        )
    else:
        active = as_of_recall.policies_then(agent, as_of)
    policies = [policy_line(p) for p in active]
    memory = working_memory_text(agent)
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
    episode_id = open_episode(agent=agent, kind="dispatch", title=task)
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
