"""Meta-tests guarding the conventions: migrations, states, admin actions, module docstrings."""

from __future__ import annotations

import ast
from io import StringIO
from pathlib import Path

import pytest
from django.contrib import admin
from django.core.management import call_command

from pipeline.models import Job
from pipeline.states import TRANSITIONS, JobStatus

ROOT = Path(__file__).resolve().parents[2]
APP_DIRS = ("relayops", "tenancy", "pipeline", "dlq", "review", "controls", "ingest", "webhooks", "console", "demo")


def _sources():
    for app in APP_DIRS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


@pytest.mark.django_db
def test_models_and_migrations_agree():
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)


def test_every_state_is_in_the_transition_table():
    assert set(TRANSITIONS) == set(JobStatus)
    for targets in TRANSITIONS.values():
        assert targets <= set(JobStatus)


def test_the_status_column_is_guarded_by_a_check_constraint():
    names = {constraint.name for constraint in Job._meta.constraints}
    assert "job_status_valid" in names


def test_every_admin_action_declares_permissions():
    undeclared = []
    for model, model_admin in admin.site._registry.items():
        for action in model_admin.actions or ():
            func = getattr(model_admin, action) if isinstance(action, str) else action
            if not getattr(func, "allowed_permissions", None):
                undeclared.append(f"{model.__name__}.{getattr(func, '__name__', action)}")
    assert undeclared == []


def test_no_admin_offers_delete_selected_on_pipeline_rows():
    site_actions = dict(admin.site.actions)
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label in ("pipeline", "dlq"):
            assert model_admin.has_delete_permission.__qualname__ != "ModelAdmin.has_delete_permission" or (
                "delete_selected" not in site_actions
            ), f"{model.__name__} admin can delete"


def test_every_module_opens_with_a_docstring():
    missing = [
        str(path.relative_to(ROOT))
        for path in _sources()
        if path.name != "__init__.py" and path.stat().st_size and ast.get_docstring(ast.parse(path.read_text())) is None
    ]
    assert missing == []
