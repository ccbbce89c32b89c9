"""The one primitive table: every differentiable operation, its NumPy forward and its VJP.

Operators (`+`, `@`, indexing, `'`) and builtins both call these primitives; there is no
other arithmetic path. VJPs are written with primitives, so they are themselves recorded
when an outer `grad` is running (grad of grad).

Conventions at kinks, shared with docs/language.md:
- relu'(0) = 0, abs'(0) = 0 (sign(0) = 0), sqrt'(0) = inf;
- max/min (reductions) split the cotangent evenly among tied maxima, as PyTorch's `amax`;
- in the backward pass a zero factor wins: `zmul(0, inf) = zmul(0, nan) = 0`, and `zmatmul` is the
  matrix product with the same rule. Every VJP multiplies through them (tests/test_vjp_sweep.py runs
  each primitive's VJP at 0, +-inf and its kinks), so a branch that `where` did not take (cotangent 0)
  never brings a NaN or inf into the gradient, d/dx x^0 at 0 is 0, and grad(sqrt(sum(x^2))) at x = 0
  is 0 (the subgradient, like `norm`);
- softmax of a row that is all -inf (every key masked) is all zeros, forward and backward;
- a row holding +inf (softmax, log_softmax, attention scores that overflow) takes the limit: the +inf
  entries share the row equally, the rest get 0, and the row's gradient is 0;
- layer_norm and rms_norm rescale a row by a power of 2 where its variance would overflow or
  underflow; with eps = 0 a zero-variance row normalizes to 0 (gradient 0).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .tape import Box, Primitive, raw

np.seterr(all="ignore")

TABLE: dict[str, Primitive] = {}

# The float type of new matrices: float64 by default; `set_dtype("float32")` (the builtin, or
# `tapeml --dtype float32`) switches literals, ranges and constructors. Python numbers stay
# "weak" scalars, so float32 arrays stay float32 through arithmetic with them (NumPy 2 rules).
FLOAT = {"dtype": np.float64}
DTYPES = {"float64": np.float64, "float32": np.float32}


def set_dtype(name: str) -> None:
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    FLOAT["dtype"] = DTYPES[name]


def as_float(a):
    """A new matrix in the session's float type."""
    dt = FLOAT["dtype"]
    return a if a.dtype == dt else a.astype(dt)


def primitive(name, impl, vjp=None, fwd=None, nondiff=False, arity=None, scalar=None, vjp_plain=None):
    """Declare a primitive in the table; returns the plain function that calls it.
    `scalar` is the same operation on two Python floats, which the interpreter calls directly
    for plain numbers (they are never tracked, so nothing is lost for the tape).
    `vjp_plain` is the VJP on plain arrays that the tape takes at first order (tape.Primitive).
    A primitive named in GROWS runs behind the size guard (lang/limits.py)."""
    if name in GROWS:
        impl = _size_guarded(name, impl, GROWS[name], arity)
        if fwd is not None:
            fwd = _size_guarded(name, fwd, GROWS[name], None)
    prim = Primitive(name, impl, vjp, fwd, nondiff, arity, scalar, vjp_plain)
    TABLE[name] = prim
    return prim.call


# ---- the size guard: primitives whose result can be larger than each of their operands -------
def _broadcast_shape(*shapes):
    return np.broadcast_shapes(*shapes)


def _matmul_shape(sa, sb, *rest):
    if len(sa) >= 2 and len(sb) >= 2:
        return np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    return sa[:-1] + sb[:-2] + sb[-1:] if len(sa) >= 1 and len(sb) >= 1 else sa + sb


def _scores_shape(sq, sk, *rest):       # attention: the [.., Tq, Tk] weights come first
    return sq[:-1] + sk[-2:-1]


GROWS = {name: _broadcast_shape for name in
         ("add", "sub", "mul", "div", "mod", "pow", "zmul", "eq", "ne", "lt", "le", "gt", "ge",
          "logical", "maximum", "minimum", "where", "clip", "layer_norm", "rms_norm", "masked_softmax")}
GROWS.update({"matmul": _matmul_shape, "zmatmul": _matmul_shape, "dense": _matmul_shape, "scaled_dot_product_attention": _scores_shape})


def _size_guarded(name, impl, out_shape, arity):
    """`impl` behind the size guard: when the operands' sizes multiply past the element limit
    (a bound on any broadcast or product result), the result's shape is worked out and refused
    before anything is allocated."""
    from . import limits
    big = limits.MAX_ELEMENTS
    nd = np.ndarray

    def refuse(args):
        shapes = [a.shape for a in args if type(a) is nd]
        try:
            out = out_shape(*shapes)
        except (ValueError, TypeError, IndexError):
            return                      # operands that do not fit: impl says so
        limits.check_operands(name, out, *shapes)

    if arity == 2:
        def guarded2(a, b):
            if type(a) is nd and type(b) is nd and a.size * b.size > big:
                refuse((a, b))
            return impl(a, b)
        return guarded2

    def guarded(*args, **kw):
        n = 1
        for a in args:
            if type(a) is nd:
                n *= a.size
        if n > big:
            refuse(args)
        return impl(*args, **kw)
    return guarded


def shape_of(v) -> tuple:
    while type(v) is Box:
        v = v.value
    return v.shape if type(v) is np.ndarray else ()


def _f(a):
    """Booleans take part in arithmetic as 0 and 1."""
    t = type(a)
    if t is bool:
        return float(a)
    if t is np.ndarray and a.dtype == np.bool_:
        return a.astype(FLOAT["dtype"])
    return a


def _num(r):
    """Scalars come out as Python floats (0-d arrays and NumPy scalars alike): a Python float is
    a "weak" scalar in NumPy 2, so arithmetic with it keeps a float32 matrix float32, where an
    np.float64 would promote it to float64."""
    t = type(r)
    if t is np.ndarray:
        if r.ndim:
            return r
        r = r[()]
        t = type(r)
    if t is float:
        return r
    if t is np.float64:
        return float(r)
    if t is np.bool_:
        return bool(r)
    if isinstance(r, np.generic):
        return float(r)
    return r


# ---- elementwise arithmetic -------------------------------------------------------------
_BOOL = np.dtype(bool)     # NumPy's one bool dtype: `dtype is _BOOL` is the cheapest test
_NDARRAY, _INF = np.ndarray, math.inf     # module names: one lookup on the hot paths instead of two


def _arith(op, keep_bool=False):
    """NumPy's operator, with booleans taking part as 0 and 1 (bool + bool is 2, not 'or').
    With keep_bool, two bool matrices give a bool matrix (mask * mask is still a mask)."""
    def impl(a, b):
        try:
            r = op(a, b)
        except TypeError:          # NumPy refuses bool - bool
            return op(_f(a), _f(b))
        t = type(r)
        if t is _NDARRAY:
            if r.dtype is not _BOOL or (keep_bool and type(a) is _NDARRAY and type(b) is _NDARRAY):
                return r
            return op(_f(a), _f(b))
        if t is float:
            return r
        if t is np.float64:
            return float(r)
        return op(_f(a), _f(b))    # Python ints from bools
    return impl


_add = _arith(operator.add)
_sub = _arith(operator.sub)
_mul = _arith(operator.mul, keep_bool=True)


def _div(a, b):
    a, b = _f(a), _f(b)
    try:
        return a / b
    except ZeroDivisionError:
        return float(np.float64(a) / np.float64(b))


def _mod(a, b):
    a, b = _f(a), _f(b)
    try:
        return a % b
    except ZeroDivisionError:
        return math.nan


def _pow(a, b):
    a, b = _f(a), _f(b)
    if type(a) is not np.ndarray and type(b) is not np.ndarray:
        return float(np.float64(a) ** np.float64(b))
    return np.power(a, b)


