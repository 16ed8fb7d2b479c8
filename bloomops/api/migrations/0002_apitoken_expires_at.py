from django.db import migrations, models

# Tokens made before expiry existed get the default lifetime from their creation.
BACKFILL = "UPDATE bloomops_api_apitoken SET expires_at = created_at + interval '90 days'"


class Migration(migrations.Migration):
    dependencies = [("bloomops_api", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(null=True),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(),
        ),
    ]
