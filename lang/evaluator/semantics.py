"""The meaning of operators and conditions on values, as plain functions: what `a op b` gives
(and the error when it has none), and what counts as a condition's true or false. The evaluator
calls them from its nodes; a compiled evaluator calls the same ones, so the language's answers
and messages live here once."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import limits, ops
from tapeml.array.backend import ARRAYS, is_out_of_memory
from tapeml.array.primitive_table import _matmul_shape, is_bool_array
from tapeml.syntax import ast as A
from tapeml.builtins.registry import FOREIGN_FIELDS, REGISTRY
from tapeml.syntax.errors import LangError, NameErr, ShapeError, TypeErr, ValueErr, close_names
from tapeml.array.tape import Box, raw
from tapeml.array.values import Dict, Function, Record, describe, is_numeric, shape_text, values_equal
from tapeml.array.number_text import format_gb
from tapeml.array.printer import format_value

BINARY = {"+": ops.add, "-": ops.sub, "*": ops.mul, "/": ops.div, "%": ops.mod, "^": ops.pow_,
          "@": ops.matmul, "==": ops.eq, "!=": ops.ne, "<": ops.lt, "<=": ops.le, ">": ops.gt,
          ">=": ops.ge}
# Two plain floats are never on a tape: the interpreter calls the primitive's declared
# scalar form (ops.primitive(..., scalar=)) directly.
FLOAT_OPS = {sym: ops.TABLE[name].scalar for sym, name in
             (("+", "add"), ("-", "sub"), ("*", "mul"), ("<", "lt"), ("<=", "le"), (">", "gt"),
              (">=", "ge"), ("==", "eq"), ("!=", "ne"))}
OP_WORDS = {"+": "add", "-": "subtract", "*": "multiply elementwise", "/": "divide", "%": "take the remainder of",
            "^": "raise", "==": "compare", "!=": "compare", "<": "compare", "<=": "compare", ">": "compare",
            ">=": "compare", "and": "combine with 'and'", "or": "combine with 'or'"}


def binary(op, a, b, span, note=""):
    """`a op b` for any two values; errors carry `span` (the operator's place); `note` ends a
    shape error's message (range_note)."""
    ta, tb = type(a), type(b)
    if ((ta is float or ta is np.ndarray or ta is Box) and (tb is float or tb is np.ndarray or tb is Box)) \
            or (is_numeric(a) and is_numeric(b)):
        try:
            return BINARY[op](a, b)
        except (ValueError, TypeError) as e:
            raise shape_error(op, a, b, span, note) from e
        except RecursionError:
            raise
        except RuntimeError as e:       # torch's word for operands whose shapes do not fit, and for no memory
            if is_out_of_memory(e):
                raise memory_error(op, a, b, span) from None
            raise shape_error(op, a, b, span, note) from e
        except MemoryError:
            raise memory_error(op, a, b, span) from None
        except LangError as e:          # the size guard (lang/array/limits.py)
            raise e.with_span(span)
    ra, rb = raw(a), raw(b)
    if op in ("==", "!="):
        try:
            same = values_equal(ra, rb)
        except LangError as e:          # a value nested past limits.MAX_NESTING
            raise e.with_span(span) from None
        return same if op == "==" else not same
    if op == "+" and isinstance(ra, str) and isinstance(rb, str):
        try:
            limits.check_join("the joined string", (ra, rb))
        except LangError as e:
            raise e.with_span(span) from None
        return ra + rb
    if op == "+" and isinstance(ra, tuple) and isinstance(rb, tuple):
        n = len(ra) + len(rb)
        if n > limits.MAX_ELEMENTS:
            raise limits.elements_error("'+' of two tuples", n).with_span(span)
        return ra + rb          # the items keep the tape: tracked values pass through unchanged
    if op == "*" and isinstance(ra, str) and (isinstance(rb, float) or type(rb) in ARRAYS and rb.ndim == 0
                                             and not is_bool_array(rb)):
        return repeat_string(ra, float(rb), span)       # (a 0-d matrix is a number, as messages call it)
    if op in ("<", "<=", ">", ">=") and isinstance(ra, str) and isinstance(rb, str):
        return {"<": ra < rb, "<=": ra <= rb, ">": ra > rb, ">=": ra >= rb}[op]
    hint = ""
    if op == "+" and (isinstance(ra, str) or isinstance(rb, str)):
        hint = '; to build a string use interpolation: "{x}"'
    elif op == "+" and (isinstance(ra, tuple) or isinstance(rb, tuple)):
        hint = "; '+' joins two tuples: write t + (x,) to append one item"
    elif callable(getattr(ra, "fn", None)) or isinstance(ra, Function) or \
            callable(getattr(rb, "fn", None)) or isinstance(rb, Function):
        hint = "; call the function first, e.g. pi() rather than pi"
    elif isinstance(ra, (Record, tuple, Dict)) or isinstance(rb, (Record, tuple, Dict)):
        hint = TREE_HINT
    raise TypeErr(f"cannot apply '{op}' to {describe(a)} and {describe(b)}{hint}", span)

# the end of the message for an operator given a record or tuple (a model's parameters)
TREE_HINT = ("; operators do not reach into records, tuples and dictionaries: tree_map applies one leaf by leaf "
             "(p - 0.1 * g is tree_map(fn(w, d) -> w - 0.1 * d, p, g)), and sgd_step(p, g, state, "
             "lr = 0.1) takes a gradient step")


def repeat_string(s, n, span):
    """`s * n`: a string repeated a whole, non-negative number of times."""
    if not float(n).is_integer() or n < 0:
        shown = s if len(s) <= 20 else s[:17] + "..."
        hint = ""
        try:
            float(s)
            hint = f"; if \"{shown}\" is meant as a number, write it without quotes"
        except ValueError:
            pass
        raise ValueErr(f"a string can only be repeated a whole, non-negative number of times, got "
                       f"\"{shown}\" * {format_value(n)}{hint}", span)
    size = limits.utf8_len(s) * n
    if size == 0:
        return ""          # "" * 1e300 is "" (and int(1e300) copies would not fit an index)
    try:
        limits.check_string_bytes("the repeated string", size)
    except LangError as e:
        raise e.with_span(span) from None
    return s * int(n)

def memory_error(op, a, b, span) -> LangError:
    """The error for an operator whose result does not fit in memory."""
    sa, sb = tuple(np.shape(raw(a))), tuple(np.shape(raw(b)))
    try:
        out = _matmul_shape(sa, sb) if op == "@" else np.broadcast_shapes(sa, sb)
        need = f"a result of shape {shape_text(out)} ({format_gb(math.prod(out) * 8)})"
    except ValueError:
        need = "the result"
    return ValueErr(f"not enough memory for '{op}' of {shape_text(sa)} and {shape_text(sb)}: "
                    f"{need} does not fit", span)

def range_note(*nodes) -> str:
    """The end of a shape error's message when an operand is indexed by a range a:b: tapeml's
    ranges include their end, so Python's a[1:3] (two elements) is three here."""
    for node in nodes:
        if type(node) is not A.Index:
            continue
        for it in node.indices:
            if type(it) is A.Range and it.step is None and type(it.stop) is not A.End:
                if type(it.start) is A.Number and type(it.stop) is A.Number:
                    a, b = it.start.value, it.stop.value
                    return (f"; tapeml's ranges include their end: {_num(a)}:{_num(b)} picks "
                            f"{_num(b - a + 1)} elements (Python's [{_num(a)}:{_num(b)}] is "
                            f"[{_num(a)}:{_num(b - 1)}] here)")
                return "; tapeml's ranges include their end: a:b picks b too (Python's [a:b] is [a:b-1] here)"
    return ""


def _num(v) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 2 ** 53 else format_value(v)


def shape_error(op, a, b, span, note="") -> LangError:
    """The error for an operator whose operands' shapes do not fit together."""
    sa, sb = tuple(np.shape(raw(a))), tuple(np.shape(raw(b)))
    if op == "@":
        if len(sa) == 0 or len(sb) == 0:
            return TypeErr("'@' is the matrix product and needs a vector or matrix on both sides; "
                           "use '*' to scale by a number", span)
        inner_a = sa[-1]
        inner_b = sb[0] if len(sb) == 1 else sb[-2]
        if inner_a == inner_b:      # the shapes fit: the result is what cannot be made (NumPy's "array is too big")
            return memory_error(op, a, b, span)
        return ShapeError(f"matrix product {shape_text(sa)} @ {shape_text(sb)}: the inner sizes "
                          f"{inner_a} and {inner_b} differ{note}", span)
    msg = f"cannot {OP_WORDS.get(op, op)} {shape_text(sa)} and {shape_text(sb)}: the shapes do not broadcast"
    if op == "*" and len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0]:
        msg += "; for the matrix product use '@'"
    return ShapeError(msg + note, span)


