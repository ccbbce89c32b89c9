"""The reverse-mode tape: every primitive against central finite differences (including
broadcast shapes, batches, ties, zeros and masked rows), higher order, nesting, structure."""
import math

import numpy as np
import pytest

from tapeml.array import backend as B, ops
from tapeml.builtins.autodiff import value_and_grad_impl
from tapeml.builtins.ml import attention as ml_attention
from tapeml.array.tape import Box, raw
from tapeml.array.values import Record

from support import fresh, run_ml, variables_after
from fd import PyInterp, builtin, check_grads, fd_grad, grad

# Under `pytest --device torch:cpu` these tests hand NumPy constants to functions of tensors
# (programs cannot: the Python API and the files bring values to the device); NumPy then
# computes the pair on the host and wraps the tensor, which NumPy 2 warns of. The values are
# the same; the warning says nothing about the product here.
pytestmark = pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context:DeprecationWarning")

block = builtin("transformer_block")         # with its declared defaults, called from Python


rng = np.random.default_rng(0)


def r(*shape):
    return rng.standard_normal(shape) if shape else float(rng.standard_normal())


def pos(*shape):
    return np.abs(r(*shape)) + 0.5 if shape else abs(r()) + 0.5


BROADCAST_PAIRS = [((), (4,)), ((4,), ()), ((3, 4), (4,)), ((3, 4), (1, 4)), ((3, 1), (1, 4)),
                   ((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 1))]


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "zmul", "mod"])
@pytest.mark.parametrize("sa,sb", BROADCAST_PAIRS)
def test_binary_broadcast(name, sa, sb):
    prim = ops.TABLE[name]
    a = pos(*sa) if name in ("pow", "div", "mod") else r(*sa)
    b = pos(*sb) + 0.3 if name in ("div", "mod") else (r(*sb) if name != "pow" else pos(*sb))
    if name == "mod":
        a = a + 0.05  # keep away from the jumps of the floor
        check_grads(lambda x: prim(x, b), a)
        return
    check_grads(prim, a, b)


UNARY = {
    "neg": (ops.neg, r), "exp": (ops.exp, r), "log": (ops.log, pos), "sqrt": (ops.sqrt, pos),
    "sin": (ops.sin, r), "cos": (ops.cos, r), "tanh": (ops.tanh, r), "abs": (ops.abs_, r),
    "relu": (ops.relu, r), "sigmoid": (ops.sigmoid, r), "erf": (ops.erf, r), "gelu": (ops.gelu, r),
    "transpose": (ops.transpose, r),
}


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (4,)), ((), (3,))])
def test_pairwise_extremes(name, sa, sb):
    check_grads(ops.TABLE[name], r(*sa), r(*sb))


def test_pairwise_ties_split_evenly():
    ga, gb = (grad(lambda a: ops.sum_(ops.maximum(a, np.array([1.0, 5.0]))), np.array([1.0, 2.0])),
              grad(lambda b: ops.sum_(ops.maximum(np.array([1.0, 2.0]), b)), np.array([1.0, 5.0])))
    assert np.array_equal(ga, [0.5, 0]) and np.array_equal(gb, [0.5, 1])


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(), (4,), (3, 4), (2, 3, 4)])
def test_unary(name, shape):
    prim, gen = UNARY[name]
    if name == "transpose" and shape == ():
        return
    check_grads(prim, gen(*shape))


@pytest.mark.parametrize("shape,dim", [((4,), None), ((3, 4), None), ((3, 4), 0), ((3, 4), 1),
                                       ((2, 3, 4), 2), ((2, 3, 4), (0, 2))])
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reductions(name, shape, dim):
    check_grads(lambda x: ops.TABLE[name](x, dim=dim), r(*shape))


def test_max_ties_split_evenly():
    g = grad(lambda x: ops.amax(x), np.array([1.0, 3.0, 3.0, 2.0]))
    assert np.array_equal(g, [0, 0.5, 0.5, 0])
    g = grad(lambda x: ops.sum_(ops.amin(x, dim=1)), np.array([[1.0, 1.0], [2.0, 5.0]]))
    assert np.array_equal(g, [[0.5, 0.5], [1, 0]])


def test_kinks():
    assert grad(lambda x: ops.abs_(x), 0.0) == 0
    assert grad(lambda x: ops.relu(x), 0.0) == 0
    assert grad(lambda x: ops.sqrt(x), 0.0) == math.inf
    assert np.array_equal(grad(lambda x: ops.sqrt(ops.sum_(ops.mul(x, x))), np.zeros(2)), [0, 0])


def test_clip_where():
    x = np.array([-2.0, 0.3, 0.7, 5.0])
    check_grads(lambda v: ops.clip(v, lo=0.0, hi=1.0), x)
    c = x > 0
    check_grads(lambda a, b: ops.where(c, a, b), r(4), r(4))
    check_grads(lambda a: ops.where(c, a, 0.0), r(4))


def test_where_blocks_nan_from_untaken_branch():
    x = np.array([-1.0, 0.0, 4.0])
    g = grad(lambda v: ops.sum_(ops.where(ops.gt(v, 0.0), ops.mul(v, ops.sqrt(v)), 0.0)), x)
    assert np.array_equal(g, [0, 0, 3])
    g = grad(lambda v: ops.sum_(ops.where(ops.gt(v, 0.0), ops.log(v), 0.0)), x)
    assert np.array_equal(g, [0, 0, 0.25])


@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)),
                                   ((2, 2, 3), (3, 4)), ((2, 2, 3), (2, 3, 4)), ((2, 3), (2, 3, 4))])
