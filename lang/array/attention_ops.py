"""Attention: attention_weights, softmax(q k^T * scale + bias) over the allowed keys, and
scaled_dot_product_attention, those weights times v (conventions: lang/array/ops.py), written
once against the namespace of their inputs. sdpa runs as the backend's fused attention kernel
where it has one and it applies (B.of(q).flash_attention, torch's CPU flash kernel:
lang/array/backend.py's kernel table); the scores are formed here otherwise. Scores beyond the
float range are computed again on q and k scaled by powers of 2 (_overflowed, on the host for
another backend: NumPy's numbers exactly)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS, xp_of
from tapeml.array.tape import raw
from tapeml.array.primitive_table import bools_as_floats, primitive, shape_of, size_of
from tapeml.array.arith_ops import _zmul, mul, sub, sum_, where, zmul
from tapeml.array.scale_ops import binary_exponents
from tapeml.array.matmul_ops import matmul, transpose, zmatmul
from tapeml.array.shape_ops import unbroadcast
from tapeml.array.rows import all_finite, back, host, is_float, on, same_backend, saturated_rows
from tapeml.array.softmax_ops import softmax_rows

_ND = np.ndarray


def allowed_keys(mask, causal, lq, lk, be, device):
    """The boolean 'may attend' matrix [.., lq, lk] from a mask and/or causality (None when all
    allowed), on backend be's device."""
    xp = be.xp
    allowed = None
    if causal:      # j <= i + lk - lq: bottom-right aligned
        i = xp.arange(lq, device=device)[:, None]
        allowed = xp.arange(lk, device=device)[None, :] <= i + (lk - lq)
    if mask is not None:
        m = raw(mask)
        if type(m) is not be.array_type:
            m = be.asarray(B.to_numpy(m))
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
    """(s repaired, lim) on NumPy arrays (the host): s the scores [..., Lq, Lk] (masked entries -inf) whose
    row maxima are not all finite; lim the rows [..., Lq, 1] shifted in the scaled domain (their
    weights are the limit: one-hot, or shared by exact ties), or None."""
    operands = np.isfinite(q).all(axis=-1)[..., :, None] & np.isfinite(k).all(axis=-1)[..., None, :]
    if bias is not None:
        # an infinite bias is the score exactly (q k^T * scale is finite in the reals), also where
        # the product overflowed to the other infinity (inf + -inf made NaN)
        b = np.asarray(bias)
        s = np.where(np.isinf(b) & operands, b, s).astype(s.dtype)
        if allowed is not None:
            s = np.where(allowed, s, -np.inf).astype(s.dtype)
    over = ~np.isfinite(s) & operands
    if bias is not None:
        over &= np.isfinite(b)
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


def sdpa_weights(q, k, bias, mask, causal, scale):
    """(p, rows, lim): the weights softmax(q k^T * scale + bias) over the allowed keys (the scores
    formed in place: they are a fresh product), the rows holding a +inf (their weights are
    softmax's limit and their gradient to q, k and bias is 0) and the rows whose scores went
    beyond the float range (_overflowed, on the host), each None when there is none."""
    q, k = bools_as_floats(q), bools_as_floats(k)
    like = k if type(k) in ARRAYS and type(k) is not _ND and type(q) is _ND else q
    be = B.of(like) if type(like) in ARRAYS else B.NUMPY
    xp = be.xp
    q, k = on(be, q), on(be, k)
    s = xp.matmul(q, k.mT)
    s *= scale
    if bias is not None:
        s = s + on(be, bias)
    allowed = allowed_keys(mask, causal, q.shape[-2], k.shape[-2], be, q.device)
    if allowed is not None:
        s = xp.where(allowed, s, -math.inf)
    lim = None
    m = be.reduce_max(s, -1, keepdims=True) if size_of(s) else None
    finite = m is not None and all_finite(m)      # a row's max of inf or nan fails
    if m is not None and not finite:
        sn, limn = _overflowed(host(q), host(k), host(bias), host(s), host(allowed), scale)
        s, lim = back(sn, like), back(limn, like)
        m = None
    p, rows = softmax_rows(s, -1, m, finite)
    return p, rows, lim


def _fwd_weights(q, k, bias=None, mask=None, causal=False, scale=1.0):
    p, rows, _ = sdpa_weights(q, k, bias, mask, causal, scale)
    return p, (rows,)


