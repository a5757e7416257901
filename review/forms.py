"""The review pages' POST bodies, parsed by forms. Forms parse and check the shape of what a page
sends; the rules (lengths, permissions, states) stay in the services they call."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.http import QueryDict

from memory.models import GrantLevel
from review.models import RememberLayer

# The buttons of each queue entry kind (review/queue_detail.html).
QUEUE_ACTIONS: dict[str, tuple[str, ...]] = {
    "candidate": ("approve", "edit_approve", "deny"),
    "conflict": ("keep", "restore"),
    "possible": ("same", "existing_wins", "proposed_wins", "both_true"),
    "challenged": ("revalidate", "deprecate"),
}


def _text(*, strip: bool = False) -> forms.CharField:
    """Optional text kept as typed (the services normalise it)."""
    return forms.CharField(required=False, strip=strip)


class QueueDecisionForm(forms.Form):
    """A decision on one queue entry: the button pressed, a reason, for edit-and-approve the
    reviewer's text (`edited_text`; `text` is its older name), and for a candidate that restates
    a live fact whether to keep the live wording or replace it. An action the entry's kind does
    not have is invalid."""

    action = forms.ChoiceField(choices=())
    reason = _text(strip=True)
    edited_text = _text()
    text = _text()
    on_restatement = forms.ChoiceField(choices=[("keep", "keep"), ("replace", "replace")], required=False)

    def __init__(self, data: QueryDict, *, kind: str) -> None:
        super().__init__(data)
        self.fields["action"].choices = [(action, action) for action in QUEUE_ACTIONS.get(kind, ())]  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        """Deprecating takes a fact out of every agent's recall for good: it needs a reason, so no
        stray key or click decides it with nothing said (issue 37)."""
        cleaned = super().clean() or {}
        if cleaned.get("action") == "deprecate" and not cleaned.get("reason"):
            self.add_error("reason", "Say why the fact is deprecated: agents stop recalling it.")
        return cleaned

    @property
    def edit(self) -> str:
        """The reviewer's rewrite, as typed. Call after is_valid()."""
        return self.cleaned_data["edited_text"] or self.cleaned_data["text"]


class ReviewItemForm(forms.Form):
    """One remember-review item's autosaving form (`item-<pk>-…`). The hidden `present` field marks
    it as part of the POST (an unchecked box sends nothing); a text field it leaves out stays
    unchanged."""

    present = forms.CharField(required=False)
    selected = forms.BooleanField(required=False)
    layer = forms.ChoiceField(
        required=False,
        choices=RememberLayer.choices,
        error_messages={"invalid_choice": f"One of {', '.join(RememberLayer.values)}."},
    )
    rationale = _text()
    content = _text()

    def __init__(self, data: QueryDict, *, item_id: int) -> None:
        super().__init__(data, prefix=f"item-{item_id}")

    @property
    def included(self) -> bool:
        return self.data.get(self.add_prefix("present")) == "1"

    def changes(self) -> dict[str, Any]:
        """The keyword arguments of review.services.update_item: nothing when the form was not
        sent, else the selection and the fields it sent. Call after is_valid()."""
        if not self.included:
            return {}
        values: dict[str, Any] = {"selected": self.cleaned_data["selected"]}
        for name in ("layer", "rationale", "content"):
            if self.add_prefix(name) in self.data:
                values[name] = self.cleaned_data[name]
        return values


class ReviewerNoteForm(forms.Form):
    reviewer_note = _text()

    @property
    def included(self) -> bool:
        return "reviewer_note" in self.data


class IdField(forms.IntegerField):
    """A row id; the error repeats what was sent (escaped where it is shown)."""

    default_error_messages = {"invalid": "%(value)r is not an id."}

    def to_python(self, value: Any) -> int | None:
        try:
            return super().to_python(value)
        except ValidationError as error:
            if error.code != "invalid":
                raise
            raise ValidationError(self.error_messages["invalid"], code="invalid", params={"value": value}) from None


class GrantForm(forms.Form):
    """One cell of the grants matrix: a role, a domain and the level to give it."""

    role = IdField()
    domain = IdField()
    level = forms.ChoiceField(
        choices=GrantLevel.choices,
        error_messages={"invalid_choice": f"Grant level must be one of {', '.join(GrantLevel.values)}."},
    )

    def error_text(self) -> str:
        return "; ".join(
            f"{name}: {' '.join(str(message) for message in messages)}" for name, messages in self.errors.items()
        )


class LinesField(forms.CharField):
    """A textarea of items, one a line; blank lines dropped (the service checks each item)."""

    def __init__(self) -> None:
        super().__init__(required=False, strip=True)

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        if "\x00" in text:  # checked here: the validators see the list, not the text
            raise ValidationError("Null characters are not allowed.", code="null_characters_not_allowed")
        return [line.strip() for line in text.splitlines() if line.strip()]


class CandidateCompletionForm(forms.Form):
    """What a reviewer adds to a held candidate in the queue (review/_candidate_completion.html):
    scope, anti-scope and evidence refs, one a line, and a note for the audit trail."""

    applies_to = LinesField()
    does_not_apply_to = LinesField()
    evidence_refs = LinesField()
    note = _text(strip=True)

    def error_text(self) -> str:
        return "; ".join(
            f"{name}: {' '.join(str(message) for message in messages)}" for name, messages in self.errors.items()
        )


# Bulk decisions from the queue list (review/views_queue_bulk.py): the kinds and at most how many.
BULK_ITEM_KINDS = ("candidate", "challenged")
BULK_MAX_ITEMS = 100


class ItemKeysField(forms.Field):
    """Checked list entries, each `<kind>-<pk>` (the list's checkbox values), as (kind, pk) pairs."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[tuple[str, int]]:
        keys: list[tuple[str, int]] = []
        for raw in value or []:
            kind, _, pk = str(raw).partition("-")
            if kind not in BULK_ITEM_KINDS or not pk.isdecimal() or len(pk) > 18:
                raise ValidationError("%(value)r is not a queue entry decided in bulk.", params={"value": raw})
            if (kind, int(pk)) not in keys:
                keys.append((kind, int(pk)))
        if not keys:
            raise ValidationError("Select at least one item.", code="required")
        if len(keys) > BULK_MAX_ITEMS:
            raise ValidationError(f"At most {BULK_MAX_ITEMS} items at a time.", code="too_many")
        return keys


class BulkDecisionForm(forms.Form):
    """Approve or deny the checked entries of the queue list; a denial needs a reason (the agent
    learns from it), as a single one does."""

    action = forms.ChoiceField(choices=[("approve", "approve"), ("deny", "deny")])
    items = ItemKeysField()
    reason = _text(strip=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "deny" and not data.get("reason"):
            self.add_error("reason", "Say why you deny them: the agents learn from the reason.")
        return data

    def error_text(self) -> str:
        return " ".join(" ".join(str(message) for message in messages) for messages in self.errors.values())


class MeetingDecisionsForm(forms.Form):
    """A meeting's decisions as a person pastes them (memory.services.decisions checks the rules:
    lengths, the date, the count). `decisions` is split one per line, or per paragraph when the
    text has blank lines between blocks."""

    title = forms.CharField(max_length=300, strip=True)
    date = forms.DateField()
    decisions = forms.CharField(strip=False)
    topic = forms.CharField(max_length=200, required=False, strip=True)