def test_matmul(sa, sb):
    check_grads(ops.matmul, r(*sa), r(*sb))
    check_grads(ops.zmatmul, r(*sa), r(*sb))


def test_shapes_and_indexing():
    check_grads(lambda x: ops.reshape(x, shape=(2, 6)), r(3, 4))
    check_grads(lambda x: ops.broadcast_to(x, shape=(3, 4)), r(1, 4))
    check_grads(lambda x: ops.permute(x, axes=(1, 2, 0)), r(2, 3, 4))
    check_grads(lambda a, b: ops.concat(a, b, dim=0), r(2, 3), r(1, 3))
    check_grads(lambda a, b: ops.concat(a, b, dim=1), r(2, 3), r(2, 2))
    check_grads(lambda a, b: ops.stack(a, b, dim=1), r(2, 3), r(2, 3))
    check_grads(lambda x: ops.index(x, idx=(slice(0, 2), 1)), r(3, 4))
    check_grads(lambda x: ops.index(x, idx=(slice(None, None, -2), np.int64(-1))), r(5, 4))   # basic: a plain store
    check_grads(lambda x: ops.permute(x, axes=(2, 0, 1)), r(2, 3, 4))
    check_grads(lambda x: ops.index(x, idx=(np.array([0, 2, 0, 0]),)), r(3, 4))   # repeats accumulate
    g = grad(lambda x: ops.sum_(ops.index(x, idx=(np.array([0, 0, 1]),))), np.zeros(3))
    assert np.array_equal(g, [2, 1, 0])
    check_grads(lambda x, v: ops.setitem(x, v, idx=(slice(1, 3),)), r(4), r(2))
    check_grads(lambda x, v: ops.setitem(x, v, idx=(slice(None), 0)), r(3, 4), r())
    check_grads(lambda g: ops.scatter_add(g, idx=(np.array([0, 0, 2]),), shape=(3,)), r(3))


def orth(parts, shape):
    """The NumPy index the language builds for per-axis parts (each index its own axis)."""
    return ops.orthogonal(list(parts), shape)


V01 = np.array([0, 1])


@pytest.mark.parametrize("shape,idx,vshape", [
    ((4,), (np.array([0, 2, 0]),), (3,)),                                # a vector with a repeat
    ((3,), (np.array([0, 0]),), ()),                                     # a number written twice
    ((3, 4), (np.array([1, 1]),), (2, 4)),                               # a whole row twice
    ((3, 4), (np.array([1, 1]),), (4,)),                                 # ... from one broadcast row
    ((3, 4), (np.array([1, 1]),), (1, 1, 4)),                            # ... with leading axes of 1
    ((3, 4), (1, slice(None)), (1, 4)),                                  # (a store drops them)
    ((3, 4), orth([np.array([2, 0, 2]), np.array([3, 3])], (3, 4)), (3, 2)),   # a grid repeating in both
    ((3, 4), orth([slice(None), np.array([1, 1, 0])], (3, 4)), (3, 3)),
    ((2, 3, 4), orth([1, slice(None), np.array([3, 0, 3])], (2, 3, 4)), (3, 3)),   # issue 16's mix
    ((2, 3, 4), orth([np.array([0, 0]), slice(0, 2), np.array([2, 2])], (2, 3, 4)), (2, 2, 2)),
    ((2, 3, 4), orth([V01[[1, 1]], 2, slice(3, None, -2)], (2, 3, 4)), (2, 2)),
    ((2, 3, 4), (np.arange(24).reshape(2, 3, 4) % 5 == 0,), (5,)),      # a full-shape mask
    ((2, 3, 4, 2), orth([np.array([1, 1]), 0, slice(None), np.array([0, 1, 0])], (2, 3, 4, 2)), (2, 4, 3)),
])
def test_writes_and_reads_with_repeated_indices(shape, idx, vshape):
    """The last write to an element wins (row-major order of the index grid), forward and VJP:
    finite differences see no effect from an overwritten write, so its gradient is 0; a read
    through repeats adds the cotangents."""
    check_grads(lambda x, v: ops.setitem(x, v, idx=idx), r(*shape), r(*vshape))
    check_grads(lambda x: ops.index(x, idx=idx), r(*shape))
    check_grads(lambda x, v: ops.setitem(x, ops.add(ops.index(x, idx=idx), v), idx=idx), r(*shape), r(*vshape))


def test_repeated_write_keeps_the_last_value_and_credits_it_alone():
    x, v = np.zeros(3), np.array([10.0, 20.0])
    assert np.array_equal(ops.setitem(x, v, idx=(np.array([0, 0]),)), [20, 0, 0])
    g = grad(lambda v: ops.sum_(ops.mul(ops.setitem(x, v, idx=(np.array([0, 0]),)), np.array([1.0, 2, 3]))), v)
    assert np.array_equal(g, [0, 1])
    idx = orth([np.array([1, 0, 1]), slice(None)], (2, 2))
    assert np.array_equal(ops.setitem(np.zeros((2, 2)), np.array([[1.0, 2], [3, 4], [5, 6]]), idx=idx),
                          [[3, 4], [5, 6]])


