"""Bloom's ``list_queue_items`` against bloomops' ``selectors.queue_items`` on the same data:
a database Bloom creates, N subjects routed to one of its queues through Bloom's object
layer, bloomops attached with no tenant. Prints the figures (docs/BLOOM.md); exits non-zero
when the two disagree on the queue's items. Not part of the test suite (it takes minutes).

    .venv/bin/python tests/bloom/measure.py [--subjects 2000] [--repeat 3] [--keep]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "extraction_prod"
BLOOD = "content/specimen/blood-whole/1.0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.conf import settings

    from bloomops.execution import selectors
    from tests.bloom.fixtures import (
        BloomDriver,
        attach_bloomops,
        bloomops_on,
        create_database,
        drop_database,
    )

    settings.TAPDB_TENANT_ID = None
    name = f"bloomops_measure_{os.getpid()}"
    create_database(name)
    bloom = BloomDriver(name)
    try:
        started = time.perf_counter()
        bloom.one("create_database")
        now = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=1)
        bloom.one("set_clock", now=now.isoformat())
        bloom.one("create_routed_subjects", template_code=BLOOD, queue_key=QUEUE,
                  count=args.subjects, priorities=[0, 0, 0, 10, 100])
        attach_bloomops(name)
        print(f"{args.subjects} subjects routed to {QUEUE} by Bloom"
              f" ({time.perf_counter() - started:.0f} s to set up)")

        bloom_ms, items = [], []
        for _ in range(args.repeat):
            result = bloom([{"op": "list_queue_items", "queue_key": QUEUE}], check=False)[0]
            if not result["ok"]:
                raise RuntimeError(result["error"]["message"])
            bloom_ms.append(result["ms"])
            items = [i["subject_euid"] for i in result["result"]]
        page_ms, all_ms, depth_ms = [], [], []
        with bloomops_on(name):
            for _ in range(args.repeat):
                t = time.perf_counter()
                page, total = selectors.queue_items(QUEUE, now=now, limit=50)
                page_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                everything, _ = selectors.queue_items(QUEUE, now=now, limit=args.subjects)
                all_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                depth = selectors.queue_depths(now=now)[QUEUE]
                depth_ms.append((time.perf_counter() - t) * 1000)

        def fig(values: list[float]) -> str:
            return f"{statistics.median(values):9.1f} ms (best {min(values):.1f})"

        print(f"Bloom    list_queue_items (all {len(items)} items) {fig(bloom_ms)}")
        print(f"bloomops queue_items, first page of 50 + total      {fig(page_ms)}")
        print(f"bloomops queue_items, all {args.subjects} items             {fig(all_ms)}")
        print(f"bloomops queue_depths (every queue)                 {fig(depth_ms)}")
        same = [i.euid for i in everything] == items and total == depth == len(items)
        print("Both list the same items in the same order." if same else
              "MISMATCH: the two systems list different items or orders.")
        return 0 if same else 1
    finally:
        bloom.close()
        if args.keep:
            print(f"Database kept: {name}")
        else:
            drop_database(name)


if __name__ == "__main__":
    sys.exit(main())