def _neg(a):
    return -_f(a)


def unbroadcast(g, shape):
    """Sum the cotangent `g` down to `shape`, undoing NumPy broadcasting. The one helper."""
    if type(g) is np.ndarray:
        if g.shape == shape:
            return g
    elif type(g) is float and shape == ():
        return g
    gshape = shape_of(g)
    if gshape == shape:
        return g
    extra = len(gshape) - len(shape)
    axes = tuple(range(extra)) + tuple(i + extra for i, n in enumerate(shape) if n == 1 and gshape[i + extra] != 1)
    g = sum_(g, dim=axes) if axes else g
    return reshape(g, shape=shape) if shape_of(g) != shape else g


def _vjp_add(g, ans, res, needs, a, b):
    return (unbroadcast(g, shape_of(a)) if needs[0] else None,
            unbroadcast(g, shape_of(b)) if needs[1] else None)


def _vjp_sub(g, ans, res, needs, a, b):
    return (unbroadcast(g, shape_of(a)) if needs[0] else None,
            unbroadcast(neg(g), shape_of(b)) if needs[1] else None)


def _vjp_mul(g, ans, res, needs, a, b):
    ga = gb = None
    if needs[0]:
        ga = zmul(g, b)
        if type(ga) is not np.ndarray or type(a) is not np.ndarray or ga.shape != a.shape:
            ga = unbroadcast(ga, shape_of(a))
    if needs[1]:
        gb = zmul(g, a)
        if type(gb) is not np.ndarray or type(b) is not np.ndarray or gb.shape != b.shape:
            gb = unbroadcast(gb, shape_of(b))
    return ga, gb


def _vjp_mul_plain(g, ans, res, needs, a, b):
    """First order, a matrix times a finite nonzero number (`y * 1.0001`, a learning rate): no
    0 x inf, and g already has a's shape (the product has it)."""
    if type(b) is float and not needs[1] and b != 0.0 and -_INF < b < _INF and type(g) is _NDARRAY:
        return g * b, None
    return None


def _vjp_div(g, ans, res, needs, a, b):
    return (unbroadcast(zmul(g, div(1.0, b)), shape_of(a)) if needs[0] else None,
            unbroadcast(neg(zmul(g, div(ans, b))), shape_of(b)) if needs[1] else None)


def _vjp_mod(g, ans, res, needs, a, b):
    return (unbroadcast(g, shape_of(a)) if needs[0] else None,
            unbroadcast(neg(zmul(g, floor(div(a, b)))), shape_of(b)) if needs[1] else None)


def _vjp_pow(g, ans, res, needs, a, b):
    ga = gb = None
    if needs[0]:
        # b * a^(b-1) with 0 x inf = 0: d/dx x^0 is 0 at x = 0 too, not 0 * 0^-1 = nan
        ga = unbroadcast(zmul(g, zmul(b, pow_(a, sub(b, 1.0)))), shape_of(a))
    if needs[1]:
        pos = gt(a, 0.0)
        gb = unbroadcast(zmul(g, where(pos, zmul(ans, log(where(pos, a, 1.0))), 0.0)), shape_of(b))
    return ga, gb


def _zmul(a, b):
    tb = type(b)
    if (tb is float or tb is np.float64) and b != 0 and math.isfinite(b):
        return a * b          # a finite, nonzero number: no 0 x inf can arise (a is a cotangent)
    r = _f(a) * _f(b)
    if type(r) is np.ndarray:
        if not math.isfinite(r.sum()):     # one reduction; a false alarm (the sum overflows) only costs time
            r = np.where((a == 0) | (b == 0), 0.0, r)
    elif not math.isfinite(r) and (a == 0 or b == 0):
        r = 0.0
    return r


def _vjp_zmul(g, ans, res, needs, a, b):
    return (unbroadcast(zmul(g, b), shape_of(a)) if needs[0] else None,
            unbroadcast(zmul(g, a), shape_of(b)) if needs[1] else None)


add = primitive("add", _add, _vjp_add, arity=2, scalar=operator.add)
sub = primitive("sub", _sub, _vjp_sub, arity=2, scalar=operator.sub)
mul = primitive("mul", _mul, _vjp_mul, arity=2, scalar=operator.mul, vjp_plain=_vjp_mul_plain)
div = primitive("div", _div, _vjp_div, arity=2)
mod = primitive("mod", _mod, _vjp_mod, arity=2)
pow_ = primitive("pow", _pow, _vjp_pow, arity=2)
zmul = primitive("zmul", _zmul, _vjp_zmul, arity=2)
neg = primitive("neg", _neg, lambda g, ans, res, needs, a: (neg(g),), arity=1)


# ---- comparisons and other non-differentiable operations ---------------------------------
def _cmp(name, op):
    def impl(a, b):
        r = op(a, b)
        return bool(r) if type(r) is np.bool_ else r
    return primitive(name, impl, nondiff=True, arity=2, scalar=op)


eq = _cmp("eq", operator.eq)
ne = _cmp("ne", operator.ne)
lt = _cmp("lt", operator.lt)
le = _cmp("le", operator.le)
gt = _cmp("gt", operator.gt)
ge = _cmp("ge", operator.ge)
sign = primitive("sign", lambda x: _num(np.sign(x)), nondiff=True)
floor = primitive("floor", lambda x: _num(np.floor(x)), nondiff=True)


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
    x = _f(x)
    if type(x) is not np.ndarray:
        return _round_py(float(x), d)
    dt = x.dtype if x.dtype.kind == "f" else FLOAT["dtype"]
    x64 = x.astype(np.float64)
    if d == 0:
        return _num(np.rint(x64).astype(dt))
    if -22 <= d <= 22:
        p = 10.0 ** abs(d)
        y = x64 * p if d > 0 else x64 / p
        r = np.rint(y)
        out = r / p if d > 0 else r * p
        ay = np.abs(y)
        redo = ~(ay < 2.0 ** 52) | (np.abs(np.abs(y - np.floor(y)) - 0.5) <= 2 * np.spacing(ay))
        if redo.any():
            out[redo] = _round_vec(x64[redo], d).astype(np.float64)
    else:
        out = _round_vec(x64, d).astype(np.float64) if x64.size else x64.copy()
    return _num(out.astype(dt))


round_ = primitive("round", _round, nondiff=True)
logical = primitive("logical", lambda a, b, op: _num(np.logical_and(a, b) if op == "and" else np.logical_or(a, b)),
                    nondiff=True)
logical_not = primitive("not", lambda x: _num(np.logical_not(x)) if type(x) is np.ndarray else not x,
                        nondiff=True)


# ---- elementwise functions ----------------------------------------------------------------
def _unary(name, impl, deriv):
    """An elementwise primitive whose VJP is g * deriv(x, ans). Booleans take part as 0 and 1
    in the session's float type (NumPy would compute tanh of a bool matrix in float16)."""
    def on_floats(x):
        t = type(x)
        if t is _NDARRAY:
            if x.dtype is _BOOL:
                x = x.astype(FLOAT["dtype"])
        elif t is bool or t is np.bool_:
            x = float(x)
        return impl(x)
    return primitive(name, on_floats, lambda g, ans, res, needs, x: (deriv(g, x, ans),), arity=1)


