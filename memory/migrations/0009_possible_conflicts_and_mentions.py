"""Possible conflicts and mention records (issue 14).

Conflict gains `existing` and `proposed` (the pair, always set), a status (open, decided,
dismissed), a resolution (machine, same, contradicts, both_true), the classifier's reason and
who decided when; winner and loser become empty for a conflict no one has decided (open) or that
has no winner (same, both true). Rows written before are machine decisions: their pair is
(older, newer) by id — the write path always created the proposal after the fact it lost to or
beat — and they were decided when detected. FactMention keeps what was said on a re-mention.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0001_initial'),
        ('memory', '0008_replay_recorded_by_user'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='FactMention',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('text', models.TextField()),
                ('veracity', models.CharField(choices=[('human_stated', 'Human Stated'), ('agent_inferred', 'Agent Inferred'), ('imported', 'Imported'), ('tool_generated', 'Tool Generated')], max_length=20)),
                ('via', models.CharField(choices=[('proposal', 'stated again'), ('merge', 'near-duplicate merged'), ('review', 'a person decided it is the same')], default='proposal', max_length=10)),
                ('observed_at', models.DateTimeField(default=django.utils.timezone.now, help_text='When it was said to be true.')),
                ('similarity', models.FloatField(blank=True, help_text="Cosine to the fact's text.", null=True)),
                ('reason', models.CharField(blank=True, help_text='Why it counts as the same.', max_length=500)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='conflict',
            name='conflict_rule_valid',
        ),
        migrations.AddField(
            model_name='conflict',
            name='decided_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='conflict',
            name='decided_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='conflict',
            name='decision_note',
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddField(
            model_name='conflict',
            name='existing',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='conflicts_as_existing', to='memory.fact'),
        ),
        migrations.AddField(
            model_name='conflict',
            name='proposed',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='conflicts_as_proposed', to='memory.fact'),
        ),
        migrations.AddField(
            model_name='conflict',
            name='reason',
            field=models.CharField(blank=True, help_text="The classifier's reason, in a reviewer's words.", max_length=500),
        ),
        migrations.AddField(
            model_name='conflict',
            name='resolution',
            field=models.CharField(blank=True, choices=[('machine', 'decided by the rule'), ('same', 'the same fact (merged)'), ('contradicts', 'contradicts (a person chose the winner)'), ('both_true', 'both true')], default='machine', max_length=12),
        ),
        migrations.AddField(
            model_name='conflict',
            name='status',
            field=models.CharField(choices=[('open', 'waiting for a person'), ('decided', 'Decided'), ('dismissed', 'both true')], default='decided', max_length=10),
        ),
        # The FK checks of the new columns fire now, not at commit: ALTER TABLE refuses to run
        # with deferred trigger events pending.
        migrations.RunSQL(
            sql=[
                "SET CONSTRAINTS ALL IMMEDIATE",
                "UPDATE memory_conflict SET existing_id = LEAST(winner_id, loser_id), "
                "proposed_id = GREATEST(winner_id, loser_id), decided_at = detected_at",
            ],
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AlterField(
            model_name='conflict',
            name='existing',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='conflicts_as_existing', to='memory.fact'),
        ),
        migrations.AlterField(
            model_name='conflict',
            name='proposed',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='conflicts_as_proposed', to='memory.fact'),
        ),
        migrations.AlterField(
            model_name='conflict',
            name='loser',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='conflicts_lost', to='memory.fact'),
        ),
        migrations.AlterField(
            model_name='conflict',
            name='rule',
            field=models.CharField(blank=True, choices=[('veracity', 'higher veracity'), ('confidence', 'higher confidence'), ('recency', 'newer'), ('human', 'a person decided')], max_length=12),
        ),
        migrations.AlterField(
            model_name='conflict',
            name='winner',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='conflicts_won', to='memory.fact'),
        ),
        migrations.AddIndex(
            model_name='conflict',
            index=models.Index(condition=models.Q(('status', 'open')), fields=['workspace', 'domain'], name='conflict_open'),
        ),
        migrations.AddConstraint(
            model_name='conflict',
            constraint=models.CheckConstraint(condition=models.Q(('existing', models.F('proposed')), _negated=True), name='conflict_pair_two_facts'),
        ),
        migrations.AddConstraint(
            model_name='conflict',
            constraint=models.CheckConstraint(condition=models.Q(('rule__in', ['veracity', 'confidence', 'recency', 'human', ''])), name='conflict_rule_valid'),
        ),
        migrations.AddConstraint(
            model_name='conflict',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['open', 'decided', 'dismissed'])), name='conflict_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='conflict',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('resolution', ''), ('rule', ''), ('status', 'open')), models.Q(('resolution', 'machine'), ('rule__in', ['veracity', 'confidence', 'recency']), ('status', 'decided')), models.Q(('resolution__in', ['same', 'contradicts']), ('rule', 'human'), ('status', 'decided')), models.Q(('resolution', 'both_true'), ('rule', 'human'), ('status', 'dismissed')), _connector='OR'), name='conflict_status_resolution_rule'),
        ),
        migrations.AddConstraint(
            model_name='conflict',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('loser', models.F('proposed')), ('resolution__in', ['machine', 'contradicts']), ('winner', models.F('existing'))), models.Q(('loser', models.F('existing')), ('resolution__in', ['machine', 'contradicts']), ('winner', models.F('proposed'))), models.Q(models.Q(('resolution__in', ['machine', 'contradicts']), _negated=True), ('loser__isnull', True), ('winner__isnull', True)), _connector='OR'), name='conflict_winner_is_of_the_pair'),
        ),
        migrations.AddConstraint(
            model_name='conflict',
            constraint=models.UniqueConstraint(condition=models.Q(('status', 'open')), fields=('existing', 'proposed'), name='conflict_one_open_per_pair'),
        ),
        migrations.AddField(
            model_name='factmention',
            name='agent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='agents.agent'),
        ),
        migrations.AddField(
            model_name='factmention',
            name='episode',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.episode'),
        ),
        migrations.AddField(
            model_name='factmention',
            name='fact',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='mentions', to='memory.fact'),
        ),
        migrations.AddField(
            model_name='factmention',
            name='merged_fact',
            field=models.ForeignKey(blank=True, help_text='The fact whose text this was, when a fact was merged into this one.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.fact'),
        ),
        migrations.AddField(
            model_name='factmention',
            name='user',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name='factmention',
            index=models.Index(fields=['fact', '-created_at', '-id'], name='fact_mention_recent'),
        ),
        migrations.AddConstraint(
            model_name='factmention',
            constraint=models.CheckConstraint(condition=models.Q(('text', ''), _negated=True), name='fact_mention_text_not_empty'),
        ),
        migrations.AddConstraint(
            model_name='factmention',
            constraint=models.CheckConstraint(condition=models.Q(('via__in', ['proposal', 'merge', 'review'])), name='fact_mention_via_valid'),
        ),
    ]
