"""Empty inputs give empty results of the shapes NumPy and PyTorch give, gradients included
(issue 25, item 7): linear algebra on an empty batch or empty matrices, the normalizations,
blocks and losses on zero rows (T = 0), reductions along a non-empty axis of an empty matrix,
quantile of an empty list of probabilities, and sorting bools.

The reference for every value is NumPy (always) and PyTorch float64 (when importable); the
gradient of anything with respect to an empty input is the empty array of its shape, and with
respect to a weight that meets no rows it is zeros (PyTorch's autograd gives both).
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tapeml.array.tape import raw
from fd import builtin as B, grad_array as grad
from support import output_of

HAS_TORCH = importlib.util.find_spec("torch") is not None
L = np.linalg


def tsum(*parts):
    """The sum of every part (numbers or arrays, tracked or not) as one tracked number."""
    from tapeml.array import ops
    total = 0.0
    for p in parts:
        total = ops.add(total, ops.sum_(p))
    return total


def same(got, want):
    got, want = np.asarray(raw(got), dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.allclose(got, want, equal_nan=True), (got, want)


# ---- linear algebra on empty batches and empty matrices ---------------------------------------------
SQUARE = [(0, 2, 2), (2, 0, 0), (0, 0), (0, 3, 3)]
ANY = SQUARE + [(0, 3, 2), (0, 2, 3), (3, 0), (0, 3), (2, 3, 0)]


@pytest.mark.parametrize("shape", ANY, ids=str)
def test_factorizations_of_empty_inputs_match_numpy(shape):
    z = np.zeros(shape)
    for got, want in zip(B("qr")(z), L.qr(z)):
        same(got, want)
    for got, want in zip(B("svd")(z), L.svd(z, full_matrices=False)):
        same(got, want)
    same(B("pinv")(z), L.pinv(z))
    same(B("norm")(z), L.norm(z))
    same(B("trace")(z), np.trace(z, axis1=-2, axis2=-1))


@pytest.mark.parametrize("shape", SQUARE, ids=str)
def test_square_builtins_of_empty_inputs_match_numpy(shape):
    z = np.zeros(shape)
    same(B("inv")(z), L.inv(z))
    same(B("det")(z), L.det(z))
    for got, want in zip(B("slogdet")(z), L.slogdet(z)):
        same(got, want)
    for got, want in zip(B("eigh")(z), L.eigh(z)):
        same(got, want)
    for got, want in zip(B("eig")(z), L.eig(z)):
        same(got, want)
    same(B("cholesky")(z), L.cholesky(z))
    b = np.zeros(shape[:-1] + (3,))
    same(B("solve")(z, b), L.solve(z, b))
    same(B("solve")(z, np.zeros(shape[:-1])), L.solve(z, np.zeros(shape[:-1])[..., None])[..., 0])


def test_solve_of_an_empty_batch_with_a_batch_of_vectors():
    same(B("solve")(np.zeros((0, 2, 2)), np.zeros((0, 2))), np.zeros((0, 2)))


@pytest.mark.parametrize("A, b", [((0, 2), (0,)), ((3, 0), (3,)), ((0, 0), (0,)), ((0, 2), (0, 3))], ids=str)
def test_lstsq_of_empty_systems_matches_numpy(A, b):
    a, rhs = np.zeros(A), np.ones(b)
    same(B("lstsq")(a, rhs), L.lstsq(a, rhs, rcond=None)[0])


LINALG_GRADS = {
    "qr": lambda A: tsum(*B("qr")(A)),
    "svd": lambda A: tsum(*B("svd")(A)),
    "pinv": lambda A: tsum(B("pinv")(A)),
    "norm": lambda A: tsum(B("norm")(A)),
    "norm 2": lambda A: tsum(B("norm")(A, 2)) if len(np.shape(raw(A))) == 2 else tsum(B("norm")(A)),
    "trace": lambda A: tsum(B("trace")(A)),
}
SQUARE_GRADS = {
    "inv": lambda A: tsum(B("inv")(A)),
    "det": lambda A: tsum(B("det")(A)),
    "slogdet": lambda A: tsum(B("slogdet")(A)[1]),
    "eigh": lambda A: tsum(*B("eigh")(A)),
    "cholesky": lambda A: tsum(B("cholesky")(A)),
    "solve A": lambda A: tsum(B("solve")(A, np.ones(np.shape(raw(A))[:-1] + (2,)))),
}


@pytest.mark.parametrize("name", list(LINALG_GRADS))
@pytest.mark.parametrize("shape", [s for s in ANY if s[-2] >= s[-1] or 0 in s], ids=str)
def test_gradients_of_empty_inputs_are_empty(name, shape):
    g = grad(LINALG_GRADS[name], np.zeros(shape))
    same(g, np.zeros(shape))


@pytest.mark.parametrize("name", list(SQUARE_GRADS))
@pytest.mark.parametrize("shape", SQUARE, ids=str)
def test_gradients_of_empty_square_inputs_are_empty(name, shape):
    same(grad(SQUARE_GRADS[name], np.zeros(shape)), np.zeros(shape))


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is the live cross-check")
@pytest.mark.parametrize("shape", [(0, 2, 2), (2, 0, 0), (0, 3, 2)], ids=str)
def test_pytorch_agrees_on_the_empty_batch(shape):
    import torch
    t = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    q, r = torch.linalg.qr(t)
    u, s, vh = torch.linalg.svd(t, full_matrices=False)
    (q.sum() + r.sum() + u.sum() + s.sum() + vh.sum() + torch.linalg.pinv(t).sum()).backward()
    z = np.zeros(shape)
    mine = grad(lambda A: tsum(*B("qr")(A), *B("svd")(A), B("pinv")(A)), z)
    same(mine, t.grad.numpy())
    for got, want in zip(B("qr")(z) + B("svd")(z), (q, r, u, s, vh)):
        same(got, want.detach().numpy())


# ---- zero rows through the normalizations, attention and blocks -------------------------------------------
def test_normalizations_of_zero_rows():
    x, g, b = np.zeros((0, 4)), np.ones(4), np.zeros(4)
    same(B("layer_norm")(x, g, b), np.zeros((0, 4)))
    same(B("layer_norm")(x, g, b, eps=0.0), np.zeros((0, 4)))
    same(B("rms_norm")(x, g), np.zeros((0, 4)))
    same(B("rms_norm")(np.zeros((2, 0, 4)), g), np.zeros((2, 0, 4)))
    y, rm, rv = B("batch_norm")(x, g, b, np.full(4, 0.5), np.full(4, 2.0))
    same(y, np.zeros((0, 4)))
    same(rm, np.full(4, 0.5))          # PyTorch: an empty batch leaves the running statistics unchanged
    same(rv, np.full(4, 2.0))


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is the live cross-check")
def test_normalizations_of_zero_rows_against_pytorch():
    import torch
    import torch.nn.functional as F
    x = torch.zeros(0, 4, dtype=torch.float64, requires_grad=True)
    gamma = torch.full((4,), 1.5, dtype=torch.float64, requires_grad=True)
    beta = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    rm, rv = torch.full((4,), 0.5, dtype=torch.float64), torch.full((4,), 2.0, dtype=torch.float64)
    y = F.batch_norm(x, rm, rv, gamma, beta, training=True)
    (y.sum() + F.layer_norm(x, (4,), gamma, beta).sum()).backward()
    assert tuple(y.shape) == (0, 4)
    same(rm, np.full(4, 0.5))
    same(gamma.grad, np.zeros(4))
    same(beta.grad, np.zeros(4))
    mine_gamma = grad(lambda g: tsum(B("batch_norm")(np.zeros((0, 4)), g, np.zeros(4), np.full(4, 0.5),
                                                     np.full(4, 2.0))[0],
                                     B("layer_norm")(np.zeros((0, 4)), g, np.zeros(4))), np.full(4, 1.5))
    same(mine_gamma, gamma.grad.numpy())
    mine_x = grad(lambda v: tsum(B("layer_norm")(v, np.ones(4), np.zeros(4)), B("rms_norm")(v, np.ones(4))),
                  np.zeros((0, 4)))
    same(mine_x, x.grad.numpy())


def test_gradients_through_normalizations_of_zero_rows():
    x = np.zeros((0, 4))
    same(grad(lambda g: tsum(B("rms_norm")(x, g)), np.ones(4)), np.zeros(4))
    same(grad(lambda b: tsum(B("layer_norm")(x, np.ones(4), b)), np.ones(4)), np.zeros(4))
    same(grad(lambda v: tsum(B("batch_norm")(v, np.ones(4), np.zeros(4), np.zeros(4), np.ones(4))[0]), x),
         np.zeros((0, 4)))


def test_blocks_on_zero_positions():
    """A [0, D] input (T = 0) gives a [0, D] result through every block, and gradients of the
    right shapes: empty for x, zeros for the weights (no position uses them)."""
    out = output_of("""
