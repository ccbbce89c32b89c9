"""Arithmetic and the operations beside it: + - * / mod and negation (booleans as 0 and 1), the
backward pass's zero-wins product zmul, the comparisons, sign, floor, round, and/or/not (not
differentiable), where, and the maxima and minima (elementwise and along a dimension, ties
splitting the cotangent evenly). Conventions at kinks: lang/array/ops.py. `^` (pow) is an
elementwise function (elementwise_ops.py): its VJP takes a log."""
from __future__ import annotations

import math
import operator

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.shape_ops import _expand, sum_, unbroadcast
from tapeml.array.primitive_table import (_NO_DEVICE_BELOW, FLOAT, bools_as_floats, crossed,
                                          device_limit, is_bool_array, mixed, primitive, python_scalar, shape_of,
                                          size_of, size_refusal, xp1)


# ---- elementwise arithmetic -------------------------------------------------------------
_BOOL = np.dtype(bool)     # NumPy's one bool dtype: `dtype is _BOOL` is the cheapest test
_NUMBERS = (float, int, bool)     # a Python number beside a bool matrix (_arith)
_NDARRAY, _INF = np.ndarray, math.inf     # module names: one lookup on the hot paths instead of two
_add_reduce = np.add.reduce               # ndarray.sum without its Python wrapper (numpy/_core/_methods.py)


def _arith(name, op, keep_bool=False):
    """NumPy's operator, with booleans taking part as 0 and 1 (bool + bool is 2, not 'or').
    With keep_bool, two bool matrices give a bool matrix (mask * mask is still a mask). The size
    guard's test is made here (primitive_table.size_refusal), not in a wrapper around it."""
    big, refuse = size_refusal(name)

    def impl(a, b):
        ta = type(a)
        tb = type(b)
        # A bool matrix meeting a number counts as the session's floats: NumPy would make it
        # float64 and torch float32 whatever the session's float type (set_dtype).
        if ta is _NDARRAY:
            if tb is _NDARRAY:
                if a.size * b.size > big:
                    refuse((a, b))
            elif a.dtype is _BOOL and tb in _NUMBERS:
                a = bools_as_floats(a)
        elif tb is _NDARRAY:
            if b.dtype is _BOOL and ta in _NUMBERS:
                b = bools_as_floats(b)
        elif ta in ARRAYS:
            if tb in ARRAYS:
                if size_of(a) * size_of(b) > _NO_DEVICE_BELOW and size_of(a) * size_of(b) > device_limit():
                    refuse((a, b))
            elif tb in _NUMBERS:
                if tb is bool:          # torch refuses a tensor minus a bool
                    b = float(b)
                if B.of(a).is_bool(a):
                    a = bools_as_floats(a)
        elif tb in ARRAYS and ta in _NUMBERS:
            if ta is bool:
                a = float(a)
            if B.of(b).is_bool(b):
                b = bools_as_floats(b)
        try:
            r = op(a, b)
        except TypeError:          # NumPy refuses bool - bool; a NumPy array and a tensor meet
            if mixed(a, b):
                return impl(*crossed(a, b))
            return op(bools_as_floats(a), bools_as_floats(b))
        except RuntimeError as e:  # torch refuses bool - bool (and says RuntimeError for shapes)
            if isinstance(e, RecursionError) or not (is_bool_array(a) or is_bool_array(b)):
                raise
            return op(bools_as_floats(a), bools_as_floats(b))
        t = type(r)
        if t is _NDARRAY:
            if r.dtype is not _BOOL or (keep_bool and type(a) is _NDARRAY and type(b) is _NDARRAY):
                return r
            return op(bools_as_floats(a), bools_as_floats(b))
        if t is float:
            return r
        if t is np.float64 or t is np.float32:     # a 0-d operand: the scalar as a Python float
            return float(r)
        if t in ARRAYS:                            # another backend's matrix
            if not B.of(r).is_bool(r) or (keep_bool and type(a) in ARRAYS and type(b) in ARRAYS):
                return python_scalar(r)
        return op(bools_as_floats(a), bools_as_floats(b))    # Python ints from bools
    impl.guards_size = True
    return impl


_add = _arith("add", operator.add)
_sub = _arith("sub", operator.sub)
_mul = _arith("mul", operator.mul, keep_bool=True)


