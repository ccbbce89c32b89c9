"""Every differentiable primitive's VJP at 0, at +-inf and at its kinks (issue 15, item 2).

The loop runs over the primitive table (ops.TABLE), not a hand list: a primitive added to the
table without a case here fails `test_every_primitive_has_a_sweep_case`. Each case puts a
special value into one differentiable input at a time and checks two things:

- with cotangent 1, no gradient is NaN unless the forward value itself is NaN there (the function
  has no value and no limit: sin(inf), 0 / 0, inf - inf), because the guide promises 0 x inf = 0
  in every backward pass;
- with cotangent 0 (the untaken branch of a `where`), every gradient is exactly 0.
"""
import math

import numpy as np
import pytest

from tapeml.array import backend as B
from tapeml.array import linalg_ops as la
from tapeml.array import ops
from tapeml.array.tape import raw
from fd import grad, on_device


# Under `pytest --device torch:cpu` these tests hand NumPy constants to functions of tensors
# (programs cannot: the Python API and the files bring values to the device); NumPy then
# computes the pair on the host and wraps the tensor, which NumPy 2 warns of. The values are
# the same; the warning says nothing about the product here.
pytestmark = pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context:DeprecationWarning")

INF = math.inf
SPECIALS = [0.0, INF, -INF]


def a(*v):
    return np.array(v, dtype=np.float64)


