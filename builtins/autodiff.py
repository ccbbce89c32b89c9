"""Autodiff builtins: grad, value_and_grad, stop_gradient, check_grad.

`grad(f, x)` opens a new tape level, wraps every number/matrix leaf of x (a number, matrix,
tuple or record, nested) in a Box of that level, calls f, and walks the tape backward from
the result. Leaves the result does not depend on get zeros. Each call starts a fresh tape, so
nothing accumulates across calls; nested calls use nested levels (grad of grad)."""
from __future__ import annotations

import contextlib
import gc
import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array import ops
from tapeml.array.backend import ARRAYS
from tapeml.array.primitive_table import is_bool_array, is_float_array, size_of
from tapeml.builtins.files import note_written, resolve_path
from tapeml.builtins.registry import P, builtin, one_of, positive
from tapeml.builtins.util import tree_leaves, tree_map
from tapeml.syntax.errors import ShapeError, TypeErr, ValueErr
from tapeml.array import diagnostics
from tapeml.array.tape import NO_KW, Box, close_level, new_level, open_level, raw
from tapeml.array.tape import backward as _tape_backward
from tapeml.array.values import Dict, Record, describe, shape_text

_ND = np.ndarray

CAT = "Autodiff"


def _root_name(ctx, default="x"):
    """The name the caller wrote for x (`grad(loss, w)`: "w"), for messages about its leaves."""
    return ctx.argument_name(1) or default


def value_and_grad_impl(ctx, f, x, root="x", name="grad"):
    """(f(x), gradient of f at x shaped like x)."""
    level = open_level()        # its backward pass tests for other levels' Boxes once (tape.backward)

    def box(v):
        if type(v) is not _ND or v.dtype.kind != "f":      # the common leaf (a float matrix) tested once
            r = raw(v)
            t = type(r)
            if not ((t is np.ndarray and r.dtype != np.bool_) or t is float or t is np.float64
                    or (t in ARRAYS and not is_bool_array(r))):
                tree_leaves(x, root)   # a TypeError naming the path of a non-differentiable leaf
        return Box(v, level, None, (), NO_KW, None, ())     # a leaf (tape.leaf, inlined)

    # The tape holds no reference cycles (nodes point only to their parents), so reference
    # counting frees it; the cyclic collector would only rescan the growing tape.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        boxed = tree_map(box, x, f"{name}(): {root}")
        return _run_and_backward(ctx, f, boxed, level, name)
    except KeyboardInterrupt as e:      # free the tape hanging from the frames before gc walks it
        e.__traceback__ = None
        raise
    finally:
        close_level(level)
        if gc_was_on:
            gc.enable()


def _run_and_backward(ctx, f, boxed, level, name):
    """(f(boxed), the gradient shaped like boxed): each leaf Box of `level` gets its cotangent,
    or zeros where f did not use it."""
    out = ctx.call(f, boxed)
    r = raw(out)
    if type(r) in ARRAYS and r.ndim == 0:
        r = float(r) if type(r) is np.ndarray else B.of(r).item(r)
    if not isinstance(r, float) or isinstance(r, bool):
        what = f"a {shape_text(r.shape)} matrix" if type(r) in ARRAYS and r.ndim > 1 else describe(r)
        hint = ("is a 'return' missing?" if r is None else
                "reduce it first (for example sum(...) or mean(...))" if type(r) in ARRAYS else
                "the function to differentiate must compute a number from its argument")
        raise ValueErr(f"{name} needs f to return a number, but it returned {what}; {hint}")
    if type(out) is Box and out.level == level:
        grads = backward(out, 1.0, ops.add, ops.shape_of)
        value = out.value
    else:
        grads = {}
        value = out

    def collect(b):
        g = grads.get(b)
        if g is None:
            rv = raw(b)
            return np.zeros_like(rv) if type(rv) is np.ndarray else \
                B.xp_of(rv).zeros_like(rv) if type(rv) in ARRAYS else 0.0
        return _own(g)

    return value, tree_map(collect, boxed)      # the same tree as boxed: within the nesting limit