exp = _unary("exp", lambda x: _num(np.exp(x)), lambda g, x, ans: zmul(g, ans))
log = _unary("log", lambda x: _num(np.log(x)), lambda g, x, ans: zmul(g, div(1.0, x)))
sqrt = _unary("sqrt", lambda x: _num(np.sqrt(x)), lambda g, x, ans: zmul(g, div(0.5, ans)))
sin = _unary("sin", lambda x: _num(np.sin(x)), lambda g, x, ans: zmul(g, cos(x)))
cos = _unary("cos", lambda x: _num(np.cos(x)), lambda g, x, ans: neg(zmul(g, sin(x))))
tanh = _unary("tanh", lambda x: _num(np.tanh(x)), lambda g, x, ans: zmul(g, sub(1.0, mul(ans, ans))))
abs_ = _unary("abs", lambda x: _num(np.abs(_f(x))), lambda g, x, ans: zmul(g, sign(x)))
relu = _unary("relu", lambda x: _num(np.maximum(x, 0.0)), lambda g, x, ans: zmul(g, gt(x, 0.0)))


def _sigmoid(x):
    # exp of a negative argument only: no overflow for large |x|
    e = np.exp(-np.abs(x))
    return _num(np.where(np.greater_equal(x, 0), 1.0 / (1.0 + e), e / (1.0 + e)))


sigmoid = _unary("sigmoid", _sigmoid, lambda g, x, ans: zmul(g, mul(ans, sub(1.0, ans))))

