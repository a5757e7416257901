"""A paginator for lists that may hold 100k rows (issue 38): it counts no further than the pages
a person can reach from where they are, so a page costs the same at 1k and at 100k facts."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

COUNT_CAP = 10_000


class BoundedPaginator(Paginator):
    """Django's Paginator over a QuerySet whose count stops one row past `cap` (a COUNT over a LIMITed subquery):
    exact up to `cap` rows, `cap + 1` beyond — `capped` then says so and `count_label` reads
    "10,000+". Asking for a page past the cap raises the cap to that page, so "next" always leads
    on as far as rows go."""

    def __init__(self, object_list: Any, per_page: int, *, cap: int | None = None, **options: Any) -> None:
        super().__init__(object_list, per_page, **options)
        self.cap = COUNT_CAP if cap is None else cap

    def reach(self, number: Any) -> None:
        """Count far enough to show page `number` and say whether another follows it."""
        try:
            wanted = int(number)
        except (TypeError, ValueError):
            return
        self.cap = max(self.cap, wanted * self.per_page)
        self.__dict__.pop("count", None)
        self.__dict__.pop("num_pages", None)

    def get_page(self, number: Any) -> Page:
        self.reach(number)
        return super().get_page(number)

    @cached_property
    def count(self) -> int:
        # Neither the order nor an annotation (a search rank) is computed to count rows.
        rows: QuerySet = self.object_list  # type: ignore[assignment]  # a QuerySet, as the class says
        return rows.order_by().values("pk")[: self.cap + 1].count()

    @property
    def capped(self) -> bool:
        return self.count > self.cap

    @property
    def count_label(self) -> str:
        """The count as shown: exact, or "10,000+" past the cap."""
        return f"{self.cap:,}+" if self.capped else str(self.count)

    @property
    def pages_label(self) -> str:
        """The number of pages as shown: exact, or "200+" past the cap."""
        return f"{self.cap // self.per_page:,}+" if self.capped else str(self.num_pages)
