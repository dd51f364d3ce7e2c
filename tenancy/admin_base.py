"""The shared admin toolkit: every RelayOps admin page is built from these pieces.

Tenant scope (``TenantScopedMixin``), read-only rows with indexed search (an exact key, the start of
a document id) and estimated paging (``PipelineRowAdmin``), the confirmation page of an action
(``confirm_action``, which refuses forged or stale selections), the tenant and age filters, links to
a job and its document timeline, long identifiers cut in lists (``clipped``), and how durations and
counts read (``format_duration``, ``counted``).

Every list, change page, search, filter, action and autocomplete goes through ``get_queryset``, so
scoping it scopes them all; an object outside the user's tenants is a 404, like one that never
existed. An action POSTed by a user who is not offered it is a 403 and changes nothing. Only the
declared list filters, the search box and the ordering reach a list's query (``DeclaredLookupsOnly``):
any other querystring lookup is a 400, whatever its value.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ChangeList
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.db.models import Model, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from relayops.formatting import counted, format_duration
from relayops.logging import get_logger
from relayops.paging import EstimatedCountPaginator
from tenancy.models import Membership
from tenancy.names import TENANT_RE
from tenancy.services import scope, tenants_of

__all__ = [
    "AgeFilter", "DeclaredLookupsOnly", "PipelineRowAdmin", "TenantFilter", "TenantScopedMixin", "age_of",
    "clipped", "clipped_column", "counted", "format_duration", "job_link", "restrict_lookups", "timeline_link",
]

log = get_logger(__name__)

AGE_BUCKETS = {
    "1h": ("less than an hour", dt.timedelta(0), dt.timedelta(hours=1)),
    "1d": ("1 hour to 1 day", dt.timedelta(hours=1), dt.timedelta(days=1)),
    "7d": ("1 to 7 days", dt.timedelta(days=1), dt.timedelta(days=7)),
    "old": ("older than 7 days", dt.timedelta(days=7), None),
}


def age_of(since: dt.datetime | None) -> str:
    return format_duration(timezone.now() - since) if since else "-"


def clipped(text: str) -> str:
    """A long identifier cut to one line with an ellipsis in lists; the full value shows on hover."""
    return format_html('<span class="relayops-clip" title="{}">{}</span>', text, text)


def clipped_column(field: str, description: str) -> Callable[[Any, Any], str]:
    """A list column (an admin method) showing ``field`` cut to one line, whole on hover, sortable by it."""

    @admin.display(description=description, ordering=field)
    def column(model_admin: Any, obj: Any) -> str:
        return clipped(getattr(obj, field))

    return column


def timeline_link(job_id: int) -> str:
    return format_html('<a href="{}">timeline</a>', reverse("admin:pipeline_job_timeline", args=[job_id]))


def job_link(job: Any) -> str:
    """A link to a job's page labelled with its version (``v2``)."""
    url = reverse("admin:pipeline_job_change", args=[job.pk])
    return format_html('<a href="{}">v{}</a>', url, job.operation_version)


class TenantFilter(admin.SimpleListFilter):
    """Filter by tenant, offering only the user's tenants (superusers: every tenant with members).

    Never a distinct scan of the big table, and never another tenant's name.
    """

    title = "tenant"
    parameter_name = "tenant"

    def __init__(self, request: HttpRequest, params: Any, model: type[Model], model_admin: Any) -> None:
        self.field = getattr(model_admin, "tenant_field", "tenant")
        super().__init__(request, params, model, model_admin)

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        tenants = tenants_of(request.user)
        names = set(tenants if tenants is not None else Membership.objects.values_list("tenant", flat=True).distinct())
        if self.value():  # a filter with no choices is not applied at all: keep the chosen one
            names.add(str(self.value()))
        return [(name, name) for name in sorted(names)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{self.field: value}) if value else queryset


