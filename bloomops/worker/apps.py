from django.apps import AppConfig


class WorkerConfig(AppConfig):
    name = "bloomops.worker"
    label = "bloomops_worker"
    verbose_name = "bloomops service-worker runtime"