def _weights_impl(q, k, bias=None, mask=None, causal=False, scale=1.0):
    return sdpa_weights(q, k, bias, mask, causal, scale)[0]


def _vjp_weights(g, ans, saved, tracked, q, k, bias=None, mask=None, causal=False, scale=1.0):
    """softmax's VJP on the scores, ds = p (g - rowsum(g p)) (0 on the +inf rows), taken through
    q k^T * scale + bias. rowsum(g p) is exact on a one-hot row, so a row whose weights are the
    limit of overflowing scores gets exactly 0, whatever the size of q and k."""
    rows = saved[0] if saved is not None else sdpa_weights(raw(q), raw(k), raw(bias), mask, causal, scale)[1]
    ds = zmul(ans, sub(g, sum_(zmul(g, ans), dim=-1, keepdims=True)))
    return _through_scores(ds, rows, q, k, bias, (tracked[0], tracked[1], len(tracked) > 2 and tracked[2]), scale)


def _through_scores(ds, rows, q, k, bias, tracked, scale):
    """(gq, gk, gbias) from the cotangent ds of the scores q k^T * scale + bias (0 on the rows
    holding a +inf), with primitives; tracked: whether each of q, k and bias wants one."""
    if rows is not None:
        ds = where(rows, 0.0, ds)
    gq = gk = gbias = None
    if tracked[0]:
        gq = unbroadcast(mul(zmatmul(ds, k), scale), shape_of(q))
    if tracked[1]:
        gk = unbroadcast(mul(zmatmul(transpose(ds), q), scale), shape_of(k))
    if tracked[2]:
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
    range, a nan or an infinite value take sdpa_weights' path)."""
    if B.of(q).flash_attention is None or bias is not None or mask is not None \
            or not same_backend(q, k, v) or not is_float(q):
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
    # 2^20 for |k| |v| scale d, such rows take the scores' path, exact there (rows.saturated_rows).
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
    """The forward on plain arrays, keeping (p, rows, lim) for the VJP (sdpa_weights); on a
    backend with a attention kernel where it applies (_flash), keeping its output and
    log-sum-exp instead."""
    r = _flash(q, k, v, bias, mask, causal, scale)
    if r is not None:
        return r
    p, rows, lim = sdpa_weights(q, k, bias, mask, causal, scale)
    return xp_of(p).matmul(p, on(B.of(p), bools_as_floats(v))), (p, rows, lim)


def _recorded_weights(q, k, bias, mask, causal, scale):
    """(p, rows, lim) of _fwd_sdpa with p recorded (attention_weights), for a VJP that an outer
    `grad` records."""
    _, rows, lim = sdpa_weights(raw(q), raw(k), raw(bias), mask, causal, scale)
    return attention_weights(q, k, bias, mask=mask, causal=causal, scale=scale), rows, lim


def _vjp_sdpa(g, ans, saved, tracked, q, k, v, bias=None, mask=None, causal=False, scale=None):
    if saved is not None and type(saved[0]) is str:        # the fused kernel's: the weights on plain q, k
        saved = sdpa_weights(q, k, bias, mask, causal, scale)
    p, rows, lim = saved if saved is not None else _recorded_weights(q, k, bias, mask, causal, scale)
    gq = gk = gv = gbias = None
    if tracked[2]:
        gv = unbroadcast(zmatmul(transpose(p), g), shape_of(v))
    if tracked[0] or tracked[1] or (len(tracked) > 3 and tracked[3]):
        if not (all_finite(raw(v)) and all_finite(raw(g))):
            gq, gk, gbias = _score_grads_split(g, v, p, rows, lim, q, k, bias, tracked, scale)
            return gq, gk, gv, gbias
        gq, gk, gbias = _score_grads(g, v, matmul(p, v), p, rows, lim, q, k, bias, tracked, scale)
    return gq, gk, gv, gbias


