from typing import Any

from django import template

from memory.selectors import conflict_closure as closure

register = template.Library()


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    """`{{ counts|get_item:kind }}`: a dict value by a variable key."""
    return mapping.get(key, 0)


@register.filter
def conflict_closure(conflict: Any) -> str:
    """`{{ c|conflict_closure }}`: why a conflict left open no longer waits ("" when it waits, or
    was decided) — the API's `closed_reason` (memory.selectors.conflict_closure)."""
    return closure(conflict)
