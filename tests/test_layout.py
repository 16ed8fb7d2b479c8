"""The shape of the code, held by tests: layers import downwards only, no import circle
inside the engine, modules stay small, the queue-order index is the order the reads use,
and nothing in the project points outside it (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.engine import make_subject
from tests.plans import plan_of

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bloomops"
# Who may import whom: a package imports only the packages to its right.
LAYERS = {
    "tapdb": set(),
    "accounts": {"tapdb"},
    "execution": {"tapdb", "accounts"},
    "web": {"execution", "tapdb", "accounts"},
    "api": {"execution", "tapdb", "accounts"},
    "worker": {"execution", "tapdb", "accounts"},
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


def _module_names() -> dict[str, Path]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
            for p in _modules()}


def _loaded_with(path: Path, modules: dict[str, Path]) -> set[str]:
    """The bloomops modules importing ``path`` loads: its imports at module level (one
    inside a function runs later), ``from package import module`` as that module."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(modules)
            found |= subs or {node.module}
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules}


def test_no_module_imports_itself_round_a_circle():
    """A circle fails at start-up in whichever process loads its modules in the wrong order
    (a template library loading the bench's words that load the template library was not
    seen by the tests' order and stopped `make run`)."""
    modules = _module_names()
    graph = {name: _loaded_with(path, modules) for name, path in modules.items()}
    # Importing a.b.c runs the package a.b's __init__ first, unless the importer is inside
    # that package (then it is loading already): a template library importing one view
    # module loaded every view, and so the library itself again.
    for name, targets in graph.items():
        for target in list(targets):
            parts = target.split(".")
            for i in range(2, len(parts)):
                package = ".".join(parts[:i])
                if package in modules and not (name + ".").startswith(package + "."):
                    targets.add(package)
    seen: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        if seen.get(node) == 1:
            raise AssertionError("import circle: " + " -> ".join([*stack, node]))
        if seen.get(node) == 2:
            return
        seen[node] = 1
        for nxt in graph.get(node, ()):
            visit(nxt, [*stack, node])
        seen[node] = 2

    for node in graph:
        visit(node, [])


