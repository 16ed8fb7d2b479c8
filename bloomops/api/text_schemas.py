"""What the API's document says of text and of a caller's own data, as patterns and types
(the engine's own checks, bloomops/text.py and execution/actions/fields.obj_field, said as
far as JSON Schema can say them)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from typing_extensions import TypeAliasType

from bloomops.execution.guards import LARGEST_NUMBER
from bloomops.text import (
    NON_BLANK,
    REFUSED_AT_ENDS,
    REFUSED_IN_LINE,
    REFUSED_IN_PROSE,
    REFUSED_IN_STRIPPED_LINE,
)

# A key or name people read in a list must be one printable line (text.line_problem); the
# document says it as far as a pattern can (a "not" pattern: a pattern's $ also matches
# before a final newline). LINE: taken as given; STRIPPED_LINE: the engine strips it first.
LINE = {"not": {"type": "string", "pattern": REFUSED_IN_LINE}}
STRIPPED_LINE = {"not": {"type": "string", "pattern": REFUSED_IN_STRIPPED_LINE}}
PROSE = {"not": {"type": "string", "pattern": REFUSED_IN_PROSE}}
# EXACT_LINE: taken as given and matched exactly, so no white space at either end either
EXACT_LINE = {"allOf": [LINE, {"not": {"type": "string", "pattern": REFUSED_AT_ENDS}}]}

# A caller's own data (results, a dispatch, properties, parameters) at any depth: keys
# readable lines, texts readable prose (fields.obj_field).
DATA_KEYS = {"propertyNames": {"pattern": NON_BLANK, **EXACT_LINE}}
ReadableText = Annotated[str, Field(json_schema_extra=PROSE)]
# numbers a record keeps (guards.too_large); a whole one kept whole, never through a float
KeptInt = Annotated[int, Field(gt=-LARGEST_NUMBER, lt=LARGEST_NUMBER)]
Kept = KeptInt | Annotated[float, Field(gt=-LARGEST_NUMBER, lt=LARGEST_NUMBER)]
ReadableValue = TypeAliasType(  # type: ignore[misc]
    "ReadableValue", "ReadableText | Kept | bool | None | list[ReadableValue] |"
                     " Annotated[dict[str, ReadableValue], Field(json_schema_extra=DATA_KEYS)]")
ReadableData = Annotated[dict[str, ReadableValue], Field(json_schema_extra=DATA_KEYS)]
# A template's properties: one level, a value or a list of values
Scalar = ReadableText | Kept | bool | None
Properties = Annotated[dict[str, Scalar | list[Scalar]], Field(json_schema_extra=DATA_KEYS)]
