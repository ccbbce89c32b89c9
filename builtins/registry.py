"""The builtin registry: every builtin is declared once, with its documentation.

    @builtin("layer_norm", "Statistics & ML", "Normalize each row ...",
             params=[P("x", "array", shape="[..., D]", doc="..."), ...],
             returns="[..., D]", what="...", how="...", errors=[...], examples=[...])
    def layer_norm(x, gamma, beta, eps): ...

The interpreter's argument binding, the REPL's completion and help, and the docs builder all
read this one table (DESIGN.md rule 8). Argument kinds and constraints are checked here, so
builtin bodies receive validated values.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tapeml.errors import TypeErr, ValueErr
from tapeml.tape import Box, raw
from tapeml.values import Function, Record, describe, format_value

REQUIRED = object()
INT_BOUND = 2 ** 53           # "int" parameters: whole numbers a float64 holds exactly
# Keyword names other libraries use for a parameter tapeml names differently (NumPy's axis,
# PyTorch's keepdim, Hugging Face's num_heads): the error suggests tapeml's name.
SYNONYMS = {"axis": "dim", "keepdim": "keepdims", "num_heads": "n_heads", "nhead": "n_heads",
            "epsilon": "eps", "is_causal": "causal", "attn_mask": "mask", "p": "dropout"}

CATEGORIES = ["Core", "Math", "Arrays", "Statistics & ML", "Autodiff", "Random", "Plotting", "IO",
              "Strings & collections"]


class SourceText(str):
    """A default value as written in tapeml source (a stdlib signature), shown verbatim."""


@dataclass
class P:
    """One parameter: name, kind, default, doc text, shape, and an optional constraint.

    kinds: any, number, int, bool, string, array (number or matrix), function, record,
    tuple, tree (number, matrix, tuple or record, nested). `check(value)` returns an error
    message (the constraint that failed) or None. `variadic` collects the remaining
    positional arguments into a tuple."""
    name: str
    kind: str = "any"
    default: object = REQUIRED
    doc: str = ""
    shape: str = ""
    check: Callable | None = None
    variadic: bool = False
    constraint: str = ""     # the constraint in words, for docs (`> 0`, `one of ...`)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED and not self.variadic


@dataclass
class Builtin:
    name: str
    category: str
    summary: str
    fn: Callable
    params: list
    returns: str = ""
    what: str = ""
    how: str = ""
    errors: list = field(default_factory=list)
    examples: list = field(default_factory=list)
    interp: bool = False            # fn takes the interpreter as its first argument
    differentiable: bool = False    # records onto the tape (docs check its gradient)

    def signature(self) -> str:
        return call_text(self.name, self.params)

    def bind(self, args: list, kwargs: dict) -> list:
        """Match positional and keyword arguments to parameters, apply defaults, check kinds
        and constraints. Raises TypeErr / ValueErr that name the builtin and the parameter."""
        params = self.params
        bound = {}
        vi = next((i for i, p in enumerate(params) if p.variadic), None)
        positional = params if vi is None else params[:vi]
        if vi is None and len(args) > len(positional):
            n = len(positional)
            raise TypeErr(f"{self.name}() takes at most {n} argument{'s' * (n != 1)}, "
                          f"got {len(args)}: {self.signature()}")
        for p, a in zip(positional, args):
            bound[p.name] = a
        if vi is not None:
            bound[params[vi].name] = tuple(args[len(positional):])
        for k, v in kwargs.items():
            p = next((q for q in params if q.name == k and not q.variadic), None)
            if p is None:
                names = [q.name for q in params if not q.variadic]
                close = [SYNONYMS[k]] if SYNONYMS.get(k) in names else difflib.get_close_matches(k, names, 1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise TypeErr(f"{self.name}() has no parameter '{k}'{hint} "
                              f"(parameters: {', '.join(names) or 'none'})")
            if p.name in bound:
                raise TypeErr(f"{self.name}() got '{k}' both by position and by keyword")
            bound[k] = v
        out = []
        for p in params:
            if p.name in bound:
                v = bound[p.name]
            elif p.variadic:
                v = ()
            elif p.default is REQUIRED:
                raise TypeErr(f"{self.name}() is missing the argument '{p.name}': {self.signature()}")
            else:
                out.append(p.default)
                continue
            if p.variadic:
                v = tuple(convert(self.name, p, x) for x in v)
            else:
                v = convert(self.name, p, v)
            if p.check is not None and not p.variadic:
                msg = p.check(raw(v))
                if msg:
                    raise ValueErr(f"{self.name}(): {p.name} {msg}, got {format_value(v, True)}")
            out.append(v)
        return out


def _is_number(v) -> bool:
    return isinstance(v, (float, int)) and not isinstance(v, bool)


def convert(fname: str, p: P, v):
    """Check a value against a parameter kind; return it converted (Boxes kept for arrays)."""
    kind = p.kind
    if kind == "any" or (v is None and p.default is None):
        return v
    r = raw(v)
    ok = True
    if kind == "number":
        if type(r) is np.ndarray and r.ndim == 0:
            return float(r)
        if _is_number(r):
            if type(v) is Box:  # a tracked number: its gradient would silently be 0
                raise TypeErr(f"{fname}(): {p.name} is being differentiated (it depends on the input of "
                              f"grad), but {fname}() takes it as a plain number; write "
                              f"stop_gradient(...) around it to use its value with a gradient of 0")
            return float(r)
        ok = False
    elif kind == "int":
        if _is_number(r) and math.isfinite(r) and float(r).is_integer():
            if abs(r) > INT_BOUND:      # no count, index or seed is larger; never a 300-digit int
                raise ValueErr(f"{fname}(): {p.name} must be a whole number between -2^53 and 2^53, "
                               f"got {format_value(r)}")
            return int(r)
        if _is_number(r):
            raise ValueErr(f"{fname}(): {p.name} must be a whole number, got {format_value(r)}")
        ok = False
    elif kind == "array":
        ok = _is_number(r) or isinstance(r, (bool, np.ndarray))
    elif kind == "bool":
        if isinstance(r, np.bool_):
            return bool(r)
        ok = isinstance(r, bool)
    elif kind == "string":
        ok = isinstance(r, str)
    elif kind == "function":
        ok = isinstance(r, (Function, Builtin))
    elif kind == "record":
        ok = isinstance(r, Record)
    elif kind == "tuple":
        ok = isinstance(r, tuple)
    elif kind == "tree":
        ok = _is_number(r) or isinstance(r, (np.ndarray, tuple, Record))
    if not ok:
        want = {"number": "a number", "int": "a whole number", "array": "a number or a matrix",
                "bool": "true or false", "string": "a string", "function": "a function",
                "record": "a record", "tuple": "a tuple",
                "tree": "a number, matrix, tuple or record"}[kind]
        raise TypeErr(f"{fname}(): {p.name} must be {want}, got {describe(v)}")
    return v


def call_text(name: str, params) -> str:
    """`name(a, b=1, rest...)`: the one formatter of call shapes (help, completion, docs).
    A default that is a `str` subclass other than str (source text kept verbatim) prints as is."""
    parts = []
    for p in params:
        if p.variadic:
            parts.append(f"{p.name}...")
        elif p.default is REQUIRED:
            parts.append(p.name)
        elif isinstance(p.default, str) and type(p.default) is not str:
            parts.append(f"{p.name}={p.default}")
        else:
            parts.append(f"{p.name}={format_value(p.default, True)}")
    return f"{name}({', '.join(parts)})"


REGISTRY: dict[str, Builtin] = {}


def builtin(name: str, category: str, summary: str, params=(), *, returns: str = "", what: str = "",
            how: str = "", errors=(), examples=(), interp: bool = False, differentiable: bool = False):
    """Declare a builtin. See the module docstring."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}")

    def register(fn):
        if name in REGISTRY:
            raise ValueError(f"builtin {name!r} declared twice")
        REGISTRY[name] = Builtin(name, category, summary, fn, list(params), returns, what, how,
                                 list(errors), list(examples), interp, differentiable)
        return fn
    return register


# constraint helpers: each returns a check function and is documented by its text
def positive(v):
    return None if v > 0 else "must be > 0"


def non_negative(v):
    return None if v >= 0 else "must be >= 0"


def one_of(*choices):
    def check(v):
        return None if v in choices else "must be one of " + ", ".join(f'"{c}"' for c in choices)
    return check
