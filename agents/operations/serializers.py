"""Input and output serializers of the agent tools: the API views and the MCP server both parse and
render through these (agents.operations), so both answer the same JSON. Enumerations come from the
models' choices, declared once."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from agents.operations.serializers_as_of import AS_OF_HELP, VALID_AT_HELP, MomentField
from agents.operations.serializers_provenance import (
    RECALL_RATIONALE_CHARS,
    ProvenanceOut,
    attach_origin_reviews,
    provenance_of,
)
from memory.models import Conflict, FactMention, FactStatus, Job, MemoryType, Veracity
from memory.search.hybrid import MODES
from memory.selectors import CONFLICT_CLOSED, conflict_closure, conflict_status
from memory.services.facts import PROPOSAL_OUTCOMES, SESSION_KEY_MAX

# `fields` cannot be a declared field name on a DRF Serializer class, hence the inline form.
ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "code": serializers.CharField(help_text="stable snake_case error code"),
        "detail": serializers.CharField(help_text="a human sentence"),
        "fields": serializers.DictField(help_text="field name → messages, for 400s"),
    },
)


def paginated(item: type[serializers.Serializer], name: str) -> serializers.Serializer:
    """The schema of a limit/offset page of `item`s, as the list endpoints answer."""
    return inline_serializer(
        name=name,
        fields={
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": item(many=True),
        },
    )


class MeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    role = serializers.CharField(source="role.name")
    workspace = serializers.CharField(source="workspace.slug")
    workspace_name = serializers.CharField(source="workspace.name")


# --- Facts ---------------------------------------------------------------------------------
MEMORY_TYPES = MemoryType.values
VERACITIES = Veracity.values
VERACITY_HELP = (
    "Where the fact comes from. An agent states `agent_inferred` (default), `tool_generated` or `imported`. "
    "`human_stated` is for people's own words: only an agent a workspace admin marked as relaying people's words "
    "may send it; any other agent gets 403 `veracity_not_allowed` and nothing is written."
)
FACT_STATUSES = FactStatus.values


def _max_content() -> int:
    from django.conf import settings

    return int(settings.ENGRAM_FACT_MAX_CHARS)


class FactText(serializers.CharField):
    """A fact's text: at most ENGRAM_FACT_MAX_CHARS characters, the setting in force when the
    serializer is built (DRF builds each serializer's fields anew), so the served schema's
    maxLength and the refusal say the same number."""

    def __init__(self, **kwargs: Any) -> None:
        messages = {"max_length": "At most {max_length} characters.", **kwargs.pop("error_messages", {})}
        super().__init__(max_length=_max_content(), error_messages=messages, **kwargs)


class SessionKeyField(serializers.CharField):
    """A session key: a string only (a number or a list is refused, not coerced), stripped, at
    most SESSION_KEY_MAX (200) characters."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", SESSION_KEY_MAX)
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_blank", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


SESSION_KEY_HELP = (
    "a session key (at most 200 characters), e.g. the agent's session id: search and GET facts/ can later "
    "filter one session's memories by it"
)


class FactProposeIn(serializers.Serializer):
    domain = serializers.CharField(max_length=200, help_text="`architecture` or `repo:<slug>/architecture`")
    repo = serializers.SlugField(required=False, allow_null=True, max_length=100)
    topic = serializers.CharField(max_length=200)
    content = FactText()
    memory_type = serializers.ChoiceField(choices=MEMORY_TYPES)
    veracity = serializers.ChoiceField(choices=VERACITIES, default=Veracity.AGENT_INFERRED, help_text=VERACITY_HELP)
    observed_at = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="when it was true; default now. Not in the future: at most ENGRAM_CLOCK_SKEW_SECONDS (default 300) "
        "ahead of the server's clock, else 400.",
    )
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    source_observation_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=50
    )
    episode_id = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="an episode this agent opened (POST episodes/, its preamble or search, or its memory run); "
        "any other answers 400 `unknown_episode`",
    )
    session_key = SessionKeyField(default="", help_text=SESSION_KEY_HELP)