# name -> (call(*inputs), base inputs, kinks): kinks are extra whole-input sets (ties, zero rows)
ALLOWED = np.array([[True, True, False], [True, True, True]])
CASES = {
    "add": (ops.add, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], []),
    "sub": (ops.sub, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], []),
    "mul": (ops.mul, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], [[a(0, 0, 1), a(INF, -INF, 0)]]),
    "zmul": (ops.zmul, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], [[a(0, 0, 1), a(INF, -INF, 0)]]),
    "div": (ops.div, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], [[a(1, -1, 0), a(0, 0, 2)]]),
    "mod": (ops.mod, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], [[a(1, 2, 3), a(0, INF, -INF)]]),
    "pow": (ops.pow_, [a(0.7, 1.3, 2.0), a(0.0, 2.0, 0.5)],
            [[a(0, 0, 0), a(0, 1, 2)], [a(0, 0, 1), a(0.5, -1, 0)], [a(INF, INF, 2), a(0, -1, 0)]]),
    "pow_grad": (ops.pow_grad, [a(1.0, -0.5, 2.0), a(0.7, 1.3, 2.0), a(0.0, 2.0, 0.5)],
                 [[a(1, 1, 1), a(0, 0, 0), a(0, 1, 2)], [a(0, 0, 1), a(0, 0, 1), a(0.5, 1.5, 0)]]),
    "neg": (ops.neg, [a(1.5, -2.0, 0.5)], []),
    "exp": (ops.exp, [a(1.5, -2.0, 0.5)], []),
    "log": (ops.log, [a(1.5, 2.0, 0.5)], []),
    "sqrt": (ops.sqrt, [a(1.5, 2.0, 0.5)], []),
    "sin": (ops.sin, [a(1.5, -2.0, 0.5)], []),
    "cos": (ops.cos, [a(1.5, -2.0, 0.5)], []),
    "tanh": (ops.tanh, [a(1.5, -2.0, 0.5)], []),
    "abs": (ops.abs_, [a(1.5, -2.0, 0.5)], []),
    "relu": (ops.relu, [a(1.5, -2.0, 0.5)], []),
    "sigmoid": (ops.sigmoid, [a(1.5, -2.0, 0.5)], []),
    "erf": (ops.erf, [a(1.5, -2.0, 0.5)], []),
    "erfc": (ops.erfc, [a(1.5, -2.0, 0.5)], []),
    "dsigmoid": (ops.dsigmoid, [a(1.5, -2.0, 0.5)], [[a(0, 40, -800)]]),
    "dtanh": (ops.dtanh, [a(1.5, -2.0, 0.5)], [[a(0, 40, -800)]]),
    "one_minus_sq": (ops.one_minus_sq, [a(1.5, -2.0, 0.5)], [[a(1, -1, 0)]]),
    "gelu": (ops.gelu, [a(1.5, -2.0, 0.5)], []),
    "clip": (lambda x: ops.clip(x, lo=-1.0, hi=1.0), [a(1.5, -2.0, 0.5)], [[a(-1, 1, 0)]]),
    "ldexp": (lambda x: ops.ldexp(x, e=np.array([3, -1074, 1000])), [a(1.5, -2.0, 0.5)], [[a(1e300, 1e-300, 1e10)]]),
    "where": (lambda x, y: ops.where(np.array([True, False, True]), x, y),
              [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], []),
    "transpose": (ops.transpose, [a(1.5, -2.0, 0.5)], []),
    "reshape": (lambda x: ops.reshape(x, shape=(3, 1)), [a(1.5, -2.0, 0.5)], []),
    "permute": (lambda x: ops.permute(x.reshape(1, 3) if type(x) is np.ndarray else ops.reshape(x, shape=(1, 3)),
                                      axes=(1, 0)), [a(1.5, -2.0, 0.5)], []),
    "broadcast_to": (lambda x: ops.broadcast_to(x, shape=(2, 3)), [a(1.5, -2.0, 0.5)], []),
    "concat": (lambda x, y: ops.concat(x, y, dim=0), [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], []),
    "stack": (lambda x, y: ops.stack(x, y, dim=0), [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], []),
    "index": (lambda x: ops.index(x, idx=(np.array([0, 0, 2]),)), [a(1.5, -2.0, 0.5)], []),
    "scatter_add": (lambda x: ops.scatter_add(x, idx=(np.array([0, 0, 2]),), shape=(4,)), [a(1.5, -2.0, 0.5)], []),
    "setitem": (lambda x, v: ops.setitem(x, v, idx=(slice(0, 2),)), [a(1.5, -2.0, 0.5), a(0.3, 1.0)], []),
    "sum": (ops.sum_, [a(1.5, -2.0, 0.5)], []),
    "maximum": (ops.maximum, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], [[a(1, INF, -INF), a(1, INF, -INF)]]),
    "minimum": (ops.minimum, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], [[a(1, INF, -INF), a(1, INF, -INF)]]),
    "max": (ops.amax, [a(1.5, -2.0, 0.5)], [[a(2, 2, 1)], [a(INF, INF, 1)], [a(-INF, -INF, -INF)]]),
    "min": (ops.amin, [a(1.5, -2.0, 0.5)], [[a(2, 2, 3)], [a(-INF, -INF, 1)], [a(INF, INF, INF)]]),
    "matmul": (lambda x, y: ops.matmul(ops.reshape(x, shape=(1, 3)), ops.reshape(y, shape=(3, 1))),
               [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], []),
    "zmatmul": (lambda x, y: ops.zmatmul(ops.reshape(x, shape=(1, 3)), ops.reshape(y, shape=(3, 1))),
                [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], [[a(0, 0, 1), a(INF, -INF, 0)]]),
    "dense": (lambda x, w, b: ops.dense(ops.reshape(x, shape=(1, 3)), ops.reshape(w, shape=(3, 1)), b),
              [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0), a(0.2)], []),
    # multi-head attention's joined projections: x [1, 3] by two heads' [3, 1] (and biases [1]);
    # two heads' [1, 1] outputs by their [1, 3] weights
    "dense_heads": (lambda x, w, b: ops.dense_heads(ops.reshape(x, shape=(1, 3)), ops.reshape(w, shape=(3, 1)),
                                                    ops.mul(ops.reshape(w, shape=(3, 1)), 2.0), b, b, bias=True),
                    [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0), a(0.2)], []),
    "heads_dense": (lambda o, w: ops.heads_dense(ops.reshape(o, shape=(3, 1, 1)), ops.reshape(w, shape=(1, 3)),
                                                 ops.reshape(w, shape=(1, 3)), ops.mul(ops.reshape(w, shape=(1, 3)), -1.0)),
                    [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)], [[a(0, 0, 1), a(INF, -INF, 0)]]),
    "softmax": (ops.softmax, [a(1.5, -2.0, 0.5)],
                [[a(INF, INF, 1)], [a(-INF, -INF, -INF)], [a(INF, -INF, 0)], [a(1e308, 1e308, -1e308)]]),
    "log_softmax": (ops.log_softmax, [a(1.5, -2.0, 0.5)],
                    [[a(INF, INF, 1)], [a(-INF, -INF, -INF)], [a(INF, -INF, 0)]]),
    "attention_weights": (
        lambda q, k, b: ops.attention_weights(ops.reshape(q, shape=(3, 1)), ops.reshape(k, shape=(3, 1)),
                                              ops.reshape(b, shape=(1, 3)), mask=np.tril(np.ones((3, 3), bool)), scale=1.0),
        [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0), a(0.1, 0.2, 0.3)],
        [[a(1e200, 1, 2), a(1e200, 1, 2), a(0, 0, 0)], [a(1e200, -1e200, 0), a(1e200, 1e200, 1), a(0, INF, 0)],
         [a(1, 1, 1), a(1, 1, 1), a(INF, -INF, 0)]]),
    "layer_norm": (lambda x, g, b: ops.layer_norm(x, g, b, eps=1e-5),
                   [a(1.5, -2.0, 0.5), a(1.0, 2.0, 0.5), a(0.1, 0.2, 0.3)],
                   [[a(2, 2, 2), a(1, 2, 3), a(0, 0, 0)], [a(1e300, -1e300, 0), a(1, 1, 1), a(0, 0, 0)],
                    [a(1e-300, 3e-300, 2e-300), a(1, 1, 1), a(0, 0, 0)]]),
    "layer_norm/eps=0": (lambda x, g, b: ops.layer_norm(x, g, b, eps=0.0),
                         [a(1.5, -2.0, 0.5), a(1.0, 2.0, 0.5), a(0.1, 0.2, 0.3)],
                         [[a(2, 2, 2), a(1, 2, 3), a(0, 0, 0)], [a(0.1, 0.1, 0.1), a(1, 2, 3), a(0, 0, 0)],
                          [a(1e-310, 3e-310, 2e-310), a(1, 1, 1), a(0, 0, 0)]]),
    "rms_norm": (lambda x, g: ops.rms_norm(x, g, eps=1e-5), [a(1.5, -2.0, 0.5), a(1.0, 2.0, 0.5)],
                 [[a(0, 0, 0), a(1, 2, 3)], [a(1e300, -1e300, 0), a(1, 1, 1)]]),
    "rms_norm/eps=0": (lambda x, g: ops.rms_norm(x, g, eps=0.0), [a(1.5, -2.0, 0.5), a(1.0, 2.0, 0.5)],
                       [[a(0, 0, 0), a(1, 2, 3)], [a(1e-310, 0, 0), a(1, 1, 1)]]),
    "scaled_dot_product_attention": (
        lambda q, k, v: ops.sdpa(ops.reshape(q, shape=(3, 1)), ops.reshape(k, shape=(3, 1)),
                                 ops.reshape(v, shape=(3, 1)), scale=1.0),
        [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0), a(0.2, 0.4, 0.8)],
        [[a(1e200, 1, 2), a(1e200, 1, 2), a(1, 2, 3)], [a(1e200, -1e200, 0), a(1e200, 1e200, 1), a(1, 2, 3)]]),
    "scaled_dot_product_attention/mask": (
        lambda q, k, v: ops.sdpa(ops.reshape(q, shape=(2, 1)), ops.reshape(k, shape=(3, 1)),
                                 ops.reshape(v, shape=(3, 1)), mask=ALLOWED[:, :3][:2], scale=1.0),
        [a(1.5, -2.0), a(0.3, 1.0, -1.0), a(0.2, 0.4, 0.8)],
        [[a(1e200, 1), a(1e200, 1e200, 1e200), a(1, 2, 3)]]),
    # the elementwise primitives of issue 20 (lang/array/elementwise_ops.py); domain edges are kinks
    "log10": (ops.log10, [a(1.5, 2.0, 0.5)], [[a(0, -1, 1)]]),
    "log2": (ops.log2, [a(1.5, 2.0, 0.5)], [[a(0, -1, 1)]]),
    "tan": (ops.tan, [a(1.5, -2.0, 0.5)], [[a(math.pi / 2, -math.pi / 2, 0)]]),
    "log1p": (ops.log1p, [a(1.5, 2.0, 0.5)], [[a(-1, -2, 1e-300)]]),
    "expm1": (ops.expm1, [a(1.5, -2.0, 0.5)], [[a(1000, -1000, 1e-300)]]),
    "asin": (ops.asin, [a(0.5, -0.25, 0.75)], [[a(1, -1, 2)]]),
    "acos": (ops.acos, [a(0.5, -0.25, 0.75)], [[a(1, -1, 2)]]),
    "atan": (ops.atan, [a(1.5, -2.0, 0.5)], [[a(1e300, -1e300, 0)]]),
    "atan2": (ops.atan2, [a(1.5, -2.0, 0.5), a(0.3, 1.0, -1.0)],
              [[a(0, 0, INF), a(0, -0.0, INF)], [a(1e300, 1, -INF), a(1e300, 0, 1)]]),
    "sinh": (ops.sinh, [a(1.5, -2.0, 0.5)], [[a(1000, -1000, 0)]]),
    "cosh": (ops.cosh, [a(1.5, -2.0, 0.5)], [[a(1000, -1000, 0)]]),
    "softplus": (lambda x: ops.softplus(x, beta=1.0, threshold=20.0), [a(1.5, -2.0, 0.5)],
                 [[a(20, 20.0000001, 1000)], [a(-1000, 0, 1e-300)]]),
    "softplus/beta": (lambda x: ops.softplus(x, beta=0.5, threshold=5.0), [a(1.5, -2.0, 0.5)], [[a(10, 10.5, -1e308)]]),
    # the linear-algebra primitives (lang/array/linalg_ops.py), on 2x2 matrices made from 4 entries; a
    # singular matrix is a kink (the builtins refuse it for inv and solve, the table answers NaN)
    "inv": (lambda x: la.inv(m22(x)), [a(3.0, 1.0, -1.0, 2.0)], [[a(1, 2, 2, 4)]]),
    "solve": (lambda x, y: la.solve(m22(x), y, vec=True), [a(3.0, 1.0, -1.0, 2.0), a(0.5, -1.0)], [[a(1, 2, 2, 4), a(1, 1)]]),
    "det": (lambda x: la.det(m22(x)), [a(3.0, 1.0, -1.0, 2.0)], [[a(1, 2, 2, 4)], [a(0, 0, 0, 0)]]),
    "adjugate": (lambda x: la.adjugate(m22(x)), [a(3.0, 1.0, -1.0, 2.0)], [[a(1, 2, 2, 4)]]),
    "slogdet": (lambda x: la.slogdet(m22(x)), [a(3.0, 1.0, -1.0, 2.0)], [[a(1, 2, 2, 4)]]),
    "pinv": (lambda x: la.pinv(m22(x)), [a(3.0, 1.0, -1.0, 2.0)], [[a(1, 2, 2, 4)], [a(0, 0, 0, 0)]]),
    "cholesky": (lambda x: la.cholesky(m22(x)), [a(4.0, 1.0, 1.0, 3.0)], [[a(1, 2, 2, 1)]]),
    "svd": (lambda x: la.svd(m22(x)), [a(3.0, 1.0, -1.0, 2.0)], [[a(1, 0, 0, 1)], [a(0, 0, 0, 0)]]),
    "qr": (lambda x: la.qr(m22(x)), [a(3.0, 1.0, -1.0, 2.0)], [[a(1, 2, 2, 4)]]),
    "eigh": (lambda x: la.eigh(m22(x)), [a(2.0, 1.0, 1.0, 3.0)], [[a(1, 0, 0, 1)]]),
    # reductions, sorting and search (lang/array/reduce_ops.py): zeros (one and two), ties, infinite rows
    "prod": (ops.prod, [a(1.5, -2.0, 0.5)], [[a(0, 2, 3)], [a(0, 0, 3)], [a(INF, 2, 3)], [a(1e200, 1e200, 1e-300)]]),
    "prod/dim": (lambda x: ops.prod(m22(x), dim=1), [a(1.5, -2.0, 0.5, 3.0)], [[a(0, 2, 0, 0)], [a(INF, 0, 2, 3)]]),
    "cumsum": (lambda x: ops.cumsum(x, dim=0), [a(1.5, -2.0, 0.5)], [[a(INF, -INF, 1)]]),
    "cumprod": (lambda x: ops.cumprod(x, dim=0), [a(1.5, -2.0, 0.5)],
                [[a(2, 0, 3)], [a(0, 0, 3)], [a(INF, 2, 3)], [a(2, 3, 0)]]),
    "logsumexp": (lambda x: ops.logsumexp(x, dim=0), [a(1.5, -2.0, 0.5)],
                  [[a(INF, INF, 1)], [a(-INF, -INF, -INF)], [a(INF, -INF, 0)], [a(1e308, 1e308, -1e308)]]),
    "take_along": (lambda x: ops.take_along(x, idx=np.array([2, 0, 0]), dim=0), [a(1.5, -2.0, 0.5)], []),
    "put_along": (lambda x: ops.put_along(x, idx=np.array([2, 0, 0]), dim=0, shape=(4,)), [a(1.5, -2.0, 0.5)], []),
}


