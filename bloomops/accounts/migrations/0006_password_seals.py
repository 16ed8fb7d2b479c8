"""Every account's password hash as it is now is sealed (accounts/password_seals.py): from
here on, a hash written into auth_user outside bloomops signs nobody in."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def seal_every_account(apps, schema_editor):
    from bloomops.accounts.password_seals import mac

    User = apps.get_model("auth", "User")
    PasswordSeal = apps.get_model("accounts", "PasswordSeal")
    PasswordSeal.objects.bulk_create([
        PasswordSeal(user_id=pk, mac=mac(pk, username, password))
        for pk, username, password in User.objects.values_list("pk", "username", "password")
    ], ignore_conflicts=True)


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0005_stored_sessions'),
        ('auth', '0012_alter_user_first_name_max_length'),
    ]

    operations = [
        migrations.CreateModel(
            name='PasswordSeal',
            fields=[
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='password_seal', serialize=False, to=settings.AUTH_USER_MODEL)),
                ('mac', models.CharField(max_length=64)),
            ],
        ),
        migrations.RunPython(seal_every_account, migrations.RunPython.noop),
    ]