@pytest.mark.parametrize("shape,parts,want", [
    ((2, 3, 4), [1, slice(None), np.array([1, 0])], (3, 2)),
    ((2, 3, 4), [slice(None), 1, np.array([1, 0])], (2, 2)),
    ((2, 3, 4), [np.array([1, 0]), slice(None), 2], (2, 3)),
    ((2, 3, 4), [np.array([1]), 2, np.array([0, 1, 2])], (1, 3)),
    ((2, 3, 4, 5), [0, slice(None), np.array([1, 0]), 4], (3, 2)),
    ((2, 3, 4), [np.array([1, 0])], (2, 3, 4)),
    ((2, 3, 4), [slice(None), np.array([2, 0])], (2, 2, 4)),
])
def test_orthogonal_index_keeps_each_axis_in_order(shape, parts, want):
    x = np.arange(np.prod(shape)).reshape(shape)
    ref, axis = x, 0
    for p in parts:                  # one axis at a time, never NumPy's mixed rule
        if isinstance(p, int):
            ref = np.take(ref, p, axis=axis)
        else:
            ref = np.take(ref, np.arange(ref.shape[axis])[p] if isinstance(p, slice) else p, axis=axis)
            axis += 1
    got = x[ops.orthogonal(parts, shape)]
    assert got.shape == want and np.array_equal(got, ref)


@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 5)])
def test_softmax_family(shape):
    check_grads(lambda x: ops.softmax(x, dim=-1), r(*shape))
    check_grads(lambda x: ops.log_softmax(x, dim=-1), r(*shape))
    if len(shape) > 1:
        check_grads(lambda x: ops.softmax(x, dim=0), r(*shape))


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4)])
def test_layer_norm_and_dense(shape):
    check_grads(lambda x, g, b: ops.layer_norm(x, g, b, eps=1e-5), r(*shape), r(4), r(4))
    check_grads(lambda x, w, b: ops.dense(x, w, b), r(*shape), r(4, 3), r(3))
    check_grads(lambda x, w: ops.dense(x, w, None), r(*shape), r(4, 3))


def test_ldexp():
    """x 2^e, e a constant per row (the power-of-two rescaling of the reductions that square); x
    smaller than e broadcasts and its gradient sums back."""
    e = np.array([[3], [-2], [0]], dtype=np.int32)
    check_grads(lambda x: ops.ldexp(x, e=e), r(3, 4))
    check_grads(lambda x: ops.ldexp(x, e=e), r(4))
    assert np.array_equal(grad(lambda x: ops.sum_(ops.ldexp(x, e=e)), np.ones(4)), np.full(4, 8 + 0.25 + 1))


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(batch, causal):
    q, k, v = r(*batch, 3, 4), r(*batch, 5, 4), r(*batch, 5, 2)
    check_grads(lambda q, k, v: ml_attention.attention(q, k, v, causal=causal), q, k, v)
    bias = r(3, 5)
    check_grads(lambda q, k, v, b: ops.sdpa(q, k, v, b, scale=0.5), q, k, v, bias)
    # the weights themselves (attention dropout and need_weights take this form)
    check_grads(lambda q, k, b: ops.attention_weights(q, k, b, causal=causal, scale=0.5), q, k, bias)
    check_grads(lambda q, k: ops.attention_weights(q, k, None, mask=np.array([[1, 0, 1, 1, 0]] * 3), scale=0.5), q, k)