def backward(out, ct, add, shape_of):
    """tape.backward, then check_nan's verdict on the suspects it left (grad's own call was not
    watched when check_nan was turned on inside the function being differentiated)."""
    grads = _tape_backward(out, ct, add, shape_of)
    d = diagnostics.current()
    if d.suspects:
        d.settle([], tuple(grads.values()))
    return grads


def _own(g):
    """A gradient the user can keep: a broadcast view from the tape (read-only in NumPy, an
    expanded tensor in torch) copied into a matrix of its own."""
    t = type(g)
    if t is np.ndarray:
        return g if g.flags.writeable else g.copy()
    if t in ARRAYS:
        return B.of(g).owned(g)
    return g


@builtin("grad", CAT, "The gradient of a scalar function f at x, shaped like x (a number, matrix, tuple or record).",
         [P("f", "function", doc="a function of one argument returning a number"),
          P("x", "tree", doc="where to differentiate: a number, matrix, or a tuple/record of them, nested")],
         returns="the same structure and shapes as x", context=True,
         what="Reverse-mode automatic differentiation: runs f once while recording every primitive on a "
              "tape, then walks the tape backward. Works for whole transformer blocks, and nests: grad of "
              "grad gives second derivatives.",
         how="Each leaf of x is tracked on a fresh tape level; the backward pass is an iterative "
             "topological sort with a dict of pending cotangents (HIPS autograd's scheme). Leaves f does "
             "not use get zeros.",
         errors=["ValueError when f returns something other than a number (the shape is named)",
                 "TypeError naming the path (x.a, x[1]) of a string, bool or function inside x",
                 "ValueError when x nests tuples and records more than 20000 deep"],
         examples=["grad(fn(x) -> x^2, 3)", "grad(fn(x) -> sum(x * x * x), [1, 2, 3])",
                   "w = {a = 2, b = [1, 2]}\ngrad(fn(w) -> w.a * sum(w.b), w)",
                   "grad(fn(x) -> grad(fn(y) -> y^3, x), 2)"])
def grad(ctx, f, x):
    return value_and_grad_impl(ctx, f, x, _root_name(ctx))[1]


@builtin("value_and_grad", CAT, "(f(x), grad(f, x)) from one forward and one backward pass.",
         [P("f", "function"), P("x", "tree")], returns="tuple (value, gradient)", context=True,
         what="The loss and its gradient together, as a training step needs them: loss, g = "
              "value_and_grad(f, params) runs f once, where f(params) followed by grad(f, params) would run it twice.",
         how="As grad: reverse-mode differentiation, one forward pass recording primitives on a tape and one "
             "backward pass (JAX's `jax.value_and_grad`), returning the value computed on the way.",
         errors=["ValueError when f returns something other than a number (the shape is named)",
                 "TypeError naming the path (x.a, x[1]) of a string, bool or function inside x",
                 "TypeError when f is not a function",
                 "ValueError when x nests tuples and records more than 20000 deep"],
         examples=["value_and_grad(fn(x) -> sum(x^2), [1, 2])",
                   "loss, g = value_and_grad(fn(w) -> sum(w * [1, 2]), [3, 4])\nprint(loss, g)"])
def value_and_grad(ctx, f, x):
    return value_and_grad_impl(ctx, f, x, _root_name(ctx), "value_and_grad")


@builtin("stop_gradient", CAT, "The value of x with its gradient cut: the tape treats it as a constant.",
         [P("x", doc="any value")], returns="x",
         what="Makes a value a constant for differentiation: the result equals x, but grad treats it as "
              "not depending on anything, so grad(fn(x) -> x * stop_gradient(x), 3) is 3, not 6.",
         how="Returns the plain value under every tape level, so nothing flows back through it (JAX's "
             "`lax.stop_gradient`, PyTorch's `Tensor.detach`).",
         errors=["none: any value is accepted; values that are not numbers or matrices come back unchanged "
                 "(a tuple or record nested more than 20000 deep is a ValueError)"],
         examples=["grad(fn(x) -> x * stop_gradient(x), 3)"])
def stop_gradient(x):
    r = raw(x)
    if isinstance(r, (tuple, Record, Dict)):
        return tree_map(raw, r, "stop_gradient(): x")
    return r