w = transformer_block_init(4, 2, seed=1)
print(size(transformer_block(zeros(0, 4), w)), size(transformer_block(zeros(0, 4), w, causal=true, norm_first=true)))
print(size(transformer_block(zeros(2, 0, 4), w, causal=true)))
g = grad(fn(v) -> sum(transformer_block(zeros(0, 4), v)), w)
print(sum(abs(g.w1)) + sum(abs(g.heads[0].wq)), size(grad(fn(x) -> sum(transformer_block(x, w)), zeros(0, 4))))
r = transformer_block_init(4, 2, norm="rms_norm", seed=1)
print(size(transformer_block(zeros(0, 4), r, norm="rms_norm")))
d = transformer_decoder_block_init(4, 2, seed=1)
print(size(transformer_decoder_block(zeros(0, 4), ones(3, 4), d)))
print(size(grad(fn(m) -> sum(transformer_decoder_block(zeros(0, 4), m, d)), ones(3, 4))))
print(size(scaled_dot_product_attention(zeros(0, 4), zeros(0, 4), zeros(0, 4), causal=true)))
print(size(multi_head_attention(zeros(0, 4), w.heads, 2, causal=true)))
print(size(dense(zeros(0, 4), ones(4, 3), zeros(3))), size(softmax(zeros(0, 4))), size(log_softmax(zeros(0, 4))))
""")
    assert out.split("\n") == ["(0, 4) (0, 4)", "(2, 0, 4)", "0 (0, 4)", "(0, 4)", "(0, 4)", "(3, 4)", "(0, 4)",
                               "(0, 4)", "(0, 3) (0, 4) (0, 4)", ""]


# ---- reductions of empty matrices along a non-empty axis --------------------------------------------------
@pytest.mark.parametrize("name, ref", [("max", np.max), ("min", np.min), ("argmax", np.argmax),
                                       ("argmin", np.argmin)])
def test_extremes_along_a_non_empty_axis_of_an_empty_matrix(name, ref):
    z = np.zeros((0, 2))
    same(B(name)(z, dim=1), ref(z, axis=1))
    same(B(name)(z, dim=-1, keepdims=True), ref(z, axis=-1, keepdims=True))
    from tapeml.syntax.errors import ValueErr
    with pytest.raises(ValueErr, match=rf"{name}\(\): axis 0 of a 0x2 matrix is empty"):
        B(name)(z, dim=0)        # NumPy: "zero-size array to reduction operation maximum which has no identity"
    with pytest.raises(ValueErr, match=rf"{name}\(\) of an empty matrix"):
        B(name)(z)


def test_gradient_of_max_along_a_non_empty_axis_of_an_empty_matrix():
    same(grad(lambda x: tsum(B("max")(x, dim=1)), np.zeros((0, 2))), np.zeros((0, 2)))


# ---- quantile of no probabilities -----------------------------------------------------------------------
@pytest.mark.parametrize("x, kw", [([1.0, 2, 3, 4], {}), ([[1.0, 2], [3, 4], [5, 6]], {"dim": 0}),
                                   ([[1.0, 2], [3, 4], [5, 6]], {"dim": 0, "keepdims": True}),
                                   ([[1.0, 2], [3, 4], [5, 6]], {}), ([[1.0, 2], [3, 4], [5, 6]], {"keepdims": True}),
                                   (3.0, {})], ids=str)
def test_quantile_of_an_empty_list_of_probabilities_is_empty(x, kw):
    q = np.zeros(0)
    want = np.quantile(np.asarray(x), q, axis=kw.get("dim"), keepdims=kw.get("keepdims", False))
    same(B("quantile")(np.asarray(x) if np.ndim(x) else x, q, **kw), want)


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is the live cross-check")
def test_quantile_of_an_empty_list_against_pytorch():
    import torch
    x = np.array([[1.0, 2], [3, 4], [5, 6]])
    want = torch.quantile(torch.tensor(x), torch.zeros(0, dtype=torch.float64), dim=0, keepdim=True)
    same(B("quantile")(x, np.zeros(0), dim=0, keepdims=True), want.numpy())


def test_gradient_through_quantile_of_no_probabilities_is_zero():
    same(grad(lambda x: tsum(B("quantile")(x, np.zeros(0))), np.array([1.0, 2.0])), np.zeros(2))


# ---- sorting bools: as 0 and 1, as NumPy (which has no '-' of bools) ------------------------------------------
BOOLS = np.array([[True, False, True], [False, False, True]])


def test_sort_argsort_topk_of_bools_descending():
    x = BOOLS.astype(np.float64)
    desc = -np.sort(-x, axis=-1, kind="stable")
    same(B("sort")(BOOLS, descending=True), desc)
    same(B("argsort")(BOOLS, descending=True), np.argsort(-x, axis=-1, kind="stable"))
    same(B("sort")(BOOLS, dim=0, descending=True), -np.sort(-x, axis=0, kind="stable"))
    v, i = B("topk")(BOOLS, 2)
    same(v, desc[:, :2])
    same(i, np.argsort(-x, axis=-1, kind="stable")[:, :2])
    same(B("sort")(BOOLS), np.sort(x, axis=-1))


@pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is the live cross-check")
def test_topk_of_bools_against_pytorch():
    import torch
    v, i = torch.topk(torch.tensor([True, False, True, False]).double(), 2)
    mv, mi = B("topk")(np.array([True, False, True, False]), 2)
    same(mv, v.numpy())
    same(mi, i.numpy())


# ---- dense and @ of empty batches and empty features ---------------------------------------------------
@pytest.mark.parametrize("xs, ws", [((2, 0, 0), (0, 3)), ((2, 3, 4), (4, 0)), ((0, 4), (4, 3)), ((2, 3, 0), (0, 3))],
                         ids=str)
def test_dense_of_empty_shapes_matches_numpy(xs, ws):
    x, w = np.ones(xs), np.ones(ws)
    same(B("dense")(x, w), x @ w)
    same(B("dense")(x, w, np.ones(ws[1])), x @ w + 1)
    same(grad(lambda v: tsum(B("dense")(v, w, np.ones(ws[1]))), x), np.ones(xs[:-1] + (ws[1],)) @ w.T)
    rows = int(np.prod(xs[:-1]))
    same(grad(lambda v: tsum(B("dense")(x, v)), w), x.reshape(rows, xs[-1]).T @ np.ones((rows, ws[1])))
    same(grad(lambda b: tsum(B("dense")(x, w, b)), np.ones(ws[1])), np.full(ws[1], float(np.prod(xs[:-1]))))


@pytest.mark.parametrize("xs, ws", [((2, 3, 0), (0, 3)), ((2, 0, 4), (4, 3))], ids=str)
def test_second_order_through_a_batch_against_one_matrix_of_empty_shapes(xs, ws):
    """grad of grad of sum((x @ w)^2) = 2 x'x 1 (the batch folded), NumPy's value."""
    out = output_of(f"x = ones({xs[0]}, {xs[1]}, {xs[2]})\n"
                    f"print(size(grad(fn(w) -> sum(grad(fn(v) -> sum((x @ v)^2), w)), ones({ws[0]}, {ws[1]}))))\n")
    x = np.ones(xs).reshape(int(np.prod(xs[:-1])), xs[-1])
    assert out == f"{(2 * x.T @ x @ np.ones(ws)).shape}\n"


def test_attention_with_zero_wide_queries_and_keys_averages_the_values():
    """d_k = 0: every score is an empty sum, 0, so the weights are uniform and the output is the
    mean of the values, as PyTorch's F.scaled_dot_product_attention gives (the scale 1/sqrt(0) was
    a Python ZeroDivisionError, reported as 'float division by zero'); v's gradient is the uniform
    weights' transpose times the cotangent, q's and k's are empty."""
    from tapeml.array import ops
    v = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    R = np.array([[1.0, -1.0], [2.0, 0.5], [0.0, 3.0]])
    q = np.zeros((3, 0))
    sdpa = B("scaled_dot_product_attention")
    np.testing.assert_allclose(sdpa(q, q, v), np.tile(v.mean(axis=0), (3, 1)), rtol=1e-15)
    np.testing.assert_allclose(grad(lambda t: tsum(ops.mul(sdpa(q, q, t), R)), v), np.full((3, 3), 1 / 3) @ R, rtol=1e-15)
    assert grad(lambda t: tsum(sdpa(t, q, v)), q).shape == (3, 0)
    out = output_of("h = {wq = zeros(4, 0), wk = zeros(4, 0), wv = eye(4), wo = eye(4)}\n"
                    "x = [1, 2, 3, 4; 5, 6, 7, 8; 0, 0, 0, 1]\n"
                    "print(multi_head_attention(x, (h,), 1) == multi_head_attention(x, (h,), 1, return_weights = true)[0])\n"
                    "print(multi_head_attention(x, (h,), 1)[0, :])")
    assert out == "[true, true, true, true; true, true, true, true; true, true, true, true]\n[2, 2.666667, 3.333333, 4.333333]\n"
    if HAS_TORCH:
        import torch
        t = torch.nn.functional.scaled_dot_product_attention(torch.zeros(3, 0, dtype=torch.float64),
                                                             torch.zeros(3, 0, dtype=torch.float64), torch.tensor(v))
        np.testing.assert_allclose(sdpa(q, q, v), t.numpy(), rtol=1e-15)
