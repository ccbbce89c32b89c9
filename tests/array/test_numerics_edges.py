"""Issue 25 item 4, silent values at the edges: each wrong value with its right one, and the
property tests of their kinds.

- attention whose scores q k^T * scale leave the float range (1e155 in float64, 1e20 in float32)
  takes the limit of the true scores: the largest wins, as exact arithmetic says;
- a NaN in a row of rms_norm (and its siblings) makes the whole row NaN, as in PyTorch;
- the reductions that square (std, norm, cosine_similarity, corrcoef, batch_norm, grad_norm,
  atan2's gradient) give the value and the gradient of exact arithmetic wherever these are
  representable, in both float types; mean, var and cov no longer overflow in a finite sum.

The right values come from exact arithmetic (fractions.Fraction, decimal square roots) or PyTorch
in float64; a float32 result is the exact value rounded to float32, within a few ulps.
"""
from __future__ import annotations

import math
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from tapeml.array import backend as B, ops
from tapeml.builtins.ml import attention as ml_attention
from tapeml.array.tape import leaf, new_level, raw
from tapeml.array.values import Record
from fd import grad
from support import output_of, value_of

try:
    import torch               # a reference only, never a dependency
except ImportError:            # pragma: no cover
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed (reference only)")

NAN, INF = math.nan, math.inf
getcontext().prec = 80


# ---- exact references ----------------------------------------------------------------------------
def fr(x) -> list:
    return [Fraction(float(v)) for v in np.ravel(x)]


def dsqrt(f: Fraction) -> Decimal:
    return (Decimal(f.numerator) / Decimal(f.denominator)).sqrt()


def exact_var(xs, correction=1) -> Fraction:
    xs = fr(xs)
    m = sum(xs) / len(xs)
    return sum((v - m) ** 2 for v in xs) / (len(xs) - correction)


def exact_std(xs, correction=1) -> float:
    return float(dsqrt(exact_var(xs, correction)))


def exact_std_grad(xs, correction=1) -> np.ndarray:
    """d std / d x_i = (x_i - mean) / ((n - correction) std)"""
    f = fr(xs)
    m = sum(f) / len(f)
    s = dsqrt(exact_var(xs, correction))
    return np.array([float(Decimal((v - m).numerator) / Decimal((v - m).denominator) / (len(f) - correction) / s)
                     for v in f])


def exact_norm(xs, p=2) -> float:
    f = fr(xs)
    if p == 2:
        return float(dsqrt(sum(v * v for v in f)))
    total = sum(abs(v) ** p for v in f)
    return float((Decimal(total.numerator) / Decimal(total.denominator)) ** (Decimal(1) / Decimal(p)))


def exact_norm_grad(xs) -> np.ndarray:
    f = fr(xs)
    n = dsqrt(sum(v * v for v in f))
    return np.array([float(Decimal(v.numerator) / Decimal(v.denominator) / n) for v in f])


def exact_cosine(a, b) -> float:
    fa, fb = fr(a), fr(b)
    dot = sum(x * y for x, y in zip(fa, fb))
    den = dsqrt(sum(x * x for x in fa)) * dsqrt(sum(y * y for y in fb))
    return float(Decimal(dot.numerator) / Decimal(dot.denominator) / den)


def close32(got, want, ulps=4, of_largest=False):
    """A float32 result against the exact value rounded to float32, within a few ulps (of each
    element, or of the largest |want| with of_largest)."""
    got = np.asarray(got, dtype=np.float32)
    want32 = np.asarray(want, dtype=np.float64).astype(np.float32)
    tol = ulps * np.spacing(np.abs(want32).max() if of_largest else np.abs(want32))
    assert np.all(np.abs(got.astype(np.float64) - want32.astype(np.float64)) <= tol), (got, want32)


# ==== 1. attention whose scores leave the float range =====================================================
def round_bits(x: Fraction, bits: int) -> Fraction:
    """x rounded to `bits` significant bits (half to even) with no limit on the exponent: a float
    type without overflow or underflow."""
    if x == 0:
        return x
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    unit = Fraction(2) ** (e - bits + 1)
    return (1 if x > 0 else -1) * round(a / unit) * unit