INF = math.inf
NAN = math.nan
# name -> cases (inputs, keywords, cotangent or None for a random one) for every primitive that
# declares a first-order VJP (vjp_plain): random inputs and the numerics edge cases of
# test_vjp_sweep.py and test_numerics_limits.py (+inf scores, zero-variance rows with eps = 0,
# huge and tiny rows, 0 x inf). The test below loops over the table, not over this dict.
PLAIN_VJP_CASES = {
    # cumprod: the O(n) first-order form at zeros (the recorded form keeps each zero's derivative)
    "cumprod": [
        (lambda: (r(3, 4),), {"dim": 1}, None),
        (lambda: (np.array([[2.0, 0.0, 3.0, 0.5], [0.0, 0.0, 1.5, 2.0]]),), {"dim": 1}, None),
        (lambda: (np.array([[2.0, 0.0, 3.0], [1.0, 4.0, 0.0]]),), {"dim": 0}, None),
        (lambda: (np.array([0.0, 1.5, 2.0, -0.5]),), {"dim": 0}, None),
    ],
    "mul": [
        (lambda: (r(3, 4), 1.5), {}, None),
        (lambda: (r(3, 4), 2.0 ** -1070), {}, None),
        (lambda: (r(3, 4), r(3, 4)), {}, None),
        (lambda: (np.array([[0.0, 1.0], [2.0, -1.0]]), INF), {}, lambda: np.array([[0.0, 1.0], [0.0, 2.0]])),
        (lambda: (np.array([[1e300, -1e300]]), 1e300), {}, lambda: np.array([[0.0, 1e10]])),
    ],
    "matmul": [
        (lambda: (r(3, 4), r(4, 2)), {}, None),
        (lambda: (r(2, 3, 4), r(4, 2)), {}, None),
        (lambda: (r(2, 3, 4), r(2, 4, 2)), {}, None),
        (lambda: (r(4), r(4, 2)), {}, None),
        # 0 x inf = 0: an infinite weight where the cotangent is 0
        (lambda: (np.array([[INF, 1.0], [2.0, 3.0]]), np.array([[1.0, -INF], [0.0, 2.0]])), {},
         lambda: np.array([[0.0, 0.0], [1.0, 0.0]])),
        (lambda: (np.array([[1e200, 1e200]]), np.array([[1e200], [1e200]])), {}, lambda: np.array([[1e200]])),
    ],
    "dense": [
        (lambda: (r(2, 3, 4), r(4, 3), r(3)), {}, None),
        (lambda: (r(3, 4), r(4, 3), r(1)), {}, None),
        (lambda: (r(3, 4), r(4, 3), None), {}, None),
        (lambda: (r(2, 3, 4), r(2, 4, 3), r(3)), {}, None),
        (lambda: (np.array([[INF, 1.0], [0.0, 2.0]]), r(2, 3), r(3)), {},
         lambda: np.array([[0.0, 0.0, 0.0], [1.0, -1.0, 2.0]])),
    ],
    # the heads of multi-head attention joined (issue 28): x [.., T, D] by H weights [D, d] (and
    # biases [d]) into [.., H, T, d]; [.., H, T, d] by H weights [d, D] summed into [.., T, D]
    "dense_heads": [
        (lambda: (r(3, 4), r(4, 2), r(4, 2)), {}, None),
        (lambda: (r(2, 3, 4), r(4, 2), r(4, 2), r(4, 2), r(2), r(2), r(2)), {"bias": True}, None),
        (lambda: (r(3, 4), r(4, 3)), {}, None),
        (lambda: (np.array([[INF, 1.0], [0.0, 2.0]]), r(2, 1), r(2, 1)), {},
         lambda: np.array([[[0.0], [1.0]], [[0.0], [-2.0]]])),
    ],
    "heads_dense": [
        (lambda: (r(2, 3, 2), r(2, 4), r(2, 4)), {}, None),
        (lambda: (r(2, 3, 3, 2), r(2, 4), r(2, 4), r(2, 4)), {}, None),
        (lambda: (np.array([[[INF, 1.0]], [[0.0, 2.0]]]), r(2, 3), r(2, 3)), {}, lambda: np.zeros((1, 3))),
    ],
    "sum": [
        (lambda: (r(3, 4),), {}, None),
        (lambda: (r(2, 3, 4),), {"dim": 1}, None),
        (lambda: (r(5),), {}, lambda: INF),
    ],
    "concat": [
        (lambda: (r(2, 3), r(4, 3)), {"dim": 0}, None),
        (lambda: (r(2, 3), r(2, 1), r(2, 2)), {"dim": -1}, None),
        (lambda: (r(2, 2, 3), r(2, 1, 3)), {"dim": 1}, lambda: np.full((2, 3, 3), INF)),
    ],
    "layer_norm": [
        (lambda: (r(2, 3, 4), r(4), r(4)), {"eps": 1e-5}, None),
        (lambda: (r(3, 4), r(4), None), {"eps": 1e-5}, None),
        (lambda: (r(3, 4), r(3, 4), r(4)), {"eps": 1e-5}, None),
        # issue 15: rows that need rescaling, eps = 0 on a constant row, tiny rows, an infinite entry
        (lambda: (np.array([[1e200, -2e200, 3e200, 5e199], [4.0, 4.0, 4.0, 4.0], [1.0, 2.0, 0.0, -1.0]]),
                  r(4), r(4)), {"eps": 0.0}, None),
        (lambda: (np.array([[1e-300, -2e-300, 3e-300, 0.0], [1.0, INF, 0.0, 2.0]]), r(4), r(4)),
         {"eps": 1e-5}, None),
        (lambda: (np.array([[5e-324, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]), r(4), r(4)), {"eps": 0.0}, None),
        # an infinite cotangent or gain: the plain form declines, the general one takes it
        (lambda: (r(2, 4), np.array([1.0, INF, 2.0, 0.0]), r(4)), {"eps": 1e-5}, None),
        (lambda: (r(2, 4), r(4), r(4)), {"eps": 1e-5}, lambda: np.array([[INF, 0.0, 1.0, 2.0], [0.0, 0.0, 0.0, 0.0]])),
    ],
    "scaled_dot_product_attention": [
        (lambda: (r(2, 3, 4), r(2, 5, 4), r(2, 5, 2)), {"scale": 0.5}, None),
        (lambda: (r(3, 4), r(5, 4), r(5, 2)), {"scale": 0.5, "causal": True}, None),
        (lambda: (r(3, 4), r(3, 4), r(3, 2)), {"scale": 0.5, "mask": np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0]])}, None),
        (lambda: (r(3, 4), r(5, 4), r(5, 2), r(3, 5)), {"scale": 0.5}, None),
        # +inf scores (an overflowing q k^T), an infinite value, an infinite cotangent
        (lambda: (np.array([[1e200, 0.0], [0.0, 1.0], [1e200, 1e200]]),
                  np.array([[1e200, 0.0], [0.0, 1.0], [1e200, -1.0]]), r(3, 2)), {"scale": 0.5}, None),
        (lambda: (r(3, 2), r(3, 2), np.array([[INF, 1.0], [2.0, -INF], [0.5, 1.0]])), {"scale": 0.5}, None),
        (lambda: (r(3, 2), r(3, 2), r(3, 2)), {"scale": 0.5}, lambda: np.array([[INF, 0.0], [0.0, 0.0], [1.0, 2.0]])),
    ],
    "relu": [
        (lambda: (r(3, 4),), {}, None),
        # -0, 0, NaN and infinite inputs; an infinite cotangent against a 0 slope
        (lambda: (np.array([[-0.0, 0.0, NAN, INF], [-INF, 1.0, -1.0, 2.0]]),), {},
         lambda: np.array([[1.0, 2.0, 3.0, 4.0], [INF, -INF, NAN, 1.0]])),
    ],
    "softmax": [
        (lambda: (r(3, 4),), {}, None),
        (lambda: (r(2, 3, 4),), {"dim": 1}, None),
        # a +inf row (the limit: gradient 0), a row of -inf (every class masked), huge entries
        (lambda: (np.array([[INF, INF, 1.0], [-INF, -INF, -INF], [INF, -INF, 0.0], [1e308, 1e308, -1e308]]),),
         {}, None),
        (lambda: (r(2, 3),), {}, lambda: np.array([[1e300, 0.0, 1.0], [0.0, 0.0, 0.0]])),
    ],
}
PLAIN_VJP_CASES["log_softmax"] = PLAIN_VJP_CASES["softmax"]
PLAIN_VJP_CASES["zmatmul"] = PLAIN_VJP_CASES["matmul"]


