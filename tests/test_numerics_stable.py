"""Derivatives at singular points and the accuracy of the elementwise rules (issue 38, items 1b, 1c).

1(b): the second derivative of sum(abs(y) ^ 1.5) at y = 0 was a silent [0, 0] (exact +inf, PyTorch
NaN). x^p for p in (0, 1), (1, 2), 2 and 3 composed with abs, sqrt, norm, relu, max/min and clip, at
0 and at +-1e-8, first and second derivative (grad of grad), each against PyTorch's autograd; the
cases where tapeml keeps its documented rule (a zero cotangent of the first pass wins: the untaken
branch of `where`) are listed with the value they give and why.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tapeml.array import ops
from fd import check_grads, fd_grad, grad
from support import cli_output, value_of


# ---- 1(b): singular points ---------------------------------------------------------------------
def test_second_derivative_of_abs_to_the_1_5_at_0_is_nan_not_a_silent_0():
    """The issue's case: PyTorch's value NaN (exact: +inf, the limit of 0.75 |y|^-0.5; abs'(0) = 0
    cannot give it, and 0 would hide the singularity). y ^ 1.5 alone gives +inf (one-sided)."""
    src = "g = fn(y) -> sum(grad(fn(y) -> sum(abs(y) ^ 1.5), y))\nprint(grad(g, [0, 0]))\nprint(grad(g, [4, -4]))\n"
    assert cli_output(src) == "[nan, nan]\n[0.375, 0.375]\n"
    assert cli_output("g = fn(y) -> sum(grad(fn(y) -> sum(y ^ 1.5), y))\nprint(grad(g, [0, 0]))") == "[inf, inf]\n"
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    (d1,) = torch.autograd.grad((t.abs() ** 1.5).sum(), t, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), t)
    assert torch.isnan(d2).all()


def test_abs_of_an_infinite_cotangent_at_0_is_nan():
    """abs'(0) = 0 is neither side's slope: against an infinite cotangent (sqrt's at 0) the product
    is NaN, PyTorch's g * sgn(x) (it was 0, hiding the cusp of sqrt(|y|)); a finite one still gives
    abs'(0) = 0, and a zero cotangent still wins over a NaN input (an untaken branch)."""
    assert np.isnan(value_of("grad(fn(y) -> sqrt(abs(y)), 0)"))
    assert np.isnan(value_of("grad(fn(y) -> abs(y) ^ 0.5, 0)"))
    assert value_of("grad(fn(y) -> abs(y), 0)") == 0.0
    assert value_of("grad(fn(y) -> sum(where(y > 0, abs(log(y)), y)), [-1, 0, 2])").tolist() == [1.0, 1.0, 0.5]


def test_a_zero_cotangent_of_the_first_pass_still_wins_in_the_second():
    """The untaken branch of where (and a relu that is off) stays 0 at second order too: the
    exception is only a zero of the second pass against the first pass's nonzero cotangent."""
    assert value_of("grad(fn(x) -> sum(grad(fn(x) -> sum(where(x > 1, x ^ 1.5, 1)), x)), [0, 4])").tolist() == \
        [0.0, 0.375]
    assert value_of("grad(fn(x) -> sum(grad(fn(x) -> sum(relu(x) ^ 1.5), x)), [-1, 0, 4])").tolist() == \
        [0.0, 0.0, 0.375]


def _tp(src: str, y: float):
    v = value_of("(g1(y0), grad(g1, y0))", f"f = fn(y) -> {src}\ng1 = fn(y) -> grad(f, y)", y0=y)
    return float(v[0]), float(v[1])


# inner functions: tapeml source (of y), and the same in PyTorch
_INNER = {
    "abs": ("abs(y)", lambda t, y: y.abs()),
    "sqrt": ("sqrt(y)", lambda t, y: y.sqrt()),
    "relu": ("relu(y)", lambda t, y: t.relu(y)),
    "max0": ("max(y, 0)", lambda t, y: t.maximum(y, t.zeros_like(y))),
    "min0": ("min(y, 0)", lambda t, y: t.minimum(y, t.zeros_like(y))),
    "clip01": ("clip(y, 0, 1)", lambda t, y: y.clamp(0, 1)),
    "norm": ("norm([y, 2 * y])", lambda t, y: t.linalg.vector_norm(t.stack([y, 2 * y]))),
    "id": ("y", lambda t, y: y),
}
_P = (0.5, 1.5, 2, 3)
_POINTS = (0.0, 1e-8, -1e-8)
NAN = math.nan

# Where tapeml keeps a value of its own (d1, d2), not PyTorch's NaN, and why. Each is a zero
# cotangent of the FIRST pass meeting an infinite derivative: a kink's 0 (abs'(0), relu'(0)), a
# smooth zero (2 sqrt(y) at 0) or a mask on a NaN input (relu of sqrt(-1e-8)); by value it cannot be
# told from the untaken branch of a `where`, whose 0 the guide promises (docs/language.md,
# "Gradients at non-smooth points"). norm's own VJP (reduce_ops) gives its subgradient 0 at 0.
KEPT = {
    ("abs(y^0.5)", 0.0): (0.0, 0.0), ("abs(y^1.5)", 0.0): (0.0, 0.0),
    ("sqrt(y)^1.5", 0.0): (0.0, math.inf), ("sqrt(y^1.5)", 0.0): (0.0, math.inf),
    ("sqrt(y)^2", 0.0): (0.0, math.inf), ("sqrt(y^2)", 0.0): (0.0, math.inf),
    ("sqrt(y)^3", 0.0): (0.0, 0.0), ("sqrt(y^3)", 0.0): (0.0, 0.0),
    ("relu(y^0.5)", 0.0): (0.0, 0.0), ("relu(y^0.5)", -1e-8): (0.0, 0.0),
    ("relu(y^1.5)", 0.0): (0.0, 0.0), ("relu(y^1.5)", -1e-8): (0.0, 0.0),
    ("max0(y^0.5)", -1e-8): (0.0, 0.0), ("max0(y^1.5)", -1e-8): (0.0, 0.0),
    ("min0(y^0.5)", -1e-8): (0.0, 0.0), ("min0(y^1.5)", -1e-8): (0.0, 0.0),
    ("clip01(y^0.5)", -1e-8): (0.0, 0.0), ("clip01(y^1.5)", -1e-8): (0.0, 0.0),
    ("norm(y)^0.5", 0.0): (0.0, math.inf), ("norm(y^0.5)", 0.0): (0.0, math.inf),
    **{(f"norm(y{s}", 0.0): (0.0, 0.0) for s in (")^1.5", "^1.5)", ")^2", "^2)", ")^3", "^3)")},
}


def _cases():
    out = []
    for (name, (src, fun)), p in itertools.product(_INNER.items(), _P):
        out.append((f"{name}(y)^{p}", f"({src}) ^ {p}", lambda t, y, fun=fun, p=p: fun(t, y) ** p))
        if name != "id":
            inner_src = src.replace("y", f"(y ^ {p})")
            out.append((f"{name}(y^{p})", inner_src, lambda t, y, fun=fun, p=p: fun(t, y ** p)))
    return [(label, src, fun, y) for label, src, fun in out for y in _POINTS]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= 1e-9 * abs(b)


@pytest.mark.parametrize("label, src, fun, y", _cases(), ids=[f"{c[0]}@{c[3]:g}" for c in _cases()])
def test_powers_composed_with_kinks_against_pytorch(label, src, fun, y):
    torch = pytest.importorskip("torch")
    got = _tp(src, y)
    if (label, y) in KEPT:
        want = KEPT[(label, y)]
    else:
        t = torch.tensor(y, dtype=torch.float64, requires_grad=True)
        (d1,) = torch.autograd.grad(fun(torch, t), t, create_graph=True)
        d2 = torch.autograd.grad(d1, t, allow_unused=True)[0] if d1.requires_grad else None
        want = (float(d1.detach()), 0.0 if d2 is None else float(d2))
    assert _same(got[0], want[0]) and _same(got[1], want[1]), (label, y, got, want)
    # never a finite number where the second derivative has no finite value on either side
    if y == 0.0 and label in ("abs(y)^1.5", "abs(y)^0.5", "id(y)^1.5", "id(y)^0.5"):
        assert not math.isfinite(got[1])


def test_pow_grad_against_finite_differences():
    """pow_grad(g, a, b) = g b a^(b-1), the cotangent a^b sends to a: its VJP to each input, and the
    third derivative of x^p through it (grad of grad of grad) against central differences."""
    rng = np.random.default_rng(3)
    g, a, b = rng.standard_normal((2, 3)), rng.uniform(0.5, 2.0, (2, 3)), rng.uniform(-1.5, 3.0, (2, 3))
    check_grads(ops.pow_grad, g, a, b, tol=1e-6)
    check_grads(lambda g, a: ops.pow_grad(g, a, 2.5), rng.standard_normal(4), rng.uniform(0.5, 2.0, 4))

    def d2(x):          # sum of the second derivative of x^2.5, a function of x
        return ops.sum_(grad(lambda x: ops.sum_(grad(lambda x: ops.sum_(ops.pow_(x, 2.5)), x)), x))
    x = rng.uniform(0.5, 2.0, 3)
    np.testing.assert_allclose(grad(d2, x), 2.5 * 1.5 * 0.5 * x ** -0.5, rtol=1e-12)
    np.testing.assert_allclose(grad(d2, x), fd_grad(d2, x), rtol=1e-6)
