"""Only the declared list filters, the search box and the ordering reach a list's query.

Django's changelist applies any querystring lookup on a plain column, so ``?payload__text__startswith=I``
answered 1 or 0 rows: a document read out one character at a time, and a scan of the whole table.
Every lookup on every field of every registered model, JSON key paths and one hop of relations
included, is now refused (400) whatever its value, for operators, auditors and superusers alike, on
RelayOps' admins, Django's, django-q2's and django-axes'. A declared filter's own parameters, given
nonsense, never make a 500.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core import checks
from django.db.models import JSONField, Model
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import HttpResponse, HttpResponseForbidden
from django.template.response import TemplateResponse
from django.test import Client, RequestFactory
from django.urls import resolve, reverse
from django_q.models import Schedule, Success

from dlq.services import reprocess_from_dlq
from pipeline.errors import ReprocessRateLimitedError
from tenancy.admin_base import DeclaredLookupsOnly
from tests.admin import factories
from tests.admin.conftest import login

pytestmark = pytest.mark.django_db

SUFFIXES = ("", "__exact", "__startswith", "__icontains", "__regex", "__gt")
JSON_KEYS = ("text", "vendor", "total", "invoice_number", "simulate")
# A value that matches the seeded rows (every text starts with "INVOICE" or holds an "a"; every id is
# above 0), and one that matches nothing: a permissive list answers them differently.
MATCHING, MISSING = "I", "zz-no-such-value-zz"
VALUES = {"": (MATCHING, MISSING), "__exact": (MATCHING, MISSING), "__startswith": (MATCHING, MISSING),
          "__icontains": ("a", MISSING), "__regex": ("^I", "^zz-no"), "__gt": ("0", "~~~~")}
BOGUS = ("bogus", "\x00", "9" * 40, "2026-13-45 25:61", "-1")


def registered() -> list[tuple[type[Model], object]]:
    return sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)


def changelist(model: type[Model]) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def lookups(model: type[Model]) -> Iterator[tuple[str, str]]:
    """(lookup, suffix) for every field, every JSON key path, and every field one relation away."""
    for field in model._meta.get_fields():
        for suffix in SUFFIXES if not field.is_relation else ("", "__gt"):
            yield f"{field.name}{suffix}", suffix
        if isinstance(field, JSONField):
            for key in JSON_KEYS:
                yield f"{field.name}__{key}__startswith", "__startswith"
                yield f"{field.name}__{key}", ""
        if field.is_relation and field.related_model is not None:
            for remote in field.related_model._meta.get_fields():
                if not remote.is_relation:
                    yield f"{field.name}__{remote.name}__startswith", "__startswith"
                if isinstance(remote, JSONField):
                    yield f"{field.name}__{remote.name}__text__startswith", "__startswith"


@pytest.fixture
def rows(settings):
    """A row on every list: dead letters (one reprocessed, one refused), a result and its review,
    a django-q2 task and schedule, a failed sign-in."""
    settings.RELAYOPS = {**settings.RELAYOPS, "REPROCESS_LIMIT": 1}
    dead = factories.dead_letter("acme", "broken-1")
    factories.succeeded("acme", "invoice-1")
    factories.succeeded("globex", "invoice-2")
    refused = factories.dead_letter("acme", "broken-2")
    reprocess_from_dlq(dead.pk, "script", reason="first")
    with pytest.raises(ReprocessRateLimitedError):
        reprocess_from_dlq(refused.pk, "script", reason="second")
    Schedule.objects.create(name="a-schedule", func="pipeline.runtime.tasks.sweep", schedule_type=Schedule.MINUTES,
                            minutes=1, repeats=-1)  # django-q2's own pages get a row to filter
    Success.objects.create(id="a" * 32, name="task-a", func="pipeline.runtime.tasks.drain", started="2026-03-01T09:00Z",
                           stopped="2026-03-01T09:00Z", success=True, group="relayops", cluster="relayops")
    Client().post("/admin/login/", {"username": "olivia", "password": "Invoice-guess-1"}, REMOTE_ADDR="10.0.0.9")


def users() -> dict[str, Model]:
    return {
        "operator": factories.member("olivia", "acme"),
        "auditor": factories.member("audrey", "acme", "globex", auditor=True),
        "superuser": factories.superuser(),
    }


def test_every_registered_admin_accepts_declared_lookups_only():
    assert all(isinstance(model_admin, DeclaredLookupsOnly) for _, model_admin in registered())
    assert not [m for m in checks.run_checks(tags=[checks.Tags.admin]) if m.id == "relayops.E010"]


def test_an_admin_without_the_restriction_fails_the_system_check():
    class Permissive(admin.ModelAdmin):
        pass

    site_registry = admin.site._registry
    model = Success
    original = site_registry[model]
    site_registry[model] = Permissive(model, admin.site)
    try:
        errors = [m for m in checks.run_checks(tags=[checks.Tags.admin]) if m.id == "relayops.E010"]
    finally:
        site_registry[model] = original
    assert [e.obj for e in errors] == [Permissive]


def ask(user: Model, url: str, params: dict[str, str] | None = None) -> HttpResponse:
    """The admin's own view for ``url``, as ``user``: the test client's answer without its middleware
    (sessions, CSRF, CSP), whose queries would make these thousands of requests take minutes."""
    request = RequestFactory().get(url, params or {})
    request.user = user  # the same object each time: its permissions and tenants are cached on it
    match = resolve(request.path_info)
    try:
        response = match.func(request, *match.args, **match.kwargs)
    except PermissionDenied:
        return HttpResponseForbidden()
    return response.render() if isinstance(response, TemplateResponse) else response


def readers(people: dict[str, Model], root: Model, url: str) -> dict[str, Model]:
    """Those of ``people`` who may open the list at ``url``; the superuser where none may."""
    return {who: user for who, user in people.items() if ask(user, url).status_code == 200} or {"superuser": root}


def test_no_lookup_outside_the_declared_filters_reaches_any_list_for_any_role(rows):
    """Operators and auditors on every list they may open; the superuser on the others (Django's,
    django-q2's, django-axes')."""
    people = users()
    root = people.pop("superuser")
    leaks, tried = [], 0
    for model, model_admin in registered():
        url = changelist(model)
        declared = declared_parameters(model, model_admin, root)
        for who, user in readers(people, root, url).items():
            for lookup, suffix in lookups(model):
                if lookup in declared:
                    continue
                answers = [ask(user, url, {lookup: value}) for value in VALUES[suffix]]
                tried += 1
                if any(a.status_code != 400 for a in answers) or answers[0].content != answers[1].content:
                    leaks.append(f"{who} {url}?{lookup}: {[a.status_code for a in answers]}")
    assert tried > 1200, tried  # every role opened its lists, and every model had its lookups tried
    assert leaks == []


def test_the_reported_reads_are_refused_for_an_auditor(rows):
    auditor = login(users()["auditor"])
    for url, lookup in (("/admin/pipeline/job/", "payload__text__startswith"),
                        ("/admin/pipeline/result/", "data__vendor__startswith"),
                        ("/admin/pipeline/result/", "data__total__startswith"),
                        ("/admin/pipeline/job/", "payload__icontains")):
        for value in ("I", "INVOICE NO: INV-", "zzzz"):
            assert auditor.get(url, {"q": "acme:invoice-1:v1", lookup: value}).status_code == 400, (url, lookup)


def declared_parameters(model: type[Model], model_admin: object, user: object) -> set[str]:
    """Every parameter the admin's declared filters (and date hierarchy) consume."""
    request = RequestFactory().get(changelist(model))
    request.user = user
    cl: ChangeList = model_admin.get_changelist_instance(request)  # type: ignore[attr-defined]
    names = {name for spec in cl.filter_specs for name in spec.expected_parameters()}
    hierarchy = getattr(model_admin, "date_hierarchy", None)
    return names | ({f"{hierarchy}__{part}" for part in ("year", "month", "day")} if hierarchy else set())


