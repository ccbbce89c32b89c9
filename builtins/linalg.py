"""Linear algebra: inv, solve, det, slogdet, trace, diag, norm, cholesky, qr, svd, eigh, eig, pinv,
lstsq, outer, kron.

The factorizations are primitives of lang/array/linalg_ops.py (NumPy's LAPACK forward, a VJP written with
primitives); trace, diag, norm, lstsq, outer and kron are composites of primitives. The checks
(square, singular, positive definite, finite) run here, on the plain values, before any primitive,
so a bad matrix is a clear LangError and never a NaN.
"""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import linalg_ops as la
from tapeml.array import limits, ops
from tapeml.builtins.registry import P, builtin
from tapeml.builtins.linalg_checks import (_finite, _floated, _invertible, _matrix, _positive_definite, _real_eig,
                                           _shape, _size, _zeros)
from tapeml.builtins.util import axis
from tapeml.syntax.errors import ShapeError, TypeErr, ValueErr
from tapeml.array.limits import check_shape, g3
from tapeml.array.tape import Box, raw
from tapeml.array.values import describe, shape_text

CAT = "Linear algebra"
A_SQ = P("A", "array", doc="a square matrix, or a batch of them", shape="[..., n, n]")
A_ANY = P("A", "array", doc="a matrix, or a batch of them", shape="[..., m, n]")
BATCH = "A batch `[B, n, n]` (any number of leading axes) is handled matrix by matrix."


CONV_LINK = "See docs/language.md (Linear algebra) for the conventions shared by these pages."


# ---- inv, solve, det, slogdet ------------------------------------------------------------------
@builtin("inv", CAT, "The inverse of a square matrix.", [A_SQ], returns="[..., n, n]", differentiable=True,
         what="inv(A) is the matrix X with A @ X = I. To solve a system A x = b, `solve(A, b)` is faster and more "
              "accurate than inv(A) @ b. " + BATCH,
         how="NumPy's `linalg.inv` (LAPACK getrf/getri). Before inverting, the condition number "
             "(largest / smallest singular value) is checked against 1/eps of the dtype: a matrix at or past it "
             "is refused, never answered with inf or NaN. The VJP is -A^-T g A^-T (the matrix cookbook, eq. 59). "
             "Conventions: NumPy, PyTorch and MATLAB agree; MATLAB only warns for a near-singular matrix, "
             "tapeml refuses it as NumPy refuses an exactly singular one.",
         errors=["ShapeError when A is not a square matrix (names its rows and columns)",
                 "ValueError when A is singular or singular to working precision (its condition number at or "
                 "past 1/eps of the float type)",
                 "ValueError when A holds nan or inf"],
         examples=["inv([4, 7; 2, 6])", "A = [2, 1; 1, 3]\nround(A @ inv(A), 10)  # I, up to rounding noise", "inv(stack([2, 0; 0, 4], [1, 1; 0, 1]))"])
def inv_(A):
    A = _matrix("inv", A, square=True)
    _finite("inv", A)
    _invertible("inv", A)
    return la.inv(A)


def _solve_shapes(A, b):
    sa, sb = _shape(A), _shape(b)
    if len(sa) < 2 or sa[-1] != sa[-2]:
        raise ShapeError(f"solve(): A must be a square matrix (or a batch of them), got {shape_text(sa)}; "
                         f"b is {shape_text(sb)}. For a non-square A use lstsq(A, b)")
    n = sa[-1]
    if len(sb) == 0:
        raise ShapeError(f"solve(): b must be a vector or a matrix with {n} rows, got a number; A is {shape_text(sa)}")
    vec = len(sb) == 1 or sb == sa[:-1]
    rows = sb[-1] if vec else sb[-2]
    ok = rows == n
    if ok and not vec:
        try:
            np.broadcast_shapes(sa[:-2], sb[:-2])
        except ValueError:
            ok = False
    if not ok:
        raise ShapeError(f"solve(): A is {shape_text(sa)} and b is {shape_text(sb)}: b must have "
                         f"{n} {'entries' if vec else 'rows'} (A's size)")
    return vec


