"""Issue 15's silent wrong values (items 3, 4, 5, 7, 9), each with its right value, and the
property tests of their kinds: check_grad never hides a NaN, +inf logits take the limit, the
reductions that square stay finite wherever the result is representable, round with any digits,
layer_norm / rms_norm with eps = 0."""
from __future__ import annotations

import math
import warnings
from decimal import Decimal, ROUND_HALF_EVEN

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from tapeml.array import backend as B, norm_ops, ops
from tapeml.builtins.ml import attention as ml_attention
from tapeml.array.tape import raw
from fd import grad, on_device
from conftest import examples
from support import page_of_square_with_vjp, printed, run_ml, value_of

try:
    import torch               # a reference only, never a dependency
except ImportError:            # pragma: no cover
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed (reference only)")

INF = math.inf


# ---- item 2 and 3: x ^ 0 and check_grad ------------------------------------------------------------
def test_x_to_the_zero_has_gradient_zero_at_zero():
    assert value_of("grad(fn(x) -> x ^ 0, 0)") == 0.0
    assert value_of("grad(fn(x) -> sum(x ^ [0, 0]), [0, 1])").tolist() == [0.0, 0.0]
    assert printed("grad(fn(x) -> sum(x ^ [0, 0]), [0, 1])") == "[0, 0]"


def test_check_grad_of_x_to_the_zero_is_zero_because_the_gradient_is_right():
    assert value_of("check_grad(fn(x) -> x ^ 0, 0)") == 0.0


def test_check_grad_reports_nan_never_zero():
    # tape inf, finite differences nan (sqrt of a negative): a failure, not 0
    assert math.isnan(value_of("check_grad(fn(x) -> sqrt(x), 0)"))
    # one NaN among good elements is not hidden by Python's max
    assert math.isnan(value_of("check_grad(fn(x) -> sum(sqrt(x)), [0, 1, 4])"))
    assert value_of("check_grad(fn(x) -> sum(sqrt(x)), [0, 1, 4]) < 1e-6") is False
    # one leaf's nan does not leak into another leaf's error
    errs = value_of("check_grad(fn(w) -> sqrt(w.a) + sum(w.b ^ 2), {a = 0, b = [1, 2]})")
    assert math.isnan(errs.fields["a"]) and errs.fields["b"] < 1e-6


def test_grad_error_and_worse():
    from tapeml.builtins.autodiff import _worse, grad_error
    assert math.isnan(grad_error(math.nan, 1.0)) and math.isnan(grad_error(1.0, math.nan))
    assert grad_error(INF, INF) == 0.0 and grad_error(INF, 1.0) == INF and grad_error(INF, -INF) == INF
    assert grad_error(2.0, 1.0) == 0.5
    assert math.isnan(_worse(0.0, math.nan)) and math.isnan(_worse(math.nan, 0.0))
    assert math.isnan(_worse(math.nan, 5.0)) and _worse(1e-9, 1e-3) == 1e-3


def test_docs_gradient_gate_fails_on_nan():
    page, failures = page_of_square_with_vjp("nan_square", lambda g, x: ops.mul(g, math.nan))
    assert [f.where for f in failures] == ["nan_square.md gradient check (example 1)"]
    assert "nan" in failures[0].message
    assert "(FAILS)" in page


# ---- item 4: +inf logits -----------------------------------------------------------------------------
def test_softmax_of_plus_inf_logits():
    assert value_of("softmax([1 / 0, 1])").tolist() == [1.0, 0.0]            # was [nan, 0]
    assert value_of("softmax([1 / 0, 1 / 0, 1])").tolist() == [0.5, 0.5, 0.0]
    assert value_of("softmax([1 / 0, -1 / 0, 1 / 0, 7])").tolist() == [0.5, 0.0, 0.5, 0.0]
    m = value_of("softmax([1 / 0, 1, 2; 1, 2, 3], dim=-1)")
    assert m[0].tolist() == [1.0, 0.0, 0.0]
    e = np.exp(np.array([1.0, 2, 3]) - 3)
    np.testing.assert_allclose(m[1], e / e.sum(), rtol=1e-15)
    assert value_of("softmax([1 / 0, 1; 1 / 0, 1 / 0], dim=0)").tolist() == [[0.5, 0.0], [0.5, 1.0]]
    assert printed("softmax([1 / 0, 1])") == "[1, 0]"