class FactSupersedeIn(serializers.Serializer):
    content = FactText()
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class FactListQuery(serializers.Serializer):
    domain = serializers.CharField(required=False, max_length=200)
    repo = serializers.SlugField(required=False, max_length=100)
    topic = serializers.CharField(required=False, max_length=200)
    status = serializers.ChoiceField(choices=FACT_STATUSES, required=False)
    current = serializers.BooleanField(required=False, default=True, help_text="only facts not superseded")
    session_key = SessionKeyField(help_text="only facts written under this session key (exact match)")


class FactListOut(serializers.ListSerializer):
    """A list of facts: the originating reviews of the whole page are read in one query."""

    def to_representation(self, data: Any) -> list[Any]:
        facts = list(data.all() if hasattr(data, "all") else data)
        attach_origin_reviews(facts)
        return super().to_representation(facts)


class FactOut(serializers.Serializer):
    class Meta:
        list_serializer_class = FactListOut

    id = serializers.IntegerField()
    domain = serializers.CharField(source="domain.label")
    repo = serializers.SerializerMethodField()
    topic = serializers.CharField()
    content = serializers.CharField()
    confidence = serializers.FloatField()
    memory_type = serializers.CharField()
    veracity = serializers.CharField()
    status = serializers.CharField()
    superseded_by = serializers.IntegerField(source="superseded_by_id", allow_null=True)
    superseded_at = serializers.DateTimeField(allow_null=True)
    supersede_reason = serializers.CharField()
    observed_at = serializers.DateTimeField()
    valid_until = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    last_mentioned_at = serializers.DateTimeField()
    recall_count = serializers.IntegerField()
    mention_count = serializers.IntegerField()
    human_edited = serializers.BooleanField()
    origin = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]
    validated_by = serializers.CharField()
    valid_for = serializers.ListField(child=serializers.CharField())
    not_valid_for = serializers.ListField(child=serializers.CharField())
    verification = serializers.CharField()
    last_validated_at = serializers.DateTimeField(allow_null=True)
    verification_contract_version = serializers.CharField()
    session_key = serializers.CharField(help_text="the session key it was written under; empty when none")
    provenance = serializers.SerializerMethodField(help_text="where it came from: file, layer, review, candidate")

    def get_repo(self, fact: Any) -> str | None:
        return fact.domain.repo.slug if fact.domain.repo_id else None

    @extend_schema_field(ProvenanceOut)
    def get_provenance(self, fact: Any) -> dict[str, Any]:
        return provenance_of(fact)


# `closed`: left open, but a fact of the pair is no longer live (memory.selectors.conflict_status).
CONFLICT_STATUSES = [*Conflict.Status.values, CONFLICT_CLOSED]
CONFLICT_RESOLUTIONS = Conflict.Resolution.values


class ConflictStatusField(serializers.ChoiceField):
    """A conflict's status as the API answers it (memory.selectors.conflict_status), from the row."""

    def to_representation(self, value: Any) -> str:
        return conflict_status(value)


class ConflictOut(serializers.Serializer):
    """A decided conflict names its winner and loser; a possible conflict (status `open`: the
    classifier could not tell, a person decides) and one a person resolved as `same` or
    `both_true` have none — `existing` and `proposed` always name the two facts."""

    id = serializers.IntegerField()
    domain = serializers.CharField(source="domain.label")
    topic = serializers.CharField()
    status = ConflictStatusField(
        source="*",
        choices=CONFLICT_STATUSES,
        help_text="open: a possible conflict waiting for a person, both facts live (a superseded fact's open "
        "conflicts follow it to its live successor); decided; dismissed: a person said both are true; closed: "
        "no person decided it, but a fact of the pair is no longer live (see closed_reason)",
    )
    closed_reason = serializers.SerializerMethodField(
        help_text="why a closed conflict no longer waits, e.g. “fact #5 was superseded by fact #7, the other fact "
        "of the pair”; empty otherwise"
    )
    resolution = serializers.ChoiceField(
        choices=["", *CONFLICT_RESOLUTIONS],
        help_text="machine (the rule decided), same (merged: the newer became a re-mention of the older), "
        "contradicts (a person chose the winner), both_true; empty while open",
    )
    existing = serializers.IntegerField(source="existing_id", help_text="the live fact compared against")
    proposed = serializers.IntegerField(source="proposed_id", help_text="the newcomer")
    existing_content = serializers.CharField(source="existing.content")
    proposed_content = serializers.CharField(source="proposed.content")
    winner = serializers.IntegerField(
        source="winner_id", allow_null=True, help_text="null unless decided with a winner"
    )
    loser = serializers.IntegerField(source="loser_id", allow_null=True, help_text="null unless decided with a winner")
    winner_content = serializers.SerializerMethodField()
    loser_content = serializers.SerializerMethodField()
    rule = serializers.CharField(
        help_text="veracity, confidence, recency, update (the later statement replaces the earlier), human (a "
        "person decided); empty while open"
    )
    question = serializers.IntegerField(
        source="question_id",
        allow_null=True,
        help_text="the possible conflict this pair is asked with (one question per disagreement: deciding that one "
        "settles this one when the decision covers it); null when it is a question of its own",
    )
    reason = serializers.CharField(help_text="the classifier's reason, e.g. “contradicts: `tabs` replaces `spaces`”")
    similarity = serializers.FloatField()
    detected_by = serializers.CharField()
    detected_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)

    def get_closed_reason(self, conflict: Any) -> str:
        return conflict_closure(conflict)

    def get_winner_content(self, conflict: Any) -> str | None:
        return conflict.winner.content if conflict.winner_id else None

    def get_loser_content(self, conflict: Any) -> str | None:
        return conflict.loser.content if conflict.loser_id else None


