"""API keys in the admin: listed per tenant (an operator sees their tenants' keys only), never the key
itself, and revoked with a declared permission through ingest.keys. Keys are created by ``create_api_key``."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from ingest.keys import revoke_api_key
from ingest.models import ApiKey
from tenancy.admin_base import AgeFilter, PipelineRowAdmin, TenantFilter


class ActiveFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [("live", "live"), ("revoked", "revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> QuerySet[ApiKey]:
        if self.value() in ("live", "revoked"):
            return queryset.filter(revoked_at__isnull=self.value() == "live")
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(PipelineRowAdmin):
    list_display = ["name", "tenant", "key_prefix", "state", "created_at", "created_by", "revoked_at", "revoked_by"]
    list_filter = [TenantFilter, ActiveFilter, AgeFilter]
    search_fields = ["=name", "=prefix"]
    search_help_text = "An exact key name, or the 8 characters after rk_."
    exact_search_fields = ["name", "prefix"]
    ordering = ["-id"]
    actions = ["revoke"]
    fields = readonly_fields = (
        "name", "tenant", "key_prefix", "state", "created_at", "created_by", "revoked_at", "revoked_by",
    )

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ingest.revoke_apikey")

    @admin.action(description="Revoke selected API keys", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> HttpResponse | None:
        if not self.has_revoke_permission(request):  # re-checked on the confirming POST
            raise PermissionDenied
        confirmed = self.confirm_action(
            request, queryset, action="revoke", title="Revoke API keys",
            template="admin/ingest/apikey/revoke_confirmation.html",
        )
        if isinstance(confirmed, HttpResponse) or confirmed is None:
            return confirmed
        chosen = list(queryset)
        done = [key for key in chosen if revoke_api_key(key.pk, by=request.user.get_username())]
        for key in done:  # Django's admin history: "Recent actions" and the key's own history
            self.log_change(request, key, "Revoked.")
        revoked = len(done)
        self.message_user(request, f"Revoked {revoked} API key(s): their next request is refused.", messages.SUCCESS)
        if len(chosen) > revoked:
            self.message_user(request, f"{len(chosen) - revoked} key(s) were already revoked.", messages.WARNING)
        return None

    @admin.display(description="key", ordering="prefix")
    def key_prefix(self, key: ApiKey) -> str:
        return f"rk_{key.prefix}_…"

    @admin.display(description="state", ordering="revoked_at")
    def state(self, key: ApiKey) -> str:
        return "live" if key.active else "revoked"