def test_log_softmax_of_plus_inf_logits():
    v = value_of("log_softmax([1 / 0, 1 / 0, 1])")
    assert v[0] == v[1] == -math.log(2) and v[2] == -INF
    assert value_of("log_softmax([1 / 0, 1])").tolist() == [0.0, -INF]


def test_plus_inf_rows_have_gradient_zero_and_other_rows_their_own():
    x = np.array([[INF, INF, 1.0], [1.0, 2.0, 3.0]])
    R = np.array([[1.0, 2.0, 3.0], [1.0, -1.0, 2.0]])
    for prim in (ops.softmax, ops.log_softmax):
        g = grad(lambda t: ops.sum_(ops.mul(prim(t), R)), x)
        assert g[0].tolist() == [0.0, 0.0, 0.0]
        fin = grad(lambda t: ops.sum_(ops.mul(prim(t), R[1])), x[1])
        np.testing.assert_allclose(g[1], fin, rtol=1e-15)


def test_minus_inf_rows_keep_their_documented_behaviour():
    assert value_of("softmax([-1 / 0, -1 / 0])").tolist() == [0.0, 0.0]
    assert value_of("grad(fn(x) -> sum(softmax(x) * [1, 2]), [-1 / 0, -1 / 0])").tolist() == [0.0, 0.0]
    assert value_of("log_softmax([-1 / 0, -1 / 0])").tolist() == [-INF, -INF]
    assert value_of("softmax([-1 / 0, 0])").tolist() == [0.0, 1.0]
    q = np.array([[1.0, 0], [0, 1]])
    mask = np.array([[True, False], [False, False]])
    out = ml_attention.attention(q, q, np.array([[1.0, 2], [3, 4]]), mask=mask)
    assert out[1].tolist() == [0.0, 0.0]


@needs_torch
def test_plus_inf_softmax_is_pytorchs_value_for_large_equal_logits():
    # the rows' values are those of PyTorch on finite logits t, t, 1 for t large
    t = torch.tensor([1e5, 1e5, 1.0], dtype=torch.float64)
    ref = torch.softmax(t, -1).tolist()
    assert value_of("softmax([1 / 0, 1 / 0, 1])").tolist() == ref


def test_cross_entropy_of_plus_inf_logits():
    assert value_of("cross_entropy([1 / 0, 1 / 0, 1], 0)") == math.log(2)
    assert value_of("cross_entropy([1 / 0, 1], 0)") == 0.0
    assert value_of("cross_entropy([1 / 0, 1 / 0, 1], 2)") == INF        # the target is not among the +inf logits
    g = value_of("grad(fn(z) -> cross_entropy(z, [0, 2]), [1 / 0, 1, 2; 0, 1, 2])")
    assert g[0].tolist() == [0.0, 0.0, 0.0]
    z = np.array([0.0, 1, 2])
    p = np.exp(z - 2) / np.exp(z - 2).sum()
    np.testing.assert_allclose(g[1], (p - [0, 0, 1]) / 2, rtol=1e-15)
    assert value_of("grad(fn(z) -> cross_entropy(z, 2), [1 / 0, 1, 2])").tolist() == [0.0, 0.0, 0.0]


def sdpa_ref(q, k, v):
    s = q @ k.T / math.sqrt(q.shape[-1])
    out = np.zeros((q.shape[0], v.shape[1]))
    for i, row in enumerate(s):
        if np.isposinf(row).any():
            w = np.isposinf(row) / np.isposinf(row).sum()
        else:
            w = np.exp(row - row.max())
            w /= w.sum()
        out[i] = w @ v
    return out


def test_attention_whose_scores_overflow():
    a = np.array([[1e200, 0.0], [0.0, 1.0]])
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    out = value_of("scaled_dot_product_attention([1e200, 0; 0, 1], [1e200, 0; 0, 1], [1, 2; 3, 4])")
    assert out[0].tolist() == [1.0, 2.0]                     # was [nan, nan]
    np.testing.assert_allclose(out, sdpa_ref(a, a, v), rtol=1e-15)
    # two keys overflow for one query: they share its weight
    k = np.array([[1e200, 0.0], [1e200, 1.0], [0.0, 1.0]])
    v3 = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = ml_attention.attention(a, k, v3)
    assert out[0].tolist() == [2.0, 3.0]
    np.testing.assert_allclose(out, sdpa_ref(a, k, v3), rtol=1e-15)


