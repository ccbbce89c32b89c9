"""dense (x @ w + b) and multi-head attention's projections with the heads joined: dense_heads
(x to each head's [T, d], one product) and heads_dense (the heads' outputs back to [T, D], one
product), with merge_heads and split_heads (conventions: lang/array/ops.py). dense runs as the
backend's fused product where it has one (B.of(x).linear, torch.addmm: lang/array/backend.py's
kernel table)."""
from __future__ import annotations

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS
from tapeml.array.primitive_table import TABLE, primitive, python_scalar, shape_of
from tapeml.array.matmul_ops import _matmul, _rows, _vjp_matmul, _vjp_matmul_plain, reshape
from tapeml.array.shape_ops import permute, unbroadcast
from tapeml.array.index_ops import _concat, _vjp_concat, _vjp_concat_plain, concat
from tapeml.array.rows import is_float, same_backend

_ND = np.ndarray


def _fused_dense(x, w, b):
    """Whether dense may run as the backend's fused product: float x and w [K, N] of one backend
    with a linear kernel, b None or [N] of theirs."""
    return (B.of(x).linear is not None and same_backend(x, w) and w.ndim == 2 and x.ndim >= 1
            and is_float(x) and (b is None or (same_backend(x, b) and tuple(b.shape) == (w.shape[1],))))


def _dense_impl(x, w, b=None):
    if _fused_dense(x, w, b):
        return B.of(x).linear(x, w, b)
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
        if type(b) is type(g) and type(g) in ARRAYS and g.ndim >= 2 and tuple(b.shape) == tuple(g.shape[-1:]):
            gb = B.of(g).reduce_sum(_rows(g), 0)
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
    return B.of(y).contiguous(y), w


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
    if not (type(g) is type(x) and type(g) in ARRAYS and is_float(g) and g.dtype == x.dtype):
        return None
    n, ws, bs = _heads_parts(params, bias)
    w = saved if saved is not None else _joined(ws, 1)
    if type(w) is not type(g) or w.dtype != g.dtype:       # one float type: torch's @ does not promote
        return None
    g2 = _rows(_merged(g))                              # [rows, H*d]
    gx = (g2 @ w.T).reshape(tuple(x.shape)) if tracked[0] else None
    tw = tracked[1:1 + n]         # the weights' cotangents: views cut from the joined one, as concat's
    out = (gx, *(_vjp_concat_plain(_rows(x).T @ g2, None, None, tw, *ws, dim=1) if any(tw) else (None,) * n))
    if bias:
        tb = tracked[1 + n:]
        gb = B.of(g2).reduce_sum(g2, 0)
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
    if not (type(g) is type(o) and type(g) in ARRAYS and is_float(g) and g.dtype == o.dtype):
        return None
    n = len(ws)
    w = saved if saved is not None else _joined(ws, 0)
    if type(w) is not type(g) or w.dtype != g.dtype:       # one float type: torch's @ does not promote
        return None
    s = tuple(o.shape)
    g2 = _rows(g)                                       # [rows, D]
    go = None
    if tracked[0]:
        gm = (g2 @ w.T).reshape(s[:-3] + (s[-2], s[-3], s[-1])).swapaxes(-2, -3)
        go = B.of(gm).contiguous(gm)
    tw = tracked[1:]
    return (go, *(_vjp_concat_plain(_rows(_merged(o)).T @ g2, None, None, tw, *ws, dim=0) if any(tw) else (None,) * n))


heads_dense = primitive("heads_dense", _heads_dense_impl, _vjp_heads_dense, _fwd_heads_dense,
                        vjp_plain=_vjp_heads_dense_plain,
                        arg_names=lambda n_args, kw: ["the heads' outputs"] + [f"head {h}'s wo" for h in range(1, n_args)])

