"""The dispatch preamble (SPEC §5), the hot path: keyword only, no embedding.

It is exactly: every active policy as `- [domain] rule`; the agent's working memory verbatim;
at most 5 keyword-matched facts within about 1,200 characters, only for tasks of at least 20
characters, the given repo's facts first; a closing line pointing to search_memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory.models import Fact, Policy
from memory.recalls import open_episode, record_recall
from memory.search import voices
from memory.selectors_notes import notes_for
from memory.services.policies import policy_line

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


def select_facts(agent: Agent, task: str, repo: str | None) -> list[tuple[Fact, str]]:
    """Keyword-matched facts, the repo's first, at most MAX_FACTS within FACT_BUDGET_CHARS."""
    if len(task.strip()) < MIN_TASK_CHARS:
        return []
    ranked = voices.lexical(voices.Scope(agent=agent), task, limit=CANDIDATES, prefer_repo=repo)
    if not ranked:
        return []
    loaded = {
        f.pk: f
        for f in Fact.objects.select_related("domain__repo")
        .defer("embedding", "search_vector")
        .filter(pk__in=[pk for pk, _ in ranked])
    }
    chosen: list[tuple[Fact, str]] = []
    used = 0
    for pk, _ in ranked:
        fact = loaded.get(pk)
        if fact is None:
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


def build_preamble(*, agent: Agent, task: str, repo: str | None = None) -> Preamble:
    """Assemble the preamble, record its dispatch episode and count the facts as recalled."""
    policies = [
        policy_line(p)
        for p in Policy.objects.visible_to(agent)
        .active()
        .select_related("domain__repo", "required_role")
        .order_by("domain__name", "created_at", "pk")
    ]
    memory = working_memory_text(agent)
    chosen = select_facts(agent, task, repo)
    sections = []
    if policies:
        sections.append("Policies (always apply):\n" + "\n".join(policies))
    if memory.strip():
        sections.append("Your working memory:\n" + memory)
    if chosen:
        sections.append("Possibly relevant facts:\n" + "\n".join(line for _, line in chosen))
    sections.append(CLOSING_LINE)
    episode_id = open_episode(agent=agent, kind="dispatch", title=task)
    record_recall(episode_id, [f.pk for f, _ in chosen])
    return Preamble(
        text="\n\n".join(sections),
        policies=policies,
        working_memory=memory,
        facts=[f for f, _ in chosen],
        fact_lines=[line for _, line in chosen],
        episode_id=episode_id,
    )
