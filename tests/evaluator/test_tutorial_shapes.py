"""Indexing and shapes as the tutorials write them (issue 29, item 3): `end` inside an index
vector; shapes as numbers or one tuple; layer_norm and rms_norm over several trailing axes;
attention masks broadcast by PyTorch's rule; cross_entropy's ignore_index; sample(p, n); einsum
with one operand, three or more, and the implicit form; isclose/allclose; zeros_like/ones_like of
nan and inf. Reference values from NumPy and PyTorch; gradients against finite differences and
torch autograd; errors with line:col."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

from fd import fd_grad
from support import on_host, on_session_device
from tapeml.array.backend import to_numpy
from tapeml.array.tape import raw
from tapeml.evaluator.interpreter import Interpreter
from tapeml.syntax.errors import LangError

torch = pytest.importorskip("torch")
F = torch.nn.functional
RNG = np.random.default_rng(293)


def run(src, **values):
    interp = Interpreter(out=io.StringIO())
    for k, v in values.items():
        interp.set_variable(k, on_session_device(v))
    interp.run(src, "<test>")
    return {k: on_host(v) for k, v in interp.variables().items()}


def val(expr, **values):
    return run(f"RESULT = {expr}", **values)["RESULT"]


def error(src, **values):
    with pytest.raises(LangError) as e:
        run(src, **values)
    return e.value


def check_error(src, kind, message, line=2, col=1, **values):
    e = error("\n" + src, **values)
    assert type(e).__name__ == kind, str(e)
    assert message in e.message, e.message
    assert (e.span.line, e.span.col) == (line, col), str(e)


def torch_grads(fn, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    return [t.grad.numpy() for t in ts]


# ---- end inside an index vector -----------------------------------------------------------------
X = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("index, want", [
    ("[:, [end]]", X[:, [3]]),
    ("[[0, end], :]", X[[0, 2], :]),
    ("[[end - 1, end], [end]]", X[np.ix_([1, 2], [3])]),
    ("[1, [end, 0, end - 2]]", X[1, [3, 0, 1]]),
    ("[[end; 0], 0]", None),                       # a column is not an index vector: an error below
])
def test_end_inside_an_index_vector(index, want):
    if want is None:
        check_error(f"X{index}", "IndexErr", "an index vector must be a vector, got a 2x1 matrix", col=3, X=X)
        return
    np.testing.assert_array_equal(raw(val(f"X{index}", X=X)), want)


def test_end_inside_an_index_vector_writes_and_nests():
    g = run("Y = X\nY[[0, end], end] = [-1, -2]\nZ = X[[X[0, end] - 2, end - 1], 0]", X=X)
    want = X.copy()
    want[[0, 2], 3] = [-1, -2]
    np.testing.assert_array_equal(raw(g["Y"]), want)
    np.testing.assert_array_equal(raw(g["Z"]), X[[1, 1], 0])      # X[0, end] is 3: 3 - 2 = 1


def test_end_in_a_matrix_outside_brackets_is_still_an_error():
    check_error("y = [1, end]", "LangSyntaxError", "'end' without an open block", col=9)
    check_error("X[[end + 1]]", "IndexErr", "index 3 is out of range", col=3, X=X)


# ---- every builtin that takes a shape takes numbers or one tuple --------------------------------
@pytest.mark.parametrize("numbers, tupled", [
    ("zeros(2, 3)", "zeros(size(ones(2, 3)))"),
    ("ones(2, 3)", "ones((2, 3))"),
    ("fill(7, 2, 3)", "fill(7, (2, 3))"),
    ("reshape(0:5, 3, 2)", "reshape(0:5, size(zeros(3, 2)))"),
    ("reshape(0:5, -1, 2)", "reshape(0:5, (-1, 2))"),
    ("permute(reshape(0:5, 1, 2, 3), 2, 0, 1)", "permute(reshape(0:5, 1, 2, 3), (2, 0, 1))"),
    ("tile([1, 2], 2, 2)", "tile([1, 2], (2, 2))"),
    ("zeros(4)", "zeros((4,))"),
    ("zeros()", "zeros(())"),
])
def test_shape_as_numbers_or_one_tuple(numbers, tupled):
    a, b = val(numbers), val(tupled)
    assert np.shape(raw(a)) == np.shape(raw(b))
    np.testing.assert_array_equal(raw(a), raw(b))


@pytest.mark.parametrize("name, call", [
    ("rand", "rand({})"), ("randn", "randn({})"), ("randint", "randint(0, 9, {})")])
def test_random_shapes_take_a_tuple_and_draw_the_same_numbers(name, call):
    g = run(f"seed(4)\nA = {call.format('2, 3')}\nseed(4)\nB = {call.format('size(zeros(2, 3))')}")
    assert raw(g["A"]).shape == (2, 3)
    np.testing.assert_array_equal(raw(g["A"]), raw(g["B"]))


@pytest.mark.parametrize("src, name, what", [
    ("reshape(0:5, 2, (3,))", "reshape", "sizes"), ("zeros(2, (3,))", "zeros", "sizes"),
    ("permute(zeros(2, 3), 1, (0,))", "permute", "dims"), ("tile([1], 2, (2,))", "tile", "reps"),
    ("randn((2,), 3)", "randn", "sizes"),
])
def test_a_tuple_among_numbers_is_an_error(src, name, what):
    check_error(src, "TypeErr", f"{name}(): give the {what} as numbers one by one or as one tuple, "
                                f"not a tuple among other {what}")


def test_a_tuple_of_bad_sizes_is_checked_as_numbers_are():
    check_error("zeros((2, -1))", "ValueErr", "zeros(): sizes must be whole numbers >= 0, got -1")
    check_error('reshape(0:5, (2, "a"))', "ValueErr", "reshape(): sizes must be whole numbers (or -1), got a string")


# ---- layer_norm and rms_norm over several trailing axes (PyTorch's normalized_shape) ------------
@pytest.mark.parametrize("shape, k", [((2, 3, 4), 2), ((2, 3, 4), 3), ((5, 2, 2, 3), 3), ((4, 6), 1)])
def test_layer_norm_over_trailing_axes_matches_torch(shape, k):
    x = RNG.standard_normal(shape) * 3 + 1
    g = RNG.standard_normal(shape[-k:])
    b = RNG.standard_normal(shape[-k:])
    w = RNG.standard_normal(shape)
    got = raw(val("layer_norm(X, G, B)", X=x, G=g, B=b))
    want = F.layer_norm(torch.tensor(x), shape[-k:], torch.tensor(g), torch.tensor(b), eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    res = run("GX, GG, GB = grad(fn(p) -> sum(layer_norm(p[0], p[1], p[2]) * W), (X, G, B))", X=x, G=g, B=b, W=w)
    tg = torch_grads(lambda a, c, d: (F.layer_norm(a, shape[-k:], c, d, eps=1e-5) * torch.tensor(w)).sum(), x, g, b)
    for name, t in zip(("GX", "GG", "GB"), tg):
        np.testing.assert_allclose(raw(res[name]), t, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        raw(res["GG"]), fd_grad(lambda c: val("sum(layer_norm(X, C, B) * W)", X=x, C=c, B=b, W=w), g),
        rtol=1e-6, atol=1e-7)


def test_layer_norm_x_gradient_matches_fd_over_two_axes():
    x = RNG.standard_normal((2, 2, 3))
    g, b, w = np.ones((2, 3)), np.zeros((2, 3)), RNG.standard_normal((2, 2, 3))
    got = raw(val("grad(fn(x) -> sum(layer_norm(x, G, B) * W), X)", X=x, G=g, B=b, W=w))
    fd = fd_grad(lambda a: val("sum(layer_norm(A, G, B) * W)", A=a, G=g, B=b, W=w), x)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)


def test_rms_norm_over_trailing_axes_matches_torch():
    x = RNG.standard_normal((3, 2, 4))
    g = RNG.standard_normal((2, 4))
    w = RNG.standard_normal((3, 2, 4))
    got = raw(val("rms_norm(X, G)", X=x, G=g))
    want = F.rms_norm(torch.tensor(x), (2, 4), torch.tensor(g), eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    res = run("GX, GG = grad(fn(p) -> sum(rms_norm(p[0], p[1]) * W), (X, G))", X=x, G=g, W=w)
    tg = torch_grads(lambda a, c: (F.rms_norm(a, (2, 4), c, eps=1e-5) * torch.tensor(w)).sum(), x, g)
    np.testing.assert_allclose(raw(res["GX"]), tg[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(raw(res["GG"]), tg[1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("src, message", [
    ("layer_norm(ones(2, 3), ones(2), zeros(2))", "layer_norm(): gamma is a vector of length 2, expected a vector of length 3"),
    ("layer_norm(ones(2, 3, 4), ones(2, 4), zeros(2, 4))",
     "layer_norm(): gamma is 2x4, but it must be shaped like the trailing axes of x that are normalized "
     "(x is 2x3x4: 4, 3x4 or 2x3x4)"),
    ("layer_norm(ones(2, 3, 4), ones(3, 4), zeros(4))", "layer_norm(): beta is a vector of length 4, expected 3x4"),
    ("layer_norm(ones(2, 0, 3), ones(0, 3), zeros(0, 3))",
     "layer_norm() needs at least one feature (the normalized axes of x are 0x3)"),
    ("rms_norm(ones(2, 3), ones(2, 2, 3))", "rms_norm(): gamma is 2x2x3, but it must be shaped like"),
])
def test_norm_shape_errors(src, message):
    check_error(src, "ShapeError", message)


# ---- attention masks broadcast by PyTorch's rule ------------------------------------------------
def _sdpa_torch(q, k, v, mask):
    return F.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                          attn_mask=torch.tensor(mask))


@pytest.mark.parametrize("mask_shape", [(2, 1, 5), (1, 4, 5), (5,), (4, 1), (2, 4, 5), (1, 1, 5)])
def test_sdpa_mask_broadcasts_like_torch(mask_shape):
    q, k, v = RNG.standard_normal((2, 4, 3)), RNG.standard_normal((2, 5, 3)), RNG.standard_normal((2, 5, 2))
    mask = RNG.random(mask_shape) < 0.7
    mask[..., 0] = True                    # every query row keeps a key (torch gives nan for empty rows)
    got = raw(val("scaled_dot_product_attention(Q, K, V, mask=M)", Q=q, K=k, V=v, M=mask))
    np.testing.assert_allclose(got, _sdpa_torch(q, k, v, mask).numpy(), rtol=1e-12, atol=1e-13)
    w = RNG.standard_normal(got.shape)
    res = run("GQ, GK, GV = grad(fn(p) -> sum(scaled_dot_product_attention(p[0], p[1], p[2], mask=M) * W), "
              "(Q, K, V))", Q=q, K=k, V=v, M=mask, W=w)
    tm = torch.tensor(mask)
    tg = torch_grads(lambda a, b, c: (F.scaled_dot_product_attention(a, b, c, attn_mask=tm)
                                      * torch.tensor(w)).sum(), q, k, v)
    for name, t in zip(("GQ", "GK", "GV"), tg):
        np.testing.assert_allclose(raw(res[name]), t, rtol=1e-10, atol=1e-12)


def test_sdpa_bias_broadcasts_and_its_gradient_sums_over_the_copies():
    q, k, v = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4))
    bias = RNG.standard_normal((1, 1, 3))
    w = RNG.standard_normal((2, 3, 4))
    res = run("Y = scaled_dot_product_attention(Q, K, V, bias=B)\n"
              "GB = grad(fn(b) -> sum(scaled_dot_product_attention(Q, K, V, bias=b) * W), B)", Q=q, K=k, V=v, B=bias, W=w)
    want = F.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v), attn_mask=torch.tensor(bias))
    np.testing.assert_allclose(raw(res["Y"]), want.numpy(), rtol=1e-12, atol=1e-13)
    (tb,) = torch_grads(lambda b: (F.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                                                  attn_mask=b) * torch.tensor(w)).sum(), bias)
    assert raw(res["GB"]).shape == (1, 1, 3)
    np.testing.assert_allclose(raw(res["GB"]), tb, rtol=1e-10, atol=1e-12)


MHA = ("w = transformer_block_init(8, 2, seed=3)\nheads = w.heads\nseed(5)\n"
       "x = randn(2, 4, 8)\nm = randn(2, 6, 8)\n")


@pytest.mark.parametrize("mask, full, memory", [
    ("(0:5) < reshape([6, 3], 2, 1, 1)", "((0:5) < reshape([6, 3], 2, 1, 1)) and (ones(2, 4, 6) > 0)", True),
    ("reshape([true, false, true, true, true, false], 1, 1, 6)", None, True),
    ("reshape((0:5) < reshape([6, 3], 2, 1, 1), 2, 1, 1, 6)",          # the Annotated Transformer's [B, 1, 1, S]
     "((0:5) < reshape([6, 3], 2, 1, 1)) and (ones(2, 4, 6) > 0)", True),
    ("reshape(tril(ones(4, 4)) > 0, 1, 4, 4)", "(tril(ones(4, 4)) > 0) and (ones(2, 4, 4) > 0)", False),
    ("(0:3) < reshape([4, 2], 2, 1, 1)", "((0:3) < reshape([4, 2], 2, 1, 1)) and (ones(2, 4, 4) > 0)", False),
])
def test_mha_mask_broadcasts_as_the_explicit_mask(mask, full, memory):
    mem = ", memory=m" if memory else ""
    full = full or f"({mask}) and (ones(2, 4, {6 if memory else 4}) > 0)"
    for fused in (0, 10 ** 9):           # the joined heads and the loop over heads
        from tapeml.builtins.ml import attention
        saved = attention.FUSE_MIN_ELEMENTS
        attention.FUSE_MIN_ELEMENTS = fused
        try:
            g = run(MHA + f"A = multi_head_attention(x, heads, 2{mem}, mask={mask})\n"
                          f"B = multi_head_attention(x, heads, 2{mem}, mask={full})\n"
                          f"GA = grad(fn(x) -> sum(multi_head_attention(x, heads, 2{mem}, mask={mask})), x)\n"
                          f"GB = grad(fn(x) -> sum(multi_head_attention(x, heads, 2{mem}, mask={full})), x)")
        finally:
            attention.FUSE_MIN_ELEMENTS = saved
        np.testing.assert_array_equal(raw(g["A"]), raw(g["B"]))
        np.testing.assert_array_equal(raw(g["GA"]), raw(g["GB"]))


def test_mha_per_head_mask_matches_torch_multihead_attention():
    """A [B, H, T, S] mask: one mask per head, as the Annotated Transformer's [B, 1, T, S] generalizes."""
    x = RNG.standard_normal((2, 3, 8))
    mem = RNG.standard_normal((2, 5, 8))
    mask = RNG.random((2, 2, 3, 5)) < 0.6
    mask[..., 0] = True
    g = run("w = transformer_block_init(8, 2, seed=3)\nY = multi_head_attention(X, w.heads, 2, memory=Mem, mask=M)\n"
            "heads = w.heads", X=x, Mem=mem, M=mask)
    heads = raw(g["heads"])
    mha = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        wq = np.concatenate([raw(h).fields["wq"] for h in heads], axis=1).T
        wk = np.concatenate([raw(h).fields["wk"] for h in heads], axis=1).T
        wv = np.concatenate([raw(h).fields["wv"] for h in heads], axis=1).T
        wo = np.concatenate([raw(h).fields["wo"] for h in heads], axis=0).T
        mha.in_proj_weight.copy_(torch.tensor(np.concatenate([wq, wk, wv], axis=0)))
        mha.out_proj.weight.copy_(torch.tensor(wo))
        # torch's boolean attn_mask is 'masked out', one per batch element and head: [B * H, T, S]
        want, _ = mha(torch.tensor(x), torch.tensor(mem), torch.tensor(mem),
                      attn_mask=torch.tensor(~mask.reshape(4, 3, 5)), need_weights=False)
    np.testing.assert_allclose(raw(g["Y"]), want.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("src, message", [
    ("multi_head_attention(x, heads, 2, mask=ones(2, 4, 5) > 0)",
     "multi_head_attention(): mask is 2x4x5, which does not broadcast to 2x4x4 (batch x queries x keys) by "
     "PyTorch's rule (sizes compared from the right, a size-1 axis repeats, missing leading axes count as 1); "
     "with one more axis, one mask per head: 2x2x4x4"),
    ("multi_head_attention(x, heads, 2, mask=ones(2, 3, 4, 4) > 0)", "mask is 2x3x4x4, which does not broadcast"),
    ("transformer_block(x, w, mask=ones(3, 1, 4) > 0)", "transformer_block(): mask is 3x1x4, which does not broadcast to 2x4x4"),
    ("scaled_dot_product_attention(x, x, x, mask=ones(2, 2, 4, 4) > 0)",
     "scaled_dot_product_attention(): mask is 2x2x4x4, which does not broadcast to the scores 2x4x4"),
])
def test_mask_shape_errors(src, message):
    e = error(MHA + src)
    assert type(e).__name__ == "ShapeError" and message in e.message, e.message
    assert (e.span.line, e.span.col) == (6, 1)


# ---- cross_entropy(..., ignore_index=) ---------------------------------------------------------
@pytest.mark.parametrize("targets, smoothing", [
    ([2, -100, 1, 0, -100], 0.0), ([2, -100, 1, 0, -100], 0.1), ([3, 3, 3, 3, 3], 0.0), ([0, 1, 2, 3, 0], 0.2)])
def test_cross_entropy_ignore_index_matches_torch(targets, smoothing):
    z = RNG.standard_normal((5, 4)) * 2
    t = np.array(targets, dtype=float)
    ignore = 3 if targets[0] == 3 else -100
    loss = val(f"cross_entropy(Z, T, label_smoothing={smoothing}, ignore_index={ignore})", Z=z, T=t)
    tz = torch.tensor(z, requires_grad=True)
    tl = F.cross_entropy(tz, torch.tensor(t.astype(np.int64)), ignore_index=ignore, label_smoothing=smoothing)
    tl.backward()
    g = raw(val(f"grad(fn(z) -> cross_entropy(z, T, label_smoothing={smoothing}, ignore_index={ignore}), Z)", Z=z, T=t))
    if math.isnan(tl.item()):
        assert math.isnan(raw(loss))
    else:
        assert raw(loss) == pytest.approx(tl.item(), rel=1e-12)
        np.testing.assert_allclose(g, fd_grad(lambda a: val(f"cross_entropy(A, T, label_smoothing={smoothing}, "
                                                            f"ignore_index={ignore})", A=a, T=t), z), atol=1e-8)
    np.testing.assert_allclose(g, tz.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_cross_entropy_ignore_index_batched_and_vector():
    z = RNG.standard_normal((2, 3, 5))
    t = np.array([[1.0, -1, 4], [-1, -1, 0]])
    got = val("cross_entropy(Z, T, ignore_index=-1)", Z=z, T=t)
    want = F.cross_entropy(torch.tensor(z).reshape(6, 5), torch.tensor(t.reshape(6).astype(np.int64)), ignore_index=-1)
    assert got == pytest.approx(want.item(), rel=1e-12)
    assert math.isnan(val("cross_entropy([1, 2, 3], 5, ignore_index=5)"))
    assert val("cross_entropy([1, 2, 3], 1, ignore_index=5)") == val("cross_entropy([1, 2, 3], 1)")


def test_cross_entropy_ignore_index_errors():
    check_error("cross_entropy([1, 2; 3, 4], [0, 7], ignore_index=-1)", "IndexErr",
                "cross_entropy(): target 7 is out of range")
    check_error("cross_entropy([1, 2; 3, 4], [0, 0.5], ignore_index=-1)", "IndexErr",
                "cross_entropy(): targets must be whole numbers, got 0.5")
    check_error("cross_entropy([1, 2; 3, 4], [0, 1], ignore_index=0.5)", "ValueErr",
                "cross_entropy(): ignore_index must be a whole number, got 0.5")


# ---- sample(p, n) ------------------------------------------------------------------------------
def test_sample_n_shapes_and_the_first_draw_agrees_with_sample_p():
    g = run("seed(3)\nA = sample([0.2, 0.3, 0.5], 6)\nB = sample([0.2, 0.8; 1, 0], 4)\nC = sample([1, 2], 0)\n"
            "seed(7)\nD = sample([0.2, 0.3, 0.5])\nseed(7)\nE = sample([0.2, 0.3, 0.5], 1)")
    assert raw(g["A"]).shape == (6,) and raw(g["B"]).shape == (2, 4) and raw(g["C"]).shape == (0,)
    np.testing.assert_array_equal(raw(g["B"])[1], [0, 0, 0, 0])      # a row with one class of weight
    assert raw(g["E"]).shape == (1,) and raw(g["E"])[0] == g["D"]


def test_sample_n_frequencies_follow_the_probabilities():
    p = np.array([0.1, 0.6, 0.0, 0.3])
    got = raw(run("seed(0)\nS = sample(P, 20000)", P=p)["S"])
    freq = np.bincount(got.astype(int), minlength=4) / got.size
    np.testing.assert_allclose(freq, p, atol=0.015)
    assert not np.any(got == 2)                                        # zero weight: never drawn


def test_sample_without_replacement_draws_distinct_ids():
    g = run("seed(1)\nA = sample([1, 1, 1, 1, 1], 5, replacement=false)\nB = sample([5, 0, 1; 1, 1, 1], 2, replacement=false)")
    assert sorted(raw(g["A"]).tolist()) == [0, 1, 2, 3, 4]
    b = raw(g["B"])
    assert b.shape == (2, 2) and all(len(set(row)) == 2 for row in b.tolist()) and 1 not in b[0]


def test_sample_errors():
    check_error("sample([1, 0, 1], 3, replacement=false)", "ValueErr",
                "sample(): cannot draw 3 ids without replacement from a row with 2 classes of positive weight")
    check_error("sample([1, 2], -1)", "ValueErr", "sample(): n must be >= 0")
    check_error("sample([1, 2], 1.5)", "ValueErr", "sample(): n must be a whole number")


# ---- einsum: one operand, three or more, the implicit form --------------------------------------
A3 = RNG.standard_normal((3, 3))
C233 = RNG.standard_normal((2, 2, 3))
EINSUMS = [
    ("ii", (A3,)), ("ii->i", (A3,)), ("ij->ji", (A3,)), ("ij->", (A3,)), ("ij", (A3,)), ("ji", (A3,)),
    ("iij->ij", (C233,)), ("iij->j", (C233,)), ("ijk->kji", (RNG.standard_normal((2, 3, 4)),)),
    ("ij,jk,kl->il", (RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)))),
    ("ij,jk,kl", (RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)))),
    ("bi,bj,bk->bijk", (RNG.standard_normal((2, 2)), RNG.standard_normal((2, 3)), RNG.standard_normal((2, 2)))),
    ("i,i,i->", (RNG.standard_normal(4), RNG.standard_normal(4), RNG.standard_normal(4))),
    ("ij,jk,kl,lm->im", tuple(RNG.standard_normal(s) for s in ((2, 3), (3, 2), (2, 4), (4, 3)))),
    ("ii,ij->j", (A3, RNG.standard_normal((3, 2)))),
    ("ij,jk", (RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4)))),
    ("bA,Ac", (RNG.standard_normal((2, 3)), RNG.standard_normal((3, 5)))),
]