_erf_vec = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    if type(x) is np.ndarray:
        return np.asarray(_erf_vec(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)
    return math.erf(x)


erf = _unary("erf", _erf, lambda g, x, ans: zmul(g, mul(2.0 / math.sqrt(math.pi), exp(neg(mul(x, x))))))


def _gelu(x):
    y = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if type(y) is np.ndarray:
        if np.isneginf(x).any():
            y = np.where(np.isneginf(x), 0.0, y)       # the limit at -inf: -inf * 0 would be nan
    elif x == -math.inf:
        y = 0.0
    return _num(y)


def _vjp_gelu(g, ans, res, needs, x):
    cdf = mul(0.5, add(1.0, erf(mul(x, 1.0 / math.sqrt(2.0)))))
    pdf = mul(1.0 / math.sqrt(2.0 * math.pi), exp(mul(-0.5, mul(x, x))))
    return (zmul(g, add(cdf, zmul(x, pdf))),)        # x pdf(x) -> 0 at +-inf (not inf * 0)


gelu = primitive("gelu", _gelu, _vjp_gelu)


def _clip(x, lo=-math.inf, hi=math.inf):
    return _num(np.clip(x, lo, hi))


clip = primitive("clip", _clip,
                 lambda g, ans, res, needs, x, lo=-math.inf, hi=math.inf:
                 (zmul(g, mul(ge(x, lo), le(x, hi))),))


def _where(c, a, b):
    return _num(np.where(c, a, b))


def _vjp_where(g, ans, res, needs, c, a, b):
    return (None,
            unbroadcast(where(c, g, 0.0), shape_of(a)) if needs[1] else None,
            unbroadcast(where(c, 0.0, g), shape_of(b)) if needs[2] else None)


where = primitive("where", _where, _vjp_where)


# ---- shapes ---------------------------------------------------------------------------------
def _transpose(x):
    x = _f(x)
    if type(x) is not np.ndarray or x.ndim == 0:
        return x
    if x.ndim == 1:
        return x.reshape(-1, 1)
    return x.swapaxes(-1, -2)


def _vjp_transpose(g, ans, res, needs, x):
    return (reshape(g, shape=shape_of(x)) if len(shape_of(x)) < 2 else transpose(g),)


transpose = primitive("transpose", _transpose, _vjp_transpose, arity=1)


def _reshape(x, shape):
    return x.reshape(shape) if type(x) is np.ndarray else np.reshape(x, shape)


reshape = primitive("reshape", _reshape,
                    lambda g, ans, res, needs, x, shape: (reshape(g, shape=shape_of(x)),), arity=1)


def _permute(x, axes):
    return np.ascontiguousarray(x.transpose(axes))    # contiguous: the matmuls after it are faster


permute = primitive("permute", _permute,
                    lambda g, ans, res, needs, x, axes: (permute(g, axes=tuple(sorted(range(len(axes)),
                                                                                  key=axes.__getitem__))),),
                    arity=1)


def _broadcast_to(x, shape):
    if not shape:
        return x
    if type(x) is not np.ndarray:
        x = np.asarray(x, dtype=FLOAT["dtype"])
    # a read-only view, not a copy: cotangents are only read (every in-place step in this file
    # writes to an array it has just made), and grad copies a read-only leaf before returning it
    return np.broadcast_to(x, shape)


broadcast_to = primitive("broadcast_to", _broadcast_to,
                         lambda g, ans, res, needs, x, shape: (unbroadcast(g, shape_of(x)),), arity=1)


def _concat(*xs, dim=0):
    _check_total("concat", xs)
    return np.concatenate(xs, axis=dim)


def _check_total(name, xs):
    """The size guard for concat and stack: the result holds all the parts."""
    n = 0
    for x in xs:
        n += np.size(x)
    from . import limits
    if n > limits.MAX_ELEMENTS:
        raise limits.elements_error(f"{name}() of {len(xs)} parts", n)


def _vjp_concat(g, ans, res, needs, *xs, dim=0):
    out, start = [], 0
    nd = len(shape_of(ans))
    idx = [slice(None)] * nd
    d = dim % nd
    for x, need in zip(xs, needs):
        n = shape_of(x)[d]
        if need:
            idx[d] = slice(start, start + n)
            out.append(index(g, idx=tuple(idx)))
        else:
            out.append(None)
        start += n
    return tuple(out)


def _vjp_concat_plain(g, ans, res, needs, *xs, dim=0):
    """First order: the cotangent cut into views (matrices are never changed in place), not copies."""
    if type(g) is not np.ndarray:
        return None
    out, start = [], 0
    idx = [slice(None)] * g.ndim
    d = dim % g.ndim
    for x, need in zip(xs, needs):
        n = shape_of(x)[d]
        if need:
            idx[d] = slice(start, start + n)
            out.append(g[tuple(idx)])
        else:
            out.append(None)
        start += n
    return tuple(out)


concat = primitive("concat", _concat, _vjp_concat, vjp_plain=_vjp_concat_plain)


def _stack(*xs, dim=0):
    _check_total("stack", xs)
    return np.stack(xs, axis=dim)


def _vjp_stack(g, ans, res, needs, *xs, dim=0):
    nd = len(shape_of(ans))
    d = dim % nd
    return tuple(index(g, idx=tuple(i if ax == d else slice(None) for ax in range(nd))) if need else None
                 for i, need in enumerate(needs))


stack = primitive("stack", _stack, _vjp_stack)


# ---- indexing -------------------------------------------------------------------------------
# The language's indexing rule: each index makes its own axis, in order (a number drops it); so
# `a[1, :, [1, 0]]` of a 2x3x4 `a` is 3x2, and several index vectors pick every combination.
# `orthogonal` turns the per-axis parts into the one NumPy index that means exactly that; reads,
# writes and both VJPs use the index it returns, so NumPy's rule for mixed advanced indices
# (which moves the vector's axis to the front) is never in play.
def orthogonal(parts, shape) -> tuple:
    """The NumPy index for per-axis `parts` (ints, slices, integer vectors) of an array of
    `shape`. With no vector this is plain basic indexing; with one vector and no number NumPy
    keeps the vector's axis in place; otherwise every part that keeps an axis becomes a vector
    of its own grid axis (np.ix_), so that all of them broadcast into the grid in order and the
    numbers, adjacent to them or not, only drop their axes."""
    vectors = numbers = 0
    for p in parts:
        if type(p) is np.ndarray:
            vectors += 1
        elif type(p) is not slice:
            numbers += 1
    if vectors == 0 or (vectors == 1 and numbers == 0):
        return tuple(parts)
    kept = [i for i, p in enumerate(parts) if type(p) is np.ndarray or type(p) is slice]
    out = list(parts)
    m = len(kept)
    for j, i in enumerate(kept):
        p = parts[i]
        vec = np.arange(shape[i])[p] if type(p) is slice else p
        out[i] = vec.reshape([1] * j + [-1] + [1] * (m - j - 1))
    return tuple(out)


def _index(x, idx):
    r = x[idx]
    t = type(r)
    if t is np.ndarray:
        return r.copy() if r.base is not None else r
    return float(r) if t is np.float64 else _num(r)


def _basic(idx) -> bool:
    """Only integers and slices: such an index names each element at most once."""
    parts = idx if type(idx) is tuple else (idx,)
    for i in parts:
        t = type(i)
        if t is not int and t is not slice and not isinstance(i, np.integer):
            return False
    return True


def _may_repeat(idx) -> bool:
    """Whether `idx` may name an element twice: only an integer index array with a repeated
    entry can (a grid point differs from another in some axis along which one of the arrays
    varies, so unique arrays name unique elements; masks and slices never repeat)."""
    if _basic(idx):
        return False
    for p in (idx if type(idx) is tuple else (idx,)):
        if type(p) is np.ndarray and p.dtype != np.bool_ and p.size > 1 and np.unique(p).size < p.size:
            return True
    return False


def last_writes(idx, shape):
    """For an index that names some element twice: (pos, keep), where `pos` is the flat position
    written by each point of the index grid and `keep` marks the writes that stay: the last one
    to each position, in row-major order of the grid. The one rule for the forward of `setitem`
    and its VJP. None when no element is named twice."""
    if not _may_repeat(idx):
        return None
    pos = np.arange(math.prod(shape)).reshape(shape)[idx]
    flat = np.ravel(pos)
    _, first_from_end = np.unique(flat[::-1], return_index=True)
    if first_from_end.size == flat.size:
        return None
    keep = np.zeros(flat.size, dtype=bool)
    keep[flat.size - 1 - first_from_end] = True
    return pos, keep.reshape(np.shape(pos))


def _scatter_add(g, idx, shape):
    out = np.zeros(shape, dtype=g.dtype if type(g) is np.ndarray else FLOAT["dtype"])
    if _basic(idx):
        out[idx] = g              # no element twice: a plain store (np.add.at is far slower)
    else:
        np.add.at(out, idx, g)
    return out


index = primitive("index", _index,
                  lambda g, ans, res, needs, x, idx: (scatter_add(g, idx=idx, shape=shape_of(x)),), arity=1)
scatter_add = primitive("scatter_add", _scatter_add,
                        lambda g, ans, res, needs, gg, idx, shape: (index(g, idx=idx),))


def _setitem(x, v, idx):
    x = _f(x)
    out = np.array(x, dtype=np.result_type(x, _f(v)), copy=True)
    repeats = last_writes(idx, out.shape)
    if repeats is None:
        out[idx] = v
        return out
    # an element named twice keeps the last write (row-major order of the index grid); NumPy
    # does not promise an order, so the writes that stay are stored once each
    pos, keep = repeats
    grid = np.empty(np.shape(pos), dtype=out.dtype)
    grid[...] = v                 # the broadcast (and its errors) of a plain store
    np.put(out, pos[keep], grid[keep])      # flat positions in row-major order, as `pos` counts
    return out


def _vjp_setitem(g, ans, res, needs, x, v, idx):
    gv = None
    if needs[1]:
        gv = index(g, idx=idx)
        repeats = last_writes(idx, shape_of(x))
        if repeats is not None:       # a write that a later one overwrote has no effect: gradient 0
            gv = zmul(gv, repeats[1])
        vshape, extra = shape_of(v), len(shape_of(v)) - len(shape_of(gv))
        if extra > 0:                 # a store drops a value's leading axes of length 1 (NumPy's rule)
            gv = reshape(unbroadcast(gv, vshape[extra:]), shape=vshape)
        else:
            gv = unbroadcast(gv, vshape)
    return (setitem(g, 0.0, idx=idx) if needs[0] else None, gv)


setitem = primitive("setitem", _setitem, _vjp_setitem)


# ---- reductions -----------------------------------------------------------------------------
def _sum(x, dim=None, keepdims=False):
    if type(x) is np.ndarray and x.dtype.kind == "f":
        return _num(x.sum(axis=dim, keepdims=keepdims))
    return _num(np.sum(_f(x), axis=dim, keepdims=keepdims))


def _expand(g, shape, dim, keepdims):
    """Broadcast a reduced cotangent back to `shape`."""
    if dim is not None and not keepdims:
        dims = (dim,) if isinstance(dim, int) else dim
        kshape = tuple(1 if i in [d % len(shape) for d in dims] else n for i, n in enumerate(shape))
        g = reshape(g, shape=kshape)
    return broadcast_to(g, shape=shape)


sum_ = primitive("sum", _sum,
                 lambda g, ans, res, needs, x, dim=None, keepdims=False:
                 (_expand(g, shape_of(x), dim, keepdims),), arity=1)


def _amax(x, dim=None, keepdims=False):
    return _num(np.max(x, axis=dim, keepdims=keepdims))


def _amin(x, dim=None, keepdims=False):
    return _num(np.min(x, axis=dim, keepdims=keepdims))


def _vjp_extreme(g, ans, res, needs, x, dim=None, keepdims=False):
    shape = shape_of(x)
    hit = eq(x, _expand(ans, shape, dim, keepdims))          # ties: split evenly
    count = _expand(sum_(hit, dim=dim, keepdims=keepdims), shape, dim, keepdims)
    return (div(zmul(_expand(g, shape, dim, keepdims), hit), count),)


def _vjp_pairwise(g, ans, res, needs, a, b):
    """max(a, b) / min(a, b) elementwise: the cotangent goes to the chosen side, split evenly at ties."""
    share_a = where(eq(a, b), 0.5, where(eq(ans, a), 1.0, 0.0))
    return (unbroadcast(zmul(g, share_a), shape_of(a)) if needs[0] else None,
            unbroadcast(zmul(g, sub(1.0, share_a)), shape_of(b)) if needs[1] else None)


maximum = primitive("maximum", lambda a, b: _num(np.maximum(_f(a), _f(b))), _vjp_pairwise, arity=2)
minimum = primitive("minimum", lambda a, b: _num(np.minimum(_f(a), _f(b))), _vjp_pairwise, arity=2)
amax = primitive("max", _amax, _vjp_extreme, arity=1)
amin = primitive("min", _amin, _vjp_extreme, arity=1)


# ---- linear algebra -------------------------------------------------------------------------
def _matmul(a, b):
    if type(a) is not np.ndarray or a.dtype.kind == "b":
        a = _f(a)
    if type(b) is not np.ndarray or b.dtype.kind == "b":
        b = _f(b)
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim > 2 and b.ndim == 2:
        # a batch against one matrix: one 2-D product (BLAS runs it far better than a batch loop)
        return np.matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + (b.shape[1],))
    return _num(np.matmul(a, b))


def _vjp_matmul_plain(g, ans, res, needs, a, b):
    """First order, float matrices against one matrix: the products directly, a batch folded."""
    if type(g) is np.ndarray and type(a) is np.ndarray and type(b) is np.ndarray and b.ndim == 2 \
            and a.ndim >= 2 and a.dtype.kind == "f" and b.dtype.kind == "f":
        ga = _zmatmul(g, b.T) if needs[0] else None
        gb = None
        if needs[1]:
            gb = _zmatmul(a.T, g) if a.ndim == 2 else \
                _zmatmul(a.reshape(-1, a.shape[-1]).T, g.reshape(-1, g.shape[-1]))
        return ga, gb
    return None