@builtin("solve", CAT, "The solution x of the linear system A x = b.",
         [A_SQ, P("b", "array", doc="a vector (one right-hand side), or a matrix whose columns are right-hand sides",
                  shape="[..., n] or [..., n, k]")],
         returns="the shape of b", differentiable=True,
         what="solve(A, b) is the x with A @ x = b: b a vector gives a vector, b a matrix solves for each column. "
              "A batch of systems: A [B, n, n] with b [B, n] (one vector per matrix) or b [B, n, k].",
         how="NumPy's `linalg.solve` (LAPACK gesv, LU with partial pivoting), after the condition-number check "
             "that `inv` makes. b is a vector when it has one axis or when its shape is A's shape without the last "
             "axis (PyTorch's rule; NumPy 2 reads a 1-D b only as a vector). The VJP: gb = solve(A^T, g), "
             "gA = -gb x^T (the matrix cookbook). MATLAB writes `A \\ b`; NumPy and PyTorch `solve(A, b)`, as here.",
         errors=["ShapeError when A is not square or b's rows do not match A's size (names both shapes)",
                 "ValueError when A is singular or singular to working precision (its condition number at or "
                 "past 1/eps of the float type)",
                 "ValueError when A or b holds nan or inf"],
         examples=["solve([3, 1; 1, 2], [9, 8])", "solve([2, 0; 0, 4], [2, 4; 6, 8])",
                   "solve(stack(eye(2), 2 * eye(2)), [1, 2; 3, 4])"])
def solve_(A, b):
    vec = _solve_shapes(A, b)
    A, b = _floated(A), _floated(b)
    _finite("solve", A)
    _finite("solve", b, "b")
    _invertible("solve", A)
    return la.solve(A, b, vec=vec)


@builtin("det", CAT, "The determinant of a square matrix.", [A_SQ], returns="a number, or [...] for a batch",
         differentiable=True,
         what="det(A): the factor by which A scales volumes; 0 for a singular matrix. For large matrices "
              "the determinant overflows or underflows easily: slogdet gives its logarithm. " + BATCH,
         how="NumPy's `linalg.det` (LU). The VJP is g adj(A)^T, the adjugate computed from the SVD, "
             "A = U diag(s) Vh: adj(A) = det(U) det(Vh) Vh^T diag(prod_{j != i} s_j) U^T, so the gradient is "
             "right at singular matrices too (where det(A) inv(A)^T, autograd's form, is undefined). The second "
             "derivative needs an invertible A. NumPy, PyTorch and MATLAB agree.",
         errors=["ShapeError when A is not a square matrix", "ValueError when A holds nan or inf"],
         examples=["det([1, 2; 3, 4])", "det([1, 2; 2, 4])", "det(eye(3) * 2)"])
def det_(A):
    A = _matrix("det", A, square=True)
    _finite("det", A)
    return la.det(A)


@builtin("slogdet", CAT, "The sign and the log of the absolute value of the determinant, as a tuple.", [A_SQ],
         returns="(sign, logabsdet): two numbers, or two [...] for a batch", differentiable=True,
         what="slogdet(A) returns (sign, logabsdet) with det(A) = sign * exp(logabsdet), without the overflow of "
              "det for large matrices: the log-likelihood of a Gaussian needs log det of its covariance. "
              "A singular matrix gives (0, -inf). " + BATCH,
         how="NumPy's `linalg.slogdet`, returned as a tuple as NumPy and PyTorch do (MATLAB has no slogdet; "
             "`log(abs(det(A)))` there). The sign has no gradient; the VJP of logabsdet is g A^-T.",
         errors=["ShapeError when A is not a square matrix", "ValueError when A holds nan or inf"],
         examples=["slogdet([1, 2; 3, 4])", "s, l = slogdet(eye(50) * 10)\nl"])
def slogdet_(A):
    A = _matrix("slogdet", A, square=True)
    _finite("slogdet", A)
    return la.slogdet(A)


# ---- trace, diag ----------------------------------------------------------------------------
def _diag_index(m, n, k):
    if k >= 0:
        length = max(0, min(m, n - k))
        r = np.arange(length)
        return r, r + k
    length = max(0, min(m + k, n))
    r = np.arange(length)
    return r - k, r


@builtin("trace", CAT, "The sum of the main diagonal.", [P("A", "array", doc="a matrix (any rows and columns), or a batch",
                                                            shape="[..., m, n]")],
         returns="a number, or [...] for a batch", differentiable=True,
         what="trace(A) = A[0, 0] + A[1, 1] + ...; for a rectangular matrix, over the min(m, n) diagonal "
              "entries (as NumPy). A batch gives one trace per matrix.",
         how="Composed from the `index` and `sum` primitives, so its gradient is the identity pattern. "
             "NumPy's `trace` (axes -2, -1 for a batch here; NumPy's default is axes 0, 1), PyTorch's `trace` "
             "(2-D only) and MATLAB's `trace` (square only) agree on a square matrix.",
         errors=["ShapeError when A is not a matrix"],
         examples=["trace([1, 2; 3, 4])", "trace(eye(5))"])
