"""Runtime values and the one printer.

number -> float (np.float64 is a float), bool -> bool, none -> None, string -> str,
matrix -> np.ndarray, tuple -> tuple, record -> Record, dictionary -> Dict, function -> a
Callable (a user Function or a registry Builtin).
Tracked values (tape.Box) print and behave as the value they hold.

`format_value` is the only formatter: print, interpolation, the REPL echo and the docs use it.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from tapeml.syntax.errors import InternalError, TypeErr, ValueErr, close_names
from tapeml.array.backend import ARRAYS, to_numpy
from tapeml.array.tape import Box, raw


def host(v):
    """v with another backend's matrix brought to NumPy: what the printer, the displays and the
    comparisons read (the one boundary: lang/array/backend.py)."""
    t = type(v)
    if t is np.ndarray or t not in ARRAYS:
        return v
    return to_numpy(v)


def is_numeric(v) -> bool:
    """A number, a bool, a matrix or a tracked one: what arithmetic and transposes accept."""
    t = type(v)
    return t is float or t is np.ndarray or t is Box or t is bool or t is np.float64 or t is int \
        or isinstance(v, (float, np.bool_)) or t in ARRAYS

SUMMARY_THRESHOLD = 1000   # arrays with more elements print summarized
EDGE = 3                   # items shown at each end of a summarized axis
WHOLE_LIMIT = 2.0 ** 53    # whole numbers below this magnitude print every digit
# Tuples and records inside each other that a walk over a value follows (printing, ==, the
# tree builtins, grad's parameter trees, the display, the Python API): as deep as the deepest
# recursion (scope.MAX_DEPTH calls) can build. A loop can build a value deeper than that; a walk
# refuses it with nesting_error instead of running out of stack or memory. One of the limits
# (lang/array/limits.py lists it), declared here because the limits' messages use this printer.
MAX_NESTING = 20_000


def nesting_error(what: str) -> ValueErr:
    """'{what} nests tuples and records more than 20000 deep': the one message of every walk."""
    return ValueErr(f"{what} nests tuples and records more than {MAX_NESTING} deep")


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


_ABSENT = object()          # a key a version of a Dict does not have
_DICT_LOCK = threading.Lock()   # every Dict's versions share one store; rerooting takes turns


class Dict:
    """A dictionary: keys (strings, numbers, tuples of those; see dict_key) mapped to values, in
    insertion order. A value like every other: `with_item` returns a new Dict and the old one
    keeps its items.

    The versions of a dictionary share one Python dict (Baker's trick for persistent arrays):
    the newest version holds it (`_store`), and each older one holds the undo of the one change
    that made the next version (`_diff`: key, the old value or _ABSENT, the next version).
    Changing the newest version costs O(1), so `counts[k] += 1` in a loop does not copy the
    dictionary; reading an older version first moves the store back to it (undoing the changes
    in reverse order, which also restores the insertion order: an undone insertion is the last
    key). Removing a key builds a fresh store (an undo could not put it back in its place).
    No method hands out the store: readers get items, tuples or new Dicts."""
    __slots__ = ("_store", "_diff")

    def __init__(self, items=None):
        self._store = dict(items) if items is not None else {}
        self._diff = None

    def _data(self) -> dict:
        """The store, as this version sees it (rerooted here first); call under _DICT_LOCK."""
        if self._store is not None:
            return self._store
        path, node = [], self
        while node._store is None:
            path.append(node)
            node = node._diff[2]
        store = node._store
        for n in reversed(path):                 # the version next to the root first
            key, old, newer = n._diff
            now = store.get(key, _ABSENT)
            if old is _ABSENT:
                del store[key]
            else:
                store[key] = old
            newer._store, newer._diff = None, (key, now, n)
            n._store, n._diff = store, None
        return store

    def __len__(self):
        with _DICT_LOCK:
            return len(self._data())

    def get(self, key, default=_ABSENT):
        """The value of a normalized key (dict_key), or `default` (_ABSENT when not given)."""
        with _DICT_LOCK:
            return self._data().get(key, default)

    def has(self, key) -> bool:
        with _DICT_LOCK:
            return key in self._data()

    def keys(self) -> tuple:
        with _DICT_LOCK:
            return tuple(self._data())

    def values(self) -> tuple:
        with _DICT_LOCK:
            return tuple(self._data().values())

    def items(self) -> tuple:
        """(key, value) pairs in insertion order: a snapshot."""
        with _DICT_LOCK:
            return tuple(self._data().items())

    def with_item(self, key, value) -> "Dict":
        """A new version with key set to value (a new key goes last); this one is unchanged."""
        new = Dict.__new__(Dict)
        with _DICT_LOCK:
            store = self._data()
            old = store.get(key, _ABSENT)
            store[key] = value
            new._store, new._diff = store, None
            self._store, self._diff = None, (key, old, new)
        return new

    def without(self, key) -> "Dict":
        """A new dictionary without key (a fresh store; this one is unchanged)."""
        with _DICT_LOCK:
            items = dict(self._data())
        del items[key]
        return Dict(items)

    def __repr__(self):
        return format_value(self)


def dict_key(v, depth: int = 0):
    """A value as a dictionary key: a string, a number (a float; a tracked or 0-d one by its value)
    or a tuple of those. TypeErr for any other kind (bools too: true would equal 1), ValueErr for
    nan (it equals nothing, so it could never be found again)."""
    v = host(raw(v))
    t = type(v)
    if t is str:
        return v
    if t is float:
        if v != v:
            raise ValueErr("a dictionary key cannot be nan (nan equals nothing, so it could never be "
                           "found again)")
        return v + 0.0              # -0.0 and 0.0 are one key
    if t is tuple:
        if depth >= MAX_NESTING:
            raise nesting_error("the dictionary key")
        return tuple([dict_key(x, depth + 1) for x in v])
    if isinstance(v, (bool, np.bool_)):
        raise TypeErr("a dictionary key is a string, a number or a tuple of those, got a bool")
    if isinstance(v, (float, int)):
        return dict_key(float(v), depth)
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype != np.bool_:
        return dict_key(float(v), depth)
    hint = ""
    if isinstance(v, np.ndarray):
        hint = "; a vector's numbers as a key: tuple(v)"
    raise TypeErr(f"a dictionary key is a string, a number or a tuple of those, got {describe(v)}{hint}")


class Callable:
    """What a call expression can call (as jlox's LoxCallable): user functions and builtins.

    A callable has a `name`, `params` (each with `.name` and `.default`; a builtin's may be
    `.variadic`), `signature()` and `call(interp, args, kwargs, span)`. Its arguments are
    matched by the one binder, `bind_arguments`; the class attributes below are what differs
    between the kinds: the default that marks a required parameter, the wording of the three
    binding errors, keyword synonyms, and a hook that checks each passed argument."""
    __slots__ = ()
    NO_DEFAULT = None         # a parameter whose .default is this must be passed
    variadic_at = None        # index of the parameter collecting the remaining positionals
    synonyms: dict = {}       # other libraries' keyword -> this callable's parameter name
    convert_argument = None   # (param, value) -> value, applied to each passed argument
    TOO_MANY = "{name}() takes {n} argument{s} ({signature}), got {got}"
    MISSING = "{name}() is missing the argument '{param}' ({signature})"
    UNKNOWN = "{name}() has no parameter '{key}'{hint} ({signature})"

    def signature(self) -> str:
        raise NotImplementedError

    def call(self, interp, args: list, kwargs: dict, span):
        raise NotImplementedError


def bind_arguments(fn: Callable, args: list, kwargs: dict, bound: dict, span=None,
                   evaluate=None, env=None) -> dict:
    """The one binder: positional arguments, then keywords, then defaults, into `bound`
    (parameter name -> value, in `fn.params` order once complete). A missing optional
    parameter gets its default: the value itself, or, with `evaluate`, the default
    expression evaluated in `env` (a user function's defaults may name earlier parameters)."""
    params = fn.params
    rest = fn.variadic_at
    if rest is None:
        if len(args) > len(params):
            n = len(params)
            raise TypeErr(fn.TOO_MANY.format(name=fn.name, n=n, s="s" * (n != 1), got=len(args),
                                             signature=fn.signature()), span)
        for p, a in zip(params, args):
            bound[p.name] = a
    else:
        for p, a in zip(params[:rest], args):
            bound[p.name] = a
        bound[params[rest].name] = tuple(args[rest:])
    if kwargs:
        names = [p.name for i, p in enumerate(params) if i != rest]
        for k, v in kwargs.items():
            if k not in names:
                close = ([fn.synonyms[k]] if fn.synonyms.get(k) in names
                         else close_names(k, names))
                hint = f"; did you mean '{close[0]}'?" if close else ""
                if not names:       # print(1, sep="-"): nothing to name, only values to pass
                    raise TypeErr(f"{fn.name}() has no parameter '{k}': it takes only values, "
                                  f"{fn.signature()}", span)
                raise TypeErr(fn.UNKNOWN.format(name=fn.name, key=k, hint=hint, signature=fn.signature(),
                                                names=", ".join(names)), span)
            if k in bound:
                raise TypeErr(f"{fn.name}() got '{k}' both by position and by keyword", span)
            bound[k] = v
    convert = fn.convert_argument
    if convert is not None or len(bound) < len(params):
        missing = fn.NO_DEFAULT
        for p in params:
            name = p.name
            if name in bound:
                if convert is not None:
                    bound[name] = convert(p, bound[name])
            elif p.default is missing:
                raise TypeErr(fn.MISSING.format(name=fn.name, param=name, signature=fn.signature()), span)
            else:
                bound[name] = p.default if evaluate is None else evaluate(p.default, env)
    return bound


class Function(Callable):
    """A user function: parameters (ast.Param), a body, and the environment it closes over."""
    __slots__ = ("name", "params", "body", "env", "span", "module", "code")

    def __init__(self, name, params, body, env, span):
        self.name, self.params, self.body, self.env, self.span = name, params, body, env, span
        self.code = None        # the body compiled on the first call (lang/evaluator/compiler.py); False: walked

    def signature(self) -> str:
        from tapeml.syntax.unparse import unparse

        def default(node):
            value = getattr(node, "value", None)
            return format_number(value) if type(value) is float else unparse(node)
        parts = [p.name if p.default is None else f"{p.name}={default(p.default)}" for p in self.params]
        return f"{self.name}({', '.join(parts)})"

    def call(self, interp, args: list, kwargs: dict, span):
        return interp.call_function(self, args, kwargs, span)


class Progress:
    """What progress(items, desc) returns: `items` (a range, matrix, tuple, string or number),
    walked by a `for` loop exactly as the bare items are, while lang/evaluator/progress.py draws a bar of
    `count` steps (the loop's length, known before it starts)."""
    __slots__ = ("items", "desc", "count")

    def __init__(self, items, desc: str, count: int):
        self.items, self.desc, self.count = items, desc, count


def type_name(v) -> str:
    """The kind of a value as users see it (the `type` builtin)."""
    v = host(raw(v))
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
    if isinstance(v, Dict):
        return "dict"
    if isinstance(v, Progress):
        return "progress"
    if isinstance(v, Callable):
        return "function"
    raise InternalError(f"a value of Python type {type(v).__name__} reached the language")


def shape_text(shape: tuple) -> str:
    """'a number', 'a vector of length 3', '2x3', '2x3x4'. A size past 1e16 (only a refused one:
    no array has it) is written as the printer writes numbers, never with 300 digits."""
    if len(shape) == 0:
        return "a number"
    if len(shape) == 1:
        return f"a vector of length {_size_text(shape[0])}"
    return "x".join(t if " " not in t else f"({t})" for t in map(_size_text, shape))


def _size_text(n) -> str:
    if n < 10 ** 16:
        return str(n)
    try:
        return format_number(float(n))
    except OverflowError:
        return "more than 1e308"


def describe(v) -> str:
    """A short description of a value's kind and shape, for error messages."""
    v = host(raw(v))
    if isinstance(v, np.ndarray):
        kind = "bool " if v.dtype == np.bool_ else ""
        if v.ndim == 1:
            return f"a {kind}vector of length {v.shape[0]}"
        if v.ndim == 0:
            return "a number"
        return f"a {shape_text(v.shape)} {kind}matrix"
    if isinstance(v, tuple):
        return f"a tuple of {len(v)}"
    if isinstance(v, Dict):
        n = len(v)
        return f"a dict of {n} key{'s' * (n != 1)}"
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


# ---- the display: a second layout of the same formatting, for the REPL echo and the docs ------
#
# print, str and interpolation keep format_value's one-line form; a bare expression in the REPL
# (and in the docs, the kernel's text/plain) shows display_value's form, laid out for a terminal
# of `width` columns and `height` rows: matrices as aligned grids under a shape header, long
# vectors wrapped, big records and tuples as a tree of fields with shapes. Every number is still
# written by format_number (through _scalar): only the layout differs.

DISPLAY_WIDTH = 80           # columns, when there is no terminal (the docs, the kernel)
DISPLAY_HEIGHT = 24          # rows, likewise
GAP = "  "                   # between grid columns
H_ELLIPSIS = "..."           # the elided columns of a grid
V_ELLIPSIS = "⋮"             # the elided rows of a grid or lines of a tree
D_ELLIPSIS = "⋱"             # where elided rows meet elided columns


def display_value(v, width: int = DISPLAY_WIDTH, height: int = DISPLAY_HEIGHT) -> str:
    """The REPL's echo of `v` for a terminal of `width` x `height`: a matrix with more than one
    row (or too wide for a line) as an aligned grid under a `RxC matrix:` header, a vector too
    long for a line wrapped under an `N-element vector:` header, a record or tuple too long for
    a line as a tree of fields with shapes; anything else as format_value writes it (strings
    quoted). Never wider than `width` (bar a single cell or name longer than that), and never
    much taller than `height`."""
    width, height = max(int(width), 20), max(int(height), 8)
    v = host(raw(v))
    if isinstance(v, np.ndarray):
        return display_array(v, width, height)
    if isinstance(v, (tuple, Record, Dict)):
        line = format_value(v, True)
        if "\n" not in line and len(line) <= width:
            return line
        return _display_tree(v, width, height)
    return format_value(v, True)


def _split_cell(s: str) -> tuple[str, str]:
    """A formatted number split where its decimal point goes ('-1.5e-8' -> '-1', '.5e-8'),
    so a column's cells align on it; words (true, nan, inf) are all left part."""
    for i, ch in enumerate(s):
        if ch in ".e" and i > 0 and s[i - 1].isdigit():
            return s[:i], s[i:]
    return s, ""


class _Column:
    """The cells of one grid column, aligned on the decimal point."""
    __slots__ = ("parts", "left", "right")

    def __init__(self, cells):
        self.parts = [_split_cell(c) for c in cells]
        self.left = max(len(a) for a, _ in self.parts)
        self.right = max(len(b) for _, b in self.parts)

    @property
    def width(self):
        return self.left + self.right

    def cell(self, i):
        a, b = self.parts[i]
        return a.rjust(self.left) + b.ljust(self.right)

    def mark(self, ch):
        """`ch` (⋮) under the column's decimal point."""
        return (" " * max(self.left - 1, 0) + ch).ljust(self.width)


def _edge_indices(n: int, keep: int) -> list:
    """0..n-1, or its first and last items with None between when n > keep (keep >= 3)."""
    if n <= keep:
        return list(range(n))
    top = (keep - 1 + 1) // 2
    bottom = keep - 1 - top
    return list(range(top)) + [None] + list(range(n - bottom, n))


def _grid_rows(m: np.ndarray, width: int, max_rows: int, indent: str = " ") -> list[str]:
    """The lines of a 2-D matrix as a grid: columns aligned on the decimal point, rows elided
    with ⋮ past max_rows, columns elided with ... past `width` (taken from both ends)."""
    is_bool = m.dtype == np.bool_
    nrows, ncols = m.shape
    rows = _edge_indices(nrows, max(max_rows, 3))
    shown_rows = [i for i in rows if i is not None]
    # no column is narrower than one character plus the gap: at most this many fit from each end
    reach = min(ncols, width // (1 + len(GAP)) + 1)
    candidates = sorted(set(range(reach)) | set(range(max(ncols - reach, 0), ncols)))
    cols = {j: _Column([_scalar(m[i, j], is_bool) for i in shown_rows]) for j in candidates}
    room = width - len(indent)
    total = sum(cols[j].width for j in range(ncols)) + len(GAP) * (ncols - 1) if reach == ncols else room + 1
    if total <= room:
        left, right = list(range(ncols)), []
    else:
        left, right, used = [], [], len(H_ELLIPSIS)
        lo, hi = 0, ncols - 1
        take_left = True
        while lo <= hi:
            j = lo if take_left else hi
            need = cols[j].width + len(GAP)
            if used + need > room and (left or right):
                break
            used += need
            if take_left:
                left.append(j)
                lo += 1
            else:
                right.insert(0, j)
                hi -= 1
            take_left = not take_left
    lines = []
    for i in rows:
        if i is None:
            cells = [cols[j].mark(V_ELLIPSIS) for j in left]
            if right:
                cells += [D_ELLIPSIS.center(len(H_ELLIPSIS))] + [cols[j].mark(V_ELLIPSIS) for j in right]
        else:
            k = shown_rows.index(i)
            cells = [cols[j].cell(k) for j in left]
            if right:
                cells += [H_ELLIPSIS] + [cols[j].cell(k) for j in right]
        lines.append((indent + GAP.join(cells)).rstrip())
    return lines


def _vector_lines(a: np.ndarray, width: int, max_lines: int, indent: str = " ") -> list[str]:
    """A long vector wrapped in lines of equal, decimal-aligned cells; lines elided with ⋮."""
    is_bool = a.dtype == np.bool_
    n = a.shape[0]
    far = 4096                       # enough cells for any screen: the middle is never formatted
    idx = list(range(n)) if n <= 2 * far else list(range(far)) + list(range(n - far, n))
    col = _Column([_scalar(a[i], is_bool) for i in idx])
    where = {i: k for k, i in enumerate(idx)}
    per_line = max(1, (width - len(indent) + len(GAP)) // (col.width + len(GAP)))
    nlines = -(-n // per_line)
    lines = []
    for line in _edge_indices(nlines, max(max_lines, 3)):
        if line is None:
            lines.append((indent + col.mark(V_ELLIPSIS)).rstrip())
            continue
        cells = [col.cell(where[i]) for i in range(line * per_line, min(n, (line + 1) * per_line))]
        lines.append((indent + GAP.join(cells)).rstrip())
    return lines


def _kind_of_array(a: np.ndarray) -> str:
    return "bool " if a.dtype == np.bool_ else ""


def display_array(a: np.ndarray, width: int = DISPLAY_WIDTH, height: int = DISPLAY_HEIGHT) -> str:
    """A matrix as the REPL shows it (display_value)."""
    line = format_array(a)
    if a.ndim == 0 or a.size == 0:
        return line
    rows_room = max(height - 5, 6)          # the header, the prompts and a line of context
    kind = _kind_of_array(a)
    short = a.size <= SUMMARY_THRESHOLD and "\n" not in line and len(line) <= width
    if a.ndim == 1:
        if short:
            return line
        return "\n".join([f"{a.shape[0]}-element {kind}vector:"] + _vector_lines(a, width, rows_room))
    if a.ndim == 2:
        if a.shape[0] == 1 and short:
            return line                     # [1, 2, 3;]: one row stays on one line
        return "\n".join([f"{shape_text(a.shape)} {kind}matrix:"] + _grid_rows(a, width, rows_room))
    lead = list(np.ndindex(*a.shape[:-2]))
    slices = _edge_indices(len(lead), max(3, min(len(lead), 5) if len(lead) <= 5 else 5))
    n_shown = sum(1 for s in slices if s is not None)
    per_slice = max(3, (height - 3) // n_shown - 2)
    out = [f"{shape_text(a.shape)} {kind}array:"]
    for k in slices:
        if k is None:
            out.append(V_ELLIPSIS)
            continue
        idx = lead[k]
        out.append("[" + ", ".join(str(i) for i in idx) + ", :, :] =")
        out.extend(_grid_rows(a[idx], width, per_slice))
    return "\n".join(out)


def _leaf_text(v) -> str:
    """A tree leaf: a matrix's shape, a number's or string's value, a function's signature."""
    if isinstance(v, np.ndarray):
        kind = _kind_of_array(v)
        if v.ndim == 0:
            return _scalar(v[()], v.dtype == np.bool_)
        if v.ndim == 1:
            return f"{v.shape[0]}-element {kind}vector"
        return f"{shape_text(v.shape)} {kind}{'matrix' if v.ndim == 2 else 'array'}"
    return format_value(v, True)


def _count_numbers(v, depth: int = 0) -> int:
    """The numbers a tree holds, as param_count counts them (float matrices and numbers)."""
    v = host(raw(v))
    if isinstance(v, (Record, tuple, Dict)):
        if depth >= MAX_NESTING:
            raise nesting_error("the value to show")
        total = 0
        for x in (v.fields.values() if isinstance(v, Record) else v.values() if isinstance(v, Dict) else v):
            total += _count_numbers(x, depth + 1)
        return total
    if isinstance(v, np.ndarray):
        return 0 if v.dtype == np.bool_ else int(v.size)
    if isinstance(v, (float, int)) and not isinstance(v, bool):
        return 1
    return 0


def _structure(v, depth: int = 0):
    """The kinds and shapes of a tree, without its numbers (to spot repeated layers and heads)."""
    v = host(raw(v))
    if isinstance(v, (Record, tuple, Dict)) and depth >= MAX_NESTING:
        raise nesting_error("the value to show")
    if isinstance(v, Record):
        return tuple([(k, _structure(x, depth + 1)) for k, x in v.fields.items()])
    if isinstance(v, Dict):
        return ("{}",) + tuple([(k, _structure(x, depth + 1)) for k, x in v.items()])
    if isinstance(v, tuple):
        return ("()",) + tuple([_structure(x, depth + 1) for x in v])
    if isinstance(v, np.ndarray):
        return (v.shape, v.dtype == np.bool_)
    return type_name(v)


def _more_parts_than(v, n: int) -> bool:
    """Whether the tree v has more than n tuples, records and leaves (then its one-line form has
    more than n characters: each part writes at least one), counting no further than that."""
    stack, seen = [v], 0
    while stack:
        x = host(raw(stack.pop()))
        seen += 1
        if seen > n:
            return True
        if isinstance(x, Record):
            stack.extend(x.fields.values())
        elif isinstance(x, tuple):
            stack.extend(x)
        elif isinstance(x, Dict):
            for k, item in x.items():
                stack.extend((k, item))
    return False


def _node_text(v) -> str:
    if isinstance(v, Record):
        return f"record with {len(v.fields)} field{'s' * (len(v.fields) != 1)}"
    if isinstance(v, Dict):
        return f"dict of {len(v)} key{'s' * (len(v) != 1)}"
    return f"tuple of {len(v)}"


SHORT_SUBTREE = 40           # a nested record or tuple whose one-line form fits shows on one row


def _display_tree(v, width: int, height: int) -> str:
    """A record or tuple as a tree: one line per field (name, then its shape or value), nested
    records and tuples indented under theirs; a short matrix value follows its shape."""
    rows = []                        # (depth, name, text, value)

    def walk(node, depth):
        if depth > MAX_NESTING:
            raise nesting_error("the value to show")
        items = node.fields.items() if isinstance(node, Record) else \
            ((f"[{format_value(k, True)}]", x) for k, x in node.items()) if isinstance(node, Dict) else \
            ((f"[{i}]", x) for i, x in enumerate(node))
        first = None                 # a tuple's first nested item: later items of its structure say so
        for name, x in items:
            x = host(raw(x))
            if isinstance(x, (Record, tuple, Dict)):
                if not _more_parts_than(x, SHORT_SUBTREE):
                    line = format_value(x, True, depth)
                    if len(line) <= SHORT_SUBTREE and "\n" not in line:
                        rows.append((depth, name, line, None))
                        continue
                if isinstance(node, tuple):
                    if first is None:
                        first = (name, x, None)
                    else:
                        if first[2] is None:         # the first item's structure, once, when needed
                            first = (first[0], first[1], _structure(first[1], depth))
                        if _structure(x, depth) == first[2]:
                            rows.append((depth, name, f"{_node_text(x)}, shaped as {first[0]}", None))
                            continue
                rows.append((depth, name, _node_text(x), None))
                walk(x, depth + 1)
            else:
                rows.append((depth, name, _leaf_text(x), x))

    walk(v, 1)
    n = _count_numbers(v)
    head = f"{_node_text(v)}, {n:,} number{'s' * (n != 1)}:"
    # indentation past the width would be cut anyway: a deep tree's rows are not built past it
    name_width = min(max(2 * d + len(name) for d, name, _, _ in rows), width) if rows else 0
    room = max(height - 4, 6)
    more = len(rows) - (room - 1) if len(rows) > room else 0
    if more:
        rows = rows[:room - 1]
    lines = []
    for depth, name, text, value in rows:
        line = f"{'  ' * min(depth, width)}{name}".ljust(name_width) + GAP + text
        if isinstance(value, np.ndarray) and value.ndim >= 1 and value.size and \
                (value.ndim == 1 or value.shape[0] == 1):
            shown = format_array(value)
            if "\n" not in shown and len(line) + len(GAP) + len(shown) <= width:
                line += GAP + shown
        if len(line) > width:
            line = line[:width - 3] + "..."
        lines.append(line)
    if more:
        lines.append(f"  {V_ELLIPSIS} {more} more lines")
    return "\n".join([head] + lines)


def values_equal(a, b, depth: int = 0) -> bool:
    """Structural equality for non-array values (strings, none, tuples, records)."""
    if type(a) is not type(b) and not (isinstance(a, (float, int)) and isinstance(b, (float, int))):
        return False
    if isinstance(a, (tuple, Record, Dict)) and depth >= MAX_NESTING:
        raise nesting_error("a value compared")
    if isinstance(a, Dict):
        # the same keys with equal values, in any order (Python's rule for dicts)
        items, other = a.items(), dict(b.items())
        if len(items) != len(other):
            return False
        for k, x in items:
            y = other.get(k, _ABSENT)
            if y is _ABSENT or not values_equal(host(raw(x)), host(raw(y)), depth + 1):
                return False
        return True
    # plain loops, not all(generator): deep nesting must recurse in Python frames only
    if isinstance(a, tuple):
        if len(a) != len(b):
            return False
        for x, y in zip(a, b):
            if not values_equal(host(raw(x)), host(raw(y)), depth + 1):
                return False
        return True
    if isinstance(a, Record):
        if list(a.fields) != list(b.fields):
            return False
        for k in a.fields:
            if not values_equal(host(raw(a.fields[k])), host(raw(b.fields[k])), depth + 1):
                return False
        return True
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.all(a == b))
    return a is b or a == b