def _vjp_matmul(g, ans, res, needs, a, b):
    sa, sb = shape_of(a), shape_of(b)
    a2 = reshape(a, shape=(1,) + sa) if len(sa) == 1 else a
    b2 = reshape(b, shape=sb + (1,)) if len(sb) == 1 else b
    gshape = shape_of(g)
    if len(sa) == 1 and len(sb) == 1:
        g2 = reshape(g, shape=(1, 1))
    elif len(sa) == 1:
        g2 = reshape(g, shape=gshape[:-1] + (1, gshape[-1]))
    elif len(sb) == 1:
        g2 = reshape(g, shape=gshape + (1,))
    else:
        g2 = g
    ga = gb = None
    if needs[0]:
        ga = unbroadcast(zmatmul(g2, transpose(b2)), shape_of(a2))
        if len(sa) == 1:
            ga = reshape(ga, shape=sa)
    if needs[1]:
        a2s, g2s = shape_of(a2), shape_of(g2)
        if len(a2s) > 2 and len(shape_of(b2)) == 2:   # a batch against one matrix: fold the batch
            gb = zmatmul(transpose(reshape(a2, shape=(-1, a2s[-1]))), reshape(g2, shape=(-1, g2s[-1])))
        else:
            gb = unbroadcast(zmatmul(transpose(a2), g2), shape_of(b2))
        if len(sb) == 1:
            gb = reshape(gb, shape=sb)
    return ga, gb


matmul = primitive("matmul", _matmul, _vjp_matmul, arity=2, vjp_plain=_vjp_matmul_plain)


def _zmatmul(a, b):
    """a @ b where a product with a zero factor is 0 even against inf or nan (zmul's rule, summed):
    the backward pass's matrix products, so that a zero cotangent never meets an infinite weight
    as NaN. The plain product where nothing is infinite or NaN (one finiteness check of the result)."""
    if type(a) is _NDARRAY and type(b) is _NDARRAY and a.ndim == 2 and b.ndim == 2 \
            and a.dtype.kind == "f" and b.dtype.kind == "f":
        r = np.matmul(a, b)
    else:
        r = _matmul(a, b)
    if type(r) is np.ndarray:
        if math.isfinite(r.sum()):      # one reduction: an inf or nan anywhere makes the sum non-finite
            return r
    elif math.isfinite(r):
        return r
    a, b = np.asarray(_f(a), dtype=np.result_type(r)), np.asarray(_f(b), dtype=np.result_type(r))
    fa, fb = np.isfinite(a), np.isfinite(b)
    if fa.all() and fb.all():
        return r                   # a true overflow, not a 0 x inf
    mm = lambda x, y: _matmul(x.astype(r.dtype if type(r) is np.ndarray else np.float64),
                              y.astype(r.dtype if type(r) is np.ndarray else np.float64))
    finite = mm(np.where(fa, a, 0.0), np.where(fb, b, 0.0))
    api, ani, bpi, bni = a == np.inf, a == -np.inf, b == np.inf, b == -np.inf
    ap, an, bp, bn = a > 0, a < 0, b > 0, b < 0
    plus = mm(api, bp) + mm(ani, bn) + mm(ap, bpi) + mm(an, bni)
    minus = mm(api, bn) + mm(ani, bp) + mm(ap, bni) + mm(an, bpi)
    nans = mm(np.isnan(a), b != 0) + mm(a != 0, np.isnan(b))
    out = np.where((nans > 0) | ((plus > 0) & (minus > 0)), np.nan,
                   np.where(plus > 0, np.inf, np.where(minus > 0, -np.inf, finite)))
    return _num(out)


zmatmul = primitive("zmatmul", _zmatmul, _vjp_matmul, arity=2, vjp_plain=_vjp_matmul_plain)


# ---- the transformer primitives -------------------------------------------------------------
def _posinf_rows(x, dim=-1):
    """The rows (along dim, kept as an axis of 1) holding a +inf, or None when there are none."""
    if type(x) is not np.ndarray or x.size == 0 or x.dtype.kind != "f":
        return None
    m = x.max(axis=dim, keepdims=True)
    if np.isfinite(m).all():
        return None
    rows = m == np.inf
    return rows if rows.any() else None


def _shifted(x, dim, want_rows=False):
    """x - max(x) along dim, and the row sums of its exponentials. A row whose max is -inf (all
    -inf: every key masked) is shifted by 0, so its exponentials are zeros, not NaN. A row holding
    +inf takes the limit: its +inf entries become 0 and the rest -inf, so the +inf entries share the
    row's mass equally and the others get exactly 0."""
    m = x.max(axis=dim, keepdims=True)
    inf_rows = None
    if not np.isfinite(m).all():
        inf_rows = m == np.inf
        m = np.where(np.isfinite(m), m, 0.0)
    z = np.asarray(np.subtract(x, m))
    if z.dtype.kind != "f":
        z = z.astype(FLOAT["dtype"])
    if inf_rows is not None and inf_rows.any():
        z = np.where(inf_rows, np.where(x == np.inf, 0.0, -np.inf), z).astype(z.dtype)
    else:
        inf_rows = None
    return (z, inf_rows) if want_rows else z


def _softmax_impl(x, dim=-1):
    return _softmax_rows(x, dim)[0]


def _softmax_rows(x, dim=-1):
    """(softmax(x), the rows holding a +inf or None)."""
    x = _f(x)
    if type(x) is not np.ndarray:
        x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x.copy(), None
    e, rows = _shifted(x, dim, True)
    np.exp(e, out=e)            # in place on the fresh array: one temporary instead of three
    s = e.sum(axis=dim, keepdims=True)
    if not s.all():
        s = np.where(s == 0, 1.0, s)
    e /= s
    return _num(e), rows


def _limit_rows(grad, x, dim=-1):
    """The cotangent of a softmax-like primitive with the rows that hold a +inf set to 0: such a row's
    value does not change under any finite change of its entries (the +inf entries stay +inf), so
    its gradient is 0 (docs/language.md, "Masks and softmax")."""
    rows = _posinf_rows(raw(x), dim)
    return grad if rows is None else where(rows, 0.0, grad)


def _vjp_softmax(g, ans, res, needs, x, dim=-1):
    return (_limit_rows(zmul(ans, sub(g, sum_(zmul(g, ans), dim=dim, keepdims=True))), x, dim),)


softmax = primitive("softmax", _softmax_impl, _vjp_softmax, arity=1)


def _log_softmax_impl(x, dim=-1):
    x = _f(x)
    if type(x) is not np.ndarray:
        x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    z = _shifted(x, dim)
    s = np.sum(np.exp(z), axis=dim, keepdims=True)
    # a row of all -inf (every class masked) is -inf throughout, never NaN
    return _num(np.where(s == 0, -np.inf, z - np.log(np.where(s == 0, 1.0, s))))


def _vjp_log_softmax(g, ans, res, needs, x, dim=-1):
    return (_limit_rows(sub(g, zmul(exp(ans), sum_(g, dim=dim, keepdims=True))), x, dim),)


log_softmax = primitive("log_softmax", _log_softmax_impl, _vjp_log_softmax, arity=1)


# ---- reductions that square: scaled so that they stay finite (issue 15) ----------------------
# layer_norm's variance and rms_norm's mean square overflow for rows of large values (1e20 in
# float32, 1e155 in float64) and underflow for tiny ones, though the normalized row is an
# ordinary number. A row whose plain statistic is not a safe normal number is computed again
# with its entries scaled by 2^-E, E the binary exponent of the row's max |x| (raised to that of
# sqrt(eps), so that eps * 2^-2E stays below 1): a power of two scales exactly, so such a row gives
# what exact arithmetic would, and the rows that did not need it are untouched (float64 results
# are the same to the last bit). A row holding +-inf takes the limit: its infinite entries count as
# +-1 and the finite ones as 0. A row whose variance + eps is 0 (a constant row with eps = 0)
# normalizes to 0: layer_norm gives beta there and rms_norm 0, with gradient 0 to x.
def _safe_floor(dtype):
    """The smallest variance + eps taken without rescaling: below it, terms that underflowed
    could matter (tiny / machine epsilon: about 1e-292 in float64, 1e-31 in float32)."""
    fi = np.finfo(dtype)
    return float(fi.tiny) / float(fi.eps)


