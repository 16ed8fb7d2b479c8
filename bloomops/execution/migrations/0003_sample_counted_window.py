from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("execution", "0002_snapshot_stale"),
    ]

    operations = [
        migrations.AddField(
            model_name="queuesample",
            name="counted_from",
            field=models.DateTimeField(null=True),
        ),
        migrations.AddField(
            model_name="queuesample",
            name="counted_to",
            field=models.DateTimeField(null=True),
        ),
    ]