@pytest.mark.parametrize("spec, operands", EINSUMS, ids=[s for s, _ in EINSUMS])
def test_einsum_matches_numpy_and_torch_with_gradients(spec, operands):
    names = [f"X{i}" for i in range(len(operands))]
    env = dict(zip(names, operands))
    got = raw(val(f'einsum("{spec}", {", ".join(names)})', **env))
    np.testing.assert_allclose(got, np.einsum(spec, *operands), rtol=1e-12, atol=1e-13)
    w = RNG.standard_normal(np.shape(got))
    res = run(f'G = grad(fn(p) -> sum(einsum("{spec}", {", ".join(f"p[{i}]" for i in range(len(names)))}) * W), '
              f'({", ".join(names)},))', W=w, **env)
    tg = torch_grads(lambda *ts: (torch.einsum(spec, *ts) * torch.tensor(w)).sum(), *operands)
    for mine, theirs in zip(raw(res["G"]), tg):
        np.testing.assert_allclose(raw(mine), theirs, rtol=1e-10, atol=1e-12)


def test_einsum_trace_gradient_matches_fd():
    got = raw(val('grad(fn(a) -> einsum("ii", a) ^ 2, A)', A=A3))
    np.testing.assert_allclose(got, fd_grad(lambda a: val('einsum("ii", A) ^ 2', A=a), A3), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("src, kind, message", [
    ('einsum("ii", [1, 2, 3; 4, 5, 6])', "ShapeError",
     'einsum(): the letter "i" is repeated in "ii" (a diagonal), but those axes of the operand are 2 and 3 long'),
    ('einsum("ij,jk", [1, 2])', "ValueErr", 'einsum(): "ij,jk" names 2 operands but 1 is given'),
    ('einsum("i->ii", [1, 2])', "ValueErr", 'einsum(): the output "ii" of "i->ii" repeats a letter'),
    ('einsum("...i", [1, 2])', "ValueErr", 'einsum(): "...i" uses "...", which is not supported'),
    ('einsum("i->j", [1, 2])', "ValueErr", 'einsum(): the output letter "j" of "i->j" is in no operand'),
    ('einsum("ij,jk,k", eye(2), eye(2), [1, 2, 3])', "ShapeError",
     'einsum(): the letter "k" of "ij,jk,k" is 2 long in operand 1 but 3 long in operand 2'),
    ('einsum("i", "a")', "TypeErr", "einsum(): the operands must be numbers or matrices, got a string"),
])
def test_einsum_errors(src, kind, message):
    check_error(src, kind, message)


# ---- isclose and allclose: PyTorch's rtol/atol --------------------------------------------------
CLOSE_A = np.array([1.0, 1e-9, np.inf, -np.inf, np.nan, 100.0, 0.0, 1e300, 1.0])
CLOSE_B = np.array([1.000001, 0.0, np.inf, np.inf, np.nan, 100.002, 1e-8, -1e300, 1.00001])


@pytest.mark.parametrize("kw, tkw", [("", {}), (", rtol=1e-3", dict(rtol=1e-3)), (", atol=1e-3", dict(atol=1e-3)),
                                     (", equal_nan=true", dict(equal_nan=True)), (", rtol=0, atol=0", dict(rtol=0, atol=0))])
def test_isclose_and_allclose_match_torch(kw, tkw):
    got = raw(val(f"isclose(A, B{kw})", A=CLOSE_A, B=CLOSE_B))
    want = torch.isclose(torch.tensor(CLOSE_A), torch.tensor(CLOSE_B), **tkw).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.isclose(CLOSE_A, CLOSE_B, **tkw))
    for i in range(len(CLOSE_A)):
        one = val(f"allclose(A[{i}], B[{i}]{kw})", A=CLOSE_A, B=CLOSE_B)
        assert one is bool(torch.allclose(torch.tensor(CLOSE_A[i:i + 1]), torch.tensor(CLOSE_B[i:i + 1]), **tkw))