def grad_error(tape: float, fd: float) -> float:
    """|tape - fd| / max(|tape|, |fd|, 1); nan when either is nan (a failure, never hidden), 0 when
    both are the same infinity, inf when only one is infinite or they are opposite infinities."""
    if tape == fd:
        return 0.0
    if tape != tape or fd != fd:
        return float("nan")
    if not (np.isfinite(tape) and np.isfinite(fd)):
        return float("inf")
    return abs(tape - fd) / max(abs(tape), abs(fd), 1.0)


def _worse(a: float, b: float) -> float:
    """The larger error, where nan is the worst of all (Python's max(0.0, nan) is 0.0)."""
    if a != a or b != b:
        return float("nan")
    return b if b > a else a


@builtin("check_grad", CAT, "Compare grad(f, x) with central finite differences; the largest relative error of each leaf.",
         [P("f", "function"), P("x", "tree"), P("h", "number", 1e-6, doc="the finite-difference step (times max(1, |x|))",
                                                  check=positive, constraint="> 0"),
          P("samples", "int", 64, doc="elements checked per leaf (all of them when the leaf is smaller)",
            check=positive, constraint="> 0")],
         returns="the structure of x with one number per leaf", context=True,
         what="A test of a gradient: compares what grad computes with a numerical estimate from evaluating f "
              "just left and right of x, and gives the largest relative error of each leaf. The docs build "
              "runs it on every differentiable builtin and fails above 1e-6.",
         errors=["ValueError when f returns something other than a number",
                 "TypeError naming the path (x.a, x[1]) of a string, bool or function inside x",
                 "ValueError when h or samples is not > 0"],
         how="For each checked element i: fd = (f(x + h e_i) - f(x - h e_i)) / 2h, and the error is "
             "|grad_i - fd| / max(|grad_i|, |fd|, 1), the test of PyTorch's `torch.autograd.gradcheck`. Leaves larger than `samples` are checked on a fixed "
             "pseudo-random subset of elements. Values near 1e-9 or below mean the tape is right; their digits "
             "are rounding noise, which changes with the machine's BLAS, so compare them with a tolerance "
             "(errs < 1e-6) rather than print them. A nan in "
             "either gradient makes the leaf's error nan, and an infinity in one but not the other makes it "
             "inf: both are failures (nan < 1e-6 is false), never hidden as 0. The evaluations show a "
             "progress bar on standard error when they run past 2 seconds, as jacobian's.",
         examples=["check_grad(fn(x) -> sum(sin(x) * x), [0.5, 1, 2]) < 1e-6",
                   "check_grad(fn(x) -> sqrt(x), 0)  # tape inf, finite differences nan: a failure",
                   "errs = check_grad(fn(w) -> sum(w.a @ w.b), {a = [1, 2; 3, 4], b = [1; 2]})\n"
                   "tree_map(fn(e) -> e < 1e-6, errs)  # one error per leaf, compared: its digits are noise",
                   "# raises: f must give one number\ncheck_grad(fn(x) -> x * 2, [1, 2])"])
def check_grad(ctx, f, x, h, samples):
    root = _root_name(ctx)
    _, g = value_and_grad_impl(ctx, f, x, root, "check_grad")
    leaves = [v for _, v in tree_leaves(x, root)]
    gleaves = [v for _, v in tree_leaves(g, root)]
    rng = np.random.default_rng(0)
    errors = []

    def f_at(k, new_leaf):
        it = iter(range(len(leaves)))

        def swap(v):
            j = next(it)
            return new_leaf if j == k else raw(v)
        return float(raw(ctx.call(f, tree_map(swap, x))))

    total = sum(min(_size(raw(v)), samples) for v in leaves)
    with _bar(ctx, total, f"check_grad, {total} elements") as bar:
        for k, (v, gv) in enumerate(zip(leaves, gleaves)):
            errors.append(_check_leaf(f_at, k, v, gv, h, samples, rng, bar))
    it = iter(errors)
    return tree_map(lambda v: next(it), x)


def _size(r) -> int:
    return size_of(r) if type(r) in ARRAYS else np.size(r)


