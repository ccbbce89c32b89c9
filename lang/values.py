"""Runtime values and the one printer.

number -> float (np.float64 is a float), bool -> bool, none -> None, string -> str,
matrix -> np.ndarray, tuple -> tuple, record -> Record, function -> Function / Builtin.
Tracked values (tape.Box) print and behave as the value they hold.

`format_value` is the only formatter: print, interpolation, the REPL echo and the docs use it.
"""
from __future__ import annotations

import math

import numpy as np

from .tape import Box, raw

SUMMARY_THRESHOLD = 1000   # arrays with more elements print summarized
EDGE = 3                   # items shown at each end of a summarized axis
WHOLE_LIMIT = 2.0 ** 53    # whole numbers below this magnitude print every digit


class Record:
    """An ordered, immutable set of named fields. `with_field` returns a new record."""
    __slots__ = ("fields",)

    def __init__(self, fields: dict):
        self.fields = fields

    def get(self, name):
        return self.fields[name]

    def with_field(self, name, value) -> "Record":
        new = dict(self.fields)
        new[name] = value
        return Record(new)

    def __repr__(self):
        return format_value(self)


class Function:
    """A user function: parameters (ast.Param), a body, and the environment it closes over."""
    __slots__ = ("name", "params", "body", "env", "span", "module")

    def __init__(self, name, params, body, env, span):
        self.name, self.params, self.body, self.env, self.span = name, params, body, env, span

    def signature(self) -> str:
        from .unparse import unparse

        def default(node):
            value = getattr(node, "value", None)
            return format_number(value) if type(value) is float else unparse(node)
        parts = [p.name if p.default is None else f"{p.name}={default(p.default)}" for p in self.params]
        return f"{self.name}({', '.join(parts)})"


class Progress:
    """What progress(items, desc) returns: `items` (a range, matrix, tuple, string or number),
    walked by a `for` loop exactly as the bare items are, while lang/progress.py draws a bar of
    `count` steps (the loop's length, known before it starts)."""
    __slots__ = ("items", "desc", "count")

    def __init__(self, items, desc: str, count: int):
        self.items, self.desc, self.count = items, desc, count


def type_name(v) -> str:
    """The kind of a value as users see it (the `type` builtin)."""
    v = raw(v)
    if v is None:
        return "none"
    if isinstance(v, bool) or isinstance(v, np.bool_):
        return "bool"
    if isinstance(v, (float, int)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, np.ndarray):
        return "matrix"
    if isinstance(v, tuple):
        return "tuple"
    if isinstance(v, Record):
        return "record"
    if isinstance(v, Progress):
        return "progress"
    return "function"


def shape_text(shape: tuple) -> str:
    """'a number', 'a vector of length 3', '2x3', '2x3x4'."""
    if len(shape) == 0:
        return "a number"
    if len(shape) == 1:
        return f"a vector of length {shape[0]}"
    return "x".join(str(n) for n in shape)


def describe(v) -> str:
    """A short description of a value's kind and shape, for error messages."""
    v = raw(v)
    if isinstance(v, np.ndarray):
        kind = "bool " if v.dtype == np.bool_ else ""
        if v.ndim == 1:
            return f"a {kind}vector of length {v.shape[0]}"
        if v.ndim == 0:
            return "a number"
        return f"a {shape_text(v.shape)} {kind}matrix"
    if isinstance(v, tuple):
        return f"a tuple of {len(v)}"
    t = type_name(v)
    return {"none": "none", "number": "a number", "bool": "a bool", "string": "a string",
            "record": "a record", "function": "a function", "progress": "a progress(...) loop"}.get(t, t)


