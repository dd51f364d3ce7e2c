"""The cluster glue refuses to start, naming django-q2's version, when what it wraps is missing."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django_q import cluster as django_q_cluster

from pipeline.runtime import cluster


def test_the_installed_django_q2_has_what_the_wrappers_need():
    cluster.check_django_q()


def test_a_missing_method_is_a_clear_error_at_start(monkeypatch):
    monkeypatch.delattr(django_q_cluster.Sentinel, "stop")
    with pytest.raises(ImproperlyConfigured, match=r"django-q2 1\.11\.\d+ does not have \(Sentinel\.stop\)"):
        cluster.check_django_q()


def test_a_missing_attribute_is_a_clear_error_at_start(monkeypatch):
    monkeypatch.setitem(cluster.USED_ATTRIBUTES, django_q_cluster.Sentinel, ("pool", "no_such_queue"))
    with pytest.raises(ImproperlyConfigured, match=r"Sentinel\(\)\.no_such_queue"):
        cluster.check_django_q()