def m22(x):
    return ops.reshape(x, shape=(2, 2))


def sweep_cases():
    """(case name, call, inputs) for every special value in every input, and every kink."""
    out = []
    for name, (call, base, kinks) in CASES.items():
        for k in range(len(base)):
            for t in SPECIALS:
                inputs = [b.copy() for b in base]
                inputs[k][0] = t
                out.append((f"{name}[{k}]={t}", call, inputs))
        for j, inputs in enumerate(kinks):
            out.append((f"{name}/kink{j}", call, inputs))
    return out


def test_every_primitive_has_a_sweep_case():
    diff = {n for n, p in ops.TABLE.items() if not p.nondiff}
    covered = {n.split("/")[0] for n in CASES}
    assert diff - covered == set(), "add a sweep case for these primitives"


def _outputs(y):
    """A primitive's results as a tuple (several for svd, qr, eigh, slogdet)."""
    return y if type(y) is tuple else (y,)


def _gradients(call, inputs, cot):
    out = []
    for k in range(len(inputs)):
        def f(x, k=k):
            args = list(inputs)
            args[k] = x
            total = 0.0
            for y in _outputs(call(*args)):
                total = ops.add(total, ops.sum_(ops.mul(y, on_device(cot(tuple(np.shape(raw(y))))))))
            return total
        out.append(np.asarray(B.to_numpy(raw(grad(f, inputs[k]))), dtype=np.float64))
    return out