def condition_value(v, span, what: str) -> bool:
    """An if/while/and/or condition as a Python bool: a single true or false, else a TypeError at span."""
    if v is True or v is False:
        return v
    r = raw(v)
    if isinstance(r, (bool, np.bool_)):
        return bool(r)
    if is_bool_array(r):
        if not r.ndim:          # a 0-d bool matrix is one true or false, as NumPy's 0-d array is
            return bool(r.item())
        raise TypeErr(f"the {what} condition must be a single true or false, got {describe(r)}; "
                      f"use any(...) or all(...)", span)
    raise TypeErr(f"the {what} condition must be true or false, got {describe(r)}"
                  + ("; compare it, e.g. x != 0" if isinstance(r, float) else ""), span)


def unary(op, v, span):
    """`-v`, `+v`, `not v`."""
    if op == "not":
        r = raw(v)
        if isinstance(r, (bool, np.bool_)) or is_bool_array(r):
            return ops.logical_not(r)
        raise TypeErr(f"'not' needs true/false or a bool matrix, got {describe(v)}", span)
    if not is_numeric(v):
        hint = (f"; tree_map(fn(w) -> {op}w, r) applies it to each leaf of a record or tuple r"
                if isinstance(raw(v), (Record, tuple, Dict)) else "")
        raise TypeErr(f"unary '{op}' needs a number or a matrix, got {describe(v)}{hint}", span)
    return ops.neg(v) if op == "-" else v


