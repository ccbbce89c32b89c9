"""Elementwise math and reductions. Every one of these calls the primitive table (ops.py)."""
from __future__ import annotations

import numpy as np

from tapeml.array import backend as B, ops
from tapeml.array.backend import ARRAYS, Matrix, xp_of
from tapeml.array.primitive_table import is_bool_array, size_of
from tapeml.builtins.registry import P, builtin
from tapeml.builtins.vocabulary import KEEPDIMS, X, XS
from tapeml.builtins.util import axis
from tapeml.syntax.errors import ShapeError, TypeErr, ValueErr
from tapeml.array.tape import raw
from tapeml.array.values import describe, shape_text
from tapeml.array.printer import format_value


def _other(r) -> bool:
    """r is another backend's matrix (not NumPy's, not a number): the portable paths take it."""
    t = type(r)
    return t is not np.ndarray and t in ARRAYS


def positions(idx):
    """0-based positions (a backend's integer array) as the float64 matrix users get (the session's
    float type on a device without float64: MPS)."""
    if type(idx) is np.ndarray:
        return idx.astype(np.float64)
    be = B.of(idx)
    try:
        dt = be.dtype(np.float64)
    except B.DeviceError:
        dt = be.float_dtype()
    return be.xp.astype(idx, dt)


def _unbroadcastable(*vals) -> bool:
    """The shapes of vals do not broadcast to one (torch says RuntimeError where NumPy says
    ValueError: this tells a shape mismatch from another failure)."""
    try:
        np.broadcast_shapes(*(ops.shape_of(v) for v in vals))
    except ValueError:
        return True
    return False



def _elementwise(name, prim, summary, formula, examples, kink="", what="",
                 errors=("TypeError when x is not a number or matrix",)):
    @builtin(name, "Math", summary, [X], returns="same shape as x", differentiable=True,
             what=what, errors=list(errors),
             how=f"Elementwise {formula}, by NumPy's `{name}`; its VJP is in the primitive table. {kink}".strip(),
             examples=examples)
    def fn(x):
        return prim(x)
    return fn


_elementwise("exp", ops.exp, "e raised to each element.", "exp(x); d/dx = exp(x)", ["exp(0)", "exp([0, 1, 2])"],
             what="The exponential function e^x, the core of softmax and sigmoid. It overflows to inf above "
                  "about 709 (exp(1000) is inf) and underflows to 0 below about -745.")
_elementwise("log", ops.log, "Natural logarithm of each element (log(0) = -inf).", "ln(x); d/dx = 1/x",
             ["log(1)", "log([1, exp(1), 0])"], "In the backward pass a zero cotangent stays zero (0 x inf = 0).",
             what="The natural logarithm (base e), the inverse of exp. It follows IEEE arithmetic instead of "
                  "raising: log(0) is -inf and the log of a negative number is nan.",
             errors=["TypeError when x is not a number or matrix (a negative x gives nan, not an error)"])
_elementwise("sqrt", ops.sqrt, "Square root of each element.", "sqrt(x); d/dx = 1/(2 sqrt(x))",
             ["sqrt(16)", "sqrt([1, 4, 9])"], "sqrt'(0) = inf, and 0 x inf = 0 in the backward pass.",
             what="The non-negative square root, as in the 1/sqrt(d_k) scale of attention and the "
                  "sqrt(var + eps) of layer_norm. The square root of a negative number is nan.",
             errors=["TypeError when x is not a number or matrix (a negative x gives nan, not an error)"])
_elementwise("tanh", ops.tanh, "Hyperbolic tangent of each element.", "tanh(x); d/dx = 1 - tanh(x)^2",
             ["tanh(0)", "tanh([-1, 0, 1])"],
             what="The hyperbolic tangent, an S-shaped curve from -1 to 1 through tanh(0) = 0; gelu_tanh "
                  "is built on it.")
_elementwise("sin", ops.sin, "Sine of each element (radians).", "sin(x); d/dx = cos(x)", ["sin(0)", "sin([0, pi() / 2])"],
             what="The sine of an angle in radians (sin(pi() / 2) is 1), e.g. for the sinusoidal position "
                  "encodings of Vaswani et al. 2017.")
_elementwise("cos", ops.cos, "Cosine of each element (radians).", "cos(x); d/dx = -sin(x)", ["cos(0)", "cos([0, pi()])"],
             what="The cosine of an angle in radians (cos(pi()) is -1), as in sinusoidal position encodings and "
                  "the cosine learning-rate schedule.")
