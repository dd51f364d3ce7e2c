"""URL routes: the admin is the operators' and auditors' interface."""

from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

admin.site.site_header = "RelayOps"
admin.site.site_title = "RelayOps admin"
admin.site.index_title = "Operations"

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("admin/", admin.site.urls),
]