class FactHistoryEntry(serializers.Serializer):
    id = serializers.IntegerField()
    content = serializers.CharField()
    veracity = serializers.CharField()
    confidence = serializers.FloatField()
    status = serializers.CharField()
    created_at = serializers.DateTimeField()
    superseded_by = serializers.IntegerField(source="superseded_by_id", allow_null=True)
    superseded_at = serializers.DateTimeField(allow_null=True)
    supersede_reason = serializers.CharField()


class FactMentionOut(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField(help_text="what was said, verbatim")
    agent = serializers.SerializerMethodField(help_text="the agent that said it (its name), if an agent did")
    by_person = serializers.SerializerMethodField(help_text="a person said it")
    veracity = serializers.CharField()
    via = serializers.ChoiceField(
        choices=FactMention.Via.values,
        help_text="proposal (stated again), merge (a near-duplicate fact merged into this one), "
        "review (a person decided the two facts say the same)",
    )
    observed_at = serializers.DateTimeField()
    similarity = serializers.FloatField(allow_null=True, help_text="cosine to this fact's text")
    reason = serializers.CharField(help_text="why it counts as the same")
    created_at = serializers.DateTimeField()

    def get_agent(self, mention: Any) -> str | None:
        return mention.agent.name if mention.agent_id else None

    def get_by_person(self, mention: Any) -> bool:
        return mention.user_id is not None


class FactChallengeOut(serializers.Serializer):
    reason = serializers.CharField(
        help_text="stale, failed_replay, conflict, review or erasure (the fact that replaced it was erased)"
    )
    detail = serializers.CharField(help_text='in words, e.g. "not validated or mentioned for 365 days (…)"')
    at = serializers.DateTimeField(help_text="when it was challenged")
    by = serializers.CharField(help_text="who challenged it, e.g. system:detect_stale or a reviewer")


class FactDetailOut(FactOut):
    challenge = serializers.SerializerMethodField(
        help_text="why a challenged fact was challenged (its latest fact.challenged event); null unless challenged"
    )
    source_observation_ids = serializers.SerializerMethodField()
    history = serializers.SerializerMethodField()
    conflicts = serializers.SerializerMethodField()
    mentions = serializers.SerializerMethodField(
        help_text="what was said each time this fact was stated again, newest first (at most 50)"
    )
    mentions_total = serializers.SerializerMethodField(help_text="how many mention records there are in all")
    as_of = serializers.SerializerMethodField(
        help_text="the `as_of` asked for (all of the above as of then); null: now"
    )

    @extend_schema_field(FactMentionOut(many=True))
    def get_mentions(self, fact: Any) -> list[dict[str, Any]]:
        return FactMentionOut(self.context["mentions"], many=True).data  # type: ignore[return-value]

    def get_mentions_total(self, fact: Any) -> int:
        return int(self.context["mentions_total"])

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_as_of(self, fact: Any) -> str | None:
        as_of = self.context.get("as_of")
        return serializers.DateTimeField().to_representation(as_of) if as_of is not None else None

    @extend_schema_field(FactChallengeOut(allow_null=True))
    def get_challenge(self, fact: Any) -> dict[str, Any] | None:
        from memory.selectors import challenge_body, latest_challenges

        event = self.context["challenge"] if "challenge" in self.context else latest_challenges([fact]).get(fact.pk)
        body = challenge_body(event)
        return FactChallengeOut(body).data if body else None  # type: ignore[return-value]

    def get_source_observation_ids(self, fact: Any) -> list[int]:
        return sorted(o.pk for o in fact.source_observations.all())

    @extend_schema_field(FactHistoryEntry(many=True))
    def get_history(self, fact: Any) -> list[dict[str, Any]]:
        return FactHistoryEntry(self.context["history"], many=True).data  # type: ignore[return-value]

    @extend_schema_field(ConflictOut(many=True))
    def get_conflicts(self, fact: Any) -> list[dict[str, Any]]:
        return ConflictOut(self.context["conflicts"], many=True).data  # type: ignore[return-value]


class ProposalOut(serializers.Serializer):
    fact = FactOut(help_text="the new fact, or the live fact it re-mentioned")
    outcome = serializers.ChoiceField(
        choices=PROPOSAL_OUTCOMES,
        help_text="created (separate from every live fact); re_mentioned (it restates `compared_with`: no new "
        "fact, the text is kept as a mention of it); conflict_won / conflict_lost (it contradicts `compared_with`; "
        "the rule decided and the loser is superseded); possible_conflict (it may contradict `compared_with`, "
        "the wording cannot tell: both stay live and a person decides; see `conflict_id`)",
    )
    conflict_id = serializers.IntegerField(
        allow_null=True, help_text="the conflict (decided) or possible conflict (open) recorded"
    )
    similarity = serializers.FloatField(allow_null=True, help_text="cosine to the fact it was compared with")
    compared_with = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(
        help_text="why, in the classifier's words (“contradicts: `tabs` replaces `spaces`”); empty when created"
    )


def _max_batch() -> int:
    return int(settings.ENGRAM_BATCH_MAX_ITEMS)


class FactBatchIn(serializers.Serializer):
    """The body of POST facts/batch/ (for the schema): the operation checks the envelope itself,
    for stable codes, then each item with FactProposeIn, as POST facts/ would."""

    answered_per_item = ("items",)  # an item's error refuses that item alone (declaration.field_schema)

    items = FactProposeIn(
        many=True,
        help_text=f"1–ENGRAM_BATCH_MAX_ITEMS ({_max_batch()}) facts, each with the fields of POST facts/; "
        "none answers 400 `batch_empty`, more answers 400 `batch_too_large`, and nothing is written then",
    )


BatchItemError = inline_serializer(
    name="BatchItemError",
    fields={
        "code": serializers.CharField(help_text="the code POST facts/ answers for this item"),
        "detail": serializers.CharField(),
        "fields": serializers.DictField(help_text="field name → messages, for 400s"),
    },
    required=False,
    help_text="present when the item was refused (status ≥ 400): nothing was written for it",
)


class FactBatchItemOut(serializers.Serializer):
    """One item's answer: a written item carries ProposalOut's fields, a refused one `error`."""

    index = serializers.IntegerField(help_text="the item's position in `items`, from 0")
    status = serializers.IntegerField(
        help_text="201 written (see `outcome`), else the status POST facts/ answers for it: 400, 403 "
        "`veracity_not_allowed`…"
    )
    fact = FactOut(required=False, help_text="the new fact, or the live fact it re-mentioned")
    outcome = serializers.ChoiceField(choices=PROPOSAL_OUTCOMES, required=False, help_text="as POST facts/")
    conflict_id = serializers.IntegerField(allow_null=True, required=False)
    similarity = serializers.FloatField(allow_null=True, required=False)
    compared_with = serializers.IntegerField(allow_null=True, required=False)
    reason = serializers.CharField(required=False)
    error = BatchItemError


class FactBatchOut(serializers.Serializer):
    results = FactBatchItemOut(many=True, help_text="one per item, in the order of `items`")
    created = serializers.IntegerField(help_text="items written (status 201), whatever their outcome")
    failed = serializers.IntegerField(help_text="items refused (status ≥ 400): nothing written for them")


class EpisodeIn(serializers.Serializer):
    kind = serializers.CharField(max_length=30)
    title = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    started_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="default now; not in the future (beyond the allowed clock skew)"
    )


class EpisodeOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()
    started_at = serializers.DateTimeField()


# How a consolidate or harmonize request answers (agents.operations.run_job).
JOB_ANSWERS = [Job.State.DONE, Job.State.QUEUED, Job.State.RUNNING]


# --- Hot tier ------------------------------------------------------------------------------
class RememberIn(serializers.Serializer):
    session_id = serializers.CharField(max_length=200)
    content = serializers.CharField(max_length=4000)
    domain = serializers.CharField(max_length=200, required=False, allow_null=True)
    repo = serializers.SlugField(max_length=100, required=False, allow_null=True)
    topic = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class HotEntryOut(serializers.Serializer):
    id = serializers.IntegerField()
    session_id = serializers.CharField()
    content = serializers.CharField()
    domain = serializers.SerializerMethodField()
    topic = serializers.CharField()
    created_at = serializers.DateTimeField()

    def get_domain(self, entry: Any) -> str | None:
        return entry.domain.label if entry.domain_id else None


class ConsolidateIn(serializers.Serializer):
    session_id = serializers.CharField(max_length=200, required=False, allow_null=True)


class RefusedEntryOut(serializers.Serializer):
    id = serializers.IntegerField(help_text="the hot-tier entry")
    code = serializers.CharField(help_text="unknown_domain")
    detail = serializers.CharField()


