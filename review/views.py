"""The review page in the admin: read a result beside its document, then approve, reject or correct it,
and walk the queue of pending reviews oldest first.

URLs (under the admin, added by ``console.site``):

* ``review/next/``: the oldest pending review of the user's tenants (or the review list when none);
* ``review/<id>/``: the review page;
* ``review/<id>/next/``: the pending review after this one;
* ``review/<id>/decide/`` (POST): the decision; then on to the next pending review.

Each needs the view permission on reviews and ``review.view_document_content`` (the page shows
content): without them, 403. A review outside the user's tenants is a 404, like a missing one. Deciding
also needs ``pipeline.decide_review``. Every decision is written by ``review.decisions.decide`` and,
in the same transaction, Django's admin history (``LogEntry``) of the review.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from dlq.audit import MAX_REASON
from pipeline.models import Review
from review.decisions import CONTENT_PERMISSION, DECIDE_PERMISSION, decide
from review.errors import AlreadyDecidedError, InvalidInputError, NoSuchReviewError, NotAllowedError
from review.fields import CorrectionRefused, flatten
from review.models import Decision
from review.page import ReviewPage, load, next_pending, reviews_of

VIEW_PERMISSION = "pipeline.view_review"
FIELD_PREFIX = "field:"
DONE = {Decision.APPROVE: "Approved", Decision.REJECT: "Rejected", Decision.CORRECT: "Corrected and approved"}


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=Decision.choices)
    reason = forms.CharField(max_length=MAX_REASON, required=False, strip=True)


def _may_open(request: HttpRequest) -> None:
    if not (request.user.has_perm(VIEW_PERMISSION) and request.user.has_perm(CONTENT_PERMISSION)):
        raise PermissionDenied


def _review(request: HttpRequest, review_id: int) -> Review:
    """The review if it is in the user's tenants; a 404 otherwise, the same as for a missing one."""
    review = reviews_of(request.user).select_related("job").filter(pk=review_id).first()
    if review is None:
        raise Http404("No such review.")
    return review


class ReviewViews:
    def __init__(self, site: admin.AdminSite) -> None:
        self.site = site

    def urls(self) -> list[URLPattern]:
        wrap = self.site.admin_view
        return [
            path("review/next/", wrap(self.first_view), name="review_next"),
            path("review/<int:review_id>/", wrap(self.page_view), name="review_page"),
            path("review/<int:review_id>/next/", wrap(self.next_view), name="review_next_after"),
            path("review/<int:review_id>/decide/", wrap(self.decide_view), name="review_decide"),
        ]

    def first_view(self, request: HttpRequest) -> HttpResponse:
        _may_open(request)
        return _only(request, "GET") or _go_next(request, None)

    def next_view(self, request: HttpRequest, review_id: int) -> HttpResponse:
        _may_open(request)
        return _only(request, "GET") or _go_next(request, _review(request, review_id))

    def page_view(self, request: HttpRequest, review_id: int) -> HttpResponse:
        _may_open(request)
        return _only(request, "GET") or self._render(request, load(_review(request, review_id)))

    def _render(self, request: HttpRequest, page: ReviewPage, *, status: int = 200,
                errors: dict[str, str] | None = None, submitted: dict[str, str] | None = None,
                form_error: str = "", reason: str = "") -> HttpResponse:
        context = {
            **self.site.each_context(request), "opts": Review._meta, "page": page, "review": page.review,
            "title": f"Review of {page.review.idempotency_key}",
            "can_decide": page.pending and request.user.has_perm(DECIDE_PERMISSION),
            "invoice": page.invoice(submitted, errors), "form_error": form_error, "reason": reason,
            "field_prefix": FIELD_PREFIX,
        }
        request.current_app = self.site.name
        return TemplateResponse(request, "admin/review/page.html", context, status=status)

    def decide_view(self, request: HttpRequest, review_id: int) -> HttpResponse:
        _may_open(request)
        if not request.user.has_perm(DECIDE_PERMISSION):
            raise PermissionDenied
        refused = _only(request, "POST")
        if refused:
            return refused
        page = load(_review(request, review_id))
        review = page.review
        form = DecisionForm(request.POST)
        submitted = {key[len(FIELD_PREFIX):]: str(request.POST.get(key, "")) for key in request.POST
                     if key.startswith(FIELD_PREFIX)}
        reason = str(request.POST.get("reason", ""))[:MAX_REASON]

        def again(problem: str, errors: dict[str, str] | None = None) -> HttpResponse:
            """The page again with the reviewer's values and what was wrong: nothing was decided."""
            return self._render(request, page, status=400, errors=errors, submitted=submitted, reason=reason,
                                form_error=problem)

        if not form.is_valid():
            return again("Nothing was decided. " + "; ".join(
                f"{name}: {' '.join(str(e) for e in errs)}" for name, errs in form.errors.items()))
        decision = Decision(form.cleaned_data["decision"])
        extracted = flatten(page.fields)
        changed = {path: value for path, value in submitted.items() if extracted.get(path) != value}
        if decision == Decision.APPROVE and changed:
            return again("Nothing was decided: you changed fields. To approve with your changes choose "
                         "\u201cCorrect and approve\u201d; to approve as extracted, undo them.")
        try:
            with transaction.atomic():
                row = decide(review.pk, decision, request.user, reason=form.cleaned_data["reason"],
                             values=changed if decision == Decision.CORRECT else None)
                fields = f" ({', '.join(row.corrected_fields)})" if row.diff else ""
                history = f"{DONE[decision]}{fields} on the review page."  # field names, never values
                self.site.get_model_admin(Review).log_change(request, review, history)
        except CorrectionRefused as bad:
            return again("Nothing was decided. " + _refusal(bad), bad.problems)
        except InvalidInputError as invalid:
            return again(f"Nothing was decided: {invalid.problem}.")
        except AlreadyDecidedError:
            messages.error(request, "Nothing was done: this review was already decided, and a decision is final.")
            return HttpResponseRedirect(reverse("admin:review_page", args=[review.pk]))
        except NoSuchReviewError:
            raise Http404("No such review.") from None
        except NotAllowedError:
            raise PermissionDenied from None
        messages.success(request, f"{DONE[decision]} {review.idempotency_key}.")
        return _go_next(request, review)


def _only(request: HttpRequest, method: str) -> HttpResponse | None:
    """A 405 for any other method (a GET of the decide URL never decides); None when it is ``method``."""
    allowed = [method, "HEAD"] if method == "GET" else [method]
    return None if request.method in allowed else HttpResponseNotAllowed(allowed)


def _go_next(request: HttpRequest, after: Review | None) -> HttpResponse:
    following = next_pending(request.user, after)
    if following is None:
        messages.info(request, "No other review is pending in your tenants.")
        return HttpResponseRedirect(reverse("admin:pipeline_review_changelist") + "?status__exact=pending")
    return HttpResponseRedirect(reverse("admin:review_page", args=[following.pk]))


def _refusal(refused: CorrectionRefused) -> str:
    parts = []
    if refused.problems:
        parts.append("Check the fields marked below.")
    if refused.rules:
        parts.append("The corrected values break the rule" + ("s " if len(refused.rules) > 1 else " ")
                     + ", ".join(refused.rules) + ".")
    return " ".join(parts)
