from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm


class SignInForm(AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "demo_password": (
            "This account still uses the public demo password, which is refused when "
            "DEBUG is off. Ask an administrator to set a real password."
        ),
    }

    def confirm_login_allowed(self, user) -> None:
        super().confirm_login_allowed(user)
        if not settings.DEBUG and user.check_password(settings.DEMO_PASSWORD):
            raise forms.ValidationError(self.error_messages["demo_password"], code="demo_password")
