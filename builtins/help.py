"""The `help` builtin and `help_text(name)`, which the REPL's `?name` uses too.

Everything shown comes from the builtin registry (the same declarations the docs are built
from): signature, parameters with kinds, shapes and constraints, summary, `what`, and the first
example. Functions written in tapeml (the stdlib prelude, the user's own) are described from
their signature and the `#` comment lines directly above their `fn` line.

Stdlib functions are documented by the structured comment above their `fn` line in
stdlib/*.ml, read by the doc model the docs builder uses too (tapeml.faces.docs.collect; see
`stdlib_table`).
"""
from __future__ import annotations

import textwrap

from tapeml.builtins.registry import CATEGORIES, FOREIGN_NAMES, REGISTRY, REQUIRED, Builtin, P, SourceText, builtin
from tapeml.syntax.errors import NameErr, TypeErr, close_names
from tapeml.array.tape import raw
from tapeml.array.values import Function, describe
from tapeml.array.display import display_value
from tapeml.array.printer import format_value

WIDTH = 88
KIND_WORDS = {"any": "any value", "number": "number", "int": "whole number", "bool": "bool",
              "string": "string", "array": "number or matrix", "function": "function",
              "numbers": "number, matrix or tuple of numbers",
              "record": "record", "tuple": "tuple", "tree": "number, matrix, tuple, record or dictionary"}


def _wrap(text: str, indent: str = "  ") -> list[str]:
    out = []
    for para in text.split("\n"):
        out.extend(textwrap.wrap(para, WIDTH, initial_indent=indent, subsequent_indent=indent) or [""])
    return out