@pytest.mark.numpy_only       # the primitive's NumPy forms called directly with NumPy arrays
def test_attention_overflow_gradients_on_every_path(monkeypatch):
    a = np.array([[1e200, 0.0], [0.0, 1.0]])
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    R = np.array([[1.0, -1.0], [2.0, 0.5]])
    grads = []
    for argnum in range(3):
        def f(t, argnum=argnum):
            args = [a, a, v]
            args[argnum] = t
            return ops.sum_(ops.mul(ml_attention.attention(*args), R))
        grads.append(grad(f, [a, a, v][argnum]))
    gq, gk, gv = grads
    assert gq[0].tolist() == [0.0, 0.0]                     # the +inf row's gradient is 0
    assert np.all(np.isfinite(gq)) and np.all(np.isfinite(gk)) and np.all(np.isfinite(gv))
    # v's gradient: p' R, with p = [1, 0; softmax([0, 1] / sqrt 2)]
    p1 = np.exp(np.array([0.0, 1.0]) / math.sqrt(2))
    p = np.array([[1.0, 0.0], p1 / p1.sum()])
    np.testing.assert_allclose(gv, p.T @ R, rtol=1e-14)
    # the recorded form (grad of grad forces it) agrees with the first-order form
    from tapeml.array.tape import leaf, new_level
    prim = ops.TABLE["scaled_dot_product_attention"]
    ans, res = prim.fwd(a, a, v, scale=1 / math.sqrt(2))
    plain = prim.pullback(R, ans, res, [True, True, True], a, a, v, scale=1 / math.sqrt(2))
    rec = prim.vjp(leaf(R, new_level()), ans, res, [True, True, True], a, a, v, scale=1 / math.sqrt(2))
    for x, y in zip(plain[:3], rec[:3]):
        np.testing.assert_allclose(x, raw(y), rtol=1e-12)
    # a bias gradient follows the same rule
    gb = grad(lambda b: ops.sum_(ops.mul(ops.sdpa(a, a, v, b, scale=1 / math.sqrt(2)), R)), np.zeros((2, 2)))
    assert gb[0].tolist() == [0.0, 0.0] and np.all(np.isfinite(gb))


def test_multi_head_attention_with_overflowing_scores_fused_and_per_head(monkeypatch):
    from tapeml.array.values import Record
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 4))
    x[0] *= 1e160                                          # row 0's scores with itself overflow
    eye = np.eye(4)
    heads = (Record({"wq": eye[:, :2], "wk": eye[:, :2], "wv": eye[:, :2], "wo": eye[:2]}),
             Record({"wq": eye[:, 2:], "wk": eye[:, 2:], "wv": eye[:, 2:], "wo": eye[2:]}))
    outs = []
    for fuse in (10 ** 9, 1):
        monkeypatch.setattr(ml_attention, "FUSE_MIN_ELEMENTS", fuse)
        y = ml_attention.mha(x, heads)
        g = grad(lambda t: ops.sum_(ml_attention.mha(t, heads)), x)
        assert not np.isnan(y).any() and not np.isnan(g).any()
        outs.append((y, g))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-12)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-12)


# ---- item 5: reductions that square ---------------------------------------------------------------------
def test_float32_layer_norm_of_large_values():
    v = value_of('layer_norm([1e20, 2e20, 3e20], ones(3), zeros(3))', 'set_dtype("float32")')
    assert v.dtype == np.float32
    np.testing.assert_allclose(v, [-1.2247449, 0.0, 1.2247449], rtol=1e-6)      # was [0, 0, 0]
    assert printed('layer_norm([1e20, 2e20, 3e20], ones(3), zeros(3))', 'set_dtype("float32")') == \
        "[-1.224745, 0, 1.224745]"


def ln_ref(x, eps):
    """layer_norm in exact rational arithmetic (Decimal at 60 digits), rounded once."""
    from decimal import getcontext
    getcontext().prec = 60
    d = [Decimal(float(t)) for t in x]
    n = len(d)
    mu = sum(d) / n
    var = sum((t - mu) ** 2 for t in d) / n + Decimal(eps)
    if var == 0:
        return np.zeros(n)
    return np.array([float((t - mu) / var.sqrt()) for t in d])


def rms_ref(x, eps):
    from decimal import getcontext
    getcontext().prec = 60
    d = [Decimal(float(t)) for t in x]
    ms = sum(t * t for t in d) / len(d) + Decimal(eps)
    if ms == 0:
        return np.zeros(len(d))
    return np.array([float(t / ms.sqrt()) for t in d])


