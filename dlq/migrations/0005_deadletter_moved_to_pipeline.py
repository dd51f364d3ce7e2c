"""The dead-letter model moved to the pipeline app (pipeline 0006): point the audit and the refusals at it,
forget it here (state only: the table stays), and carry the reprocess permission on the audit entry."""

import django.db.models.deletion
from django.db import migrations, models


def forget_old_content_type(apps, schema_editor):
    """Its permissions go with it; the roles are given the new ones (tenancy 0003)."""
    apps.get_model("contenttypes", "ContentType").objects.filter(app_label="dlq", model="deadletter").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("dlq", "0004_list_order_indexes"),
        ("pipeline", "0006_deadletter_presence_attempts"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("tenancy", "0002_roles"),  # which granted the permissions of the old model
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="auditentry", name="dead_letter",
                    field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT,
                                               related_name="reprocess_audit", to="pipeline.deadletter"),
                ),
                migrations.AlterField(
                    model_name="reprocessrefusal", name="dead_letter",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT,
                                            related_name="reprocess_refusals", to="pipeline.deadletter"),
                ),
                migrations.DeleteModel(name="DeadLetter"),
            ],
            database_operations=[],
        ),
        migrations.AlterModelOptions(
            name="auditentry",
            options={
                "ordering": ["-at", "-id"], "verbose_name_plural": "audit entries",
                "permissions": [("reprocess_deadletter", "Can reprocess a dead letter as a new job version")],
            },
        ),
        migrations.RunPython(forget_old_content_type, migrations.RunPython.noop),
    ]
