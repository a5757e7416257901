"""The API side of bounded reads: DRF's pagination class and the documented `limit`/`offset`
parameters. The page rule and the page builder are agents.operations.pages, shared with the
MCP tools, so a list answers the same `next`/`previous` whichever way it is asked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils.functional import lazy
from drf_spectacular.utils import OpenApiParameter
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.operations.pages import Page, default_page_size, max_page_size, page_bounds, page_of


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """DRF's limit/offset pages ({count, next, previous, results}) built by `page_of`, with
    `page_bounds` enforced: DRF's own class silently ignores a bad limit and has no ceiling."""

    page: Page

    def paginate_queryset(
        self, queryset: QuerySet[Any] | Sequence[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        limit, offset = page_bounds(request.query_params)
        self.page = page_of(queryset, limit=limit, offset=offset, url=request.build_absolute_uri())
        return self.page.items

    def get_paginated_response(self, data: Any) -> Response:
        return Response(self.page.body(data))


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
