"""Input and output of record_meeting_decisions (POST decisions/ and the MCP tool)."""

from __future__ import annotations

from rest_framework import serializers

from agents.operations.serializers import EpisodeOut, FactOut
from memory.services.decisions import MAX_DECISIONS, TITLE_MAX
from memory.services.facts import PROPOSAL_OUTCOMES, TOPIC_MAX


class MeetingDecisionsIn(serializers.Serializer):
    title = serializers.CharField(max_length=TITLE_MAX, help_text="the meeting's title (the episode's title)")
    date = serializers.DateField(help_text="the day the meeting took place (YYYY-MM-DD); not in the future")
    decisions = serializers.ListField(
        # No max_length here: the service checks each decision's length against ENGRAM_FACT_MAX_CHARS and
        # names it `decisions.<n>` from 1, as the meeting page numbers lines (DRF would say `decisions`
        # with an index from 0).
        child=serializers.CharField(),
        min_length=1,
        max_length=MAX_DECISIONS,
        help_text=f"what the meeting decided, one decision per item (1–{MAX_DECISIONS}; each at most "
        "ENGRAM_FACT_MAX_CHARS characters): each becomes a human_stated `decision` fact",
    )
    topic = serializers.CharField(
        max_length=TOPIC_MAX,
        required=False,
        allow_blank=True,
        default="",
        help_text="one topic for every decision; without it each meets the closest live decision's topic, "
        "else gets one from its first clause",
    )


class DecisionResultOut(serializers.Serializer):
    index = serializers.IntegerField(help_text="the decision's position in `decisions`, from 0")
    fact = FactOut(help_text="the new fact, or the live decision it re-mentioned")
    outcome = serializers.ChoiceField(choices=PROPOSAL_OUTCOMES, help_text="as POST facts/")
    conflict_id = serializers.IntegerField(allow_null=True)
    similarity = serializers.FloatField(allow_null=True)
    compared_with = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()


class MeetingDecisionsOut(serializers.Serializer):
    episode = EpisodeOut(help_text="the meeting: kind `meeting`, its title, started at its date")
    domain = serializers.CharField(help_text="`decisions`")
    results = DecisionResultOut(many=True, help_text="one per decision, in order")
