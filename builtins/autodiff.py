"""Autodiff builtins: grad, value_and_grad, stop_gradient, check_grad.

`grad(f, x)` opens a new tape level, wraps every number/matrix leaf of x (a number, matrix,
tuple or record, nested) in a Box of that level, calls f, and walks the tape backward from
the result. Leaves the result does not depend on get zeros. Each call starts a fresh tape, so
nothing accumulates across calls; nested calls use nested levels (grad of grad).
"""
from __future__ import annotations

import gc

import numpy as np

from tapeml import ops
from tapeml import ast as A
from tapeml.builtins.registry import P, builtin, positive
from tapeml.builtins.util import tree_leaves, tree_map
from tapeml.errors import ValueErr
from tapeml.tape import NO_KW, Box, backward, new_level, raw
from tapeml.values import Record, describe, shape_text

CAT = "Autodiff"


def _root_name(interp, default="x"):
    node = getattr(interp, "current_call", None)
    if node is not None and len(node.args) > 1 and isinstance(node.args[1], A.Name):
        return node.args[1].name
    return default


def value_and_grad_impl(interp, f, x, root="x", name="grad"):
    """(f(x), gradient of f at x shaped like x)."""
    level = new_level()
    boxes = []

    def box(v):
        r = v
        while type(r) is Box:
            r = r.value
        t = type(r)
        if not ((t is np.ndarray and r.dtype != np.bool_) or t is float or t is np.float64):
            tree_leaves(x, root)   # a TypeError naming the path of a non-differentiable leaf
        b = Box(v, level, None, (), NO_KW, None, (), ())     # a leaf (tape.leaf, inlined)
        boxes.append(b)
        return b

    boxed = tree_map(box, x)
    # The tape holds no reference cycles (nodes point only to their parents), so reference
    # counting frees it; the cyclic collector would only rescan the growing tape.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return _run_and_backward(interp, f, x, boxed, boxes, level, name)
    finally:
        if gc_was_on:
            gc.enable()


def _run_and_backward(interp, f, x, boxed, boxes, level, name):
    out = interp.call(f, [boxed], {}, None)
    r = raw(out)
    if isinstance(r, np.ndarray) and r.ndim == 0:
        r = float(r)
    if not isinstance(r, float) or isinstance(r, bool):
        what = f"a {shape_text(r.shape)} matrix" if isinstance(r, np.ndarray) and r.ndim > 1 else describe(r)
        hint = ("is a 'return' missing?" if r is None else
                "reduce it first (for example sum(...) or mean(...))")
        raise ValueErr(f"{name} needs f to return a number, but it returned {what}; {hint}")
    if type(out) is Box and out.level == level:
        grads = backward(out, 1.0, ops.add, ops.shape_of)
        value = out.value
    else:
        grads = {}
        value = out
    it = iter(boxes)

    def collect(v):
        b = next(it)
        g = grads.get(b)
        if g is None:
            rv = raw(v)
            return np.zeros_like(rv) if isinstance(rv, np.ndarray) else 0.0
        if type(g) is np.ndarray and not g.flags.writeable:
            return g.copy()      # a broadcast view from the tape: the user gets a matrix of their own
        return g

    return value, tree_map(collect, x)


@builtin("grad", CAT, "The gradient of a scalar function f at x, shaped like x (a number, matrix, tuple or record).",
         [P("f", "function", doc="a function of one argument returning a number"),
          P("x", "tree", doc="where to differentiate: a number, matrix, or a tuple/record of them, nested")],
         returns="the same structure and shapes as x", interp=True,
         what="Reverse-mode automatic differentiation: runs f once while recording every primitive on a "
              "tape, then walks the tape backward. Works for whole transformer blocks, and nests: grad of "
              "grad gives second derivatives.",
         how="Each leaf of x is tracked on a fresh tape level; the backward pass is an iterative "
             "topological sort with a dict of pending cotangents (HIPS autograd's scheme). Leaves f does "
             "not use get zeros.",
         errors=["ValueError when f returns something other than a number (the shape is named)",
                 "TypeError naming the path of a string, bool or function inside x"],
         examples=["grad(fn(x) -> x^2, 3)", "grad(fn(x) -> sum(x * x * x), [1, 2, 3])",
                   "w = {a = 2, b = [1, 2]}\ngrad(fn(w) -> w.a * sum(w.b), w)",
                   "grad(fn(x) -> grad(fn(y) -> y^3, x), 2)"])