def _vjp_sdpa_plain(g, ans, saved, tracked, q, k, v, bias=None, mask=None, causal=False, scale=None):
    """First order, finite v and cotangent, no bias to differentiate: softmax's VJP
    p * (dp - rowsum(dp * p)) with rowsum(dp * p) = rowsum(g * ans) because dp = g v^T and
    ans = p v: a [.., T, d_v] product instead of a [.., T, T] one (the identity of FlashAttention's
    backward pass: Dao et al. 2022, appendix B.2); the [.., T, T] steps in place, the scale folded in.
    The rows whose weights are one-hot (scores beyond the float range, lim, or apart by more than
    ~745: rows.saturated_rows) take rowsum(dp * p) itself: exact there, where the identity's
    rounding, times q and k of 1e8 or 1e200, would not be 0; so does every row when there are no
    more keys than value features (the direct form costs no more there, and one key's weight of
    exactly 1 then gives exactly 0, as softmax's VJP does)."""
    if saved is None or (len(tracked) > 3 and tracked[3]):
        return None
    if type(saved[0]) is str:       # ("flash", out, log-sum-exp): the fused kernel's backward
        return _vjp_flash_plain(g, saved, tracked, q, k, v, causal, scale)
    p, rows, lim = saved
    q, k, v = bools_as_floats(q), bools_as_floats(k), bools_as_floats(v)
    if not (same_backend(g, ans, p, q, k, v) and is_float(p)):
        return None
    be = B.of(g)
    xp = be.xp
    gv = _unbroadcast_plain(xp.matmul(p.mT, g), tuple(v.shape)) if tracked[2] else None
    if not (tracked[0] or tracked[1]):
        return None, None, gv, None
    if not (all_finite(v) and all_finite(g)):
        return None
    ds = xp.matmul(g, v.mT)
    if p.shape[-1] <= v.shape[-1]:      # as few keys as value features: the direct form is as cheap
        # ds * p, not zmul: ds is finite unless the product overflowed, and an inf x 0 there
        # is a NaN that the tape's test per pass sends to the careful form (tape.backward)
        corr = be.reduce_sum(ds * p, -1, keepdims=True)
    else:
        corr = be.reduce_sum(g * ans, -1, keepdims=True)
        exact = saturated_rows(p, lim)
        if exact is not None:
            corr = xp.where(exact, be.reduce_sum(_zmul(ds, p), -1, keepdims=True), corr)
    ds -= corr
    ds *= p
    ds *= scale
    if rows is not None:
        ds = xp.where(rows, 0.0, ds)
    gq = _unbroadcast_plain(xp.matmul(ds, k), tuple(q.shape)) if tracked[0] else None
    gk = _unbroadcast_plain(xp.matmul(ds.mT, q), tuple(k.shape)) if tracked[1] else None
    return gq, gk, gv, None


def _vjp_flash_plain(g, saved, tracked, q, k, v, causal, scale):
    if not same_backend(g, q):
        return None
    _, out4, lse = saved
    gq, gk, gv = B.of(g).flash_attention_backward(_as_heads(g), _as_heads(q), _as_heads(k), _as_heads(v),
                                                  out4, lse, bool(causal), float(scale))
    return (gq.reshape(q.shape) if tracked[0] else None, gk.reshape(k.shape) if tracked[1] else None,
            gv.reshape(v.shape) if tracked[2] else None, None)



def _unbroadcast_plain(g, shape):
    """unbroadcast on a plain matrix: itself where it has the shape already."""
    if tuple(g.shape) == shape:
        return g
    return unbroadcast(g, shape)


def _score_grads(g, v, ans, p, rows, lim, q, k, bias, tracked, scale):
    """The cotangents of q, k and bias through the scores, written with primitives (the
    correction rowsum(dp * p) as in _vjp_sdpa_plain)."""
    dp = zmatmul(g, transpose(v))
    if shape_of(p)[-1] <= shape_of(v)[-1]:      # as in _vjp_sdpa_plain: the direct form, exact
        corr = sum_(zmul(dp, p), dim=-1, keepdims=True)
    else:
        corr = sum_(zmul(g, ans), dim=-1, keepdims=True)
        exact = saturated_rows(raw(p), lim)
        if exact is not None:
            corr = where(exact, sum_(zmul(dp, p), dim=-1, keepdims=True), corr)
    ds = zmul(p, sub(dp, corr))
    return _through_scores(ds, rows, q, k, bias, (tracked[0], tracked[1], len(tracked) > 3 and tracked[3]), scale)


def _score_grads_split(g, v, p, rows, lim, q, k, bias, tracked, scale):
    """_score_grads when v or the cotangent holds +-inf. They are linear in each, so with
    v = v_finite + V u (u the signs of the infinite entries, V -> inf) each cotangent is
    G(v_finite) + V G(u): +-inf where G(u) is nonzero, G(v_finite) elsewhere. Computing with the
    infinities inside would meet inf - inf where the limit is a plain +-inf."""
    split_v = not all_finite(raw(v))
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

