"""The indexing rule (issue 16) and repeated-index writes (issue 15, item 1), as properties.

Each index makes its own axis, in order (a number drops it), for every mix of numbers, `end`,
ranges, `:`, index vectors (with repeats, and `end` inside them) and 1-D bool masks, in any rank; a write keeps the
last write to each element, in row-major order of the index grid. The reference is written one
axis at a time with `np.take` and plain Python loops over the index grid, never with NumPy's
mixed advanced indexing, and checks the read, the write, `+=`, and the gradients of all three.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapeml.syntax.errors import LangError

from support import variables_after

EXAMPLES = int(os.environ.get("TAPEML_INDEX_EXAMPLES", "300"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))
KINDS = ("number", "end", "range", "colon", "vector", "mask")


@st.composite
def index_case(draw, kinds=KINDS):
    """(shape, source text of the index, per-axis reference: an int or a list of ints)."""
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    used = draw(st.integers(1, rank))          # trailing axes may be left out: they are kept whole
    texts, refs = [], []
    for n in shape[:used]:
        kind = draw(st.sampled_from(kinds))
        if kind == "number":
            i = draw(st.integers(0, n - 1))
            texts.append(str(i)), refs.append(i)
        elif kind == "end":
            k = draw(st.integers(0, n - 1))
            texts.append(f"end - {k}" if k else "end"), refs.append(n - 1 - k)
        elif kind == "range":
            a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            step = draw(st.sampled_from((1, 1, 2, -1, -2)))
            stop = str(b) if draw(st.booleans()) else (f"end - {n - 1 - b}" if b < n - 1 else "end")
            texts.append(f"{a}:{stop}" if step == 1 else f"{a}:{step}:{stop}")
            refs.append(list(range(a, b + (1 if step > 0 else -1), step)))   # both ends included
        elif kind == "colon":
            texts.append(":"), refs.append(list(range(n)))
        elif kind == "vector":
            v = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))    # repeats allowed
            # an element may count from the end: `end` inside an index vector (issue 29)
            words = [(f"end - {n - 1 - i}" if i < n - 1 else "end") if draw(st.booleans()) else str(i) for i in v]
            texts.append("[" + ", ".join(words) + "]"), refs.append(v)
        else:
            bits = draw(st.lists(st.booleans(), min_size=n, max_size=n))
            texts.append("[" + ", ".join("true" if b else "false" for b in bits) + "]")
            refs.append([i for i, b in enumerate(bits) if b])
    return shape, ", ".join(texts), refs


def take(arr, refs):
    """The reference read: one axis at a time; a number drops its axis, a list keeps it."""
    out, axis = arr, 0
    for r in refs:
        if isinstance(r, int):
            out = np.take(out, r, axis=axis)
        else:
            out = np.take(out, np.array(r, dtype=np.intp), axis=axis)
            axis += 1
    return out


def grid_positions(shape, refs):
    """The flat position each point of the index grid names (the grid's shape is the read's)."""
    return take(np.arange(int(np.prod(shape))).reshape(shape), refs)


def ints(rng, shape):
    """Small whole numbers: every sum below is exact, so results compare with ==."""
    a = rng.integers(-9, 10, size=shape).astype(np.float64)
    return float(a) if a.ndim == 0 else a


def same(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return got.shape == want.shape and np.array_equal(got, want)


@PROPERTY
@given(index_case(), st.booleans(), st.integers(0, 2 ** 32 - 1))
def test_read_write_and_gradients_follow_the_one_axis_at_a_time_reference(case, scalar_value, seed):
    shape, idx, refs = case
    rng = np.random.default_rng(seed)
    x = ints(rng, shape)
    pos = grid_positions(shape, refs)
    order = list(np.ravel(pos))
    v = ints(rng, () if scalar_value else pos.shape)
    vflat = np.broadcast_to(v, pos.shape).ravel()
    r, w = ints(rng, pos.shape), ints(rng, shape)

    # the reference: reads are takes; writes go through the grid in row-major order
    write, add = x.copy(), x.copy()
    for k, p in enumerate(order):
        write.flat[p] = vflat[k]
        add.flat[p] = x.flat[p] + vflat[k]        # x[idx] += v is x[idx] = x[idx] + v
    g_read = np.zeros(shape)
    for k, p in enumerate(order):
        g_read.flat[p] += np.ravel(r)[k]
    last = {p: k for k, p in enumerate(order)}
    g_write_x = w.copy()
    g_write_x.flat[order] = 0.0
    g_write_v = np.array([w.flat[p] if last[p] == k else 0.0 for k, p in enumerate(order)]).reshape(pos.shape)
    if scalar_value:
        g_write_v = g_write_v.sum()

    out = variables_after(f"""