_elementwise("abs", ops.abs_, "Absolute value of each element.", "|x|; d/dx = sign(x)",
             ["abs(-3)", "abs([-1, 0, 2])"], "abs'(0) = 0.",
             what="The distance of each element from 0, e.g. to measure how far two results are apart: "
                  "max(abs(a - b)).")


@builtin("round", "Math", "Round to the nearest integer, or to a number of decimals (ties to even).",
         [X, P("digits", "int", 0, doc="decimal places")], returns="same shape as x",
         what="Rounds each element to `digits` decimal places (0: to whole numbers), e.g. to print stable "
              "results. Halves go to the even neighbour: round(2.5) is 2, round(1.5) is 2.",
         errors=["ValueError when digits is not a whole number", "TypeError when x is not a number or matrix"],
         how="Python's `round`: the number nearest to x correctly rounded to `digits` decimals, ties to even "
             "on the exact binary value (2.675 is stored as 2.67499..., so round(2.675, 2) is 2.67). Any "
             "whole digits works: beyond the precision of a float x comes back unchanged (round(1.5, 400) is "
             "1.5), and far left of it the result is 0 (round(2.5, -400) is 0). NumPy's rint(x * 10^d) / 10^d "
             "is used where it gives the same value. Not differentiable: the tape records nothing.",
         examples=["round(2.567)", "round(2.567, 2)", "round([0.5, 1.5, -2.25], 1)",
                   "round([1.5, 2675], 400)\nround([2.5, 2675], -2)\nround(2.5, -400)"])
def round_(x, digits):
    r = raw(x)
    if isinstance(r, (bool, np.bool_)) or is_bool_array(r):
        x = ops.as_float(np.asarray(r, dtype=np.float64)) if isinstance(r, np.ndarray) else \
            ops.bools_as_floats(r) if _other(r) else float(r)
    digits = max(-400, min(400, digits))     # NumPy takes a C int; past +-400 no float64 digit changes
    out = ops.round_(x, digits=digits) + 0.0
    if _other(raw(out)):
        return _round_edges(raw(x), raw(out), digits)
    # x * 10^digits overflowed (digits large: x has no digit there, so it stays) or 10^digits
    # underflowed (digits very negative: every finite x rounds to 0); NumPy gives NaN for both,
    # and for +-inf. A NaN stays NaN.
    ro, rx = raw(out), np.asarray(raw(x), dtype=np.float64)
    bad = (np.isfinite(rx) & ~np.isfinite(ro)) | (np.isinf(rx) & np.isnan(ro))
    if np.any(bad):
        fixed = np.where(np.isfinite(rx), rx if digits > 0 else 0.0 * rx, rx)
        return ops.as_float(np.where(bad, fixed, ro)) if np.ndim(ro) else float(fixed)
    return out


def _round_edges(rx, ro, digits):
    """round's overflow and underflow edges (above) on another backend's matrix."""
    xp = xp_of(ro)
    bad = (xp.isfinite(rx) & ~xp.isfinite(ro)) | (xp.isinf(rx) & xp.isnan(ro))
    if not bool(xp.any(bad)):
        return ro
    fixed = xp.where(xp.isfinite(rx), rx if digits > 0 else 0.0 * rx, rx)
    return ops.as_float(xp.where(bad, fixed, ro))


def _nothing_to_compare(name, x, dim):
    """max, min, argmax, argmin refuse to reduce an empty slice (NumPy's and PyTorch's rule); along a
    non-empty axis of an empty matrix (dim=1 of a 0x2 matrix) there is nothing to reduce and the
    result is empty, as theirs."""
    r = raw(x)
    if not isinstance(r, Matrix) or size_of(r):
        return
    if dim is None:
        raise ValueErr(f"{name}() of an empty matrix: it has no largest or smallest element")
    d = axis(x, dim)
    if r.shape[d] == 0:
        raise ValueErr(f"{name}(): axis {d} of {describe(x)} is empty: its slices have no largest or smallest "
                       f"element")


def _reduction(name, prim, summary, how, examples, differentiable=True, what="", errors=()):
    @builtin(name, "Math", summary,
             [XS, P("dim", "int", None, doc="the axis to reduce (negative counts from the end); none reduces all"),
              KEEPDIMS],
             returns="a number, or x with axis dim removed (size 1 with keepdims)", differentiable=differentiable,
             how=how, what=what, errors=list(errors), examples=examples)
    def fn(x, dim, keepdims):
        if name in ("max", "min", "argmax", "argmin"):
            _nothing_to_compare(name, x, dim)
        return prim(x, dim=axis(x, dim), keepdims=keepdims)
    return fn


