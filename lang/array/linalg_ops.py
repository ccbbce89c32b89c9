"""The linear-algebra primitives: forwards on the backend's LAPACK (`xp.linalg`: NumPy's wrappers,
or torch.linalg through array-api-compat), VJPs written with primitives.

They register into the one primitive table (TABLE) through `primitive`, as the entries of
ops.py do, so the tape, the VJP sweep (tests/array/test_vjp_sweep.py) and grad of grad see them alike.
Every VJP multiplies through `zmul` / `zmatmul`, so a zero cotangent never meets an inf or NaN of a
factorization as NaN. All of them take a batch `[..., n, n]` (or `[..., m, n]`).

A factorization with several results (svd, qr, eigh, slogdet) is ONE primitive with several
outputs (tape.Primitive, `outputs=k`): its forward returns a tuple, and its VJP runs once with the
tuple of the outputs' cotangents, as in HIPS autograd's `grad_svd`; an output that got no cotangent
is None there and its terms are skipped (the gradient through S alone, U diag(gS) Vh, needs no
1/(s_j^2 - s_i^2), so it holds at repeated singular values).

Portable: each forward computes with the namespace of its argument (`B.xp_of`: the NumPy module
itself for NumPy arrays, so NumPy runs the calls it always ran) and catches the backend's
`linalg_errors`; a failed or non-finite factorization answers NaN (the builtins refuse such input
before, with a message). The VJPs' constants (an identity, a triangle) are made on the device of
the value they meet (`_const`).

Formulas (references: HIPS autograd numpy/linalg.py; PyTorch FunctionsManual.cpp; Murray 2016,
arXiv:1602.07527 for cholesky; Golub & Pereyra 1973 for pinv; the matrix cookbook):
- inv:       gA = -A^-T g A^-T
- solve:     gb = solve(A^T, g);  gA = -gb x^T
- det:       gA = g adj(A)^T  (adj(A) from the SVD, so it is right at singular matrices too)
- slogdet:   (sign, log|det|); gA = g_log A^-T (the sign is piecewise constant: no gradient)
- adjugate:  gA = <g, adj> A^-T - A^-T g adj^T   (invertible A: second order of det)
- pinv:      gA = -X^T g X^T + (I - A X) g^T X X^T + X^T X g^T (I - X A),  X = pinv(A)  (constant rank)
- cholesky:  S = L^-T phi(L^T gL) L^-1, gA = (S + S^T)/2, phi = lower triangle with half diagonal
- qr (m >= n): gA = (gQ + Q sym(triu(gR R^T - Q^T gQ))) R^-T, sym(U) = U + U^T with the diagonal once
- eigh:      gA = sym part of V (diag(gw) + F o V^T gV) V^T,  F_ij = 1/(w_j - w_i)  (distinct eigenvalues)
- svd:       autograd's grad_svd (reduced; distinct nonzero singular values for gU, gVh)
"""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.arith_ops import add, div, mul, neg, sub, zmul
from tapeml.array.matmul_ops import zmatmul
from tapeml.array.scale_ops import binary_exponents, ldexp
from tapeml.array.shape_ops import reshape, sum_, transpose, unbroadcast
from tapeml.array.primitive_table import FLOAT, GROWS, primitive, python_scalar, shape_of
from tapeml.array.tape import raw

_ND = np.ndarray


def _fl(a):
    """A float matrix (bools and ints take part as numbers in the session's float type)."""
    t = type(a)
    if t is _ND:
        return a if a.dtype.kind == "f" else a.astype(FLOAT["dtype"])
    if t in B.ARRAYS:
        be = B.of(a)
        return a if be.is_float(a) else be.xp.astype(a, be.float_dtype())
    return _fl(B.current().asarray(a))


def _finite(a) -> bool:
    if type(a) is _ND:
        return bool(np.isfinite(a).all())
    be = B.of(a)
    return be.item(be.xp.all(be.xp.isfinite(a)))


def _nan(shape, a, dtype=None):
    """A NaN array of `shape` on a's device, in a's dtype (or `dtype`)."""
    if type(a) is _ND:
        return np.full(shape, np.nan, dtype=a.dtype if dtype is None else dtype)
    return B.xp_of(a).full(shape, math.nan, dtype=a.dtype if dtype is None else dtype, device=a.device)


