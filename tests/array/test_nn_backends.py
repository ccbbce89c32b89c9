"""The transformer primitives and the ML builtins on PyTorch tensors (issue 27): every primitive of
lang/array/{softmax,norm,dense,attention}_ops.py run on torch:cpu equals its NumPy run to 1e-12 in float64, value, first-order
gradient (the plain VJPs: the fused softmax, log_softmax and layer_norm backward passes, the fused
attention kernel) and second-order gradient (the recorded VJPs), on ordinary inputs and on the
numerics edge cases (+-inf rows, rows beyond the float range, eps = 0, scores that overflow); the
results stay tensors; float32 stays float32; the builtins of builtins/ml make their matrices on the
session's device with the numbers NumPy's session makes (init weights, dropout masks, positions).
Skipped where torch (the extra tapeml[torch]) is not installed."""
import io
import math

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("array_api_compat")

from tapeml.array import attention_ops, backend as B, ops, tape  # noqa: E402
from tapeml.array.tape import raw  # noqa: E402
from fd import builtin  # noqa: E402

INF = math.inf
TORCH = B.make("torch:cpu")


def on_torch(v):
    """NumPy arrays (in tuples) as torch:cpu tensors; other values as they are."""
    if type(v) is np.ndarray:
        return TORCH.asarray(v)
    if type(v) is tuple:
        return tuple(on_torch(x) for x in v)
    return v


class session_backend:
    """`with session_backend(be):` makes be the backend new matrices are made on."""

    def __init__(self, be):
        self.be = be

    def __enter__(self):
        self.before = B.current()
        B.set_current(self.be)

    def __exit__(self, *exc):
        B.set_current(self.before)


def first_order(f, xs, R):
    """(f(xs), the gradient of sum(f(xs) R) for each x) on a fresh tape."""
    level = tape.open_level()
    try:
        boxes = [tape.leaf(x, level) for x in xs]
        y = f(*boxes)
        out = ops.sum_(ops.mul(y, R))
        if type(out) is not tape.Box:
            return raw(y), [None] * len(xs)
        leaves = tape.backward(out, 1.0, ops.add, ops.shape_of)
        return raw(y), [leaves.get(b) for b in boxes]
    finally:
        tape.close_level(level)


def second_order(f, xs, R, R2):
    """The gradient of sum(grad(sum(f(xs) R) w.r.t. xs[0]) R2) w.r.t. xs[0]: the inner backward
    pass is recorded (the VJPs written with primitives)."""
    outer = tape.open_level()
    try:
        bx = [tape.leaf(x, outer) for x in xs]
        inner = tape.open_level()
        try:
            by = [tape.leaf(b, inner) for b in bx]
            g = tape.backward(ops.sum_(ops.mul(f(*by), R)), 1.0, ops.add, ops.shape_of).get(by[0])
        finally:
            tape.close_level(inner)
        out = ops.sum_(ops.mul(g, R2))
        if type(out) is not tape.Box:
            return None
        return tape.backward(out, 1.0, ops.add, ops.shape_of).get(bx[0])
    finally:
        tape.close_level(outer)


def same(a, b, what, rtol=1e-12):
    """b (torch) equals a (NumPy): same shape, nan at the same places, else within rtol of
    max(1, |a|); b a tensor, not a NumPy array."""
    if a is None or b is None:
        assert a is None and b is None, what
        return
    assert type(b) is not np.ndarray, f"{what}: a NumPy array came out of the torch run"
    a = np.asarray(B.to_numpy(a), dtype=np.float64)
    b = np.asarray(B.to_numpy(b), dtype=np.float64)
    assert a.shape == b.shape, what
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b), err_msg=what)
    ok = nan | (a == b) | (np.abs(a - b) <= rtol * np.maximum(1.0, np.abs(a)))
    assert ok.all(), f"{what}: NumPy {a[~ok][:4]} torch {b[~ok][:4]}"


