"""The closed vocabularies together: the LLM extractor's codes and budget_exhausted (0008) and the fault
handling's database_error and lease_expiries_exceeded (0011) altered the same choices and check constraint."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pipeline', '0011_lease_expiries_sweep_turn'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='deadletter',
            name='deadletter_reason_valid',
        ),
        migrations.AlterField(
            model_name='attempt',
            name='error_code',
            field=models.CharField(blank=True, choices=[('extractor_timeout', 'Extractor Timeout'), ('extractor_unavailable', 'Extractor Unavailable'), ('document_malformed', 'Document Malformed'), ('schema_invalid', 'Schema Invalid'), ('validation_failed', 'Validation Failed'), ('cancelled', 'Cancelled'), ('deadline_exceeded', 'Deadline Exceeded'), ('deadline_unreachable', 'Deadline Unreachable'), ('idempotency_conflict', 'Idempotency Conflict'), ('lease_expired', 'Lease Expired'), ('database_error', 'Database Error'), ('shutdown', 'Shutdown'), ('budget_exhausted', 'Budget Exhausted'), ('llm_timeout', 'Llm Timeout'), ('llm_unavailable', 'Llm Unavailable'), ('llm_rate_limited', 'Llm Rate Limited'), ('llm_server_error', 'Llm Server Error'), ('llm_unauthorized', 'Llm Unauthorized'), ('llm_request_rejected', 'Llm Request Rejected'), ('llm_bad_response', 'Llm Bad Response'), ('llm_refused', 'Llm Refused'), ('llm_answer_truncated', 'Llm Answer Truncated'), ('llm_answer_not_json', 'Llm Answer Not Json'), ('llm_answer_invalid', 'Llm Answer Invalid'), ('unclassified', 'Unclassified')], default='', max_length=32),
        ),
        migrations.AlterField(
            model_name='deadletter',
            name='error_code',
            field=models.CharField(blank=True, choices=[('extractor_timeout', 'Extractor Timeout'), ('extractor_unavailable', 'Extractor Unavailable'), ('document_malformed', 'Document Malformed'), ('schema_invalid', 'Schema Invalid'), ('validation_failed', 'Validation Failed'), ('cancelled', 'Cancelled'), ('deadline_exceeded', 'Deadline Exceeded'), ('deadline_unreachable', 'Deadline Unreachable'), ('idempotency_conflict', 'Idempotency Conflict'), ('lease_expired', 'Lease Expired'), ('database_error', 'Database Error'), ('shutdown', 'Shutdown'), ('budget_exhausted', 'Budget Exhausted'), ('llm_timeout', 'Llm Timeout'), ('llm_unavailable', 'Llm Unavailable'), ('llm_rate_limited', 'Llm Rate Limited'), ('llm_server_error', 'Llm Server Error'), ('llm_unauthorized', 'Llm Unauthorized'), ('llm_request_rejected', 'Llm Request Rejected'), ('llm_bad_response', 'Llm Bad Response'), ('llm_refused', 'Llm Refused'), ('llm_answer_truncated', 'Llm Answer Truncated'), ('llm_answer_not_json', 'Llm Answer Not Json'), ('llm_answer_invalid', 'Llm Answer Invalid'), ('unclassified', 'Unclassified')], default='', max_length=32),
        ),
        migrations.AlterField(
            model_name='deadletter',
            name='reason_code',
            field=models.CharField(choices=[('permanent_error', 'Permanent Error'), ('max_attempts_exceeded', 'Max Attempts Exceeded'), ('budget_exhausted', 'Budget Exhausted'), ('lease_expiries_exceeded', 'Lease Expiries Exceeded')], max_length=32),
        ),
        migrations.AlterField(
            model_name='job',
            name='last_error_code',
            field=models.CharField(blank=True, choices=[('extractor_timeout', 'Extractor Timeout'), ('extractor_unavailable', 'Extractor Unavailable'), ('document_malformed', 'Document Malformed'), ('schema_invalid', 'Schema Invalid'), ('validation_failed', 'Validation Failed'), ('cancelled', 'Cancelled'), ('deadline_exceeded', 'Deadline Exceeded'), ('deadline_unreachable', 'Deadline Unreachable'), ('idempotency_conflict', 'Idempotency Conflict'), ('lease_expired', 'Lease Expired'), ('database_error', 'Database Error'), ('shutdown', 'Shutdown'), ('budget_exhausted', 'Budget Exhausted'), ('llm_timeout', 'Llm Timeout'), ('llm_unavailable', 'Llm Unavailable'), ('llm_rate_limited', 'Llm Rate Limited'), ('llm_server_error', 'Llm Server Error'), ('llm_unauthorized', 'Llm Unauthorized'), ('llm_request_rejected', 'Llm Request Rejected'), ('llm_bad_response', 'Llm Bad Response'), ('llm_refused', 'Llm Refused'), ('llm_answer_truncated', 'Llm Answer Truncated'), ('llm_answer_not_json', 'Llm Answer Not Json'), ('llm_answer_invalid', 'Llm Answer Invalid'), ('unclassified', 'Unclassified')], default='', max_length=32),
        ),
        migrations.AddConstraint(
            model_name='deadletter',
            constraint=models.CheckConstraint(condition=models.Q(('reason_code__in', ['permanent_error', 'max_attempts_exceeded', 'budget_exhausted', 'lease_expiries_exceeded'])), name='deadletter_reason_valid'),
        ),
    ]
