"""Input and answers of people's erasure API (POST admin/erasures/preview/ and admin/erasures/).

The views read the body themselves, for the erasure's own codes (invalid_selection,
nothing_to_erase, reason_required); these serializers declare the arguments — an argument
outside them is refused (`unknown_argument`) — and type the answers in the served schema."""

from __future__ import annotations

from rest_framework import serializers


class ErasureIn(serializers.Serializer):
    workspace = serializers.SlugField(help_text="The workspace's slug.")
    selection = serializers.JSONField(
        help_text='{"kind": "ids", "ids": [..]} | {"kind": "domain", "domain": "..", "topic": ".."} | '
        '{"kind": "search", "query": ".."} | {"kind": "agent", "agent": "<name>"} | {"kind": "review", "review": id}'
    )
    reason = serializers.CharField(
        required=False, max_length=500, help_text="Required to erase (reason_required); at most 500 characters."
    )
    fact_ids = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="The preview's fact ids: erasing is refused (409 selection_changed) if the selection now differs.",
    )


class ErasedFactOut(serializers.Serializer):
    id = serializers.IntegerField()
    domain = serializers.CharField()
    topic = serializers.CharField()
    content = serializers.CharField()
    status = serializers.CharField()
    superseded_by = serializers.IntegerField(allow_null=True)


class ErasurePreviewOut(serializers.Serializer):
    workspace = serializers.CharField(help_text="The workspace's slug.")
    selection = serializers.DictField(help_text="The selection as typed.")
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Rows per table that erasing would delete (`table`), scrub (`table:scrubbed`) or unlink "
        "(`table:unlinked`).",
    )
    facts = ErasedFactOut(many=True, help_text="The facts that would be erased, with their texts.")
    relinked = serializers.ListField(
        child=serializers.DictField(), help_text="Older versions brought back to life because their successor goes."
    )


class ErasureOut(serializers.Serializer):
    tombstone = serializers.IntegerField(help_text="The audit event that records the erasure (no content).")
    workspace = serializers.CharField()
    by = serializers.CharField()
    at = serializers.DateTimeField()
    reason = serializers.CharField()
    erased = serializers.DictField(help_text="Ids erased, per kind.")
    counts = serializers.DictField(child=serializers.IntegerField())
    sha256 = serializers.CharField(help_text="SHA-256 over the erased texts, to match against copies kept elsewhere.")