def _div(a, b):
    a, b = bools_as_floats(a), bools_as_floats(b)
    try:
        return python_scalar(a / b)      # a 0-d float32 operand gives np.float32: a Python float
    except ZeroDivisionError:
        return float(np.float64(a) / np.float64(b))
    except TypeError:
        if mixed(a, b):
            return _div(*crossed(a, b))
        raise


def _mod(a, b):
    a, b = bools_as_floats(a), bools_as_floats(b)
    try:
        return python_scalar(a % b)
    except ZeroDivisionError:
        return math.nan
    except TypeError:
        if mixed(a, b):
            return _mod(*crossed(a, b))
        raise


def _neg(a):
    return python_scalar(-bools_as_floats(a))


def _vjp_add(g, ans, saved, tracked, a, b):
    if type(g) is _NDARRAY:       # the commonest case first: plain matrices of the same shape
        if not tracked[1] and type(a) is _NDARRAY and g.shape == a.shape:
            return g, None
        if not tracked[0] and type(b) is _NDARRAY and g.shape == b.shape:
            return None, g
    return (unbroadcast(g, shape_of(a)) if tracked[0] else None,
            unbroadcast(g, shape_of(b)) if tracked[1] else None)


def _vjp_sub(g, ans, saved, tracked, a, b):
    return (unbroadcast(g, shape_of(a)) if tracked[0] else None,
            unbroadcast(neg(g), shape_of(b)) if tracked[1] else None)


def _vjp_mul(g, ans, saved, tracked, a, b):
    ga = gb = None
    if tracked[0]:
        ga = zmul(g, b)
        if type(ga) is not np.ndarray or type(a) is not np.ndarray or ga.shape != a.shape:
            ga = unbroadcast(ga, shape_of(a))
    if tracked[1]:
        gb = zmul(g, a)
        if type(gb) is not np.ndarray or type(b) is not np.ndarray or gb.shape != b.shape:
            gb = unbroadcast(gb, shape_of(b))
    return ga, gb


def _vjp_mul_plain(g, ans, saved, tracked, a, b):
    """First order: a matrix times a finite nonzero number (`y * 1.0001`, a learning rate) is g * b
    (no 0 x inf, and g already has a's shape); any other product takes the general form at once."""
    if type(b) is float and not tracked[1] and b != 0.0 and -_INF < b < _INF and type(g) is _NDARRAY:
        return g * b, None
    return _vjp_mul(g, ans, saved, tracked, a, b)      # nothing is recorded on plain arrays


def _vjp_div(g, ans, saved, tracked, a, b):
    return (unbroadcast(zmul(g, div(1.0, b)), shape_of(a)) if tracked[0] else None,
            unbroadcast(neg(zmul(g, div(ans, b))), shape_of(b)) if tracked[1] else None)


def _vjp_mod(g, ans, saved, tracked, a, b):
    return (unbroadcast(g, shape_of(a)) if tracked[0] else None,
            unbroadcast(neg(zmul(g, floor(div(a, b)))), shape_of(b)) if tracked[1] else None)


def _zmul(a, b):
    tb = type(b)
    if (tb is float or tb is np.float64) and b != 0 and math.isfinite(b):
        return python_scalar(a * b)   # a finite, nonzero number: no 0 x inf (a is a cotangent)
    try:
        r = bools_as_floats(a) * bools_as_floats(b)
    except TypeError:
        if mixed(a, b):
            return _zmul(*crossed(a, b))
        raise
    tr = type(r)
    if tr is np.ndarray:
        if not math.isfinite(_add_reduce(r, None)):     # one reduction; a false alarm (the sum overflows) only costs time
            r = np.where((a == 0) | (b == 0), 0.0, r)
    elif tr in ARRAYS:
        xp = xp_of(r)
        if not math.isfinite(float(xp.sum(r))):
            r = xp.where(_as_mask((a == 0) | (b == 0), r), 0.0, r)
    elif not math.isfinite(r) and (a == 0 or b == 0):
        r = 0.0
    return python_scalar(r)


def _as_mask(c, like):
    """A condition (a Python bool, or a bool matrix) as a bool matrix of like's backend: torch's
    where wants a tensor condition."""
    if type(c) in ARRAYS and type(c) is not np.ndarray:
        return c if B.of(c).is_bool(c) else c != 0     # a tensor | a NumPy bool is uint8 in torch
    be = B.of(like)
    return be.asarray(np.asarray(c) if type(c) is not np.ndarray else c, np.bool_)