def _check_leaf(f_at, k, v, gv, h, samples, rng, bar):
    """The worst error over the checked elements of leaf k (two evaluations of f each). The
    elements are stepped in NumPy (float64); another backend's leaf goes back to its device."""
    r = raw(v)
    back = None if type(r) is np.ndarray or type(r) not in ARRAYS else B.of(r)
    rv = np.asarray(B.to_numpy(r), dtype=np.float64)
    gr = np.asarray(B.to_numpy(raw(gv)), dtype=np.float64)
    n = rv.size
    picks = range(n) if n <= samples else rng.choice(n, samples, replace=False)
    worst = 0.0
    for i in picks:
        step = h * max(1.0, abs(rv.flat[i]))
        plus, minus = rv.copy(), rv.copy()
        plus.flat[i] += step
        minus.flat[i] -= step
        if rv.ndim == 0:
            plus, minus = float(plus), float(minus)
        elif back is not None:
            plus, minus = back.asarray(plus), back.asarray(minus)
        fd = (f_at(k, plus) - f_at(k, minus)) / (2 * step)
        worst = _worse(worst, grad_error(float(gr.flat[i]), fd))
        bar.update()
    return worst


# ---- jacobian, hessian, vjp, jvp (issue 20) --------------------------------------------------
# All on the one tape: f runs once on a leaf of a fresh level, and each product is a backward pass
# whose VJPs are primitives, so these nest (hessian is jacobian of grad) and can be differentiated.

def _array_arg(fname: str, what: str, v):
    r = raw(v)
    if isinstance(r, bool) or not (isinstance(r, float) or is_float_array(r)):
        raise TypeErr(f"{fname}(): {what} must be a number or a matrix of numbers, got {describe(v)}")
    return ops.shape_of(r)


def _trace(call, x, fname):
    """Run call(x) (a Python function of one value) on x as the leaf of a new tape level:
    (leaf, output, output shape, level)."""
    level = new_level()
    bx = Box(x, level, None, (), NO_KW, None, ())
    out = call(bx)
    r = raw(out)
    if isinstance(r, bool) or not (isinstance(r, float) or is_float_array(r)):
        hint = " (is a 'return' missing?)" if r is None else ""
        raise ValueErr(f"{fname} needs f to return a number or a matrix of numbers, but it returned "
                       f"{describe(r)}{hint}")
    return bx, out, ops.shape_of(r), level


def _pull(out, bx, level, ct, xshape):
    """The cotangent of the leaf bx for cotangent ct of out (zeros where out does not depend on x)."""
    if type(out) is Box and out.level == level:
        g = backward(out, ct, ops.add, ops.shape_of).get(bx)
        if g is not None:
            return _own(g)
    return _zeros(xshape, raw(bx.value)) if xshape else 0.0


def _strip(out, level):
    """The value of out without the tracking of `level` (outer levels stay)."""
    return out.value if type(out) is Box and out.level == level else out


def _on_numpy(like) -> bool:
    """Whether new matrices beside `like` (a matrix or a number) are NumPy arrays: like's backend,
    or the session's when like is a number."""
    t = type(like)
    return t is np.ndarray or (t not in ARRAYS and B.current() is B.NUMPY)


def _zeros(shape, like=None):
    """Zeros of the session's float type on the device of `like` (a matrix), else the session's."""
    if _on_numpy(like):
        return ops.as_float(np.zeros(shape))
    be = B.of(like)             # a number's: the session's
    return be.xp.zeros(shape, dtype=be.float_dtype(), device=be.device)


def _basis(shape, i, like=None):
    """The i-th unit matrix of `shape` (row-major), on the device of `like`."""
    if not shape:
        return 1.0
    if _on_numpy(like):
        e = np.zeros(shape)
        e.flat[i] = 1.0
        return ops.as_float(e)
    e = _zeros((math.prod(shape),), like)
    e[i] = 1.0
    return B.xp_of(e).reshape(e, shape)


def _caller(ctx, f):
    return lambda v: ctx.call(f, v)


def _bar(ctx, total, desc):
    """The context's bar for a long loop of passes (lang/evaluator/progress.py, work_bar), or none."""
    make = getattr(ctx, "work_bar", None)
    return make(total, desc) if make is not None else contextlib.nullcontext(_NO_BAR)


class _NoBar:
    @staticmethod
    def update(n=1):
        pass


_NO_BAR = _NoBar()


