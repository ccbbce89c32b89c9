"""The linear-algebra primitives: forwards on NumPy's LAPACK wrappers, VJPs written with primitives.

They register into the one primitive table (TABLE) through `primitive`, as the entries of
ops.py do, so the tape, the VJP sweep (tests/test_vjp_sweep.py) and grad of grad see them alike.
Every VJP multiplies through `zmul` / `zmatmul`, so a zero cotangent never meets an inf or NaN of a
factorization as NaN. All of them take a batch `[..., n, n]` (or `[..., m, n]`).

A factorization with several results (svd, qr, eigh) is ONE primitive whose value packs them along
the last axis, `[..., m*k + k + k*n]` for svd; the builtin slices the parts out with the `index`
primitive, whose VJP scatters each part's cotangent back (zeros where a part is unused). So the
whole formula's VJP runs once, with every part's cotangent, as in HIPS autograd's `grad_svd`.

Formulas (references: HIPS autograd numpy/linalg.py; PyTorch FunctionsManual.cpp; Murray 2016,
arXiv:1602.07527 for cholesky; Golub & Pereyra 1973 for pinv; the matrix cookbook):
- inv:       gA = -A^-T g A^-T
- solve:     gb = solve(A^T, g);  gA = -gb x^T
- det:       gA = g adj(A)^T  (adj(A) from the SVD, so it is right at singular matrices too)
- logabsdet: gA = g A^-T
- adjugate:  gA = <g, adj> A^-T - A^-T g adj^T   (invertible A: second order of det)
- pinv:      gA = -X^T g X^T + (I - A X) g^T X X^T + X^T X g^T (I - X A),  X = pinv(A)  (constant rank)
- cholesky:  S = L^-T phi(L^T gL) L^-1, gA = (S + S^T)/2, phi = lower triangle with half diagonal
- qr (m >= n): gA = (gQ + Q sym(triu(gR R^T - Q^T gQ))) R^-T, sym(U) = U + U^T with the diagonal once
- eigh:      gA = sym part of V (diag(gw) + F o V^T gV) V^T,  F_ij = 1/(w_j - w_i)  (distinct eigenvalues)
- svd:       autograd's grad_svd (reduced; distinct nonzero singular values for gU, gVh)
"""
from __future__ import annotations

import numpy as np

from tapeml.array.core_ops import (add, binary_exponents, div, ldexp, mul, neg, reshape, sub, sum_, transpose,
                                   unbroadcast, zmatmul, zmul)
from tapeml.array.index_ops import index
from tapeml.array.primitive_table import FLOAT, GROWS, TABLE, primitive, python_scalar, shape_of
from tapeml.array.tape import raw

LinAlgError = np.linalg.LinAlgError


def _fl(a):
    """A float matrix (bools and ints take part as numbers in the session's float type)."""
    a = np.asarray(a)
    return a if a.dtype.kind == "f" else a.astype(FLOAT["dtype"])


def _finite(a) -> bool:
    return bool(np.isfinite(a).all())


def _nan(shape, dtype):
    return np.full(shape, np.nan, dtype=dtype)


def _eye(n):
    return np.eye(n, dtype=FLOAT["dtype"])


# ---- inv ------------------------------------------------------------------------------------
def _inv(a):
    a = _fl(a)
    if not _finite(a):
        return _nan(a.shape, a.dtype)
    try:
        return np.linalg.inv(a)
    except LinAlgError:            # exactly singular: the builtin refuses before; the table answers NaN
        return _nan(a.shape, a.dtype)


def _vjp_inv(g, ans, saved, tracked, a):
    t = transpose(ans)
    return (neg(zmatmul(zmatmul(t, g), t)),)


inv = primitive("inv", _inv, _vjp_inv, arity=1)


# ---- solve ----------------------------------------------------------------------------------
def _solve(a, b, vec=False):
    a, b = _fl(a), _fl(b)
    if vec:
        shape = np.broadcast_shapes(a.shape[:-1], b.shape)
    else:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:]
    if not (_finite(a) and _finite(b)):
        x = _nan(shape, np.result_type(a, b))
    else:
        try:
            x = np.linalg.solve(a, b[..., None])[..., 0] if vec else np.linalg.solve(a, b)
        except LinAlgError:
            x = _nan(shape, np.result_type(a, b))
    if not _finite(x):
        # A^-1 0 = 0 even for a singular or non-finite A: a zero cotangent stays zero (zmul's rule)
        zero = (b == 0) if vec else np.all(b == 0, axis=-2, keepdims=True)
        if zero.any():
            x = np.where(np.broadcast_to(zero, shape), 0.0, x)
    return x