def _field(obj, name, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _param_rows(params) -> list[str]:
    rows = []
    for p in params:
        name = _field(p, "name", "?")
        if _field(p, "variadic", False):
            name += "..."
        # a shape says more than the kind ("[..., D]" rather than "number or matrix")
        type_col = _field(p, "shape", "") or KIND_WORDS.get(_field(p, "kind", "any"), _field(p, "kind", "any"))
        notes = []
        doc = _field(p, "doc", "")
        if doc:
            notes.append(doc)
        if _field(p, "constraint", ""):
            notes.append(f"must be {_field(p, 'constraint')}")
        default = _field(p, "default", REQUIRED)
        if default is not REQUIRED and not _field(p, "variadic", False):
            notes.append(f"default {default if isinstance(default, SourceText) else format_value(default, True)}")
        rows.append((name, type_col, "; ".join(notes)))
    if not rows:
        return []
    w1 = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    lines = []
    for name, type_col, note in rows:
        head = f"  {name.ljust(w1)}  {type_col.ljust(w2)}"
        if note:
            wrapped = textwrap.wrap(note, max(30, WIDTH - len(head) - 2))
            lines.append(f"{head}  {wrapped[0]}")
            lines.extend(" " * (len(head) + 2) + more for more in wrapped[1:])
        else:
            lines.append(head.rstrip())
    return lines


# examples whose result is a picture are shown, not run; the IO examples run (they write their
# files under /tmp, as the docs build does), so help shows what the page shows
NO_RUN_CATEGORIES = {"Plotting"}


def example_output(example: str, interp, filename: str = "<example>") -> str | None:
    """What the REPL shows for `example` in a fresh session (prints and the echo, and the error an
    example that raises ends with, rendered as the page renders it), or None when it fails in
    another way. Used so that help shows the result beside the code. The fresh session is a new
    interpreter of the kind of `interp` (the session asking; help has no interpreter of its own,
    which would import the interpreter that imports the builtins); without one, None."""
    import io
    from tapeml.syntax.errors import LangError, render
    if interp is None:
        return None
    from tapeml.array import context, diagnostics
    buf = io.StringIO()
    d = diagnostics.current()
    modes = {"check_nan": d.check_nan, "profiler": d.profiler, "recorder": d.recorder}
    try:
        # in a session state of its own: an example's seed(0) or notes(false) leaves the asking
        # session's generator and settings as they were
        with context.State():
            interp = type(interp)(out=buf)
            interp.err = buf
            interp.progress_out = False     # an example's progress(...) loop draws no bar into help
            # echoed as the REPL and the docs echo: strings quoted, big matrices as grids
            interp.run(example, filename, echo=lambda v: buf.write(display_value(v) + "\n"))
    except LangError as e:      # an example that shows an error ("# raises: ..."): the page shows it too
        buf.write(render(e, {**interp.sources, filename: example}) + "\n")
    except (RecursionError, MemoryError, ArithmeticError, ValueError, TypeError):
        return None
    finally:        # an example that turns check_nan on or off does it in the example only
        interp.set_diagnostics(**modes)
    return buf.getvalue().rstrip("\n")


def _example_lines(example: str, interp, run: bool = True, name: str = "") -> list[str]:
    lines = example.split("\n")
    out = ["  ml> " + lines[0]] + ["  ... " + more for more in lines[1:]]
    # the file name the docs page's run gives its first example, so an error reads as there
    result = example_output(example, interp, f"<{name} example 1>" if name else "<example>") if run else None
    if result:
        out.extend("  " + line for line in result.split("\n"))
    return out


def _doc_text(name: str, entry, interp, category: str = "") -> str:
    """Help text for a Builtin, or a Builtin-like object or dict (the stdlib table)."""
    signature = _field(entry, "signature")
    signature = signature() if callable(signature) else signature
    params = _field(entry, "params") or []
    if not signature:
        signature = f"{name}({', '.join(_field(p, 'name', '?') for p in params)})"
    category = _field(entry, "category", "") or category
    out = [f"{signature}" + (f"    [{category}]" if category else "")]
    summary = _field(entry, "summary", "")
    if summary:
        out.extend(_wrap(summary))
    rows = _param_rows(params)
    if rows:
        out.append("")
        out.append("Parameters")
        out.extend(rows)
    returns = _field(entry, "returns", "")
    if returns:
        out.append(f"Returns  {returns}")
    what = _field(entry, "what", "")
    if what:
        out.append("")
        out.extend(_wrap(what))
    examples = _field(entry, "examples") or []
    if examples:
        out.append("")
        out.append("Example")
        out.extend(_example_lines(examples[0], interp, run=category not in NO_RUN_CATEGORIES, name=name))
    return "\n".join(out)


def stdlib_table() -> dict:
    """The documented stdlib functions: name -> docs.collect.Entry (summary, signature, params,
    returns, what, how, errors, examples, file), read once from the doc comments above their
    `fn` lines in stdlib/*.ml by the same collector the docs builder uses."""
    if not _STDLIB:
        from tapeml.faces.docs.collect import stdlib_entries
        _STDLIB.update((e.name, e) for e in stdlib_entries())
    return _STDLIB


_STDLIB: dict = {}


def _stdlib_doc(name: str):
    """The stdlib documentation of `name`, if there is one."""
    return stdlib_table().get(name)


def _comment_above(fn: Function, sources: dict) -> list[str]:
    """The `#` comment lines directly above a named function's `fn` line (its doc comment)."""
    span = getattr(fn, "span", None)
    if span is None or not sources or span.file not in sources:
        return []
    from tapeml.faces.docs.collect import comment_above
    lines = sources[span.file].splitlines()
    return [line.lstrip()[1:].strip() for line in comment_above(lines, min(span.line - 1, len(lines)))]


def _function_text(fn: Function, sources: dict | None) -> str:
    out = [fn.signature()]
    span = getattr(fn, "span", None)
    comment = _comment_above(fn, sources or {})
    if comment:
        out.extend("  " + c for c in comment)
    if span is not None:
        where = "the standard library" if span.file.startswith("<stdlib>") else str(span)
        out.append(f"  a tapeml function defined in {where}")
    return "\n".join(out)


def _lookup(name: str, interp):
    if interp is not None and getattr(interp, "stdlib_pending", False):
        interp.load_stdlib()
    """(what, value): what is 'builtin', 'stdlib', 'function', 'value' or None."""
    if name in REGISTRY:
        return "builtin", REGISTRY[name]
    entry = _stdlib_doc(name)
    if entry is not None:
        return "stdlib", entry
    if interp is not None:
        try:
            value = interp.get_variable(name)
        except KeyError:
            return None, None
        value = raw(value)
        if isinstance(value, Builtin):
            return "builtin", value
        if isinstance(value, Function):
            return "function", value
        return "value", value
    return None, None


def known_names(interp=None) -> list[str]:
    names = set(REGISTRY) | set(stdlib_table())
    if interp is not None:
        names.update(interp.visible_names())
    return sorted(names)


def help_text(name: str | None = None, interp=None) -> str:
    """The help shown by `help(name)` and the REPL's `?name`; `help_text()` lists categories.
    interp is the session asking: its names are known, and a fresh interpreter of its kind runs
    the example shown (without one, the example is shown without its result).

    Raises NameErr (with a close match when there is one) for an unknown name."""
    if name is None or name == "":
        return overview(interp)
    name = name.strip()
    what, value = _lookup(name, interp)
    if what == "builtin":
        return _doc_text(value.name, value, interp)
    if what == "stdlib":
        text = _doc_text(name, value, interp, "Standard library")
        where = _field(value, "file", "")
        return text + (f"\n\nWritten in tapeml: {where}" if where else "")
    if what == "function":
        return _function_text(value, getattr(interp, "sources", None))
    if what == "value":
        return f"{name} is a variable: {describe(value)} ({format_value(value, True)[:60]})"
    if name in FOREIGN_NAMES:        # another library's name: lead to tapeml's
        text, target = FOREIGN_NAMES[name]
        lead = f"'{name}' is not a tapeml name; tapeml writes {text}."
        return lead if target is None else lead + "\n\n" + help_text(target, interp)
    close = close_names(name, known_names(interp), 3)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise NameErr(f"help: no builtin or function named '{name}'{hint} (help() lists them all)")


def stdlib_functions(interp) -> list[str]:
    """Names of the tapeml functions in the prelude (stdlib/*.ml)."""
    if interp is None:
        return []
    return sorted(n for n, v in interp.stdlib_values().items() if isinstance(raw(v), Function))


def overview(interp=None) -> str:
    out = ["Builtins by category (help(\"name\") or ?name in the REPL for one of them):"]
    for cat in CATEGORIES:
        names = sorted(n for n, b in REGISTRY.items() if b.category == cat)
        if not names:
            continue
        out.append("")
        out.append(f"{cat}")
        out.extend(_wrap(", ".join(names)))
    std = sorted({n for n in stdlib_functions(interp) if not n.startswith("_")} | set(_stdlib_table_names()))
    if std:
        out.append("")
        out.append("Standard library (written in tapeml)")
        out.extend(_wrap(", ".join(std)))
    return "\n".join(out)


def _stdlib_table_names() -> list[str]:
    return sorted(stdlib_table())


@builtin("help", "Core", "Show the documentation of a builtin or function; help() lists them all by category.",
         [P("name", "any", None, doc="a name as a string, or the builtin or function itself; "
                                     "none lists the categories")],
         returns="none",
         # the whole interpreter: help lists the session's own names, loads the stdlib, reads
         # function sources, and runs each example in a fresh interpreter of the session's kind
         interp=True,
         what="Prints the signature, the parameters with their kinds and shapes, the summary, what "
              "the builtin is for, and its first example, from the same declarations the "
              "documentation pages are built from. `help()` lists every builtin by category and "
              "the stdlib functions. In the REPL, `?name` shows the same text.",
         how="Reads the builtin registry (`@builtin` declarations); tapeml functions are described "
             "by their signature and the `#` comment lines above their `fn` line.",
         errors=["NameError for an unknown name (with the closest known names)",
                 "TypeError when name is neither a string nor a function"],
         examples=['help("pi")', "help(len)"])   # small, stable pages (help() would go stale with every new builtin)
def help_(interp, name):
    r = raw(name)
    if r is None:
        text = overview(interp)
    elif isinstance(r, str):
        text = help_text(r, interp)
    elif isinstance(r, Builtin):
        text = _doc_text(r.name, r, interp)
    elif isinstance(r, Function) and r.name in stdlib_table() and \
            raw(interp.stdlib_values().get(r.name)) is r:
        text = help_text(r.name, interp)
    elif isinstance(r, Function):
        text = _function_text(r, interp.sources)
    else:
        raise TypeErr(f"help() needs a name (a string) or a function, got {describe(name)}")
    interp.out.write(text + "\n")
    return None