@pytest.mark.parametrize("label, call, inputs", sweep_cases(), ids=[c[0] for c in sweep_cases()])
def test_vjp_has_no_nan_the_limit_does_not_have(label, call, inputs):
    inputs = [on_device(x) for x in inputs]        # the session's backend (pytest --device)
    value = np.concatenate([np.asarray(B.to_numpy(raw(y)), dtype=np.float64).reshape(-1)
                            for y in _outputs(call(*inputs))])
    for k, g in enumerate(_gradients(call, inputs, lambda s: np.ones(s))):
        name = label.split("[")[0]
        if (name, k) in (("pow", 1), ("pow_grad", 2)):
            # the exponent of a negative base: b -> a^b has no real values around any b, so no
            # derivative, even where a^b has a value ((-2)^3): NaN there, as PyTorch and JAX
            base = np.asarray(B.to_numpy(raw(inputs[k - 1])), dtype=np.float64)
            assert np.isnan(g[base < 0]).all(), (label, g)
            g = g[~(base < 0)]
        if not np.isnan(value).any():
            assert not np.isnan(g).any(), (label, k, value, g)
    for k, g in enumerate(_gradients(call, inputs, lambda s: np.zeros(s))):
        if (name, k) == ("pow_grad", 1):
            # the one exception (core_ops._vjp_pow_grad): a zero second-pass cotangent against the
            # first pass's nonzero one at a = 0, where b (b - 1) a^(b-2) is infinite, is NaN (the
            # second derivative of |y|^1.5 at 0: abs'(0) = 0 may not hide the singularity)
            g0, a0, b0 = (np.asarray(B.to_numpy(raw(v)), dtype=np.float64) for v in inputs)
            singular = (g0 != 0) & (a0 == 0) & np.isinf(b0 * (b0 - 1) * np.float64(0.0) ** (b0 - 2))
            assert np.isnan(g[singular]).all(), (label, g)
            g = g[~singular]
        assert np.array_equal(g, np.zeros_like(g)), (label, k, "zero cotangent", g)