def test_modules_stay_small():
    big = [f"{p.relative_to(ROOT)}: {n}" for p in _modules()
           if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert big == []


# A citation of a document that is not in the repository. The project's own rule book is
# docs/RULES.md, cited by anchor (RULES.md#visibility); nothing else may be cited by number.
_N = r"[1-9]\d?\.[1-9]\d?"  # a section number: 3.1, 10.4, 11.7 (never 0.x or x.0)
OUTSIDE_CITATION = re.compile(
    "|".join([
        r"\.\./shared|\bshared/(?:seeds|DESIGN)|\bseeds/\d",  # paths outside the repository
        r"\bDESIGN\.md\b",
        r"\b(?:spec|specification|section)s?\s+\d",  # spec 000, spec 3.1, section 11
        r"\bseeds?\s+0\d\d\b",  # seed 001
        r"\bissues?\s+#?\d+\b",  # issue 4
        r"§\s*\d",
        # A parenthesised section number or list/range of them: (3.1), (3.1, 3.4), (8.4-8.6).
        # Only after a space or line start, so a call such as sleep(1.5) is not one.
        rf"(?<![\w.)\]])\(\s*{_N}(?:\s*[,;/-]\s*{_N})*\s*\)",
        rf"(?<![\w.]){_N}/{_N}(?![\w.])",  # 3.1/3.6
    ]),
    re.IGNORECASE,
)


def _project_text_files() -> list[Path]:
    suffixes = {".py", ".json", ".html", ".txt", ".md", ".js", ".css"}
    return sorted(
        [p for top in ("bloomops", "templates", "tests", "static")
         for p in (ROOT / top).rglob("*") if p.suffix in suffixes and p.is_file()]
        + [*(ROOT / "docs").glob("*.md"), ROOT / "README.md", ROOT / "Makefile"]
    )


def _outside_citations(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line where a citation starts, each line once."""
    lines = text.splitlines()
    starts = sorted({text.count("\n", 0, m.start()) + 1 for m in OUTSIDE_CITATION.finditer(text)})
    return [(n, lines[n - 1].strip()) for n in starts]


@pytest.mark.parametrize("text", [
    "See ../shared/seeds/000_x.txt", "design notes (DESIGN.md)", "spec 000 section 3.1",
    "the loop of spec 5.5", "Spec 8.4: every failure", "beyond section 11", "sections 4, 8",
    "seed 001", "(seed 003, spec 7.7)", "issue 4: the screens", "Issue 8, point 6",
    "the predicate (3.1).", "(3.1, 3.4)", "(8.4-8.6)", "(4.6/7.5)", "# 3.1/3.6 visible items",
    "the spec\n000 says", "see § 3",
])
def test_the_citation_guard_catches(text):
    assert _outside_citations(text), text


@pytest.mark.parametrize("text", [
    "RULES.md#visibility", "([rule 2.2](#envelope))", "version 1.0", "Python 3.11", "0.1 s",
    "time.sleep(0.01)", "sleep(1.5)", "_retry(120, 2.0, 7200)", "| 69 ms | 1.8 ms | 12.5 % |",
    "(0.3-3 ms)", "8 %", "127.0.0.1/32", "10.0.0.1", "at 04:53:16.726151Z", "no issues",
    "<section id=\"dashboard-panel\">", "for spec in DEMO_QUEUES", "--seed 101",
    "data/execution/queue/1.0", "(1.0)", "f(x) (2.0)", "ruff 0.6.9", "round(2.5)", "(1.5 s)",
    "p50 18.5 ms, p95 21.6 ms", "12.5 %", "1.5-2.5 s",
])
def test_the_citation_guard_passes_ordinary_numbers(text):
    assert _outside_citations(text) == [], text


def test_nothing_points_outside_the_repository():
    """Comments, docstrings, strings shown to people and docs cite only the repository's own
    documents; this file is skipped because its examples above are citations on purpose."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text[:100]}"
        for path in _project_text_files() if path.name != "test_layout.py"
        for line, text in _outside_citations(path.read_text())
    ]
    assert offenders == [], "\n".join(offenders)


def test_every_citation_of_a_rule_names_a_section_that_exists():
    """``RULES.md#<anchor>`` leads somewhere (policy.py cited a #workers RULES.md never had),
    and no citation is by section number, which a renumbering breaks silently."""
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', (ROOT / "docs" / "RULES.md").read_text()))
    broken, numbered = [], []
    for path in _project_text_files():
        text = path.read_text()
        where = path.relative_to(ROOT)
        broken += [f"{where}: #{a}" for a in re.findall(r"RULES\.md#([\w-]+)", text)
                   if a not in anchors]
        numbered += [f"{where}: {m}" for m in re.findall(r"RULES\.md \d+(?:\.\d+)*", text)]
    assert len(anchors) > 10 and broken == [] and numbered == [], broken + numbered


@pytest.mark.django_db
def test_the_queue_order_index_serves_the_order_the_reads_use(tenant):
    """The index is generated from the order the reads use (sql.ORDER_KEYS): PostgreSQL can
    read a queue in that order from it with no sort, which it can only do when every key
    expression of the ORDER BY matches the index."""
    from bloomops.execution.sql import ENV, HAS_ENVELOPE, ORDER_BY

    for i in range(5):
        make_subject("q1", name=f"s{i}", priority=i % 3)
    plan = plan_of(f"""SELECT s.uid FROM generic_instance s
                       WHERE s.tenant_id = %s AND {HAS_ENVELOPE}
                         AND {ENV}->>'next_queue_key' = 'q1'
                       ORDER BY {ORDER_BY} LIMIT 3""", [tenant],
                   off=("seqscan", "sort", "bitmapscan"))
    assert "bloomops_routed_order" in plan and "Sort" not in plan, plan
    # The envelope's validity is the index's predicate: it is not evaluated again per row.
    assert "jsonb_typeof" not in plan, plan


def test_every_variable_the_code_reads_is_in_the_readme_table():
    """ARCHITECTURE.md promises "a row in the README's table" for every setting; ten
    variables the code read had none (the metrics token among them)."""
    readme = (ROOT / "README.md").read_text()
    table = {m.group(1) for line in readme.splitlines() if line.startswith("|")
             for m in re.finditer(r"`(BLOOMOPS_[A-Z_]+)`", line)}
    reads = re.compile(r"(?:environ\.get\(|environ\[|_flag\(|_int\()\s*\"(BLOOMOPS_[A-Z_]+)\"")
    read = {m.group(1) for path in (ROOT / "bloomops").rglob("*.py")
            for m in reads.finditer(path.read_text())}
    assert len(read) > 30 and sorted(read - table) == []


def test_no_page_title_holds_markup():
    """The people page's title block had swallowed its add form (a CSRF token in the tab's
    name); a title is words."""
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        for block in re.findall(r"{% block title %}(.*?){% endblock %}", path.read_text(), re.S):
            if "<" in block or "\n" in block:
                found.append(f"{path.relative_to(ROOT)}: {block[:60]!r}")
    assert found == []
