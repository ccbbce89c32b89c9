"""The numerical traps of the field (issue 9), each with its exact expected value.

Values are checked twice: as numbers (against the float64 formula, tight tolerance) and as
printed (7 significant digits, the language's one printer)."""
from __future__ import annotations

import numpy as np
import pytest

from tapeml.builtins import REGISTRY

from support import printed, value_of


def exact(value, expected, rtol=1e-12):
    value = np.asarray(value, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert value.shape == expected.shape
    assert not np.any(np.isnan(value)), value
    np.testing.assert_allclose(value, expected, rtol=rtol, atol=0)


# ---- softmax ---------------------------------------------------------------------------------
def test_softmax_of_large_logits_is_exact():
    v = value_of("softmax([-1047, -981, 1891])")
    assert v.tolist() == [0.0, 0.0, 1.0]
    assert printed("softmax([-1047, -981, 1891])") == "[0, 0, 1]"


def test_softmax_of_equal_huge_logits_is_a_half_each():
    assert value_of("softmax([1000, 1000])").tolist() == [0.5, 0.5]
    assert printed("softmax([1000, 1000])") == "[0.5, 0.5]"


def test_softmax_of_an_all_minus_inf_row_is_zeros_forward_and_backward():
    assert value_of("softmax([-1e999, -1e999])").tolist() == [0.0, 0.0]
    assert value_of("grad(fn(x) -> sum(softmax(x) * [1, 2]), [-1e999, -1e999])").tolist() == [0.0, 0.0]


# ---- cross_entropy ---------------------------------------------------------------------------
needs_cross_entropy = pytest.mark.skipif("cross_entropy" not in REGISTRY,
                                         reason="the cross_entropy builtin does not exist yet")


@needs_cross_entropy
def test_cross_entropy_of_far_apart_logits():
    # -log softmax(z)[0] = logsumexp(z) - z[0] = 427 + log(1 + e^-148 + e^-858) + 431
    assert value_of("cross_entropy([-431, 279, 427], 0)") == 858.0
    assert printed("cross_entropy([-431, 279, 427], 0)") == "858"


@needs_cross_entropy
def test_cross_entropy_gradient_has_no_nan():
    g = value_of("grad(fn(z) -> cross_entropy(z, 0), [-431, 279, 427])")
    z = np.array([-431.0, 279.0, 427.0])
    p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    exact(g, p - np.array([1.0, 0.0, 0.0]))
    assert g[0] == -1.0 and g[2] == 1.0
    assert g[1] == pytest.approx(5.3017187e-65, rel=1e-7)
    assert printed("grad(fn(z) -> cross_entropy(z, 0), [-431, 279, 427])") == "[-1, 5.301719e-65, 1]"


# ---- layer_norm ------------------------------------------------------------------------------
def layer_norm_reference(x, eps=1e-5):
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean()
    var = ((x - mu) ** 2).mean()          # two-pass variance
    return (x - mu) / np.sqrt(var + eps)


def test_layer_norm_with_unit_gain():
    v = value_of("layer_norm([1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0])")
    exact(v, layer_norm_reference([1, 2, 3, 4]))
    assert printed("layer_norm([1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0])") == \
        "[-1.341635, -0.4472118, 0.4472118, 1.341635]"


def test_layer_norm_of_a_large_offset_uses_a_two_pass_variance():
    # one-pass E[x^2] - E[x]^2 at 1e8 loses every digit (it gives 0 or a negative variance)
    v = value_of("layer_norm(1e8 + [1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0])")
    exact(v, layer_norm_reference([1, 2, 3, 4]), rtol=1e-8)
    assert printed("layer_norm(1e8 + [1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0])") == \
        "[-1.341635, -0.4472118, 0.4472118, 1.341635]"


def test_layer_norm_of_a_tiny_spread_is_dominated_by_eps():
    v = value_of("layer_norm([0, 0.001], [1, 1], [0, 0])")
    exact(v, layer_norm_reference([0, 0.001]))
    assert printed("layer_norm([0, 0.001], [1, 1], [0, 0])") == "[-0.1561738, 0.1561738]"


# ---- causal attention --------------------------------------------------------------------------
ATTN = "q = [1, 0; 0, 1; 1, 1]\nv = [1, 2; 3, 4; 5, 6]"


def attention_reference(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[1])
    s = np.where(np.tril(np.ones_like(s, dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)) @ v


def test_causal_attention():
    out = value_of("scaled_dot_product_attention(q, q, v, causal=true)", ATTN)
    q = np.array([[1.0, 0], [0, 1], [1, 1]])
    v = np.array([[1.0, 2], [3, 4], [5, 6]])
    exact(out, attention_reference(q, q, v))
    assert printed("scaled_dot_product_attention(q, q, v, causal=true)", ATTN) == \
        "[1, 2; 2.339523, 3.339523; 3.51047, 4.51047]"


def test_a_huge_future_key_cannot_beat_the_causal_mask():
    setup = ATTN + "\nk = [1, 0; 0, 1; 1e10, 0]"
    plain = value_of("scaled_dot_product_attention(q, q, v, causal=true)", ATTN)
    out = value_of("scaled_dot_product_attention(q, k, v, causal=true)", setup)
    assert out[:2].tolist() == plain[:2].tolist()        # rows 0 and 1 never see key 2
    assert out[2].tolist() == [5.0, 6.0]                  # row 2 sees it, and it dominates
    assert not np.any(np.isnan(out))


# ---- gradients ---------------------------------------------------------------------------------
def test_grad_of_a_cube_is_the_same_on_every_call():
    setup = "f = fn(x) -> sum(x * x * x)\nx = [1, 2, 3]"
    results = value_of("(grad(f, x), grad(f, x), grad(f, x), grad(f, [1, 2, 3]))", setup)
    for g in results:
        assert g.tolist() == [3.0, 12.0, 27.0]
    assert printed("grad(fn(x) -> sum(x * x * x), [1, 2, 3])") == "[3, 12, 27]"


def test_grad_of_the_norm_at_zero_follows_the_documented_rule():
    # sqrt'(0) = inf, and in the backward pass 0 x inf = 0 (DESIGN/docs): the gradient is [0, 0]
    g = value_of("grad(fn(x) -> sqrt(sum(x^2)), [0, 0])")
    assert g.tolist() == [0.0, 0.0]
    assert value_of("grad(fn(x) -> sqrt(x), 0)") == np.inf
    exact(value_of("grad(fn(x) -> sqrt(sum(x^2)), [3, 4])"), [0.6, 0.8], rtol=1e-15)


def test_gradients_at_kinks():
    assert value_of("grad(fn(x) -> abs(x), 0)") == 0.0
    assert value_of("grad(fn(x) -> relu(x), 0)") == 0.0
    assert value_of("grad(fn(x) -> max(x), [1, 3, 3])").tolist() == [0.0, 0.5, 0.5]
