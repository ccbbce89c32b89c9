"""Runtime values: the kinds a program computes with, their names in messages and their equality.

number -> float (np.float64 is a float), bool -> bool, none -> None, string -> str,
matrix -> np.ndarray, tuple -> tuple, record -> Record, dictionary -> Dict, function -> a
Callable (a user Function or a registry Builtin).
Tracked values (tape.Box) print and behave as the value they hold.

The one printer (`format_value`) is printer.py, the REPL's display layout display.py, and a
number's text number_text.py (the one module of the three that this one imports). A record's and
a dictionary's repr is their printed form (set by printer.py).
"""
from __future__ import annotations

import threading

import numpy as np

from tapeml.syntax.errors import InternalError, TypeErr, ValueErr, close_names
from tapeml.array.backend import ARRAYS, to_numpy
from tapeml.array.number_text import format_number
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

# Tuples and records inside each other that a walk over a value follows (printing, ==, the
# tree builtins, grad's parameter trees, the display, the Python API): as deep as the deepest
# recursion (scope.MAX_DEPTH calls) can build. A loop can build a value deeper than that; a walk
# refuses it with nesting_error instead of running out of stack or memory. One of the limits
# (lang/array/limits.py lists it), declared here beside the values it bounds.
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