@settings(max_examples=examples(150), deadline=None)
@given(st.sampled_from([np.float64, np.float32]), st.integers(-330, 330),
       st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=6),
       st.sampled_from([0.0, 1e-5]))
def test_norms_stay_finite_over_magnitudes(dtype, exp10, base, eps):
    """layer_norm and rms_norm of base * 10^exp10, in both dtypes, wherever that row is representable,
    agree with exact arithmetic (the row as stored), forward and backward."""
    fi = np.finfo(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = (np.array(base) * np.power(10.0, exp10)).astype(dtype)
    assume(np.all(np.isfinite(x)) and not (np.abs(x).max() < fi.tiny * 1e3 and eps == 0) and np.ptp(x) != 0)
    ops.set_dtype("float32" if dtype == np.float32 else "float64")
    tol = 5e-5 if dtype == np.float32 else 1e-12
    want = ln_ref(x, eps)
    got = ops.layer_norm(x, np.ones(len(x), dtype=dtype), np.zeros(len(x), dtype=dtype), eps=eps)
    assert got.dtype == dtype and np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))
    want = rms_ref(x, eps)
    got = ops.rms_norm(x, np.ones(len(x), dtype=dtype), eps=eps)
    assert got.dtype == dtype and np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))
    # the gradients stay finite and scale as 1/|x| (layer_norm is scale-invariant for eps = 0)
    R = np.linspace(-1, 1, len(x)).astype(dtype)
    for norm in (lambda t: ops.layer_norm(t, np.ones(len(x), dtype=dtype), None, eps=eps),
                 lambda t: ops.rms_norm(t, np.ones(len(x), dtype=dtype), eps=eps)):
        g = grad(lambda t: ops.sum_(ops.mul(norm(t), R)), x)
        assert not np.isnan(g).any()


@pytest.mark.parametrize("scale", [1e-300, 1e-150, 1e-20, 1.0, 1e20, 1e150, 1e300])
def test_norm_gradients_scale_exactly_with_the_row(scale):
    """eps = 0: layer_norm(c x) = layer_norm(x), so its gradient at c x is the gradient at x / c;
    with c a power of 2 nothing is rounded (float64), so it holds to the last bits."""
    c = 2.0 ** round(math.log2(scale))
    x = np.array([[1.0, -2.0, 0.5, 3.0], [0.25, 0.5, -1.0, 2.0]])
    R = np.array([[1.0, 2.0, -1.0, 0.5], [0.3, -0.2, 0.1, 2.0]])
    for norm in (lambda t: ops.layer_norm(t, np.ones(4), np.zeros(4), eps=0.0),
                 lambda t: ops.rms_norm(t, np.ones(4), eps=0.0)):
        at1 = grad(lambda t: ops.sum_(ops.mul(norm(t), R)), x)
        atc = grad(lambda t: ops.sum_(ops.mul(norm(t), R)), x * c)
        np.testing.assert_allclose(atc * c, at1, rtol=1e-12)
        np.testing.assert_allclose(norm(x * c), norm(x), rtol=1e-14)


def test_layer_norm_paths_agree_on_large_rows():
    """The forward, the statistics the recorded VJP computes with primitives, and both VJP forms on
    rows that need the scaling."""
    from tapeml.array.tape import leaf, new_level
    x = np.array([[1e200, 2e200, -3e200, 4e200], [1.0, 2.0, 3.0, 4.0], [5.0, 5.0, 5.0, 5.0]])
    gm, bt = np.array([1.0, 2.0, 0.5, 1.5]), np.array([0.1, 0.2, 0.3, 0.4])
    for eps in (1e-5, 0.0):
        prim = ops.TABLE["layer_norm"]
        ans, res = prim.fwd(x, gm, bt, eps=eps)
        # the statistics that the recorded VJP computes with primitives agree with the forward's
        rec_ans = raw(ops.add(ops.mul(norm_ops.ln_stats(leaf(x, new_level()), eps)[0], gm), bt))
        np.testing.assert_allclose(ans, rec_ans, rtol=1e-14)
        g = np.arange(12.0).reshape(3, 4)
        plain = prim.pullback(g, ans, res, [True, True, True], x, gm, bt, eps=eps)
        rec = prim.vjp(leaf(g, new_level()), ans, None, [True, True, True], x, gm, bt, eps=eps)
        for p_, r_ in zip(plain, rec):
            np.testing.assert_allclose(p_, raw(r_), rtol=1e-12, atol=1e-300)
        # the large row normalizes as the same row at scale 1 (eps is negligible against 1e400)
        np.testing.assert_allclose(ans[0], ops.layer_norm(x[0] / 1e200, gm, bt, eps=0.0), rtol=1e-14)
        assert ans[2].tolist() == bt.tolist()


