"""The primitives of reductions, sorting and search (lang/array/ops.py gathers them): prod, cumsum,
cumprod, logsumexp, and the gather along an axis (take_along) with its scatter (put_along), from
which sort, topk, median and quantile are composed. Conventions at kinks: lang/array/ops.py and
docs/language.md ("Reductions and sorting").

- prod's gradient is the product of the other elements, computed without division (exclusive
  prefix and suffix products), so one zero gives the product of the others and two zeros give 0;
- cumprod's gradient divides by x only before the first zero of a slice (the first zero's gradient
  is the running product with it taken as 1, later ones 0); an inf or nan in x takes the
  division-free products on an [n, n] triangle;
- logsumexp follows softmax's limit rule: a row of all -inf gives -inf (gradient 0), a row holding
  +inf gives +inf (gradient 0: no finite change of the row changes the value).
"""
from __future__ import annotations

import math

import numpy as np

from tapeml.array.primitive_table import FLOAT, bools_as_floats, primitive, python_scalar, shape_of
from tapeml.array.core_ops import (add, broadcast_to, div, ldexp, mul, reshape, slice_exponents, sub, sum_, unsafe_slices,
                       where, zmul, _expand, permute)
from tapeml.array.index_ops import concat, index
from tapeml.array.nn_ops import softmax, _limit_rows


def _floats(x):
    x = bools_as_floats(x)
    if type(x) is not np.ndarray:
        return np.asarray(x, dtype=np.float64)
    return x if x.dtype.kind == "f" else x.astype(FLOAT["dtype"])


# ---- gather and scatter along one axis --------------------------------------------------------
def along(idx, dim):
    """The NumPy index that picks, at each position of `idx`, the element idx[pos] along `dim` (the
    other axes taken from pos): NumPy's take_along_axis as one index, for reads and stores."""
    grids = list(np.indices(idx.shape, sparse=True))
    grids[dim] = idx
    return tuple(grids)


_along = along


def _take_along(x, idx, dim):
    return python_scalar(_floats(x)[_along(idx, dim)])


def _put_along(g, idx, dim, shape):
    """The scatter-add of g into zeros of `shape` at positions idx along dim (repeats add up)."""
    g = _floats(g)
    out = np.zeros(shape, dtype=g.dtype)
    np.add.at(out, _along(idx, dim), g)
    return out


take_along = primitive("take_along", _take_along,
                       lambda g, ans, saved, tracked, x, idx, dim:
                       (put_along(g, idx=idx, dim=dim, shape=shape_of(x)),), arity=1)
put_along = primitive("put_along", _put_along,
                      lambda g, ans, saved, tracked, x, idx, dim, shape: (take_along(g, idx=idx, dim=dim),),
                      arity=1)


def _flip(x, dim):
    n = shape_of(x)[dim]
    shape = [1] * len(shape_of(x))
    shape[dim] = n
    idx = np.broadcast_to(np.arange(n - 1, -1, -1).reshape(shape), shape_of(x))
    return take_along(x, idx=idx, dim=dim)


def _shift(x, dim, fill):
    """x moved one step along dim, `fill` entering at position 0 (the last entry drops out)."""
    shape = shape_of(x)
    first = list(shape)
    first[dim] = 1
    cut = [slice(None)] * len(shape)
    cut[dim] = slice(0, shape[dim] - 1)
    return concat(np.full(first, fill, dtype=_floats(_raw(x)).dtype), index(x, idx=tuple(cut)), dim=dim)


def others(x, dim):
    """The product of the other elements along dim, for each element, without division:
    exclusive prefix products times exclusive suffix products (zmul: 0 x inf = 0)."""
    if shape_of(x)[dim] == 0:
        return x
    before = _shift(cumprod(x, dim=dim), dim, 1.0)
    after = _flip(_shift(cumprod(_flip(x, dim), dim=dim), dim, 1.0), dim)
    return zmul(before, after)


# ---- products and sums ------------------------------------------------------------------------
def _prod(x, dim=None, keepdims=False):
    return python_scalar(np.prod(_floats(x), axis=dim, keepdims=keepdims))


def _vjp_prod(g, ans, saved, tracked, x, dim=None, keepdims=False):
    shape = shape_of(x)
    if dim is None:
        flat = reshape(x, shape=(-1,))
        o = reshape(others(flat, 0), shape=shape) if shape else 1.0
    else:
        o = others(x, dim)
    return (zmul(_expand(g, shape, dim, keepdims), o),)