def both_backends(f, xs, order=2):
    """f on xs with NumPy and on torch:cpu: values and gradients (and second-order ones) agree."""
    y = raw(f(*xs))
    rng = np.random.default_rng(0)
    R = rng.standard_normal(np.shape(y))
    R2 = rng.standard_normal(np.shape(xs[0]))
    with session_backend(B.NUMPY):
        yn, gn = first_order(f, xs, R)
    with session_backend(TORCH):
        yt, gt = first_order(f, [on_torch(x) for x in xs], TORCH.asarray(R))
    same(yn, yt, "value")
    for i, (a, b) in enumerate(zip(gn, gt)):
        same(a, b, f"gradient {i}")
    if order == 2:
        with session_backend(B.NUMPY):
            hn = second_order(f, xs, R, R2)
        with session_backend(TORCH):
            ht = second_order(f, [on_torch(x) for x in xs], TORCH.asarray(R), TORCH.asarray(R2))
        same(hn, ht, "second-order gradient")


def r(*shape, seed=[0]):
    seed[0] += 1
    return np.random.default_rng(seed[0]).standard_normal(shape)


def big_rows():
    x = r(3, 5)
    x[1] *= 1e200
    x[2] *= 1e-200
    return x


def with_inf():
    x = r(3, 5)
    x[0, 1] = INF
    return x


def constant_row():
    x = r(3, 5)
    x[1] = 0.1
    return x


SOFTMAX_ROWS = [r(3, 4), np.array([[INF, INF, 1.0], [-INF, -INF, -INF], [INF, -INF, 0.0], [1e308, 1e308, -1e308],
                                   [np.nan, 1.0, 2.0], [1.0, 2.0, 3.0]])]
CASES = {
    "softmax": (lambda x: ops.softmax(x), [SOFTMAX_ROWS[0]]),
    "softmax dim 0": (lambda x: ops.softmax(x, dim=0), [r(3, 4)]),
    "softmax edge rows": (lambda x: ops.softmax(x), [SOFTMAX_ROWS[1]]),
    "log_softmax": (lambda x: ops.log_softmax(x), [SOFTMAX_ROWS[0]]),
    "log_softmax edge rows": (lambda x: ops.log_softmax(x), [SOFTMAX_ROWS[1]]),
    "layer_norm": (lambda x, g, b: ops.layer_norm(x, g, b), [r(2, 3, 5), r(5), r(5)]),
    "layer_norm gamma first": (lambda g, x, b: ops.layer_norm(x, g, b), [r(5), r(3, 5), r(5)]),
    "layer_norm no beta": (lambda x, g: ops.layer_norm(x, g, None), [r(3, 5), r(5)]),
    "layer_norm gamma 3x5": (lambda x, g, b: ops.layer_norm(x, g, b), [r(3, 5), r(3, 5), r(5)]),
    "layer_norm rows to rescale": (lambda x, g, b: ops.layer_norm(x, g, b), [big_rows(), r(5), r(5)]),
    "layer_norm inf": (lambda x, g, b: ops.layer_norm(x, g, b), [with_inf(), r(5), r(5)]),
    "layer_norm eps 0 constant row": (lambda x, g, b: ops.layer_norm(x, g, b, eps=0.0), [constant_row(), r(5), r(5)]),
    "rms_norm": (lambda x, g: ops.rms_norm(x, g), [r(2, 3, 5), r(5)]),
    "rms_norm rows to rescale": (lambda x, g: ops.rms_norm(x, g), [big_rows(), r(5)]),
    "dense": (lambda x, w, b: ops.dense(x, w, b), [r(3, 5), r(5, 4), r(4)]),
    "dense batched": (lambda x, w, b: ops.dense(x, w, b), [r(2, 3, 5), r(5, 4), r(4)]),
    "dense weights first": (lambda w, x, b: ops.dense(x, w, b), [r(5, 4), r(2, 3, 5), r(4)]),
    "dense no bias": (lambda x, w: ops.dense(x, w, None), [r(3, 5), r(5, 4)]),
    "dense bias [1]": (lambda x, w, b: ops.dense(x, w, b), [r(3, 5), r(5, 4), r(1)]),
    "sdpa d_v != d_k": (lambda q, k, v: ops.sdpa(q, k, v, None, scale=0.5), [r(2, 4, 3), r(2, 6, 3), r(2, 6, 2)]),
    "sdpa causal, more keys": (lambda q, k, v: ops.sdpa(q, k, v, None, causal=True, scale=0.5),
                               [r(2, 4, 3), r(2, 6, 3), r(2, 6, 3)]),
    "sdpa keys first": (lambda k, q, v: ops.sdpa(q, k, v, None, scale=0.5), [r(2, 6, 3), r(2, 4, 3), r(2, 6, 2)]),
    "sdpa bias": (lambda q, k, v, b: ops.sdpa(q, k, v, b, scale=0.5), [r(2, 4, 3), r(2, 6, 3), r(2, 6, 2), r(4, 6)]),
    "sdpa few keys": (lambda q, k, v: ops.sdpa(q, k, v, None, scale=0.5), [r(4, 3), r(3, 3), r(3, 5)]),
    "attention_weights": (lambda q, k: ops.attention_weights(q, k, None, causal=True, scale=0.5), [r(2, 4, 3), r(2, 6, 3)]),
    # every score of a row overflowing to -inf: the fused kernel calls the row masked (output 0),
    # tapeml's row attends to its largest true score (docs/language.md)
    "sdpa scores all below the float range": (lambda q, k, v: ops.sdpa(q, k, v, None, scale=0.7),
                                              [np.array([[1e200, 0.0], [0.5, 1.0]]),
                                               np.array([[-1e200, 0.0], [-2e200, 0.0]]), r(2, 2)]),
    # relu's fused pass on torch (threshold and its backward): -0, 0, NaN and infinite inputs
    "relu": (lambda x: ops.relu(x), [r(3, 5)]),
    "relu edges": (lambda x: ops.relu(x), [np.array([[-0.0, 0.0, np.nan, INF, -INF, 1e-310, -1e-310, 2.0]])]),
}
for _shape in [(5, 3), (2, 5, 3), (2, 3, 5, 4), (2, 1, 2, 6, 3)]:        # the fused attention kernel's shapes
    for _causal in (False, True):
        CASES[f"sdpa {_shape} causal={_causal}"] = (
            lambda q, k, v, c=_causal: ops.sdpa(q, k, v, None, causal=c, scale=0.7), [r(*_shape), r(*_shape), r(*_shape)])
        CASES[f"sdpa {_shape} causal={_causal}, values first"] = (
            lambda v, q, k, c=_causal: ops.sdpa(q, k, v, None, causal=c, scale=0.7), [r(*_shape), r(*_shape), r(*_shape)])


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_equals_numpy(name):
    f, xs = CASES[name]
    both_backends(f, xs)


