"""The review queue (`/review/`): one list of everything waiting for a person, a detail with
diffs and the evidence, and decisions taken in place with htmx."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from memory import access
from memory.actors import Actor
from memory.errors import EngramError, InsufficientPermission, StateConflict
from memory.models import Candidate
from memory.services import promotion
from memory.services.conflict_reviews import review_conflict
from memory.services.conflicts import decide_conflict
from memory.services.lifecycle import deprecate_fact, revalidate_fact
from review import selectors_queue
from review.diff import compare_texts
from review.forms import QueueDecisionForm
from review.selectors_items import (
    ItemOutcome,
    asked_with,
    candidate_outcome,
    challenge_of,
    decided_of,
    evidence_links,
    fact_url,
    gate_rows,
    item_entry,
    last_candidate_outcome,
    proposer_of,
)
from review.selectors_queue import (
    BULK_KINDS,
    KINDS,
    ListKey,
    Queue,
    QueueEntry,
    entry_for,
    filter_choices,
    live_rivals,
)

# The buttons of a possible conflict: the resolution, and which fact wins a contradiction.
POSSIBLE_ACTIONS = {
    "same": ("same", None),
    "existing_wins": ("contradicts", "existing"),
    "proposed_wins": ("contradicts", "proposed"),
    "both_true": ("both_true", None),
}


# The list's own parameters: the filters and the order. With the page, the item pages' URLs and
# the decisions' carry them too, so a reload, "back to the list" or the next item keeps the place.
LIST_PARAMS = ("workspace", "kind", "domain", "agent", "age", "order")
PAGE_SIZE = 25


def _list_params(request: HttpRequest) -> dict[str, str]:
    """The list's filters and order as the request's query string names them."""
    return {name: request.GET[name] for name in LIST_PARAMS if request.GET.get(name)}


def _list_query(params: dict[str, str], page: int) -> str:
    """The query string that brings the list back: its filters and order, its page past the first."""
    return urlencode({**params, "page": str(page)} if page > 1 else params)


def _asked_list_query(request: HttpRequest) -> str:
    """The list's query string as the request carries it, for a fragment that does not read the
    list (an item's detail, a decision's outcome): the next full page corrects what changed."""
    raw = request.GET.get("page", "")
    return _list_query(_list_params(request), int(raw) if raw.isdecimal() and len(raw) < 10 else 1)


def _list_page(keys: list[ListKey], asked: str | None, item_key: str | None) -> Page:
    """The page asked for; on an item's page, the page that holds the item whichever was asked
    (decisions and new items move entries between pages after a link is made). `keys`: the whole
    list (every kind's first LIST_LIMIT) in order."""
    pages = Paginator(keys, PAGE_SIZE)
    at = next((i for i, k in enumerate(keys) if k.key == item_key), None) if item_key else None
    return pages.page(at // PAGE_SIZE + 1) if at is not None else pages.get_page(asked)


def _queue_context(request: HttpRequest, current_key: str | None = None) -> dict:
    """The list beside every queue page: one page of entries (PAGE_SIZE), the counts of every kind
    over the items the other filters leave (the kind filter narrows the list, not the counts), the
    filter choices (only what the person may see) and the query string that keeps filters, order
    and page on refresh and in the items' links. On an item's page `current_key` ("<kind>-<pk>")
    is highlighted on the page that holds it (`current_listed`: False when the filters leave it
    out); an htmx refresh names the highlighted entry in `current` and stays on its page."""
    params = _list_params(request)
    waiting = Queue(request.user, params)
    # The whole list as keys (each kind's first LIST_LIMIT): every kind is counted in the scan that
    # finds its first items anyway, so the page holding any item is found in one read; only the
    # page's entries are then read in full (issue 38: the list read in full, twice for an item past
    # the first page, was most of an item page's time).
    keys, counts = waiting.keys(limit=selectors_queue.LIST_LIMIT)
    shown = [params["kind"]] if params.get("kind") in KINDS else list(KINDS)
    page = _list_page(keys, request.GET.get("page"), current_key)
    domains, agents = filter_choices(request.user)
    return {
        "entries": waiting.entries(list(page)),
        "page_obj": page,
        "counts": counts,
        # Set when a kind has more items than the list holds (selectors_queue.LIST_LIMIT).
        "list_limit": selectors_queue.LIST_LIMIT
        if any(counts[k] > selectors_queue.LIST_LIMIT for k in shown)
        else None,
        "params": params,
        "filter_query": urlencode(params),
        "list_query": _list_query(params, page.number),
        "current_key": current_key or request.GET.get("current", ""),
        "current_listed": any(k.key == current_key for k in keys),
        "bulk_kinds": BULK_KINDS,
        "kinds": KINDS,
        "workspaces": access.workspaces(request.user, "view"),
        "domains": domains,
        "agents": agents,
    }


@login_required
def queue_page(request: HttpRequest) -> HttpResponse:
    name = "review/queue.html#queue" if _is_htmx(request) else "review/queue.html"
    return render(request, name, _queue_context(request))


def _detail_context(request: HttpRequest, kind: str, pk: int, listed: QueueEntry | None = None) -> dict:
    """Everything the detail of one item shows, pending or decided: a decided item (no longer in the
    person's queue) is shown read-only with who decided it and, for a candidate, what became of it.
    Raises Http404 outside the person's workspaces and reviewable domains. `listed`: the item's entry
    as the list beside it just read it (it waits, so it is read again only when not given)."""
    entry = listed or entry_for(request.user, kind, pk)
    pending = entry is not None
    if entry is None:
        entry = item_entry(request.user, kind, pk)
        if entry is None:
            raise Http404("Not in your queue.")
    context: dict[str, Any] = {"entry": entry, "kind": kind, "pk": pk, "pending": pending}
    if not pending:
        # a pair asked with a question that waits is not decided: it is decided there
        context["asked_with"] = asked_with(request.user, entry)
        if context["asked_with"] is None:
            context["decided"] = decided_of(entry)
    obj = entry.obj
    if kind == "candidate":
        context["gates"] = promotion.compute_gates(obj)
        context["gate_rows"] = gate_rows(obj, request.user)
        context["proposer"] = proposer_of(obj)
        context["evidence"] = evidence_links(obj)
        context["rivals"] = [
            (f, compare_texts(f.content, obj.proposed_memory, old_label=f"current · fact #{f.pk}"))
            for f in live_rivals(obj)
            if f.pk != obj.fact_id  # once promoted, its own fact is no rival
        ]
        context["restated"] = promotion.restated_fact(obj) if pending and context["rivals"] else None
        latest = obj.replays.select_related("recorded_by_agent").order_by("-created_at", "-id")[:5]
        context["replays"] = [(r, promotion.replay_standing(obj, r)) for r in latest]
        if not pending:
            context["outcome"] = last_candidate_outcome(obj)
    elif kind == "conflict":
        context["d"] = compare_texts(
            obj.loser.content,
            obj.winner.content,
            old_label=f"lost (human-stated) · fact #{obj.loser_id}",
            new_label=f"won · fact #{obj.winner_id}",
        )
    elif kind == "possible":
        context["d"] = compare_texts(
            obj.existing.content,
            obj.proposed.content,
            old_label=f"existing · fact #{obj.existing_id}",
            new_label=f"proposed · fact #{obj.proposed_id}",
        )
    elif kind == "challenged":
        context["challenge"] = challenge_of(obj)
        context["rivals"] = [
            (f, compare_texts(obj.content, f.content, old_label="challenged", new_label=f"live · fact #{f.pk}"))
            for f in live_rivals(obj)
        ]
    return context


def _is_htmx(request: HttpRequest) -> bool:
    """A fragment is answered: htmx asks, and not for a whole page (a boosted link, or the history
    restoring a page it no longer holds)."""
    htmx = request.htmx  # type: ignore[attr-defined]
    return bool(htmx and not htmx.boosted and not htmx.history_restore_request)


def _render_item(
    request: HttpRequest, context: dict[str, Any], *, status: int = 200, listing: dict[str, Any] | None = None
) -> HttpResponse:
    """The detail fragment for htmx; else the whole queue page with this item open and marked in
    the list, on the page that holds it, with the filters its URL carries (an item's URL can be
    reloaded, bookmarked, shared, opened in a tab). `listing`: that list's context, when already read."""
    if _is_htmx(request):
        return render(
            request, "review/queue_detail.html", {**context, "list_query": _asked_list_query(request)}, status=status
        )
    listing = listing or _queue_context(request, current_key=f"{context['kind']}-{context['pk']}")
    return render(request, "review/queue_item.html", {**listing, **context}, status=status)


def _item_redirect(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    """Back to the item's page after a plain form POST, the list as the form's URL left it."""
    query = _asked_list_query(request)
    url = reverse("review:queue-detail", kwargs={"kind": kind, "pk": pk})
    return redirect(f"{url}?{query}" if query else url)


@login_required
def queue_detail(request: HttpRequest, kind: str, pk: str) -> HttpResponse:
    if _is_htmx(request):
        return _render_item(request, _detail_context(request, kind, int(pk)))
    # The whole page: the list first, whose entry for the item (when listed) is the detail's own.
    key = f"{kind}-{pk}"
    listing = _queue_context(request, current_key=key)
    listed = next((e for e in listing["entries"] if e.key == key), None)
    return _render_item(request, _detail_context(request, kind, int(pk), listed), listing=listing)


def _trigger(kind: str, pk: int) -> str:
    return json.dumps({"queue-changed": True, "engram:decided": {"kind": kind, "id": pk}})


def _already_decided(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    """409: someone decided the item meanwhile. Shown in place: who decided what and when, the
    item read-only (its buttons disabled). Without htmx: back to the item page with the message."""
    context = _detail_context(request, kind, pk)
    decided = context.get("decided")
    if decided is None:  # still pending after all (a race the other way): show it as it is
        return _render_item(request, context)
    when = f" at {decided.when:%Y-%m-%d %H:%M} UTC" if decided.when else ""
    message = (
        f"Already decided: {decided.who} {decided.what}{when}. Your action changed nothing; "
        "the item is shown as it stands now."
    )
    if not _is_htmx(request):
        messages.error(request, message)
        return _item_redirect(request, kind, pk)
    context.update(conflict_message=message, list_query=_asked_list_query(request))
    response = render(request, "review/queue_detail.html", context, status=409)
    response["HX-Trigger"] = json.dumps({"queue-changed": True})
    return response


def _refused_input(
    request: HttpRequest, kind: str, pk: int, form: QueueDecisionForm, detail: str, fields: dict[str, list[str]]
) -> HttpResponse:
    """422: the whole detail again with what was typed and each field's error beside it."""
    context = _detail_context(request, kind, pk)
    data = getattr(form, "cleaned_data", {})
    typed = {
        "reason": data.get("reason", ""),
        "edited_text": data.get("edited_text") or data.get("text", ""),
        "on_restatement": data.get("on_restatement") or "keep",
        "action": data.get("action", ""),
    }
    context.update(error=detail, error_fields=fields, typed=typed)
    return _render_item(request, context, status=422)


@login_required
@require_POST
def queue_decide(request: HttpRequest, kind: str, pk: str) -> HttpResponse:
    """approve / edit-and-approve / deny (candidates), keep / restore (conflicts), same /
    existing_wins / proposed_wins / both_true (possible conflicts), revalidate / deprecate
    (challenged facts). htmx: answers the outcome (with links to what happened) and triggers
    `queue-changed` and `engram:decided`; a plain form POST is redirected to the item page with
    the outcome as a message. Decided meanwhile: 409 with who decided what and when. Invalid
    (deny without a reason, an empty edit): 422 with the whole detail and the input kept."""
    item_pk = int(pk)
    entry = entry_for(request.user, kind, item_pk)
    if entry is None:
        if item_entry(request.user, kind, item_pk) is None:
            raise Http404("Not in your queue, or not yours to decide.")
        return _already_decided(request, kind, item_pk)
    form = QueueDecisionForm(request.POST, kind=kind)
    if not form.is_valid():
        if "action" in form.errors:
            return HttpResponse("Unknown action for this item.", status=400)
        fields = {name: [str(e) for e in errors] for name, errors in form.errors.items()}
        return _refused_input(
            request, kind, item_pk, form, "The decision needs a reason; see beside the field.", fields
        )
    try:
        outcome = _decide(entry, Actor.of_user(request.user), form)
    except StateConflict:
        return _already_decided(request, kind, item_pk)
    except InsufficientPermission as exc:
        # Shown by the page's one handler for refused htmx requests, next to the button pressed.
        return HttpResponse(exc.detail, status=403, content_type="text/plain; charset=utf-8")
    except EngramError as exc:
        return _refused_input(request, kind, item_pk, form, exc.detail, exc.fields)
    if not _is_htmx(request):
        messages.success(request, outcome.headline)
        return _item_redirect(request, kind, item_pk)
    response = render(
        request,
        "review/queue_detail.html",
        {
            "entry": entry,
            "kind": kind,
            "pk": item_pk,
            "outcome": outcome,
            "fresh": True,
            "list_query": _asked_list_query(request),
        },
    )
    response["HX-Trigger"] = _trigger(kind, item_pk)
    return response


def _decide(entry: QueueEntry, by: Actor, form: QueueDecisionForm) -> ItemOutcome:
    """Apply the decision through its service; what it did, stated as it is."""
    action, reason, obj = form.cleaned_data["action"], form.cleaned_data["reason"], entry.obj
    ws = entry.workspace
    if entry.kind == "candidate":
        decision = promotion.decide_candidate(
            candidate=obj,
            by=by,
            action=action,
            reason=reason,
            edited_text=form.edit if action == "edit_approve" else None,
            on_restatement=form.cleaned_data["on_restatement"] or "keep",
        )
        decision.candidate = Candidate.objects.select_related("workspace").get(pk=obj.pk)
        return candidate_outcome(decision)
    if entry.kind == "conflict":
        restored = review_conflict(conflict=obj, by=by, restore_loser=action == "restore", reason=reason)
        if restored is not None:
            return ItemOutcome(
                "restored",
                f"Restored the human-stated wording as fact #{restored.pk}.",
                [(f"fact #{restored.pk}", fact_url(ws, restored.pk))],
            )
        return ItemOutcome(
            "kept",
            f"Kept the decision: fact #{obj.winner_id} stands, fact #{obj.loser_id} stays superseded.",
            [(f"fact #{obj.winner_id}", fact_url(ws, obj.winner_id))],
        )
    if entry.kind == "possible":
        resolution, side = POSSIBLE_ACTIONS[action]
        winner_id = getattr(obj, f"{side}_id") if side else None
        conflict = decide_conflict(conflict=obj, by=by, resolution=resolution, winner_id=winner_id, note=reason)
        pair = [(f"fact #{obj.existing_id}", fact_url(ws, obj.existing_id))]
        pair.append((f"fact #{obj.proposed_id}", fact_url(ws, obj.proposed_id)))
        if resolution == "same":
            older, newer = sorted((obj.existing, obj.proposed), key=lambda f: (f.created_at, f.pk))
            return ItemOutcome(
                "same",
                f"Recorded as the same fact: fact #{newer.pk} is now a mention of fact #{older.pk}.",
                [(f"fact #{older.pk}", fact_url(ws, older.pk))],
            )
        if resolution == "contradicts":
            return ItemOutcome(
                "contradicts",
                f"Recorded as a contradiction: fact #{conflict.winner_id} stands, "
                f"fact #{conflict.loser_id} is superseded.",
                pair,
            )
        return ItemOutcome("both_true", "Recorded as both true: both stay, and this pair is not asked again.", pair)
    if action == "revalidate":
        revalidate_fact(fact=obj, by=by, validated_by="human", note=reason)
        return ItemOutcome(
            "revalidated", f"Revalidated: fact #{obj.pk} is active again.", [(f"fact #{obj.pk}", fact_url(ws, obj.pk))]
        )
    deprecate_fact(fact=obj, by=by, reason=reason)
    return ItemOutcome(
        "deprecated", f"Deprecated: fact #{obj.pk} leaves recall.", [(f"fact #{obj.pk}", fact_url(ws, obj.pk))]
    )


@login_required
@require_POST
def candidate_diff(request: HttpRequest, pk: str) -> HttpResponse:
    """The live diff of the edit box: the reviewer's text against the agent's wording."""
    entry = item_entry(request.user, "candidate", int(pk))
    if entry is None:
        raise Http404("Not in your queue.")
    text = request.POST.get("edited_text", request.POST.get("text", ""))
    d = compare_texts(entry.obj.proposed_memory, text, old_label="agent's wording", new_label="your edit")
    return render(request, "review/_diff.html", {"d": d, "live": True})