_SAFE = {np.dtype(np.float64): _safe_floor(np.float64), np.dtype(np.float32): _safe_floor(np.float32)}


def _unsafe_rows(den):
    """Rows [..., 1] whose variance + eps is not a safe finite number (or None when all are)."""
    floor = _SAFE.get(den.dtype, _SAFE[np.dtype(np.float64)])
    if den.min() >= floor and den.max() < np.inf:      # two reductions on the common path (nan fails both)
        return None
    return ~((den >= floor) & (den < np.inf))


def _row_exponents(x, eps):
    """(E, inf_rows) for rows [..., D] of a plain array: E [..., 1] the binary exponent of each row's
    max |x| (at least that of sqrt(eps)); inf_rows [..., 1] the rows holding +-inf."""
    a = np.abs(x).max(axis=-1, keepdims=True)
    inf_rows = np.isinf(a)
    _, e = np.frexp(np.where(np.isfinite(a), a, 0.0))
    if eps > 0:
        e = np.maximum(e, np.frexp(math.sqrt(eps))[1])
    lo = np.finfo(x.dtype).minexp + 1 if x.dtype.kind == "f" else -1021
    return np.maximum(e, lo).astype(np.int32), inf_rows


def _scaled_rows(x, eps, center):
    """(xhat, r) of rows [..., D] on plain arrays, computed on x * 2^-E: xhat the normalized rows
    ((x - mean) / sqrt(var + eps) with center, x / sqrt(mean(x^2) + eps) without) and r the
    factor 1 / sqrt(var + eps) of the unscaled rows (0 where variance + eps is 0)."""
    e, inf_rows = _row_exponents(x, eps)
    xs = np.ldexp(x, -e)
    if inf_rows.any():
        xs = np.where(inf_rows, np.where(np.isinf(x), np.sign(x), 0.0), xs).astype(xs.dtype)
    inv_d = 1.0 / x.shape[-1]
    xc = xs - xs.sum(axis=-1, keepdims=True) * inv_d if center else xs
    if center and eps == 0:
        xc = _exact_center(x, xc)
    eps_s = np.where(inf_rows, 0.0, np.ldexp(float(eps), -2 * e)).astype(xs.dtype)
    den = (xc * xc).sum(axis=-1, keepdims=True) * inv_d + eps_s
    pos = den > 0
    rs = np.where(pos, 1.0 / np.sqrt(np.where(pos, den, 1.0)), 0.0).astype(xs.dtype)
    r = np.where(inf_rows, 0.0, np.ldexp(rs, -e)).astype(xs.dtype)
    return xc * rs, r


def _constant_rows(x):
    """Rows [..., 1] whose entries are all equal (their variance is exactly 0, whatever the
    rounding of their mean: 0.1 * 3 / 3 is not 0.1)."""
    return x.max(axis=-1, keepdims=True) == x.min(axis=-1, keepdims=True)


def _exact_center(x, xc):
    """xc with the rows of equal entries set to exactly 0 (used with eps = 0, where a rounding
    residue of the mean would otherwise be normalized to +-1)."""
    const = _constant_rows(x)
    return np.where(const, 0.0, xc).astype(xc.dtype) if const.any() else xc


def _layer_norm_stats(x, eps):
    """(xhat, 1/std) over the last axis on plain arrays; the variance in two passes (exact for
    1e8 + small values); rows whose variance would overflow or underflow are scaled (above)."""
    inv_d = 1.0 / x.shape[-1]
    xc = x - x.sum(axis=-1, keepdims=True) * inv_d
    if eps == 0:
        xc = _exact_center(x, xc)
    den = (xc * xc).sum(axis=-1, keepdims=True) * inv_d + eps
    bad = _unsafe_rows(den)
    if bad is None:
        rstd = 1.0 / np.sqrt(den)
        return xc * rstd, rstd
    with np.errstate(all="ignore"):
        rstd = 1.0 / np.sqrt(den)
        xhat = xc * rstd
    flat = bad.reshape(-1)
    x2, xhat2, rstd2 = x.reshape(-1, x.shape[-1]), xhat.reshape(-1, x.shape[-1]), rstd.reshape(-1, 1)
    xhat2[flat], rstd2[flat] = _scaled_rows(x2[flat], eps, True)
    return xhat, rstd


def _layer_norm_impl(x, gamma, beta, eps=1e-5):
    xhat, _ = _layer_norm_stats(_f(x), eps)
    out = xhat * gamma
    return out + beta if beta is not None else out


def _scaled_stats(x, eps, center):
    """_scaled_rows with primitives (the recorded forward and the VJPs): every row scaled by its
    2^-E, a constant (for any fixed scale the formula is the same function of x, so the
    gradient is exact)."""
    xr = raw(x)
    dt = xr.dtype if type(xr) is np.ndarray and xr.dtype.kind == "f" else np.dtype(np.float64)
    xr = np.asarray(xr, dtype=dt)
    e, inf_rows = _row_exponents(xr, eps)
    d = float(shape_of(x)[-1])
    xs = mul(x, np.ldexp(np.ones(e.shape, dtype=dt), -e))
    if inf_rows.any():
        lim = np.where(np.isinf(xr), np.sign(xr), 0.0).astype(dt)
        xs = where(np.broadcast_to(inf_rows, xr.shape), lim, xs)
    xc = sub(xs, div(sum_(xs, dim=-1, keepdims=True), d)) if center else xs
    if center and eps == 0:
        const = _constant_rows(xr)
        if const.any():
            xc = where(const, 0.0, xc)
    eps_s = np.where(inf_rows, 0.0, np.ldexp(float(eps), -2 * e)).astype(dt)
    den = add(div(sum_(mul(xc, xc), dim=-1, keepdims=True), d), eps_s)
    pos = raw(den) > 0
    rs = where(pos, div(1.0, sqrt(where(pos, den, 1.0))), 0.0)
    scale = np.where(inf_rows, 0.0, np.ldexp(np.ones(e.shape, dtype=dt), -e)).astype(dt)
    return mul(xc, rs), mul(rs, scale)


def _ln_stats(x, eps):
    """xhat and 1/std over the last axis, with primitives (the recorded forward and the VJP)."""
    return _scaled_stats(x, eps, True)


def _fwd_layer_norm(x, gamma, beta, eps=1e-5):
    if type(x) is not Box and type(gamma) is not Box and type(beta) is not Box:
        stats = _layer_norm_stats(_f(x), eps)       # kept for the VJP (x is a constant below this level)
        out = stats[0] * gamma
        return (out + beta if beta is not None else out), stats
    xhat, _ = _ln_stats(x, eps)
    out = mul(xhat, gamma)
    return (add(out, beta) if beta is not None else out), None


def _row_jacobian_product(v, jac):
    """sum_j v[..., j] jac[..., j, i] with 0 x inf = 0 (zmatmul): a cotangent row that holds +-inf
    (an infinite gain or value) times the row's Jacobian, where the fused formulas below would
    meet inf - inf. Only taken when such a row occurs."""
    s = shape_of(v)
    return reshape(zmatmul(reshape(v, shape=s[:-1] + (1, s[-1])), jac), shape=s)


def _outer_rows(u, w):
    """u[..., :, None] * w[..., None, :]"""
    s = shape_of(u)
    return mul(reshape(u, shape=s + (1,)), reshape(w, shape=s[:-1] + (1, s[-1])))


