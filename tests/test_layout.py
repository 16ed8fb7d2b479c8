"""The shape of the code, held by tests: layers import downwards only, no import circle
inside the engine, modules stay small, the queue-order index is the order the reads use,
and nothing in the project points outside it (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.db import connection

from tests.engine import make_subject

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bloomops"
# Who may import whom: a package imports only the packages to its right.
LAYERS = {
    "tapdb": set(),
    "accounts": {"tapdb"},
    "execution": {"tapdb", "accounts"},
    "web": {"execution", "tapdb", "accounts"},
    "api": {"execution", "tapdb", "accounts"},
    "worker": {"execution", "tapdb", "accounts", "api"},
    "demo": {"execution", "tapdb", "accounts"},
    "bench": {"execution", "tapdb", "accounts", "demo"},
}
MAX_LINES = 420


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("bloomops.")}


def test_layers_import_downwards_only():
    wrong = []
    for path in _modules():
        rel = path.relative_to(PACKAGE).parts
        if len(rel) < 2 or rel[0] not in LAYERS:
            continue
        for module in _imports(path):
            target = module.split(".")[1]
            if target != rel[0] and target in LAYERS and target not in LAYERS[rel[0]]:
                wrong.append(f"{path.relative_to(ROOT)} imports {module}")
    assert wrong == []


def test_the_engine_has_no_import_circle():
    graph: dict[str, set[str]] = {}
    for path in (PACKAGE / "execution").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = {m for m in _imports(path) if m.startswith("bloomops.execution")}
    seen: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        if seen.get(node) == 1:
            raise AssertionError("import circle: " + " -> ".join([*stack, node]))
        if seen.get(node) == 2:
            return
        seen[node] = 1
        for nxt in graph.get(node, ()):
            # A package's __init__ re-exporting its own modules is not a circle.
            if nxt.startswith(node + "."):
                continue
            visit(nxt, [*stack, node])
        seen[node] = 2

    for node in graph:
        visit(node, [])


def test_modules_stay_small():
    big = [f"{p.relative_to(ROOT)}: {n}" for p in _modules()
           if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert big == []


def test_nothing_points_outside_the_repository():
    pattern = re.compile(r"\.\./shared|seeds/0\d\d|DESIGN\.md|spec 000|seed 00\d")
    offenders = []
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md",
                 *(ROOT / "templates").rglob("*.html"), *(ROOT / "tests").glob("*.py")]:
        if path.name == "test_layout.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()[:80]}")
    assert offenders == []


@pytest.mark.django_db
def test_the_queue_order_index_serves_the_order_the_reads_use(tenant):
    """The index is generated from the order the reads use (sql.ORDER_KEYS): PostgreSQL can
    read a queue in that order from it with no sort, which it can only do when every key
    expression of the ORDER BY matches the index."""
    from bloomops.execution.sql import ENV, HAS_ENVELOPE, ORDER_BY

    for i in range(5):
        make_subject("q1", name=f"s{i}", priority=i % 3)
    with connection.cursor() as cur:
        for knob in ("enable_seqscan", "enable_sort", "enable_bitmapscan"):
            cur.execute(f"SET LOCAL {knob} = off")
        cur.execute(f"""EXPLAIN SELECT s.uid FROM generic_instance s
                        WHERE s.tenant_id = %s AND {HAS_ENVELOPE}
                          AND {ENV}->>'next_queue_key' = 'q1'
                        ORDER BY {ORDER_BY} LIMIT 3""", [tenant])
        plan = "\n".join(r[0] for r in cur.fetchall())
    assert "bloomops_subject_queue_order" in plan and "Sort" not in plan, plan