def test_isclose_broadcasts_and_is_relative_to_b():
    np.testing.assert_array_equal(raw(val("isclose([1, 2; 3, 4], [1, 4])")), [[True, False], [False, True]])
    assert val("isclose(1, 1.05, rtol=0.048)") is True and val("isclose(1.05, 1, rtol=0.048)") is False
    assert val("allclose(zeros(0), zeros(0))") is True
    assert val("isclose(true, 1)") is True


def test_isclose_errors():
    check_error("isclose([1, 2], [1, 2, 3])", "ShapeError",
                "isclose(): a is a vector of length 2 and b is a vector of length 3; they do not broadcast")
    check_error("allclose(1, 1, rtol=-1)", "ValueErr", "allclose(): rtol must be >= 0, got -1")
    check_error('isclose("a", 1)', "TypeErr", "isclose(): a must be a number or a matrix, got a string")


# ---- zeros_like and ones_like of nan and inf ----------------------------------------------------
def test_zeros_like_and_ones_like_of_nan_and_inf():
    np.testing.assert_array_equal(raw(val("zeros_like([1, -1 / 0, 0 / 0])")), [0, 0, 0])
    np.testing.assert_array_equal(raw(val("ones_like([1, -1 / 0, 0 / 0])")), [1, 1, 1])
    assert val("zeros_like(0 / 0)") == 0.0 and val("ones_like(1 / 0)") == 1.0
    t = val("zeros_like({w = [1, 0 / 0; 3, 4], b = (1 / 0, [2, 3])})")
    np.testing.assert_array_equal(raw(t).fields["w"], np.zeros((2, 2)))
    assert raw(t).fields["b"][0] == 0.0
    np.testing.assert_array_equal(raw(raw(t).fields["b"][1]), [0, 0])
    np.testing.assert_array_equal(raw(val("ones_like([true, false])")), [1.0, 1.0])


def test_zeros_like_keeps_the_float_type_and_has_gradient_0():
    g = run('set_dtype("float32")\nZ = zeros_like(ones(2) / 0)\nset_dtype("float64")\n'
            "G = grad(fn(x) -> sum(zeros_like(x) + ones_like(x) * 0 + x * 2), [1, 2])")
    assert to_numpy(raw(g["Z"])).dtype == np.float32
    np.testing.assert_array_equal(raw(g["G"]), [2, 2])


def test_zeros_like_errors():
    check_error('zeros_like({a = "x"})', "TypeErr",
                "zeros_like(): the leaves must be numbers or matrices (in tuples and records), got a string")
