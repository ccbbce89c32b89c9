"""The transformer primitives: softmax, log_softmax, layer_norm, rms_norm, dense, dense_heads and
heads_dense (multi-head attention's projections with the heads joined), attention_weights and
scaled_dot_product_attention, with their numerics helpers (conventions: lang/array/ops.py).

Each runs on NumPy arrays with its NumPy code, and on another backend's matrices (torch tensors)
with the array API through `xp` plus the backend's fused kernels where the standard has none
(softmax, log_softmax and layer_norm forward and backward: lang/array/backend.py). The common
path stays on the device; the rare paths that rescale by powers of 2 (rows whose squares or
scores leave the float range) run NumPy's code on the host and move the result back, so they
give NumPy's numbers exactly."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.tape import raw
from tapeml.array.primitive_table import TABLE, FLOAT, bools_as_floats, primitive, python_scalar, shape_of, size_of
from tapeml.array.core_ops import (
    _matmul, _rows, _vjp_matmul, _vjp_matmul_plain, _zmul, add, binary_exponents, div, exp,
    matmul, mul, permute, reshape, safe_floor, sqrt, sub, sum_, transpose, unbroadcast, where, zmatmul, zmul,
)
from tapeml.array.index_ops import _concat, _vjp_concat, _vjp_concat_plain, concat


_ND = np.ndarray
_add_reduce, _min_reduce, _max_reduce = np.add.reduce, np.minimum.reduce, np.maximum.reduce
_isfinite = math.isfinite


def _other(x) -> bool:
    """A matrix of another backend than NumPy (a torch tensor)."""
    t = type(x)
    return t is not _ND and t in ARRAYS


def _all_finite(a) -> bool:
    """Whether every element of a matrix of any backend (or a number) is finite."""
    if type(a) is _ND:
        return bool(np.isfinite(a).all())
    if type(a) in ARRAYS:
        xp = xp_of(a)
        return bool(xp.all(xp.isfinite(a)))
    return math.isfinite(a)


def _any(a) -> bool:
    return bool(xp_of(a).any(a)) if _other(a) else bool(np.any(a))


def _host(a):
    """A matrix on the host (NumPy) for the rare rescaling paths; other values as they are."""
    return B.to_numpy(a)


def _back(a, like):
    """A NumPy result of a rare path on like's backend (None stays None)."""
    return None if a is None else B.of(like).asarray(a)


def _is_float(a) -> bool:
    return a.dtype.kind == "f" if type(a) is _ND else B.of(a).is_float(a)


# ---- the transformer primitives -------------------------------------------------------------
def _posinf_rows(x, dim=-1):
    """The rows (along dim, kept as an axis of 1) holding a +inf, or None when there are none."""
    if type(x) is not np.ndarray:
        if not _other(x) or size_of(x) == 0 or not _is_float(x):
            return None
        xp = xp_of(x)
        m = xp.max(x, axis=dim, keepdims=True)
        if _all_finite(m):
            return None
        rows = m == math.inf
        return rows if _any(rows) else None
    if x.size == 0 or x.dtype.kind != "f":
        return None
    m = x.max(axis=dim, keepdims=True)
    if np.isfinite(m).all():
        return None
    rows = m == np.inf
    return rows if rows.any() else None


def _shifted(x, dim, want_rows=False, m=None):
    """x - max(x) along dim (m: that max, when the caller has it), and the row sums of its
    exponentials. A row whose max is -inf (all -inf: every key masked) is shifted by 0, so its
    exponentials are zeros, not NaN. A row holding +inf takes the limit: its +inf entries become 0
    and the rest -inf, so the +inf entries share the row's mass equally and the others get exactly 0."""
    if m is None:
        m = x.max(axis=dim, keepdims=True)
    inf_rows = None
    if not np.isfinite(m).all():
        inf_rows = m == np.inf
        m = np.where(np.isfinite(m), m, 0.0)
    z = np.asarray(np.subtract(x, m))
    if z.dtype.kind != "f":
        z = z.astype(FLOAT["dtype"])
    if inf_rows is not None and inf_rows.any():
        z = np.where(inf_rows, np.where(x == np.inf, 0.0, -np.inf), z).astype(z.dtype)
    else:
        inf_rows = None
    return (z, inf_rows) if want_rows else z


def _softmax_impl(x, dim=-1):
    return _softmax_rows(x, dim)[0]


def _shifted_xp(x, dim, want_rows=False, m=None):
    """_shifted on another backend's matrix (the same steps with the array API)."""
    xp = xp_of(x)
    if m is None:
        m = xp.max(x, axis=dim, keepdims=True)
    inf_rows = None
    fin = xp.isfinite(m)
    if not bool(xp.all(fin)):
        inf_rows = m == math.inf
        m = xp.where(fin, m, 0.0)
    z = x - m
    if inf_rows is not None and bool(xp.any(inf_rows)):
        lim = xp.where(x == math.inf, xp.zeros_like(z), xp.full_like(z, -math.inf))
        z = xp.where(inf_rows, lim, z)
    else:
        inf_rows = None
    return (z, inf_rows) if want_rows else z


def _softmax_rows_xp(x, dim=-1, m=None):
    """_softmax_rows on another backend's float matrix: the backend's softmax where every row's
    max is finite (one reduction tells), else NumPy's steps with the array API."""
    xp = xp_of(x)
    if size_of(x) == 0:
        return xp.asarray(x, copy=True), None
    if m is None:
        m = xp.max(x, axis=dim, keepdims=True)
    if bool(xp.all(xp.isfinite(m))):
        return B.of(x).softmax(x, dim), None
    e, rows = _shifted_xp(x, dim, True, m)
    e = xp.exp(e)
    s = xp.sum(e, axis=dim, keepdims=True)
    return e / xp.where(s == 0, 1.0, s), rows


def _softmax_rows(x, dim=-1, m=None, finite=False):
    """(softmax(x), the rows holding a +inf or None); m: the row maxima, when the caller has them
    (finite: the caller found them all finite)."""
    x = bools_as_floats(x)
    if type(x) is not np.ndarray:
        if type(x) in ARRAYS:
            return _softmax_rows_xp(x, dim, m)
        x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x.copy(), None
    if finite and x.dtype.kind == "f":    # every row's max is finite: no row to take the limit of
        e = np.subtract(x, m)
        np.exp(e, out=e)
        e /= _add_reduce(e, dim, keepdims=True)     # each row's sum is at least exp(0) = 1
        return python_scalar(e), None
    e, rows = _shifted(x, dim, True, m)
    np.exp(e, out=e)            # in place on the fresh array: one temporary instead of three
    s = e.sum(axis=dim, keepdims=True)
    if not s.all():
        s = np.where(s == 0, 1.0, s)
    e /= s
    return python_scalar(e), rows


def _limit_rows(grad, x, dim=-1):
    """The cotangent of a softmax-like primitive with the rows that hold a +inf set to 0: such a row's
    value does not change under any finite change of its entries (the +inf entries stay +inf), so
    its gradient is 0 (docs/language.md, "Masks and softmax")."""
    rows = _posinf_rows(raw(x), dim)
    return grad if rows is None else where(rows, 0.0, grad)


def _vjp_softmax(g, ans, saved, tracked, x, dim=-1):
    return (_limit_rows(zmul(ans, sub(g, sum_(zmul(g, ans), dim=dim, keepdims=True))), x, dim),)


def _same_backend(*xs) -> bool:
    """Every x a matrix of one other backend, same type and dtype (the fused kernels' inputs)."""
    t = type(xs[0])
    if t is _ND or t not in ARRAYS:
        return False
    dt = xs[0].dtype
    return all(type(x) is t and x.dtype == dt for x in xs[1:])


def _vjp_softmax_plain(g, ans, saved, tracked, x, dim=-1):
    """First order: ans (g - rowsum(g ans)) directly (the recorded form's steps), the backend's
    fused softmax backward on another backend; 0 on the rows holding a +inf."""
    if type(g) is _ND:
        if type(ans) is not _ND or ans.shape != g.shape:
            return None
        gx = g * ans
        gx = ans * (g - gx.sum(axis=dim, keepdims=True))
    elif _same_backend(g, ans) and _is_float(ans):
        gx = B.of(g).softmax_backward(g, ans, dim)
    else:
        return None
    rows = _posinf_rows(x, dim)
    return (gx if rows is None else xp_of(gx).where(rows, 0.0, gx),)


