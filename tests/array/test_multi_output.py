"""Primitives with several outputs (tape.Primitive `outputs=k`, issue 27): svd, qr, eigh and slogdet
return a tuple of values with no packing into one vector.

- the mechanism on a small primitive of its own (not in the table): the plain call, the recorded
  node and its output Boxes, None cotangents for unused outputs, an output used twice, grad of
  grad, nested levels, and the walk (show_tape's graph, check_nan);
- the factorizations: the gradient through ONE output of svd, qr, eigh or slogdet against PyTorch's
  autograd (its factors with the signs fixed as tapeml fixes them), and the gradient through S
  alone at a repeated spectrum (valid there: no 1/(s_j^2 - s_i^2) is formed);
- second order through qr, eigh and svd against finite differences of the tape's gradient and
  against PyTorch's double backward.

The inputs are made by the session's backend (`dev`), so `TAPEML_DEVICE=torch:cpu` (or `pytest
--device torch:cpu`) runs the same tests on tensors; PyTorch's reference runs on its own tensors.
"""
import io

import numpy as np
import pytest

from tapeml.array import backend as B
from tapeml.array import linalg_ops as la
from tapeml.array import ops, tape
from tapeml.array.tape import Box, Part, Primitive, raw
from tapeml.syntax.errors import InternalError

from fd import fd_grad, grad

rng = np.random.default_rng(27)


def dev(x):
    """x on the session's backend (a NumPy array by default, a tensor on torch:cpu)."""
    return B.current().asarray(np.asarray(x, dtype=np.float64))


def host(v):
    """A value of any backend as a float64 NumPy array."""
    return np.asarray(B.to_numpy(raw(v)), dtype=np.float64)


# ---- the mechanism, on a primitive of its own -------------------------------------------------
SEEN = []       # which cotangents each call of the VJP received (True: None)


def _two(x):
    return x * 2.0, x * x


def _vjp_two(g, ans, saved, tracked, x):
    SEEN.append(tuple(c is None for c in g))
    ga = None
    if g[0] is not None:
        ga = ops.mul(g[0], 2.0)
    if g[1] is not None:
        t = ops.mul(ops.mul(g[1], 2.0), x)
        ga = t if ga is None else ops.add(ga, t)
    return (ga,)


TWO = Primitive("two", _two, _vjp_two, outputs=2)
two = TWO.call


def test_the_plain_call_returns_a_tuple_and_records_nothing():
    x = dev([1.0, -2.0, 3.0])
    y = two(x)
    assert type(y) is tuple and len(y) == 2 and all(B.is_array(v) for v in y)
    assert host(y[0]).tolist() == [2.0, -4.0, 6.0] and host(y[1]).tolist() == [1.0, 4.0, 9.0]


def test_a_recorded_call_is_one_node_with_an_output_box_per_result():
    level = tape.open_level()
    try:
        x = tape.leaf(dev([1.0, 2.0]), level)
        y0, y1 = two(x)
    finally:
        tape.close_level(level)
    assert type(y0) is Box and type(y1) is Box
    assert type(y0.prim) is Part and type(y1.prim) is Part and (y0.prim.index, y1.prim.index) == (0, 1)
    joint = y0.parents[0]
    assert y1.parents[0] is joint and joint.prim is TWO and joint.parents == [x]
    assert type(joint.value) is tuple and joint.value[0] is y0.value and joint.value[1] is y1.value
    assert x.idx < joint.idx < y0.idx < y1.idx          # creation order: the walk visits the node last


def test_an_output_without_cotangent_reaches_the_vjp_as_none():
    x = dev([1.0, -2.0, 3.0])
    SEEN.clear()
    assert host(grad(lambda t: ops.sum_(two(t)[1]), x)).tolist() == [2.0, -4.0, 6.0]
    assert SEEN == [(True, False)]
    SEEN.clear()
    assert host(grad(lambda t: ops.sum_(two(t)[0]), x)).tolist() == [2.0, 2.0, 2.0]
    assert SEEN == [(False, True)]
    SEEN.clear()
    g = grad(lambda t: ops.add(ops.sum_(two(t)[0]), ops.sum_(two(t)[1])), x)       # two nodes
    assert host(g).tolist() == [4.0, -2.0, 8.0] and sorted(SEEN) == [(False, True), (True, False)]


def test_both_outputs_and_an_output_used_twice_give_one_vjp_call():
    x = dev([1.0, -2.0, 3.0])

    def f(t):
        a, b = two(t)
        return ops.add(ops.add(ops.sum_(a), ops.sum_(ops.mul(a, 3.0))), ops.sum_(b))
    SEEN.clear()
    assert host(grad(f, x)).tolist() == [10.0, 4.0, 14.0]     # 2 + 6 + 2x
    assert SEEN == [(False, False)]