def trace_(A):
    A = _matrix("trace", A)
    s = _shape(A)
    r, c = _diag_index(s[-2], s[-1], 0)
    return ops.sum_(ops.index(A, idx=(Ellipsis, r, c)), dim=-1)


@builtin("diag", CAT, "A vector's diagonal matrix, or a matrix's diagonal as a vector.",
         [P("x", "array", doc="a vector (builds a matrix) or a matrix (reads its diagonal)", shape="[n] or [m, n]"),
          P("k", "int", 0, doc="which diagonal: 0 the main one, k > 0 above it, k < 0 below it")],
         returns="[n + |k|, n + |k|] for a vector; a vector for a matrix", differentiable=True,
         what="diag(v) is the square matrix with v on its diagonal and 0 elsewhere; diag(A) is the vector of A's "
              "diagonal. With k, the k-th diagonal above (k > 0) or below (k < 0) the main one.",
         how="NumPy's and MATLAB's `diag`, with both directions; PyTorch's `diag` too (its batched "
             "`diag_embed` / `diagonal` are not needed here: diag refuses 3 or more axes). Composed from the "
             "`scatter_add` and `index` primitives, whose VJPs are each other.",
         errors=["ShapeError when x is a number or has more than two axes",
                 "ValueError when a vector's (n + |k|) x (n + |k|) matrix would pass the size limit (checked "
                 "before anything is allocated); a matrix's diagonal past its corner is empty, whatever k"],
         examples=["diag([1, 2, 3])", "diag([1, 2, 3; 4, 5, 6; 7, 8, 9])", "diag([1, 2], 1)",
                   "diag([1, 2, 3; 4, 5, 6], -1)"])
def diag_(x, k):
    x = _floated(x)
    s = _shape(x)
    if len(s) == 1:
        n = s[0] + abs(k)
        side = str(n) if n < 10 ** 16 else g3(n)
        check_shape(f"diag() of {describe(x)} on diagonal {k} (a {side}x{side} matrix)", (n, n))
        r, c = _diag_index(n, n, k)
        return ops.scatter_add(x, idx=(r, c), shape=(n, n))
    if len(s) == 2:
        r, c = _diag_index(s[0], s[1], k)
        return ops.index(x, idx=(r, c))
    raise ShapeError(f"diag(): x must be a vector or a matrix, got {describe(x)}")


# ---- norm -----------------------------------------------------------------------------------
def _vector_norm(x, p, dim, keepdims, rescale=True):
    """The p-norm along dim. p = 2 and the other p besides 1 and inf sum powers of |x| that overflow
    or underflow long before the norm does (1e154 and 1e-154 for p = 2 in float64, 1e19 and 1e-19 in
    float32): those slices are computed on x scaled by a power of 2 (ops.rescaled), exactly."""
    if p == 1:
        return ops.sum_(ops.abs_(x), dim=dim, keepdims=keepdims)
    if p == math.inf:
        return ops.amax(ops.abs_(x), dim=dim, keepdims=keepdims)
    powers = ops.mul(x, x) if p == 2 else ops.pow_(ops.abs_(x), float(p))
    total = ops.sum_(powers, dim=dim, keepdims=keepdims)
    r = ops.sqrt(total) if p == 2 else ops.pow_(total, 1.0 / p)
    if not rescale or not _shape(x):
        return r
    s = _shape(x)
    kept = ops.kept(raw(total), s, dim)
    out = ops.rescaled(lambda t, e: _vector_norm(t, p, dim, True, False), x, dim, r, kept)
    if out is r:
        return r
    return out if keepdims else ops.unkept(out, ops.shape_of(r))


def _singular_values(fname, A):
    _finite(fname, A)
    return la.svd(A)[1]


