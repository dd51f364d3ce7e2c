"""System checks of the admin site: every list on it accepts only its declared lookups."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core import checks


@checks.register(checks.Tags.admin)
def lists_accept_declared_lookups_only(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An admin registered without ``DeclaredLookupsOnly`` would apply any querystring lookup to its list."""
    from tenancy.admin_base import DeclaredLookupsOnly

    return [
        checks.Error(
            f"The admin of {model._meta.label} ({type(model_admin).__qualname__}) applies any querystring lookup.",
            hint="Build it on tenancy.admin_base (PipelineRowAdmin, TenantScopedMixin or DeclaredLookupsOnly), "
                 "or pass a third party's to tenancy.admin_base.restrict_lookups.",
            obj=type(model_admin), id="relayops.E010",
        )
        for model, model_admin in admin.site._registry.items()
        if not isinstance(model_admin, DeclaredLookupsOnly)
    ]
