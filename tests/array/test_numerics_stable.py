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


# ---- 1(c): the accuracy of every elementwise rule ------------------------------------------------
mp = pytest.importorskip("mpmath")
_C = math.sqrt(2.0 / math.pi)


def _mp_sigmoid(x):
    return 1 / (1 + mp.exp(-x))


# rule: (tapeml expression of x, the same function in mpmath, its grid). References are the
# function's own definition (gelu with erfc and gelu_tanh as x sigmoid(2u), equal in exact
# arithmetic to the textbook forms, which cancel in 80 digits too at x = -36).
_RULES = {
    "exp": ("exp(x)", mp.exp, "all"),
    "log": ("log(x)", mp.log, "pos"),
    "sqrt": ("sqrt(x)", mp.sqrt, "pos"),
    "tanh": ("tanh(x)", mp.tanh, "all"),
    "sin": ("sin(x)", mp.sin, "trig"),
    "cos": ("cos(x)", mp.cos, "trig"),
    "tan": ("tan(x)", mp.tan, "trig"),
    "sigmoid": ("sigmoid(x)", _mp_sigmoid, "all"),
    "erf": ("erf(x)", mp.erf, "all"),
    "gelu": ("gelu(x)", lambda x: x * (1 + mp.erf(x / mp.sqrt(2))) / 2 if x >= 0 else       # (below -1000 the
             x * mp.erfc(-x / mp.sqrt(2)) / 2 if x > -1000 else mp.mpf(0), "all"),           # value is < 1e-300000)
    "gelu_tanh": ("gelu_tanh(x)",
                  lambda x: x / (1 + mp.exp(-2 * mp.sqrt(mp.mpf(2) / mp.pi) * (x + mp.mpf("0.044715") * x ** 3))), "all"),
    "silu": ("silu(x)", lambda x: x * _mp_sigmoid(x), "all"),
    "quick_gelu": ("quick_gelu(x)", lambda x: x * _mp_sigmoid(mp.mpf("1.702") * x), "all"),
    "softplus": ("softplus(x)", lambda x: mp.log1p(mp.exp(x)), "softplus"),
    "log10": ("log10(x)", mp.log10, "pos"),
    "log2": ("log2(x)", lambda x: mp.log(x, 2), "pos"),
    "log1p": ("log1p(x)", mp.log1p, "gt-1"),
    "expm1": ("expm1(x)", mp.expm1, "all"),
    "asin": ("asin(x)", mp.asin, "unit"),
    "acos": ("acos(x)", mp.acos, "unit"),
    "atan": ("atan(x)", mp.atan, "all"),
    "sinh": ("sinh(x)", mp.sinh, "all"),
    "cosh": ("cosh(x)", mp.cosh, "all"),
    "x^1.5": ("x ^ 1.5", lambda x: x ** mp.mpf(1.5), "pos"),
    "x^3": ("x ^ 3", lambda x: x ** 3, "all"),
}
_BASE = [1e-300, 1e-200, 1e-20, 1e-8, 1e-5, 1e-3, 0.1, 0.5, 1, 1.5, 2, 3, 5.554, 7, 10, 15, 19, 20.5, 25, 30,
         36, 40, 50, 100, 300, 700, 710, 745, 800, 1e4, 1e8, 1e15, 1e150, 1e200]
_GRIDS = {
    "all": sorted({-v for v in _BASE} | set(_BASE) | {0.0}),
    "pos": sorted(set(_BASE) | {1 - 1e-10, 1 + 1e-10, 1 - 1e-15, 1 + 1e-15}),
    "softplus": sorted({-v for v in _BASE} | {v for v in _BASE if v < 19} | {0.0}),  # below PyTorch's threshold 20
    "trig": [-1e5, -100, -3, -1.5707963, -1, -1e-8, -1e-300, 0.0, 1e-300, 1e-8, 0.5, 1, 1.5707963, 3, 100, 1e5],
    "unit": [-1 + 1e-15, -1 + 1e-10, -0.999, -0.5, -1e-8, -1e-300, 0.0, 1e-300, 1e-8, 0.5, 0.999, 1 - 1e-10, 1 - 1e-15],
    "gt-1": sorted({-1 + 1e-15, -1 + 1e-10, -0.999, -0.5} | {-v for v in _BASE if v < 1} | set(_BASE) | {0.0}),
}
# The worst relative error measured over the grid (forward, first and second derivative), with a
# margin; 2e-15 where no tolerance is named. The three above 1e-14 are at the conditioning limit of
# the function itself at large negative x (relative condition number ~x^2 for gelu, ~0.13 x^3 for
# gelu_tanh, 1.7 |x| for quick_gelu: the rounding of x alone moves the true value that much).
_TOL = {"gelu": 4e-13, "gelu_tanh": 2.5e-13, "quick_gelu": 1.5e-13, "erf": 4e-15, "silu": 3e-15,
        "gelu_tanh'": 2e-14, "quick_gelu'": 1e-14}
