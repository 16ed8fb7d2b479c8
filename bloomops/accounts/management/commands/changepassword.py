"""Django's changepassword, recorded: a password set from a shell is one someone else knows,
as an admin's is (RULES.md#approvals), so it is kept on the person's page and counts in
who set up whom; the person's sessions and API tokens end, as on the console."""

from __future__ import annotations

import getpass

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import changepassword

from bloomops.accounts.profiles import password_from_command_line


class Command(changepassword.Command):
    help = (changepassword.Command.help
            + " Recorded on the person's page as given from the command line.")

    def handle(self, *args, **options):
        said = super().handle(*args, **options)
        username = options["username"] or getpass.getuser()  # as Django's own does
        user = get_user_model()._default_manager.using(options["database"]).get(
            **{get_user_model().USERNAME_FIELD: username})
        password_from_command_line(user)
        return said
