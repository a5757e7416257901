"""The fact list's date drill-down (admin date_hierarchy) read by index probes (issue 38).

Django's date_hierarchy asks its queryset for MIN and MAX and for the DISTINCT years, months or
days: each scans every fact the list holds (100k rows). The same choices, in the same order, come
from ordered LIMIT 1 reads along the created_at index: the first and last dates, and then one read
per year, month or day that holds a fact, each starting where the one before ended."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django import template
from django.contrib.admin.templatetags.admin_list import date_hierarchy
from django.contrib.admin.templatetags.base import InclusionAdminNode
from django.db.models import QuerySet
from django.utils import timezone

register = template.Library()


class ProbedDates:
    """What date_hierarchy asks of `cl.queryset` (aggregate of Min/Max, datetimes), answered by
    index probes over `queryset`."""

    def __init__(self, queryset: QuerySet) -> None:
        self.queryset = queryset.order_by()

    def _first(self, field: str, *, after: datetime | None = None, descending: bool = False) -> datetime | None:
        rows = self.queryset if after is None else self.queryset.filter(**{f"{field}__gte": after})
        return rows.order_by(f"-{field}" if descending else field).values_list(field, flat=True).first()

    def aggregate(self, *, first: Any, last: Any) -> dict[str, datetime | None]:
        field = first.get_source_expressions()[0].name  # Min("created_at"): its F
        return {"first": self._first(field), "last": self._first(field, descending=True)}

    def datetimes(self, field: str, kind: str) -> list[datetime]:
        """The distinct starts of `kind` (year, month, day) in the current time zone, oldest first."""
        found: list[datetime] = []
        after = None
        while (at := self._first(field, after=after)) is not None:
            start = _truncate(timezone.localtime(at), kind)
            found.append(start)
            after = _next(start, kind)
        return found


def _truncate(at: datetime, kind: str) -> datetime:
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    return {"year": day.replace(month=1, day=1), "month": day.replace(day=1), "day": day}[kind]


def _next(start: datetime, kind: str) -> datetime:
    naive = start.replace(tzinfo=None)
    if kind == "year":
        naive = naive.replace(year=naive.year + 1)
    elif kind == "month":
        naive = naive.replace(year=naive.year + naive.month // 12, month=naive.month % 12 + 1)
    else:
        naive = datetime.fromordinal(naive.toordinal() + 1)
    return timezone.make_aware(naive)


class _Probed:
    """The changelist as date_hierarchy reads it, its queryset answered by ProbedDates."""

    def __init__(self, cl: Any) -> None:
        self._cl = cl
        self.queryset = ProbedDates(cl.queryset)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cl, name)


def probed_date_hierarchy(cl: Any) -> dict[str, Any] | None:
    return date_hierarchy(cast(Any, _Probed(cl)))


@register.tag(name="probed_date_hierarchy")
def probed_date_hierarchy_tag(parser: Any, token: Any) -> InclusionAdminNode:
    return InclusionAdminNode(  # type: ignore[call-arg]  # django-stubs name a `name` Django's own does not take
        parser, token, func=probed_date_hierarchy, template_name="date_hierarchy.html", takes_context=False
    )