def _norm_jacobian(xhat, center):
    """d xhat_i / d (x_j / std) of layer_norm (center) or rms_norm: I - 1/n - xhat xhat' / n, or
    I - xhat xhat' / n (symmetric), one [n, n] matrix per row."""
    n = shape_of(xhat)[-1]
    eye = np.eye(n) - (1.0 / n if center else 0.0)
    return sub(eye, div(_outer_rows(xhat, xhat), float(n)))


def _vjp_layer_norm(g, ans, res, needs, x, gamma, beta, eps=1e-5):
    xhat, rstd = res if res is not None else _ln_stats(x, eps)
    gx = ggamma = gbeta = None
    if needs[0]:
        d = float(shape_of(x)[-1])
        dxhat = zmul(g, gamma)
        m1 = div(sum_(dxhat, dim=-1, keepdims=True), d)
        if np.isfinite(raw(m1)).all():
            m2 = div(sum_(mul(dxhat, xhat), dim=-1, keepdims=True), d)
            gx = zmul(rstd, sub(sub(dxhat, m1), mul(xhat, m2)))
        else:       # an infinite cotangent or gain: each entry of the gradient is its own +-inf
            gx = zmul(rstd, _row_jacobian_product(dxhat, _norm_jacobian(xhat, True)))
    if needs[1]:
        ggamma = unbroadcast(mul(g, xhat), shape_of(gamma))
    if needs[2]:
        gbeta = unbroadcast(g, shape_of(beta))
    return gx, ggamma, gbeta


def _vjp_layer_norm_plain(g, ans, res, needs, x, gamma, beta, eps=1e-5):
    """The same VJP on plain arrays (first order, nothing to record), gamma and beta of shape [D]."""
    if res is None or type(g) is not np.ndarray or type(gamma) is not np.ndarray or g.ndim < 1 \
            or gamma.shape != g.shape[-1:] or (beta is not None and shape_of(beta) != gamma.shape):
        return None
    xhat, rstd = res
    gx = ggamma = gbeta = None
    if needs[0]:
        inv_d = 1.0 / g.shape[-1]
        dxhat = g * gamma
        m1 = dxhat.sum(axis=-1, keepdims=True) * inv_d
        if not np.isfinite(m1).all():
            return None        # an infinite cotangent or gain: the general form takes it
        m2 = (dxhat * xhat).sum(axis=-1, keepdims=True) * inv_d
        dxhat -= m1
        dxhat -= xhat * m2
        if np.isfinite(rstd).all():
            dxhat *= rstd
            gx = dxhat
        else:
            gx = _zmul(dxhat, rstd)     # 1/std overflows for subnormal rows: 0 x inf = 0
    rows = g.reshape(-1, g.shape[-1])
    if needs[1]:
        ggamma = (rows * xhat.reshape(rows.shape)).sum(axis=0)
    if len(needs) > 2 and needs[2]:
        gbeta = rows.sum(axis=0)
    return gx, ggamma, gbeta


layer_norm = primitive("layer_norm", _layer_norm_impl, _vjp_layer_norm, _fwd_layer_norm,
                       vjp_plain=_vjp_layer_norm_plain)


def _dense_impl(x, w, b=None):
    out = _matmul(x, w)
    return _num(out + b) if b is not None else _num(out)


def _vjp_dense(g, ans, res, needs, x, w, b=None):
    gx, gw = _vjp_matmul(g, None, None, needs[:2], x, w)
    gb = unbroadcast(g, shape_of(b)) if len(needs) > 2 and needs[2] else None
    return gx, gw, gb


def _vjp_dense_plain(g, ans, res, needs, x, w, b=None):
    """First order: matmul's plain VJP (or its general one, on plain arrays), and a bias of shape
    [N] gets the rows of the cotangent summed."""
    gx, gw = _vjp_matmul_plain(g, None, None, needs[:2], x, w) or _vjp_matmul(g, None, None, needs[:2], x, w)
    gb = None
    if len(needs) > 2 and needs[2]:
        if type(b) is np.ndarray and type(g) is np.ndarray and g.ndim >= 2 and b.shape == g.shape[-1:]:
            gb = g.reshape(-1, g.shape[-1]).sum(axis=0)
        else:
            gb = unbroadcast(g, shape_of(b))
    return gx, gw, gb


dense = primitive("dense", _dense_impl, _vjp_dense, vjp_plain=_vjp_dense_plain)


def _attn_scores(q, k, bias, scale):
    s = mul(matmul(q, transpose(k)), scale)
    return add(s, bias) if bias is not None else s


def _allowed(mask, causal, lq, lk):
    """The boolean 'may attend' matrix from a mask and/or causality (None when all allowed)."""
    allowed = None
    if causal:
        allowed = np.tril(np.ones((lq, lk), dtype=bool), k=lk - lq)   # bottom-right aligned
    if mask is not None:
        m = raw(mask).astype(bool)
        allowed = m if allowed is None else (allowed & m)
    return allowed


def _masked_softmax_impl(s, allowed):
    if allowed is None:
        return _softmax_impl(s)
    return _softmax_impl(np.where(allowed, s, -np.inf))


def _masked(s, allowed):
    s = raw(s)
    return s if allowed is None else np.where(allowed, s, -np.inf)


masked_softmax = primitive(
    "masked_softmax", _masked_softmax_impl,
    lambda g, ans, res, needs, s, allowed: (_vjp_softmax(g, ans, None, needs, _masked(s, allowed))[0],))


def _sdpa_scores(q, k, bias, mask, causal, scale):
    """The scores q k^T * scale + bias on plain arrays, scaled in place (they are a fresh
    product), with the keys the mask hides set to -inf."""
    q, k = _f(q), _f(k)
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    if type(s) is np.ndarray and s.ndim:
        s *= scale
    else:
        s = s * scale
    if bias is not None:
        s = s + bias
    allowed = _allowed(mask, causal, q.shape[-2], k.shape[-2])
    return s if allowed is None else np.where(allowed, s, -np.inf)


def _sdpa_probs(q, k, bias, mask, causal, scale):
    """The attention weights softmax(q k^T * scale + bias) on plain arrays."""
    return _softmax_impl(_sdpa_scores(q, k, bias, mask, causal, scale))


def _sdpa_impl(q, k, v, bias=None, mask=None, causal=False, scale=None):
    return np.matmul(_sdpa_probs(q, k, bias, mask, causal, scale), _f(v))


def _fwd_sdpa(q, k, v, bias=None, mask=None, causal=False, scale=None):
    """(output, (p, rows)): the weights for the VJP, and the query rows whose scores hold a +inf
    (an overflowing q k^T): their weights are the limit (the +inf keys share the row equally) and
    their gradient to q, k and bias is 0, as softmax's (None when there are none)."""
    if type(q) is not Box and type(k) is not Box and type(v) is not Box and type(bias) is not Box:
        p, rows = _softmax_rows(_sdpa_scores(q, k, bias, mask, causal, scale))   # nothing below to record
        return np.matmul(p, _f(v)), (p, rows)
    lq, lk = shape_of(q)[-2], shape_of(k)[-2]
    allowed = _allowed(mask, causal, lq, lk)
    s = _attn_scores(q, k, bias, scale)
    p = masked_softmax(s, allowed=allowed)
    return matmul(p, v), (p, _posinf_rows(_masked(s, allowed)))


