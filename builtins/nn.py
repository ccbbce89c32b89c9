"""Statistics & ML: the transformer builtins.

layer_norm, softmax, log_softmax, relu, gelu, sigmoid, dense and scaled_dot_product_attention
are primitives (one VJP each in ops.py). multi_head_attention and transformer_block are
*composites*: Python code over those primitives, with no gradient rule of their own; their
gradients come from the tape's ordinary reverse walk (DESIGN.md rule 3).
"""
from __future__ import annotations

import math

import numpy as np

from tapeml import ops
from tapeml.builtins.registry import P, builtin, positive
from tapeml.builtins.util import axis
from tapeml.errors import ShapeError, TypeErr, ValueErr
from tapeml.tape import raw
from tapeml.values import Record, describe, shape_text

CAT = "Statistics & ML"


def _shape(v):
    return ops.shape_of(v)


def need_field(rec, name: str, path: str, needed: str):
    r = raw(rec)
    if not isinstance(r, Record):
        raise TypeErr(f"{path} must be a record ({needed}), got {describe(rec)}")
    if name not in r.fields:
        raise ValueErr(f"{path} is missing the field '{name}' (it needs {needed}; it has "
                       f"{', '.join(r.fields) or 'no fields'})")
    v = r.fields[name]
    rv = raw(v)
    if not isinstance(rv, (float, np.ndarray)) or isinstance(rv, bool):
        raise TypeErr(f"{path}.{name} must be a matrix, got {describe(v)}")
    return v


def need_shape(v, path: str, expected: tuple):
    got = _shape(v)
    if got != expected:
        raise ShapeError(f"{path} is {shape_text(got)}, expected {shape_text(expected)}")


def _last_dim(x, fname):
    s = _shape(x)
    if not s:
        raise ShapeError(f"{fname}() needs a vector or matrix, got a number")
    return s[-1]


# ---- elementwise activations and normalisations -----------------------------------------
@builtin("relu", CAT, "Rectified linear unit: max(x, 0) elementwise.",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         what="The nonlinearity of the original Transformer's feed-forward layer: negatives become 0.",
         how="relu(x) = max(0, x) (Nair & Hinton 2010). relu'(0) = 0, as PyTorch.",
         examples=["relu([-2, -0.5, 0, 1.5])", "relu([1, -1; -2, 2])"])
def relu(x):
    return ops.relu(x)


@builtin("gelu", CAT, "Gaussian error linear unit x * Phi(x) (exact, with erf).",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         how="gelu(x) = x * (1 + erf(x / sqrt(2))) / 2 (Hendrycks & Gimpel 2016); PyTorch's default `gelu`.",
         examples=["gelu([-1, 0, 1])"])
def gelu(x):
    return ops.gelu(x)


@builtin("sigmoid", CAT, "Logistic function 1 / (1 + exp(-x)), stable for large |x|.",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         how="Computed from exp(-|x|) so that no exponent overflows; d/dx = s (1 - s).",
         examples=["sigmoid([-1000, 0, 1000])", "sigmoid(1)"])
def sigmoid(x):
    return ops.sigmoid(x)


@builtin("softmax", CAT, "Normalized exponentials along an axis: each row sums to 1.",
         [P("x", "array", shape="[..., N]"), P("dim", "int", -1, doc="the axis to normalize")],
         returns="same shape as x", differentiable=True,
         how="exp(x - max(x)) / sum(exp(x - max(x))): subtracting the row maximum keeps every exponent "
             "<= 0, so large logits never overflow. A row of all -inf gives zeros, never NaN.",
         examples=["softmax([1, 2, 3])", "softmax([1000, 1000])", "softmax([1, 2; 3, 5], dim=0)"])
def softmax(x, dim):
    return ops.softmax(x, dim=axis(x, dim))


@builtin("log_softmax", CAT, "log(softmax(x)) along an axis, computed stably.",
         [P("x", "array", shape="[..., N]"), P("dim", "int", -1, doc="the axis to normalize")],
         returns="same shape as x", differentiable=True,
         how="x - max(x) - log(sum(exp(x - max(x)))), the log-sum-exp trick.",
         examples=["log_softmax([1, 2, 3])", "exp(log_softmax([0, 0]))"])
def log_softmax(x, dim):
    return ops.log_softmax(x, dim=axis(x, dim))


