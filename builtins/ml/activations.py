"""Statistics & ML: activations (relu, gelu, sigmoid, softmax, log_softmax, gelu_tanh, silu,
quick_gelu) and ACTIVATIONS, the ones a block offers.

relu, gelu, sigmoid, softmax and log_softmax are primitives (one VJP each in ops.py);
gelu_tanh, silu and quick_gelu are composites of primitives (DESIGN.md rule 3).
"""
from __future__ import annotations

import math

from tapeml.array import ops
from tapeml.builtins.registry import P, builtin, positive
from tapeml.builtins.util import axis

CAT = "Statistics & ML"


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


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh_(x):
    # x/2 (1 + tanh(u)) = x sigmoid(2u): the same function, without 1 + tanh(u)'s cancellation for
    # x < 0 (gelu_tanh(-5.554) lost 8 digits, and NumPy and torch printed different ones)
    inner = ops.mul(2.0 * SQRT_2_OVER_PI, ops.add(x, ops.mul(0.044715, ops.mul(x, ops.mul(x, x)))))
    return ops.mul(x, ops.sigmoid(inner))


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
             "eq. 2; PyTorch's gelu(approximate='tanh')), computed as x * sigmoid(2 u) with u the tanh's "
             "argument, the same function without the cancellation of 1 + tanh(u) for negative x (exact "
             "to a few ulps where the textbook form loses 8 digits at x = -5.554). A composite of mul, "
             "add and sigmoid: its gradient comes from theirs.",
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


_ACTIVATION_NAMES = ("relu", "gelu", "gelu_tanh", "silu", "quick_gelu")


@builtin("softplus", CAT, "Smooth relu: log(1 + exp(beta x)) / beta, linear past a threshold (PyTorch's).",
         [P("x", "array", shape="any"), P("beta", "number", 1.0, doc="sharpness (> 0)",
                                          check=positive, constraint="> 0"),
          P("threshold", "number", 20.0, doc="where beta x is above it, the result is x itself")],
         returns="same shape as x", differentiable=True,
         what="A smooth, always positive version of relu, e.g. to keep a predicted scale or variance "
              "positive. A larger beta bends it closer to relu.",
         how="softplus(x) = log(1 + exp(beta x)) / beta, PyTorch's `torch.nn.functional.softplus` with its "
             "defaults beta = 1 and threshold = 20 (the result is x where beta x > threshold). Computed as "
             "(max(z, 0) + log1p(exp(-|z|))) / beta with z = beta x, which overflows for no x. d/dx = "
             "sigmoid(beta x), and 1 past the threshold.",
         errors=["ValueError when beta is not > 0", "TypeError when x is not a number or matrix"],
         examples=["softplus([-1.5, 0.25, 2.5])", "softplus([-1000, 0, 1000])", "softplus([-1, 0, 1], beta=10)"])
def softplus(x, beta, threshold):
    return ops.softplus(x, beta=float(beta), threshold=float(threshold))


@builtin("leaky_relu", CAT, "relu with a small slope for negatives: x, or negative_slope * x below 0.",
         [P("x", "array", shape="any"), P("negative_slope", "number", 0.01, doc="the slope left of 0")],
         returns="same shape as x", differentiable=True,
         what="Like relu, but negatives are scaled down instead of zeroed, so a unit that went negative "
              "still gets a gradient.",
         how="where(x > 0, x, negative_slope * x), composed from primitives (Maas et al. 2013; PyTorch's "
             "`leaky_relu`, default slope 0.01). The derivative at 0 is negative_slope, as PyTorch.",
         errors=["TypeError when x is not a number or matrix"],
         examples=["leaky_relu([-1.5, 0.25, 2.5])", "leaky_relu([-2, 0, 2], negative_slope=0.2)"])
def leaky_relu(x, negative_slope):
    return ops.where(ops.gt(x, 0.0), x, ops.mul(x, float(negative_slope)))
