"""A decision is final in the database itself: UPDATE and DELETE of a review decision raise."""

from django.db import migrations

from relayops.append_only import refuse_changes


class Migration(migrations.Migration):
    dependencies = [("review", "0001_initial")]
    operations = [
        refuse_changes("review_reviewdecision", "review_decision_final", "review_reviewdecision_final", "final"),
    ]
