"""Django's createsuperuser, recorded: the account made from a shell is kept on its page
like one an admin made, its password given from the command line (RULES.md#approvals)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import createsuperuser

from bloomops.accounts.profiles import made_from_command_line


class Command(createsuperuser.Command):
    help = createsuperuser.Command.help + " Recorded on the person's page."

    def handle(self, *args, **options):
        users = get_user_model()._default_manager.db_manager(options["database"])
        before = set(users.values_list("pk", flat=True))
        said = super().handle(*args, **options)
        for user in users.exclude(pk__in=before):
            made_from_command_line(user)
        return said