def bool_cases():
    """(label, call, inputs, k, j): input k made a bool matrix (untracked), input j differentiated."""
    out = []
    for name, (call, base, _) in CASES.items():
        for k in range(len(base)):
            for j in range(len(base)):
                if j != k:
                    out.append((f"{name}[{k}]=bool,d{j}", call, base, k, j))
    return out


@pytest.mark.parametrize("label, call, base, k, j", bool_cases(), ids=[c[0] for c in bool_cases()])
def test_a_bool_matrix_beside_a_differentiated_input_acts_as_its_floats(label, call, base, k, j):
    """Programs pass bool matrices (masks, one-hot tokens, comparisons) to arithmetic, where they
    count as 0 and 1: the gradient to the other inputs is the one with those floats (a plain VJP
    once took a NumPy bool matrix for a tensor and failed)."""
    flags = base[k] > 0.4
    grads = []
    for other in (on_device(flags), on_device(flags.astype(np.float64))):
        def f(x, other=other):
            args = [on_device(b) for b in base]
            args[k], args[j] = other, x
            total = 0.0
            for y in _outputs(call(*args)):
                total = ops.add(total, ops.sum_(y))
            return total
        grads.append(np.asarray(B.to_numpy(raw(grad(f, base[j]))), dtype=np.float64))
    # (another backend may take another kernel for the bool form: its rounding, not another value)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12 * max(1.0, np.abs(grads[1]).max()))