Y = X[{idx}]
Z = X
Z[{idx}] = V
S = X
S[{idx}] += V
GR = grad(fn(x) -> sum(x[{idx}] * R), X)
fn written(p)
    z = p[0]
    z[{idx}] = p[1]
    return sum(z * W)
end
fn added(p)
    z = p[0]
    z[{idx}] += p[1]
    return sum(z * W)
end
GW = grad(written, (X, V))
GA = grad(added, (X, V))
""", X=x, V=v, R=r, W=w)
    assert same(out["Y"], take(x, refs)), (idx, out["Y"])
    assert same(out["Z"], write), (idx, out["Z"])
    assert same(out["S"], add), (idx, out["S"])
    assert same(out["GR"], g_read), (idx, out["GR"])
    assert same(out["GW"][0], g_write_x) and same(out["GW"][1], g_write_v), (idx, out["GW"])
    assert same(out["GA"][0], w) and same(out["GA"][1], g_write_v), (idx, out["GA"])


@pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"), reason="torch not installed")
@settings(max_examples=min(EXAMPLES, 100), deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(index_case(), st.integers(0, 2 ** 32 - 1))
def test_read_gradient_matches_torch_index_select(case, seed):
    """PyTorch autograd as an outside reference for the gradient of a read with repeats:
    index_select along one axis at a time (its backward is index_add)."""
    import torch
    shape, idx, refs = case
    rng = np.random.default_rng(seed)
    x, r = rng.standard_normal(shape), None
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y, axis = t, 0
    for ref in refs:
        if isinstance(ref, int):
            y = y.select(axis, ref)
        else:
            y = y.index_select(axis, torch.tensor(ref, dtype=torch.long))
            axis += 1
    r = rng.standard_normal(tuple(y.shape))
    (y * torch.tensor(r)).sum().backward()
    out = variables_after(f"G = grad(fn(x) -> sum(x[{idx}] * R), X)", X=x, R=float(r) if r.ndim == 0 else r)
    assert np.allclose(out["G"], t.grad.numpy(), rtol=1e-12, atol=1e-12), idx


def test_issue_16_rank3_mixed_read_and_write():
    a = np.arange(24.0).reshape(2, 3, 4)
    got = variables_after("a = reshape(0:23, 2, 3, 4)\nANS = a[1, :, [1, 0]]")["ANS"]
    assert same(got, [[13, 12], [17, 16], [21, 20]])
    b = variables_after("b = zeros(2, 3, 4)\nb[1, :, [1, 0]] = [1, 2; 3, 4; 5, 6]\nANS = b")["ANS"]
    want = np.zeros((2, 3, 4))
    want[1, :, 1], want[1, :, 0] = [1, 3, 5], [2, 4, 6]
    assert same(b, want)
    # the numbers need not be adjacent to the vector, and a mask is an index like a vector
    assert same(variables_after("a = reshape(0:23, 2, 3, 4)\nANS = a[[true, false], 2, 1:2]")["ANS"], a[[0]][:, 2, 1:3])
    assert same(variables_after("a = reshape(0:23, 2, 3, 4)\nANS = a[:, 1, [3, 0]]")["ANS"], a[:, 1][:, [3, 0]])
    assert same(variables_after("a = reshape(0:23, 2, 3, 4)\nANS = a[end, [2, 0], end]")["ANS"], [a[1, 2, 3], a[1, 0, 3]])


def test_full_shape_mask_selects_elements_and_partial_masks_are_refused():
    got = variables_after("a = reshape(0:23, 2, 3, 4)\nANS = a[a % 5 == 0]")["ANS"]
    assert same(got, [0, 5, 10, 15, 20])
    got = variables_after("a = reshape(0:23, 2, 3, 4)\na[a % 5 == 0] = -1\nANS = a")["ANS"]
    assert same(got, np.where(np.arange(24).reshape(2, 3, 4) % 5 == 0, -1, np.arange(24).reshape(2, 3, 4)))
    g = variables_after("ANS = grad(fn(x) -> sum(x[x > 2] * [1, 2]), [1, 5, 0, 3])")["ANS"]
    assert same(g, [0, 1, 0, 2])
    for src, words in [("a = zeros(2, 3, 4)\na[zeros(2, 3) == 0]", "a 2x3 bool mask covers some axes"),
                       ("a = zeros(2, 3, 4)\na[zeros(2, 3) == 0, 1]", "a 2x3 bool mask covers some axes"),
                       ("a = zeros(2, 3)\na[:, [true, false]]", "mask a vector of length 2, axis of length 3"),
                       ("a = zeros(2, 3)\na[a == 0, 1]", "must be the only index; got 2 indices")]:
        with pytest.raises(LangError) as e:
            variables_after(src)
        assert e.value.kind == "IndexError" and words in e.value.message, e.value.message


def test_issue_15_repeated_index_write():
    out = variables_after("""
