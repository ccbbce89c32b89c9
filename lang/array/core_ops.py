"""The core primitives: arithmetic, comparisons, elementwise functions, shapes, reductions and
the matrix product (conventions at kinks: lang/array/ops.py)."""
from __future__ import annotations

import math
import operator

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.primitive_table import (_NO_DEVICE_BELOW, FLOAT, GROWS, _broadcast_shape, bools_as_floats, crossed, device_limit, is_bool_array, mixed, primitive,
                                          python_scalar, shape_of, size_of, size_refusal, xp1)


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


def _pow(a, b):
    a, b = bools_as_floats(a), bools_as_floats(b)
    if mixed(a, b):
        a, b = crossed(a, b)
    ta, tb = type(a), type(b)
    if (ta is float or ta is int) and (tb is float or tb is int):
        return float(np.float64(a) ** np.float64(b))
    if ta is np.ndarray or tb is np.ndarray:
        return python_scalar(np.power(a, b))
    return python_scalar(a ** b)


def _neg(a):
    return python_scalar(-bools_as_floats(a))


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


def _vjp_pow(g, ans, saved, tracked, a, b):
    ga = gb = None
    if tracked[0]:
        # g b a^(b-1), one primitive (pow_grad) so that its own VJP, the second derivative, can tell a
        # zero cotangent of the first pass from one of the second (pow_grad's docstring)
        ga = unbroadcast(pow_grad(g, a, b), shape_of(a))
    if tracked[1]:
        # d/db a^b = a^b ln a for a >= 0 (0 x inf = 0: inf^b for b < 0 tends to 0; at a = 0 and
        # b < 0 it is inf x -inf = -inf, PyTorch's), 0 at 0^b for b >= 0 (PyTorch's 0 at b = 0).
        # For a < 0 the function of b has no real values around any b, so no derivative: NaN, as
        # PyTorch and JAX give (it was a silent 0, which trained on a wrong number). Each branch
        # is written with the answer, so a second derivative is NaN (or inf) there too, not 0.
        gb = unbroadcast(zmul(g, _pow_db(a, b, ans)), shape_of(b))
    return ga, gb


def _pow_db(a, b, ans):
    """d/db a^b where ans = a^b (the branches: _vjp_pow)."""
    nonneg = ge(a, 0.0)
    natural = zmul(ans, log(where(nonneg, a, 1.0)))
    at_zero = where(ge(b, 0.0), 0.0, natural)
    return where(gt(a, 0.0), natural, where(eq(a, 0.0), at_zero, mul(ans, math.nan)))


def _pow_grad(g, a, b):
    """g b a^(b-1), the cotangent a^b sends to a: 0 x inf = 0 in both products, so d/dx x^0 is 0 at
    x = 0 too (not 0 * 0^-1 = nan) and a zero cotangent stays zero."""
    return _zmul(g, _zmul(b, _pow(a, _sub(b, 1.0))))


def _vjp_pow_grad(h, ans, saved, tracked, g, a, b):
    """The second derivative of a^b. Where the first pass's cotangent g is 0 (a branch `where` did
    not take, a relu that was off) the result is 0, as every zero cotangent; but where g is not 0
    and the second pass's cotangent h is 0 (abs'(0) = 0: the second derivative of |y|^1.5 at 0) an
    infinite b (b-1) a^(b-2) gives NaN, PyTorch's value: that zero is a kink's convention, not an
    untaken branch, and 0 may not hide the singularity (it was a silent 0)."""
    k = zmul(h, g)
    s1 = sub(b, 1.0)
    gg = ga = gb = None
    if tracked[0]:
        gg = unbroadcast(pow_grad(h, a, b), shape_of(g))
    if tracked[1]:
        # 0 x b (b-1) a^(b-2): NaN at a = 0 where 0 < b < 2 (b < 1 too: that first derivative is infinite)
        singular = logical(logical(ne(g, 0.0), eq(h, 0.0), op="and"), eq(a, 0.0), op="and")
        bare = mul(0.0, zmul(b, pow_grad(1.0, a, s1)))
        ga = unbroadcast(where(singular, bare, zmul(b, pow_grad(k, a, s1))), shape_of(a))
    if tracked[2]:
        # d/db b a^(b-1) = a^(b-1) + b d/db a^(b-1): the second term is a^b's own rule at (a, b - 1)
        # (NaN for a negative base, also at b = 0: b a^(b-1) has no values around it; at a = b = 0,
        # where it has no limit, 0: PyTorch's, as a^b's own 0 at 0^0)
        p = pow_(a, s1)
        d = where(lt(a, 0.0), mul(p, math.nan),
                  where(logical(eq(a, 0.0), eq(b, 0.0), op="and"), 0.0, add(p, zmul(b, _pow_db(a, s1, p)))))
        gb = unbroadcast(zmul(k, d), shape_of(b))
    return gg, ga, gb


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
pow_ = primitive("pow", _pow, _vjp_pow, arity=2, arg_names=("the base", "the exponent"))
zmul = primitive("zmul", _zmul, _vjp_zmul, arity=2)
GROWS["pow_grad"] = _broadcast_shape       # it broadcasts: behind the size guard (lang/array/limits.py)
pow_grad = primitive("pow_grad", _pow_grad, _vjp_pow_grad, arity=3)
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
    return primitive(name, impl, nondiff=True, arity=2, scalar=op)