def format_number(x) -> str:
    """A whole number below 2^53 in magnitude with all its digits (18915328); any other number
    with up to 7 significant digits, the exponent without '+' or leading zeros (1.234568e-8).
    A fraction that rounds to 7 digits alone takes the exponent form (1234567.5 prints
    1.234568e6, not 1234568), so 7 or more digits without '.' or 'e' are exactly that number;
    noise around a small whole number still prints short (0.99999999 prints 1)."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x.is_integer() and abs(x) < WHOLE_LIMIT:
        return str(int(x))            # -0.0 prints as 0
    s = "%.7g" % x
    if len(s.lstrip("-")) >= 7 and "e" not in s and "." not in s:     # a fraction that would look whole
        mant, exp = ("%.6e" % x).split("e")
        s = f"{mant.rstrip('0').rstrip('.')}e{exp}"
    if "e" in s:
        mant, exp = s.split("e")
        sign = "-" if exp[0] == "-" else ""
        s = f"{mant}e{sign}{exp[1:].lstrip('0') or '0'}"
    return s


def format_gb(nbytes) -> str:
    """A size for messages: gigabytes to 3 significant digits, as the printer writes them ('8000 GB')."""
    return f"{format_number(float(f'{nbytes / 1e9:.3g}'))} GB"


def _scalar(x, is_bool: bool) -> str:
    if is_bool:
        return "true" if x else "false"
    return format_number(x)


def _row(items, is_bool, summarize) -> str:
    n = len(items)
    if summarize and n > 2 * EDGE:
        cells = [_scalar(x, is_bool) for x in items[:EDGE]] + ["..."] + \
                [_scalar(x, is_bool) for x in items[-EDGE:]]
    else:
        cells = [_scalar(x, is_bool) for x in items]
    return ", ".join(cells)


def _matrix_body(m: np.ndarray, is_bool: bool, summarize: bool, indent: str = "") -> str:
    """The literal of a non-empty 2-D matrix; a one-row matrix ends in ';' ([1, 2;]), as its literal does."""
    rows = list(range(m.shape[0]))
    if summarize and len(rows) > 2 * EDGE:
        shown = [_row(m[i], is_bool, True) for i in rows[:EDGE]] + ["..."] + \
                [_row(m[i], is_bool, True) for i in rows[-EDGE:]]
        return "[" + (";\n " + indent).join(shown) + "]"
    end = ";" if len(rows) == 1 else ""
    return "[" + "; ".join(_row(m[i], is_bool, summarize) for i in rows) + end + "]"


def format_array(a: np.ndarray) -> str:
    is_bool = a.dtype == np.bool_
    summarize = a.size > SUMMARY_THRESHOLD
    if a.ndim == 0:
        return _scalar(a[()], is_bool)
    if a.size == 0:
        # an empty array prints as the expression that makes it: [], zeros(0, 3), zeros(2, 0, 3)
        text = "[]" if a.ndim == 1 else f"zeros({', '.join(str(n) for n in a.shape)})"
        return f"{text} > 0" if is_bool else text
    if a.ndim == 1:
        body = "[" + _row(a, is_bool, summarize) + "]"
        return f"{a.shape[0]}-element vector {body}" if summarize else body
    if a.ndim == 2:
        body = _matrix_body(a, is_bool, summarize)
        return f"{shape_text(a.shape)} matrix\n{body}" if summarize else body
    # rank >= 3: one 2-D slice per leading index, with the shape first
    lines = [f"{shape_text(a.shape)} array"]
    lead = list(np.ndindex(*a.shape[:-2]))
    summarize_slices = summarize or len(lead) > 2 * EDGE
    shown = lead if not (summarize and len(lead) > 2 * EDGE) else lead[:EDGE] + [None] + lead[-EDGE:]
    for idx in shown:
        if idx is None:
            lines.append("...")
            continue
        label = "[" + ", ".join(str(i) for i in idx) + ", :, :]"
        lines.append(f"{label} = {_matrix_body(a[idx], is_bool, summarize_slices, ' ' * (len(label) + 3))}")
    return "\n".join(lines)


def quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def format_value(v, nested: bool = False) -> str:
    """The printed form of any value (LANGUAGE.md, Printing)."""
    if type(v) is Box:
        v = raw(v)
    if v is None:
        return "none"
    if v is True or v is False or isinstance(v, np.bool_):
        return "true" if v else "false"
    if isinstance(v, (float, int)):
        return format_number(v)
    if isinstance(v, str):
        return quote(v) if nested else v
    if isinstance(v, np.ndarray):
        return format_array(v)
    if isinstance(v, tuple):
        if len(v) == 1:
            return f"({format_value(v[0], True)},)"
        return "(" + ", ".join([format_value(x, True) for x in v]) + ")"   # lists: no C-stack recursion
    if isinstance(v, Record):
        return "{" + ", ".join([f"{k} = {format_value(x, True)}" for k, x in v.fields.items()]) + "}"
    if isinstance(v, Function):
        return f"<fn {v.signature()}>"
    if isinstance(v, Progress):
        return f"<progress {quote(v.desc) + ', ' if v.desc else ''}{v.count} step{'s' * (v.count != 1)}>"
    name = getattr(v, "name", None)
    if name:
        return f"<builtin {name}>"
    return f"<{type(v).__name__}>"