def _overflowing():      # test_grad.py's case: q k' beyond 1e308 on some rows
    return (np.array([[1e200, 0.0], [0.0, 1.0], [1e200, 1e200]]), np.array([[1e200, 0.0], [0.0, 1.0], [1e200, -1.0]]),
            r(3, 2))


def _inf_value():
    v = r(2, 6, 2)
    v[0, 1, 0] = INF
    return v


def test_attention_edges_first_order():
    """The rare paths: scores beyond the float range (rescaled on the host; their rows' weights
    are the limit, tied keys sharing a row) and a value of inf. Values, and the gradient of v:
    the gradients of q and k on a tied row are 1e200 x (a difference that is 0 in exact
    arithmetic), rounding noise of either backend's products."""
    q, k, v = _overflowing()
    f = lambda v, q, k: ops.sdpa(q, k, v, None, scale=0.5)  # noqa: E731
    R = r(3, 2)
    with session_backend(B.NUMPY):
        yn, gn = first_order(f, [v, q, k], R)
    with session_backend(TORCH):
        yt, gt = first_order(f, [on_torch(x) for x in (v, q, k)], TORCH.asarray(R))
    same(yn, yt, "value")
    same(gn[0], gt[0], "gradient of v")
    both_backends(lambda q, k, v: ops.sdpa(q, k, v, None, scale=0.5), [r(2, 4, 3), r(2, 6, 3), _inf_value()], order=1)


def test_attention_masks_on_torch():
    """A bool mask on the device (a row with every key masked gives zeros), and a NumPy mask
    given to a torch attention (made on its device)."""
    mask = np.random.default_rng(3).random((2, 1, 6)) > 0.3
    mask[0, 0, :] = False
    q, k, v = r(2, 4, 3), r(2, 6, 3), r(2, 6, 2)
    for m in (TORCH.asarray(mask), mask):
        f_t = lambda q, k, v: ops.sdpa(q, k, v, None, mask=m, scale=0.5)  # noqa: E731
        f_n = lambda q, k, v: ops.sdpa(q, k, v, None, mask=mask, scale=0.5)  # noqa: E731
        R = r(2, 4, 2)
        with session_backend(B.NUMPY):
            yn, gn = first_order(f_n, [q, k, v], R)
        with session_backend(TORCH):
            yt, gt = first_order(f_t, [on_torch(x) for x in (q, k, v)], TORCH.asarray(R))
        same(yn, yt, "value")
        for a, b in zip(gn, gt):
            same(a, b, "gradient")
    assert not np.asarray(B.to_numpy(yt))[0, :1].any()


