"""Building and reshaping matrices."""
from __future__ import annotations

import math

import numpy as np

from tapeml import limits, ops
from tapeml.builtins.registry import P, builtin
from tapeml.builtins.util import axis, check_size
from tapeml.errors import ShapeError, TypeErr, ValueErr
from tapeml.ranges import RANGE_MAX, RANGE_ULPS, make_range
from tapeml.tape import raw
from tapeml.values import describe, format_number, format_value, shape_text

DIMS = P("dims", variadic=True, doc="sizes of each axis (whole numbers)")


@builtin("zeros", "Arrays", "A matrix of zeros of the given sizes: zeros(3) is a vector, zeros(2, 3) a matrix.",
         [DIMS], returns="[dims...]",
         what="A new matrix filled with 0, the usual start for biases, accumulators and an optimizer's "
              "moments. zeros(0) is an empty vector.",
         errors=["ValueError when a size is negative or not a whole number, or the matrix would need more than half the machine's memory (at most 8 GB)"],
         how="NumPy's `zeros` in the session's float type (float64 unless set_dtype changed it). "
             "Sizes are checked before allocating.",
         examples=["zeros(3)", "zeros(2, 3)", "size(zeros(2, 3, 4))"])
def zeros(dims):
    return np.zeros(check_size("zeros", dims), dtype=ops.FLOAT["dtype"])


@builtin("ones", "Arrays", "A matrix of ones of the given sizes.", [DIMS], returns="[dims...]",
         what="A new matrix filled with 1, e.g. the gain gamma of layer_norm: ones(D).",
         how="NumPy's `ones` in the session's float type; the sizes are checked before allocating, as for zeros.",
         errors=["ValueError when a size is negative or not a whole number, or the array would not fit in memory"],
         examples=["ones(3)", "ones(2, 2)"])
def ones(dims):
    return np.ones(check_size("ones", dims), dtype=ops.FLOAT["dtype"])


@builtin("fill", "Arrays", "A matrix of the given sizes with every element equal to value.",
         [P("value", "number"), DIMS], returns="[dims...]",
         what="A new matrix with every element equal to value, e.g. fill(-1, n) as a table of \"not found\" "
              "markers; fill(0, dims...) is zeros(dims...).",
         how="NumPy's `full(dims, value)` in the session's float type.",
         errors=["ValueError when a size is negative or not a whole number"],
         examples=["fill(7, 2, 3)", "fill(0.5, 3)"])
def fill(value, dims):
    return np.full(check_size("fill", dims), float(raw(value)), dtype=ops.FLOAT["dtype"])


@builtin("eye", "Arrays", "The n x n identity matrix.", [P("n", "int")], returns="[n, n]",
         what="The identity matrix: 1 on the diagonal, 0 elsewhere, so multiplying by it changes nothing. "
              "An identity weight turns a layer into a pass-through, as in the attention examples.",
         errors=["ValueError when n is negative or not a whole number, or n x n would not fit in memory"],
         how="NumPy's `eye(n)`: ones on the diagonal, zeros elsewhere; I @ x = x for any x with n rows. "
             "Also handy as the values of scaled_dot_product_attention, whose output is then the attention "
             "weights themselves.",
         examples=["eye(2)", "eye(3) @ [1, 2, 3]"])
def eye(n):
    check_size("eye", (n, n))
    return np.eye(n, dtype=ops.FLOAT["dtype"])


@builtin("reshape", "Arrays", "The same elements in a new shape, filled in row-major (C) order.",
         [P("x", "array"), DIMS], returns="[dims...]", differentiable=True,
         what="Lays the elements of x out in new sizes without changing their order (row by row), e.g. a "
              "[B*T, D] matrix as [B, T, D]. The element counts must match; one size may be -1 and is then "
              "computed from the others.",
         errors=["ShapeError when the elements do not fill the new shape exactly (or two sizes are -1)",
                 "ValueError when a size is not a whole number or is below -1",
                 "TypeError when x is not a number or matrix"],
         how="NumPy's `reshape` (C order, as NumPy and PyTorch). One size may be -1 to be inferred.",
         examples=["reshape(1:6, 2, 3)", "reshape([1, 2; 3, 4], 4)", "reshape(1:6, -1, 2)"])
def reshape(x, dims):
    shape = []
    for d in dims:
        d = raw(d)
        if not isinstance(d, (float, int)) or isinstance(d, bool) or not math.isfinite(d) \
                or not float(d).is_integer() or d < -1:
            got = format_value(d) if isinstance(d, (float, int)) and not isinstance(d, bool) else describe(d)
            raise ValueErr(f"reshape(): sizes must be whole numbers (or -1), got {got}")
        shape.append(int(d))
    n = np.size(raw(x))
    known = math.prod(d for d in shape if d != -1)
    if shape.count(-1) > 1 or (-1 not in shape and known != n) or (-1 in shape and (known == 0 or n % known)):
        shown = " x ".join(str(d) if d < 10 ** 16 else format_number(float(d)) for d in shape)
        raise ShapeError(f"reshape(): cannot put {n} elements ({shape_text(np.shape(raw(x)))}) "
                         f"into shape {shown}")
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
    if not xs:
        raise TypeErr(f"{name}() needs at least one matrix")
    for v in xs:
        if not isinstance(raw(v), (float, np.ndarray)) or isinstance(raw(v), bool):
            raise TypeErr(f"{name}() joins matrices, got {describe(v)}")
    first = xs[0]
    nd = len(ops.shape_of(first)) + (1 if name == "stack" else 0)
    if nd == 0:
        raise TypeErr(f"{name}() needs vectors or matrices; use [a, b] to join numbers")
    if not -nd <= dim < nd:
        raise ValueErr(f"{name}(): dim={dim} is out of range for {nd}-axis results")
    try:
        return prim(*xs, dim=dim % nd)
    except ValueError:
        shapes = ", ".join(shape_text(ops.shape_of(v)) for v in xs)
        raise ShapeError(f"{name}(): the shapes do not fit along dim {dim}: {shapes}") from None


