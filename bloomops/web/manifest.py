"""A CSV intake manifest (docs/RULES.md#intake): one row per subject, each becoming one
route_subject (a row with an EUID) or register_subject (a row with a name) request. Read and
written with Python's csv module."""

from __future__ import annotations

import csv
import difflib
import io
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings

from bloomops.execution.actions.intake import MAX_INTAKE_ITEMS
from bloomops.execution.context import ActionRequest, Actor
from bloomops.execution.errors import ActionError
from bloomops.execution.objects import full_template_code, repeated_names
from bloomops.execution.policy import as_scoped, named_by_queues, queue_templates
from bloomops.web.spreadsheets import csv_cell

COLUMNS = ("euid", "name", "template", "queue", "priority", "due_date", "site", "platform",
           "assay")
# Other spellings a lab's export may use for a column (the engine's own field names among
# them: in_columns says a refusal with the column's name).
ALIASES = {"due": "due_date", "due_at": "due_date", "queue_key": "queue",
           "template_code": "template", "subject_euid": "euid"}
SCOPE_COLUMNS = ("site", "platform", "assay")
MAX_MANIFEST_BYTES = 1024 * 1024
RESULT_COLUMNS = ("line", "euid", "name", "queue", "priority", "due_date", "outcome",
                  "subject_euid", "state", "error_code", "message")


_DATE_ONLY = re.compile(r"\s*[0-9]{4}-[0-9]{2}-[0-9]{2}\s*")
_NO_ZONE = re.compile(
    r"\s*[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?\s*")


def spreadsheet_instant(text: str) -> str:
    """A spreadsheet's due date as the engine takes an instant (with its zone), in the lab's
    zone (BLOOMOPS_TIME_ZONE) as the people who wrote it meant it: a date alone is the end of
    that day (due on the 2nd was overdue all of the 2nd as its midnight), a time without a
    zone the lab's wall clock; anything else goes as written, for the engine to judge."""
    zone = ZoneInfo(settings.TIME_ZONE)
    try:
        if _DATE_ONLY.fullmatch(text):
            moment = datetime.combine(date.fromisoformat(text.strip()), time(23, 59, 59),
                                      zone)
        elif _NO_ZONE.fullmatch(text):
            moment = datetime.fromisoformat(text.strip().replace("t", "T").replace(" ", "T", 1)
                                            ).replace(tzinfo=zone)
        else:
            return text
    except ValueError:  # a day no calendar has: the engine says so in its words
        return text
    instant = moment.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != moment.replace(tzinfo=None):
        # 02:30 on the night the clocks go forward: read as 03:30 without a word
        raise NoSuchTime(f"{text.strip()} is a time the lab's clocks skip ({zone.key}: they"
                         " go forward that night); give one that exists.")
    return instant.isoformat().replace("+00:00", "Z")


class NoSuchTime(ValueError):
    """A wall-clock time the lab's zone skips."""


def in_columns(err: ActionError) -> str:
    """A refusal in the manifest's words: the engine names its fields (template_code,
    queue_key, due_at), the person wrote columns (template, queue, due_date)."""
    message = err.message
    for engine_name, column in ALIASES.items():
        message = re.sub(rf"\b{engine_name}\b", column, message)
    return message


class ManifestError(ValueError):
    """The manifest as a whole cannot be read (not its rows)."""


@dataclass
class Row:
    line: int
    values: dict[str, str]
    problem: str | None = None
    # Said in the preview, not refused: the row still runs when confirmed.
    warning: str | None = None
    request: ActionRequest | None = None
    outcome: dict[str, Any] = field(default_factory=dict)

    @property
    def action_key(self) -> str:
        return "route_subject" if self.values.get("euid") else "register_subject"


def decode(data: bytes) -> str:
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"The manifest is larger than {MAX_MANIFEST_BYTES // 1024} KiB.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ManifestError("The manifest is not UTF-8 text (save it as CSV UTF-8).") from None


def _delimiter(text: str) -> str:
    """What separates the cells: a comma, else what the header line uses instead (a
    semicolon from a spreadsheet set to a decimal comma, a tab from cells pasted)."""
    header = text.lstrip("\ufeff").split("\n", 1)[0]
    if "," in header:
        return ","
    return next((d for d in ("\t", ";") if d in header), ",")


