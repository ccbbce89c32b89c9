"""The layout of builtins/: a builtin's module follows from its doc category, and the builtin
modules import each other without cycles (issue 18, items 2 and 4)."""
from __future__ import annotations

import ast
import os

from tapeml.builtins import REGISTRY
from tapeml.builtins.registry import CATEGORIES

from support import ROOT

BUILTINS_DIR = os.path.join(ROOT, "builtins")

# the module of each category; Statistics & ML and Arrays (a trailing ".") are packages split by job
MODULE_OF = {"Core": "tapeml.builtins.core", "Math": "tapeml.builtins.math", "Arrays": "tapeml.builtins.arrays.",
             "Autodiff": "tapeml.builtins.autodiff", "Random": "tapeml.builtins.random",
             "Plotting": "tapeml.builtins.plot", "IO": "tapeml.builtins.io",
             "Linear algebra": "tapeml.builtins.linalg", "Strings & collections": "tapeml.builtins.strings",
             "Reductions & sorting": "tapeml.builtins.reductions", "Distributed": "tapeml.builtins.distributed"}
ML_PACKAGE = "tapeml.builtins.ml."
# help() is the help system's own builtin (Core), declared in help.py beside help_text
EXCEPTIONS = {"help": "tapeml.builtins.help"}


def test_every_category_has_a_home():
    assert set(MODULE_OF) | {"Statistics & ML"} == set(CATEGORIES)


def test_a_builtins_module_follows_from_its_category():
    wrong = []
    for name, b in REGISTRY.items():
        module = b.fn.__module__
        if name in EXCEPTIONS:
            ok = module == EXCEPTIONS[name]
        elif b.category == "Statistics & ML":
            ok = module.startswith(ML_PACKAGE)
        elif MODULE_OF[b.category].endswith("."):       # a package split by job (Arrays)
            ok = module.startswith(MODULE_OF[b.category])
        else:
            ok = module == MODULE_OF[b.category]
        if not ok:
            wrong.append(f"{name} ({b.category}) is declared in {module}")
    assert not wrong, wrong
    # and every category module declares builtins (no empty homes, nothing left in old files)
    homes = {b.fn.__module__ for b in REGISTRY.values()}
    assert {m for m in MODULE_OF.values() if not m.endswith(".")} <= homes
    assert all(any(h.startswith(m) for h in homes) for m in MODULE_OF.values() if m.endswith("."))
    assert len(REGISTRY) >= 97        # the 97 of the split, none lost, and what came after


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, BUILTINS_DIR)[:-3].replace(os.sep, ".")
    rel = rel[: -len(".__init__")] if rel.endswith(".__init__") else rel
    return "tapeml.builtins" + ("" if rel == "__init__" else "." + rel)


def _imports(path: str, modules: set) -> set:
    """The builtins modules a file imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in modules:
                out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules}
    return out


def test_builtin_modules_import_without_cycles():
    files = [os.path.join(d, f) for d, _, fs in os.walk(BUILTINS_DIR) for f in fs if f.endswith(".py")]
    modules = {_module_name(f): f for f in files}
    # the package __init__ imports every module to register it; a module importing its package is the cycle
    graph = {m: _imports(f, set(modules)) - {m} for m, f in modules.items()}
    inits = {m for m, f in modules.items() if f.endswith("__init__.py")}
    for m in modules:
        if m not in inits:
            assert not graph[m] & inits, f"{m} imports the package {graph[m] & inits} (register through it instead)"
    state, cycle = {}, []

    def visit(m, stack):
        state[m] = "open"
        for n in sorted(graph[m] - inits):
            if state.get(n) == "open":
                cycle.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n, stack + [n])
        state[m] = "done"
    for m in sorted(set(modules) - inits):
        if m not in state:
            visit(m, [m])
    assert not cycle, " -> ".join(cycle[0])
    # the shared file helpers depend on no builtin module
    assert graph["tapeml.builtins.files"] == set()
    assert "tapeml.builtins.files" in graph["tapeml.builtins.io"]


def test_no_builtins_source_file_over_600_lines():
    long = {}
    for d, _, fs in os.walk(BUILTINS_DIR):
        for f in fs:
            if f.endswith(".py"):
                n = sum(1 for _ in open(os.path.join(d, f), encoding="utf-8"))
                if n > 600:
                    long[f] = n
    assert not long, long