_reduction("sum", ops.sum_, "Sum of all elements, or along one axis.",
           "Adds the elements; the VJP broadcasts the cotangent back over the reduced axis.",
           ["sum([1, 2, 3])", "sum([1, 2; 3, 4], dim=0)", "sum([1, 2; 3, 4], 1)",
            "x = [1, 2; 3, 4]\nx / sum(x, dim=1, keepdims=true)   # each row divided by its sum",
            "sum(map(len, (\"to\", \"be\", \"or\")))   # a tuple of numbers, as map gives it"],
           what="Adds up the elements of x, or only along axis dim: sum(x, dim=0) of a T x D matrix is the "
                "D column sums, sum(x, dim=1) the T row sums. An empty matrix sums to 0. A tuple of numbers "
                "(what map returns) is summed as the vector of its items.",
           errors=["ValueError when dim is out of range for x", "TypeError when x is not a number or matrix"])


def _mean(x, dim=None, keepdims=False):
    return ops.mean(x, dim=dim, keepdims=keepdims)


_reduction("mean", _mean, "Arithmetic mean of all elements, or along one axis.",
           "mean(x) = sum(x) / n, n the number of elements reduced (NumPy's `mean`), composed from the sum "
           "and div primitives, so each element's gradient is 1/n. Where the sum of a finite slice overflows, "
           "that slice is sum(x / n) instead: mean([1.5e308, 1.7e308]) is 1.6e308 (NumPy and PyTorch give "
           "inf).",
           ["mean([1, 2, 3, 4])", "mean([1, 2; 3, 4], dim=1)",
            "x = [1, 2; 3, 5]\nx - mean(x, dim=0, keepdims=true)   # centred columns"],
           what="The average of the elements, or along axis dim: mean(x, dim=1) of a T x D matrix is the T "
                "row means. The mean of an empty matrix is nan (0 / 0).",
           errors=["ValueError when dim is out of range for x", "TypeError when x is not a number or matrix"])
def _extreme(name, reduce, pairwise, word):
    @builtin(name, "Math", f"The {word} element of x (or along dim); with two arguments, the elementwise {word} of x and y.",
             [XS, P("y", "array", None, doc=f"a second number or matrix: the elementwise {word} of x and y "
                                            "(broadcast); leave it out to reduce x"),
              P("dim", "int", None, doc="the axis to reduce (negative counts from the end); none reduces all; "
                                        "give it by keyword: " + name + "(x, dim=0)"), KEEPDIMS],
             returns="a number, x with axis dim removed, or the broadcast shape of x and y",
             differentiable=True,
             what=f"With one argument, the {word} element of x, or with dim the {word} along one axis (one per "
                  f"row or column); a tuple of numbers (what map returns) counts as the vector of its items. "
                  f"With a second argument y, the {word} of x and y at each position, "
                  f"broadcasting as arithmetic does ({name}(x, 0) compares every element with 0).",
             how=f"NumPy's `{name}` / `{'maximum' if name == 'max' else 'minimum'}`. At ties the gradient is "
                 f"split evenly among the tied elements, as PyTorch's `a{name}` does (and evenly between x "
                 f"and y where they are equal).",
             errors=["ValueError when x is empty (or its axis dim is)", "ValueError when dim is out of range",
                     "ValueError when both y and dim (or keepdims) are given",
                     "ShapeError when x and y do not broadcast to one shape"],
             examples=[f"{name}([3, 1, 4, 1, 5])", f"{name}([1, 5; 7, 2], dim=0)", f"{name}(3, 5)",
                       f"{name}(map(len, (\"to\", \"bee\", \"a\")))   # a tuple of numbers",
                       f"{name}([1, 5, 2], [4, 4, 4])", f"{name}([1, 5; 7, 2], dim=1, keepdims=true)"])
    def fn(x, y, dim, keepdims):
        if y is not None:
            if dim is not None or keepdims:
                raise ValueErr(f"{name}(): give either y (elementwise) or dim/keepdims (a reduction), not both")
            try:
                return pairwise(x, y)
            except (ValueError, RuntimeError) as e:
                if not isinstance(e, ValueError) and not _unbroadcastable(x, y):
                    raise
                raise ShapeError(f"{name}(): x is {shape_text(ops.shape_of(x))} and y is "
                                 f"{shape_text(ops.shape_of(y))}: the shapes do not broadcast") from None
        _nothing_to_compare(name, x, dim)
        return reduce(x, dim=axis(x, dim), keepdims=keepdims)
    return fn