class AgeFilter(admin.SimpleListFilter):
    """Age buckets on the admin's ``age_field``: a range on an indexed timestamp, never a computation."""

    title = "age"
    parameter_name = "age"

    def __init__(self, request: HttpRequest, params: Any, model: Any, model_admin: Any) -> None:
        self.field = getattr(model_admin, "age_field", "created_at")
        super().__init__(request, params, model, model_admin)

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(key, label) for key, (label, _, _) in AGE_BUCKETS.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() not in AGE_BUCKETS:
            return queryset
        _, younger, older = AGE_BUCKETS[str(self.value())]
        now = timezone.now()
        queryset = queryset.filter(**{f"{self.field}__lte": now - younger})
        return queryset.filter(**{f"{self.field}__gt": now - older}) if older else queryset


class UndeclaredLookupError(DisallowedModelAdminLookup):
    """A list was asked to filter by a parameter none of its declared filters offers."""

    def __init__(self, parameters: list[str]) -> None:
        self.parameters = parameters
        super().__init__(f"This list cannot be filtered by: {', '.join(parameters)}.")


class DeclaredLookupsChangeList(ChangeList):
    """A changelist that applies no querystring lookup but those its declared list filters consume.

    Django applies any other parameter naming a local column as a filter (``?payload__text__startswith=``
    answers 1 or 0 rows: content read out a character at a time, and a scan of the whole table). Here
    such a parameter is refused before any query runs, whatever its value, so the answer is the same
    for a matching and a non-matching value.
    """

    def get_filters(self, request: HttpRequest) -> tuple[Any, ...]:
        given = set(self.get_filters_params())
        try:
            specs, has_filters, remaining, duplicates, active = super().get_filters(request)
        except OverflowError as exc:  # a date hierarchy's year=99999999999: Django lets it through
            raise IncorrectLookupParameters(exc) from exc
        undeclared = sorted(given & set(remaining))  # date_hierarchy's own bounds were not given
        if undeclared:
            raise UndeclaredLookupError(undeclared)
        return specs, has_filters, remaining, duplicates, active


def _refuse_nul(request: HttpRequest) -> None:
    """PostgreSQL cannot hold a NUL character in text: a parameter with one is a 400, never a 500."""
    if any("\x00" in key or any("\x00" in value for value in values) for key, values in request.GET.lists()):
        raise SuspiciousOperation("A query parameter contains a NUL character.")


class DeclaredLookupsOnly:
    """Only the declared list filters, the search box and the ordering reach a changelist's query.

    Every admin of the site has it: ours through ``TenantScopedMixin``; Django's, django-q2's and
    django-axes' through ``restrict_lookups`` (a system check refuses an admin without it).
    """

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return DeclaredLookupsChangeList

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        """Django's own rule (relations beyond the filters) is left to the stricter one of
        DeclaredLookupsChangeList: whatever no declared filter consumes is refused, in one way."""
        return True

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """A refused lookup is a 400 naming the parameters (never their values), logged in one line."""
        _refuse_nul(request)
        try:
            return super().changelist_view(request, extra_context)  # type: ignore[misc]
        except UndeclaredLookupError as refused:
            log.warning("admin.lookup_refused", path=request.path, user=request.user.get_username(),
                        parameters=refused.parameters)
            return HttpResponseBadRequest(
                f"{refused} Filter with the choices beside the list, the search box or the column headers.",
                content_type="text/plain; charset=utf-8",
            )

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        if "\x00" in object_id:
            return None  # no row has such a key; PostgreSQL would refuse to look
        return super().get_object(request, object_id, from_field)  # type: ignore[misc]


def restrict_lookups(site: admin.AdminSite, model: type[Model]) -> None:
    """Re-register ``model``'s admin (a third party's) with ``DeclaredLookupsOnly`` in front of it."""
    current = site.get_model_admin(model)
    if isinstance(current, DeclaredLookupsOnly):
        return
    restricted = type(type(current).__name__, (DeclaredLookupsOnly, type(current)), {"__module__": __name__})
    site.unregister(model)
    site.register(model, restricted)


