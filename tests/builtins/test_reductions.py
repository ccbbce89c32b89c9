"""Reductions, sorting and search (builtins/reductions.py, primitives in lang/array/reduce_ops.py; issue 20).

- values against NumPy (its stable sort, its quantile methods, cov/corrcoef with rowvar=False);
- finite differences for every differentiable builtin on a batched rank-3 input with dim, and at
  the kinks: prod and cumprod with one and two zeros, sort and median with ties (the gradient at a
  tie is the gradient of the stable order: the one at a nearby point that breaks the tie that way);
- second order (grad of grad through prod and cumprod with zeros) against finite differences;
- PyTorch autograd, values and gradients, when torch is importable;
- keepdims and dim on sum/mean/max/min/any/all/argmax/argmin, and the errors.
"""
import importlib.util
import os

import numpy as np
import pytest

from tapeml.array import ops
from tapeml.builtins.autodiff import value_and_grad_impl
from tapeml.array.tape import raw

from support import REFERENCE, run_cli, run_ml
from fd import PyInterp, builtin as B, fd_grad, grad_array as grad

HAS_TORCH = importlib.util.find_spec("torch") is not None


def first(v):
    r = raw(v)
    return v[0] if isinstance(r, tuple) else v


def weighted(call, x, seed=1):
    """loss(x) = sum(call(x) * R), R fixed pseudo-random weights (the first result of a tuple)."""
    R = np.random.default_rng(seed).standard_normal(np.shape(raw(first(call(x)))))
    return lambda v: ops.sum_(ops.mul(first(call(v)), R)), R


RNG = np.random.default_rng(20)
X3 = RNG.standard_normal((2, 3, 4))          # a batch: dim on rank 3
X53 = RNG.standard_normal((5, 3))

