"""The checks the Linear algebra builtins (builtins/linalg.py) make on plain values before a
factorization: a matrix (or batch) of the right shape, finite entries, invertible to working
precision, positive definite. Messages name only numbers that do not depend on the machine's BLAS
(DESIGN.md rule 9), and read the same on every backend: a check computes on the matrix's device
(NumPy or torch through `xp`) and decides there; only a refusal brings the few numbers its
message names to the host (`B.to_numpy`).
"""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array import ops
from tapeml.array.limits import g3
from tapeml.syntax.errors import ShapeError, ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import describe, shape_text

_ND = np.ndarray


# ---- checks on plain values --------------------------------------------------------------------
def _shape(v):
    r = raw(v)
    t = type(r)
    if t is _ND:
        return r.shape
    return tuple(r.shape) if t in B.ARRAYS else np.shape(r)


def _size(v) -> int:
    return math.prod(_shape(v))


def _floated(x):
    """A bool or whole-number matrix takes part as numbers (as in arithmetic)."""
    r = raw(x)
    t = type(r)
    if t is _ND:
        if r.dtype.kind != "f":
            return ops.as_float(r.astype(np.float64))
    elif t in B.ARRAYS:
        be = B.of(r)
        if not be.is_float(r):
            return be.xp.astype(r, be.float_dtype())
    return x


def _matrix(fname, x, name="A", square=False):
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"{fname}(): {name} must be a matrix (or a batch of matrices), got {describe(x)}")
    if square and s[-1] != s[-2]:
        raise ShapeError(f"{fname}(): {name} must be square, got {shape_text(s)} "
                         f"({s[-2]} rows, {s[-1]} columns)")
    return _floated(x)


def _finite(fname, x, name="A"):
    r = raw(x)
    if type(r) in B.ARRAYS and type(r) is not _ND:
        be = B.of(r)
        if be.item(be.xp.all(be.xp.isfinite(r))):
            return
        r = be.to_numpy(r)          # refused: the message's numbers come from the host
    r = np.asarray(r)
    if r.size and not np.isfinite(r).all():
        at = tuple(int(i) for i in np.argwhere(~np.isfinite(r))[0])
        raise ValueErr(f"{fname}(): {name} holds {'nan' if np.isnan(r[at]) else 'inf'} (at "
                       f"[{', '.join(map(str, at))}]); linear algebra needs finite entries")


def _which(flat_index, batch):
    return "" if not batch else f" (matrix [{', '.join(map(str, np.unravel_index(flat_index, batch)))}] of the batch)"


def _sci(x):
    """3 significant digits with an exponent: 2.52e16, 8.39e6."""
    m, e = f"{x:.2e}".split("e")
    return f"{m.rstrip('0').rstrip('.')}e{int(e)}"


def _invertible(fname, x, name="A"):
    """Refuse a singular matrix, or one singular to working precision: condition number (largest /
    smallest singular value) at or past 1/eps of the dtype. The message names the bound, not the
    condition number: past 1/eps the smallest singular value is rounding noise (its digits, even
    whether it comes out as exactly 0, change with the BLAS kernel of the machine). The singular
    values are computed on the matrix's device; the k per matrix are decided on the host."""
    r = raw(x)
    if _size(r) == 0:               # an empty matrix, or an empty batch: nothing to refuse
        return
    if type(r) is _ND:
        s = np.linalg.svd(r, compute_uv=False)
        dtype = r.dtype
    else:
        be = B.of(r)
        s = be.to_numpy(be.xp.linalg.svdvals(r))
        dtype = be.np_dtype(r.dtype)
    big, small = s[..., 0], s[..., -1]
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(small > 0, big / np.where(small > 0, small, 1.0), np.inf)
    eps = np.finfo(dtype).eps
    worst = int(np.argmax(cond.reshape(-1)))
    c = float(cond.reshape(-1)[worst])
    if c * eps >= 1.0:
        raise ValueErr(f"{fname}(): {name}{_which(worst, tuple(r.shape[:-2]))} is singular to working precision: its "
                       f"condition number (largest / smallest singular value) is at or past 1/eps = "
                       f"{_sci(1 / eps)} for {dtype}, so a solution would be meaningless. For a "
                       f"least-squares answer use lstsq or pinv")


