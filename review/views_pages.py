"""Governance pages: the grants matrix and the memory browser (facts, policies, knowledge graph).

Partials are named inside their page templates (django-template-partials); htmx requests get
the partial, full requests the page. Writes call memory services with the person as actor."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import redirect, render
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from memory.actors import Actor
from memory.errors import EngramError
from memory.models import POLICY_BUDGET_MAX, FactStatus, GrantLevel, MemoryType, Policy, Veracity, Workspace
from memory.selectors_exposure import fact_trail
from memory.services.facts import supersede_fact
from memory.services.lifecycle import archive_fact
from memory.services.policies import activate_policy, deactivate_policy, set_policy_budget, supersede_policy
from memory.services.tenancy import set_grant
from review import selectors_pages as pages
from review.access import is_workspace_admin, reviewable_domains, workspace_for
from review.diff import render_inline
from review.forms import GrantForm
from review.selectors_items import challenge_of


def _template(request: HttpRequest, name: str, partial: str) -> str:
    return f"{name}#{partial}" if request.htmx and not request.htmx.boosted else name  # type: ignore[attr-defined]


# --- Grants matrix ------------------------------------------------------------------------
@login_required
def grants(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    roles, domains, cells = pages.grants_matrix(workspace)
    rows = [(role, [cells[(role.pk, d.pk)] for d in domains]) for role in roles]
    return render(
        request,
        "review/grants.html",
        {
            "workspace": workspace,
            "domains": domains,
            "rows": rows,
            "levels": GrantLevel.values,
            "can_edit": is_workspace_admin(request.user, workspace),
            "changes": pages.recent_grant_changes(workspace),
        },
    )


@login_required
@require_POST
def grant_set(request: HttpRequest, slug: str) -> HttpResponse:
    """One click: set a cell's level. Only workspace admins; audited by the service."""
    workspace = workspace_for(request.user, slug)
    if not is_workspace_admin(request.user, workspace):
        return HttpResponseForbidden("Only workspace admins change grants.")
    form = GrantForm(request.POST)
    if not form.is_valid():  # the message may echo the input: escaped
        return HttpResponse(format_html("Could not change the grant: {}", form.error_text()), status=400)
    try:
        cell = pages.grant_cell(workspace, form.cleaned_data["role"], form.cleaned_data["domain"])
    except (pages.Role.DoesNotExist, pages.MemoryDomain.DoesNotExist):
        raise Http404("No such role or domain.") from None
    try:
        set_grant(role=cell.role, domain=cell.domain, level=form.cleaned_data["level"], by=Actor.of_user(request.user))
    except EngramError as exc:
        return HttpResponse(format_html("Could not change the grant: {}", exc.detail), status=400)
    cell = pages.grant_cell(workspace, cell.role.pk, cell.domain.pk)
    response = render(
        request,
        "review/grants.html#cell",
        {"cell": cell, "levels": GrantLevel.values, "can_edit": True, "workspace": workspace},
    )
    response["HX-Trigger"] = "grant-changed"
    return response


