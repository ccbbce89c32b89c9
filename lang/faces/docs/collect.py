"""The doc model: what gets documented (collect), shared by `help` and the docs builder.

An Entry is one documented function: a builtin from the @builtin registry, or a stdlib function
documented by the structured comment directly above its `fn` in stdlib/*.ml (`stdlib_entries`).
This module runs nothing and imports no interpreter: help (builtins/help.py) reads it without
pulling in the builder's runner or renderer.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from tapeml.builtins.registry import SourceText


class DocsError(Exception):
    """A failure the build reports: where (page, example) and what."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message


# ---- what gets documented --------------------------------------------------------------------
@dataclass
class Entry:
    """One documented function: a builtin from the registry or a stdlib function."""
    name: str
    category: str
    summary: str
    params: list          # registry.P objects
    returns: str = ""
    what: str = ""
    how: str = ""
    errors: list = field(default_factory=list)
    examples: list = field(default_factory=list)
    differentiable: bool = False
    source: str = "builtin"   # "builtin" or "stdlib"
    builtin: object = None    # the registry.Builtin (for the gradient check)
    signature: str = ""       # stdlib: the call shape, from the `fn` line
    file: str = ""            # stdlib: the .ml file that defines it, as stdlib/NAME.ml

    def __getitem__(self, key: str):
        """entry["summary"] as entry.summary (callers that read the old stdlib table's dicts)."""
        return getattr(self, key)


def builtin_entries() -> list[Entry]:
    from tapeml.builtins.registry import REGISTRY
    out = []
    for b in REGISTRY.values():
        out.append(Entry(b.name, b.category, b.summary, list(b.params), b.returns, b.what, b.how,
                         list(b.errors), list(b.examples), b.differentiable, "builtin", b))
    return out


STDLIB_CATEGORY = "Statistics & ML"
FIELDS = ("returns", "what", "how", "error", "example", "category")
FIELD = re.compile(r"^(param\s+(\w+)\s*\(([^)]*)\)|" + "|".join(FIELDS) + r")\s*:\s?(.*)$")
FN_LINE = re.compile(r"^fn\s+(\w+)\s*\((.*)\)\s*$")


def stdlib_dir() -> str:
    import tapeml.stdlib
    return os.path.dirname(os.path.abspath(tapeml.stdlib.__file__))


def stdlib_entries(directory: str | None = None) -> list[Entry]:
    """The stdlib functions documented by the comment block directly above their `fn` line in
    stdlib/*.ml (functions whose name starts with _ are private and not listed). The block:

        # One summary line (more lines before the first field continue it).
        # param NAME (KIND[, SHAPE]): what the parameter is
        # returns: what comes back
        # what: what it is for, in prose
        # how: how it works: the formula, the source or reference it follows
        # error: one error it raises (one line per error)
        # example:
        #     tapeml code, run by the docs build (one field per example)

    A line indented by 4 spaces after `# ` continues the field above it (prose joins with a
    space; an example keeps its lines). Blank `#` lines are ignored. Names and defaults come
    from the `fn` line itself (defaults as written there); `category:` is optional (default
    Statistics & ML)."""
    directory = directory or stdlib_dir()
    out = []
    for fname in sorted(f for f in os.listdir(directory) if f.endswith(".ml")):
        with open(os.path.join(directory, fname), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            m = FN_LINE.match(line)
            if not m or m.group(1).startswith("_"):
                continue
            out.append(parse_doc_comment(m.group(1), m.group(2), comment_above(lines, i), f"stdlib/{fname}"))
    return out


def comment_above(lines: list[str], i: int) -> list[str]:
    """The `#` comment lines directly above line i (0-based), in order: a function's doc comment
    (help shows it for the user's own functions too)."""
    k = i
    while k > 0 and lines[k - 1].lstrip().startswith("#"):
        k -= 1
    return lines[k:i]


def parse_doc_comment(name: str, params_text: str, comment: list[str], file: str) -> Entry:
    """The Entry of stdlib function `name(params_text)` from its doc comment lines."""
    params = params_from_signature(f"{name}({params_text})")
    by_name = {p.name: p for p in params}
    summary, fields = [], []          # fields: [kind, param or None, [lines]]
    for line in comment:
        body = line.lstrip()[1:]
        body = body[1:] if body.startswith(" ") else body
        if not body.strip():
            continue
        if body.startswith("    ") and (fields or summary):
            (fields[-1][2] if fields else summary).append(body[4:])
            continue
        m = FIELD.match(body)
        if m is None:
            summary.append(body.strip())
            continue
        kind = "param" if m.group(2) else m.group(1)
        fields.append([kind, (m.group(2), m.group(3)) if m.group(2) else None, [m.group(4)] if m.group(4) else []])
    entry = Entry(name, STDLIB_CATEGORY, " ".join(summary), params, source="stdlib", file=file,
                  signature=f"{name}({', '.join(_param_text(p) for p in params)})")
    for kind, param, text in fields:
        prose = " ".join(x.strip() for x in text)
        if kind == "param":
            pname, kind_shape = param
            p = by_name.get(pname)
            if p is None:
                raise DocsError(file, f"{name}(): the doc comment describes a parameter '{pname}' it does not have")
            p.kind, _, shape = (x.strip() for x in kind_shape.partition(","))
            p.doc, p.shape = prose, shape
        elif kind == "example":
            entry.examples.append("\n".join(text))
        elif kind == "error":
            entry.errors.append(prose)
        else:
            setattr(entry, kind, prose)
    return entry


def _param_text(p) -> str:
    from tapeml.builtins.registry import REQUIRED
    return p.name if p.default is REQUIRED else f"{p.name}={p.default}"


def params_from_signature(sig: str) -> list:
    """P objects from 'name(a, b=1, c=(0.9, 0.999))': names and defaults (shown as written)."""
    from tapeml.builtins.registry import P
    inner = sig[sig.find("(") + 1: sig.rfind(")")] if "(" in sig else ""
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    out = []
    for part in parts:
        name, eq, default = part.strip().partition("=")
        if name.strip().endswith("..."):
            out.append(P(name.strip()[:-3], variadic=True))
        else:
            out.append(P(name.strip(), "any", SourceText(default.strip()) if eq else P.__dataclass_fields__["default"].default))
    return out


def all_entries() -> list[Entry]:
    from tapeml.builtins.registry import CATEGORIES
    order = {c: i for i, c in enumerate(CATEGORIES)}
    entries = builtin_entries()
    names = {e.name for e in entries}
    entries += [e for e in stdlib_entries() if e.name not in names]
    return sorted(entries, key=lambda e: (e.source != "builtin", order.get(e.category, 99), e.name))

