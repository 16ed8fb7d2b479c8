from django.urls import include, path

from bloomops.api.api import urls as api_urls
from bloomops.api.metrics import metrics_view

urlpatterns = [
    path("api/v1/", api_urls()),
    path("metrics", metrics_view, name="metrics"),
    path("accounts/", include("bloomops.accounts.urls")),
    path("", include("bloomops.web.urls")),
]
