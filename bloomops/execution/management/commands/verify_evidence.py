import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from bloomops.execution.chain import canonical_bytes, sha256_hex
from bloomops.execution.evidence import CHECKS, verify_bundle
from bloomops.execution.exports import SET_FORMAT
from bloomops.tapdb.tenancy import tenant_of


class Command(BaseCommand):
    help = (
        "Verify an evidence bundle file (docs/RULES.md#evidence): that its sha256 is one "
        "recorded for its subject, and that nothing it describes was changed or removed in "
        "the database since. Names every problem (file or database, which entry, which "
        "field); exits non-zero on any."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="the bundle as downloaded, or with --set the"
                                         " directory export_evidence wrote")
        parser.add_argument("--json", action="store_true", dest="as_json",
                            help="print the verdict as JSON")
        parser.add_argument("--set", action="store_true", dest="as_set",
                            help="verify a period's export: its manifest.json (its sha256 is"
                                 " printed, to compare with the one noted at export), each"
                                 " file against the manifest's sha256, each bundle as above")

    def handle(self, *args, file: str, as_json: bool = False, as_set: bool = False,
               **options) -> None:
        if as_set:
            return self._set(Path(file))
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

    def _set(self, directory: Path) -> None:
        try:
            raw = (directory / "manifest.json").read_bytes()
            manifest = json.loads(raw)
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read {directory}/manifest.json: {exc}") from exc
        if not isinstance(manifest, dict) or manifest.get("format") != SET_FORMAT \
                or not isinstance(manifest.get("bundles"), list):
            raise CommandError(f"{directory}/manifest.json is not a bloomops evidence set.")
        self.stdout.write(f"manifest.json sha256 {sha256_hex(raw)}"
                          + ("" if canonical_bytes(manifest) == raw
                             else " (not in canonical form: edited since it was written)"))
        failed = []
        for entry in manifest["bundles"]:
            name = entry.get("file") if isinstance(entry, dict) else None
            if not isinstance(name, str) or "/" in name or name.startswith("."):
                failed.append(f"{entry!r}: names no file of the set")
                continue
            try:
                data = (directory / name).read_bytes()
            except OSError as exc:
                failed.append(f"{name}: cannot be read ({exc.strerror})")
                continue
            if sha256_hex(data) != entry.get("sha256"):
                failed.append(f"{name}: its sha256 is not the one the manifest names")
                continue
            verdict = verify_bundle(data, tenant_of())
            if not verdict.ok:
                failed.append(f"{name}: NOT VERIFIED: " + (verdict.problems[0]
                                                          if verdict.problems else "not recorded"))
        for line in failed:
            self.stderr.write(f"PROBLEM {line}")
        total = len(manifest["bundles"])
        if failed or canonical_bytes(manifest) != raw:
            raise CommandError(f"NOT VERIFIED: {len(failed)} of {total} bundle(s) failed"
                               + ("" if canonical_bytes(manifest) == raw
                                  else ", and the manifest was edited"))
        self.stdout.write(f"VERIFIED: {total} bundle(s), each the file its manifest names,"
                          " recorded, with the history it describes unchanged.")
