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

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.primitive_table import FLOAT, as_float, bools_as_floats, primitive, python_scalar, shape_of, size_of
from tapeml.array.arith_ops import add, div, mul, sub, where, zmul
from tapeml.array.scale_ops import ldexp, slice_exponents, unsafe_slices
from tapeml.array.shape_ops import _expand, broadcast_to, permute, reshape, sum_
from tapeml.array.index_ops import concat, index
from tapeml.array.softmax_ops import softmax
from tapeml.array.rows import limit_rows as _limit_rows


_ND = np.ndarray


def _other(x) -> bool:
    """x is another backend's matrix (not NumPy's, not a number): the portable paths take it."""
    t = type(x)
    return t is not _ND and t in ARRAYS


def _floats(x):
    x = bools_as_floats(x)
    t = type(x)
    if t is _ND:
        return x if x.dtype.kind == "f" else x.astype(FLOAT["dtype"])
    if t in ARRAYS:
        return x if B.of(x).is_float(x) else as_float(x)
    return np.asarray(x, dtype=np.float64)


def _on(v, like):
    """v (a NumPy array, such as positions worked out on the host) on the backend of the array like."""
    return B.of(like).asarray(v) if type(v) is _ND and _other(like) else v


# ---- gather and scatter along one axis --------------------------------------------------------
def along(idx, dim):
    """The index that picks, at each position of `idx`, the element idx[pos] along `dim` (the
    other axes taken from pos): NumPy's take_along_axis as one index, for reads and stores. A
    NumPy idx gives NumPy's index; another backend's, one of its arrays (the grids on its device)."""
    if type(idx) is _ND:
        grids = list(np.indices(idx.shape, sparse=True))
        grids[dim] = idx
        return tuple(grids)
    xp, nd = xp_of(idx), len(idx.shape)
    grids = []
    for ax, n in enumerate(idx.shape):
        if ax == dim % nd:
            grids.append(idx)
        else:
            shape = [1] * nd
            shape[ax] = n
            grids.append(xp.reshape(xp.arange(n, device=idx.device), tuple(shape)))
    return tuple(grids)


_along = along


def _take_along(x, idx, dim):
    x = _floats(x)
    if type(x) is _ND and type(idx) is _ND:
        return python_scalar(x[_along(idx, dim)])
    if type(x) is _ND:
        x = _on(x, idx)
    return python_scalar(xp_of(x).take_along_axis(x, _on(idx, x), axis=dim))


def _put_along(g, idx, dim, shape):
    """The scatter-add of g into zeros of `shape` at positions idx along dim (repeats add up)."""
    g = _floats(g)
    if type(g) is _ND and type(idx) is _ND:
        out = np.zeros(shape, dtype=g.dtype)
        np.add.at(out, _along(idx, dim), g)
        return out
    like = g if _other(g) else idx
    g, idx = _on(g, like), _on(idx, like)
    be = B.of(like)
    out = be.xp.zeros(tuple(shape), dtype=g.dtype, device=g.device)
    return be.add_at(out, along(idx, dim), be.xp.broadcast_to(g, tuple(idx.shape)))


take_along = primitive("take_along", _take_along, lambda g, ans, saved, tracked, x, idx, dim:
                       (put_along(g, idx=idx, dim=dim, shape=shape_of(x)),), arity=1)
put_along = primitive("put_along", _put_along, lambda g, ans, saved, tracked, x, idx, dim, shape:
                      (take_along(g, idx=idx, dim=dim),), arity=1)


def _flip(x, dim):
    n = shape_of(x)[dim]
    shape = [1] * len(shape_of(x))
    shape[dim] = n
    xr = _raw(x)
    if _other(xr):
        xp = xp_of(xr)
        idx = xp.broadcast_to(xp.reshape(xp.arange(n - 1, -1, -1, device=xr.device), tuple(shape)), shape_of(x))
    else:
        idx = np.broadcast_to(np.arange(n - 1, -1, -1).reshape(shape), shape_of(x))
    return take_along(x, idx=idx, dim=dim)


