"""Fewer indexes for every job to write (docs/performance.md, "After: the claim planned once per connection...").

A unique CharField also gets a ``varchar_pattern_ops`` index on PostgreSQL, for LIKE: no query reads the
idempotency keys of jobs, results and reviews by prefix, yet every insert and every non-HOT update of
those rows wrote one. They are dropped; the keys stay unique through the very constraints they had
(PostgreSQL's ``<table>_<column>_key``, now declared in Meta). An attempt's job is served by
``attempt_job_fence`` (job, fence): its own index is dropped. A job's reprocessed_from and a review's
decided_by, null on almost every row, are indexed where set (the PROTECT checks and the timeline read
only set values).

Only indexes change: the database side is DROP INDEX and CREATE INDEX alone (Django's own AlterField of
a foreign key's ``db_index`` would also drop its constraint and add it back, checking every row under a
lock). The two partial indexes are built by a scan of the job and review tables, which blocks writes to
them while it runs (about a second per million rows on a small machine; on a large installation, build
them first with CREATE INDEX CONCURRENTLY under the same names, and this migration leaves them be).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

LIKE_INDEXED = [("pipeline_job", "idempotency_key"), ("pipeline_result", "idempotency_key"),
                ("pipeline_review", "idempotency_key")]
FOREIGN_KEY_INDEXED = [("pipeline_attempt", "job_id"), ("pipeline_job", "reprocessed_from_id"),
                       ("pipeline_review", "decided_by_id")]
PARTIAL = [("job_reprocessed_from", "pipeline_job", "reprocessed_from_id"),
           ("review_decided_by", "pipeline_review", "decided_by_id")]


def forwards(apps, schema_editor):
    quote = schema_editor.quote_name
    if schema_editor.connection.vendor == "postgresql":
        for table, column in LIKE_INDEXED:
            name = schema_editor._create_index_name(table, [column], suffix="_like")
            schema_editor.execute(f"DROP INDEX IF EXISTS {quote(name)}")
    for table, column in FOREIGN_KEY_INDEXED:
        schema_editor.execute(f"DROP INDEX IF EXISTS {quote(schema_editor._create_index_name(table, [column], suffix=''))}")
    for name, table, column in PARTIAL:
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {quote(table)} ({quote(column)}) "
                              f"WHERE {quote(column)} IS NOT NULL")


def backwards(apps, schema_editor):
    quote = schema_editor.quote_name
    for name, _, _ in PARTIAL:
        schema_editor.execute(f"DROP INDEX IF EXISTS {quote(name)}")
    for table, column in FOREIGN_KEY_INDEXED:
        name = schema_editor._create_index_name(table, [column], suffix="")
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {quote(table)} ({quote(column)})")
    if schema_editor.connection.vendor == "postgresql":
        for table, column in LIKE_INDEXED:
            name = schema_editor._create_index_name(table, [column], suffix="_like")
            schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {quote(table)} "
                                  f"({quote(column)} varchar_pattern_ops)")


def unique_key(model_name: str) -> list[migrations.operations.base.Operation]:
    return [
        migrations.AlterField(model_name=model_name, name="idempotency_key", field=models.CharField(max_length=300)),
        migrations.AddConstraint(
            model_name=model_name,
            constraint=models.UniqueConstraint(fields=("idempotency_key",),
                                               name=f"pipeline_{model_name}_idempotency_key_key"),
        ),
    ]


class Migration(migrations.Migration):

    dependencies = [
        ("pipeline", "0016_commit_function"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                *unique_key("job"), *unique_key("result"), *unique_key("review"),
                migrations.AlterField(
                    model_name="attempt",
                    name="job",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="attempts", to="pipeline.job"),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="reprocessed_from",
                    field=models.ForeignKey(blank=True, db_index=False, null=True,
                                            on_delete=django.db.models.deletion.PROTECT, related_name="reprocessed_as",
                                            to="pipeline.job"),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(condition=models.Q(("reprocessed_from__isnull", False)),
                                       fields=["reprocessed_from"], name="job_reprocessed_from"),
                ),
                migrations.AlterField(
                    model_name="review",
                    name="decided_by",
                    field=models.ForeignKey(blank=True, db_index=False, null=True,
                                            on_delete=django.db.models.deletion.PROTECT, related_name="+",
                                            to=settings.AUTH_USER_MODEL),
                ),
                migrations.AddIndex(
                    model_name="review",
                    index=models.Index(condition=models.Q(("decided_by__isnull", False)), fields=["decided_by"],
                                       name="review_decided_by"),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