def _const(value: np.ndarray, like):
    """A constant of a VJP (an identity, a triangle of ones), in the session's float type, on the
    device of `like` (a value the VJP computes with, possibly boxed)."""
    v = value.astype(FLOAT["dtype"])
    r = raw(like)
    return v if type(r) is _ND or type(r) not in B.ARRAYS else B.of(r).asarray(v)


def _eye(n, like):
    return _const(np.eye(n), like)


def _mT(x):
    """The transpose of the last two axes of a plain array."""
    return np.swapaxes(x, -1, -2) if type(x) is _ND else B.xp_of(x).matrix_transpose(x)


def _or_nan(name):
    """The array namespace's linalg.`name` of a float matrix, NaN of its shape where the matrix
    holds an inf or NaN or the factorization fails (exactly singular, not positive definite: the
    builtins refuse those before; the table answers NaN)."""
    def impl(a):
        a = _fl(a)
        if not _finite(a):
            return _nan(a.shape, a)
        be = B.of(a)
        try:
            return getattr(be.xp.linalg, name)(a)
        except be.linalg_errors:
            return _nan(a.shape, a)
    impl.__name__ = f"_{name}"
    return impl


# ---- inv ------------------------------------------------------------------------------------
_inv = _or_nan("inv")


def _vjp_inv(g, ans, saved, tracked, a):
    t = transpose(ans)
    return (neg(zmatmul(zmatmul(t, g), t)),)


inv = primitive("inv", _inv, _vjp_inv, arity=1)


# ---- solve ----------------------------------------------------------------------------------
def _solve(a, b, vec=False):
    a, b = _fl(a), _fl(b)
    if type(a) is not type(b):      # a NumPy operand beside a tensor crosses to the tensor's device
        be = B.of(b) if type(a) is _ND else B.of(a)
        a, b = be.asarray(a), be.asarray(b)
    be = B.of(a)
    xp = be.xp
    if vec:
        shape = np.broadcast_shapes(tuple(a.shape[:-1]), tuple(b.shape))
    else:
        shape = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])) + tuple(b.shape[-2:])
    dtype = xp.result_type(a, b)
    if not (_finite(a) and _finite(b)):
        x = _nan(shape, a, dtype)
    else:
        try:
            x = xp.linalg.solve(a, b[..., None])[..., 0] if vec else xp.linalg.solve(a, b)
        except be.linalg_errors:
            x = _nan(shape, a, dtype)
    if not _finite(x):
        # A^-1 0 = 0 even for a singular or non-finite A: a zero cotangent stays zero (zmul's rule)
        zero = (b == 0) if vec else xp.all(b == 0, axis=-2, keepdims=True)
        if be.item(xp.any(zero)):
            x = xp.where(xp.broadcast_to(zero, shape), 0.0, x)
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


# ---- det, slogdet, adjugate -------------------------------------------------------------------
def _bcast_scalar(v, nd):
    """A per-matrix value [...] as [..., 1, 1], to scale a batch of matrices."""
    s = shape_of(v)
    return reshape(v, shape=s + (1, 1)) if s else v


def _det(a):
    a = _fl(a)
    if not _finite(a):
        return python_scalar(_nan(a.shape[:-2], a))
    return python_scalar(B.of(a).xp.linalg.det(a))


def _vjp_det(g, ans, saved, tracked, a):
    return (zmul(_bcast_scalar(g, 0), transpose(adjugate(a))),)


det = primitive("det", _det, _vjp_det, arity=1)


