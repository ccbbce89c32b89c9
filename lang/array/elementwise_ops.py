"""Elementwise primitives of the everyday vocabulary (issue 20): log10, log2, tan, log1p, expm1,
asin, acos, atan, atan2, sinh, cosh, softplus (differentiable) and ceil (not). Domain edges follow
IEEE arithmetic as `log` and `sqrt` do (log10(0) = -inf, asin(2) = nan, no warning); every VJP
multiplies through zmul, so a zero cotangent never meets an inf as NaN (conventions: lang/array/ops.py)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.core_ops import (_unary, add, binary_exponents, cos, div, elementwise, eq, exp, gt, ldexp, mul, neg, safe_floor,
                                   sigmoid, sin, sqrt, sub, unbroadcast, where, zmul)
from tapeml.array.tape import raw
from tapeml.array.primitive_table import (GROWS, _broadcast_shape, bools_as_floats, primitive, python_scalar, shape_of,
                                          size_of, xp1)

_LN10, _LN2 = math.log(10.0), math.log(2.0)
_ND = np.ndarray

# NumPy's function on a NumPy array or a number, the array API standard's (first name) on another
# backend's matrix
log10 = _unary("log10", elementwise("log10"), lambda g, x, ans: zmul(g, div(1.0 / _LN10, x)))
log2 = _unary("log2", elementwise("log2"), lambda g, x, ans: zmul(g, div(1.0 / _LN2, x)))
tan = _unary("tan", elementwise("tan"), lambda g, x, ans: zmul(g, add(1.0, mul(ans, ans))))
log1p = _unary("log1p", elementwise("log1p"), lambda g, x, ans: zmul(g, div(1.0, add(1.0, x))))
# expm1' = exp(x), not expm1(x) + 1 (which cancels to 0 below x = -37: expm1'(-50) is 1.9e-22)
expm1 = _unary("expm1", elementwise("expm1"), lambda g, x, ans: zmul(g, exp(x)))
# 1 - x^2 as (1 - x)(1 + x), exact where x nears +-1 (1 - x*x lost 5 digits of asin'(1 - 1e-10)); its
# derivative -2x a product, not the difference of (1 - x)' (1 + x) and (1 - x)(1 + x)' near 0
one_minus_sq = _unary("one_minus_sq", lambda x: python_scalar((1.0 - x) * (1.0 + x)),
                      lambda g, x, ans: zmul(g, mul(-2.0, x)))
asin = _unary("asin", elementwise("asin", "arcsin"), lambda g, x, ans: zmul(g, div(1.0, sqrt(one_minus_sq(x)))))
acos = _unary("acos", elementwise("acos", "arccos"),
              lambda g, x, ans: neg(zmul(g, div(1.0, sqrt(one_minus_sq(x))))))
atan = _unary("atan", elementwise("atan", "arctan"), lambda g, x, ans: zmul(g, div(1.0, add(1.0, mul(x, x)))))
def _hyperbolic(name):
    """sinh or cosh; for |x| > 709, e (e / 2) with e = exp(|x| / 2) (signed for sinh): finite up to
    |x| = 710.47 as the true value is (torch computes exp(|x|) first and gave inf from 709.79)."""
    plain = elementwise(name)

    def impl(x):
        y = plain(x)
        xp = xp1(x)
        if type(x) is float:
            big = abs(x) > 709.0
        else:
            big = bool(xp.any(xp.abs(x) > 709.0)) if size_of(x) else False
        if not big:
            return y
        # (a number too through NumPy's exp: past |x| = 1419.6 it is inf, where math.exp raised)
        e = xp.exp(xp.abs(x) * 0.5) if type(x) is not float else float(np.exp(abs(x) * 0.5))
        tail = e * (e * 0.5)
        if name == "sinh":
            tail = xp.sign(x) * tail if type(x) is not float else math.copysign(tail, x)
        if type(x) is float:
            return tail
        return python_scalar(xp.where(xp.abs(x) > 709.0, tail, y))
    return impl


sinh = _unary("sinh", _hyperbolic("sinh"), lambda g, x, ans: zmul(g, cosh(x)))
cosh = _unary("cosh", _hyperbolic("cosh"), lambda g, x, ans: zmul(g, sinh(x)))
ceil = primitive("ceil", lambda x: python_scalar(xp1(x).ceil(bools_as_floats(x))), nondiff=True)


def _other(x) -> bool:
    t = type(x)
    return t is not _ND and t in ARRAYS


def _atan2(y, x):
    y, x = bools_as_floats(y), bools_as_floats(x)
    ty, tx = type(y), type(x)
    if (ty is _ND or ty not in ARRAYS) and (tx is _ND or tx not in ARRAYS):
        return python_scalar(np.arctan2(y, x))
    like = y if _other(y) else x
    be = B.of(like)     # the other operand on like's backend: a number as a 0-d matrix of like's type
    y, x = (v if v is like else be.asarray(v, be.np_dtype(like.dtype)) if type(v) is not _ND else be.asarray(v)
            for v in (y, x))
    return python_scalar(be.xp.atan2(y, x))


def _vjp_atan2(g, ans, saved, tracked, y, x):
    """d/dy = x / r^2 = cos(t) / r and d/dx = -y / r^2 = -sin(t) / r with t = atan2(y, x), r = hypot(y, x):
    the angle form is 0 (not inf / inf) where an input is infinite; at the origin the gradient is 0
    (the kink convention of abs'(0) = 0). Where x^2 + y^2 overflows or underflows though x and y are
    finite (1e154 or 1e-154 in float64), r and the cosine and sine come from x and y scaled by 2^-E
    (E the exponent of the larger |.|), exactly: the gradient at (1e-200, 1e-200) is 5e199, not 0."""
    s = add(mul(x, x), mul(y, y))
    r, cos_t, sin_t = sqrt(s), cos(ans), sin(ans)
    sr = raw(s)
    like = sr if _other(sr) else None
    if like is not None:        # the test on the device (two numbers cross), the rare rescaling on the host
        be = B.of(like)
        floor = safe_floor(be.np_dtype(sr.dtype))
        unsafe = size_of(sr) and not (float(be.xp.min(sr)) >= floor and float(be.xp.max(sr)) < math.inf)
        sr = be.to_numpy(sr) if unsafe else sr
    else:
        sr = np.asarray(sr)
        floor = safe_floor(sr.dtype)
        unsafe = sr.size and not (sr.min() >= floor and sr.max() < math.inf)
    if unsafe:
        xr, yr = np.asarray(B.to_numpy(raw(x))), np.asarray(B.to_numpy(raw(y)))
        bad = ~((sr >= floor) & (sr < math.inf)) & np.isfinite(xr) & np.isfinite(yr) & ((xr != 0) | (yr != 0))
        if bad.any():
            e = np.where(bad, binary_exponents(np.maximum(np.abs(xr), np.abs(yr))), 0).astype(np.int32)
            if like is not None:
                bad, e = be.asarray(bad), be.asarray(e)
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
    if _other(x):
        xp = xp_of(x)
        z = x * beta
        soft = (xp.maximum(z, 0.0) + xp.log1p(xp.exp(-xp.abs(z)))) / beta
        return python_scalar(xp.where(z > threshold, x, soft))
    z = np.multiply(x, beta)
    soft = (np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))) / beta
    return python_scalar(np.where(z > threshold, x, soft))


def _vjp_softplus(g, ans, saved, tracked, x, *, beta=1.0, threshold=20.0):
    z = mul(x, beta)
    return (zmul(g, where(gt(z, threshold), 1.0, sigmoid(z))),)


softplus = primitive("softplus", _softplus, _vjp_softplus, arity=1)
