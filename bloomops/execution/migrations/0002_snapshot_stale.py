from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("execution", "0001_statistics"),
    ]

    operations = [
        migrations.AddField(
            model_name="queuesnapshot",
            name="stale",
            field=models.BooleanField(default=False),
        ),
    ]
