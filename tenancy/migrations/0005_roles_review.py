"""The roles again, now that the review page exists (review 0001): Operators see document content there
(``review.view_document_content``), Auditors do not. 0004's roles plus that permission."""

import importlib

from django.db import migrations

from tenancy.roles import ensure_roles

BEFORE = importlib.import_module("tenancy.migrations.0004_roles_api_keys").ROLES
ROLES = {
    "Operators": BEFORE["Operators"] + (("review", "view_document_content"),),
    "Auditors": BEFORE["Auditors"],
}


def forwards(apps, schema_editor):
    ensure_roles(apps, ROLES)


def backwards(apps, schema_editor):
    ensure_roles(apps, BEFORE)


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0004_roles_api_keys"),
        ("review", "0001_initial"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
