"""The matrix product: matmul (a batch against one matrix folded into one 2-D product) and zmatmul,
the backward pass's product where a zero factor wins against inf and nan (zmul's rule, summed),
with the VJP they share and its first-order form on plain arrays (tape.Primitive's vjp_plain)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.primitive_table import bools_as_floats, crossed, mixed, primitive, python_scalar, shape_of
from tapeml.array.shape_ops import reshape, transpose, unbroadcast

_NDARRAY = np.ndarray
_add_reduce = np.add.reduce               # ndarray.sum without its Python wrapper (numpy/_core/_methods.py)


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
    t = type(g)
    if t in ARRAYS and type(a) is t and type(b) is t and b.ndim == 2 and a.ndim >= 2 and (
            a.dtype.kind == "f" and b.dtype.kind == "f" if t is np.ndarray      # NumPy's @ promotes
            else a.dtype.is_floating_point and g.dtype == a.dtype == b.dtype):  # torch's does not
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