def _adjugate(a):
    """adj(A) = det(U) det(Vh) Vh^T diag(prod_{j != i} s_j) U^T from A = U diag(s) Vh: defined and
    right for every square A (singular ones too), unlike det(A) inv(A)."""
    a = _fl(a)
    be = B.of(a)
    xp = be.xp
    n = a.shape[-1]
    if n == 0:
        return a.copy() if type(a) is _ND else xp.asarray(a, copy=True)
    if n == 1:
        return xp.ones_like(a)
    if not _finite(a):
        return _nan(a.shape, a)
    try:
        u, s, vh = xp.linalg.svd(a)
    except be.linalg_errors:
        return _nan(a.shape, a)
    # the product of the others, without dividing by s_i (it may be 0)
    if type(a) is _ND:
        rest = np.empty_like(s)
        for i in range(n):
            rest[..., i] = np.prod(np.delete(s, i, axis=-1), axis=-1)
    else:
        rest = xp.stack([xp.prod(xp.concat([s[..., :i], s[..., i + 1:]], axis=-1), axis=-1) for i in range(n)],
                        axis=-1)
    sign = xp.linalg.det(u) * xp.linalg.det(vh)
    adj = _mT(vh) @ (rest[..., :, None] * _mT(u))
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


def _slogdet(a):
    """(sign, log|det A|): two outputs (numbers for one matrix, [...] for a batch)."""
    a = _fl(a)
    if not _finite(a):
        nan = python_scalar(_nan(a.shape[:-2], a))
        return nan, nan
    sign, logabsdet = B.of(a).xp.linalg.slogdet(a)
    return python_scalar(sign + 0.0), python_scalar(logabsdet)     # + 0.0: torch's sign -0 is 0


def _above_minus_inf(v) -> bool:
    """Every entry of a plain number or array is > -inf (NaN is not)."""
    t = type(v)
    if t is float:
        return v > -math.inf
    if t is _ND:
        return bool(np.all(v > -np.inf))
    be = B.of(v)
    return be.item(be.xp.all(v > -math.inf))


def _vjp_slogdet(g, ans, saved, tracked, a):
    g_log = g[1]                # the sign has no gradient: g[0] is ignored
    if g_log is None:
        return (None,)
    if _above_minus_inf(raw(ans[1])):
        return (zmul(_bcast_scalar(g_log, 0), transpose(inv(a))),)
    # a singular matrix (log|det| = -inf): A^-T = adj(A)^T / det(A), +-inf where adj is not 0
    return (zmul(_bcast_scalar(g_log, 0), zmul(transpose(adjugate(a)), _bcast_scalar(div(1.0, det(a)), 0))),)


slogdet = primitive("slogdet", _slogdet, _vjp_slogdet, outputs=2)


# ---- pinv -----------------------------------------------------------------------------------
_EPS: dict = {}     # dtype -> machine epsilon


def _pinv(a):
    a = _fl(a)
    be = B.of(a)
    shape = tuple(a.shape[:-2]) + (a.shape[-1], a.shape[-2])
    if not _finite(a):
        return _nan(shape, a)
    # singular values below max(m, n) eps times the largest count as 0: NumPy 2's rtol=None and
    # PyTorch's default, said explicitly so that both backends cut at the same place
    eps = _EPS.get(a.dtype)
    if eps is None:
        eps = _EPS[a.dtype] = float(np.finfo(be.np_dtype(a.dtype)).eps)
    rtol = max(a.shape[-2:]) * eps
    try:
        if type(a) is _ND:
            return np.linalg.pinv(a, rcond=rtol)     # (NumPy 1's name of the same relative cutoff)
        return be.xp.linalg.pinv(a, rtol=rtol)
    except be.linalg_errors:
        return _nan(shape, a)


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
_cholesky = _or_nan("cholesky")


def _right_solve_t(r, x):
    """x r^-T (= (r^-1 x^T)^T), with the solve primitive."""
    return transpose(solve(r, transpose(x)))


def _vjp_cholesky(g, ans, saved, tracked, a):
    n = shape_of(a)[-1]
    phi = _const(np.tril(np.ones((n, n))) / (1.0 + np.eye(n)), ans)
    lt = transpose(ans)
    p = zmul(zmatmul(lt, g), phi)                          # phi(L^T gL)
    s = solve(lt, p)                                       # L^-T phi
    s = transpose(solve(lt, transpose(s)))                 # ... L^-1
    return (mul(add(s, transpose(s)), 0.5),)


cholesky = primitive("cholesky", _cholesky, _vjp_cholesky, arity=1)