class ConsolidateOut(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=JOB_ANSWERS,
        help_text="done (ran inline, with its report), queued (on a worker), running; see `joined`",
    )
    task_id = serializers.CharField(help_text="the job's id")
    joined = serializers.BooleanField(
        help_text="true: a job of the same scope was already queued or running; this request joined it (202)"
    )
    promoted = serializers.IntegerField(required=False)
    re_mentioned = serializers.IntegerField(required=False)
    conflicts = serializers.IntegerField(required=False)
    possible_conflicts = serializers.IntegerField(
        required=False, help_text="entries stored beside a live fact they may contradict: a person decides"
    )
    merged = serializers.IntegerField(required=False)
    entries = serializers.IntegerField(required=False)
    refused = RefusedEntryOut(
        many=True,
        required=False,
        help_text="entries left unconsolidated: their domain (given, or the default `knowledge`) is not one "
        "this agent may see; each reads like the answer for a missing domain",
    )


class HarmonizeIn(serializers.Serializer):
    domain = serializers.CharField(max_length=200, required=False, allow_null=True)
    repo = serializers.SlugField(max_length=100, required=False, allow_null=True)


class HarmonizeOut(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=JOB_ANSWERS,
        help_text="done (ran inline, with its report), queued (on a worker), running; see `joined`",
    )
    task_id = serializers.CharField(help_text="the job's id")
    joined = serializers.BooleanField(
        help_text="true: the workspace's harmonize job was already queued or running; this request joined it (202)"
    )
    topics_checked = serializers.IntegerField(required=False)
    conflicts_found = serializers.IntegerField(required=False)
    resolved = serializers.IntegerField(required=False)
    possible_conflicts = serializers.IntegerField(
        required=False, help_text="pairs the classifier could not decide, opened for a person (both stay live)"
    )


# --- Policies, conflicts, private notes (SPEC §4) -----------------------------------------
class PolicyProposeIn(serializers.Serializer):
    domain = serializers.CharField(max_length=200, help_text="`architecture` or `repo:<slug>/architecture`")
    repo = serializers.SlugField(required=False, allow_null=True, max_length=100)
    rule = serializers.CharField(
        max_length=settings.ENGRAM_POLICY_MAX_CHARS, help_text="at most ENGRAM_POLICY_MAX_CHARS (500) characters"
    )
    required_role = serializers.SlugField(
        required=False, allow_null=True, max_length=64, help_text="a role of the workspace; advisory, shown on the line"
    )
    derived_from = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=50, help_text="fact ids"
    )


class PolicySupersedeIn(serializers.Serializer):
    rule = serializers.CharField(
        max_length=settings.ENGRAM_POLICY_MAX_CHARS, help_text="at most ENGRAM_POLICY_MAX_CHARS (500) characters"
    )
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class PolicyListQuery(serializers.Serializer):
    active = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="true: live active ones; false: the others"
    )