def test_the_fused_attention_kernel_is_taken_where_it_applies(monkeypatch):
    taken = []
    plain = attention_ops._flash

    def spy(*args):
        out = plain(*args)
        taken.append(out is not None)
        return out
    monkeypatch.setattr(attention_ops, "_flash", spy)
    with session_backend(TORCH):
        q, k, v = (TORCH.asarray(r(2, 5, 4)) for _ in range(3))
        ops.sdpa(q, k, v, None, causal=True, scale=0.5)            # applies
        ops.sdpa(q, k[:, :3], v[:, :3], None, causal=True, scale=0.5)  # causal with fewer keys: bottom-right, not its rule
        ops.sdpa(q, k, v, TORCH.asarray(r(5, 5)), scale=0.5)      # a bias
        big = TORCH.asarray(np.array([[1e200, 0.0], [0.0, 1.0], [1e200, 1e200]]))
        out = ops.sdpa(big, big, big, None, scale=0.5)             # scores beyond the float range
    assert taken == [True, False, False, False]
    with session_backend(B.NUMPY):
        want = raw(ops.sdpa(B.to_numpy(big), B.to_numpy(big), B.to_numpy(big), None, scale=0.5))
    same(want, out, "value")


@pytest.mark.parametrize("f, xs", [
    (lambda x, g, b: ops.layer_norm(x, g, b), [r(3, 8), r(8), r(8)]),
    (lambda x: ops.softmax(x), [r(3, 8)]),
    (lambda x: ops.log_softmax(x), [r(3, 8)]),
    (lambda x, w, b: ops.dense(x, w, b), [r(3, 8), r(8, 4), r(4)]),
    (lambda q, k, v: ops.sdpa(q, k, v, None, causal=True, scale=0.5), [r(2, 5, 4), r(2, 5, 4), r(2, 5, 4)]),
    (lambda x, g: ops.rms_norm(x, g), [r(3, 8), r(8)]),
])
def test_float32_stays_float32(f, xs):
    ops.set_dtype("float32")        # the session's float type (conftest puts float64 back)
    xs32 = [x.astype(np.float32) for x in xs]
    R = r(*np.shape(raw(f(*xs32)))).astype(np.float32)
    with session_backend(B.NUMPY):
        yn, gn = first_order(f, xs32, R)
    with session_backend(TORCH):
        yt, gt = first_order(f, [TORCH.asarray(x) for x in xs32], TORCH.asarray(R))
    import torch
    for a, b in zip([yn] + gn, [yt] + gt):
        assert b.dtype == torch.float32
        np.testing.assert_allclose(B.to_numpy(b), a, rtol=2e-5, atol=2e-5)


# ---- the builtins of builtins/ml -----------------------------------------------------------------
def _leaves(v):
    v = raw(v)
    if isinstance(v, tuple):
        return [x for item in v for x in _leaves(item)]
    if hasattr(v, "fields"):
        return [x for item in v.fields.values() for x in _leaves(item)]
    return [v]


def test_init_weights_are_the_same_numbers_on_the_device():
    with session_backend(B.NUMPY):
        a = builtin("transformer_decoder_block_init")(8, 2, seed=4)
    with session_backend(TORCH):
        b = builtin("transformer_decoder_block_init")(8, 2, seed=4)
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb) > 0
    for x, y in zip(la, lb):
        assert type(y) is not np.ndarray
        np.testing.assert_array_equal(B.to_numpy(y), x)


@pytest.mark.parametrize("p", [0.5, 0.1])
def test_dropout_draws_the_same_mask_on_the_device(p):
    """The same mask and the same scale: 1 / (1 - p) in float64 on the host (a bool tensor
    divided on torch was float32: 1 / 0.9 lost its last digits)."""
    x = r(4, 6)
    with session_backend(B.NUMPY):
        builtin("seed")(9)
        a = builtin("dropout")(x, p, True)
    with session_backend(TORCH):
        builtin("seed")(9)
        b = builtin("dropout")(TORCH.asarray(x), p, True)
    assert type(b) is not np.ndarray
    np.testing.assert_array_equal(B.to_numpy(b), a)


