"""Memberships, users and groups: superusers grant tenants here or on the user page.

Like every admin of the site, these lists accept only their declared filters, search and ordering.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group

from relayops.errors import InvalidInputError
from tenancy.admin_base import DeclaredLookupsOnly, TenantFilter, restrict_lookups
from tenancy.models import Membership
from tenancy.names import validate_tenant


class MembershipForm(forms.ModelForm):
    class Meta:
        model = Membership
        fields = ["user", "tenant"]

    def clean_tenant(self) -> str:
        try:
            return validate_tenant(self.cleaned_data["tenant"])
        except InvalidInputError as exc:
            raise forms.ValidationError(str(exc)) from exc


class MembershipInline(admin.TabularInline):
    model = Membership
    form = MembershipForm
    extra = 0
    fields = ["tenant", "created_at"]
    readonly_fields = ["created_at"]


@admin.register(Membership)
class MembershipAdmin(DeclaredLookupsOnly, admin.ModelAdmin):
    """Superusers grant tenants here or on the user page; no role has permissions on memberships."""

    form = MembershipForm
    list_display = ["user", "tenant", "created_at"]
    list_filter = [TenantFilter]
    list_select_related = ["user"]
    search_fields = ["user__username", "=tenant"]
    autocomplete_fields = ["user"]


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class RelayOpsUserAdmin(DeclaredLookupsOnly, UserAdmin):
    inlines = [*UserAdmin.inlines, MembershipInline]


restrict_lookups(admin.site, Group)
