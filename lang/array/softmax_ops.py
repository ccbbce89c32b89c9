"""softmax and log_softmax along an axis (conventions: lang/array/ops.py), written once against the
namespace of their input; the backend's kernel (B.of(x).softmax, ...: lang/array/backend.py's
kernel table) takes the rows whose max is finite, the portable steps here the rest (a row of all
-inf, a row holding +inf: lang/array/rows.py)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.primitive_table import bools_as_floats, primitive, python_scalar, size_of
from tapeml.array.elementwise_ops import exp
from tapeml.array.arith_ops import sub, sum_, zmul
from tapeml.array.rows import all_finite, is_float, limit_rows, posinf_rows, same_backend, shifted


def as_matrix(x):
    """x as a matrix: booleans as floats, Python numbers and lists as a float64 NumPy array."""
    x = bools_as_floats(x)
    return x if type(x) in ARRAYS else np.asarray(x, dtype=np.float64)


def softmax_rows(x, dim=-1, m=None, finite=False):
    """(softmax(x), the rows holding a +inf or None); m: the row maxima, when the caller has them
    (finite: the caller found them all finite)."""
    x = as_matrix(x)
    be = B.of(x)
    xp = be.xp
    if size_of(x) == 0:
        return xp.asarray(x, copy=True), None
    if m is None:
        m = be.reduce_max(x, dim, keepdims=True)
    if be.is_float(x) and (finite or all_finite(m)):       # no row to take the limit of
        return python_scalar(be.softmax(x, dim, m)), None
    e, rows = shifted(x, dim, True, m)
    e = xp.exp(e)
    s = xp.sum(e, axis=dim, keepdims=True)
    return python_scalar(e / xp.where(s == 0, 1.0, s)), rows


def _plain_rows_vjp(kernel, g, ans, x, dim):
    """A first-order VJP from the output by the backend's kernel (g, ans float matrices of one
    backend, one shape), 0 on the rows holding a +inf; None otherwise (the recorded form)."""
    if not (same_backend(g, ans) and is_float(ans) and g.shape == ans.shape):
        return None
    gx = getattr(B.of(g), kernel)(g, ans, dim)
    rows = posinf_rows(x, dim)
    return (gx if rows is None else xp_of(gx).where(rows, 0.0, gx),)


def _softmax_impl(x, dim=-1):
    return softmax_rows(x, dim)[0]


def _vjp_softmax(g, ans, saved, tracked, x, dim=-1):
    return (limit_rows(zmul(ans, sub(g, sum_(zmul(g, ans), dim=dim, keepdims=True))), x, dim),)


def _vjp_softmax_plain(g, ans, saved, tracked, x, dim=-1):
    """First order: ans (g - rowsum(g ans)) by the backend's softmax_backward."""
    return _plain_rows_vjp("softmax_backward", g, ans, x, dim)


softmax = primitive("softmax", _softmax_impl, _vjp_softmax, arity=1, vjp_plain=_vjp_softmax_plain)


def _log_softmax_impl(x, dim=-1):
    x = as_matrix(x)
    be = B.of(x)
    xp = be.xp
    if size_of(x) == 0:
        return xp.asarray(x, copy=True)
    m = be.reduce_max(x, dim, keepdims=True)
    if be.is_float(x) and all_finite(m):
        return python_scalar(be.log_softmax(x, dim, m))
    z = shifted(x, dim, m=m)
    s = xp.sum(xp.exp(z), axis=dim, keepdims=True)
    zero = s == 0       # a row of all -inf (every class masked) is -inf throughout, never NaN
    return python_scalar(xp.where(zero, -math.inf, z - xp.log(xp.where(zero, 1.0, s))))


def _vjp_log_softmax(g, ans, saved, tracked, x, dim=-1):
    return (limit_rows(sub(g, zmul(exp(ans), sum_(g, dim=dim, keepdims=True))), x, dim),)


def _vjp_log_softmax_plain(g, ans, saved, tracked, x, dim=-1):
    """First order: g - exp(ans) rowsum(g) by the backend's log_softmax_backward."""
    return _plain_rows_vjp("log_softmax_backward", g, ans, x, dim)


log_softmax = primitive("log_softmax", _log_softmax_impl, _vjp_log_softmax, arity=1,
                        vjp_plain=_vjp_log_softmax_plain)