eq = _cmp("eq", operator.eq)
ne = _cmp("ne", operator.ne)
lt = _cmp("lt", operator.lt)
le = _cmp("le", operator.le)
gt = _cmp("gt", operator.gt)
ge = _cmp("ge", operator.ge)
sign = primitive("sign", lambda x: python_scalar(xp1(x).sign(bools_as_floats(x))), nondiff=True)
floor = primitive("floor", lambda x: python_scalar(xp1(x).floor(bools_as_floats(x))), nondiff=True)


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


round_ = primitive("round", _round, nondiff=True)
def _logical(a, b, op):
    if type(a) is np.ndarray or type(b) is np.ndarray or (type(a) not in ARRAYS and type(b) not in ARRAYS):
        return python_scalar(np.logical_and(a, b) if op == "and" else np.logical_or(a, b))
    return python_scalar((a & b) if op == "and" else (a | b))     # bool tensors (or a tensor and a bool)


def _logical_not(x):
    t = type(x)
    if t is np.ndarray:
        return python_scalar(np.logical_not(x))
    return python_scalar(~x) if t in ARRAYS else not x


logical = primitive("logical", _logical, nondiff=True)
logical_not = primitive("not", _logical_not, nondiff=True)


# ---- elementwise functions ----------------------------------------------------------------
def _unary(name, impl, deriv, vjp_plain=None):
    """An elementwise primitive whose VJP is g * deriv(x, ans). Booleans take part as 0 and 1
    in the session's float type (NumPy would compute tanh of a bool matrix in float16)."""
    def on_floats(x):
        t = type(x)
        if t is _NDARRAY:
            if x.dtype is _BOOL:
                x = x.astype(FLOAT["dtype"])
        elif t is bool or t is np.bool_:
            x = float(x)
        elif t in ARRAYS:
            x = bools_as_floats(x)
        return impl(x)
    return primitive(name, on_floats, lambda g, ans, saved, tracked, x: (deriv(g, x, ans),), arity=1,
                     vjp_plain=vjp_plain)


def elementwise(name, np_name=None):
    """NumPy's elementwise function `np_name` on a NumPy array or a number, the array API
    standard's `name` on another backend's array."""
    f = getattr(np, np_name or name)

    def impl(x):
        if type(x) is _NDARRAY:
            return python_scalar(f(x))
        return python_scalar(getattr(xp1(x), name)(x) if type(x) in ARRAYS else f(x))
    return impl


def _relu(x):
    t = type(x)
    if t is not _NDARRAY and t in ARRAYS:
        return B.of(x).relu(x)
    return python_scalar(np.maximum(x, 0.0))


def _vjp_relu_plain(g, ans, saved, tracked, x):
    """First order on matrices: g where relu's output is positive, else 0, in one pass of the
    backend's (the values of zmul(g, x > 0): a NaN input passes 0, an infinite cotangent against
    a 0 slope gives 0)."""
    t = type(g)
    if t is not type(ans) or t not in ARRAYS:
        return None
    return (B.of(g).relu_backward(g, ans),)


