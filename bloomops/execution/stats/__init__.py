"""Queue statistics recorded once for every viewer (RULES.md#statistics): the recorder
(``recorder``), the snapshot and its live fallback the readers use (``snapshot``), the
per-queue history behind the dashboard's charts (``history``)."""