# ---- factorizations with several outputs ------------------------------------------------------
def _column_signs(x):
    """+-1 per column of x [..., m, k], as [..., 1, k]: the sign of the column's entry of largest
    magnitude (the first of equal ones). LAPACK's signs of singular vectors and eigenvectors can
    flip under a tiny change of A (a Householder reflector that is skipped for an exact 0); fixing
    them this way makes the factors continuous functions of A, which their gradients need."""
    xp = B.xp_of(x)
    if x.shape[-2] == 0:
        shape = tuple(x.shape[:-2]) + (1, x.shape[-1])
        return np.ones(shape, dtype=x.dtype) if type(x) is _ND else xp.ones(shape, dtype=x.dtype, device=x.device)
    big = xp.argmax(xp.abs(x), axis=-2, keepdims=True)
    s = xp.sign(xp.take_along_axis(x, big, axis=-2))
    return xp.where(s == 0, 1.0, s)


def _dims(a):
    """(a's backend, m, n, k = min(m, n), the batch shape) of a matrix [..., m, n]."""
    m, n = a.shape[-2:]
    return B.of(a), m, n, min(m, n), tuple(a.shape[:-2])


def _factors(a, factorize):
    """factorize(a) (a tuple of factors), None where a holds an inf or NaN or the factorization
    fails (the caller answers NaN factors)."""
    be = B.of(a)
    try:
        if not _finite(a):
            raise ValueError
        return factorize(a)
    except (ValueError,) + be.linalg_errors:
        return None


def _svd(a):
    """(U [..., m, k], S [..., k], Vh [..., k, n]), k = min(m, n): the reduced SVD, signs fixed."""
    a = _fl(a)
    be, m, n, k, batch = _dims(a)
    out = _factors(a, lambda a: be.xp.linalg.svd(a, full_matrices=False))
    if out is None:
        return _nan(batch + (m, k), a), _nan(batch + (k,), a), _nan(batch + (k, n), a)
    u, s, vh = out
    sign = _column_signs(u)
    return u * sign, s, vh * _mT(sign)


def _vjp_svd(g, ans, saved, tracked, a):
    sa = shape_of(a)
    m, n = sa[-2:]
    k = min(m, n)
    u, s, vh = ans
    gu, gs, gvh = g
    bs = sa[:-2]
    eye = _eye(k, s)
    s_row = reshape(s, shape=bs + (1, k))
    inner = None            # U^T gA V before the m != n terms: the sum of the given outputs' terms
    if gu is not None or gvh is not None:
        s_col = reshape(s, shape=bs + (k, 1))
        # s_j / (s_j^2 - s_i^2) squares the singular values: beyond 1e154 (or below 1e-154) that is
        # inf - inf or 1 / 0 though the terms are ordinary numbers. Such a matrix's singular values
        # are taken scaled by 2^-E (E the exponent of the largest), the terms then scaled by 2^-E: exact.
        e = _svd_exponents(raw(s), bs)
        sr, sc = (s_row, s_col) if e is None else (ldexp(s_row, e=-e), ldexp(s_col, e=-e))
        s2r, s2c = mul(sr, sr), mul(sc, sc)
        f = div(1.0, add(sub(s2r, s2c), eye))                     # 1/(s_j^2 - s_i^2); 1 on the diagonal
        if gu is not None:
            utgu = zmatmul(transpose(u), gu)
            t = zmul(zmul(f, sub(utgu, transpose(utgu))), sr)
            inner = t if e is None else ldexp(t, e=-e)
    if gs is not None:
        t = zmul(eye, reshape(gs, shape=bs + (k, 1)))
        inner = t if inner is None else add(inner, t)
    if gvh is not None:
        vtgv = zmatmul(vh, transpose(gvh))
        t = zmul(sc, zmul(f, sub(vtgv, transpose(vtgv))))
        t = t if e is None else ldexp(t, e=-e)
        inner = t if inner is None else add(inner, t)
    ga = zmatmul(zmatmul(u, inner), vh)
    if m < n and gvh is not None:
        x = zmatmul(div(u, s_row), gvh)                          # (u / s) gVh            [m, n]
        ga = add(ga, sub(x, zmatmul(zmatmul(x, transpose(vh)), vh)))   # ... (I - v v^T)
    elif m > n and gu is not None:
        y = zmatmul(div(transpose(vh), s_row), transpose(gu))    # (v / s) gU^T           [n, m]
        y = sub(y, zmatmul(zmatmul(y, u), transpose(u)))         # ... (I - u u^T)
        ga = add(ga, transpose(y))
    return (ga,)