def grad(interp, f, x):
    return value_and_grad_impl(interp, f, x, _root_name(interp))[1]


@builtin("value_and_grad", CAT, "(f(x), grad(f, x)) from one forward and one backward pass.",
         [P("f", "function"), P("x", "tree")], returns="tuple (value, gradient)", interp=True,
         what="The loss and its gradient together, as a training step needs them: loss, g = "
              "value_and_grad(f, params) runs f once, where f(params) followed by grad(f, params) would run it twice.",
         how="As grad: reverse-mode differentiation, one forward pass recording primitives on a tape and one "
             "backward pass (JAX's `jax.value_and_grad`), returning the value computed on the way.",
         errors=["ValueError when f returns something other than a number (the shape is named)",
                 "TypeError naming the path of a string, bool or function inside x",
                 "TypeError when f is not a function"],
         examples=["value_and_grad(fn(x) -> sum(x^2), [1, 2])",
                   "loss, g = value_and_grad(fn(w) -> sum(w * [1, 2]), [3, 4])\nprint(loss, g)"])
def value_and_grad(interp, f, x):
    return value_and_grad_impl(interp, f, x, _root_name(interp), "value_and_grad")


@builtin("stop_gradient", CAT, "The value of x with its gradient cut: the tape treats it as a constant.",
         [P("x", doc="any value")], returns="x",
         what="Makes a value a constant for differentiation: the result equals x, but grad treats it as "
              "not depending on anything, so grad(fn(x) -> x * stop_gradient(x), 3) is 3, not 6.",
         how="Returns the plain value under every tape level, so nothing flows back through it (JAX's "
             "`lax.stop_gradient`, PyTorch's `Tensor.detach`).",
         errors=["none: any value is accepted; values that are not numbers or matrices come back unchanged"],
         examples=["grad(fn(x) -> x * stop_gradient(x), 3)"])
def stop_gradient(x):
    r = raw(x)
    if isinstance(r, (tuple, Record)):
        return tree_map(raw, r)
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
         returns="the structure of x with one number per leaf", interp=True,
         what="A test of a gradient: compares what grad computes with a numerical estimate from evaluating f "
              "just left and right of x, and gives the largest relative error of each leaf. The docs build "
              "runs it on every differentiable builtin and fails above 1e-6.",
         errors=["ValueError when f returns something other than a number",
                 "TypeError naming the path of a string, bool or function inside x",
                 "ValueError when h is 0 (\"float division by zero\") or samples is negative"],
         how="For each checked element i: fd = (f(x + h e_i) - f(x - h e_i)) / 2h, and the error is "
             "|grad_i - fd| / max(|grad_i|, |fd|, 1), the test of PyTorch's `torch.autograd.gradcheck`. Leaves larger than `samples` are checked on a fixed "
             "pseudo-random subset of elements. Values near 1e-9 or below mean the tape is right. A nan in "
             "either gradient makes the leaf's error nan, and an infinity in one but not the other makes it "
             "inf: both are failures (nan < 1e-6 is false), never hidden as 0.",
         examples=["check_grad(fn(x) -> sum(sin(x) * x), [0.5, 1, 2]) < 1e-6",
                   "check_grad(fn(x) -> sqrt(x), 0)  # tape inf, finite differences nan: a failure",
                   "check_grad(fn(w) -> sum(w.a @ w.b), {a = [1, 2; 3, 4], b = [1; 2]})"])
def check_grad(interp, f, x, h, samples):
    root = _root_name(interp)
    _, g = value_and_grad_impl(interp, f, x, root, "check_grad")
    leaves = [v for _, v in tree_leaves(x, root)]
    gleaves = [v for _, v in tree_leaves(g, root)]
    rng = np.random.default_rng(0)
    errors = []

    def f_at(k, new_leaf):
        it = iter(range(len(leaves)))

        def swap(v):
            j = next(it)
            return new_leaf if j == k else raw(v)
        return float(raw(interp.call(f, [tree_map(swap, x)], {}, None)))

    for k, (v, gv) in enumerate(zip(leaves, gleaves)):
        rv = np.asarray(raw(v), dtype=np.float64)
        gr = np.asarray(raw(gv), dtype=np.float64)
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
            fd = (f_at(k, plus) - f_at(k, minus)) / (2 * step)
            worst = _worse(worst, grad_error(float(gr.flat[i]), fd))
        errors.append(worst)
    it = iter(errors)
    return tree_map(lambda v: next(it), x)
