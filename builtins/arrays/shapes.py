"""Arrays: reshaping, joining and cutting matrices: reshape, transpose, concat, stack, tril, triu,
flatten, squeeze, expand_dims, permute, flip, tile, repeat, pad, chunk, roll."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B, limits, ops
from tapeml.builtins.registry import INT_BOUND, P, builtin, numbers_vector
from tapeml.builtins.vocabulary import DIMS
from tapeml.builtins.util import axis, is_whole, not_whole, one_by_one
from tapeml.syntax.errors import ShapeError, TypeErr, ValueErr
from tapeml.array.primitive_table import is_bool_array
from tapeml.array.tape import Box, raw
from tapeml.array.values import describe, shape_text
from tapeml.array.number_text import format_number
from tapeml.array.printer import format_value


@builtin("reshape", "Arrays", "The same elements in a new shape, filled in row-major (C) order.",
         [P("x", "array"), DIMS], returns="[dims...]", differentiable=True,
         what="Lays the elements of x out in new sizes without changing their order (row by row), e.g. a "
              "[B*T, D] matrix as [B, T, D]. The element counts must match; one size may be -1 and is then "
              "computed from the others.",
         errors=["ShapeError when the elements do not fill the new shape exactly (or two sizes are -1)",
                 "ValueError when a size is not a whole number or is below -1, or is past the size limit "
                 "(reshape(zeros(0), 0, 2^40): no elements, but no such axis either)",
                 "TypeError when x is not a number or matrix"],
         how="NumPy's `reshape` (C order, as NumPy and PyTorch). One size may be -1 to be inferred.",
         examples=["reshape(1:6, 2, 3)", "reshape([1, 2; 3, 4], 4)", "reshape(1:6, -1, 2)",
                   "y = zeros(3, 2)\nreshape(1:6, size(y))   # the sizes as one tuple"])
def reshape(x, dims):
    shape = []
    for d in one_by_one("reshape", dims):
        d = raw(d)
        if not is_whole(d, -1):
            raise ValueErr(f"reshape(): sizes must be whole numbers (or -1), got {not_whole(d)}")
        shape.append(int(d))
    n = math.prod(ops.shape_of(x))
    known = math.prod(d for d in shape if d != -1)
    if shape.count(-1) > 1 or (-1 not in shape and known != n) or (-1 in shape and (known == 0 or n % known)):
        shown = " x ".join(str(d) if d < 10 ** 16 else format_number(float(d)) for d in shape)
        raise ShapeError(f"reshape(): cannot put {n} elements ({shape_text(ops.shape_of(x))}) "
                         f"into shape {shown}")
    # reshape(zeros(0), 0, 2^60): the counts agree (no elements), but there is no such axis either
    if max(shape, default=0) > INT_BOUND:
        raise ValueErr(f"reshape(): sizes must be whole numbers between -1 and 2^53, got "
                       f"{format_value(float(max(shape)))}")
    limits.check_axes("reshape()", shape)
    return ops.reshape(x, shape=tuple(shape))


@builtin("transpose", "Arrays", "Swap the last two axes (x'); a vector becomes a column.",
         [P("x", "array")], returns="x with the last two axes swapped", differentiable=True,
         what="Turns rows into columns: element [i, j] moves to [j, i]. Written x' in code, as in the "
              "attention scores q @ k'. A number is returned unchanged.",
         errors=["TypeError when x is not a number or matrix"],
         how="Swaps the last two axes (NumPy's `swapaxes(x, -1, -2)`), so a batch [B, T, D] becomes "
             "[B, D, T]; a vector of length n becomes the n x 1 column (MATLAB's rule, not NumPy's no-op). "
             "The VJP transposes the cotangent back (reshaping a column to a vector).",
         examples=["transpose([1, 2; 3, 4])", "transpose([1, 2])", "[1, 2; 3, 4]'"])
def transpose(x):
    return ops.transpose(x)


def _join(name, prim, xs, dim):
    where = "argument"
    if len(xs) == 1 and isinstance(raw(xs[0]), tuple):      # stack(map(...)): the tuple's items
        xs, where = tuple(raw(xs[0])), "item"
        if not xs:
            raise TypeErr(f"{name}() of an empty tuple: there is nothing to join (vector(()) is the empty vector)")
    if not xs:
        raise TypeErr(f"{name}() needs at least one matrix")
    for i, v in enumerate(xs):
        if not isinstance(raw(v), (float, B.Matrix)) or isinstance(raw(v), bool):
            place = f" ({where} {i})" if len(xs) > 1 else ""
            raise TypeErr(f"{name}() joins matrices and numbers, got {describe(v)}{place}")
    if name == "concat" and any(len(ops.shape_of(v)) == 0 for v in xs):
        # numbers join vectors end to end, as in the literal [a, b]
        if dim not in (0, -1) or any(len(ops.shape_of(v)) > 1 for v in xs):
            raise TypeErr("concat() joins numbers only with vectors, along dim 0 (a number is a vector of "
                          "length 1 there)")
        xs = tuple(ops.reshape(v, shape=(1,)) if len(ops.shape_of(v)) == 0 else v for v in xs)
        dim = 0
    first = xs[0]
    nd = len(ops.shape_of(first)) + (1 if name == "stack" else 0)
    if not -nd <= dim < nd:
        raise ValueErr(f"{name}(): dim={dim} is out of range for {nd}-axis results")
    try:
        return prim(*xs, dim=dim % nd)
    except ValueError:
        shapes = ", ".join(shape_text(ops.shape_of(v)) for v in xs)
        raise ShapeError(f"{name}(): the shapes do not fit along dim {dim}: {shapes}") from None


@builtin("concat", "Arrays", "Join matrices end to end along an existing axis.",
         [P("xs", variadic=True, doc="matrices with equal sizes except along dim; or one tuple of them (what "
                                     "map returns)"),
          P("dim", "int", 0, doc="the axis to join along")], returns="joined matrix", differentiable=True,
         what="Puts matrices one after another along an axis they already have: vectors end to end, "
              "matrices below each other (dim=0) or side by side (dim=1). A number joins vectors as a vector "
              "of length 1 (as in [a, b]). A single tuple argument joins its items: concat(map(f, xs)).",
         how="NumPy's `concatenate(xs, axis=dim)`; the VJP slices the cotangent back into one piece per input. "
             "Numbers are reshaped to length-1 vectors first (NumPy and PyTorch refuse them).",
         errors=["ShapeError when the sizes differ on an axis other than dim",
                 "TypeError when there are no matrices, an argument is not a number or matrix, or a number "
                 "is joined with a matrix of 2 or more axes",
                 "ValueError when dim is out of range"],
         examples=["concat([1, 2], [3])", "concat([1, 2; 3, 4], [5, 6; 7, 8], dim=1)", "concat(0, [1, 2], 3)",
                   "concat(map(fn(n) -> zeros(n) + n, (1, 2)))"])
def concat(xs, dim):
    return _join("concat", ops.concat, xs, dim)


@builtin("stack", "Arrays", "Stack equal-shaped matrices along a new axis.",
         [P("xs", variadic=True, doc="matrices (or numbers) of one shape; or one tuple of them (what map returns)"),
          P("dim", "int", 0, doc="position of the new axis")],
         returns="[len(xs), ...] for dim=0", differentiable=True,
         what="Puts equal-shaped matrices together along a new axis: N vectors of length D make an N x D "
              "matrix (dim=0, one per row) or a D x N one (dim=1, one per column); N numbers make a vector. "
              "A single tuple argument stacks its items: stack(map(f, xs)) is the matrix of the results.",
         how="NumPy's `stack(xs, axis=dim)`; the VJP takes each input's slice of the cotangent along dim.",
         errors=["ShapeError when the inputs do not all have one shape",
                 "TypeError when there are no matrices, or an argument is not a number or matrix",
                 "ValueError when dim is out of range"],
         examples=["stack([1, 2], [3, 4])", "size(stack(zeros(2, 3), ones(2, 3)))", "stack([1, 2], [3, 4], dim=1)",
                   "stack(map(fn(i) -> [i, i ^ 2], 1:3))"])
def stack(xs, dim):
    return _join("stack", ops.stack, xs, dim)


@builtin("vector", "Arrays", "The vector of a tuple of numbers (what map returns); a vector unchanged.",
         [P("xs", "numbers", doc="a tuple of numbers (or of bools), a vector, or a number")],
         returns="[len(xs)]", differentiable=True,
         what="Turns the tuple that map, zip or a loop's results give back into a vector to compute with: "
              "vector(map(len, words)) is the vector of the lengths. A tuple of bools gives a bool vector, "
              "() the empty vector, a number a vector of length 1. The inverse is tuple(v).",
         how="The items are stacked with the stack primitive, so a tracked item keeps its gradient "
             "(NumPy's `np.array(list_of_floats)`, PyTorch's `torch.stack`). Matrices are not items: "
             "stack(xs) joins a tuple of vectors into a matrix.",
         errors=["TypeError naming the first item that is not a number (a string, a tuple, a matrix), or "
                 "when bools and numbers are mixed",
                 "TypeError when xs is a matrix with 2 or more axes (stack or flatten it)"],
         examples=["vector((1.5, 2, 3)) * 2", "vector(map(len, (\"to\", \"be\", \"or\")))", "vector(())",
                   "grad(fn(w) -> sum(vector((w, 2 * w, 3)) ^ 2), 1)"])
def vector(xs):
    r = raw(xs)
    if isinstance(r, tuple):
        return numbers_vector("vector", "xs", xs)
    if isinstance(r, B.Matrix):
        if r.ndim == 1:
            return xs
        if r.ndim == 0:
            return ops.reshape(xs, shape=(1,))
        raise TypeErr(f"vector(): xs is {describe(xs)}; a vector has one axis: flatten(x) reads it row by "
                      f"row, stack(xs) joins a tuple of vectors")
    if isinstance(r, (float, int, bool, np.bool_)):
        return B.new_matrix([r], np.bool_ if isinstance(r, (bool, np.bool_)) else ops.FLOAT["dtype"]) \
            if type(xs) is not Box else ops.reshape(xs, shape=(1,))
    raise TypeErr(f"vector(): xs must be a tuple of numbers, a vector or a number, got {describe(xs)}")


# ---- shapes of issue 20: composites of the shape and index primitives (reshape, permute,
# broadcast_to, index, setitem, where), so each is differentiable with their VJPs ---------------------
def _whole(fname, what, v, lo=0):
    """A count or offset: a whole number >= lo, and at most 2^53 in magnitude (the rule of every
    whole-number parameter, registry.INT_BOUND: never a 300-digit int reaching NumPy)."""
    v = raw(v)
    if not is_whole(v, lo):
        raise ValueErr(f"{fname}(): {what} must be a whole number{'' if lo is None else f' >= {lo}'}, got {not_whole(v)}")
    if abs(v) > INT_BOUND:
        low = "-2^53" if lo is None else lo
        raise ValueErr(f"{fname}(): {what} must be a whole number between {low} and 2^53, got {format_value(v)}")
    return int(v)


def _ranked(fname, x, least=1):
    shape = ops.shape_of(x)
    if len(shape) < least:
        need = "a vector or matrix" if least == 1 else "a matrix (2 axes or more)"
        raise ShapeError(f"{fname}() needs {need}, got {describe(x)}")
    return shape


def _tri(fname, x, k, lower):
    shape = _ranked(fname, x, 2)
    k = _whole(fname, "k", k, lo=None)
    n, m = shape[-2:]
    r = raw(x)
    if type(r) is np.ndarray:
        mask = np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)
    else:                         # on x's device: column j against row i + k
        be = B.of(r)
        xp = be.xp
        gap = xp.arange(m, device=be.device)[None, :] - xp.arange(n, device=be.device)[:, None]
        mask = gap <= k if lower else gap >= k
    if is_bool_array(r):
        return r & mask           # a mask stays a mask (NumPy's tril of a bool matrix); no gradient
    return ops.where(mask, x, 0.0)


_TRI_HOW = ("NumPy's `{0}` and PyTorch's `{0}` (MATLAB's `{0}` too): element [i, j] of the last two axes is kept "
            "where j {1} i + k, else 0, for every matrix of a batch. Written where(mask, x, 0), so the "
            "gradient is the cotangent on the kept elements and 0 elsewhere.")


@builtin("tril", "Arrays", "The lower triangle: x with the elements above diagonal k set to 0.",
         [P("x", "array", shape="[..., N, M]"), P("k", "int", 0, doc="the diagonal: 0 the main one, 1 above it, -1 below")],
         returns="same shape as x", differentiable=True,
         what="Keeps the elements on and below a diagonal and zeros the rest. `tril(ones(T, T)) > 0` is the "
              "causal mask of a decoder: row t may look at columns 0..t.",
         how=_TRI_HOW.format("tril", "<="),
         errors=["ShapeError when x has fewer than 2 axes", "ValueError when k is not a whole number"],
         examples=["tril([1.5, 2, 3; 4, 5, 6; 7, 8, 9])", "tril(ones(4, 4)) > 0  # the causal mask",
                   "tril(ones(3, 3), k=-1)", "scores = zeros(3, 3)\nsoftmax(where(tril(ones(3, 3)) > 0, scores, -1 / 0))"])
def tril(x, k):
    return _tri("tril", x, k, True)


@builtin("triu", "Arrays", "The upper triangle: x with the elements below diagonal k set to 0.",
         [P("x", "array", shape="[..., N, M]"), P("k", "int", 0, doc="the diagonal: 0 the main one, 1 above it, -1 below")],
         returns="same shape as x", differentiable=True,
         what="Keeps the elements on and above a diagonal and zeros the rest; `triu(ones(T, T), k=1) > 0` marks "
              "the future positions a causal mask hides.",
         how=_TRI_HOW.format("triu", ">="),
         errors=["ShapeError when x has fewer than 2 axes", "ValueError when k is not a whole number"],
         examples=["triu([1.5, 2, 3; 4, 5, 6; 7, 8, 9])", "triu(ones(3, 3), k=1) > 0"])
def triu(x, k):
    return _tri("triu", x, k, False)


@builtin("flatten", "Arrays", "All elements as one vector, row by row (row-major).", [P("x", "array")],
         returns="[numel(x)]", differentiable=True,
         what="The elements of x as a vector in row-major (C) order: row 0 first, then row 1. A number becomes a "
              "vector of one element.",
         how="reshape(x, -1): NumPy's `flatten()` and PyTorch's `flatten()` (C order). MATLAB's `x(:)` reads "
             "column by column; for that order write flatten(x').",
         errors=["TypeError when x is not a number or matrix"],
         examples=["flatten([1.5, 2; 3, 4])", "flatten([1, 2; 3, 4]')  # column-major, as MATLAB's x(:)"])
def flatten(x):
    return ops.reshape(x, shape=(-1,))


@builtin("squeeze", "Arrays", "Drop axes of size 1: all of them, or the one named.",
         [P("x", "array"), P("dim", "int", None, doc="the axis to drop (it must have size 1); none drops all size-1 axes")],
         returns="x without its size-1 axes", differentiable=True,
         what="Removes axes of length 1, e.g. [B, 1, D] -> [B, D]. Without dim every size-1 axis goes, so a 1 x 1 "
              "matrix becomes a number.",
         how="NumPy's `squeeze`: naming an axis whose size is not 1 is an error, as NumPy (PyTorch's `squeeze` "
             "leaves such an axis alone without a word). A reshape, so the gradient is reshaped back.",
         errors=["ShapeError when the axis dim does not have size 1", "ValueError when dim is out of range"],
         examples=["squeeze([1.5; 2])", "size(squeeze(zeros(2, 1, 3)))", "size(squeeze(zeros(1, 2, 1), dim=0))",
                   "# raises\nsqueeze(zeros(2, 3), dim=0)"])
def squeeze(x, dim):
    shape = ops.shape_of(x)
    if dim is None:
        new = tuple(n for n in shape if n != 1)
    else:
        d = axis(x, dim)
        if shape[d] != 1:
            raise ShapeError(f"squeeze(): axis {d} of {shape_text(shape)} has size {shape[d]}, not 1")
        new = shape[:d] + shape[d + 1:]
    return ops.reshape(x, shape=new)


@builtin("expand_dims", "Arrays", "Insert an axis of size 1 at position dim.",
         [P("x", "array"), P("dim", "int", doc="where the new axis goes (negative counts from the end of the result)")],
         returns="x with one more axis", differentiable=True,
         what="Adds an axis of length 1, e.g. a [D] vector as a [1, D] row (dim=0) or a [D, 1] column (dim=1 or "
              "-1), to broadcast against a matrix.",
         how="NumPy's `expand_dims` and PyTorch's `unsqueeze`: dim counts positions in the result, from "
             "-(ndim + 1) to ndim. A reshape.",
         errors=["ValueError when dim is out of range"],
         examples=["expand_dims([1.5, 2, 3], 0)", "expand_dims([1.5, 2, 3], -1)", "size(expand_dims(zeros(2, 3), 1))"])
def expand_dims(x, dim):
    shape = ops.shape_of(x)
    nd = len(shape) + 1
    if not -nd <= dim < nd:
        raise ValueErr(f"expand_dims(): dim={dim} is out of range for a result with {nd} axes "
                       f"(-{nd} to {nd - 1})")
    d = dim % nd
    return ops.reshape(x, shape=shape[:d] + (1,) + shape[d:])


@builtin("permute", "Arrays", "Reorder the axes: axis i of the result is axis dims[i] of x.",
         [P("x", "array"), P("dims", variadic=True, doc="a permutation of 0 .. ndim-1, one by one or as one tuple")],
         returns="x with its axes reordered", differentiable=True,
         what="Moves axes around, e.g. [B, T, H, D] -> [B, H, T, D] with permute(x, 0, 2, 1, 3), the step that "
              "splits attention heads. The dims are given one by one, as reshape takes its sizes.",
         how="PyTorch's `permute` and NumPy's `transpose(x, axes)` (MATLAB's `permute` counts from 1). Negative "
             "dims count from the end. The VJP permutes the cotangent back by the inverse permutation.",
         errors=["ValueError when dims is not a permutation of 0 .. ndim-1 (a dim repeated, missing or out of range)"],
         examples=["permute([1.5, 2, 3; 4, 5, 6], 1, 0)", "size(permute(zeros(2, 3, 4), 2, 0, 1))"])
def permute(x, dims):
    nd = len(ops.shape_of(x))
    ds = [_whole("permute", "each dim", d, lo=None) for d in one_by_one("permute", dims, "dims")]
    if len(ds) != nd or any(not -nd <= d < nd for d in ds) or sorted(d % nd for d in ds) != list(range(nd)):
        shown = ", ".join(format_value(float(d)) for d in ds) or "no dims"
        need = "no dims (a number has no axes)" if nd == 0 else f"a permutation of 0 .. {nd - 1}"
        raise ValueErr(f"permute(): dims must be {need} for {describe(x)}, got {shown}")
    if nd == 0:
        return x
    return ops.permute(x, axes=tuple(d % nd for d in ds))


@builtin("flip", "Arrays", "Reverse the order of the elements along one axis, or along every axis.",
         [P("x", "array"), P("dim", "int", None, doc="the axis to reverse; none reverses every axis")],
         returns="same shape as x", differentiable=True,
         what="Reverses x along an axis: flip([1, 2, 3]) is [3, 2, 1]; flip(m, dim=1) mirrors each row.",
         how="NumPy's `flip` (no dim: every axis, as NumPy; PyTorch's `flip` needs the dims). MATLAB's `flip` "
             "takes the first non-singleton axis instead: name the axis to be sure. An index with reversed "
             "slices, so the gradient is the cotangent flipped back.",
         errors=["ValueError when dim is out of range"],
         examples=["flip([1.5, 2, 3])", "flip([1, 2; 3, 4], dim=1)", "flip([1, 2; 3, 4])"])
def flip(x, dim):
    shape = ops.shape_of(x)
    if not shape:
        return x
    d = axis(x, dim)
    idx = tuple(slice(None, None, -1) if d is None or i == d else slice(None) for i in range(len(shape)))
    return ops.index(x, idx=idx)


@builtin("tile", "Arrays", "Repeat the whole of x reps times along each axis (NumPy's tile; PyTorch's repeat).",
         [P("x", "array"), P("reps", variadic=True, doc="repetitions per axis (whole numbers >= 0), one by one or as one tuple")],
         returns="[..., reps[i] * size(x, i), ...]", differentiable=True,
         what="Lays copies of x side by side: tile([1, 2], 3) is [1, 2, 1, 2, 1, 2], tile(m, 2, 1) stacks m "
              "twice below itself.",
         how="NumPy's `tile` (MATLAB's `repmat`). PyTorch calls this `x.repeat(reps)`; tapeml's `repeat` is "
             "NumPy's instead (each element n times). With fewer reps than axes, the reps are padded with 1s at "
             "the front; with more, x gets leading axes of size 1 (NumPy's rule). Written as reshape, broadcast_to "
             "and reshape, so the gradient sums the copies.",
         errors=["ValueError when a rep is not a whole number between 0 and 2^53, or the result would pass the "
                 "size limit (a rep of 1e10 on an empty x gives an empty result, as NumPy's)",
                 "TypeError when no reps are given"],
         examples=["tile([1.5, 2], 3)", "tile([1, 2; 3, 4], 2, 1)", "tile([1, 2], 2, 2)"])
def tile(x, reps):
    r = [_whole("tile", "each rep", v) for v in one_by_one("tile", reps, "reps")]
    if not r:
        raise TypeErr("tile() needs the repetitions, e.g. tile(x, 2) or tile(x, 2, 3)")
    shape = ops.shape_of(x)
    n = max(len(r), len(shape))
    r = [1] * (n - len(r)) + r
    s = (1,) * (n - len(shape)) + shape
    out = tuple(a * b for a, b in zip(r, s))
    limits.check_shape(f"tile() of {shape_text(shape)} (a result of {shape_text(out)})", out)
    inter = tuple(v for pair in zip([1] * n, s) for v in pair)
    wide = tuple(v for pair in zip(r, s) for v in pair)
    return ops.reshape(ops.broadcast_to(ops.reshape(x, shape=inter), shape=wide), shape=out)


@builtin("repeat", "Arrays", "Repeat each element n times along an axis (NumPy's repeat; PyTorch's repeat_interleave).",
         [P("x", "array"), P("n", "int", doc="how many times (>= 0)"),
          P("dim", "int", None, doc="the axis; none repeats the flattened elements")],
         returns="a vector (no dim), or x with size(x, dim) * n along dim", differentiable=True,
         what="Each element (or each row, with dim=0) n times in a row: repeat([1, 2], 2) is [1, 1, 2, 2].",
         how="NumPy's `repeat` with one count (MATLAB's `repelem`, PyTorch's `repeat_interleave`). Not PyTorch's "
             "`repeat`, which repeats the whole tensor: that is tapeml's `tile`. Without dim, x is flattened "
             "first, as NumPy. Written as reshape, broadcast_to and reshape, so the gradient sums the copies.",
         errors=["ValueError when n is negative, dim is out of range, or the result would pass the size limit"],
         examples=["repeat([1.5, 2], 2)", "repeat([1, 2; 3, 4], 2, dim=0)", "repeat([1, 2; 3, 4], 2)"])
def repeat(x, n, dim):
    n = _whole("repeat", "n", n)
    given = ops.shape_of(x)
    if dim is None or not ops.shape_of(x):
        x, d = ops.reshape(x, shape=(-1,)), 0
    else:
        d = axis(x, dim)
    s = ops.shape_of(x)
    out = s[:d] + (s[d] * n,) + s[d + 1:]
    limits.check_shape(f"repeat() of {shape_text(given)} (a result of {shape_text(out)})", out)
    t = ops.reshape(x, shape=s[:d + 1] + (1,) + s[d + 1:])
    return ops.reshape(ops.broadcast_to(t, shape=s[:d + 1] + (n,) + s[d + 1:]), shape=out)


def _pad_widths(widths, nd):
    w = B.to_numpy(raw(widths))        # sizes: read on the host
    if isinstance(w, tuple):
        items = [B.to_numpy(raw(p)) for p in w]
        try:
            if all(isinstance(p, (float, int)) and not isinstance(p, bool) for p in items):
                w = np.array(items, dtype=np.float64)
            else:
                w = np.array([[raw(b) for b in (p if isinstance(p, tuple) else np.ravel(p))] for p in items],
                             dtype=np.float64)
        except (TypeError, ValueError):
            w = None
    if isinstance(w, np.ndarray) and w.dtype != np.bool_:
        w = np.asarray(w, dtype=np.float64)
        if w.shape == (2,) or w.shape == (1, 2):
            w = np.tile(w.reshape(1, 2), (nd, 1))
        if w.shape == (nd, 2) and np.all(np.isfinite(w)) and np.all(w == np.floor(w)) and np.all(w >= 0):
            if np.any(w > INT_BOUND):
                raise ValueErr(f"pad(): widths must be whole numbers between 0 and 2^53, got "
                               f"{format_value(float(w.max()))}")
            return [(int(a), int(b)) for a, b in w]
    raise ValueErr(f"pad(): widths must be whole numbers >= 0, one (before, after) pair per axis: a tuple of "
                   f"{nd} pairs or a [{nd}, 2] matrix (one pair alone pads every axis), got {describe(widths)}")


@builtin("pad", "Arrays", "Pad x with a constant: (before, after) elements on each axis.",
         [P("x", "array"), P("widths", doc="((before, after), ...) per axis, or a [ndim, 2] matrix; one pair pads every axis"),
          P("value", "number", 0.0, doc="the constant to pad with")],
         returns="[..., before + size(x, i) + after, ...]", differentiable=True,
         what="Surrounds x with a constant, e.g. pad(tokens, (0, 3)) appends three zeros to a sequence to fill a "
              "batch, pad(m, ((1, 1), (2, 2))) frames a matrix.",
         how="NumPy's `pad` in constant mode: widths per axis from the first axis on, as NumPy ((before, after) "
             "alone applies to every axis). PyTorch's `F.pad` lists pairs from the LAST axis backwards and flat: "
             "F.pad(x, (l, r, t, b)) is pad(x, ((t, b), (l, r))). Written as a setitem of x into a filled matrix, "
             "so the gradient to x is the cotangent's inner block (value gets none).",
         errors=["ValueError when widths is not one whole (before, after) pair >= 0 per axis, or the result would "
                 "pass the size limit (also an empty result whose padded axis would)", "ShapeError when x is a number"],
         examples=["pad([1.5, 2, 3], (1, 2))", "pad([1, 2; 3, 4], ((1, 0), (0, 2)), value=-1)",
                   "pad([1, 2; 3, 4], [0, 1; 1, 1])"])
def pad(x, widths, value):
    shape = _ranked("pad", x)
    w = _pad_widths(widths, len(shape))
    out = tuple(b + n + a for (b, a), n in zip(w, shape))
    limits.check_shape(f"pad() of {shape_text(shape)} (a result of {shape_text(out)})", out)
    r = raw(x)
    if type(r) is np.ndarray or type(r) not in B.ARRAYS:
        dt = r.dtype if isinstance(r, np.ndarray) and r.dtype.kind == "f" else ops.FLOAT["dtype"]
        base = np.full(out, float(value), dtype=dt)
    else:
        be = B.of(r)
        base = be.xp.full(out, float(value), device=be.device,
                          dtype=r.dtype if be.is_float(r) else be.float_dtype())
    return ops.setitem(base, x, idx=tuple(slice(b, b + n) for (b, _), n in zip(w, shape)))


@builtin("chunk", "Arrays", "Split x into n parts along an axis, as a tuple (PyTorch's chunk).",
         [P("x", "array"), P("n", "int", doc="the number of parts (>= 1)"), P("dim", "int", 0, doc="the axis to split")],
         returns="a tuple of parts", differentiable=True,
         what="Cuts x into n equal parts along dim, e.g. a fused [T, 3 D] query-key-value projection into q, k and "
              "v: `q, k, v = chunk(x @ W_qkv, 3, dim=-1)`.",
         how="PyTorch's `chunk`: each part has ceil(size / n) elements along dim and the last one the rest, so "
             "when n does not divide the size the last part is smaller, and there may be fewer than n parts "
             "(chunk(1:5, 4) gives sizes 2, 2, 1), as PyTorch. NumPy's `array_split` instead makes n parts whose "
             "sizes differ by at most one. Each part is an index of x, so the gradient puts each part's cotangent "
             "back in place.",
         errors=["ValueError when n is not a whole number >= 1, or dim is out of range",
                 "ValueError when an empty axis would give more parts than the size limit",
                 "ShapeError when x is a number"],
         examples=["chunk([1.5, 2, 3, 4], 2)", "qkv = reshape(1:12, 2, 6)\nq, k, v = chunk(qkv, 3, dim=1)\nprint(k)",
                   "chunk(1:5, 4)  # ceil(5 / 4) = 2 each: three parts, as PyTorch"])
def chunk(x, n, dim):
    shape = _ranked("chunk", x)
    n = _whole("chunk", "n", n, lo=1)
    d = axis(x, dim)
    size = shape[d]
    step = max(1, -(-size // n))
    lead = (slice(None),) * d
    if size == 0:                 # an empty axis: n empty parts, as PyTorch (one value, n times)
        if n > limits.max_elements():
            raise limits.elements_error(f"chunk() of an empty axis into {n} parts (a tuple of {n})", n)
        return (ops.index(x, idx=lead + (slice(0, 0),)),) * n
    return tuple(ops.index(x, idx=lead + (slice(a, min(a + step, size)),)) for a in range(0, size, step))


@builtin("roll", "Arrays", "Shift the elements cyclically by shift along an axis (those pushed off one end come back at the other).",
         [P("x", "array"), P("shift", "int", doc="how far; negative shifts toward the start"),
          P("dim", "int", None, doc="the axis; none rolls the flattened elements and keeps the shape")],
         returns="same shape as x", differentiable=True,
         what="roll([1, 2, 3, 4], 1) is [4, 1, 2, 3]: every element moves shift places along, wrapping around, "
              "e.g. to pair each token with the previous one.",
         how="NumPy's `roll` and PyTorch's `roll` (no dim: the flattened elements, the shape kept). MATLAB's "
             "`circshift` is the same with 1-based axes. An index with the rotated positions, so the gradient "
             "rolls the cotangent back.",
         errors=["ValueError when shift is not a whole number or dim is out of range"],
         examples=["roll([1.5, 2, 3, 4], 1)", "roll([1, 2, 3; 4, 5, 6], -1, dim=1)", "roll([1, 2; 3, 4], 1)"])
def roll(x, shift, dim):
    shape = ops.shape_of(x)
    if not shape:
        return x
    shift = _whole("roll", "shift", shift, lo=None)
    if dim is None:
        return ops.reshape(roll(ops.reshape(x, shape=(-1,)), shift, 0), shape=shape)
    d = axis(x, dim)
    size = shape[d]
    if size == 0:
        return x
    return ops.index(x, idx=(slice(None),) * d + ((np.arange(size) - shift) % size,))