_extreme("max", ops.amax, ops.maximum, "largest")
_extreme("min", ops.amin, ops.minimum, "smallest")


@builtin("floor", "Math", "The largest whole number <= x, elementwise.", [X], returns="same shape as x",
         what="Rounds each element down, toward -inf: floor(2.7) is 2 and floor(-0.5) is -1. With it, "
              "floor(a / b) is whole-number division and a - b * floor(a / b) the remainder.",
         errors=["TypeError when x is not a number or matrix"],
         how="NumPy's `floor`. Not differentiable (its derivative is 0 almost everywhere): the tape records nothing.",
         examples=["floor(2.7)", "floor([-1.5, 0.5, 7 / 2])"])
def floor(x):
    return ops.floor(x)


def _arg(fn):
    def impl(x, dim=None, keepdims=False):
        r = raw(x)
        t = type(r)
        if t is not np.ndarray and t in ARRAYS:       # the array API's argmax/argmin (torch has none for bools: they count as 0 and 1)
            out = getattr(xp_of(r), fn.__name__)(ops.bools_as_floats(r), axis=dim, keepdims=keepdims)
            return float(out) if out.ndim == 0 else positions(out)
        out = fn(r, axis=dim, keepdims=keepdims)
        return float(out) if np.ndim(out) == 0 else out.astype(np.float64)
    return impl


_reduction("argmax", _arg(np.argmax), "0-based position of the largest element (the first at ties).",
           "NumPy's argmax; over the flattened matrix when dim is none. Not differentiable.",
           ["argmax([3, 1, 4, 1])", "argmax([1, 5; 7, 2], dim=1)"], differentiable=False,
           what="Where the largest value is, as a 0-based index usable as x[i]; greedy decoding picks "
                "argmax(logits). Without dim a matrix is read row by row, so argmax([1, 5; 7, 2]) is 2; with "
                "dim, one index per row or column.",
           errors=["ValueError when x is empty (or its axis dim is)", "ValueError when dim is out of range for x"])
_reduction("argmin", _arg(np.argmin), "0-based position of the smallest element (the first at ties).",
           "NumPy's argmin; over the flattened matrix when dim is none. Not differentiable.",
           ["argmin([3, 1, 4, 1])", "argmin([1, 5; 7, 2], dim=0)"], differentiable=False,
           what="Where the smallest value is, as a 0-based index usable as x[i], e.g. the step with the "
                "lowest loss. Without dim a matrix is read row by row; with dim, one index per row or column.",
           errors=["ValueError when x is empty (or its axis dim is)", "ValueError when dim is out of range for x"])


@builtin("clip", "Math", "Limit each element to the interval [lo, hi].",
         [X, P("lo", "number", -np.inf, doc="lower bound"), P("hi", "number", np.inf, doc="upper bound")],
         returns="same shape as x", differentiable=True,
         what="Clamps every element into [lo, hi]: values below lo become lo, values above hi become hi. "
              "Leave out a bound for a one-sided clamp (the defaults are -inf and inf).",
         errors=["ValueError when lo is greater than hi", "TypeError when x is not a number or matrix, or lo or "
                 "hi is not a number"],
         how="min(max(x, lo), hi). The gradient is 1 where lo <= x <= hi and 0 outside, as PyTorch's `clamp`.",
         examples=["clip([-2, 0.5, 3], 0, 1)", "clip([-2, 5], lo=0)"])
def clip(x, lo, hi):
    if lo > hi:
        raise ValueErr(f"clip(): lo ({format_value(lo)}) is greater than hi ({format_value(hi)})")
    return ops.clip(x, lo=lo, hi=hi)


