"""Indexing on PyTorch tensors (issue 27): the index primitives (index, scatter_add, setitem,
concat, stack) give on torch:cpu what they give on NumPy, to 1e-12 in float64, for every form of
index the evaluator and the builtins make (lang/array/index_ops.py: an index stays NumPy's, its
arrays cross to the device where applied), forward and VJP, repeated positions included; and the
programs of the indexing rule print the same on both backends. Skipped without torch."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import tapeml

from tapeml.array import backend as B, ops, tape
from tapeml.array.index_ops import orthogonal
from tapeml.array.reduce_ops import along
from tapeml.syntax.errors import LangError

pytest.importorskip("torch")
pytest.importorskip("array_api_compat")


@pytest.fixture
def torch_be():
    return B.make("torch:cpu")


@contextlib.contextmanager
def on(be):
    """The session's backend is `be` inside (numbers made by a primitive are made there)."""
    before = B.current()
    B.set_current(be)
    try:
        yield
    finally:
        B.set_current(before)


def host(v):
    v = tape.raw(v)
    return np.asarray(B.to_numpy(v), dtype=np.float64) if B.is_array(v) else np.float64(v)


def same(a, b):
    a, b = host(a), host(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def vjp(f, xs, g):
    """The cotangents of f at xs for the output cotangent g, through the tape."""
    level = tape.new_level()
    boxes = [tape.leaf(x, level) for x in xs]
    loss = ops.sum_(ops.mul(f(*boxes), g))
    grads = tape.backward(loss, 1.0, ops.add, ops.shape_of)
    return [grads.get(b, 0.0) for b in boxes]


V = np.array
IDX = [     # (shape of x, per-axis parts for orthogonal, or a ready index with "raw")
    ((5,), (3,)),
    ((5,), (slice(1, 4, 1),)),
    ((5,), (slice(4, None, -1),)),                       # 4:-1:0, backwards to the start
    ((5,), (slice(3, 0, -2),)),
    ((5,), (V([0, 0, 3, 1]),)),                          # a repeated position
    ((3, 4), (1, slice(None))),
    ((3, 4), (slice(None), V([3, 3, 0]))),               # one vector, kept in place
    ((3, 4), (V([2, 0]), slice(3, None, -1))),           # a vector and a backward range: the grid
    ((3, 4), (V([1, 1]), V([0, 2, 2]))),                 # two vectors: every combination
    ((3, 4), (slice(2, None, -1), 1)),
    ((2, 3, 4), (1, slice(None), V([1, 0]))),
    ((2, 3, 4), (V([1, 1, 0]), 2, slice(1, 3, 1))),
    ((2, 3, 4), (slice(1, None, -1), V([2, 2]), 0)),
    ((2, 3, 4), (V([0]), V([2, 1, 2]), V([3, 0]))),
    ((3, 4), "mask"),                                    # a full-shape bool mask
    ((3, 4), "along"),                                   # take_along's index, an id repeated
    ((5, 2), "rows"),                                    # a matrix of ids, rows whole (embedding's)
    ((5, 2), "rows:"),                                   # the same with the trailing ':' written
]


def make_index(shape, parts):
    if parts == "mask":
        return (np.arange(np.prod(shape)).reshape(shape) % 3 == 1,)
    if parts == "along":
        return along(np.array([[1, 1, 0], [3, 2, 2], [0, 0, 0]]).reshape(3, 3), 1)
    if parts == "rows":
        return (np.array([[0, 3, 3], [4, 0, 0]]),)
    if parts == "rows:":
        return (np.array([[0, 3, 3], [4, 0, 0]]), slice(None))
    return orthogonal(list(parts), shape)


@pytest.mark.parametrize("shape, parts", IDX, ids=[f"{s}-{i}" for i, (s, _) in enumerate(IDX)])
def test_index_scatter_and_setitem_match_numpy(shape, parts, torch_be):
    rng = np.random.default_rng(7)
    idx = make_index(shape, parts)
    x = rng.standard_normal(shape)
    pshape = np.shape(ops.index(x, idx=idx))
    g, v, gy = rng.standard_normal(pshape), rng.standard_normal(pshape), rng.standard_normal(shape)
    if not pshape:
        g, v = float(g), float(v)

    def results(x, g, v, gy):
        """The read, the scatter-add, two writes, and the VJPs of the read and of the write."""
        return ([ops.index(x, idx=idx), ops.scatter_add(g, idx=idx, shape=shape), ops.setitem(x, v, idx=idx),
                 ops.setitem(x, 2.5, idx=idx)]      # a number broadcast
                + vjp(lambda a: ops.index(a, idx=idx), [x], g)
                + vjp(lambda a, b: ops.setitem(a, b, idx=idx), [x, v], gy))   # an overwritten write gets 0
    want = results(x, g, v, gy)
    with on(torch_be):
        dev = [torch_be.asarray(a) if type(a) is np.ndarray else a for a in (x, g, v, gy)]
        got = results(*dev)
    for w, r in zip(want, got):
        same(r, w)


def test_results_are_matrices_of_their_own(torch_be):
    with on(torch_be):
        _own(torch_be)


def _own(torch_be):
    x = torch_be.asarray(np.arange(6.0).reshape(2, 3))
    row = ops.index(x, idx=(0,))
    assert row._base is None                      # not a view of x (values are never shared)
    assert ops.index(x, idx=(1, 2)) == 5.0 and type(ops.index(x, idx=(1, 2))) is float
    out = ops.setitem(x, 9.0, idx=(0, 0))
    assert host(x)[0, 0] == 0 and host(out)[0, 0] == 9     # a new value: x unchanged


def test_a_store_that_does_not_fit_is_numpys_value_error(torch_be):
    x = torch_be.asarray(np.zeros((2, 3)))
    with pytest.raises(ValueError):
        ops.setitem(x, torch_be.asarray(np.ones((2, 2))), idx=(slice(None),))
    with pytest.raises(ValueError):
        ops.setitem(x, torch_be.asarray(np.ones(2)), idx=(V([0, 0]), slice(None)))     # repeated rows
    with pytest.raises(ValueError):
        ops.concat(x, torch_be.asarray(np.ones((2, 2))), dim=0)
    with pytest.raises(ValueError):
        ops.stack(x, torch_be.asarray(np.ones((2, 2))), dim=0)


def test_concat_and_stack_match_numpy(torch_be):
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0]])
    g = np.array([[1.0, -1.0], [2.0, 0.5], [3.0, 7.0]])

    def results(a, b, g):
        return ([ops.concat(a, b, dim=0), ops.stack(ops.index(a, idx=(0,)), ops.index(b, idx=(0,)), dim=1),
                 ops.stack(1.0, 2.5, dim=0)]
                + vjp(lambda p, q: ops.concat(p, q, dim=0), [a, b], g))
    want = results(a, b, g)
    with on(torch_be):
        got = results(torch_be.asarray(a), torch_be.asarray(b), torch_be.asarray(g))
    for w, r in zip(want, got):
        assert type(tape.raw(r)) is torch_be.array_type       # numbers only: the session's backend
        same(r, w)