def exact_sdpa(q, k, v, scale, bias=None, allowed=None, bits=53):
    """softmax(q k^T * scale + bias) v from the scores of a float type of `bits` bits without an
    exponent limit (q k^T is exact for the inputs used here; scaling and the bias round once
    each), in exact arithmetic: each row shifted by its exact maximum, so a shift beyond the float
    range gives weight exactly 0. Returns (out, p)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    sc = Fraction(float(np.asarray(scale, dtype=np.float32 if bits == 24 else np.float64)))
    out, ps = [], []
    for i in range(q.shape[0]):
        s = []
        for j in range(k.shape[0]):
            if allowed is not None and not allowed[i, j]:
                s.append(None)
                continue
            t = round_bits(sum(Fraction(a) * Fraction(b) for a, b in zip(q[i], k[j])) * sc, bits)
            if bias is not None:
                t = round_bits(t + Fraction(float(bias[i, j])), bits)
            s.append(t)
        live = [t for t in s if t is not None]
        m = max(live)
        w = np.array([0.0 if t is None or t - m < -10 ** 4 else math.exp(float(t - m)) for t in s])
        p = w / w.sum()
        ps.append(p)
        out.append(p @ v)
    return np.array(out), np.array(ps)


def test_attention_whose_scores_overflow_takes_the_limit():
    out = value_of("scaled_dot_product_attention([1e200, 0;], [1e200, 0; 2e200, 0], [1, 2; 3, 4])")
    assert out.tolist() == [[3.0, 4.0]]                      # was [2, 3]: the two +inf scores shared
    # both scores overflow to -inf: the larger (less negative) one wins, not "every key masked"
    out = value_of("scaled_dot_product_attention([1e200, 0;], [-1e200, 0; -2e200, 0], [1, 2; 3, 4])")
    assert out.tolist() == [[1.0, 2.0]]                      # was [0, 0]
    # inf - inf inside one dot product: the true score is 0, and the third key's 2e200 wins
    out = value_of("scaled_dot_product_attention([1e200, 1e200;], [1e200, -1e200; 0, 0; 1, 2e200], [1, 2; 3, 4; 5, 6])")
    assert out.tolist() == [[5.0, 6.0]]
    # equal overflowing scores still share the row (q's 0 hides the keys' second entries)
    out = value_of("scaled_dot_product_attention([1e200, 0;], [1e200, 0; 1e200, 5], [1, 2; 3, 4])")
    assert out.tolist() == [[2.0, 3.0]]


@needs_torch
def test_pytorch_gives_nan_where_the_limit_is_plain():
    """PyTorch float64 answers NaN (inf - inf in its softmax); the right value is the limit."""
    q = torch.tensor([[1e200, 0.0]], dtype=torch.float64)
    k = torch.tensor([[1e200, 0.0], [2e200, 0.0]], dtype=torch.float64)
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    assert torch.isnan(torch.nn.functional.scaled_dot_product_attention(q, k, v)).all()
    # the same keys scaled into range give the limit, as tapeml does at 1e200
    ref = torch.nn.functional.scaled_dot_product_attention(q * 1e-190, k * 1e-190, v)
    assert ref.tolist() == value_of("scaled_dot_product_attention([1e200, 0;], [1e200, 0; 2e200, 0], [1, 2; 3, 4])").tolist()


@pytest.mark.parametrize("dtype, exps", [("float64", (0, 300, 500, 520, 600, 1000)), ("float32", (0, 30, 60, 66, 100))])
def test_attention_matches_exact_scores_at_every_magnitude(dtype, exps):
    """Small whole numbers times 2^e: every score is exact in the float type's precision, so the
    weights are exact arithmetic's (ties exact ties) at any magnitude; from 2^512 (2^64 in float32)
    the scores are beyond the float range."""
    rng = np.random.default_rng(25)
    dt = np.float32 if dtype == "float32" else np.float64
    for e in exps:
        for trial in range(4):
            q = np.ldexp(rng.integers(-4, 5, (3, 2)), e).astype(dt)
            k = np.ldexp(rng.integers(-4, 5, (4, 2)), e).astype(dt)
            v = rng.standard_normal((4, 2)).astype(dt)
            bias = rng.standard_normal((3, 4)).astype(dt)
            mask = np.array([[1, 1, 0, 1], [1, 1, 1, 1], [0, 1, 1, 1]], dtype=bool)
            ops.set_dtype(dtype)
            for b, m in ((None, None), (bias, None), (None, mask), (bias, mask)):
                got = ops.sdpa(q, k, v, b, mask=m, scale=0.5)
                want, _ = exact_sdpa(q, k, v, 0.5, b, m, 24 if dtype == "float32" else 53)
                assert got.dtype == dt
                np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12,
                                           atol=1e-6 if dtype == "float32" else 1e-13, err_msg=f"{e} {trial}")
                w = ops.attention_weights(q, k, b, mask=m, scale=0.5)
                np.testing.assert_allclose(w, exact_sdpa(q, k, v, 0.5, b, m, 24 if dtype == "float32" else 53)[1],
                                           atol=1e-6 if dtype == "float32" else 1e-13)
            ops.set_dtype("float64")


def test_float32_attention_at_activations_of_1e30():
    out = value_of("scaled_dot_product_attention([1e30, 0;], [1e30, 0; 2e30, 0], [1, 2; 3, 4])", 'set_dtype("float32")')
    assert out.dtype == np.float32 and out.tolist() == [[3.0, 4.0]]


def test_a_true_inf_bias_beats_an_overflowing_score_and_a_minus_inf_bias_masks_it():
    q, k = np.array([[1e200, 0.0]]), np.array([[1e200, 0.0], [2e200, 0.0], [0.0, 1.0]])
    v = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert ops.sdpa(q, k, v, np.array([[0.0, 0.0, INF]]), scale=1.0).tolist() == [[5.0, 6.0]]
    assert ops.sdpa(q, k, v, np.array([[0.0, -INF, 0.0]]), scale=1.0).tolist() == [[1.0, 2.0]]
    # a NaN the operands hold stays NaN
    assert np.isnan(ops.sdpa(q, k, v, np.array([[0.0, NAN, 0.0]]), scale=1.0)).all()


def score_grads_exact(q, k, v, R, scale, p):
    """The gradient of sum(sdpa(q, k, v) * R) to q, k, v from the exact weights p: softmax's VJP
    ds = p (dp - rowsum(p dp)), dp = R v^T."""
    dp = R @ v.T
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    return ds @ k * scale, ds.T @ q * scale, p.T @ R


@pytest.mark.numpy_only       # the primitive's NumPy forms called directly with NumPy arrays
def test_attention_gradients_at_overflowing_scores_on_every_path():
    """Rows whose weights are the limit get gradient 0 to q and k (e^-(1e400) is 0), rows with ties or
    ordinary scores their exact gradient, on the first-order path, the general one (bias tracked)
    and the recorded one (grad of grad)."""
    q = np.array([[1e200, 0.0], [0.0, 1.0], [1e200, 1e200]])
    k = np.array([[1e200, 0.0], [2e200, 1e200], [2e200, -1e200], [0.0, 1.0]])
    v = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    R = np.array([[1.0, -1.0], [2.0, 0.5], [-1.0, 3.0]])
    scale = 0.5
    _, p = exact_sdpa(q, k, v, scale)
    assert p[0].tolist() == [0.0, 0.5, 0.5, 0.0]                 # a tie of two overflowing keys
    assert p[2].tolist() == [0.0, 1.0, 0.0, 0.0]                 # 3e400 beats 1e400
    want = score_grads_exact(q, k, v, R, scale, p)
    got = [grad(lambda t, i=i: ops.sum_(ops.mul(ops.sdpa(*[t if j == i else x for j, x in enumerate((q, k, v))],
                                                         scale=scale), R)), (q, k, v)[i]) for i in range(3)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=0)
    assert got[0][2].tolist() == [0.0, 0.0]                      # the one-hot row: exactly 0
    prim = ops.TABLE["scaled_dot_product_attention"]
    ans, res = prim.fwd(q, k, v, scale=scale)
    plain = prim.pullback(R, ans, res, [True, True, True], q, k, v, scale=scale)
    general = prim.vjp(R, ans, res, [True, True, True], q, k, v, scale=scale)
    recorded = prim.vjp(leaf(R, new_level()), ans, None, [True, True, True], q, k, v, scale=scale)
    for a, b, c, w in zip(plain, general, recorded, want):
        np.testing.assert_allclose(a, w, rtol=1e-12)
        np.testing.assert_allclose(raw(b), w, rtol=1e-12)
        np.testing.assert_allclose(raw(c), w, rtol=1e-12)
    gb = grad(lambda b: ops.sum_(ops.mul(ops.sdpa(q, k, v, b, scale=scale), R)), np.zeros((3, 4)))
    dp = R @ v.T
    np.testing.assert_allclose(gb, p * (dp - (p * dp).sum(axis=-1, keepdims=True)), rtol=1e-12, atol=1e-300)
    # the weights' own primitive, as attention dropout and return_weights use it
    Rw = np.arange(12.0).reshape(3, 4)
    gw = grad(lambda t: ops.sum_(ops.mul(ops.attention_weights(t, k, None, scale=scale), Rw)), q)
    ds = p * (Rw - (p * Rw).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(gw, ds @ k * scale, rtol=1e-12)


def test_grad_of_grad_through_overflowing_attention_is_finite():
    h = value_of("hessian(fn(q) -> sum(scaled_dot_product_attention(q, [1e200, 0; 2e200, 0], [1, 2; 3, 4])), [1e200, 0;])")
    assert np.all(h == 0)                   # a one-hot limit: flat in q


def test_multi_head_attention_paths_agree_on_overflowing_scores(monkeypatch):
    """mha runs sdpa (fused or per head) or attention_weights (return_weights, attention dropout):
    every path gives the limit, and the same gradient (x's third row has a gradient of 1e400 = inf
    in truth: its normal weights move values of 1e200 at a rate of 1e200)."""
    x = np.array([[1e200, 0.0, 1.0, 0.0], [2e200, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
    eye = np.eye(4)
    heads = (Record({"wq": eye[:, :2], "wk": eye[:, :2], "wv": eye[:, :2], "wo": eye[:2]}),
             Record({"wq": eye[:, 2:], "wk": eye[:, 2:], "wv": eye[:, 2:], "wo": eye[2:]}))
    want0 = exact_sdpa(x[:, :2], x[:, :2], x[:, :2], 1 / math.sqrt(2))[0]
    want1 = exact_sdpa(x[:, 2:], x[:, 2:], x[:, 2:], 1 / math.sqrt(2))[0]
    grads = []
    for how in ("fused", "per head", "weights", "dropout"):
        monkeypatch.setattr(ml_attention, "FUSE_MIN_ELEMENTS", 1 if how == "fused" else 10 ** 9)
        kw = {"weights": True} if how == "weights" else {"p": 1e-300, "training": True} if how == "dropout" else {}

        def f(t):
            y = ml_attention.mha(t, heads, **kw)
            return y[0] if how == "weights" else y
        np.testing.assert_allclose(f(x), np.concatenate([want0, want1], axis=1), rtol=1e-12, err_msg=how)
        grads.append(grad(lambda t: ops.sum_(f(t)), x))
        assert not np.isnan(grads[-1]).any(), how
    for g in grads[1:]:
        np.testing.assert_allclose(g, grads[0], rtol=1e-12)


@pytest.mark.parametrize("size", [1e4, 1e8, 1e12, 1e150])
def test_attention_rows_saturated_inside_the_float_range_give_q_and_k_exactly_zero(size):
    """Scores apart by more than ~745 (inside the float range) make each row's weights exactly
    one-hot: the exact gradient to q and k is 0, as PyTorch's softmax-then-matmul gives. The VJP's
    shortcut rowsum(g * out) for softmax's correction rounds in another order than g v^T and left
    eps |g| |v| |k| scale there: 1e-4 at 1e4, 1e19 at 1e12, inf at 1e150 (and the torch backend's
    fused kernel the same): such rows take rowsum(dp * p), exact on them."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((5, 4)) * size for _ in range(3))
    v = v[:, :2]                           # more keys than value features: the shortcut's case
    R = rng.standard_normal((5, 2))
    scale = 0.5
    s = q @ k.T * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    assert np.all(p.max(axis=-1) == 1.0) and np.all(p.sum(axis=-1) == 1.0)     # one-hot rows
    for i, want in ((0, np.zeros_like(q)), (1, np.zeros_like(k)), (2, p.T @ R)):
        def f(t, i=i):
            args = [q, k, v]
            args[i] = t
            return ops.sum_(ops.mul(ops.sdpa(*args, scale=scale), R))
        np.testing.assert_array_equal(grad(f, (q, k, v)[i]), want)
    if torch is not None:                  # PyTorch's math form (softmax, then the product)
        tq = torch.tensor(q, requires_grad=True)
        out = torch.softmax(tq @ torch.tensor(k).T * scale, dim=-1) @ torch.tensor(v)
        (out * torch.tensor(R)).sum().backward()
        assert torch.all(tq.grad == 0)