def _shift(x, dim, fill):
    """x moved one step along dim, `fill` entering at position 0 (the last entry drops out)."""
    shape = shape_of(x)
    first = list(shape)
    first[dim] = 1
    cut = [slice(None)] * len(shape)
    cut[dim] = slice(0, shape[dim] - 1)
    xr = _floats(_raw(x))
    if _other(xr):
        head = xp_of(xr).full(tuple(first), fill, dtype=xr.dtype, device=xr.device)
    else:
        head = np.full(first, fill, dtype=xr.dtype)
    return concat(head, index(x, idx=tuple(cut)), dim=dim)


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
    x = _floats(x)
    if type(x) is _ND:
        return python_scalar(np.prod(x, axis=dim, keepdims=keepdims))
    return python_scalar(xp_of(x).prod(x, axis=dim, keepdims=keepdims))


def _vjp_prod(g, ans, saved, tracked, x, dim=None, keepdims=False):
    shape = shape_of(x)
    if dim is None:
        flat = reshape(x, shape=(-1,))
        o = reshape(others(flat, 0), shape=shape) if shape else 1.0
    else:
        o = others(x, dim)
    return (zmul(_expand(g, shape, dim, keepdims), o),)


prod = primitive("prod", _prod, _vjp_prod, arity=1)


def _cumulative(np_f, xp_name):
    """The running sum or product along dim: NumPy's np_f on a NumPy array, the array API
    standard's xp_name on another backend's matrix (booleans as floats)."""
    def impl(x, dim):
        x = _floats(x)
        if type(x) is _ND:
            return np_f(x, axis=dim)
        return getattr(xp_of(x), xp_name)(x, axis=dim)
    return impl


_cumsum = _cumulative(np.cumsum, "cumulative_sum")
_cumprod = _cumulative(np.cumprod, "cumulative_prod")


def _vjp_cumsum(g, ans, saved, tracked, x, dim):
    # the reverse cumulative sum: sum_{j >= i} g_j = total - cumsum(g) + g
    return (add(sub(sum_(g, dim=dim, keepdims=True), cumsum(g, dim=dim)), g),)


cumsum = primitive("cumsum", _cumsum, _vjp_cumsum, arity=1)


def _zero_counts(xr, dim):
    """The running count of zeros along dim of the plain float array xr (integers, xr's shape)."""
    if type(xr) is _ND:
        return np.cumsum(xr == 0, axis=dim)
    xp = xp_of(xr)
    return xp.cumulative_sum(xp.astype(xr == 0, xp.int64), axis=dim)


def _all_finite(xr) -> bool:
    if type(xr) is _ND:
        return bool(np.all(np.isfinite(xr)))
    xp = xp_of(xr)
    return bool(xp.all(xp.isfinite(xr)))


def _max_count(zeros) -> int:
    """The largest running count of zeros (0 for an empty array)."""
    if type(zeros) is _ND:
        return int(zeros.max(initial=0))
    return int(xp_of(zeros).max(zeros)) if size_of(zeros) else 0