def _vjp_zmul(g, ans, saved, tracked, a, b):
    return (unbroadcast(zmul(g, b), shape_of(a)) if tracked[0] else None,
            unbroadcast(zmul(g, a), shape_of(b)) if tracked[1] else None)


_OPERANDS = ("the left operand", "the right operand")      # as check_nan's forward reports call them
add = primitive("add", _add, _vjp_add, arity=2, scalar=operator.add, arg_names=_OPERANDS)
sub = primitive("sub", _sub, _vjp_sub, arity=2, scalar=operator.sub, arg_names=_OPERANDS)
mul = primitive("mul", _mul, _vjp_mul, arity=2, scalar=operator.mul, vjp_plain=_vjp_mul_plain, arg_names=_OPERANDS)
div = primitive("div", _div, _vjp_div, arity=2, arg_names=_OPERANDS)
mod = primitive("mod", _mod, _vjp_mod, arity=2, arg_names=_OPERANDS)
zmul = primitive("zmul", _zmul, _vjp_zmul, arity=2)
neg = primitive("neg", _neg, lambda g, ans, saved, tracked, a: (neg(g),), arity=1)


# ---- comparisons and other non-differentiable operations ---------------------------------
def _cmp(name, op):
    def impl(a, b):
        tb = type(b)
        if type(a) is np.ndarray and tb is not float and tb is not np.ndarray and tb in ARRAYS:
            a, b = crossed(a, b)        # NumPy would read the tensor into a NumPy result
        try:
            r = op(a, b)
        except TypeError:
            if mixed(a, b):
                return impl(*crossed(a, b))
            raise
        return python_scalar(r)     # a 0-d result is a bool on every device (NumPy's np.bool_, torch's 0-d tensor)
    return primitive(name, impl, arity=2, scalar=op)


eq = _cmp("eq", operator.eq)
ne = _cmp("ne", operator.ne)
lt = _cmp("lt", operator.lt)
le = _cmp("le", operator.le)
gt = _cmp("gt", operator.gt)
ge = _cmp("ge", operator.ge)
sign = primitive("sign", lambda x: python_scalar(xp1(x).sign(bools_as_floats(x))))
floor = primitive("floor", lambda x: python_scalar(xp1(x).floor(bools_as_floats(x))))


def _round_py(v: float, d: int) -> float:
    """Python's round: the float nearest to v correctly rounded to d decimals (half to even on the
    exact binary value). |d| is clamped where it cannot matter: every double is a whole multiple of
    10^-1074 and below 10^309."""
    return float(round(v, max(-400, min(1100, d)))) if math.isfinite(v) else v


_round_vec = np.frompyfunc(_round_py, 2, 1)


def _round(x, digits=0):
    """round(x, digits) with any whole digits, as Python's round: NumPy's rint(x * 10^d) / 10^d is
    kept where it is exact (|d| <= 22, so 10^d is an exact double, and x * 10^d is not within one
    rounding of a tie and below 2^52); every other element goes through Python's round, so
    round(1.5, 400) is 1.5 and round(2.5, -400) is 0, never nan. float32 rounds in float64 and
    casts back."""
    d = int(digits)
    x = bools_as_floats(x)
    if type(x) in ARRAYS and type(x) is not np.ndarray:     # on the host, as Python rounds
        be = B.of(x)
        return python_scalar(be.asarray(np.asarray(_round(be.to_numpy(x), d)), be.np_dtype(x.dtype)))
    if type(x) is not np.ndarray:
        return _round_py(float(x), d)
    dt = x.dtype if x.dtype.kind == "f" else FLOAT["dtype"]
    x64 = x.astype(np.float64)
    if d == 0:
        return python_scalar(np.rint(x64).astype(dt))
    if -22 <= d <= 22:
        p = 10.0 ** abs(d)
        y = x64 * p if d > 0 else x64 / p
        r = np.rint(y)
        out = r / p if d > 0 else r * p
        ay = np.abs(y)
        redo = ~(ay < 2.0 ** 52) | (np.abs(np.abs(y - np.floor(y)) - 0.5) <= 2 * np.spacing(ay))
        if redo.any():
            out[redo] = np.asarray(_round_vec(x64[redo], d), dtype=np.float64)
    else:
        # np.asarray: a frompyfunc of a 0-d array returns a bare float
        out = np.asarray(_round_vec(x64, d), dtype=np.float64) if x64.size else x64.copy()
    return python_scalar(out.astype(dt))


