from typing import Any

from django import template

register = template.Library()


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    """`{{ counts|get_item:kind }}`: a dict value by a variable key."""
    return mapping.get(key, 0)
