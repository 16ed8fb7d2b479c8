from urllib.parse import urlsplit

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.urls import path, reverse_lazy
from django.views.decorators.http import require_GET

from bloomops.accounts.roles import roles_of
from bloomops.accounts.signatures import CountedPasswordChangeView


class LandingLoginView(auth_views.LoginView):
    """Signed in, a person at the bench (no role but worker_human) lands on My work, not on
    the supervisors' dashboard of dead letters and coverage; a ``next`` still wins."""

    redirect_authenticated_user = True

    def get_redirect_url(self) -> str:
        # a ``next`` back to this page would loop for someone signed in (Django raises,
        # a 500): it is no page to go to
        url = super().get_redirect_url()
        return "" if url and urlsplit(url).path == self.request.path else url

    def get_default_redirect_url(self) -> str:
        if roles_of(self.request.user) == {"worker_human"}:
            return resolve_url("my_work")
        return super().get_default_redirect_url()


@require_GET
def still_here(request: HttpRequest) -> HttpResponse:
    """"Stay signed in" on the warning before an idle sign-out: a request like any other,
    so it is activity (sessions.IdleSessionMiddleware); it answers nothing."""
    return HttpResponse(status=204)


urlpatterns = [
    path("still-here/", still_here, name="still_here"),
    path(
        "login/",
        login_not_required(LandingLoginView.as_view()),
        name="login",
    ),
    # signing out once the session has ended is done, not "not done: sign in first"
    path("logout/", login_not_required(auth_views.LogoutView.as_view()), name="logout"),
    # A person's own password, asked for the current one (Django's validators apply; their
    # other sessions end, as the session hash changes).
    path("password/", CountedPasswordChangeView.as_view(
        template_name="registration/password_change.html",
        success_url=reverse_lazy("password_change_done")), name="password_change"),
    path("password/done/", auth_views.PasswordChangeDoneView.as_view(
        template_name="registration/password_change_done.html"), name="password_change_done"),
]