softmax = primitive("softmax", _softmax_impl, _vjp_softmax, arity=1, vjp_plain=_vjp_softmax_plain)


def _log_softmax_xp(x, dim):
    xp = xp_of(x)
    if size_of(x) == 0:
        return xp.asarray(x, copy=True)
    m = xp.max(x, axis=dim, keepdims=True)
    if bool(xp.all(xp.isfinite(m))):
        return B.of(x).log_softmax(x, dim)
    z = _shifted_xp(x, dim, m=m)
    s = xp.sum(xp.exp(z), axis=dim, keepdims=True)
    zero = s == 0
    return xp.where(zero, -math.inf, z - xp.log(xp.where(zero, 1.0, s)))


def _log_softmax_impl(x, dim=-1):
    x = bools_as_floats(x)
    if type(x) is not np.ndarray:
        if type(x) in ARRAYS:
            return _log_softmax_xp(x, dim)
        x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    z = _shifted(x, dim)
    s = np.sum(np.exp(z), axis=dim, keepdims=True)
    # a row of all -inf (every class masked) is -inf throughout, never NaN
    return python_scalar(np.where(s == 0, -np.inf, z - np.log(np.where(s == 0, 1.0, s))))


def _vjp_log_softmax(g, ans, saved, tracked, x, dim=-1):
    return (_limit_rows(sub(g, zmul(exp(ans), sum_(g, dim=dim, keepdims=True))), x, dim),)


def _vjp_log_softmax_plain(g, ans, saved, tracked, x, dim=-1):
    """First order: g - exp(ans) rowsum(g) directly, the backend's fused log_softmax backward on
    another backend; 0 on the rows holding a +inf."""
    if type(g) is _ND:
        if type(ans) is not _ND or ans.shape != g.shape:
            return None
        gx = g - np.exp(ans) * g.sum(axis=dim, keepdims=True)
    elif _same_backend(g, ans) and _is_float(ans):
        gx = B.of(g).log_softmax_backward(g, ans, dim)
    else:
        return None
    rows = _posinf_rows(x, dim)
    return (gx if rows is None else xp_of(gx).where(rows, 0.0, gx),)


log_softmax = primitive("log_softmax", _log_softmax_impl, _vjp_log_softmax, arity=1,
                        vjp_plain=_vjp_log_softmax_plain)


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


def _floor(a) -> float:
    """The safe floor (core_ops.safe_floor) of a matrix's float type, any backend."""
    dt = a.dtype
    f = _SAFE.get(dt)
    if f is None:
        f = _SAFE[dt] = _SAFE.get(B.of(a).np_dtype(dt), _SAFE[np.dtype(np.float64)])
    return f


_RSTD_MAX: dict = {}        # a float type -> 1 / sqrt(its safe floor): the largest 1/std taken plainly


def _unsafe_rows(den):
    """Rows [..., 1] whose variance + eps is not a safe finite number (or None when all are)."""
    if type(den) is not _ND:
        if size_of(den) == 0:
            return None
        bad = ~((den >= _floor(den)) & (den < math.inf))
        return bad if _any(bad) else None
    floor = _SAFE.get(den.dtype, _SAFE[np.dtype(np.float64)])
    if den.size == 0:                                   # no rows (x is [0, D]): nothing to rescale
        return None
    if _min_reduce(den, None) >= floor and _max_reduce(den, None) < np.inf:   # nan fails both
        return None
    return ~((den >= floor) & (den < np.inf))


def _row_exponents(x, eps):
    """(E, inf_rows) for rows [..., D] of a plain array: E [..., 1] the binary exponent of each row's
    max |x| (at least that of sqrt(eps)); inf_rows [..., 1] the rows holding +-inf."""
    if type(x) is not _ND:
        be = B.of(x)
        xp = be.xp
        a = xp.max(xp.abs(x), axis=-1, keepdims=True)
        inf_rows = xp.isinf(a)
        e = be.frexp(xp.where(xp.isfinite(a), a, 0.0))[1]
        lo = np.finfo(be.np_dtype(x.dtype)).minexp + 1 if be.is_float(x) else -1021
        if eps > 0:
            lo = max(lo, int(np.frexp(math.sqrt(eps))[1]))
        return xp.astype(xp.clip(e, min=lo), xp.int32), inf_rows
    a = np.abs(x).max(axis=-1, keepdims=True)
    inf_rows = np.isinf(a)
    _, e = np.frexp(np.where(np.isfinite(a), a, 0.0))
    if eps > 0:
        e = np.maximum(e, np.frexp(math.sqrt(eps))[1])
    lo = np.finfo(x.dtype).minexp + 1 if x.dtype.kind == "f" else -1021
    return np.maximum(e, lo).astype(np.int32), inf_rows


def _scaled_rows(x, eps, center):
    """(xhat, r) of rows [..., D] on plain arrays, computed on x * 2^-E: xhat the normalized rows
    ((x - mean) / sqrt(var + eps) with center, x / sqrt(mean(x^2) + eps) without) and r the
    factor 1 / sqrt(var + eps) of the unscaled rows (0 where variance + eps is 0)."""
    e, inf_rows = _row_exponents(x, eps)
    xs = np.ldexp(x, -e)
    if inf_rows.any():
        xs = np.where(inf_rows, np.where(np.isinf(x), np.sign(x), 0.0), xs).astype(xs.dtype)
    inv_d = 1.0 / x.shape[-1]
    xc = xs - xs.sum(axis=-1, keepdims=True) * inv_d if center else xs
    if center and eps == 0:
        xc = _exact_center(x, xc)
    eps_s = np.where(inf_rows, 0.0, np.ldexp(float(eps), -2 * e)).astype(xs.dtype)
    den = (xc * xc).sum(axis=-1, keepdims=True) * inv_d + eps_s
    zero = den == 0          # a nan (a nan in the row) stays nan: the whole row is nan, as PyTorch's
    rs = np.where(zero, 0.0, 1.0 / np.sqrt(np.where(zero, 1.0, den))).astype(xs.dtype)
    r = np.where(inf_rows, 0.0, np.ldexp(rs, -e)).astype(xs.dtype)
    return xc * rs, r


def _constant_rows(x):
    """Rows [..., 1] whose entries are all equal (their variance is exactly 0, whatever the
    rounding of their mean: 0.1 * 3 / 3 is not 0.1)."""
    if type(x) is not _ND:
        xp = xp_of(x)
        return xp.max(x, axis=-1, keepdims=True) == xp.min(x, axis=-1, keepdims=True)
    return x.max(axis=-1, keepdims=True) == x.min(axis=-1, keepdims=True)


def _exact_center(x, xc):
    """xc with the rows of equal entries set to exactly 0 (used with eps = 0, where a rounding
    residue of the mean would otherwise be normalized to +-1)."""
    const = _constant_rows(x)
    return np.where(const, 0.0, xc).astype(xc.dtype) if const.any() else xc


def _layer_norm_stats_xp(x, eps):
    """_layer_norm_stats on another backend's matrix: the same two passes with the array API;
    where a row needs the rescaling, NumPy's steps on the host."""
    xp = xp_of(x)
    inv_d = 1.0 / x.shape[-1]
    xc = x - xp.sum(x, axis=-1, keepdims=True) * inv_d
    if eps == 0:
        const = _constant_rows(x)
        if _any(const):
            xc = xp.where(const, 0.0, xc)
    den = xp.sum(xc * xc, axis=-1, keepdims=True) * inv_d + eps
    if _unsafe_rows(den) is not None:
        xhat, rstd = _layer_norm_stats(_host(x), eps)
        return _back(xhat, x), _back(rstd, x)
    rstd = 1.0 / xp.sqrt(den)
    return xc * rstd, rstd


