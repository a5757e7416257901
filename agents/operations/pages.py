"""Bounded reads: the one page rule, and the one page builder, of every list in the agent API
and the MCP tools.

`limit` is 1..ENGRAM_API_MAX_PAGE_SIZE (default PAGE_SIZE) and `offset` 0..ENGRAM_API_MAX_OFFSET;
anything else — a non-integer, 0, a negative, or a huge number that must never reach SQL —
answers 400 `invalid_input` with the message on that field. Refusing instead of clamping: a
client asking for a million rows learns at once that it gets at most a page, instead of
silently receiving fewer than it believes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from rest_framework import serializers
from rest_framework.settings import api_settings
from rest_framework.utils.urls import remove_query_param, replace_query_param

from agents.operations.inputs import validated


def default_page_size() -> int:
    return api_settings.PAGE_SIZE or 50


def max_page_size() -> int:
    return int(settings.ENGRAM_API_MAX_PAGE_SIZE)


class PageQuery(serializers.Serializer):
    """`limit` and `offset`, bounded by the settings in force when the request is read."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return {
            "limit": serializers.IntegerField(required=False, min_value=1, max_value=max_page_size()),
            "offset": serializers.IntegerField(required=False, min_value=0, max_value=settings.ENGRAM_API_MAX_OFFSET),
        }


def page_bounds(raw: Mapping[str, Any]) -> tuple[int, int]:
    """The validated (limit, offset) of a request's parameters; DRF ValidationError (400) if out of range."""
    given = {name: raw[name] for name in ("limit", "offset") if name in raw and raw[name] not in (None, "")}
    data = validated(PageQuery, given)
    return data.get("limit", default_page_size()), data.get("offset", 0)


@dataclass(frozen=True)
class Page:
    """One page of a list: `next` and `previous` are the API's links, None at either end."""

    count: int
    items: list[Any]
    next: str | None
    previous: str | None

    def body(self, results: Any) -> dict[str, Any]:
        """The API's page shape, `{count, next, previous, results}`, with `results` rendered."""
        return {"count": self.count, "next": self.next, "previous": self.previous, "results": results}


def page_of(rows: QuerySet[Any] | Sequence[Any], *, limit: int, offset: int, url: str) -> Page:
    """Rows `offset`..`offset + limit` of `rows`, linked as DRF's limit/offset pages link them:
    `url` (the address this page was asked at) with `limit` and `offset` replaced."""
    count = rows.count() if isinstance(rows, QuerySet) else len(rows)
    items = [] if count == 0 or offset > count else list(rows[offset : offset + limit])
    link = replace_query_param(url, "limit", limit)
    following = replace_query_param(link, "offset", offset + limit) if offset + limit < count else None
    if offset <= 0:
        preceding = None
    elif offset - limit <= 0:
        preceding = remove_query_param(link, "offset")
    else:
        preceding = replace_query_param(link, "offset", offset - limit)
    return Page(count=count, items=items, next=following, previous=preceding)


def api_url(route: str, query: Mapping[str, Any], *, site_url: str = "") -> str:
    """The API address of list `route` (a URL name) with `query`, under `site_url`: how a caller
    without an HTTP request (the MCP server) names the page the API would link."""
    given = {
        key: (str(value).lower() if isinstance(value, bool) else value)  # `true`, as a query string says it
        for key, value in query.items()
        if value not in (None, "")
    }
    return site_url.rstrip("/") + reverse(route) + (f"?{urlencode(given, doseq=True)}" if given else "")