exp = _unary("exp", elementwise("exp"), lambda g, x, ans: zmul(g, ans))
log = _unary("log", elementwise("log"), lambda g, x, ans: zmul(g, div(1.0, x)))
sqrt = _unary("sqrt", elementwise("sqrt"), lambda g, x, ans: zmul(g, div(0.5, ans)))
sin = _unary("sin", elementwise("sin"), lambda g, x, ans: zmul(g, cos(x)))
cos = _unary("cos", elementwise("cos"), lambda g, x, ans: neg(zmul(g, sin(x))))
tanh = _unary("tanh", elementwise("tanh"), lambda g, x, ans: zmul(g, dtanh(x)))
# abs'(0) = 0 is neither side's slope (-1 or 1): against an infinite or NaN cotangent it gives NaN
# (PyTorch's g * sgn(x)), not a 0 that hides the singularity (sqrt(abs(y)), abs(y)^0.5 at 0);
# elsewhere a zero cotangent wins as in every VJP (a NaN x from an untaken branch stays 0)
abs_ = _unary("abs", elementwise("abs"), lambda g, x, ans: where(eq(x, 0.0), mul(g, 0.0), zmul(g, sign(x))))
relu = _unary("relu", _relu, lambda g, x, ans: zmul(g, gt(x, 0.0)), vjp_plain=_vjp_relu_plain)


def _sigmoid(x):
    # exp of a negative argument only: no overflow for large |x|
    xp = np if type(x) is _NDARRAY else xp1(x)
    e = xp.exp(-xp.abs(x))
    if xp is np:
        return python_scalar(np.where(np.greater_equal(x, 0), 1.0 / (1.0 + e), e / (1.0 + e)))
    return python_scalar(xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)))


sigmoid = _unary("sigmoid", _sigmoid, lambda g, x, ans: zmul(g, dsigmoid(x)))


# The derivatives of tanh and sigmoid as primitives of their own: 1 - tanh(x)^2 and s (1 - s) lose
# every digit to cancellation once tanh or s rounds to +-1 (|x| > 19 and x > 37: 0 where the
# derivative is 7e-35 at x = -40, and half the digits at x = 19, so softplus's second derivative was
# wrong in the 9th digit), and their own derivatives, written as differences, lose digits near 0.
# Each is computed from e = exp(-|x|) (exact to a few ulps for every x) and has an exact VJP.
def _sech2_like(x, k):
    """e / (1 + e)^2 * k^2 with e = exp(-k |x|): sigmoid'(x) at k = 1, 1 - tanh(x)^2 at k = 2."""
    xp = np if type(x) is _NDARRAY else xp1(x)
    e = xp.exp(-k * xp.abs(x))
    return python_scalar((k * k) * e / ((1.0 + e) * (1.0 + e)))


dsigmoid = _unary("dsigmoid", lambda x: _sech2_like(x, 1.0),
                  lambda g, x, ans: zmul(g, neg(mul(ans, tanh(mul(0.5, x))))))       # s'' = -s' tanh(x/2)
dtanh = _unary("dtanh", lambda x: _sech2_like(x, 2.0),
               lambda g, x, ans: zmul(g, mul(-2.0, mul(ans, tanh(x)))))              # (1 - t^2)' = -2 t (1 - t^2)