def _layer_norm_stats(x, eps):
    """(xhat, 1/std) over the last axis on plain arrays; the variance in two passes (exact for
    1e8 + small values); rows whose variance would overflow or underflow are scaled (above)."""
    if type(x) is not _ND and type(x) in ARRAYS:
        return _layer_norm_stats_xp(x, eps)
    inv_d = 1.0 / x.shape[-1]
    xc = x - _add_reduce(x, -1, keepdims=True) * inv_d
    if eps == 0:
        xc = _exact_center(x, xc)
    den = _add_reduce(xc * xc, -1, keepdims=True)
    den *= inv_d
    den += eps
    bad = _unsafe_rows(den)
    if bad is None:
        np.sqrt(den, out=den)
        rstd = np.divide(1.0, den, out=den)
        xc *= rstd          # xc is this function's own array
        return xc, rstd
    with np.errstate(all="ignore"):
        rstd = 1.0 / np.sqrt(den)
        xhat = xc * rstd
    flat = bad.reshape(-1)
    x2, xhat2, rstd2 = x.reshape(-1, x.shape[-1]), xhat.reshape(-1, x.shape[-1]), rstd.reshape(-1, 1)
    xhat2[flat], rstd2[flat] = _scaled_rows(x2[flat], eps, True)
    return xhat, rstd


def _layer_norm_impl(x, gamma, beta, eps=1e-5):
    return _fwd_layer_norm(x, gamma, beta, eps)[0]


def _scaled_stats(x, eps, center):
    """_scaled_rows with primitives (the recorded forward and the VJPs): every row scaled by its
    2^-E, a constant (for any fixed scale the formula is the same function of x, so the
    gradient is exact)."""
    xr = raw(x)
    if _other(xr):
        return _scaled_stats_xp(x, xr, eps, center)
    dt = xr.dtype if type(xr) is np.ndarray and xr.dtype.kind == "f" else np.dtype(np.float64)
    xr = np.asarray(xr, dtype=dt)
    e, inf_rows = _row_exponents(xr, eps)
    d = float(shape_of(x)[-1])
    xs = mul(x, np.ldexp(np.ones(e.shape, dtype=dt), -e))
    if inf_rows.any():
        lim = np.where(np.isinf(xr), np.sign(xr), 0.0).astype(dt)
        xs = where(np.broadcast_to(inf_rows, xr.shape), lim, xs)
    xc = sub(xs, div(sum_(xs, dim=-1, keepdims=True), d)) if center else xs
    if center and eps == 0:
        const = _constant_rows(xr)
        if const.any():
            xc = where(const, 0.0, xc)
    eps_s = np.where(inf_rows, 0.0, np.ldexp(float(eps), -2 * e)).astype(dt)
    den = add(div(sum_(mul(xc, xc), dim=-1, keepdims=True), d), eps_s)
    zero = raw(den) == 0     # nan stays nan (see _scaled_rows)
    rs = where(zero, 0.0, div(1.0, sqrt(where(zero, 1.0, den))))
    scale = np.where(inf_rows, 0.0, np.ldexp(np.ones(e.shape, dtype=dt), -e)).astype(dt)
    return mul(xc, rs), mul(rs, scale)


def _scaled_stats_xp(x, xr, eps, center):
    """_scaled_stats on another backend's matrix (its plain value xr): the same steps, the
    constants (powers of 2, limits) made with the array API on xr's device."""
    be = B.of(xr)
    xp = be.xp
    dt = xr.dtype if be.is_float(xr) else be.float_dtype()
    xr = xp.astype(xr, dt)
    e, inf_rows = _row_exponents(xr, eps)
    d = float(shape_of(x)[-1])
    down = be.ldexp(xp.ones(tuple(e.shape), dtype=dt, device=xr.device), -e)        # 2^-E
    xs = mul(x, down)
    if _any(inf_rows):
        lim = xp.where(xp.isinf(xr), xp.sign(xr), 0.0)
        xs = where(xp.broadcast_to(inf_rows, tuple(xr.shape)), lim, xs)
    xc = sub(xs, div(sum_(xs, dim=-1, keepdims=True), d)) if center else xs
    if center and eps == 0:
        const = _constant_rows(xr)
        if _any(const):
            xc = where(const, 0.0, xc)
    eps_s = xp.where(inf_rows, 0.0, be.ldexp(xp.full(tuple(e.shape), float(eps), dtype=dt, device=xr.device), -2 * e))
    den = add(div(sum_(mul(xc, xc), dim=-1, keepdims=True), d), eps_s)
    zero = raw(den) == 0     # nan stays nan (see _scaled_rows)
    rs = where(zero, 0.0, div(1.0, sqrt(where(zero, 1.0, den))))
    scale = xp.where(inf_rows, 0.0, down)
    return mul(xc, rs), mul(rs, scale)


def _ln_stats(x, eps):
    """xhat and 1/std over the last axis, with primitives (the recorded forward and the VJP)."""
    return _scaled_stats(x, eps, True)


def _fused_ln(x, gamma, beta, eps):
    """Whether layer_norm may run as the backend's fused kernel: another backend's float x with
    gamma (and beta) of shape [D] and its dtype, eps > 0 (eps = 0 takes the exact centring)."""
    return (eps > 0 and x.ndim >= 1 and size_of(x) > 0 and _same_backend(x, gamma)
            and B.of(x).is_float(x) and tuple(gamma.shape) == (x.shape[-1],)
            and (beta is None or (_same_backend(x, beta) and tuple(beta.shape) == (x.shape[-1],))))


def _fwd_layer_norm_xp(x, gamma, beta, eps):
    """The forward on another backend's matrix, keeping ("fused", mean, 1/std) when its fused
    kernel ran (every row's variance + eps a safe number: 1/std in (0, 1/sqrt(floor)]), else
    (xhat, 1/std) as NumPy's."""
    if _fused_ln(x, gamma, beta, eps):
        be = B.of(x)
        out, mean, rstd = be.layer_norm(x, gamma, beta, float(eps))
        top = _RSTD_MAX.get(x.dtype)
        if top is None:
            top = _RSTD_MAX[x.dtype] = 1.0 / math.sqrt(_floor(x))
        if bool(((rstd > 0) & (rstd <= top)).all()):       # a nan fails both
            return out, ("fused", mean, rstd)
    stats = _layer_norm_stats(x, eps)
    out = stats[0] * gamma
    return python_scalar(out + beta if beta is not None else out), stats


def _ln_saved(saved, x):
    """(xhat, 1/std) from a forward's saved statistics (the fused kernel's: mean and 1/std)."""
    if type(saved[0]) is str:      # ("fused", mean, 1/std)
        return (bools_as_floats(raw(x)) - saved[1]) * saved[2], saved[2]
    return saved


def _fwd_layer_norm(x, gamma, beta, eps=1e-5):
    """The forward on plain arrays, keeping (xhat, 1/std) for the VJP."""
    x = bools_as_floats(x)
    if type(x) is not _ND and type(x) in ARRAYS:
        return _fwd_layer_norm_xp(x, gamma, beta, eps)
    stats = _layer_norm_stats(x, eps)
    out = stats[0] * gamma
    return (out + beta if beta is not None else out), stats


def _row_jacobian_product(v, jac):
    """sum_j v[..., j] jac[..., j, i] with 0 x inf = 0 (zmatmul): a cotangent row that holds +-inf
    (an infinite gain or value) times the row's Jacobian, where the fused formulas below would
    meet inf - inf. Only taken when such a row occurs."""
    s = shape_of(v)
    return reshape(zmatmul(reshape(v, shape=s[:-1] + (1, s[-1])), jac), shape=s)


def _outer_rows(u, w):
    """u[..., :, None] * w[..., None, :]"""
    s = shape_of(u)
    return mul(reshape(u, shape=s + (1,)), reshape(w, shape=s[:-1] + (1, s[-1])))


def _norm_jacobian(xhat, center):
    """d xhat_i / d (x_j / std) of layer_norm (center) or rms_norm: I - 1/n - xhat xhat' / n, or
    I - xhat xhat' / n (symmetric), one [n, n] matrix per row."""
    n = shape_of(xhat)[-1]
    eye = np.eye(n) - (1.0 / n if center else 0.0)
    xr = raw(xhat)
    if _other(xr):
        eye = B.of(xr).asarray(eye, B.of(xr).np_dtype(xr.dtype))
    return sub(eye, div(_outer_rows(xhat, xhat), float(n)))