def test_grad_of_grad_through_a_primitive_with_several_outputs():
    x = dev([1.0, -2.0, 3.0])
    w = dev([0.5, 1.0, -1.0])

    def f(t):
        a, b = two(t)
        return ops.sum_(ops.mul(a, b))         # sum(2 t^3): gradient 6 t^2, second 12 t

    def inner(t):
        return ops.sum_(ops.mul(grad(f, t), w))
    assert host(grad(f, x)).tolist() == [6.0, 24.0, 54.0]
    assert host(grad(inner, x)).tolist() == [6.0, -24.0, -36.0]


def test_an_output_box_of_an_outer_level_records_on_both_tapes():
    # the inner grad differentiates t -> sum(two(t * s)[1]) with s tracked by the outer grad
    x = dev([1.0, 2.0])

    def outer(s):
        return ops.sum_(grad(lambda t: ops.sum_(two(ops.mul(t, s))[1]), x))    # sum(2 t s^2)
    assert host(grad(outer, 3.0)).tolist() == 4.0 * 3.0 * 3.0


def test_a_primitive_with_several_outputs_has_no_plain_vjp():
    with pytest.raises(InternalError, match="several outputs has no vjp_plain"):
        Primitive("bad", _two, _vjp_two, vjp_plain=_vjp_two, outputs=2)


def test_the_walk_merges_cotangents_slot_by_slot():
    got = tape.merge_cotangents((None, 1.0, None), (2.0, 3.0, None), lambda a, b: a + b)
    assert got == (2.0, 4.0, None)


# ---- what reads the tape: show_tape's graph, check_nan ---------------------------------------
def test_show_tape_draws_a_factorization_as_one_node_with_its_outputs():
    from tapeml.builtins import tapeview
    from tapeml.evaluator.interpreter import Interpreter
    interp = Interpreter(out=io.StringIO())
    interp.run("\nfn f(a)\n  U, S, Vh = svd(a)\n  return sum(S) + sum(U)\nend", "g.ml")
    g = tapeview.record(interp.context, interp.get_variable("f"), np.array([[3.0, 1.0], [1.0, 2.0]]), "x")
    nodes, edges = g.describe()
    assert ("svd", "op", ((2, 2), (2,), (2, 2)), 3, True) in nodes
    assert sorted(edges) == [("sum", "add"), ("sum", "add"), ("svd", "sum"), ("svd", "sum"), ("x", "svd")]
    assert "svd\n[2, 2] [2] [2, 2]\nline 3" in [tapeview._text(n) for n in g.nodes.values()]


def test_check_nan_follows_a_cotangent_through_a_factorization():
    from support import cli_error, cli_output
    # grad through U at a repeated spectrum does not exist: the svd VJP is the one blamed, at svd
    err = cli_error("check_nan(true)\ng = grad(fn(a) -> sum(svd(a)[0] * [1, 2; 3, 4]), [1, 0; 0, 1])")
    assert "<string>:2:23: NaNError: the backward pass of svd made -inf from finite values" in err
    assert cli_output("check_nan(true)\nprint(grad(fn(a) -> sum(svd(a)[1]), [2, 0; 0, 2]))") == "[1, 0; 0, 1]\n"


# ---- one output of a factorization, against PyTorch's autograd ---------------------------------
def _t_signs(torch, x):
    big = x.detach().abs().argmax(dim=-2, keepdim=True)
    s = torch.sign(torch.gather(x.detach(), -2, big))
    return torch.where(s == 0, torch.ones_like(s), s)


def _t_factor(torch, name, a):
    """PyTorch's factors with tapeml's signs (so the same functions of A)."""
    if name == "svd":
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        sg = _t_signs(torch, u)
        return u * sg, s, vh * sg.mT
    if name == "qr":
        q, r = torch.linalg.qr(a)
        d = torch.sign(torch.diagonal(r.detach(), dim1=-2, dim2=-1))
        d = torch.where(d == 0, torch.ones_like(d), d)
        return q * d[..., None, :], r * d[..., :, None]
    if name == "eigh":
        w, v = torch.linalg.eigh((a + a.mT) / 2)
        return w, v * _t_signs(torch, v)
    return torch.linalg.slogdet(a)


def _factor(name, a):
    """tapeml's factors of a (eigh of the symmetric part, as the builtin)."""
    if name == "eigh":
        a = ops.mul(ops.add(a, ops.transpose(a)), 0.5)
    return getattr(la, name)(a)


ONE_OUTPUT = [("svd", 0, (5, 3)), ("svd", 1, (5, 3)), ("svd", 2, (5, 3)), ("svd", 0, (3, 5)), ("svd", 2, (3, 5)),
              ("svd", 1, (2, 4, 3)), ("qr", 0, (5, 3)), ("qr", 1, (5, 3)), ("qr", 1, (2, 4, 4)), ("eigh", 0, (4, 4)),
              ("eigh", 1, (4, 4)), ("eigh", 1, (2, 3, 3)), ("slogdet", 1, (3, 3))]