@needs_torch
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3, 1e100, 1e200])
def test_norms_match_pytorch_in_float64(scale):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 5))
    gm, bt = rng.standard_normal(5), rng.standard_normal(5)
    R = rng.standard_normal((3, 5))
    tx = torch.tensor(x * scale if scale < 1e150 else x, requires_grad=True)   # torch overflows beyond 1e154
    ours = ops.layer_norm(x * scale, gm, bt, eps=1e-5)
    if scale < 1e150:
        ref = torch.nn.functional.layer_norm(tx, (5,), torch.tensor(gm), torch.tensor(bt), eps=1e-5)
        np.testing.assert_allclose(ours, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
        (ref * torch.tensor(R)).sum().backward()
        g = grad(lambda t: ops.sum_(ops.mul(ops.layer_norm(t, gm, bt, eps=1e-5), R)), x * scale)
        np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-9, atol=1e-12 / scale)
    else:
        # the row scaled by 1e200 normalizes as the row itself (eps is negligible)
        np.testing.assert_allclose(ours, ops.layer_norm(x, gm, bt, eps=0.0), rtol=1e-12)


def test_grad_norm_of_large_and_tiny_gradients():
    assert value_of("grad_norm({w = [3e200, 0], b = 4e200})") == pytest.approx(5e200, rel=1e-15)
    assert value_of("grad_norm({w = [3e-200, 0], b = 4e-200})") == pytest.approx(5e-200, rel=1e-15)
    assert value_of("grad_norm({w = [3, 0], b = 4})") == 5.0
    assert value_of("grad_norm({w = zeros(0), b = 0})") == 0.0
    assert value_of("grad_norm({w = [1 / 0, 1]})") == INF
    assert value_of('grad_norm({w = [3e20, 0], b = 4e20})', 'set_dtype("float32")') == pytest.approx(5e20, rel=1e-6)
    c = value_of('clip_grad_norm({w = [3e20, 0], b = 4e20}, 1)', 'set_dtype("float32")')
    np.testing.assert_allclose(c.fields["w"], [0.6, 0.0], rtol=1e-6)


# ---- item 7: round with any digits -----------------------------------------------------------------------
def test_round_with_far_digits():
    assert value_of("round(1.5, 400)") == 1.5                  # was nan
    assert value_of("round(2.5, -400)") == 0.0                 # was nan
    assert value_of("round([1.5, 2.5], 400)").tolist() == [1.5, 2.5]
    assert value_of("round([1.5, 2.5], -400)").tolist() == [0.0, 0.0]
    assert value_of("round(5e-324, 400)") == 5e-324 and value_of("round(5e-324, 323)") == 0.0
    assert value_of("round([5e-324, 1e-310], 323)").tolist() == [0.0, 1e-310]
    assert value_of("round(1e308, -308)") == 1e308 and value_of("round(1.7e308, -309)") == 0.0
    assert value_of("round(1 / 0, 3)") == INF and math.isnan(value_of("round(0 / 0, 3)"))
    assert value_of('round([1.5, 2.5], 400)', 'set_dtype("float32")').dtype == np.float32
    # a 0-d value (zeros()) with digits that take the Python-round path, and with digits in range
    assert value_of("round(zeros(), 55296)") == 0.0 and value_of("round(zeros() + 2.5, 30)") == 2.5
    assert value_of("round(zeros() + 1.25, 1)") == 1.2 and value_of("round(zeros() + 1.5, -400)") == 0.0


def py_round(x: float, d: int) -> float:
    return float(round(x, max(-400, min(1100, d)))) if math.isfinite(x) else x


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=5),
       st.integers(-30, 40))
def test_round_matches_python_round_float64(xs, d):
    x = np.array(xs)
    got = ops.round_(x, digits=d)
    want = np.array([py_round(t, d) for t in xs])
    assert np.array_equal(got, want), (xs, d, got, want)
    assert ops.round_(xs[0], digits=d) == want[0]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False).map(lambda t: round(t, 3)), min_size=1, max_size=5),
       st.integers(0, 4))