def jacobian_impl(call, x, fname="jacobian", ctx=None):
    """The Jacobian by the cheaper of two loops of backward passes, both on the one tape:
    reverse, one pass per OUTPUT element (its unit cotangent gives a row), or forward, one pass
    per INPUT element: the backward pass of f is recorded once with a tracked cotangent u (u' J,
    linear in u), and the pass from its j-th element back to u gives column j (jvp's double-vjp
    trick). Forward is taken when x has fewer elements than f(x) less one (JAX's jacfwd against
    jacrev, chosen by shape). A bar shows the passes when they take a while."""
    xshape = _array_arg(fname, "x", x)
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        lu = new_level()                        # the cotangent's level, outside f's (forward mode)
        bx, out, oshape, level = _trace(call, x, fname)
        m = int(np.prod(oshape)) if oshape else 1
        n = int(np.prod(xshape)) if xshape else 1
        from tapeml.array import limits
        limits.check_elements(f"{fname}() with output {shape_text(oshape)} and input {shape_text(xshape)} (a result "
                              f"of {shape_text(oshape + xshape)})", oshape + xshape)
        if m == 0 or n == 0:
            return _zeros(oshape + xshape, raw(out))
        if n + 1 < m:
            u0 = _zeros(oshape, raw(out)) if oshape else 0.0
            bu = Box(u0, lu, None, (), NO_KW, None, ())
            ut_j = _pull(out, bx, level, bu, xshape)       # u' J, recorded on level lu
            cols = []
            with _bar(ctx, n, f"{fname}, {n} backward passes") as bar:
                for j in range(n):
                    e = ops.index(ut_j, idx=np.unravel_index(j, xshape)) if xshape else ut_j
                    cols.append(_pull(e, bu, lu, 1.0, oshape))
                    bar.update()
            if not xshape:
                return cols[0]
            return ops.reshape(ops.stack(*cols, dim=-1), shape=oshape + xshape)   # oshape is not () here
        rows = []
        with _bar(ctx, m, f"{fname}, {m} backward passes") as bar:
            for i in range(m):
                rows.append(_pull(out, bx, level, _basis(oshape, i, raw(out)), xshape))
                bar.update()
    finally:
        if gc_was_on:
            gc.enable()
    if not oshape:
        return rows[0]
    return ops.reshape(ops.stack(*rows, dim=0), shape=oshape + xshape)


@builtin("jacobian", CAT, "The Jacobian of f at x: every partial derivative d f(x)[i] / d x[j], shaped out + in.",
         [P("f", "function", doc="a function of one number or matrix, returning a number or matrix"),
          P("x", "array", doc="where to differentiate")],
         returns="shape(f(x)) followed by shape(x); a number when both are numbers", context=True,
         what="All first derivatives of a vector (or matrix) function at once: for f from R^n to R^m the "
              "m x n matrix J with J[i, j] = d f_i / d x_j. For a scalar f it is the gradient; for a "
              "matrix input or output the axes are kept, not flattened.",
         how="One forward pass of f on the tape, then one backward pass per output element with that "
             "element's unit cotangent (reverse mode, row by row), stacked; when x has fewer elements "
             "than f(x) (less one), one backward pass per input element instead: the backward pass of f "
             "is recorded once with a tracked cotangent u, and the pass from each element of u' J back "
             "to u gives a column (forward mode by jvp's double-vjp trick; JAX's `jacfwd` against "
             "`jacrev`, chosen by shape), so a jacobian of 540,000 outputs by 3 inputs takes 4 passes. "
             "A loop of passes that runs past 2 seconds shows a progress bar on standard error, as "
             "`progress` draws it (`TAPEML_PROGRESS=0` turns it off). The shape is shape(f(x)) + "
             "shape(x), as PyTorch's `torch.autograd.functional.jacobian` and JAX's `jacrev`; reshape it "
             "to [numel(f(x)), numel(x)] for the flattened (row-major) matrix. Every product is recorded, "
             "so the jacobian itself can be differentiated (hessian is the jacobian of grad).",
         errors=["TypeError when x is not a number or a matrix of numbers",
                 "ValueError when f returns something other than a number or a matrix"],
         examples=["jacobian(fn(x) -> x^2, [1, 2, 3])",
                   "jacobian(fn(x) -> [1, 2; 3, 4] @ x, [1, 1])",
                   "size(jacobian(fn(x) -> x', zeros(2, 3)))",
                   "jacobian(fn(x) -> [sum(x), x[0] * x[1]], [2, 3])"])