def test_multi_head_attention_with_saturated_rows_matches_its_weights_path():
    """The joined heads (sdpa) and return_weights (attention_weights) agree where every row's
    weights are one-hot: no gradient reaches wq (PyTorch gives 0), x's is the same on both."""
    src = """
seed(0)
h = transformer_block_init(8, 2, seed=0).heads
R = randn(5, 8)
x = randn(5, 8) * {size}
g = grad(fn(hh) -> sum(multi_head_attention(x, hh, 2) * R), h)
gw = grad(fn(hh) -> sum(multi_head_attention(x, hh, 2, return_weights=true)[0] * R), h)
gx = grad(fn(t) -> sum(multi_head_attention(t, h, 2) * R), x)
gxw = grad(fn(t) -> sum(multi_head_attention(t, h, 2, return_weights=true)[0] * R), x)
print(max(abs(g[0].wq)), max(abs(g[1].wk)), max(abs(gw[0].wq)), max(abs(gx - gxw)) / max(abs(gxw)) < 1e-12)
"""
    for size in ("1e4", "1e8", "1e12", "1e150"):
        assert output_of(src.format(size=size)) == "0 0 0 true\n", size


# ==== 2. a NaN is never hidden ======================================================================
@needs_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("eps", [1e-5, 0.0])
def test_rms_norm_of_a_nan_row_is_nan_with_nan_gradient(dtype, eps):
    x = np.array([[NAN, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0]])
    ops.set_dtype(dtype)
    dt = np.float32 if dtype == "float32" else np.float64
    xs = x.astype(dt)
    y = ops.rms_norm(xs, np.ones(4, dt), eps=eps)
    g = grad(lambda t: ops.sum_(ops.mul(ops.rms_norm(t, np.ones(4, dt), eps=eps), np.arange(8.0).reshape(2, 4))), xs)
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ty = torch.nn.functional.rms_norm(tx, (4,), torch.ones(4, dtype=torch.float64), eps=eps)
    (ty * torch.arange(8.0, dtype=torch.float64).reshape(2, 4)).sum().backward()
    assert np.isnan(y[0]).all() and np.isnan(g[0]).all()        # was [nan, 0, 0, 0] and [0, 0, 0, 0]
    assert torch.isnan(ty[0]).all() and torch.isnan(tx.grad[0]).all()
    np.testing.assert_allclose(y[1], ty[1].detach().numpy(), rtol=1e-6 if dtype == "float32" else 1e-14)
    tg = tx.grad[1].numpy()       # one entry is a cancellation of O(1) terms: an absolute tolerance
    np.testing.assert_allclose(g[1], tg, rtol=0, atol=(1e-6 if dtype == "float32" else 1e-14) * np.abs(tg).max())