@builtin("where", "Math", "Pick from a where cond is true and from b elsewhere.",
         [P("cond", "array", doc="bool matrix (or bool)"), P("a", "array"), P("b", "array")],
         returns="the broadcast shape of cond, a and b", differentiable=True,
         what="An elementwise if-then-else: where(cond, a, b) takes a where cond is true and b where it is "
              "false; a and b may be numbers. cond is usually a comparison such as x > 0.",
         errors=["TypeError when cond is not a bool or a bool matrix (a number matrix is refused)",
                 "ShapeError naming the shapes when cond, a and b do not broadcast to one shape"],
         how="NumPy's `where`. The cotangent goes to a where cond holds and to b elsewhere, never "
             "to the branch not taken, so a NaN or inf there does not reach the gradient.",
         examples=["where([true, false, true], [1, 2, 3], 0)", "x = [-1, 4, 9]\nwhere(x > 0, sqrt(x), 0)"])
def where(cond, a, b):
    c = raw(cond)
    if not (isinstance(c, (bool, np.bool_)) or is_bool_array(c)):
        raise TypeErr(f"where(): cond must be a bool or a bool matrix (a comparison), got {describe(c)}")
    try:
        return ops.where(c, a, b)
    except (ValueError, RuntimeError) as e:
        if not isinstance(e, ValueError) and not _unbroadcastable(c, a, b):
            raise
        shapes = ", ".join(shape_text(ops.shape_of(v)) for v in (c, a, b))
        raise ShapeError(f"where(): cond, a and b do not broadcast to one shape ({shapes})") from None


# ---- isclose and allclose: PyTorch's (and NumPy's) tolerances ---------------------------------
_CLOSE_PARAMS = [P("a", "array", doc="a number, bool or matrix"),
                 P("b", "array", doc="broadcastable with a; the tolerance is relative to b"),
                 P("rtol", "number", 1e-5, doc="relative tolerance", check=lambda v: None if v >= 0 else "must be >= 0",
                   constraint=">= 0"),
                 P("atol", "number", 1e-8, doc="absolute tolerance", check=lambda v: None if v >= 0 else "must be >= 0",
                   constraint=">= 0"),
                 P("equal_nan", "bool", False, doc="count two nans as close")]
_CLOSE_HOW = ("|a - b| <= atol + rtol |b| elementwise, with PyTorch's defaults rtol = 1e-5 and atol = 1e-8 "
              "(`torch.isclose`/`torch.allclose`; NumPy's `isclose`/`allclose` have the same formula and "
              "defaults). Not symmetric: the tolerance grows with |b|, the reference. Equal infinities are "
              "close, an infinity and any other value are not (the difference is not finite); nan is close "
              "to nothing unless equal_nan = true. a and b broadcast against each other. Bools count as "
              "0 and 1.")


def _close(fname, a, b, rtol, atol, equal_nan):
    ra, rb = raw(a), raw(b)
    like = ra if _other(ra) else rb if _other(rb) else None
    if like is None:
        x, y = np.asarray(ra, dtype=np.float64), np.asarray(rb, dtype=np.float64)
    else:           # on like's backend, in float64 where it has it
        be = B.of(like)
        dt = np.float64 if be.device != "mps" else np.float32
        x, y = be.asarray(ra, dt), be.asarray(rb, dt)
    try:
        np.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    except ValueError:
        raise ShapeError(f"{fname}(): a is {shape_text(tuple(x.shape))} and b is {shape_text(tuple(y.shape))}; "
                         f"they do not broadcast") from None
    if like is not None:
        xp = be.xp
        close = x == y
        if equal_nan:
            close = close | (xp.isnan(x) & xp.isnan(y))
        err = xp.abs(x - y)
        return close | (xp.isfinite(err) & (err <= atol + rtol * xp.abs(y)))
    with np.errstate(all="ignore"):
        close = x == y
        if equal_nan:
            close |= np.isnan(x) & np.isnan(y)
        err = np.abs(x - y)
        close |= np.isfinite(err) & (err <= atol + rtol * np.abs(y))
    return close


@builtin("isclose", "Math", "Elementwise |a - b| <= atol + rtol |b|, PyTorch's tolerances: a bool matrix.",
         _CLOSE_PARAMS, returns="bool, or a bool matrix of the broadcast shape of a and b",
         what="Compares numbers up to rounding: true where a and b agree within a relative tolerance of b "
              "plus a small absolute one, so isclose(0.1 + 0.2, 0.3) is true where 0.1 + 0.2 == 0.3 is false.",
         how=_CLOSE_HOW,
         errors=["ShapeError when a and b do not broadcast", "ValueError when rtol or atol is negative",
                 "TypeError when a or b is not a number, bool or matrix"],
         examples=["isclose(0.1 + 0.2, 0.3)", "isclose([1, 1e-9, 1 / 0, 0 / 0], [1.000001, 0, 1 / 0, 0 / 0])",
                   "isclose([1, 2], [1.1, 2.2], rtol=0.1)", "isclose(0 / 0, 0 / 0, equal_nan=true)"])