@builtin("norm", CAT, "The length of a vector, or a matrix norm (Frobenius by default).",
         [P("x", "array", doc="a vector, a matrix, or any array", shape="any"),
          P("p", "any", None, doc='which norm: none (2-norm / Frobenius), a number p > 0, inf, or for a matrix '
                                  '"fro", "nuc", 1, 2, inf'),
          P("dim", "int", None, doc="the axis along which to take vector norms (e.g. -1: one norm per row)"),
          P("keepdims", "bool", False, doc="keep the reduced axes with length 1")],
         returns="a number, or x with dim removed", differentiable=True,
         what="norm(v) is the Euclidean length sqrt(sum(v^2)); norm(A) of a matrix is the Frobenius norm "
              "sqrt(sum(A^2)) (as NumPy and PyTorch; MATLAB's norm(A) is the spectral norm, norm(A, 2) here). "
              "Vectors: p = 1 (sum of |v|), 2, inf (max |v|), or any p > 0 ((sum |v|^p)^(1/p)). Matrices: "
              '"fro", "nuc" (sum of singular values), 1 (max column sum of |A|), inf (max row sum), 2 (largest '
              "singular value, NumPy's ord=2). With dim, vector norms along that axis of any array: "
              "norm(X, dim=-1) is the length of each row (a gradient's norm per row). An array with 3 or more "
              "axes and no dim: the 2-norm of all its elements (PyTorch's linalg.norm).",
         how="Composed from primitives (sqrt, sum, abs, max, pow; the svd primitive for 2 and \"nuc\"). "
             "The kink convention of the guide: the gradient of the 2-norm at 0 is 0 (a subgradient, not NaN: "
             "0 x inf = 0 in the backward pass), abs'(0) = 0 for p = 1, ties of p = inf split evenly. The "
             "gradient of the spectral norm is u1 v1^T, valid where the largest singular value is simple. "
             "The 2-norm is sqrt(sum(x^2)) as in NumPy; where that sum of squares (or of |x|^p) would overflow "
             "or underflow (entries beyond about 1e154 or below 1e-154, 1e19 and 1e-19 in float32) it is "
             "taken on x scaled by a power of 2 and scaled back, exactly: norm([3e200, 4e200]) is 5e200 and "
             "the gradient at [1e-200, -2e-200] is [0.447, -0.894], where NumPy and PyTorch give inf and 0. "
             "Every norm of an empty array is 0 (NumPy raises for p = inf and the matrix norms).",
         errors=["ValueError for a p that is not one of those listed (0, negative, or a string other than "
                 '"fro"/"nuc")', "ValueError when dim is out of range",
                 "ValueError for a matrix norm p other than none on an array of 3 or more axes without dim"],
         examples=["norm([3, 4])", "norm([1, 2; 3, 4])", "norm([3, -4], 1)\nnorm([3, -4], 1 / 0)",
                   "norm([1, 2; 3, 4], 2)", "norm([3, 4; 6, 8], dim=1)", "grad(norm, [0, 0])",
                   "norm([3e200, 4e200])\ngrad(norm, [1e-200, -2e-200])"])
def norm_(x, p, dim, keepdims):
    x = _floated(x)
    if isinstance(raw(p), bool) or not (p is None or isinstance(raw(p), (int, float, str))):
        raise TypeErr(f"norm(): p must be none, a number or a string, got {describe(p)}")
    if type(p) is Box:
        raise TypeErr("norm(): p is being differentiated; write stop_gradient(...) around it")
    s = _shape(x)
    if isinstance(p, str):
        if p not in ("fro", "nuc"):
            raise ValueErr(f'norm(): p must be none, a number > 0, inf, "fro" or "nuc", got "{p}"')
        if dim is not None or len(s) != 2:
            raise ValueErr(f'norm(): p = "{p}" is a matrix norm: x must be a matrix and dim none, got {describe(x)}')
    elif p is not None and not (p > 0):
        raise ValueErr(f"norm(): p must be > 0 (or inf), got {p}")
    if _size(x) == 0:       # every norm of an empty array is 0 (NumPy's max of nothing raises)
        d = axis(x, dim) if dim is not None else None
        shape = np.shape(np.sum(np.zeros(s), axis=d, keepdims=keepdims))     # (no element: no memory)
        return _zeros(shape, x) if shape else 0.0
    if dim is not None or len(s) < 2 or (len(s) > 2 and p is None):
        if isinstance(p, str):
            raise ValueErr(f'norm(): p = "{p}" needs a matrix')
        if dim is None and len(s) > 2:
            r = _vector_norm(ops.reshape(x, shape=(-1,)), 2.0, None, False)
            return ops.reshape(r, shape=(1,) * len(s)) if keepdims else r
        d = axis(x, dim) if dim is not None else None
        if len(s) == 0:
            x = ops.reshape(x, shape=(1,))
            r = _vector_norm(x, 2.0 if p is None else float(p), None, False)
            return r
        return _vector_norm(x, 2.0 if p is None else float(p), d, keepdims)
    if len(s) > 2:
        raise ValueErr(f"norm(): a matrix norm (p = {p}) needs a matrix, got {describe(x)}; give dim for "
                       f"vector norms along an axis")
    if p is None or p == "fro":
        r = _vector_norm(x, 2.0, None, False)
    elif p == "nuc":
        r = ops.sum_(_singular_values("norm", x))
    elif p == 1:
        r = ops.amax(ops.sum_(ops.abs_(x), dim=0))
    elif p == math.inf:
        r = ops.amax(ops.sum_(ops.abs_(x), dim=1))
    elif p == 2:
        r = ops.amax(_singular_values("norm", x))
    else:
        raise ValueErr(f'norm(): a matrix norm is none, "fro", "nuc", 1, 2 or inf, got p = {limits.g3(p)}; give dim '
                       f"for vector p-norms along an axis")
    return ops.reshape(r, shape=(1, 1)) if keepdims else r