# ---- the limits the sweep relies on, as values ----------------------------------------------------
def test_pow_at_zero():
    assert grad(lambda x: ops.pow_(x, 0.0), 0.0) == 0.0                     # right: 0 (was nan)
    assert grad(lambda x: ops.sum_(ops.pow_(x, a(0, 0))), a(0, 1)).tolist() == [0, 0]
    assert grad(lambda x: ops.pow_(x, 1.0), 0.0) == 1.0
    assert grad(lambda x: ops.pow_(x, 2.0), 0.0) == 0.0
    assert grad(lambda x: ops.pow_(x, 0.5), 0.0) == INF
    assert grad(lambda b: ops.pow_(INF, b), -1.0) == 0.0                   # inf^b ln(inf) -> 0 for b < 0


@pytest.mark.parametrize("a, b, want", [(-2.0, 2.5, math.nan), (-2.0, 3.0, math.nan), (-INF, 2.0, math.nan),
                                         (0.0, 2.0, 0.0), (0.0, 0.0, 0.0), (0.0, -1.0, -INF),
                                         (2.0, 3.0, 8.0 * math.log(2.0)), (INF, -1.0, 0.0)])
def test_pow_gradient_to_the_exponent(a, b, want):
    """No real derivative in b for a < 0 (NaN, as PyTorch and JAX give; it was a silent 0); at a = 0
    the limit from a > 0; inf^b ln(inf) -> 0 for b < 0 (the tape's 0 x inf = 0, where PyTorch says NaN)."""
    got = grad(lambda t: ops.pow_(a, t), b)
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-15)
    try:
        import torch
    except ImportError:
        return
    if not (a == INF and b < 0):
        tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
        (torch.tensor(a, dtype=torch.float64) ** tb).backward()
        t = tb.grad.item()
        assert (math.isnan(got) and math.isnan(t)) or got == pytest.approx(t, rel=1e-15)