_TINY = 2.2250738585072014e-308


def _reference(f, x: float, order: int, grid: str):
    xm = mp.mpf(x)
    if order == 0:
        return f(xm)
    h = {"pos": abs(xm), "gt-1": min(max(abs(xm), 1), abs(1 + xm)), "unit": min(1, 1 - abs(xm))}.get(grid, max(abs(xm), 1))
    return mp.diff(f, xm, order, h=h * mp.mpf(10) ** -25)


def _error(got: float, ref, x: float) -> float:
    if abs(ref) > mp.mpf("1.7976931348623157e308"):
        return 0.0 if got == math.copysign(math.inf, ref) else math.inf       # overflows: exactly inf
    if abs(ref) < _TINY or abs(mp.mpf(got) - ref) < mp.mpf(10) ** -44 * max(1, abs(x)):
        return 0.0 if abs(got) < _TINY * 4 or abs(mp.mpf(got) - ref) < mp.mpf(10) ** -44 * max(1, abs(x)) else math.inf
    if not math.isfinite(got):
        return math.inf
    return float(abs((mp.mpf(got) - ref) / ref))


@pytest.mark.parametrize("name", list(_RULES))
def test_elementwise_rule_is_accurate_against_mpmath(name):
    """Forward, first and second derivative (grad of grad) of each rule, in float64, against
    mpmath at 80 digits, over a grid with large negative and positive inputs, tiny ones and the
    points where the formulas switch (softplus's threshold, tanh and sigmoid rounding to 1)."""
    mp.mp.dps = 80
    expr, f, grid = _RULES[name]
    xs = _GRIDS[grid]
    got = value_of("(f(x), f1(x), grad(fn(x) -> sum(f1(x)), x))",
                   f"f = fn(x) -> {expr}\nf1 = fn(x) -> grad(fn(x) -> sum(f(x)), x)", x=np.array(xs))
    for order in range(3):
        tol = _TOL.get(name + "'" * order, _TOL.get(name, 2e-15)) if order else _TOL.get(name, 2e-15)
        for i, x in enumerate(xs):
            if order and ((grid == "pos" and x == 0) or (name in ("asin", "acos") and abs(x) == 1)):
                continue
            err = _error(float(got[order][i]), _reference(f, x, order, grid), x)
            assert err <= tol, (name, order, x, float(got[order][i]), mp.nstr(_reference(f, x, order, grid), 17))


def test_gelu_tanh_prints_the_same_digits_on_numpy_and_torch():
    """The issue's case: gelu_tanh(-5.554) lost 8 digits to 1 + tanh(u), so NumPy and torch:cpu
    printed different ones; x sigmoid(2u) is exact to a few ulps on both (mpmath: -3.857836e-9)."""
    pytest.importorskip("torch")
    from support import run_cli
    src = ("print(gelu_tanh(-5.554))\nprint(gelu_tanh([-5.554, -10, -20.5]))\nprint(gelu([-10, -19]))\n"
           "print(grad(fn(x) -> tanh(x), -40), grad(fn(x) -> sigmoid(x), 40), grad(fn(x) -> expm1(x), -50))")
    # (mpmath: sech(-40)^2, sigmoid'(40) and exp(-50) to 7 digits)
    want = "-3.857836e-9\n[-3.857836e-9, -1.204092e-37, -1.350294e-280]\n[-7.619853e-23, -1.620173e-79]\n" \
           "7.219406e-35 4.248354e-18 1.92875e-22\n"
    assert cli_output(src) == want
    code, out = run_cli(["--device", "torch:cpu", "-c", src])
    assert (code, out) == (0, want)


@pytest.mark.parametrize("device", ["numpy", "torch:cpu"])
def test_sinh_and_cosh_of_a_number_past_their_range_are_inf_on_every_device(device):
    """sinh(55296) of a number (not a matrix) was Python's 'math range error' (math.exp of |x| / 2
    past 709.8 raises); NumPy's sinh gives inf there, and 710 is still finite (1.1169973830808557e308)."""
    if device != "numpy":
        pytest.importorskip("torch")
    from support import run_cli
    src = "print(sinh(55296), cosh(-55296), sinh(-2000), sinh(710), cosh([710, -1e300]), sinh(fill(-1e4)))"
    with np.errstate(over="ignore"):
        want = [np.sinh(55296.0), np.cosh(-55296.0), np.sinh(-2000.0)]
    assert want == [math.inf, math.inf, -math.inf]
    code, out = run_cli(["--device", device, "-c", src])
    assert (code, out) == (0, "inf inf -inf 1.116997e308 [1.116997e308, inf] -inf\n")
