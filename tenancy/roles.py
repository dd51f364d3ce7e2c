"""The two roles as groups and their permissions, restorable by ``ensure_roles``.

Operators view every pipeline and DLQ row, API key and webhook endpoint of their tenants, reprocess dead
letters, decide reviews, revoke API keys, add and change webhook endpoints and redeliver parked outbox events. Auditors view the same rows and act on nothing. A change to ROLES needs a new migration that depends on
the models it names and calls ``ensure_roles`` with a frozen copy of the new roles (as 0003 does):
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
    ("webhooks", "view_webhookendpoint"),
)
OPERATORS = "Operators"
AUDITORS = "Auditors"
ROLES: dict[str, tuple[tuple[str, str], ...]] = {
    OPERATORS: VIEW + (
        ("dlq", "reprocess_deadletter"), ("pipeline", "decide_review"), ("ingest", "revoke_apikey"),
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