fn g(v)
    x = zeros(3)
    x[[0, 0]] = v
    return sum(x * [1, 2, 3])
end
A = g([10, 20])
G = grad(g, [10, 20])
C = check_grad(g, [10, 20])
""")
    assert out["A"] == 20 and same(out["G"], [0, 1]) and out["C"] < 1e-6
    # `+=` through a repeated index adds once (NumPy and MATLAB), and the gradient agrees
    out = variables_after("""
fn h(v)
    x = [1, 2, 3]
    x[[0, 0]] += v
    return sum(x * [1, 2, 3])
end
A = h([10, 20])
G = grad(h, [10, 20])
""")
    assert out["A"] == 21 + 4 + 9 and same(out["G"], [0, 1])
    # a number written twice is written once; the matrix is not credited twice either
    out = variables_after("""
fn k(s)
    x = zeros(2, 2)
    x[[1, 1], :] = s
    return sum(x * [1, 2; 3, 4])
end
fn k2(r)
    x = zeros(2, 2)
    x[[1, 1], :] = r
    return sum(x * [1, 2; 3, 4])
end
G = grad(k, 5)
GR = grad(k2, [1, 2; 3, 4])
""")
    assert out["G"] == 7 and same(out["GR"], [[0, 0], [3, 4]])


def test_an_overwritten_write_gets_gradient_0_even_under_an_infinite_cotangent():
    # the overwritten write's gradient is 0 x inf = 0 (zmul), not nan
    out = variables_after("""
fn g(v)
    x = zeros(3)
    x[[0, 0]] = v
    return sum(x * [1 / 0, 2, 3])
end
G = grad(g, [10, 20])
""")
    assert out["G"][0] == 0 and out["G"][1] == np.inf


def test_second_order_through_a_repeated_write():
    # d/dv of the gradient: x[[0, 0]] = v * v keeps v[1]^2 only
    out = variables_after("""
fn g(v)
    x = zeros(3)
    x[[0, 0]] = v * v
    return sum(x * [1, 2, 3])
end
H = grad(fn(v) -> sum(grad(g, v) * [1, 1]), [3, 4])
""")
    assert same(out["H"], [0, 2])