def test_declared_filters_search_paging_and_ordering_given_nonsense_never_fail(rows):
    people = users()
    root = people.pop("superuser")
    failures, tried = [], 0
    for model, model_admin in registered():
        url = changelist(model)
        parameters = declared_parameters(model, model_admin, root) | {"q", "p", "o", "e", "_facets", "all"}
        for who, user in list(readers(people, root, url).items())[:1]:  # operators and auditors share filters
            for name in sorted(parameters):
                for value in BOGUS:
                    tried += 1
                    try:
                        status = ask(user, url, {name: value}).status_code
                    except SuspiciousOperation:
                        status = 400  # what Django's handler answers to it
                    if status not in (200, 302, 400):
                        failures.append(f"{who} {url}?{name}={value!r}: {status}")
    assert tried > 400, tried
    assert failures == []


def test_a_declared_filter_still_filters(rows):
    operator = login(users()["operator"])
    response = operator.get("/admin/pipeline/job/", {"status__exact": "dead_lettered"})
    assert response.status_code == 200
    assert {job.document_id for job in response.context["cl"].result_list} == {"broken-1", "broken-2"}
    assert operator.get("/admin/pipeline/job/", {"tenant": "acme", "age": "1h"}).status_code == 200


def test_a_change_page_with_a_nul_in_its_id_is_a_404_on_every_admin(rows):
    root = login(users()["superuser"])
    for model, _ in registered():
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=["1\x00"])
        assert root.get(url).status_code in (302, 404), url