def _vjp_solve(g, ans, saved, tracked, a, b, vec=False):
    gb_full = solve(transpose(a), g, vec=vec)
    ga = gb = None
    if tracked[1]:
        gb = unbroadcast(gb_full, shape_of(b))
    if tracked[0]:
        if vec:
            sg, sx = shape_of(gb_full), shape_of(ans)
            outer = zmul(reshape(gb_full, shape=sg + (1,)), reshape(ans, shape=sx[:-1] + (1, sx[-1])))
        else:
            outer = zmatmul(gb_full, transpose(ans))
        ga = unbroadcast(neg(outer), shape_of(a))
    return ga, gb


def _solve_shape(sa, sb, *rest):
    """The size guard's shape of solve(A, b): a batch of A against a batch of b may grow."""
    if len(sb) == len(sa) - 1:
        return np.broadcast_shapes(sa[:-1], sb)
    return np.broadcast_shapes(sa[:-2], sb[:-2]) + sb[-2:]


GROWS["solve"] = _solve_shape      # behind the size guard (lang/array/limits.py), as matmul is
solve = primitive("solve", _solve, _vjp_solve)


# ---- det, logabsdet, adjugate -----------------------------------------------------------------
def _bcast_scalar(v, nd):
    """A per-matrix value [...] as [..., 1, 1], to scale a batch of matrices."""
    s = shape_of(v)
    return reshape(v, shape=s + (1, 1)) if s else v


def _det(a):
    a = _fl(a)
    if not _finite(a):
        return python_scalar(_nan(a.shape[:-2], a.dtype))
    return python_scalar(np.linalg.det(a))


def _vjp_det(g, ans, saved, tracked, a):
    return (zmul(_bcast_scalar(g, 0), transpose(adjugate(a))),)


det = primitive("det", _det, _vjp_det, arity=1)


def _adjugate(a):
    """adj(A) = det(U) det(Vh) Vh^T diag(prod_{j != i} s_j) U^T from A = U diag(s) Vh: defined and
    right for every square A (singular ones too), unlike det(A) inv(A)."""
    a = _fl(a)
    n = a.shape[-1]
    if n == 0:
        return a.copy()
    if n == 1:
        return np.ones_like(a)
    if not _finite(a):
        return _nan(a.shape, a.dtype)
    try:
        u, s, vh = np.linalg.svd(a)
    except LinAlgError:
        return _nan(a.shape, a.dtype)
    rest = np.empty_like(s)
    for i in range(n):              # the product of the others, without dividing by s_i (it may be 0)
        rest[..., i] = np.prod(np.delete(s, i, axis=-1), axis=-1)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    adj = np.swapaxes(vh, -1, -2) @ (rest[..., :, None] * np.swapaxes(u, -1, -2))
    return adj * sign[..., None, None]


def _vjp_adjugate(g, ans, saved, tracked, a):
    n = shape_of(a)[-1]
    if n == 1:
        return (mul(g, 0.0),)
    if n == 2:                  # adj is linear for 2 x 2, and its adjoint is adj itself: exact everywhere
        return (adjugate(g),)
    it = transpose(inv(a))      # n >= 3: needs an invertible A
    inner = sum_(zmul(g, ans), dim=(-2, -1))
    return (sub(zmul(_bcast_scalar(inner, 0), it), zmatmul(zmatmul(it, g), transpose(ans))),)


adjugate = primitive("adjugate", _adjugate, _vjp_adjugate, arity=1)


def _logabsdet(a):
    a = _fl(a)
    if not _finite(a):
        return python_scalar(_nan(a.shape[:-2], a.dtype))
    return python_scalar(np.linalg.slogdet(a)[1])


def _vjp_logabsdet(g, ans, saved, tracked, a):
    if np.all(np.asarray(raw(ans)) > -np.inf):
        return (zmul(_bcast_scalar(g, 0), transpose(inv(a))),)
    # a singular matrix (log|det| = -inf): A^-T = adj(A)^T / det(A), +-inf where adj is not 0
    return (zmul(_bcast_scalar(g, 0), zmul(transpose(adjugate(a)), _bcast_scalar(div(1.0, det(a)), 0))),)


logabsdet = primitive("logabsdet", _logabsdet, _vjp_logabsdet, arity=1)


# ---- pinv -----------------------------------------------------------------------------------
def _pinv(a):
    a = _fl(a)
    if not _finite(a):
        return _nan(a.shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype)
    try:
        return np.linalg.pinv(a)
    except LinAlgError:
        return _nan(a.shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype)


