"""The API's routes, mounted at ``/api/v1/`` by relayops.urls."""

from django.urls import path

from ingest.api import api

urlpatterns = [path("", api.urls)]