def _declares_vjp_plain():
    return sorted(n for n, p in ops.TABLE.items() if p.vjp_plain is not None)


def test_every_first_order_vjp_has_parity_cases():
    assert sorted(PLAIN_VJP_CASES) == _declares_vjp_plain()


@pytest.mark.numpy_only
@pytest.mark.parametrize("name", _declares_vjp_plain())
def test_first_order_vjps_equal_their_recorded_form(name):
    """A primitive may declare `vjp_plain`, its VJP in NumPy for first order; the tape takes it
    when no Box is in sight (Primitive.pullback). A Box around the cotangent forces the form
    written with primitives (`vjp`); both must give the same cotangents on every case, and the
    plain form must take at least one of them."""
    from tapeml.array.tape import leaf, new_level
    prim = ops.TABLE[name]
    taken = 0
    for args, kw, cot in PLAIN_VJP_CASES[name]:
        args = args()
        needs = [type(a) is np.ndarray for a in args]
        if prim.fwd is not None:
            ans, res = prim.fwd(*args, **kw)
        else:
            ans, res = prim.impl(*args, **kw), None
        g = cot() if cot is not None else r(*np.shape(ans))
        taken += prim.vjp_plain(g, ans, res, needs, *args, **kw) is not None
        plain = prim.pullback(g, ans, res, needs, *args, **kw)
        recorded = prim.vjp(leaf(g, new_level()), ans, res, needs, *args, **kw)
        for a, b in zip(plain, recorded):
            assert (a is None) == (b is None)
            if a is not None:
                assert type(a) is np.ndarray and np.shape(a) == np.shape(raw(b))
                assert not np.isnan(a).any()
                np.testing.assert_allclose(a, raw(b), rtol=1e-12, atol=1e-12)
    assert taken > 0


def test_the_tape_takes_the_plain_vjp_only_at_first_order(monkeypatch):
    prim = ops.TABLE["layer_norm"]
    seen = []

    def spy(g, ans, res, needs, *args, **kw):
        seen.append(any(type(t) is Box for t in (g, ans) + args + tuple(kw.values())))
        return vjp_plain(g, ans, res, needs, *args, **kw)
    vjp_plain = prim.vjp_plain
    monkeypatch.setattr(prim, "vjp_plain", spy)
    gm, bt = r(4), r(4)
    f = lambda t: ops.sum_(ops.mul(ops.layer_norm(t, gm, bt), ops.layer_norm(t, gm, bt)))
    x = r(3, 4)
    grad(f, x)
    assert seen == [False, False]
    seen.clear()
    grad(lambda t: ops.sum_(ops.mul(grad(f, t), grad(f, t))), x)      # grad of grad: recorded VJPs
    assert not any(seen)



def test_the_first_order_test_is_made_once_per_pass_and_an_outer_box_anywhere_keeps_it_per_node(monkeypatch):
    """Issue 28: a tape that holds no Box of another level takes the plain VJPs without testing
    each node; one application that holds an outer level's Box (here the last one, c * ...)
    makes the whole pass test each node again, so grad of grad still records where it must."""
    from tapeml.array import tape
    calls = []
    real = tape.first_order
    monkeypatch.setattr(tape, "first_order", lambda *a: calls.append(1) or real(*a))
    gm, bt = r(4), r(4)
    x = r(3, 4)
    grad(lambda t: ops.sum_(ops.layer_norm(t, gm, bt)), x)
    assert calls == []                              # one test for the pass: no Box of another level
    R, W = r(3, 4), r(3, 4)
    inner = lambda c: (lambda t: ops.mul(c, ops.sum_(ops.mul(ops.layer_norm(t, gm, bt), R))))
    d2 = grad(lambda c: ops.sum_(ops.mul(grad(inner(c), x), W)), 1.5)   # d/dc of c * (grad_x f . W)
    assert calls                                    # the inner pass tested its nodes
    want = fd_grad(inner(1.0), x)
    assert abs(d2) > 0.1
    assert d2 == pytest.approx(float(np.sum(want * W)), rel=1e-6)


def test_zero_times_inf_in_a_backward_product_is_zero_with_one_finiteness_test_per_pass():
    """Issue 28: the plain VJPs multiply matrices without zmatmul's test of each product; a pass
    whose leaves are not all finite runs again with the careful products. A zero cotangent that
    meets an infinite weight gives 0 (not NaN) as before, and a finite pass is the careful one's."""
    w = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = np.array([[np.inf, 1.0], [2.0, 3.0]])
    m = np.array([[0.0, 1.0], [0.0, 1.0]])          # the cotangent of w @ x is 0 in the column of inf
    g = grad(lambda t: ops.sum_(ops.mul(ops.matmul(t, x), m)), w)
    np.testing.assert_array_equal(g, m @ np.where(np.isinf(x), 0.0, x).T)   # [[1, 3], [1, 3]], no NaN
    gb = grad(lambda t: ops.sum_(ops.mul(ops.dense(x, t, None), m)), w)      # dense's plain VJP: x' g
    np.testing.assert_array_equal(gb, [[0.0, np.inf], [0.0, 4.0]])          # 0 x inf = 0; inf x 1 stays inf
    y = r(3, 4)
    careful = ops.TABLE["matmul"].vjp(np.ones((3, 3)), None, None, [True, True], y, y.T)
    fast = grad(lambda t: ops.sum_(ops.matmul(t, y.T)), y)
    np.testing.assert_array_equal(fast, careful[0])