@builtin("layer_norm", CAT, "Normalize each row (last axis) to mean 0 and variance 1, then scale and shift.",
         [P("x", "array", shape="[..., D]", doc="the input; each position is normalized on its own"),
          P("gamma", "array", shape="[D]", doc="gain"), P("beta", "array", shape="[D]", doc="bias"),
          P("eps", "number", 1e-5, doc="added to the variance inside the square root", check=positive,
            constraint="> 0")],
         returns="[..., D]", differentiable=True,
         what="Layer normalization rescales every token's feature vector using only that token's own "
              "numbers, so the result does not depend on the scale of the input row.",
         how="y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta over the last axis, with the "
             "population variance computed in two passes (Ba, Kiros & Hinton 2016; PyTorch's "
             "`nn.LayerNorm`). The VJP is fused: dx = (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) / std.",
         errors=["ShapeError when gamma or beta is not a vector of length D", "ValueError when eps <= 0"],
         examples=["layer_norm([1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0])",
                   "x = [1.0, 2.0, 3.0; 10.0, 20.0, 30.0]\nlayer_norm(x, [1, 1, 1], [0, 0, 0])"])
def layer_norm(x, gamma, beta, eps):
    d = _last_dim(x, "layer_norm")
    need_shape(gamma, "layer_norm(): gamma", (d,))
    need_shape(beta, "layer_norm(): beta", (d,))
    return ops.layer_norm(x, gamma, beta, eps=eps)


@builtin("dense", CAT, "An affine layer: x @ w + b.",
         [P("x", "array", shape="[..., D_in]"), P("w", "array", shape="[D_in, D_out]"),
          P("b", "array", None, shape="[D_out]", doc="bias; none for no bias")],
         returns="[..., D_out]", differentiable=True,
         how="y = x w + b (a fully connected layer); the VJP gives g w', x' g (the batch folded) and "
             "the sum of g over positions.",
         examples=["dense([1, 2], [1, 0; 0, 1], [10, 20])", "dense([1, 2; 3, 4], [1; 1], [0])"])
def dense(x, w, b):
    sx, sw = _shape(x), _shape(w)
    if len(sw) != 2:
        raise ShapeError(f"dense(): w must be a D_in x D_out matrix, got {describe(w)}")
    if not sx or sx[-1] != sw[0]:
        raise ShapeError(f"dense(): x is {shape_text(sx)} and w is {shape_text(sw)}: the last size of x "
                         f"must equal the rows of w")
    if b is not None:
        need_shape(b, "dense(): b", (sw[1],))
    return ops.dense(x, w, b)


@builtin("scaled_dot_product_attention", CAT,
         "softmax(q @ k' / sqrt(d_k) + bias) @ v over the keys a boolean mask allows.",
         [P("q", "array", shape="[..., L_q, d_k]", doc="queries"),
          P("k", "array", shape="[..., L_k, d_k]", doc="keys"),
          P("v", "array", shape="[..., L_k, d_v]", doc="values"),
          P("mask", "array", None, shape="[L_q, L_k]", doc="bool; true means 'may attend' (PyTorch SDPA's convention)"),
          P("bias", "array", None, shape="[L_q, L_k]", doc="added to the scores before the softmax"),
          P("causal", "bool", False, doc="query i sees keys j <= i + L_k - L_q (bottom-right aligned)")],
         returns="[..., L_q, d_v]", differentiable=True,
         what="Each query's output is an average of the values, weighted by how well the query matches each key.",
         how="Attention(Q, K, V) = softmax(Q K' / sqrt(d_k)) V (Vaswani et al. 2017, eq. 1). Masked "
             "scores are removed with `where` before the exponential, never by adding a finite -1e9 that a "
             "large score could beat; a row with every key masked gives zeros in the forward and backward pass.",
         errors=["ShapeError when q, k and v do not agree in d_k or L_k, or the mask has the wrong shape"],
         examples=["q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\nk = [1.0, 0.0; 0.0, 1.0; 0.5, 0.5]\n"
                   "v = [1.0, 2.0; 3.0, 4.0; 5.0, 6.0]\nscaled_dot_product_attention(q, k, v)",
                   "x = [1, 0; 0, 1; 1, 1]\nscaled_dot_product_attention(x, x, [1, 2; 3, 4; 5, 6], causal=true)"])