def parse(text: str, notes: list[str] | None = None) -> list[Row]:
    """The manifest's rows with their values by column; a header row names the columns. A
    column bloomops does not read is left out, and said in ``notes``; one spelt almost like
    one it reads is refused ("prioirty" would drop every row's priority without a word)."""
    if "\x00" in text:
        raise ManifestError("The manifest contains a NUL character.")
    reader = csv.reader(io.StringIO(text.strip("\ufeff")), delimiter=_delimiter(text))
    try:
        header = next(reader)
    except StopIteration:
        raise ManifestError("The manifest is empty.") from None
    except csv.Error as exc:
        raise ManifestError(f"The manifest is not valid CSV: {exc}.") from None
    names = [ALIASES.get(h.strip().lower(), h.strip().lower()) for h in header]
    # a heading left blank (a spreadsheet's trailing tab) is no column anyone named
    unknown = [(h.strip(), n) for h, n in zip(header, names, strict=True)
               if n not in COLUMNS and n]
    read = (*COLUMNS, *ALIASES)
    for heading, name in unknown:
        # a lab's own column holding or held in one read ("plate" in "template", "uid" in
        # "euid", "template_id") is another column, not a slip
        if any(name in c or c in name for c in read):
            continue
        close = difflib.get_close_matches(name, read, n=1, cutoff=0.75)
        if close:
            raise ManifestError(f"Column {heading!r}: did you mean {close[0]!r}? Columns"
                                f" read: {', '.join(COLUMNS)}.")
    if unknown and notes is not None:
        notes.append("Not read, and not kept: column" + ("s " if len(unknown) > 1 else " ")
                     + ", ".join(repr(h) for h, _ in unknown[:10]) + ". Columns read: "
                     + ", ".join(COLUMNS) + ".")
    known = [n for n in names if n in COLUMNS]
    if len(set(known)) != len(known):
        raise ManifestError("A column is named twice.")
    if "queue" not in names or not {"euid", "name"} & set(names):
        raise ManifestError("The manifest needs a queue column and an euid or name column.")
    rows = []
    blank = [i for i, n in enumerate(names) if not n]
    blank_filled: set[int] = set()
    try:
        for record in reader:
            if not any(cell.strip() for cell in record):
                continue
            if len(rows) >= MAX_INTAKE_ITEMS:
                raise ManifestError(f"At most {MAX_INTAKE_ITEMS} rows per manifest.")
            values = {n: (_as_typed(record[i]) if i < len(record) else "")
                      for i, n in enumerate(names) if n in COLUMNS}
            row = Row(line=reader.line_num, values=values)
            if len(record) > len(names):
                row.problem = "This row has more cells than the header has columns."
            rows.append(row)
            blank_filled |= {i + 1 for i in blank if i < len(record) and record[i].strip()}
    except csv.Error as exc:
        raise ManifestError(f"The manifest is not valid CSV (line {reader.line_num}):"
                            f" {exc}.") from None
    if not rows:
        raise ManifestError("The manifest has a header but no rows.")
    if blank_filled and notes is not None:
        # a heading left blank over values: said, not read (a trailing tab's is not said)
        notes.append("Not read, and not kept: the values under column"
                     + ("s " if len(blank_filled) > 1 else " ")
                     + ", ".join(map(str, sorted(blank_filled)))
                     + ", which " + ("have" if len(blank_filled) > 1 else "has")
                     + " no heading.")
    return rows


def _template_code(value: str, config: dict[str, Any]) -> str:
    """A full template code as given, or a short name (``specimen``) among the queue's."""
    if not value or "/" in value:
        return value
    return full_template_code(value, queue_templates(config))


