"""Admin for the promotion gate: candidates, replays and decisions (SPEC §7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Prefetch, QuerySet
from django.utils.html import format_html, format_html_join

from memory import access
from memory.actors import Actor
from memory.admin.base import EMPTY, DomainFilter, ReadOnlyAdmin, WorkspaceScopedAdmin, admin_link, excerpt
from memory.errors import EngramError
from memory.models import Candidate, Fact, PromotionDecision, Replay
from memory.services import promotion

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django.utils.safestring import SafeString

# --- Promotion gate (SPEC §7) ------------------------------------------------------------------
GATE_STYLE = {"passed": ("✓", "#1a7f37"), "failed": ("✗", "#cf222e"), "pending": ("…", "#9a6700")}


def gate_badge(gate: dict[str, str]) -> SafeString:
    """A gate as a coloured mark with its status; the reason is the hover title."""
    mark, colour = GATE_STYLE.get(gate["status"], ("?", "inherit"))
    return format_html(
        '<span title="{}" style="color:{};white-space:nowrap">{} {}</span>',
        gate["reason"],
        colour,
        mark,
        gate["status"],
    )


def _gate_column(gate: str, description: str) -> Callable[[Any, Candidate], SafeString]:
    """A changelist column showing one gate of the candidate's scorecard as a badge."""

    @admin.display(description=description)
    def column(self: Any, obj: Candidate) -> SafeString:
        return gate_badge(self._gates(obj)[gate])

    column.__name__ = f"gate_{gate}"
    return column


def scorecard_table(scorecard: dict[str, dict[str, str]]) -> SafeString | str:
    if not scorecard:
        return EMPTY
    rows = format_html_join(
        "",
        "<tr><th>{}</th><td>{}</td><td>{}</td></tr>",
        ((n, gate_badge(g), g["reason"]) for n, g in scorecard.items()),
    )
    return format_html("<table>{}</table>", rows)


class ReplayInline(admin.TabularInline):
    model = Replay
    extra = 0
    can_delete = False
    fields = ("created_at", "probe", "passed", "details", "recorded_by_label", "standing")
    readonly_fields = fields
    ordering = ("created_at", "id")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("candidate", "recorded_by_agent")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="counts as evidence?")
    def standing(self, obj: Replay) -> str:
        standing = promotion.replay_standing(obj.candidate, obj)
        return f"{'yes' if standing.counts else 'no'}: {standing.reason}"


class PromotionDecisionInline(admin.TabularInline):
    model = PromotionDecision
    extra = 0
    can_delete = False
    fields = ("created_at", "decision", "decided_by_label", "auto", "write", "fact_link", "reason", "scorecard_view")
    readonly_fields = fields
    ordering = ("created_at", "id")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="fact")
    def fact_link(self, obj: PromotionDecision) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id}")

    @admin.display(description="scorecard")
    def scorecard_view(self, obj: PromotionDecision) -> SafeString | str:
        return scorecard_table(obj.scorecard)


