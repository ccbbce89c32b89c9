"""The one printer: `format_value` writes every value as print, str, interpolation and the errors
show it (docs/language.md, Printing). Its numbers are number_text.format_number's, `format_array`
is its matrix (summarized past SUMMARY_THRESHOLD elements) and `key_text` a dictionary key in
full. The REPL's display (display.py) lays out the same numbers differently.
"""
from __future__ import annotations

import math

import numpy as np

from tapeml.array.backend import ARRAYS
from tapeml.array.number_text import format_number
from tapeml.array.tape import Box, raw
from tapeml.array.values import (MAX_NESTING, Dict, Function, Progress, Record, host, nesting_error,
                                 shape_text)

SUMMARY_THRESHOLD = 1000   # arrays with more elements print summarized
EDGE = 3                   # items shown at each end of a summarized axis


def _scalar(x, is_bool: bool) -> str:
    if type(x) is str:          # a cell already written by a format spec (formatspec.apply_spec)
        return x
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


def key_text(k) -> str:
    """A dictionary key as the literal that makes it, numbers in full: two different keys never
    print alike (0.123456789 and 0.12345679; 2^53 as 9007199254740992)."""
    if type(k) is float:
        if k.is_integer() and abs(k) < 2.0 ** 63:
            return str(int(k))
        if k != k or abs(k) == float("inf"):
            return format_value(k)
        text = repr(k)          # the shortest text that reads back as k
        if "e" in text:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}e{int(exponent)}"
        return text
    if type(k) is tuple:
        return "(" + ", ".join(key_text(x) for x in k) + ("," if len(k) == 1 else "") + ")"
    return format_value(k, True)


def not_whole_text(v) -> str:
    """A number that should have been whole, as an error shows it: every digit where the printer's
    7 would hide why (3.0000000000000004, the rounding of 0.1 * 3 * 10, prints as 3), with the cure."""
    v = float(v)
    shown = format_value(v)
    if math.isfinite(v) and not v.is_integer() and float(shown).is_integer():
        return f"{v!r} (not a whole number, though it prints as {shown}: round(x) makes it one)"
    return shown


def format_value(v, nested: bool = False, depth: int = 0) -> str:
    """The printed form of any value (LANGUAGE.md, Printing). `depth`: how many tuples and
    records hold v (a value nested past limits.MAX_NESTING is refused, not walked)."""
    if type(v) is Box:
        v = raw(v)
    if type(v) in ARRAYS:
        v = host(v)
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
    if isinstance(v, (tuple, Record, Dict)) and depth >= MAX_NESTING:
        raise nesting_error("the value to print")
    depth += 1
    if isinstance(v, tuple):
        if len(v) == 1:
            return f"({format_value(v[0], True, depth)},)"
        # lists, not generators: deep values recurse in Python frames only, not on the C stack
        return "(" + ", ".join([format_value(x, True, depth) for x in v]) + ")"
    if isinstance(v, Record):
        return "{" + ", ".join([f"{k} = {format_value(x, True, depth)}" for k, x in v.fields.items()]) + "}"
    if isinstance(v, Dict):
        # as its literal: {"a": 1, (1, 2): [3, 4]}; the empty dictionary is {:}
        items = v.items()
        if not items:
            return "{:}"
        return "{" + ", ".join([f"{key_text(k)}: {format_value(x, True, depth)}"
                                for k, x in items]) + "}"
    if isinstance(v, Function):
        return f"<fn {v.signature()}>"
    if isinstance(v, Progress):
        return f"<progress {quote(v.desc) + ', ' if v.desc else ''}{v.count} step{'s' * (v.count != 1)}>"
    printed = getattr(v, "printed", None)      # a callable that says what it is (the Session's Python functions)
    if printed is not None:
        return printed()
    name = getattr(v, "name", None)
    if name:
        return f"<builtin {name}>"
    return f"<{type(v).__name__}>"


def _printed(self) -> str:
    return format_value(self)


# A record's and a dictionary's repr (the debugger, pytest's messages) is their printed form; set
# here because values.py, which defines them, sits below the printer.
Record.__repr__ = Dict.__repr__ = _printed