def build_requests(rows: list[Row], actor: Actor, batch_key: str,
                   configs: dict[str, dict[str, Any]]) -> None:
    """Each row's action request; a row that cannot become one gets its problem instead.
    Every row's idempotency key is the batch's and its line, so confirming twice replays.
    ``configs``: the lab's queues' settings by key (read once for the whole manifest)."""
    for row in rows:
        if row.problem:
            continue
        v = row.values
        key, config = _queue_called(v.get("queue", ""), configs)
        if v.get("euid") and v.get("name"):
            row.problem = "Give an EUID (an existing object) or a name (a new one), not both."
            continue
        if not v.get("euid") and not v.get("name"):
            row.problem = "Give an EUID (an existing object) or a name (a new one)."
            continue
        payload: dict[str, Any] = {}
        template = _template_code(v.get("template", ""), config)
        if template:
            payload["template_code"] = template
        if v.get("priority"):
            payload["priority"] = v["priority"]
        if v.get("due_date"):
            try:
                payload["due_at"] = spreadsheet_instant(v["due_date"])
            except NoSuchTime as skipped:
                row.problem = str(skipped)
                continue
        # the engine takes "SFO" as the queue's sfo (policy.as_scoped)
        scopes = {k: v[k] for k in SCOPE_COLUMNS if v.get(k)}
        if v.get("euid"):
            if scopes:
                row.problem = ("Site, platform and assay are an existing object's own; give"
                               " them only for a new subject (a row with a name).")
                continue
        else:
            payload["name"] = v["name"]
            if scopes:
                payload["properties"] = scopes
        row.request = ActionRequest(
            action_key=row.action_key, actor=actor,
            idempotency_key=f"intake:{batch_key}:{row.line}",
            subject_euid=v.get("euid") or None, queue_key=key or None,
            payload=payload)


def _as_typed(cell: str) -> str:
    """A cell as the person typed it: composed (NFC: a Mac's spreadsheet saves "Å" as A and
    a ring, refused as "not in Unicode's composed form") and a non-breaking space a
    spreadsheet put between words as a space (refused as an invisible character)."""
    return unicodedata.normalize("NFC", cell).replace("\u00a0", " ").strip()


def _queue_called(key: str, configs: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The queue a manifest names, and its settings: by its key, else by its key in another
    case when one queue alone is so called ("PATH.ACCESSION", as "SPECIMEN" is a template);
    a key no queue has is left for the engine to refuse."""
    if key in configs:
        return key, configs[key] or {}
    alike = [k for k in configs if k.casefold() == key.casefold()]
    return (alike[0], configs[alike[0]] or {}) if len(alike) == 1 else (key, {})


def refuse_repeated_names(rows: list[Row]) -> None:
    """A new subject's name an earlier row gives too is refused (objects.repeated_names)."""
    names = [r.values["name"] if r.action_key == "register_subject" and not r.problem else None
             for r in rows]
    for i, earlier in repeated_names(names).items():
        rows[i].problem = (f"Line {rows[earlier].line} has the same name: give each tube its"
                           " own name (or leave this line out).")
        rows[i].request = None


def warn_of_duplicates(rows: list[Row], existing: dict[str, list[str]]) -> None:
    """A new subject named like one already registered (``existing``: subjects_named of the
    rows' names, by the name as asked): most often the same manifest uploaded again, which
    would register every specimen twice."""
    for row in rows:
        if row.problem or row.action_key != "register_subject":
            continue
        name = row.values["name"]
        if known := existing.get(name.strip()):
            row.warning = (f"{name!r} is already registered ({', '.join(known[:3])}): check"
                           " this is not the same specimen twice.")


def results_csv(results: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(RESULT_COLUMNS)
    for r in results:
        writer.writerow([csv_cell(r.get(c)) for c in RESULT_COLUMNS])
    return out.getvalue()


def warn_of_spellings(rows: list[Row], configs: dict[str, dict[str, Any]]) -> None:
    """A site, platform or assay spelt as no queue spells it but as one does in another case
    ("Main" where the queues say "main"): the subject fits the queue it enters (one with no
    site scope) and is outside every queue scoped to "main" after it, and nothing can
    change a subject's site. ``configs``: the lab's queues' settings by key (the queue it
    enters, when scoped so, takes it in its own spelling: policy.as_scoped)."""
    named = named_by_queues(list(configs.values()))
    for row in rows:
        if row.problem:
            continue
        said = []
        entered = configs.get(row.outcome.get("queue_key") or "") or {}
        for column in SCOPE_COLUMNS:
            value = (row.values.get(column) or "").strip()
            known = named.get(f"{column}_scope") or []
            alike = [v for v in known if v.casefold() == value.casefold()]
            if alike and as_scoped(entered, {column: value})[column] != value:
                continue  # taken as the queue it enters spells it
            if value and value not in known and alike:
                said.append(f"{column.capitalize()} {value!r} is spelt {alike[0]!r} by the"
                            f" lab's queues: as {value!r} it is outside every queue scoped to"
                            f" {alike[0]!r}.")
        if said:
            row.warning = " ".join([*([row.warning] if row.warning else []), *said])
