"""The house's shape: a module's folder under lang/ is its layer, the layers import only their own
and lower ones, the import graph of lang/, builtins/ and stdlib/ has no cycle, and the front end
(syntax/) imports nothing of the tape, the values or anything above it.

Every `import` and `from ... import` statement counts, at any depth: one inside a function
(often written to break a cycle at import time) is still an edge, since the modules still
depend on each other. Also: the block keywords have one source, and a syntax node without an
evaluator method fails as an InternalError naming it.
"""
from __future__ import annotations

import ast
import io
import os

import pytest

from support import ROOT

PACKAGES = {"lang": "tapeml", "builtins": "tapeml.builtins", "stdlib": "tapeml.stdlib"}

# The layers, lowest first (docs/architecture.md). Under lang/ each is a folder of the same name;
# builtins/ is the builtins layer; stdlib/ (its .ml files, read as data) sits with the array layer.
LAYERS = ["syntax", "array", "builtins", "evaluator", "session", "faces"]
# The package's own front door: `tapeml` exposes Session lazily, `python -m tapeml` runs the CLI.
ROOT_MODULES = {"tapeml": "session", "tapeml.__main__": "faces"}
# Imports of a higher layer that the architecture page names and explains.
UPWARD_EDGES = {("tapeml.builtins.help", "tapeml.faces.docs.collect")}   # help shows the docs' model

# Edges allowed to close a cycle while it is being removed (none today). An entry that no longer
# exists fails the test below, so a stale one cannot linger.
ALLOWED_EDGES: set = set()


def module_files() -> dict[str, str]:
    """Module name -> file, for every .py file of the three packages."""
    out = {}
    for folder, package in PACKAGES.items():
        base = os.path.join(ROOT, folder)
        for dirpath, dirnames, files in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = os.path.relpath(dirpath, base)
            prefix = package if rel == "." else package + "." + rel.replace(os.sep, ".")
            for f in files:
                if f.endswith(".py"):
                    out[prefix if f == "__init__.py" else f"{prefix}.{f[:-3]}"] = os.path.join(dirpath, f)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, function-level imports included."""
    files = module_files()
    graph = {m: set() for m in files}
    for mod, path in files.items():
        is_package = path.endswith("__init__.py")
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = mod.split(".")
                    parts = parts[:len(parts) - node.level + (1 if is_package else 0)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module
                # `from pkg import name`: the submodule pkg.name when there is one, else pkg
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files and "." in t:      # `import tapeml.x.y` -> the module
                    t = t.rsplit(".", 1)[0]
                if t in files and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def layer_of(mod: str) -> str:
    """A module's layer, read from its folder: tapeml.<layer>.<module>, tapeml.builtins.*, tapeml.stdlib."""
    if mod in ROOT_MODULES:
        return ROOT_MODULES[mod]
    if mod == "tapeml.builtins" or mod.startswith("tapeml.builtins."):
        return "builtins"
    if mod == "tapeml.stdlib":
        return "array"
    folder = mod.split(".")[1]
    assert folder in LAYERS, f"{mod} sits in no layer's folder (lang/<layer>/): move it into one"
    return folder


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "tapeml.array.tape" in graph["tapeml.array.primitive_table"]        # from .tape import ...
    assert "tapeml.syntax.ast" in graph["tapeml.syntax.parser"]                  # from . import ast as A
    assert "tapeml.builtins.registry" in graph["tapeml.builtins.core"]   # absolute
    assert "tapeml.array.values" in graph["tapeml.array.limits"]               # inside a function
    assert "tapeml.builtins" in graph["tapeml.evaluator.interpreter"]        # inside a method
    assert "tapeml.builtins.core" in graph["tapeml.builtins"]      # a package's own __init__


def test_cycle_finder_finds_a_cycle_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    graph = import_graph()
    for a, b in ALLOWED_EDGES:
        assert b in graph.get(a, ()), f"allow-listed edge {a} -> {b} is gone: delete it from ALLOWED_EDGES"
        graph[a].discard(b)
    assert cycles(graph) == []


def test_every_module_sits_in_a_layers_folder():
    """lang/ holds only the layers' folders and the package's front door (__init__, __main__)."""
    files = module_files()
    loose = sorted(m for m in files if m.startswith("tapeml.") and m.count(".") == 1
                   and m not in ROOT_MODULES and m.split(".")[1] not in LAYERS + ["builtins", "stdlib"])
    assert loose == []
    assert {layer_of(m) for m in files} == set(LAYERS)          # no empty layer
    entries = sorted(e for e in os.listdir(os.path.join(ROOT, "lang")) if e != "__pycache__")
    assert entries == sorted(["__init__.py", "__main__.py"] + [x for x in LAYERS if x != "builtins"])


