import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from bloomops.execution.evidence import CHECKS, verify_bundle
from bloomops.tapdb.tenancy import tenant_of


class Command(BaseCommand):
    help = (
        "Verify an evidence bundle file (docs/RULES.md#evidence): that its sha256 is one "
        "recorded for its subject, and that nothing it describes was changed or removed in "
        "the database since. Names every problem (file or database, which entry, which "
        "field); exits non-zero on any."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="the bundle as downloaded")
        parser.add_argument("--json", action="store_true", dest="as_json",
                            help="print the verdict as JSON")

    def handle(self, *args, file: str, as_json: bool = False, **options) -> None:
        try:
            data = Path(file).read_bytes()
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from exc
        verdict = verify_bundle(data, tenant_of())
        if as_json:
            self.stdout.write(json.dumps(verdict.as_dict(), indent=2, ensure_ascii=False))
        else:
            self.stdout.write(f"subject {verdict.subject_euid}, sha256 {verdict.sha256}")
            for rec in verdict.recorded:
                self.stdout.write(f"recorded as {rec['evidence_euid']} by"
                                  f" {rec.get('generated_by')} at {rec.get('generated_at')}")
            for line in verdict.later:
                self.stdout.write(f"LATER {line}")
            for line in verdict.problems:
                self.stderr.write(f"PROBLEM {line}")
            for check, outcome in zip(CHECKS, verdict.outcomes, strict=True):
                self.stdout.write(f"{outcome.upper()}: {check}")
        if not verdict.ok:
            raise CommandError(f"NOT VERIFIED: {len(verdict.problems)} problem(s)"
                               + (f"; first: {verdict.problems[0]}" if verdict.problems else ""))
        self.stdout.write("VERIFIED: the file is the recorded bundle and the history it"
                          " describes is unchanged.")