def test_round_of_decimal_ties_matches_decimal(xs, d):
    """Halves are rounded on the exact binary value, as decimal.Decimal(x).quantize does."""
    x = np.array(xs)
    got = ops.round_(x, digits=d)
    want = [float(Decimal(t).quantize(Decimal(1).scaleb(-d), rounding=ROUND_HALF_EVEN)) for t in xs]
    assert got.tolist() == want


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=5),
       st.integers(-40, 50))
def test_round_matches_python_round_float32(xs, d):
    x = np.array(xs, dtype=np.float32)
    got = ops.round_(x, digits=d)
    assert got.dtype == np.float32
    want = np.array([py_round(float(t), d) for t in x]).astype(np.float32)
    assert np.array_equal(got, want)


# ---- item 9: eps = 0 -------------------------------------------------------------------------------------
def test_eps_zero_is_accepted_and_zero_variance_rows_give_beta():
    v = value_of("layer_norm([5, 5, 5; 1, 2, 3], [1, 1, 1], [0, 1, 2], eps=0)")
    assert v[0].tolist() == [0.0, 1.0, 2.0]
    np.testing.assert_allclose(v[1], np.array([-1, 0, 1]) * math.sqrt(1.5) + [0, 1, 2], rtol=1e-15)
    # a constant row whose mean rounds (0.1 * 3 / 3 != 0.1) is still exactly beta
    assert value_of("layer_norm([0.1, 0.1, 0.1], [1, 1, 1], [7, 8, 9], eps=0)").tolist() == [7.0, 8.0, 9.0]
    assert value_of("rms_norm([0, 0; 3, 4], [1, 1], eps=0)").tolist()[0] == [0.0, 0.0]
    np.testing.assert_allclose(value_of("rms_norm([0, 0; 3, 4], [1, 1], eps=0)")[1], [0.6 * math.sqrt(2), 0.8 * math.sqrt(2)],
                               rtol=1e-15)
    assert value_of("grad(fn(x) -> sum(layer_norm(x, [1, 1, 1], [0, 0, 0], eps=0) * [1, 2, 4]), [0.1, 0.1, 0.1])").tolist() \
        == [0.0, 0.0, 0.0]
    assert value_of("grad(fn(x) -> sum(rms_norm(x, [1, 1, 1], eps=0) * [1, 2, 4]), [0, 0, 0])").tolist() == [0.0, 0.0, 0.0]
    g = value_of("grad(fn(b) -> sum(layer_norm([2, 2], [1, 1], b, eps=0) * [1, 3]), [0, 0])")
    assert g.tolist() == [1.0, 3.0]


