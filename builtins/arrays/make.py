"""Arrays: making matrices: zeros, ones, fill, zeros_like, ones_like, eye, range, linspace, unique."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B, context, limits, ops
from tapeml.builtins.registry import P, builtin
from tapeml.builtins.vocabulary import DIMS
from tapeml.builtins.util import check_size
from tapeml.syntax.errors import TypeErr, ValueErr
from tapeml.array.ranges import RANGE_MAX, RANGE_ULPS, plan_range
from tapeml.array.tape import raw
from tapeml.array.values import describe


@builtin("zeros", "Arrays", "A matrix of zeros of the given sizes: zeros(3) is a vector, zeros(2, 3) a matrix.",
         [DIMS], returns="[dims...]",
         what="A new matrix filled with 0, the usual start for biases, accumulators and an optimizer's "
              "moments. zeros(0) is an empty vector.",
         errors=["ValueError when a size is negative or not a whole number, or the matrix would need more than half the machine's memory (at most 8 GB)"],
         how="NumPy's `zeros` in the session's float type (float64 unless set_dtype changed it). "
             "Sizes are checked before allocating.",
         examples=["zeros(3)", "zeros(2, 3)", "size(zeros(2, 3, 4))", "x = [1, 2; 3, 4]\nzeros(size(x))"])
def zeros(dims):
    return _filled(check_size("zeros", dims), 0.0)


def _filled(shape: tuple, value: float, dtype=None, like=None):
    """A new matrix of `shape` with every element `value`, on the backend of the array `like`
    (else the session's); dtype a NumPy type (None: the session's float type)."""
    values = context.current().values       # the session's: one lookup for its three slots
    values["made"] = True
    dt = values["dtype"] if dtype is None else dtype
    be = values["backend"] if like is None else B.of(like)
    if be is B.NUMPY:
        if value == 0.0:
            return np.zeros(shape, dtype=dt)
        return np.ones(shape, dtype=dt) if value == 1.0 else np.full(shape, value, dtype=dt)
    # (torch refuses a value past float32's range: NumPy's full gives inf)
    return be.xp.full(shape, B.held(value, dt), dtype=be.dtype(dt), device=be.device)


@builtin("ones", "Arrays", "A matrix of ones of the given sizes.", [DIMS], returns="[dims...]",
         what="A new matrix filled with 1, e.g. the gain gamma of layer_norm: ones(D).",
         how="NumPy's `ones` in the session's float type; the sizes are checked before allocating, as for zeros.",
         errors=["ValueError when a size is negative or not a whole number, or the array would not fit in memory"],
         examples=["ones(3)", "ones(2, 2)"])
def ones(dims):
    return _filled(check_size("ones", dims), 1.0)


@builtin("fill", "Arrays", "A matrix of the given sizes with every element equal to value.",
         [P("value", "number"), DIMS], returns="[dims...]",
         what="A new matrix with every element equal to value, e.g. fill(-1, n) as a table of \"not found\" "
              "markers; fill(0, dims...) is zeros(dims...).",
         how="NumPy's `full(dims, value)` in the session's float type.",
         errors=["ValueError when a size is negative or not a whole number"],
         examples=["fill(7, 2, 3)", "fill(0.5, 3)"])
def fill(value, dims):
    return _filled(check_size("fill", dims), float(raw(value)))


def _like(fname: str, tree, value: float):
    """`tree` with every number and matrix leaf replaced by `value` (its shape kept), whatever
    the leaf holds: nan and inf too (0 * leaf would keep them)."""
    from tapeml.builtins.util import tree_map

    def leaf(v):
        r = raw(v)
        if isinstance(r, (bool, np.bool_, float, int)):
            return float(value)
        if isinstance(r, B.Matrix):
            be = B.of(r)
            dtype = be.np_dtype(r.dtype) if be.is_float(r) else ops.FLOAT["dtype"]
            return _filled(tuple(r.shape), value, dtype, like=r)
        raise TypeErr(f"{fname}(): the leaves must be numbers or matrices (in tuples and records), "
                      f"got {describe(v)}")
    return tree_map(leaf, tree, f"{fname}()'s tree")


_LIKE_PARAM = P("tree", "any", doc="a number, a matrix, or a tuple/record of them, nested")


@builtin("zeros_like", "Arrays", "Zeros shaped like x: a tree shaped like tree with every leaf zero.",
         [_LIKE_PARAM], returns="the structure and shapes of tree, every number 0",
         what="A zero matrix of x's shape, or, for a record or tuple of parameters, the same structure "
              "with every number 0: the starting value of momentum buffers and Adam's moments. Every "
              "element becomes 0, also one that is nan or inf.",
         how="NumPy's and PyTorch's `zeros_like` for one matrix; JAX's `tree_map(jnp.zeros_like, tree)` for "
             "a tree. A number (or a bool) leaf becomes the number 0, a matrix leaf a zero matrix of its "
             "shape (a bool matrix gives a float one). The result is a new constant: its gradient with "
             "respect to tree is 0.",
         errors=["TypeError when a leaf is not a number or matrix (a string, a function)"],
         examples=["zeros_like([1, -1 / 0, 0 / 0])", "zeros_like({w = [1, 2; 3, 4], b = 3})",
                   "zeros_like(([1, 2], 5))"])
def zeros_like(tree):
    return _like("zeros_like", tree, 0.0)


@builtin("ones_like", "Arrays", "Ones shaped like x: a tree shaped like tree with every leaf one.",
         [_LIKE_PARAM], returns="the structure and shapes of tree, every number 1",
         what="A matrix of ones of x's shape, e.g. the gain of a norm for features of that width, or a "
              "record or tuple of such. Every element becomes 1, also one that is nan or inf.",
         how="NumPy's and PyTorch's `ones_like` for one matrix, mapped over the leaves of a record or "
             "tuple as zeros_like is. A number (or a bool) leaf becomes the number 1, a matrix leaf a "
             "matrix of ones of its shape. The result is a new constant: its gradient with respect to "
             "tree is 0.",
         errors=["TypeError when a leaf is not a number or matrix (a string, a function)"],
         examples=["ones_like([1, -1 / 0, 0 / 0])", "ones_like({gamma = [0.5, 2], step = 7})"])
def ones_like(tree):
    return _like("ones_like", tree, 1.0)


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
    values = context.current().values
    values["made"] = True
    be = values["backend"]
    if be is B.NUMPY:
        return np.eye(n, dtype=values["dtype"])
    return be.xp.eye(n, dtype=be.dtype(values["dtype"]), device=be.device)


def range_plan(a, b, step):
    """range(a, b, step) checked and planned (a ranges.Range): the builtin makes the vector, a
    for loop walks it (range's lazy form)."""
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
    return plan_range(start, step, start + (n - 1) * step) if n > 0 else plan_range(0.0, 1.0, -1.0)


@builtin("range", "Arrays", "range(n) is 0:n-1; range(a, b) is a:b-1 (the end excluded, as in Python).",
         [P("a", "number"), P("b", "number", None), P("step", "number", 1.0)], returns="vector",
         what="The numbers from a up to but not including b, step apart (0 to n - 1 for range(n)); an "
              "empty vector when there are none, e.g. range(5, 1).",
         errors=["ValueError when step is 0, a, b or step is not finite, or the range would have more than 1e8 elements",
                 "TypeError when a, b or step is not a number"],
         how="NumPy's `arange(a, b, step)`: Python's half-open convention, unlike the `a:b` operator, which "
             "includes b. b is left out also when the last step lands on it within rounding "
             "(range(0, 0.3, 0.1) is [0, 0.1, 0.2]). range(n) is exactly the valid indices of an axis of length n. "
             "`for i in range(n)` walks the numbers a chunk at a time without making the vector, as `for i in "
             "0:n-1` does.",
         examples=["range(4)", "range(2, 5)", "range(0, 10, 3)", "range(0)"], walk=range_plan)
def range_(a, b, step):
    return range_plan(a, b, step).values()


@builtin("linspace", "Arrays", "n evenly spaced numbers from a to b, both included.",
         [P("a", "number"), P("b", "number"), P("n", "int", 50)], returns="[n]",
         what="n points evenly spaced from a to b, both ends included: the x values of a plot. n is 50 "
              "when left out; linspace(a, b, 1) is [a] and n = 0 gives an empty vector.",
         errors=["ValueError when n is negative or not a whole number"],
         how="NumPy's `linspace(a, b, n)`: a + (b - a) i / (n - 1) for i = 0 .. n-1, both ends included.",
         examples=["linspace(0, 1, 5)", "len(linspace(0, 1))"])
def linspace(a, b, n):
    check_size("linspace", (n,))
    # NumPy's formula on every backend (torch's linspace rounds differently), then onto the device
    return B.new_matrix(np.linspace(a, b, n), ops.FLOAT["dtype"])


@builtin("unique", "Arrays", "The distinct elements of x, sorted ascending, as a vector.",
         [P("x", "array", shape="any")], returns="[K]",
         what="Each distinct value of x once, in increasing order, as a vector whatever the shape of x: e.g. "
              "the character codes a text uses, or the classes present among targets.",
         errors=["TypeError when x is not a number or matrix"],
         how="NumPy's `unique` over all elements (flattened); NaN sorts last.",
         examples=["unique([3, 1, 3, 2, 1])"])
def unique(x):
    # on the host on every backend (NumPy's order and its one NaN), back on x's backend, in x's
    # float type (its values are exact there), or the session's for bools and numbers
    r = raw(x)
    h = np.asarray(B.to_numpy(r))
    u = np.unique(h.astype(h.dtype if h.dtype.kind == "f" else ops.FLOAT["dtype"], copy=False))
    be = B.of(r)
    return u if be is B.NUMPY else be.asarray(u, u.dtype)
