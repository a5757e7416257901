"""Engram's data model (SPEC §1–§4, lifecycle fields of §7), one module per area.

Writes go through memory.services; reads through memory.selectors and the querysets in
memory.querysets, whose `visible_to(agent)` is the one place grants and workspaces apply.
Every model is imported here, which is how Django finds them, and `from memory.models import X`
is the way to name one.
"""

from memory.choices import FactStatus, GrantLevel, PromotionStatus
from memory.models.audit import WEBHOOK_EVENTS, AuditEvent, WebhookDelivery, WebhookSubscription, new_webhook_secret
from memory.models.episodes import Episode, EpisodeFact, Exposure, FactMention
from memory.models.facts import EMBEDDING_DIM, VERACITY_WEIGHT, DecayProfile, Fact, MemoryType, ValidatedBy, Veracity
from memory.models.knowledge import Conflict, HotMemory, Observation, Policy, WorkingMemory
from memory.models.promotion import CANDIDATE_SCHEMA, Candidate, FailureClass, PromotionDecision, Replay
from memory.models.runs import (
    END_ABANDONED,
    END_FINISHED,
    STATUS_ITEM_ID,
    BankItem,
    BankKind,
    Intervention,
    Job,
    MemoryRun,
    MemoryRunQuerySet,
    RunStatus,
)
from memory.models.tenancy import (
    KEY_PREFIX,
    POLICY_BUDGET_MAX,
    AccessGrant,
    Agent,
    AgentQuerySet,
    MemoryDomain,
    Repo,
    Role,
    Workspace,
    WorkspaceMembership,
    generate_key,
    hash_key,
)

__all__ = [
    "CANDIDATE_SCHEMA",
    "EMBEDDING_DIM",
    "END_ABANDONED",
    "END_FINISHED",
    "KEY_PREFIX",
    "POLICY_BUDGET_MAX",
    "STATUS_ITEM_ID",
    "VERACITY_WEIGHT",
    "WEBHOOK_EVENTS",
    "AccessGrant",
    "Agent",
    "AgentQuerySet",
    "AuditEvent",
    "BankItem",
    "BankKind",
    "Candidate",
    "Conflict",
    "DecayProfile",
    "Episode",
    "EpisodeFact",
    "Exposure",
    "Fact",
    "FactMention",
    "FactStatus",
    "FailureClass",
    "GrantLevel",
    "HotMemory",
    "Intervention",
    "Job",
    "MemoryDomain",
    "MemoryRun",
    "MemoryRunQuerySet",
    "MemoryType",
    "Observation",
    "Policy",
    "PromotionDecision",
    "PromotionStatus",
    "Replay",
    "Repo",
    "Role",
    "RunStatus",
    "ValidatedBy",
    "Veracity",
    "WebhookDelivery",
    "WebhookSubscription",
    "WorkingMemory",
    "Workspace",
    "WorkspaceMembership",
    "generate_key",
    "hash_key",
    "new_webhook_secret",
]
