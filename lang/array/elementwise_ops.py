"""Elementwise primitives of the everyday vocabulary (issue 20): log10, log2, tan, log1p, expm1,
asin, acos, atan, atan2, sinh, cosh, softplus (differentiable) and ceil (not). Domain edges follow
IEEE arithmetic as `log` and `sqrt` do (log10(0) = -inf, asin(2) = nan, no warning); every VJP
multiplies through zmul, so a zero cotangent never meets an inf as NaN (conventions: lang/array/ops.py)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array.core_ops import (_unary, add, binary_exponents, cos, div, eq, gt, ldexp, mul, neg, safe_floor, sigmoid, sin,
                       sqrt, sub, unbroadcast, where, zmul)
from tapeml.array.tape import raw
from tapeml.array.primitive_table import GROWS, _broadcast_shape, bools_as_floats, primitive, python_scalar, shape_of

_LN10, _LN2 = math.log(10.0), math.log(2.0)


def _np(f):
    return lambda x: python_scalar(f(x))


log10 = _unary("log10", _np(np.log10), lambda g, x, ans: zmul(g, div(1.0 / _LN10, x)))
log2 = _unary("log2", _np(np.log2), lambda g, x, ans: zmul(g, div(1.0 / _LN2, x)))
tan = _unary("tan", _np(np.tan), lambda g, x, ans: zmul(g, add(1.0, mul(ans, ans))))
log1p = _unary("log1p", _np(np.log1p), lambda g, x, ans: zmul(g, div(1.0, add(1.0, x))))
expm1 = _unary("expm1", _np(np.expm1), lambda g, x, ans: zmul(g, add(ans, 1.0)))
asin = _unary("asin", _np(np.arcsin), lambda g, x, ans: zmul(g, div(1.0, sqrt(sub(1.0, mul(x, x))))))
acos = _unary("acos", _np(np.arccos), lambda g, x, ans: neg(zmul(g, div(1.0, sqrt(sub(1.0, mul(x, x)))))))
atan = _unary("atan", _np(np.arctan), lambda g, x, ans: zmul(g, div(1.0, add(1.0, mul(x, x)))))
sinh = _unary("sinh", _np(np.sinh), lambda g, x, ans: zmul(g, cosh(x)))
cosh = _unary("cosh", _np(np.cosh), lambda g, x, ans: zmul(g, sinh(x)))
ceil = primitive("ceil", lambda x: python_scalar(np.ceil(bools_as_floats(x))), nondiff=True)


def _atan2(y, x):
    return python_scalar(np.arctan2(bools_as_floats(y), bools_as_floats(x)))


def _vjp_atan2(g, ans, saved, tracked, y, x):
    """d/dy = x / r^2 = cos(t) / r and d/dx = -y / r^2 = -sin(t) / r with t = atan2(y, x), r = hypot(y, x):
    the angle form is 0 (not inf / inf) where an input is infinite; at the origin the gradient is 0
    (the kink convention of abs'(0) = 0). Where x^2 + y^2 overflows or underflows though x and y are
    finite (1e154 or 1e-154 in float64), r and the cosine and sine come from x and y scaled by 2^-E
    (E the exponent of the larger |.|), exactly: the gradient at (1e-200, 1e-200) is 5e199, not 0."""
    s = add(mul(x, x), mul(y, y))
    r, cos_t, sin_t = sqrt(s), cos(ans), sin(ans)
    sr = np.asarray(raw(s))
    floor = safe_floor(sr.dtype)
    if sr.size and not (sr.min() >= floor and sr.max() < math.inf):
        xr, yr = np.asarray(raw(x)), np.asarray(raw(y))
        bad = ~((sr >= floor) & (sr < math.inf)) & np.isfinite(xr) & np.isfinite(yr) & ((xr != 0) | (yr != 0))
        if bad.any():
            e = np.where(bad, binary_exponents(np.maximum(np.abs(xr), np.abs(yr))), 0).astype(np.int32)
            xs, ys = ldexp(x, e=-e), ldexp(y, e=-e)
            rs = sqrt(add(mul(xs, xs), mul(ys, ys)))
            r = where(bad, ldexp(rs, e=e), r)
            rs = where(bad, rs, 1.0)
            cos_t, sin_t = where(bad, div(xs, rs), cos_t), where(bad, div(ys, rs), sin_t)
    origin = eq(r, 0.0)
    safe = where(origin, 1.0, r)
    gy = gx = None
    if tracked[0]:
        gy = unbroadcast(zmul(g, where(origin, 0.0, div(cos_t, safe))), shape_of(y))
    if tracked[1]:
        gx = unbroadcast(zmul(g, where(origin, 0.0, neg(div(sin_t, safe)))), shape_of(x))
    return gy, gx


GROWS["atan2"] = _broadcast_shape          # it broadcasts: behind the size guard (lang/array/limits.py)
atan2 = primitive("atan2", _atan2, _vjp_atan2, arity=2)


def _softplus(x, *, beta=1.0, threshold=20.0):
    """PyTorch's softplus: log(1 + exp(beta x)) / beta, and x itself where beta x > threshold;
    computed as max(z, 0) + log1p(exp(-|z|)) (z = beta x), which overflows nowhere."""
    x = bools_as_floats(x)
    z = np.multiply(x, beta)
    soft = (np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))) / beta
    return python_scalar(np.where(z > threshold, x, soft))


def _vjp_softplus(g, ans, saved, tracked, x, *, beta=1.0, threshold=20.0):
    z = mul(x, beta)
    return (zmul(g, where(gt(z, threshold), 1.0, sigmoid(z))),)


softplus = primitive("softplus", _softplus, _vjp_softplus, arity=1)