def jacobian(ctx, f, x):
    return jacobian_impl(_caller(ctx, f), x, ctx=ctx)


@builtin("hessian", CAT, "The Hessian of a scalar f at x: the second derivatives d^2 f / d x[i] d x[j], shaped in + in.",
         [P("f", "function", doc="a function of one number or matrix, returning a number"),
          P("x", "array", doc="where to differentiate")],
         returns="shape(x) followed by shape(x); a number when x is a number", context=True,
         what="The matrix of second derivatives of a scalar function: its curvature. For x of n elements, "
              "an n x n symmetric matrix (for smooth f).",
         how="The jacobian of the gradient: jacobian(fn(y) -> grad(f, y), x), reverse over reverse on the "
             "one tape (the gradient's backward pass is made of recorded primitives). The shape is shape(x) "
             "+ shape(x), as PyTorch's `torch.autograd.functional.hessian`. Its n backward passes show a "
             "progress bar on standard error when they run past 2 seconds, as jacobian's.",
         errors=["TypeError when x is not a number or a matrix of numbers",
                 "ValueError when f returns something other than a number (the shape is named)"],
         examples=["hessian(fn(x) -> x^3, 2)",
                   "hessian(fn(x) -> x[0]^2 * x[1] + x[1]^3, [1, 2])",
                   "A = [2, 1; 1, 3]\nhessian(fn(x) -> sum(x * (A @ x)) / 2, [1, 1])  # A"])
def hessian(ctx, f, x):
    def g(v):
        return value_and_grad_impl(ctx, f, v, "x", "hessian")[1]
    return jacobian_impl(g, x, "hessian", ctx)


def _check_v(fname, what, v, shape, whose):
    vs = _array_arg(fname, what, v)
    if vs != shape:
        raise ShapeError(f"{fname}(): v must have the shape of {whose}, {shape_text(shape)}, got {describe(v)}")


@builtin("vjp", CAT, "Vector-Jacobian product: (f(x), v' J), v shaped like f(x), the product shaped like x.",
         [P("f", "function", doc="a function of one number or matrix"),
          P("x", "array", doc="where to differentiate"),
          P("v", "array", shape="shape(f(x))", doc="the cotangent: a weight for each output element")],
         returns="tuple (f(x), product shaped like x)", context=True,
         what="The gradient of sum(v * f(x)) with respect to x, in one backward pass, without forming the "
              "Jacobian: what backpropagation computes through a layer.",
         how="One forward pass of f on the tape and one backward pass seeded with v: out[j] = sum_i v[i] "
             "d f(x)[i] / d x[j]. Returns the value too, as PyTorch's `torch.autograd.functional.vjp(f, x, "
             "v)`, which returns (f(x), vjp); JAX's `jax.vjp` returns the value and a function instead.",
         errors=["ShapeError when v does not have the shape of f(x)",
                 "TypeError when x or v is not a number or a matrix of numbers",
                 "ValueError when f returns something other than a number or a matrix"],
         examples=["vjp(fn(x) -> x^2, [1, 2, 3], [1, 0, 1])",
                   "y, g = vjp(fn(x) -> [1, 2; 3, 4] @ x, [1; 1], [1; 1])\nprint(y, g)"])
def vjp(ctx, f, x, v):
    xshape = _array_arg("vjp", "x", x)
    bx, out, oshape, level = _trace(_caller(ctx, f), x, "vjp")
    _check_v("vjp", "v", v, oshape, "f(x)")
    return (_strip(out, level), _pull(out, bx, level, v, xshape))


