"""Each stored token's sha256 becomes its HMAC under the secret key
(bloomops/accounts/tokens.py): tokens given before keep working, and a row someone writes
with a bare sha256 authenticates nobody."""

from django.db import migrations

from bloomops.accounts.tokens import keyed


def key_digests(apps, schema_editor):
    ApiToken = apps.get_model("bloomops_api", "ApiToken")
    for row in ApiToken.objects.all().only("id", "token_hash"):
        ApiToken.objects.filter(pk=row.pk).update(token_hash=keyed(row.token_hash))


class Migration(migrations.Migration):

    dependencies = [
        ("bloomops_api", "0002_apitoken_expires_at"),
    ]

    operations = [
        migrations.RunPython(key_digests, migrations.RunPython.noop),
    ]