@needs_torch
def test_eps_zero_matches_pytorch_where_the_variance_is_positive():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 6))
    gm, bt = rng.standard_normal(6), rng.standard_normal(6)
    ref = torch.nn.functional.layer_norm(torch.tensor(x), (6,), torch.tensor(gm), torch.tensor(bt), eps=0.0)
    np.testing.assert_allclose(ops.layer_norm(x, gm, bt, eps=0.0), ref.numpy(), rtol=1e-10, atol=1e-12)
    ref = torch.nn.functional.rms_norm(torch.tensor(x), (6,), torch.tensor(gm), eps=0.0)
    np.testing.assert_allclose(ops.rms_norm(x, gm, eps=0.0), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_negative_eps_is_refused_and_the_blocks_keep_eps_positive():
    code, out = run_ml("layer_norm([1, 2], [1, 1], [0, 0], eps=-1)")
    assert code == 1 and "ValueError" in out and "eps" in out
    code, out = run_ml("rms_norm([1, 2], [1, 1], eps=-1e-9)")
    assert code == 1 and "ValueError" in out
    code, out = run_ml("w = transformer_block_init(4, 1, seed=0)\ntransformer_block(ones(2, 4), w, eps=0)")
    assert code == 1 and "ValueError" in out and "eps" in out


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_float32_block_of_large_inputs_stays_finite(norm, norm_first):
    """The blocks' internal norms: a float32 input of size 1e20 (its squares overflow float32) gives
    a finite block output and gradient, as the same input scaled to 1 does (post-norm: the same output)."""
    from tapeml.builtins import REGISTRY
    ops.set_dtype("float32")
    w = REGISTRY["transformer_block_init"].fn(8, 2, 4, norm, True, False, 1e-5, 0)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    blk = REGISTRY["transformer_block"]
    run = lambda t: blk.fn(*blk.bind([on_device(t), w], {"norm_first": norm_first, "norm": norm}))
    big = B.to_numpy(run(x * np.float32(1e20)))
    assert big.dtype == np.float32 and np.all(np.isfinite(big))
    g = grad(lambda t: ops.sum_(run(t)), x * np.float32(1e20))
    assert not np.isnan(g).any()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rms_norm_paths_agree_on_rows_that_need_scaling(dtype):
    """rms_norm's forward (mean square in float64), the statistics its recorded VJP computes with
    primitives, and the VJP."""
    from tapeml.array.tape import leaf, new_level
    big = 1e200 if dtype == np.float64 else 1e30
    x = np.array([[big, -2 * big, 3 * big], [0.0, 0.0, 0.0], [1.0, 2.0, -2.0]], dtype=dtype)
    gm = np.array([1.0, 2.0, 0.5], dtype=dtype)
    for eps in (1e-5, 0.0):
        prim = ops.TABLE["rms_norm"]
        plain = prim.impl(x, gm, eps=eps)
        rec = raw(ops.mul(norm_ops.rms_stats(leaf(x, new_level()), eps)[0], gm))   # the recorded VJP's
        assert plain.dtype == dtype and rec.dtype == dtype
        tol = 1e-14 if dtype == np.float64 else 1e-6
        np.testing.assert_allclose(plain, rec, rtol=tol, atol=tol)
        np.testing.assert_allclose(plain[0], np.array([1, -2, 3]) / math.sqrt(14 / 3) * gm, rtol=tol)
        assert plain[1].tolist() == [0.0, 0.0, 0.0]
        g = grad(lambda t: ops.sum_(ops.mul(ops.rms_norm(t, gm, eps=eps), x[2])), x)
        assert not np.isnan(g).any()
        # a zero row: r = 1/sqrt(eps), xhat = 0, so dx = r g gamma; with eps = 0 the rule gives 0
        want = np.zeros(3) if eps == 0 else x[2].astype(np.float64) * gm / math.sqrt(eps)
        np.testing.assert_allclose(g[1], want, rtol=1e-6)


INF_BIAS = """q = [1, 0; 0, 1]
v = [1, 2; 3, 4]
print(scaled_dot_product_attention(q, q, v, bias=[-1/0, -1/0; 0, 0]))
print(scaled_dot_product_attention(q, q, v, bias=[-1/0, 0; 0, 0], mask=[true, false; true, true]))
print(grad(fn(b) -> sum(scaled_dot_product_attention(q, q, v, bias=b)), [-1/0, -1/0; 0, 0]))
print(scaled_dot_product_attention([1e200, 0; 0, 1], [1e200, 0; 0, 1], v, bias=[-1/0, 0; 0, 0]))
print(scaled_dot_product_attention([-1e200, 0; 0, 1], [1e200, 0; 0, 1], v, bias=[1/0, 0; 0, 0]))
"""


def test_an_infinite_bias_is_the_score_exactly(ml):
    """A row whose every key has a -inf bias (or is masked) attends to nothing: zeros, with gradient
    0, as softmax's all -inf rows and PyTorch's SDPA (it was NaN: the -inf bias was taken for an
    overflowed score); and an infinite bias wins over a product that overflowed to the other
    infinity (1e400 - inf is -inf, not NaN)."""
    code, out = ml(INF_BIAS)
    assert code == 0, out
    assert out.split("\n")[:5] == ["[0, 0; 2.339523, 3.339523]", "[0, 0; 2.339523, 3.339523]",
                                   "[0, 0; -0.8847241, 0.8847241]", "[3, 4; 2.339523, 3.339523]",
                                   "[1, 2; 2.339523, 3.339523]"]
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    q = torch.eye(2, dtype=torch.float64)
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    ref = F.scaled_dot_product_attention(q, q, v, attn_mask=torch.tensor([[-math.inf, -math.inf], [0.0, 0.0]],
                                                                          dtype=torch.float64))
    assert ref[0].tolist() == [0.0, 0.0]
    assert abs(ref[1] - torch.tensor([2.339523, 3.339523], dtype=torch.float64)).max() < 1e-6
