from django.core.management.base import BaseCommand

from bloomops.demo.data import seed_demo


class Command(BaseCommand):
    help = "Seed the demo queues, ~300 READY subjects and the demo sign-ins, once."

    def handle(self, *args, **options) -> None:
        for line in seed_demo().lines():
            self.stdout.write(line)