# ---- factorizations -------------------------------------------------------------------------
def _sym(A):
    return ops.mul(ops.add(A, ops.transpose(A)), 0.5)


@builtin("cholesky", CAT, "The lower-triangular Cholesky factor L of a symmetric positive definite matrix: A = L L'.",
         [P("A", "array", doc="a symmetric positive definite matrix, or a batch", shape="[..., n, n]")],
         returns="[..., n, n], lower triangular", differentiable=True,
         what="cholesky(A) is the lower-triangular L with positive diagonal and L @ L' = A: the square root of a "
              "covariance matrix (to sample correlated noise), and the fastest way to solve with one. " + BATCH,
         how="NumPy's `linalg.cholesky` (LAPACK potrf) on the symmetric part (A + A')/2, which is A itself for a "
             "symmetric A (NumPy and PyTorch read only the lower triangle; here a tiny asymmetry from rounding "
             "cannot matter). The factor is lower, as NumPy and PyTorch (`upper=false`); MATLAB's chol(A) returns "
             "the upper factor R = L' (chol(A, \"lower\") for L): write cholesky(A)' for MATLAB's. The VJP is "
             "Murray's (arXiv:1602.07527): S = L^-T phi(L' gL) L^-1, gA = (S + S')/2, phi the lower triangle "
             "with half the diagonal; the gradient is symmetric, as PyTorch's.",
         errors=["ShapeError when A is not a square matrix",
                 "ValueError when A is not positive definite (names its smallest eigenvalue, or says it is 0 to "
                 "working precision)",
                 "ValueError when A holds nan or inf"],
         examples=["L = cholesky([4, 2; 2, 3])\nL", "L = cholesky([4, 2; 2, 3])\nL @ L'"])
def cholesky_(A):
    A = _matrix("cholesky", A, square=True)
    _finite("cholesky", A)
    S = _sym(A)
    _positive_definite("cholesky", S)
    return la.cholesky(S)


@builtin("qr", CAT, "The reduced QR factorization A = Q R, as a tuple (Q, R).", [A_ANY],
         returns="(Q, R): Q [..., m, k] with orthonormal columns, R [..., k, n] upper triangular, k = min(m, n)",
         differentiable=True,
         what="qr(A) returns (Q, R) with Q' Q = I, R upper triangular and Q @ R = A: an orthonormal basis of A's "
              "columns (Gram-Schmidt done stably), and least squares by R x = Q' b. Write `Q, R = qr(A)`. " + BATCH,
         how="NumPy's `linalg.qr(mode=\"reduced\")` (LAPACK geqrf, Householder): the reduced form, as NumPy's and "
             "PyTorch's default; MATLAB's `[Q, R] = qr(A)` is the full form and `qr(A, 0)` / \"econ\" the reduced "
             "one, with the same two results as a tuple here. R's diagonal is made >= 0 (flipping the matching "
             "columns of Q): the unique QR of a full-rank A, continuous in A; NumPy, PyTorch and MATLAB return "
             "LAPACK's signs (often a negative diagonal), which jump where a column is already zero below the "
             "diagonal. The VJP (PyTorch's, m >= n): gA = (gQ + Q sym(triu(gR R' - Q' gQ))) R^-T; "
             "for a wide A (m < n) the gradient is not implemented and differentiating it is an error.",
         errors=["ShapeError when A is not a matrix", "ValueError when A holds nan or inf",
                 "ValueError when a wide A (fewer rows than columns) is differentiated"],
         examples=["Q, R = qr([3, 1; 4, 2])\nQ\nR", "Q, R = qr([1, 2; 3, 4; 5, 6])\nround(Q' @ Q, 10)  # I, up to rounding noise\nQ @ R"])
