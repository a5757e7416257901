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
    """A decision on one queue entry: the button pressed, a reason, and for edit-and-approve the
    reviewer's text. An action the entry's kind does not have is invalid."""

    action = forms.ChoiceField(choices=())
    reason = _text(strip=True)
    text = _text()

    def __init__(self, data: QueryDict, *, kind: str) -> None:
        super().__init__(data)
        self.fields["action"].choices = [(action, action) for action in QUEUE_ACTIONS.get(kind, ())]  # type: ignore[attr-defined]


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