NAN_ROWS = {
    "rms_norm": "rms_norm(x, [1, 1, 1, 1])",
    "rms_norm/eps=0": "rms_norm(x, [1, 1, 1, 1], eps=0)",
    "layer_norm": "layer_norm(x, [1, 1, 1, 1], [0, 0, 0, 0])",
    "layer_norm/eps=0": "layer_norm(x, [1, 1, 1, 1], [0, 0, 0, 0], eps=0)",
    "softmax": "softmax(x)",
    "log_softmax": "log_softmax(x)",
    "logsumexp": "logsumexp(x, dim=1)",
    "std": "std(x, dim=1)",
    "var": "var(x, dim=1)",
    "mean": "mean(x, dim=1)",
    "norm": "norm(x, dim=1)",
    "norm/p=3": "norm(x, 3, dim=1)",
    "max": "max(x, dim=1)",
    "cosine_similarity": "cosine_similarity(x, [1, 2, 3, 4])",
    "attention": "scaled_dot_product_attention(x, [1, 1, 1, 1; 1, -1, 2, 0.5], [1, 2; 3, 4])",
    "cross_entropy": "[cross_entropy(x[0, :], 1), cross_entropy(x[1, :], 1)]",
}


@pytest.mark.parametrize("name", sorted(NAN_ROWS))
@pytest.mark.parametrize("big", [1.0, 1e200])
def test_a_nan_entry_makes_its_row_nan_value_and_gradient(name, big):
    """The sibling sweep: each row-wise reduction with a NaN in row 0 (next to an ordinary or a huge
    entry, which takes the rescaled paths) is NaN in row 0, value and gradient, and row 1 is untouched."""
    setup = f"x = [0 / 0, {big}, 2, 3; 1, 2, 3, 4]"
    y = np.asarray(value_of(NAN_ROWS[name], setup), dtype=np.float64)
    y = y.reshape(2, -1)
    assert np.isnan(y[0]).all(), y
    assert not np.isnan(y[1]).any(), y
    g = value_of(f"grad(fn(x) -> sum({NAN_ROWS[name]} * ones(size({NAN_ROWS[name]}))), x)", setup)
    if name == "mean":          # linear: its gradient 1/n does not depend on x (PyTorch's too)
        assert g.tolist() == [[0.25] * 4] * 2
    else:
        assert np.isnan(g[0]).all() and not np.isnan(g[1]).any(), g


