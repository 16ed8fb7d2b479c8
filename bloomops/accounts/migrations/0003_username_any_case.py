"""No two usernames that differ only in case (RULES.md#approvals: a username is who signs).
profiles.username_problem checks before it inserts; this index holds when two admins add
"ann" and "Ann" at the same instant. Where such names already exist the migration stops and
names them: the rule is the database's, or RULES.md would say what is not so."""

from django.db import migrations

INDEX = "bloomops_username_any_case"


def create(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT upper(username) FROM auth_user GROUP BY 1 HAVING count(*) > 1")
        clashes = [row[0] for row in cursor.fetchall()]
        if clashes:
            raise RuntimeError("Usernames differing only in case exist"
                               f" ({', '.join(clashes[:10])}): rename one of each (Django's"
                               " admin, or manage.py shell) and migrate again.")
        cursor.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {INDEX} ON auth_user"
                       " (upper(username))")


def drop(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_person_profiles"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create, drop)]
