"""Who gave each API token, from now on (accounts/tokens.py): a token someone else gave links
them to its person in the two-person rule while it works (signatures.set_up_together)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0007_api_tokens'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='given_by',
            field=models.CharField(blank=True, default='', max_length=150),
        ),
    ]