def test_positions_and_one_hot_are_made_on_the_device():
    with session_backend(TORCH):
        pe = builtin("sinusoidal_positions")(5, 4)
        oh = builtin("one_hot")(TORCH.asarray(np.array([2.0, 0.0])), 3)
    assert type(pe) is not np.ndarray and type(oh) is not np.ndarray
    with session_backend(B.NUMPY):
        np.testing.assert_array_equal(B.to_numpy(pe), builtin("sinusoidal_positions")(5, 4))
    np.testing.assert_array_equal(B.to_numpy(oh), [[0, 0, 1], [1, 0, 0]])


@pytest.mark.parametrize("name, args, kw", [
    ("cross_entropy", (r(4, 5), np.array([0.0, 3.0, 1.0, 4.0])), {"label_smoothing": 0.1}),
    ("cross_entropy", (r(4, 5), np.array([0.0, -1.0, 1.0, 4.0])), {"ignore_index": -1}),
    ("binary_cross_entropy_with_logits", (r(3, 2), np.array([[0.0, 1.0], [1.0, 1.0], [0.2, 0.0]])), {}),
    ("binary_cross_entropy", (np.array([0.9, 0.2, 0.0]), np.array([1.0, 0.0, 1.0])), {}),
    ("kl_div", (np.log(np.array([[0.5, 0.5], [0.9, 0.1]])), np.array([[0.2, 0.8], [1.0, 0.0]])), {}),
    ("cosine_similarity", (np.array([[1e200, 2e200], [0.0, 0.0]]), np.array([[1e200, 1e200], [1.0, 1.0]])), {}),
    ("mse_loss", (r(3, 2), r(3, 2)), {}),
])
def test_losses_equal_numpy_on_the_device(name, args, kw):
    f = builtin(name)
    both_backends(lambda x, *rest: f(x, *rest, **kw), list(args), order=1)


def test_the_errors_read_the_same_on_the_device():
    from tapeml.syntax.errors import LangError
    f = builtin("scaled_dot_product_attention")
    q = r(3, 2)
    with session_backend(B.NUMPY), pytest.raises(LangError) as on_numpy:
        f(q, q, q, mask=r(3, 3))
    with session_backend(TORCH), pytest.raises(LangError) as on_device:
        f(TORCH.asarray(q), TORCH.asarray(q), TORCH.asarray(q), mask=TORCH.asarray(r(3, 3)))
    assert str(on_numpy.value) == str(on_device.value)
    f = builtin("binary_cross_entropy")
    with session_backend(B.NUMPY), pytest.raises(LangError) as on_numpy:
        f(np.array([0.5, 1.5]), np.array([1.0, 0.0]))
    with session_backend(TORCH), pytest.raises(LangError) as on_device:
        f(TORCH.asarray(np.array([0.5, 1.5])), TORCH.asarray(np.array([1.0, 0.0])))
    assert str(on_numpy.value) == str(on_device.value) and "1.5" in str(on_device.value)


def test_fused_attention_reads_transposed_keys_and_values():
    """The CPU flash kernel reads its inputs' memory row by row: a transposed view as keys and
    values (k' in a program) gave wrong numbers until the backend made them contiguous (found by
    the differential tests on torch:cpu: causal attention of x against acc1')."""
    from support import output_of
    program = ("x = [-0.9, -1.7, 1.8; -1.8, -1.8, 1.6]\nkt = [0.6, -0.3; 0.9, -0.4; 0.5, 0.35]\nk = kt'\n"
               "print(scaled_dot_product_attention(x, k, k, causal=true))\n"
               "print(grad(fn(w) -> sum(scaled_dot_product_attention(x, w', w', causal=true) ^ 2), kt))\n")
    with session_backend(TORCH):
        on_torch_out = output_of(program)
    with session_backend(B.NUMPY):
        on_numpy_out = output_of(program)
    assert on_torch_out == on_numpy_out
    assert on_numpy_out.splitlines()[0].startswith("[0.6, 0.9, 0.5; ")      # row 0 sees key 0 only