def isclose(a, b, rtol, atol, equal_nan):
    c = _close("isclose", a, b, rtol, atol, equal_nan)
    return bool(c) if c.ndim == 0 else c


@builtin("allclose", "Math", "True when every element of a is close to b: all(isclose(a, b, rtol, atol)).",
         _CLOSE_PARAMS, returns="bool",
         what="Whether two results agree up to rounding, e.g. a hand-written gradient against grad's, or a "
              "port's output against the reference numbers: allclose(mine, reference).",
         how=_CLOSE_HOW + " An empty comparison is true.",
         errors=["ShapeError when a and b do not broadcast", "ValueError when rtol or atol is negative",
                 "TypeError when a or b is not a number, bool or matrix"],
         examples=["allclose([1, 2, 3], [1, 2, 3 + 1e-6])", "allclose([1, 2, 3], [1, 2, 3.01])",
                   "allclose(1e-9, 0)   # within atol = 1e-8", "allclose([1, 2], [1.05, 2], atol=0.1)"])
def allclose(a, b, rtol, atol, equal_nan):
    c = _close("allclose", a, b, rtol, atol, equal_nan)
    return bool(np.all(c)) if type(c) is np.ndarray else bool(xp_of(c).all(c))


def _bool_reduce(name, fn, summary, what=""):
    @builtin(name, "Math", summary,
             [P("x", "array", doc="bool matrix"),
              P("dim", "int", None, doc="the axis to reduce (negative counts from the end); none reduces all"),
              KEEPDIMS], returns="bool, or a bool matrix with axis dim removed",
             what=what, errors=["TypeError when x is not a number, bool or matrix", "ValueError when dim is out of range"],
             how=f"NumPy's `{name}` over every element, or along dim.",
             examples=[f"{name}([1, 2, 3] > 2)", f"{name}([true, true])", f"{name}([1, 0; 1, 1] > 0, dim=1)"])
    def impl(x, dim, keepdims):
        r = raw(x)
        if _other(r):
            r = getattr(xp_of(r), name)(r, axis=axis(x, dim), keepdims=keepdims)
            return bool(r) if r.ndim == 0 else r
        r = fn(r, axis=axis(x, dim), keepdims=keepdims)
        return bool(r) if np.ndim(r) == 0 else r
    return impl


_bool_reduce("any", np.any, "True when at least one element is true (nonzero).",
             "Whether a condition holds anywhere, e.g. any(x < 0) or any(x != x) (a nan somewhere). "
             "Numbers count as true when nonzero (nan too); an empty matrix gives false.")
_bool_reduce("all", np.all, "True when every element is true (nonzero).",
             "Whether a condition holds everywhere, e.g. all(abs(a - b) < 1e-9). Numbers count as true "
             "when nonzero; an empty matrix gives true.")


# ---- the elementwise vocabulary of issue 20 (primitives in lang/array/elementwise_ops.py) -----------------
_NAN_EDGE = ["TypeError when x is not a number or matrix (outside the domain the result is nan, as NumPy: "
             "no error, like log and sqrt)"]
_elementwise("log10", ops.log10, "Base-10 logarithm of each element (log10(0) = -inf).", "log10(x); d/dx = 1/(x ln 10)",
             ["log10([0.5, 10, 1000])", "log10([0, -1])"], "A zero cotangent stays zero (0 x inf = 0).",
             what="The power of ten that gives x: log10(1000) is 3, handy for orders of magnitude (a loss "
                  "falling from 1 to 0.001 is 3 decades). IEEE arithmetic, as log: log10(0) is -inf and "
                  "log10(-1) is nan.", errors=_NAN_EDGE)
_elementwise("log2", ops.log2, "Base-2 logarithm of each element (log2(0) = -inf).", "log2(x); d/dx = 1/(x ln 2)",
             ["log2([0.5, 8, 1024])", "log2([0, -1])"], "A zero cotangent stays zero (0 x inf = 0).",
             what="The power of two that gives x: log2(1024) is 10, e.g. bits per token from a loss in nats "
                  "is loss / log(2), and log2 of a vocabulary size the bits an id takes.", errors=_NAN_EDGE)
