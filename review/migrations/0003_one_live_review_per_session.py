"""One live remember review per agent and session (issue 39): a partial unique constraint on
(agent, session_id) over the reviews not yet consumed.

Reviews written before the rule may break it: of each agent's session, the newest live review is
kept, and every older live one is closed as consumed (its runtime waits on the newest now), with a
reviewer note saying why. A decided review keeps its resolution and its time; a pending one gets
`resolved_at` too, as the check constraints ask of anything not pending. Reviews whose agent was
deleted (agent NULL) are left alone: NULLs are distinct in the constraint."""

from django.db import migrations, models
from django.db.models import Count
from django.utils import timezone

REASON = (
    "Closed when Engram began holding one live remember review per session: a newer remember review "
    "of the same session was live, so its runtime waits on that one and never consumes this one."
)


def settle_live_duplicates(apps, schema_editor):
    """Keep the newest live review of each (agent, session_id); consume the older live ones."""
    RememberReview = apps.get_model("review", "RememberReview")
    live = RememberReview.objects.exclude(status="consumed").filter(agent__isnull=False)
    duplicated = (
        live.order_by().values("agent_id", "session_id").annotate(live_count=Count("pk")).filter(live_count__gt=1)
    )
    now = timezone.now()
    for group in list(duplicated):
        rows = live.filter(agent_id=group["agent_id"], session_id=group["session_id"]).order_by("-created_at", "-pk")
        for review in rows[1:]:
            review.status = "consumed"
            review.consumed_at = now
            review.resolved_at = review.resolved_at or now
            review.reviewer_note = f"{review.reviewer_note}\n\n{REASON}" if review.reviewer_note else REASON
            review.save(update_fields=["status", "consumed_at", "resolved_at", "reviewer_note"])


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0002_rememberreview_agent_in_memory"),
    ]

    operations = [
        migrations.RunPython(settle_live_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="rememberreview",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status", "consumed"), _negated=True),
                fields=("agent", "session_id"),
                name="remember_review_one_live_per_session",
            ),
        ),
    ]
