"""Arrays: one element per position along an axis (issue 29): take_along, put_along, add_along."""
from __future__ import annotations

import numpy as np

from tapeml.array import limits, ops
from tapeml.array.backend import to_numpy
from tapeml.builtins.registry import P, builtin
from tapeml.builtins.util import axis
from tapeml.syntax.errors import IndexErr, LangError, ShapeError, TypeErr
from tapeml.array.tape import raw
from tapeml.array.values import describe, shape_text
from tapeml.array.printer import format_value, not_whole_text


# ---- one element per position along an axis: the pairs, not the grid (issue 29) --------------
# x[rows, ids] picks every row with every id (the grid rule of indexing); NumPy's
# x[arange(n), ids] picks pairs. take_along gathers the pairs; put_along and add_along write them
# back, returning a new value. All three are composites: take_along and put_along primitives
# (a gather and its scatter-add, each the other's VJP), setitem, broadcast_to and reshape.
_IDS = P("ids", "array", shape="x without axis dim, or x's rank",
         doc="0-based positions along dim, whole numbers: one per position of x without axis dim (the "
             "pairs), or with x's number of axes (NumPy's take_along_axis)")
_ALONG_DIM = P("dim", "int", -1, doc="the axis the ids index (negative counts from the end)")


def _along_ids(fname: str, x, ids, dim, write: bool):
    """Check x, ids and dim: (d, the ids as intp with x's rank, broadcast to the result's layout,
    whether ids had one axis fewer than x). The other axes broadcast by NumPy's rule; for a write
    (put_along, add_along) x is not broadcast, so they must broadcast into x's."""
    xs = ops.shape_of(x)
    if not xs:
        raise ShapeError(f"{fname}(): x must be a vector or a matrix, got a number")
    try:
        d = axis(x, dim)
    except LangError as e:
        e.message = f"{fname}(): {e.message}"
        raise
    r = to_numpy(raw(ids))     # ids are checked and kept on the host (the index's rule: lang/array/index_ops.py)
    if isinstance(r, (bool, np.bool_)) or not isinstance(r, (float, int, np.ndarray)) or \
            (isinstance(r, np.ndarray) and r.dtype == np.bool_):
        raise TypeErr(f"{fname}(): ids must be a number or a matrix of whole numbers, got {describe(ids)}")
    a = np.asarray(r, dtype=np.float64)
    if a.size:
        bad = ~np.isfinite(a) | (a != np.floor(a))
        if bad.any():
            raise IndexErr(f"{fname}(): ids must be whole numbers, got {not_whole_text(a[bad].flat[0])}")
        out = (a < 0) | (a > xs[d] - 1)
        if out.any():
            where = f"ids go from 0 to {xs[d] - 1}" if xs[d] else "that axis has no elements"
            raise IndexErr(f"{fname}(): id {format_value(float(a[out].flat[0]))} is out of range for axis {d} of x "
                           f"({describe(x)}): {where}")
    nd = len(xs)
    fewer = a.ndim == nd - 1
    if fewer:
        a = np.expand_dims(a, d)
    elif a.ndim != nd:
        raise ShapeError(f"{fname}(): ids has {a.ndim} ax{'is' if a.ndim == 1 else 'es'} but x ({describe(x)}) has "
                         f"{nd}: ids must be shaped like x without axis {d} (one id per position), or have {nd} "
                         f"axes as in NumPy's take_along_axis; got {describe(ids)}")
    shape = []
    for ax in range(nd):
        nx, ni = xs[ax], a.shape[ax]
        if ax == d:
            shape.append(ni)
        elif ni == nx or ni == 1 or (nx == 1 and not write):
            shape.append(nx if ni == 1 else ni)
        else:
            other = tuple(n for i, n in enumerate(xs) if i != d)
            want = (f"shaped like x without axis {d} ({shape_text(other)})" if fewer else
                    f"sized like x on every axis but {d} (or 1 there)")
            given = a.shape[:d] + a.shape[d + 1:] if fewer else a.shape
            raise ShapeError(f"{fname}(): ids is {shape_text(given)}, but x is {shape_text(xs)} and dim = {d}: ids "
                             f"must be {want}")
    limits.check_elements(f"{fname}() of {shape_text(tuple(shape))} ids", shape)
    return d, np.broadcast_to(a.astype(np.intp), shape), fewer