prod = primitive("prod", _prod, _vjp_prod, arity=1)


def _cumsum(x, dim):
    return np.cumsum(_floats(x), axis=dim)


def _vjp_cumsum(g, ans, saved, tracked, x, dim):
    # the reverse cumulative sum: sum_{j >= i} g_j = total - cumsum(g) + g
    return (add(sub(sum_(g, dim=dim, keepdims=True), cumsum(g, dim=dim)), g),)


cumsum = primitive("cumsum", _cumsum, _vjp_cumsum, arity=1)


def _cumprod(x, dim):
    return np.cumprod(_floats(x), axis=dim)


def _vjp_cumprod_first(g, ans, saved, tracked, x, dim):
    """First order: d ans_j / d x_k = prod_{i <= j, i != k} x_i. With z the first zero of the slice
    (none: z = n) and c1 the running product with x_z taken as 1: for k < z it is c1_j / x_k (j < z;
    later terms hold x_z = 0), for k = z it is c1_j (j >= z), for k > z it is 0. O(n), exact at zeros."""
    xr = np.asarray(_floats(_raw(x)))
    if xr.size == 0 or not np.all(np.isfinite(xr)):
        return _vjp_cumprod(g, ans, saved, tracked, x, dim)
    zeros = np.cumsum(xr == 0, axis=dim)
    before, first = zeros == 0, (zeros == 1) & (xr == 0)
    gc = zmul(g, cumprod(where(first, 1.0, x), dim=dim))
    gb = where(before, gc, 0.0)
    rev = add(sub(sum_(gb, dim=dim, keepdims=True), cumsum(gb, dim=dim)), gb)
    at_z = sum_(where(before, 0.0, gc), dim=dim, keepdims=True)
    return (where(before, div(rev, where(before, x, 1.0)), where(first, at_z, 0.0)),)


def _vjp_cumprod(g, ans, saved, tracked, x, dim):
    """Recorded (grad of grad): the same values as _vjp_cumprod_first, written so that the terms that
    are 0 only because of x_z = 0 keep their derivative in x_z: for k < z the whole reverse sum of
    g * ans over x_k, for k > z x_z times the VJP of the running product with x_z taken as 1 (one
    level per zero of the slice)."""
    xr = np.asarray(_floats(_raw(x)))
    if xr.size == 0:
        return (g,)
    zeros = np.cumsum(xr == 0, axis=dim)
    if np.all(np.isfinite(xr)) and zeros.max(initial=0) <= 64:
        before, first = zeros == 0, (zeros == 1) & (xr == 0)
        ga = zmul(g, ans)
        rev = add(sub(sum_(ga, dim=dim, keepdims=True), cumsum(ga, dim=dim)), ga)
        y = where(first, 1.0, x)
        cy = cumprod(y, dim=dim)
        at_z = sum_(where(before, 0.0, zmul(g, cy)), dim=dim, keepdims=True)
        out = where(before, div(rev, where(before, x, 1.0)), where(first, at_z, 0.0))
        if zeros.max(initial=0) == 0:
            return (out,)
        xz = sum_(where(first, x, 0.0), dim=dim, keepdims=True)
        after = mul(xz, _vjp_cumprod(g, cy, saved, tracked, y, dim)[0])
        return (where(zeros > 0, where(first, out, after), out),)
    # an inf or nan in x: ans_j = prod_k M[k, j] with M[k, j] = x_k for k <= j, else 1 (O(n^2))
    nd = len(shape_of(x))
    order = tuple(i for i in range(nd) if i != dim) + (dim,)
    back = tuple(sorted(range(nd), key=order.__getitem__))
    xt, gt = permute(x, axes=order), permute(g, axes=order)
    n = shape_of(xt)[-1]
    tri = np.triu(np.ones((n, n), dtype=bool))                 # tri[k, j]: k <= j
    lead = shape_of(xt)[:-1]
    m = where(tri, broadcast_to(reshape(xt, shape=lead + (n, 1)), shape=lead + (n, n)), 1.0)
    gm = zmul(others(m, nd - 1), broadcast_to(reshape(gt, shape=lead + (1, n)), shape=lead + (n, n)))
    gk = sum_(where(tri, gm, 0.0), dim=nd)
    return (permute(gk, axes=back),)


cumprod = primitive("cumprod", _cumprod, _vjp_cumprod, arity=1, vjp_plain=_vjp_cumprod_first)