def test_batch_norm_and_corrcoef_with_a_nan_in_one_feature():
    y, rm, rv = value_of("batch_norm([0 / 0, 1; 2e200, 3; 4, 5], [1, 1], [0, 0], [0, 0], [1, 1])")
    assert np.isnan(y[:, 0]).all() and not np.isnan(y[:, 1]).any()
    assert math.isnan(rm[0]) and math.isnan(rv[0])
    r = value_of("corrcoef([0 / 0, 1e200, 1; 2, 3e200, 3; 4, 4e200, 7])")
    assert np.isnan(r[0]).all() and np.isnan(r[:, 0]).all() and not np.isnan(r[1:, 1:]).any()


# ==== 3. the reductions that square ===================================================================
def test_the_issue_values():
    big32 = value_of("std([1e20, 2e20, 3e20, 4e20])", 'set_dtype("float32")')
    assert big32 != INF
    close32(big32, exact_std(np.float32([1e20, 2e20, 3e20, 4e20])))                      # was inf
    g32 = value_of("grad(std, [1e20, 2e20, 3e20, 4e20])", 'set_dtype("float32")')
    close32(g32, exact_std_grad(np.float32([1e20, 2e20, 3e20, 4e20])))                    # was 0
    tiny32 = value_of("std([1e-30, 2e-30, 3e-30, 4e-30])", 'set_dtype("float32")')
    close32(tiny32, exact_std(np.float32([1e-30, 2e-30, 3e-30, 4e-30])))                  # was 0
    ops.set_dtype("float64")
    x = [1e-170, 2e-170, 3e-170, 4e-170]
    np.testing.assert_allclose(value_of(f"grad(std, {x})"), exact_std_grad(x), rtol=1e-15)      # was nan
    assert value_of(f"std({x})") == pytest.approx(exact_std(x), rel=1e-15)
    # a full reduction is a number on the rescaled path too, as on the plain one
    assert all(type(value_of(e)) is float for e in (f"std({x})", "norm([1e200, 2e200])", "grad_norm([1e200, 1])",
                                               "std([1, 2])", "norm([1, 2])"))
    np.testing.assert_allclose(value_of("grad(norm, [1e-200, -2e-200])"), [1 / math.sqrt(5), -2 / math.sqrt(5)],
                               rtol=1e-15)                                                  # was [inf, -inf]


@needs_torch
def test_pytorch_float32_std_is_the_rounded_float64_value_as_tapeml():
    x = torch.tensor([1e20, 2e20, 3e20, 4e20], dtype=torch.float32, requires_grad=True)
    torch.std(x).backward()
    close32(value_of("std([1e20, 2e20, 3e20, 4e20])", 'set_dtype("float32")'), torch.std(x.detach().double()).item())
    close32(value_of("grad(std, [1e20, 2e20, 3e20, 4e20])", 'set_dtype("float32")'), x.grad.double().numpy())


MAGNITUDES = {"float64": [-300, -200, -170, -160, -100, 0, 100, 160, 200, 300],
              "float32": [-40, -30, -20, -10, 0, 10, 20, 30, 37]}


def sample(rng, exp10, dtype, n=5):
    x = (rng.standard_normal(n) + 0.1) * 10.0 ** exp10
    return x.astype(np.float32 if dtype == "float32" else np.float64)


