"""Power-of-two scaling (issue 25): the ldexp primitive (x * 2^e, exact) and the helpers that find
where a reduction that squares over- or underflows and by what power of 2 to scale each slice
(reduce_ops.rescaled, linalg_ops, elementwise_ops' hypot-like rules and rows.py use them)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS
from tapeml.array.shape_ops import unbroadcast
from tapeml.array.primitive_table import bools_as_floats, primitive, python_scalar, shape_of

_NDARRAY, _INF = np.ndarray, math.inf


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
