from django.urls import include, path

urlpatterns = [
    path("accounts/", include("bloomops.accounts.urls")),
    path("", include("bloomops.web.urls")),
]