def qr_(A):
    A = _matrix("qr", A)
    _finite("qr", A)
    m, n = _shape(A)[-2:]
    if m < n and type(A) is Box and _size(A) == 0:
        A = raw(A)          # an empty batch: nothing depends on A, its gradient is the empty one
    if m < n and type(A) is Box:
        raise ValueErr(f"qr(): the gradient of qr is implemented for m >= n (tall or square), A is "
                       f"{shape_text(_shape(A))}; differentiate qr(A')' instead or take qr of the first m columns")
    return la.qr(A)


@builtin("svd", CAT, "The reduced singular value decomposition A = U diag(S) Vh, as a tuple (U, S, Vh).", [A_ANY],
         returns="(U, S, Vh): U [..., m, k], S [..., k] descending, Vh [..., k, n], k = min(m, n)",
         differentiable=True,
         what="svd(A) returns (U, S, Vh) with U @ diag(S) @ Vh = A, the columns of U and rows of Vh orthonormal "
              "and S >= 0 in descending order: ranks, low-rank approximations, the spectral norm. Write "
              "`U, S, Vh = svd(A)`. " + BATCH,
         how="NumPy's `linalg.svd(full_matrices=False)` (LAPACK gesdd), the reduced form; the third result is "
             "Vh = V' as in NumPy and PyTorch's `linalg.svd` (MATLAB's `[U, S, V] = svd(A, \"econ\")` returns V "
             "and a diagonal matrix S; PyTorch's older `torch.svd` returns V too): V = Vh', diag(S) for MATLAB's S. "
             "Signs are fixed so that the largest-magnitude entry of each column of U is positive (the row of Vh "
             "flips with it): LAPACK's signs, which NumPy, PyTorch and MATLAB return, can jump under a tiny change "
             "of A, and a gradient needs continuous factors; U @ diag(S) @ Vh is the same. The VJP is HIPS autograd's grad_svd (reduced): the "
             "gradient through S alone is U diag(gS) Vh and always valid; through U or Vh it needs distinct "
             "(and, for a non-square A, nonzero) singular values, because the derivative of a singular vector "
             "of a repeated singular value does not exist (terms 1/(s_j^2 - s_i^2); for a matrix whose "
             "singular values are beyond 2^500 or below 2^-500 they are taken scaled by a power of 2, so the "
             "squares neither overflow nor underflow).",
         errors=["ShapeError when A is not a matrix", "ValueError when A holds nan or inf"],
         examples=["U, S, Vh = svd([3, 0; 4, 5])\nS", "U, S, Vh = svd([1, 2; 3, 4; 5, 6])\nU @ diag(S) @ Vh"])
def svd_(A):
    A = _matrix("svd", A)
    _finite("svd", A)
    return la.svd(A)


@builtin("eigh", CAT, "Eigenvalues (ascending) and eigenvectors of a symmetric matrix, as a tuple (w, V).",
         [P("A", "array", doc="a symmetric matrix, or a batch", shape="[..., n, n]")],
         returns="(w, V): w [..., n] ascending, V [..., n, n] with the eigenvectors as columns", differentiable=True,
         what="eigh(A) of a symmetric A returns (w, V) with A @ V = V @ diag(w), V orthonormal and w ascending: "
              "principal components, the curvature of a quadratic. Write `w, V = eigh(A)`. " + BATCH,
         how="NumPy's `linalg.eigh` (LAPACK syevd) on the symmetric part (A + A')/2: the same for a symmetric A "
             "(NumPy and PyTorch read only the lower triangle). Ascending as NumPy and PyTorch; MATLAB's "
             "`[V, D] = eig(A)` returns the vectors first and a diagonal matrix D (diag(w) here). Each "
             "eigenvector's largest-magnitude entry is made positive (LAPACK's signs, which the others return, "
             "can jump under a tiny change of A; a gradient needs continuous factors). The VJP (HIPS autograd's grad_eigh, symmetrized as PyTorch's): "
             "gA = sym(V (diag(gw) + F o V' gV) V'), F_ij = 1/(w_j - w_i): through w always valid; through V it "
             "needs distinct eigenvalues.",
         errors=["ShapeError when A is not a square matrix", "ValueError when A holds nan or inf"],
         examples=["w, V = eigh([4, 1, 0; 1, 2, 1; 0, 1, -1])\nw\nround(V @ diag(w) @ V', 10)", "w, V = eigh([2, 1; 1, 2])\nw\nV"])