def _svd_exponents(s, batch):
    """E [..., 1, 1] per matrix of the batch whose largest singular value is beyond 2^500 or below
    2^-500 (nonzero), 0 for the others; None when there is no such matrix (the common path). The
    test reads the values (one crossing of the k singular values per matrix to the host, where
    they are decided); E is made on s's device."""
    host = B.to_numpy(s)
    top = host.max(axis=-1, initial=0.0) if host.size else np.zeros(batch)
    far = np.isfinite(top) & (top > 0) & ((top > 2.0 ** 500) | (top < 2.0 ** -500))
    if not np.any(far):
        return None
    e = np.where(far, binary_exponents(top), 0).astype(np.int32).reshape(batch + (1, 1))
    return e if type(s) is _ND else B.of(s).asarray(e)


svd = primitive("svd", _svd, _vjp_svd, outputs=3)


def _qr(a):
    """(Q [..., m, k], R [..., k, n]), k = min(m, n): the reduced QR with R's diagonal >= 0."""
    a = _fl(a)
    be, m, n, k, batch = _dims(a)
    xp = be.xp
    out = _factors(a, lambda a: xp.linalg.qr(a, mode="reduced"))
    if out is None:
        return _nan(batch + (m, k), a), _nan(batch + (k, n), a)
    q, r = out
    # R's diagonal made >= 0 (the unique factorization of a full-rank A, continuous in A; LAPACK's
    # sign flips where a column's part below the diagonal is exactly 0)
    d = xp.sign(np.diagonal(r, axis1=-2, axis2=-1) if type(r) is _ND else xp.linalg.diagonal(r))
    d = xp.where(d == 0, 1.0, d)
    return q * d[..., None, :], r * d[..., :, None]


def _vjp_qr(g, ans, saved, tracked, a):
    n = shape_of(a)[-1]
    q, r = ans
    gq, gr = g
    if gq is None:
        mm = zmatmul(gr, transpose(r))
    elif gr is None:
        mm = neg(zmatmul(transpose(q), gq))
    else:
        mm = sub(zmatmul(gr, transpose(r)), zmatmul(transpose(q), gq))
    up = zmul(mm, _const(np.triu(np.ones((n, n))), r))
    half = 1.0 - 0.5 * _eye(n, r)
    sym = zmul(add(up, transpose(up)), half)                 # U + U^T with the diagonal once
    qsym = zmatmul(q, sym)
    return (_right_solve_t(r, qsym if gq is None else add(gq, qsym)),)


qr = primitive("qr", _qr, _vjp_qr, outputs=2)


def _eigh(a):
    """(w [..., n] ascending, V [..., n, n]): eigenvalues and eigenvectors of a symmetric A (its
    lower triangle is read), each eigenvector's largest entry positive."""
    a = _fl(a)
    be = B.of(a)
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    try:
        if not _finite(a):
            raise ValueError
        w, v = be.xp.linalg.eigh(a)
    except (ValueError,) + be.linalg_errors:
        return _nan(batch + (n,), a), _nan(batch + (n, n), a)
    return w, v * _column_signs(v)


def _vjp_eigh(g, ans, saved, tracked, a):
    sa = shape_of(a)
    n = sa[-1]
    bs = sa[:-2]
    w, v = ans
    gw, gv = g
    eye = _eye(n, w)
    inner = None
    if gw is not None:
        inner = zmul(eye, reshape(gw, shape=bs + (1, n)))
    if gv is not None:
        diff = sub(reshape(w, shape=bs + (1, n)), reshape(w, shape=bs + (n, 1)))   # w_j - w_i
        f = div(1.0 - eye, add(diff, eye))                   # 1/(w_j - w_i) off the diagonal, 0 on it
        t = zmul(f, zmatmul(transpose(v), gv))
        inner = t if inner is None else add(inner, t)
    t = zmatmul(zmatmul(v, inner), transpose(v))
    return (mul(add(t, transpose(t)), 0.5),)


eigh = primitive("eigh", _eigh, _vjp_eigh, outputs=2)