class TenantScopedMixin(DeclaredLookupsOnly):
    """Narrow an admin to the user's tenants. ``tenant_field`` names the row's tenant column."""

    tenant_field = "tenant"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return scope(super().get_queryset(request), request.user, self.tenant_field)  # type: ignore[misc]

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is None:  # missing or another tenant's: the same answer, so existence is not confirmed
            raise Http404("No such object.")
        return obj


class PipelineRowAdmin(TenantScopedMixin, admin.ModelAdmin):
    """Tenant-scoped and read-only: rows change through services (the actions call them), never here.

    Search is served by indexes: exact on ``exact_search_fields``; with ``document_field`` set, a
    term also finds the documents whose id starts with it, and ``tenant:start`` those of one tenant
    (a btree with varchar_pattern_ops on the document id serves the prefix).
    """

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # a COUNT per filter choice over the whole table
    list_per_page = 50
    exact_search_fields: list[str] = []
    document_field = ""
    max_action_rows = 100

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term or not (self.exact_search_fields or self.document_field):
            return queryset, False
        match = Q()
        for field in self.exact_search_fields:
            match |= Q(**{field: term})
        if self.document_field:
            prefix = f"{self.document_field}__startswith"
            match |= Q(**{prefix: term})
            tenant, _, document = term.partition(":")
            if document and TENANT_RE.fullmatch(tenant):
                match |= Q(**{self.tenant_field: tenant, prefix: document})
        return queryset.filter(match), False

    def confirm_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *, action: str, title: str, template: str,
        form_class: type[forms.Form] = forms.Form, across: bool = False,
        extra_context: Callable[[QuerySet[Any]], dict[str, Any]] | None = None,
    ) -> forms.Form | HttpResponse | None:
        """delete_selected's shape: the first POST shows a confirmation page, the second acts.

        Returns the valid form once confirmed; otherwise the response to send (the page again, or
        None to go back to the list with a message). With ``across``, "select all N matching" is
        accepted however many rows match (the page shows the count and the first rows; the action
        then works through ``queryset``, the list's own filtered and scoped rows); without it, at
        most ``max_action_rows`` rows. ``extra_context(queryset)`` adds to the page (counts, warnings).
        """
        select_across = across and request.POST.get("select_across") == "1"
        rows = list(queryset[: self.max_action_rows + (0 if select_across else 1)])
        if len(rows) > self.max_action_rows and not select_across:
            self.message_user(request, f"Select at most {self.max_action_rows} rows for this action.", messages.ERROR)
            return None
        if self._unseen(request, rows):
            return None
        form = form_class(request.POST) if request.POST.get("post") == "yes" else form_class()
        if form.is_bound and form.is_valid():
            return form
        context = {
            **self.admin_site.each_context(request), "title": title, "opts": self.opts, "objects": rows,
            "form": form, "action": action, "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media + form.media, "select_across": select_across,
            "total": queryset.count() if select_across else len(rows),
            **(extra_context(queryset) if extra_context else {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, template, context)

    def _unseen(self, request: HttpRequest, rows: list[Any]) -> bool:
        """Tell the user, and stop, when selected rows are not theirs to see (a forged or stale selection:
        another tenant's ids, rows gone since the list was shown). Nothing is done then."""
        if request.POST.get("select_across") == "1":  # "select all": the rows are the list's own
            if not rows:
                self.message_user(request, "Nothing was done: the list has no rows to act on.", messages.ERROR)
            return not rows
        asked = {str(pk) for pk in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)}
        missing = len(asked - {str(row.pk) for row in rows})
        if not missing:
            return False
        self.message_user(request, (
            f"Nothing was done: {counted(missing, 'selected row')} {'is' if missing == 1 else 'are'} not in your "
            f"tenants or no longer exist{'s' if missing == 1 else ''}. Reload the list and select again."
        ), messages.ERROR)
        return True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if request.method == "POST":
            offered = self.get_actions(request)
            if any(name and name not in offered for name in request.POST.getlist("action")):
                raise PermissionDenied("This action is not offered to you.")
        return super().changelist_view(request, extra_context)