_elementwise("tan", ops.tan, "Tangent of each element (radians).", "tan(x); d/dx = 1 + tan(x)^2",
             ["tan([0.25, -0.5, 1.0])", "tan(pi() / 4)"],
             what="The tangent sin(x) / cos(x) of an angle in radians. Near pi/2 it is large, not inf (pi/2 "
                  "is not exact in floating point).")
_elementwise("log1p", ops.log1p, "log(1 + x), accurate for tiny x.", "log(1 + x); d/dx = 1/(1 + x)",
             ["log1p([0.5, 2, 1e-20])", "log(1 + 1e-20)  # the naive form loses it"],
             "A zero cotangent stays zero at x = -1.",
             what="log(1 + x) without the rounding of 1 + x: log1p(1e-20) is 1e-20 where log(1 + 1e-20) is 0. "
                  "log1p(-1) is -inf and below -1 the result is nan.", errors=_NAN_EDGE)
_elementwise("expm1", ops.expm1, "exp(x) - 1, accurate for tiny x.", "exp(x) - 1; d/dx = exp(x)",
             ["expm1([0.5, -2, 1e-20])", "exp(1e-20) - 1  # the naive form loses it"],
             what="exp(x) - 1 without the cancellation: expm1(1e-20) is 1e-20, where exp(1e-20) - 1 is 0; the "
                  "inverse of log1p.")
_elementwise("asin", ops.asin, "Arcsine of each element, in radians in [-pi/2, pi/2].", "asin(x); d/dx = 1/sqrt(1 - x^2)",
             ["asin([0.5, -0.25, 0.75])", "asin([1, 2])"], "The derivative is inf at x = +-1; a zero cotangent stays zero.",
             what="The angle whose sine is x (NumPy's `arcsin`, MATLAB's and PyTorch's `asin`). Defined on "
                  "[-1, 1]; asin(2) is nan, as NumPy.", errors=_NAN_EDGE)
_elementwise("acos", ops.acos, "Arccosine of each element, in radians in [0, pi].", "acos(x); d/dx = -1/sqrt(1 - x^2)",
             ["acos([0.5, -0.25, 0.75])", "acos([1, -1, 2])"], "The derivative is -inf at x = +-1; a zero cotangent stays zero.",
             what="The angle whose cosine is x (NumPy's `arccos`), e.g. the angle between unit vectors: "
                  "acos(dot(u, v)). Defined on [-1, 1]; acos(2) is nan, as NumPy.", errors=_NAN_EDGE)
_elementwise("atan", ops.atan, "Arctangent of each element, in radians in (-pi/2, pi/2).", "atan(x); d/dx = 1/(1 + x^2)",
             ["atan([1.5, -2, 0.5])", "atan([1, 1 / 0])"],
             what="The angle whose tangent is x (NumPy's `arctan`); atan(1 / 0) is pi/2. For the angle of a point "
                  "(x, y) in all four quadrants use atan2(y, x).")
_elementwise("sinh", ops.sinh, "Hyperbolic sine of each element.", "sinh(x); d/dx = cosh(x)",
             ["sinh([1.5, -2, 0.5])"], what="(exp(x) - exp(-x)) / 2; it overflows to +-inf past about |x| = 710.")
_elementwise("cosh", ops.cosh, "Hyperbolic cosine of each element.", "cosh(x); d/dx = sinh(x)",
             ["cosh([1.5, -2, 0.5])"], what="(exp(x) + exp(-x)) / 2, at least 1; it overflows to inf past about "
                                            "|x| = 710.")
_elementwise("erf", ops.erf, "The error function of each element.", "erf(x); d/dx = 2/sqrt(pi) exp(-x^2)",
             ["erf([0.5, -1.5, 0.25])", "erf([0, 1 / 0])"],
             what="erf(x) = 2/sqrt(pi) times the integral of exp(-t^2) from 0 to x, from -1 to 1; the normal "
                  "CDF is (1 + erf(x / sqrt(2))) / 2, the heart of gelu. The same primitive as gelu's.")


