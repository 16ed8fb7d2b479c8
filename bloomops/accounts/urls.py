from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import path, reverse_lazy

from bloomops.accounts.signatures import CountedPasswordChangeView

urlpatterns = [
    path(
        "login/",
        login_not_required(auth_views.LoginView.as_view(redirect_authenticated_user=True)),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # A person's own password, asked for the current one (Django's validators apply; their
    # other sessions end, as the session hash changes).
    path("password/", CountedPasswordChangeView.as_view(
        template_name="registration/password_change.html",
        success_url=reverse_lazy("password_change_done")), name="password_change"),
    path("password/done/", auth_views.PasswordChangeDoneView.as_view(
        template_name="registration/password_change_done.html"), name="password_change_done"),
]
