"""Statistics & ML: the layers: layer_norm, rms_norm, dense and dropout.

layer_norm, rms_norm and dense are primitives (one VJP each in ops.py); dropout multiplies by a
mask drawn from the language's seeded generator (a constant of the mul primitive).
"""
from __future__ import annotations

import math

from tapeml.array import ops
from tapeml.array.primitive_table import new_array
from tapeml.array.tape import raw
from tapeml.builtins.ml.schema import _shape, dropout_range, need_shape
from tapeml.builtins.registry import P, builtin, non_negative
from tapeml.syntax.errors import ShapeError
from tapeml.array.values import describe, shape_text

CAT = "Statistics & ML"


def _normalized_axes(x, gamma, fname: str) -> int:
    """How many trailing axes of x the norm covers: gamma's rank, when gamma is shaped like those
    axes (PyTorch's normalized_shape); a ShapeError naming the shapes otherwise."""
    s, g = _shape(x), _shape(gamma)
    if not s:
        raise ShapeError(f"{fname}() needs a vector or matrix, got a number")
    k = len(g)
    if 0 < k <= len(s) and s[-k:] == g:
        if math.prod(g) == 0:
            where = "the last axis of x has length 0" if k == 1 else f"the normalized axes of x are {_sizes(g)}"
            raise ShapeError(f"{fname}() needs at least one feature ({where})")
        return k
    if k <= 1:
        raise ShapeError(f"{fname}(): gamma is {shape_text(g)}, expected {shape_text(s[-1:])}")
    options = [_sizes(s[-i:]) for i in range(1, len(s) + 1)]
    options = ", ".join(options[:-1]) + " or " + options[-1]
    raise ShapeError(f"{fname}(): gamma is {shape_text(g)}, but it must be shaped like the trailing axes of x "
                     f"that are normalized (x is {shape_text(s)}: {options})")


def _sizes(shape) -> str:
    return "x".join(str(n) for n in shape)


def _over_trailing(prim, x, params: tuple, k: int, **kw):
    """prim (a norm over the last axis) applied over the last k axes: x seen as [..., prod] and each
    parameter as [prod], then given back x's shape. Reshapes are recorded, so grad flows."""
    if k == 1:
        return prim(x, *params, **kw)
    s = _shape(x)
    n = math.prod(s[-k:])
    y = prim(ops.reshape(x, shape=s[:-k] + (n,)), *(ops.reshape(p, shape=(n,)) for p in params), **kw)
    return ops.reshape(y, shape=s)


@builtin("layer_norm", CAT, "Normalize each row (last axis) to mean 0 and variance 1, then scale and shift.",
         [P("x", "array", shape="[..., D]", doc="the input; each position is normalized on its own"),
          P("gamma", "array", shape="[D] or [..., D]",
            doc="gain, shaped like the trailing axes to normalize over (PyTorch's normalized_shape)"),
          P("beta", "array", shape="same as gamma", doc="bias"),
          P("eps", "number", 1e-5, doc="added to the variance inside the square root (0 allowed: a row of "
                                       "equal values then gives beta)", check=non_negative, constraint=">= 0")],
         returns="[..., D]", differentiable=True,
         what="Layer normalization rescales every token's feature vector using only that token's own "
              "numbers, so the result does not depend on the scale of the input row. With gamma and beta "
              "shaped like several trailing axes of x (a [C, H, W] gain for [N, C, H, W] images), the "
              "statistics are taken over all of those axes together, PyTorch's "
              "`nn.LayerNorm(normalized_shape)`.",
         how="y = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta over the last axis, with the "
             "population variance computed in two passes (Ba, Kiros & Hinton 2016; PyTorch's "
             "`nn.LayerNorm`). The VJP is fused: dx = (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) / std. "
             "Over k trailing axes, x is seen as [..., n] with n their product (a reshape, recorded), so the "
             "same primitive normalizes each group of n numbers; gamma's rank says k. "
             "A row whose variance would overflow or underflow (1e20 in float32) is computed on the row "
             "scaled by a power of 2, so the result stays finite wherever it is representable. With eps = 0 "
             "a row of equal values (variance 0) gives beta, with gradient 0 to x (PyTorch gives nan); a "
             "row holding +-inf gives the limit, its infinite entries counting as +-1 and the rest as 0; a row "
             "holding a nan is nan, as in PyTorch.",
         errors=["ShapeError when gamma is not shaped like the trailing axes of x (a vector of length D for "
                 "the last axis), or beta is not shaped like gamma", "ValueError when eps < 0"],
         examples=["layer_norm([1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0])",
                   "x = [1.0, 2.0, 3.0; 10.0, 20.0, 30.0]\nlayer_norm(x, [1, 1, 1], [0, 0, 0])",
                   "seed(0)\nx = randn(200, 16) * 3 + 2\ny = layer_norm(x, ones(16), zeros(16))\n"
                   'print("before: mean {round(mean(x), 2)}, mean square {round(mean(x * x), 2)}")\n'
                   'print("after:  mean {round(mean(y), 2)}, mean square {round(mean(y * y), 2)}")\n'
                   'figure(width=8, height=3)\nsubplot(1, 2, 0)\nhist(x, bins=30)\ntitle("before: x, 200 rows of 16")\n'
                   'subplot(1, 2, 1)\nhist(y, bins=30)\ntitle("after: layer_norm(x, ones(16), zeros(16))")',
                   "layer_norm([5, 5, 5; 1e200, 2e200, 3e200], [1, 1, 1], [0, 1, 2], eps=0)",
                   "x = reshape(0:11, 2, 2, 3)   # two samples of 2 x 3 features\n"
                   "round(layer_norm(x, ones(2, 3), zeros(2, 3))[0, :, :], 4)   # each sample over all 6"])
