"""The review app's part of a workspace file (memory.services.portability): remember reviews,
their items and the workspace's layer mappings. Registered by ReviewConfig.ready."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory.services.portability import Section, register_section
from review.models import LayerMapping, RememberReview, ReviewItem


def _stored_fact_ids(row: dict[str, Any], new_id: Callable[[str, Any], int]) -> None:
    """A resolution names the facts it stored (`stored_ids`, `stored[].fact_id`): the runtime and
    the visibility check read them, so they follow the facts to their new ids."""
    resolution = row.get("resolution")
    if not isinstance(resolution, dict):
        return
    resolution = dict(resolution)
    if isinstance(resolution.get("stored_ids"), list):
        resolution["stored_ids"] = [new_id("fact", i) for i in resolution["stored_ids"]]
    if isinstance(resolution.get("stored"), list):
        resolution["stored"] = [
            {**s, "fact_id": new_id("fact", s["fact_id"])} if isinstance(s, dict) and "fact_id" in s else s
            for s in resolution["stored"]
        ]
    row["resolution"] = resolution


SECTIONS = (
    Section(
        "remember_review",
        RememberReview,
        "workspace",
        {"agent": "agent", "repo": "repo"},
        rewrite=_stored_fact_ids,
    ),
    Section("review_item", ReviewItem, "review__workspace", {"review": "remember_review", "stored_fact": "fact"}),
    Section("layer_mapping", LayerMapping, "workspace"),
)


def register() -> None:
    for section in SECTIONS:
        register_section(section)