def check_value(dtype, got, want, rel64=1e-14):
    """float32: within 8 ulps of the largest |want| (a gradient entry that is a difference of larger
    terms carries their rounding); float64: a relative tolerance."""
    if dtype == "float32":
        close32(got, want, ulps=8, of_largest=True)
    else:
        np.testing.assert_allclose(got, want, rtol=rel64, atol=0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_std_var_and_norm_over_magnitudes_match_exact_arithmetic(dtype):
    rng = np.random.default_rng(7)
    for e in MAGNITUDES[dtype]:
        x = sample(rng, e, dtype)
        ops.set_dtype(dtype)
        want_std, want_norm = exact_std(x), exact_norm(x)
        if normal(dtype, want_std):
            check_value(dtype, ev_np("std", x), want_std)
            check_value(dtype, grad(lambda t: std_of(t), x), exact_std_grad(x), 1e-13)
        if normal(dtype, want_norm):
            check_value(dtype, ev_np("norm", x), want_norm)
            check_value(dtype, grad(lambda t: norm_of(t), x), exact_norm_grad(x), 1e-13)
            check_value(dtype, ev_np("norm3", x), exact_norm(x, 3), 1e-13)
        ops.set_dtype("float64")


def normal(dtype, v) -> bool:
    """v a safe normal number of the float type (not within a machine epsilon of the underflow)."""
    fi = np.finfo(np.float32 if dtype == "float32" else np.float64)
    return float(fi.tiny) / float(fi.eps) < abs(v) < float(fi.max) / 4


def std_of(t):
    from tapeml.builtins.reductions import std
    return std(t, None, 1, False)


def norm_of(t, p=None, dim=None):
    from tapeml.builtins.linalg import norm_
    return norm_(t, p, dim, False)


def ev_np(name, x):
    if name == "std":
        return raw(std_of(x))
    if name == "norm":
        return raw(norm_of(x))
    return raw(norm_of(x, 3.0))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=6).filter(lambda v: max(map(abs, v)) > 1e-3),
       st.integers(-1000, 1000))
@example(xs=[85.1544702795818] * 3, k=-493)    # the rescaled path, where torch's sqrt was 1 ulp off
def test_std_and_norm_scale_exactly_with_a_power_of_two(xs, k):
    """std and norm are homogeneous: on x 2^k they are exactly 2^k times their value on x (the
    rescaling works on the same x 2^-E either way) and their gradients are unchanged, as long as
    the result is a normal number."""
    x = np.array(xs)
    xk = np.ldexp(x, k)
    if not np.array_equal(np.ldexp(xk, -k), x):
        return                    # x 2^k is not exact (a subnormal): not the same input scaled
    for f in (std_of, norm_of):
        a, b = raw(f(x)), raw(f(xk))
        want = math.ldexp(a, k)
        if a == 0 or not (1e-300 < abs(want) < 1e300):
            continue
        assert b == want
        if B.current() is B.NUMPY:
            np.testing.assert_array_equal(grad(f, xk), grad(f, x))
        else:   # the plain path's norm is a Python float (math.sqrt), the rescaled one a tensor's, and
            # PyTorch's float64 sqrt is not correctly rounded (here 8 in 1000 values 1 ulp off NumPy's)
            np.testing.assert_allclose(B.to_numpy(grad(f, xk)), B.to_numpy(grad(f, x)), rtol=4.5e-16, atol=0)


@pytest.mark.numpy_only       # NumPy's own sums to the last bit (torch sums in another order: 1e-15 apart)
@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=8))
def test_normal_range_results_are_the_plain_formulas_bit_for_bit(xs):
    """Where nothing overflows or underflows, std, var, mean and norm are the plain formulas, to the
    last bit (the goldens' outputs do not move)."""
    x = np.array(xs)
    n = len(xs)
    c = x - x.sum(keepdims=True) / n
    var = (c * c).sum() / (n - 1)
    if not ((x == x[0]).all() or 1e-290 < var < 1e300):
        return
    assert raw(std_of(x)) == math.sqrt(var)
    assert value_of(f"var({x.tolist()})") == var
    assert value_of(f"mean({x.tolist()})") == x.sum() / n
    s = (x * x).sum()
    if (x == 0).all() or 1e-290 < s < 1e300:
        assert raw(norm_of(x)) == math.sqrt(s)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cosine_similarity_over_magnitudes(dtype):
    rng = np.random.default_rng(11)
    for e in MAGNITUDES[dtype]:
        a, b = sample(rng, e, dtype, 4), sample(rng, 0, dtype, 4)
        ops.set_dtype(dtype)
        from tapeml.builtins.ml.functional import cosine_similarity
        if exact_norm(a) <= 1e-8 * 4:
            continue                      # the clamp at eps is the definition there
        got = raw(cosine_similarity(a, b, -1, 1e-8))
        check_value(dtype, got, exact_cosine(a, b), 1e-13)
        ga = grad(lambda t: cosine_similarity(t, b, -1, 1e-8), a)
        # d cos / d a = (b_hat - cos a_hat) / |a|
        fa, na, nb = a.astype(np.float64), exact_norm(a), exact_norm(b)
        want = (b.astype(np.float64) / nb - exact_cosine(a, b) * (fa / na)) / na
        if dtype == "float64":
            np.testing.assert_allclose(ga, want, rtol=1e-9, atol=1e-14 * np.abs(want).max())
        else:
            np.testing.assert_allclose(ga.astype(np.float64), want, rtol=1e-4, atol=1e-6 * np.abs(want).max())
        ops.set_dtype("float64")


