"""The two roles as groups and their permissions, restorable by ``ensure_roles``.

Operators view every pipeline and DLQ row, API key, tenant control and webhook endpoint of their
tenants, reprocess dead letters, decide reviews on the review page (which shows document content:
``review.view_document_content``), revoke API keys, add and change webhook endpoints, redeliver parked
outbox events, cancel live jobs, run delayed jobs now and pause or resume their tenants' intake. Auditors view the same rows, never document content, and act on nothing.

Raising or lowering a tenant's reprocess rate limit (``tenancy.set_reprocess_limit``) is in no role:
the limit is the brake on a script or a hurried operator reprocessing a whole DLQ, so the people it
brakes must not be able to lift it themselves. Superusers have it; for a planned recovery a superuser
grants it to the one operator leading it (the user page's permissions) and takes it back afterwards.

A change to ROLES needs a new migration that depends on the models it names and calls ``ensure_roles`` with a frozen copy of the new roles (as 0003 does):
migrations must not change when this module does.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps as django_apps

VIEW = (
    ("pipeline", "view_job"),
    ("pipeline", "view_result"),
    ("pipeline", "view_review"),
    ("pipeline", "view_outboxevent"),
    ("pipeline", "view_deadletter"),
    ("dlq", "view_auditentry"),
    ("dlq", "view_reprocessrefusal"),
    ("ingest", "view_apikey"),
    ("tenancy", "view_tenantcontrol"),
    ("webhooks", "view_webhookendpoint"),
)
OPERATORS = "Operators"
AUDITORS = "Auditors"
ROLES: dict[str, tuple[tuple[str, str], ...]] = {
    OPERATORS: VIEW + (
        ("dlq", "reprocess_deadletter"), ("pipeline", "decide_review"), ("ingest", "revoke_apikey"),
        ("tenancy", "cancel_job"), ("tenancy", "run_job_now"), ("tenancy", "pause_intake"),
        ("review", "view_document_content"),
        ("pipeline", "redeliver_outboxevent"), ("webhooks", "configure_webhookendpoint"),
    ),
    AUDITORS: VIEW,
}


def _ensure_permissions(apps: Any, labels: set[str]) -> None:
    """Permissions come from a post_migrate signal, after every migration: make them exist now."""
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes

    for label in sorted(labels):
        app_config = apps.get_app_config(label)
        models_module = getattr(app_config, "models_module", None)
        app_config.models_module = models_module or True  # a migration's app registry has none
        try:
            create_contenttypes(app_config, apps=apps, verbosity=0)
            create_permissions(app_config, apps=apps, verbosity=0)
        finally:
            app_config.models_module = models_module


def _permission(Permission: Any, app: str, codename: str) -> Any:
    try:
        return Permission.objects.get(content_type__app_label=app, codename=codename)
    except Permission.DoesNotExist as exc:
        raise LookupError(f"no permission {app}.{codename}") from exc


Roles = dict[str, tuple[tuple[str, str], ...]]


def ensure_roles(apps: Any = django_apps, roles: Roles | None = None) -> dict[str, Any]:
    """Create the role groups if missing and give each exactly its permissions; returns them by name.

    ``apps`` is a migration's historical registry, or the live one (the default); ``roles`` a
    migration's frozen copy of ROLES, or ROLES (the default).
    """
    roles = ROLES if roles is None else roles
    _ensure_permissions(apps, {app for codenames in roles.values() for app, _ in codenames})
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    groups = {}
    for name, codenames in roles.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set([_permission(Permission, app, codename) for app, codename in codenames])
        groups[name] = group
    return groups