def _vjp_pinv(g, ans, saved, tracked, a):
    x, xt, gt = ans, transpose(ans), transpose(g)
    t1 = neg(zmatmul(zmatmul(xt, g), xt))
    w = zmatmul(gt, zmatmul(x, xt))                       # g^T X X^T            [m, n]
    t2 = sub(w, zmatmul(a, zmatmul(x, w)))                # (I - A X) g^T X X^T
    v = zmatmul(zmatmul(xt, x), gt)                       # X^T X g^T            [m, n]
    t3 = sub(v, zmatmul(zmatmul(v, x), a))                # X^T X g^T (I - X A)
    return (add(add(t1, t2), t3),)


pinv = primitive("pinv", _pinv, _vjp_pinv, arity=1)


# ---- cholesky -------------------------------------------------------------------------------
def _cholesky(a):
    a = _fl(a)
    if not _finite(a):
        return _nan(a.shape, a.dtype)
    try:
        return np.linalg.cholesky(a)
    except LinAlgError:
        return _nan(a.shape, a.dtype)


def _right_solve_t(r, x):
    """x r^-T (= (r^-1 x^T)^T), with the solve primitive."""
    return transpose(solve(r, transpose(x)))


def _vjp_cholesky(g, ans, saved, tracked, a):
    n = shape_of(a)[-1]
    phi = (np.tril(np.ones((n, n))) / (1.0 + np.eye(n))).astype(FLOAT["dtype"])
    lt = transpose(ans)
    p = zmul(zmatmul(lt, g), phi)                          # phi(L^T gL)
    s = solve(lt, p)                                       # L^-T phi
    s = transpose(solve(lt, transpose(s)))                 # ... L^-1
    return (mul(add(s, transpose(s)), 0.5),)


cholesky = primitive("cholesky", _cholesky, _vjp_cholesky, arity=1)


# ---- packed factorizations: one value, several parts ------------------------------------------
def part(packed, start, shape):
    """Part [start, start + prod(shape)) of the last axis of a packed value, as [..., *shape]."""
    size = int(np.prod(shape)) if shape else 1
    s = shape_of(packed)
    p = index(packed, idx=(Ellipsis, slice(start, start + size)))
    return reshape(p, shape=s[:-1] + tuple(shape))


def _column_signs(x):
    """+-1 per column of x [..., m, k]: the sign of the column's entry of largest magnitude (the first
    of equal ones). LAPACK's signs of singular vectors and eigenvectors can flip under a tiny change of
    A (a Householder reflector that is skipped for an exact 0); fixing them this way makes the
    factors continuous functions of A, which their gradients need."""
    if x.shape[-2] == 0:
        return np.ones(x.shape[:-2] + (1, x.shape[-1]), dtype=x.dtype)
    big = np.argmax(np.abs(x), axis=-2)[..., None, :]
    s = np.sign(np.take_along_axis(x, big, axis=-2))
    return np.where(s == 0, 1.0, s).astype(x.dtype)


def _pack(*parts, batch):
    """The parts [*batch, ...] flattened after the batch axes and joined (sizes spelled out, so an
    empty batch packs too)."""
    return np.concatenate([p.reshape(batch + (int(np.prod(p.shape[len(batch):])),)) for p in parts], axis=-1)


def svd_sizes(m, n):
    k = min(m, n)
    return [(0, (m, k)), (m * k, (k,)), (m * k + k, (k, n))]