@builtin("jvp", CAT, "Jacobian-vector product: (f(x), J v), v shaped like x, the product shaped like f(x).",
         [P("f", "function", doc="a function of one number or matrix"),
          P("x", "array", doc="where to differentiate"),
          P("v", "array", shape="shape(x)", doc="the tangent: a direction in x")],
         returns="tuple (f(x), product shaped like f(x))", context=True,
         what="The directional derivative of f at x along v: how f(x + t v) changes at t = 0, for every "
              "output element at once, without forming the Jacobian.",
         how="Exact, by the double-vjp trick on the one tape (no finite differences): u -> vjp(f, x, u) = u' J "
             "is linear in u, and its own vjp with cotangent v is J v. So f runs once, its backward pass "
             "runs once with a tracked cotangent u (recorded on an outer level), and a second backward "
             "pass through that recording gives J v. Returns the value too, as PyTorch's "
             "`torch.autograd.functional.jvp(f, x, v)` (which computes it by the same trick) and JAX's "
             "`jax.jvp`.",
         errors=["ShapeError when v does not have the shape of x",
                 "TypeError when x or v is not a number or a matrix of numbers",
                 "ValueError when f returns something other than a number or a matrix"],
         examples=["jvp(fn(x) -> x^2, [1, 2, 3], [1, 0, 1])",
                   "y, t = jvp(fn(x) -> [1, 2; 3, 4] @ x, [1; 1], [1; 0])\nprint(y, t)",
                   "jvp(fn(x) -> sin(x), 0, 1)"])
def jvp(ctx, f, x, v):
    xshape = _array_arg("jvp", "x", x)
    _check_v("jvp", "v", v, xshape, "x")
    lu = new_level()                        # the outer level: the cotangent u
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        bx, out, oshape, level = _trace(_caller(ctx, f), x, "jvp")
        u0 = _zeros(oshape, raw(out)) if oshape else 0.0
        bu = Box(u0, lu, None, (), NO_KW, None, ())
        ut_j = _pull(out, bx, level, bu, xshape)          # u' J, recorded on level lu
        s = ops.sum_(ops.mul(ut_j, v)) if xshape else ops.mul(ut_j, v)
        if type(s) is Box and s.level == lu:
            t = backward(s, 1.0, ops.add, ops.shape_of).get(bu)
        else:
            t = None
        if t is None:
            t = _zeros(oshape, raw(out)) if oshape else 0.0
        else:
            t = _own(t)
    finally:
        if gc_was_on:
            gc.enable()
    return (_strip(out, level), t)


# ---- diagnostics: check_nan and show_tape (issue 30; lang/array/diagnostics.py) ----------------
@builtin("check_nan", CAT, "Stop at the first operation that makes a NaN or an infinity, in the forward or the backward pass.",
         [P("on", "bool", True, doc="true turns the check on for the rest of the session, false turns it off")],
         returns="none", context=True,
         what="An anomaly mode for hunting NaNs by source line. While it is on, every operator, builtin call and "
              "VJP of the backward pass is checked: the first one whose result holds a NaN where none of its "
              "inputs held one (or an infinity where they were all finite) stops the program with a NaNError "
              "that names the operation, the first bad index and value, and the inputs' values there, at the "
              "line that ran it. A NaN made by the backward pass points at the line that recorded the "
              "operation in the forward pass, and says which call ran the backward pass. A NaN written on "
              "purpose with literals only (`0 / 0`, `-1 / 0`, `log(0)`) is not flagged, nor is a value that "
              "was already NaN or infinite when it arrived (read from a file, made on purpose): only the step "
              "where finite numbers first turned bad. `tapeml --check-nan script.ml` and "
              "`Session(check_nan=True)` turn it on from the start. Off, it costs nothing.",
         how="The evaluator tells the session which node runs and the tape keeps, on each node it records, the "
             "line that recorded it (only while the check is on); operators and builtins are judged by their "
             "inputs and result, each VJP by its incoming gradient, the forward values and the gradients it "
             "made. PyTorch's `torch.autograd.detect_anomaly` checks the backward pass only and names a Python "
             "frame; JAX's `jax_debug_nans` re-runs the failing function op by op.",
         errors=["NaNError (while on) at the first operation that makes a NaN or an infinity",
                 "TypeError when on is not true or false"],
         examples=["# raises: log makes -inf at index 1\ncheck_nan(true)\nx = [1, 0, 4]\ny = log(x)",
                   "# raises: the backward pass of sqrt makes inf (sqrt's slope at 0)\ncheck_nan(true)\n"
                   "fn f(x) -> sum(sqrt(x))\ngrad(f, [0, 1, 4])",
                   "check_nan(true)\nmissing = 0 / 0      # written on purpose: not flagged\n"
                   "print(missing + 1)\ncheck_nan(false)"])