def _positive_definite(fname, s):
    """Refuse a symmetric matrix (or batch) `s` that is not positive definite, naming its smallest
    eigenvalue, or saying it is 0 to working precision. Whether LAPACK's Cholesky of a matrix that
    is singular to rounding succeeds depends on the machine's kernel ([1, 1; 1, 1] / 3 fails on
    NumPy's here and succeeds on torch's with a last pivot of 2e-17): a factor whose smallest pivot
    is rounding noise is judged by its eigenvalues instead, so every device and machine decide alike."""
    r = raw(s)
    if type(r) is _ND:
        xp, to_np, errors, dtype = np, np.asarray, np.linalg.LinAlgError, r.dtype
    else:
        be = B.of(r)
        xp, to_np, errors, dtype = be.xp, be.to_numpy, be.linalg_errors, be.np_dtype(r.dtype)
    n = r.shape[-1]
    try:
        L = xp.linalg.cholesky(r)
    except errors:
        L = None
    if L is not None:
        if 0 in tuple(r.shape):         # an empty matrix, or an empty batch of them
            return
        pivots = to_np(xp.linalg.diagonal(L)) ** 2          # the Cholesky pivots, each LAPACK found > 0
        scale = float(to_np(xp.max(xp.abs(r))))
        if float(pivots.min()) > 10 * n * np.finfo(dtype).eps * scale:
            return
    w = to_np(xp.linalg.eigvalsh(r))
    worst = int(np.argmin(w[..., 0].reshape(-1)))
    low = float(w[..., 0].reshape(-1)[worst])
    scale = float(np.abs(w.reshape(-1, w.shape[-1])[worst]).max())
    low = _noise_to_zero(low, scale, n, dtype)
    if low > 0:         # a pivot at the noise level, but every eigenvalue clear of it
        return
    shown = "0 to working precision" if low == 0 else g3(low)
    raise ValueErr(f"{fname}(): A{_which(worst, tuple(r.shape[:-2]))} is not positive definite: its smallest "
                   f"eigenvalue is {shown} (all must be > 0)") from None


def _real_eig(fname, a):
    """(w, V) of a square matrix (or batch) whose eigenvalues are all real, on its device; a
    complex eigenvalue is refused, naming one (forward only: no tape)."""
    r = raw(a)
    if type(r) is _ND:
        w, v = np.linalg.eig(r)
        if np.iscomplexobj(w):
            _refuse_complex(fname, w)
            w, v = w.real, v.real
        return np.ascontiguousarray(w), np.ascontiguousarray(v)
    be = B.of(r)
    xp = be.xp
    w, v = xp.linalg.eig(r)         # complex on torch, whatever the eigenvalues
    if not be.item(xp.all(xp.imag(w) == 0)):
        _refuse_complex(fname, be.to_numpy(w))
    return xp.real(w), xp.real(v)


def _refuse_complex(fname, w):
    bad = w[np.abs(w.imag) > 0]
    if bad.size:
        z = bad.reshape(-1)[0]
        scale, n = float(np.abs(w).max()), w.shape[-1]
        re_, im = (_noise_to_zero(v, scale, n, w.real.dtype) for v in (float(z.real), float(z.imag)))
        raise ValueErr(f"{fname}(): A has complex eigenvalues (e.g. {g3(re_)} {'+' if im >= 0 else '-'} "
                       f"{g3(abs(im))}i) and tapeml has no complex numbers; for a symmetric matrix use eigh")


def _noise_to_zero(x: float, scale: float, n: int, dtype) -> float:
    """x, or 0 when it is within rounding of 0 for a computation of size n at this scale (its
    digits would be noise that changes with the machine's BLAS kernel)."""
    return 0.0 if abs(x) <= 10 * n * np.finfo(dtype).eps * scale else x


def _zeros(shape, like):
    """Zeros of `shape` in the session's float type, on the device of `like`."""
    r = raw(like)
    if type(r) in B.ARRAYS and type(r) is not _ND:
        be = B.of(r)
        return be.xp.zeros(shape, dtype=be.float_dtype(), device=r.device)
    return ops.as_float(np.zeros(shape))