@builtin("atan2", "Math", "The angle of the point (x, y) in radians, in [-pi, pi] (all four quadrants).",
         [P("y", "array", doc="the y coordinates (a number or matrix)"),
          P("x", "array", doc="the x coordinates; broadcast against y")],
         returns="the broadcast shape of y and x", differentiable=True,
         what="The angle from the positive x axis to the point (x, y), counter-clockwise: atan2(1, 1) is pi/4 "
              "and atan2(1, -1) is 3 pi/4, where atan(y / x) cannot tell the quadrants apart. y comes first, as "
              "in NumPy's `arctan2`, MATLAB's `atan2` and PyTorch's `atan2`.",
         how="NumPy's `arctan2` (signed zeros as IEEE: atan2(0, -1) is pi). d/dy = x / (x^2 + y^2) and "
             "d/dx = -y / (x^2 + y^2), computed as cos(t) / r and -sin(t) / r (t the angle, r = hypot(x, y)) so that "
             "an infinite coordinate gives 0, not inf / inf; at the origin the gradient is 0 (the kink convention, "
             "as abs'(0) = 0). Where x^2 + y^2 would overflow or underflow, r, cos(t) and sin(t) come from x and "
             "y scaled by a power of 2: the gradient at (1e-200, 1e-200) is 5e199, not 0.",
         errors=["ShapeError naming the shapes when y and x do not broadcast to one shape",
                 "TypeError when y or x is not a number or matrix"],
         examples=["atan2([1.5, -0.5, 0.25], [0.5, -2, 1.5])", "atan2(1, [1, -1, 0])", "atan2([0, 0], [1, -1])"])
def atan2(y, x):
    try:
        return ops.atan2(y, x)
    except (ValueError, RuntimeError) as e:
        if not isinstance(e, ValueError) and not _unbroadcastable(y, x):
            raise
        raise ShapeError(f"atan2(): y is {shape_text(ops.shape_of(y))} and x is {shape_text(ops.shape_of(x))}: "
                         f"the shapes do not broadcast") from None


@builtin("ceil", "Math", "The smallest whole number >= x, elementwise.", [X], returns="same shape as x",
         what="Rounds each element up, toward +inf: ceil(2.1) is 3 and ceil(-0.5) is -0 (printed 0), e.g. the "
              "number of batches ceil(n / B).",
         errors=["TypeError when x is not a number or matrix"],
         how="NumPy's `ceil`. Not differentiable (its derivative is 0 almost everywhere): the tape records nothing.",
         examples=["ceil(2.1)", "ceil([-1.5, 0.5, 7 / 2])", "ceil(10 / 3)  # batches of 3 for 10 rows"])
def ceil(x):
    return ops.ceil(x)


@builtin("sign", "Math", "-1, 0 or 1 by the sign of each element (sign(0) = 0).", [X], returns="same shape as x",
         what="The sign of each element: -1 for negatives, 1 for positives and 0 for 0 (and -0); nan stays nan. "
              "The derivative of abs.",
         errors=["TypeError when x is not a number or matrix"],
         how="NumPy's `sign` (MATLAB and PyTorch agree: sign(0) = 0). Not differentiable (its derivative is 0 "
             "almost everywhere): a primitive the tape does not record, so grad through it is 0.",
         examples=["sign([-2.5, 0, 3])", "sign(-0.0)"])
def sign(x):
    return ops.sign(x)


def _test(name, fn, summary, what):
    @builtin(name, "Math", summary, [X], returns="bool, or a bool matrix of x's shape",
             what=what, errors=["TypeError when x is not a number or matrix"],
             how=f"NumPy's `{name}`. A test, not a function of x's value: nothing is recorded on the tape.",
             examples=[f"{name}([1, 0 / 0, 1 / 0, -1 / 0])", f"{name}(1 / 0)", f"any({name}([0, 1] / 0))"])
    def impl(x):
        r = raw(x)
        if _other(r):
            out = getattr(xp_of(r), name)(ops.bools_as_floats(r))
            return bool(out) if out.ndim == 0 else out
        out = fn(ops.bools_as_floats(r) if isinstance(r, np.ndarray) else r)
        return bool(out) if np.ndim(out) == 0 else out
    return impl


_test("isnan", np.isnan, "True where an element is nan.",
      "Finds the missing or undefined values: isnan(0 / 0) is true. nan == nan is false, so x == nan never finds one.")
_test("isinf", np.isinf, "True where an element is inf or -inf.",
      "Finds the overflows: isinf(exp(1000)) is true; nan is not inf.")
_test("isfinite", np.isfinite, "True where an element is neither inf, -inf nor nan.",
      "The check before a training step trusts a loss: all(isfinite(g)) is false when the gradient has blown up.")
