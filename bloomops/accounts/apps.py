from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "bloomops.accounts"
    label = "accounts"
