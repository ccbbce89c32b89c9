"""Statistics & ML: the transformer builtins.

layer_norm, softmax, log_softmax, relu, gelu, sigmoid, dense and scaled_dot_product_attention
are primitives (one VJP each in ops.py). multi_head_attention and transformer_block are
*composites*: Python code over those primitives, with no gradient rule of their own; their
gradients come from the tape's ordinary reverse walk (DESIGN.md rule 3).
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from tapeml import ops
from tapeml.builtins.registry import P, builtin, non_negative, one_of, positive
from tapeml.builtins.util import axis
from tapeml.errors import ShapeError, TypeErr, ValueErr
from tapeml.tape import Box, raw
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
    if s[-1] == 0:
        raise ShapeError(f"{fname}() needs at least one feature (the last axis of x has length 0)")
    return s[-1]


# ---- elementwise activations and normalisations -----------------------------------------
@builtin("relu", CAT, "Rectified linear unit: max(x, 0) elementwise.",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         what="The nonlinearity of the original Transformer's feed-forward layer: negatives become 0.",
         errors=["TypeError when x is not a number or matrix"],
         how="relu(x) = max(0, x) (Nair & Hinton 2010). relu'(0) = 0, as PyTorch.",
         examples=["relu([-2, -0.5, 0.5, 1.5])", "relu([1, -1; 0, 2])  # relu(0) = 0, and relu'(0) = 0",
                   'x = linspace(-3, 3, 61)\nplot(x, relu(x), label="relu")\nplot(x, gelu(x), label="gelu")\n'
                   'legend()\nxlabel("x")\ntitle("relu is 0 left of 0 and x right of it")'])
def relu(x):
    return ops.relu(x)


@builtin("gelu", CAT, "Gaussian error linear unit x * Phi(x) (exact, with erf).",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         what="The smooth activation of BERT and GPT: x weighted by the probability Phi(x) that a standard "
              "normal variable is below x. Large positives pass almost unchanged, large negatives go to 0, "
              "and small negatives dip just below 0 (the minimum is about -0.17, near x = -0.75).",
         errors=["TypeError when x is not a number or matrix"],
         how="gelu(x) = x * (1 + erf(x / sqrt(2))) / 2 (Hendrycks & Gimpel 2016); PyTorch's default `gelu`.",
         examples=["gelu([-1, 0, 1])"])
def gelu(x):
    return ops.gelu(x)


@builtin("sigmoid", CAT, "Logistic function 1 / (1 + exp(-x)), stable for large |x|.",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         what="Squashes any number into (0, 1), with sigmoid(0) = 0.5: a probability from a score, and the "
              "gate inside silu and quick_gelu.",
         how="s(x) = 1 / (1 + exp(-x)), the logistic function (PyTorch's `torch.sigmoid`), computed from "
             "exp(-|x|) so that no exponent overflows; d/dx = s (1 - s).",
         errors=["TypeError when x is not a number or matrix"],
         examples=["sigmoid([-1000, 0, 1000])", "sigmoid(1)"])
def sigmoid(x):
    return ops.sigmoid(x)


@builtin("softmax", CAT, "Normalized exponentials along an axis: each row sums to 1.",
         [P("x", "array", shape="[..., N]"), P("dim", "int", -1, doc="the axis to normalize")],
         returns="same shape as x", differentiable=True,
         what="Turns a row of scores (logits) into probabilities: every entry in [0, 1], the row summing to "
              "1, larger scores getting more weight. For a matrix each row is normalized on its own (the "
              "last axis; dim chooses another), as attention does with its score matrix.",
         how="softmax(x)_i = exp(x_i) / sum_j exp(x_j) (Bridle 1990; PyTorch's `torch.softmax`), computed as "
             "exp(x - max(x)) / sum(exp(x - max(x))): subtracting the row maximum keeps every exponent "
             "<= 0, so large logits never overflow. A row of all -inf gives zeros, never NaN. A row holding "
             "+inf takes the limit: its +inf entries share the row equally and the rest get 0 "
             "(softmax([1 / 0, 1]) is [1, 0]), and the gradient of such a row is 0 (no finite change of "
             "its entries changes it).",
         errors=["ValueError when dim is out of range for x", "TypeError when x is not a number or matrix"],
         examples=["softmax([1, 2, 3])", "softmax([1000, 1000])", "softmax([1, 2; 3, 5], dim=0)",
                   "softmax([1 / 0, 1 / 0, 1])"])
def softmax(x, dim):
    return ops.softmax(x, dim=axis(x, dim))


@builtin("log_softmax", CAT, "log(softmax(x)) along an axis, computed stably.",
         [P("x", "array", shape="[..., N]"), P("dim", "int", -1, doc="the axis to normalize")],
         returns="same shape as x", differentiable=True,
         what="The log-probabilities a cross-entropy loss needs, without forming the probabilities first: "
              "log(softmax(x)) becomes -inf once a probability underflows to 0 (log(softmax([0, -1000]))), "
              "while log_softmax([0, -1000]) is [0, -1000].",
         how="log_softmax(x) = x - max(x) - log(sum(exp(x - max(x)))), the log-sum-exp trick (PyTorch's "
             "`torch.log_softmax`). A row of all -inf gives -inf throughout (softmax gives zeros there), "
             "never nan. A row holding +inf takes softmax's limit: log(1/k) at its k +inf entries and -inf "
             "elsewhere, with gradient 0.",
         errors=["ValueError when dim is out of range for x", "TypeError when x is not a number or matrix"],
         examples=["log_softmax([1, 2, 3])", "exp(log_softmax([0, 0]))", "log_softmax([1 / 0, 1 / 0, 1])"])
def log_softmax(x, dim):
    return ops.log_softmax(x, dim=axis(x, dim))


@builtin("layer_norm", CAT, "Normalize each row (last axis) to mean 0 and variance 1, then scale and shift.",
         [P("x", "array", shape="[..., D]", doc="the input; each position is normalized on its own"),
          P("gamma", "array", shape="[D]", doc="gain"), P("beta", "array", shape="[D]", doc="bias"),
          P("eps", "number", 1e-5, doc="added to the variance inside the square root (0 allowed: a row of "
                                       "equal values then gives beta)", check=non_negative, constraint=">= 0")],
         returns="[..., D]", differentiable=True,
         what="Layer normalization rescales every token's feature vector using only that token's own "
              "numbers, so the result does not depend on the scale of the input row.",
         how="y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta over the last axis, with the "
             "population variance computed in two passes (Ba, Kiros & Hinton 2016; PyTorch's "
             "`nn.LayerNorm`). The VJP is fused: dx = (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) / std. "
             "A row whose variance would overflow or underflow (1e20 in float32) is computed on the row "
             "scaled by a power of 2, so the result stays finite wherever it is representable. With eps = 0 "
             "a row of equal values (variance 0) gives beta, with gradient 0 to x (PyTorch gives nan); a "
             "row holding +-inf gives the limit, its infinite entries counting as +-1 and the rest as 0.",
         errors=["ShapeError when gamma or beta is not a vector of length D", "ValueError when eps < 0"],
         examples=["layer_norm([1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0])",
                   "x = [1.0, 2.0, 3.0; 10.0, 20.0, 30.0]\nlayer_norm(x, [1, 1, 1], [0, 0, 0])",
                   "seed(0)\nx = randn(200, 16) * 3 + 2\ny = layer_norm(x, ones(16), zeros(16))\n"
                   'print("before: mean {round(mean(x), 2)}, mean square {round(mean(x * x), 2)}")\n'
                   'print("after:  mean {round(mean(y), 2)}, mean square {round(mean(y * y), 2)}")\n'
                   'figure(width=8, height=3)\nsubplot(1, 2, 0)\nhist(x, bins=30)\ntitle("before: x, 200 rows of 16")\n'
                   'subplot(1, 2, 1)\nhist(y, bins=30)\ntitle("after: layer_norm(x, ones(16), zeros(16))")',
                   "layer_norm([5, 5, 5; 1e200, 2e200, 3e200], [1, 1, 1], [0, 1, 2], eps=0)"])
def layer_norm(x, gamma, beta, eps):
    d = _last_dim(x, "layer_norm")
    need_shape(gamma, "layer_norm(): gamma", (d,))
    need_shape(beta, "layer_norm(): beta", (d,))
    return ops.layer_norm(x, gamma, beta, eps=eps)


@builtin("dense", CAT, "An affine layer: x @ w + b.",
         [P("x", "array", shape="[..., D_in]"), P("w", "array", shape="[D_in, D_out]"),
          P("b", "array", None, shape="[D_out]", doc="bias; none for no bias")],
         returns="[..., D_out]", differentiable=True,
         what="A fully connected layer: each output feature is a weighted sum of the input features plus a "
              "bias. A [T, D_in] sequence is transformed row by row with the same w and b.",
         errors=["ShapeError when w is not a D_in x D_out matrix",
                 "ShapeError when the last size of x differs from the rows of w",
                 "ShapeError when b is not a vector of length D_out"],
         how="y = x w + b, PyTorch's `nn.Linear` with its weight stored transposed (w = weight'); the VJP gives g w', x' g (the batch folded) and "
             "the sum of g over positions.",
         examples=["dense([1, 2], [1, 0; 0, 1], [10, 20])", "dense([1, 2; 3, 4], [1; 1], [0])",
                   "x = linspace(-2, 2, 81)'\nw1 = reshape([1, 1, 1], 1, 3)\nh = relu(dense(x, w1, [1, 0, -1]))\n"
                   "y = dense(h, [1; -2; 2], [0])\nprint(size(x), size(h), size(y))\nplot(x[:, 0], y[:, 0])\n"
                   'title("two dense layers with a relu between: piecewise linear")\nxlabel("x")'])
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
             "large score could beat; a row with every key masked gives zeros in the forward and backward pass. "
             "Scores that overflow to +inf (q k' beyond 1e308) follow softmax's limit: the +inf keys share "
             "the row's weight equally, the others get 0, and that row's gradient to q, k and bias is 0 "
             "(v still gets its share). "
             "The backward pass takes softmax's correction term rowsum(dP * P) as rowsum(dO * O), a T x d_v "
             "product instead of a T x T one (FlashAttention's identity, Dao et al. 2022).",
         errors=["ShapeError when q, k and v do not agree in d_k or L_k, or the mask has the wrong shape"],
         examples=["q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\nk = [1.0, 0.0; 0.0, 1.0; 0.5, 0.5]\n"
                   "v = [1.0, 2.0; 3.0, 4.0; 5.0, 6.0]\nscaled_dot_product_attention(q, k, v)",
                   "x = [1, 0; 0, 1; 1, 1]\nscaled_dot_product_attention(x, x, [1, 2; 3, 4; 5, 6], causal=true)",
                   "t = (0:7)'\nx = [sin(t), cos(t), sin(t / 3), cos(t / 3)]\n"
                   "# with v = eye(8) the output is the attention weights themselves\n"
                   "w = scaled_dot_product_attention(x, x, eye(8), causal=true)\nprint(round(w[7, :], 3))\n"
                   'imshow(w)\ntitle("causal self-attention weights")\nxlabel("key position")\nylabel("query position")'])
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


HEAD_FIELDS = "wq, wk, wv, wo (optional bq, bk, bv)"
HEAD_ALLOWED = ("wq", "wk", "wv", "wo", "bq", "bk", "bv")


def schema_shape(v, path: str, expected: tuple):
    """A weights-record field of the wrong shape: a ValueError naming the path and both shapes."""
    got = _shape(v)
    if got != expected:
        raise ValueErr(f"{path} is {shape_text(got)}, expected {shape_text(expected)}")


def _schema_matrix(v, path: str, rows: int, what: str):
    """A 2-D field whose row count is fixed and whose column count is free; returns the columns."""
    s = _shape(v)
    if len(s) != 2 or s[0] != rows:
        raise ValueErr(f"{path} is {shape_text(s)}, expected {rows}x{what}")
    return s[1]


def _heads_well_formed(heads: tuple, d_model: int) -> bool:
    """The common case of check_heads in one quick pass: every head a record of matrices of the
    expected shapes. False sends the caller to the field-by-field checks that name the error."""
    first = raw(heads[0])
    if type(first) is not Record:
        return False
    f = first.fields
    wq, wv = raw(f.get("wq")), raw(f.get("wv"))
    if type(wq) is not np.ndarray or type(wv) is not np.ndarray or wq.ndim != 2 or wv.ndim != 2:
        return False
    d_k, d_v = wq.shape[1], wv.shape[1]
    expected = {"wq": (d_model, d_k), "wk": (d_model, d_k), "wv": (d_model, d_v), "wo": (d_v, d_model),
                "bq": (d_k,), "bk": (d_k,), "bv": (d_v,)}
    for h in heads:
        h = raw(h)
        if type(h) is not Record:
            return False
        fields = h.fields
        if "wq" not in fields or "wk" not in fields or "wv" not in fields or "wo" not in fields:
            return False
        for name, v in fields.items():
            v = raw(v)
            if type(v) is not np.ndarray or v.shape != expected.get(name):
                return False
    return True


def check_heads(heads, d_model: int, path: str = "heads"):
    """Check a tuple of head records against the model width; every head must have the width
    (d_k, d_v) of the first. Errors name the path and both shapes."""
    r = raw(heads)
    if not isinstance(r, tuple) or not r:
        raise TypeErr(f"{path} must be a non-empty tuple of head records {{{HEAD_FIELDS}}}, got {describe(heads)}")
    if _heads_well_formed(r, d_model):
        return r
    d_k = d_v = None
    for i, h in enumerate(r):
        hp = f"{path}[{i}]"
        for f in ("wq", "wk", "wv", "wo"):
            need_field(h, f, hp, HEAD_FIELDS)
        fields = raw(h).fields
        if "bo" in fields:
            raise ValueErr(f"{hp}.bo: the output bias is one vector for all heads (PyTorch's out_proj.bias), "
                           f"so it is not stored in a head: put it in the block's weights.bo, or pass "
                           f"multi_head_attention(..., bo=)")
        extra = [k for k in fields if k not in HEAD_ALLOWED]
        if extra:
            raise ValueErr(f"{hp} has an unknown field '{extra[0]}' (a head has {HEAD_FIELDS})")
        if d_k is None:
            d_k = _schema_matrix(fields["wq"], f"{hp}.wq", d_model, "d_k")
            d_v = _schema_matrix(fields["wv"], f"{hp}.wv", d_model, "d_v")
        schema_shape(fields["wq"], f"{hp}.wq", (d_model, d_k))
        schema_shape(fields["wk"], f"{hp}.wk", (d_model, d_k))
        schema_shape(fields["wv"], f"{hp}.wv", (d_model, d_v))
        schema_shape(fields["wo"], f"{hp}.wo", (d_v, d_model))
        for b, n in (("bq", d_k), ("bk", d_k), ("bv", d_v)):
            if b in fields:
                schema_shape(need_field(h, b, hp, HEAD_FIELDS), f"{hp}.{b}", (n,))
    return r


# ---- dropout and the activations the block offers -----------------------------------------
def apply_dropout(x, p: float, training: bool):
    """Inverted dropout: x * mask / (1 - p), mask true with probability 1 - p, drawn from the
    language's seeded generator. The mask is a constant of the mul primitive, so the gradient
    is g * mask / (1 - p). Identity (the same value, no draw) when not training or p = 0."""
    if not training or p == 0:
        return x
    from tapeml.builtins.random import bernoulli_mask
    keep = 1.0 - p
    s = _shape(x)
    scale = bernoulli_mask(s, keep) / keep
    return ops.mul(x, float(scale) if not s else scale)


def dropout_range(v):
    return None if 0 <= v < 1 else "must be >= 0 and < 1"


def at_least_one(v):
    return None if v >= 1 else "must be >= 1"


@builtin("dropout", CAT, "Inverted dropout: zero each element with probability p, scale the rest by 1 / (1 - p).",
         [P("x", "array", shape="any"),
          P("p", "number", 0.5, doc="probability of zeroing an element", check=dropout_range,
            constraint=">= 0 and < 1"),
          P("training", "bool", True, doc="false returns x unchanged (evaluation mode)")],
         returns="same shape as x", differentiable=True,
         what="Regularization for training: each element survives with probability 1 - p and is then "
              "divided by 1 - p, so the expected value of every element is unchanged and evaluation "
              "needs no rescaling.",
         how="y = x * m / (1 - p) with m ~ Bernoulli(1 - p) elementwise (Srivastava et al. 2014, in the "
             "'inverted' form PyTorch's nn.Dropout uses). The mask comes from the seeded generator "
             "(`seed(n)`) and is a constant of the mul primitive: the gradient is g * m / (1 - p). "
             "With training = false or p = 0 the input is returned exactly, with no random draw.",
         errors=["ValueError when p is not in [0, 1)"],
         examples=["seed(0)\ndropout(ones(8), 0.5)", "dropout([1, 2, 3], 0.5, training=false)",
                   "seed(1)\nabs(mean(dropout(ones(100000), 0.3)) - 1) < 0.01"])
def dropout(x, p, training):
    return apply_dropout(x, p, training)


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh_(x):
    inner = ops.mul(SQRT_2_OVER_PI, ops.add(x, ops.mul(0.044715, ops.mul(x, ops.mul(x, x)))))
    return ops.mul(ops.mul(0.5, x), ops.add(1.0, ops.tanh(inner)))


def silu_(x):
    return ops.mul(x, ops.sigmoid(x))


def quick_gelu_(x):
    return ops.mul(x, ops.sigmoid(ops.mul(1.702, x)))


@builtin("gelu_tanh", CAT, "The tanh approximation of gelu (GPT-2's activation).",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         what="gelu with tanh in place of erf, the activation GPT-2 and the original BERT code use; it is "
              "within 5e-4 of gelu everywhere.",
         errors=["TypeError when x is not a number or matrix"],
         how="gelu_tanh(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016, "
             "eq. 2; PyTorch's gelu(approximate='tanh')). A composite of mul, add and tanh: its gradient "
             "comes from theirs.",
         examples=["round(gelu_tanh([-1, 0, 1]), 6)", "abs(gelu_tanh(1) - gelu(1)) < 1e-3"])
def gelu_tanh(x):
    return gelu_tanh_(x)


@builtin("silu", CAT, "Sigmoid linear unit x * sigmoid(x), also called swish.",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         what="x gated by its own sigmoid: close to relu for large |x| but smooth, and slightly negative for "
              "negative x (the minimum is about -0.28, near x = -1.28). The gate of LLaMA's SwiGLU feed-forward.",
         errors=["TypeError when x is not a number or matrix"],
         how="silu(x) = x * sigmoid(x) (Elfwing et al. 2018; Ramachandran et al. 2017 'swish'; PyTorch's "
             "nn.SiLU). A composite of mul and sigmoid.",
         examples=["round(silu([-1, 0, 1]), 6)"])
def silu(x):
    return silu_(x)


@builtin("quick_gelu", CAT, "The sigmoid approximation of gelu: x * sigmoid(1.702 x) (CLIP's activation).",
         [P("x", "array", shape="any")], returns="same shape as x", differentiable=True,
         what="A cheaper stand-in for gelu, x times a steepened sigmoid, used by OpenAI's CLIP; it stays within "
              "about 0.02 of gelu.",
         errors=["TypeError when x is not a number or matrix"],
         how="quick_gelu(x) = x * sigmoid(1.702 x) (Hendrycks & Gimpel 2016, §2; OpenAI CLIP's QuickGELU). "
             "A composite of mul and sigmoid.",
         examples=["round(quick_gelu([-1, 0, 1]), 6)"])
def quick_gelu(x):
    return quick_gelu_(x)


ACTIVATIONS = {"relu": ops.relu, "gelu": ops.gelu, "gelu_tanh": gelu_tanh_, "silu": silu_,
               "quick_gelu": quick_gelu_}
NORMS = ("layer_norm", "rms_norm")


@builtin("rms_norm", CAT, "Divide each row (last axis) by its root mean square, then scale.",
         [P("x", "array", shape="[..., D]"), P("gamma", "array", shape="[D]", doc="gain"),
          P("eps", "number", 1e-5, doc="added to the mean square inside the square root (0 allowed: a row "
                                       "of zeros then gives zeros)", check=non_negative, constraint=">= 0")],
         returns="[..., D]", differentiable=True,
         what="Root-mean-square normalization: like layer_norm without centering and without a bias; "
              "the normalization of LLaMA-style decoders.",
         how="y = x / sqrt(mean(x^2) + eps) * gamma over the last axis (Zhang & Sennrich 2019; PyTorch's "
             "nn.RMSNorm). The mean square is accumulated in float64. One primitive with a VJP written with "
             "primitives: dx = r (g gamma - xhat mean(g gamma xhat)), xhat = x r, r = 1/sqrt(mean(x^2) + eps). "
             "A row whose mean square would overflow or underflow is computed scaled by a power of 2, so "
             "the result stays finite wherever it is representable. With eps = 0 a row of zeros gives "
             "zeros, with gradient 0.",
         errors=["ShapeError when gamma is not a vector of length D", "ValueError when eps < 0"],
         examples=["rms_norm([3, 4], [1, 1])", "round(rms_norm([1, 2; 3, 4], [1, 2]), 4)",
                   "rms_norm([0, 0; 3e200, 4e200], [1, 1], eps=0)"])
def rms_norm(x, gamma, eps):
    d = _last_dim(x, "rms_norm")
    need_shape(gamma, "rms_norm(): gamma", (d,))
    return ops.rms_norm(x, gamma, eps=eps)


# ---- multi-head attention ---------------------------------------------------------------------
def _attend(q, k, v, causal, p, training, mask=None, weights=False):
    """sdpa, or, when attention dropout is active or the weights are wanted, the same computation
    composed from primitives with dropout applied to the attention weights (as PyTorch's
    MultiheadAttention does); with weights = true, (output, the weights the values were averaged with)."""
    if not weights and (not training or p == 0):
        return attention(q, k, v, mask, causal=causal)
    lq, lk = _shape(q)[-2], _shape(k)[-2]
    s = ops.mul(ops.matmul(q, ops.transpose(k)), 1.0 / math.sqrt(_shape(q)[-1]))
    allowed = np.tril(np.ones((lq, lk), dtype=bool), k=lk - lq) if causal else None
    if mask is not None:
        allowed = raw(mask) if allowed is None else (allowed & raw(mask))
    w = apply_dropout(ops.masked_softmax(s, allowed=allowed), p, training)
    out = ops.matmul(w, v)
    return (out, w) if weights else out


FUSE_MIN_ELEMENTS = 1024     # T x D from which joining the heads pays for its extra tape nodes


def _fusable(fields) -> bool:
    """Heads of one shape and the same biases can run as one batched attention."""
    if len(fields) < 2:
        return False
    first = fields[0]
    shapes = {k: _shape(first[k]) for k in ("wq", "wv")}
    present = {b for b in ("bq", "bk", "bv") if b in first}
    return all({k: _shape(f[k]) for k in ("wq", "wv")} == shapes and
               {b for b in ("bq", "bk", "bv") if b in f} == present for f in fields[1:])


def _split_heads(t, n_heads):
    """[..., T, H*d] -> [..., H, T, d]"""
    s = _shape(t)
    t = ops.reshape(t, shape=s[:-1] + (n_heads, s[-1] // n_heads))
    nd = len(s) + 1
    return ops.permute(t, axes=tuple(range(nd - 3)) + (nd - 2, nd - 3, nd - 1))


def _merge_heads(t):
    """[..., H, T, d] -> [..., T, H*d]"""
    s = _shape(t)
    nd = len(s)
    t = ops.permute(t, axes=tuple(range(nd - 3)) + (nd - 2, nd - 3, nd - 1))
    return ops.reshape(t, shape=s[:-3] + (s[-2], s[-3] * s[-1]))


_JOINED: dict = {}      # (dim, ids of the parts) -> (weak references to the parts, joined)


def _joined_untracked(parts, dim):
    """concat(*parts, dim) for untracked weights, remembered: inference calls the block again and
    again with the same weight matrices (generation, evaluation), and matrices are never
    changed in place, so the same parts always join to the same matrix. An entry lives as long
    as its parts: the first of them to be freed removes it, and a hit needs every part to be the
    very object it was (an id can be reused only after its object is gone)."""
    key = (dim,) + tuple(map(id, parts))
    hit = _JOINED.get(key)
    if hit is not None and all(ref() is p for ref, p in zip(hit[0], parts)):
        return hit[1]
    out = ops.concat(*parts, dim=dim)

    def forget(_ref, key=key):
        _JOINED.pop(key, None)
    try:
        _JOINED[key] = (tuple(weakref.ref(p, forget) for p in parts), out)
    except TypeError:       # a part that takes no weak reference: not remembered
        pass
    return out


def _mha_fused(x, fields, causal, src=None, mask=None):
    """All heads at once: one projection each for q, k, v (the heads' matrices side by side),
    one batched attention over [..., H, T, d], one output projection. The same sum over heads
    as the loop, with larger matrix products; still only primitives. Keys and values come
    from src (the memory of cross-attention; x itself by default)."""
    n = len(fields)
    src = x if src is None else src
    if mask is not None and raw(mask).ndim == 3:
        mask = raw(mask)[:, None]           # [B, T, S] -> [B, 1, T, S], one mask for every head

    def joined(name, dim):
        parts = [f[name] for f in fields]
        if any(type(p) is Box for p in parts):
            return ops.concat(*parts, dim=dim)
        return _joined_untracked(parts, dim)

    def bias(name):
        return joined(name, 0) if name in fields[0] else None
    q = _split_heads(ops.dense(x, joined("wq", 1), bias("bq")), n)
    k = _split_heads(ops.dense(src, joined("wk", 1), bias("bk")), n)
    v = _split_heads(ops.dense(src, joined("wv", 1), bias("bv")), n)
    return ops.dense(_merge_heads(attention(q, k, v, mask, causal=causal)), joined("wo", 0))


def mha(x, heads, causal=False, p=0.0, training=False, bo=None, memory=None, mask=None, weights=False):
    """sum over heads of attention(x wq + bq, m wk + bk, m wv + bv) wo, plus bo, with m = memory
    (cross-attention) or x (self-attention): composed from primitives (dense, sdpa or
    softmax/matmul with dropout, add); no gradient rule of its own. With weights = true,
    (output, the heads' attention weights stacked as [..., H, T, S])."""
    fields = [raw(h).fields for h in heads]
    s = _shape(x)
    src = x if memory is None else memory
    # Joining costs a few more tape nodes; it pays when the products are large enough.
    if (not weights and not (training and p > 0) and s[-2] * s[-1] >= FUSE_MIN_ELEMENTS
            and _fusable(fields)):
        out = _mha_fused(x, fields, causal, src, mask)
        return ops.add(out, bo) if bo is not None else out
    out = None
    ws = []
    for h in heads:
        f = raw(h).fields
        q = ops.dense(x, f["wq"], f.get("bq"))
        k = ops.dense(src, f["wk"], f.get("bk"))
        v = ops.dense(src, f["wv"], f.get("bv"))
        a = _attend(q, k, v, causal, p, training, mask, weights)
        if weights:
            a, w = a
            ws.append(w)
        o = ops.dense(a, f["wo"])
        out = o if out is None else ops.add(out, o)
    out = ops.add(out, bo) if bo is not None else out
    return (out, ops.stack(*ws, dim=-3)) if weights else out


def check_memory(memory, xs: tuple, fname: str, name: str = "memory"):
    """The memory of cross-attention against x's shape xs: S x D for an unbatched x, B x S x D for
    a batched one, with x's width D and batch B, and at least one position."""
    ms = _shape(memory)
    want = "S x D" if len(xs) == 2 else f"{xs[0]} x S x D"
    if len(ms) != len(xs):
        raise ShapeError(f"{fname}: x is {shape_text(xs)}, so {name} must be {want} (positions x "
                         f"features{', batch first' if len(xs) == 3 else ''}), got {describe(memory)}")
    if ms[-1] != xs[-1]:
        raise ShapeError(f"{fname}: x has {xs[-1]} features but {name} has {ms[-1]} (x is {shape_text(xs)}, "
                         f"{name} is {shape_text(ms)}): cross-attention needs {name}'s width, its last "
                         f"axis, to equal x's")
    if len(xs) == 3 and ms[0] != xs[0]:
        raise ShapeError(f"{fname}: x is a batch of {xs[0]} and {name} a batch of {ms[0]} (x is "
                         f"{shape_text(xs)}, {name} is {shape_text(ms)}): they must be equal")
    if ms[-2] == 0:
        raise ShapeError(f"{fname}: {name} has no positions ({shape_text(ms)}): there is nothing to attend to")


def check_mask(mask, xs: tuple, n_keys: int, fname: str, name: str = "mask"):
    """A 'may attend' mask for queries x (shape xs) over n_keys keys: a bool T x S matrix, or
    B x T x S for a batched x."""
    m = raw(mask)
    if not (isinstance(m, np.ndarray) and m.dtype == np.bool_):
        raise TypeErr(f"{fname}: {name} must be a bool matrix (true = may attend), got {describe(mask)}")
    t = xs[-2]
    ok = m.shape == (t, n_keys) or (len(xs) == 3 and m.shape == (xs[0], t, n_keys))
    if not ok:
        want = f"{t}x{n_keys}" + (f" or {xs[0]}x{t}x{n_keys}" if len(xs) == 3 else "")
        raise ShapeError(f"{fname}: {name} is {shape_text(m.shape)}, expected {want} (queries x keys"
                         f"{'; one per batch element first' if len(xs) == 3 else ''})")


_DROPOUT = P("dropout", "number", 0.0, doc="probability of dropping an attention weight (training only)",
             check=dropout_range, constraint=">= 0 and < 1")
_TRAINING = P("training", "bool", False, doc="apply dropout (true) or not (false, evaluation)")


# The cross-attention example of the multi_head_attention and transformer_decoder_block pages: a
# decoder whose queries are built to find the source position T - 1 - t (reversal).
CROSS_ATTENTION_EXAMPLE = (
    "S = 6\nt = (0:S - 1)'\n"
    "pos = [sin(t), cos(t), sin(t / 2), cos(t / 2)]   # 4 features per position\n"
    "memory = 3 * pos                                 # an encoder's output: source positions 0..5\n"
    "x = 3 * pos[S - 1:-1:0, :]                       # decoder position i looks like source S-1-i\n"
    "eye4 = eye(4)\nhead = {wq = eye4, wk = eye4, wv = eye4, wo = eye4}\n"
    "y, w = multi_head_attention(x, (head,), 1, memory=memory, return_weights=true)\n"
    "print(size(y), size(w))\n"
    "round(w[0, 0, :], 3)\n"
    "imshow(w[0, :, :])\n"
    'title("cross-attention weights: decoder position i reads source S-1-i")\n'
    'xlabel("source position (memory)")\nylabel("decoder position (x)")')


@builtin("multi_head_attention", CAT, "Self-attention with several heads: sum over heads of sdpa(x wq, x wk, x wv) wo.",
         [P("x", "array", shape="[T, D] or [B, T, D]", doc="the sequence, one row per position"),
          P("heads", "tuple", doc="a tuple of records {wq, wk, wv, wo} (wq, wk: D x d_k; wv: D x d_v; "
                                  "wo: d_v x D), each optionally with biases bq, bk [d_k] and bv [d_v]"),
          P("n_heads", "int", doc="must equal len(heads)"),
          P("causal", "bool", False, doc="each position attends only to itself and earlier ones"),
          _DROPOUT, _TRAINING,
          P("bo", "array", None, shape="[D]", doc="the one output bias, added after the heads are summed"),
          P("memory", "array", None, shape="[S, D] or [B, S, D]",
            doc="keys and values come from memory instead of x (cross-attention); none: self-attention"),
          P("mask", "array", None, shape="[T, S] or [B, T, S]",
            doc="bool, true = may attend (PyTorch's boolean attn_mask means the opposite)"),
          P("return_weights", "bool", False,
            doc="also return the attention weights, [H, T, S] or [B, H, T, S]")],
         returns="same shape as x; with return_weights, a tuple (output, weights)", differentiable=True,
         what="Runs one scaled_dot_product_attention per head on projections of x and adds up the heads' "
              "projected outputs. With one identity head it is plain self-attention. With memory = m "
              "it is cross-attention, the encoder-decoder attention of the 2017 Transformer: the "
              "queries come from x (T positions) and the keys and values from m (S positions), so "
              "each of x's positions reads a weighted average of m's; the output still has x's shape.",
         how="MultiHead(x) = sum_h Attention(x Wq_h + bq_h, x Wk_h + bk_h, x Wv_h + bv_h) Wo_h + bo "
             "(Vaswani et al. 2017, §3.2.2; the sum over heads equals Concat(head_1..head_h) W^O with W^O "
             "split by rows). Layout against PyTorch's nn.MultiheadAttention: wq_h = in_proj_weight[h*d_k:"
             "(h+1)*d_k]' (likewise wk, wv from the next D rows), bq_h = in_proj_bias[h*d_k:(h+1)*d_k], "
             "wo_h = out_proj.weight[:, h*d_v:(h+1)*d_v]', and bo = out_proj.bias — one vector, which is "
             "why it is an argument here and the field weights.bo of a transformer_block record, not a "
             "field of each head. With training = true and dropout = p the attention weights go through "
             "inverted dropout (as PyTorch's dropout inside MultiheadAttention). A composite: built from "
             "dense and scaled_dot_product_attention, it has no gradient rule of its own.\n\n"
             "memory = m gives PyTorch's MultiheadAttention(query = x, key = m, value = m): q = x wq_h + "
             "bq_h, k = m wk_h + bk_h, v = m wv_h + bv_h. causal = true with a memory keeps the "
             "bottom-right rule of scaled_dot_product_attention: query i sees keys j <= i + S - T. "
             "mask is a bool T x S matrix (or B x T x S, one per batch element) where true means "
             "'may attend', as in scaled_dot_product_attention and PyTorch's F.scaled_dot_product_attention; "
             "PyTorch's nn.MultiheadAttention and nn.Transformer* read a boolean attn_mask the other way "
             "round (true = masked out), so pass ~their_mask. mask and causal combine (both must allow "
             "a pair); a query row with every key masked gives zeros. return_weights = true returns "
             "(output, weights) with the weights of every head, [H, T, S] or [B, H, T, S] (PyTorch's "
             "need_weights with average_attn_weights = False; mean(w, 0) averages the heads): each row "
             "sums to 1, or is all zeros when every key is masked. In training with dropout they are "
             "the weights after dropout, the ones the values were averaged with, as PyTorch returns.",
         errors=["ValueError when n_heads differs from len(heads)",
                 "ValueError naming the path and both shapes when a head is missing a field or a field "
                 "has the wrong shape (heads[1].wq is 4x3, expected 4x2)",
                 "ValueError when dropout is not in [0, 1)",
                 "ShapeError when memory's width differs from x's, or its batch size does",
                 "TypeError when mask is not a bool matrix; ShapeError when it is not T x S (or B x T x S)"],
         examples=["eye2 = [1.0, 0.0; 0.0, 1.0]\nhead = {wq = eye2, wk = eye2, wv = eye2, wo = eye2}\n"
                   "q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\nmulti_head_attention(q, (head,), 1)",
                   "eye2 = [1.0, 0.0; 0.0, 1.0]\nhead = {wq = eye2, wk = eye2, wv = eye2, wo = eye2}\n"
                   "x = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\n"
                   "round(multi_head_attention(x, (head,), 1, causal=true, bo=[0.5, 0]), 3)",
                   "t = (0:7)'\nx = [sin(t), cos(t), sin(t / 3), cos(t / 3)]\n"
                   "a = [1, 0; 0, 1; 0, 0; 0, 0]  # head 0 looks at the fast features\n"
                   "b = [0, 0; 0, 0; 1, 0; 0, 1]  # head 1 at the slow ones\n"
                   "heads = ({wq = a, wk = a, wv = a, wo = a'}, {wq = b, wk = b, wv = b, wo = b'})\n"
                   "y = multi_head_attention(x, heads, 2, causal=true)\nprint(size(y))\n"
                   "figure(width=8, height=3)\nsubplot(1, 2, 0)\n"
                   "imshow(scaled_dot_product_attention(x @ a, x @ a, eye(8), causal=true))\n"
                   'title("head 0 weights")\nsubplot(1, 2, 1)\n'
                   "imshow(scaled_dot_product_attention(x @ b, x @ b, eye(8), causal=true))\n"
                   'title("head 1 weights")',
                   CROSS_ATTENTION_EXAMPLE,
                   "heads = transformer_block_init(4, 2, seed=0).heads\nx = reshape(0:23, 2, 3, 4) / 10\n"
                   "m = reshape(0:39, 2, 5, 4) / 20\n"
                   "# memory 1 has 3 real positions and 2 of padding: its queries may not read the padding\n"
                   "mask = ((0:4) < reshape([5, 3], 2, 1, 1)) and (ones(2, 3, 5) > 0)   # 2 x 3 x 5\n"
                   "y, w = multi_head_attention(x, heads, 2, memory=m, mask=mask, return_weights=true)\n"
                   "print(size(y), size(w))\nround(w[1, 0, :, :], 3)   # batch element 1, head 0"])
def multi_head_attention(x, heads, n_heads, causal, dropout, training, bo, memory, mask, return_weights):
    if n_heads != len(raw(heads)):
        raise ValueErr(f"multi_head_attention(): n_heads is {n_heads} but heads has {len(raw(heads))} "
                       f"record{'s' * (len(raw(heads)) != 1)}; they must be equal")
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"multi_head_attention(): x must be T x D (or B x T x D), got {describe(x)}")
    if memory is not None:
        if len(s) > 3:
            raise ShapeError(f"multi_head_attention(): with a memory, x must be T x D or B x T x D, got {describe(x)}")
        check_memory(memory, s, "multi_head_attention()")
    n_keys = _shape(memory)[-2] if memory is not None else s[-2]
    if mask is not None:
        check_mask(mask, s[-3:], n_keys, "multi_head_attention()")
    check_heads(heads, s[-1])
    if bo is not None:
        schema_shape(bo, "bo", (s[-1],))
    return mha(x, raw(heads), causal, dropout, training, bo, memory, mask, return_weights)


# ---- the transformer block ----------------------------------------------------------------------
BLOCK_FIELDS = "heads, ln1_gamma, ln1_beta, w1, b1, w2, b2, ln2_gamma, ln2_beta"
BLOCK_OPTIONAL = ("bo", "gamma1", "gamma2")


def check_block(weights, d: int, norm: str) -> dict:
    """Check a transformer_block weights record against the model width d; return its fields.

    Layout: heads (tuple of head records), optional bo [D]; ln1_gamma, ln2_gamma [D]; w1 [D, H],
    w2 [H, D]; the biases b1 [H], b2 [D] and (layer_norm only) ln1_beta, ln2_beta [D] are all
    present or all absent (PyTorch's bias=False); optional layer scale gamma1, gamma2 [D], both or
    neither. rms_norm records have no ln*_beta. Unknown fields are errors (they catch typos)."""
    w = raw(weights)
    fields = w.fields
    betas = ("ln1_beta", "ln2_beta")
    if norm == "rms_norm":
        for b in betas:
            if b in fields:
                raise ValueErr(f"weights.{b}: an rms_norm block has no norm bias; remove the field "
                               f"or use norm=\"layer_norm\"")
        needed = "heads, ln1_gamma, w1, b1, w2, b2, ln2_gamma"
        bias_names = ("b1", "b2")
    else:
        needed = BLOCK_FIELDS
        bias_names = ("ln1_beta", "b1", "b2", "ln2_beta")
    allowed = ("heads", "ln1_gamma", "w1", "w2", "ln2_gamma") + bias_names + BLOCK_OPTIONAL
    extra = [k for k in fields if k not in allowed]
    if extra:
        raise ValueErr(f"weights has an unknown field '{extra[0]}' (a {norm} block has {needed}, "
                       f"and optionally bo, gamma1, gamma2)")
    if "heads" not in fields:
        raise ValueErr(f"weights is missing the field 'heads' (it needs {needed})")
    g1 = raw(fields.get("ln1_gamma"))
    if isinstance(g1, np.ndarray) and g1.ndim == 1 and g1.shape[0] != d:
        raise ShapeError(f"x has {d} features (its last axis) but the weights are for d_model "
                         f"{g1.shape[0]} (weights.ln1_gamma has length {g1.shape[0]})")
    check_heads(fields["heads"], d, "weights.heads")
    for name in ("ln1_gamma", "ln2_gamma"):
        schema_shape(need_field(w, name, "weights", needed), f"weights.{name}", (d,))
    hidden = _schema_matrix(need_field(w, "w1", "weights", needed), "weights.w1", d, "hidden")
    schema_shape(need_field(w, "w2", "weights", needed), "weights.w2", (hidden, d))
    present = [b for b in bias_names if b in fields]
    if norm == "layer_norm" and not any(b in fields for b in betas) and all(b in fields for b in ("b1", "b2")):
        raise ValueErr("weights has no ln1_beta/ln2_beta but has b1, b2: these look like rms_norm weights; "
                       "pass norm=\"rms_norm\" (or add the layer-norm biases)")
    if present and len(present) < len(bias_names):
        missing = next(b for b in bias_names if b not in fields)
        raise ValueErr(f"weights is missing the field '{missing}': it has {', '.join(present)}, and a "
                       f"{norm} block has all of {', '.join(bias_names)} or none of them (bias-free)")
    for b in present:
        schema_shape(need_field(w, b, "weights", needed), f"weights.{b}", (hidden if b == "b1" else d,))
    if "bo" in fields:
        schema_shape(need_field(w, "bo", "weights", needed), "weights.bo", (d,))
    ls = [g for g in ("gamma1", "gamma2") if g in fields]
    if len(ls) == 1:
        other = "gamma2" if ls[0] == "gamma1" else "gamma1"
        raise ValueErr(f"weights is missing the field '{other}': layer scale needs both gamma1 "
                       f"(attention branch) and gamma2 (feed-forward branch), or neither")
    for g in ls:
        schema_shape(need_field(w, g, "weights", needed), f"weights.{g}", (d,))
    return fields


def block(x, f, norm_first=False, norm="layer_norm", causal=False, activation="relu", p=0.0,
          training=False, eps=1e-5, mask=None):
    """The block on checked fields `f`, composed from primitives (no gradient rule of its own)."""
    act = ACTIVATIONS[activation]

    def normed(h, i):
        if norm == "rms_norm":
            return ops.rms_norm(h, f[f"ln{i}_gamma"], eps=eps)
        return ops.layer_norm(h, f[f"ln{i}_gamma"], f.get(f"ln{i}_beta"), eps=eps)

    def scaled(h, name):
        return ops.mul(h, f[name]) if name in f else h

    def attn(h):
        return scaled(mha(h, raw(f["heads"]), causal, p, training, f.get("bo"), mask=mask), "gamma1")

    def ffn(h):
        hidden = apply_dropout(act(ops.dense(h, f["w1"], f.get("b1"))), p, training)
        return scaled(ops.dense(hidden, f["w2"], f.get("b2")), "gamma2")

    if norm_first:
        h = ops.add(x, attn(normed(x, 1)))
        return ops.add(h, ffn(normed(h, 2)))
    h = normed(ops.add(x, attn(x)), 1)
    return normed(ops.add(h, ffn(h)), 2)


# The seed page's program: the transformer_block page's first example; its output is the golden
# output (examples/seed_statistics_ml.ml, tests/golden).
SEED_PROGRAM = (
    'x = [1.0, 2.0, 3.0; 10.0, 20.0, 30.0]\n'
    'normed = layer_norm(x, [1.0, 1.0, 1.0], [0.0, 0.0, 0.0])\n'
    'print("layer_norm (scale-invariant per row): {normed}")\n'
    '\n'
    'q = [1.0, 0.5; -0.5, 1.0; 0.2, -0.3]\n'
    'k = [1.0, 0.0; 0.0, 1.0; 0.5, 0.5]\n'
    'v = [1.0, 2.0; 3.0, 4.0; 5.0, 6.0]\n'
    'attn = scaled_dot_product_attention(q, k, v)\n'
    'print("attention output: {round(attn, 3)}")\n'
    '\n'
    'eye2 = [1.0, 0.0; 0.0, 1.0]\n'
    'head = {wq = eye2, wk = eye2, wv = eye2, wo = eye2}\n'
    'mh = multi_head_attention(q, (head,), 1)\n'
    'plain = scaled_dot_product_attention(q, q, q)\n'
    'print("multi_head_attention with 1 identity head matches plain self-attention: {sum(abs(mh - plain)) < 1e-9}")\n'
    '\n'
    'weights = {heads = (head,), ln1_gamma = [1.0, 1.0], ln1_beta = [0.0, 0.0],\n'
    '           w1 = [0.2, -0.1; 0.1, 0.3], b1 = [0.0, 0.0],\n'
    '           w2 = [0.1, -0.2; 0.3, 0.1], b2 = [0.0, 0.0],\n'
    '           ln2_gamma = [1.0, 1.0], ln2_beta = [0.0, 0.0]}\n'
    'block_out = transformer_block(q, weights)\n'
    'print("transformer_block: {round(block_out, 3)}")')


_ACTIVATION_NAMES = ("relu", "gelu", "gelu_tanh", "silu", "quick_gelu")


@builtin("transformer_block", CAT, "One Transformer encoder block: attention and a feed-forward, each with a "
         "residual add and a normalization (post-norm by default, pre-norm with norm_first).",
         [P("x", "array", shape="[T, D] or [B, T, D]"),
          P("weights", "record", doc="a record with heads, ln1_gamma, ln1_beta, w1, b1, w2, b2, ln2_gamma, "
                                     "ln2_beta (optional bo, gamma1, gamma2); transformer_block_init makes one"),
          P("norm_first", "bool", False, doc="pre-norm (true) or the original post-norm (false)"),
          P("norm", "string", "layer_norm", doc="the normalization", check=one_of(*NORMS),
            constraint='one of "layer_norm", "rms_norm"'),
          P("causal", "bool", False, doc="position t attends only to positions <= t"),
          P("activation", "string", "relu", doc="the feed-forward nonlinearity",
            check=one_of(*_ACTIVATION_NAMES), constraint="one of " + ", ".join(f'"{a}"' for a in _ACTIVATION_NAMES)),
          P("dropout", "number", 0.0, doc="dropout on the attention weights and after the feed-forward "
                                          "activation (training only)", check=dropout_range,
            constraint=">= 0 and < 1"),
          P("training", "bool", False, doc="apply dropout (true) or not (false, evaluation)"),
          P("eps", "number", 1e-5, doc="epsilon of both normalizations", check=positive, constraint="> 0"),
          P("mask", "array", None, shape="[T, T] or [B, T, T]",
            doc="bool, true = may attend (e.g. a padding mask); combined with causal")],
         returns="same shape as x", differentiable=True,
         what="One transformer block on a T x D input (or a batch B x T x D): multi-head self-attention "
              "plus a two-layer feed-forward network, each wrapped in a residual connection and a "
              "normalization. weights.heads is the tuple multi_head_attention takes (n_heads is its "
              "length); ln1_*/ln2_* are the two norms' gains and biases; w1, b1, w2, b2 the feed-forward "
              "layers; bo the attention output bias; gamma1/gamma2 the layer-scale gains. "
              "transformer_block_init makes such a record; param_count and summary count it.",
         how="Post-norm (default; Vaswani et al. 2017, §3.1, PyTorch's nn.TransformerEncoderLayer "
             "with norm_first=False):\n\n"
             "    h   = norm1(x + ls1 * attn(x))\n"
             "    out = norm2(h + ls2 * ffn(h))\n\n"
             "Pre-norm (norm_first = true; Xiong et al. 2020, GPT-2, ViT):\n\n"
             "    h   = x + ls1 * attn(norm1(x))\n"
             "    out = h + ls2 * ffn(norm2(h))\n\n"
             "with attn = multi_head_attention(., heads, causal, dropout, training, bo), "
             "ffn(h) = dense(drop(act(dense(h, w1, b1))), w2, b2), norm = layer_norm (gain ln*_gamma, bias "
             "ln*_beta) or rms_norm (gain only), and ls1, ls2 the layer-scale vectors gamma1, gamma2 "
             "when the record has them (CaiT, Touvron et al. 2021), else 1. mask is the self-attention's "
             "'may attend' matrix, as multi_head_attention's (true = may attend; PyTorch's boolean "
             "src_mask means the opposite): a T x T matrix, or B x T x T for a batch of sequences of "
             "different lengths padded to T. Dropout acts on the attention "
             "weights and after the activation, only with training = true, drawing from seed(n)'s "
             "generator. A composite of recorded primitives: its gradient comes from the tape's "
             "ordinary reverse walk, with no rule of its own; checked against PyTorch 2.13 to 1e-10 "
             "(tests/test_parity.py).",
         errors=["ValueError naming the path of a missing or unknown field",
                 "ValueError naming the path and both shapes (weights.heads[1].wq is 4x3, expected 4x2)",
                 'ValueError when norm or activation is not one of the allowed names (they are listed)',
                 "ValueError when dropout is not in [0, 1) or eps <= 0",
                 "TypeError when mask is not a bool matrix; ShapeError when it is not T x T (or B x T x T)"],
         examples=[SEED_PROGRAM,
                   "w = transformer_block_init(8, 2, seed=0)\nx = reshape(0:47, 2, 3, 8) / 10\n"
                   "y = transformer_block(x, w, norm_first=true, causal=true, activation=\"gelu\")\nsize(y)",
                   "# two sequences padded to T = 4: the first has 4 tokens, the second 2\n"
                   "w = transformer_block_init(8, 2, seed=0)\nseed(1)\nx = randn(2, 4, 8)\n"
                   "lengths = [4, 2]\nkeys = (0:3) < reshape(lengths, 2, 1, 1)   # 2 x 1 x 4: which keys are real\n"
                   "mask = keys and (ones(2, 4, 4) > 0)              # 2 x 4 x 4, every query row alike\n"
                   "y = transformer_block(x, w, mask=mask)\n"
                   "# the second sequence's real tokens ignore its padding:\n"
                   "alone = transformer_block(x[1, 0:1, :], w)\nmax(abs(y[1, 0:1, :] - alone)) < 1e-12"])
def transformer_block(x, weights, norm_first, norm, causal, activation, dropout, training, eps, mask):
    s = _shape(x)
    if len(s) < 2:
        raise ShapeError(f"transformer_block(): x must be T x D (or B x T x D), got {describe(x)}")
    if mask is not None:
        check_mask(mask, s[-3:], s[-2], "transformer_block()")
    f = check_block(weights, s[-1], norm)
    return block(x, f, norm_first, norm, causal, activation, dropout, training, eps, mask)


def need_tuple(w, name):
    if name not in w.fields:
        raise ValueErr(f"weights is missing the field '{name}' (it needs {BLOCK_FIELDS})")
    return w.fields[name]


# ---- making and counting weights ----------------------------------------------------------------
def _uniform(gen, bound, shape):
    from tapeml import limits
    limits.check_elements(f"transformer_block_init(): a weight of {' x '.join(map(str, shape))}", shape)
    return gen.uniform(-bound, bound, shape)


def _init_generator(seed):
    from tapeml.builtins.random import rng
    return np.random.default_rng(seed) if seed is not None else rng()


def _init_heads(gen, d, n_heads, bias):
    """One nn.MultiheadAttention(d, n_heads) as head records: the packed in_proj_weight [3D, D]
    xavier_uniform, out_proj.weight [D, D] kaiming_uniform(a = sqrt(5)), drawn in that order,
    split by rows and heads and transposed; in_proj_bias zeros (bq, bk, bv when bias)."""
    dk = d // n_heads
    in_proj = _uniform(gen, math.sqrt(6.0 / (d + 3 * d)), (3 * d, d))      # xavier_uniform_
    out_proj = _uniform(gen, 1.0 / math.sqrt(d), (d, d))                  # kaiming_uniform_(a=sqrt(5))
    heads = []
    for h in range(n_heads):
        rows = slice(h * dk, (h + 1) * dk)
        head = {"wq": in_proj[:d][rows].T.copy(), "wk": in_proj[d:2 * d][rows].T.copy(),
                "wv": in_proj[2 * d:][rows].T.copy(), "wo": out_proj[:, rows].T.copy()}
        if bias:
            head.update(bq=np.zeros(dk), bk=np.zeros(dk), bv=np.zeros(dk))
        heads.append(Record(head))
    return heads


def _init_ffn(gen, d, hidden):
    """linear1 (D -> hidden) and linear2 (hidden -> D) with nn.Linear's default init, in
    PyTorch's shapes: weight and bias U(+-1/sqrt(fan_in))."""
    lin1_w = _uniform(gen, 1.0 / math.sqrt(d), (hidden, d))
    lin1_b = _uniform(gen, 1.0 / math.sqrt(d), (hidden,))
    lin2_w = _uniform(gen, 1.0 / math.sqrt(hidden), (d, hidden))
    lin2_b = _uniform(gen, 1.0 / math.sqrt(hidden), (d,))
    return lin1_w, lin1_b, lin2_w, lin2_b


@builtin("transformer_block_init", CAT, "A transformer_block weights record, initialised as PyTorch's "
         "nn.TransformerEncoderLayer.",
         [P("d_model", "int", doc="model width D", check=positive, constraint="> 0"),
          P("n_heads", "int", doc="number of heads", check=positive,
            constraint="> 0, divides d_model"),
          P("mlp_ratio", "int", 4, doc="feed-forward width as a multiple of D", check=at_least_one,
            constraint=">= 1"),
          P("norm", "string", "layer_norm", check=one_of(*NORMS), constraint='one of "layer_norm", "rms_norm"'),
          P("bias", "bool", True, doc="attention biases bq, bk, bv, bo, feed-forward biases b1, b2 and "
                                      "layer_norm biases (false: none of them, PyTorch's bias=False)"),
          P("layer_scale", "bool", False, doc="add layer-scale gains gamma1, gamma2"),
          P("layer_scale_init", "number", 1e-5, doc="the value the gains start at", check=non_negative,
            constraint=">= 0"),
          P("seed", "int", None, doc="seed of a private generator; none draws from seed(n)'s generator",
            check=non_negative, constraint=">= 0")],
         returns="a weights record for transformer_block",
         what="Makes the record transformer_block takes, for d_model D, n_heads heads of width D / n_heads "
              "and a feed-forward of width H = mlp_ratio * D:\n\n"
              "    {heads = ({wq, wk, wv: DxD/h, wo: D/hxD, bq, bk, bv: D/h}, ...), bo: D,\n"
              "     ln1_gamma, ln1_beta: D, w1: DxH, b1: H, w2: HxD, b2: D, ln2_gamma, ln2_beta: D,\n"
              "     gamma1, gamma2: D (layer_scale only)}\n\n"
              "rms_norm records have no ln*_beta; bias = false drops every bias. The default bias = true "
              "keeps all four attention projections biased and both norms affine with a bias, as PyTorch's "
              "nn.TransformerEncoderLayer does: one block of D = 32, 4 heads, mlp_ratio 4 has 12,704 numbers "
              "(4*32*32 + 4*32 attention, 2*2*32 norms, 32*128 + 128 + 128*32 + 32 feed-forward).",
         how="PyTorch 2.13's nn.TransformerEncoderLayer initialisation (torch/nn/modules/activation.py "
             "MultiheadAttention._reset_parameters and torch/nn/modules/linear.py Linear.reset_parameters): "
             "the packed in_proj_weight [3D, D] is xavier_uniform, U(+-sqrt(6 / (D + 3D))), and is split "
             "by rows into wq, wk, wv and by heads; in_proj_bias and out_proj.bias are zeros; out_proj."
             "weight [D, D] and linear1/linear2 use nn.Linear's default kaiming_uniform(a = sqrt(5)), "
             "U(+-1/sqrt(fan_in)), and their biases U(+-1/sqrt(fan_in)); LayerNorm and RMSNorm gains are "
             "ones and LayerNorm biases zeros. The matrices are drawn in PyTorch's shapes in that order "
             "and transposed into this layout. Layer scale (Touvron et al. 2021, CaiT) fills gamma1 and "
             "gamma2 with layer_scale_init.",
         errors=["ValueError when n_heads does not divide d_model",
                 "ValueError when mlp_ratio < 1, d_model or n_heads < 1, or norm is unknown"],
         examples=["w = transformer_block_init(32, 4, seed=0)\nparam_count(w)",
                   "w = transformer_block_init(16, 2, norm=\"rms_norm\", seed=0)\nsize(w.heads[0].wq)",
                   "param_count(transformer_block_init(16, 2, mlp_ratio=2, layer_scale=true, seed=0))"])
def transformer_block_init(d_model, n_heads, mlp_ratio, norm, bias, layer_scale, layer_scale_init, seed):
    d = d_model
    if d % n_heads:
        raise ValueErr(f"transformer_block_init(): n_heads must divide d_model, got n_heads = {n_heads} "
                       f"and d_model = {d} ({d} / {n_heads} is not a whole number)")
    gen = _init_generator(seed)
    hidden = mlp_ratio * d
    heads = _init_heads(gen, d, n_heads, bias)
    lin1_w, lin1_b, lin2_w, lin2_b = _init_ffn(gen, d, hidden)
    fields = {"heads": tuple(heads)}
    if bias:
        fields["bo"] = np.zeros(d)
    fields["ln1_gamma"] = np.ones(d)
    if bias and norm == "layer_norm":
        fields["ln1_beta"] = np.zeros(d)
    fields["w1"] = lin1_w.T.copy()
    if bias:
        fields["b1"] = lin1_b
    fields["w2"] = lin2_w.T.copy()
    if bias:
        fields["b2"] = lin2_b
    fields["ln2_gamma"] = np.ones(d)
    if bias and norm == "layer_norm":
        fields["ln2_beta"] = np.zeros(d)
    if layer_scale:
        fields["gamma1"] = np.full(d, float(layer_scale_init))
        fields["gamma2"] = np.full(d, float(layer_scale_init))
    fields["heads"] = tuple(Record({k: ops.as_float(v) for k, v in h.fields.items()}) for h in heads)
    return Record({k: v if k == "heads" else ops.as_float(v) for k, v in fields.items()})   # session dtype


# ---- the decoder block (cross-attention) -----------------------------------------------------------
DECODER_FIELDS = ("self_heads, cross_heads, ln1_gamma, ln1_beta, ln2_gamma, ln2_beta, ln3_gamma, ln3_beta, "
                  "w1, b1, w2, b2 (optional self_bo, cross_bo)")
DECODER_BIASES = ("ln1_beta", "ln2_beta", "ln3_beta", "b1", "b2")


def check_decoder_block(weights, d: int) -> dict:
    """Check a transformer_decoder_block weights record against the model width d; return its fields.

    Layout: self_heads, cross_heads (tuples of head records, as multi_head_attention takes), optional
    self_bo, cross_bo [D]; ln1_gamma, ln2_gamma, ln3_gamma [D]; w1 [D, H], w2 [H, D]; the biases
    ln1_beta, ln2_beta, ln3_beta [D], b1 [H], b2 [D] all present or all absent (bias-free). Unknown
    fields are errors (they catch typos, and a transformer_block record passed by mistake)."""
    w = raw(weights)
    if not isinstance(w, Record):
        raise TypeErr(f"transformer_decoder_block(): weights must be a record ({DECODER_FIELDS}), "
                      f"got {describe(weights)}")
    fields = w.fields
    allowed = ("self_heads", "cross_heads", "self_bo", "cross_bo", "ln1_gamma", "ln2_gamma", "ln3_gamma",
               "w1", "w2") + DECODER_BIASES
    extra = [k for k in fields if k not in allowed]
    if extra:
        hint = (" (a transformer_block record? a decoder block has self_heads and cross_heads)"
                if extra[0] in ("heads", "bo") else "")
        raise ValueErr(f"weights has an unknown field '{extra[0]}'{hint}; a decoder block has {DECODER_FIELDS}")
    for name in ("self_heads", "cross_heads"):
        if name not in fields:
            raise ValueErr(f"weights is missing the field '{name}' (it needs {DECODER_FIELDS})")
    g1 = raw(fields.get("ln1_gamma"))
    if isinstance(g1, np.ndarray) and g1.ndim == 1 and g1.shape[0] != d:
        raise ShapeError(f"x has {d} features (its last axis) but the weights are for d_model "
                         f"{g1.shape[0]} (weights.ln1_gamma has length {g1.shape[0]})")
    check_heads(fields["self_heads"], d, "weights.self_heads")
    check_heads(fields["cross_heads"], d, "weights.cross_heads")
    for name in ("ln1_gamma", "ln2_gamma", "ln3_gamma"):
        schema_shape(need_field(w, name, "weights", DECODER_FIELDS), f"weights.{name}", (d,))
    hidden = _schema_matrix(need_field(w, "w1", "weights", DECODER_FIELDS), "weights.w1", d, "hidden")
    schema_shape(need_field(w, "w2", "weights", DECODER_FIELDS), "weights.w2", (hidden, d))
    present = [b for b in DECODER_BIASES if b in fields]
    if present and len(present) < len(DECODER_BIASES):
        missing = next(b for b in DECODER_BIASES if b not in fields)
        raise ValueErr(f"weights is missing the field '{missing}': it has {', '.join(present)}, and a "
                       f"decoder block has all of {', '.join(DECODER_BIASES)} or none of them (bias-free)")
    for b in present + [b for b in ("self_bo", "cross_bo") if b in fields]:
        schema_shape(need_field(w, b, "weights", DECODER_FIELDS), f"weights.{b}", (hidden if b == "b1" else d,))
    return fields


def decoder_block(x, memory, f, norm_first=False, causal=True, activation="relu", p=0.0, training=False,
                  eps=1e-5, mask=None, memory_mask=None):
    """The decoder block on checked fields `f`, composed from primitives (no gradient rule of its own)."""
    act = ACTIVATIONS[activation]

    def normed(h, i):
        return ops.layer_norm(h, f[f"ln{i}_gamma"], f.get(f"ln{i}_beta"), eps=eps)

    def self_attn(h):
        return mha(h, raw(f["self_heads"]), causal, p, training, f.get("self_bo"), mask=mask)

    def cross_attn(h):
        return mha(h, raw(f["cross_heads"]), False, p, training, f.get("cross_bo"), memory=memory,
                   mask=memory_mask)

    def ffn(h):
        hidden = apply_dropout(act(ops.dense(h, f["w1"], f.get("b1"))), p, training)
        return ops.dense(hidden, f["w2"], f.get("b2"))

    if norm_first:
        h = ops.add(x, self_attn(normed(x, 1)))
        h = ops.add(h, cross_attn(normed(h, 2)))
        return ops.add(h, ffn(normed(h, 3)))
    h = normed(ops.add(x, self_attn(x)), 1)
    h = normed(ops.add(h, cross_attn(h)), 2)
    return normed(ops.add(h, ffn(h)), 3)


@builtin("transformer_decoder_block", CAT, "One Transformer decoder block: causal self-attention, "
         "cross-attention to an encoder's output, and a feed-forward, each with a residual add and a "
         "layer_norm (PyTorch's nn.TransformerDecoderLayer).",
         [P("x", "array", shape="[T, D] or [B, T, D]", doc="the decoder's sequence (the target so far)"),
          P("memory", "array", shape="[S, D] or [B, S, D]",
            doc="what cross-attention reads: the encoder's output, with x's width D"),
          P("weights", "record", doc="a record with self_heads, cross_heads, ln1_gamma, ln1_beta, ln2_gamma, "
                                     "ln2_beta, ln3_gamma, ln3_beta, w1, b1, w2, b2 (optional self_bo, "
                                     "cross_bo); transformer_decoder_block_init makes one"),
          P("norm_first", "bool", False, doc="pre-norm (true) or the original post-norm (false)"),
          P("causal", "bool", True, doc="self-attention: position t attends only to positions <= t"),
          P("activation", "string", "relu", doc="the feed-forward nonlinearity",
            check=one_of(*_ACTIVATION_NAMES), constraint="one of " + ", ".join(f'"{a}"' for a in _ACTIVATION_NAMES)),
          P("dropout", "number", 0.0, doc="dropout on both attentions' weights and after the feed-forward "
                                          "activation (training only)", check=dropout_range,
            constraint=">= 0 and < 1"),
          P("training", "bool", False, doc="apply dropout (true) or not (false, evaluation)"),
          P("eps", "number", 1e-5, doc="epsilon of the three layer norms", check=positive, constraint="> 0"),
          P("mask", "array", None, shape="[T, T] or [B, T, T]",
            doc="self-attention's bool 'may attend' mask, combined with causal"),
          P("memory_mask", "array", None, shape="[T, S] or [B, T, S]",
            doc="cross-attention's bool 'may attend' mask (e.g. the source's padding)")],
         returns="same shape as x", differentiable=True,
         what="The block of the decoder in an encoder-decoder Transformer (the 2017 translation model): "
              "the target sequence x attends to itself (causally, so that position t sees only the "
              "tokens before it), then to the encoder's output memory through cross-attention, then "
              "goes through a two-layer feed-forward network. Each of the three sublayers is wrapped "
              "in a residual connection and a layer_norm. transformer_decoder_block_init makes the "
              "weights; param_count and summary count them.",
         how="Post-norm (default; Vaswani et al. 2017, §3.1; PyTorch's nn.TransformerDecoderLayer with "
             "norm_first=False):\n\n"
             "    h1  = ln1(x + self_attn(x))\n"
             "    h2  = ln2(h1 + cross_attn(h1, memory))\n"
             "    out = ln3(h2 + ffn(h2))\n\n"
             "Pre-norm (norm_first = true):\n\n"
             "    h1  = x + self_attn(ln1(x))\n"
             "    h2  = h1 + cross_attn(ln2(h1), memory)\n"
             "    out = h2 + ffn(ln3(h2))\n\n"
             "with self_attn(h) = multi_head_attention(h, self_heads, causal=causal, mask=mask, bo=self_bo), "
             "cross_attn(h, m) = multi_head_attention(h, cross_heads, memory=m, mask=memory_mask, "
             "bo=cross_bo) (never causal: every target position may read the whole source), "
             "ffn(h) = dense(drop(act(dense(h, w1, b1))), w2, b2), and lnI = layer_norm(., lnI_gamma, "
             "lnI_beta, eps). The memory is not normalized here, in either layout: in PyTorch's "
             "nn.Transformer the encoder's final norm does that. Masks are bool with true = may attend "
             "(PyTorch's boolean tgt_mask and memory_mask mean the opposite). Dropout acts on both "
             "attentions' weights and after the activation, as in transformer_block. A composite of "
             "recorded primitives: its gradient comes from the tape's ordinary reverse walk, with no "
             "rule of its own; checked against PyTorch 2.13's nn.TransformerDecoderLayer to 1e-10, "
             "output and every gradient (tests/test_parity.py).",
         errors=["ShapeError when memory's width differs from x's (or its batch size does)",
                 "ValueError naming the path of a missing or unknown field",
                 "ValueError naming the path and both shapes (weights.cross_heads[1].wk is 8x3, expected 8x4)",
                 "ValueError when activation is not one of the allowed names, dropout is not in [0, 1) "
                 "or eps <= 0",
                 "TypeError when a mask is not a bool matrix; ShapeError when it is not T x T (mask) or "
                 "T x S (memory_mask), batched with B first"],
         examples=["w = transformer_decoder_block_init(8, 2, seed=0)\nseed(1)\n"
                   "memory = randn(5, 8)    # an encoder's output: 5 source positions\n"
                   "x = randn(3, 8)         # 3 target positions\n"
                   "y = transformer_decoder_block(x, memory, w)\nsize(y)",
                   "# causal: changing the last target position leaves the earlier outputs alone\n"
                   "w = transformer_decoder_block_init(8, 2, seed=0)\nseed(1)\nmemory = randn(5, 8)\n"
                   "x = randn(3, 8)\nx2 = x\nx2[2, :] = randn(1, 8)\n"
                   "a = transformer_decoder_block(x, memory, w, norm_first=true)\n"
                   "b = transformer_decoder_block(x2, memory, w, norm_first=true)\n"
                   "round(max(abs(a - b), dim=1), 6)",
                   CROSS_ATTENTION_EXAMPLE.replace(
                       "print(size(y), size(w))\n",
                       "# the same head as a decoder block's cross-attention: only self and cross differ\n"
                       "blk = transformer_decoder_block_init(4, 1, seed=0)\nblk.cross_heads = (head,)\n"
                       "print(size(transformer_decoder_block(x, memory, blk)))\n")])
def transformer_decoder_block(x, memory, weights, norm_first, causal, activation, dropout, training, eps,
                              mask, memory_mask):
    s = _shape(x)
    if len(s) not in (2, 3):
        raise ShapeError(f"transformer_decoder_block(): x must be T x D (or B x T x D), got {describe(x)}")
    check_memory(memory, s, "transformer_decoder_block()")
    if mask is not None:
        check_mask(mask, s, s[-2], "transformer_decoder_block()")
    if memory_mask is not None:
        check_mask(memory_mask, s, _shape(memory)[-2], "transformer_decoder_block()", "memory_mask")
    f = check_decoder_block(weights, s[-1])
    return decoder_block(x, memory, f, norm_first, causal, activation, dropout, training, eps, mask, memory_mask)


@builtin("transformer_decoder_block_init", CAT, "A transformer_decoder_block weights record, initialised as "
         "PyTorch's nn.TransformerDecoderLayer.",
         [P("d_model", "int", doc="model width D", check=positive, constraint="> 0"),
          P("n_heads", "int", doc="number of heads of each attention", check=positive,
            constraint="> 0, divides d_model"),
          P("mlp_ratio", "int", 4, doc="feed-forward width as a multiple of D", check=at_least_one,
            constraint=">= 1"),
          P("bias", "bool", True, doc="attention biases, feed-forward biases and layer_norm biases "
                                      "(false: none of them, PyTorch's bias=False)"),
          P("seed", "int", None, doc="seed of a private generator; none draws from seed(n)'s generator",
            check=non_negative, constraint=">= 0")],
         returns="a weights record for transformer_decoder_block",
         what="Makes the record transformer_decoder_block takes, for d_model D, n_heads heads of width "
              "D / n_heads in each attention and a feed-forward of width H = mlp_ratio * D:\n\n"
              "    {self_heads = ({wq, wk, wv: DxD/h, wo: D/hxD, bq, bk, bv: D/h}, ...), self_bo: D,\n"
              "     cross_heads = (the same), cross_bo: D,\n"
              "     ln1_gamma, ln1_beta, ln2_gamma, ln2_beta, ln3_gamma, ln3_beta: D,\n"
              "     w1: DxH, b1: H, w2: HxD, b2: D}\n\n"
              "bias = false drops every bias. At PyTorch's defaults (D = 512, 8 heads, feed-forward "
              "2048) the block has 4,204,032 numbers, as nn.TransformerDecoderLayer(512, 8) has: two "
              "attentions of 4*512*512 + 4*512, a feed-forward of 2*512*2048 + 2048 + 512 and three "
              "norms of 2*512.",
         how="PyTorch 2.13's nn.TransformerDecoderLayer initialisation, as transformer_block_init's for "
             "each part: self_attn, then multihead_attn (the cross-attention), each a packed in_proj_weight "
             "[3D, D] drawn xavier_uniform, U(+-sqrt(6 / (D + 3D))), then out_proj.weight [D, D] drawn "
             "kaiming_uniform(a = sqrt(5)), U(+-1/sqrt(D)), with in_proj_bias and out_proj.bias zeros; "
             "then linear1 and linear2 with nn.Linear's default U(+-1/sqrt(fan_in)) for weights and "
             "biases; LayerNorm gains ones and biases zeros. The matrices are drawn in PyTorch's shapes "
             "in that order and transposed and split by heads into this layout.",
         errors=["ValueError when n_heads does not divide d_model",
                 "ValueError when mlp_ratio < 1 or d_model or n_heads < 1"],
         examples=["w = transformer_decoder_block_init(512, 8, seed=0)\nparam_count(w)",
                   "summary(transformer_decoder_block_init(8, 2, mlp_ratio=2, seed=0))"])
def transformer_decoder_block_init(d_model, n_heads, mlp_ratio, bias, seed):
    d = d_model
    if d % n_heads:
        raise ValueErr(f"transformer_decoder_block_init(): n_heads must divide d_model, got n_heads = "
                       f"{n_heads} and d_model = {d} ({d} / {n_heads} is not a whole number)")
    gen = _init_generator(seed)
    hidden = mlp_ratio * d
    self_heads = _init_heads(gen, d, n_heads, bias)
    cross_heads = _init_heads(gen, d, n_heads, bias)
    lin1_w, lin1_b, lin2_w, lin2_b = _init_ffn(gen, d, hidden)
    fields = {"self_heads": tuple(self_heads)}
    if bias:
        fields["self_bo"] = np.zeros(d)
    fields["cross_heads"] = tuple(cross_heads)
    if bias:
        fields["cross_bo"] = np.zeros(d)
    for i in (1, 2, 3):
        fields[f"ln{i}_gamma"] = np.ones(d)
        if bias:
            fields[f"ln{i}_beta"] = np.zeros(d)
    fields["w1"] = lin1_w.T.copy()
    if bias:
        fields["b1"] = lin1_b
    fields["w2"] = lin2_w.T.copy()
    if bias:
        fields["b2"] = lin2_b

    def as_session(v):      # the session dtype, heads and all
        if isinstance(v, tuple):
            return tuple(Record({k: ops.as_float(a) for k, a in h.fields.items()}) for h in v)
        return ops.as_float(v)
    return Record({k: as_session(v) for k, v in fields.items()})


def _leaves(value, path):
    """(path, shape, count) of every number and float matrix in a record/tuple tree."""
    r = raw(value)
    if isinstance(r, Record):
        out = []
        for k, v in r.fields.items():
            out.extend(_leaves(v, f"{path}.{k}" if path else k))
        return out
    if isinstance(r, tuple):
        out = []
        for i, v in enumerate(r):
            out.extend(_leaves(v, f"{path}[{i}]"))
        return out
    if isinstance(r, np.ndarray) and r.dtype != np.bool_:
        return [(path, r.shape, int(r.size))]
    if isinstance(r, (float, int)) and not isinstance(r, (bool, np.bool_)):
        return [(path, (), 1)]
    return []


@builtin("param_count", CAT, "How many numbers a value holds: the parameter count of a weights record.",
         [P("value", doc="a number, matrix, tuple or record, nested")], returns="number",
         what="How many trainable numbers a model has: the element count of every number and float matrix "
              "in a nested record or tuple, such as a transformer_block_init record (12,704 for D = 32, 4 heads).",
         errors=["none for any one value: a value holding no numbers counts 0 (TypeError only for a wrong "
                 "number of arguments)"],
         how="The sum of the element counts of every number and float matrix in the tree (a number counts "
             "1). Strings, bools, bool matrices, none and functions count 0.",
         examples=["param_count({w = zeros(8, 16), b = zeros(16)})",
                   "param_count(transformer_block_init(32, 4, seed=0))",
                   "param_count((transformer_block_init(16, 2, norm=\"rms_norm\"), transformer_block_init(16, 2, norm=\"rms_norm\")))"])
def param_count(value):
    return float(sum(n for _, _, n in _leaves(value, "")))


def _fmt_shape(shape):
    return "x".join(str(n) for n in shape) if shape else "number"


@builtin("summary", CAT, "Print a table of a weights value's parameters: path, shape and count, with the total.",
         [P("weights", doc="a record, tuple or matrix of parameters")], returns="none", interp=True,
         what="One row per number or matrix in the tree, named by its path (heads[0].wq, w1, ...), then the "
              "total, which is param_count(weights).",
         how="Walks the tree in field order; counts as param_count. Shapes print as rows x columns.",
         errors=["none for any one value: a value holding no numbers prints an empty table with total 0"],
         examples=["summary({w = zeros(8, 16), b = zeros(16)})",
                   "summary(transformer_block_init(8, 2, mlp_ratio=2, seed=0))"])
def summary(interp, weights):
    rows = [(p or "(value)", _fmt_shape(s), f"{n:,}") for p, s, n in _leaves(weights, "")]
    total = f"{sum(n for _, _, n in _leaves(weights, '')):,}"
    wp = max([len("parameter")] + [len(r[0]) for r in rows] + [len("total")])
    ws = max([len("shape")] + [len(r[1]) for r in rows])
    wc = max([len("count"), len(total)] + [len(r[2]) for r in rows])
    lines = [f"{'parameter':<{wp}}  {'shape':<{ws}}  {'count':>{wc}}"]
    lines += [f"{p:<{wp}}  {s:<{ws}}  {c:>{wc}}" for p, s, c in rows]
    lines.append("-" * (wp + ws + wc + 4))
    lines.append(f"{'total':<{wp}}  {'':<{ws}}  {total:>{wc}}")
    interp.out.write("\n".join(lines) + "\n")
    return None