def _raw(v):
    from tapeml.array.tape import raw
    return raw(v)


# ---- logsumexp ----------------------------------------------------------------------------------
def _logsumexp(x, dim, keepdims=False):
    x = _floats(x)
    if x.size == 0:
        return python_scalar(np.log(np.sum(np.exp(x), axis=dim, keepdims=keepdims)))
    m = np.max(x, axis=dim, keepdims=True)
    safe = np.where(np.isfinite(m), m, 0.0)
    s = np.sum(np.exp(x - safe), axis=dim, keepdims=True)
    out = np.log(s) + safe
    out = np.where(m == np.inf, np.inf, np.where(m == -np.inf, -np.inf, out))
    if not keepdims:
        out = np.squeeze(out, axis=dim)
    return python_scalar(out.astype(x.dtype))


def _vjp_logsumexp(g, ans, saved, tracked, x, dim, keepdims=False):
    shape = shape_of(x)
    return (_limit_rows(zmul(_expand(g, shape, dim, keepdims), softmax(x, dim=dim)), x, dim),)


logsumexp = primitive("logsumexp", _logsumexp, _vjp_logsumexp, arity=1)


# ---- reductions whose intermediate leaves the float range (issue 25) ------------------------------
def _axes(shape, dim):
    if dim is None:
        return tuple(range(len(shape)))
    return tuple(d % len(shape) for d in ((dim,) if isinstance(dim, int) else dim))


def kept(r, shape, dim):
    """A plain reduction result r of an array of `shape` along dim, with the reduced axes kept (1)."""
    out = tuple(1 if i in _axes(shape, dim) else n for i, n in enumerate(shape))
    return np.reshape(np.asarray(r), out)


def mean(x, dim=None, keepdims=False, count=None):
    """sum(x) / n along dim (an axis, a tuple of them, or None: all), n the number of elements
    reduced or `count` (var divides by n - 1). Where that sum overflows although the slice is
    finite, the slice's mean is sum(x / n) instead, which does not overflow unless the mean does
    (its magnitude is at most n / count times the largest |x|): the mean of [1.5e308, 1.7e308] is
    1.6e308, not inf. Every other slice (all of them, in the common path) is the plain sum(x) / n."""
    shape = shape_of(x)
    if count is not None:
        n = count
    elif dim is None:
        n = math.prod(shape)
    else:
        n = math.prod(shape[a] for a in _axes(shape, dim))
    m = div(sum_(x, dim=dim, keepdims=keepdims), float(n))
    mr = _raw(m)
    if n == 0 or math.isfinite(mr.sum() if type(mr) is np.ndarray else mr):     # one reduction of the result
        return m
    xr = np.asarray(_floats(_raw(x)))
    bad = ~np.isfinite(kept(mr, shape, dim)) & np.isfinite(xr).all(axis=_axes(shape, dim), keepdims=True)
    if not bad.any():
        return m
    return where(np.reshape(bad, shape_of(m)), sum_(div(x, float(n)), dim=dim, keepdims=keepdims), m)


def unkept(r, shape):
    """A result r with kept axes of 1 into `shape`; to no axes, a number (a sum of its one element:
    reshape to () would give a 0-d matrix)."""
    return sum_(r) if shape == () else reshape(r, shape=shape)


def rescaled(f, x, dim, plain, squares, at_least=None, degree=1):
    """A function f of the slices of x along dim, homogeneous of `degree` (f(c x) = |c|^degree f(x)
    for c a power of 2: 1 for a norm or a standard deviation, 0 for a unit vector), whose plain
    value `plain` came from the sums of squares `squares` (reduced axes kept): the slices where
    that sum is not a safe finite number (unsafe_slices: it overflowed or underflowed on finite
    elements) are computed again as 2^(degree E) f(x 2^-E), E the binary exponent of the slice's
    largest |x| (raised to at_least), which is exact: the value and the gradient are those of exact
    arithmetic wherever they are representable. f(t, E) gets the scaled x and E (kept axes) and
    must keep the reduced axes. The other slices, and every slice in the common path, keep the
    plain value."""
    xr = _raw(x)
    ax = _axes(shape_of(xr), dim)
    bad = unsafe_slices(_raw(squares), xr, ax)
    if bad is None:
        return plain
    e = slice_exponents(np.asarray(_floats(xr)), ax, bad, at_least)
    r = f(ldexp(x, e=-e), e)
    return ldexp(r, e=e * degree) if degree else r
