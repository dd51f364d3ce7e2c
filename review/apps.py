"""The review app: the review page of the admin, where an operator reads a result beside its document and decides."""

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    label = "review"
    verbose_name = "Review decisions"