@login_required
def grant_changes(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    return render(
        request,
        "review/grants.html#changes",
        {"workspace": workspace, "changes": pages.recent_grant_changes(workspace)},
    )


# --- Memory browser: facts ------------------------------------------------------------------
@login_required
def browser(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    qs, extra = pages.browse_facts(request.user, workspace, request.GET.dict())
    page = pages.browser_pages(qs, ranked=extra["ranked"]).get_page(request.GET.get("page"))
    facts = pages.with_decay(list(page.object_list))
    context = {
        "workspace": workspace,
        "tab": "facts",
        "facts": facts,
        "page": page,
        "params": request.GET,
        "domains": extra["domains"],
        "memory_types": MemoryType.values,
        "veracities": Veracity.values,
        "statuses": FactStatus.values,
    }
    return render(request, _template(request, "review/browser.html", "results"), context)


@login_required
def fact_detail(request: HttpRequest, slug: str, fact_id: int) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    return render(request, "review/fact.html", _fact_context(request, workspace, fact_id))


def _fact_context(request: HttpRequest, workspace: Workspace, fact_id: int) -> dict[str, Any]:
    """The fact page's context; raises Http404 unless the person may review the fact's domain."""
    context = {"workspace": workspace, "tab": "facts", **pages.fact_page(request.user, workspace, fact_id)}
    context["history_rows"] = _history_rows(context["history"])
    fact = context["fact"]
    # Why it is out of recall (the queue detail's block): stale, a failed replay, a lost conflict.
    context["challenge"] = challenge_of(fact) if fact.status == FactStatus.CHALLENGED else None
    # Where it went, and who received it since it stopped being believed (issue 21): shown only
    # here, behind fact_page's access check (the fact's domain is one the person may review).
    context["trail"] = fact_trail(fact, context["history"])
    return context


def _history_rows(history: list[Any]) -> list[tuple[Any, int | None, Any]]:
    """Each version of the chain with the version it replaced and a word diff from that one's text
    (None for the first)."""
    replaced = {h.superseded_by_id: h for h in history if h.superseded_by_id}
    rows = []
    for h in history:
        before = replaced.get(h.pk)
        change = render_inline(before.content, h.content) if before is not None else None
        rows.append((h, before.pk if before is not None else None, change))
    return rows


@login_required
@require_POST
def fact_supersede(request: HttpRequest, slug: str, fact_id: int) -> HttpResponse:
    """Edit = supersede with a reason, stated by a person (human_stated). Refused (blank, too
    long, no longer live): 400 with the fact page, the typed text and reason kept and each
    field's error beside it."""
    workspace = workspace_for(request.user, slug)
    context = _fact_context(request, workspace, fact_id)
    typed = {"content": request.POST.get("content", ""), "reason": request.POST.get("reason", "")}
    try:
        new = supersede_fact(fact=context["fact"], by=Actor.of_user(request.user), **typed)
    except EngramError as exc:
        context.update(typed=typed, edit_error=exc.detail, edit_fields=exc.fields)
        return render(request, "review/fact.html", context, status=400)
    messages.success(request, f"Fact {fact_id} was superseded by fact {new.pk}.")
    return redirect("review:fact", slug=slug, fact_id=new.pk)


@login_required
@require_POST
def fact_archive(request: HttpRequest, slug: str, fact_id: int) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    fact = pages.fact_page(request.user, workspace, fact_id)["fact"]
    archive_fact(fact=fact, by=Actor.of_user(request.user))
    messages.success(request, f"Fact {fact_id} was archived: it is kept, and never recalled again.")
    return redirect("review:fact", slug=slug, fact_id=fact_id)


# --- Memory browser: policies ----------------------------------------------------------------
def _policies_context(request: HttpRequest, workspace: Workspace) -> dict[str, Any]:
    return {
        "workspace": workspace,
        "tab": "policies",
        "can_edit_budget": is_workspace_admin(request.user, workspace),
        "budget_max": POLICY_BUDGET_MAX,
        **pages.policies_page(request.user, workspace),
    }


@login_required
def policies(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    return render(request, _template(request, "review/policies.html", "list"), _policies_context(request, workspace))


@login_required
@require_POST
def policy_budget(request: HttpRequest, slug: str) -> HttpResponse:
    """A workspace admin sets how many characters the active policies may add to every dispatch.
    Refused: 422 (htmx swaps it in) with the value as typed and the error beside the field."""
    workspace = workspace_for(request.user, slug)
    if not is_workspace_admin(request.user, workspace):
        return HttpResponseForbidden("Only workspace admins change the policy budget.")
    raw = request.POST.get("policy_budget_chars", "").strip()
    chars = int(raw) if raw.isdecimal() and len(raw) <= 9 else -1  # anything else is refused by the service
    template = _template(request, "review/policies.html", "list")
    try:
        workspace = set_policy_budget(workspace=workspace, chars=chars, by=Actor.of_user(request.user))
    except EngramError as exc:
        context = _policies_context(request, workspace)
        context["typed_budget"] = {"value": raw, "errors": exc.fields.get("policy_budget_chars") or [exc.detail]}
        return render(request, template, context, status=422)
    messages.success(request, f"Policy budget set to {workspace.policy_budget_chars} characters.")
    return render(request, template, _policies_context(request, workspace))


@login_required
@require_POST
def policy_action(request: HttpRequest, slug: str, policy_id: int) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    policy = (
        Policy.objects.filter(workspace=workspace, domain__in=reviewable_domains(request.user, workspace), pk=policy_id)
        .select_related("domain")
        .first()
    )
    if policy is None:
        raise Http404("No such policy.")
    by = Actor.of_user(request.user)
    action = request.POST.get("action")
    try:
        if action == "activate":
            activate_policy(policy=policy, by=by)
        elif action == "deactivate":
            deactivate_policy(policy=policy, by=by)
        elif action == "supersede":
            supersede_policy(
                policy=policy, rule=request.POST.get("rule", ""), reason=request.POST.get("reason", ""), by=by
            )
        else:
            return HttpResponse("Unknown action.", status=400)
    except EngramError as exc:
        if action == "supersede":
            return _refused_policy_edit(request, workspace, policy.pk, exc)
        messages.error(request, exc.detail)
    return render(request, _template(request, "review/policies.html", "list"), _policies_context(request, workspace))


def _refused_policy_edit(request: HttpRequest, workspace: Workspace, policy_id: int, exc: EngramError) -> HttpResponse:
    """422 (htmx swaps it in): the list with this policy's edit open, the rule and reason as typed
    and each field's error beside it."""
    context = _policies_context(request, workspace)
    context["typed"] = {
        "policy": policy_id,
        "rule": request.POST.get("rule", ""),
        "reason": request.POST.get("reason", ""),
        "detail": exc.detail,
        "fields": exc.fields,
    }
    return render(request, _template(request, "review/policies.html", "list"), context, status=422)


# --- Knowledge graph ----------------------------------------------------------------------
@login_required
def graph(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = workspace_for(request.user, slug)
    return render(
        request,
        "review/graph.html",
        {
            "workspace": workspace,
            "tab": "graph",
            "params": request.GET,
            "domains": reviewable_domains(request.user, workspace),
        },
    )


@login_required
def graph_json(request: HttpRequest, slug: str) -> JsonResponse:
    workspace = workspace_for(request.user, slug)
    domain = request.GET.get("domain", "")
    data = pages.graph_data(
        request.user, workspace, domain_id=int(domain) if domain.isdecimal() else None, q=request.GET.get("q", "")
    )
    return JsonResponse(data)
