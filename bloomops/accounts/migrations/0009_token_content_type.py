"""The API token's content type follows the model to accounts (migration 0007 moved only
Django's record of it): a database migrated before keeps one type for tokens, not a stale
one beside a new one."""

from django.db import migrations


def follow_the_model(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    stale = content_type.objects.filter(app_label="bloomops_api", model="apitoken")
    if content_type.objects.filter(app_label="accounts", model="apitoken").exists():
        stale.delete()  # with its permissions, which name a model that is not there
    else:
        stale.update(app_label="accounts")


def back(apps, schema_editor):
    apps.get_model("contenttypes", "ContentType").objects.filter(
        app_label="accounts", model="apitoken").update(app_label="bloomops_api")


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0008_token_given_by"),
        ("bloomops_api", "0004_api_tokens_moved_to_accounts"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(follow_the_model, back)]
