from django.apps import AppConfig


class BenchConfig(AppConfig):
    name = "bloomops.bench"
    label = "bench"
    verbose_name = "Benchmark (make bench)"
