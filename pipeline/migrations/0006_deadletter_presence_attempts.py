"""Three moves, no data lost.

- The dead letter becomes a pipeline row: the model moves here from the dlq app (state only; its table
  is renamed in 0007), because the queue writes it in the transaction that ends the job.
- ``DrainBeat`` becomes ``DrainPresence`` (``beat_at`` -> ``seen_at``): "heartbeat" now means only a lease's.
- Attempt rows are written by the queue's own statements, so the two triggers that also wrote them go.
"""

import importlib

import django.db.models.deletion
from django.db import migrations, models

DROP_POSTGRES = """
DROP TRIGGER IF EXISTS pipeline_job_leased ON pipeline_job;
DROP FUNCTION IF EXISTS pipeline_record_attempt();
DROP TRIGGER IF EXISTS pipeline_job_finished ON pipeline_job;
DROP FUNCTION IF EXISTS pipeline_close_attempt();
"""
DROP_SQLITE = ["DROP TRIGGER IF EXISTS pipeline_job_leased;", "DROP TRIGGER IF EXISTS pipeline_job_finished;"]
TRIGGER_MIGRATIONS = ("0002_attempt_trigger", "0005_attempt_close_trigger")


def drop_attempt_triggers(apps, schema_editor):
    statements = [DROP_POSTGRES] if schema_editor.connection.vendor == "postgresql" else DROP_SQLITE
    for statement in statements:
        schema_editor.execute(statement)


def restore_attempt_triggers(apps, schema_editor):
    for name in TRIGGER_MIGRATIONS:
        importlib.import_module(f"pipeline.migrations.{name}").forwards(apps, schema_editor)


REASONS = [("permanent_error", "Permanent Error"), ("max_attempts_exceeded", "Max Attempts Exceeded")]
CODES = [
    ("extractor_timeout", "Extractor Timeout"), ("extractor_unavailable", "Extractor Unavailable"),
    ("document_malformed", "Document Malformed"), ("schema_invalid", "Schema Invalid"),
    ("validation_failed", "Validation Failed"), ("cancelled", "Cancelled"), ("deadline_exceeded", "Deadline Exceeded"),
    ("deadline_unreachable", "Deadline Unreachable"), ("idempotency_conflict", "Idempotency Conflict"),
    ("lease_expired", "Lease Expired"), ("shutdown", "Shutdown"), ("unclassified", "Unclassified"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("pipeline", "0005_attempt_close_trigger"),
        ("dlq", "0004_list_order_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="DeadLetter",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("tenant", models.CharField(max_length=33)),
                        ("reason_code", models.CharField(choices=REASONS, max_length=32)),
                        ("error_code", models.CharField(blank=True, choices=CODES, default="", max_length=32)),
                        ("attempts", models.PositiveIntegerField()),
                        ("created_at", models.DateTimeField()),
                        ("job", models.OneToOneField(on_delete=django.db.models.deletion.PROTECT,
                                                     related_name="dead_letter", to="pipeline.job")),
                    ],
                    options={
                        "db_table": "dlq_deadletter",
                        "indexes": [models.Index(fields=["tenant", "created_at"], name="deadletter_tenant_created")],
                        "constraints": [models.CheckConstraint(
                            condition=models.Q(("reason_code__in", ["permanent_error", "max_attempts_exceeded"])),
                            name="deadletter_reason_valid")],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RemoveIndex(model_name="drainbeat", name="drainbeat_node_beat"),
        migrations.RenameModel(old_name="DrainBeat", new_name="DrainPresence"),
        migrations.RenameField(model_name="drainpresence", old_name="beat_at", new_name="seen_at"),
        migrations.AddIndex(model_name="drainpresence",
                            index=models.Index(fields=["node", "seen_at"], name="presence_node_seen")),
        migrations.AlterModelOptions(name="drainpresence", options={"verbose_name_plural": "drain presences"}),
        migrations.RunPython(drop_attempt_triggers, restore_attempt_triggers),
    ]