@builtin("concat", "Arrays", "Join matrices end to end along an existing axis.",
         [P("xs", variadic=True, doc="matrices with equal sizes except along dim"),
          P("dim", "int", 0, doc="the axis to join along")], returns="joined matrix", differentiable=True,
         what="Puts matrices one after another along an axis they already have: vectors end to end, "
              "matrices below each other (dim=0) or side by side (dim=1). Numbers are joined with [a, b] instead.",
         how="NumPy's `concatenate(xs, axis=dim)`; the VJP slices the cotangent back into one piece per input.",
         errors=["ShapeError when the sizes differ on an axis other than dim",
                 "TypeError when there are no matrices, or an argument is a number or not a matrix",
                 "ValueError when dim is out of range"],
         examples=["concat([1, 2], [3])", "concat([1, 2; 3, 4], [5, 6; 7, 8], dim=1)"])
def concat(xs, dim):
    return _join("concat", ops.concat, xs, dim)


@builtin("stack", "Arrays", "Stack equal-shaped matrices along a new axis.",
         [P("xs", variadic=True, doc="matrices of one shape"), P("dim", "int", 0, doc="position of the new axis")],
         returns="[len(xs), ...] for dim=0", differentiable=True,
         what="Puts equal-shaped matrices together along a new axis: N vectors of length D make an N x D "
              "matrix (dim=0, one per row) or a D x N one (dim=1, one per column).",
         how="NumPy's `stack(xs, axis=dim)`; the VJP takes each input's slice of the cotangent along dim.",
         errors=["ShapeError when the inputs do not all have one shape",
                 "TypeError when there are no matrices, or an argument is not a number or matrix",
                 "ValueError when dim is out of range"],
         examples=["stack([1, 2], [3, 4])", "size(stack(zeros(2, 3), ones(2, 3)))", "stack([1, 2], [3, 4], dim=1)"])
def stack(xs, dim):
    return _join("stack", ops.stack, xs, dim)


@builtin("range", "Arrays", "range(n) is 0:n-1; range(a, b) is a:b-1 (the end excluded, as in Python).",
         [P("a", "number"), P("b", "number", None), P("step", "number", 1.0)], returns="vector",
         what="The numbers from a up to but not including b, step apart (0 to n - 1 for range(n)); an "
              "empty vector when there are none, e.g. range(5, 1).",
         errors=["ValueError when step is 0, a, b or step is not finite, or the range would have more than 1e8 elements",
                 "TypeError when a, b or step is not a number"],
         how="NumPy's `arange(a, b, step)`: Python's half-open convention, unlike the `a:b` operator, which "
             "includes b. b is left out also when the last step lands on it within rounding "
             "(range(0, 0.3, 0.1) is [0, 0.1, 0.2]). range(n) is exactly the valid indices of an axis of length n.",
         examples=["range(4)", "range(2, 5)", "range(0, 10, 3)", "range(0)"])
def range_(a, b, step):
    start, stop = (0.0, a) if b is None else (a, b)
    if step == 0:
        raise ValueErr("range(): step cannot be 0")
    if not (np.isfinite(start) and np.isfinite(stop) and np.isfinite(step)):
        raise ValueErr("range(): a, b and step must be finite")
    q = (stop - start) / step
    if not np.isfinite(q) or q > RANGE_MAX:
        raise limits.range_error(math.ceil(q) if np.isfinite(q) else q, "range(): ")
    n = math.ceil(q)
    # b is excluded, also when the last step lands on b within rounding (the rule of a:b's end)
    if n >= 1 and abs(start + (n - 1) * step - stop) <= RANGE_ULPS * 2.0 ** -52 * max(abs(start), abs(stop), abs(step)):
        n -= 1
    if n <= 0:
        return np.zeros(0, dtype=ops.FLOAT["dtype"])
    return make_range(start, step, start + (n - 1) * step)


@builtin("linspace", "Arrays", "n evenly spaced numbers from a to b, both included.",
         [P("a", "number"), P("b", "number"), P("n", "int", 50)], returns="[n]",
         what="n points evenly spaced from a to b, both ends included: the x values of a plot. n is 50 "
              "when left out; linspace(a, b, 1) is [a] and n = 0 gives an empty vector.",
         errors=["ValueError when n is negative or not a whole number"],
         how="NumPy's `linspace(a, b, n)`: a + (b - a) i / (n - 1) for i = 0 .. n-1, both ends included.",
         examples=["linspace(0, 1, 5)", "len(linspace(0, 1))"])
def linspace(a, b, n):
    check_size("linspace", (n,))
    return ops.as_float(np.linspace(a, b, n))


@builtin("unique", "Arrays", "The distinct elements of x, sorted ascending, as a vector.",
         [P("x", "array", shape="any")], returns="[K]",
         what="Each distinct value of x once, in increasing order, as a vector whatever the shape of x: e.g. "
              "the character codes a text uses, or the classes present among targets.",
         errors=["TypeError when x is not a number or matrix"],
         how="NumPy's `unique` over all elements (flattened); NaN sorts last.",
         examples=["unique([3, 1, 3, 2, 1])"])
def unique(x):
    return np.unique(np.asarray(raw(x), dtype=np.float64))