def test_the_front_end_is_free_of_the_tape():
    """Parsing needs no tape, no values, no limits: syntax/ imports only syntax/."""
    graph = import_graph()
    wrong = sorted((m, t) for m in graph if layer_of(m) == "syntax" for t in graph[m] if layer_of(t) != "syntax")
    assert wrong == []
    assert "tapeml.syntax.formatspec" in graph["tapeml.syntax.parser"]       # specs are parsed here


def test_each_layer_imports_only_its_own_and_lower_layers():
    graph = import_graph()
    assert layer_of("tapeml.session.session") == "session" and layer_of("tapeml.array.context") == "array"
    assert layer_of("tapeml.evaluator.interpreter") == "evaluator"
    assert layer_of("tapeml.builtins.ml.attention") == "builtins"
    assert layer_of("tapeml.faces.cli") == "faces" and layer_of("tapeml.faces.docs.render") == "faces"
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = sorted((m, t) for m in graph for t in graph[m] if rank[layer_of(t)] > rank[layer_of(m)])
    assert upward == sorted(UPWARD_EDGES)


def test_session_state_is_declared_as_slots():
    """What a Session owns is declared by the module that keeps it (lang/array/context.py)."""
    import tapeml.builtins  # noqa: F401  (imports every builtin module)
    from tapeml.array import context
    assert {"dtype", "rng", "figures", "joined_heads"} <= set(context.SLOTS)


# ---- item 7: one source for the block keywords; a node without a handler -------------------
def test_block_keywords_have_one_source():
    from tapeml.syntax import lexer, parser
    from tapeml.faces import repl
    assert parser.BLOCK_END is lexer.BLOCK_END
    assert set(lexer.BLOCK_END) == {"end", "elif", "else"}
    assert set(repl.INDENTERS) == {"fn", "if", "elif", "else", "for", "while"}
    assert repl.DEDENTERS is lexer.BLOCK_END
    assert set(lexer.BLOCK_OPENERS + lexer.BLOCK_END) <= lexer.KEYWORDS
    # the REPL indents after every opener and dedents every closer the lexer knows
    for word in lexer.BLOCK_OPENERS + lexer.BLOCK_CONTINUERS:
        assert repl.next_indent(f"{word} x") == repl.INDENT
    for word in lexer.BLOCK_END:
        assert repl.dedent_line(f"if x\n{repl.INDENT}{word}") == f"if x\n{word}"


def test_a_node_class_without_handler_is_an_internal_error_naming_it():
    from tapeml.syntax import ast as A
    from tapeml.syntax.errors import InternalError
    from tapeml.evaluator.interpreter import Interpreter

    class Frobnicate(A.Node):
        pass
    interp = Interpreter(load_prelude=False)
    with pytest.raises(InternalError, match="Frobnicate"):
        interp.eval(Frobnicate(), interp.globals)
    # and a node class of the language that is only ever handled by its parent (Param)
    with pytest.raises(InternalError, match="Param"):
        interp.eval(A.Param(None, "x", None), interp.globals)


# ---- item 3: one callable protocol, one binder, the wordings of before -----------------------
@pytest.mark.parametrize("program, message", [
    ("fn f(a, b=a+1)\n return a+b\nend\nf(1,2,3)", "f() takes 2 arguments (f(a, b=a + 1.0)), got 3"),
    ("fn f(a, b=a+1)\n return a+b\nend\nf(1, c=2)", "f() has no parameter 'c' (f(a, b=a + 1.0))"),
    ("fn f(a, b=a+1)\n return a+b\nend\nf(1, a=2)", "f() got 'a' both by position and by keyword"),
    ("fn f(a, b=a+1)\n return a+b\nend\nf(b=2)", "f() is missing the argument 'a' (f(a, b=a + 1.0))"),
    ("sum(1,2,3,4,5)", "sum() takes at most 3 arguments, got 5: sum(x, dim=none, keepdims=false)"),
    ("sum([1,2], axis=1)", "sum() has no parameter 'axis'; did you mean 'dim'? (parameters: x, dim, keepdims)"),
    ("sum([1,2], x=[1])", "sum() got 'x' both by position and by keyword"),
    ("sum()", "sum() is missing the argument 'x': sum(x, dim=none, keepdims=false)"),
    ("print(1, 2, sep=3)", "print() has no parameter 'sep': it takes only values, print(values...)"),
])
def test_one_binder_keeps_each_kinds_wording(program, message):
    from tapeml.syntax.errors import LangError
    from tapeml.evaluator.interpreter import Interpreter
    with pytest.raises(LangError) as info:
        Interpreter(load_prelude=False).run(program)
    assert info.value.message == message