def test_cosine_similarity_of_large_vectors_is_their_cosine():
    assert value_of("cosine_similarity([1e200, 2e200], [1e200, 1e200])") == pytest.approx(3 / math.sqrt(10), rel=1e-15)  # was 0
    assert value_of("cosine_similarity([1e-200, 2e-200], [1e-200, 1e-200], eps=1e-300)") == pytest.approx(3 / math.sqrt(10), rel=1e-15)
    close32(value_of("cosine_similarity([1e20, 2e20], [1e20, 1e20])", 'set_dtype("float32")'), 3 / math.sqrt(10))


@needs_torch
def test_pytorch_float64_overflows_in_the_norm_where_tapeml_does_not():
    """PyTorch's float64 norm and cosine_similarity of 1e200 vectors are inf and 0 (the sum of squares
    overflows): the right values are exact arithmetic's."""
    a = torch.tensor([1e200, 2e200], dtype=torch.float64)
    assert torch.linalg.vector_norm(a).item() == INF
    assert torch.nn.functional.cosine_similarity(a, torch.tensor([1e200, 1e200], dtype=torch.float64), dim=0) == 0
    assert value_of("norm([1e200, 2e200])") == exact_norm([1e200, 2e200])
    # in range, the same as PyTorch's
    b = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64, requires_grad=True)
    torch.linalg.vector_norm(b).backward()
    np.testing.assert_array_equal(value_of("grad(norm, [1.5, -2, 0.25])"), b.grad.numpy())


def test_matrix_and_axis_norms_rescale_each_row():
    x = np.array([[1e200, -2e200], [3.0, 4.0], [1e-200, 0.0]])
    np.testing.assert_allclose(raw(norm_of(x, None, 1)), [exact_norm(r) for r in x], rtol=1e-15)
    assert raw(norm_of(x)) == pytest.approx(exact_norm(x), rel=1e-15)           # Frobenius
    g = grad(lambda t: ops.sum_(norm_of(t, None, 1)), x)
    np.testing.assert_allclose(g, np.array([exact_norm_grad(r) for r in x]), rtol=1e-15)
    assert value_of("norm(zeros(2, 2, 2) + 1e200)") == pytest.approx(math.sqrt(8) * 1e200, rel=1e-15)


def test_corrcoef_of_large_and_tiny_columns():
    base = np.array([[1.0, 2.5], [2.0, 4.0], [4.0, 3.5]])
    want = np.corrcoef(base, rowvar=False)
    for s in (1e200, 1e-200, 1e160):
        x = base * np.array([s, 1.0])
        got = value_of(f"corrcoef({mat(x)})")
        np.testing.assert_allclose(got, want, rtol=1e-14)          # was nan
    g = value_of(f"grad(fn(x) -> corrcoef(x)[0, 1], {mat(base * [1e200, 1.0])})")
    g0 = value_of(f"grad(fn(x) -> corrcoef(x)[0, 1], {mat(base)})")
    np.testing.assert_allclose(g[:, 1], g0[:, 1], rtol=1e-13)
    np.testing.assert_allclose(g[:, 0], g0[:, 0] / 1e200, rtol=1e-13)  # degree 0: d/dx scales as 1/x
    close32(value_of(f"corrcoef({mat(base * [1e20, 1.0])})", 'set_dtype("float32")'), want)


def mat(x) -> str:
    return "[" + "; ".join(", ".join(repr(float(v)) for v in row) for row in np.asarray(x)) + "]"


@needs_torch
@pytest.mark.parametrize("dtype, s", [("float64", 1e200), ("float64", 1e-200), ("float32", 1e20), ("float32", 1e-25)])
def test_batch_norm_of_large_and_tiny_features(dtype, s):
    base = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 10.0], [-1.0, 0.5]])
    x = base * np.array([s, 1.0])
    setup = f'set_dtype("{dtype}")\nx = {mat(x)}'
    y, rm, rv = value_of("batch_norm(x, [1, 2], [0, 0.5], [0, 0], [1, 1], eps=0)", setup)
    # PyTorch on the unscaled features gives the normalized values (they do not depend on the scale;
    # PyTorch refuses eps = 0 in training, and 1e-300 does not change its float64 result)
    t = torch.nn.functional.batch_norm(torch.tensor(base), torch.zeros(2, dtype=torch.float64),
                                       torch.ones(2, dtype=torch.float64), torch.tensor([1.0, 2.0], dtype=torch.float64),
                                       torch.tensor([0.0, 0.5], dtype=torch.float64), training=True, eps=1e-300)
    if dtype == "float32":
        assert y.dtype == np.float32
        np.testing.assert_allclose(y, t.numpy(), rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(y, t.numpy(), rtol=1e-13, atol=1e-15)
    g = value_of("grad(fn(x) -> sum(batch_norm(x, [1, 2], [0, 0], [0, 0], [1, 1], eps=0)[0] * [1, 0; 0, 1; 1, 1; 2, -1]), x)",
                 setup)
    tb = torch.tensor(base, requires_grad=True)
    yb = torch.nn.functional.batch_norm(tb, None, None, torch.tensor([1.0, 2.0], dtype=torch.float64), None,
                                        training=True, eps=1e-300)
    (yb * torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]], dtype=torch.float64)).sum().backward()
    want = tb.grad.numpy() / np.array([s, 1.0])                 # degree 0 in each feature
    np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=1e-5 if dtype == "float32" else 1e-12,
                               atol=1e-6 * np.abs(want[:, 1]).max() if dtype == "float32" else 0)


