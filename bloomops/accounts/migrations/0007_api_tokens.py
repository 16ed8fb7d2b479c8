"""API tokens move from the API app to accounts, so the People screen can give and revoke them
(the console may not import the API). Only Django's record of the model moves: the table keeps
its name and every token in it."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0006_password_seals"),
        ("bloomops_api", "0003_keyed_token_digests"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiToken",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True,
                                                   serialize=False, verbose_name="ID")),
                        ("name", models.CharField(blank=True, default="", max_length=100)),
                        ("prefix", models.CharField(db_index=True, max_length=16)),
                        ("token_hash", models.CharField(max_length=64, unique=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("expires_at", models.DateTimeField()),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        ("user", models.ForeignKey(
                            on_delete=django.db.models.deletion.CASCADE,
                            related_name="api_tokens", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={"db_table": "bloomops_api_apitoken", "ordering": ["id"]},
                ),
            ],
            database_operations=[],
        ),
    ]