# name -> (tapeml call, input, NumPy value or None)
CASES = {
    "prod/dim1": (lambda x: B("prod")(x, dim=1), X3, lambda x: np.prod(x, axis=1)),
    "prod/all": (lambda x: B("prod")(x), X3, lambda x: np.prod(x)),
    "prod/keepdims": (lambda x: B("prod")(x, dim=-1, keepdims=True), X3, lambda x: np.prod(x, axis=-1, keepdims=True)),
    "cumsum/dim2": (lambda x: B("cumsum")(x, dim=2), X3, lambda x: np.cumsum(x, axis=2)),
    "cumsum/dim0": (lambda x: B("cumsum")(x, dim=0), X3, lambda x: np.cumsum(x, axis=0)),
    "cumprod/dim1": (lambda x: B("cumprod")(x, dim=1), X3, lambda x: np.cumprod(x, axis=1)),
    "median/odd": (lambda x: B("median")(x, dim=1), X3, lambda x: np.median(x, axis=1)),
    "median/even": (lambda x: B("median")(x, dim=2), X3, lambda x: np.median(x, axis=2)),
    "median/all": (lambda x: B("median")(x), X3, lambda x: np.median(x)),
    "var/dim2": (lambda x: B("var")(x, dim=2), X3, lambda x: np.var(x, axis=2, ddof=1)),
    "var/pop": (lambda x: B("var")(x, dim=1, correction=0, keepdims=True), X3,
                lambda x: np.var(x, axis=1, keepdims=True)),
    "var/all": (lambda x: B("var")(x), X3, lambda x: np.var(x, ddof=1)),
    "std/dim0": (lambda x: B("std")(x, dim=0), X3, lambda x: np.std(x, axis=0, ddof=1)),
    "std/pop": (lambda x: B("std")(x, dim=-1, correction=0), X3, lambda x: np.std(x, axis=-1)),
    "logsumexp/dim1": (lambda x: B("logsumexp")(x, dim=1), X3,
                       lambda x: np.log(np.sum(np.exp(x), axis=1))),
    "logsumexp/all": (lambda x: B("logsumexp")(x, keepdims=True), X3,
                      lambda x: np.log(np.sum(np.exp(x), keepdims=True))),
    "quantile/linear": (lambda x: B("quantile")(x, 0.3, dim=2), X3, lambda x: np.quantile(x, 0.3, axis=2)),
    "quantile/vector": (lambda x: B("quantile")(x, np.array([0.1, 0.5, 0.9]), dim=1), X3,
                        lambda x: np.quantile(x, [0.1, 0.5, 0.9], axis=1)),
    "quantile/midpoint": (lambda x: B("quantile")(x, 0.3, dim=2, method="midpoint"), X3,
                          lambda x: np.quantile(x, 0.3, axis=2, method="midpoint")),
    "quantile/all": (lambda x: B("quantile")(x, 0.75), X3, lambda x: np.quantile(x, 0.75)),
    "sort/dim1": (lambda x: B("sort")(x, dim=1), X3, lambda x: np.sort(x, axis=1)),
    "sort/desc": (lambda x: B("sort")(x, descending=True), X3, lambda x: -np.sort(-x, axis=-1)),
    "topk": (lambda x: B("topk")(x, 2), X3, lambda x: -np.sort(-x, axis=-1)[..., :2]),
    "topk/dim0": (lambda x: B("topk")(x, 1, dim=0), X3, lambda x: np.max(x, axis=0, keepdims=True)),
    "cov": (lambda x: B("cov")(x), X53, lambda x: np.cov(x, rowvar=False)),
    "corrcoef": (lambda x: B("corrcoef")(x), X53, lambda x: np.corrcoef(x, rowvar=False)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_values_against_numpy(name):
    call, x, ref = CASES[name]
    got = np.asarray(raw(first(call(x))), dtype=np.float64)
    want = ref(x)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_against_finite_differences(name):
    call, x, _ = CASES[name]
    loss, _ = weighted(call, x)
    np.testing.assert_allclose(grad(loss, x), fd_grad(loss, x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("which, x, want", [
    ("prod", [2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),          # one zero: the product of the others
    ("prod", [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]),          # two zeros: all 0
    ("prod", [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
    ("prod", [0.0], [1.0]),
])
def test_prod_gradient_at_zeros(which, x, want):
    x = np.array(x)
    g = grad(lambda v: B(which)(v), x)
    assert g.tolist() == want
    np.testing.assert_allclose(g, fd_grad(lambda v: B(which)(v), x), atol=1e-9)


def test_prod_with_zeros_batched_and_cumprod_with_zeros():
    x = X3.copy()
    x[0, 1, 2] = x[1, 2, 3] = x[1, 0, 3] = 0.0             # one zero in a row of dim 1, two in another
    for call in (lambda v: B("prod")(v, dim=1), lambda v: B("prod")(v, dim=2), lambda v: B("cumprod")(v, dim=1),
                 lambda v: B("cumprod")(v, dim=2), lambda v: B("prod")(v)):
        loss, _ = weighted(call, x)
        np.testing.assert_allclose(grad(loss, x), fd_grad(loss, x), rtol=1e-6, atol=1e-8)


def test_cumprod_zero_cases_by_hand():
    # d/dx cumprod([2, 0, 3]) summed: ans = [2, 0, 0]; d/dx0 = 1, d/dx1 = 2 + 2*3 = 8, d/dx2 = 0
    assert grad(lambda v: ops.sum_(B("cumprod")(v)), np.array([2.0, 0.0, 3.0])).tolist() == [1.0, 8.0, 0.0]
    assert grad(lambda v: ops.sum_(B("cumprod")(v)), np.array([0.0, 0.0, 3.0])).tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("call", [
    lambda v: B("prod")(v), lambda v: ops.sum_(B("cumprod")(v)), lambda v: ops.sum_(ops.mul(B("cumsum")(v), v)),
])
@pytest.mark.parametrize("x", [[1.5, -2.0, 0.5, 3.0], [1.5, 0.0, 0.5, 3.0], [0.0, 2.0, 0.0, 3.0]])
def test_second_order_against_finite_differences(call, x):
    """grad of grad: the VJPs are written with primitives (zeros included)."""
    x = np.array(x)
    w = np.array([0.3, -1.0, 0.7, 0.2])
    g_dot_w = lambda v: ops.sum_(ops.mul(value_and_grad_impl(PyInterp(), call, v)[1], w))
    np.testing.assert_allclose(grad(g_dot_w, x), fd_grad(g_dot_w, x, h=1e-5), rtol=1e-6, atol=1e-7)


# ---- ties: the gradient of the stable order -----------------------------------------------------------
TIES = np.array([2.0, 1.0, 2.0, 0.5, 2.0])


@pytest.mark.parametrize("call, x, desc", [
    (lambda v: B("sort")(v), TIES, False),
    (lambda v: B("sort")(v, descending=True), TIES, True),
    (lambda v: B("median")(v), TIES, False),
    (lambda v: B("median")(v), np.array([1.0, 3.0, 3.0, 0.0]), False),
    (lambda v: B("quantile")(v, 0.4), TIES, False),
    (lambda v: B("topk")(v, 2), TIES, True),
    (lambda v: B("sort")(v, dim=1), np.array([[1.0, 1.0], [1.0, 0.0]]).reshape(1, 2, 2) + np.zeros((2, 1, 1)), False),
])
def test_ties_take_the_gradient_of_the_stable_order(call, x, desc):
    """At a tie the function has only one-sided derivatives; the gradient is the one of the stable
    order (the earlier position first): the finite differences at a nearby point where the tie is
    broken that way."""
    loss, _ = weighted(call, x)
    if desc:
        near = x - 1e-4 * np.argsort(np.argsort(-x, axis=-1, kind="stable"), axis=-1, kind="stable")
    else:
        d = 1 if x.ndim == 3 else -1
        near = x + 1e-4 * np.argsort(np.argsort(x, axis=d, kind="stable"), axis=d, kind="stable")
    np.testing.assert_allclose(grad(loss, x), fd_grad(loss, near), rtol=1e-6, atol=1e-7)


def test_sort_gradient_is_the_permutation():
    x = np.array([3.0, 1.0, 3.0, 2.0])
    w = np.array([10.0, 20.0, 30.0, 40.0])
    g = grad(lambda v: ops.sum_(ops.mul(B("sort")(v), w)), x)
    assert g.tolist() == [30.0, 10.0, 40.0, 20.0]      # sorted: x1, x3, x0, x2 (x0 before x2: stable)
    g = grad(lambda v: ops.sum_(ops.mul(B("sort")(v, descending=True), w)), x)
    assert g.tolist() == [10.0, 40.0, 20.0, 30.0]      # descending: x0, x2, x3, x1


def test_median_even_count_is_the_mean_of_the_middle_two():
    assert B("median")(np.array([4.0, 1.0, 3.0, 2.0])) == 2.5
    g = grad(lambda v: B("median")(v), np.array([4.0, 1.0, 3.0, 2.0]))
    assert g.tolist() == [0.0, 0.0, 0.5, 0.5]
    assert np.isnan(B("median")(np.array([1.0, np.nan, 2.0])))


def test_argsort_is_stable_and_zero_based():
    x = np.array([2.0, 1.0, 2.0, 1.0, 0.0])
    assert raw(B("argsort")(x)).tolist() == [4, 1, 3, 0, 2]
    assert raw(B("argsort")(x, descending=True)).tolist() == [0, 2, 1, 3, 4]
    m = RNG.integers(0, 3, (4, 6)).astype(float)
    for d in (0, 1):
        assert np.array_equal(raw(B("argsort")(m, dim=d)), np.argsort(m, axis=d, kind="stable"))
    v, i = B("topk")(np.array([1.0, 5.0, 5.0, 3.0]), 3)
    assert raw(v).tolist() == [5.0, 5.0, 3.0] and raw(i).tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile_methods_match_numpy(method):
    x = RNG.standard_normal((3, 7))
    for q in (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 0.5 / 6, 1.5 / 6, 2.5 / 6):
        for d in (None, 0, 1):
            np.testing.assert_allclose(raw(B("quantile")(x, q, dim=d, method=method)),
                                       np.quantile(x, q, axis=d, method=method), rtol=1e-14, atol=1e-14)


def test_nonzero_and_numel():
    assert raw(B("nonzero")(np.array([0.0, 3.0, 0.0, 5.0]))).tolist() == [1.0, 3.0]
    m = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]])
    assert np.array_equal(raw(B("nonzero")(m)), np.argwhere(m))
    assert raw(B("nonzero")(np.zeros((2, 2)))).shape == (0, 2)
    assert B("numel")(m) == 6.0 and B("numel")(7.0) == 1.0 and B("numel")(np.zeros((0, 3))) == 0.0


def test_logsumexp_infinite_rows_follow_softmax_limits():
    x = np.array([[1000.0, 1000.0, -np.inf], [-np.inf, -np.inf, -np.inf], [np.inf, 1.0, np.inf]])
    v = raw(B("logsumexp")(x, dim=1))
    assert v[0] == 1000.0 + np.log(2.0) and v[1] == -np.inf and v[2] == np.inf
    g = grad(lambda t: ops.sum_(B("logsumexp")(t, dim=1)), x)
    assert g.tolist() == [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def test_std_of_a_constant_row_has_gradient_zero():
    g = grad(lambda t: B("std")(t), np.array([2.0, 2.0, 2.0]))
    assert g.tolist() == [0.0, 0.0, 0.0]


# ---- keepdims and dim on the older reductions -------------------------------------------------------
def test_keepdims_and_dim_on_the_math_reductions():
    x = X3
    for name, ref in [("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min),
                      ("argmax", np.argmax), ("argmin", np.argmin)]:
        for d in (None, 0, 1, -1):
            for k in (False, True):
                got = raw(B(name)(x, dim=d, keepdims=k))
                np.testing.assert_allclose(got, ref(x, axis=d, keepdims=k), rtol=1e-13)
    b = x > 0
    for name, ref in [("any", np.any), ("all", np.all)]:
        for d in (None, 0, 2):
            for k in (False, True):
                got = raw(B(name)(b, dim=d, keepdims=k))
                assert np.array_equal(got, ref(b, axis=d, keepdims=k))
    loss, _ = weighted(lambda t: B("max")(t, dim=1, keepdims=True), x)
    np.testing.assert_allclose(grad(loss, x), fd_grad(loss, x), rtol=1e-6, atol=1e-7)


# ---- errors --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src, words", [
    ("cumsum([1, 2; 3, 4])", "needs dim="),
    ("cumprod(ones(2, 2, 2))", "needs dim="),
    ("var(3)", "no degrees of freedom"),
    ("std([1, 2], correction=2)", "no degrees of freedom"),
    ("var([1, 2], correction=-1)", "correction must be >= 0"),
    ("median(zeros(0))", "empty"),
    ("quantile([1, 2], 1.5)", "q must be a probability in [0, 1]"),
    ("quantile([1, 2], \"half\")", "q must be a number or a vector of numbers, got a string"),
    ("quantile([1, 2], 0.5, method=\"cubic\")", "method must be one of"),
    ("topk([1, 2], 3)", "k = 3 is larger than the 2 elements"),
    ("sort(3)", "needs a vector or matrix"),
    ("nonzero(3)", "needs a vector or matrix"),
    ("cov([1])", "at least 2 observations"),
    ("cov(ones(2, 2, 2))", "rows are observations"),
    ("sort([1, 2], dim=1)", "dim=1 is out of range"),
    ("prod([1, 2], dim=2)", "dim=2 is out of range"),
    ("max([1, 2], 3, keepdims=true)", "not both"),
    ("any([true, false], dim=1)", "dim=1 is out of range"),
])
def test_errors_are_clear(src, words):
    code, out = run_ml(src)
    assert code != 0 and words in out, out
    assert "Traceback" not in out and "numpy" not in out.lower()


def test_examples_read_as_in_the_guide():
    code, out = run_ml("x = [3, 1, 2]\nprint(x[argsort(x)], cumsum(x), median([4, 1, 3, 2]), var([1, 2, 3, 4]))\n"
                       "v, i = topk([1, 9, 2; 8, 3, 7], 1)\nprint(v, i)")
    assert code == 0 and out.splitlines() == ["[1, 2, 3] [3, 4, 6] 2.5 1.666667", "[9; 8] [1; 0]"], out


# ---- PyTorch ----------------------------------------------------------------------------------------------
TORCH = {
    "prod/dim1": lambda t, x: t.prod(x, dim=1),
    "prod/all": lambda t, x: t.prod(x),
    "prod/keepdims": lambda t, x: t.prod(x, dim=-1, keepdim=True),
    "cumsum/dim2": lambda t, x: t.cumsum(x, dim=2),
    "cumsum/dim0": lambda t, x: t.cumsum(x, dim=0),
    "cumprod/dim1": lambda t, x: t.cumprod(x, dim=1),
    "median/odd": lambda t, x: t.median(x, dim=1).values,          # odd counts: PyTorch's median agrees
    "var/dim2": lambda t, x: t.var(x, dim=2),
    "var/pop": lambda t, x: t.var(x, dim=1, correction=0, keepdim=True),
    "var/all": lambda t, x: t.var(x),
    "std/dim0": lambda t, x: t.std(x, dim=0),
    "std/pop": lambda t, x: t.std(x, dim=-1, correction=0),
    "logsumexp/dim1": lambda t, x: t.logsumexp(x, dim=1),
    "logsumexp/all": lambda t, x: t.logsumexp(x.reshape(-1), dim=0).reshape(1, 1, 1),
    "quantile/linear": lambda t, x: t.quantile(x, 0.3, dim=2),
    "quantile/vector": lambda t, x: t.quantile(x, t.tensor([0.1, 0.5, 0.9], dtype=x.dtype), dim=1),
    "quantile/midpoint": lambda t, x: t.quantile(x, 0.3, dim=2, interpolation="midpoint"),
    "quantile/all": lambda t, x: t.quantile(x, 0.75),
    "sort/dim1": lambda t, x: t.sort(x, dim=1, stable=True).values,
    "sort/desc": lambda t, x: t.sort(x, dim=-1, descending=True, stable=True).values,
    "topk": lambda t, x: t.topk(x, 2).values,
    "topk/dim0": lambda t, x: t.topk(x, 1, dim=0).values,
    "cov": lambda t, x: t.cov(x.T),
    "corrcoef": lambda t, x: t.corrcoef(x.T),
}


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (a reference only, never a dependency)")
@pytest.mark.parametrize("name", list(TORCH))
def test_values_and_gradients_against_pytorch(name):
    import torch
    call, x, _ = CASES[name]
    loss, R = weighted(call, x)
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ty = TORCH[name](torch, tx)
    (ty * torch.tensor(R, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(raw(first(call(x))), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad(loss, x), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


ZEROS = ("prod/dim1", "prod/all", "cumprod/dim1")


def with_zeros(x):
    x = x.copy()
    x[0, 1, 2] = x[1, 2, 3] = x[1, 0, 3] = 0.0       # one zero in a slice, two in another
    return x


def test_values_and_gradients_against_the_pytorch_fixture():
    """tests/reference/reductions.npz (make_reductions_reference.py, torch 2.13): every TORCH case and
    the zero cases, run here without torch."""
    with np.load(os.path.join(REFERENCE, "reductions.npz")) as data:
        keys = sorted({k.rsplit(".", 1)[0] for k in data.files})
        assert len(keys) == len(TORCH) + len(ZEROS)
        for key in keys:
            call = CASES[key.removesuffix("/zeros")][0]
            x, R = data[key + ".x"], data[key + ".R"]
            np.testing.assert_allclose(raw(first(call(x))), data[key + ".out"], rtol=1e-12, atol=1e-12, err_msg=key)
            g = grad(lambda v: ops.sum_(ops.mul(first(call(v)), R)), x)
            np.testing.assert_allclose(g, data[key + ".grad"], rtol=1e-10, atol=1e-12, err_msg=key)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_prod_and_cumprod_zeros_against_pytorch():
    import torch
    x = X3.copy()
    x[0, 1, 2] = x[1, 2, 3] = x[1, 0, 3] = 0.0
    for ours, theirs in [(lambda v: B("prod")(v, dim=1), lambda v: torch.prod(v, dim=1)),
                         (lambda v: B("cumprod")(v, dim=2), lambda v: torch.cumprod(v, dim=2))]:
        loss, R = weighted(ours, x)
        tx = torch.tensor(x, requires_grad=True)
        (theirs(tx) * torch.tensor(R)).sum().backward()
        np.testing.assert_allclose(grad(loss, x), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_take_along_and_put_along_are_each_others_vjp():
    idx = np.array([[2, 0, 0], [1, 1, 2]])
    x = RNG.standard_normal((2, 3))
    loss, _ = weighted(lambda v: ops.take_along(v, idx=idx, dim=1), x)
    np.testing.assert_allclose(grad(loss, x), fd_grad(loss, x), rtol=1e-7, atol=1e-9)
    g = RNG.standard_normal((2, 3))
    put = raw(ops.put_along(g, idx=idx, dim=1, shape=(2, 4)))
    assert put[0].tolist() == [g[0, 1] + g[0, 2], 0.0, g[0, 0], 0.0]      # repeats add up
    loss, _ = weighted(lambda v: ops.put_along(v, idx=idx, dim=1, shape=(2, 4)), g)
    np.testing.assert_allclose(grad(loss, g), fd_grad(loss, g), rtol=1e-7, atol=1e-9)


def test_cumprod_second_order_batched_with_zeros_and_a_long_slice_first_order():
    x = with_zeros(X3)
    x[0, 0, :2] = 0.0
    w = RNG.standard_normal(x.shape)
    call = lambda v: ops.sum_(ops.mul(B("cumprod")(v, dim=2), w))
    g_dot_w = lambda v: ops.sum_(ops.mul(value_and_grad_impl(PyInterp(), call, v)[1], w))
    np.testing.assert_allclose(grad(g_dot_w, x), fd_grad(g_dot_w, x, h=1e-5), rtol=1e-6, atol=1e-7)
    v = np.ones(20000)
    v[5] = 0.0                     # O(n) at first order (an [n, n] triangle would be 3 GB here)
    g = grad(lambda t: ops.sum_(B("cumprod")(t)), v)
    assert g[:7].tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 19995.0, 0.0] and not g[6:].any()


def test_float32_stays_float32():
    code, out = run_cli(["--dtype", "float32", "-c",
                         "x = [3.5, 1, 2; 4, 5, 6]\nprint(dtype(sort(x)), dtype(median(x, dim=1)), dtype(var(x, dim=0)), "
                         "dtype(cumprod(x, dim=1)), dtype(logsumexp(x, dim=1)), dtype(quantile(x, 0.3, dim=1)), "
                         "dtype(prod(x, dim=0)), dtype(grad(fn(v) -> prod(v), x)), dtype(topk(x, 2)[0]))"])
    assert code == 0 and out.split() == ["float32"] * 9, out