@pytest.mark.parametrize("name, which, shape", ONE_OUTPUT, ids=[f"{n}[{i}]{s}" for n, i, s in ONE_OUTPUT])
def test_the_gradient_through_one_output_is_pytorchs(name, which, shape):
    torch = pytest.importorskip("torch")
    a = rng.standard_normal(shape) + (shape[-1] * np.eye(shape[-1]) if name == "slogdet" else 0.0)
    outs = _factor(name, dev(a))
    R = rng.standard_normal(np.shape(host(outs[which])))

    def loss(t):
        return ops.sum_(ops.mul(_factor(name, t)[which], dev(R)))
    got = host(grad(loss, dev(a)))
    ta = torch.tensor(a, requires_grad=True)
    (_t_factor(torch, name, ta)[which] * torch.tensor(R)).sum().backward()
    want = ta.grad.numpy()
    for mine, theirs in zip(outs, _t_factor(torch, name, torch.tensor(a))):
        assert np.allclose(host(mine), theirs.numpy(), rtol=1e-10, atol=1e-10)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9), (got, want)
    assert np.allclose(got, fd_grad(lambda t: loss(dev(t)), a), rtol=1e-6, atol=1e-6)


def test_the_sign_of_slogdet_has_a_zero_gradient():
    a = dev([[1.0, 2.0], [3.0, 4.0]])
    assert host(grad(lambda t: ops.mul(la.slogdet(t)[0], 3.0), a)).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    sign, logabsdet = la.slogdet(a)
    assert (sign, round(logabsdet, 12)) == (-1.0, round(np.log(2.0), 12))


def test_singular_values_alone_are_differentiable_at_a_repeated_spectrum():
    # U and Vh are not functions of A at 2 I; S is, and its gradient U diag(gS) Vh forms no 1/(s_j^2 - s_i^2)
    # (a symmetric function of S is smooth there: sum(S), sum(S^2) = |A|_F^2; so of eigh's w)
    a = dev(2.0 * np.eye(3))
    assert np.allclose(host(grad(lambda t: ops.sum_(la.svd(t)[1]), a)), np.eye(3), rtol=0, atol=1e-15)
    s2 = host(grad(lambda t: ops.sum_(ops.mul(la.svd(t)[1], la.svd(t)[1])), a))
    assert np.allclose(s2, 4.0 * np.eye(3), rtol=0, atol=1e-14)
    w2 = host(grad(lambda t: ops.sum_(ops.mul(la.eigh(t)[0], la.eigh(t)[0])), dev(np.eye(3))))
    assert np.allclose(w2, 2.0 * np.eye(3), rtol=0, atol=1e-14)


# ---- second order: grad of grad through the factorizations ------------------------------------
def _tall(*shape):
    return rng.standard_normal(shape)


def _sym(n):
    m = rng.standard_normal((n, n))
    return (m + m.T) / 2 + np.diag(np.arange(n) * 2.0)      # distinct eigenvalues


SECOND = {
    "qr/both": ("qr", (0, 1), _tall(4, 3)),
    "qr/Q alone": ("qr", (0,), _tall(4, 3)),
    "qr/R alone": ("qr", (1,), _tall(3, 3)),
    "eigh/both": ("eigh", (0, 1), _sym(3)),
    "eigh/V alone": ("eigh", (1,), _sym(4)),
    "eigh/w alone": ("eigh", (0,), _sym(3)),
    "svd/all": ("svd", (0, 1, 2), _tall(4, 3)),
    "svd/S alone": ("svd", (1,), _tall(3, 4)),
    "slogdet": ("slogdet", (1,), _tall(3, 3) + 3 * np.eye(3)),
}


def _weights(name, which, a):
    outs = _factor(name, dev(a))
    r = np.random.default_rng(5)
    return {i: r.standard_normal(np.shape(host(outs[i]))) for i in which}


@pytest.mark.parametrize("case", list(SECOND))
def test_grad_of_grad_against_finite_differences_and_pytorch(case):
    name, which, a = SECOND[case]
    Rs = _weights(name, which, a)
    w = np.random.default_rng(6).standard_normal(a.shape)

    def f(t):
        outs = _factor(name, t)
        total = 0.0
        for i, R in Rs.items():
            total = ops.add(total, ops.sum_(ops.mul(outs[i], dev(R))))
        return total

    def inner(t):           # a scalar of the first gradient: sum(grad f(t) * w)
        return ops.sum_(ops.mul(grad(f, t), dev(w)))
    tape2 = host(grad(inner, dev(a)))
    fd = fd_grad(lambda t: inner(dev(t)), a, h=1e-5)
    err = np.max(np.abs(tape2 - fd) / np.maximum(1.0, np.abs(fd)))
    assert err < 1e-5, (err, tape2, fd)
    torch = pytest.importorskip("torch")
    ta = torch.tensor(a, requires_grad=True)
    outs = _t_factor(torch, name, ta)
    loss = sum((outs[i] * torch.tensor(R)).sum() for i, R in Rs.items())
    (g1,) = torch.autograd.grad(loss, ta, create_graph=True)
    (g2,) = torch.autograd.grad((g1 * torch.tensor(w)).sum(), ta)
    assert np.allclose(tape2, g2.numpy(), rtol=1e-8, atol=1e-8), (tape2, g2.numpy())