def test_grad_norm_and_clip_grad_norm_in_both_float_types():
    assert value_of("grad_norm({w = [3e200, 0], b = 4e200})") == pytest.approx(exact_norm([3e200, 4e200]), rel=1e-15)
    np.testing.assert_allclose(value_of("grad(fn(g) -> grad_norm(g), [1e-200, -2e-200])"),
                               [1 / math.sqrt(5), -2 / math.sqrt(5)], rtol=1e-15)
    np.testing.assert_allclose(value_of("clip_grad_norm([3e200, 4e200], 1)"), [0.6, 0.8], rtol=1e-15)
    for x in ([3e20, 4e20], [3e-30, 4e-30]):
        close32(value_of(f"grad_norm({x})", 'set_dtype("float32")'), exact_norm(np.float32(x)))
        close32(value_of(f"grad(fn(g) -> grad_norm(g), {x})", 'set_dtype("float32")'), exact_norm_grad(np.float32(x)))


def test_mean_var_and_cov_of_values_whose_sum_overflows():
    x = [1.5e308, 1.7e308]
    assert value_of(f"mean({x})") == float(sum(fr(x)) / 2)             # was inf
    assert value_of("var([1.7e308, 1.7e308, 1.7e308])") == 0           # was inf (the mean overflowed)
    assert value_of(f"var({x})") == INF                                # the true variance is beyond the range
    assert value_of("std([1.7e308, 1.6e308, 1.5e308])") == pytest.approx(exact_std([1.7e308, 1.6e308, 1.5e308]), rel=1e-15)
    np.testing.assert_array_equal(value_of(f"grad(mean, {x})"), [0.5, 0.5])
    assert value_of("cov([1.7e308, 1; 1.7e308, 2])").tolist() == [[0.0, 0.0], [0.0, 0.5]]
    assert value_of("mean([1.5e308, 1.7e308; 1, 2], dim=1)").tolist() == [1.6e308, 1.5]
    assert math.isnan(value_of("mean(zeros(0))"))


def test_atan2_gradient_where_the_radius_squared_leaves_the_range():
    for s in (1e-200, 1e200, 1e-160):
        gy = value_of(f"grad(fn(y) -> atan2(y, {2 * s}), {s})")
        gx = value_of(f"grad(fn(x) -> atan2({s}, x), {2 * s})")
        # d/dy atan2(y, x) = x / (x^2 + y^2) = 2 / (5 s), d/dx = -y / (x^2 + y^2) = -1 / (5 s)
        assert gy == pytest.approx(2 / (5 * s), rel=1e-15) and gx == pytest.approx(-1 / (5 * s), rel=1e-15)
    assert value_of("grad(fn(y) -> atan2(y, 1), 1e300)") == 0.0       # x / (x^2 + y^2) = 1e-600: 0
    close32(value_of("grad(fn(y) -> atan2(y, 2e-30), 1e-30)", 'set_dtype("float32")'), 2 / (5 * float(np.float32(1e-30))))


def test_second_order_through_the_rescaled_reductions():
    """grad of grad through the power-of-two rescaling: the Hessians of norm and std (degree 1, so
    H(2^k x) = 2^-k H(x)) at inputs whose squares overflow or underflow are the scaled Hessians (a
    unit vector's Hessian, degree -2, is beyond the float range there)."""
    for f in ("norm", "std", "fn(x) -> norm(x, 3)"):
        h1 = value_of(f"hessian({f}, [1.5, -2, 0.25])")
        for k in (-700, 700):
            hk = value_of(f"hessian({f}, [1.5, -2, 0.25] * 2 ^ {k})")
            np.testing.assert_allclose(hk, np.ldexp(h1, -k), rtol=1e-14, atol=0, err_msg=f"{f} {k}")


def test_attention_over_one_key_has_exactly_zero_gradient_to_q_and_k():
    """One key takes the whole weight (exactly 1), so nothing flows to q, k or bias: exactly 0, as
    softmax's VJP gives (PyTorch float64: 0). FlashAttention's identity rowsum(g * out) = rowsum(dp * p)
    leaves rounding noise there (2e-15 in a differential case, seed 2512 case 1661), so a key axis no
    longer than the value features takes the direct form."""
    out = output_of("""
q = reshape([1.6, 0.2, -0.3, 0.5, 0.1, 0.9, 1.1, -0.7, 0.4, 0.3, 2.2, -1.3, 0.8, 0.6, -0.2, 1.9, -0.4, 0.7], 2, 3, 3)
k = reshape([0.66, 0.63, 1.6, -0.83, 1.3, 0.15], 2, 1, 3)
v = reshape([1.2, -0.9, 0.45, 0.7, 0.25, -1.1], 2, 1, 3)
w = reshape(1:18, 2, 3, 3) / 7
f = fn(s) -> sum(scaled_dot_product_attention(s * q, k, v, bias=[0.3; -0.2; 0.1]) * w)
print(grad(f, 1.37) == 0)
print(all(grad(fn(kk) -> sum(scaled_dot_product_attention(q, kk, v) * w), k) == 0))
print(grad(fn(s) -> grad(f, s) * s, 1.37) == 0)
""")
    assert out.split() == ["true", "true", "true"]
