"""Template tags over review.diff: `{% inline_diff old new %}` and
`{% side_by_side_diff old new as pair %}` (then `{{ pair.0 }}` / `{{ pair.1 }}`)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from review.diff import render_inline, render_side_by_side

register = template.Library()


@register.simple_tag
def inline_diff(old: str, new: str) -> SafeString:
    return render_inline(old or "", new or "")


@register.simple_tag
def side_by_side_diff(old: str, new: str) -> tuple[SafeString, SafeString]:
    return render_side_by_side(old or "", new or "")