def test_functions_and_builtins_are_one_callable_kind():
    from tapeml.builtins.registry import REGISTRY
    from tapeml.evaluator.interpreter import Interpreter
    from tapeml.array.values import Callable, Function
    interp = Interpreter(load_prelude=False)
    interp.run("fn f(a, b=a+1)\n return a+b\nend")
    f = interp.globals.vars["f"]
    assert isinstance(f, Function) and isinstance(f, Callable) and isinstance(REGISTRY["sum"], Callable)
    assert f.call(interp, [1.0], {}, None) == 3.0                     # b's default sees a
    assert REGISTRY["max"].call(interp, [2.0, 5.0], {}, None) == 5.0


def test_the_whole_primitive_table_exists_once_ops_is_imported():
    """ops gathers every entry: importing it alone (a fresh process) gives the table that the
    builtins and the evaluator see, the linear-algebra primitives included."""
    import subprocess
    import sys
    code = ("from tapeml.array import ops; n = len(ops.TABLE); import tapeml.builtins, tapeml.evaluator.interpreter; "
            "print(n, len(ops.TABLE), 'svd' in ops.TABLE)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout.split()
    assert out[0] == out[1] and out[2] == "True", out


def test_the_dispatch_table_has_one_entry_per_node_kind():
    """The `ast.node` decorator replaces each annotated draft by a record type; the drafts (still
    subclasses of Node) are not node kinds, so the table holds each kind once."""
    from tapeml.evaluator.interpreter import Interpreter
    from tapeml.syntax import ast as A
    table = Interpreter(load_prelude=False).dispatch
    names = [cls.__name__ for cls in table if cls.__module__ == A.__name__]   # (a test may add its own)
    assert len(names) == len(set(names))
    kinds = {name for name, v in vars(A).items() if isinstance(v, type) and issubclass(v, A.Node) and v is not A.Node}
    assert set(names) == kinds


def test_the_faces_and_the_session_use_the_evaluators_variables_api():
    """The faces, the Session and the builtins read and set variables through the Interpreter's
    small API (variables, get_variable, set_variable, has_variable, delete_variable,
    visible_names, reset), never its scopes (`.globals`, `.prelude`, `.modules`)."""
    files = module_files()
    reached = []
    for mod, path in files.items():
        if layer_of(mod) not in ("faces", "session", "builtins"):
            continue
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("globals", "prelude", "modules") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("sys", "self")):
                reached.append(f"{mod}:{node.lineno} .{node.attr}")
    assert reached == []
    from tapeml.evaluator.interpreter import Interpreter
    interp = Interpreter()
    interp.run("x = 1\ny = x + 1")
    assert interp.variables() == {"x": 1.0, "y": 2.0} and interp.has_variable("x")
    assert callable(interp.get_variable("adamw_step").call)            # the standard library's, loaded on need
    interp.set_variable("z", 3.0)
    interp.delete_variable("x")
    assert list(interp.variables()) == ["y", "z"] and "layer_norm" in set(interp.visible_names())
    assert interp.reset() == 2 and interp.variables() == {}


def test_builtins_reach_the_evaluator_only_through_the_context():
    """Every builtin that needs the running session takes the narrow Context
    (builtins/context.py, the builtins' own: the array layer keeps only the session state and
    reads nothing of an interpreter); the whole interpreter goes to help alone, whose declaration says why.
    The Context answers what those builtins ask: the call site's argument names, the running file's
    directory, calling a function value."""
    from tapeml.builtins import REGISTRY
    graph = import_graph()
    assert "tapeml.builtins.context" in graph["tapeml.evaluator.interpreter"]
    assert graph["tapeml.array.context"] == set()          # the slots and States: nothing above
    assert sorted(n for n, b in REGISTRY.items() if b.interp) == ["help"]
    src = open(os.path.join(ROOT, "builtins", "help.py"), encoding="utf-8").read()
    decl = src[src.index('@builtin("help"'):src.index("interp=True")]
    assert "# the whole interpreter:" in decl
    from tapeml.evaluator.interpreter import Interpreter
    interp = Interpreter(out=io.StringIO())
    seen = {}

    def spy(ctx, f, x):
        seen.update(name=ctx.argument_name(1), first=ctx.argument_name(0), far=ctx.argument_name(5),
                    dir=ctx.directory, line=ctx.span.line, result=ctx.call(f, x))
        return None
    from dataclasses import replace
    interp.set_variable("spy", replace(REGISTRY["grad"], name="spy", fn=spy))
    interp.run("w = 2\n\nspy(fn(v) -> v * 3, w)")
    assert seen == {"name": "w", "first": None, "far": None, "dir": os.getcwd(), "line": 3, "result": 6.0}
