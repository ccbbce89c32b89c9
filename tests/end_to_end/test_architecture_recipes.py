"""docs/architecture.md's recipes ("Where new code goes") and its layer table name real places:
every file and folder they name exists, every `module.name` they name is an attribute of that
module, every class, table or function they name in capitals or by a leading underscore is
defined in the code, and the table lists every module of lang/. A recipe that names a place that
moved fails here, so the page stays current. Also the house's size rules (issue 39): no module of
lang/ or builtins/ over 600 lines, no function over 80 lines but those listed with a reason."""
from __future__ import annotations

import ast
import importlib
import os
import re

import pytest

from support import ROOT

PAGE = os.path.join(ROOT, "docs", "architecture.md")
PACKAGE_DIRS = {"lang": "tapeml", "builtins": "tapeml.builtins"}

# Functions allowed past 80 lines, each with the reason (none today).
LONG_FUNCTIONS: dict[str, str] = {}


def _page() -> str:
    with open(PAGE, encoding="utf-8") as f:
        return f.read()


def _section(title: str) -> str:
    text = _page()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def _code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def _source_files():
    for folder in PACKAGE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)


def _module_by_short_name() -> dict[str, list[str]]:
    """'session' -> ['tapeml.session.session'], for every module of lang/ and builtins/."""
    out: dict[str, list[str]] = {}
    for path in _source_files():
        rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
        dotted = ".".join([PACKAGE_DIRS[rel[0]], *rel[1:]])
        out.setdefault(rel[-1], []).append(dotted.removesuffix(".__init__"))
    return out


def _defined_names() -> set[str]:
    names = set()
    for path in _source_files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def _paths(spans):
    """The spans that name a file or folder of the checkout (`lang/array/*_ops.py`, `tests/golden`)."""
    for s in spans:
        if re.fullmatch(r"[\w./*-]+", s) and ("/" in s or s.endswith((".py", ".md", ".ml"))):
            yield s


def test_the_recipes_name_files_and_folders_that_exist():
    spans = _code_spans(_section("Where new code goes"))
    paths = list(_paths(spans))
    assert len(paths) >= 15, paths
    import glob
    for p in paths:
        if "/" not in p:        # a bare file name: somewhere under lang/, builtins/, tests/ or docs/
            hits = [h for d in ("lang", "builtins", "tests", "docs")
                    for h in glob.glob(os.path.join(ROOT, d, "**", p), recursive=True)]
        else:
            hits = glob.glob(os.path.join(ROOT, p))
        assert hits, f"architecture.md names {p!r}, which is not in the checkout"


def test_the_recipes_name_attributes_that_exist():
    """`module.name` (`registry.CATEGORIES`, `session.face_session`, `printer.format_value`) is an
    attribute of the one module of that name; `Class.method` a method of a class of the code."""
    spans = _code_spans(_section("Where new code goes"))
    modules = _module_by_short_name()
    checked = 0
    for s in spans:
        m = re.fullmatch(r"(\w+)\.(\w+)", s)
        if not m or s.endswith((".py", ".md", ".ml")):
            continue
        head, attr = m.groups()
        if head in modules:
            found = any(hasattr(importlib.import_module(mod), attr) for mod in modules[head])
            assert found, f"architecture.md names {s!r}: {modules[head]} has no {attr!r}"
            checked += 1
    assert checked >= 5


def test_the_recipes_name_definitions_that_exist():
    """A name in capitals (`KEYWORDS`, `SNAPSHOT_KINDS`, `ExpressionParser`, `TorchBackend`) or with
    a leading underscore (`_Compiler`) is defined somewhere in lang/ or builtins/."""
    spans = _code_spans(_section("Where new code goes"))
    defined = _defined_names()
    names = [s for s in spans if re.fullmatch(r"_?[A-Z]\w*", s) and s not in {"LangError", "ShapeError", "ValueErr"}]
    assert len(names) >= 8, names
    missing = [n for n in names if n not in defined]
    assert not missing, f"architecture.md names {missing}, defined nowhere in lang/ or builtins/"


def test_the_layer_table_lists_every_module_of_lang():
    """Each module of lang/'s layer folders appears in the table's row of its layer (a package's
    docs/ folder is named as a folder; the array row's "every `*_ops` module" names the families)."""
    table = [line for line in _page().splitlines() if line.startswith("| ") and "`lang/" in line]
    rows = {re.search(r"`lang/(\w+)/`", line).group(1): line for line in table}
    missing = []
    for layer, row in rows.items():
        folder = os.path.join(ROOT, "lang", layer)
        for name in sorted(os.listdir(folder)):
            stem = name[:-3] if name.endswith(".py") else name
            if name == "__init__.py" or name.startswith((".", "_")) or not (name.endswith(".py") or os.path.isdir(os.path.join(folder, name))):
                continue
            if f"`{stem}`" not in row and f"`{stem}/`" not in row and not (stem.endswith("_ops") and "`*_ops`" in row):
                missing.append(f"{layer}/{name}")
    assert not missing, f"docs/architecture.md's table does not list {missing}"


def _sizes():
    for path in _source_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        yield os.path.relpath(path, ROOT), text.count("\n"), ast.parse(text)


def test_no_module_is_over_600_lines():
    over = [(p, n) for p, n, _ in _sizes() if n > 600]
    assert not over, over


def test_no_function_is_over_80_lines_without_a_reason():
    over = []
    for p, _, tree in _sizes():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 80 and f"{p}:{node.name}" not in LONG_FUNCTIONS:
                    over.append((p, node.name, length))
    assert not over, over
    assert all(reason for reason in LONG_FUNCTIONS.values())


def test_no_primitive_is_written_twice_as_a_twin():
    """Each primitive once (issue 39): no function of the array layer is a `_xp` twin of another
    (a NumPy copy and an array-API copy of one computation), and every primitive of the table has
    one entry."""
    from tapeml.array import ops
    twins = []
    for path in _source_files():
        if os.sep + "array" + os.sep not in path:
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        twins += [f"{os.path.basename(path)}:{n.name}" for n in ast.walk(tree)
                  if isinstance(n, ast.FunctionDef) and n.name.endswith("_xp")]
    assert not twins, twins
    assert len({id(p) for p in ops.TABLE.values()}) == len(ops.TABLE)