def _vjp_sdpa(g, ans, res, needs, q, k, v, bias=None, mask=None, causal=False, scale=None):
    p, rows = res
    gq = gk = gv = gbias = None
    if needs[2]:
        gv = unbroadcast(zmatmul(transpose(p), g), shape_of(v))
    if needs[0] or needs[1] or (len(needs) > 3 and needs[3]):
        if not (math.isfinite(raw(v).sum()) and math.isfinite(raw(g).sum())) and \
                not (np.isfinite(raw(v)).all() and np.isfinite(raw(g)).all()):
            gq, gk, gbias = _score_grads_split(g, v, p, rows, q, k, bias, needs, scale)
            return gq, gk, gv, gbias
        gq, gk, gbias = _score_grads(g, v, matmul(p, v), p, rows, q, k, bias, needs, scale)
    return gq, gk, gv, gbias


def _vjp_sdpa_plain(g, ans, res, needs, q, k, v, bias=None, mask=None, causal=False, scale=None):
    """First order, finite v and cotangent, no bias to differentiate: softmax's VJP
    p * (dp - rowsum(dp * p)) with rowsum(dp * p) = rowsum(g * ans) because dp = g v^T and
    ans = p v: a [.., T, d_v] product instead of a [.., T, T] one (the identity of FlashAttention's
    backward pass: Dao et al. 2022, appendix B.2); the [.., T, T] steps in place, the scale folded in."""
    if res is None or (len(needs) > 3 and needs[3]):
        return None
    p, rows = res
    if not all(type(t) is np.ndarray for t in (g, ans, p, q, k, v)):
        return None
    gq = gk = gv = None
    if needs[2]:
        gv = unbroadcast(zmatmul(transpose(p), g), shape_of(v))
    if needs[0] or needs[1]:
        if not (math.isfinite(v.sum()) and math.isfinite(g.sum())) and \
                not (np.isfinite(v).all() and np.isfinite(g).all()):
            return None
        ds = _zmatmul(g, np.swapaxes(v, -1, -2))
        ds -= (g * ans).sum(axis=-1, keepdims=True)
        ds *= p
        ds *= scale
        if rows is not None:
            ds = np.where(rows, 0.0, ds)
        if needs[0]:
            gq = unbroadcast(_zmatmul(ds, k), q.shape)
        if needs[1]:
            gk = unbroadcast(_zmatmul(np.swapaxes(ds, -1, -2), q), k.shape)
    return gq, gk, gv, None


def _score_grads(g, v, ans, p, rows, q, k, bias, needs, scale):
    """The cotangents of q, k and bias through the scores, written with primitives."""
    gq = gk = gbias = None
    dp = zmatmul(g, transpose(v))
    ds = zmul(p, sub(dp, sum_(zmul(g, ans), dim=-1, keepdims=True)))
    if rows is not None:
        ds = where(rows, 0.0, ds)
    if needs[0]:
        gq = unbroadcast(mul(zmatmul(ds, k), scale), shape_of(q))
    if needs[1]:
        gk = unbroadcast(mul(zmatmul(transpose(ds), q), scale), shape_of(k))
    if len(needs) > 3 and needs[3]:
        gbias = unbroadcast(ds, shape_of(bias))
    return gq, gk, gbias


def _score_grads_split(g, v, p, rows, q, k, bias, needs, scale):
    """_score_grads when v or the cotangent holds +-inf. They are linear in each, so with
    v = v_finite + V u (u the signs of the infinite entries, V -> inf) each cotangent is
    G(v_finite) + V G(u): +-inf where G(u) is nonzero, G(v_finite) elsewhere. Computing with the
    infinities inside would meet inf - inf where the limit is a plain +-inf."""
    split_v = not np.isfinite(raw(v)).all()
    arr = raw(v) if split_v else raw(g)
    inf = np.isinf(arr)
    unit = np.where(inf, np.sign(arr), 0.0)
    fin = where(inf, 0.0, v if split_v else g)
    if split_v:
        a = _score_grads(g, fin, matmul(p, fin), p, rows, q, k, bias, needs, scale)
        b = _score_grads(g, unit, matmul(p, unit), p, rows, q, k, bias, needs, scale)
    else:
        a = _score_grads(fin, v, matmul(p, v), p, rows, q, k, bias, needs, scale)
        b = _score_grads(unit, v, matmul(p, v), p, rows, q, k, bias, needs, scale)

    def combine(x, y):
        if x is None:
            return None
        yr = raw(y)
        return where(yr > 0, np.inf, where(yr < 0, -np.inf, x))
    return tuple(combine(x, y) for x, y in zip(a, b))


sdpa = primitive("scaled_dot_product_attention", _sdpa_impl, _vjp_sdpa, _fwd_sdpa, vjp_plain=_vjp_sdpa_plain)


# ==== rms_norm (transformer_block options, issue 6) ============================================
# y = x / sqrt(mean(x^2) + eps) * gamma over the last axis (Zhang & Sennrich 2019; PyTorch's
# nn.RMSNorm). The mean square is accumulated in float64 and the scale cast back to x's float
# type (float32 sessions stay float32). The VJP is written with primitives:
# with r = 1/sqrt(mean(x^2) + eps) and gh = g * gamma,
#     dx = r * gh - x * r^3 * mean(gh * x),     dgamma = sum over positions of g * x * r.
def _rms_stats_plain(x, eps):
    """(xhat, r) on plain arrays: the mean square accumulated in float64, r cast back to x's
    float type; rows whose mean square + eps is not a safe number are scaled (see layer_norm)."""
    ms = np.mean(np.square(x, dtype=np.float64), axis=-1, keepdims=True)
    den = ms + eps
    bad = _unsafe_rows(den)
    with np.errstate(all="ignore"):
        r = 1.0 / np.sqrt(den)
    if type(x) is np.ndarray and x.dtype != np.float64:
        r = r.astype(x.dtype)
    xhat = x * r
    if bad is not None:
        flat = bad.reshape(-1)
        xhat2, r2 = xhat.reshape(-1, x.shape[-1]), r.reshape(-1, 1)
        xh, rr = _scaled_rows(x.reshape(-1, x.shape[-1])[flat].astype(np.float64), eps, False)
        xhat2[flat], r2[flat] = xh.astype(xhat.dtype), rr.astype(r.dtype)
    return xhat, r


def _rms_norm_impl(x, gamma, eps=1e-5):
    x = _f(x)
    if type(x) is not np.ndarray:
        x = np.asarray(x, dtype=np.float64)
    return _num(_rms_stats_plain(x, eps)[0] * gamma)


def _rms_stats(x, eps):
    """(xhat, r) with primitives: xhat = x r, r = 1/sqrt(mean(x^2) + eps), each row scaled."""
    return _scaled_stats(x, eps, False)


def _fwd_rms_norm(x, gamma, eps=1e-5):
    if type(x) is not Box and type(gamma) is not Box:
        return _rms_norm_impl(x, gamma, eps), None
    return mul(_rms_stats(x, eps)[0], gamma), None


def _vjp_rms_norm(g, ans, res, needs, x, gamma, eps=1e-5):
    # with xhat = x r: dx = r (gh - xhat mean(gh xhat)), gh = g gamma (the r^3 of the textbook
    # form underflows for large rows); dgamma = sum of g xhat
    xhat, r = _rms_stats(x, eps)
    gx = ggamma = None
    if needs[0]:
        d = float(shape_of(x)[-1])
        gh = zmul(g, gamma)
        m = div(sum_(mul(gh, xhat), dim=-1, keepdims=True), d)
        if np.isfinite(raw(m)).all():
            gx = zmul(r, sub(gh, mul(xhat, m)))
        else:       # an infinite cotangent or gain (see layer_norm)
            gx = zmul(r, _row_jacobian_product(gh, _norm_jacobian(xhat, False)))
    if needs[1]:
        ggamma = unbroadcast(mul(g, xhat), shape_of(gamma))
    return gx, ggamma


rms_norm = primitive("rms_norm", _rms_norm_impl, _vjp_rms_norm, _fwd_rms_norm)