def _vjp_cumprod_first(g, ans, saved, tracked, x, dim):
    """First order: d ans_j / d x_k = prod_{i <= j, i != k} x_i. With z the first zero of the slice
    (none: z = n) and c1 the running product with x_z taken as 1: for k < z it is c1_j / x_k (j < z;
    later terms hold x_z = 0), for k = z it is c1_j (j >= z), for k > z it is 0. O(n), exact at zeros."""
    xr = _floats(_raw(x))
    if size_of(xr) == 0 or not _all_finite(xr):
        return _vjp_cumprod(g, ans, saved, tracked, x, dim)
    zeros = _zero_counts(xr, dim)
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
    xr = _floats(_raw(x))
    if size_of(xr) == 0:
        return (g,)
    zeros = _zero_counts(xr, dim)
    most = _max_count(zeros)
    if most <= 64 and _all_finite(xr):
        before, first = zeros == 0, (zeros == 1) & (xr == 0)
        ga = zmul(g, ans)
        rev = add(sub(sum_(ga, dim=dim, keepdims=True), cumsum(ga, dim=dim)), ga)
        y = where(first, 1.0, x)
        cy = cumprod(y, dim=dim)
        at_z = sum_(where(before, 0.0, zmul(g, cy)), dim=dim, keepdims=True)
        out = where(before, div(rev, where(before, x, 1.0)), where(first, at_z, 0.0))
        if most == 0:
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
    if _other(xr):
        k = xp_of(xr).arange(n, device=xr.device)
        tri = k[:, None] <= k[None, :]                          # tri[k, j]: k <= j
    else:
        tri = np.triu(np.ones((n, n), dtype=bool))
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
    """log(sum(exp(x))) along dim, on the slice's largest element (a slice of +-inf is +-inf), in
    the array namespace of x (NumPy's for a NumPy array)."""
    x = _floats(x)
    xp = np if type(x) is _ND else xp_of(x)
    if size_of(x) == 0:
        return python_scalar(xp.log(xp.sum(xp.exp(x), axis=dim, keepdims=keepdims)))
    m = xp.max(x, axis=dim, keepdims=True)
    safe = xp.where(xp.isfinite(m), m, 0.0)
    s = xp.sum(xp.exp(x - safe), axis=dim, keepdims=True)
    out = xp.log(s) + safe
    out = xp.where(m == math.inf, math.inf, xp.where(m == -math.inf, -math.inf, out))
    if not keepdims:
        out = xp.squeeze(out, axis=dim)
    return python_scalar(out.astype(x.dtype) if xp is np else xp.astype(out, x.dtype))


def _vjp_logsumexp(g, ans, saved, tracked, x, dim, keepdims=False):
    shape = shape_of(x)
    return (_limit_rows(zmul(_expand(g, shape, dim, keepdims), softmax(x, dim=dim)), x, dim),)


logsumexp = primitive("logsumexp", _logsumexp, _vjp_logsumexp, arity=1)


# ---- reductions whose intermediate leaves the float range (issue 25) ------------------------------
def _axes(shape, dim):
    if dim is None:
        return tuple(range(len(shape)))
    return tuple(d % len(shape) for d in ((dim,) if isinstance(dim, int) else dim))


def kept(r, shape, dim, like=None):
    """A plain reduction result r of an array of `shape` along dim, with the reduced axes kept (1):
    a matrix of r's backend (r a number: of the array like's, else NumPy's)."""
    out = tuple(1 if i in _axes(shape, dim) else n for i, n in enumerate(shape))
    if _other(r):
        return r.reshape(out)
    if _other(like):
        return B.of(like).asarray(np.asarray(r), B.of(like).np_dtype(like.dtype)).reshape(out)
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
    tm = type(mr)
    if n == 0 or math.isfinite(mr.sum() if tm is _ND else float(xp_of(mr).sum(mr)) if tm in ARRAYS else mr):
        return m            # one reduction of the result
    xr = _floats(_raw(x))
    if type(xr) is _ND:
        bad = ~np.isfinite(kept(mr, shape, dim)) & np.isfinite(xr).all(axis=_axes(shape, dim), keepdims=True)
        if not bad.any():
            return m
        bad = np.reshape(bad, shape_of(m))
    else:
        xp = xp_of(xr)
        bad = ~xp.isfinite(kept(mr, shape, dim, like=xr)) & xp.all(xp.isfinite(xr), axis=_axes(shape, dim),
                                                                   keepdims=True)
        if not bool(xp.any(bad)):
            return m
        if not shape_of(m):     # one number, to take again
            return sum_(div(x, float(n)), dim=dim, keepdims=keepdims)
        bad = xp.reshape(bad, shape_of(m))
    return where(bad, sum_(div(x, float(n)), dim=dim, keepdims=keepdims), m)


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
    e = slice_exponents(_floats(xr), ax, bad, at_least)
    r = f(ldexp(x, e=-e), e)
    return ldexp(r, e=e * degree) if degree else r
