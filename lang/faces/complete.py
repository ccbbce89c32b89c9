"""Completion for the REPL and the kernel: the candidates for the word before the cursor.

    completions(text, interp)   keywords, builtins (their signature and summary beside them),
                                stdlib functions, session variables, and record fields after a
                                dot (nothing is evaluated); after `:`, the REPL's commands

Pure functions with their own tests (tests/faces/test_repl.py); the prompt_toolkit layer (repl.py) and
the kernel's complete_request (kernel.py) call them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tapeml.array.tape import raw
from tapeml.array.values import Function, Record, describe
from tapeml.syntax.lexer import KEYWORDS

# the REPL's commands (repl.py runs them), completed after ':'
COMMANDS = {
    ":vars": "list the session's variables with kind, shape and value",
    ":reset": "clear the session's variables",
    ":profile": ":profile CODE runs CODE, then prints its time per line and builtin (forward, backward)",
    ":help": "keys and commands of the session",
    ":quit": "leave the session (Ctrl-D too)",
}
COMMAND_ALIASES = {":q": ":quit", ":exit": ":quit", ":v": ":vars", ":h": ":help"}


@dataclass(frozen=True)
class Candidate:
    """One completion: the full `text` replacing the last `replace` characters, and `meta`
    (the signature and summary, a value's description, or 'keyword') shown beside it."""
    text: str
    replace: int
    meta: str = ""
    display: str = ""


WORD = re.compile(r"[A-Za-z_]\w*$")
FIELD = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\s*\d+\s*\])*)\.([A-Za-z_]\w*)?$")
STEP = re.compile(r"\.([A-Za-z_]\w*)|\[\s*(\d+)\s*\]")     # .field or [3] in a FIELD path


def _builtin_meta(b) -> str:
    return f"{b.signature()}  {b.summary}"


def _value_meta(v) -> str:
    v = raw(v)
    if isinstance(v, Function):
        return v.signature()
    if isinstance(v, Record):
        return "record {" + ", ".join(v.fields) + "}"
    if getattr(v, "signature", None) and callable(v.signature):
        return _builtin_meta(v)
    return describe(v)


def completions(text: str, interp=None) -> list[Candidate]:
    """Completion candidates for the end of `text` (the text before the cursor).

    After `name.`, `a.b.` or `w.heads[0].`, the fields of that live record (a variable, its
    fields and tuple items by number, never a call: nothing is evaluated). After `:`, the
    session commands. Otherwise names starting with the word before the cursor: session variables, keywords, builtins and stdlib functions, sorted."""
    from tapeml.builtins import REGISTRY
    line = text.split("\n")[-1]
    stripped = line.lstrip()
    if stripped.startswith(":") and " " not in stripped:
        names = list(COMMANDS) + list(COMMAND_ALIASES)
        return [Candidate(c, len(stripped), COMMANDS.get(c, COMMANDS.get(COMMAND_ALIASES.get(c), "")))
                for c in names if c.startswith(stripped) and c != stripped]
    if _inside_string(line):
        m = re.search(r'help\(\s*"([A-Za-z_]\w*)?$', line)
        if not m:
            return []
        prefix = m.group(1) or ""
        return [c for c in _name_candidates(prefix, interp, REGISTRY) if c.meta != "keyword"]
    m = FIELD.search(line)
    if m and not re.search(r"[\d]$", line[:m.start()] if m.start() else ""):
        root = re.match(r"[A-Za-z_]\w*", m.group(1)).group(0)
        prefix = m.group(2) or ""
        value = _live(root, interp)
        for field, index in STEP.findall(m.group(1)[len(root):]):
            value = raw(value)
            if field and isinstance(value, Record) and field in value.fields:
                value = value.fields[field]
            elif index and isinstance(value, tuple) and int(index) < len(value):
                value = value[int(index)]           # a tuple item: heads[0] (nothing is evaluated)
            else:
                return []
        value = raw(value)
        if not isinstance(value, Record):
            return []
        return [Candidate(k, len(prefix), describe(v)) for k, v in value.fields.items()
                if k.startswith(prefix)]
    m = WORD.search(line)
    if not m:
        return []
    before = line[:m.start()]
    if before.endswith(".") or (before and before[-1].isdigit()):
        return []
    return _name_candidates(m.group(0), interp, REGISTRY)


def _inside_string(line: str) -> bool:
    """Whether the end of `line` is inside a string's text (not inside its `{...}` part)."""
    state = []          # stack of "string" / "interp"
    i = 0
    while i < len(line):
        ch = line[i]
        top = state[-1] if state else "code"
        if top == "string":
            if ch == "\\":
                i += 1
            elif ch == '"':
                state.pop()
            elif ch == "{" and line[i + 1:i + 2] != "{":
                state.append("interp")
            elif ch == "{":
                i += 1
        else:
            if ch == "#" and top == "code":
                return False
            if ch == '"':
                state.append("string")
            elif ch == "}" and top == "interp":
                state.pop()
        i += 1
    return bool(state) and state[-1] == "string"


def _ensure_stdlib(interp) -> None:
    """The prelude's stdlib functions, loaded (run_repl loads them before the first prompt)."""
    if interp is not None and getattr(interp, "stdlib_pending", False):
        interp.load_stdlib()


def _live(name: str, interp):
    if interp is None:
        return None
    _ensure_stdlib(interp)
    try:
        return interp.get_variable(name)
    except KeyError:
        return None


def _name_candidates(prefix: str, interp, registry) -> list[Candidate]:
    from tapeml.builtins.help import stdlib_table
    table = stdlib_table()
    found: dict[str, str] = {}
    if interp is not None:
        _ensure_stdlib(interp)
        for name in interp.visible_names():
            hidden = name.startswith("<") or (name.startswith("_") and not prefix.startswith("_"))
            if name.startswith(prefix) and not hidden:
                value = interp.get_variable(name)
                doc = table.get(name)
                if doc and not interp.has_variable(name):       # a stdlib function
                    found[name] = f"{doc['signature']}  {doc['summary']}"
                else:
                    found[name] = _value_meta(value)
    for name in KEYWORDS:
        if name.startswith(prefix):
            found.setdefault(name, "keyword")
    for name, b in registry.items():
        if name.startswith(prefix):
            found.setdefault(name, _builtin_meta(b))
    return [Candidate(name, len(prefix), meta) for name, meta in sorted(found.items())
            if name != prefix or meta != "keyword"]