_erf_vec = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    if type(x) is np.ndarray:
        return np.asarray(_erf_vec(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)
    if type(x) in ARRAYS:
        return B.of(x).erf(x)
    return math.erf(x)


erf = _unary("erf", _erf, lambda g, x, ans: zmul(g, mul(2.0 / math.sqrt(math.pi), exp(neg(mul(x, x))))))
_erfc_vec = np.frompyfunc(math.erfc, 1, 1)


def _erfc(x):
    """1 - erf(x) without the cancellation (erfc(5) is 1.5e-12, not 1 - 0.9999999999984626)."""
    if type(x) is np.ndarray:
        return np.asarray(_erfc_vec(x), dtype=x.dtype if x.dtype.kind == "f" else np.float64)
    if type(x) in ARRAYS:
        return B.of(x).erfc(x)
    return math.erfc(x)


erfc = _unary("erfc", _erfc, lambda g, x, ans: zmul(g, mul(-2.0 / math.sqrt(math.pi), exp(neg(mul(x, x))))))


def _gelu(x):
    # Phi(x) = erfc(-x / sqrt(2)) / 2: (1 + erf(x / sqrt(2))) / 2 cancels for x < 0 (gelu(-19) was 0,
    # not -1.6e-79, and gelu'(-10) was wrong in the 2nd digit)
    x = bools_as_floats(x)      # in the session's float type (a bool tensor times 0.5 is torch's float32)
    y = 0.5 * x * _erfc(x * -(1.0 / math.sqrt(2.0)))
    if type(y) is np.ndarray:
        if np.isneginf(x).any():
            y = np.where(np.isneginf(x), 0.0, y)       # the limit at -inf: -inf * 0 would be nan
    elif type(y) in ARRAYS:
        y = xp_of(y).where(x == -math.inf, 0.0, y)
    elif x == -math.inf:
        y = 0.0
    return python_scalar(y)


def _vjp_gelu(g, ans, saved, tracked, x):
    cdf = mul(0.5, erfc(mul(x, -1.0 / math.sqrt(2.0))))
    pdf = mul(1.0 / math.sqrt(2.0 * math.pi), exp(mul(-0.5, mul(x, x))))
    return (zmul(g, add(cdf, zmul(x, pdf))),)        # x pdf(x) -> 0 at +-inf (not inf * 0)


gelu = primitive("gelu", _gelu, _vjp_gelu)


def _clip(x, lo=-math.inf, hi=math.inf):
    x = bools_as_floats(x)          # a bool matrix clips as its 0s and 1s, in the session's float type
    if type(x) in ARRAYS and type(x) is not np.ndarray:      # (torch refuses a bound past float32's range)
        return python_scalar(xp_of(x).clip(x, B.held(lo, x.dtype), B.held(hi, x.dtype)))
    return python_scalar(np.clip(x, lo, hi))


clip = primitive("clip", _clip,
                 lambda g, ans, saved, tracked, x, lo=-math.inf, hi=math.inf:
                 (zmul(g, mul(ge(x, lo), le(x, hi))),))


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


# ---- power-of-two scaling (issue 25) --------------------------------------------------------
def _ldexp(x, e):
    """x * 2^e, e whole numbers (a constant, not differentiated): exact wherever the result is a
    normal number, so a reduction that squares can run on x * 2^-E and scale its result back."""
    x = bools_as_floats(x)
    if type(x) in ARRAYS and type(x) is not np.ndarray:
        return python_scalar(B.of(x).ldexp(x, e))
    if type(x) is not np.ndarray:
        x = np.asarray(x, dtype=np.float64)
    return python_scalar(np.ldexp(x, B.to_numpy(e)))


ldexp = primitive("ldexp", _ldexp,
                  lambda g, ans, saved, tracked, x, e: (unbroadcast(ldexp(g, e=e), shape_of(x)),), arity=1)


def binary_exponents(a):
    """The binary exponent E of each element of a plain array of magnitudes (a = m 2^E with m in
    [0.5, 1)): 0 where a is 0, inf or nan (nothing to scale there). int32, a's shape (a NumPy
    array: the rescaling paths work out their exponents on the host)."""
    a = np.asarray(B.to_numpy(a))
    _, e = np.frexp(np.where(np.isfinite(a), a, 0.0))
    return e.astype(np.int32)


def safe_floor(dtype) -> float:
    """The smallest sum of squares taken without rescaling: below it, terms that underflowed could
    matter (tiny / machine epsilon: about 1e-292 in float64, 1e-31 in float32)."""
    floor = _FLOORS.get(dtype)
    if floor is None:
        fi = np.finfo(dtype if np.dtype(dtype).kind == "f" else np.float64)
        floor = _FLOORS[dtype] = float(fi.tiny) / float(fi.eps)
    return floor


_FLOORS: dict = {}


def unsafe_slices(s, x, dim):
    """Where a rescaling is needed: the slices of x (reduced along dim, kept as axes of 1) whose sum
    of squares s (same kept shape, plain) is not a safe finite number although every element of
    the slice is finite and one is nonzero; None where there is none (the common path: two
    reductions of s)."""
    like = x if type(x) in ARRAYS and type(x) is not np.ndarray else None
    s = np.asarray(B.to_numpy(s))
    x = B.to_numpy(x)
    floor = safe_floor(x.dtype if type(x) is _NDARRAY and x.dtype.kind == "f" else s.dtype)  # s may be a float
    if s.size == 0 or (s.min() >= floor and s.max() < _INF):     # nan fails both
        return None
    xr = np.asarray(x)
    finite = np.isfinite(xr).all(axis=dim, keepdims=True)
    nonzero = (xr != 0).any(axis=dim, keepdims=True)
    bad = ~((s >= floor) & (s < _INF)) & finite & nonzero
    if not bad.any():
        return None
    return bad if like is None else B.of(like).asarray(bad)


def slice_exponents(x, dim, bad, at_least=None):
    """E per slice of the plain array x (reduced along dim, kept as axes of 1): the binary exponent
    of the slice's largest |x| (raised to at_least where given) where `bad`, 0 elsewhere, so that
    x * 2^-E has its largest magnitude in [0.5, 1) on the slices to rescale and is x elsewhere."""
    like = x if type(x) in ARRAYS and type(x) is not np.ndarray else None
    xr = np.asarray(B.to_numpy(x))
    a = np.where(np.isfinite(xr), np.abs(xr), 0.0).max(axis=dim, keepdims=True, initial=0.0)
    e = binary_exponents(a)
    if at_least is not None:
        e = np.maximum(e, B.to_numpy(at_least))
    e = np.where(B.to_numpy(bad), e, 0).astype(np.int32)
    return e if like is None else B.of(like).asarray(e)


# ---- shapes ---------------------------------------------------------------------------------
def _transpose(x):
    x = bools_as_floats(x)
    t = type(x)
    if (t is not np.ndarray and t not in ARRAYS) or x.ndim == 0:
        return x
    if x.ndim == 1:
        return x.reshape(-1, 1)
    return x.swapaxes(-1, -2)


def _vjp_transpose(g, ans, saved, tracked, x):
    return (reshape(g, shape=shape_of(x)) if len(shape_of(x)) < 2 else transpose(g),)


transpose = primitive("transpose", _transpose, _vjp_transpose, arity=1)


def _reshape(x, shape):
    t = type(x)
    if t is np.ndarray or t in ARRAYS:
        return x.reshape(shape)
    # a number: a matrix of the session's float type (a bool stays bool), as in _broadcast_to
    return B.current().asarray(x, None if t is bool else FLOAT["dtype"]).reshape(shape)


reshape = primitive("reshape", _reshape,
                    lambda g, ans, saved, tracked, x, shape: (reshape(g, shape=shape_of(x)),), arity=1)


def _permute(x, axes):
    if type(x) is np.ndarray:
        return np.ascontiguousarray(x.transpose(axes))    # contiguous: the matmuls after it are faster
    return x.permute(axes).contiguous()


permute = primitive("permute", _permute,
                    lambda g, ans, saved, tracked, x, axes: (permute(g, axes=tuple(sorted(range(len(axes)),
                                                                                  key=axes.__getitem__))),),
                    arity=1)


def _broadcast_to(x, shape):
    if not shape:
        return x
    t = type(x)
    if t in ARRAYS and t is not np.ndarray:
        return xp_of(x).broadcast_to(x, shape)
    if t is not np.ndarray:
        be = B.current()
        if be is not B.NUMPY:
            return be.xp.broadcast_to(be.asarray(x, FLOAT["dtype"]), shape)
        x = np.asarray(x, dtype=FLOAT["dtype"])
    # a read-only view, not a copy: cotangents are only read (every in-place step in this file
    # writes to an array it has just made), and grad copies a read-only leaf before returning it
    return np.broadcast_to(x, shape)


broadcast_to = primitive("broadcast_to", _broadcast_to,
                         lambda g, ans, saved, tracked, x, shape: (unbroadcast(g, shape_of(x)),), arity=1)


# ---- reductions -----------------------------------------------------------------------------
def _sum(x, dim=None, keepdims=False):
    t = type(x)
    if t is np.ndarray and x.dtype.kind == "f":
        return python_scalar(x.sum(axis=dim, keepdims=keepdims))
    if t in ARRAYS and t is not np.ndarray:
        return python_scalar(xp_of(x).sum(bools_as_floats(x), axis=dim, keepdims=keepdims))
    return python_scalar(np.sum(bools_as_floats(x), axis=dim, keepdims=keepdims))


def _expand(g, shape, dim, keepdims):
    """Broadcast a reduced cotangent back to `shape`."""
    if dim is not None and not keepdims:
        dims = (dim,) if isinstance(dim, int) else dim
        kshape = tuple(1 if i in [d % len(shape) for d in dims] else n for i, n in enumerate(shape))
        g = reshape(g, shape=kshape)
    return broadcast_to(g, shape=shape)


def _vjp_sum_plain(g, ans, saved, tracked, x, dim=None, keepdims=False):
    """First order, the whole sum of a small matrix (the loss of a training step): the cotangent
    filled into a matrix of x's shape, which costs less than making a broadcast view below 4096
    elements; other cases take the general form (a read-only broadcast view)."""
    if dim is None and type(g) is float and type(x) is np.ndarray and 0 < x.ndim and x.size <= 4096:
        return (np.full(x.shape, g, dtype=FLOAT["dtype"]),)
    return None


sum_ = primitive("sum", _sum,
                 lambda g, ans, saved, tracked, x, dim=None, keepdims=False:
                 (_expand(g, shape_of(x), dim, keepdims),), arity=1, vjp_plain=_vjp_sum_plain)


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


# ---- linear algebra -------------------------------------------------------------------------
def _rows(a):
    """a [..., n] as a matrix [rows, n] (sizes spelled out: -1 is ambiguous for an empty array)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _matmul(a, b):
    if type(a) is not np.ndarray or a.dtype.kind == "b":
        a = bools_as_floats(a)
    if type(b) is not np.ndarray or b.dtype.kind == "b":
        b = bools_as_floats(b)
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim > 2 and b.ndim == 2:
        # a batch against one matrix: one 2-D product (BLAS runs it far better than a batch loop)
        return np.matmul(_rows(a), b).reshape(a.shape[:-1] + (b.shape[1],))
    if mixed(a, b):
        a, b = crossed(a, b)
    elif type(a) is np.ndarray or type(b) is np.ndarray:
        return python_scalar(np.matmul(a, b))
    if type(a) not in ARRAYS or type(b) not in ARRAYS:
        raise ValueError("matmul: a number is not a matrix")
    if a.ndim > 2 and b.ndim == 2:
        return (_rows(a) @ b).reshape(tuple(a.shape[:-1]) + (b.shape[1],))
    return python_scalar(xp_of(a, b).matmul(a, b))


def _vjp_matmul_plain(g, ans, saved, tracked, a, b):
    """First order, float matrices against one matrix: the products directly, a batch folded,
    without zmatmul's finiteness test of each product (the tape tests the pass's result once:
    tape.backward)."""
    if type(g) is np.ndarray and type(a) is np.ndarray and type(b) is np.ndarray and b.ndim == 2 \
            and a.ndim >= 2 and a.dtype.kind == "f" and b.dtype.kind == "f":
        ga = np.matmul(g, b.T) if tracked[0] else None
        gb = None
        if tracked[1]:
            gb = np.matmul(a.T, g) if a.ndim == 2 else np.matmul(_rows(a).T, _rows(g))
        return ga, gb
    if type(g) is not np.ndarray and type(g) in ARRAYS and type(g) is type(a) and type(b) is type(a) \
            and b.ndim == 2 and a.ndim >= 2 and a.dtype.is_floating_point and b.dtype.is_floating_point:   # torch
        ga = g @ b.T if tracked[0] else None
        gb = None
        if tracked[1]:
            gb = a.T @ g if a.ndim == 2 else _rows(a).T @ _rows(g)
        return ga, gb
    return None


def _vjp_matmul(g, ans, saved, tracked, a, b):
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
    if tracked[0]:
        ga = unbroadcast(zmatmul(g2, transpose(b2)), shape_of(a2))
        if len(sa) == 1:
            ga = reshape(ga, shape=sa)
    if tracked[1]:
        a2s, g2s = shape_of(a2), shape_of(g2)
        if len(a2s) > 2 and len(shape_of(b2)) == 2:   # a batch against one matrix: fold the batch
            rows = math.prod(a2s[:-1])           # spelled out: -1 is ambiguous for an empty batch
            gb = zmatmul(transpose(reshape(a2, shape=(rows, a2s[-1]))), reshape(g2, shape=(rows, g2s[-1])))
        else:
            gb = unbroadcast(zmatmul(transpose(a2), g2), shape_of(b2))
        if len(sb) == 1:
            gb = reshape(gb, shape=sb)
    return ga, gb


matmul = primitive("matmul", _matmul, _vjp_matmul, arity=2, vjp_plain=_vjp_matmul_plain,
                   arg_names=("the left matrix", "the right matrix"))


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
        if math.isfinite(_add_reduce(r, None)):      # one reduction: an inf or nan anywhere makes the sum non-finite
            return r
    elif type(r) in ARRAYS:
        if math.isfinite(float(xp_of(r).sum(r))):
            return r
        be = B.of(r)            # the careful product on the host (an inf or a nan met a matrix product)
        return be.asarray(_zmatmul(B.to_numpy(a), B.to_numpy(b)))
    elif math.isfinite(r):
        return r
    a, b = np.asarray(bools_as_floats(a), dtype=np.result_type(r)), np.asarray(bools_as_floats(b), dtype=np.result_type(r))
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
    return python_scalar(out)


zmatmul = primitive("zmatmul", _zmatmul, _vjp_matmul, arity=2, vjp_plain=_vjp_matmul_plain)