def _picked_values(fname: str, values, ib, d: int, fewer: bool):
    """values broadcast to the shape of the positions written (the shape take_along would give),
    then laid out as the ids are (with axis d) for the store."""
    picked = ib.shape[:d] + ib.shape[d + 1:] if fewer else ib.shape
    vs = ops.shape_of(values)
    if vs != picked:
        if len(vs) > len(picked) or any(a not in (1, b) for a, b in zip(reversed(vs), reversed(picked))):
            raise ShapeError(f"{fname}(): values is {shape_text(vs)}, but the positions written are "
                             f"{shape_text(picked)} (one per id): values must be that shape, or broadcast to it")
        values = ops.broadcast_to(values, shape=picked)
    return ops.reshape(values, shape=ib.shape) if fewer else values


@builtin("take_along", "Arrays", "One element per position along dim: take_along(P, ys) is P[i, ys[i]] for each row i "
         "(NumPy's P[arange(n), ys]).",
         [P("x", "array", shape="[..., n, ...]"), _IDS, _ALONG_DIM],
         returns="ids' shape (x's other axes broadcast against it)", differentiable=True,
         what="Picks, at every position of the other axes, the element whose index along dim the ids give: "
              "the probability each row gives its target, take_along(probs, ys), where NumPy and PyTorch "
              "write probs[arange(n), ys]. tapeml's indexing picks grids (P[0:n-1, ys] is every row with "
              "every id, n x n), so the pairs have this builtin. With ids of one axis fewer than x, the "
              "result has x's shape without axis dim (one element per row of a matrix); with ids of x's "
              "rank it is NumPy's `take_along_axis` and PyTorch's `take_along_dim`.",
         how="out[..., i, ...] = x[..., ids[..., i, ...], ...] along dim (NumPy's `take_along_axis`, PyTorch's "
             "`take_along_dim`; PyTorch's `gather(x, dim, ids)` where ids have x's shape on the other axes). "
             "The other axes broadcast against each other by NumPy's rule (gather instead takes a leading "
             "block when ids are smaller; here that is a ShapeError). Ids are 0-based and never negative. "
             "The gradient scatters the cotangent back to the positions picked, adding where an id repeats "
             "(the take_along and put_along primitives, each the other's VJP).",
         errors=["IndexError when an id is not a whole number or lies outside 0 .. size(x, dim) - 1",
                 "ShapeError when ids has neither x's number of axes nor one fewer, or its other axes do not "
                 "broadcast against x's", "ValueError when dim is out of range",
                 "ShapeError when x is a number"],
         examples=["P = [0.1, 0.7, 0.2; 0.5, 0.25, 0.25]\nys = [1, 0]\ntake_along(P, ys)   # P[0, 1] and P[1, 0]",
                   "probs = [0.1, 0.7, 0.2; 0.5, 0.25, 0.25; 0.3, 0.3, 0.4]\nys = [1, 0, 2]\n"
                   "round(-mean(log(take_along(probs, ys))), 4)   # makemore's loss",
                   "x = [10, 11, 12; 20, 21, 22]\ntake_along(x, [2, 0; 1, 1], dim=1)   # NumPy's take_along_axis",
                   "take_along([10, 11, 12; 20, 21, 22], [1, 0, 1], dim=0)   # one row per column",
                   "grad(fn(P) -> sum(take_along(P, [1, 1])), [1, 2; 3, 4])"])
def take_along(x, ids, dim):
    d, ib, fewer = _along_ids("take_along", x, ids, dim, write=False)
    xs = ops.shape_of(x)
    wide = tuple(xs[ax] if ax == d else ib.shape[ax] for ax in range(len(xs)))
    if wide != xs:
        x = ops.broadcast_to(x, shape=wide)
    out = ops.take_along(x, idx=ib, dim=d)
    if not fewer:
        return out
    if len(xs) == 1:            # a vector and one id: the number
        return ops.index(out, idx=(0,))
    return ops.reshape(out, shape=ib.shape[:d] + ib.shape[d + 1:])