PROGRAM = """
x = [10, 20, 30, 40, 50]
m = [1, 2, 3, 4; 5, 6, 7, 8; 9, 10, 11, 12]
print(x[[0, end, 0]], x[end:-2:0], x[x > 25 and x < 45], m[[2, 0], end:-1:1], m[m > 6])
x[[1, 1]] = [7, 8]
m[[0, 0], :] += 1
m[m > 10] = 0
print(x, m)
for row in m
  print(row)
end
a, b = [1, 2; 3, 4]
print(a, b)
for v in [true, false]
  print(v)
end
fn f(v)
  y = 0 * [1, 2, 3]
  y[[0, 0, 2]] = v * v
  return sum(y * [1, 2, 3]) + sum(v[[2, 1, 2]])
end
print(grad(f, [1, 2, 3]), grad(fn(v) -> grad(f, v)[1], [1, 2, 3]))
print(put_along(m, [1, 0, 3], 7), put_along(m, [1, 1, 2, 0], [1, 2, 3, 4], dim=0))
print(grad(fn(v) -> sum(put_along(m, [1, 1, 2], v) * m), [1, 2, 3]))
m[[0, 1], 2] = [1, 2, 3]
"""
ALONG = """
m = [1, 2, 3, 4; 5, 6, 7, 8; 9, 10, 11, 12]
print(take_along(m, [1, 0, 3]), add_along(m, [1, 1, 2, 0], [1, 2, 3, 4], dim=0))
print(grad(fn(p) -> sum(take_along(p, [3, 3, 0]) * [1, 2, 3]), m))
"""


def printed(program, device):
    out = io.StringIO()
    try:
        tapeml.Session(device=device, out=out).run(program, "<test>")
    except LangError as e:
        return out.getvalue() + str(e)
    return out.getvalue()


def test_the_indexing_program_prints_the_same_on_both_backends():
    want = printed(PROGRAM, "numpy")
    assert "cannot assign a vector of length 3 to a part that is a vector of length 2" in want
    assert printed(PROGRAM, "torch:cpu") == want


def test_take_along_and_add_along_print_the_same_on_both_backends():
    want = printed(ALONG, "numpy")
    assert "Error" not in want
    assert printed(ALONG, "torch:cpu") == want