class PolicyOut(serializers.Serializer):
    id = serializers.IntegerField()
    domain = serializers.CharField(source="domain.label")
    repo = serializers.SerializerMethodField()
    rule = serializers.CharField()
    required_role = serializers.SerializerMethodField()
    active = serializers.BooleanField()
    superseded_by = serializers.IntegerField(source="superseded_by_id", allow_null=True)
    superseded_at = serializers.DateTimeField(allow_null=True)
    supersede_reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    derived_from = serializers.SerializerMethodField()

    def get_repo(self, policy: Any) -> str | None:
        return policy.domain.repo.slug if policy.domain.repo_id else None

    def get_required_role(self, policy: Any) -> str | None:
        return policy.required_role.name if policy.required_role_id else None

    def get_derived_from(self, policy: Any) -> list[int]:
        return [f.pk for f in policy.derived_from.all()]


class ConflictListQuery(serializers.Serializer):
    domain = serializers.CharField(required=False, max_length=200)
    repo = serializers.SlugField(required=False, max_length=100)
    topic = serializers.CharField(required=False, max_length=200)
    status = serializers.ChoiceField(
        choices=CONFLICT_STATUSES,
        required=False,
        help_text="open: possible conflicts waiting for a person (both facts live, as in the review queue); "
        "closed: left open, but a fact of the pair is no longer live",
    )


class NotesIn(serializers.Serializer):
    notes = serializers.CharField(
        max_length=20_000, allow_blank=True, trim_whitespace=False, help_text="the whole scratchpad, verbatim"
    )


class ObservationIn(serializers.Serializer):
    text = serializers.CharField(max_length=4_000, trim_whitespace=False)


class ObservationOut(serializers.Serializer):
    id = serializers.IntegerField()
    text = serializers.CharField()
    created_at = serializers.DateTimeField()


class NotesOut(serializers.Serializer):
    notes = serializers.CharField()
    updated_at = serializers.DateTimeField(allow_null=True)
    observations = ObservationOut(many=True, help_text="the last 20, oldest first")


# --- Recall ----------------------------------------------------------------------------------
class PreambleIn(serializers.Serializer):
    task = serializers.CharField(max_length=20_000, allow_blank=True)
    repo = serializers.SlugField(max_length=100, required=False, allow_null=True)
    as_of = MomentField(help_text=AS_OF_HELP)
    valid_at = MomentField(help_text=VALID_AT_HELP)


class RecalledFactListOut(serializers.ListSerializer):
    """Preamble facts: the originating reviews of all of them are read in one query (none when no
    fact came from a review)."""

    def to_representation(self, data: Any) -> list[Any]:
        facts = list(data)
        attach_origin_reviews(facts)
        return super().to_representation(facts)


RECALLED_PROVENANCE_HELP = (
    f"where it came from, as GET facts/{{id}}/ answers it (the rationale cut to {RECALL_RATIONALE_CHARS} characters)"
)


class RecalledFactOut(serializers.Serializer):
    class Meta:
        list_serializer_class = RecalledFactListOut

    id = serializers.IntegerField()
    domain = serializers.CharField(source="domain.label")
    topic = serializers.CharField()
    content = serializers.CharField()
    scope = serializers.SerializerMethodField(help_text="where a promoted fact applies, where not, how verified")
    session_key = serializers.CharField(help_text="the session key it was written under; empty when none")
    provenance = serializers.SerializerMethodField(help_text=RECALLED_PROVENANCE_HELP)

    def get_scope(self, fact: Any) -> str:
        from memory.search.preamble import scope_note

        return scope_note(fact).strip(" ()")

    @extend_schema_field(ProvenanceOut)
    def get_provenance(self, fact: Any) -> dict[str, Any]:
        return provenance_of(fact, rationale_chars=RECALL_RATIONALE_CHARS)

    def to_representation(self, fact: Any) -> dict[str, Any]:
        """The declared fields, built directly: the same JSON as DRF's field-by-field rendering
        (tests/agents/test_api_recall_budget.py holds them equal), which cost a recall about a
        millisecond (issue 22)."""
        return {
            "id": int(fact.id),
            "domain": str(fact.domain.label),
            "topic": str(fact.topic),
            "content": str(fact.content),
            "scope": self.get_scope(fact),
            "session_key": str(fact.session_key),
            "provenance": self.get_provenance(fact),
        }


