"""ApiToken now belongs to accounts (accounts migration 0007); its table stays as it is."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("bloomops_api", "0003_keyed_token_digests"),
        ("accounts", "0007_api_tokens"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ApiToken")],
            database_operations=[],
        ),
    ]
