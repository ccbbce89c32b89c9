"""Helpers shared by builtin modules: axis arguments, size limits, tree walking."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import limits
from tapeml.array.backend import ARRAYS, Matrix
from tapeml.array.primitive_table import is_bool_array
from tapeml.syntax.errors import TypeErr, ValueErr
from tapeml.array.ops import shape_of
from tapeml.array.tape import Box, raw
from tapeml.array.values import Dict, Record, describe, shape_text
from tapeml.array.number_text import format_gb
from tapeml.array.printer import format_value, not_whole_text

MAX_ELEMENTS = limits.MAX_ELEMENTS     # the one size guard lives in lang/array/limits.py


def axis(x, dim, name: str = "dim"):
    """Normalize an axis argument (negative counts from the end); None stays None."""
    if dim is None:
        return None
    nd = len(shape_of(x))
    d = int(dim)
    if nd == 0:
        raise ValueErr(f"{name}={d} is out of range for a number (it has no axes)")
    if not -max(nd, 1) <= d < max(nd, 1):
        raise ValueErr(f"{name}={d} is out of range for {describe(x)} (it has {nd} "
                       f"ax{'is' if nd == 1 else 'es'}: 0 to {nd - 1})")
    return d % max(nd, 1)


def one_by_one(fname: str, dims, what: str = "sizes") -> tuple:
    """The items of a variadic shape-like parameter, given one by one or as one tuple
    (reshape(x, size(y)), zeros(size(x)), permute(x, (1, 0))): the numbers, unpacked. A tuple
    among other items is a TypeError."""
    if len(dims) == 1 and isinstance(raw(dims[0]), tuple):
        return tuple(raw(dims[0]))
    for d in dims:
        if isinstance(raw(d), tuple):
            raise TypeErr(f"{fname}(): give the {what} as numbers one by one or as one tuple, "
                          f"not a tuple among other {what}")
    return tuple(dims)


def is_whole(v, lo=None) -> bool:
    """Whether v (a raw value) is a whole number (a finite float or int, not a bool) >= lo (lo
    None: of any sign)."""
    return (isinstance(v, (float, int)) and not isinstance(v, bool) and math.isfinite(v)
            and float(v).is_integer() and (lo is None or v >= lo))


def not_whole(v) -> str:
    """What a whole-number check says it got: a number's text (values.not_whole_text), else a
    description of the value ("a string", ...)."""
    return not_whole_text(v) if isinstance(v, (float, int)) and not isinstance(v, bool) else describe(v)


def check_size(fname: str, dims) -> tuple:
    """Validate sizes (one by one or one tuple); refuse shapes that would not fit in memory."""
    out = []
    for d in one_by_one(fname, dims):
        d = raw(d)
        if not is_whole(d, 0):
            raise ValueErr(f"{fname}(): sizes must be whole numbers >= 0, got {not_whole(d)}")
        out.append(int(d))
    shown = ", ".join(str(d) if d < 10 ** 16 else limits.g3(d) for d in out)   # never 300 digits
    limits.check_shape(f"{fname}({shown})", out)   # zeros(0, 2^63): no elements, but no such axis either
    return tuple(out)


def tree_leaves(value, path: str | None, others: str = "error", what: str = "the tree") -> list:
    """(path, leaf) pairs of a record/tuple tree, depth first, in field and item order. A leaf's
    path extends `path` with .field and [i] (a field at the root, path "", is just its name);
    path None builds no paths (every pair's path is None). Numbers and float matrices are
    leaves; any other leaf (a string, a bool, a function) is a TypeError naming its path when
    others is "error", left out when "skip", a leaf when "keep". A tree nested past
    limits.MAX_NESTING is the limits' ValueError about `what`."""
    out = []
    _walk(value, None if path is None else [path], others, out, 0, what)
    return out


def _path_text(parts: list) -> str:
    return "".join(parts)


def _walk(value, parts, others, out, depth, what):
    """`parts` (None: no paths) is the path as a list, joined only at a leaf: a deep tree costs
    no long strings per level."""
    r = raw(value)
    if isinstance(r, (Record, tuple, Dict)):
        if depth >= limits.MAX_NESTING:
            raise limits.nesting_error(what)
        if isinstance(r, Dict):
            for k, v in r.items():
                if parts is not None:
                    parts.append(f"[{format_value(k, True)}]")
                _walk(v, parts, others, out, depth + 1, what)
                if parts is not None:
                    parts.pop()
        elif isinstance(r, Record):
            for k, v in r.fields.items():
                if parts is not None:
                    parts.append(f".{k}" if parts != [""] else k)
                _walk(v, parts, others, out, depth + 1, what)
                if parts is not None:
                    parts.pop()
        else:
            for i, v in enumerate(r):
                if parts is not None:
                    parts.append(f"[{i}]")
                _walk(v, parts, others, out, depth + 1, what)
                if parts is not None:
                    parts.pop()
    elif (others == "keep" or (isinstance(r, (float, int)) and not isinstance(r, (bool, np.bool_)))
          or (isinstance(r, Matrix) and not is_bool_array(r))):
        out.append((None if parts is None else _path_text(parts), value))
    elif others == "error":
        raise TypeErr(f"{_path_text(parts)} is {describe(r)}; only numbers and matrices (in tuples, "
                      f"records and dictionaries) can be differentiated")


def tree_map(fn, value, what: str = "the tree", depth: int = 0):
    """Rebuild a tree with fn applied to each number/matrix leaf (a tree nested past
    limits.MAX_NESTING is the limits' ValueError about `what`)."""
    r = value
    while type(r) is Box:
        r = r.value
    t = type(r)
    if t is np.ndarray or t is float or t in ARRAYS:
        return fn(value)
    if isinstance(r, (Record, tuple, Dict)) and depth >= limits.MAX_NESTING:
        raise limits.nesting_error(what)
    if t is Record or isinstance(r, Record):
        return Record({k: tree_map(fn, v, what, depth + 1) for k, v in r.fields.items()})
    if t is Dict:
        return Dict({k: tree_map(fn, v, what, depth + 1) for k, v in r.items()})
    if t is tuple or isinstance(r, tuple):
        return tuple([tree_map(fn, v, what, depth + 1) for v in r])   # a list: deep trees recurse in Python frames only
    return fn(value)


__all__ = ["axis", "check_size", "is_whole", "not_whole", "one_by_one", "tree_leaves", "tree_map", "shape_text"]