class PreambleOut(serializers.Serializer):
    text = serializers.CharField(help_text="the whole preamble")
    policies = serializers.ListField(child=serializers.CharField())
    working_memory = serializers.CharField(allow_blank=True)
    facts = RecalledFactOut(many=True)
    episode_id = serializers.IntegerField()
    as_of = serializers.DateTimeField(allow_null=True, help_text="the `as_of` asked for; null: now")
    valid_at = serializers.DateTimeField(allow_null=True, help_text="the `valid_at` asked for; null: none")


class SearchIn(serializers.Serializer):
    query = serializers.CharField(max_length=2000)
    mode = serializers.ChoiceField(choices=list(MODES), default="hybrid")
    repo = serializers.SlugField(max_length=100, required=False, allow_null=True)
    domain = serializers.CharField(max_length=200, required=False, allow_null=True)
    limit = serializers.IntegerField(min_value=1, max_value=50, default=10)
    session_key = SessionKeyField(
        allow_null=True,
        help_text="only facts written under this session key (exact match; the facts' `session_key`), in every mode",
    )
    as_of = MomentField(help_text=AS_OF_HELP)
    valid_at = MomentField(help_text=VALID_AT_HELP)


class VoicesOut(serializers.Serializer):
    lexical = serializers.IntegerField(allow_null=True)
    semantic = serializers.IntegerField(allow_null=True)
    recency = serializers.IntegerField(allow_null=True)
    graph = serializers.IntegerField(allow_null=True)


VOICE_NAMES = ("lexical", "semantic", "recency", "graph")


class SearchHitListOut(serializers.ListSerializer):
    """Search hits: the originating reviews of all of them are read in one query (none when no hit
    came from a review)."""

    def to_representation(self, data: Any) -> list[Any]:
        hits = list(data)
        attach_origin_reviews([hit.fact for hit in hits])
        return super().to_representation(hits)


class SearchHitOut(serializers.Serializer):
    class Meta:
        list_serializer_class = SearchHitListOut

    id = serializers.IntegerField(source="fact.id")
    domain = serializers.CharField(source="fact.domain.label")
    topic = serializers.CharField(source="fact.topic")
    content = serializers.CharField(source="fact.content")
    scope = serializers.SerializerMethodField()
    confidence = serializers.FloatField(source="fact.confidence")
    memory_type = serializers.CharField(source="fact.memory_type")
    score = serializers.FloatField()
    voices = VoicesOut()
    session_key = serializers.CharField(source="fact.session_key", help_text="the session key it was written under")
    provenance = serializers.SerializerMethodField(help_text=RECALLED_PROVENANCE_HELP)

    def get_scope(self, hit: Any) -> str:
        from memory.search.preamble import scope_note

        return scope_note(hit.fact).strip(" ()")

    @extend_schema_field(ProvenanceOut)
    def get_provenance(self, hit: Any) -> dict[str, Any]:
        return provenance_of(hit.fact, rationale_chars=RECALL_RATIONALE_CHARS)

    def to_representation(self, hit: Any) -> dict[str, Any]:
        """The declared fields, built directly: the same JSON as DRF's field-by-field rendering
        (tests/agents/test_api_recall_budget.py holds them equal), which cost a search of ten
        hits about a millisecond (issue 22)."""
        fact = hit.fact
        return {
            "id": int(fact.id),
            "domain": str(fact.domain.label),
            "topic": str(fact.topic),
            "content": str(fact.content),
            "scope": self.get_scope(hit),
            "confidence": float(fact.confidence),
            "memory_type": str(fact.memory_type),
            "score": float(hit.score),
            "voices": {name: None if hit.voices.get(name) is None else int(hit.voices[name]) for name in VOICE_NAMES},
            "session_key": str(fact.session_key),
            "provenance": self.get_provenance(hit),
        }


class SearchOut(serializers.Serializer):
    mode = serializers.CharField()
    intent = serializers.CharField()
    results = SearchHitOut(many=True, source="hits")
    episode_id = serializers.IntegerField(allow_null=True)
    as_of = serializers.DateTimeField(allow_null=True, help_text="the `as_of` asked for; null: now")
    valid_at = serializers.DateTimeField(allow_null=True, help_text="the `valid_at` asked for; null: none")
