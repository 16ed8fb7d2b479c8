from django.urls import path

from bloomops.web import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
]
