"""Webhook endpoints in the admin, and the redelivery of parked outbox events.

An operator adds an endpoint for one of their tenants (URL, topics); its secret is generated and shown
once, on the page that answers the save, and never again: the change page shows only its last
characters. "Give a new secret" replaces a lost or leaked one, shown once the same way. Endpoints
are never deleted here, only deactivated, so their deliveries stay on the record.

The outbox page gains "Redeliver parked events" (permission ``pipeline.redeliver_outboxevent``),
which goes through ``webhooks.services.redeliver_parked``: audited, tenant-scoped, a no-op on an
event that is not parked.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from dlq.audit import MAX_REASON
from pipeline.admin import OutboxEventAdmin
from pipeline.models import OutboxEvent
from relayops.errors import InvalidInputError
from tenancy.admin_base import AgeFilter, TenantFilter, TenantScopedMixin, counted
from tenancy.models import Membership
from tenancy.services import tenants_of
from webhooks import services
from webhooks.models import TOPICS, WebhookEndpoint

TOPIC_CHOICES = [(topic, topic) for topic in TOPICS]


class EndpointForm(forms.ModelForm):
    """URL, topics and state; the tenant only when adding. The secret is never a field."""

    topics = forms.MultipleChoiceField(choices=TOPIC_CHOICES, widget=forms.CheckboxSelectMultiple)
    url = forms.CharField(max_length=2000, widget=forms.URLInput(attrs={"size": 80}),
                          help_text="http or https. Loopback, private, link-local and metadata addresses are refused "
                                    "unless the settings allow them.")

    class Meta:
        model = WebhookEndpoint
        fields = ["url", "topics", "active"]

    def clean_url(self) -> str:
        from webhooks import targets

        url = self.cleaned_data["url"]
        try:
            targets.check(url)
        except InvalidInputError as exc:
            raise forms.ValidationError(f"Refused: this URL {exc.problem}.") from exc
        return url.strip()


def _tenant_choices(request: HttpRequest) -> list[tuple[str, str]]:
    tenants = tenants_of(request.user)
    names = tenants if tenants is not None else set(Membership.objects.values_list("tenant", flat=True).distinct())
    return [(name, name) for name in sorted(names)]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(TenantScopedMixin, admin.ModelAdmin):
    form = EndpointForm
    list_display = ["endpoint", "tenant", "topic_list", "active", "secret_shown", "undelivered", "created_at"]
    list_filter = [TenantFilter, "active", AgeFilter]
    ordering = ["-id"]
    actions = ["give_new_secret"]
    readonly_fields = ["tenant", "secret_shown", "secret_set_at", "created_at", "created_by"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookEndpoint]:
        return super().get_queryset(request).annotate(
            owed=Count("deliveries", filter=Q(deliveries__delivered_at__isnull=True))
        )

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is None:  # adding: the tenant is one of the user's
            form = type("AddEndpointForm", (form,), {"tenant": forms.ChoiceField(choices=_tenant_choices(request))})
        return form

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj is not None else []

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["tenant", "url", "topics", "active"]
        return ["tenant", "url", "topics", "active", "secret_shown", "secret_set_at", "created_at", "created_by"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("webhooks.configure_webhookendpoint")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("webhooks.configure_webhookendpoint")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # deactivate instead: the deliveries stay on the record

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            services.change_endpoint(obj, url=data["url"], topics=data["topics"], active=data["active"])
            return
        if data["tenant"] not in {name for name, _ in _tenant_choices(request)}:
            raise PermissionDenied
        made = services.create_endpoint(data["tenant"], data["url"], data["topics"], active=data["active"],
                                        by=request.user.get_username())
        obj.pk = made.endpoint.pk
        obj.refresh_from_db()  # the admin's history and the answer page speak of the saved row
        request._webhook_secret = made  # type: ignore[attr-defined]  # shown by response_add, once

    def response_add(self, request: HttpRequest, obj: WebhookEndpoint, post_url_continue: str | None = None) -> HttpResponse:
        made = getattr(request, "_webhook_secret", None)
        if made is None:
            return super().response_add(request, obj, post_url_continue)
        return self._show_secrets(request, [made], "Webhook endpoint added")

    def _show_secrets(self, request: HttpRequest, made: list[services.NewSecret], title: str) -> HttpResponse:
        """The one page that shows secrets: not cached, not kept anywhere, never shown again."""
        context = {**self.admin_site.each_context(request), "title": title, "opts": self.opts, "made": made}
        request.current_app = self.admin_site.name
        response = TemplateResponse(request, "admin/webhooks/webhookendpoint/secret_once.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Give the selected endpoints new secrets", permissions=["change"])
    def give_new_secret(self, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]) -> HttpResponse | None:
        if not self.has_change_permission(request):
            raise PermissionDenied
        rows = list(queryset[:20])
        if not rows or len(rows) > 10:
            self.message_user(request, "Select between 1 and 10 endpoints.", messages.ERROR)
            return None
        if request.POST.get("post") != "yes":
            context = {**self.admin_site.each_context(request), "title": "Give new secrets", "opts": self.opts,
                       "objects": rows, "form": forms.Form(), "action": "give_new_secret",
                       "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME, "media": self.media}
            request.current_app = self.admin_site.name
            return TemplateResponse(request, "admin/webhooks/webhookendpoint/new_secret_confirmation.html", context)
        return self._show_secrets(request, [services.new_secret(row) for row in rows], "New webhook secrets")

    @admin.display(description="endpoint", ordering="url")
    def endpoint(self, obj: WebhookEndpoint) -> str:
        return obj.display_url

    @admin.display(description="topics")
    def topic_list(self, obj: WebhookEndpoint) -> str:
        return ", ".join(obj.topics)

    @admin.display(description="secret")
    def secret_shown(self, obj: WebhookEndpoint) -> str:
        return f"•••••• {obj.secret_hint} (shown once, when it was made)"

    @admin.display(description="owed events")
    def undelivered(self, obj: WebhookEndpoint) -> int:
        return getattr(obj, "owed", 0)


class RedeliverForm(forms.Form):
    reason = forms.CharField(
        max_length=MAX_REASON, required=False, strip=True, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Why (the receiver was fixed, ...). Kept in the audit entry with your name.",
    )


class OutboxEventRedeliveryAdmin(OutboxEventAdmin):
    actions = ["redeliver"]

    def has_redeliver_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("pipeline.redeliver_outboxevent")

    @admin.action(description="Redeliver selected parked events", permissions=["redeliver"])
    def redeliver(self, request: HttpRequest, queryset: QuerySet[OutboxEvent]) -> HttpResponse | None:
        if not self.has_redeliver_permission(request):  # re-checked on the confirming POST
            raise PermissionDenied
        confirmed = self.confirm_action(
            request, queryset, action="redeliver", title="Redeliver parked events",
            template="admin/pipeline/outboxevent/redeliver_confirmation.html", form_class=RedeliverForm,
        )
        if isinstance(confirmed, HttpResponse) or confirmed is None:
            return confirmed
        chosen = list(queryset.order_by("pk"))
        done = sum(services.redeliver_parked(event, operator=request.user, reason=confirmed.cleaned_data["reason"])
                   for event in chosen)
        if done:
            self.message_user(request, f"Redelivering {counted(done, 'parked event')}: the relay sends them again now.",
                              messages.SUCCESS)
        if len(chosen) > done:
            self.message_user(request, f"{counted(len(chosen) - done, 'event')} not parked: left as they were.",
                              messages.WARNING)
        return None


admin.site.unregister(OutboxEvent)
admin.site.register(OutboxEvent, OutboxEventRedeliveryAdmin)