def test_where_between_two_numbers_keeps_the_session_float_type():
    """torch.where of a tensor condition and two Python numbers is torch's default float32; the
    session's float64 must hold (the max/min VJP's 0.5 at ties goes through it)."""
    from support import output_of
    program = "x = [1, 2, 3]\nprint(dtype(where(x > 1, 0.1, 0.2)), where(x > 1, 0.1, 0.2) == [0.2, 0.1, 0.1])\n"
    with session_backend(TORCH):
        assert output_of(program) == "float64 [true, true, true]\n"


def test_relu_on_torch_keeps_numpys_zero_and_nan():
    """torch.relu and clamp_min keep -0 where NumPy's maximum(x, 0) gives +0: the backend's
    threshold gives NumPy's; the backward passes 0 at a NaN input and at an infinite cotangent
    against a 0 slope, as zmul(g, x > 0) does."""
    x = np.array([-0.0, 0.0, np.nan, -1.0, 2.0])
    y = raw(ops.relu(TORCH.asarray(x)))
    assert not np.signbit(B.to_numpy(y)).any()
    g = np.array([1.0, 2.0, 3.0, INF, 5.0])
    gx = TORCH.relu_backward(TORCH.asarray(g), y)
    np.testing.assert_array_equal(B.to_numpy(gx), [0.0, 0.0, 0.0, 0.0, 5.0])
    np.testing.assert_array_equal(B.NUMPY.relu_backward(g, B.NUMPY.relu(x)), [0.0, 0.0, 0.0, 0.0, 5.0])


def test_fused_attention_takes_heads_as_strided_views_without_copies(monkeypatch):
    """The CPU flash kernels honour any strides whose last axis is laid out element by element
    (multi-head attention's heads are views of one projection): such inputs go in as they are,
    with the numbers of contiguous copies; only a transposed last axis is copied."""
    import torch
    from tapeml.array import backend
    seen = []
    real = backend._rows_in_memory
    monkeypatch.setattr(backend, "_rows_in_memory", lambda t: seen.append(t.is_contiguous()) or real(t))
    heads = torch.from_numpy(r(5, 2, 3)).permute(1, 0, 2)       # [H=2, T=5, d=3], a view of [T, H, d]
    assert not heads.is_contiguous()
    q, k, v = heads, heads * 0.5, heads + 1.0
    out, _ = TORCH.flash_attention(*(t[None] for t in (q, k, v)), False, 0.7)
    want, _ = TORCH.flash_attention(*(t[None].contiguous() for t in (q, k, v)), False, 0.7)
    assert torch.equal(out, want)
    assert False in seen            # a strided view went in as it was
    kt = torch.from_numpy(r(2, 3, 5)).transpose(-1, -2)           # last axis strided: copied
    assert backend._rows_in_memory(kt).is_contiguous()


MIXED = """set_dtype("float32")
seed(0)
blk = transformer_block_init(8, 2, seed=1)
w = [1, 2; 3, 4]
b = [1, -1]
set_dtype("float64")
x = [1, 1; 0, 1]
xs = randn(4, 8)
print(grad(fn(x) -> sum((x @ w) ^ 2), x), grad(fn(w) -> sum((x @ w) ^ 2), w))
print(grad(fn(x) -> sum(dense(x, w, b) ^ 2), x), grad(fn(w) -> sum(dense(x, w, b) ^ 2), w))
g = grad(fn(p) -> sum(transformer_block(xs, p) ^ 2), blk)
h = grad(fn(x) -> sum(transformer_block(x, blk) ^ 2), xs)
print("{sum(g.w1 ^ 2):.4g} {sum(g.heads[0].wq ^ 2):.4g} {sum(h ^ 2):.4g}")
"""


def test_float32_weights_in_a_float64_session_differentiate_on_both_devices():
    """Weights made (or loaded) in float32 used by a float64 session: the first-order products of
    matmul, dense and the heads' projections take torch's one-dtype path only when the types
    agree (torch's @ does not promote; it raised an InternalError), and print NumPy's numbers."""
    import tapeml
    out = {}
    for device in ("numpy", "torch:cpu"):
        s = tapeml.Session(device=device, out=io.StringIO())
        s.run(MIXED)
        out[device] = s.interp.out.getvalue()
    assert out["numpy"].split("\n")[0] == "[32, 72; 22, 50] [8, 12; 14, 20]"
    assert out["numpy"] == out["torch:cpu"]
