"""Bounded reads: the one page rule of every list in the agent API and the MCP tools.

`limit` is 1..ENGRAM_API_MAX_PAGE_SIZE (default PAGE_SIZE) and `offset` 0..ENGRAM_API_MAX_OFFSET;
anything else — a non-integer, 0, a negative, or a huge number that must never reach SQL —
answers 400 `invalid_input` with the message on that field. Refusing instead of clamping: a
client asking for a million rows learns at once that it gets at most a page, instead of
silently receiving fewer than it believes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils.functional import lazy
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from agents.api.inputs import validated


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


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """DRF's limit/offset pages ({count, next, previous, results}) with `page_bounds` enforced:
    DRF's own class silently ignores a bad limit and has no ceiling unless told."""

    def paginate_queryset(
        self, queryset: QuerySet[Any] | Sequence[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        self._bounds = page_bounds(request.query_params)
        self.max_limit = max_page_size()
        return super().paginate_queryset(queryset, request, view)

    def get_limit(self, request: Request) -> int:
        return self._bounds[0]

    def get_offset(self, request: Request) -> int:
        return self._bounds[1]


def _limit_description() -> str:
    return (
        f"Page size, 1–{max_page_size()} (default {default_page_size()}). Anything else, including "
        "non-integers, is refused with 400 `invalid_input` on `limit`."
    )


def _offset_description() -> str:
    return (
        f"Rows to skip, 0–{settings.ENGRAM_API_MAX_OFFSET} (default 0); beyond, 400 `invalid_input` on "
        "`offset`. Follow `next` to page."
    )


def page_parameters() -> list[OpenApiParameter]:
    """`limit` and `offset` as the OpenAPI schema documents them on every list endpoint (worded
    when the schema is rendered, so the bounds shown are the settings in force)."""
    return [
        OpenApiParameter("limit", int, description=lazy(_limit_description, str)()),
        OpenApiParameter("offset", int, description=lazy(_offset_description, str)()),
    ]
