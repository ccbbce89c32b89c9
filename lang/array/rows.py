"""The numerics that several transformer primitives share, written once for every backend against
the namespace of their inputs (`xp_of`): the rows of a matrix (slices along its last axis, or
along `dim`) that need more care than the plain formula.

- softmax's limits: a row holding +inf takes the limit (`shifted`, `posinf_rows`) and its gradient
  is 0 (`limit_rows`); a row of one-hot weights takes softmax's correction directly
  (`saturated_rows`);
- reductions that square (layer_norm's variance, rms_norm's mean square) scaled by powers of 2
  where they would overflow or underflow (issue 15): `safe_floor_of`, `unsafe_rows`,
  `row_exponents`, `scaled_rows`, `constant_rows`, `exact_center`;
- the crossing for the rare paths that run NumPy's steps on the host and give its numbers exactly
  (`host`, `back`, `on`), and the small predicates every rule asks (`all_finite`,
  `same_backend`, `is_float`, `other_backend`).

Used by softmax_ops.py, norm_ops.py, attention_ops.py and reduce_ops.py."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.tape import raw
from tapeml.array.primitive_table import FLOAT, size_of
from tapeml.array.scale_ops import safe_floor
from tapeml.array.arith_ops import where

_ND = np.ndarray


# ---- predicates and the host crossing -------------------------------------------------------
def other_backend(x) -> bool:
    """A matrix of another backend than NumPy (a torch tensor)."""
    t = type(x)
    return t is not _ND and t in ARRAYS


def all_finite(a) -> bool:
    """Whether every element of a matrix of any backend (or a number) is finite: one sum answers
    the common case (a finite sum has no inf or nan in it), the elementwise test the rest."""
    if type(a) not in ARRAYS:
        return math.isfinite(a)
    if math.isfinite(B.of(a).reduce_sum(a, None)):
        return True
    xp = xp_of(a)
    return bool(xp.all(xp.isfinite(a)))


def is_float(a) -> bool:
    return a.dtype.kind == "f" if type(a) is _ND else B.of(a).is_float(a)


def same_backend(*xs) -> bool:
    """Every x a matrix of one backend, of the same type and dtype (a kernel's inputs)."""
    t = type(xs[0])
    if t not in ARRAYS:
        return False
    dt = xs[0].dtype
    return all(type(x) is t and x.dtype == dt for x in xs[1:])


def on(be, a):
    """A NumPy array as a matrix of backend be (on its device); other values as they are."""
    return be.asarray(a) if type(a) is _ND and be.array_type is not _ND else a


def host(a):
    """A matrix on the host (NumPy) for the rare rescaling paths; other values as they are."""
    return B.to_numpy(a)


def back(a, like):
    """A NumPy result of a rare path on like's backend (None stays None, NumPy stays itself)."""
    return a if a is None or type(like) is _ND else B.of(like).asarray(a)


# ---- softmax's limits -----------------------------------------------------------------------
def posinf_rows(x, dim=-1):
    """The rows (along dim, kept as an axis of 1) holding a +inf, or None when there are none."""
    if type(x) not in ARRAYS or size_of(x) == 0 or not is_float(x):
        return None
    m = B.of(x).reduce_max(x, dim, keepdims=True)
    if all_finite(m):
        return None
    rows = m == math.inf
    return rows if rows.any() else None


def shifted(x, dim, want_rows=False, m=None):
    """x - max(x) along dim (m: that max, when the caller has it), and the row sums of its
    exponentials. A row whose max is -inf (all -inf: every key masked) is shifted by 0, so its
    exponentials are zeros, not NaN. A row holding +inf takes the limit: its +inf entries become 0
    and the rest -inf, so the +inf entries share the row's mass equally and the others get exactly 0."""
    xp = xp_of(x)
    if m is None:
        m = xp.max(x, axis=dim, keepdims=True)
    inf_rows = None
    if not all_finite(m):
        inf_rows = m == math.inf
        m = xp.where(xp.isfinite(m), m, 0.0)
    z = x - m
    if not is_float(z):
        z = xp.astype(z, B.of(z).dtype(FLOAT["dtype"]))
    if inf_rows is not None and inf_rows.any():
        lim = xp.where(x == math.inf, xp.zeros_like(z), xp.full_like(z, -math.inf))
        z = xp.where(inf_rows, lim, z)
    else:
        inf_rows = None
    return (z, inf_rows) if want_rows else z


def limit_rows(grad, x, dim=-1):
    """The cotangent of a softmax-like primitive with the rows that hold a +inf set to 0: such a row's
    value does not change under any finite change of its entries (the +inf entries stay +inf), so
    its gradient is 0 (docs/language.md, "Masks and softmax")."""
    rows = posinf_rows(raw(x), dim)
    return grad if rows is None else where(rows, 0.0, grad)


def saturated_rows(p, lim):
    """The rows [..., 1] whose correction rowsum(dp * p) must be taken directly rather than as
    rowsum(g * ans): the rows whose scores went beyond the float range (lim) and the rows whose
    weights hold an exact 1 (every other weight underflowed to 0, scores apart by more than ~745).
    There the exact correction is dp at that key, and ds exactly 0 (no gradient reaches q or k, as
    in PyTorch); the identity's rounding (its sum is in another order than the product's) is not 0,
    and times q and k of 1e8 it is a gradient of 1e8 (of inf at 1e150). None when there is none."""
    sat = xp_of(p).max(p, axis=-1, keepdims=True) == 1.0 if size_of(p) else None
    if lim is not None:
        lim = lim if type(lim) is type(p) else B.of(p).asarray(lim)
        sat = lim if sat is None else sat | lim
    return sat if sat is not None and sat.any() else None


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
_SAFE = {np.dtype(np.float64): safe_floor(np.float64), np.dtype(np.float32): safe_floor(np.float32)}


def safe_floor_of(a) -> float:
    """The safe floor (scale_ops.safe_floor) of a matrix's float type, any backend."""
    dt = a.dtype
    f = _SAFE.get(dt)
    if f is None:
        f = _SAFE[dt] = _SAFE.get(B.of(a).np_dtype(dt), _SAFE[np.dtype(np.float64)])
    return f


def unsafe_rows(den, be):
    """Rows [..., 1] whose variance + eps is not a safe finite number (or None when all are); be:
    den's backend."""
    if size_of(den) == 0:                               # no rows (x is [0, D]): nothing to rescale
        return None
    floor = safe_floor_of(den)
    if be.reduce_min(den, None) >= floor and be.reduce_max(den, None) < math.inf:      # nan fails both
        return None
    return ~((den >= floor) & (den < math.inf))


def row_exponents(x, eps):
    """(E, inf_rows) for rows [..., D] of a plain array: E [..., 1] the binary exponent of each row's
    max |x| (at least that of sqrt(eps)); inf_rows [..., 1] the rows holding +-inf."""
    be = B.of(x)
    xp = be.xp
    a = xp.max(xp.abs(x), axis=-1, keepdims=True)
    inf_rows = xp.isinf(a)
    e = be.frexp(xp.where(xp.isfinite(a), a, 0.0))[1]
    lo = np.finfo(be.np_dtype(x.dtype)).minexp + 1 if be.is_float(x) else -1021
    if eps > 0:
        lo = max(lo, int(np.frexp(math.sqrt(eps))[1]))
    return xp.astype(xp.clip(e, min=lo), xp.int32), inf_rows


def scaled_rows(x, eps, center):
    """(xhat, r) of rows [..., D] of a NumPy array, computed on x * 2^-E: xhat the normalized rows
    ((x - mean) / sqrt(var + eps) with center, x / sqrt(mean(x^2) + eps) without) and r the
    factor 1 / sqrt(var + eps) of the unscaled rows (0 where variance + eps is 0). The rare path:
    another backend's rows come here through `host`."""
    e, inf_rows = row_exponents(x, eps)
    xs = np.ldexp(x, -e)
    if inf_rows.any():
        xs = np.where(inf_rows, np.where(np.isinf(x), np.sign(x), 0.0), xs).astype(xs.dtype)
    inv_d = 1.0 / x.shape[-1]
    xc = xs - xs.sum(axis=-1, keepdims=True) * inv_d if center else xs
    if center and eps == 0:
        xc = exact_center(x, xc)
    eps_s = np.where(inf_rows, 0.0, np.ldexp(float(eps), -2 * e)).astype(xs.dtype)
    den = (xc * xc).sum(axis=-1, keepdims=True) * inv_d + eps_s
    zero = den == 0          # a nan (a nan in the row) stays nan: the whole row is nan, as PyTorch's
    rs = np.where(zero, 0.0, 1.0 / np.sqrt(np.where(zero, 1.0, den))).astype(xs.dtype)
    r = np.where(inf_rows, 0.0, np.ldexp(rs, -e)).astype(xs.dtype)
    return xc * rs, r


def constant_rows(x):
    """Rows [..., 1] whose entries are all equal (their variance is exactly 0, whatever the
    rounding of their mean: 0.1 * 3 / 3 is not 0.1)."""
    xp = xp_of(x)
    return xp.max(x, axis=-1, keepdims=True) == xp.min(x, axis=-1, keepdims=True)


def exact_center(x, xc):
    """xc with the rows of equal entries set to exactly 0 (used with eps = 0, where a rounding
    residue of the mean would otherwise be normalized to +-1)."""
    const = constant_rows(x)
    return xp_of(xc).where(const, 0.0, xc) if const.any() else xc