def _vjp_layer_norm(g, ans, saved, tracked, x, gamma, beta, eps=1e-5):
    xhat, rstd = _ln_saved(saved, x) if saved is not None else _ln_stats(x, eps)
    gx = ggamma = gbeta = None
    if tracked[0]:
        d = float(shape_of(x)[-1])
        dxhat = zmul(g, gamma)
        m1 = div(sum_(dxhat, dim=-1, keepdims=True), d)
        if _all_finite(raw(m1)):
            m2 = div(sum_(mul(dxhat, xhat), dim=-1, keepdims=True), d)
            gx = zmul(rstd, sub(sub(dxhat, m1), mul(xhat, m2)))
        else:       # an infinite cotangent or gain: each entry of the gradient is its own +-inf
            gx = zmul(rstd, _row_jacobian_product(dxhat, _norm_jacobian(xhat, True)))
    if tracked[1]:
        ggamma = unbroadcast(mul(g, xhat), shape_of(gamma))
    if tracked[2]:
        gbeta = unbroadcast(g, shape_of(beta))
    return gx, ggamma, gbeta


def _vjp_layer_norm_plain(g, ans, saved, tracked, x, gamma, beta, eps=1e-5):
    """The same VJP on plain arrays (first order, nothing to record), gamma and beta of shape [D]."""
    if type(g) is not _ND:
        return _vjp_layer_norm_plain_xp(g, saved, tracked, x, gamma, beta)
    if saved is None or type(g) is not np.ndarray or type(gamma) is not np.ndarray or g.ndim < 1 \
            or gamma.shape != g.shape[-1:] or (beta is not None and shape_of(beta) != gamma.shape):
        return None
    xhat, rstd = saved
    gx = ggamma = gbeta = None
    # No finiteness test here: an infinite cotangent or gain (m1 not finite), or a 1/std that
    # overflows (subnormal rows: 0 x inf), gives a cotangent that is not finite, which the tape's
    # one test per pass (tape.backward) or pullback's test sends to the general form.
    if tracked[0]:
        inv_d = 1.0 / g.shape[-1]
        dxhat = g * gamma
        m1 = _add_reduce(dxhat, -1, keepdims=True)
        m1 *= inv_d
        m2 = _add_reduce(dxhat * xhat, -1, keepdims=True)
        m2 *= inv_d
        dxhat -= m1
        m2 = xhat * m2
        dxhat -= m2
        dxhat *= rstd
        gx = dxhat
    rows = g.reshape(-1, g.shape[-1])
    if tracked[1]:
        ggamma = _add_reduce(rows * xhat.reshape(rows.shape), 0)
    if len(tracked) > 2 and tracked[2]:
        gbeta = _add_reduce(rows, 0)
    return gx, ggamma, gbeta


def _vjp_layer_norm_plain_xp(g, saved, tracked, x, gamma, beta):
    """_vjp_layer_norm_plain on another backend: its fused backward where the forward's fused
    kernel ran, else NumPy's steps with the array API."""
    if saved is None or not _same_backend(g, gamma) or g.ndim < 1 or tuple(gamma.shape) != tuple(g.shape[-1:]) \
            or (beta is not None and shape_of(beta) != shape_of(gamma)):
        return None
    which = (bool(tracked[0]), bool(tracked[1]), len(tracked) > 2 and bool(tracked[2]))
    if type(saved[0]) is str:      # ("fused", mean, 1/std)
        return B.of(g).layer_norm_backward(g, bools_as_floats(x), saved[1], saved[2], gamma, beta, which)
    xp = xp_of(g)
    xhat, rstd = saved
    gx = ggamma = gbeta = None
    if which[0]:
        inv_d = 1.0 / g.shape[-1]
        dxhat = g * gamma
        m1 = xp.sum(dxhat, axis=-1, keepdims=True) * inv_d
        if not _all_finite(m1):
            return None        # an infinite cotangent or gain: the general form takes it
        m2 = xp.sum(dxhat * xhat, axis=-1, keepdims=True) * inv_d
        dxhat = dxhat - m1 - xhat * m2
        gx = dxhat * rstd if _all_finite(rstd) else _zmul(dxhat, rstd)
    rows = _rows(g)
    if which[1]:
        ggamma = xp.sum(rows * _rows(xp.broadcast_to(xhat, tuple(g.shape))), axis=0)
    if which[2]:
        gbeta = xp.sum(rows, axis=0)
    return gx, ggamma, gbeta


layer_norm = primitive("layer_norm", _layer_norm_impl, _vjp_layer_norm, _fwd_layer_norm,
                       vjp_plain=_vjp_layer_norm_plain, arg_names=("x", "gamma", "beta"))


def _dense_impl(x, w, b=None):
    if type(x) is not _ND and type(w) is not _ND and _same_backend(x, w) and w.ndim == 2 and x.ndim >= 1 \
            and B.of(x).is_float(x) and (b is None or (_same_backend(x, b) and tuple(b.shape) == (w.shape[1],))):
        return B.of(x).linear(x, w, b)      # another backend's fused product (torch.addmm, as nn.Linear)
    out = _matmul(x, w)
    return python_scalar(out + b) if b is not None else python_scalar(out)


def _vjp_dense(g, ans, saved, tracked, x, w, b=None):
    gx, gw = _vjp_matmul(g, None, None, tracked[:2], x, w)
    gb = unbroadcast(g, shape_of(b)) if len(tracked) > 2 and tracked[2] else None
    return gx, gw, gb


def _vjp_dense_plain(g, ans, saved, tracked, x, w, b=None):
    """First order: matmul's plain VJP (or its general one, on plain arrays), and a bias of shape
    [N] gets the rows of the cotangent summed."""
    gx, gw = _vjp_matmul_plain(g, None, None, tracked[:2], x, w) or _vjp_matmul(g, None, None, tracked[:2], x, w)
    gb = None
    if len(tracked) > 2 and tracked[2]:
        if type(b) is np.ndarray and type(g) is np.ndarray and g.ndim >= 2 and b.shape == g.shape[-1:]:
            gb = _add_reduce(_rows(g), 0)
        elif _same_backend(g, b) and g.ndim >= 2 and tuple(b.shape) == tuple(g.shape[-1:]):
            gb = xp_of(g).sum(_rows(g), axis=0)
        else:
            gb = unbroadcast(g, shape_of(b))
    return gx, gw, gb


dense = primitive("dense", _dense_impl, _vjp_dense, vjp_plain=_vjp_dense_plain, arg_names=("x", "w", "b"))
_dense_guarded = TABLE["dense"].impl        # dense's forward behind the size guard


# ---- the heads of multi-head attention as one product each -----------------------------------
# Multi-head attention projects x by each head's wq (and wk, wv), and sums each head's output
# times its wo. Written per head that is 4H products on the tape; written as concat, dense and a
# reshape it is more nodes still. These two primitives are the joined form, one node each: the
# heads' matrices side by side (PyTorch's in_proj_weight, as an expert writes it by hand), one
# product, and the split into heads, with one VJP. Their recorded VJPs are the composite's (dense's
# and concat's, with reshape and permute), so grad of grad sees the same operations as the loop.
def _heads_parts(params, bias):
    n = len(params) // 2 if bias else len(params)
    return n, params[:n], (params[n:] if bias else None)


def _joined(parts, axis):
    """The heads' matrices side by side: no larger than the parts together (no size guard)."""
    if len(parts) == 1:
        return parts[0]
    if type(parts[0]) is _ND:
        for p in parts:
            if type(p) is not _ND:
                break
        else:
            return np.concatenate(parts, axis=axis)
    return _concat(*parts, dim=axis)