def test_pow_second_derivatives_in_the_exponent_are_nan_or_inf_where_the_first_is():
    """The NaN (a < 0) and -inf (0^b, b < 0) of the first derivative were constants, so grad of grad
    was finite there (10.86 where PyTorch says NaN): each branch is now written with the answer."""
    a = np.array([-2.0, 3.0])
    inner = lambda x, c: ops.sum_(ops.pow_(x, c))        # noqa: E731
    assert np.isnan(grad(lambda c: grad(lambda t: inner(a, t), c), 2.0))
    gx = grad(lambda x: grad(lambda t: inner(x, t), 2.0), a)
    assert np.isnan(gx[0]) and gx[1] == pytest.approx(3.0 * (1 + 2 * math.log(3.0)), rel=1e-14)
    assert grad(lambda c: grad(lambda t: inner(np.array([0.0, 3.0]), t), c), -1.0) == INF
    gx0 = grad(lambda x: grad(lambda t: inner(x, t), -1.0), np.array([0.0, 3.0]))
    assert gx0[0] == INF and gx0[1] == pytest.approx((1 - math.log(3.0)) / 9.0, rel=1e-14)


def test_gelu_at_infinity_is_its_limit():
    assert ops.gelu(-INF) == 0.0 and ops.gelu(INF) == INF
    assert grad(lambda x: ops.sum_(ops.gelu(x)), a(INF, -INF)).tolist() == [1.0, 0.0]


def test_zero_cotangent_through_sin_at_infinity():
    # where(x finite, sin(x), 0) at x = inf: the untaken branch's cos(inf) = nan meets a 0 cotangent
    x = a(INF, 1.0)
    g = grad(lambda v: ops.sum_(ops.where(np.isfinite(x), ops.sin(v), 0.0)), x)
    assert g.tolist() == [0.0, math.cos(1.0)]


def test_infinite_values_and_gains_give_the_limit_of_the_gradient():
    q, k = a(1.5, -2.0, 0.5).reshape(3, 1), a(0.3, 1.0, -1.0).reshape(3, 1)
    v = a(INF, 0.4, 0.8).reshape(3, 1)
    R = a(1.0, -2.0, 0.5).reshape(3, 1)
    # the gradient to q and k with an infinite value is G(v finite) + V G(sign): +-inf, not nan
    for argnum in range(2):
        def f(t, argnum=argnum, vv=v):
            args = [q, k, vv]
            args[argnum] = t
            return ops.sum_(ops.mul(ops.sdpa(*args, scale=1.0), R))
        at_inf = grad(f, [q, k][argnum])
        vb = np.where(np.isinf(v), 1e150, v)
        at_big = grad(lambda t, argnum=argnum: f(t, argnum, vb), [q, k][argnum])
        assert not np.isnan(at_inf).any()
        assert np.array_equal(np.sign(at_inf), np.sign(at_big))
    # an infinite gain of layer_norm / rms_norm: each entry of the gradient is its own +-inf
    x = a(1.5, -2.0, 0.5)
    for norm in (lambda t, gm: ops.layer_norm(t, gm, None, eps=1e-5), lambda t, gm: ops.rms_norm(t, gm, eps=1e-5)):
        gm = a(INF, 1.0, 2.0)
        at_inf = grad(lambda t: ops.sum_(norm(t, gm)), x)
        at_big = grad(lambda t: ops.sum_(norm(t, a(1e150, 1.0, 2.0))), x)
        assert not np.isnan(at_inf).any()
        assert np.array_equal(np.sign(at_inf), np.sign(at_big))
