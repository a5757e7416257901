"""Django admin for Engram's memory models (SPEC §10), one module per area.

Importing the package registers every admin (Django's autodiscover imports `memory.admin`). The
shared mixins and helpers live in `base` and are re-exported here for the other apps' admins.
"""

from memory.admin import agent_memory, audit, candidates, exposure, facts, tenancy, users, webhooks
from memory.admin.agent_memory import (
    EpisodeAdmin,
    EpisodeFactAdmin,
    HotMemoryAdmin,
    ObservationAdmin,
    WorkingMemoryAdmin,
)
from memory.admin.audit import AuditEventAdmin, JobAdmin
from memory.admin.base import (
    EMPTY,
    DomainFilter,
    ReadOnlyAdmin,
    SameWorkspaceForm,
    WorkspaceScopedAdmin,
    admin_link,
    adopt_saved,
    count_column,
    count_related,
    excerpt,
)
from memory.admin.candidates import (
    CandidateAdmin,
    PromotionDecisionAdmin,
    PromotionDecisionInline,
    ReplayAdmin,
    ReplayInline,
    gate_badge,
    scorecard_table,
)
from memory.admin.facts import (
    ConflictAdmin,
    DecayProfileAdmin,
    FactAdmin,
    FactMentionAdmin,
    LiveFilter,
    PolicyAdmin,
    PolicyAdminForm,
)
from memory.admin.tenancy import (
    AccessGrantAdmin,
    MemoryDomainAdmin,
    RepoAdmin,
    RoleAdmin,
    WorkspaceAdmin,
    WorkspaceMembershipAdmin,
)

__all__ = [
    "EMPTY",
    "AccessGrantAdmin",
    "AuditEventAdmin",
    "CandidateAdmin",
    "ConflictAdmin",
    "DecayProfileAdmin",
    "DomainFilter",
    "EpisodeAdmin",
    "EpisodeFactAdmin",
    "FactAdmin",
    "FactMentionAdmin",
    "HotMemoryAdmin",
    "JobAdmin",
    "LiveFilter",
    "MemoryDomainAdmin",
    "ObservationAdmin",
    "PolicyAdmin",
    "PolicyAdminForm",
    "PromotionDecisionAdmin",
    "PromotionDecisionInline",
    "ReadOnlyAdmin",
    "ReplayAdmin",
    "ReplayInline",
    "RepoAdmin",
    "RoleAdmin",
    "SameWorkspaceForm",
    "WorkingMemoryAdmin",
    "WorkspaceAdmin",
    "WorkspaceMembershipAdmin",
    "WorkspaceScopedAdmin",
    "admin_link",
    "adopt_saved",
    "agent_memory",
    "audit",
    "candidates",
    "count_column",
    "count_related",
    "excerpt",
    "exposure",
    "facts",
    "gate_badge",
    "scorecard_table",
    "tenancy",
    "users",
    "webhooks",
]
