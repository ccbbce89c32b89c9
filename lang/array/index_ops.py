"""The primitives that cut and join: concat, stack, indexing, indexed stores (lang/array/ops.py)."""
from __future__ import annotations

import math

import numpy as np

from tapeml.array import backend as B
from tapeml.array.backend import ARRAYS
from tapeml.array.primitive_table import FLOAT, bools_as_floats, primitive, python_scalar, shape_of
from tapeml.array.core_ops import reshape, unbroadcast, zmul

_NDARRAY = np.ndarray


def _device_parts(xs):
    """The backend the parts of a concat or stack join on, and the parts as its arrays: None and
    xs as they are when no part is another backend's array (NumPy joins them)."""
    like = None
    for x in xs:
        t = type(x)
        if t is not _NDARRAY and t in ARRAYS:
            like = x
            break
    if like is None:
        return None, xs
    be = B.of(like)
    return be, [x if type(x) is type(like) else be.asarray(x) for x in xs]


def _concat(*xs, dim=0):
    _check_total("concat", xs, dim)
    be, parts = _device_parts(xs)
    if be is None:
        return np.concatenate(xs, axis=dim)
    _same_but(parts, dim)
    return be.xp.concat(parts, axis=dim)


def _same_but(parts, dim=None):
    """NumPy's ValueError for parts whose shapes differ on an axis other than dim (all axes for
    stack's dim None): torch says RuntimeError, and the builtins' messages catch ValueError."""
    first = tuple(parts[0].shape)
    if dim is not None:
        if not first:
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        dim %= len(first)
    for p in parts[1:]:
        s = tuple(p.shape)
        if len(s) != len(first) or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != dim):
            raise ValueError("the parts' shapes do not fit")


def _check_total(name, xs, dim):
    """The size guard for concat and stack: the result holds all the parts."""
    n = 0
    for x in xs:
        n += math.prod(shape_of(x))
    from tapeml.array import limits
    if n > limits.max_elements():
        s = list(shape_of(xs[0]))
        if name == "stack":
            s.insert(dim % (len(s) + 1), len(xs))
        elif s:
            s[dim] = sum(shape_of(x)[dim] if shape_of(x) else 1 for x in xs)
        from tapeml.array.values import shape_text
        err = limits.elements_error(f"{name}() of {len(xs)} parts (a result of {shape_text(tuple(s))})", n)
        err.operation = (name, tuple(s), n)         # a builtin or a matrix literal names itself instead
        raise err


def _vjp_concat(g, ans, saved, tracked, *xs, dim=0):
    out, start = [], 0
    nd = len(shape_of(ans))
    idx = [slice(None)] * nd
    d = dim % nd
    for x, need in zip(xs, tracked):
        n = shape_of(x)[d]
        if need:
            idx[d] = slice(start, start + n)
            out.append(index(g, idx=tuple(idx)))
        else:
            out.append(None)
        start += n
    return tuple(out)


def _vjp_concat_plain(g, ans, saved, tracked, *xs, dim=0):
    """First order: the cotangent cut into views (matrices are never changed in place), not copies."""
    if type(g) not in ARRAYS:
        return None
    out, start = [], 0
    idx = [slice(None)] * g.ndim
    d = dim % g.ndim
    for x, need in zip(xs, tracked):
        n = shape_of(x)[d]
        if need:
            idx[d] = slice(start, start + n)
            out.append(g[tuple(idx)])
        else:
            out.append(None)
        start += n
    return tuple(out)


concat = primitive("concat", _concat, _vjp_concat, vjp_plain=_vjp_concat_plain)


def _stack(*xs, dim=0):
    _check_total("stack", xs, dim)
    be, parts = _device_parts(xs)
    if be is None:
        r = np.stack(xs, axis=dim)
        cur = B.current()      # numbers only (a tuple's items): on the session's backend
        return r if cur is B.NUMPY else cur.asarray(r)
    _same_but(parts)
    return be.xp.stack(parts, axis=dim)


def _vjp_stack(g, ans, saved, tracked, *xs, dim=0):
    nd = len(shape_of(ans))
    d = dim % nd
    return tuple(index(g, idx=tuple(i if ax == d else slice(None) for ax in range(nd))) if need else None
                 for i, need in enumerate(tracked))


stack = primitive("stack", _stack, _vjp_stack)