def eigh_(A):
    A = _matrix("eigh", A, square=True)
    _finite("eigh", A)
    return la.eigh(_sym(A))


@builtin("eig", CAT, "Eigenvalues and eigenvectors of a general square matrix whose eigenvalues are real (forward only).",
         [A_SQ], returns="(w, V): w [..., n], V [..., n, n] with unit eigenvectors as columns",
         what="eig(A) returns (w, V) with A @ V = V @ diag(w) for a matrix that need not be symmetric. tapeml has "
              "no complex numbers, so a matrix with a complex eigenvalue (a rotation) is refused with an error "
              "naming one; for a symmetric matrix use eigh (sorted, faster, differentiable). Not differentiable: "
              "inside grad it is an error.",
         how="NumPy's `linalg.eig` (LAPACK geev). The order is LAPACK's, not sorted (as NumPy and MATLAB; "
             "MATLAB's `[V, D] = eig(A)` has the vectors first and D = diag(w)); PyTorch's `linalg.eig` always "
             "returns complex tensors. Eigenvectors have length 1, signs as LAPACK gives them.",
         errors=["ShapeError when A is not a square matrix",
                 "ValueError when A has complex eigenvalues (names one)", "ValueError when A holds nan or inf",
                 "ValueError when differentiated (eig is forward only)"],
         examples=["w, V = eig([2, 1; 0, 3])\nw\nV", "w, V = eig([1, 2; 2, 1])\nw"])
def eig_(A):
    if type(A) is Box:
        raise ValueErr("eig() is forward only: it has no gradient; for a symmetric matrix use eigh, "
                       "or stop_gradient(...) around the argument")
    A = _matrix("eig", A, square=True)
    _finite("eig", A)
    w, v = _real_eig("eig", A)
    return (ops.python_scalar(w), v)


@builtin("pinv", CAT, "The Moore-Penrose pseudo-inverse.", [A_ANY], returns="[..., n, m]", differentiable=True,
         what="pinv(A) is the n x m matrix X with A X A = A, X A X = X and A X, X A symmetric: the inverse of a "
              "square invertible A, and for any A the map b -> least-squares solution of smallest length "
              "(pinv(A) @ b). " + BATCH,
         how="NumPy's `linalg.pinv` (SVD; singular values below max(m, n) * eps * the largest are treated as 0, "
             "NumPy 2's default rtol, as PyTorch's `linalg.pinv` and MATLAB's `pinv`). The VJP (Golub & Pereyra "
             "1973): gA = -X' g X' + (I - A X) g' X X' + X' X g' (I - X A), valid where the rank does not "
             "change (full rank, or a constant rank).",
         errors=["ShapeError when A is not a matrix", "ValueError when A holds nan or inf"],
         examples=["pinv([1, 2; 3, 4; 5, 6])", "A = [1, 2; 3, 4; 5, 6]\nround(A @ pinv(A) @ A, 10)", "pinv([1, 1; 1, 1])"])
def pinv_(A):
    A = _matrix("pinv", A)
    _finite("pinv", A)
    return la.pinv(A)


@builtin("lstsq", CAT, "The least-squares solution x of A x = b (the solution only).",
         [P("A", "array", doc="a matrix (any rows and columns; not a batch)", shape="[m, n]"),
          P("b", "array", doc="a vector, or a matrix of right-hand sides", shape="[m] or [m, k]")],
         returns="[n] or [n, k]", differentiable=True,
         what="lstsq(A, b) is the x minimizing |A x - b| (of smallest length when several do): linear regression "
              "is lstsq(X, y). It returns the solution only, as MATLAB's `A \\ b` and PyTorch's "
              "`linalg.lstsq(A, b).solution`; NumPy's `lstsq` returns a tuple (x, residuals, rank, "
              "singular values): those are norm(A @ x - b)^2, rank = sum(S > tol) from svd(A).",
         how="pinv(A) @ b, composed from the pinv and matmul primitives (the SVD with NumPy's cutoff, so a "
             "rank-deficient A gives the minimum-norm solution, as NumPy's and MATLAB's lsqminnorm; MATLAB's "
             "`A \\ b` instead gives a basic solution with zeros). The gradient is that of pinv: valid where "
             "A's rank does not change.",
         errors=["ShapeError when A is not a matrix or b's rows do not match A's (names both shapes)",
                 "ValueError when A or b holds nan or inf"],
         examples=["lstsq([1, 1; 1, 2; 1, 3], [1, 2, 2])", "lstsq([1, 1; 1, 1], [2, 2])"])