def test_fully_masked_row_gives_zeros_forward_and_backward():
    q, k, v = r(3, 2), r(3, 2), r(3, 2)
    mask = np.array([[False, False, False], [True, False, True], [True, True, True]])
    out = ml_attention.attention(q, k, v, mask=mask)
    assert np.array_equal(out[0], [0, 0])
    for argnum in range(3):
        def loss(x, argnum=argnum):
            args = [q, k, v]
            args[argnum] = x
            return ops.sum_(ml_attention.attention(*args, mask=mask))
        g = grad(loss, [q, k, v][argnum])
        assert np.all(np.isfinite(g))
    gq = grad(lambda x: ops.sum_(ml_attention.attention(x, k, v, mask=mask)), q)
    assert np.array_equal(gq[0], [0, 0])
    check_grads(lambda q, k, v: ml_attention.attention(q, k, v, mask=mask), q, k, v)


def test_joined_head_projections_against_the_per_head_products_and_finite_differences():
    """Issue 28: dense_heads and heads_dense are multi-head attention's projections with the heads'
    matrices side by side (one tape node each). Their values are the per-head products; their
    gradients (first order: the plain VJPs; second order: the recorded ones) agree with central
    differences, batched and not, with and without biases."""
    x = r(2, 3, 4)
    ws, bs = [r(4, 2) for _ in range(3)], [r(2) for _ in range(3)]
    q = ops.dense_heads(x, *ws, *bs, bias=True)
    assert q.shape == (2, 3, 3, 2) and q.flags.c_contiguous
    for h in range(3):
        np.testing.assert_allclose(q[:, h], x @ ws[h] + bs[h], rtol=1e-13, atol=1e-13)
    wo = [r(2, 4) for _ in range(3)]
    np.testing.assert_allclose(ops.heads_dense(q, *wo), sum(q[:, h] @ wo[h] for h in range(3)), rtol=1e-13, atol=1e-13)
    check_grads(lambda x, w1, w2, b1, b2: ops.dense_heads(x, w1, w2, b1, b2, bias=True), x, r(4, 2), r(4, 2), r(2), r(2))
    check_grads(lambda x, w1, w2: ops.dense_heads(x, w1, w2), r(3, 4), r(4, 1), r(4, 1))
    check_grads(lambda o, w1, w2: ops.heads_dense(o, w1, w2), r(2, 3, 2), r(2, 4), r(2, 4))
    check_grads(lambda o, w1, w2, w3: ops.heads_dense(o, w1, w2, w3), r(2, 3, 5, 2), r(2, 4), r(2, 4), r(2, 4))
    # grad of grad: the recorded VJPs (dense's and concat's, with reshape and permute)
    w1, w2, wa, wb = r(4, 2), r(4, 2), r(2, 4), r(2, 4)

    def inner(t):
        y = ops.heads_dense(ops.dense_heads(t, w1, w2), wa, wb)
        return ops.sum_(ops.mul(ops.mul(y, y), y))

    def outer(t):
        return ops.sum_(ops.mul(grad(inner, t), grad(inner, t)))
    t = r(3, 4)
    np.testing.assert_allclose(grad(outer, t), fd_grad(outer, t), rtol=1e-5, atol=1e-6)


def test_every_differentiable_primitive_is_checked_here():
    tested = set(UNARY) | {"add", "sub", "mul", "div", "pow", "zmul", "mod", "sum", "max", "min",
                           "clip", "where", "matmul", "reshape", "broadcast_to", "permute", "maximum", "minimum", "concat", "stack",
                           "index", "setitem", "scatter_add", "softmax", "log_softmax", "layer_norm",
                           "dense", "scaled_dot_product_attention", "attention_weights", "zmatmul", "ldexp",
                           "dense_heads", "heads_dense"}
    extra = {"rms_norm"}    # checked in test_block_options.py
    extra |= {"inv", "solve", "det", "adjugate", "slogdet", "pinv", "cholesky", "svd", "qr", "eigh"}  # test_linalg.py
    extra |= {"log10", "log2", "tan", "log1p", "expm1", "asin", "acos", "atan", "atan2", "sinh", "cosh",
              "softplus"}  # test_shapes_elementwise.py
    extra |= {"prod", "cumsum", "cumprod", "logsumexp", "take_along", "put_along"}   # test_reductions.py
    extra |= {"pow_grad", "dsigmoid", "dtanh", "erfc", "one_minus_sq"}   # test_numerics_stable.py
    diff = {n for n, p in ops.TABLE.items() if not p.nondiff}
    assert diff - tested - extra == set()


def test_composites_have_no_vjp():
    assert "multi_head_attention" not in ops.TABLE
    assert "transformer_block" not in ops.TABLE
    # and the block's tape holds only primitives of the table
    from tapeml.array.tape import toposort
    seen = set()

    def f(x):
        out = ml_attention.mha(x, (head(),))
        seen.update(n.prim.name for n in toposort(out) if n.prim is not None)
        return ops.sum_(out)
    grad(f, r(3, 2))
    assert seen and seen <= set(ops.TABLE)
    assert "multi_head_attention" not in seen


def head(d=2, dk=2):
    return Record({"wq": r(d, dk), "wk": r(d, dk), "wv": r(d, dk), "wo": r(dk, d)})