def layer_norm(x, gamma, beta, eps):
    k = _normalized_axes(x, gamma, "layer_norm")
    need_shape(beta, "layer_norm(): beta", _shape(gamma))
    return _over_trailing(ops.layer_norm, x, (gamma, beta), k, eps=eps)


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


def apply_dropout(x, p: float, training: bool):
    """Inverted dropout: x * mask / (1 - p), mask true with probability 1 - p, drawn from the
    language's seeded generator. The mask is a constant of the mul primitive, so the gradient
    is g * mask / (1 - p). Identity (the same value, no draw) when not training or p = 0."""
    if not training or p == 0:
        return x
    from tapeml.builtins.random import bernoulli_mask
    keep = 1.0 - p
    s = _shape(x)
    scale = bernoulli_mask(s, keep) / keep       # on the host in float64: the same numbers on every device
    if not s:
        return ops.mul(x, float(scale))
    return ops.mul(x, new_array(scale, like=raw(x)))     # the session's float type, on x's device


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


NORMS = ("layer_norm", "rms_norm")


@builtin("rms_norm", CAT, "Divide each row (last axis) by its root mean square, then scale.",
         [P("x", "array", shape="[..., D]"),
          P("gamma", "array", shape="[D] or [..., D]",
            doc="gain, shaped like the trailing axes to normalize over (PyTorch's normalized_shape)"),
          P("eps", "number", 1e-5, doc="added to the mean square inside the square root (0 allowed: a row "
                                       "of zeros then gives zeros)", check=non_negative, constraint=">= 0")],
         returns="[..., D]", differentiable=True,
         what="Root-mean-square normalization: like layer_norm without centering and without a bias; "
              "the normalization of LLaMA-style decoders.",
         how="y = x / sqrt(mean(x^2) + eps) * gamma over the last axis (Zhang & Sennrich 2019; PyTorch's "
             "nn.RMSNorm, whose eps defaults to the float type's machine epsilon where this one's is 1e-5, "
             "LLaMA's and T5's: pass eps to match either). The mean square is accumulated in float64. One primitive with a VJP written with "
             "primitives: dx = r (g gamma - xhat mean(g gamma xhat)), xhat = x r, r = 1/sqrt(mean(x^2) + eps). "
             "A row whose mean square would overflow or underflow is computed scaled by a power of 2, so "
             "the result stays finite wherever it is representable. With eps = 0 a row of zeros gives "
             "zeros, with gradient 0. A nan in a row makes the whole row nan, and its gradient, as PyTorch. "
             "With gamma shaped like several trailing axes of x, the mean square is taken over all of them "
             "(x seen as [..., n], a recorded reshape), as PyTorch's `nn.RMSNorm(normalized_shape)`.",
         errors=["ShapeError when gamma is not shaped like the trailing axes of x (a vector of length D for "
                 "the last axis)", "ValueError when eps < 0"],
         examples=["rms_norm([3, 4], [1, 1])", "round(rms_norm([1, 2; 3, 4], [1, 2]), 4)",
                   "rms_norm([0, 0; 3e200, 4e200], [1, 1], eps=0)"])
def rms_norm(x, gamma, eps):
    k = _normalized_axes(x, gamma, "rms_norm")
    return _over_trailing(ops.rms_norm, x, (gamma,), k, eps=eps)