def check_nan(ctx, on):
    ctx.set_diagnostics(check_nan=on)


@builtin("show_tape", CAT, "Draw the graph that grad(f, x) records: one node per primitive, with its shape and source line.",
         [P("f", "function", doc="a function of one argument returning a number or a matrix"),
          P("x", "tree", doc="where to record: a number, matrix, or a tuple/record of them, nested"),
          P("file", "string", None, doc="also write the picture to this .png or .svg file"),
          P("expand", "any", False, doc="true shows the primitives inside every builtin call; a builtin's "
                                        "name (or a tuple of names) shows those; false collapses each call "
                                        "that recorded several primitives into one node"),
          P("max_nodes", "int", 60, check=lambda v: None if v >= 3 else "must be >= 3", constraint=">= 3",
            doc="the most nodes drawn; those farthest from the result are folded into one"),
          P("layout", "string", "python", check=one_of("python", "dot"), constraint='one of "python", "dot"',
            doc='"python" (a layered layout in pure Python) or "dot" (graphviz\'s dot, when on PATH)')],
         returns="none", context=True,
         what="A picture of what the tape recorded for f at x: the inputs (each leaf of x, named by its path) at "
              "the top, one node per recorded primitive with its shape and the line that recorded it, and the "
              "result at the bottom (red border). The gradient flows back along the red edges; a node the "
              "result does not use is grey. A builtin call that recorded several primitives "
              "(`transformer_block`, `cross_entropy`) is one green node unless expand names it; a chain of "
              "equal calls (one block after another) is one node `name ×k`; inputs read by the same nodes "
              "are one node named by their common path; past max_nodes the nodes farthest from the result are "
              "folded. The caption says what was folded. In a notebook the picture shows below the cell; in "
              "a script, give file= or call savefig; in the REPL, show().",
         how="f runs once on x with every leaf tracked, as in grad, while the tape keeps on each node the "
             "source line and builtin call that recorded it (diagnostics' recorder: the spans exist only "
             "while show_tape runs). The layout is layered (Sugiyama's scheme): each node a row below its "
             "lowest parent, the order in a row by the mean position of its parents and children; matplotlib "
             "draws it. torchviz draws PyTorch's autograd graph with graphviz, without source lines.",
         errors=["TypeError naming the path (x.a, x[1]) of a string, bool or function inside x",
                 "ValueError when f's result does not depend on x (nothing recorded), or is not a number or matrix",
                 'ValueError when layout="dot" and graphviz\'s dot is not on PATH',
                 "ValueError when file does not end in .png or .svg"],
         examples=["show_tape(fn(x) -> sum(x * 2), [1, 2, 3])",
                   "x = [1, 2; 3, 4; 5, 6]\nfn loss(w) -> mean((tanh(x @ w.a) @ w.b - 1)^2)\n"
                   "w = {a = ones(2, 3), b = ones(3, 1)}\nshow_tape(loss, w)"])
def show_tape(ctx, f, x, file, expand, max_nodes, layout):
    import tapeml.builtins.plot as plot
    import tapeml.builtins.tapeview as tapeview
    if not isinstance(raw(expand), (bool, str, tuple)) or (isinstance(raw(expand), tuple)
                                                          and not all(isinstance(e, str) for e in raw(expand))):
        raise TypeErr(f"show_tape(): expand must be true, false, a builtin's name or a tuple of names, "
                      f"got {describe(expand)}")
    site = ctx.span         # the call of show_tape (recording calls f, whose calls move ctx.span)
    graph = tapeview.fold(tapeview.record(ctx, f, x, _root_name(ctx)), raw(expand), max_nodes)

    def draw():
        fig = tapeview.draw(graph, layout)
        if file is not None:
            tapeview.save(fig, full := resolve_path(ctx, file))   # relative: next to the script, as every writer
            note_written(ctx, "show_tape", file, full, site)
    plot._holding_figures(draw)()