def block_weights(d=4, n_heads=2, hidden=8):
    return Record({"heads": tuple(head(d, d // n_heads) for _ in range(n_heads)),
                   "ln1_gamma": 1 + 0.1 * r(d), "ln1_beta": 0.1 * r(d), "w1": r(d, hidden), "b1": r(hidden),
                   "w2": r(hidden, d), "b2": r(d), "ln2_gamma": 1 + 0.1 * r(d), "ln2_beta": 0.1 * r(d)})


@pytest.mark.numpy_only
def test_block_gradient_structure_and_finite_differences():
    from tapeml.builtins.util import tree_leaves
    w = Record({**block_weights().fields})
    x = r(5, 4)
    R = r(5, 4)
    f = lambda w: ops.sum_(ops.mul(block(x, Record({k: v for k, v in w.fields.items() if k != "unused"})), R))
    w = Record({**w.fields, "unused": r(3)})
    g = grad(f, w)
    assert isinstance(g, Record) and list(g.fields) == list(w.fields)
    assert isinstance(g.fields["heads"], tuple) and len(g.fields["heads"]) == 2
    assert np.array_equal(g.fields["unused"], np.zeros(3))
    for (path, leaf), (_, gl) in zip(tree_leaves(w, "w"), tree_leaves(g, "w")):
        assert np.shape(gl) == np.shape(leaf), path
        if path == "w.unused":
            continue

        def loss_at(v, path=path):
            def swap(p, val):
                return v if p == path else val
            from tapeml.builtins.util import tree_map
            leaves = iter(tree_leaves(w, "w"))
            return f(tree_map(lambda val: swap(next(leaves)[0], val), w))
        fd = fd_grad(loss_at, leaf)
        assert np.max(np.abs(gl - fd)) < 1e-6 * max(1.0, np.max(np.abs(fd))), path


def test_fresh_gradients_each_call():
    for _ in range(3):
        assert np.array_equal(grad(lambda x: ops.sum_(ops.mul(ops.mul(x, x), x)), np.array([1.0, 2, 3])), [3, 12, 27])


def test_reused_intermediate_and_backward_idempotent():
    def f(a):
        b = ops.add(a, a)
        return ops.add(b, b)
    assert grad(f, 1.0) == 4
    assert grad(f, 1.0) == 4


def test_deep_chain_does_not_recurse():
    def f(x):
        for _ in range(5000):
            x = ops.mul(x, 1.0001)
        return x
    assert abs(grad(f, 1.0) - 1.0001 ** 5000) < 1e-9


# ---- higher order ------------------------------------------------------------------------
def d(f):
    return lambda x: grad(f, x)


@pytest.mark.parametrize("f,d2", [
    (lambda x: ops.pow_(x, 3.0), lambda x: 6 * x),
    (ops.sin, lambda x: -math.sin(x)),
    (ops.exp, math.exp),
    (ops.log, lambda x: -1 / x ** 2),
    (ops.tanh, lambda x: -2 * math.tanh(x) * (1 - math.tanh(x) ** 2)),
])
def test_second_derivatives(f, d2):
    for x in (0.3, 1.7):
        assert abs(d(d(f))(x) - d2(x)) < 1e-9
    if f is ops.sin:
        assert abs(d(d(d(f)))(0.3) + math.cos(0.3)) < 1e-9


def test_softmax_hessian_vector_product():
    x0, v, c = r(4), r(4), r(4)
    f = lambda x: ops.sum_(ops.mul(ops.softmax(x, dim=-1), c))
    hvp = grad(lambda x: ops.sum_(ops.mul(grad(f, x), v)), x0)
    h = 1e-5
    fd = (np.asarray(grad(f, x0 + h * v)) - np.asarray(grad(f, x0 - h * v))) / (2 * h)
    assert np.max(np.abs(hvp - fd)) < 1e-8


def test_mlp_hessian_vector_product():
    x, y = r(6, 3), r(6, 1)
    params = Record({"w1": r(3, 5), "b1": r(5), "w2": r(5, 1), "b2": r(1)})
    vec = Record({k: r(*np.shape(v)) for k, v in params.fields.items()})

    def loss(p):
        h = ops.tanh(ops.dense(x, p.fields["w1"], p.fields["b1"]))
        e = ops.sub(ops.dense(h, p.fields["w2"], p.fields["b2"]), y)
        return ops.div(ops.sum_(ops.mul(e, e)), 6.0)

    def gv(p):
        g = grad(loss, p)
        total = 0.0
        for k in g.fields:
            total = ops.add(total, ops.sum_(ops.mul(g.fields[k], vec.fields[k])))
        return total
    hvp = grad(gv, params)
    h = 1e-5
    plus = Record({k: v + h * vec.fields[k] for k, v in params.fields.items()})
    minus = Record({k: v - h * vec.fields[k] for k, v in params.fields.items()})
    gp, gm = grad(loss, plus), grad(loss, minus)
    for k in params.fields:
        fd = (gp.fields[k] - gm.fields[k]) / (2 * h)
        assert np.max(np.abs(hvp.fields[k] - fd)) < 1e-7, k


def test_nested_grads_do_not_confuse_tapes():
    # d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x  (the perturbation-confusion test)
    assert grad(lambda x: ops.mul(x, grad(lambda y: ops.mul(x, y), 2.0)), 3.0) == 6.0


def test_untracked_calls_return_plain_values():
    out = ops.add(np.ones(2), np.ones(2))
    assert type(out) is np.ndarray
    assert type(block(r(3, 4), block_weights())) in B.ARRAYS        # a plain matrix of the session's device, not a Box


# ---- through the language ----------------------------------------------------------------
def test_language_grad_forms():
    code, out = run_ml("""
print(grad(fn(x) -> x^2, 3))
print(grad(fn(x) -> grad(fn(y) -> y^3, x), 2))
w = {a = 2, b = (1, [1, 2]), unused = [5, 5]}
print(grad(fn(w) -> w.a * w.b[0] * sum(w.b[1]), w))
v, g = value_and_grad(fn(x) -> sum(x^2), [1, 2])
print(v, g)
print(grad(fn(x) -> x * stop_gradient(x), 3))
print(all([check_grad(fn(x) -> sum(sin(x) * x), [0.5, 1, 2]) < 1e-6]))
print(grad(fn(x) -> sum(where(x > 0, sqrt(x), 0)), [-1, 0, 4]))
""")
    assert code == 0, out
    assert out.splitlines() == ["6", "12", "{a = 3, b = (6, [2, 2]), unused = [0, 0]}",
                                "5 [2, 4]", "3", "true", "[0, 0, 0.25]"]


@pytest.mark.numpy_only
def test_fused_heads_match_the_per_head_loop(monkeypatch):
    """Large inputs run all heads as one batched attention; it must equal the per-head sum,
    forward and every gradient (batched input, with q/k/v biases and causal masking)."""
    from tapeml.builtins.util import tree_leaves
    x = r(2, 64, 64)
    heads = tuple(Record({"wq": r(64, 16), "wk": r(64, 16), "wv": r(64, 16), "wo": r(16, 64),
                          "bq": r(16), "bk": r(16), "bv": r(16)}) for _ in range(4))
    R = r(2, 64, 64)

    def loss(hs):
        return ops.sum_(ops.mul(ml_attention.mha(x, hs, causal=True), R))
    fused_out = ml_attention.mha(x, heads, causal=True)
    v1, g1 = value_and_grad_impl(PyInterp(), loss, heads)
    monkeypatch.setattr(ml_attention, "_fusable", lambda fields: False)
    loop_out = ml_attention.mha(x, heads, causal=True)
    v2, g2 = value_and_grad_impl(PyInterp(), loss, heads)
    assert np.max(np.abs(fused_out - loop_out)) < 1e-12 * np.max(np.abs(loop_out))
    assert abs(v1 - v2) < 1e-9
    for (p, a), (_, b) in zip(tree_leaves(g1, "heads"), tree_leaves(g2, "heads")):
        assert np.max(np.abs(a - b)) < 1e-10 * max(1.0, np.max(np.abs(b))), p


# ---- loops keep the tape (issue 16) ------------------------------------------------------
LOOP = """
fn f(s)
    t = 0
    for v in s
        t = t + sum(v * v * 2)
    end
    return t
end
"""


@pytest.mark.parametrize("expr,at,want", [
    ("f(x)", "3", "12"),                                  # a number: one item, itself
    ("f(x[0])", "[5, 6]", "[20, 0]"),                     # a number read out of a vector
    ("f(x)", "[1, -2, 3]", "[4, -8, 12]"),                # a vector's elements
    ("f(x)", "[1, 2; 3, 4]", "[4, 8; 12, 16]"),           # a matrix's rows
    ("f(x)", "reshape(0:7, 2, 2, 2)", "reshape(0:4:28, 2, 2, 2)"),    # slices of a rank-3 array
    ("f((x, 3 * x, [1, 1]))", "2", "80"),                 # a tuple's items
    ("f(x:x + 2)", "1", "24"),                            # a range with a tracked start
    ("f(0:x:3 * x)", "1", "56"),                          # ... and a tracked step
    ("f(x[0]:x[1])", "[1, 3.5]", "[24, 0]"),              # the end only sets the length
])
def test_every_loop_item_keeps_the_tape(expr, at, want):
    code, out = run_ml(LOOP + f"""
x0 = {at}
g = grad(fn(x) -> {expr}, x0)
print(g)
print(all(g == {want}), check_grad(fn(x) -> {expr}, x0) < 1e-6)
""")
    assert code == 0, out
    assert out.splitlines()[-1] == "true true", out


def test_loop_over_a_0d_value_keeps_the_tape():
    g = variables_after(LOOP + "G = grad(f, X)\nN = 0\nfor v in X\n    N = N + 1\nend", fresh(prelude=False),
                        X=np.array(3.0))
    assert float(g["G"]) == 12 and g["N"] == 1


def test_issue_16_loop_over_a_number():
    code, out = run_ml("""
fn f(s)
  t = 0
  for v in s
    t = t + v * 2
  end
  return t
end
print(grad(f, 3))
print(grad(fn(x) -> f(x[0]), [5, 6]))
print(grad(fn(x) -> grad(f, x) * x, 4))
""")
    assert code == 0, out
    assert out.splitlines() == ["2", "[2, 0]", "2"]


def test_a_vjp_that_keeps_a_broadcast_shape_is_an_internal_error_naming_the_argument():
    """The walk checks every cotangent's shape against its argument's (each VJP must undo its
    broadcasting): a wrong one is an InternalError naming the primitive and the argument."""
    from tapeml.array.tape import Primitive
    from tapeml.syntax.errors import InternalError
    bad = Primitive("bad_add", lambda a, b: a + b,
                    lambda g, ans, saved, tracked, a, b: (g, g))     # b's cotangent keeps a's shape
    x, b = r(3, 4), r(4)
    with pytest.raises(InternalError, match=r"VJP of bad_add gave a cotangent of shape \(3, 4\) for argument 1 of shape \(4,\)"):
        value_and_grad_impl(PyInterp(), lambda t: ops.sum_(bad(t[0], t[1])), (x, b))
    np.testing.assert_array_equal(grad(lambda t: ops.sum_(bad(t, t)), x), 2 * np.ones((3, 4)))
