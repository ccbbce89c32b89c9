"""Shapes and the sum: transpose, reshape, permute, broadcast_to, sum (whole or along dimensions)
and the one unbroadcast (the cotangent of a broadcast summed back to its operand's shape), the
bottom of the primitives' modules: their VJPs use only each other."""
from __future__ import annotations

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.primitive_table import FLOAT, bools_as_floats, primitive, python_scalar, shape_of


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


def _vjp_permute(g, ans, saved, tracked, x, axes):
    return (permute(g, axes=tuple(sorted(range(len(axes)), key=axes.__getitem__))),)     # the inverse permutation


permute = primitive("permute", _permute, _vjp_permute, arity=1)


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


def _vjp_sum(g, ans, saved, tracked, x, dim=None, keepdims=False):
    return (_expand(g, shape_of(x), dim, keepdims),)


sum_ = primitive("sum", _sum, _vjp_sum, arity=1, vjp_plain=_vjp_sum_plain)
