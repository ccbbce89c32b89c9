"""Issue 20, shapes and elementwise functions: values against NumPy (and PyTorch where importable),
gradients against central finite differences (batched rank-3 inputs and kinks), grad of grad,
errors as LangErrors."""
import importlib.util
import math

import numpy as np
import pytest

from tapeml.array import ops
from tapeml.builtins import REGISTRY
from tapeml.array.tape import raw

from support import on_host, run_ml
from fd import builtin as B, check_grads, fd_grad, grad

HAS_TORCH = importlib.util.find_spec("torch") is not None


rng = np.random.default_rng(20)


def rn(*shape):
    return rng.standard_normal(shape)


def inside(*shape):            # (-0.9, 0.9): the domain of asin and acos, away from +-1
    return rng.uniform(-0.9, 0.9, shape)


def positive(*shape):
    return rng.uniform(0.2, 3.0, shape)


# name -> (NumPy reference, input maker)
ELEMENTWISE = {
    "log10": (np.log10, positive), "log2": (np.log2, positive), "tan": (np.tan, inside),
    "log1p": (np.log1p, positive), "expm1": (np.expm1, rn), "asin": (np.arcsin, inside),
    "acos": (np.arccos, inside), "atan": (np.arctan, rn), "sinh": (np.sinh, rn), "cosh": (np.cosh, rn),
    "erf": (np.vectorize(math.erf), rn),
    "softplus": (lambda x: np.log1p(np.exp(x)), rn),
    "leaky_relu": (lambda x: np.where(x > 0, x, 0.01 * x), rn),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_values_and_gradients(name):
    ref, make = ELEMENTWISE[name]
    f = B(name)
    for shape in [(5,), (2, 3, 4)]:                  # a vector and a batched rank-3 input
        x = make(*shape)
        np.testing.assert_allclose(raw(f(x)), ref(x), rtol=1e-13, atol=1e-15)
        check_grads(f, x)
    assert REGISTRY[name].differentiable


def test_atan2_values_gradients_broadcasting_and_the_origin():
    f = B("atan2")
    y, x = rn(2, 3, 4), rn(2, 3, 4)
    np.testing.assert_allclose(raw(f(y, x)), np.arctan2(y, x), rtol=1e-14)
    check_grads(f, y, x)
    check_grads(f, rn(3, 1), rn(4))                           # broadcast: the gradient sums back
    gy = grad(lambda t: ops.sum_(f(t, np.array([0.0, 1.0]))), np.array([0.0, 0.0]))
    gx = grad(lambda t: ops.sum_(f(np.array([0.0, 1.0]), t)), np.array([0.0, 0.0]))
    assert raw(gy).tolist() == [0.0, 1.0]               # at the origin 0 (the kink convention)
    assert raw(gx).tolist() == [0.0, -1.0]
    g = grad(lambda t: ops.sum_(f(t, np.array([math.inf, 1.0]))), np.array([1.0, 1e300]))
    assert raw(g).tolist() == [0.0, 0.0]                 # an infinite or huge radius: 0, not nan


def test_softplus_is_pytorchs_with_beta_and_threshold():
    f = B("softplus")
    x = np.array([-1000.0, -30, -1, 0, 1, 19.9, 20, 20.1, 1000])
    want = np.where(x > 20, x, np.logaddexp(0.0, x))
    np.testing.assert_allclose(raw(f(x)), want, rtol=1e-15)
    x2 = rn(2, 3, 4) * 3
    np.testing.assert_allclose(raw(f(x2, beta=2.0, threshold=5.0)),
                               np.where(2 * x2 > 5, x2, np.logaddexp(0.0, 2 * x2) / 2), rtol=1e-14)
    check_grads(lambda t: f(t, beta=2.0, threshold=5.0), x2)
    g = raw(grad(lambda t: ops.sum_(f(t)), np.array([0.0, 25.0, -800.0])))
    assert g.tolist() == [0.5, 1.0, 0.0]                 # sigmoid(0), 1 past the threshold, no nan


def test_leaky_relu_slope_and_its_derivative_at_zero():
    f = B("leaky_relu")
    x = np.array([-2.0, 0.0, 3.0])
    assert raw(f(x, negative_slope=0.2)).tolist() == [-0.4, 0.0, 3.0]
    assert raw(grad(lambda t: ops.sum_(f(t, negative_slope=0.2)), x)).tolist() == [0.2, 0.2, 1.0]


def test_domain_edges_follow_ieee_as_log_and_sqrt():
    with np.errstate(all="ignore"):
        cases = {"log10": ([0.0, -1.0], np.log10), "log2": ([0.0, -1.0], np.log2),
                 "log1p": ([-1.0, -2.0], np.log1p), "asin": ([2.0, -1.0], np.arcsin),
                 "acos": ([2.0, 1.0], np.arccos)}
        for name, (xs, ref) in cases.items():
            np.testing.assert_array_equal(raw(B(name)(np.array(xs))), ref(np.array(xs)))
    assert raw(B("log10")(0.0)) == -math.inf
    code, out = run_ml("print(asin(2))\nprint(log10(0))")
    assert code == 0 and out == "nan\n-inf\n"


def test_grad_of_grad_of_the_elementwise_primitives():
    for name in ["log10", "log2", "tan", "log1p", "expm1", "asin", "acos", "atan", "sinh", "cosh", "softplus"]:
        f = B(name)
        x = inside(4) + 1.0 if name in ("log10", "log2", "log1p") else inside(4)

        def g1(t):
            return ops.sum_(grad(lambda u: ops.sum_(f(u)), t))
        tape = np.asarray(raw(grad(g1, x)))
        np.testing.assert_allclose(tape, fd_grad(g1, x), rtol=1e-5, atol=1e-6, err_msg=name)
    f = B("atan2")
    x = rn(3)
    g1 = lambda t: ops.sum_(grad(lambda u: ops.sum_(f(u, x)), t))
    y = rn(3)
    np.testing.assert_allclose(np.asarray(raw(grad(g1, y))), fd_grad(g1, y), rtol=1e-5, atol=1e-6)


def test_not_differentiable_tests_and_roundings():
    x = np.array([-1.5, -0.0, 0.0, 0.5, math.inf, -math.inf, math.nan])
    np.testing.assert_array_equal(raw(B("ceil")(x)), np.ceil(x))
    np.testing.assert_array_equal(raw(B("sign")(x)), np.sign(x))
    assert raw(B("sign")(0.0)) == 0.0
    for name, ref in [("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)]:
        r = on_host(raw(B(name)(x)))
        assert r.dtype == np.bool_ and r.tolist() == ref(x).tolist()
        assert B(name)(math.inf) is bool(ref(math.inf))
    assert raw(grad(lambda t: ops.sum_(ops.mul(B("sign")(t), t)), np.array([-2.0, 3.0]))).tolist() == [-1.0, 1.0]
    code, out = run_ml("print(ceil([-1.5, 0.5]))\nprint(isfinite([1, 1 / 0, 0 / 0]))")
    assert out == "[-1, 1]\n[true, false, false]\n"


# ---- shapes ------------------------------------------------------------------------------------
def shape_cases():
    """(label, call, NumPy reference, inputs): each D shape function on a matrix and a rank-3 batch."""
    m, t = rn(3, 4), rn(2, 3, 4)
    return [
        ("tril", lambda x: B("tril")(x), np.tril, [m]),
        ("tril/k=1 batch", lambda x: B("tril")(x, k=1), lambda x: np.tril(x, 1), [t]),
        ("triu", lambda x: B("triu")(x), np.triu, [m]),
        ("triu/k=-1 batch", lambda x: B("triu")(x, k=-1), lambda x: np.triu(x, -1), [t]),
        ("flatten", B("flatten"), lambda x: x.flatten(), [t]),
        ("squeeze", B("squeeze"), np.squeeze, [rn(2, 1, 3, 1)]),
        ("squeeze/dim", lambda x: B("squeeze")(x, dim=-1), lambda x: np.squeeze(x, -1), [rn(2, 1, 3, 1)]),
        ("expand_dims", lambda x: B("expand_dims")(x, 1), lambda x: np.expand_dims(x, 1), [t]),
        ("permute", lambda x: B("permute")(x, 2, 0, 1), lambda x: np.transpose(x, (2, 0, 1)), [t]),
        ("flip", B("flip"), np.flip, [t]),
        ("flip/dim", lambda x: B("flip")(x, dim=1), lambda x: np.flip(x, 1), [t]),
        ("tile", lambda x: B("tile")(x, 2, 1, 3), lambda x: np.tile(x, (2, 1, 3)), [t]),
        ("tile/promote", lambda x: B("tile")(x, 2, 2, 2), lambda x: np.tile(x, (2, 2, 2)), [m]),
        ("repeat", lambda x: B("repeat")(x, 3), lambda x: np.repeat(x, 3), [m]),
        ("repeat/dim", lambda x: B("repeat")(x, 2, dim=1), lambda x: np.repeat(x, 2, axis=1), [t]),
        ("pad", lambda x: B("pad")(x, ((1, 0), (0, 2), (3, 1)), value=-1.5),
         lambda x: np.pad(x, ((1, 0), (0, 2), (3, 1)), constant_values=-1.5), [t]),
        ("pad/matrix", lambda x: B("pad")(x, np.array([[0.0, 1], [2, 0]])), lambda x: np.pad(x, ((0, 1), (2, 0))), [m]),
        ("pad/one pair", lambda x: B("pad")(x, (1.0, 2.0)), lambda x: np.pad(x, (1, 2)), [t]),
        ("roll", lambda x: B("roll")(x, 2, dim=2), lambda x: np.roll(x, 2, axis=2), [t]),
        ("roll/flat", lambda x: B("roll")(x, -5), lambda x: np.roll(x, -5), [t]),
        ("chunk", lambda x: B("chunk")(x, 3, dim=1), lambda x: tuple(np.split(x, 3, axis=1)), [rn(2, 6, 2)]),
        ("chunk/uneven", lambda x: B("chunk")(x, 3, dim=-1), lambda x: (x[..., :2], x[..., 2:4]), [t]),
    ]


@pytest.mark.parametrize("label, call, ref, inputs", shape_cases(), ids=[c[0] for c in shape_cases()])
def test_shapes_match_numpy_and_finite_differences(label, call, ref, inputs):
    got, want = call(*inputs), ref(*inputs)
    if isinstance(want, tuple):
        assert len(raw(got)) == len(want)
        for a, b in zip(raw(got), want):
            np.testing.assert_array_equal(raw(a), b)
    else:
        np.testing.assert_array_equal(raw(got), want)
    check_grads(call, *inputs)


def test_causal_mask_and_fused_qkv_in_the_language():
    code, out = run_ml("mask = tril(ones(3, 3)) > 0\nprint(mask)\n"
                       "qkv = reshape(1:12, 2, 6)\nq, k, v = chunk(qkv, 3, dim=1)\nprint(q)\nprint(v)")
    assert code == 0, out
    assert out == "[true, false, false; true, true, false; true, true, true]\n[1, 2; 7, 8]\n[5, 6; 11, 12]\n"


def test_a_bool_mask_stays_a_mask():
    m = rn(2, 3, 3) > 0
    for name, ref in [("tril", np.tril), ("triu", np.triu)]:
        r = on_host(raw(B(name)(m, k=1)))
        assert r.dtype == np.bool_ and np.array_equal(r, ref(m, 1))
    assert on_host(raw(B("flip")(m))).dtype == np.bool_ and on_host(raw(B("tile")(m, 2))).dtype == np.bool_


def test_tile_and_repeat_are_numpys_with_pytorchs_names_swapped():
    x = np.array([1.0, 2.0])
    assert raw(B("tile")(x, 2)).tolist() == [1, 2, 1, 2]         # torch: x.repeat(2)
    assert raw(B("repeat")(x, 2)).tolist() == [1, 1, 2, 2]       # torch: x.repeat_interleave(2)


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch not importable")
def test_against_pytorch_values_and_gradients():
    import torch
    x = rn(2, 3, 4)
    R = rn(2, 3, 4)
    pairs = {
        "log10": torch.log10, "log2": torch.log2, "tan": torch.tan, "log1p": torch.log1p, "expm1": torch.expm1,
        "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
        "erf": torch.erf, "softplus": torch.nn.functional.softplus, "leaky_relu": torch.nn.functional.leaky_relu,
    }
    for name, tf in pairs.items():
        xi = np.abs(x) + 0.1 if name in ("log10", "log2", "log1p") else np.clip(x, -0.9, 0.9) \
            if name in ("asin", "acos", "tan") else x
        tx = torch.tensor(xi, requires_grad=True)
        ty = tf(tx)
        (ty * torch.tensor(R)).sum().backward()
        np.testing.assert_allclose(raw(B(name)(xi)), ty.detach().numpy(), rtol=1e-12, atol=1e-15, err_msg=name)
        g = grad(lambda t: ops.sum_(ops.mul(B(name)(t), R)), xi)
        np.testing.assert_allclose(raw(g), tx.grad.numpy(), rtol=1e-12, atol=1e-15, err_msg=name)
    # atan2 and the kinks PyTorch defines: leaky_relu'(0) = slope, softplus at its threshold
    y = rn(2, 3, 4)
    ty, tx = torch.tensor(y, requires_grad=True), torch.tensor(x, requires_grad=True)
    (torch.atan2(ty, tx) * torch.tensor(R)).sum().backward()
    gy = grad(lambda t: ops.sum_(ops.mul(B("atan2")(t, x), R)), y)
    gx = grad(lambda t: ops.sum_(ops.mul(B("atan2")(y, t), R)), x)
    np.testing.assert_allclose(raw(gy), ty.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(raw(gx), tx.grad.numpy(), rtol=1e-12)
    for name, tf, xs in [("leaky_relu", torch.nn.functional.leaky_relu, [0.0, -1.0, 2.0]),
                         ("softplus", torch.nn.functional.softplus, [20.0, 19.999, 20.001, 0.0, -50.0])]:
        tx = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
        tf(tx).sum().backward()
        g = grad(lambda t: ops.sum_(B(name)(t)), np.array(xs))
        np.testing.assert_allclose(raw(g), tx.grad.numpy(), rtol=1e-14, err_msg=name)
    # shapes: tile is torch's repeat, repeat is repeat_interleave, chunk's uneven parts
    t = torch.tensor(rn(2, 3))
    np.testing.assert_array_equal(raw(B("tile")(t.numpy(), 2, 3)), t.repeat(2, 3).numpy())
    np.testing.assert_array_equal(raw(B("repeat")(t.numpy(), 3, dim=1)), t.repeat_interleave(3, dim=1).numpy())
    for size in range(0, 12):
        for n in range(1, 7):
            v = np.arange(float(size))
            want = [c.numpy().tolist() for c in torch.chunk(torch.tensor(v), n)]
            assert [raw(c).tolist() for c in B("chunk")(v, n)] == want, (size, n)
    np.testing.assert_array_equal(raw(B("roll")(t.numpy(), 1, dim=0)), torch.roll(t, 1, 0).numpy())
    np.testing.assert_array_equal(raw(B("roll")(t.numpy(), 4)), torch.roll(t, 4).numpy())
    np.testing.assert_array_equal(raw(B("flip")(t.numpy(), dim=1)), torch.flip(t, (1,)).numpy())


ERRORS = [
    ("tril([1, 2, 3])", "ShapeError: tril() needs a matrix (2 axes or more)"),
    ("tril(ones(2, 2), k=0.5)", "ValueError: tril(): k must be a whole number"),
    ("squeeze(zeros(2, 3), dim=0)", "ShapeError: squeeze(): axis 0 of 2x3 has size 2, not 1"),
    ("squeeze(zeros(2, 1), dim=2)", "ValueError: dim=2 is out of range"),
    ("expand_dims([1, 2], 3)", "ValueError: expand_dims(): dim=3 is out of range for a result with 2 axes"),
    ("permute(zeros(2, 3), 0, 0)", "ValueError: permute(): dims must be a permutation of 0 .. 1"),
    ("permute(zeros(2, 3), 0)", "ValueError: permute(): dims must be a permutation of 0 .. 1"),
    ("flip([1, 2], dim=1)", "ValueError: dim=1 is out of range"),
    ("tile([1, 2], -1)", "ValueError: tile(): each rep must be a whole number >= 0"),
    ("tile([1, 2])", "TypeError: tile() needs the repetitions"),
    ("tile([1, 2], 100000, 100000)", "the limit"),
    ("repeat([1, 2], 1.5)", "ValueError: repeat(): n must be a whole number"),
    ("pad([1, 2], (1, -1))", "ValueError: pad(): widths must be whole numbers >= 0"),
    ("pad([1, 2; 3, 4], ((1, 1), (1, 1), (1, 1)))", "a tuple of 2 pairs or a [2, 2] matrix"),
    ("pad(3, (1, 1))", "ShapeError: pad() needs a vector or matrix"),
    ("chunk([1, 2, 3], 0)", "ValueError: chunk(): n must be a whole number >= 1"),
    ("chunk(3, 2)", "ShapeError: chunk() needs a vector or matrix"),
    ("roll([1, 2], 0.5)", "ValueError: roll(): shift must be a whole number"),
    ("atan2([1, 2], [1, 2, 3])", "ShapeError: atan2(): y is a vector of length 2 and x is a vector of length 3"),
    ("softplus(1, beta=0)", "ValueError: softplus(): beta must be > 0"),
    ("log10(\"a\")", "TypeError"),
]


@pytest.mark.parametrize("src, msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_lang_errors(src, msg):
    code, out = run_ml(src)
    assert code != 0
    assert msg in out, out
    assert "Traceback" not in out and "numpy" not in out.lower()
    assert out.startswith("<string>:1:1: ")          # the span of the call, with its caret


def test_every_elementwise_builtin_takes_bools_as_0_and_1():
    """sign(true) leaked NumPy's ufunc message and floor(true) stayed a bool: each elementwise
    builtin of one argument gives on bools what it gives on 0 and 1."""
    names = [n for n, b in REGISTRY.items() if b.category == "Math" and len(b.params) == 1
             and b.params[0].kind == "array" and n not in ("isnan", "isinf", "isfinite")]
    assert {"sign", "floor", "ceil", "abs", "sqrt", "exp", "tan", "erf"} <= set(names)
    for name in names:
        got = run_ml(f"print({name}(true), {name}([true, false]))")
        want = run_ml(f"print({name}(1), {name}([1, 0]))")
        assert got == want and got[0] == 0, (name, got)