@builtin("put_along", "Arrays", "x with one element per position along dim replaced: the write of take_along "
         "(NumPy's x[arange(n), ys] = v), as a new value.",
         [P("x", "array", shape="[..., n, ...]"), _IDS,
          P("values", "array", shape="broadcasts to take_along(x, ids, dim)", doc="the new elements"), _ALONG_DIM],
         returns="same shape as x", differentiable=True,
         what="Replaces the elements take_along(x, ids, dim) would pick and returns the new matrix; x itself "
              "is unchanged (value semantics: write x = put_along(x, ids, v)). The write of NumPy's "
              "x[arange(n), ys] = v, where tapeml's x[0:n-1, ys] = v would write the whole grid.",
         how="NumPy's `put_along_axis` and PyTorch's `scatter(x, dim, ids, values)` (not in place). values "
             "broadcast to the positions written. When an id repeats along a row, the last write wins, in "
             "row-major order, as in tapeml's index assignment (PyTorch leaves the order undefined); the "
             "overwritten values get gradient 0. A recorded store (the setitem primitive): the gradient to x "
             "is the cotangent with the written positions zeroed, to values the cotangent at them.",
         errors=["IndexError when an id is not a whole number or lies outside 0 .. size(x, dim) - 1",
                 "ShapeError when ids has neither x's number of axes nor one fewer, or does not fit x's other "
                 "axes, or values does not broadcast to the positions written", "ValueError when dim is out of range"],
         examples=["x = zeros(3, 4)\nput_along(x, [1, 3, 0], [5, 6, 7])",
                   "put_along([1, 2, 3; 4, 5, 6], [2, 0], 0)   # one number for every position",
                   "grad(fn(v) -> sum(put_along(ones(2, 3), [0, 2], v) * [1, 2, 3; 4, 5, 6]), [10, 20])"])
def put_along(x, ids, values, dim):
    d, ib, fewer = _along_ids("put_along", x, ids, dim, write=True)
    v = _picked_values("put_along", values, ib, d, fewer)
    return ops.setitem(x, v, idx=ops.along(ib, d))


@builtin("add_along", "Arrays", "x plus values at one position per row along dim: NumPy's x[arange(n), ys] += v, "
         "as a new value.",
         [P("x", "array", shape="[..., n, ...]"), _IDS,
          P("values", "array", shape="broadcasts to take_along(x, ids, dim)", doc="what to add"), _ALONG_DIM],
         returns="same shape as x", differentiable=True,
         what="Adds values at the elements take_along(x, ids, dim) would pick and returns the new matrix: the "
              "manual backward pass of cross-entropy, dlogits = add_along(probs, ys, -1) / n, where NumPy "
              "and PyTorch write dlogits[range(n), ys] -= 1. x itself is unchanged (value semantics).",
         how="PyTorch's `scatter_add(x, dim, ids, values)` and NumPy's `np.add.at` on take_along_axis "
             "positions (not in place): where an id repeats, the values add up (NumPy's x[idx] += v instead "
             "adds once). Composed as x + put_along(values, ids) with the put_along primitive (a scatter-add "
             "into zeros), so the gradient to x is the cotangent and to values the cotangent gathered by "
             "take_along.",
         errors=["IndexError when an id is not a whole number or lies outside 0 .. size(x, dim) - 1",
                 "ShapeError when ids has neither x's number of axes nor one fewer, or does not fit x's other "
                 "axes, or values does not broadcast to the positions written", "ValueError when dim is out of range"],
         examples=["probs = [0.1, 0.7, 0.2; 0.5, 0.25, 0.25]\nys = [1, 0]\n"
                   "add_along(probs, ys, -1)   # dlogits of cross-entropy, times n",
                   "add_along(zeros(5), [1, 3, 1], 1, dim=0)   # a repeated id adds twice",
                   "grad(fn(v) -> sum(add_along(zeros(2, 3), [2, 2], v) * [1, 2, 3; 4, 5, 6]), [1, 1])"])
def add_along(x, ids, values, dim):
    d, ib, fewer = _along_ids("add_along", x, ids, dim, write=True)
    v = _picked_values("add_along", values, ib, d, fewer)
    return ops.add(x, ops.put_along(v, idx=ib, dim=d, shape=ops.shape_of(x)))