def scaled_dot_product_attention(q, k, v, mask, bias, causal):
    sq, sk, sv = _shape(q), _shape(k), _shape(v)
    for name, s in (("q", sq), ("k", sk), ("v", sv)):
        if len(s) < 2:
            raise ShapeError(f"scaled_dot_product_attention(): {name} must be a matrix "
                             f"[L, d] (or batched [..., L, d]), got {shape_text(s)}")
    if sq[-1] != sk[-1]:
        raise ShapeError(f"scaled_dot_product_attention(): q is {shape_text(sq)} and k is {shape_text(sk)}: "
                         f"queries and keys need the same width d_k")
    if sk[-2] != sv[-2]:
        raise ShapeError(f"scaled_dot_product_attention(): k is {shape_text(sk)} and v is {shape_text(sv)}: "
                         f"keys and values need the same length L_k")
    lq, lk = sq[-2], sk[-2]
    if mask is not None:
        m = raw(mask)
        if not (isinstance(m, np.ndarray) and m.dtype == np.bool_):
            raise TypeErr(f"scaled_dot_product_attention(): mask must be a bool matrix (true = may attend), "
                          f"got {describe(m)}; pass an additive float matrix as bias=")
        if m.shape[-2:] != (lq, lk):
            raise ShapeError(f"scaled_dot_product_attention(): mask is {shape_text(m.shape)}, "
                             f"expected {lq}x{lk} (queries x keys)")
    if bias is not None and _shape(bias)[-2:] != (lq, lk):
        raise ShapeError(f"scaled_dot_product_attention(): bias is {shape_text(_shape(bias))}, "
                         f"expected {lq}x{lk} (queries x keys)")
    return attention(q, k, v, mask, bias, causal)


def attention(q, k, v, mask=None, bias=None, causal=False):
    """The sdpa primitive with the 1/sqrt(d_k) scale."""
    scale = 1.0 / math.sqrt(_shape(q)[-1])
    return ops.sdpa(q, k, v, bias, mask=mask, causal=causal, scale=scale)


HEAD_FIELDS = "wq, wk, wv, wo"


def check_heads(heads, d_model: int, path: str = "heads"):
    r = raw(heads)
    if not isinstance(r, tuple) or not r:
        raise TypeErr(f"{path} must be a non-empty tuple of head records {{{HEAD_FIELDS}}}, got {describe(heads)}")
    d_k = None
    for i, h in enumerate(r):
        hp = f"{path}[{i}]"
        wq = need_field(h, "wq", hp, HEAD_FIELDS)
        for f in ("wk", "wv", "wo"):
            need_field(h, f, hp, HEAD_FIELDS)
        s = _shape(wq)
        if len(s) != 2 or s[0] != d_model:
            raise ShapeError(f"{hp}.wq is {shape_text(s)}, expected {d_model}xd_k (d_model = {d_model})")
        if d_k is None:
            d_k = s[1]
        need_shape(raw(h).fields["wq"], f"{hp}.wq", (d_model, d_k))
        need_shape(raw(h).fields["wk"], f"{hp}.wk", (d_model, d_k))
        sv = _shape(raw(h).fields["wv"])
        if len(sv) != 2 or sv[0] != d_model:
            raise ShapeError(f"{hp}.wv is {shape_text(sv)}, expected {d_model}xd_v")
        need_shape(raw(h).fields["wo"], f"{hp}.wo", (sv[1], d_model))
        for b, n in (("bq", d_k), ("bk", d_k), ("bv", sv[1]), ("bo", d_model)):
            if b in raw(h).fields:
                need_shape(raw(h).fields[b], f"{hp}.{b}", (n,))
    return r


def mha(x, heads, causal=False):
    """Sum over heads of sdpa(x wq, x wk, x wv) wo, composed from primitives."""
    out = None
    for h in heads:
        f = raw(h).fields
        q = ops.dense(x, f["wq"], f.get("bq"))
        k = ops.dense(x, f["wk"], f.get("bk"))
        v = ops.dense(x, f["wv"], f.get("bv"))
        o = ops.dense(attention(q, k, v, causal=causal), f["wo"], f.get("bo"))
        out = o if out is None else ops.add(out, o)
    return out


@builtin("multi_head_attention", CAT, "Self-attention with several heads: sum over heads of sdpa(x wq, x wk, x wv) wo.",
         [P("x", "array", shape="[..., T, D]", doc="the sequence, one row per position"),
          P("heads", "tuple", doc="a tuple of records {wq, wk, wv, wo} (wq, wk: D x d_k; wv: D x d_v; wo: d_v x D)"),
          P("n_heads", "int", doc="must equal len(heads)"),
          P("causal", "bool", False, doc="each position attends only to itself and earlier ones")],
         returns="[..., T, D]", differentiable=True,
         what="Runs one scaled_dot_product_attention per head on projections of x and adds up the heads' "
              "projected outputs. With one identity head it is plain self-attention.",
         how="MultiHead(x) = sum_h Attention(x Wq_h, x Wk_h, x Wv_h) Wo_h (Vaswani et al. 2017, §3.2.2; the "
             "sum over heads equals Concat(head_1..head_h) W^O with W^O split by rows). A composite: built "
             "from dense and scaled_dot_product_attention, it has no gradient rule of its own.",
         errors=["ValueError when n_heads differs from len(heads) or a head lacks a field",
                 "ShapeError when a head's matrices do not fit D"],
         examples=["eye2 = [1.0, 0.0; 0.0, 1.0]\nhead = {wq = eye2, wk = eye2, wv = eye2, wo = eye2}\n"
                   "q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\nmulti_head_attention(q, (head,), 1)"])