def _fwd_dense_heads(x, *params, bias=False):
    """([..., H, T, d] = x [..., T, D] @ w_h + b_h for each head h, contiguous; the joined w)."""
    n, ws, bs = _heads_parts(params, bias)
    w = _joined(ws, 1)                                  # [D, H*d]
    y = _dense_guarded(x, w, None if bs is None else _joined(bs, 0))
    s = tuple(y.shape)
    y = y.reshape(s[:-1] + (n, s[-1] // n)).swapaxes(-2, -3)
    return (np.ascontiguousarray(y) if type(y) is _ND else y.contiguous()), w


def _dense_heads_impl(x, *params, bias=False):
    return _fwd_dense_heads(x, *params, bias=bias)[0]


def _merged(g):
    """[..., H, T, d] -> [..., T, H*d]"""
    s = tuple(g.shape)
    return g.swapaxes(-2, -3).reshape(s[:-3] + (s[-2], s[-3] * s[-1]))


def merge_heads(t):
    """[..., H, T, d] -> [..., T, H*d] with primitives (recorded where t is tracked)."""
    s = shape_of(t)
    nd = len(s)
    t = permute(t, axes=tuple(range(nd - 3)) + (nd - 2, nd - 3, nd - 1))
    return reshape(t, shape=s[:-3] + (s[-2], s[-3] * s[-1]))


def split_heads(t, n_heads):
    """[..., T, H*d] -> [..., H, T, d] with primitives (recorded where t is tracked)."""
    s = shape_of(t)
    t = reshape(t, shape=s[:-1] + (n_heads, s[-1] // n_heads))
    nd = len(s) + 1
    return permute(t, axes=tuple(range(nd - 3)) + (nd - 2, nd - 3, nd - 1))


def _vjp_dense_heads(g, ans, saved, tracked, x, *params, bias=False):
    n, ws, bs = _heads_parts(params, bias)
    w = concat(*ws, dim=1) if n > 1 else ws[0]
    b = None if bs is None else (concat(*bs, dim=0) if n > 1 else bs[0])
    tw, tb = any(tracked[1:1 + n]), bias and any(tracked[1 + n:])
    gx, gw, gb = _vjp_dense(merge_heads(g), None, None, (tracked[0], tw, tb), x, w,
                            *(() if b is None else (b,)))
    gws = _vjp_concat(gw, w, None, tracked[1:1 + n], *ws, dim=1) if tw else (None,) * n
    gbs = (_vjp_concat(gb, b, None, tracked[1 + n:], *bs, dim=0) if tb else (None,) * n) if bias else ()
    return (gx,) + tuple(gws) + tuple(gbs)


def _vjp_dense_heads_plain(g, ans, saved, tracked, x, *params, bias=False):
    """First order on float matrices of one backend: the cotangent merged back to [rows, H*d], two
    products, and the weights' cotangents cut from the joined one as views."""
    if not (type(g) is type(x) and type(g) in ARRAYS and _is_float(g) and _is_float(x)):
        return None
    n, ws, bs = _heads_parts(params, bias)
    w = saved if saved is not None else _joined(ws, 1)
    if type(w) is not type(g) or not _is_float(w):
        return None
    g2 = _rows(_merged(g))                              # [rows, H*d]
    gx = (g2 @ w.T).reshape(tuple(x.shape)) if tracked[0] else None
    tw = tracked[1:1 + n]         # the weights' cotangents: views cut from the joined one, as concat's
    out = (gx, *(_vjp_concat_plain(_rows(x).T @ g2, None, None, tw, *ws, dim=1) if any(tw) else (None,) * n))
    if bias:
        tb = tracked[1 + n:]
        gb = _add_reduce(g2, 0) if type(g2) is _ND else xp_of(g2).sum(g2, axis=0)
        out += _vjp_concat_plain(gb, None, None, tb, *bs, dim=0) if any(tb) else (None,) * n
    return out


def _dense_heads_names(n_args, kw):
    """x, then each head's matrix and bias (check_nan's reports: the weights are heads' fields)."""
    n = (n_args - 1) // 2 if kw.get("bias") else n_args - 1
    return (["x"] + [f"head {h + 1}'s projection matrix" for h in range(n)]
            + [f"head {h + 1}'s projection bias" for h in range(n_args - 1 - n)])


dense_heads = primitive("dense_heads", _dense_heads_impl, _vjp_dense_heads, _fwd_dense_heads,
                        vjp_plain=_vjp_dense_heads_plain, arg_names=_dense_heads_names)


def _fwd_heads_dense(o, *ws):
    """([..., T, D] = sum over heads h of o[..., h, :, :] @ w_h; the joined w [H*d, D])."""
    w = _joined(ws, 0)
    return _dense_guarded(_merged(o), w, None), w


def _heads_dense_impl(o, *ws):
    return _fwd_heads_dense(o, *ws)[0]


def _vjp_heads_dense(g, ans, saved, tracked, o, *ws):
    n = len(ws)
    w = concat(*ws, dim=0) if n > 1 else ws[0]
    tw = any(tracked[1:])
    go, gw = _vjp_matmul(g, None, None, (tracked[0], tw), merge_heads(o), w)
    go = split_heads(go, n) if tracked[0] else None
    gws = _vjp_concat(gw, w, None, tracked[1:], *ws, dim=0) if tw else (None,) * n
    return (go,) + tuple(gws)


def _vjp_heads_dense_plain(g, ans, saved, tracked, o, *ws):
    if not (type(g) is type(o) and type(g) in ARRAYS and _is_float(g) and _is_float(o)):
        return None
    n = len(ws)
    w = saved if saved is not None else _joined(ws, 0)
    if type(w) is not type(g) or not _is_float(w):
        return None
    s = tuple(o.shape)
    g2 = _rows(g)                                       # [rows, D]
    go = None
    if tracked[0]:
        gm = (g2 @ w.T).reshape(s[:-3] + (s[-2], s[-3], s[-1])).swapaxes(-2, -3)
        go = np.ascontiguousarray(gm) if type(gm) is _ND else gm.contiguous()
    tw = tracked[1:]
    return (go, *(_vjp_concat_plain(_rows(_merged(o)).T @ g2, None, None, tw, *ws, dim=0) if any(tw) else (None,) * n))


heads_dense = primitive("heads_dense", _heads_dense_impl, _vjp_heads_dense, _fwd_heads_dense,
                        vjp_plain=_vjp_heads_dense_plain,
                        arg_names=lambda n_args, kw: ["the heads' outputs"] + [f"head {h}'s wo" for h in range(1, n_args)])


def _allowed(mask, causal, lq, lk, like=None):
    """The boolean 'may attend' matrix from a mask and/or causality (None when all allowed), on
    the backend of `like` (NumPy's when None or a NumPy array)."""
    if _other(like):
        return _allowed_xp(mask, causal, lq, lk, like)
    allowed = None
    if causal:
        allowed = np.tril(np.ones((lq, lk), dtype=bool), k=lk - lq)   # bottom-right aligned
    if mask is not None:
        m = B.to_numpy(raw(mask)).astype(bool)
        allowed = m if allowed is None else (allowed & m)
    return allowed


def _allowed_xp(mask, causal, lq, lk, like):
    be = B.of(like)
    xp = be.xp
    allowed = None
    if causal:      # j <= i + lk - lq: bottom-right aligned
        i = xp.arange(lq, device=like.device)[:, None]
        allowed = xp.arange(lk, device=like.device)[None, :] <= i + (lk - lq)
    if mask is not None:
        m = raw(mask)
        m = be.asarray(m) if not _other(m) else m
        if not be.is_bool(m):
            m = m != 0
        allowed = m if allowed is None else (allowed & m)
    return allowed


# ---- attention scores beyond the float range (issue 25) ---------------------------------------
# q k^T * scale + bias overflows to +-inf (or gives inf - inf = nan inside the dot product) for
# finite q and k of about 1e155 (1e20 in float32), though the softmax of the true scores is an
# ordinary vector: the largest true score takes the weight. Where a row's maximum is not finite
# (the one test: the softmax takes that maximum anyway), the entries that overflowed from finite
# operands are computed again on q and k scaled by powers of 2 (exact), as u 2^E with u an
# ordinary number: an entry whose true score is representable gets it, and a row whose maximum
# is itself beyond the range is shifted by it in the scaled domain, z = (u - max u) 2^E, so its
# largest true score gets the weight (tied ones share it) and the others 0: the limit. A +inf or
# nan that the operands themselves hold keeps the rules of softmax (a +inf bias wins over any
# finite score; nan stays nan).
def _overflowed(q, k, bias, s, allowed, scale):
    """(s repaired, lim) on plain arrays: s the scores [..., Lq, Lk] (masked entries -inf) whose
    row maxima are not all finite; lim the rows [..., Lq, 1] shifted in the scaled domain (their
    weights are the limit: one-hot, or shared by exact ties), or None."""
    over = ~np.isfinite(s) & np.isfinite(q).all(axis=-1)[..., :, None] & np.isfinite(k).all(axis=-1)[..., None, :]
    if bias is not None:
        b = np.asarray(bias)
        over &= ~(np.isnan(b) | (b == np.inf))
    if allowed is not None:
        over &= allowed
    if not over.any():
        return s, None
    ea = binary_exponents(np.abs(q).max(axis=-1, keepdims=True))                      # [..., Lq, 1]
    kr = np.where(np.isfinite(k), np.abs(k), 0.0)
    eb = binary_exponents(kr.max(axis=(-2, -1), keepdims=True))                        # [..., 1, 1]
    ec = int(binary_exponents(scale))
    e = ea + eb + ec
    t = np.matmul(np.ldexp(q, -ea), np.swapaxes(np.ldexp(k, -eb), -1, -2)) * float(np.ldexp(scale, -ec))
    u = t if bias is None else t + np.ldexp(bias, -e)
    true = np.where(over, np.ldexp(u, e), s).astype(s.dtype)
    mx = true if allowed is None else np.where(allowed, true, -np.inf)
    top = mx.max(axis=-1, keepdims=True)
    pinf = ((mx == np.inf) & ~over).any(axis=-1, keepdims=True)      # a +inf the operands hold
    lim = np.isinf(top) & ~pinf & (over & np.isinf(true) & (mx == top)).any(axis=-1, keepdims=True)
    if pinf.any():        # there an overflowed score is finite against a true +inf
        true = np.where(pinf & over & (true == np.inf), np.finfo(s.dtype).max, true)
    if not lim.any():
        return true, None
    w = np.where(over, u, np.ldexp(s, -e))
    if allowed is not None:
        w = np.where(allowed, w, -np.inf)
    wm = np.where(lim, w, -np.inf).max(axis=-1, keepdims=True)
    z = np.ldexp(w - np.where(lim, wm, 0.0), np.where(lim, e, 0))
    return np.where(lim, z, true).astype(s.dtype), lim


def _sdpa_weights(q, k, bias, mask, causal, scale):
    """(p, rows, lim) on plain arrays: the weights softmax(q k^T * scale + bias) over the allowed
    keys (the scores formed in place: they are a fresh product), the rows holding a +inf (their
    weights are softmax's limit and their gradient to q, k and bias is 0) and the rows whose scores
    went beyond the float range (_overflowed), each None when there is none."""
    q, k = bools_as_floats(q), bools_as_floats(k)
    if _other(q) or _other(k):
        return _sdpa_weights_xp(q, k, bias, mask, causal, scale)
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    if type(s) is np.ndarray and s.ndim:
        s *= scale
    else:
        s = s * scale
    if bias is not None:
        s = s + bias
    allowed = _allowed(mask, causal, q.shape[-2], k.shape[-2])
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    lim = None
    m = _max_reduce(s, -1, keepdims=True) if type(s) is np.ndarray and s.size else None
    finite = m is not None and _isfinite(_add_reduce(m, None))      # a row's max of inf or nan fails
    if m is not None and not finite:
        s, lim = _overflowed(q, k, bias, s, allowed, scale)
        m = None
    p, rows = _softmax_rows(s, -1, m, finite)
    return p, rows, lim


def _sdpa_weights_xp(q, k, bias, mask, causal, scale):
    """_sdpa_weights on another backend's matrices: the scores formed in place, the backend's
    softmax where every row's max is finite; a row whose max is not (scores beyond the float
    range, a +inf bias, every key masked) sends the scores through _overflowed on the host."""
    like = q if _other(q) else k
    be = B.of(like)
    xp = be.xp
    q, k = (be.asarray(v) if not _other(v) else v for v in (q, k))
    s = xp.matmul(q, xp.matrix_transpose(k))
    s *= scale
    if bias is not None:
        s = s + (be.asarray(bias) if type(bias) is _ND else bias)
    allowed = _allowed(mask, causal, q.shape[-2], k.shape[-2], like)
    if allowed is not None:
        s = xp.where(allowed, s, -math.inf)
    lim = None
    m = xp.max(s, axis=-1, keepdims=True) if size_of(s) else None
    if m is not None and not _all_finite(m):
        sn, limn = _overflowed(_host(q), _host(k), _host(bias), _host(s), _host(allowed), scale)
        s, lim = _back(sn, like), _back(limn, like)
        m = None
    p, rows = _softmax_rows(s, -1, m)
    return p, rows, lim


def _fwd_weights(q, k, bias=None, mask=None, causal=False, scale=1.0):
    p, rows, _ = _sdpa_weights(q, k, bias, mask, causal, scale)
    return p, (rows,)


def _weights_impl(q, k, bias=None, mask=None, causal=False, scale=1.0):
    return _sdpa_weights(q, k, bias, mask, causal, scale)[0]


def _vjp_weights(g, ans, saved, tracked, q, k, bias=None, mask=None, causal=False, scale=1.0):
    """softmax's VJP on the scores, ds = p (g - rowsum(g p)) (0 on the +inf rows), taken through
    q k^T * scale + bias. rowsum(g p) is exact on a one-hot row, so a row whose weights are the
    limit of overflowing scores gets exactly 0, whatever the size of q and k."""
    rows = saved[0] if saved is not None else _sdpa_weights(raw(q), raw(k), raw(bias), mask, causal, scale)[1]
    ds = zmul(ans, sub(g, sum_(zmul(g, ans), dim=-1, keepdims=True)))
    if rows is not None:
        ds = where(rows, 0.0, ds)
    gq = gk = gbias = None
    if tracked[0]:
        gq = unbroadcast(mul(zmatmul(ds, k), scale), shape_of(q))
    if tracked[1]:
        gk = unbroadcast(mul(zmatmul(transpose(ds), q), scale), shape_of(k))
    if len(tracked) > 2 and tracked[2]:
        gbias = unbroadcast(ds, shape_of(bias))
    return gq, gk, gbias


# the weights of attention, softmax(q k^T * scale + bias) over the allowed keys, [..., Lq, Lk]: the
# form of attention that keeps them (attention dropout, need_weights), and sdpa's recorded VJP
attention_weights = primitive("attention_weights", _weights_impl, _vjp_weights, _fwd_weights,
                              arg_names=("q", "k", "bias"))


def _sdpa_impl(q, k, v, bias=None, mask=None, causal=False, scale=None):
    return _fwd_sdpa(q, k, v, bias, mask, causal, scale)[0]


def _as_heads(t):
    """t [..., L, d] as [B, H, L, d] (a view: leading axes folded into B, or 1s added)."""
    s = tuple(t.shape)
    if len(s) == 4:
        return t
    if len(s) < 4:
        return t.reshape((1,) * (4 - len(s)) + s)
    return t.reshape((math.prod(s[:-3]),) + s[-3:])


_FLASH_MAGNITUDE = 2.0 ** 20


def _flash(q, k, v, bias, mask, causal, scale):
    """(out, ("flash", out [B, H, Lq, d], log-sum-exp)) from the backend's fused attention kernel,
    or None where it does not apply or its rows are not all ordinary: no bias or mask, causal only
    with as many queries as keys (its causality is top-left aligned), q, k, v of one head size and
    the same leading axes; the log-sum-exp and the output all finite (scores beyond the float
    range, a nan or an infinite value take _sdpa_weights' path)."""
    if bias is not None or mask is not None or not _same_backend(q, k, v) or not _is_float(q):
        return None
    sq, sk, sv = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if len(sq) < 2 or sq[:-2] != sk[:-2] or sk[:-1] != sv[:-1] or sq[-1] != sk[-1] or sk[-1] != sv[-1] \
            or (causal and sq[-2] != sk[-2]) or 0 in sq or 0 in sk:
        return None
    be = B.of(q)
    xp = be.xp
    # The kernel's backward takes softmax's correction as rowsum(g * out) (FlashAttention's
    # identity), whose rounding is about eps |g| |v| |k| scale in q's and k's gradients: in a row
    # whose weights are exactly one-hot that is all there is (the exact gradient is 0). Past
    # 2^20 for |k| |v| scale d, such rows take the scores' path, exact there (_saturated_rows).
    if float(xp.max(xp.abs(k)) * xp.max(xp.abs(v))) * abs(float(scale)) * sk[-1] > _FLASH_MAGNITUDE:
        return None
    # no more keys than value features: the scores' path, whose backward takes the correction
    # directly (as _vjp_sdpa_plain does then), exact on a one-hot row; the fused kernel left 1e-16
    # in q's and k's gradients over a single key, whose weight is exactly 1
    if sk[-2] <= sv[-1]:
        return None
    r = be.flash_attention(_as_heads(q), _as_heads(k), _as_heads(v), bool(causal), float(scale))
    if r is None:
        return None
    out4, lse = r
    # a row whose scores all overflow to -inf comes back as a masked row (output 0, log-sum-exp 0),
    # where tapeml's rows attend to their largest true score: such rows, any non-finite ones too,
    # take the scores' path (a log-sum-exp of exactly 0 otherwise only costs that path's time)
    if not math.isfinite(float(lse.sum() + out4.sum())) or bool((lse == 0).any()):
        return None
    return out4.reshape(sq[:-1] + (sv[-1],)), ("flash", out4, lse)


def _fwd_sdpa(q, k, v, bias=None, mask=None, causal=False, scale=None):
    """The forward on plain arrays, keeping (p, rows, lim) for the VJP (_sdpa_weights); on another
    backend, its fused attention kernel where it applies (_flash), keeping its output and
    log-sum-exp instead."""
    if type(q) is not _ND and type(q) in ARRAYS:
        r = _flash(q, k, v, bias, mask, causal, scale)
        if r is not None:
            return r
    p, rows, lim = _sdpa_weights(q, k, bias, mask, causal, scale)
    if _other(p):
        v = bools_as_floats(v)
        return xp_of(p).matmul(p, B.of(p).asarray(v) if type(v) is _ND else v), (p, rows, lim)
    return np.matmul(p, bools_as_floats(v)), (p, rows, lim)


def _recorded_weights(q, k, bias, mask, causal, scale):
    """(p, rows, lim) of _fwd_sdpa with p recorded (attention_weights), for a VJP that an outer
    `grad` records."""
    _, rows, lim = _sdpa_weights(raw(q), raw(k), raw(bias), mask, causal, scale)
    return attention_weights(q, k, bias, mask=mask, causal=causal, scale=scale), rows, lim


def _vjp_sdpa(g, ans, saved, tracked, q, k, v, bias=None, mask=None, causal=False, scale=None):
    if saved is not None and type(saved[0]) is str:        # the fused kernel's: the weights on plain q, k
        saved = _sdpa_weights(q, k, bias, mask, causal, scale)
    p, rows, lim = saved if saved is not None else _recorded_weights(q, k, bias, mask, causal, scale)
    gq = gk = gv = gbias = None
    if tracked[2]:
        gv = unbroadcast(zmatmul(transpose(p), g), shape_of(v))
    if tracked[0] or tracked[1] or (len(tracked) > 3 and tracked[3]):
        if not (math.isfinite(float(raw(v).sum())) and math.isfinite(float(raw(g).sum()))) and \
                not (_all_finite(raw(v)) and _all_finite(raw(g))):
            gq, gk, gbias = _score_grads_split(g, v, p, rows, lim, q, k, bias, tracked, scale)
            return gq, gk, gv, gbias
        gq, gk, gbias = _score_grads(g, v, matmul(p, v), p, rows, lim, q, k, bias, tracked, scale)
    return gq, gk, gv, gbias


def _saturated_rows(p, lim):
    """The rows [..., 1] whose correction rowsum(dp * p) must be taken directly rather than as
    rowsum(g * ans): the rows whose scores went beyond the float range (lim) and the rows whose
    weights hold an exact 1 (every other weight underflowed to 0, scores apart by more than ~745).
    There the exact correction is dp at that key, and ds exactly 0 (no gradient reaches q or k, as
    in PyTorch); the identity's rounding (its sum is in another order than the product's) is not 0,
    and times q and k of 1e8 it is a gradient of 1e8 (of inf at 1e150). None when there is none."""
    if type(p) is _ND:
        sat = _max_reduce(p, -1, keepdims=True) == 1.0 if p.size else None
        if sat is not None and lim is not None:
            sat |= lim
        sat = lim if sat is None else sat
        return sat if sat is not None and sat.any() else None
    xp = xp_of(p)
    sat = xp.max(p, axis=-1, keepdims=True) == 1.0 if size_of(p) else None
    if sat is not None and lim is not None:
        sat = sat | (lim if _other(lim) else B.of(p).asarray(lim))
    sat = lim if sat is None else sat
    return sat if sat is not None and _any(sat) else None


def _vjp_sdpa_plain(g, ans, saved, tracked, q, k, v, bias=None, mask=None, causal=False, scale=None):
    """First order, finite v and cotangent, no bias to differentiate: softmax's VJP
    p * (dp - rowsum(dp * p)) with rowsum(dp * p) = rowsum(g * ans) because dp = g v^T and
    ans = p v: a [.., T, d_v] product instead of a [.., T, T] one (the identity of FlashAttention's
    backward pass: Dao et al. 2022, appendix B.2); the [.., T, T] steps in place, the scale folded in.
    The rows whose weights are one-hot (scores beyond the float range, lim, or apart by more than
    ~745: _saturated_rows) take rowsum(dp * p) itself: exact there, where the identity's rounding,
    times q and k of 1e8 or 1e200, would not be 0;
    so does every row when there are no more keys than value features (the direct form costs no
    more there, and one key's weight of exactly 1 then gives exactly 0, as softmax's VJP does)."""
    if saved is None or (len(tracked) > 3 and tracked[3]):
        return None
    if type(saved[0]) is str:       # ("flash", out, log-sum-exp): the fused kernel's backward
        return _vjp_flash_plain(g, saved, tracked, q, k, v, causal, scale)
    p, rows, lim = saved
    if not all(type(t) is np.ndarray for t in (g, ans, p, q, k, v)):
        if _same_backend(g, ans, p, q, k, v) and _is_float(p):
            return _vjp_sdpa_plain_xp(g, ans, p, rows, lim, tracked, q, k, v, scale)
        return None
    gq = gk = gv = None
    if tracked[2]:
        gv = unbroadcast(np.matmul(np.swapaxes(p, -1, -2), g), v.shape)
    if tracked[0] or tracked[1]:
        if not (_isfinite(_add_reduce(v, None)) and _isfinite(_add_reduce(g, None))) and \
                not (np.isfinite(v).all() and np.isfinite(g).all()):
            return None
        ds = np.matmul(g, np.swapaxes(v, -1, -2))
        if p.shape[-1] <= v.shape[-1]:      # as few keys as value features: the direct form is as cheap
            # ds * p, not zmul: ds is finite unless the product overflowed, and an inf x 0 there
            # is a NaN that the tape's test per pass sends to the careful form (tape.backward)
            corr = _add_reduce(ds * p, -1, keepdims=True)
        else:
            corr = _add_reduce(g * ans, -1, keepdims=True)
            exact = _saturated_rows(p, lim)
            if exact is not None:
                corr = np.where(exact, _zmul(ds, p).sum(axis=-1, keepdims=True), corr)
        ds -= corr
        ds *= p
        ds *= scale
        if rows is not None:
            ds = np.where(rows, 0.0, ds)
        if tracked[0]:
            gq = unbroadcast(np.matmul(ds, k), q.shape)
        if tracked[1]:
            gk = unbroadcast(np.matmul(np.swapaxes(ds, -1, -2), q), k.shape)
    return gq, gk, gv, None


def _vjp_flash_plain(g, saved, tracked, q, k, v, causal, scale):
    if not _same_backend(g, q):
        return None
    _, out4, lse = saved
    gq, gk, gv = B.of(g).flash_attention_backward(_as_heads(g), _as_heads(q), _as_heads(k), _as_heads(v),
                                                  out4, lse, bool(causal), float(scale))
    return (gq.reshape(q.shape) if tracked[0] else None, gk.reshape(k.shape) if tracked[1] else None,
            gv.reshape(v.shape) if tracked[2] else None, None)


def _vjp_sdpa_plain_xp(g, ans, p, rows, lim, tracked, q, k, v, scale):
    """_vjp_sdpa_plain on another backend's matrices: the same steps with the array API, the
    [.., T, T] ones in place on the fresh product."""
    xp = xp_of(g)
    gq = gk = gv = None
    if tracked[2]:
        gv = _unbroadcast_plain(xp.matmul(xp.matrix_transpose(p), g), tuple(v.shape))
    if tracked[0] or tracked[1]:
        if not (math.isfinite(float(xp.sum(v))) and math.isfinite(float(xp.sum(g)))) and \
                not (_all_finite(v) and _all_finite(g)):
            return None
        ds = xp.matmul(g, xp.matrix_transpose(v))
        if p.shape[-1] <= v.shape[-1]:
            corr = xp.sum(_zmul(ds, p), axis=-1, keepdims=True)
        else:
            corr = xp.sum(g * ans, axis=-1, keepdims=True)
            exact = _saturated_rows(p, lim)
            if exact is not None:
                corr = xp.where(exact, xp.sum(_zmul(ds, p), axis=-1, keepdims=True), corr)
        ds -= corr
        ds *= p
        ds *= scale
        if rows is not None:
            ds = xp.where(rows, 0.0, ds)
        if tracked[0]:
            gq = _unbroadcast_plain(xp.matmul(ds, k), tuple(q.shape))
        if tracked[1]:
            gk = _unbroadcast_plain(xp.matmul(xp.matrix_transpose(ds), q), tuple(k.shape))
    return gq, gk, gv, None


def _unbroadcast_plain(g, shape):
    """unbroadcast on a plain matrix of another backend: summed down to shape directly."""
    if tuple(g.shape) == shape:
        return g
    return unbroadcast(g, shape)


def _score_grads(g, v, ans, p, rows, lim, q, k, bias, tracked, scale):
    """The cotangents of q, k and bias through the scores, written with primitives (the
    correction rowsum(dp * p) as in _vjp_sdpa_plain)."""
    gq = gk = gbias = None
    dp = zmatmul(g, transpose(v))
    if shape_of(p)[-1] <= shape_of(v)[-1]:      # as in _vjp_sdpa_plain: the direct form, exact
        corr = sum_(zmul(dp, p), dim=-1, keepdims=True)
    else:
        corr = sum_(zmul(g, ans), dim=-1, keepdims=True)
        exact = _saturated_rows(raw(p), lim)
        if exact is not None:
            corr = where(exact, sum_(zmul(dp, p), dim=-1, keepdims=True), corr)
    ds = zmul(p, sub(dp, corr))
    if rows is not None:
        ds = where(rows, 0.0, ds)
    if tracked[0]:
        gq = unbroadcast(mul(zmatmul(ds, k), scale), shape_of(q))
    if tracked[1]:
        gk = unbroadcast(mul(zmatmul(transpose(ds), q), scale), shape_of(k))
    if len(tracked) > 3 and tracked[3]:
        gbias = unbroadcast(ds, shape_of(bias))
    return gq, gk, gbias


def _score_grads_split(g, v, p, rows, lim, q, k, bias, tracked, scale):
    """_score_grads when v or the cotangent holds +-inf. They are linear in each, so with
    v = v_finite + V u (u the signs of the infinite entries, V -> inf) each cotangent is
    G(v_finite) + V G(u): +-inf where G(u) is nonzero, G(v_finite) elsewhere. Computing with the
    infinities inside would meet inf - inf where the limit is a plain +-inf."""
    split_v = not _all_finite(raw(v))
    arr = raw(v) if split_v else raw(g)
    xp = xp_of(arr)
    inf = xp.isinf(arr)
    unit = xp.where(inf, xp.sign(arr), 0.0)
    fin = where(inf, 0.0, v if split_v else g)
    if split_v:
        a = _score_grads(g, fin, matmul(p, fin), p, rows, lim, q, k, bias, tracked, scale)
        b = _score_grads(g, unit, matmul(p, unit), p, rows, lim, q, k, bias, tracked, scale)
    else:
        a = _score_grads(fin, v, matmul(p, v), p, rows, lim, q, k, bias, tracked, scale)
        b = _score_grads(unit, v, matmul(p, v), p, rows, lim, q, k, bias, tracked, scale)

    def combine(x, y):
        if x is None:
            return None
        yr = raw(y)
        return where(yr > 0, math.inf, where(yr < 0, -math.inf, x))
    return tuple(combine(x, y) for x, y in zip(a, b))


sdpa = primitive("scaled_dot_product_attention", _sdpa_impl, _vjp_sdpa, _fwd_sdpa, vjp_plain=_vjp_sdpa_plain,
                 arg_names=("q", "k", "v", "bias"))


# ==== rms_norm (transformer_block options, issue 6) ============================================
# y = x / sqrt(mean(x^2) + eps) * gamma over the last axis (Zhang & Sennrich 2019; PyTorch's
# nn.RMSNorm). The mean square is accumulated in float64 and the scale cast back to x's float
# type (float32 sessions stay float32). The VJP is written with primitives:
# with r = 1/sqrt(mean(x^2) + eps) and gh = g * gamma,
#     dx = r * gh - x * r^3 * mean(gh * x),     dgamma = sum over positions of g * x * r.
def _rms_stats_plain(x, eps):
    """(xhat, r) on plain arrays: the mean square accumulated in float64, r cast back to x's
    float type; rows whose mean square + eps is not a safe number are scaled (see layer_norm)."""
    if _other(x):
        return _rms_stats_xp(x, eps)
    ms = np.mean(np.square(x, dtype=np.float64), axis=-1, keepdims=True)
    den = ms + eps
    bad = _unsafe_rows(den)
    with np.errstate(all="ignore"):
        r = 1.0 / np.sqrt(den)
    if type(x) is np.ndarray and x.dtype != np.float64:
        r = r.astype(x.dtype)
    xhat = x * r
    if bad is not None:
        flat = bad.reshape(-1)
        xhat2, r2 = xhat.reshape(-1, x.shape[-1]), r.reshape(-1, 1)
        xh, rr = _scaled_rows(x.reshape(-1, x.shape[-1])[flat].astype(np.float64), eps, False)
        xhat2[flat], r2[flat] = xh.astype(xhat.dtype), rr.astype(r.dtype)
    return xhat, r


def _rms_stats_xp(x, eps):
    """_rms_stats_plain on another backend's matrix: the mean square accumulated in float64
    (float32 on a device without float64: MPS); a row to rescale sends x through NumPy's steps
    on the host."""
    be = B.of(x)
    xp = be.xp
    wide = x.dtype if be.device == "mps" else be.dtype(np.float64)
    xw = xp.astype(x, wide)
    den = xp.mean(xw * xw, axis=-1, keepdims=True) + eps
    if _unsafe_rows(den) is not None:
        xhat, r = _rms_stats_plain(_host(x), eps)
        return _back(xhat, x), _back(r, x)
    r = xp.astype(1.0 / xp.sqrt(den), x.dtype)
    return x * r, r


def _rms_norm_impl(x, gamma, eps=1e-5):
    x = bools_as_floats(x)
    if type(x) is not np.ndarray and type(x) not in ARRAYS:
        x = np.asarray(x, dtype=np.float64)
    return python_scalar(_rms_stats_plain(x, eps)[0] * gamma)


def _rms_stats(x, eps):
    """(xhat, r) with primitives: xhat = x r, r = 1/sqrt(mean(x^2) + eps), each row scaled."""
    return _scaled_stats(x, eps, False)


def _vjp_rms_norm(g, ans, saved, tracked, x, gamma, eps=1e-5):
    # with xhat = x r: dx = r (gh - xhat mean(gh xhat)), gh = g gamma (the r^3 of the textbook
    # form underflows for large rows); dgamma = sum of g xhat
    xhat, r = _rms_stats(x, eps)
    gx = ggamma = None
    if tracked[0]:
        d = float(shape_of(x)[-1])
        gh = zmul(g, gamma)
        m = div(sum_(mul(gh, xhat), dim=-1, keepdims=True), d)
        if _all_finite(raw(m)):
            gx = zmul(r, sub(gh, mul(xhat, m)))
        else:       # an infinite cotangent or gain (see layer_norm)
            gx = zmul(r, _row_jacobian_product(gh, _norm_jacobian(xhat, False)))
    if tracked[1]:
        ggamma = unbroadcast(mul(g, xhat), shape_of(gamma))
    return gx, ggamma


rms_norm = primitive("rms_norm", _rms_norm_impl, _vjp_rms_norm, arg_names=("x", "gamma"))