def lstsq_(A, b):
    sa, sb = _shape(A), _shape(b)
    if len(sa) != 2 or len(sb) not in (1, 2) or sb[0] != sa[0]:
        raise ShapeError(f"lstsq(): A is {shape_text(sa)} and b is {shape_text(sb)}: A must be a matrix and b a "
                         f"vector or matrix with as many rows as A")
    _result_fits("lstsq", (sa, sb), (sa[1],) + sb[1:])
    A, b = _floated(A), _floated(b)
    _finite("lstsq", A)
    _finite("lstsq", b, "b")
    return ops.matmul(la.pinv(A), b)


# ---- products -------------------------------------------------------------------------------
@builtin("outer", CAT, "The outer product of two vectors: x[i] * y[j].",
         [P("x", "array", doc="a vector (a matrix is flattened, row-major)", shape="[n]"),
          P("y", "array", doc="a vector (a matrix is flattened)", shape="[m]")],
         returns="[n, m]", differentiable=True,
         what="outer(x, y)[i, j] = x[i] * y[j]: a rank-one matrix, e.g. the gradient of a dense layer's weight "
              "for one example.",
         how="NumPy's `outer` (it flattens its arguments, as here; PyTorch's `outer` takes vectors only; MATLAB "
             "writes `x(:) * y(:).'`). Composed from reshape and the broadcasting mul primitive (so the size "
             "guard sees the n x m result).",
         errors=["TypeError when x or y is not a number or matrix"],
         examples=["outer([1, 2, 3], [1, 10])"])
def outer_(x, y):
    x, y = _floated(x), _floated(y)
    sx, sy = _shape(x), _shape(y)
    _result_fits("outer", (sx, sy), (math.prod(sx), math.prod(sy)))
    return ops.mul(ops.reshape(x, shape=(-1, 1)), ops.reshape(y, shape=(1, -1)))


def _result_fits(fname, shapes, out):
    """The size guard, said of this builtin and its result (before its steps, which would name an
    internal product of other shapes)."""
    if math.prod(out) > limits.max_elements():
        raise limits.elements_error(f"{fname}() of {' and '.join(shape_text(s) for s in shapes)} (a result of "
                                    f"{shape_text(out)})", math.prod(out))


@builtin("kron", CAT, "The Kronecker product of two vectors or matrices.",
         [P("a", "array", doc="a number, vector or matrix", shape="[m, n]"),
          P("b", "array", doc="a number, vector or matrix", shape="[p, q]")],
         returns="[m*p, n*q] (a vector when both are vectors)", differentiable=True,
         what="kron(a, b) is the block matrix whose block (i, j) is a[i, j] * b: structured weight matrices, "
              "2-D separable filters.",
         how="NumPy's, MATLAB's and PyTorch's `kron` (a vector is a 1 x n row when the other is a matrix). "
             "Composed as reshape(a[m, 1, n, 1] * b[1, p, 1, q], [m*p, n*q]) from the mul and reshape primitives.",
         errors=["ShapeError when a or b has more than two axes"],
         examples=["kron([1, 2; 3, 4], [1, 1; 1, 1])", "kron([1, 2], [1, 10, 100])"])
def kron_(a, b):
    a, b = _floated(a), _floated(b)
    sa, sb = _shape(a), _shape(b)
    if len(sa) > 2 or len(sb) > 2:
        raise ShapeError(f"kron(): a and b must be numbers, vectors or matrices, got {shape_text(sa)} and "
                         f"{shape_text(sb)}")
    vec = len(sa) < 2 and len(sb) < 2
    ma, na = (1, math.prod(sa)) if len(sa) < 2 else sa
    mb, nb = (1, math.prod(sb)) if len(sb) < 2 else sb
    _result_fits("kron", (sa, sb), (na * nb,) if vec else (ma * mb, na * nb))
    r = ops.mul(ops.reshape(a, shape=(ma, 1, na, 1)), ops.reshape(b, shape=(1, mb, 1, nb)))
    return ops.reshape(r, shape=(na * nb,) if vec else (ma * mb, na * nb))