round_ = primitive("round", _round)


def _logical(a, b, op):
    if type(a) is np.ndarray or type(b) is np.ndarray or (type(a) not in ARRAYS and type(b) not in ARRAYS):
        return python_scalar(np.logical_and(a, b) if op == "and" else np.logical_or(a, b))
    return python_scalar((a & b) if op == "and" else (a | b))     # bool tensors (or a tensor and a bool)


def _logical_not(x):
    t = type(x)
    if t is np.ndarray:
        return python_scalar(np.logical_not(x))
    return python_scalar(~x) if t in ARRAYS else not x


logical = primitive("logical", _logical)
logical_not = primitive("not", _logical_not)


def _where(c, a, b):
    like = None
    for v in (c, a, b):
        t = type(v)
        if t is not np.ndarray and t in ARRAYS:
            like = v
            break
    # Branches of numbers or bool matrices are the session's float type (not NumPy's float64 nor
    # torch's float32); two bool branches stay bool.
    if not (type(a) is bool or is_bool_array(a)) or not (type(b) is bool or is_bool_array(b)):
        a, b = bools_as_floats(a), bools_as_floats(b)
    numbers = type(a) not in ARRAYS and type(b) not in ARRAYS and not (type(a) is bool and type(b) is bool)
    if like is None:
        if numbers:
            a = np.asarray(float(a), FLOAT["dtype"])
        return python_scalar(np.where(c, a, b))
    be = B.of(like)         # another backend's: NumPy operands cross to it, torch wants a tensor condition
    c, a, b = (be.asarray(v) if type(v) is np.ndarray else v for v in (c, a, b))
    if numbers:
        a = be.asarray(float(a), FLOAT["dtype"])
    # a number beside a tensor: as the tensor holds it (torch refuses one past float32's range)
    a, b = B.held(a, getattr(b, "dtype", None)), B.held(b, getattr(a, "dtype", None))
    return python_scalar(be.xp.where(_as_mask(c, like), a, b))


def _vjp_where(g, ans, saved, tracked, c, a, b):
    return (None,
            unbroadcast(where(c, g, 0.0), shape_of(a)) if tracked[1] else None,
            unbroadcast(where(c, 0.0, g), shape_of(b)) if tracked[2] else None)


where = primitive("where", _where, _vjp_where)


# ---- maxima and minima: elementwise and along a dimension ----------------------------------
def _amax(x, dim=None, keepdims=False):
    return python_scalar(xp1(x).max(x, axis=dim, keepdims=keepdims))


def _amin(x, dim=None, keepdims=False):
    return python_scalar(xp1(x).min(x, axis=dim, keepdims=keepdims))


def _vjp_extreme(g, ans, saved, tracked, x, dim=None, keepdims=False):
    shape = shape_of(x)
    hit = eq(x, _expand(ans, shape, dim, keepdims))          # ties: split evenly
    count = _expand(sum_(hit, dim=dim, keepdims=keepdims), shape, dim, keepdims)
    return (div(zmul(_expand(g, shape, dim, keepdims), hit), count),)


def _vjp_pairwise(g, ans, saved, tracked, a, b):
    """max(a, b) / min(a, b) elementwise: the cotangent goes to the chosen side, split evenly at ties."""
    share_a = where(eq(a, b), 0.5, where(eq(ans, a), 1.0, 0.0))
    return (unbroadcast(zmul(g, share_a), shape_of(a)) if tracked[0] else None,
            unbroadcast(zmul(g, sub(1.0, share_a)), shape_of(b)) if tracked[1] else None)


def _pairwise(name):
    def impl(a, b):
        if mixed(a, b):
            a, b = crossed(a, b)
        return python_scalar(getattr(xp_of(a, b), name)(bools_as_floats(a), bools_as_floats(b)))
    return impl


maximum = primitive("maximum", _pairwise("maximum"), _vjp_pairwise, arity=2)
minimum = primitive("minimum", _pairwise("minimum"), _vjp_pairwise, arity=2)
amax = primitive("max", _amax, _vjp_extreme, arity=1)
amin = primitive("min", _amin, _vjp_extreme, arity=1)