def multi_head_attention(x, heads, n_heads, causal):
    if n_heads != len(raw(heads)):
        raise ValueErr(f"multi_head_attention(): n_heads is {n_heads} but heads has {len(raw(heads))} "
                       f"record{'s' * (len(raw(heads)) != 1)}; they must be equal")
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"multi_head_attention(): x must be T x D (or B x T x D), got {describe(x)}")
    check_heads(heads, s[-1])
    return mha(x, raw(heads), causal)


BLOCK_FIELDS = "heads, ln1_gamma, ln1_beta, w1, b1, w2, b2, ln2_gamma, ln2_beta"


@builtin("transformer_block", CAT, "One post-norm Transformer encoder block: attention and a ReLU feed-forward, each with a residual add and layer_norm.",
         [P("x", "array", shape="[T, D] or [B, T, D]"),
          P("weights", "record", doc=f"a record with {BLOCK_FIELDS}")],
         returns="same shape as x", differentiable=True,
         what="One transformer block on a T x D input: multi-head self-attention plus a two-layer "
              "feed-forward network, each wrapped in a residual connection and a layer_norm. weights.heads "
              "is the tuple multi_head_attention takes (n_heads is its length); ln1_*/ln2_* are the two "
              "layer norms' gains and biases; w1, b1, w2, b2 the feed-forward layers.",
         how="The post-norm block of Vaswani et al. 2017, §3.1:\n\n"
             "    a  = multi_head_attention(x, weights.heads, len(weights.heads))\n"
             "    h1 = layer_norm(x + a, ln1_gamma, ln1_beta)\n"
             "    f  = dense(relu(dense(h1, w1, b1)), w2, b2)\n"
             "    out = layer_norm(h1 + f, ln2_gamma, ln2_beta)\n\n"
             "A composite of recorded primitives: its gradient comes from the tape's ordinary reverse walk, "
             "with no rule of its own. Matches PyTorch's nn.TransformerEncoderLayer(norm_first=False, "
             "activation='relu', dropout=0).",
         errors=["ValueError naming the path of a missing field", "ShapeError naming the path and both shapes"],
         examples=["eye2 = [1.0, 0.0; 0.0, 1.0]\nhead = {wq = eye2, wk = eye2, wv = eye2, wo = eye2}\n"
                   "weights = {heads = (head,), ln1_gamma = [1.0, 1.0], ln1_beta = [0.0, 0.0],\n"
                   "           w1 = [0.2, -0.1; 0.1, 0.3], b1 = [0.0, 0.0],\n"
                   "           w2 = [0.1, -0.2; 0.3, 0.1], b2 = [0.0, 0.0],\n"
                   "           ln2_gamma = [1.0, 1.0], ln2_beta = [0.0, 0.0]}\n"
                   "q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\nround(transformer_block(q, weights), 3)"])
def transformer_block(x, weights):
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"transformer_block(): x must be T x D (or B x T x D), got {describe(x)}")
    d = s[-1]
    w = raw(weights)
    heads = need_tuple(w, "heads")
    check_heads(heads, d, "weights.heads")
    for name in ("ln1_gamma", "ln1_beta", "ln2_gamma", "ln2_beta", "b2"):
        need_shape(need_field(w, name, "weights", BLOCK_FIELDS), f"weights.{name}", (d,))
    w1 = need_field(w, "w1", "weights", BLOCK_FIELDS)
    s1 = _shape(w1)
    if len(s1) != 2 or s1[0] != d:
        raise ShapeError(f"weights.w1 is {shape_text(s1)}, expected {d}xhidden")
    hidden = s1[1]
    need_shape(need_field(w, "b1", "weights", BLOCK_FIELDS), "weights.b1", (hidden,))
    need_shape(need_field(w, "w2", "weights", BLOCK_FIELDS), "weights.w2", (hidden, d))
    f = w.fields
    a = mha(x, heads)
    h1 = ops.layer_norm(ops.add(x, a), f["ln1_gamma"], f["ln1_beta"], eps=1e-5)
    ff = ops.dense(ops.relu(ops.dense(h1, f["w1"], f["b1"])), f["w2"], f["b2"])
    return ops.layer_norm(ops.add(h1, ff), f["ln2_gamma"], f["ln2_beta"], eps=1e-5)


def need_tuple(w, name):
    if name not in w.fields:
        raise ValueErr(f"weights is missing the field '{name}' (it needs {BLOCK_FIELDS})")
    return w.fields[name]