def is_mask(v) -> bool:
    """A bool matrix: `and`/`or` with one on the left combine elementwise."""
    return is_bool_array(raw(v))


def logical_mask(node, left, right):
    """`left and/or right` elementwise, left a bool matrix (node: the ast.Logical)."""
    rl, right = raw(left), raw(right)
    if not (isinstance(right, (bool, np.bool_)) or is_bool_array(right)):
        raise TypeErr(f"'{node.op}' combines a bool matrix with bools or bool matrices, got "
                      f"{describe(right)}", node.right.span)
    try:
        return ops.logical(rl, right, op=node.op)
    except RecursionError:
        raise
    except (ValueError, RuntimeError) as e:   # RuntimeError: torch's word for shapes that do not fit
        if is_out_of_memory(e):
            raise memory_error(node.op, rl, right, node.span) from None
        raise shape_error(node.op, rl, right, node.span) from None


def transpose(v, span):
    """`v'`."""
    if not is_numeric(v):
        hint = ("; tree_map(fn(w) -> w', r) transposes each leaf of a record or tuple r"
                if isinstance(raw(v), (Record, tuple, Dict)) else "")
        raise TypeErr(f"cannot transpose {describe(v)}{hint}", span)
    return ops.transpose(v)


def field(obj, name, span):
    """`obj.name`: a record's field."""
    r = raw(obj)
    if isinstance(r, Record):
        try:
            return r.fields[name]
        except KeyError:
            close = close_names(name, r.fields)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise NameErr(f"the record has no field '{name}'{hint} "
                          f"(fields: {', '.join(r.fields) or 'none'})", span) from None
    raise TypeErr(f"cannot read field '{name}' of {describe(obj)}" + foreign_field(name), span)


def foreign_field(name) -> str:
    """The end of the message for x.name on a value that is not a record: what tapeml writes for
    another library's attribute or method (x.T, x.shape, x.sum()), from the FOREIGN_FIELDS table,
    else a builtin of that name called with x first."""
    if name in FOREIGN_FIELDS:
        return f"; for x.{name} tapeml writes {FOREIGN_FIELDS[name]}"
    b = REGISTRY.get(name)
    if b is not None and b.params:
        if b.params[0].variadic:            # concat(xs..., dim): x.concat(y) is concat(x, y)
            return f"; tapeml has no methods: x.{name}(...) is {name}(x, ...)"
        if any(p.name == "dim" for p in b.params):
            return f"; tapeml has no methods: x.{name}() is {name}(x), x.{name}(d) is {name}(x, dim=d)"
        if len(b.params) == 1:
            return f"; tapeml has no methods: x.{name}() is {name}(x)"
        return f"; tapeml has no methods: x.{name}(...) is {name}(x, ...)"
    return "; only records have fields"