def _svd(a):
    a = _fl(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    try:
        if not _finite(a):
            raise LinAlgError
        u, s, vh = np.linalg.svd(a, full_matrices=False)
    except LinAlgError:
        batch = a.shape[:-2]
        return _nan(batch + (m * k + k + k * n,), a.dtype)
    sign = _column_signs(u)
    return _pack(u * sign, s, vh * np.swapaxes(sign, -1, -2), batch=a.shape[:-2])


def unpack(packed, sizes):
    return [part(packed, start, shape) for start, shape in sizes]


def _vjp_svd(g, ans, saved, tracked, a):
    sa = shape_of(a)
    m, n = sa[-2:]
    k = min(m, n)
    u, s, vh = unpack(ans, svd_sizes(m, n))
    gu, gs, gvh = unpack(g, svd_sizes(m, n))
    bs = sa[:-2]
    eye = _eye(k)
    s_row = reshape(s, shape=bs + (1, k))
    s_col = reshape(s, shape=bs + (k, 1))
    # s_j / (s_j^2 - s_i^2) squares the singular values: beyond 1e154 (or below 1e-154) that is
    # inf - inf or 1 / 0 though the terms are ordinary numbers. Such a matrix's singular values are
    # taken scaled by 2^-E (E the exponent of the largest), the terms then scaled by 2^-E: exact.
    e = _svd_exponents(raw(s), bs)
    sr, sc = (s_row, s_col) if e is None else (ldexp(s_row, e=-e), ldexp(s_col, e=-e))
    s2r, s2c = mul(sr, sr), mul(sc, sc)
    f = div(1.0, add(sub(s2r, s2c), eye))                     # 1/(s_j^2 - s_i^2); 1 on the diagonal
    utgu = zmatmul(transpose(u), gu)
    vtgv = zmatmul(vh, transpose(gvh))
    t1 = zmul(zmul(f, sub(utgu, transpose(utgu))), sr)
    t1 = t1 if e is None else ldexp(t1, e=-e)
    t1 = add(t1, zmul(eye, reshape(gs, shape=bs + (k, 1))))
    t2 = zmul(sc, zmul(f, sub(vtgv, transpose(vtgv))))
    t1 = add(t1, t2 if e is None else ldexp(t2, e=-e))
    t1 = zmatmul(zmatmul(u, t1), vh)
    if m < n:
        x = zmatmul(div(u, s_row), gvh)                          # (u / s) gVh            [m, n]
        t1 = add(t1, sub(x, zmatmul(zmatmul(x, transpose(vh)), vh)))   # ... (I - v v^T)
    elif m > n:
        y = zmatmul(div(transpose(vh), s_row), transpose(gu))    # (v / s) gU^T           [n, m]
        y = sub(y, zmatmul(zmatmul(y, u), transpose(u)))         # ... (I - u u^T)
        t1 = add(t1, transpose(y))
    return (t1,)


def _svd_exponents(s, batch):
    """E [..., 1, 1] per matrix of the batch whose largest singular value is beyond 2^500 or below
    2^-500 (nonzero), 0 for the others; None when there is no such matrix (the common path)."""
    s = np.asarray(s)
    top = s.max(axis=-1, initial=0.0) if s.size else np.zeros(batch)
    far = np.isfinite(top) & (top > 0) & ((top > 2.0 ** 500) | (top < 2.0 ** -500))
    if not np.any(far):
        return None
    return np.where(far, binary_exponents(top), 0).astype(np.int32).reshape(batch + (1, 1))


svd = primitive("svd", _svd, _vjp_svd, arity=1)


def qr_sizes(m, n):
    k = min(m, n)
    return [(0, (m, k)), (m * k, (k, n))]


def _qr(a):
    a = _fl(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    try:
        if not _finite(a):
            raise LinAlgError
        q, r = np.linalg.qr(a, mode="reduced")
    except LinAlgError:
        return _nan(a.shape[:-2] + (m * k + k * n,), a.dtype)
    # R's diagonal made >= 0 (the unique factorization of a full-rank A, continuous in A; LAPACK's
    # sign flips where a column's part below the diagonal is exactly 0)
    d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    d = np.where(d == 0, 1.0, d).astype(r.dtype)
    return _pack(q * d[..., None, :], r * d[..., :, None], batch=a.shape[:-2])


def _vjp_qr(g, ans, saved, tracked, a):
    m, n = shape_of(a)[-2:]
    q, r = unpack(ans, qr_sizes(m, n))
    gq, gr = unpack(g, qr_sizes(m, n))
    mm = sub(zmatmul(gr, transpose(r)), zmatmul(transpose(q), gq))
    up = zmul(mm, np.triu(np.ones((n, n), dtype=FLOAT["dtype"])))
    half = 1.0 - 0.5 * _eye(n)
    sym = zmul(add(up, transpose(up)), half)                 # U + U^T with the diagonal once
    return (_right_solve_t(r, add(gq, zmatmul(q, sym))),)


qr = primitive("qr", _qr, _vjp_qr, arity=1)


def eigh_sizes(n):
    return [(0, (n,)), (n, (n, n))]


def _eigh(a):
    a = _fl(a)
    n = a.shape[-1]
    try:
        if not _finite(a):
            raise LinAlgError
        w, v = np.linalg.eigh(a)
    except LinAlgError:
        return _nan(a.shape[:-2] + (n + n * n,), a.dtype)
    return _pack(w, v * _column_signs(v), batch=a.shape[:-2])


def _vjp_eigh(g, ans, saved, tracked, a):
    sa = shape_of(a)
    n = sa[-1]
    bs = sa[:-2]
    w, v = unpack(ans, eigh_sizes(n))
    gw, gv = unpack(g, eigh_sizes(n))
    eye = _eye(n)
    diff = sub(reshape(w, shape=bs + (1, n)), reshape(w, shape=bs + (n, 1)))   # w_j - w_i
    f = div(1.0 - eye, add(diff, eye))                       # 1/(w_j - w_i) off the diagonal, 0 on it
    inner = add(zmul(eye, reshape(gw, shape=bs + (1, n))), zmul(f, zmatmul(transpose(v), gv)))
    t = zmatmul(zmatmul(v, inner), transpose(v))
    return (mul(add(t, transpose(t)), 0.5),)


eigh = primitive("eigh", _eigh, _vjp_eigh, arity=1)