@admin.register(Candidate)
class CandidateAdmin(WorkspaceScopedAdmin):
    """Promotion candidates with their gates. Rows change only through the gate's services: the
    actions approve (a person's approval), deny, dry-run promote (writes nothing) and promote."""

    list_display = (
        "id",
        "candidate_id",
        "memory_excerpt",
        "domain_label",
        "failure_class",
        "promotion_status",
        "requires_human_review",
        "gate_failure_class",
        "gate_evidence",
        "gate_provenance",
        "gate_scope",
        "gate_human_review",
        "fact_link",
        "created_at",
    )
    list_display_links = ("id", "candidate_id")
    list_filter = (
        "promotion_status",
        "failure_class",
        "requires_human_review",
        "origin",
        ("workspace", admin.RelatedOnlyFieldListFilter),
        DomainFilter,
    )
    list_select_related = ("workspace", "domain__repo", "human_approved_by")
    search_fields = ("candidate_id", "topic", "proposed_memory", "failure_type")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    inlines = (ReplayInline, PromotionDecisionInline)
    actions = ("approve_selected", "deny_selected", "dry_run_selected", "promote_selected")
    fieldsets = (
        (None, {"fields": ("workspace", "domain", "topic", "candidate_id", "schema_version", "proposed_memory")}),
        (
            "Failure",
            {"fields": ("failure_class", "failure_type", "root_cause_summary", "source_action_ids", "evidence_refs")},
        ),
        ("Scope", {"fields": ("applies_to", "does_not_apply_to", "verification_probe_candidate", "memory_type")}),
        (
            "Gate",
            {
                "fields": (
                    "gates_view",
                    "promotion_status",
                    "requires_human_review",
                    "origin",
                    "human_approved_by",
                    "human_approved_at",
                    "human_approval_note",
                    "fact_link",
                )
            },
        ),
        ("Provenance", {"fields": ("submitted_by_agent", "submitted_by_label", "created_at", "updated_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        replays = Replay.objects.select_related("recorded_by_agent")  # gate standing reads the recorder
        return super().get_queryset(request).prefetch_related(Prefetch("replays", queryset=replays))

    def get_readonly_fields(self, request: HttpRequest, obj: Candidate | None = None) -> list[str]:
        return [name for _, options in self.fieldsets for name in options["fields"]]  # type: ignore[misc]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # candidates come from agents (POST candidates/) or runs, through submit_candidate

    def has_delete_permission(self, request: HttpRequest, obj: Candidate | None = None) -> bool:
        return False  # decisions and replays are the audit trail

    def save_model(self, request: HttpRequest, obj: Candidate, form: forms.ModelForm, change: bool) -> None:
        return  # every field is read-only: state moves only through the actions

    def _gates(self, obj: Candidate) -> dict[str, dict[str, str]]:
        cached = getattr(obj, "_admin_gates", None)
        if cached is None:
            cached = promotion.compute_gates(obj)
            obj._admin_gates = cached  # type: ignore[attr-defined]
        return cached

    @admin.display(description="proposed memory")
    def memory_excerpt(self, obj: Candidate) -> str:
        return excerpt(obj.proposed_memory)

    @admin.display(description="domain", ordering="domain__name")
    def domain_label(self, obj: Candidate) -> str:
        return obj.domain.label

    gate_failure_class = _gate_column("failure_class", "class gate")
    gate_evidence = _gate_column("evidence", "evidence")
    gate_provenance = _gate_column("provenance", "provenance")
    gate_scope = _gate_column("scope", "scope")
    gate_human_review = _gate_column("human_review", "human review")

    @admin.display(description="fact")
    def fact_link(self, obj: Candidate) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id}")

    @admin.display(description="gates now")
    def gates_view(self, obj: Candidate) -> SafeString | str:
        return scorecard_table(self._gates(obj))

    def _each(self, request: HttpRequest, queryset: QuerySet, act: Any, done_verb: str) -> None:
        """Run `act(candidate)` on each selected candidate in pk order; report refusals by name."""
        done = 0
        for candidate in queryset.select_related(None).order_by("pk"):
            if not access.may(request.user, "decide", candidate):  # re-checked per row
                self.message_user(request, f"{candidate.candidate_id}: not yours to decide.", messages.WARNING)
                continue
            try:
                message = act(candidate)
            except EngramError as exc:
                self.message_user(request, f"{candidate.candidate_id}: {exc.detail}", messages.WARNING)
                continue
            done += 1
            if message:
                self.message_user(request, f"{candidate.candidate_id}: {message}", messages.INFO)
        if done:
            self.message_user(request, f"{done_verb} {done} candidate(s).", messages.SUCCESS)

    @admin.action(description="Approve selected candidates (as human approval)", permissions=["change"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)

        def act(candidate: Candidate) -> str:
            approved = promotion.approve_candidate(candidate=candidate, by=by, note="approved in the admin")
            blocking = promotion.failing(promotion.compute_gates(approved, write=True, auto=False))
            return f"approved; still open: {', '.join(blocking)}" if blocking else "approved; every gate passes"

        self._each(request, queryset, act, "Approved")

    @admin.action(description="Deny selected candidates", permissions=["change"])
    def deny_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        self._each(
            request,
            queryset,
            lambda c: promotion.deny(candidate=c, by=by, reason=f"Denied in the admin by {by.label}.") and "",
            "Denied",
        )

    @admin.action(description="Dry-run promote selected candidates (writes nothing)", permissions=["change"])
    def dry_run_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        self._each(request, queryset, lambda c: promotion.promote(candidate=c, by=by, write=False).reason, "Dry-ran")

    @admin.action(
        description="Promote selected candidates (write the fact when every gate passes)", permissions=["change"]
    )
    def promote_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        by = Actor.of_user(request.user)
        self._each(request, queryset, lambda c: promotion.promote(candidate=c, by=by, write=True).reason, "Decided")


@admin.register(Replay)
class ReplayAdmin(ReadOnlyAdmin):
    workspace_lookup = "candidate__workspace"
    list_display = ("id", "candidate", "probe", "passed", "recorded_by_label", "created_at")
    list_filter = ("passed", ("candidate__workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("candidate",)
    search_fields = ("probe", "candidate__candidate_id")
    ordering = ("-created_at", "-id")
    show_full_result_count = False


@admin.register(PromotionDecision)
class PromotionDecisionAdmin(ReadOnlyAdmin):
    """Every decision with the scorecard it was made on: read-only."""

    workspace_lookup = "candidate__workspace"
    list_display = ("id", "candidate", "decision", "decided_by_label", "auto", "write", "fact_link", "created_at")
    list_filter = ("decision", "auto", ("candidate__workspace", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("candidate",)
    search_fields = ("candidate__candidate_id", "decided_by_label", "reason")
    ordering = ("-created_at", "-id")
    show_full_result_count = False
    fields = (
        "candidate",
        "decision",
        "decided_by_label",
        "auto",
        "write",
        "fact_link",
        "outcome",
        "reason",
        "scorecard_view",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="fact")
    def fact_link(self, obj: PromotionDecision) -> SafeString | str:
        return admin_link(Fact, obj.fact_id, f"#{obj.fact_id}")

    @admin.display(description="scorecard")
    def scorecard_view(self, obj: PromotionDecision) -> SafeString | str:
        return scorecard_table(obj.scorecard)
