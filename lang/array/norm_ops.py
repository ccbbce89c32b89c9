"""layer_norm and rms_norm over the last axis (conventions: lang/array/ops.py), written once against
the namespace of their input. layer_norm runs as the backend's fused kernel where it has one
(B.of(x).layer_norm, torch's native_layer_norm: lang/array/backend.py's kernel table) and every
row's variance is a safe number; the statistics here otherwise (two passes, exact for 1e8 + small
values). A row whose variance or mean square would overflow or underflow is scaled by a power of
2 (lang/array/rows.py, issue 15); on another backend such rows take NumPy's steps on the host, so
they give NumPy's numbers exactly."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.tape import raw
from tapeml.array.primitive_table import bools_as_floats, primitive, python_scalar, shape_of, size_of
from tapeml.array.matmul_ops import _rows, reshape, zmatmul
from tapeml.array.arith_ops import add, div, mul, sub, sum_, where, zmul
from tapeml.array.elementwise_ops import sqrt
from tapeml.array.shape_ops import unbroadcast
from tapeml.array.rows import (
    all_finite, back, constant_rows, exact_center, host, other_backend, row_exponents, safe_floor_of,
    same_backend, scaled_rows, unsafe_rows,
)
from tapeml.array.softmax_ops import as_matrix


# ---- the statistics on plain arrays -----------------------------------------------------------
def _patch_rows(x, xhat, r, bad, eps, center, dtype=None):
    """xhat [..., D] and r [..., 1] (NumPy, written in place) with the rows `bad` computed again by
    rows.scaled_rows (on x's rows cast to dtype, where given)."""
    flat = bad.reshape(-1)
    d = x.shape[-1]
    xhat2, r2 = xhat.reshape(-1, d), r.reshape(-1, 1)
    rows = x.reshape(-1, d)[flat]
    xh, rr = scaled_rows(rows if dtype is None else rows.astype(dtype), eps, center)
    xhat2[flat], r2[flat] = xh.astype(xhat.dtype), rr.astype(r.dtype)


def layer_norm_stats(x, eps):
    """(xhat, 1/std) over the last axis on plain arrays; the variance in two passes (exact for
    1e8 + small values); rows whose variance would overflow or underflow are scaled (rows.py)."""
    be = B.of(x)
    xp = be.xp
    inv_d = 1.0 / x.shape[-1]
    xc = x - be.reduce_sum(x, -1, keepdims=True) * inv_d
    if eps == 0:
        xc = exact_center(x, xc)
    den = be.reduce_sum(xc * xc, -1, keepdims=True)
    den *= inv_d
    den += eps
    bad = unsafe_rows(den, be)
    if bad is None:
        rstd = 1.0 / xp.sqrt(den)
        xc *= rstd          # xc is this function's own array
        return xc, rstd
    if other_backend(x):
        xhat, rstd = layer_norm_stats(host(x), eps)
        return back(xhat, x), back(rstd, x)
    with np.errstate(all="ignore"):
        rstd = 1.0 / np.sqrt(den)
        xc *= rstd
    _patch_rows(x, xc, rstd, bad, eps, True)
    return xc, rstd


def rms_stats_plain(x, eps):
    """(xhat, r) on plain arrays: the mean square accumulated in the backend's wide float type
    (float64; float32 on MPS), r cast back to x's type; rows whose mean square + eps is not a safe
    number are scaled (rows.py)."""
    be = B.of(x)
    xp = be.xp
    xw = xp.astype(x, be.wide(x.dtype), copy=False)
    den = xp.mean(xw * xw, axis=-1, keepdims=True) + eps
    bad = unsafe_rows(den, be)
    if bad is None:
        r = xp.astype(1.0 / xp.sqrt(den), x.dtype, copy=False)
        return x * r, r
    if other_backend(x):
        xhat, r = rms_stats_plain(host(x), eps)
        return back(xhat, x), back(r, x)
    with np.errstate(all="ignore"):
        r = xp.astype(1.0 / np.sqrt(den), x.dtype, copy=False)
    xhat = x * r
    _patch_rows(x, xhat, r, bad, eps, False, np.float64)
    return xhat, r


# ---- the statistics with primitives (the recorded forward and the VJPs) -----------------------
def scaled_stats(x, eps, center):
    """rows.scaled_rows with primitives: every row scaled by its 2^-E, a constant (for any fixed
    scale the formula is the same function of x, so the gradient is exact); (xhat, r) with
    r = 1/std (center: layer_norm) or 1/sqrt(mean(x^2) + eps) (rms_norm)."""
    xr = raw(x)
    be = B.of(xr)
    xp = be.xp
    dt = xr.dtype if be.is_float(xr) else be.float_dtype()
    xr = xp.astype(xr, dt, copy=False)
    e, inf_rows = row_exponents(xr, eps)
    d = float(shape_of(x)[-1])
    shape, dev = tuple(e.shape), xr.device
    down = be.ldexp(xp.ones(shape, dtype=dt, device=dev), -e)        # 2^-E
    xs = mul(x, down)
    if inf_rows.any():
        lim = xp.where(xp.isinf(xr), xp.sign(xr), 0.0)
        xs = where(xp.broadcast_to(inf_rows, tuple(xr.shape)), lim, xs)
    xc = sub(xs, div(sum_(xs, dim=-1, keepdims=True), d)) if center else xs
    if center and eps == 0:
        const = constant_rows(xr)
        if const.any():
            xc = where(const, 0.0, xc)
    eps_s = xp.where(inf_rows, 0.0, be.ldexp(xp.full(shape, float(eps), dtype=dt, device=dev), -2 * e))
    den = add(div(sum_(mul(xc, xc), dim=-1, keepdims=True), d), eps_s)
    zero = raw(den) == 0     # nan stays nan (see rows.scaled_rows)
    rs = where(zero, 0.0, div(1.0, sqrt(where(zero, 1.0, den))))
    return mul(xc, rs), mul(rs, xp.where(inf_rows, 0.0, down))


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
    if other_backend(xr):
        eye = B.of(xr).asarray(eye, B.of(xr).np_dtype(xr.dtype))
    return sub(eye, div(_outer_rows(xhat, xhat), float(n)))


def _norm_vjp_x(g, gain, xhat, r, center):
    """The cotangent of x of a normalization xhat = (x - mean) r (center) or x r, out = xhat gain:
    r (gh - mean(gh) - xhat mean(gh xhat)) with gh = g gain (no mean(gh) without center); an
    infinite cotangent or gain takes the row's Jacobian (each entry its own +-inf)."""
    d = float(shape_of(xhat)[-1])
    gh = zmul(g, gain)
    if center:
        m1 = div(sum_(gh, dim=-1, keepdims=True), d)
        if all_finite(raw(m1)):
            m2 = div(sum_(mul(gh, xhat), dim=-1, keepdims=True), d)
            return zmul(r, sub(sub(gh, m1), mul(xhat, m2)))
    else:
        m2 = div(sum_(mul(gh, xhat), dim=-1, keepdims=True), d)
        if all_finite(raw(m2)):
            return zmul(r, sub(gh, mul(xhat, m2)))
    return zmul(r, _row_jacobian_product(gh, _norm_jacobian(xhat, center)))


# ---- layer_norm -------------------------------------------------------------------------------
_RSTD_MAX: dict = {}        # a float type -> 1 / sqrt(its safe floor): the largest 1/std taken plainly


def _fused_layer_norm(be, x, gamma, beta, eps):
    """(out, ("fused", mean, 1/std)) from backend be's fused kernel (it has one), or None where it
    does not apply: x a float matrix with gamma (and beta) of shape [D] and its dtype, eps > 0
    (eps = 0 takes the exact centring), every row's variance + eps a safe number (1/std in
    (0, 1/sqrt(floor)])."""
    if not same_backend(x, gamma) or eps <= 0 or x.ndim < 1 or size_of(x) == 0 or not be.is_float(x) \
            or tuple(gamma.shape) != (x.shape[-1],) \
            or (beta is not None and (not same_backend(x, beta) or tuple(beta.shape) != (x.shape[-1],))):
        return None
    out, mean, rstd = be.layer_norm(x, gamma, beta, float(eps))
    top = _RSTD_MAX.get(x.dtype)
    if top is None:
        top = _RSTD_MAX[x.dtype] = 1.0 / math.sqrt(safe_floor_of(x))
    if bool(((rstd > 0) & (rstd <= top)).all()):       # a nan fails both
        return out, ("fused", mean, rstd)
    return None


def _fwd_layer_norm(x, gamma, beta, eps=1e-5):
    """The forward, keeping ("fused", mean, 1/std) where the backend's kernel ran, else
    (xhat, 1/std), for the VJP."""
    x = bools_as_floats(x)
    be = B.of(x)
    if be.layer_norm is not None:
        r = _fused_layer_norm(be, x, gamma, beta, eps)
        if r is not None:
            return r
    stats = layer_norm_stats(x, eps)
    out = stats[0] * gamma
    return (out + beta if beta is not None else out), stats


def _layer_norm_impl(x, gamma, beta, eps=1e-5):
    return _fwd_layer_norm(x, gamma, beta, eps)[0]


def _ln_saved(saved, x):
    """(xhat, 1/std) from a forward's saved statistics (the fused kernel's: mean and 1/std)."""
    if type(saved[0]) is str:      # ("fused", mean, 1/std)
        return (bools_as_floats(raw(x)) - saved[1]) * saved[2], saved[2]
    return saved


def ln_stats(x, eps):
    """xhat and 1/std over the last axis, with primitives (the recorded forward and the VJP)."""
    return scaled_stats(x, eps, True)


def _vjp_layer_norm(g, ans, saved, tracked, x, gamma, beta, eps=1e-5):
    xhat, rstd = _ln_saved(saved, x) if saved is not None else ln_stats(x, eps)
    gx = _norm_vjp_x(g, gamma, xhat, rstd, True) if tracked[0] else None
    ggamma = unbroadcast(mul(g, xhat), shape_of(gamma)) if tracked[1] else None
    gbeta = unbroadcast(g, shape_of(beta)) if tracked[2] else None
    return gx, ggamma, gbeta


def _vjp_layer_norm_plain(g, ans, saved, tracked, x, gamma, beta, eps=1e-5):
    """The same VJP on plain arrays of one backend (first order, nothing to record), gamma and beta
    of shape [D]; the backend's fused backward where the forward's fused kernel ran. No finiteness
    test: an infinite cotangent or gain, or a 1/std that overflows (subnormal rows: 0 x inf),
    gives a cotangent that is not finite, which the tape's one test per pass (tape.backward) or
    pullback's test sends to the general form."""
    if saved is None or type(g) is not type(gamma) or type(g) not in B.ARRAYS or g.ndim < 1 \
            or tuple(gamma.shape) != tuple(g.shape[-1:]) or (beta is not None and shape_of(beta) != shape_of(gamma)):
        return None
    which = (bool(tracked[0]), bool(tracked[1]), len(tracked) > 2 and bool(tracked[2]))
    if type(saved[0]) is str:      # ("fused", mean, 1/std)
        if not same_backend(g, gamma):
            return None
        return B.of(g).layer_norm_backward(g, bools_as_floats(x), saved[1], saved[2], gamma, beta, which)
    be = B.of(g)
    xhat, rstd = saved
    gx = ggamma = gbeta = None
    if which[0]:
        inv_d = 1.0 / g.shape[-1]
        dxhat = g * gamma
        m1 = be.reduce_sum(dxhat, -1, keepdims=True)
        m1 *= inv_d
        m2 = be.reduce_sum(dxhat * xhat, -1, keepdims=True)
        m2 *= inv_d
        dxhat -= m1
        dxhat -= xhat * m2
        dxhat *= rstd
        gx = dxhat
    rows = _rows(g)
    if which[1]:
        ggamma = be.reduce_sum(rows * _rows(xhat), 0)
    if which[2]:
        gbeta = be.reduce_sum(rows, 0)
    return gx, ggamma, gbeta


layer_norm = primitive("layer_norm", _layer_norm_impl, _vjp_layer_norm, _fwd_layer_norm,
                       vjp_plain=_vjp_layer_norm_plain, arg_names=("x", "gamma", "beta"))


# ---- rms_norm (transformer_block options, issue 6) --------------------------------------------
# y = x / sqrt(mean(x^2) + eps) * gamma over the last axis (Zhang & Sennrich 2019; PyTorch's
# nn.RMSNorm). The mean square is accumulated in float64 and the scale cast back to x's float
# type (float32 sessions stay float32). The VJP is written with primitives: with xhat = x r,
# r = 1/sqrt(mean(x^2) + eps) and gh = g gamma, dx = r (gh - xhat mean(gh xhat)) (the r^3 of the
# textbook form underflows for large rows), dgamma = the sum over positions of g xhat.
def _rms_norm_impl(x, gamma, eps=1e-5):
    return python_scalar(rms_stats_plain(as_matrix(x), eps)[0] * gamma)


def rms_stats(x, eps):
    """(xhat, r) with primitives: xhat = x r, r = 1/sqrt(mean(x^2) + eps), each row scaled."""
    return scaled_stats(x, eps, False)


def _vjp_rms_norm(g, ans, saved, tracked, x, gamma, eps=1e-5):
    xhat, r = rms_stats(x, eps)
    gx = _norm_vjp_x(g, gamma, xhat, r, False) if tracked[0] else None
    ggamma = unbroadcast(mul(g, xhat), shape_of(gamma)) if tracked[1] else None
    return gx, ggamma


rms_norm = primitive("rms_norm", _rms_norm_impl, _vjp_rms_norm, arg_names=("x", "gamma"))
