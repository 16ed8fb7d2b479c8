"""Django's createsuperuser, recorded: the account made from a shell is kept on its page
like one an admin made, its password given from the command line (RULES.md#approvals). Held
to what the People page asks of a new account: a username unique in any case and in ASCII
(one that reads as another person's signs as them), and, given without a prompt, a password
the lab's validators accept (Django checks it only when it prompts)."""

from __future__ import annotations

import os

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import createsuperuser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from bloomops.accounts.profiles import made_from_command_line, username_problem


class Command(createsuperuser.Command):
    help = createsuperuser.Command.help + " Recorded on the person's page."

    def _validate_username(self, username, verbose_field_name, database):
        return (super()._validate_username(username, verbose_field_name, database)
                or username_problem(username, get_user_model()))

    def handle(self, *args, **options):
        users = get_user_model()._default_manager.db_manager(options["database"])
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        if not options["interactive"] and password is not None:
            username = options[users.model.USERNAME_FIELD] or os.environ.get(
                "DJANGO_SUPERUSER_" + users.model.USERNAME_FIELD.upper(), "")
            try:
                validate_password(password, users.model(username=username))
            except ValidationError as err:
                raise CommandError("; ".join(err.messages)) from None
        before = set(users.values_list("pk", flat=True))
        said = super().handle(*args, **options)
        for user in users.exclude(pk__in=before):
            made_from_command_line(user)
        return said
