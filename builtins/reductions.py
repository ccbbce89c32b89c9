"""Reductions, sorting and search (the category "Reductions & sorting"): prod, cumsum, cumprod,
median, var, std, logsumexp, quantile, cov, corrcoef, numel, sort, argsort, topk, nonzero. The
differentiable ones call the primitive table (lang/array/reduce_ops.py: prod, cumsum, cumprod,
logsumexp, and take_along, the gather that sort, topk, median and quantile are made of)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B, ops
from tapeml.array.backend import Matrix, xp_of
from tapeml.array.primitive_table import new_array
from tapeml.builtins.math import positions
from tapeml.builtins.registry import P, builtin, one_of
from tapeml.builtins.vocabulary import DIM, KEEPDIMS, X
from tapeml.builtins.util import axis
from tapeml.syntax.errors import TypeErr, ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import describe
from tapeml.array.printer import format_value

CAT = "Reductions & sorting"
DIM_ERR = "ValueError when dim is out of range for x"


def _array(name, x):
    r = raw(x)
    if not isinstance(r, Matrix):
        r = np.asarray(ops.bools_as_floats(r), dtype=np.float64)
    return r


def _number(r):
    """A result of one element as a number (a Python float, as sum's, on every backend: a 0-d
    float32 matrix would be no number, and added to one it would round it to float32): the sum of
    its one element, which is that element exactly."""
    return ops.sum_(r)


def _flat(x, dim, keepdims):
    """(x, dim) to reduce: dim none flattens x (the reduction then takes all elements)."""
    if dim is None:
        return ops.reshape(x, shape=(-1,)), 0
    return x, axis(x, dim)


def _finish(r, shape, dim, keepdims):
    """A result reduced with keepdims=True along `dim` into the shape asked for."""
    if keepdims:
        if dim is None:
            return ops.reshape(r, shape=(1,) * len(shape)) if shape else r
        return r
    if dim is None:
        return _number(r)
    d = axis(r, dim)
    out = tuple(n for i, n in enumerate(ops.shape_of(r)) if i != d)
    return ops.reshape(r, shape=out)


# ---- products and cumulative operations -----------------------------------------------------------
@builtin("prod", CAT, "Product of all elements, or along one axis.", [X, DIM, KEEPDIMS],
         returns="a number, or x with axis dim removed (size 1 with keepdims)", differentiable=True,
         what="Multiplies the elements of x, or along axis dim: prod([1, 2; 3, 4], dim=0) is the column "
              "products [3, 8]. The product of an empty matrix is 1.",
         how="NumPy's `prod`. The gradient of each element is the product of the other elements, computed "
             "without division (exclusive prefix and suffix products), so it is exact at zeros: with one zero "
             "the zero's gradient is the product of the others and every other gradient is 0; with two zeros "
             "every gradient is 0 (the autograd/PyTorch values).",
         errors=[DIM_ERR, "TypeError when x is not a number or matrix"],
         examples=["prod([1.5, 2, 4])", "prod([1, 2; 3, 4], dim=0)", "prod([1, 2; 3, 4], dim=1, keepdims=true)",
                   "grad(fn(x) -> prod(x), [2, 0, 3])   # one zero: the product of the others",
                   "grad(fn(x) -> prod(x), [2, 0, 0])   # two zeros: all 0"])
def prod(x, dim, keepdims):
    return ops.prod(x, dim=axis(x, dim), keepdims=keepdims)


def _cumulative(name, prim, word, example_grad):
    @builtin(name, CAT, f"Cumulative {word} along an axis (the running {word}).",
             [X, P("dim", "int", None, doc="the axis to run along (negative counts from the end); may be left "
                                           "out only for a number or a vector")],
             returns="same shape as x", differentiable=True,
             what=f"The running {word}: element i is the {word} of elements 0..i along dim. A vector needs no "
                  f"dim; a matrix or higher must name it ({name}(x, dim=0) runs down the columns), as in PyTorch, "
                  f"where NumPy would flatten it silently.",
             how=f"NumPy's `{name}`. " + example_grad,
             errors=[f"ValueError when x has 2 or more axes and dim is not given", DIM_ERR,
                     "TypeError when x is not a number or matrix"],
             examples=[f"{name}([1.5, 2, 3, 4])", f"{name}([1, 2; 3, 4], dim=0)", f"{name}([1, 2; 3, 4], dim=1)"])
    def fn(x, dim):
        shape = ops.shape_of(x)
        if dim is None:
            if len(shape) >= 2:
                raise ValueErr(f"{name}() of {describe(raw(x))} needs dim= (the axis to run along): "
                               f"{name}(x, dim=0) runs down the columns, {name}(x, dim=1) along the rows")
            if not shape:
                return ops.add(x, 0.0)
            return prim(x, dim=0)
        return prim(x, dim=axis(x, dim))
    return fn


_cumulative("cumsum", ops.cumsum, "sum",
            "The gradient is the reverse running sum of the cotangent: sum_{j >= i} g_j.")
_cumulative("cumprod", ops.cumprod, "product",
            "The gradient of element k is sum_{j >= k} g_j prod_{i <= j, i != k} x_i: before the first zero "
            "of a slice, the reverse running sum of g * cumprod(x) over x_k; at the first zero, the sum of g "
            "times the running product with that zero taken as 1; after it, 0. So zeros are exact (as prod), "
            "in O(n).")


@builtin("logsumexp", CAT, "log(sum(exp(x))), computed without overflow.", [X, DIM, KEEPDIMS],
         returns="a number, or x with axis dim removed", differentiable=True,
         what="The log of the sum of exponentials, the log-partition of softmax: log_softmax(x) = x - "
              "logsumexp(x, dim=-1, keepdims=true). logsumexp([1000, 1000]) is 1000 + log(2), where the naive "
              "formula overflows to inf.",
         how="m + log(sum(exp(x - m))) with m the maximum (the stable form, as SciPy and PyTorch). The "
             "gradient is softmax(x) along dim. Infinite rows follow softmax's limit rule (docs/language.md, "
             "\"Masks and softmax\"): a row of all -inf gives -inf with gradient 0, a row holding +inf gives "
             "+inf with gradient 0.",
         errors=[DIM_ERR, "TypeError when x is not a number or matrix"],
         examples=["logsumexp([0.5, 1, 2])", "logsumexp([1000, 1000])", "logsumexp([1, 2; 3, 4], dim=1)",
                   "logsumexp([log(0), log(0)])   # all -inf: -inf"])
def logsumexp(x, dim, keepdims):
    shape = ops.shape_of(x)
    if not shape:
        return ops.add(x, 0.0)
    xf, d = _flat(x, dim, keepdims)
    return _finish(ops.logsumexp(xf, dim=d, keepdims=True), shape, dim, keepdims)


# ---- statistics ---------------------------------------------------------------------------------
def _count(x, dim):
    shape = ops.shape_of(x)
    return math.prod(shape) if dim is None else shape[axis(x, dim)]


def _var(name, x, dim, correction, keepdims):
    n = _count(x, dim)
    if n - correction <= 0:
        raise ValueErr(f"{name}(): {n} element{'s' if n != 1 else ''} with correction={format_value(correction)} "
                       f"leave{'s' if n == 1 else ''} no degrees of freedom (N - correction = "
                       f"{format_value(n - correction)}); correction=0 gives the population form")
    d = None if dim is None else axis(x, dim)
    c = ops.sub(x, ops.mean(x, dim=d, keepdims=True))
    return ops.mean(ops.mul(c, c), dim=d, keepdims=keepdims, count=n - correction)


CORR = P("correction", "number", 1, doc="subtracted from the count N in the denominator: 1 (the default) for the "
                                      "sample form, 0 for the population form", check=lambda v: None if v >= 0 else
                                      "must be >= 0", constraint=">= 0")
VAR_CONV = ("Conventions differ: NumPy's `var`/`std` divide by N (ddof=0), MATLAB/Octave and PyTorch by N - 1. "
            "tapeml follows MATLAB and PyTorch (and PyTorch's keyword `correction`): correction=0 gives "
            "NumPy's result.")


@builtin("var", CAT, "Variance (divides by N - 1 by default).", [X, DIM, CORR, KEEPDIMS],
         returns="a number, or x with axis dim removed", differentiable=True,
         what="The spread of the elements around their mean: sum((x - mean(x))^2) / (N - correction), over all "
              "elements or along dim. " + VAR_CONV,
         how="Two passes (the mean, then the squared deviations), composed from primitives; the gradient "
             "is 2 (x - mean) / (N - correction). A sum that overflows on finite elements is taken as the sum "
             "of the elements divided first (mean's rule), so var([1.7e308, 1.7e308]) is 0, not nan.",
         errors=["ValueError when N - correction <= 0 (a single element with the default correction)", DIM_ERR,
                 "ValueError when correction < 0"],
         examples=["var([1.5, 2, 4, 7])", "var([1, 2, 3, 4], correction=0)   # NumPy's np.var",
                   "var([1, 2; 3, 5], dim=0)"])
def var(x, dim, correction, keepdims):
    return _var("var", x, dim, correction, keepdims)


@builtin("std", CAT, "Standard deviation (divides by N - 1 by default).", [X, DIM, CORR, KEEPDIMS],
         returns="a number, or x with axis dim removed", differentiable=True,
         what="The square root of var: sqrt(sum((x - mean(x))^2) / (N - correction)). Standardizing the columns "
              "of a data matrix: (x - mean(x, dim=0, keepdims=true)) / std(x, dim=0, keepdims=true). " + VAR_CONV,
         how="sqrt(var(x)). Where every element is equal the gradient is 0 (the 0 x inf = 0 rule of the backward "
             "pass; PyTorch gives nan there). Where the variance would overflow or underflow though the elements "
             "are finite (beyond about 1e154 or below 1e-154; 1e19 and 1e-19 in float32), it is computed on x "
             "scaled by a power of 2 and scaled back, exactly: std of 1e20s in float32 is 1.29e20, not inf, "
             "and the gradient at 1e-170s is right, not nan.",
         errors=["ValueError when N - correction <= 0 (a single element with the default correction)", DIM_ERR,
                 "ValueError when correction < 0"],
         examples=["std([1.5, 2, 4, 7])", "std([2, 4, 4, 4, 5, 5, 7, 9], correction=0)",
                   "x = [1, 2; 3, 6; 5, 7]\n(x - mean(x, dim=0, keepdims=true)) / std(x, dim=0, keepdims=true)",
                   "std([1e-170, 2e-170, 3e-170, 4e-170])"])
def std(x, dim, correction, keepdims):
    v = _var("std", x, dim, correction, keepdims)
    r = ops.sqrt(v)
    shape = ops.shape_of(x)
    if not shape:
        return r
    d = None if dim is None else axis(x, dim)
    out = ops.rescaled(lambda t, e: ops.sqrt(_var("std", t, dim, correction, True)), x, d, r,
                       ops.kept(raw(v), shape, d))
    return r if out is r or keepdims else ops.unkept(out, ops.shape_of(r))


def _sort_key(r, descending):
    """What to sort ascending for x's order: -x for largest first (ties keep their order, NaN stays
    last); bools take part as 0 and 1, as in arithmetic (NumPy has no - of bools)."""
    if not descending:
        return r
    if type(r) is not np.ndarray:
        return -ops.bools_as_floats(r)
    return -(r if r.dtype.kind == "f" else r.astype(np.float64))


def _argsort(r, dim, descending):
    """The 0-based positions that sort the plain matrix r along dim, stably (integers)."""
    if type(r) is np.ndarray:
        return np.argsort(_sort_key(r, descending), axis=dim, kind="stable")
    return xp_of(r).argsort(_sort_key(r, descending), axis=dim, stable=True)


def _sorted(x, dim, descending=False):
    """(sorted values, 0-based int indices) along an axis: a stable sort (ties keep their order)."""
    r = _array("sort", x)
    if type(r) is np.ndarray:
        idx = np.argsort(_sort_key(r, descending), axis=dim, kind="stable")
    else:
        idx = _argsort(r, dim, descending)
    return ops.take_along(x, idx=idx, dim=dim), idx


def _slice(v, dim, start, stop):
    cut = [slice(None)] * len(ops.shape_of(v))
    cut[dim] = slice(start, stop)
    return ops.index(v, idx=tuple(cut))


def _nan_rows(x, d, r):
    """NaN where the reduced slice of x holds a NaN (NumPy's median and quantile)."""
    r0 = _array("", x)
    if type(r0) is np.ndarray:
        bad = np.isnan(r0).any(axis=d, keepdims=True)
        return ops.where(bad, math.nan, r) if bad.any() else r
    xp = xp_of(r0)
    bad = xp.any(xp.isnan(r0), axis=d, keepdims=True)
    return ops.where(bad, math.nan, r) if bool(xp.any(bad)) else r


def _check_nonempty(name, x, d):
    if ops.shape_of(x)[d] == 0:
        raise ValueErr(f"{name}() of an empty matrix (no elements along dim {d}): it has no {name}")


@builtin("median", CAT, "The middle value (the mean of the two middle values for an even count).", [X, DIM, KEEPDIMS],
         returns="a number, or x with axis dim removed", differentiable=True,
         what="The value with as many elements below as above it. For an even count it is the mean of the two "
              "middle values, as NumPy and MATLAB; PyTorch's `median` returns the lower of the two instead "
              "(quantile(x, 0.5, method=\"lower\") here). A NaN in the slice makes the median NaN (NumPy).",
         how="A stable sort, then the middle element(s). The gradient goes to the element(s) the sort puts in the "
             "middle (1, or 1/2 each for an even count); at ties that is the tied element the stable sort "
             "places there, one subgradient, as PyTorch.",
         errors=["ValueError when x (or the slice along dim) is empty", DIM_ERR],
         examples=["median([3.5, 1, 2])", "median([4, 1, 3, 2])", "median([1, 9, 2; 6, 5, 4], dim=1)"])
def median(x, dim, keepdims):
    shape = ops.shape_of(x)
    if not shape:
        return ops.add(x, 0.0)
    xf, d = _flat(x, dim, keepdims)
    _check_nonempty("median", xf, d)
    s, _ = _sorted(xf, d)
    n = ops.shape_of(xf)[d]
    lo, hi = (n - 1) // 2, n // 2
    r = _slice(s, d, lo, lo + 1) if lo == hi else ops.mul(ops.add(_slice(s, d, lo, lo + 1), _slice(s, d, hi, hi + 1)), 0.5)
    return _finish(_nan_rows(xf, d, r), shape, dim, keepdims)


METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


@builtin("quantile", CAT, "The q-th quantile (NumPy's linear interpolation by default).",
         [X, P("q", "any", doc="a probability in [0, 1], or a vector of them (not differentiated)"), DIM, KEEPDIMS,
          P("method", "string", "linear", doc="how to pick between the two neighbouring order statistics",
            check=one_of(*METHODS), constraint="one of " + ", ".join(METHODS))],
         returns="a number or x with axis dim removed; a vector q adds a first axis (one result per q; none for an "
                 "empty q)",
         differentiable=True,
         what="The value below which a fraction q of the elements lie: quantile(x, 0.5) is the median, "
              "quantile(x, [0.25, 0.75]) the quartiles. With sorted values s_0..s_{n-1}, q falls at position "
              "p = q (n - 1); `method` decides between s_floor(p) and s_ceil(p): \"linear\" interpolates "
              "(NumPy's default, PyTorch's default, R's type 7), \"lower\"/\"higher\" take one side, \"nearest\" the "
              "nearer (ties to the even position, as NumPy), \"midpoint\" their mean.",
         how="A stable sort, then the two neighbours by position; NumPy's `quantile(x, q, axis, method=...)`. "
             "The gradient splits between the two neighbours by the interpolation weights.",
         errors=["ValueError when q is outside [0, 1] or nan", "ValueError when x is empty",
                 "ValueError when method is not one of " + ", ".join(METHODS), DIM_ERR],
         examples=["quantile([1.5, 2, 4, 7, 9], 0.3)", "quantile([1, 2, 3, 4], [0.25, 0.5, 0.75])",
                   "quantile([1, 2, 3, 4], 0.5, method=\"lower\")   # PyTorch's median",
                   "quantile([1, 5; 2, 8; 3, 9], 0.5, dim=0)"])
def quantile(x, q, dim, keepdims, method):
    qr = B.to_numpy(raw(q))      # the probabilities: not differentiated, read on the host
    if isinstance(qr, (bool, np.bool_)) or not isinstance(qr, (float, int, np.ndarray)) or \
            (isinstance(qr, np.ndarray) and qr.dtype.kind not in "fi"):
        raise TypeErr(f"quantile(): q must be a number or a vector of numbers, got {describe(qr)}")
    qs = np.atleast_1d(np.asarray(qr, dtype=np.float64))
    if qs.ndim > 1 or np.isnan(qs).any() or (qs < 0).any() or (qs > 1).any():
        raise ValueErr(f"quantile(): q must be a probability in [0, 1] or a vector of them, got {format_value(q, True)}")
    shape = ops.shape_of(x)
    xf, d = _flat(ops.reshape(x, shape=(1,)) if not shape else x, None if not shape else dim, keepdims)
    _check_nonempty("quantile", xf, d)
    if qs.size == 0:        # no probabilities: no results, each of the shape one q would give (NumPy, PyTorch)
        one = np.sum(np.zeros(ops.shape_of(xf)), axis=d, keepdims=True)
        return new_array(np.zeros((0,) + np.shape(_finish(one, shape, None if not shape else dim, keepdims))),
                         like=raw(x))
    s, _ = _sorted(xf, d)
    n = ops.shape_of(xf)[d]
    parts = []
    for qv in qs:
        p = float(qv) * (n - 1)
        lo, hi = int(math.floor(p)), int(math.ceil(p))
        frac = p - lo
        a, b = _slice(s, d, lo, lo + 1), _slice(s, d, hi, hi + 1)
        if method == "lower" or lo == hi:
            r = a
        elif method == "higher":
            r = b
        elif method == "nearest":
            r = b if round(p) == hi else a        # Python's round: ties to even, as NumPy's around
        elif method == "midpoint":
            r = ops.mul(ops.add(a, b), 0.5)
        else:
            r = ops.add(ops.mul(a, 1.0 - frac), ops.mul(b, frac))
        parts.append(_finish(_nan_rows(xf, d, r), shape, None if not shape else dim, keepdims))
    if np.ndim(qr) == 0:
        return parts[0]
    return ops.stack(*parts, dim=0)


def _observations(name, x):
    r = raw(x)
    if not isinstance(r, Matrix) or r.ndim not in (1, 2):
        raise TypeErr(f"{name}() needs a vector or an [N, D] matrix (rows are observations, columns variables), "
                      f"got {describe(r)}")
    x = ops.reshape(x, shape=(-1, 1)) if r.ndim == 1 else x
    n = ops.shape_of(x)[0]
    if n < 2:
        raise ValueErr(f"{name}() needs at least 2 observations (rows), got {n}: it divides by N - 1")
    c = ops.sub(x, ops.mean(x, dim=0, keepdims=True))
    return ops.div(ops.matmul(ops.transpose(c), c), float(n - 1)), r.ndim == 1


OBS = P("x", "array", doc="[N, D]: N observations (rows) of D variables (columns); a vector is one variable",
        shape="[N, D]")
ROWS = ("Rows are observations and columns are variables, as MATLAB's `cov` and pandas; NumPy's `cov` and "
        "`corrcoef` take the transpose by default (rows are variables; rowvar=False gives tapeml's reading), "
        "and so does PyTorch's `torch.cov`.")


@builtin("cov", CAT, "Covariance matrix of the columns (divides by N - 1).", [OBS], returns="[D, D] (a number for a vector)",
         differentiable=True,
         what="C[i, j] = sum_n (x[n, i] - mean_i)(x[n, j] - mean_j) / (N - 1): the covariance of each pair of "
              "columns; its diagonal is var(x, dim=0). " + ROWS,
         how="The centred matrix c = x - mean(x, dim=0), then c' c / (N - 1) (MATLAB's and NumPy's default "
             "normalization, as var).",
         errors=["TypeError when x is not a vector or matrix", "ValueError when x has fewer than 2 rows"],
         examples=["cov([1, 2.5; 2, 4; 4, 3.5])", "cov([1, 2, 3, 4])"])
def cov(x):
    c, vec = _observations("cov", x)
    return _number(c) if vec else c


@builtin("corrcoef", CAT, "Pearson correlation matrix of the columns.", [OBS], returns="[D, D] (1 for a vector)",
         differentiable=True,
         what="R[i, j] = cov[i, j] / sqrt(cov[i, i] cov[j, j]), between -1 and 1, with 1 on the diagonal. " + ROWS +
              " A constant column has no correlation: its row and column are nan (NumPy).",
         how="cov(x) scaled by the standard deviations, clipped to [-1, 1] as NumPy's `corrcoef` (rounding "
             "could step past 1); the N - 1 cancels. R does not change when a column is scaled, so a column "
             "whose variance would overflow or underflow (values beyond about 1e154 or below 1e-154) is "
             "scaled by a power of 2 first. A nan in a column makes that column's row and column nan (NumPy).",
         errors=["TypeError when x is not a vector or matrix", "ValueError when x has fewer than 2 rows"],
         examples=["corrcoef([1, 2.5; 2, 4; 4, 3.5])", "corrcoef([1, 2; 2, 4; 3, 6])"])
def corrcoef(x):
    return _corrcoef(x, True)


def _corrcoef(x, rescale):
    c, vec = _observations("corrcoef", x)
    n = np.arange(ops.shape_of(c)[0])
    diag = ops.index(c, idx=(n, n))         # a gather: a nan in one column stays in its row and column
    # a column whose variance overflows or underflows (1e154 or 1e-154 in float64, 1e19 or 1e-19 in
    # float32): R does not change when a column is scaled, so such columns are scaled by a power of 2
    # (their largest |x| into [0.5, 1)) and R taken again; columns with nan or inf stay as they are
    xr, dr = raw(x), raw(diag)
    xr = np.asarray(xr, dtype=dr.dtype) if type(dr) is np.ndarray else xp_of(dr).astype(ops.bools_as_floats(xr), dr.dtype)
    x2 = xr.reshape(-1, 1) if xr.ndim == 1 else xr
    bad = ops.unsafe_slices(dr.reshape(1, -1), x2, 0) if rescale else None
    if bad is not None:
        e = ops.slice_exponents(x2, 0, bad)
        return _corrcoef(ops.ldexp(x, e=-e.reshape(-1) if vec else -e), False)
    d = ops.sqrt(diag)
    r = ops.clip(ops.div(ops.div(c, ops.reshape(d, shape=(-1, 1))), ops.reshape(d, shape=(1, -1))), lo=-1.0, hi=1.0)
    return _number(r) if vec else r


@builtin("numel", CAT, "The number of elements.", [X], returns="number",
         what="How many elements x holds: the product of its sizes (1 for a number, 0 for an empty matrix), as "
              "PyTorch's `numel` and NumPy's `size`.",
         how="The product of size(x).", errors=["TypeError when x is not a number or matrix"],
         examples=["numel([1, 2; 3, 4; 5, 6])", "numel(7)", "numel(zeros(0, 3))"])
def numel(x):
    return float(math.prod(ops.shape_of(raw(x))))


# ---- sorting and search ---------------------------------------------------------------------------
SDIM = P("dim", "int", -1, doc="the axis to sort along (negative counts from the end; -1: the last)")
DESC = P("descending", "bool", False, doc="largest first")
STABLE = ("The sort is stable: equal elements keep their order (NumPy's kind=\"stable\", PyTorch's stable=True; "
          "NumPy's default quicksort and PyTorch's default do not promise it). NaN sorts last, as NumPy.")


def _sort_axis(name, x, dim):
    if not ops.shape_of(x):
        raise TypeErr(f"{name}() needs a vector or matrix, got a number")
    return axis(x, dim)


@builtin("sort", CAT, "The elements sorted along an axis (ascending by default).", [X, SDIM, DESC],
         returns="same shape as x", differentiable=True,
         what="Sorts each row (the last axis, by default) or along dim; descending=true puts the largest first. "
              + STABLE,
         how="NumPy's stable argsort, then the gather of those positions. The gradient follows the permutation: "
             "the cotangent of sorted position j goes back to the element that landed there (at ties, the one "
             "the stable order put there, as PyTorch).",
         errors=["TypeError when x is a number", DIM_ERR],
         examples=["sort([3.5, 1, 2])", "sort([3, 1, 2], descending=true)", "sort([3, 1; 2, 5], dim=0)"])
def sort(x, dim, descending):
    return _sorted(x, _sort_axis("sort", x, dim), descending)[0]


@builtin("argsort", CAT, "0-based positions that sort x (stable).", [X, SDIM, DESC],
         returns="same shape as x (whole numbers)",
         what="The positions that would sort x: x[argsort(x)] is sort(x) for a vector. 0-based (MATLAB's [~, i] "
              "= sort(x) is 1-based). " + STABLE,
         how="NumPy's `argsort(kind=\"stable\")`; descending=true is the stable sort of -x, so ties still keep "
             "their order. Not differentiable.",
         errors=["TypeError when x is a number", DIM_ERR],
         examples=["argsort([3, 1, 2])", "x = [3, 1, 2]\nx[argsort(x)]", "argsort([2, 1, 2, 1])   # stable",
                   "argsort([2, 1, 2, 1], descending=true)"])
def argsort(x, dim, descending):
    d = _sort_axis("argsort", x, dim)
    return positions(_argsort(_array("argsort", x), d, descending))


@builtin("topk", CAT, "The k largest elements and their 0-based positions, along an axis.",
         [X, P("k", "int", doc="how many", check=lambda v: None if v >= 0 else "must be >= 0", constraint=">= 0"), SDIM],
         returns="a tuple (values, indices), each x's shape with size k along dim", differentiable=True,
         what="The k largest values along dim (the last axis by default), largest first, with their positions: "
              "v, i = topk(logits, 5) for top-5 sampling. Ties keep their order (the earlier position first). "
              "PyTorch's `topk(largest=True, sorted=True)`; the indices are 0-based.",
         how="A stable descending sort, then the first k. The gradient of the values goes back to the positions "
             "taken (0 elsewhere); the indices are not differentiable.",
         errors=["ValueError when k is larger than the size of x along dim", "TypeError when x is a number",
                 DIM_ERR],
         examples=["topk([1.5, 4, 2, 3], 2)", "v, i = topk([1, 9, 2; 8, 3, 7], 1)\nv\ni"])
def topk(x, k, dim):
    d = _sort_axis("topk", x, dim)
    n = ops.shape_of(x)[d]
    if k > n:
        raise ValueErr(f"topk(): k = {k} is larger than the {n} element{'s' if n != 1 else ''} along dim {d}")
    _, idx = _sorted(x, d, descending=True)
    cut = [slice(None)] * idx.ndim
    cut[d] = slice(0, k)
    idx = idx[tuple(cut)]
    return ops.take_along(x, idx=idx, dim=d), positions(idx)


@builtin("nonzero", CAT, "0-based positions of the nonzero (true) elements.", [X],
         returns="a vector of positions for a vector; an [N, ndim] matrix for a matrix",
         what="Where x is nonzero (or true), in row-major order. For a vector, the index vector, usable as "
              "x[nonzero(x)]; for a matrix (or higher), one row per nonzero element holding its position on each "
              "axis, as PyTorch's `nonzero` and NumPy's `argwhere` (NumPy's `nonzero` returns a tuple of index "
              "vectors instead).",
         how="NumPy's `flatnonzero` for a vector, `argwhere` otherwise. NaN counts as nonzero.",
         errors=["TypeError when x is a number (it has no positions)"],
         examples=["nonzero([0, 3, 0, 5])", "x = [0, 3, 0, 5]\nx[nonzero(x > 1)]", "nonzero([1, 0; 0, 2])"])
def nonzero(x):
    r = raw(x)
    if not isinstance(r, Matrix) or r.ndim == 0:
        raise TypeErr(f"nonzero() needs a vector or matrix, got {describe(r)}")
    if type(r) is not np.ndarray:
        xp = xp_of(r)
        found = xp.nonzero(r)
        return positions(found[0] if r.ndim == 1 else xp.reshape(xp.stack(found, axis=1), (-1, r.ndim)))
    if r.ndim == 1:
        return np.flatnonzero(r).astype(np.float64)
    return np.argwhere(r).astype(np.float64).reshape(-1, r.ndim)