# ---- indexing -------------------------------------------------------------------------------
# The language's indexing rule: each index makes its own axis, in order (a number drops it); so
# `a[1, :, [1, 0]]` of a 2x3x4 `a` is 3x2, and several index vectors pick every combination.
# `orthogonal` turns the per-axis parts into the one NumPy index that means exactly that; reads,
# writes and both VJPs use the index it returns, so NumPy's rule for mixed advanced indices
# (which moves the vector's axis to the front) is never in play.
def orthogonal(parts, shape) -> tuple:
    """The NumPy index for per-axis `parts` (ints, slices, integer vectors) of an array of
    `shape`. With no vector this is plain basic indexing; with one vector and no number NumPy
    keeps the vector's axis in place; otherwise every part that keeps an axis becomes a vector
    of its own grid axis (np.ix_), so that all of them broadcast into the grid in order and the
    numbers, adjacent to them or not, only drop their axes."""
    vectors = numbers = 0
    for p in parts:
        if type(p) is np.ndarray:
            vectors += 1
        elif type(p) is not slice:
            numbers += 1
    if vectors == 0 or (vectors == 1 and numbers == 0):
        return tuple(parts)
    kept = [i for i, p in enumerate(parts) if type(p) is np.ndarray or type(p) is slice]
    out = list(parts)
    m = len(kept)
    for j, i in enumerate(kept):
        p = parts[i]
        vec = np.arange(shape[i])[p] if type(p) is slice else p
        out[i] = vec.reshape([1] * j + [-1] + [1] * (m - j - 1))
    return tuple(out)


def _index(x, idx):
    r = x[idx]
    t = type(r)
    if t is np.ndarray:
        return r.copy() if r.base is not None else r
    return float(r) if t is np.float64 else python_scalar(r)


def _basic(idx) -> bool:
    """Only integers and slices: such an index names each element at most once."""
    parts = idx if type(idx) is tuple else (idx,)
    for i in parts:
        t = type(i)
        if t is not int and t is not slice and not isinstance(i, np.integer):
            return False
    return True


def _may_repeat(idx) -> bool:
    """Whether `idx` may name an element twice: only an integer index array with a repeated
    entry can (a grid point differs from another in some axis along which one of the arrays
    varies, so unique arrays name unique elements; masks and slices never repeat)."""
    if _basic(idx):
        return False
    for p in (idx if type(idx) is tuple else (idx,)):
        if type(p) is np.ndarray and p.dtype != np.bool_ and p.size > 1 and np.unique(p).size < p.size:
            return True
    return False


def last_writes(idx, shape):
    """For an index that names some element twice: (pos, keep), where `pos` is the flat position
    written by each point of the index grid and `keep` marks the writes that stay: the last one
    to each position, in row-major order of the grid. The one rule for the forward of `setitem`
    and its VJP. None when no element is named twice."""
    if not _may_repeat(idx):
        return None
    pos = np.arange(math.prod(shape)).reshape(shape)[idx]
    flat = np.ravel(pos)
    _, first_from_end = np.unique(flat[::-1], return_index=True)
    if first_from_end.size == flat.size:
        return None
    keep = np.zeros(flat.size, dtype=bool)
    keep[flat.size - 1 - first_from_end] = True
    return pos, keep.reshape(np.shape(pos))


def _scatter_add(g, idx, shape):
    out = np.zeros(shape, dtype=g.dtype if type(g) is np.ndarray else FLOAT["dtype"])
    if _basic(idx):
        out[idx] = g              # no element twice: a plain store (np.add.at is far slower)
    else:
        np.add.at(out, idx, g)
    return out


index = primitive("index", _index,
                  lambda g, ans, saved, tracked, x, idx: (scatter_add(g, idx=idx, shape=shape_of(x)),), arity=1)
scatter_add = primitive("scatter_add", _scatter_add,
                        lambda g, ans, saved, tracked, gg, idx, shape: (index(g, idx=idx),))


def _setitem(x, v, idx):
    x = bools_as_floats(x)
    out = np.array(x, dtype=np.result_type(x, bools_as_floats(v)), copy=True)
    repeats = last_writes(idx, out.shape)
    if repeats is None:
        out[idx] = v
        return out
    # an element named twice keeps the last write (row-major order of the index grid); NumPy
    # does not promise an order, so the writes that stay are stored once each
    pos, keep = repeats
    grid = np.empty(np.shape(pos), dtype=out.dtype)
    grid[...] = v                 # the broadcast (and its errors) of a plain store
    np.put(out, pos[keep], grid[keep])      # flat positions in row-major order, as `pos` counts
    return out


def _vjp_setitem(g, ans, saved, tracked, x, v, idx):
    gv = None
    if tracked[1]:
        gv = index(g, idx=idx)
        repeats = last_writes(idx, shape_of(x))
        if repeats is not None:       # a write that a later one overwrote has no effect: gradient 0
            gv = zmul(gv, repeats[1])
        vshape, extra = shape_of(v), len(shape_of(v)) - len(shape_of(gv))
        if extra > 0:                 # a store drops a value's leading axes of length 1 (NumPy's rule)
            gv = reshape(unbroadcast(gv, vshape[extra:]), shape=vshape)
        else:
            gv = unbroadcast(gv, vshape)
    return (setitem(g, 0.0, idx=idx) if tracked[0] else None, gv)


setitem = primitive("setitem", _setitem, _vjp_setitem)
